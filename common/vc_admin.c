#include "vc_admin.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_http.h"
#include "vc_json.h"
#include "vc_log.h"
#include "vc_metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/*
 * The limits that keep a probe answering whatever clients do (deploy/README.md,
 * "Admin endpoints"). Past VC_ADMIN_MAX_CONNS a new connection closes the one
 * that was idle longest (or, when none is idle, the one quiet longest), so a
 * crowd of idle sockets cannot keep /healthz out. The server answers one
 * request of a connection at a time, so pipelined requests nobody reads wait
 * unparsed and cost at most the read-ahead (vc_http.h).
 */
#define VC_ADMIN_MAX_CONNS 64
#define VC_ADMIN_IDLE_MS 10000  /* no request in progress and nothing to write */
#define VC_ADMIN_READ_MS 5000   /* a request begun must arrive whole within this */
#define VC_ADMIN_WRITE_MS 10000 /* an answer must be taken by the client within this */

struct vc_admin {
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    vc_http_server_t server;
    atomic_long connections;
    vc_admin_ready_cb ready;
    void *ready_arg;
};


/* Answers /readyz: 200 or 503, with the daemon's detail. */
static void respond_ready(vc_admin_ready_cb ready_cb, void *arg, vc_http_request_t *req)
{
    char detail[256] = "", text[1600];
    int ready = ready_cb ? ready_cb(arg, detail, sizeof(detail)) : 1;
    size_t len = 0;
    vc_jgen_t g;

    /* 1,600 bytes hold the detail's 255 even if each were escaped as \u00XX. */
    if (vc_jgen_init(&g) == 0) {
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "status", ready ? "ready" : "not ready");
        vc_jgen_kv_str(&g, "detail", detail);
        vc_jgen_map_close(&g);
        if (vc_jgen_finish(&g, text, sizeof(text), &len) != 0)
            len = 0;
    }
    vc_http_respond(req, ready ? 200 : 503, NULL, text, len);
}

/* Answers /metrics: the process's metrics in Prometheus's text format. */
static void respond_metrics(vc_http_request_t *req)
{
    size_t len = 0;
    char *text = vc_metrics_render(&len);

    vc_http_respond_typed(req, 200, "Content-Type: text/plain; version=0.0.4\r\n", text ? text : "",
                          text ? len : 0);
    free(text);
}

int vc_admin_respond(vc_admin_ready_cb ready, void *arg, vc_http_request_t *req)
{
    static const char ok[] = "{\"status\":\"ok\"}",
                      not_allowed[] = "{\"error\":\"METHOD_NOT_ALLOWED\"}";
    const char *q = strchr(req->path, '?');
    size_t path_len = q ? (size_t)(q - req->path) : req->path_len;

#define PATH_IS(p) (path_len == sizeof(p) - 1 && memcmp(req->path, p, path_len) == 0)
    if (!PATH_IS("/healthz") && !PATH_IS("/readyz") && !PATH_IS("/metrics"))
        return 0;
    if (req->method != VC_HTTP_GET && req->method != VC_HTTP_HEAD)
        vc_http_respond(req, 405, "Allow: GET, HEAD\r\n", not_allowed, sizeof(not_allowed) - 1);
    else if (PATH_IS("/healthz"))
        vc_http_respond(req, 200, NULL, ok, sizeof(ok) - 1);
    else if (PATH_IS("/readyz"))
        respond_ready(ready, arg, req);
    else
        respond_metrics(req);
#undef PATH_IS
    return 1;
}

/* The routes; called on the admin thread for each complete request. */
static void handle_cb(void *ctx, vc_http_request_t *req)
{
    static const char not_found[] = "{\"error\":\"NOT_FOUND\"}",
                      not_allowed[] = "{\"error\":\"METHOD_NOT_ALLOWED\"}";
    vc_admin_t *a = ctx;

    if (vc_admin_respond(a->ready, a->ready_arg, req))
        return;
    if (req->method != VC_HTTP_GET && req->method != VC_HTTP_HEAD)
        vc_http_respond(req, 405, NULL, not_allowed, sizeof(not_allowed) - 1);
    else
        vc_http_respond(req, 404, NULL, not_found, sizeof(not_found) - 1);
}

static void server_done_cb(vc_http_server_t *server)
{
    vc_admin_t *a = (vc_admin_t *)((char *)server - offsetof(vc_admin_t, server));
    uv_close((uv_handle_t *)&a->stop, NULL);
}

static void stop_cb(uv_async_t *async)
{
    vc_admin_t *a = async->data;

    /* A client that does not read its answer must not hold the daemon's exit. */
    vc_http_shutdown(&a->server, server_done_cb);
    vc_http_close_all(&a->server);
}

static void thread_main(void *arg)
{
    vc_admin_t *a = arg;
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

int vc_admin_start(const char *addr, vc_admin_ready_cb ready, void *arg, vc_admin_t **out,
                   char *err, size_t errlen)
{
    char host[128];
    int port, rc;
    vc_admin_t *a;
    vc_http_limits_t limits = {
        .idle_timeout_ms = VC_ADMIN_IDLE_MS,
        .read_timeout_ms = VC_ADMIN_READ_MS,
        .write_timeout_ms = VC_ADMIN_WRITE_MS,
        .max_connections = VC_ADMIN_MAX_CONNS,
        .evict = VC_HTTP_EVICT_QUIET,
        .exclusive = 1,
    };

    if (vc_parse_host_port(addr, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "invalid admin address \"%s\" (expected host:port)", addr);
        return VC_ERR_INVALID;
    }
    if (!(a = calloc(1, sizeof(*a))))
        return VC_ERR_NOMEM;
    a->ready = ready;
    a->ready_arg = arg;
    atomic_init(&a->connections, 0);
    limits.connections = &a->connections;
    uv_loop_init(&a->loop);
    uv_async_init(&a->loop, &a->stop, stop_cb);
    a->stop.data = a;
    if ((rc = vc_http_listen(&a->server, &a->loop, host, port, &limits, handle_cb, a, err,
                             errlen)) != 0) {
        uv_close((uv_handle_t *)&a->stop, NULL);
        goto fail;
    }
    if (uv_thread_create(&a->thread, thread_main, a) != 0) {
        snprintf(err, errlen, "cannot start the admin thread");
        rc = VC_ERR_IO;
        vc_http_shutdown(&a->server, server_done_cb);
        goto fail;
    }
    *out = a;
    return 0;
fail:
    uv_run(&a->loop, UV_RUN_DEFAULT);
    VC_ASSERT(uv_loop_close(&a->loop) == 0);
    free(a);
    return rc;
}

void vc_admin_stop(vc_admin_t *a)
{
    if (!a)
        return;
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    VC_ASSERT(uv_loop_close(&a->loop) == 0);
    free(a);
}
