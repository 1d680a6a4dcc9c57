/*
 * voucher-reconciler: expires unpaid holds, compares PostgreSQL (the truth)
 * with Redis (the gate) for every active voucher, and repairs drift without
 * ever overselling. Several may run: one acts (a PostgreSQL advisory lock),
 * the others wait to take over. --once runs one pass and prints a table.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rc_fence.h"
#include "rc_outbox.h"
#include "rc_pass.h"
#include "rc_plan_json.h"
#include "vc_admin.h"
#include "vc_config.h"
#include "rc_kafka.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_model.h"
#include "vc_pg.h"
#include "vc_retention.h"
#include "vc_shutdown.h"
#include "vc_signal.h"

typedef struct {
    const char *pg_dsn;
    const char *redis_url;
    const char *kafka_brokers;
    const char *writer_group;
    const char *log_level;
    const char *admin_addr;
    const char *kafka_conf; /* VOUCHER_KAFKA_CONF as given; main() parses it with --kafka */
    int64_t interval_ms;
    int64_t timeout_ms;
    int64_t grace_ms;
    int64_t restore_delay_ms;
    int64_t redis_retention_ms;
    int64_t full_every_ms;
    int64_t audit_every_ms;
    int64_t orders_scan_above;
    int64_t slow_repair_ms;
    int64_t shutdown_timeout_ms;
    int64_t batch;
    int64_t expiry_slice;
    int64_t redis_wait_replicas;
    int64_t redis_wait_timeout_ms;
    int64_t outbox_poll_ms;
    int64_t outbox_batch;
    int64_t outbox_retention_ms;
    int once;
    int report_only;
    int redis_fence;
} rc_settings_t;

static const vc_cfg_param_t params[] = {
    {"pg-dsn", "VOUCHER_RECONCILER_PG_DSN,VOUCHER_PG_DSN", VC_CFG_STRING,
     "host=127.0.0.1 port=15400 dbname=voucher user=voucher_reconciler",
     offsetof(rc_settings_t, pg_dsn), 0, 0,
     "PostgreSQL connection string (libpq conninfo), as the role voucher_reconciler"},
    {"redis-url", "VOUCHER_REDIS_URL", VC_CFG_STRING, "redis://127.0.0.1:15401/0",
     offsetof(rc_settings_t, redis_url), 0, 0,
     "Redis, the gate the gateway uses: redis://[user:password@]host:port/db, or "
     "redis+cluster://[user:password@]host:port,host:port,... (seed nodes) for a Redis Cluster"},
    {"kafka-brokers", "VOUCHER_KAFKA_BROKERS", VC_CFG_STRING, "127.0.0.1:15402",
     offsetof(rc_settings_t, kafka_brokers), 0, 0,
     "Kafka bootstrap servers (comma-separated host:port; on a cluster name two or more "
     "brokers)"},
    {"writer-group", "VOUCHER_WRITER_GROUP", VC_CFG_STRING, "voucher-writer",
     offsetof(rc_settings_t, writer_group), 0, 0,
     "the writer's consumer group (events after its committed offsets are in flight)"},
    {"log-level", "VOUCHER_LOG_LEVEL", VC_CFG_STRING, "info", offsetof(rc_settings_t, log_level), 0,
     0, "debug, info, warn or error"},
    {"admin-addr", "VOUCHER_ADMIN_ADDR", VC_CFG_STRING_OFF, "127.0.0.1:15412",
     offsetof(rc_settings_t, admin_addr), 0, 0,
     "where /healthz, /readyz and /metrics are served (empty: nowhere)"},
    {"interval", "VOUCHER_RECONCILE_INTERVAL", VC_CFG_MS, "5s", offsetof(rc_settings_t, interval_ms),
     100, 24LL * 3600 * 1000, "time between passes (and between a standby's tries to take over)"},
    {"grace", "VOUCHER_RECONCILE_GRACE", VC_CFG_MS, "30s", offsetof(rc_settings_t, grace_ms), 0,
     24LL * 3600 * 1000,
     "how long a hold or confirmed order unknown downstream, or a begun release, is left alone "
     "before it is released, and how long after heldUntil a hold expires; keep it above the "
     "gateway's Kafka delivery timeout (proto/redis-keys.md)"},
    {"restore-delay", "VOUCHER_RECONCILE_RESTORE_DELAY", VC_CFG_MS, "10s",
     offsetof(rc_settings_t, restore_delay_ms), 0, 24LL * 3600 * 1000,
     "how long a voucher's keys must stay missing from Redis before they are restored; keep it "
     "above the gateway's Kafka delivery timeout, so reservations taken just before the loss "
     "are in Kafka and counted"},
    {VC_REDIS_RETENTION_FLAG, VC_REDIS_RETENTION_ENV, VC_CFG_MS, VC_REDIS_RETENTION_DEFAULT,
     offsetof(rc_settings_t, redis_retention_ms), VC_REDIS_RETENTION_MIN_MS,
     VC_REDIS_RETENTION_MAX_MS,
     VC_REDIS_RETENTION_HELP "; the keys a restore or retake writes get it, as the gateway's do"},
    {"full-every", "VOUCHER_RECONCILE_FULL_EVERY", VC_CFG_MS, "30s",
     offsetof(rc_settings_t, full_every_ms), 0, 24LL * 3600 * 1000,
     "a voucher whose numbers agree is judged by them alone, and read in full (every row and "
     "Redis order) only this often; 0 reads every voucher in full every pass (--once always "
     "does)"},
    {"audit-every", "VOUCHER_RECONCILE_AUDIT_EVERY", VC_CFG_MS, "6h",
     offsetof(rc_settings_t, audit_every_ms), 0, 7 * 24LL * 3600 * 1000,
     "a quiet voucher whose aggregates in Redis and PostgreSQL agree (proto/redis-keys.md, "
     "\"Aggregates\") is read in full only this often, instead of every --full-every; one "
     "whose aggregates disagree is read in full at once; 0 reads it every --full-every"},
    {"orders-scan-above", "VOUCHER_RECONCILE_ORDERS_SCAN_ABOVE", VC_CFG_INT, "10000",
     offsetof(rc_settings_t, orders_scan_above), -1, 1000000000,
     "a voucher whose Redis orders hash holds more orders than this is read in pieces (HSCAN), "
     "so that no single command holds Redis up for the gateways (about 0.5 ms per 1,000 "
     "orders read at once), and one that lost its counter and orders hash with more is "
     "restored in steps; -1 always reads and restores at once (proto/redis-keys.md)"},
    {"slow-repair", "VOUCHER_RECONCILE_SLOW_REPAIR", VC_CFG_MS, "500ms",
     offsetof(rc_settings_t, slow_repair_ms), 0, 600000,
     "warn when a repair script that reads or writes every order of a voucher or campaign "
     "(restore, retake, rebuild, lower) holds Redis this long: every gateway waits for it, and "
     "times out at its VOUCHER_REDIS_TIMEOUT (500ms by default); 0 warns of every one"},
    {"shutdown-timeout", "VOUCHER_SHUTDOWN_TIMEOUT", VC_CFG_MS, "20s",
     offsetof(rc_settings_t, shutdown_timeout_ms), 100, 3600000,
     "after SIGTERM, how long finishing the pass may take before the reconciler exits anyway"},
    {"timeout", "VOUCHER_RECONCILE_TIMEOUT", VC_CFG_MS, "5s", offsetof(rc_settings_t, timeout_ms), 10,
     600000, "timeout of each call to Redis and Kafka"},
    {"batch", "VOUCHER_RECONCILE_BATCH", VC_CFG_INT, "1000", offsetof(rc_settings_t, batch), 1,
     100000, "most holds expired (and releases finished) per voucher per pass"},
    {"expiry-slice", "VOUCHER_RECONCILE_EXPIRY_SLICE", VC_CFG_INT, "500",
     offsetof(rc_settings_t, expiry_slice), 0, 100000,
     "a voucher with holds due and no release under way is not read in full: the oldest due "
     "holds (at most --batch) are read with a targeted read and released in slices of this "
     "many, oldest heldUntil first, each slice published and given back before the next; 0 "
     "reads such a voucher in full every pass, as before (proto/redis-keys.md)"},
    {"redis-wait-replicas", "VOUCHER_REDIS_WAIT_REPLICAS", VC_CFG_INT, "0",
     offsetof(rc_settings_t, redis_wait_replicas), 0, 5,
     "Redis replicas the writes of each repair script must reach (WAIT) before the reconciler "
     "acts on its answer (publishes a release, counts a repair); too few in time: the pass "
     "stops there and the next one looks again. Set it as on the gateways, wherever Redis has "
     "replicas (proto/redis-keys.md, \"Redis Cluster\"); 0 = no WAIT"},
    {"redis-wait-timeout", "VOUCHER_REDIS_WAIT_TIMEOUT", VC_CFG_MS, "100ms",
     offsetof(rc_settings_t, redis_wait_timeout_ms), 1, 60000,
     "how long that WAIT waits for the replicas"},
    {"outbox-poll", "VOUCHER_OUTBOX_POLL", VC_CFG_MS, "1s", offsetof(rc_settings_t, outbox_poll_ms),
     10, 3600000,
     "the acting reconciler relays the outbox (direct vouchers' events, proto/direct-mode.md) "
     "on every NOTIFY of a write, and at least this often"},
    {"outbox-batch", "VOUCHER_OUTBOX_BATCH", VC_CFG_INT, "500",
     offsetof(rc_settings_t, outbox_batch), 1, 100000,
     "outbox rows produced and marked sent per round (and sent rows deleted per wake)"},
    {"outbox-retention", "VOUCHER_OUTBOX_RETENTION", VC_CFG_MS, "1h",
     offsetof(rc_settings_t, outbox_retention_ms), 0, 30LL * 24 * 3600 * 1000,
     "a sent outbox row is deleted this long after it was sent (0: kept); the event stays in "
     "Kafka and the row it records in voucher_redemption"},
    {"once", NULL, VC_CFG_BOOL, "false", offsetof(rc_settings_t, once), 0, 1,
     "run one pass (repairing if no other reconciler acts), print a table, and exit: 0 when "
     "every voucher is consistent, parked (dead letters wait for an operator) or not loaded, 3 "
     "when they differ only by events in flight, 1 when drift remains, 2 on errors"},
    {"report-only", NULL, VC_CFG_BOOL, "false", offsetof(rc_settings_t, report_only), 0, 1,
     "judge and report, repair nothing"},
    {"redis-fence", "VOUCHER_REDIS_FENCE", VC_CFG_BOOL, "false",
     offsetof(rc_settings_t, redis_fence), 0, 1,
     "keep the restart fence: verify each new Redis process (full passes once the restore delay "
     "has passed since it appeared) and then write its run_id to " VC_KEY_FENCE ", which the "
     "gateways with the same setting wait for; one node only (proto/redis-keys.md)"},
    {"kafka", "VOUCHER_KAFKA_CONF", VC_CFG_STRING, "", offsetof(rc_settings_t, kafka_conf), 0, 0,
     "librdkafka settings for every Kafka client of the reconciler (SASL, TLS...), "
     "\"key=value,key=value\"; the flag may be repeated (one key=value each, added after the "
     "variable's)"},
    VC_CFG_END,
};

/* Set by the signal handler, read by the loop: lock-free, so both are defined. */
static atomic_int stopping;
static _Atomic int last_pass_ok;

/* The first SIGTERM or SIGINT (vc_signal.h): the pass under way ends, then the loop. */
static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stopping, 1);
}

static int ready_cb(void *arg, char *detail, size_t cap)
{
    (void)arg;
    if (!last_pass_ok)
        snprintf(detail, cap, "cannot reach PostgreSQL, Redis or Kafka");
    return last_pass_ok;
}

static void sleep_interval(int64_t ms)
{
    for (int64_t waited = 0; waited < ms && !atomic_load(&stopping); waited += 100) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int run_once(rc_ctx_t *ctx, const rc_fence_t *fence, const rc_settings_t *s,
                    const rc_outbox_config_t *outbox)
{
    rc_summary_t sum;
    char err[512];
    int rc;

    if ((rc = rc_ctx_connect(ctx, err, sizeof(err))) == 0) {
        if (!s->report_only && !rc_ctx_lead(ctx))
            printf("another reconciler holds the lock and acts: reporting only\n");
        rc = rc_pass(ctx, !s->report_only, stdout, &sum, err, sizeof(err));
    }
    if (rc == 0 && sum.awaiting_restore && ctx->leader && !s->report_only) {
        printf("%d vouchers lost from Redis: waiting %lld ms before restoring them\n",
               sum.awaiting_restore, (long long)s->restore_delay_ms);
        fflush(stdout);
        sleep_interval(s->restore_delay_ms);
        rc = rc_pass(ctx, 1, stdout, &sum, err, sizeof(err));
    }
    if (rc == 0 && (sum.expired || sum.direct_expired || sum.stranded || sum.restored ||
                    sum.retaken || sum.lowered || sum.finished || sum.reconfirmed ||
                    sum.discarded || sum.confirms_published)) {
        printf("repairs: %lld holds expired, %lld direct vouchers' holds expired, "
               "%lld stranded holds released, %lld releases "
               "finished, %lld vouchers restored, %lld uses taken again, %lld counters lowered, "
               "%lld holds confirmed again, %lld discarded letters' uses released, "
               "%lld lost confirms published\n"
               "after the repairs:\n",
               (long long)sum.expired, (long long)sum.direct_expired, (long long)sum.stranded,
               (long long)sum.finished, (long long)sum.restored, (long long)sum.retaken,
               (long long)sum.lowered, (long long)sum.reconfirmed, (long long)sum.discarded,
               (long long)sum.confirms_published);
        rc = rc_pass(ctx, 0, stdout, &sum, err, sizeof(err));
    }
    /* The outbox too, when this one acts: what the pass's expiry wrote, and any backlog. */
    if (rc == 0 && ctx->leader && !s->report_only) {
        rc_outbox_result_t ob;
        if ((rc = rc_outbox_relay(ctx, outbox, &ob, err, sizeof(err))) == 0)
            printf("outbox: %lld events published, %lld not acknowledged, %lld unsent rows "
                   "left (the oldest %lld ms old)\n",
                   (long long)ob.produced, (long long)ob.failed, (long long)ob.unsent,
                   (long long)ob.oldest_ms);
    }
    /* Reported, not acted on: verifying needs the daemon's memory of when the process appeared. */
    if (rc == 0)
        rc = rc_fence_report(ctx, fence, stdout, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "voucher-reconciler: %s\n", err);
        return 2;
    }
    printf("%d vouchers: %d consistent, %d not loaded, %d behind, %d undersold, %d drifted, "
           "%d used without rows, %d parked (%lld dead letters wait for an operator); "
           "%lld events after the writer's committed offsets (in flight, or applied and not "
           "yet committed)\n",
           sum.vouchers, sum.verdicts[RC_CONSISTENT], sum.verdicts[RC_NOT_LOADED],
           sum.verdicts[RC_BEHIND], sum.verdicts[RC_UNDERSOLD], sum.verdicts[RC_DRIFTED],
           sum.verdicts[RC_USED_WITHOUT_ROWS], sum.verdicts[RC_PARKED], (long long)sum.parked,
           (long long)sum.in_flight);
    if (sum.verdicts[RC_DRIFTED] || sum.verdicts[RC_UNDERSOLD])
        return 1;
    /*
     * Parked letters are reported (the column, the verdict, the line above)
     * but do not fail the run: they wait for an operator, not for a repair,
     * and one left on a voucher must not turn every later check red.
     */
    return sum.verdicts[RC_BEHIND] ? 3 : 0;
}

/* The daemon; main() frees the Kafka settings this loads into kafka_extra, on every way out. */
static int run(int argc, char **argv, vc_kafka_settings_t *kafka_extra)
{
    rc_settings_t s;
    rc_config_t cfg;
    rc_ctx_t ctx = {0};
    rc_summary_t sum;
    rc_fence_t fence;
    rc_outbox_config_t outbox_cfg;
    rc_outbox_t outbox = {0};
    vc_admin_t *admin = NULL;
    vc_metric_t *passes, *failed, *leader;
    char err[512];
    int rc, was_leader = 0;
    int failing = 0; /* the last connect or pass failed: the next success is logged */

    /* --kafka may repeat: its pairs are taken out before the table sees argv. */
    if (vc_kafka_settings_load(kafka_extra, getenv(VC_KAFKA_CONF_ENV), &argc, argv, err,
                               sizeof(err)) != 0) {
        fprintf(stderr, "voucher-reconciler: %s\n", err);
        return 2;
    }
    rc = vc_config_load(params, &s, "voucher-reconciler",
                        "Usage: voucher-reconciler [--once] [SETTINGS]\n"
                        "       voucher-reconciler plan [FILE]   (the planner alone, on a JSON\n"
                        "                                         snapshot: plan --help)\n\n"
                        "Expires unpaid holds, compares every active voucher in PostgreSQL with\n"
                        "Redis (allowing for the events the writer has not applied yet), and\n"
                        "repairs drift without ever overselling. One of several replicas acts;\n"
                        "the others wait and take over when it stops.",
                        argc, argv, NULL, err, sizeof(err));
    if (rc == VC_CFG_EXIT)
        return 0;
    if (rc != VC_CFG_RUN || vc_log_init("reconciler", s.log_level) != 0) {
        fprintf(stderr, "voucher-reconciler: %s\n",
                rc != VC_CFG_RUN ? err : "invalid VOUCHER_LOG_LEVEL (debug, info, warn or error)");
        return 2;
    }
    if (rc_kafka_check_settings(kafka_extra, err, sizeof(err)) != 0 ||
        vc_pg_dsn_check(s.pg_dsn, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-reconciler: %s\n", err);
        return 2;
    }
    cfg = (rc_config_t){s.pg_dsn,           s.redis_url,  s.kafka_brokers, s.writer_group,
                        "voucher-events",   s.timeout_ms, s.grace_ms,      (int)s.batch,
                        s.restore_delay_ms, s.once ? 0 : s.full_every_ms, kafka_extra,
                        s.redis_retention_ms, s.orders_scan_above, s.slow_repair_ms,
                        s.redis_wait_replicas, s.redis_wait_timeout_ms, s.audit_every_ms,
                        (int)s.expiry_slice};
    ctx.cfg = &cfg;
    outbox_cfg = (rc_outbox_config_t){s.outbox_poll_ms, (int)s.outbox_batch, s.outbox_retention_ms,
                                      s.timeout_ms};
    outbox.cfg = &outbox_cfg;
    rc_fence_init(&fence, &cfg, s.redis_fence);
    /* --once is a command: a stop signal ends it at once, as any command's. */
    if (vc_signal_install(s.once ? NULL : on_signal) != 0) {
        fprintf(stderr, "voucher-reconciler: cannot install the signal handlers\n");
        return 2;
    }

    if (s.once) {
        rc = run_once(&ctx, &fence, &s, &outbox_cfg);
        rc_ctx_close(&ctx);
        return rc;
    }

    if (vc_shutdown_watch(s.shutdown_timeout_ms) != 0) {
        fprintf(stderr, "voucher-reconciler: cannot start the shutdown watchdog\n");
        return 2;
    }
    if (s.admin_addr && *s.admin_addr &&
        vc_admin_start(s.admin_addr, ready_cb, NULL, &admin, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-reconciler: --admin-addr: %s\n", err);
        return 2;
    }
    passes = vc_counter("voucher_reconciler_passes_total", "Reconciliation passes", "result=\"ok\"");
    failed = vc_counter("voucher_reconciler_passes_total", "Reconciliation passes",
                        "result=\"failed\"");
    leader = vc_gauge("voucher_reconciler_leader", "1 while this replica acts, 0 on standby", NULL);
    vc_info("reconciler started: a pass every %lld ms, grace %lld ms, admin on %s",
            (long long)s.interval_ms, (long long)s.grace_ms,
            s.admin_addr && *s.admin_addr ? s.admin_addr : "(off)");
    while (!atomic_load(&stopping)) {
        if (rc_ctx_connect(&ctx, err, sizeof(err)) != 0) {
            vc_warn("cannot connect, will try again: %s", err);
            last_pass_ok = 0;
            failing = 1;
            rc_ctx_close(&ctx); /* the lock goes with the session: this replica no longer acts */
            vc_metric_set(leader, 0);
            rc_outbox_idle(&ctx, &outbox, s.interval_ms, &stopping);
            continue;
        }
        if (!s.report_only && rc_ctx_lead(&ctx) != was_leader) {
            was_leader = ctx.leader;
            vc_info(ctx.leader ? "acting: this replica holds the lock"
                               : "standby: another replica acts");
        }
        vc_metric_set(leader, ctx.leader);
        if (!s.report_only && !ctx.leader) {
            last_pass_ok = 1; /* a standby is ready: it is connected and waiting */
            rc_outbox_idle(&ctx, &outbox, s.interval_ms, &stopping);
            continue;
        }
        if (rc_fence_pass(&ctx, &fence, !s.report_only, NULL, &sum, err, sizeof(err)) != 0) {
            /* A pass that found it no longer acts (a lost lock, a newer one's token) says so. */
            vc_metric_set(leader, ctx.leader);
            vc_warn("pass failed, will try again: %s", err);
            vc_metric_add(failed, 1);
            last_pass_ok = 0;
            failing = 1;
            if ((ctx.pg && !rc_ctx_pg_ok(&ctx)) || ctx.pg_lost)
                vc_warn("lost the PostgreSQL session (and the lock with it)");
            ctx.pg_lost = 0;
        } else {
            vc_metric_add(passes, 1);
            if (failing) {
                /* Said once, so a log that said "lost" also says "back". */
                vc_info("a pass succeeded again: PostgreSQL, Redis and Kafka are reachable");
                failing = 0;
            }
            vc_metric_set(vc_gauge("voucher_reconciler_vouchers_read_in_full",
                                   "Vouchers of the last pass whose rows and Redis orders were "
                                   "read (the others were judged by their numbers)",
                                   NULL),
                          sum.read_in_full);
            vc_metric_set(vc_gauge("voucher_reconciler_vouchers_read_targeted",
                                   "Vouchers of the last pass busy only with events in flight, "
                                   "judged by the orders those events name and their newest "
                                   "holds, not read in full",
                                   NULL),
                          sum.targeted);
            vc_metric_add(vc_counter("voucher_reconciler_targeted_reads_total",
                                     "Vouchers judged by a targeted read instead of a full one, "
                                     "over all passes",
                                     NULL),
                          sum.targeted);
            last_pass_ok = 1;
            vc_debug("pass: %d vouchers (%d read in full, %d targeted), %d consistent, %d behind, "
                     "%d undersold, %d drifted",
                     sum.vouchers, sum.read_in_full, sum.targeted, sum.verdicts[RC_CONSISTENT],
                     sum.verdicts[RC_BEHIND], sum.verdicts[RC_UNDERSOLD], sum.verdicts[RC_DRIFTED]);
        }
        if (rc_outbox_idle(&ctx, &outbox, s.interval_ms, &stopping)) {
            /* Ended while it waited for the next pass (LISTEN): the pass would not see it. */
            vc_warn("lost the PostgreSQL session (and the lock with it)");
            last_pass_ok = 0;
            failing = 1;
        }
    }
    rc_ctx_close(&ctx); /* closing the session releases the lock for a standby */
    vc_admin_stop(admin);
    vc_info("reconciler stopped");
    return 0;
}

int main(int argc, char **argv)
{
    vc_kafka_settings_t kafka_extra = VC_KAFKA_SETTINGS_INIT;
    int rc;

    /* The planner alone, on a snapshot: no server, no settings (proto/reconciler-plan.md). */
    if (argc > 1 && strcmp(argv[1], "plan") == 0)
        return rc_plan_cli(argc - 1, argv + 1);
    rc = run(argc, argv, &kafka_extra);

    vc_kafka_settings_free(&kafka_extra); /* whichever way run() ended */
    return rc;
}
