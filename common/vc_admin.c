#include "vc_admin.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_log.h"
#include "vc_metrics.h"

#include <http_parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define URL_MAX 256

/*
 * The limits that keep a probe answering whatever clients do (deploy/README.md,
 * "Admin endpoints"). Past VC_ADMIN_MAX_CONNS a new connection closes the one
 * that was idle longest (or, when none is idle, the one quiet longest), so a
 * crowd of idle sockets cannot keep /healthz out.
 */
#define VC_ADMIN_MAX_CONNS 64
#define VC_ADMIN_IDLE_MS 10000       /* no request in progress and nothing to write */
#define VC_ADMIN_READ_MS 5000        /* a request begun must arrive whole within this */
#define VC_ADMIN_WRITE_MS 10000      /* queued answers must make progress within this */
#define VC_ADMIN_WRITE_QUEUE (64 * 1024) /* past this, pipelined requests wait unparsed */
#define VC_ADMIN_SWEEP_MS 250

typedef struct admin_conn admin_conn_t;

struct vc_admin {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    uv_timer_t sweep;
    uv_thread_t thread;
    http_parser_settings settings;
    vc_admin_ready_cb ready;
    void *ready_arg;
    int conns;
    /* Open connections, the one quiet longest first (moved to the tail on activity). */
    admin_conn_t *first, *last;
};

struct admin_conn {
    uv_tcp_t tcp;
    vc_admin_t *admin;
    admin_conn_t *prev, *next;
    http_parser parser;
    char url[URL_MAX];
    size_t url_len;
    int closing;
    int in_request;        /* a request began and did not end */
    int close_after_write; /* Connection: close answered: close once it is written */
    int64_t request_start_ms, activity_ms, write_progress_ms; /* uv_now() */
    /* Bytes read but not parsed while the answers drain (owned). */
    char *pending;
    size_t pending_off, pending_len;
};

typedef struct {
    uv_write_t req;
    admin_conn_t *conn;
    char *buf;
} admin_write_t;

static void conn_unlink(admin_conn_t *c)
{
    vc_admin_t *a = c->admin;
    if (c->prev)
        c->prev->next = c->next;
    else
        a->first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        a->last = c->prev;
    c->prev = c->next = NULL;
}

static void conn_append(admin_conn_t *c)
{
    vc_admin_t *a = c->admin;
    c->prev = a->last;
    c->next = NULL;
    if (a->last)
        a->last->next = c;
    else
        a->first = c;
    a->last = c;
}

/* The connection did something: it becomes the most recent. */
static void conn_touch(admin_conn_t *c)
{
    c->activity_ms = (int64_t)uv_now(&c->admin->loop);
    conn_unlink(c);
    conn_append(c);
}

static void conn_closed_cb(uv_handle_t *h)
{
    admin_conn_t *c = h->data;
    c->admin->conns--;
    conn_unlink(c);
    free(c->pending);
    free(c);
}

static void conn_close(admin_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
}

static size_t queued(admin_conn_t *c)
{
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

/* Whether c waits for nothing from us and has nothing half sent: safe to drop. */
static int conn_idle(admin_conn_t *c)
{
    return !c->in_request && queued(c) == 0 && !c->pending;
}

static void feed(admin_conn_t *c, const char *data, size_t len);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void write_cb(uv_write_t *req, int status)
{
    admin_write_t *w = (admin_write_t *)req;
    admin_conn_t *c = w->conn;

    free(w->buf);
    free(w);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->write_progress_ms = (int64_t)uv_now(&c->admin->loop);
    if (c->close_after_write) {
        if (queued(c) == 0)
            conn_close(c);
        return;
    }
    /* The answers drained below the bound: parse what waited, then read again. */
    if (c->pending && queued(c) <= VC_ADMIN_WRITE_QUEUE / 2) {
        char *data = c->pending;
        size_t off = c->pending_off, len = c->pending_len;
        c->pending = NULL;
        http_parser_pause(&c->parser, 0);
        feed(c, data + off, len - off);
        free(data);
        if (!c->closing && !c->pending && !c->close_after_write &&
            uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0)
            conn_close(c);
    }
}

/*
 * Sends one response; takes ownership of body (malloc'd). With head set
 * (a HEAD request) the headers name the body's length but the body is not
 * sent.
 */
static void respond(admin_conn_t *c, int status, const char *reason, const char *ctype,
                    char *body, size_t body_len, int keep_alive, int head)
{
    admin_write_t *w = malloc(sizeof(*w));
    size_t send_len = head ? 0 : body_len;
    int hlen;
    char hdr[256];
    uv_buf_t buf;

    hlen = snprintf(hdr, sizeof(hdr),
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                    reason, ctype, body_len, keep_alive ? "" : "Connection: close\r\n");
    if (!w || !(w->buf = malloc((size_t)hlen + send_len + 1))) {
        free(w);
        free(body);
        conn_close(c);
        return;
    }
    w->conn = c;
    memcpy(w->buf, hdr, (size_t)hlen);
    if (send_len)
        memcpy(w->buf + hlen, body, send_len);
    free(body);
    if (queued(c) == 0)
        c->write_progress_ms = (int64_t)uv_now(&c->admin->loop);
    buf = uv_buf_init(w->buf, (unsigned)((size_t)hlen + send_len));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) != 0) {
        free(w->buf);
        free(w);
        conn_close(c);
        return;
    }
    if (!keep_alive) {
        /* Nothing more is read; write_cb closes once the answer is out. */
        c->close_after_write = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
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
    c->in_request = 1;
    c->request_start_ms = (int64_t)uv_now(&c->admin->loop);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    admin_conn_t *c = p->data;
    int keep = http_should_keep_alive(p), head = p->method == HTTP_HEAD;
    char *q = strchr(c->url, '?'), *body;
    size_t len;

    c->in_request = 0;
    if (c->close_after_write)
        return 0; /* a request pipelined after "Connection: close" gets no answer */
    if (q)
        *q = '\0';
    if (p->method != HTTP_GET && p->method != HTTP_HEAD) {
        body = dup_text("{\"error\":\"METHOD_NOT_ALLOWED\"}", &len);
        respond(c, 405, "Method Not Allowed", "application/json", body, len, keep, 0);
    } else if (strcmp(c->url, "/healthz") == 0) {
        body = dup_text("{\"status\":\"ok\"}", &len);
        respond(c, 200, "OK", "application/json", body, len, keep, head);
    } else if (strcmp(c->url, "/readyz") == 0) {
        char detail[256] = "", text[1600];
        int ready = c->admin->ready ? c->admin->ready(c->admin->ready_arg, detail, sizeof(detail))
                                    : 1;
        vc_jgen_t g;

        /* 1,600 bytes hold the detail's 255 even if each were escaped as \u00XX. */
        if (vc_jgen_init(&g) == 0) {
            vc_jgen_map_open(&g);
            vc_jgen_kv_str(&g, "status", ready ? "ready" : "not ready");
            vc_jgen_kv_str(&g, "detail", detail);
            vc_jgen_map_close(&g);
            if (vc_jgen_finish(&g, text, sizeof(text), &len) != 0)
                text[0] = '\0';
        } else {
            text[0] = '\0';
        }
        body = dup_text(text, &len);
        respond(c, ready ? 200 : 503, ready ? "OK" : "Service Unavailable", "application/json",
                body, len, keep, head);
    } else if (strcmp(c->url, "/metrics") == 0) {
        body = vc_metrics_render(&len);
        if (!body)
            body = dup_text("", &len);
        respond(c, 200, "OK", "text/plain; version=0.0.4", body, len, keep, head);
    } else {
        body = dup_text("{\"error\":\"NOT_FOUND\"}", &len);
        respond(c, 404, "Not Found", "application/json", body, len, keep, head);
    }
    /*
     * A client that pipelines requests and reads no answers: parse no more
     * until what is queued drains (write_cb resumes), so the queue stays
     * within the bound plus one answer.
     */
    if (!c->closing && queued(c) > VC_ADMIN_WRITE_QUEUE)
        http_parser_pause(p, 1);
    return 0;
}

/* Parses len bytes of c's stream; keeps what a pause left unparsed in c->pending. */
static void feed(admin_conn_t *c, const char *data, size_t len)
{
    size_t parsed = http_parser_execute(&c->parser, &c->admin->settings, data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);

    if (c->closing)
        return;
    if (e == HPE_PAUSED) {
        if (parsed < len) {
            if (!(c->pending = malloc(len - parsed))) {
                conn_close(c);
                return;
            }
            memcpy(c->pending, data + parsed, len - parsed);
            c->pending_off = 0;
            c->pending_len = len - parsed;
            uv_read_stop((uv_stream_t *)&c->tcp);
        } else {
            http_parser_pause(&c->parser, 0);
        }
        return;
    }
    if (parsed != len || e != HPE_OK) {
        char *body;
        size_t blen;
        if (c->close_after_write)
            return;
        c->in_request = 0;
        body = dup_text("{\"error\":\"BAD_REQUEST\"}", &blen);
        respond(c, 400, "Bad Request", "application/json", body, blen, 0, 0);
    }
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
        conn_touch(c);
        if (!c->close_after_write)
            feed(c, buf->base, (size_t)n);
    } else if (n < 0) {
        conn_close(c);
    }
    free(buf->base);
}

/*
 * Closes connections past their deadline: idle too long, a request that
 * does not arrive, answers that do not drain.
 */
static void sweep_cb(uv_timer_t *t)
{
    vc_admin_t *a = t->data;
    int64_t now = (int64_t)uv_now(&a->loop);
    admin_conn_t *c, *next;

    for (c = a->first; c; c = next) {
        next = c->next;
        if (c->closing)
            continue;
        if (queued(c) > 0 || c->pending) {
            if (now - c->write_progress_ms >= VC_ADMIN_WRITE_MS)
                conn_close(c);
        } else if (c->in_request) {
            if (now - c->request_start_ms >= VC_ADMIN_READ_MS)
                conn_close(c);
        } else if (now - c->activity_ms >= VC_ADMIN_IDLE_MS) {
            conn_close(c);
        }
    }
}

/*
 * Makes room for newcomer: closes the connection idle longest, else the one
 * quiet longest (a request it never finishes, answers it never reads).
 */
static void evict_one(vc_admin_t *a, admin_conn_t *newcomer)
{
    admin_conn_t *c, *victim = NULL;

    for (c = a->first; c; c = c->next) {
        if (c->closing || c == newcomer)
            continue;
        if (conn_idle(c)) {
            victim = c;
            break;
        }
        if (!victim)
            victim = c;
    }
    if (victim)
        conn_close(victim);
}

static int open_conns(const vc_admin_t *a)
{
    int n = 0;
    for (const admin_conn_t *c = a->first; c; c = c->next)
        n += !c->closing;
    return n;
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
    conn_append(c);
    c->activity_ms = (int64_t)uv_now(&a->loop);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    if (open_conns(a) > VC_ADMIN_MAX_CONNS)
        evict_one(a, c);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0)
        conn_close(c);
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
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
    /* The listener, the sweep timer and this handle have the admin as data: NULL callbacks. */
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
    uv_timer_init(&a->loop, &a->sweep);
    a->sweep.data = a;
    uv_timer_start(&a->sweep, sweep_cb, VC_ADMIN_SWEEP_MS, VC_ADMIN_SWEEP_MS);
    if ((rc = uv_tcp_bind(&a->listener, (const struct sockaddr *)&sa, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&a->listener, 128, accept_cb)) != 0) {
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
    uv_close((uv_handle_t *)&a->sweep, NULL);
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
