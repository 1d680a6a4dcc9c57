#include "gw_worker.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gw_metrics.h"
#include "vc_error.h"
#include "vc_log.h"

static void ignore_close_cb(uv_handle_t *h)
{
    (void)h;
}

/* Everything but the HTTP server; called once no request is left. */
static void close_adapters(gw_worker_t *w)
{
    if (w->app.redis) {
        gw_redis_close(w->app.redis, NULL, NULL);
        w->app.redis = NULL;
    }
    if (w->app.rules) {
        gw_rules_free(w->app.rules);
        w->app.rules = NULL;
    }
    /* Every request is answered, and a request is answered after its delivery report. */
    VC_ASSERT(w->inbox.in_flight == 0);
    gw_kafka_inbox_close(&w->inbox);
    uv_close((uv_handle_t *)&w->stop_async, ignore_close_cb);
}

static void http_done_cb(gw_http_server_t *s)
{
    gw_worker_t *w = (gw_worker_t *)((char *)s - offsetof(gw_worker_t, http));
    vc_debug("worker %d: all requests answered", w->id);
    close_adapters(w);
}

static void stop_cb(uv_async_t *a)
{
    gw_worker_t *w = a->data;
    gw_http_shutdown(&w->http, http_done_cb);
}

static void worker_main(void *arg)
{
    gw_worker_t *w = arg;
    gw_shared_t *sh = w->shared;
    const gw_config_t *cfg = sh->cfg;
    int rc;

    w->app.cfg = cfg;
    w->app.loop = &w->loop;
    w->app.kafka = sh->kafka;
    w->app.inbox = &w->inbox;
    w->app.pg = sh->pg;
    w->app.draining = &sh->draining;
    if ((rc = gw_kafka_inbox_init(&w->inbox, &w->loop)) != 0) {
        snprintf(w->err, sizeof(w->err), "kafka inbox: %s", vc_strerror(rc));
        w->start_rc = rc;
        uv_sem_post(&w->ready);
        uv_loop_close(&w->loop);
        return;
    }
    uv_async_init(&w->loop, &w->stop_async, stop_cb);
    w->stop_async.data = w;
    if (!(w->app.rules =
              gw_rules_new(&w->loop, sh->pg, cfg->rules_ttl_ms, cfg->rules_miss_ttl_ms,
                           (int)cfg->rules_max_loads)) ||
        gw_redis_new(&w->app.redis, &w->loop, &sh->redis, cfg->redis_timeout_ms, gw_app_scripts,
                     GW_SCRIPT_COUNT, &sh->redis_up[w->id], cfg->redis_fence) != 0) {
        snprintf(w->err, sizeof(w->err), "out of memory");
        rc = VC_ERR_NOMEM;
    } else {
        gw_http_limits_t limits = {
            .idle_timeout_ms = cfg->idle_timeout_ms,
            .write_timeout_ms = cfg->write_timeout_ms,
            .connections = &sh->connections,
            .max_connections = (long)cfg->max_connections,
            .per_ip = sh->per_ip,
            .open_gauge = gw_metrics_connections_gauge(),
            /* At the cap the connection idle longest makes room; none idle: 503. */
            .evict = VC_HTTP_EVICT_IDLE,
        };
        /*
         * The admin address keeps the probes' limits (vc_admin.c): a few
         * connections, the idlest evicted for a new one, one listener.
         */
        gw_http_limits_t admin_limits = {
            .idle_timeout_ms = 10000,
            .read_timeout_ms = 5000,
            .write_timeout_ms = cfg->write_timeout_ms,
            .connections = &w->admin_connections,
            .max_connections = 64,
            .evict = 1,
            .exclusive = 1,
        };
        w->app.ready = sh->ready;
        w->app.ready_arg = sh;
        if (w->admin)
            rc = gw_http_listen(&w->http, &w->loop, sh->admin_host, sh->admin_port,
                                &admin_limits, gw_app_handle_admin, &w->app, w->err,
                                sizeof(w->err));
        else
            rc = gw_http_listen(&w->http, &w->loop, sh->http_host, sh->http_port, &limits,
                                gw_app_handle, &w->app, w->err, sizeof(w->err));
        w->http.observe = gw_app_observe;
    }
    w->start_rc = rc;
    uv_sem_post(&w->ready);
    if (rc != 0)
        close_adapters(w);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    if ((rc = uv_loop_close(&w->loop)) != 0)
        vc_error("worker %d: loop closed with handles open: %s", w->id, uv_strerror(rc));
}

int gw_worker_start(gw_worker_t *w, int id, int admin, gw_shared_t *shared, char *err,
                    size_t errlen)
{
    int rc;

    memset(w, 0, sizeof(*w));
    w->id = id;
    w->admin = admin;
    atomic_init(&w->admin_connections, 0);
    w->shared = shared;
    if ((rc = uv_loop_init(&w->loop)) != 0 || (rc = uv_sem_init(&w->ready, 0)) != 0) {
        snprintf(err, errlen, "worker %d: %s", id, uv_strerror(rc));
        return VC_ERR_NOMEM;
    }
    if ((rc = uv_thread_create(&w->thread, worker_main, w)) != 0) {
        snprintf(err, errlen, "worker %d: thread: %s", id, uv_strerror(rc));
        uv_sem_destroy(&w->ready);
        uv_loop_close(&w->loop);
        return VC_ERR_NOMEM;
    }
    uv_sem_wait(&w->ready);
    uv_sem_destroy(&w->ready);
    if (w->start_rc != 0) {
        snprintf(err, errlen, "worker %d: %s", id, w->err);
        return w->start_rc;
    }
    return 0;
}

void gw_worker_stop(gw_worker_t *w)
{
    uv_async_send(&w->stop_async);
}

void gw_worker_join(gw_worker_t *w)
{
    uv_thread_join(&w->thread);
}
