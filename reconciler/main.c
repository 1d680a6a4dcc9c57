/*
 * voucher-reconciler: compares PostgreSQL (the truth) with Redis (the gate)
 * for every active voucher. --once runs one pass, prints a table and exits
 * non-zero when they disagree; without it, a pass every interval.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rc_pass.h"
#include "vc_admin.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_metrics.h"

typedef struct {
    const char *pg_dsn;
    const char *redis_url;
    const char *kafka_brokers;
    const char *writer_group;
    const char *log_level;
    const char *admin_addr;
    int64_t interval_ms;
    int64_t timeout_ms;
    int once;
} rc_settings_t;

static const vc_cfg_param_t params[] = {
    {"pg-dsn", "VOUCHER_PG_DSN", VC_CFG_STRING, "host=127.0.0.1 port=15400 dbname=voucher user=voucher",
     offsetof(rc_settings_t, pg_dsn), 0, 0, "PostgreSQL connection string (libpq conninfo)"},
    {"redis-url", "VOUCHER_REDIS_URL", VC_CFG_STRING, "redis://127.0.0.1:15401/0",
     offsetof(rc_settings_t, redis_url), 0, 0, "Redis to compare with"},
    {"kafka-brokers", "VOUCHER_KAFKA_BROKERS", VC_CFG_STRING, "127.0.0.1:15402",
     offsetof(rc_settings_t, kafka_brokers), 0, 0, "Kafka bootstrap servers (to read the writer's lag)"},
    {"writer-group", "VOUCHER_WRITER_GROUP", VC_CFG_STRING, "voucher-writer",
     offsetof(rc_settings_t, writer_group), 0, 0, "the writer's consumer group"},
    {"log-level", "VOUCHER_LOG_LEVEL", VC_CFG_STRING, "info", offsetof(rc_settings_t, log_level), 0,
     0, "debug, info, warn or error"},
    {"admin-addr", "VOUCHER_ADMIN_ADDR", VC_CFG_STRING, "127.0.0.1:15412",
     offsetof(rc_settings_t, admin_addr), 0, 0,
     "where /healthz, /readyz and /metrics are served (empty: nowhere)"},
    {"interval", "VOUCHER_RECONCILE_INTERVAL", VC_CFG_MS, "5s", offsetof(rc_settings_t, interval_ms),
     100, 24LL * 3600 * 1000, "time between passes"},
    {"timeout", "VOUCHER_RECONCILE_TIMEOUT", VC_CFG_MS, "5s", offsetof(rc_settings_t, timeout_ms), 10,
     600000, "timeout of each call to Redis and Kafka"},
    {"once", NULL, VC_CFG_BOOL, "false", offsetof(rc_settings_t, once), 0, 1,
     "run one pass, print a table, exit 1 if any voucher is not consistent"},
    VC_CFG_END,
};

static volatile sig_atomic_t stopping;

/* Whether the last pass could read everything; read by the admin thread. */
static _Atomic int last_pass_ok;

static int ready_cb(void *arg, char *detail, size_t cap)
{
    (void)arg;
    if (!last_pass_ok)
        snprintf(detail, cap, "the last pass could not read PostgreSQL, Redis or Kafka");
    return last_pass_ok;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv)
{
    rc_settings_t s;
    rc_config_t cfg;
    rc_ctx_t ctx = {0};
    rc_summary_t sum;
    vc_admin_t *admin = NULL;
    vc_metric_t *passes, *failed;
    char err[512];
    int rc;

    rc = vc_config_load(params, &s, "voucher-reconciler",
                        "Usage: voucher-reconciler [--once] [SETTINGS]\n\n"
                        "Compares every active voucher in PostgreSQL with Redis and reports\n"
                        "each as consistent, not loaded, behind (events still in flight) or DRIFTED.",
                        argc, argv, NULL, err, sizeof(err));
    if (rc == VC_CFG_EXIT)
        return 0;
    if (rc != VC_CFG_RUN || vc_log_init("reconciler", s.log_level) != 0) {
        fprintf(stderr, "voucher-reconciler: %s\n",
                rc != VC_CFG_RUN ? err : "invalid VOUCHER_LOG_LEVEL (debug, info, warn or error)");
        return 2;
    }
    cfg = (rc_config_t){s.pg_dsn, s.redis_url, s.kafka_brokers, s.writer_group, "voucher-events",
                        s.timeout_ms};
    ctx.cfg = &cfg;

    if (s.once) {
        rc = rc_pass(&ctx, stdout, &sum, err, sizeof(err));
        rc_ctx_close(&ctx);
        if (rc != 0) {
            fprintf(stderr, "voucher-reconciler: %s\n", err);
            return 2;
        }
        printf("%d vouchers: %d consistent, %d not loaded, %d behind, %d drifted\n", sum.vouchers,
               sum.consistent, sum.not_loaded, sum.behind, sum.drifted);
        return sum.drifted || sum.behind ? 1 : 0;
    }

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (s.admin_addr && *s.admin_addr &&
        vc_admin_start(s.admin_addr, ready_cb, NULL, &admin, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-reconciler: --admin-addr: %s\n", err);
        return 2;
    }
    passes = vc_counter("voucher_reconciler_passes_total", "Reconciliation passes", "result=\"ok\"");
    failed = vc_counter("voucher_reconciler_passes_total", "Reconciliation passes",
                        "result=\"failed\"");
    vc_info("reconciler started: a pass every %lld ms, admin on %s", (long long)s.interval_ms,
            s.admin_addr && *s.admin_addr ? s.admin_addr : "(off)");
    while (!stopping) {
        if (rc_pass(&ctx, NULL, &sum, err, sizeof(err)) != 0) {
            vc_warn("pass failed, will try again: %s", err);
            vc_metric_add(failed, 1);
            last_pass_ok = 0;
            rc_ctx_close(&ctx);
        } else {
            vc_metric_add(passes, 1);
            last_pass_ok = 1;
            vc_debug("pass: %d vouchers, %d consistent, %d behind, %d drifted", sum.vouchers,
                     sum.consistent, sum.behind, sum.drifted);
        }
        for (int64_t waited = 0; waited < s.interval_ms && !stopping; waited += 100) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    rc_ctx_close(&ctx);
    vc_admin_stop(admin);
    vc_info("reconciler stopped");
    return 0;
}
