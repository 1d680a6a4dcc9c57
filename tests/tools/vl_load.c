#include "vl_load.h"
#include "vc_error.h"

#include <arpa/inet.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uv.h>

#define REQUEST_MAX 2048
#define BODY_MAX 4096 /* longer bodies are cut; the fields we read come first */
#define READ_MAX 4096
#define HEADER_MAX 32       /* longest header name or Retry-After value kept */
#define STALE_RESENDS_MAX 3 /* per attempt */
#define BACKOFF_MIN_MS 10   /* first reconnect delay after a refused connect */
#define BACKOFF_MAX_MS 500  /* the delay doubles up to this */
#define RETRY_DEFAULT_MS 50 /* after a 503 without Retry-After */
#define RETRY_AFTER_MAX_MS 2000
#define WATCHDOG_MS 50
#define WARMUP_MS                                                                                  \
    100 /* after the first connect, how long the others get before the load starts                 \
         */

typedef enum {
    CONN_DOWN,       /* no socket; the timer may be waiting to connect */
    CONN_CONNECTING, /* the timer bounds the connect */
    CONN_IDLE,       /* connected, no attempt, on the idle stack */
    CONN_BUSY,       /* a request is out; the timer bounds the answer */
    CONN_WAIT_RETRY, /* connected, holding an attempt until the timer says to resend */
    CONN_CLOSING,    /* uv_close() pending on the socket */
} conn_state_t;

typedef struct {
    int64_t index;
    int64_t customer_id;
    char order_id[VL_ORDER_ID_MAX];
    uint64_t start_ns; /* uv_hrtime() of the scheduled or first send */
    int tries;
    int retries;
    int stale_resends;
    int status; /* of the last answer, or VL_STATUS_*; 0 before the first */
    vl_answer_t answer;
} attempt_t;

typedef struct load load_t;

typedef struct {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t connect_req;
    uv_write_t write_req;
    http_parser parser;
    load_t *load;
    conn_state_t state;
    int connected; /* counted in load->connected */
    int writing;   /* write_req is in use */
    int send_after_write;
    int has_attempt;
    attempt_t attempt;
    int answers;     /* complete answers on this socket */
    size_t bytes_in; /* of the current answer */
    int complete;    /* the current answer is fully parsed */
    int keep_alive;  /* the server lets us reuse the socket after this answer */
    int in_value;    /* parser: the last header callback was for a value */
    char header[HEADER_MAX];
    size_t header_len;
    int header_is_retry_after;
    char retry_after[HEADER_MAX];
    size_t retry_after_len;
    size_t body_len;
    int64_t backoff_ms;
    int64_t reconnect_delay_ms; /* how long to wait after the socket closes */
    char request[REQUEST_MAX];
    size_t request_len;
    char body[BODY_MAX];
    char read_buf[READ_MAX];
} conn_t;

struct load {
    uv_loop_t loop;
    uv_timer_t sched;    /* open loop: wakes at the next scheduled send */
    uv_timer_t watchdog; /* duration and connect deadline */
    uv_signal_t sigint, sigterm;
    const vl_options_t *opt;
    vl_result_cb result_cb;
    void *arg;
    vl_stats_t *stats;
    http_parser_settings settings;
    struct sockaddr_storage addr;
    char host_header[300];
    conn_t *conns;
    size_t nconns;
    conn_t **idle; /* a stack of idle connections */
    size_t nidle;
    int64_t next_index; /* the next attempt to issue */
    int64_t held;       /* attempts bound to connections */
    int connected;      /* connections currently connected */
    uint64_t t0_ns;
    int64_t wall0_us;
    uint64_t last_result_ns;
    uint64_t last_usable_ns; /* the last moment any connection was connected */
    int started;             /* connections are up and attempts may be issued */
    int stopping;            /* issue no new attempts and no retries */
    int finishing;           /* handles are being closed */
};

static void conn_connect(conn_t *c);
static void conn_send(conn_t *c);
static void pump(load_t *l);
static void start_load(load_t *l);
static void on_sched(uv_timer_t *t);
static void on_conn_timer(uv_timer_t *t);
static void on_tcp_closed(uv_handle_t *h);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

const char *vl_code_of(const vl_options_t *opt, int64_t index)
{
    return opt->ncodes > 0 ? opt->codes[index % opt->ncodes] : opt->code;
}

int64_t vl_customer_of(const vl_options_t *opt, int64_t index)
{
    int64_t id;

    if (opt->customers <= 0)
        id = index + 1;
    else if (opt->random_customers)
        id = (int64_t)(splitmix64(opt->seed ^ splitmix64((uint64_t)index)) %
                       (uint64_t)opt->customers) +
             1;
    else
        id = index % opt->customers + 1;
    return id + opt->customer_base;
}

static int64_t wall_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* How many attempts may have been issued by now. */
static int64_t attempts_due(const load_t *l, uint64_t now_ns)
{
    uint64_t elapsed_us, n;

    if (l->opt->rate <= 0)
        return l->opt->attempts;
    /* Attempt i is scheduled at t0 + i/rate; µs keep the product within 64 bits. */
    elapsed_us = (now_ns - l->t0_ns) / 1000;
    n = elapsed_us * (uint64_t)l->opt->rate / 1000000 + 1;
    return n < (uint64_t)l->opt->attempts ? (int64_t)n : l->opt->attempts;
}

static uint64_t scheduled_ns(const load_t *l, int64_t index)
{
    return l->t0_ns + (uint64_t)index * 1000000000ULL / (uint64_t)l->opt->rate;
}

static void count_outcome(vl_stats_t *s, int status, const char *error)
{
    for (size_t i = 0; i < s->noutcomes; i++) {
        if (s->outcomes[i].status == status && strcmp(s->outcomes[i].error, error) == 0) {
            s->outcomes[i].count++;
            return;
        }
    }
    if (s->noutcomes == VL_MAX_OUTCOMES) {
        s->outcomes_dropped++;
        return;
    }
    s->outcomes[s->noutcomes].status = status;
    snprintf(s->outcomes[s->noutcomes].error, VL_ERROR_MAX, "%s", error);
    s->outcomes[s->noutcomes].count = 1;
    s->noutcomes++;
}

/* Gives the attempt held by c its final result and frees the connection of it. */
static void attempt_finish(conn_t *c)
{
    load_t *l = c->load;
    attempt_t *a = &c->attempt;
    uint64_t now = uv_hrtime();
    vl_result_t r;

    VC_ASSERT(c->has_attempt);
    if (a->status == 0)
        a->status = VL_STATUS_ERROR; /* cut off in flight by a hard stop */
    r.index = a->index;
    r.order_id = a->order_id;
    r.customer_id = a->customer_id;
    r.status = a->status;
    r.error = a->answer.error;
    r.replayed = a->answer.replayed;
    r.latency_us = now > a->start_ns ? (now - a->start_ns) / 1000 : 0;
    r.tries = a->tries;
    r.start_us = l->wall0_us + (int64_t)((a->start_ns - l->t0_ns) / 1000);
    r.end_us = l->wall0_us + (int64_t)((now - l->t0_ns) / 1000);

    l->stats->finished++;
    l->stats->replayed += (uint64_t)r.replayed;
    count_outcome(l->stats, r.status, r.error);
    vc_hist_record(&l->stats->latency_us, r.latency_us);
    l->last_result_ns = now;
    if (l->result_cb)
        l->result_cb(&r, l->arg);
    c->has_attempt = 0;
    l->held--;
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

/* Closes every handle; uv_run() returns once their close callbacks ran. */
static void finish(load_t *l)
{
    if (l->finishing)
        return;
    l->finishing = 1;
    l->stats->elapsed_us =
        ((l->last_result_ns ? l->last_result_ns : uv_hrtime()) - l->t0_ns) / 1000;
    uv_close((uv_handle_t *)&l->sched, on_handle_closed);
    uv_close((uv_handle_t *)&l->watchdog, on_handle_closed);
    uv_close((uv_handle_t *)&l->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&l->sigterm, on_handle_closed);
    for (size_t i = 0; i < l->nconns; i++) {
        conn_t *c = &l->conns[i];
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
        /* A CLOSING socket's callback sees finishing; a DOWN one has no handle open. */
        if (c->state != CONN_DOWN && c->state != CONN_CLOSING) {
            c->state = CONN_CLOSING;
            uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        }
    }
}

/* Ends the run at once: attempts still held get their last answer as final. */
static void finish_now(load_t *l)
{
    l->stopping = 1;
    for (size_t i = 0; i < l->nconns; i++)
        if (l->conns[i].has_attempt)
            attempt_finish(&l->conns[i]);
    finish(l);
}

static void maybe_finish(load_t *l)
{
    if (!l->finishing && l->held == 0 && (l->stopping || l->next_index >= l->opt->attempts))
        finish(l);
}

static void idle_remove(load_t *l, conn_t *c)
{
    for (size_t i = 0; i < l->nidle; i++) {
        if (l->idle[i] == c) {
            l->idle[i] = l->idle[--l->nidle];
            return;
        }
    }
}

/* Closes c's socket; once closed it reconnects after delay_ms (unless the run is ending). */
static void conn_close(conn_t *c, int64_t delay_ms)
{
    load_t *l = c->load;

    VC_ASSERT(c->state != CONN_DOWN && c->state != CONN_CLOSING);
    if (c->state == CONN_IDLE)
        idle_remove(l, c);
    if (c->connected) {
        c->connected = 0;
        l->connected--;
    }
    uv_timer_stop(&c->timer);
    c->reconnect_delay_ms = delay_ms;
    c->state = CONN_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
}

static void on_tcp_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    load_t *l = c->load;

    c->state = CONN_DOWN;
    if (l->finishing)
        return;
    if (!c->has_attempt && (l->stopping || l->next_index >= l->opt->attempts)) {
        maybe_finish(l); /* nothing left for this connection to carry */
        return;
    }
    if (c->reconnect_delay_ms > 0)
        uv_timer_start(&c->timer, on_conn_timer, (uint64_t)c->reconnect_delay_ms, 0);
    else
        conn_connect(c);
}

/* A connect failed or timed out: try again after a growing delay. */
static void conn_connect_failed(conn_t *c)
{
    c->load->stats->connect_errors++;
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (c->backoff_ms > BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MAX_MS;
    conn_close(c, c->backoff_ms);
}

/*
 * The request of c's attempt got no usable answer (status is VL_STATUS_TIMEOUT
 * or VL_STATUS_ERROR): the gateway may or may not have acted on it. Drops the
 * socket, and either keeps the attempt to resend after reconnecting or makes
 * this its final result.
 */
static void attempt_unknown(conn_t *c, int status)
{
    load_t *l = c->load;
    attempt_t *a = &c->attempt;

    a->status = status;
    memset(&a->answer, 0, sizeof(a->answer));
    if (!l->stopping && a->retries < l->opt->retries) {
        a->retries++;
        l->stats->retries++;
    } else {
        attempt_finish(c);
    }
    conn_close(c, 0);
}

/* Puts c on the idle stack and hands it work if there is any. */
static void conn_idle(conn_t *c)
{
    load_t *l = c->load;

    c->state = CONN_IDLE;
    l->idle[l->nidle++] = c;
    pump(l);
}

static void on_connect(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    load_t *l = c->load;
    int rc;

    if (status == UV_ECANCELED)
        return; /* the socket is closing */
    uv_timer_stop(&c->timer);
    if (status < 0) {
        conn_connect_failed(c);
        return;
    }
    l->stats->connects++;
    c->connected = 1;
    l->connected++;
    l->last_usable_ns = uv_hrtime();
    c->backoff_ms = 0;
    c->answers = 0;
    if ((rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)) != 0) {
        conn_connect_failed(c);
        return;
    }
    if (c->has_attempt) {
        conn_send(c); /* a retry, or a resend after a stale keep-alive socket */
        return;
    }
    if (l->stopping) {
        conn_close(c, 0);
        return;
    }
    conn_idle(c);
    if (!l->started) {
        if ((size_t)l->connected == l->nconns)
            start_load(l);
        else if (l->stats->connects == 1)
            uv_timer_start(&l->sched, on_sched, WARMUP_MS, 0);
    }
}

static void conn_connect(conn_t *c)
{
    load_t *l = c->load;
    int64_t limit_ms = l->opt->timeout_ms > 0 ? l->opt->timeout_ms : l->opt->connect_timeout_ms;

    if (uv_tcp_init(&l->loop, &c->tcp) != 0) {
        /* No handle to close: count it and come back on the timer. */
        l->stats->connect_errors++;
        uv_timer_start(&c->timer, on_conn_timer, BACKOFF_MAX_MS, 0);
        return;
    }
    c->tcp.data = c;
    c->connect_req.data = c;
    c->state = CONN_CONNECTING;
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&l->addr, on_connect) !=
        0) {
        conn_connect_failed(c);
        return;
    }
    uv_timer_start(&c->timer, on_conn_timer, (uint64_t)limit_ms, 0);
}

static void do_write(conn_t *c);

static void on_write(uv_write_t *req, int status)
{
    conn_t *c = req->data;

    c->writing = 0;
    if (status == UV_ECANCELED)
        return; /* the socket is closing */
    if (status < 0) {
        if (c->state == CONN_BUSY)
            attempt_unknown(c, VL_STATUS_ERROR);
        return;
    }
    if (c->send_after_write) {
        c->send_after_write = 0;
        do_write(c);
    }
}

static void do_write(conn_t *c)
{
    uv_buf_t buf = uv_buf_init(c->request, (unsigned int)c->request_len);

    c->writing = 1;
    c->write_req.data = c;
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &buf, 1, on_write) != 0) {
        c->writing = 0;
        attempt_unknown(c, VL_STATUS_ERROR);
    }
}

/* Sends (or resends) c's attempt on its connected socket. */
static void conn_send(conn_t *c)
{
    load_t *l = c->load;
    attempt_t *a = &c->attempt;

    c->request_len =
        vl_request_format(c->request, sizeof(c->request), l->host_header, l->opt->token,
                          vl_code_of(l->opt, a->index), a->customer_id, a->order_id, l->opt->amount,
                          l->opt->forwarded);
    VC_ASSERT(c->request_len > 0); /* vl_run() checked the longest one fits */
    http_parser_init(&c->parser, HTTP_RESPONSE);
    c->parser.data = c;
    c->bytes_in = 0;
    c->complete = 0;
    c->state = CONN_BUSY;
    a->tries++;
    l->stats->requests++;
    if (l->opt->timeout_ms > 0)
        uv_timer_start(&c->timer, on_conn_timer, (uint64_t)l->opt->timeout_ms, 0);
    /* An answer can come before the callback of the previous write: wait for it. */
    if (c->writing)
        c->send_after_write = 1;
    else
        do_write(c);
}

/* Binds attempt index to the idle connection c and sends it. */
static void attempt_start(load_t *l, conn_t *c, int64_t index)
{
    attempt_t *a = &c->attempt;

    memset(a, 0, sizeof(*a));
    a->index = index;
    a->customer_id = vl_customer_of(l->opt, index);
    snprintf(a->order_id, sizeof(a->order_id), "%s%lld", l->opt->order_prefix, (long long)index);
    /* Open loop: latency counts from the schedule, so waiting for a free connection shows. */
    a->start_ns = l->opt->rate > 0 ? scheduled_ns(l, index) : uv_hrtime();
    c->has_attempt = 1;
    l->held++;
    conn_send(c);
}

/*
 * Starts the clock and the schedule once the connections are up, so neither
 * throughput nor open-loop latency counts the time spent connecting.
 */
static void start_load(load_t *l)
{
    if (l->started)
        return;
    l->started = 1;
    uv_timer_stop(&l->sched);
    l->t0_ns = uv_hrtime();
    l->wall0_us = wall_now_us();
    pump(l);
}

static void on_sched(uv_timer_t *t)
{
    load_t *l = t->data;

    if (l->started)
        pump(l);
    else
        start_load(l); /* the warm-up is over */
}

/* Issues every attempt that is due to an idle connection, then arms the schedule. */
static void pump(load_t *l)
{
    uint64_t now = uv_hrtime();
    int64_t due;

    if (l->finishing)
        return;
    if (!l->started) {
        maybe_finish(l); /* a signal while connecting */
        return;
    }
    due = l->stopping ? l->next_index : attempts_due(l, now);
    while (l->nidle > 0 && l->next_index < due) {
        conn_t *c = l->idle[--l->nidle];
        attempt_start(l, c, l->next_index++);
    }
    if (!l->stopping && l->opt->rate > 0 && l->next_index < l->opt->attempts &&
        l->next_index >= due) {
        uint64_t at = scheduled_ns(l, l->next_index);
        uint64_t wait_ms = at > now ? (at - now + 999999) / 1000000 : 0;
        uv_timer_start(&l->sched, on_sched, wait_ms, 0);
    }
    maybe_finish(l);
}

/* One timer per connection; what it bounds depends on the state. */
static void on_conn_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    load_t *l = c->load;

    switch (c->state) {
    case CONN_DOWN:
        if (!c->has_attempt && (l->stopping || l->next_index >= l->opt->attempts))
            maybe_finish(l);
        else
            conn_connect(c);
        break;
    case CONN_CONNECTING:
        conn_connect_failed(c);
        break;
    case CONN_BUSY:
        attempt_unknown(c, VL_STATUS_TIMEOUT);
        break;
    case CONN_WAIT_RETRY:
        conn_send(c);
        break;
    case CONN_IDLE:
    case CONN_CLOSING:
        break;
    }
}

/* A complete answer to c's request arrived. */
static void answer_done(conn_t *c)
{
    load_t *l = c->load;
    attempt_t *a = &c->attempt;
    int64_t delay_ms;

    uv_timer_stop(&c->timer);
    c->answers++;
    a->status = c->parser.status_code;
    vl_answer_parse(c->body, c->body_len, &a->answer);
    if (a->status == 503 && !l->stopping && a->retries < l->opt->retries) {
        a->retries++;
        l->stats->retries++;
        delay_ms = vl_retry_after_ms(c->retry_after, c->retry_after_len);
        if (delay_ms < 0)
            delay_ms = RETRY_DEFAULT_MS;
        if (delay_ms > RETRY_AFTER_MAX_MS)
            delay_ms = RETRY_AFTER_MAX_MS;
        if (c->keep_alive) {
            c->state = CONN_WAIT_RETRY;
            uv_timer_start(&c->timer, on_conn_timer, (uint64_t)delay_ms, 0);
        } else {
            conn_close(c, delay_ms);
        }
        return;
    }
    attempt_finish(c);
    if (c->keep_alive) {
        conn_idle(c);
    } else {
        l->stats->server_closes++;
        conn_close(c, 0);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->read_buf, sizeof(c->read_buf));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    load_t *l = c->load;
    size_t parsed;

    if (nread == 0)
        return;
    if (c->state != CONN_BUSY) {
        /* Idle or waiting to retry: the server closed it, or sent something unasked. */
        if (c->state != CONN_CLOSING) {
            l->stats->server_closes++;
            conn_close(c, 0);
        }
        return;
    }
    if (nread > 0) {
        parsed = http_parser_execute(&c->parser, &l->settings, buf->base, (size_t)nread);
        c->bytes_in += (size_t)nread;
        if (c->complete) {
            /* One request in flight: bytes after the answer mean the socket is unusable. */
            if (parsed != (size_t)nread)
                c->keep_alive = 0;
            answer_done(c);
        } else if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
            attempt_unknown(c, VL_STATUS_ERROR);
        }
        return;
    }
    /* The socket ended while an answer was due. */
    if (nread == UV_EOF && c->bytes_in > 0) {
        /* An answer delimited by the end of the stream completes here. */
        http_parser_execute(&c->parser, &l->settings, NULL, 0);
        if (c->complete) {
            c->keep_alive = 0;
            answer_done(c); /* counts the close */
            return;
        }
    }
    l->stats->server_closes++;
    if (c->bytes_in == 0 && c->answers > 0 && c->attempt.stale_resends < STALE_RESENDS_MAX &&
        !l->stopping) {
        /*
         * A reused keep-alive socket the server had already closed: the
         * request most likely never reached it. Resend the same orderId
         * without spending a retry; if it did arrive, the gateway replays.
         */
        c->attempt.stale_resends++;
        l->stats->stale_resends++;
        conn_close(c, 0);
        return;
    }
    attempt_unknown(c, VL_STATUS_ERROR);
}

/* http_parser callbacks: collect the status, Retry-After and the body. */

static int on_message_begin(http_parser *p)
{
    conn_t *c = p->data;
    c->body_len = 0;
    c->header_len = 0;
    c->in_value = 0;
    c->header_is_retry_after = 0;
    c->retry_after_len = 0;
    return 0;
}

static void append(char *dst, size_t cap, size_t *len, const char *at, size_t n)
{
    if (*len + n > cap)
        n = cap - *len;
    memcpy(dst + *len, at, n);
    *len += n;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    if (c->in_value) {
        c->in_value = 0;
        c->header_len = 0;
    }
    append(c->header, sizeof(c->header), &c->header_len, at, len);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    if (!c->in_value) {
        c->in_value = 1;
        c->header_is_retry_after =
            c->header_len == 11 && strncasecmp(c->header, "retry-after", 11) == 0;
        if (c->header_is_retry_after)
            c->retry_after_len = 0;
    }
    if (c->header_is_retry_after)
        append(c->retry_after, sizeof(c->retry_after), &c->retry_after_len, at, len);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    conn_t *c = p->data;
    append(c->body, sizeof(c->body), &c->body_len, at, len);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    conn_t *c = p->data;
    c->complete = 1;
    c->keep_alive = http_should_keep_alive(p);
    /* Stop here: anything after this answer is not ours to parse. */
    http_parser_pause(p, 1);
    return 0;
}

static void on_watchdog(uv_timer_t *t)
{
    load_t *l = t->data;
    uint64_t now = uv_hrtime();

    if (l->connected > 0)
        l->last_usable_ns = now;
    if (l->started && !l->stopping && l->opt->duration_ms > 0 &&
        now - l->t0_ns >= (uint64_t)l->opt->duration_ms * 1000000) {
        l->stopping = 1;
        uv_timer_stop(&l->sched);
        pump(l);
    }
    if (l->connected == 0 &&
        now - l->last_usable_ns >= (uint64_t)l->opt->connect_timeout_ms * 1000000) {
        l->stats->gave_up = 1;
        finish_now(l);
    }
}

static void on_signal(uv_signal_t *s, int signum)
{
    load_t *l = s->data;
    (void)signum;

    l->stats->interrupted = 1;
    if (l->stopping) {
        finish_now(l); /* a second signal: stop waiting for answers */
        return;
    }
    l->stopping = 1;
    uv_timer_stop(&l->sched);
    pump(l);
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        const unsigned char *b = in6->sin6_addr.s6_addr;
        if (memcmp(b, &in6addr_loopback, 16) == 0)
            return 1;
        return memcmp(b, v4mapped, 12) == 0 && b[12] == 127;
    }
    return 0;
}

/* Checks the options and fills in the address; 0 or VC_ERR_INVALID with err. */
static int setup(load_t *l, const vl_options_t *opt, char *err, size_t errlen)
{
    const char *host = strcmp(opt->host, "localhost") == 0 ? "127.0.0.1" : opt->host;
    char order_id[VL_ORDER_ID_MAX + 8], request[REQUEST_MAX];

    memset(&l->addr, 0, sizeof(l->addr));
    if (uv_ip4_addr(host, opt->port, (struct sockaddr_in *)&l->addr) != 0 &&
        uv_ip6_addr(host, opt->port, (struct sockaddr_in6 *)&l->addr) != 0) {
        snprintf(err, errlen, "address \"%s\" is not a numeric IP address or localhost", opt->host);
        return VC_ERR_INVALID;
    }
    if (!is_loopback(&l->addr)) {
        snprintf(err, errlen, "refusing to load %s: vc-load only targets loopback addresses",
                 opt->host);
        return VC_ERR_INVALID;
    }
    if (strchr(opt->host, ':'))
        snprintf(l->host_header, sizeof(l->host_header), "[%s]:%d", opt->host, opt->port);
    else
        snprintf(l->host_header, sizeof(l->host_header), "%s:%d", opt->host, opt->port);
    if (opt->attempts > 0) {
        /* The longest order id and request must fit, so no send can fail on length. */
        int n = snprintf(order_id, sizeof(order_id), "%s%lld", opt->order_prefix,
                         (long long)(opt->attempts - 1));
        if (n < 0 || n >= VL_ORDER_ID_MAX) {
            snprintf(err, errlen, "order ids would be longer than %d bytes: shorten --order-prefix",
                     VL_ORDER_ID_MAX - 1);
            return VC_ERR_INVALID;
        }
        int64_t i, n_codes = opt->ncodes > 0 ? opt->ncodes : 1;

        for (i = 0; i < n_codes; i++) {
            if (!vl_request_format(request, sizeof(request), l->host_header, opt->token,
                                   vl_code_of(opt, i), INT64_MAX, order_id, opt->amount,
                                   opt->forwarded)) {
                snprintf(err, errlen,
                         "the request for code \"%.64s\" does not fit in %d bytes: shorten the "
                         "code or --token",
                         vl_code_of(opt, i), REQUEST_MAX);
                return VC_ERR_INVALID;
            }
        }
    }
    return 0;
}

int vl_run(const vl_options_t *opt, vl_result_cb result_cb, void *arg, vl_stats_t *stats, char *err,
           size_t errlen)
{
    load_t *l;
    int rc;

    memset(stats, 0, sizeof(*stats));
    vc_hist_reset(&stats->latency_us);
    stats->planned = opt->attempts > 0 ? (uint64_t)opt->attempts : 0;
    if (opt->connections < 1 || opt->attempts < 0 || opt->connect_timeout_ms < 1) {
        snprintf(err, errlen, "connections and connect timeout must be positive");
        return VC_ERR_INVALID;
    }
    if (!(l = calloc(1, sizeof(*l))))
        return VC_ERR_NOMEM;
    if ((rc = setup(l, opt, err, errlen)) != 0)
        goto out;
    l->opt = opt;
    l->result_cb = result_cb;
    l->arg = arg;
    l->stats = stats;
    /* No more connections than attempts: the rest would only sit idle. */
    l->nconns = (size_t)opt->connections;
    if (opt->attempts < opt->connections)
        l->nconns = opt->attempts > 0 ? (size_t)opt->attempts : 1;
    l->conns = calloc(l->nconns, sizeof(*l->conns));
    l->idle = calloc(l->nconns, sizeof(*l->idle));
    if (!l->conns || !l->idle) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    l->settings.on_message_begin = on_message_begin;
    l->settings.on_header_field = on_header_field;
    l->settings.on_header_value = on_header_value;
    l->settings.on_body = on_body;
    l->settings.on_message_complete = on_message_complete;

    VC_ASSERT(uv_loop_init(&l->loop) == 0);
    uv_timer_init(&l->loop, &l->sched);
    uv_timer_init(&l->loop, &l->watchdog);
    uv_signal_init(&l->loop, &l->sigint);
    uv_signal_init(&l->loop, &l->sigterm);
    l->sched.data = l->watchdog.data = l->sigint.data = l->sigterm.data = l;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);

    l->t0_ns = uv_hrtime();
    l->wall0_us = wall_now_us();
    l->last_usable_ns = l->t0_ns;
    uv_timer_start(&l->watchdog, on_watchdog, WATCHDOG_MS, WATCHDOG_MS);
    for (size_t i = 0; i < l->nconns; i++) {
        conn_t *c = &l->conns[i];
        c->load = l;
        c->state = CONN_DOWN;
        uv_timer_init(&l->loop, &c->timer);
        c->timer.data = c;
        conn_connect(c);
    }
    maybe_finish(l); /* zero attempts */
    uv_run(&l->loop, UV_RUN_DEFAULT);
    VC_ASSERT(uv_loop_close(&l->loop) == 0);

    if (stats->connects == 0) {
        snprintf(err, errlen, "could not connect to %s within %lld ms (%llu failed connects)",
                 l->host_header, (long long)opt->connect_timeout_ms,
                 (unsigned long long)stats->connect_errors);
        rc = VC_ERR_UNAVAILABLE;
    }
out:
    free(l->conns);
    free(l->idle);
    free(l);
    return rc;
}
