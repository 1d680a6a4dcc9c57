/*
 * voucher-gateway: the HTTP API of the voucher service. This file only reads
 * the settings, starts the workers and the shared producer, and waits for
 * SIGTERM or SIGINT; everything else is in the gateway library.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "gw_auth.h"
#include "gw_admins.h"
#include "gw_config.h"
#include "gw_guard.h"
#include "gw_login.h"
#include "gw_kafka.h"
#include "gw_metrics.h"
#include "gw_notify.h"
#include "gw_rules.h"
#include "gw_worker.h"
#include "vc_admin.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_log.h"
#include "vc_pg.h"
#include "vc_shutdown.h"
#include "vc_signal.h"
#include "vc_time.h"

#define SUMMARY                                                                                    \
    "voucher-gateway: reserves, confirms and cancels voucher uses over HTTP\n\n"                   \
    "Admin routes (POST /vouchers, GET /vouchers/{code}, /campaigns...) need Authorization:\n"     \
    "Bearer with a token of $VOUCHER_ADMIN_TOKEN (the audit's actor \"admin\") or a named\n"       \
    "one of $VOUCHER_ADMIN_TOKENS_FILE (re-read on SIGHUP); with neither they answer 401.\n"       \
    "The admin routes, /readyz and /metrics are served on the admin address (--admin-addr);\n"     \
    "the HTTP port serves the API and /healthz only."

typedef struct {
    gw_worker_t *workers; /* the API workers, then the admin worker (if any) */
    int nworkers;         /* API workers */
    int nstarted;         /* API workers running */
    int admin_started;    /* the admin worker runs */
    gw_shared_t *shared;
    int64_t shutdown_timeout_ms;
    uv_async_t stop; /* woken by the stop signal; keeps the main loop running until then */
    uv_signal_t hup; /* SIGHUP: read VOUCHER_ADMIN_TOKENS_FILE again */
} app_t;

/*
 * The first SIGTERM or SIGINT (vc_signal.h), in the signal handler: it wakes
 * the main loop, where the shutdown runs. Until the loop's handle exists
 * (start-up), the signal waits in stop_signum and run() sends it itself.
 */
static atomic_int stop_signum;
static uv_async_t *_Atomic stop_async;

static void on_signal(int signum)
{
    uv_async_t *h;

    atomic_store(&stop_signum, signum);
    if ((h = atomic_load(&stop_async)))
        uv_async_send(h);
}

static void stop_cb(uv_async_t *async)
{
    app_t *a = async->data;

    vc_info("%s received: finishing requests in flight (at most %lld ms)",
            strsignal(atomic_load(&stop_signum)), (long long)a->shutdown_timeout_ms);
    atomic_store(&a->shared->draining, 1);
    /* The admin worker last (run()): /readyz says "shutting down" while these drain. */
    for (int i = 0; i < a->nstarted; i++)
        gw_worker_stop(&a->workers[i]);
    atomic_store(&stop_async, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_close((uv_handle_t *)&a->hup, NULL);
}

/*
 * SIGHUP, on the main loop: the named admin tokens are read again and swapped
 * in (gw_admins.h), so that a token is added, rotated or revoked without a
 * restart. A file that cannot be read or parsed leaves the tokens in use.
 */
static void hup_cb(uv_signal_t *h, int signum)
{
    app_t *a = h->data;
    const char *path = a->shared->cfg->admin_tokens_file;
    char err[512];
    size_t n;
    (void)signum;

    if (!path[0]) {
        vc_info("SIGHUP received: no VOUCHER_ADMIN_TOKENS_FILE to read again");
        return;
    }
    if (gw_admins_load(path, &n, err, sizeof(err)) != 0)
        vc_error("SIGHUP: VOUCHER_ADMIN_TOKENS_FILE not reloaded, the admin tokens in use stay: "
                 "%s",
                 err);
    else
        vc_info("SIGHUP: VOUCHER_ADMIN_TOKENS_FILE reloaded: %zu named admins", n);
}

/*
 * /readyz on the admin endpoint (its own thread: everything read here is
 * atomic): every worker's Redis connection up, a Kafka broker up, not
 * draining.
 */
static int ready_cb(void *arg, char *detail, size_t cap)
{
    gw_shared_t *sh = arg;
    const char *why = NULL;

    if (atomic_load(&sh->draining))
        why = "shutting down";
    for (int i = 0; !why && i < sh->nworkers; i++)
        if (!atomic_load(&sh->redis_up[i]))
            why = "redis not connected on every worker";
    if (!why && !gw_kafka_ready(sh->kafka))
        why = "no kafka broker connected";
    if (why)
        snprintf(detail, cap, "%s", why);
    return why == NULL;
}

/* The daemon; main() frees the Kafka settings this loads into kafka_extra, on every way out. */
static int run(int argc, char **argv, vc_kafka_settings_t *kafka_extra)
{
    static gw_config_t cfg;
    static gw_shared_t shared;
    char err[512];
    app_t a = {0};
    gw_notify_t *notify = NULL;
    uv_loop_t *loop = uv_default_loop();
    int rc, started = 0, exit_code = 1;
    int64_t flush_ms;

    if (vc_signal_install(on_signal) != 0) {
        fprintf(stderr, "voucher-gateway: cannot install the signal handlers\n");
        return 1;
    }
    /* --kafka may repeat: its pairs are taken out before the table sees argv. */
    if (vc_kafka_settings_load(kafka_extra, getenv(VC_KAFKA_CONF_ENV), &argc, argv, err,
                               sizeof(err)) != 0) {
        fprintf(stderr, "voucher-gateway: %s\n", err);
        return 2;
    }
    rc = vc_config_load(gw_config_params, &cfg, "voucher-gateway", SUMMARY, argc, argv, NULL, err,
                        sizeof(err));
    if (rc == VC_CFG_EXIT)
        return 0;
    if (rc != VC_CFG_RUN) {
        fprintf(stderr, "voucher-gateway: %s\n", err);
        return 2;
    }
    if (vc_log_init("gateway", cfg.log_level) != 0) {
        fprintf(stderr, "voucher-gateway: unknown log level \"%s\"\n", cfg.log_level);
        return 2;
    }
    if (gw_kafka_check_settings(kafka_extra, err, sizeof(err)) != 0 ||
        vc_pg_dsn_check(cfg.pg_dsn, err, sizeof(err)) != 0 ||
        gw_guard_configure(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-gateway: %s\n", err);
        return 2;
    }
    gw_login_configure((int)cfg.admin_login_tries, cfg.admin_login_window_ms);
    /* A guessable admin or API token is refused before anything starts (gw_auth.h). */
    if (gw_token_list_check(cfg.admin_token, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-gateway: VOUCHER_ADMIN_TOKEN (--admin-token): %s\n", err);
        return 2;
    }
    if (gw_token_list_check(cfg.api_token, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-gateway: VOUCHER_API_TOKEN (--api-token): %s\n", err);
        return 2;
    }
    shared.cfg = &cfg;
    if (cfg.admin_tokens_file[0]) {
        size_t n;

        if (gw_admins_load(cfg.admin_tokens_file, &n, err, sizeof(err)) != 0) {
            fprintf(stderr, "voucher-gateway: VOUCHER_ADMIN_TOKENS_FILE %s\n", err);
            return 2;
        }
        vc_info("VOUCHER_ADMIN_TOKENS_FILE: %zu named admins", n);
    }
    if (vc_parse_host_port(cfg.http_addr, shared.http_host, sizeof(shared.http_host),
                           &shared.http_port) != 0) {
        fprintf(stderr, "voucher-gateway: VOUCHER_HTTP_ADDR \"%s\" is not host:port\n",
                cfg.http_addr);
        return 2;
    }
    if (cfg.admin_addr[0] && vc_parse_host_port(cfg.admin_addr, shared.admin_host,
                                                sizeof(shared.admin_host),
                                                &shared.admin_port) != 0) {
        fprintf(stderr, "voucher-gateway: VOUCHER_GATEWAY_ADMIN_ADDR \"%s\" is not host:port\n",
                cfg.admin_addr);
        return 2;
    }
    shared.ready = ready_cb;
    if (vc_parse_redis_url(cfg.redis_url, &shared.redis, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-gateway: VOUCHER_REDIS_URL %s\n", err);
        return 2;
    }
    if (cfg.redis_fence && shared.redis.cluster) {
        fprintf(stderr, "voucher-gateway: VOUCHER_REDIS_FENCE works with one Redis node, not a "
                        "Redis Cluster (there, keep appendfsync always and "
                        "VOUCHER_REDIS_WAIT_REPLICAS: deploy/README.md, \"Redis\")\n");
        return 2;
    }
    if (gw_http_check_free(shared.http_host, shared.http_port, err, sizeof(err)) != 0) {
        vc_error("%s", err);
        return 1;
    }
    /* The same watchdog as the writer's and the reconciler's: it holds nothing of run()'s. */
    if (vc_shutdown_watch(cfg.shutdown_timeout_ms) != 0) {
        vc_error("cannot start the shutdown watchdog");
        return 1;
    }
    a.nworkers = cfg.threads > 0 ? (int)cfg.threads : (int)uv_available_parallelism();
    a.shared = &shared;
    a.shutdown_timeout_ms = cfg.shutdown_timeout_ms;
    shared.nworkers = a.nworkers;
    if (!(a.workers = calloc((size_t)a.nworkers + 1, sizeof(*a.workers))) ||
        !(shared.redis_up = calloc((size_t)a.nworkers + 1, sizeof(*shared.redis_up))))
        return 1;
    gw_metrics_init();
    if (!(shared.kafka = gw_kafka_new(cfg.kafka_brokers, cfg.kafka_timeout_ms, kafka_extra, err,
                                      sizeof(err)))) {
        vc_error("%s", err);
        goto out;
    }
    if (gw_kafka_warm(shared.kafka, cfg.kafka_topic, 3000, err, sizeof(err)) != 0)
        vc_warn("%s: the first events will wait for it", err);
    if (!(shared.pg = gw_pg_pool_new(cfg.pg_dsn, (int)cfg.pg_pool_size))) {
        vc_error("out of memory");
        goto out;
    }
    if (cfg.max_per_ip > 0 &&
        !(shared.per_ip = gw_http_ip_table_new((long)cfg.max_per_ip, (long)cfg.max_connections))) {
        vc_error("out of memory");
        goto out;
    }
    /*
     * The admin worker (gw_worker.h) first, on the admin address: once the API
     * port answers, the admin routes do too.
     */
    if (cfg.admin_addr[0]) {
        if (gw_worker_start(&a.workers[a.nworkers], a.nworkers, 1, &shared, err, sizeof(err)) !=
            0) {
            vc_error("--admin-addr: %s", err);
            gw_worker_join(&a.workers[a.nworkers]);
            goto out;
        }
        a.admin_started = 1;
    }
    for (; started < a.nworkers; started++) {
        if (gw_worker_start(&a.workers[started], started, 0, &shared, err, sizeof(err)) != 0) {
            vc_error("%s", err);
            gw_worker_join(&a.workers[started]);
            goto out;
        }
        a.nstarted = started + 1;
    }
    /* Rule changes made through other gateways (gw_notify.h); else the rules ttl bounds them. */
    if (!(notify = gw_notify_start(cfg.redis_url, err, sizeof(err))))
        vc_warn("%s", err);
    uv_async_init(loop, &a.stop, stop_cb);
    a.stop.data = &a;
    uv_signal_init(loop, &a.hup);
    a.hup.data = &a;
    uv_signal_start(&a.hup, hup_cb, SIGHUP);
    atomic_store(&stop_async, &a.stop);
    if (atomic_load(&stop_signum))
        uv_async_send(&a.stop); /* a stop signal came while the workers started */
    vc_info("listening on %s with %d workers, admin on %s (redis %s, kafka %s, topic %s)",
            cfg.http_addr, a.nworkers, cfg.admin_addr[0] ? cfg.admin_addr : "(off)", vc_redis_url_redact(cfg.redis_url, err, sizeof(err)), cfg.kafka_brokers,
            cfg.kafka_topic);
    uv_run(loop, UV_RUN_DEFAULT);
    exit_code = 0;
out:
    /* Reached with workers running only when one failed to start: stop the others. */
    if (exit_code != 0)
        for (int i = 0; i < a.nstarted; i++)
            gw_worker_stop(&a.workers[i]);
    for (int i = 0; i < a.nstarted; i++)
        gw_worker_join(&a.workers[i]);
    /* The admin worker last: /readyz said "shutting down" until here. */
    if (a.admin_started) {
        gw_worker_stop(&a.workers[a.nworkers]);
        gw_worker_join(&a.workers[a.nworkers]);
    }
    gw_notify_stop(notify);
    /* What is left of the shutdown time goes to the producer's flush. */
    flush_ms = vc_shutdown_deadline_ms() ? vc_shutdown_deadline_ms() - vc_time_mono_ms() - 100
                                         : cfg.shutdown_timeout_ms;
    if (shared.kafka && gw_kafka_close(shared.kafka, flush_ms > 0 ? flush_ms : 0) != 0)
        vc_warn("some events were not delivered before exit");
    gw_pg_pool_free(shared.pg);
    gw_http_ip_table_free(shared.per_ip);
    gw_admins_unload();
    free(a.workers);
    free(shared.redis_up);
    uv_loop_close(loop);
    if (exit_code == 0)
        vc_info("stopped");
    return exit_code;
}

int main(int argc, char **argv)
{
    vc_kafka_settings_t kafka_extra = VC_KAFKA_SETTINGS_INIT;
    int rc = run(argc, argv, &kafka_extra);

    vc_kafka_settings_free(&kafka_extra); /* whichever way run() ended */
    return rc;
}
