#include "gw_redis.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "gw_metrics.h"
#include "vc_num.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_redis_cluster.h"
#include "vc_time.h"

#define GW_REDIS_MAX_PENDING 100000
#define GW_REDIS_BACKOFF_MIN_MS 50
#define GW_REDIS_BACKOFF_MAX_MS 2000
/*
 * A command late by its deadline fails alone (VC_ERR_TIMEOUT) and the
 * connection stays: under a burst Redis answers late, not never, and
 * dropping the connection would fail every command pipelined behind it. The
 * connection is dropped when the oldest command has waited this many
 * timeouts, and at least GW_REDIS_HUNG_MIN_MS: then Redis is taken as hung.
 */
#define GW_REDIS_HUNG_FACTOR 4
#define GW_REDIS_HUNG_MIN_MS 2000
#define GW_REDIS_TIMEOUT_LOG_MS 5000 /* at most one timeout warning this often */
#define GW_REDIS_FENCE_RECHECK_MS 500 /* while fenced, the check again at most this often */
#define GW_REDIS_FENCE_REFUSED_RECHECK_MS 5000 /* and while Redis refuses the check (an ACL) */
/*
 * What a node's connection gives its cluster router for a MOVED or ASK
 * (reply: the error's text); never seen outside this file.
 */
#define GW_REDIS_REDIRECTED (-100)
#define GW_REDIS_MAX_REDIRECTS 5

/*
 * ---- hiredis on libuv: hiredis's own glue (adapters/libuv.h), but writes wait for the loop turn ----
 *
 * hiredis asks to be told when its socket is writable each time a command is
 * queued, and stops asking once the commands are written: with its stock
 * glue that is two epoll_ctl calls and one more wake-up of the loop for each
 * batch of commands, on every reservation (they showed in the profile of the
 * success path, tests/bench/results/2026-11-30-gateway-cpu.md). Here the
 * commands queued during a turn of the loop are written at the end of it, by
 * a prepare handle (it runs before the loop waits for I/O), in one write.
 * Only when the socket takes less than everything, or before the connection
 * is up, does the glue wait for the socket to become writable, as the stock
 * glue always does. And the poll is changed only when what it waits for does.
 */
typedef struct {
    redisAsyncContext *ac; /* NULL once hiredis let go of it */
    uv_poll_t poll;
    uv_prepare_t flush;
    int events;  /* UV_READABLE, UV_WRITABLE: what poll waits for */
    int writing; /* inside redisAsyncHandleWrite(): a write request means the socket is full */
    int open;    /* handles not closed yet: the struct goes with the last */
} redis_glue_t;

static void glue_poll_cb(uv_poll_t *handle, int status, int events)
{
    redis_glue_t *g = handle->data;

    if (status != 0)
        return;
    if (g->ac && (events & UV_READABLE))
        redisAsyncHandleRead(g->ac);
    if (g->ac && (events & UV_WRITABLE)) {
        g->writing = 1;
        redisAsyncHandleWrite(g->ac); /* may free the context: g stays until its close */
        g->writing = 0;
    }
}

/*
 * Polls for events, and only when they change: uv_poll_start() stops the
 * poll first, which takes the socket out of epoll (EPOLL_CTL_DEL) and puts it
 * back on the next turn, two system calls each time, while hiredis asks to
 * read after every read and every write.
 */
static void glue_set(redis_glue_t *g, int events)
{
    if (events == g->events)
        return;
    g->events = events;
    if (events)
        uv_poll_start(&g->poll, events, glue_poll_cb);
    else
        uv_poll_stop(&g->poll);
}

/* The end of a loop turn: the commands it queued go out in one write. */
static void glue_flush_cb(uv_prepare_t *handle)
{
    redis_glue_t *g = handle->data;

    uv_prepare_stop(&g->flush);
    if (!g->ac || (g->events & UV_WRITABLE))
        return; /* already waiting for the socket: the poll writes */
    g->writing = 1;
    redisAsyncHandleWrite(g->ac); /* may free the context: g stays until its close */
    g->writing = 0;
}

static void glue_add_read(void *privdata)
{
    redis_glue_t *g = privdata;
    glue_set(g, g->events | UV_READABLE);
}

static void glue_del_read(void *privdata)
{
    redis_glue_t *g = privdata;
    glue_set(g, g->events & ~UV_READABLE);
}

static void glue_add_write(void *privdata)
{
    redis_glue_t *g = privdata;

    /* Not connected yet (writable tells it is), or the socket took less than all: wait for it. */
    if (g->writing || !(g->ac->c.flags & REDIS_CONNECTED)) {
        glue_set(g, g->events | UV_WRITABLE);
        return;
    }
    if (!(g->events & UV_WRITABLE))
        uv_prepare_start(&g->flush, glue_flush_cb); /* no-op when already started */
}

static void glue_del_write(void *privdata)
{
    redis_glue_t *g = privdata;
    glue_set(g, g->events & ~UV_WRITABLE);
}

static void glue_close_cb(uv_handle_t *handle)
{
    redis_glue_t *g = handle->data;
    if (--g->open == 0)
        free(g);
}

static void glue_cleanup(void *privdata)
{
    redis_glue_t *g = privdata;

    g->ac = NULL; /* hiredis is freeing it */
    uv_close((uv_handle_t *)&g->poll, glue_close_cb);
    uv_close((uv_handle_t *)&g->flush, glue_close_cb);
}

/* Hooks ac's socket into loop. Returns 0, or -1 (ac untouched: the caller frees it). */
static int glue_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    redis_glue_t *g;

    if (ac->ev.data || !(g = calloc(1, sizeof(*g))))
        return -1;
    if (uv_poll_init(loop, &g->poll, ac->c.fd) != 0) {
        free(g);
        return -1;
    }
    uv_prepare_init(loop, &g->flush); /* cannot fail */
    g->ac = ac;
    g->poll.data = g;
    g->flush.data = g;
    g->open = 2;
    ac->ev.data = g;
    ac->ev.addRead = glue_add_read;
    ac->ev.delRead = glue_del_read;
    ac->ev.addWrite = glue_add_write;
    ac->ev.delWrite = glue_del_write;
    ac->ev.cleanup = glue_cleanup;
    return 0;
}

/* One command handed to hiredis; freed in its hiredis callback, which always runs. */
typedef struct cmd {
    struct cmd *prev, *next; /* the pending list, oldest first */
    gw_redis_t *r;
    int64_t sent_ms;
    uint64_t sent_ns; /* uv_hrtime(): the round trip's histogram */
    int64_t deadline_ms;
    int64_t blocks_ms; /* how long Redis may hold it by design (a WAIT's own timeout), else 0 */
    gw_redis_cb cb;
    void *arg;
    int done; /* cb has run (timed out, or handed to a retry): only the reply is awaited */
    /* A reply that is not an error goes here whole instead of to cb (CLUSTER SLOTS). */
    void (*raw)(void *arg, const redisReply *x);
    int listed;
    int internal; /* the connection's own (AUTH, SELECT, SCRIPT LOAD, the fence): never fenced */
    long script; /* registered script, or -1: for the EVAL fallback */
    int argc;
    const char **argv;
    size_t *argvlen;
    char *resp; /* the command in Redis's protocol, resp_len bytes (cmd_new) */
    size_t resp_len;
} cmd_t;

/* A registered script: its SHA once SCRIPT LOAD told it. */
typedef struct {
    gw_redis_t *r;
    char sha[41]; /* "" until known: EVAL is used meanwhile */
    int loading;  /* a SCRIPT LOAD is pending */
} script_t;

struct gw_redis {
    uv_loop_t *loop;
    redisAsyncContext *ctx; /* NULL while disconnected */
    int connected;
    char host[256];
    int port, db;
    char user[128], password[256]; /* for AUTH; the password is never logged */
    int auth_refused;              /* the last AUTH failed: keep backing off */
    /*
     * The restart fence (gw_redis_new): with fence on, every command but the
     * connection's own is refused unsent until fence.lua says this Redis
     * process's run_id is the one the reconciler verified. verified is of the
     * connection: a Redis restart breaks it, and the next one checks again.
     */
    int fence, verified, fence_checking, fence_check_refused;
    int64_t fence_checked_ms;         /* monotonic: when the last check was answered */
    char fence_refused_run_id[48];    /* the run_id last logged as not verified */
    int64_t timeout_ms;
    const char *const *scripts;
    size_t nscripts;
    script_t *slot; /* nscripts */
    cmd_t *head, *tail; /* sent, no reply yet; the timed-out ones come first */
    cmd_t *live;        /* the first of them whose callback has not run */
    size_t npending;
    int64_t hung_ms;
    uint64_t timeouts_unlogged;
    int64_t timeout_logged_ms;
    uv_timer_t deadline_timer, reconnect_timer;
    int64_t backoff_ms;
    int fail_rc; /* what commands hiredis ends without a reply get */
    int closing, open_handles;
    void (*closed_cb)(void *arg);
    void *closed_arg;
    atomic_int *up;
    /*
     * Cluster mode (redis+cluster://): this one is a router without a
     * connection of its own, over one child connection per node; each
     * command goes to the master of its first key's slot.
     */
    int cluster;
    gw_redis_t *router;       /* a child's router; NULL otherwise */
    vc_redis_slot_map_t *map; /* router: which master serves each slot */
    gw_redis_t *child[VC_REDIS_CLUSTER_MAX_NODES];
    int nchild, children_open, refreshing;
};

static void router_connected(gw_redis_t *rt);
static gw_redis_t *router_child(gw_redis_t *rt, const char *host, int port);

static void set_connected(gw_redis_t *r, int connected)
{
    r->connected = connected;
    if (r->up)
        atomic_store(r->up, connected);
    if (r->router)
        router_connected(r->router);
}

static void connect_now(gw_redis_t *r);
static void load_script(gw_redis_t *r, size_t i);

static void list_add(gw_redis_t *r, cmd_t *c)
{
    c->prev = r->tail;
    c->next = NULL;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    c->listed = 1;
    r->npending++;
    if (!r->live)
        r->live = c;
}

static void list_remove(gw_redis_t *r, cmd_t *c)
{
    if (!c->listed)
        return;
    if (r->live == c)
        r->live = c->next;
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->tail = c->prev;
    c->listed = 0;
    r->npending--;
}

static void deadline_cb(uv_timer_t *t);
static void reconnect_cb(uv_timer_t *t);

/*
 * Makes the deadline timer fire when the next thing is due: the deadline of
 * the oldest command still waiting for its callback, or the moment the
 * oldest command of all makes the connection hung.
 */
static void arm_deadline(gw_redis_t *r)
{
    int64_t due, wait;

    if (!r->head || r->closing || uv_is_active((uv_handle_t *)&r->deadline_timer))
        return;
    due = r->head->sent_ms + r->hung_ms + r->head->blocks_ms;
    if (r->live && r->live->deadline_ms < due)
        due = r->live->deadline_ms;
    wait = due - vc_time_mono_ms();
    uv_timer_start(&r->deadline_timer, deadline_cb, wait > 0 ? (uint64_t)wait : 0, 0);
}

static void schedule_reconnect(gw_redis_t *r)
{
    if (r->closing || uv_is_active((uv_handle_t *)&r->reconnect_timer))
        return;
    uv_timer_start(&r->reconnect_timer, reconnect_cb, (uint64_t)r->backoff_ms, 0);
    r->backoff_ms *= 2;
    if (r->backoff_ms > GW_REDIS_BACKOFF_MAX_MS)
        r->backoff_ms = GW_REDIS_BACKOFF_MAX_MS;
}

/* Drops the connection: hiredis ends every pending command, which then gets rc. */
static void drop(gw_redis_t *r, int rc)
{
    redisAsyncContext *ac = r->ctx;

    if (!ac)
        return;
    r->ctx = NULL;
    set_connected(r, 0);
    r->fail_rc = rc;
    redisAsyncFree(ac);
    r->fail_rc = VC_ERR_UNAVAILABLE;
    schedule_reconnect(r);
}

static void deadline_cb(uv_timer_t *t)
{
    gw_redis_t *r = t->data;
    int64_t now = vc_time_mono_ms();
    cmd_t *c;

    /* Late commands fail one by one; their replies are still read and dropped. */
    while ((c = r->live) && c->deadline_ms <= now && !r->closing) {
        r->live = c->next;
        c->done = 1;
        r->timeouts_unlogged++;
        gw_metrics_redis_error(VC_ERR_TIMEOUT);
        c->cb(c->arg, VC_ERR_TIMEOUT, NULL);
    }
    if (r->timeouts_unlogged && now - r->timeout_logged_ms >= GW_REDIS_TIMEOUT_LOG_MS) {
        vc_warn("redis %s:%d: %llu commands got no reply within %lld ms and failed; %zu pending",
                r->host, r->port, (unsigned long long)r->timeouts_unlogged,
                (long long)r->timeout_ms, r->npending);
        r->timeouts_unlogged = 0;
        r->timeout_logged_ms = now;
    }
    if (r->head && r->head->sent_ms + r->hung_ms + r->head->blocks_ms <= now) {
        int soerr = 0;
        socklen_t len = sizeof(soerr);

        /*
         * hiredis 0.14's libuv adapter drops the poll error of a failed
         * connect, so a refused connection looks like a silent one: ask the
         * socket what became of its connect, and say that instead.
         */
        if (!r->connected && r->ctx && r->ctx->c.fd >= 0 &&
            getsockopt(r->ctx->c.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr != 0)
            vc_warn("redis %s:%d: cannot connect: %s; %zu commands pending: trying again",
                    r->host, r->port, strerror(soerr), r->npending);
        else
            vc_warn("redis %s:%d: no reply for %lld ms, %zu commands pending: reconnecting",
                    r->host, r->port, (long long)(now - r->head->sent_ms), r->npending);
        drop(r, VC_ERR_TIMEOUT);
    }
    arm_deadline(r);
}

static void reconnect_cb(uv_timer_t *t)
{
    connect_now(t->data);
}

static int error_class(const char *s, size_t len)
{
    static const char *const transient[] = {"LOADING",     "BUSY",       "MASTERDOWN",
                                            "READONLY",    "OOM",        "TRYAGAIN",
                                            "CLUSTERDOWN", "NOREPLICAS", NULL};
    for (const char *const *p = transient; *p; p++) {
        size_t n = strlen(*p);
        if (len >= n && memcmp(s, *p, n) == 0)
            return VC_ERR_UNAVAILABLE;
    }
    return VC_ERR_PROTOCOL;
}

static void flatten_item(const redisReply *x, gw_redis_reply_t *out, size_t i)
{
    out->item[i].type = GW_REDIS_NIL;
    out->item[i].integer = 0;
    out->item[i].str = NULL;
    out->item[i].len = 0;
    switch (x->type) {
    case REDIS_REPLY_INTEGER:
        out->item[i].type = GW_REDIS_INT;
        out->item[i].integer = x->integer;
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        out->item[i].type = GW_REDIS_STR;
        out->item[i].str = x->str;
        out->item[i].len = (size_t)x->len;
        break;
    default:
        break;
    }
}

static void flatten(const redisReply *x, gw_redis_reply_t *out)
{
    if (x->type == REDIS_REPLY_ARRAY) {
        out->n = x->elements < GW_REDIS_MAX_ITEMS ? x->elements : GW_REDIS_MAX_ITEMS;
        for (size_t i = 0; i < out->n; i++)
            flatten_item(x->element[i], out, i);
    } else {
        out->n = 1;
        flatten_item(x, out, 0);
    }
}

/* Writes "<mark><n>\r\n" at p; returns the bytes written (at most VC_I64_TEXT + 2). */
static size_t resp_header(char *p, char mark, size_t n)
{
    size_t len;

    p[0] = mark;
    len = 1 + vc_i64_text(p + 1, (int64_t)n);
    p[len++] = '\r';
    p[len++] = '\n';
    return len;
}

/*
 * Copies argv into a new command, and writes it in Redis's protocol (RESP)
 * once, here: hiredis's own formatting (redisAsyncCommandArgv) goes through
 * sdscatfmt and a few allocations per command, which showed in the profile of
 * the success path, four commands a reservation.
 */
static cmd_t *cmd_new(gw_redis_t *r, int argc, const char **argv, const size_t *argvlen)
{
    size_t total = sizeof(cmd_t) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    size_t resp = VC_I64_TEXT + 3; /* "*<argc>\r\n", with room for the NUL vc_i64_text() writes */
    cmd_t *c;
    char *p;

    for (int i = 0; i < argc; i++) {
        total += argvlen[i] + 1;
        resp += VC_I64_TEXT + 2 + argvlen[i] + 2; /* "$<len>\r\n<arg>\r\n" */
    }
    if (!(c = malloc(total + resp)))
        return NULL;
    memset(c, 0, sizeof(*c));
    c->r = r;
    c->script = -1;
    c->argc = argc;
    c->argv = (const char **)(c + 1);
    c->argvlen = (size_t *)(c->argv + argc);
    p = (char *)(c->argvlen + argc);
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], argvlen[i]);
        p[argvlen[i]] = '\0';
        c->argv[i] = p;
        c->argvlen[i] = argvlen[i];
        p += argvlen[i] + 1;
    }
    c->resp = p;
    p += resp_header(p, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        p += resp_header(p, '$', argvlen[i]);
        memcpy(p, argv[i], argvlen[i]);
        p += argvlen[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    c->resp_len = (size_t)(p - c->resp);
    return c;
}

static void reply_cb(redisAsyncContext *ac, void *reply, void *privdata);
static void fence_check_due(gw_redis_t *r);

/* Hands c to hiredis. Returns 0, or frees c and returns a negative VC_ERR_*. */
static int cmd_send(gw_redis_t *r, cmd_t *c)
{
    if (!r->ctx || r->closing) {
        free(c);
        return r->closing ? VC_ERR_SHUTDOWN : VC_ERR_UNAVAILABLE;
    }
    if (r->npending >= GW_REDIS_MAX_PENDING) {
        free(c);
        return VC_ERR_UNAVAILABLE;
    }
    if (r->fence && !r->verified && !c->internal) {
        free(c);
        fence_check_due(r);
        gw_metrics_redis_error(VC_ERR_FENCED);
        return VC_ERR_FENCED;
    }
    if (redisAsyncFormattedCommand(r->ctx, reply_cb, c, c->resp, c->resp_len) != REDIS_OK) {
        free(c);
        return VC_ERR_UNAVAILABLE;
    }
    /* One clock read a command (CLOCK_MONOTONIC, as vc_time_mono_ms()): a reservation sends several. */
    c->sent_ns = uv_hrtime();
    c->sent_ms = (int64_t)(c->sent_ns / 1000000);
    if (!c->deadline_ms)
        c->deadline_ms = c->sent_ms + r->timeout_ms + c->blocks_ms;
    list_add(r, c);
    arm_deadline(r);
    return 0;
}

/* NOSCRIPT: the server lost the script (restart, SCRIPT FLUSH); send the source with EVAL. */
static int retry_with_eval(gw_redis_t *r, cmd_t *old)
{
    const char **argv = malloc((size_t)old->argc * sizeof(char *));
    size_t *argvlen = malloc((size_t)old->argc * sizeof(size_t));
    cmd_t *c = NULL;
    int rc = VC_ERR_NOMEM;

    if (!argv || !argvlen)
        goto out;
    memcpy(argv, old->argv, (size_t)old->argc * sizeof(char *));
    memcpy(argvlen, old->argvlen, (size_t)old->argc * sizeof(size_t));
    argv[0] = "EVAL";
    argvlen[0] = 4;
    argv[1] = r->scripts[old->script];
    argvlen[1] = strlen(r->scripts[old->script]);
    if (!(c = cmd_new(r, old->argc, argv, argvlen)))
        goto out;
    c->cb = old->cb;
    c->arg = old->arg;
    /* Its deadline is counted afresh in cmd_send(): the old one waits no longer. */
    rc = cmd_send(r, c);
out:
    free(argv);
    free(argvlen);
    return rc;
}

static void reply_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
    cmd_t *c = privdata;
    gw_redis_t *r = c->r;
    const redisReply *x = reply;
    gw_redis_reply_t flat;
    int rc;

    list_remove(r, c);
    if (x)
        gw_metrics_redis_roundtrip((int64_t)((uv_hrtime() - c->sent_ns) / 1000));
    if (c->done)
        goto out;
    c->done = 1;
    if (!x) {
        /* The connection is going away (lost, dropped, or closing). */
        if (ac == r->ctx) {
            r->ctx = NULL;
            set_connected(r, 0);
            schedule_reconnect(r);
        }
        gw_metrics_redis_error(r->fail_rc);
        c->cb(c->arg, r->fail_rc, NULL);
        goto out;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        vc_redis_redirect_t redirect;

        if (c->script >= 0 && x->len >= 8 && memcmp(x->str, "NOSCRIPT", 8) == 0 &&
            (rc = retry_with_eval(r, c)) == 0)
            goto out;
        /* The command did not run: the router sends it where the cluster says. */
        if (r->router &&
            vc_redis_redirect_parse(x->str, (size_t)x->len, &redirect) != VC_REDIS_NOT_REDIRECT) {
            flatten(x, &flat);
            c->cb(c->arg, GW_REDIS_REDIRECTED, &flat);
            goto out;
        }
        rc = error_class(x->str, (size_t)x->len);
        /* The caller reports the failure; only here is Redis's text known. */
        if (rc == VC_ERR_PROTOCOL)
            vc_warn("redis %s: %.200s", c->argv[0], x->str);
        gw_metrics_redis_error(rc);
        c->cb(c->arg, rc, NULL);
        goto out;
    }
    if (c->raw)
        c->raw(c->arg, x);
    else {
        flatten(x, &flat);
        c->cb(c->arg, 0, &flat);
    }
out:
    free(c);
}

static int router_command(gw_redis_t *rt, gw_redis_cb cb, void *arg, long script, int nkeys,
                          int argc, const char **argv, const size_t *argvlen);

/*
 * A command Redis holds for up to blocks_ms by design (WAIT): its deadline,
 * and the time after which its connection is taken as hung, count that wait
 * on top of the command timeout. Without it a WAIT timeout above the command
 * timeout failed every WAIT that used it (503, "timed out"), and one above
 * the hung time dropped the connection. The commands sent after it on the
 * connection wait for its reply too, and fail no sooner than it does.
 */
static int command_blocking(gw_redis_t *r, gw_redis_cb cb, void *arg, int argc,
                            const char **argv, const size_t *argvlen, int64_t blocks_ms)
{
    cmd_t *c = cmd_new(r, argc, argv, argvlen);

    if (!c)
        return VC_ERR_NOMEM;
    c->cb = cb;
    c->arg = arg;
    c->blocks_ms = blocks_ms;
    return cmd_send(r, c);
}

/* A command of the connection itself, which the restart fence lets through. */
static int command_internal(gw_redis_t *r, gw_redis_cb cb, void *arg, int argc,
                            const char **argv, const size_t *argvlen)
{
    cmd_t *c = cmd_new(r, argc, argv, argvlen);

    if (!c)
        return VC_ERR_NOMEM;
    c->cb = cb;
    c->arg = arg;
    c->internal = 1;
    return cmd_send(r, c);
}

int gw_redis_command(gw_redis_t *r, gw_redis_cb cb, void *arg, int argc, const char **argv,
                     const size_t *argvlen)
{
    if (r->cluster)
        return router_command(r, cb, arg, -1, 0, argc, argv, argvlen);
    return command_blocking(r, cb, arg, argc, argv, argvlen, 0);
}

/*
 * Puts a script's keys then its arguments after the argc strings of argv and
 * sets the lengths of all; returns the new count.
 */
static int append_strings(const char **argv, size_t *argvlen, int argc, int nkeys,
                          const char *const *keys, int nargs, const char *const *args)
{
    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    for (int i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);
    return argc;
}

int gw_redis_eval(gw_redis_t *r, size_t script, gw_redis_cb cb, void *arg, int nkeys,
                  const char *const *keys, int nargs, const char *const *args)
{
    const char *argv[3 + 16];
    size_t argvlen[3 + 16];
    char nkeys_s[VC_I64_TEXT];
    int argc = 0;
    cmd_t *c;

    VC_ASSERT(script < r->nscripts && nkeys >= 0 && nargs >= 0 && nkeys + nargs <= 16);
    if (r->cluster) {
        /* The keys then the arguments, as the router keeps them until a node has run them. */
        argc = append_strings(argv, argvlen, 0, nkeys, keys, nargs, args);
        return router_command(r, cb, arg, (long)script, nkeys, argc, argv, argvlen);
    }
    vc_i64_text(nkeys_s, nkeys);
    if (r->slot[script].sha[0]) {
        argv[argc++] = "EVALSHA";
        argv[argc++] = r->slot[script].sha;
    } else {
        /* Learn the SHA for next time; this call carries the source. */
        load_script(r, script);
        argv[argc++] = "EVAL";
        argv[argc++] = r->scripts[script];
    }
    argv[argc++] = nkeys_s;
    argc = append_strings(argv, argvlen, argc, nkeys, keys, nargs, args);
    if (!(c = cmd_new(r, argc, argv, argvlen)))
        return VC_ERR_NOMEM;
    c->cb = cb;
    c->arg = arg;
    c->script = (long)script;
    return cmd_send(r, c);
}

int gw_redis_wait(gw_redis_t *r, const char *key, int64_t replicas, int64_t timeout_ms,
                  gw_redis_cb cb, void *arg)
{
    char n[24], ms[24];
    const char *argv[] = {"WAIT", n, ms};
    size_t argvlen[3];

    snprintf(n, sizeof(n), "%lld", (long long)replicas);
    snprintf(ms, sizeof(ms), "%lld", (long long)timeout_ms);
    for (int i = 0; i < 3; i++)
        argvlen[i] = strlen(argv[i]);
    if (r->cluster) {
        /* WAIT names no key: it goes to the master the key's writes went to. */
        int node = r->map->owner[vc_redis_key_slot(key, strlen(key))];
        gw_redis_t *child;

        if (node == VC_REDIS_NO_NODE ||
            !(child = router_child(r, r->map->nodes[node].host, r->map->nodes[node].port)))
            return VC_ERR_UNAVAILABLE;
        r = child;
    }
    return command_blocking(r, cb, arg, 3, argv, argvlen, timeout_ms);
}

int gw_redis_same_node(const gw_redis_t *r, const char *a, const char *b)
{
    uint16_t na, nb;

    if (!r->cluster)
        return 1;
    na = r->map->owner[vc_redis_key_slot(a, strlen(a))];
    nb = r->map->owner[vc_redis_key_slot(b, strlen(b))];
    /* A slot the map does not know is not known to share anything. */
    return na != VC_REDIS_NO_NODE && na == nb;
}

int gw_redis_ordered(const gw_redis_t *r)
{
    return !r->cluster;
}

/* SCRIPT LOAD answered: remember the SHA so later calls send EVALSHA. */
static void script_loaded_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    script_t *slot = arg;

    slot->loading = 0;
    if (rc == 0 && reply->n == 1 && reply->item[0].type == GW_REDIS_STR &&
        reply->item[0].len == 40) {
        memcpy(slot->sha, reply->item[0].str, 40);
        slot->sha[40] = '\0';
    }
    /* Otherwise EVAL carries the source until a later SCRIPT LOAD works. */
}

/* Sends SCRIPT LOAD for script i unless one is pending. */
static void load_script(gw_redis_t *r, size_t i)
{
    const char *argv[] = {"SCRIPT", "LOAD", r->scripts[i]};
    size_t argvlen[] = {6, 4, strlen(r->scripts[i])};

    if (r->slot[i].loading)
        return;
    if (command_internal(r, script_loaded_cb, &r->slot[i], 3, argv, argvlen) == 0)
        r->slot[i].loading = 1;
}

static void auth_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_redis_t *r = arg;
    (void)reply;

    if (rc == 0) {
        r->auth_refused = 0;
        r->backoff_ms = GW_REDIS_BACKOFF_MIN_MS;
        return;
    }
    /* A connection lost or closing: its own path logs it and reconnects. */
    if (rc != VC_ERR_PROTOCOL)
        return;
    /*
     * Redis refused the credentials (WRONGPASS, or NOAUTH, its text is logged
     * by reply_cb): every command behind would fail. Drop the connection, so
     * that /readyz says so, and try again with the backoff growing (a
     * password being rotated in Redis may be accepted on a later try).
     */
    vc_error("redis %s:%d: AUTH%s%s failed: check the user and password of VOUCHER_REDIS_URL",
             r->host, r->port, r->user[0] ? " as user " : "", r->user);
    r->auth_refused = 1;
    drop(r, VC_ERR_UNAVAILABLE);
}

static void select_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_redis_t *r = arg;
    (void)reply;
    if (rc != 0 && rc != VC_ERR_SHUTDOWN)
        vc_error("redis SELECT %d failed: %s", r->db, vc_strerror(rc));
}

/* fence.lua's check answered: {run_id, fence}. */
static void fence_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_redis_t *r = arg;
    const char *id;
    size_t len;

    r->fence_checking = 0;
    r->fence_checked_ms = vc_time_mono_ms();
    if (rc != 0) {
        /* A connection lost or closing says so itself; Redis's refusal (an ACL) also in reply_cb. */
        if (rc == VC_ERR_PROTOCOL && !r->fence_check_refused)
            vc_warn("redis %s:%d: the restart fence cannot be checked (the user needs +info "
                    "and +eval): refusing commands",
                    r->host, r->port);
        r->fence_check_refused = rc == VC_ERR_PROTOCOL;
        return;
    }
    r->fence_check_refused = 0;
    if (reply->n != 2 || reply->item[0].type != GW_REDIS_STR ||
        reply->item[1].type != GW_REDIS_STR) {
        vc_warn("redis %s:%d: unexpected reply to the restart fence's check", r->host, r->port);
        return;
    }
    id = reply->item[0].str;
    len = reply->item[0].len;
    if (len == reply->item[1].len && memcmp(id, reply->item[1].str, len) == 0) {
        r->verified = 1;
        r->fence_refused_run_id[0] = '\0';
        vc_info("redis %s:%d: run_id %.*s verified by the reconciler", r->host, r->port,
                (int)len, id);
        return;
    }
    /* Said once per Redis process, not once per check. */
    if (len >= sizeof(r->fence_refused_run_id) ||
        strncmp(r->fence_refused_run_id, id, sizeof(r->fence_refused_run_id)) != 0) {
        snprintf(r->fence_refused_run_id, sizeof(r->fence_refused_run_id), "%.*s", (int)len, id);
        vc_warn("redis %s:%d: run_id %s not verified (" VC_KEY_FENCE " %s%.*s): refusing commands "
                "until the reconciler has verified its state (Redis restarted, or lost its keys)",
                r->host, r->port, r->fence_refused_run_id, reply->item[1].len ? "holds " : "absent",
                (int)reply->item[1].len, reply->item[1].str);
    }
}

/* Sends fence.lua's check unless one is pending. */
static void fence_check(gw_redis_t *r)
{
    const char *argv[] = {"EVAL", vc_lua_fence, "1", VC_KEY_FENCE, "check"};
    size_t argvlen[5];

    if (r->fence_checking)
        return;
    for (int i = 0; i < 5; i++)
        argvlen[i] = strlen(argv[i]);
    if (command_internal(r, fence_cb, r, 5, argv, argvlen) == 0)
        r->fence_checking = 1;
}

/* While refused: the check again, at most every GW_REDIS_FENCE_RECHECK_MS (an ACL's refusal: less). */
static void fence_check_due(gw_redis_t *r)
{
    int64_t every = r->fence_check_refused ? GW_REDIS_FENCE_REFUSED_RECHECK_MS
                                           : GW_REDIS_FENCE_RECHECK_MS;

    if (!r->fence_checking && vc_time_mono_ms() - r->fence_checked_ms >= every)
        fence_check(r);
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    gw_redis_t *r = ac->data;

    if (ac != r->ctx)
        return;
    if (status != REDIS_OK) {
        vc_warn("redis %s:%d: connect failed: %s", r->host, r->port, ac->errstr);
        r->ctx = NULL; /* hiredis frees it after this callback */
        schedule_reconnect(r);
        return;
    }
    set_connected(r, 1);
    /* After a refused AUTH the backoff keeps growing until one is accepted. */
    if (!r->auth_refused)
        r->backoff_ms = GW_REDIS_BACKOFF_MIN_MS;
    vc_info("redis %s:%d connected", r->host, r->port);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    gw_redis_t *r = ac->data;

    if (ac != r->ctx)
        return;
    vc_warn("redis %s:%d: connection lost%s%s", r->host, r->port, status == REDIS_OK ? "" : ": ",
            status == REDIS_OK ? "" : ac->errstr);
    r->ctx = NULL;
    set_connected(r, 0);
    schedule_reconnect(r);
}

static void connect_now(gw_redis_t *r)
{
    redisAsyncContext *ac;
    char db[16];

    if (r->closing || r->ctx)
        return;
    ac = redisAsyncConnect(r->host, r->port);
    if (!ac) {
        schedule_reconnect(r);
        return;
    }
    if (ac->err) {
        vc_warn("redis %s:%d: connect failed: %s", r->host, r->port, ac->errstr);
        redisAsyncFree(ac);
        schedule_reconnect(r);
        return;
    }
    ac->data = r;
    if (glue_attach(ac, r->loop) != 0) {
        redisAsyncFree(ac);
        schedule_reconnect(r);
        return;
    }
    redisAsyncSetConnectCallback(ac, connect_cb);
    redisAsyncSetDisconnectCallback(ac, disconnect_cb);
    r->ctx = ac;
    /* Pipelined behind the connect: AUTH first, then SELECT, then the scripts. */
    if (r->password[0]) {
        const char *argv[] = {"AUTH", r->user, r->password};
        size_t argvlen[] = {4, strlen(r->user), strlen(r->password)};
        int with_user = r->user[0] != '\0';

        if (!with_user) {
            argv[1] = r->password;
            argvlen[1] = argvlen[2];
        }
        command_internal(r, auth_cb, r, with_user ? 3 : 2, argv, argvlen);
    }
    if (r->db != 0) {
        const char *argv[] = {"SELECT", db};
        size_t argvlen[2] = {6, 0};
        snprintf(db, sizeof(db), "%d", r->db);
        argvlen[1] = strlen(db);
        command_internal(r, select_cb, r, 2, argv, argvlen);
    }
    /* A new connection may be to a restarted Redis: checked before anything else goes. */
    r->verified = 0;
    r->fence_checking = 0;
    if (r->fence)
        fence_check(r);
    for (size_t i = 0; i < r->nscripts; i++)
        load_script(r, i);
}

static int router_new(gw_redis_t **out, uv_loop_t *loop, const vc_redis_url_t *url,
                      int64_t timeout_ms, const char *const *scripts, size_t nscripts,
                      atomic_int *up);

int gw_redis_new(gw_redis_t **out, uv_loop_t *loop, const vc_redis_url_t *url, int64_t timeout_ms,
                 const char *const *scripts, size_t nscripts, atomic_int *up, int fence)
{
    gw_redis_t *r;

    if (url->cluster)
        return router_new(out, loop, url, timeout_ms, scripts, nscripts, up);
    r = calloc(1, sizeof(*r));

    if (!r || !(r->slot = calloc(nscripts ? nscripts : 1, sizeof(*r->slot)))) {
        free(r);
        return VC_ERR_NOMEM;
    }
    r->loop = loop;
    snprintf(r->host, sizeof(r->host), "%s", url->host);
    r->port = url->port;
    r->db = url->db;
    snprintf(r->user, sizeof(r->user), "%s", url->user);
    snprintf(r->password, sizeof(r->password), "%s", url->password);
    r->timeout_ms = timeout_ms;
    r->hung_ms = timeout_ms * GW_REDIS_HUNG_FACTOR;
    if (r->hung_ms < GW_REDIS_HUNG_MIN_MS)
        r->hung_ms = GW_REDIS_HUNG_MIN_MS;
    r->scripts = scripts;
    r->nscripts = nscripts;
    r->backoff_ms = GW_REDIS_BACKOFF_MIN_MS;
    r->fail_rc = VC_ERR_UNAVAILABLE;
    r->up = up;
    r->fence = fence;
    for (size_t i = 0; i < nscripts; i++)
        r->slot[i].r = r;
    uv_timer_init(loop, &r->deadline_timer);
    uv_timer_init(loop, &r->reconnect_timer);
    r->deadline_timer.data = r->reconnect_timer.data = r;
    r->open_handles = 2;
    connect_now(r);
    *out = r;
    return 0;
}

static void timer_closed_cb(uv_handle_t *h)
{
    gw_redis_t *r = h->data;

    if (--r->open_handles > 0)
        return;
    free(r->slot);
    if (r->closed_cb)
        r->closed_cb(r->closed_arg);
    free(r);
}

static void router_close(gw_redis_t *rt);

void gw_redis_close(gw_redis_t *r, void (*closed_cb)(void *arg), void *arg)
{
    r->closed_cb = closed_cb;
    r->closed_arg = arg;
    r->closing = 1;
    if (r->cluster) {
        router_close(r);
        return;
    }
    if (r->ctx) {
        redisAsyncContext *ac = r->ctx;
        r->ctx = NULL;
        set_connected(r, 0);
        r->fail_rc = VC_ERR_SHUTDOWN;
        redisAsyncFree(ac);
    }
    VC_ASSERT(r->head == NULL);
    uv_close((uv_handle_t *)&r->deadline_timer, timer_closed_cb);
    uv_close((uv_handle_t *)&r->reconnect_timer, timer_closed_cb);
}

/* ---------------------------------------------------------------- Redis Cluster */

/* A command on its way through the cluster: kept until a node has run it. */
typedef struct {
    gw_redis_t *rt;
    gw_redis_cb cb;
    void *arg;
    unsigned slot;
    int redirects;
    long script; /* a registered script, or -1 for a plain command */
    int nkeys;   /* a script's: copy holds its keys, then its arguments */
    cmd_t *copy; /* the argv, copied; never sent itself */
} route_t;

/* The child connection to host:port, made when new; NULL when the router is full or closing. */
static gw_redis_t *router_child(gw_redis_t *rt, const char *host, int port)
{
    vc_redis_url_t u;
    gw_redis_t *c;

    for (int i = 0; i < rt->nchild; i++)
        if (rt->child[i]->port == port && strcmp(rt->child[i]->host, host) == 0)
            return rt->child[i];
    if (rt->closing || rt->nchild == VC_REDIS_CLUSTER_MAX_NODES)
        return NULL;
    memset(&u, 0, sizeof(u));
    snprintf(u.host, sizeof(u.host), "%s", host);
    u.port = port;
    snprintf(u.user, sizeof(u.user), "%s", rt->user);
    snprintf(u.password, sizeof(u.password), "%s", rt->password);
    if (gw_redis_new(&c, rt->loop, &u, rt->timeout_ms, rt->scripts, rt->nscripts, NULL, 0) != 0)
        return NULL;
    c->router = rt;
    rt->child[rt->nchild++] = c;
    rt->children_open++;
    return c;
}

/* The router is up when every master of its map is connected. */
static void router_update_up(gw_redis_t *rt)
{
    int up = rt->map->nnodes > 0;

    for (int i = 0; i < rt->map->nnodes && up; i++) {
        const vc_redis_node_t *n = &rt->map->nodes[i];
        int found = 0;

        for (int j = 0; j < rt->nchild && !found; j++)
            found = rt->child[j]->port == n->port && strcmp(rt->child[j]->host, n->host) == 0 &&
                    rt->child[j]->connected;
        up = found;
    }
    rt->connected = up;
    if (rt->up)
        atomic_store(rt->up, up);
}

static void slots_cb(void *arg, const redisReply *x)
{
    gw_redis_t *child = arg, *rt = child->router;
    vc_redis_slot_map_t *fresh = malloc(sizeof(*fresh));
    char err[256];

    rt->refreshing = 0;
    if (!fresh)
        return;
    if (vc_redis_slot_map_from_reply(fresh, x, child->host, err, sizeof(err)) == 0) {
        memcpy(rt->map, fresh, sizeof(*fresh));
        for (int i = 0; i < rt->map->nnodes; i++)
            router_child(rt, rt->map->nodes[i].host, rt->map->nodes[i].port);
    } else {
        vc_warn("redis %s:%d: %s", child->host, child->port, err);
    }
    free(fresh);
    router_update_up(rt);
}

/* CLUSTER SLOTS failed or timed out: a later event asks again. */
static void slots_failed_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_redis_t *child = arg;
    (void)reply;

    child->router->refreshing = 0;
    if (rc != VC_ERR_SHUTDOWN)
        vc_warn("redis %s:%d: CLUSTER SLOTS: %s", child->host, child->port, vc_strerror(rc));
}

/*
 * Reads the slot map again from a connected node, one read at a time. Asked
 * when a node connects, after a MOVED, and when a node is lost (its replica
 * is promoted once the cluster agrees; until then the old map stands).
 */
static void router_refresh(gw_redis_t *rt)
{
    static const char *argv[] = {"CLUSTER", "SLOTS"};
    static const size_t argvlen[] = {7, 5};

    if (rt->refreshing || rt->closing)
        return;
    for (int i = 0; i < rt->nchild; i++) {
        gw_redis_t *child = rt->child[i];
        cmd_t *c;

        if (!child->connected || !(c = cmd_new(child, 2, argv, argvlen)))
            continue;
        c->cb = slots_failed_cb;
        c->raw = slots_cb;
        c->arg = child;
        c->deadline_ms = vc_time_mono_ms() + rt->timeout_ms;
        if (cmd_send(child, c) == 0) {
            rt->refreshing = 1;
            return;
        }
    }
}

static void router_connected(gw_redis_t *rt)
{
    router_update_up(rt);
    router_refresh(rt);
}

static void route_cb(void *arg, int rc, const gw_redis_reply_t *reply);

/* Sends the route's command to child, or to the master of its slot. Returns 0 or a VC_ERR_*. */
static int route_send(route_t *x, gw_redis_t *child)
{
    gw_redis_t *rt = x->rt;
    const cmd_t *c = x->copy;

    if (rt->closing)
        return VC_ERR_SHUTDOWN;
    if (!child) {
        int node = rt->map->owner[x->slot];

        if (node == VC_REDIS_NO_NODE) {
            router_refresh(rt);
            return VC_ERR_UNAVAILABLE;
        }
        if (!(child = router_child(rt, rt->map->nodes[node].host, rt->map->nodes[node].port)))
            return VC_ERR_UNAVAILABLE;
    }
    if (x->script >= 0)
        return gw_redis_eval(child, (size_t)x->script, route_cb, x, x->nkeys, c->argv,
                             c->argc - x->nkeys, c->argv + x->nkeys);
    return gw_redis_command(child, route_cb, x, c->argc, c->argv, c->argvlen);
}

static void asking_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    (void)arg;
    (void)rc;
    (void)reply; /* the command behind it says what came of the ASK */
}

static void route_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    route_t *x = arg;
    gw_redis_t *rt = x->rt;
    vc_redis_redirect_t to;

    if (rc == GW_REDIS_REDIRECTED && x->redirects < GW_REDIS_MAX_REDIRECTS && reply->n == 1 &&
        vc_redis_redirect_parse(reply->item[0].str, reply->item[0].len, &to) !=
            VC_REDIS_NOT_REDIRECT) {
        gw_redis_t *child = NULL;

        x->redirects++;
        if (to.kind == VC_REDIS_MOVED) {
            /* The map is stale: this slot at once, the others from CLUSTER SLOTS. */
            vc_redis_slot_map_moved(rt->map, &to);
            router_refresh(rt);
        } else if ((child = router_child(rt, to.host, to.port))) {
            /* ASK: the importing node takes the next command after ASKING, on one connection. */
            static const char *asking[] = {"ASKING"};
            static const size_t asking_len[] = {6};

            gw_redis_command(child, asking_cb, NULL, 1, asking, asking_len);
        }
        if ((rc = route_send(x, child)) == 0)
            return;
    }
    if (rc == GW_REDIS_REDIRECTED) {
        vc_warn("redis cluster: slot %u still redirected after %d tries", x->slot, x->redirects);
        rc = VC_ERR_UNAVAILABLE;
    }
    /* A node lost or timing out may be a failover under way: learn the new masters. */
    if (rc == VC_ERR_UNAVAILABLE || rc == VC_ERR_TIMEOUT)
        router_refresh(rt);
    x->cb(x->arg, rc, rc == 0 ? reply : NULL);
    free(x->copy);
    free(x);
}

/*
 * A command through the router: its slot is its first key's (argv[1] for a
 * command, the first key for a script). Same contract as gw_redis_command().
 */
static int router_command(gw_redis_t *rt, gw_redis_cb cb, void *arg, long script, int nkeys,
                          int argc, const char **argv, const size_t *argvlen)
{
    route_t *x = calloc(1, sizeof(*x));
    int rc;

    if (!x || !(x->copy = cmd_new(rt, argc, argv, argvlen))) {
        free(x);
        return VC_ERR_NOMEM;
    }
    x->rt = rt;
    x->cb = cb;
    x->arg = arg;
    x->script = script;
    x->nkeys = nkeys;
    if (script >= 0)
        x->slot = nkeys > 0 ? vc_redis_key_slot(argv[0], argvlen[0]) : 0;
    else
        x->slot = argc > 1 ? vc_redis_key_slot(argv[1], argvlen[1]) : 0;
    if ((rc = route_send(x, NULL)) != 0) {
        free(x->copy);
        free(x);
    }
    return rc;
}

static int router_new(gw_redis_t **out, uv_loop_t *loop, const vc_redis_url_t *url,
                      int64_t timeout_ms, const char *const *scripts, size_t nscripts,
                      atomic_int *up)
{
    gw_redis_t *rt = calloc(1, sizeof(*rt));

    if (!rt || !(rt->map = malloc(sizeof(*rt->map)))) {
        free(rt);
        return VC_ERR_NOMEM;
    }
    vc_redis_slot_map_init(rt->map);
    rt->cluster = 1;
    rt->loop = loop;
    snprintf(rt->host, sizeof(rt->host), "%s", url->host);
    rt->port = url->port;
    snprintf(rt->user, sizeof(rt->user), "%s", url->user);
    snprintf(rt->password, sizeof(rt->password), "%s", url->password);
    rt->timeout_ms = timeout_ms;
    rt->scripts = scripts;
    rt->nscripts = nscripts;
    rt->up = up;
    /* The seed: once connected, it tells the map, and the masters are connected in turn. */
    if (!router_child(rt, url->host, url->port)) {
        free(rt->map);
        free(rt);
        return VC_ERR_NOMEM;
    }
    *out = rt;
    return 0;
}

static void child_closed_cb(void *arg)
{
    gw_redis_t *rt = arg;

    if (--rt->children_open > 0)
        return;
    free(rt->map);
    if (rt->closed_cb)
        rt->closed_cb(rt->closed_arg);
    free(rt);
}

static void router_close(gw_redis_t *rt)
{
    int n = rt->nchild;

    set_connected(rt, 0);
    /* The pending commands fail with VC_ERR_SHUTDOWN as each child closes. */
    for (int i = 0; i < n; i++)
        gw_redis_close(rt->child[i], child_closed_cb, rt);
}
