#include "vc_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "vc_error.h"
#include "vc_fault.h"
#include "vc_hash.h"
#include "vc_json.h"
#include "vc_log.h"

/*
 * Bytes kept unparsed while a request is in flight: the rest of the read
 * that held the request, then reads (each at most what is left of this)
 * until reading pauses. Never more than VC_HTTP_READ_BUF.
 */
#define VC_HTTP_PENDING_MAX VC_HTTP_READ_BUF
/* The smallest block of the server's cache (its class 0). */
#define VC_HTTP_BUF_MIN 256
/*
 * SO_SNDBUF and SO_RCVBUF of each connection (Linux doubles them for its
 * bookkeeping). Fixed, not tuned by the kernel: one answer or one request at
 * a time needs little, and the send buffer is what a client that does not
 * read fills before the write timeout can see it (tuned, it grows to
 * megabytes of unread answers, all written as far as libuv can tell).
 */
#define VC_HTTP_SOCKET_BUF (16 * 1024)

struct vc_http_arena_chunk {
    vc_http_arena_chunk_t *next;
    size_t block; /* the size of the cache block it is */
    size_t cap, used;
    max_align_t data[];
};

/*
 * Who owns a request, and until when:
 *
 * - From on_message_complete() until conn_feed() dispatches it, the
 *   connection owns it (c->ready); conn_close() frees it there.
 * - From the handler's call until vc_http_respond(), the handler owns it,
 *   whatever happens to the connection. Meanwhile the request and the
 *   connection point at each other (r->conn, c->inflight), and each pointer
 *   is borrowed: the side that goes away first clears the other's pointer to
 *   it. conn_close() sets r->conn to NULL (the handler still owns r, and its
 *   answer then has nowhere to go); respond() sets c->inflight to NULL
 *   before it frees r.
 * - vc_http_respond() ends the request: it copies the answer into the write,
 *   then frees the request. Nothing of the request outlives that call: the
 *   connection waiting for the answer to be written is c->answering, not a
 *   pointer to the freed request.
 *
 * So a connection never reaches a request that respond() freed, and a
 * request never reaches a connection that close_cb() freed, whichever of a
 * reset, a failed write, a Redis reply, a Kafka delivery report or a
 * shutdown comes first.
 */
typedef struct {
    vc_http_request_t pub;
    vc_http_conn_t *conn; /* borrowed; NULL once the connection closed */
    size_t block;         /* the size of the cache block it is, strings included */
    int keep_alive;
    unsigned chunks; /* a streamed answer's chunks written so far */
} request_t;

struct vc_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    http_parser parser;
    vc_http_server_t *server;
    vc_http_conn_t *prev, *next;
    int open_handles;
    int closing, reading, read_eof, close_after, in_message;
    int ip_counted; /* counted in the server's per-address table */
    uint64_t activity_ms; /* uv_now() when it last sent something, for eviction */
    uint64_t due_ms;      /* loop time the connection is closed at (conn_deadline()) */
    uint64_t armed_ms;    /* loop time the timer fires at, never after due_ms */
    int reset;      /* close with a reset, dropping what the kernel still holds to send */
    unsigned char ip[16]; /* the client's address (IPv4 mapped into IPv6) */
    size_t head_bytes;
    /*
     * The buffers of the request being parsed and of what was read past it;
     * each grows as needed (up to VC_HTTP_MAX_HEAD, VC_HTTP_MAX_BODY, VC_HTTP_PENDING_MAX)
     * and is freed once it is not needed (conn_trim()), so an idle
     * connection holds none.
     */
    char *url;
    size_t url_len, url_cap;
    char *body;
    size_t body_len, body_cap;
    char *pending;
    size_t pending_len, pending_cap;
    request_t *ready;    /* complete, not yet handed to the handler: owned */
    request_t *inflight; /* owned by the handler until it answers: borrowed */
    int answering;       /* an answer (or an error answer) is being written */
    unsigned writes;     /* uv_write() requests whose callback has not run yet */
    int error_status;    /* set by a parser callback that rejects the request */
    /* Why a callback rejected the request (static), or NULL for the parser's own reason. */
    const char *error_detail;
    /*
     * The framing check (framing_check()): where the bytes the parser has
     * taken but the check has not seen begin, inside the data being fed, and
     * the state of the line being checked.
     */
    const char *scan_from;
    int scan_cr;  /* the last byte checked was CR */
    int scan_bol; /* the next byte begins a line */
    /*
     * Recognising "Expect: 100-continue" and keeping "Authorization" across
     * split header callbacks.
     */
    char field[16], value[VC_HTTP_MAX_AUTH];
    size_t field_len, value_len;
    int in_value, header_kind, expect_continue;
    char auth[VC_HTTP_MAX_AUTH + 1];
    size_t auth_len; /* 0: no Authorization header */
    /* The client's address for the guessing limits (gw_guard.h). */
    char peer[INET6_ADDRSTRLEN]; /* "" when unknown */
    char xff[VC_HTTP_MAX_AUTH + 1];   /* X-Forwarded-For, all of them joined, its tail kept */
    size_t xff_len;
    int xff_seen;
};

/* A write in flight; the bytes follow the struct. */
typedef struct {
    uv_write_t req;
    vc_http_conn_t *conn;
    int resume; /* the answer to inflight: resume parsing once written */
    vc_http_sent_cb sent; /* a streamed chunk's: told once the write ended */
    void *sent_arg;
    size_t block; /* the size of the cache block it is */
    size_t len;
    char data[];
} write_t;

static void conn_close(vc_http_conn_t *c);
static void conn_feed(vc_http_conn_t *c, char *data, size_t len);
static void conn_read_start(vc_http_conn_t *c);
static void timer_close_cb(uv_timer_t *t);

/*
 * Sets when the connection is closed unless something moves it again: ms
 * from now (the idle, read or write timeout). The timer is only ever moved
 * earlier: a deadline moved later is found when the timer fires, which arms
 * it again for the rest (timer_close_cb()). So a keep-alive request costs no
 * timer operation, where it cost three (the read timeout started, stopped at
 * dispatch, the idle timeout started), each a heap update.
 */
static void conn_deadline(vc_http_conn_t *c, int64_t ms)
{
    c->due_ms = uv_now(c->server->loop) + (uint64_t)ms;
    if (uv_is_active((uv_handle_t *)&c->timer) && c->armed_ms <= c->due_ms)
        return;
    c->armed_ms = c->due_ms;
    uv_timer_start(&c->timer, timer_close_cb, (uint64_t)ms, 0);
}

/* ---- the server's cache of blocks ---- */

/*
 * The class of a block of cap bytes: cap is VC_HTTP_BUF_MIN << class. A
 * block of another size (larger than the largest class) has none (-1).
 */
static int cache_class(size_t cap)
{
    for (int k = 0; k < VC_HTTP_CACHE_CLASSES; k++)
        if (cap == (size_t)VC_HTTP_BUF_MIN << k)
            return k;
    return -1;
}

/*
 * Returns a block of at least need bytes, its size in *cap: a cached one of
 * the smallest class that fits, else a new one (exactly need bytes when no
 * class fits). Blocks are malloc()ed, so aligned for any type. NULL when
 * memory runs out.
 */
static void *cache_get(vc_http_server_t *s, size_t need, size_t *cap)
{
    size_t n = VC_HTTP_BUF_MIN;
    int k = 0;
    void *p;

    while (n < need && k < VC_HTTP_CACHE_CLASSES - 1) {
        n *= 2;
        k++;
    }
    if (n < need) {
        *cap = need;
        return malloc(need);
    }
    if ((p = s->cache[k])) {
        memcpy(&s->cache[k], p, sizeof(void *));
        s->cache_len[k]--;
    } else if (!(p = malloc(n))) {
        return NULL;
    }
    *cap = n;
    return p;
}

/* Gives back a block of cap bytes from cache_get() (NULL is fine). */
static void cache_put(vc_http_server_t *s, void *p, size_t cap)
{
    int k = cache_class(cap);

    if (!p)
        return;
    if (k < 0 || s->cache_len[k] >= VC_HTTP_CACHE_KEEP) {
        free(p);
        return;
    }
    memcpy(p, &s->cache[k], sizeof(void *));
    s->cache[k] = p;
    s->cache_len[k]++;
}

static void cache_free(vc_http_server_t *s)
{
    for (int k = 0; k < VC_HTTP_CACHE_CLASSES; k++) {
        while (s->cache[k]) {
            void *p = s->cache[k];
            memcpy(&s->cache[k], p, sizeof(void *));
            free(p);
        }
        s->cache_len[k] = 0;
    }
}

/*
 * Makes *buf (of *cap bytes, a block of s's cache or NULL) hold at least
 * need bytes, at most max. Returns 0, or -1 when memory runs out (*buf is
 * then unchanged).
 */
static int buf_reserve(vc_http_server_t *s, char **buf, size_t *cap, size_t need, size_t max)
{
    size_t n;
    char *p;

    if (need <= *cap)
        return 0;
    if (need > max || !(p = cache_get(s, need, &n)))
        return -1;
    if (*buf)
        memcpy(p, *buf, *cap);
    cache_put(s, *buf, *cap);
    *buf = p;
    *cap = n;
    return 0;
}

/*
 * Gives back what the connection does not need between requests: the head
 * and body buffers once a request is dispatched (it has its own copy), the
 * read-ahead buffer once it is empty. A connection with nothing to do then
 * holds only its struct.
 */
static void conn_trim(vc_http_conn_t *c)
{
    vc_http_server_t *s = c->server;

    if (!c->in_message) {
        cache_put(s, c->url, c->url_cap);
        cache_put(s, c->body, c->body_cap);
        c->url = c->body = NULL;
        c->url_cap = c->body_cap = 0;
    }
    if (c->pending_len == 0) {
        cache_put(s, c->pending, c->pending_cap);
        c->pending = NULL;
        c->pending_cap = 0;
    }
}

/*
 * A request was dispatched and its answer is not written yet: the
 * connection waits (reads are buffered, a shutdown lets it finish). While the
 * handler has it no timer runs (the handler's own deadlines bound it); while
 * its answer is written, the write timeout does.
 */
static int conn_busy(const vc_http_conn_t *c)
{
    return c->inflight || c->answering;
}

static void maybe_done(vc_http_server_t *s)
{
    vc_http_done_cb cb = s->done_cb;
    /*
     * Not before every closed connection's close_cb: it gives its buffers back
     * to the cache and reads s, which done_cb may free.
     */
    if (s->shutting_down && !s->listening && !s->conns && s->closing == 0 && s->requests == 0 &&
        cb) {
        s->done_cb = NULL;
        cache_free(s);
        cb(s);
    }
}

/* ---- arena ---- */

void *vc_http_request_alloc(vc_http_request_t *req, size_t n)
{
    const size_t align = alignof(max_align_t);
    vc_http_arena_chunk_t *ch = req->arena;
    void *p;

    n = (n + align - 1) / align * align;
    if (!ch || ch->cap - ch->used < n) {
        size_t block;
        if (!(ch = cache_get(req->server, sizeof(*ch) + (n > 2048 ? n : 2048), &block)))
            return NULL;
        ch->block = block;
        ch->cap = block - sizeof(*ch);
        ch->used = 0;
        ch->next = req->arena;
        req->arena = ch;
    }
    p = (char *)ch->data + ch->used;
    ch->used += n;
    memset(p, 0, n);
    return p;
}

static void request_free(request_t *r)
{
    vc_http_server_t *s = r->pub.server;
    vc_http_arena_chunk_t *ch = r->pub.arena, *next;

    for (; ch; ch = next) {
        next = ch->next;
        cache_put(s, ch, ch->block);
    }
    cache_put(s, r, r->block);
    s->requests--;
    maybe_done(s);
}

/* ---- connections per client address ---- */

/*
 * Open addressing with linear probing and backward-shift deletion, so that
 * a slot is empty exactly when its count is 0 and no tombstones pile up. It
 * holds at most one address per open connection, and has twice as many
 * slots as connections allowed: probes stay short, and it is never full.
 */
typedef struct {
    unsigned char addr[16];
    long count; /* 0: empty */
} ip_slot_t;

struct vc_http_ip_table {
    uv_mutex_t lock;
    long max_per_ip;
    size_t mask;
    unsigned char seed[16];
    ip_slot_t *slots;
};

vc_http_ip_table_t *vc_http_ip_table_new(long max_per_ip, long max_connections)
{
    vc_http_ip_table_t *t = calloc(1, sizeof(*t));
    size_t n = 64;

    if (!t)
        return NULL;
    while (n < 2 * (size_t)max_connections + 64)
        n *= 2;
    if (!(t->slots = calloc(n, sizeof(*t->slots))) || uv_mutex_init(&t->lock) != 0) {
        free(t->slots);
        free(t);
        return NULL;
    }
    t->mask = n - 1;
    t->max_per_ip = max_per_ip;
    /* Any 16 bytes no client can guess: the process's keyed hash of a fixed string. */
    uint64_t a = vc_hash_str("vc_http_ip_table/0"), b = vc_hash_str("vc_http_ip_table/1");
    memcpy(t->seed, &a, 8);
    memcpy(t->seed + 8, &b, 8);
    return t;
}

void vc_http_ip_table_free(vc_http_ip_table_t *t)
{
    if (!t)
        return;
    uv_mutex_destroy(&t->lock);
    free(t->slots);
    free(t);
}

/* The table key of a peer address: IPv4 as ::ffff:a.b.c.d. Returns 0, or -1 for another family. */
static int ip_key(const struct sockaddr_storage *peer, unsigned char key[16])
{
    if (peer->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)peer;
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &in->sin_addr, 4);
        return 0;
    }
    if (peer->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

static size_t ip_home(const vc_http_ip_table_t *t, const unsigned char key[16])
{
    return (size_t)vc_siphash24(t->seed, key, 16) & t->mask;
}

/* The slot holding key, or the empty slot where it would go. Called locked. */
static size_t ip_find(const vc_http_ip_table_t *t, const unsigned char key[16])
{
    size_t i = ip_home(t, key);

    while (t->slots[i].count && memcmp(t->slots[i].addr, key, 16) != 0)
        i = (i + 1) & t->mask;
    return i;
}

/* Counts one more connection from key. Returns 0, or 1 when key is at the cap (not counted). */
static int ip_acquire(vc_http_ip_table_t *t, const unsigned char key[16])
{
    int refused = 0;
    size_t i;

    uv_mutex_lock(&t->lock);
    i = ip_find(t, key);
    if (t->slots[i].count >= t->max_per_ip) {
        refused = 1;
    } else {
        memcpy(t->slots[i].addr, key, 16);
        t->slots[i].count++;
    }
    uv_mutex_unlock(&t->lock);
    return refused;
}

/* Counts one connection from key less (it was acquired). */
static void ip_release(vc_http_ip_table_t *t, const unsigned char key[16])
{
    size_t i, j, home;

    uv_mutex_lock(&t->lock);
    i = ip_find(t, key);
    VC_ASSERT(t->slots[i].count > 0);
    if (--t->slots[i].count == 0) {
        /*
         * Backward shift: move up each later entry of the run whose home is
         * not cyclically in (i, j], so that every key stays reachable from
         * its home without crossing an empty slot.
         */
        for (j = (i + 1) & t->mask; t->slots[j].count; j = (j + 1) & t->mask) {
            home = ip_home(t, t->slots[j].addr);
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                continue;
            t->slots[i] = t->slots[j];
            t->slots[j].count = 0;
            i = j;
        }
    }
    uv_mutex_unlock(&t->lock);
}

/* ---- writing ---- */

/*
 * The answer to the request in flight is out (written to the kernel): take
 * the next request, or close. Also reached at once from conn_write_sent()
 * when the answer went out in one system call and nothing was read ahead.
 */
static void answered(vc_http_conn_t *c)
{
    c->answering = 0;
    if (c->close_after || c->server->shutting_down) {
        conn_close(c);
        return;
    }
    http_parser_pause(&c->parser, 0);
    conn_deadline(c, c->server->limits.idle_timeout_ms);
    if (c->pending_len) {
        size_t len = c->pending_len;
        c->pending_len = 0;
        conn_feed(c, c->pending, len);
        /* A request dispatched from it may also have been answered already. */
        if (c->closing || conn_busy(c))
            return;
    }
    conn_trim(c);
    if (c->read_eof)
        conn_close(c); /* the client is done sending and everything is answered */
    else if (!c->reading)
        conn_read_start(c);
}

static void write_cb(uv_write_t *wr, int status)
{
    write_t *w = (write_t *)wr;
    vc_http_conn_t *c = w->conn;
    int resume = w->resume;
    vc_http_sent_cb sent = w->sent;
    void *sent_arg = w->sent_arg;

    cache_put(c->server, w, w->block);
    c->writes--;
    /* Reached with c->closing when uv_close() cancelled the write: c lives until close_cb. */
    if (c->closing || status < 0) {
        if (!c->closing) {
            vc_debug("http write failed: %s", uv_strerror(status));
            conn_close(c);
        }
        if (sent)
            sent(sent_arg, VC_ERR_IO);
        return;
    }
    if (sent)
        sent(sent_arg, 0);
    if (resume)
        answered(c);
}

/*
 * Queues head and body (both copied). resume: this is the answer to the
 * request in flight (or an error answer), and write_cb takes the next
 * request, or closes, once it is written. Returns 0, or closes the
 * connection and returns < 0.
 */
static int conn_write_sent(vc_http_conn_t *c, const char *head, size_t head_len, const char *body,
                           size_t body_len, int resume, vc_http_sent_cb sent, void *sent_arg)
{
    size_t block;
    write_t *w;
    uv_buf_t buf;
    int rc;

    /*
     * An answer is first tried straight (uv_try_write: one writev, no write
     * request, no copy). Through uv_write() every answer also cost an
     * epoll_ctl() (libuv re-arms the socket's watcher once its write queue
     * drains) and the write callback's loop iteration: 3% of the sold-out
     * path's samples (tests/bench/results/2026-12-01-soldout.md). Only when
     * nothing was read ahead: the next request is then taken by the next
     * read, never from inside this call (answered() would feed it from here,
     * and a pipelining client would nest one answer's stack in the last).
     * And only with no write of ours pending (a streamed answer's chunks, a
     * 100 Continue): their callbacks must run before this answer's, which may
     * close the connection and would report them cancelled. What the kernel
     * does not take goes the old way.
     */
    if (resume && !sent && c->pending_len == 0 && c->writes == 0) {
        uv_buf_t bufs[2] = {uv_buf_init((char *)head, (unsigned)head_len),
                            uv_buf_init((char *)body, (unsigned)body_len)};
        int n = uv_try_write((uv_stream_t *)&c->tcp, bufs, body_len ? 2 : 1);

        if (n == (int)(head_len + body_len)) {
            answered(c);
            return 0;
        }
        if (n < 0 && n != UV_EAGAIN && n != UV_ENOSYS) {
            vc_debug("http write failed: %s", uv_strerror(n));
            conn_close(c);
            return VC_ERR_IO;
        }
        if (n > 0) {
            /* Part went out: the rest is queued below as if it were the whole. */
            size_t done = (size_t)n;
            if (done >= head_len) {
                body += done - head_len;
                body_len -= done - head_len;
                head_len = 0;
            } else {
                head += done;
                head_len -= done;
            }
        }
    }
    w = cache_get(c->server, sizeof(*w) + head_len + body_len, &block);
    if (!w) {
        conn_close(c);
        return VC_ERR_NOMEM;
    }
    w->block = block;
    w->conn = c;
    w->resume = resume;
    w->sent = sent;
    w->sent_arg = sent_arg;
    w->len = head_len + body_len;
    if (head_len)
        memcpy(w->data, head, head_len);
    if (body_len)
        memcpy(w->data + head_len, body, body_len);
    buf = uv_buf_init(w->data, (unsigned)w->len);
    if ((rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb)) != 0) {
        cache_put(c->server, w, w->block);
        conn_close(c);
        return VC_ERR_IO;
    }
    c->writes++;
    if (resume) {
        /*
         * The client must take the answer within the write timeout: one
         * that pipelines requests and never reads would otherwise hold the
         * connection and its buffers forever once the socket's buffers fill.
         */
        c->answering = 1;
        conn_deadline(c, c->server->limits.write_timeout_ms);
    }
    return 0;
}

static int conn_write(vc_http_conn_t *c, const char *head, size_t head_len, const char *body,
                      size_t body_len, int resume)
{
    return conn_write_sent(c, head, head_len, body, body_len, resume, NULL, NULL);
}

static const char json_type[] = "Content-Type: application/json\r\n";

const char *vc_http_status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* Appends len bytes of s at *n; 0, or -1 when buf (cap bytes) is full. */
static int put(char *buf, size_t cap, size_t *n, const char *s, size_t len)
{
    if (len > cap - *n)
        return -1;
    memcpy(buf + *n, s, len);
    *n += len;
    return 0;
}

static int put_str(char *buf, size_t cap, size_t *n, const char *s)
{
    return put(buf, cap, n, s, strlen(s));
}

static int put_uint(char *buf, size_t cap, size_t *n, size_t v)
{
    char digits[24];
    size_t i = sizeof(digits);

    do
        digits[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    return put(buf, cap, n, digits + i, sizeof(digits) - i);
}

/*
 * Built by hand, not by snprintf: every answer has a head, and parsing a
 * format string once per request showed in the profile.
 */
size_t vc_http_format_head(char *buf, size_t cap, int status, size_t body_len, int keep_alive,
                           const char *type, const char *extra)
{
    size_t n = 0;

    if (status < 100 || status > 999 || put(buf, cap, &n, "HTTP/1.1 ", 9) ||
        put_uint(buf, cap, &n, (size_t)status) || put(buf, cap, &n, " ", 1) ||
        put_str(buf, cap, &n, vc_http_status_text(status)) || put(buf, cap, &n, "\r\n", 2) ||
        put_str(buf, cap, &n, type) || put(buf, cap, &n, "Content-Length: ", 16) ||
        put_uint(buf, cap, &n, body_len) || put(buf, cap, &n, "\r\n", 2) ||
        (!keep_alive && put_str(buf, cap, &n, "Connection: close\r\n")) ||
        (extra && put_str(buf, cap, &n, extra)) || put(buf, cap, &n, "\r\n", 2))
        return 0;
    return n;
}

static void respond(vc_http_request_t *req, int status, const char *type, const char *extra_headers,
                    const char *body, size_t body_len)
{
    request_t *r = (request_t *)req;
    vc_http_conn_t *c = r->conn;
    char head[1024];
    size_t head_len;
    int keep_alive;

    if (!c) {
        /* The client went away (conn_close() let go of r): only free it. */
        if (req->server->observe)
            req->server->observe(req->server->ctx, req, status);
        request_free(r);
        return;
    }
    VC_ASSERT(c->inflight == r && !c->closing);
    /* From here the connection waits for the write, not for r. */
    c->inflight = NULL;
    r->conn = NULL;
    if (c->server->observe)
        c->server->observe(c->server->ctx, req, status);
    keep_alive = r->keep_alive && !c->close_after && !c->server->shutting_down;
    if (!keep_alive)
        c->close_after = 1;
    head_len = vc_http_format_head(head, sizeof(head), status, body_len, keep_alive, type,
                                   extra_headers);
    if (head_len == 0) {
        head_len = vc_http_format_head(head, sizeof(head), 500, 0, 0, json_type, NULL);
        body_len = 0;
        c->close_after = 1;
    }
    /* Written (copied) before r goes: body may live in r's arena. A HEAD answer is its head. */
    conn_write(c, head, head_len, body, req->method == VC_HTTP_HEAD ? 0 : body_len, 1);
    request_free(r);
}

void vc_http_respond(vc_http_request_t *req, int status, const char *extra_headers,
                     const char *body, size_t body_len)
{
    respond(req, status, json_type, extra_headers, body, body_len);
}

void vc_http_respond_typed(vc_http_request_t *req, int status, const char *content_type,
                           const char *body, size_t body_len)
{
    respond(req, status, content_type, NULL, body, body_len);
}

/*
 * A chunked answer (gw_http.h): the request stays in flight, so the
 * connection waits (reads buffered, no idle timer) and conn_close() lets go
 * of it as of any request, until vc_http_stream_end() frees it.
 */
void vc_http_stream_begin(vc_http_request_t *req, int status, const char *content_type)
{
    request_t *r = (request_t *)req;
    vc_http_conn_t *c = r->conn;
    char head[512];
    size_t n = 0;

    if (req->server->observe)
        req->server->observe(req->server->ctx, req, status);
    if (!c)
        return;
    if (!r->keep_alive || c->close_after || c->server->shutting_down)
        c->close_after = 1;
    if (put(head, sizeof(head), &n, "HTTP/1.1 ", 9) ||
        put_uint(head, sizeof(head), &n, (size_t)status) || put(head, sizeof(head), &n, " ", 1) ||
        put_str(head, sizeof(head), &n, vc_http_status_text(status)) ||
        put(head, sizeof(head), &n, "\r\n", 2) || put_str(head, sizeof(head), &n, content_type) ||
        put_str(head, sizeof(head), &n, "Transfer-Encoding: chunked\r\n") ||
        (c->close_after && put_str(head, sizeof(head), &n, "Connection: close\r\n")) ||
        put(head, sizeof(head), &n, "\r\n", 2)) {
        conn_close(c);
        return;
    }
    conn_write(c, head, n, NULL, 0, 0);
}

int vc_http_stream_chunk(vc_http_request_t *req, const char *data, size_t len, vc_http_sent_cb cb,
                         void *arg)
{
    request_t *r = (request_t *)req;
    char head[24];
    size_t n = 0;
    static const char hex[] = "0123456789abcdef";
    int shift = 60;

    if (!r->conn)
        return VC_ERR_IO;
    VC_ASSERT(len > 0);
    while (shift > 0 && ((len >> shift) & 15) == 0)
        shift -= 4;
    for (; shift >= 0; shift -= 4)
        head[n++] = hex[(len >> shift) & 15];
    head[n++] = '\r';
    head[n++] = '\n';
    /* The chunk's trailing CRLF goes with the next write (or the last chunk). */
    if (r->chunks++ > 0) {
        memmove(head + 2, head, n);
        head[0] = '\r';
        head[1] = '\n';
        n += 2;
    }
    return conn_write_sent(r->conn, head, n, data, len, 0, cb, arg);
}

void vc_http_stream_end(vc_http_request_t *req, int complete)
{
    request_t *r = (request_t *)req;
    vc_http_conn_t *c = r->conn;

    if (c) {
        c->inflight = NULL;
        r->conn = NULL;
        if (complete)
            conn_write(c, r->chunks ? "\r\n0\r\n\r\n" : "0\r\n\r\n", r->chunks ? 7 : 5, NULL, 0,
                       1);
        else
            conn_close(c); /* no last chunk: the client sees the answer cut short */
    }
    request_free(r);
}

/*
 * Answers a request the parser rejected (or, with 503, a connection over a
 * limit, not counted by the observer: no request was read), and closes after.
 */
static void conn_fail(vc_http_conn_t *c, int status, const char *detail)
{
    char head[256], body[512];
    const char *error = status == 413   ? "PAYLOAD_TOO_LARGE"
                        : status == 431 ? "HEADERS_TOO_LARGE"
                        : status == 503 ? "UNAVAILABLE"
                                        : "BAD_REQUEST";
    size_t body_len = 0, head_len;
    vc_jgen_t g;

    /* The shape of every error answer (proto/openapi.yaml, Error). */
    if (vc_jgen_init(&g) == 0) {
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "error", error);
        vc_jgen_kv_str(&g, "detail", detail);
        vc_jgen_map_close(&g);
        if (vc_jgen_finish(&g, body, sizeof(body), &body_len) != 0)
            body_len = 0;
    }
    head_len = vc_http_format_head(head, sizeof(head), status, body_len, 0, json_type,
                                   status == 503 ? "Retry-After: 1\r\n" : NULL);
    if (c->server->observe && status != 503)
        c->server->observe(c->server->ctx, NULL, status);
    c->close_after = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
    /* Resume set: the write callback then closes (close_after) like any answer. */
    conn_write(c, head, head_len, body, body_len, 1);
}

/* ---- parsing ---- */

/*
 * RFC 9112 framing that http-parser lets through: Debian builds it without
 * HTTP_PARSER_STRICT, and even strict it takes a bare LF as a line end and
 * obs-fold as a header value's continuation. A proxy in front of us that
 * reads such a request differently (a header folded into the one before, a
 * line ending one byte later) would frame the next request differently
 * from us: request smuggling. So every byte of framing the parser takes
 * (request line, header and trailer lines, chunk-size lines, the blank
 * lines), that is everything but the body's data (on_body() skips it), is
 * checked here: a line must end in CRLF, and none may begin with
 * whitespace (obs-fold, or whitespace before the first header: RFC 9112
 * 5.2 and 2.2 allow a server to reject both, and a server behind a proxy
 * must). Whitespace between a header's name and its colon is the field
 * callback's check (on_header_field()). Returns NULL, or why the request
 * is refused.
 */
static const char *framing_check(vc_http_conn_t *c, const char *end)
{
    const char *p = c->scan_from;

    c->scan_from = end;
    for (; p < end; p++) {
        if (*p == '\n') {
            if (!c->scan_cr)
                return "a line of the request ends in a bare LF, not CRLF";
            c->scan_bol = 1;
            c->scan_cr = 0;
            continue;
        }
        if (c->scan_bol && (*p == ' ' || *p == '\t'))
            return "a line of the request head begins with whitespace (obs-fold)";
        c->scan_bol = 0;
        c->scan_cr = *p == '\r';
    }
    return NULL;
}

/* Refuses the request being parsed with 400 for detail (static): the callback then returns -1. */
static int refuse(vc_http_conn_t *c, const char *detail)
{
    c->error_status = 400;
    c->error_detail = detail;
    return -1;
}

static int head_grow(vc_http_conn_t *c, size_t len)
{
    c->head_bytes += len;
    if (c->head_bytes > VC_HTTP_MAX_HEAD) {
        c->error_status = 431;
        return -1;
    }
    return 0;
}

static int on_message_begin(http_parser *p)
{
    vc_http_conn_t *c = p->data;
    c->url_len = c->body_len = c->head_bytes = 0;
    c->field_len = c->value_len = c->auth_len = 0;
    c->in_value = c->expect_continue = 0;
    c->xff_len = 0;
    c->xff_seen = 0;
    c->in_message = 1;
    c->activity_ms = uv_now(c->server->loop);
    /* From its first byte, a request must arrive whole within the read timeout. */
    if (c->server->limits.read_timeout_ms > 0)
        conn_deadline(c, c->server->limits.read_timeout_ms);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    vc_http_conn_t *c = p->data;
    if (head_grow(c, len) != 0)
        return -1;
    /* head_grow() bounds url_len + len by VC_HTTP_MAX_HEAD; one byte more for the NUL. */
    if (buf_reserve(c->server, &c->url, &c->url_cap, c->url_len + len, VC_HTTP_MAX_HEAD + 1) != 0)
        return -1;
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

enum { HEADER_OTHER, HEADER_EXPECT, HEADER_AUTHORIZATION, HEADER_FORWARDED };

/*
 * Appends to X-Forwarded-For keeping its last bytes: the right-most hops are
 * the ones a trusted proxy wrote (gw_guard_client()).
 */
static void xff_append(vc_http_conn_t *c, const char *at, size_t n)
{
    const size_t cap = sizeof(c->xff) - 1;

    if (n >= cap) {
        memcpy(c->xff, at + n - cap, cap);
        c->xff_len = cap;
        return;
    }
    if (c->xff_len + n > cap) {
        size_t drop = c->xff_len + n - cap;
        memmove(c->xff, c->xff + drop, c->xff_len - drop);
        c->xff_len -= drop;
    }
    memcpy(c->xff + c->xff_len, at, n);
    c->xff_len += n;
}

static void header_done(vc_http_conn_t *c)
{
    if (c->header_kind == HEADER_EXPECT && c->value_len == 12 &&
        strncasecmp(c->value, "100-continue", 12) == 0)
        c->expect_continue = 1;
    if (c->header_kind == HEADER_AUTHORIZATION && c->value_len <= sizeof(c->value)) {
        memcpy(c->auth, c->value, c->value_len);
        c->auth[c->value_len] = '\0';
        c->auth_len = c->value_len;
    }
    c->field_len = c->value_len = 0;
    c->in_value = 0;
}

static void append_small(char *buf, size_t cap, size_t *len, const char *at, size_t n)
{
    /* Only short names and values matter; a longer one is marked as too long. */
    if (*len > cap)
        return;
    if (*len + n > cap) {
        *len = cap + 1;
        return;
    }
    memcpy(buf + *len, at, n);
    *len += n;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    vc_http_conn_t *c = p->data;
    if (head_grow(c, len) != 0)
        return -1;
    /*
     * A name is a token: Debian's http-parser (not strict) takes spaces in
     * it, and "Transfer-Encoding : chunked" was then read as chunked. A
     * proxy may read that line as another header, or drop it (RFC 9112 5.1:
     * whitespace before the colon must be rejected with 400).
     */
    if (memchr(at, ' ', len) || memchr(at, '\t', len))
        return refuse(c, "a header name has whitespace in it or before its colon");
    if (c->in_value)
        header_done(c);
    append_small(c->field, sizeof(c->field), &c->field_len, at, len);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    vc_http_conn_t *c = p->data;
    if (head_grow(c, len) != 0)
        return -1;
    if (!c->in_value) {
        /* The name is complete: decide once whether the value matters. */
        c->in_value = 1;
        c->value_len = 0;
        c->header_kind = c->field_len == 6 && strncasecmp(c->field, "expect", 6) == 0
                             ? HEADER_EXPECT
                         : c->field_len == 13 && strncasecmp(c->field, "authorization", 13) == 0
                             ? HEADER_AUTHORIZATION
                         : c->field_len == 15 && strncasecmp(c->field, "x-forwarded-for", 15) == 0
                             ? HEADER_FORWARDED
                             : HEADER_OTHER;
        if (c->header_kind == HEADER_FORWARDED && c->xff_seen++)
            xff_append(c, ",", 1); /* several headers are one list (RFC 9110 5.3) */
    }
    if (c->header_kind == HEADER_FORWARDED) {
        xff_append(c, at, len);
        return 0;
    }
    if (c->header_kind != HEADER_OTHER)
        append_small(c->value, sizeof(c->value), &c->value_len, at, len);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    vc_http_conn_t *c = p->data;
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

    if (c->in_value)
        header_done(c);
    if (p->content_length != ULLONG_MAX && p->content_length > VC_HTTP_MAX_BODY) {
        c->error_status = 413;
        return -1;
    }
    if (c->expect_continue && p->content_length != ULLONG_MAX && p->content_length > 0 &&
        conn_write(c, cont, sizeof(cont) - 1, NULL, 0, 0) != 0)
        return -1;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    vc_http_conn_t *c = p->data;
    const char *bad = framing_check(c, at);

    if (bad)
        return refuse(c, bad);
    /* The data is not framing: the check goes on after it, in the middle of a line. */
    c->scan_from = at + len;
    c->scan_bol = c->scan_cr = 0;
    if (c->body_len + len > VC_HTTP_MAX_BODY) {
        c->error_status = 413;
        return -1;
    }
    if (buf_reserve(c->server, &c->body, &c->body_cap, c->body_len + len,
                    VC_HTTP_MAX_BODY + 1) != 0)
        return -1;
    memcpy(c->body + c->body_len, at, len);
    c->body_len += len;
    return 0;
}

static vc_http_method_t method_of(unsigned m)
{
    switch (m) {
    case HTTP_GET:
        return VC_HTTP_GET;
    case HTTP_POST:
        return VC_HTTP_POST;
    case HTTP_DELETE:
        return VC_HTTP_DELETE;
    case HTTP_PATCH:
        return VC_HTTP_PATCH;
    case HTTP_HEAD:
        return VC_HTTP_HEAD;
    default:
        return VC_HTTP_OTHER;
    }
}

static int on_message_complete(http_parser *p)
{
    vc_http_conn_t *c = p->data;
    vc_http_server_t *s = c->server;
    size_t peer_len = strlen(c->peer);
    size_t block;
    request_t *r = cache_get(s, sizeof(*r) + c->url_len + 1 + c->body_len + 1 + c->auth_len + 1 +
                                    peer_len + 1 + c->xff_len + 1,
                             &block);
    char *path, *body, *auth, *peer, *xff;

    c->in_message = 0;
    if (!r)
        return -1;
    memset(r, 0, sizeof(*r));
    r->block = block;
    path = (char *)(r + 1);
    body = path + c->url_len + 1;
    if (c->url_len)
        memcpy(path, c->url, c->url_len);
    path[c->url_len] = '\0';
    if (c->body_len)
        memcpy(body, c->body, c->body_len);
    body[c->body_len] = '\0';
    auth = body + c->body_len + 1;
    if (c->auth_len) {
        memcpy(auth, c->auth, c->auth_len + 1);
        r->pub.authorization = auth;
    }
    peer = auth + c->auth_len + 1;
    memcpy(peer, c->peer, peer_len + 1);
    r->pub.peer = peer_len ? peer : NULL;
    xff = peer + peer_len + 1;
    if (c->xff_seen) {
        memcpy(xff, c->xff, c->xff_len);
        xff[c->xff_len] = '\0';
        r->pub.forwarded_for = xff;
    }
    r->pub.start_ns = uv_hrtime();
    r->pub.method = method_of(p->method);
    r->pub.path = path;
    r->pub.path_len = c->url_len;
    r->pub.body = body;
    r->pub.body_len = c->body_len;
    r->pub.id = ++s->next_id;
    r->conn = c;
    r->pub.server = s;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    s->requests++;
    c->ready = r;
    /* One request at a time: the rest waits until this one is answered. */
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Parses data; a complete request is dispatched and what follows it kept in pending. */
static void conn_feed(vc_http_conn_t *c, char *data, size_t len)
{
    size_t n;
    enum http_errno e;
    request_t *r;
    const char *bad;

    c->scan_from = data;
    n = http_parser_execute(&c->parser, &settings, data, len);
    e = HTTP_PARSER_ERRNO(&c->parser);
    r = c->ready;
    if (c->closing)
        return;
    /* What the parser took after the last body data, checked before anything is dispatched. */
    if (!c->error_status && (bad = framing_check(c, data + n)) != NULL) {
        if (r) {
            c->ready = NULL;
            request_free(r);
        }
        conn_fail(c, 400, bad);
        return;
    }
    if (r) {
        /* The next request begins a line. */
        c->scan_bol = 1;
        c->scan_cr = 0;
        size_t rest = len - n;
        c->ready = NULL;
        /* data may be c->pending itself (write_cb): then it is large enough already. */
        if (rest) {
            if (buf_reserve(c->server, &c->pending, &c->pending_cap, rest,
                            VC_HTTP_PENDING_MAX) != 0) {
                request_free(r);
                conn_close(c);
                return;
            }
            memmove(c->pending, data + n, rest);
            c->pending_len = rest;
            if (c->pending_len >= VC_HTTP_PENDING_MAX && c->reading) {
                uv_read_stop((uv_stream_t *)&c->tcp);
                c->reading = 0;
            }
        }
        c->inflight = r;
        conn_trim(c);
        /* The handler has it: no deadline (timer_close_cb() ignores the timer meanwhile). */
        /* Tests hold a worker here to make its shutdown overrun (fault builds only). */
        VC_PAUSE("gateway-dispatch");
        c->server->handler(c->server->ctx, &r->pub);
        return;
    }
    if (e != HPE_OK) {
        int status = c->error_status ? c->error_status : e == HPE_HEADER_OVERFLOW ? 431 : 400;
        conn_fail(c, status,
                  c->error_detail ? c->error_detail
                  : status == 400 ? http_errno_description(e)
                  : status == 413 ? "request body is larger than 16384 bytes"
                                  : "request line and headers exceed 8192 bytes");
        return;
    }
    if (c->parser.upgrade)
        conn_fail(c, 400, "protocol upgrades are not supported");
}

/* ---- connections ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    vc_http_conn_t *c = h->data;
    size_t len = sizeof(c->server->readbuf);

    (void)suggested;
    /* While a request is in flight, read no more than read-ahead may keep. */
    if (conn_busy(c) && !c->close_after)
        len = VC_HTTP_PENDING_MAX - c->pending_len;
    *buf = uv_buf_init(c->server->readbuf, (unsigned)len);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    vc_http_conn_t *c = st->data;

    if (nread == 0)
        return;
    c->activity_ms = uv_now(c->server->loop);
    if (nread < 0) {
        if (nread == UV_EOF && (conn_busy(c) || c->pending_len)) {
            /* Answer what was asked, then close. */
            c->read_eof = 1;
            uv_read_stop(st);
            c->reading = 0;
            return;
        }
        conn_close(c);
        return;
    }
    if (conn_busy(c) || c->close_after) {
        if (c->close_after)
            return; /* an error answer is on its way: ignore the rest */
        if (buf_reserve(c->server, &c->pending, &c->pending_cap, c->pending_len + (size_t)nread,
                        VC_HTTP_PENDING_MAX) != 0) {
            conn_close(c);
            return;
        }
        memcpy(c->pending + c->pending_len, buf->base, (size_t)nread);
        c->pending_len += (size_t)nread;
        if (c->pending_len >= VC_HTTP_PENDING_MAX) {
            uv_read_stop(st);
            c->reading = 0;
        }
        return;
    }
    conn_feed(c, buf->base, (size_t)nread);
}

static void conn_read_start(vc_http_conn_t *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
        c->reading = 1;
    else
        conn_close(c);
}

static void close_cb(uv_handle_t *h)
{
    vc_http_conn_t *c = h->data;
    vc_http_server_t *s = c->server;

    if (--c->open_handles > 0)
        return;
    cache_put(s, c->url, c->url_cap);
    cache_put(s, c->body, c->body_cap);
    cache_put(s, c->pending, c->pending_cap);
    free(c);
    s->closing--;
    maybe_done(s);
}

static void conn_close(vc_http_conn_t *c)
{
    vc_http_server_t *s = c->server;

    if (c->closing)
        return;
    c->closing = 1;
    s->closing++;
    if (c->inflight) {
        /* The handler still owns it: its answer will find no connection. */
        c->inflight->conn = NULL;
        c->inflight = NULL;
    }
    if (c->ready) {
        request_free(c->ready);
        c->ready = NULL;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(s->limits.connections, 1);
    if (s->limits.open_gauge)
        vc_metric_add(s->limits.open_gauge, -1);
    if (c->ip_counted)
        ip_release(s->limits.per_ip, c->ip);
    if (!c->reset || uv_tcp_close_reset(&c->tcp, close_cb) != 0)
        uv_close((uv_handle_t *)&c->tcp, close_cb);
    uv_close((uv_handle_t *)&c->timer, close_cb);
}

/*
 * The idle timeout (no request, or one slow to arrive) or the write timeout
 * (an answer the client does not take) ran out. A request the handler holds
 * runs no timer, but a stale expiry is ignored all the same.
 */
static void timer_close_cb(uv_timer_t *t)
{
    vc_http_conn_t *c = t->data;
    uint64_t now = uv_now(c->server->loop);

    if (c->inflight)
        return; /* answered() sets the next deadline */
    if (c->due_ms > now) {
        /* Moved later since the timer was armed (conn_deadline()): armed again for the rest. */
        c->armed_ms = c->due_ms;
        uv_timer_start(t, timer_close_cb, c->due_ms - now, 0);
        return;
    }
    if (c->answering) {
        vc_debug("closing a connection that did not take its answer within %lld ms",
                 (long long)c->server->limits.write_timeout_ms);
        /*
         * A reset, not a FIN: a FIN would wait behind the answers the client
         * does not read, and the kernel would keep them (up to the send
         * buffer, megabytes) for minutes after the close.
         */
        c->reset = 1;
    }
    conn_close(c);
}

/* Keeps the peer's address as text, for the guessing limits' IP bucket. */
static void peer_name(vc_http_conn_t *c, const struct sockaddr_storage *sa)
{
    c->peer[0] = '\0';
    if (sa->ss_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)sa, c->peer, sizeof(c->peer));
    else if (sa->ss_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)sa, c->peer, sizeof(c->peer));
}

/*
 * Makes room for newcomer (limits.evict): closes the connection idle
 * longest (no request under way, nothing read ahead, nothing to write), or
 * with VC_HTTP_EVICT_QUIET, when none is idle, the one quiet longest (a
 * request it never finishes, an answer it never reads). Returns 0 when it
 * closed one, -1 when it found none to close. A scan of this worker's
 * connections (at most max_connections), run only at the cap: a few
 * microseconds per connection accepted there, where keeping a list in
 * idle order would cost every request two list moves.
 */
static int conn_evict(vc_http_server_t *s, vc_http_conn_t *newcomer)
{
    vc_http_conn_t *c, *idle = NULL, *quiet = NULL;

    for (c = s->conns; c; c = c->next) {
        if (c->closing || c == newcomer)
            continue;
        if (!conn_busy(c) && !c->in_message && !c->pending_len &&
            (!idle || c->activity_ms < idle->activity_ms))
            idle = c;
        if (!quiet || c->activity_ms < quiet->activity_ms)
            quiet = c;
    }
    if (!idle && s->limits.evict == VC_HTTP_EVICT_QUIET)
        idle = quiet;
    if (!idle)
        return -1;
    vc_debug("connection closed to make room for a new one: %ld connections open",
             (long)atomic_load(s->limits.connections));
    conn_close(idle);
    return 0;
}

/*
 * Sets up a connection for a socket that tcp_init_cb puts into c->tcp (an
 * accept, or an adopted socket), counts it, and either serves it or, over a
 * limit, answers 503 and closes it. Returns 0, or < 0 when the socket could
 * not be taken (the connection is closing then).
 */
static int conn_open(vc_http_server_t *s, int (*tcp_init_cb)(vc_http_conn_t *c, void *arg),
                     void *arg)
{
    vc_http_conn_t *c;
    struct sockaddr_storage peer;
    int peer_len = sizeof(peer), rc, sockbuf;

    if (!(c = calloc(1, sizeof(*c)))) {
        vc_error("out of memory accepting a connection");
        return VC_ERR_NOMEM;
    }
    c->server = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->activity_ms = uv_now(s->loop);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    atomic_fetch_add(s->limits.connections, 1);
    if (s->limits.open_gauge)
        vc_metric_add(s->limits.open_gauge, 1);
    if ((rc = tcp_init_cb(c, arg)) != 0) {
        conn_close(c);
        return rc;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->scan_bol = 1;
    if (s->shutting_down) {
        conn_close(c);
        return 0;
    }
    /*
     * The address's cap first: a client over it is refused before it could
     * make room for itself by closing someone else's connection. A socket
     * that is not TCP over IP (a test's socketpair) has no address to count.
     */
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &peer_len) != 0)
        peer.ss_family = AF_UNSPEC;
    peer_name(c, &peer);
    if (s->limits.per_ip && peer.ss_family != AF_UNSPEC && ip_key(&peer, c->ip) == 0) {
        if (ip_acquire(s->limits.per_ip, c->ip) != 0) {
            vc_debug("connection refused: too many connections from one address");
            conn_fail(c, 503, "too many connections from this address");
            return 0;
        }
        c->ip_counted = 1;
    }
    if (atomic_load(s->limits.connections) > s->limits.max_connections &&
        (s->limits.evict == VC_HTTP_EVICT_NONE || conn_evict(s, c) != 0)) {
        vc_debug("connection refused: %ld connections open, none idle",
                 (long)atomic_load(s->limits.connections));
        conn_fail(c, 503, "too many connections");
        return 0;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    sockbuf = VC_HTTP_SOCKET_BUF;
    (void)uv_send_buffer_size((uv_handle_t *)&c->tcp, &sockbuf);
    sockbuf = VC_HTTP_SOCKET_BUF;
    (void)uv_recv_buffer_size((uv_handle_t *)&c->tcp, &sockbuf);
    conn_deadline(c, s->limits.idle_timeout_ms);
    conn_read_start(c);
    return 0;
}

static int accept_init_cb(vc_http_conn_t *c, void *arg)
{
    return uv_accept((uv_stream_t *)arg, (uv_stream_t *)&c->tcp) == 0 ? 0 : VC_ERR_IO;
}

static void accept_cb(uv_stream_t *listener, int status)
{
    if (status < 0) {
        vc_warn("accept failed: %s", uv_strerror(status));
        return;
    }
    (void)conn_open(listener->data, accept_init_cb, listener);
}

static int adopt_init_cb(vc_http_conn_t *c, void *arg)
{
    return uv_tcp_open(&c->tcp, *(uv_os_sock_t *)arg) == 0 ? 0 : VC_ERR_IO;
}

int vc_http_adopt(vc_http_server_t *s, uv_os_sock_t sock)
{
    int rc = conn_open(s, adopt_init_cb, &sock);

    /* Not opened: the socket is still ours to close (uv_close() left it alone). */
    if (rc == VC_ERR_IO)
        close(sock);
    return rc;
}

static int parse_addr(const char *host, int port, struct sockaddr_storage *addr, char *err,
                      size_t errlen)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)addr) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)addr) != 0) {
        snprintf(err, errlen, "\"%s\" is not a numeric IPv4 or IPv6 address", host);
        return VC_ERR_INVALID;
    }
    return 0;
}

/* The address's length for bind() and connect(). */
static socklen_t addr_len(const struct sockaddr_storage *addr)
{
    return addr->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/*
 * Whether a socket listens on addr: a connect() to it (to loopback for a
 * wildcard address) is accepted. A listener too busy to accept within a
 * second counts as one.
 */
static int someone_listens(const struct sockaddr_storage *addr)
{
    struct sockaddr_storage to = *addr;
    struct timeval tv = {1, 0};
    int fd, rc;

    if (to.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&to;
        if (in->sin_addr.s_addr == htonl(INADDR_ANY))
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&to;
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
            in6->sin6_addr = in6addr_loopback;
    }
    if ((fd = socket(to.ss_family, SOCK_STREAM, 0)) < 0)
        return 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* bounds connect() */
    rc = connect(fd, (struct sockaddr *)&to, addr_len(&to));
    rc = rc == 0 || errno == EINPROGRESS || errno == EAGAIN || errno == ETIMEDOUT;
    close(fd);
    return rc;
}

/*
 * Counts the TCP sockets whose local port is port, from /proc/net/tcp and
 * tcp6: those in TIME-WAIT, and the others (connected, closing). Leaves both
 * at 0 where /proc cannot be read.
 */
static void count_port_users(int port, int *time_wait, int *others)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    char line[512], local[128];
    unsigned state, lport;

    *time_wait = *others = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        FILE *f = fopen(tables[i], "r");
        if (!f)
            continue;
        while (fgets(line, sizeof(line), f)) {
            /* "  0: 0100007F:3CF0 0100007F:9C40 06 ...": local address:port, remote, state. */
            char *colon;
            if (sscanf(line, " %*u: %127s %*s %x", local, &state) != 2 ||
                !(colon = strrchr(local, ':')) || sscanf(colon + 1, "%x", &lport) != 1 ||
                (int)lport != port)
                continue;
            if (state == 0x06)
                (*time_wait)++;
            else if (state != 0x0A) /* a listener is found by connecting, not here */
                (*others)++;
        }
        fclose(f);
    }
}

int vc_http_check_free(const char *host, int port, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    int fd, rc = 0, one = 1, time_wait, others;

    if ((rc = parse_addr(host, port, &addr, err, errlen)) != 0)
        return rc;
    if ((fd = socket(addr.ss_family, SOCK_STREAM, 0)) < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return VC_ERR_IO;
    }
    /*
     * SO_REUSEADDR but not SO_REUSEPORT: connections of an earlier gateway
     * in TIME-WAIT do not count, a socket listening there does, whatever its
     * options. The workers' SO_REUSEPORT would bind beside it silently.
     */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&addr, addr_len(&addr)) == 0) {
        close(fd);
        return 0;
    }
    rc = errno;
    close(fd);
    if (rc != EADDRINUSE) {
        snprintf(err, errlen, "cannot bind %s:%d: %s", host, port, strerror(rc));
        return VC_ERR_IO;
    }
    /*
     * In use, but not necessarily by a listener: connections that another
     * program opened from this port (the kernel hands out ports of
     * net.ipv4.ip_local_port_range to outgoing connections) block a bind
     * while they last, also in TIME-WAIT, unless they had SO_REUSEADDR.
     * Say which it is, since the remedies differ.
     */
    if (someone_listens(&addr)) {
        snprintf(err, errlen, "%s:%d is in use: another process (another gateway?) listens there",
                 host, port);
        return VC_ERR_IO;
    }
    count_port_users(port, &time_wait, &others);
    snprintf(err, errlen,
             "%s:%d cannot be bound, although nothing listens there: %d connection(s) in "
             "TIME-WAIT and %d other connection(s) use port %d as their local port (outgoing "
             "connections get ports from net.ipv4.ip_local_port_range); wait until they are "
             "gone (TIME-WAIT lasts 60 s) or choose a port outside that range",
             host, port, time_wait, others, port);
    return VC_ERR_IO;
}

void vc_http_init(vc_http_server_t *s, uv_loop_t *loop, const vc_http_limits_t *limits,
                  vc_http_handler_cb handler, void *ctx)
{
    memset(s, 0, offsetof(vc_http_server_t, readbuf));
    s->loop = loop;
    s->handler = handler;
    s->ctx = ctx;
    s->limits = *limits;
}

int vc_http_listen(vc_http_server_t *s, uv_loop_t *loop, const char *host, int port,
                   const vc_http_limits_t *limits, vc_http_handler_cb handler, void *ctx,
                   char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    uv_os_fd_t fd;
    int rc, one = 1;

    vc_http_init(s, loop, limits, handler, ctx);
    if ((rc = parse_addr(host, port, &addr, err, errlen)) != 0)
        return rc;
    if ((rc = uv_tcp_init_ex(loop, &s->listener, addr.ss_family)) != 0) {
        snprintf(err, errlen, "socket: %s", uv_strerror(rc));
        return VC_ERR_IO;
    }
    s->listener.data = s;
    s->listening = 1;
    /* Every worker binds the same address; the kernel spreads connections. */
    if ((rc = uv_fileno((uv_handle_t *)&s->listener, &fd)) != 0) {
        snprintf(err, errlen, "listener socket: %s", uv_strerror(rc));
        goto fail;
    }
    if (!limits->exclusive && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        snprintf(err, errlen, "setsockopt(SO_REUSEPORT): %s", strerror(errno));
        goto fail;
    }
    if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 1024, accept_cb)) != 0) {
        snprintf(err, errlen, "listen on %s:%d: %s", host, port, uv_strerror(rc));
        goto fail;
    }
    return 0;
fail:
    s->listening = 0;
    uv_close((uv_handle_t *)&s->listener, NULL);
    return VC_ERR_IO;
}

static void listener_close_cb(uv_handle_t *h)
{
    vc_http_server_t *s = h->data;
    s->listening = 0;
    maybe_done(s);
}

void vc_http_shutdown(vc_http_server_t *s, vc_http_done_cb done_cb)
{
    vc_http_conn_t *c, *next;

    if (s->shutting_down)
        return;
    s->shutting_down = 1;
    s->done_cb = done_cb;
    if (s->listening)
        uv_close((uv_handle_t *)&s->listener, listener_close_cb);
    for (c = s->conns; c; c = next) {
        next = c->next;
        if (!conn_busy(c))
            conn_close(c);
    }
    maybe_done(s);
}

void vc_http_close_all(vc_http_server_t *s)
{
    vc_http_conn_t *c, *next;

    for (c = s->conns; c; c = next) {
        next = c->next;
        conn_close(c);
    }
}
