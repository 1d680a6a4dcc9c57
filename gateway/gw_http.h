/*
 * The HTTP/1.1 server of one worker loop: a SO_REUSEPORT listener,
 * keep-alive connections parsed with http-parser, and one request in flight
 * per connection (the parser is paused until the answer is written, so
 * pipelined requests are answered in order).
 *
 * Limits (deploy/README.md, "Connections and memory"): bodies above
 * GW_MAX_BODY get 413, request heads above GW_MAX_HEAD get 431, anything
 * http-parser rejects gets 400; all three close the connection. A
 * connection idle (or slow to send a request) for idle_timeout_ms is closed;
 * so is one whose answer is not taken by the client (written to its socket)
 * within write_timeout_ms, which bounds a client that pipelines requests and
 * never reads (its kernel send buffer is fixed small so that this shows, and
 * it is closed with a reset). Connections above max_connections (counted over
 * all workers), or above max_per_ip from one address, get 503 and are
 * closed. An idle connection holds no buffer: the head, body and read-ahead
 * buffers grow as a request needs them and are given back once it is
 * dispatched.
 */
#ifndef GW_HTTP_H
#define GW_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gw_router.h"
#include "vc_metrics.h"

#define GW_MAX_HEAD (8 * 1024)
#define GW_MAX_AUTH 512 /* a longer Authorization header is kept as absent */

/* Bytes read from a socket at once (one buffer per worker). */
#define GW_READ_BUF (16 * 1024)

typedef struct gw_http_server gw_http_server_t;
typedef struct gw_http_ip_table gw_http_ip_table_t;
typedef struct gw_conn gw_conn_t;
typedef struct gw_arena_chunk gw_arena_chunk_t;

/*
 * One request, alive from its dispatch until gw_http_respond(). Whether its
 * client is still connected is the server's business: a handler answers
 * every request the same way (see the ownership notes in gw_http.c).
 */
typedef struct gw_request {
    gw_method_t method;
    const char *path; /* NUL-terminated request target */
    size_t path_len;
    const char *body; /* NUL-terminated; body_len bytes */
    size_t body_len;
    const char *authorization; /* the Authorization header's value, or NULL */
    const char *peer;          /* the socket peer's address as text, or NULL (gw_guard.h) */
    const char *forwarded_for; /* X-Forwarded-For's value (its last GW_MAX_AUTH bytes), or NULL */
    void *guard;               /* gw_guard.c's state of a guarded request, or NULL */
    int route;                 /* set by the handler, for the observer (gw_route_kind_t) */
    uint64_t start_ns;         /* uv_hrtime() when the request was complete */
    uint64_t id;               /* per-worker sequence, for logs */
    gw_http_server_t *server;
    gw_arena_chunk_t *arena;
} gw_request_t;

/*
 * Called for each complete request. The handler owns req until it calls
 * gw_http_respond() exactly once (also when the client has gone away, which
 * the handler need not know: the answer is then dropped). req and its arena
 * are freed inside that call: neither may be touched after it.
 */
typedef void (*gw_http_handler_cb)(void *ctx, gw_request_t *req);

/*
 * Called for every answer just before it is written (also for requests the
 * parser rejected: req is then NULL), on the server's loop.
 */
typedef void (*gw_http_observe_cb)(void *ctx, const gw_request_t *req, int status);

/* Called once by gw_http_shutdown() when no connection and no request is left. */
typedef void (*gw_http_done_cb)(gw_http_server_t *server);

/* The limits of a server; what the pointers point at is shared by all workers. */
typedef struct {
    int64_t idle_timeout_ms;         /* no request in progress, or one slow to arrive */
    int64_t write_timeout_ms;        /* an answer not taken by the client within this */
    atomic_long *connections;        /* open connections, all workers together */
    long max_connections;            /* more get 503 and are closed */
    gw_http_ip_table_t *per_ip;      /* connections per client address; NULL: no cap */
    vc_metric_t *open_gauge;         /* kept at the open connections; may be NULL */
} gw_http_limits_t;

struct gw_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    gw_http_handler_cb handler;
    gw_http_observe_cb observe; /* may be NULL; set after gw_http_listen() */
    void *ctx;
    gw_http_limits_t limits;
    gw_conn_t *conns; /* open connections (doubly linked) */
    long requests;    /* dispatched and not yet answered */
    uint64_t next_id;
    int listening, shutting_down;
    gw_http_done_cb done_cb;
    char readbuf[GW_READ_BUF];
};

/*
 * A table of open connections per client address, shared by all workers
 * (it locks): max_per_ip is the cap, max_connections bounds how many
 * addresses it must hold. Returns NULL when memory runs out. Keyed by a hash
 * seeded at random, since clients choose their addresses.
 */
gw_http_ip_table_t *gw_http_ip_table_new(long max_per_ip, long max_connections);

/* Frees the table; no server may use it any more. NULL is fine. */
void gw_http_ip_table_free(gw_http_ip_table_t *t);

/*
 * Returns 0 when host:port can be bound and nothing listens there yet, or a
 * negative VC_ERR_* with err saying what is in the way: a listener (found by
 * connecting to it), or, when nothing listens, how many connections in
 * TIME-WAIT and others hold the port as their local port. Call it once
 * before the workers bind: their SO_REUSEPORT would share the address with
 * any process of the same user.
 */
int gw_http_check_free(const char *host, int port, char *err, size_t errlen);

/*
 * Sets up s on loop with no listener: connections come only through
 * gw_http_adopt(). What limits points at is borrowed for the server's life.
 * gw_http_listen() calls it; the fuzzing harness (tests/fuzz) calls it alone.
 */
void gw_http_init(gw_http_server_t *s, uv_loop_t *loop, const gw_http_limits_t *limits,
                  gw_http_handler_cb handler, void *ctx);

/*
 * Binds host:port with SO_REUSEPORT on loop and starts accepting, as
 * gw_http_init() sets it up. Returns 0, or a negative VC_ERR_* with err
 * saying what failed.
 */
int gw_http_listen(gw_http_server_t *s, uv_loop_t *loop, const char *host, int port,
                   const gw_http_limits_t *limits, gw_http_handler_cb handler, void *ctx,
                   char *err, size_t errlen);

/*
 * Serves the connected stream socket sock (takes ownership) as a client
 * connection of s, as if it had been accepted (the limits apply). Returns 0,
 * or a negative VC_ERR_* (sock is then closed).
 */
int gw_http_adopt(gw_http_server_t *s, uv_os_sock_t sock);

/*
 * Writes the head of an answer into buf: status line, type (a whole header
 * line, or ""), Content-Length, "Connection: close" unless keep_alive, extra
 * (header lines, or NULL) and the blank line. Returns its length, or 0 when
 * it does not fit in cap bytes (or status is not 3 digits).
 */
size_t gw_http_format_head(char *buf, size_t cap, int status, size_t body_len, int keep_alive,
                           const char *type, const char *extra);

/*
 * Answers req and frees it (with its arena): the handler's ownership ends
 * here. status and body (body_len bytes, JSON; copied, so it may live in
 * req's arena) make the answer; extra_headers, if not NULL, is more header
 * lines, each ending in "\r\n" (copied). A client that has gone away only
 * gets its request freed.
 */
void gw_http_respond(gw_request_t *req, int status, const char *extra_headers, const char *body,
                     size_t body_len);

/*
 * As gw_http_respond(), for a body that is not JSON: content_type is the
 * whole header line ("Content-Type: text/plain\r\n").
 */
void gw_http_respond_typed(gw_request_t *req, int status, const char *content_type,
                           const char *body, size_t body_len);

/* A streamed chunk's outcome: 0 written, or VC_ERR_IO when the client is gone. */
typedef void (*gw_http_sent_cb)(void *arg, int rc);

/*
 * A chunked answer, for bodies too large to hold (a campaign's codes):
 * gw_http_stream_begin() writes the head (status, content_type as a whole
 * header line, Transfer-Encoding: chunked); then gw_http_stream_chunk() as
 * often as needed, one at a time; then gw_http_stream_end(), which frees req
 * as gw_http_respond() does. The handler owns req until then, also when the
 * client went away meanwhile.
 */
void gw_http_stream_begin(gw_request_t *req, int status, const char *content_type);

/*
 * Writes len > 0 bytes (copied) as one chunk. Returns 0 and cb(arg, rc) runs
 * once the write ended (rc < 0: the client is gone, call end), or VC_ERR_IO
 * when the client is gone already (cb never runs).
 */
int gw_http_stream_chunk(gw_request_t *req, const char *data, size_t len, gw_http_sent_cb cb,
                         void *arg);

/*
 * Ends the answer and frees req: complete writes the last chunk; !complete
 * closes the connection without it, so the client sees a cut-short answer
 * (a failure after the head was sent can no longer change the status).
 */
void gw_http_stream_end(gw_request_t *req, int complete);

/*
 * Returns n zeroed bytes that live as long as req (its arena), or NULL when
 * memory runs out.
 */
void *gw_request_alloc(gw_request_t *req, size_t n);

/*
 * Stops accepting, closes idle connections, and closes the others after their
 * answer is written. done_cb runs once nothing is left (maybe before this
 * returns).
 */
void gw_http_shutdown(gw_http_server_t *s, gw_http_done_cb done_cb);

#endif
