#include "gw_rules.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_error.h"
#include "vc_log.h"
#include "vc_pg.h"
#include "vc_time.h"

#define GW_RULES_BUCKETS 1024
#define GW_RULES_MAX_ENTRIES 65536
#define GW_RULES_RETRY_MS 1000 /* stale rules are served this long after a failed refresh */
#define GW_SOLDOUT_SLOTS 4096

/*
 * How often a use came back for the codes of each slot (hash of the code):
 * a sold-out mark taken at another count is void. Two codes sharing a slot
 * only clear each other's marks early, which costs a script run, never a
 * wrong answer.
 */
static atomic_uint soldout_clears[GW_SOLDOUT_SLOTS];

struct gw_pg_pool {
    uv_mutex_t lock;
    const char *dsn;
    PGconn **idle;
    int nidle, size;
};

enum { ENTRY_EMPTY, ENTRY_PRESENT, ENTRY_MISSING };

typedef struct waiter {
    struct waiter *next;
    gw_rules_cb cb;
    void *arg;
} waiter_t;

typedef struct entry {
    struct entry *next;
    char code[VC_CODE_MAX + 1];
    int state;
    vc_voucher_t v;
    int64_t expires_ms;       /* monotonic; the rules or the miss are trusted until then */
    int64_t soldout_until_ms; /* monotonic */
    unsigned soldout_clears;  /* soldout_clears[] of the code's slot when marked */
    int loading;
    waiter_t *waiters;
} entry_t;

struct gw_rules {
    uv_loop_t *loop;
    gw_pg_pool_t *pool;
    int64_t ttl_ms, miss_ttl_ms;
    long count, loading;
    int closing; /* gw_rules_free() was called: free when the last load ends */
    entry_t *buckets[GW_RULES_BUCKETS];
};

/* A gw_pg_run() job. */
typedef struct {
    uv_work_t work;
    gw_pg_pool_t *pool;
    gw_pg_work_fn fn;
    gw_pg_done_cb done;
    void *arg;
    int rc;
    char err[256];
} job_t;

/* A load on the threadpool; the work fields are written there and read after. */
typedef struct {
    uv_work_t work;
    gw_rules_t *r;
    entry_t *entry;
    char code[VC_CODE_MAX + 1];
    vc_voucher_t v;
    int rc;
    char err[256];
} load_t;

/* ---- PostgreSQL pool (any thread) ---- */

gw_pg_pool_t *gw_pg_pool_new(const char *dsn, int size)
{
    gw_pg_pool_t *p = calloc(1, sizeof(*p));

    if (!p || !(p->idle = calloc((size_t)size, sizeof(PGconn *))) || uv_mutex_init(&p->lock) != 0) {
        if (p)
            free(p->idle);
        free(p);
        return NULL;
    }
    p->dsn = dsn;
    p->size = size;
    return p;
}

void gw_pg_pool_free(gw_pg_pool_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nidle; i++)
        PQfinish(p->idle[i]);
    uv_mutex_destroy(&p->lock);
    free(p->idle);
    free(p);
}

static PGconn *pool_take(gw_pg_pool_t *p, char *err, size_t errlen)
{
    PGconn *conn = NULL;

    uv_mutex_lock(&p->lock);
    if (p->nidle > 0)
        conn = p->idle[--p->nidle];
    uv_mutex_unlock(&p->lock);
    if (!conn)
        conn = vc_pg_connect(p->dsn, "voucher-gateway", err, errlen);
    return conn;
}

static void pool_put(gw_pg_pool_t *p, PGconn *conn)
{
    if (PQstatus(conn) == CONNECTION_OK) {
        uv_mutex_lock(&p->lock);
        if (p->nidle < p->size) {
            p->idle[p->nidle++] = conn;
            conn = NULL;
        }
        uv_mutex_unlock(&p->lock);
    }
    if (conn)
        PQfinish(conn);
}

/* ---- the cache (loop thread) ---- */

gw_rules_t *gw_rules_new(uv_loop_t *loop, gw_pg_pool_t *pool, int64_t ttl_ms, int64_t miss_ttl_ms)
{
    gw_rules_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->loop = loop;
    r->pool = pool;
    r->ttl_ms = ttl_ms;
    r->miss_ttl_ms = miss_ttl_ms;
    return r;
}

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % GW_RULES_BUCKETS;
}

static unsigned soldout_slot(const char *code)
{
    unsigned h = 2166136261u;
    for (; *code; code++)
        h = (h ^ (unsigned char)*code) * 16777619u;
    return (h >> 7) % GW_SOLDOUT_SLOTS;
}

static entry_t *find(gw_rules_t *r, const char *code)
{
    for (entry_t *e = r->buckets[hash(code)]; e; e = e->next)
        if (strcmp(e->code, code) == 0)
            return e;
    return NULL;
}

/* Frees entries nobody waits for whose rules and sold-out mark are out of date. */
static void sweep(gw_rules_t *r, int64_t now)
{
    for (size_t b = 0; b < GW_RULES_BUCKETS; b++) {
        entry_t **pp = &r->buckets[b];
        while (*pp) {
            entry_t *e = *pp;
            if (!e->loading && e->expires_ms <= now && e->soldout_until_ms <= now) {
                *pp = e->next;
                free(e);
                r->count--;
            } else {
                pp = &e->next;
            }
        }
    }
}

static entry_t *find_or_add(gw_rules_t *r, const char *code)
{
    entry_t *e = find(r, code);
    unsigned h;

    if (e)
        return e;
    if (r->count >= GW_RULES_MAX_ENTRIES)
        sweep(r, vc_time_mono_ms());
    if (r->count >= GW_RULES_MAX_ENTRIES || !(e = calloc(1, sizeof(*e))))
        return NULL;
    snprintf(e->code, sizeof(e->code), "%s", code);
    h = hash(code);
    e->next = r->buckets[h];
    r->buckets[h] = e;
    r->count++;
    return e;
}

static void load_work_cb(uv_work_t *w)
{
    load_t *l = w->data;
    PGconn *conn = pool_take(l->r->pool, l->err, sizeof(l->err));

    if (!conn) {
        l->rc = VC_ERR_UNAVAILABLE;
        return;
    }
    l->rc = vc_pg_load_voucher(conn, l->code, &l->v, l->err, sizeof(l->err));
    pool_put(l->r->pool, conn);
}

static void rules_destroy(gw_rules_t *r);

static void load_done_cb(uv_work_t *w, int status)
{
    load_t *l = w->data;
    gw_rules_t *r = l->r;
    entry_t *e = l->entry;
    waiter_t *wt, *next;
    int64_t now = vc_time_mono_ms();
    int rc = status == UV_ECANCELED ? VC_ERR_SHUTDOWN : l->rc;

    r->loading--;
    e->loading = 0;
    if (rc == 0) {
        e->state = ENTRY_PRESENT;
        e->v = l->v;
        e->expires_ms = now + r->ttl_ms;
    } else if (rc == VC_E_NOT_FOUND) {
        e->state = ENTRY_MISSING;
        e->expires_ms = now + r->miss_ttl_ms;
    } else {
        vc_log_field_t f[] = {{"code", l->code}};
        VC_LOG_F(VC_LOG_WARN, f, "reading voucher rules failed: %s", l->err);
        /* Stale rules stay better than none: serve them a while before asking again. */
        if (e->state == ENTRY_PRESENT)
            e->expires_ms = now + GW_RULES_RETRY_MS;
    }
    wt = e->waiters;
    e->waiters = NULL;
    for (; wt; wt = next) {
        next = wt->next;
        wt->cb(wt->arg, rc, rc == 0 ? &l->v : NULL);
        free(wt);
    }
    free(l);
    if (r->closing && r->loading == 0)
        rules_destroy(r);
}

/* Starts a load of e on the threadpool; waiters may be NULL (a background refresh). */
static int load_start(gw_rules_t *r, entry_t *e, waiter_t *wt)
{
    load_t *l = calloc(1, sizeof(*l));

    if (!l)
        return VC_ERR_NOMEM;
    l->r = r;
    l->entry = e;
    l->work.data = l;
    snprintf(l->code, sizeof(l->code), "%s", e->code);
    if (uv_queue_work(r->loop, &l->work, load_work_cb, load_done_cb) != 0) {
        free(l);
        return VC_ERR_UNAVAILABLE;
    }
    e->loading = 1;
    e->waiters = wt;
    r->loading++;
    return 0;
}

int gw_rules_get(gw_rules_t *r, const char *code, int fresh, vc_voucher_t *out, gw_rules_cb cb,
                 void *arg)
{
    entry_t *e = find_or_add(r, code);
    int64_t now = vc_time_mono_ms();
    waiter_t *wt;
    int rc;

    if (!e)
        return VC_ERR_UNAVAILABLE;
    if (!fresh && e->state == ENTRY_PRESENT) {
        /* Past its ttl: refresh in the background and answer from what is known. */
        if (e->expires_ms <= now && !e->loading)
            (void)load_start(r, e, NULL);
        *out = e->v;
        return 0;
    }
    if (!fresh && !e->loading && e->expires_ms > now && e->state == ENTRY_MISSING)
        return VC_E_NOT_FOUND;
    if (!(wt = calloc(1, sizeof(*wt))))
        return VC_ERR_NOMEM;
    wt->cb = cb;
    wt->arg = arg;
    if (e->loading) {
        /* Join the query already running. */
        wt->next = e->waiters;
        e->waiters = wt;
        return GW_RULES_PENDING;
    }
    if ((rc = load_start(r, e, wt)) != 0) {
        free(wt);
        return rc;
    }
    return GW_RULES_PENDING;
}

void gw_rules_mark_soldout(gw_rules_t *r, const char *code, int64_t mono_until_ms)
{
    entry_t *e = find_or_add(r, code);
    if (e) {
        e->soldout_until_ms = mono_until_ms;
        e->soldout_clears = atomic_load(&soldout_clears[soldout_slot(code)]);
    }
}

void gw_rules_clear_soldout(const char *code)
{
    atomic_fetch_add(&soldout_clears[soldout_slot(code)], 1);
}

int gw_rules_soldout(gw_rules_t *r, const char *code, int64_t mono_now_ms)
{
    entry_t *e = find(r, code);
    return e && e->soldout_until_ms > mono_now_ms &&
           e->soldout_clears ==
               atomic_load_explicit(&soldout_clears[soldout_slot(code)], memory_order_relaxed);
}

void gw_rules_forget(gw_rules_t *r, const char *code)
{
    entry_t *e = find(r, code);
    if (e && !e->loading) {
        e->state = ENTRY_EMPTY;
        e->expires_ms = 0;
    }
}

long gw_rules_loading(const gw_rules_t *r)
{
    return r->loading;
}

static void rules_destroy(gw_rules_t *r)
{
    for (size_t b = 0; b < GW_RULES_BUCKETS; b++) {
        entry_t *e, *next;
        for (e = r->buckets[b]; e; e = next) {
            next = e->next;
            free(e);
        }
    }
    free(r);
}

void gw_rules_free(gw_rules_t *r)
{
    if (!r)
        return;
    if (r->loading > 0) {
        r->closing = 1; /* background refreshes still run: the last one frees */
        return;
    }
    rules_destroy(r);
}

/* ---- PostgreSQL jobs ---- */

static void job_work_cb(uv_work_t *w)
{
    job_t *j = w->data;
    PGconn *conn = pool_take(j->pool, j->err, sizeof(j->err));

    if (!conn) {
        j->rc = VC_ERR_UNAVAILABLE;
        return;
    }
    j->rc = j->fn(j->arg, conn, j->err, sizeof(j->err));
    pool_put(j->pool, conn);
}

static void job_done_cb(uv_work_t *w, int status)
{
    job_t *j = w->data;

    j->done(j->arg, status == UV_ECANCELED ? VC_ERR_SHUTDOWN : j->rc, j->err);
    free(j);
}

int gw_pg_run(uv_loop_t *loop, gw_pg_pool_t *pool, gw_pg_work_fn work, gw_pg_done_cb done,
              void *arg)
{
    job_t *j = calloc(1, sizeof(*j));

    if (!j)
        return VC_ERR_NOMEM;
    j->pool = pool;
    j->fn = work;
    j->done = done;
    j->arg = arg;
    j->work.data = j;
    if (uv_queue_work(loop, &j->work, job_work_cb, job_done_cb) != 0) {
        free(j);
        return VC_ERR_UNAVAILABLE;
    }
    return 0;
}
