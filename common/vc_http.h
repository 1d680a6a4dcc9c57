/*
 * The HTTP/1.1 server of every daemon (the gateway's API, the writer's and
 * the reconciler's admin endpoint, vc_admin.h): a listener on one libuv
 * loop, keep-alive connections parsed with http-parser, and one request in
 * flight per connection (the parser is paused until the answer is written,
 * so pipelined requests are answered in order). Routing is the handler's.
 *
 * Limits (deploy/README.md, "Connections and memory"): bodies above
 * VC_HTTP_MAX_BODY get 413, request heads above VC_HTTP_MAX_HEAD get 431,
 * anything http-parser rejects gets 400, and so does framing RFC 9112 says
 * to reject that http-parser takes (whitespace before a header's colon,
 * obs-fold, a bare LF line end: vc_http.c, framing_check()); all close the
 * connection. A connection idle for idle_timeout_ms is closed, and so is one
 * slow to send a request (read_timeout_ms, or idle_timeout_ms when that is
 * 0); so is one whose answer is not taken by the client (written to its
 * socket) within write_timeout_ms, which bounds a client that pipelines
 * requests and never reads (its kernel send buffer is fixed small so that
 * this shows, and it is closed with a reset).
 *
 * A connection from an address that has max_per_ip open gets 503 and is
 * closed, before it can count against anyone else. One over max_connections
 * (counted over all servers that share the counter) gets 503 and is closed
 * too, unless evict says otherwise: VC_HTTP_EVICT_IDLE closes this worker's
 * connection idle longest (no request under way) to make room, and refuses
 * the newcomer only when none is idle (the gateway's API: a crowd of idle
 * sockets cannot keep a client out); VC_HTTP_EVICT_QUIET closes, when none
 * is idle, the one quiet longest (a request it never finishes, an answer it
 * never reads), so that a health probe always gets in (the admin endpoints).
 *
 * Memory: an idle connection holds no buffer. The head, body and read-ahead
 * buffers, the request and its answer take blocks from the server's own
 * cache as a request needs them and give them back once it is answered, so
 * a busy keep-alive connection costs no malloc per request.
 */
#ifndef VC_HTTP_H
#define VC_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "vc_metrics.h"

#define VC_HTTP_MAX_HEAD (8 * 1024)
#define VC_HTTP_MAX_BODY (16 * 1024) /* request bodies above this get 413 */
#define VC_HTTP_MAX_AUTH 512 /* a longer Authorization header is kept as absent */

/* Bytes read from a socket at once (one buffer per worker). */
#define VC_HTTP_READ_BUF (16 * 1024)

typedef enum {
    VC_HTTP_GET,
    VC_HTTP_POST,
    VC_HTTP_DELETE,
    VC_HTTP_PATCH,
    VC_HTTP_HEAD, /* answered as GET without the body (the head says its length) */
    VC_HTTP_OTHER,
} vc_http_method_t;

/*
 * The server's cache of blocks: size classes of 256 bytes to 32 KiB, each
 * keeping at most VC_HTTP_CACHE_KEEP free blocks (so what an idle server
 * holds is bounded), freed when the server is done.
 */
#define VC_HTTP_CACHE_CLASSES 8
#define VC_HTTP_CACHE_KEEP 64

/* What a connection over max_connections does (vc_http_limits_t.evict). */
typedef enum {
    VC_HTTP_EVICT_NONE,  /* it gets 503 and is closed */
    VC_HTTP_EVICT_IDLE,  /* the connection idle longest is closed for it; none idle: 503 */
    VC_HTTP_EVICT_QUIET, /* as IDLE; none idle: the one quiet longest is closed for it */
} vc_http_evict_t;

typedef struct vc_http_server vc_http_server_t;
typedef struct vc_http_ip_table vc_http_ip_table_t;
typedef struct vc_http_conn vc_http_conn_t;
typedef struct vc_http_arena_chunk vc_http_arena_chunk_t;

/*
 * One request, alive from its dispatch until vc_http_respond(). Whether its
 * client is still connected is the server's business: a handler answers
 * every request the same way (see the ownership notes in vc_http.c).
 */
typedef struct vc_http_request {
    vc_http_method_t method;
    const char *path; /* NUL-terminated request target */
    size_t path_len;
    const char *body; /* NUL-terminated; body_len bytes */
    size_t body_len;
    const char *authorization; /* the Authorization header's value, or NULL */
    const char *peer;          /* the socket peer's address as text, or NULL */
    const char *forwarded_for; /* X-Forwarded-For (its last VC_HTTP_MAX_AUTH bytes), or NULL */
    void *guard;               /* the handler's, NULL at dispatch (gw_guard.c's state) */
    const char *actor;         /* the handler's: who the request authenticated as, or NULL */
    int route;                 /* the handler's, for the observer (gw_route_kind_t) */
    uint64_t start_ns;         /* uv_hrtime() when the request was complete */
    uint64_t id;               /* per-worker sequence, for logs */
    vc_http_server_t *server;
    vc_http_arena_chunk_t *arena;
} vc_http_request_t;

/*
 * Called for each complete request. The handler owns req until it calls
 * vc_http_respond() exactly once (also when the client has gone away, which
 * the handler need not know: the answer is then dropped). req and its arena
 * are freed inside that call: neither may be touched after it.
 */
typedef void (*vc_http_handler_cb)(void *ctx, vc_http_request_t *req);

/*
 * Called for every answer just before it is written (also for requests the
 * parser rejected: req is then NULL), on the server's loop.
 */
typedef void (*vc_http_observe_cb)(void *ctx, const vc_http_request_t *req, int status);

/* Called once by vc_http_shutdown() when no connection and no request is left. */
typedef void (*vc_http_done_cb)(vc_http_server_t *server);

/* The limits of a server; what the pointers point at is shared by all workers. */
typedef struct {
    int64_t idle_timeout_ms;         /* no request in progress */
    int64_t read_timeout_ms;         /* a request begun must arrive whole; 0: idle_timeout_ms */
    int64_t write_timeout_ms;        /* an answer not taken by the client within this */
    atomic_long *connections;        /* open connections, all workers together */
    long max_connections;            /* more get 503 and are closed, or make room (evict) */
    vc_http_ip_table_t *per_ip;      /* connections per client address; NULL: no cap */
    vc_metric_t *open_gauge;         /* kept at the open connections; may be NULL */
    vc_http_evict_t evict;           /* over max_connections: refuse the new one, or make room */
    int exclusive; /* vc_http_listen() without SO_REUSEPORT: a second bind fails */
} vc_http_limits_t;

struct vc_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    vc_http_handler_cb handler;
    vc_http_observe_cb observe; /* may be NULL; set after vc_http_listen() */
    void *ctx;
    vc_http_limits_t limits;
    vc_http_conn_t *conns; /* open connections (doubly linked) */
    long closing;          /* connections closed whose handles are not closed yet */
    long requests;    /* dispatched and not yet answered */
    uint64_t next_id;
    int listening, shutting_down;
    vc_http_done_cb done_cb;
    void *cache[VC_HTTP_CACHE_CLASSES]; /* free blocks, linked through their first bytes */
    unsigned cache_len[VC_HTTP_CACHE_CLASSES];
    char readbuf[VC_HTTP_READ_BUF];
};

/*
 * A table of open connections per client address, shared by all workers
 * (it locks): max_per_ip is the cap, max_connections bounds how many
 * addresses it must hold. Returns NULL when memory runs out. Keyed by a hash
 * seeded at random, since clients choose their addresses.
 */
vc_http_ip_table_t *vc_http_ip_table_new(long max_per_ip, long max_connections);

/* Frees the table; no server may use it any more. NULL is fine. */
void vc_http_ip_table_free(vc_http_ip_table_t *t);

/*
 * Returns 0 when host:port can be bound and nothing listens there yet, or a
 * negative VC_ERR_* with err saying what is in the way: a listener (found by
 * connecting to it), or, when nothing listens, how many connections in
 * TIME-WAIT and others hold the port as their local port. Call it once
 * before the workers bind: their SO_REUSEPORT would share the address with
 * any process of the same user.
 */
int vc_http_check_free(const char *host, int port, char *err, size_t errlen);

/*
 * Sets up s on loop with no listener: connections come only through
 * vc_http_adopt(). What limits points at is borrowed for the server's life.
 * vc_http_listen() calls it; the fuzzing harness (tests/fuzz) calls it alone.
 * The server's memory is given back when vc_http_shutdown() is done.
 */
void vc_http_init(vc_http_server_t *s, uv_loop_t *loop, const vc_http_limits_t *limits,
                  vc_http_handler_cb handler, void *ctx);

/*
 * Binds host:port on loop (with SO_REUSEPORT unless limits->exclusive, so
 * that every worker's loop binds the same address) and starts accepting, as
 * vc_http_init() sets it up. Returns 0, or a negative VC_ERR_* with err
 * saying what failed.
 */
int vc_http_listen(vc_http_server_t *s, uv_loop_t *loop, const char *host, int port,
                   const vc_http_limits_t *limits, vc_http_handler_cb handler, void *ctx,
                   char *err, size_t errlen);

/*
 * Serves the connected stream socket sock (takes ownership) as a client
 * connection of s, as if it had been accepted (the limits apply). Returns 0,
 * or a negative VC_ERR_* (sock is then closed).
 */
int vc_http_adopt(vc_http_server_t *s, uv_os_sock_t sock);

/*
 * Writes the head of an answer into buf: status line, type (a whole header
 * line, or ""), Content-Length, "Connection: close" unless keep_alive, extra
 * (header lines, or NULL) and the blank line. Returns its length, or 0 when
 * it does not fit in cap bytes (or status is not 3 digits).
 */
size_t vc_http_format_head(char *buf, size_t cap, int status, size_t body_len, int keep_alive,
                           const char *type, const char *extra);

/*
 * Answers req and frees it (with its arena): the handler's ownership ends
 * here. status and body (body_len bytes, JSON; copied, so it may live in
 * req's arena) make the answer (a HEAD request gets its head only);
 * extra_headers, if not NULL, is more header lines, each ending in "\r\n"
 * (copied). A client that has gone away only gets its request freed.
 */
void vc_http_respond(vc_http_request_t *req, int status, const char *extra_headers,
                     const char *body, size_t body_len);

/*
 * As vc_http_respond(), for a body that is not JSON: content_type is the
 * whole header line ("Content-Type: text/plain\r\n").
 */
void vc_http_respond_typed(vc_http_request_t *req, int status, const char *content_type,
                           const char *body, size_t body_len);

/* A streamed chunk's outcome: 0 written, or VC_ERR_IO when the client is gone. */
typedef void (*vc_http_sent_cb)(void *arg, int rc);

/*
 * A chunked answer, for bodies too large to hold (a campaign's codes):
 * vc_http_stream_begin() writes the head (status, content_type as a whole
 * header line, Transfer-Encoding: chunked); then vc_http_stream_chunk() as
 * often as needed, one at a time; then vc_http_stream_end(), which frees req
 * as vc_http_respond() does. The handler owns req until then, also when the
 * client went away meanwhile.
 */
void vc_http_stream_begin(vc_http_request_t *req, int status, const char *content_type);

/*
 * Writes len > 0 bytes (copied) as one chunk. Returns 0 and cb(arg, rc) runs
 * once the write ended (rc < 0: the client is gone, call end), or VC_ERR_IO
 * when the client is gone already (cb never runs).
 */
int vc_http_stream_chunk(vc_http_request_t *req, const char *data, size_t len, vc_http_sent_cb cb,
                         void *arg);

/*
 * Ends the answer and frees req: complete writes the last chunk; !complete
 * closes the connection without it, so the client sees a cut-short answer
 * (a failure after the head was sent can no longer change the status).
 */
void vc_http_stream_end(vc_http_request_t *req, int complete);

/* The reason phrase of an HTTP status ("Not Found"); never NULL. */
const char *vc_http_status_text(int status);

/*
 * Returns n zeroed bytes that live as long as req (its arena), or NULL when
 * memory runs out.
 */
void *vc_http_request_alloc(vc_http_request_t *req, size_t n);

/*
 * Stops accepting, closes idle connections, and closes the others after their
 * answer is written. done_cb runs once nothing is left (maybe before this
 * returns).
 */
void vc_http_shutdown(vc_http_server_t *s, vc_http_done_cb done_cb);

/*
 * Closes every connection now, also those whose answer is still being
 * written (it is cut short). A request a handler holds stays its own until
 * answered, as after any close. For a server whose answers are worth less
 * than a prompt exit (vc_admin.c), after vc_http_shutdown().
 */
void vc_http_close_all(vc_http_server_t *s);

#endif
