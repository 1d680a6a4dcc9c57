#include "vc_admin.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_metrics.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define URL_MAX 256
#define MAX_CONNS 64

struct vc_admin {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    uv_thread_t thread;
    http_parser_settings settings;
    vc_admin_ready_cb ready;
    void *ready_arg;
    int conns;
};

typedef struct {
    uv_tcp_t tcp;
    vc_admin_t *admin;
    http_parser parser;
    char url[URL_MAX];
    size_t url_len;
    int closing;
} admin_conn_t;

typedef struct {
    uv_write_t req;
    char *buf;
} admin_write_t;

static void conn_closed_cb(uv_handle_t *h)
{
    admin_conn_t *c = h->data;
    c->admin->conns--;
    free(c);
}

static void conn_close(admin_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
}

static void write_cb(uv_write_t *req, int status)
{
    admin_write_t *w = (admin_write_t *)req;
    (void)status;
    free(w->buf);
    free(w);
}

/* Sends one response; takes ownership of body (malloc'd) or copies a literal. */
static void respond(admin_conn_t *c, int status, const char *reason, const char *ctype,
                    char *body, size_t body_len, int keep_alive)
{
    admin_write_t *w = malloc(sizeof(*w));
    int hlen;
    char head[256];
    uv_buf_t buf;

    hlen = snprintf(head, sizeof(head),
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                    reason, ctype, body_len, keep_alive ? "" : "Connection: close\r\n");
    if (!w || !(w->buf = malloc((size_t)hlen + body_len))) {
        free(w);
        free(body);
        conn_close(c);
        return;
    }
    memcpy(w->buf, head, (size_t)hlen);
    memcpy(w->buf + hlen, body, body_len);
    free(body);
    buf = uv_buf_init(w->buf, (unsigned)((size_t)hlen + body_len));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) != 0) {
        free(w->buf);
        free(w);
        conn_close(c);
        return;
    }
    if (!keep_alive)
        conn_close(c);
}

static char *dup_text(const char *s, size_t *len)
{
    char *d = strdup(s);
    *len = d ? strlen(d) : 0;
    return d;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    admin_conn_t *c = p->data;
    if (c->url_len + len >= URL_MAX)
        return 1;
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_message_begin(http_parser *p)
{
    admin_conn_t *c = p->data;
    c->url_len = 0;
    c->url[0] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    admin_conn_t *c = p->data;
    int keep = http_should_keep_alive(p);
    char *q = strchr(c->url, '?'), *body;
    size_t len;

    if (q)
        *q = '\0';
    if (p->method != HTTP_GET && p->method != HTTP_HEAD) {
        body = dup_text("{\"error\":\"METHOD_NOT_ALLOWED\"}", &len);
        respond(c, 405, "Method Not Allowed", "application/json", body, len, keep);
    } else if (strcmp(c->url, "/healthz") == 0) {
        body = dup_text("{\"status\":\"ok\"}", &len);
        respond(c, 200, "OK", "application/json", body, len, keep);
    } else if (strcmp(c->url, "/readyz") == 0) {
        char detail[256] = "", text[400];
        int ready = c->admin->ready ? c->admin->ready(c->admin->ready_arg, detail, sizeof(detail))
                                    : 1;
        char esc[300];
        vc_json_escape(esc, sizeof(esc), detail);
        snprintf(text, sizeof(text), "{\"status\":\"%s\",\"detail\":\"%s\"}",
                 ready ? "ready" : "not ready", esc);
        body = dup_text(text, &len);
        respond(c, ready ? 200 : 503, ready ? "OK" : "Service Unavailable", "application/json",
                body, len, keep);
    } else if (strcmp(c->url, "/metrics") == 0) {
        body = vc_metrics_render(&len);
        if (!body)
            body = dup_text("", &len);
        respond(c, 200, "OK", "text/plain; version=0.0.4", body, len, keep);
    } else {
        body = dup_text("{\"error\":\"NOT_FOUND\"}", &len);
        respond(c, 404, "Not Found", "application/json", body, len, keep);
    }
    return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    admin_conn_t *c = s->data;

    if (n > 0) {
        size_t parsed = http_parser_execute(&c->parser, &c->admin->settings, buf->base, (size_t)n);
        if (parsed != (size_t)n || HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
            char *body;
            size_t len;
            body = dup_text("{\"error\":\"BAD_REQUEST\"}", &len);
            respond(c, 400, "Bad Request", "application/json", body, len, 0);
        }
    } else if (n < 0) {
        conn_close(c);
    }
    free(buf->base);
}

static void accept_cb(uv_stream_t *server, int status)
{
    vc_admin_t *a = server->data;
    admin_conn_t *c;

    if (status < 0)
        return;
    if (!(c = calloc(1, sizeof(*c))))
        return;
    c->admin = a;
    uv_tcp_init(&a->loop, &c->tcp);
    c->tcp.data = c;
    a->conns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || a->conns > MAX_CONNS) {
        conn_close(c);
        return;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (uv_is_closing(h))
        return;
    if (h->type == UV_TCP && h->data && h->data != arg) {
        conn_close(h->data);
        return;
    }
    uv_close(h, NULL);
}

static void stop_cb(uv_async_t *async)
{
    vc_admin_t *a = async->data;
    /* The listener's data is the admin itself: closed with a NULL callback. */
    uv_walk(&a->loop, close_walk_cb, a);
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
    struct sockaddr_in sa;
    vc_admin_t *a;

    if (vc_parse_host_port(addr, host, sizeof(host), &port) != 0 ||
        uv_ip4_addr(host, port, &sa) != 0) {
        snprintf(err, errlen, "invalid admin address \"%s\" (expected IPv4 host:port)", addr);
        return VC_ERR_INVALID;
    }
    if (!(a = calloc(1, sizeof(*a))))
        return VC_ERR_NOMEM;
    a->ready = ready;
    a->ready_arg = arg;
    a->settings.on_message_begin = on_message_begin;
    a->settings.on_url = on_url;
    a->settings.on_message_complete = on_message_complete;
    uv_loop_init(&a->loop);
    uv_tcp_init(&a->loop, &a->listener);
    a->listener.data = a;
    uv_async_init(&a->loop, &a->stop, stop_cb);
    a->stop.data = a;
    if ((rc = uv_tcp_bind(&a->listener, (const struct sockaddr *)&sa, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&a->listener, 64, accept_cb)) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, uv_strerror(rc));
        goto fail;
    }
    if (uv_thread_create(&a->thread, thread_main, a) != 0) {
        snprintf(err, errlen, "cannot start the admin thread");
        goto fail;
    }
    *out = a;
    return 0;
fail:
    uv_close((uv_handle_t *)&a->listener, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_loop_close(&a->loop);
    free(a);
    return VC_ERR_IO;
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
