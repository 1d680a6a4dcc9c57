#include "gw_rules.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_error.h"
#include "vc_hash.h"
#include "vc_log.h"
#include "vc_pg.h"
#include "vc_time.h"

#define GW_RULES_BUCKETS 65536 /* a power of two, above both bounds together */
#define GW_RULES_RETRY_MS 1000 /* stale rules are served this long after a failed refresh */
#define GW_CHANGE_SLOTS 4096

/*
 * How often the rules of the codes of each slot changed through this process
 * (PATCH, POST): rules read at another count are not served, on any worker,
 * once the change was answered. Other processes see a change within their
 * ttl (deploy/README.md, "The rules cache").
 */
static atomic_uint rules_changes[GW_CHANGE_SLOTS];
static atomic_uint rules_changes_all; /* every code's rules (gw_rules_changed_all) */

enum { ENTRY_EMPTY, ENTRY_PRESENT, ENTRY_MISSING };

/* Where an entry's load stands. */
enum { LOAD_NONE, LOAD_QUEUED, LOAD_RUNNING };

/* Which least-recently-used list an entry is on: known vouchers or the rest. */
enum { LIST_UNKNOWN, LIST_KNOWN };

typedef struct waiter {
    struct waiter *next;
    gw_rules_cb cb;
    void *arg;
} waiter_t;

typedef struct entry {
    struct entry *next;              /* in its bucket */
    struct entry *older, *newer;     /* in its list, least recently used first */
    struct entry *queue_next;        /* in the queue of loads, while LOAD_QUEUED */
    uint64_t hash;
    char code[VC_CODE_MAX + 1];
    int state, list, load;
    vc_voucher_t v;
    int64_t expires_ms;       /* monotonic; the rules or the miss are trusted until then */
    unsigned changes;         /* rules_changes[] of the code's slot when the load began */
    waiter_t *waiters;
} entry_t;

typedef struct {
    entry_t *oldest, *newest;
    long count;
} lru_t;

struct gw_rules {
    uv_loop_t *loop;
    gw_pg_pool_t *pool;
    int64_t ttl_ms, miss_ttl_ms;
    int max_loads;
    gw_rules_loader_fn loader; /* tests only: read through this instead of the pool */
    long loading, queued;
    int closing; /* gw_rules_free() was called: free when the last load ends */
    lru_t lists[2];
    entry_t *queue_first, *queue_last;
    entry_t *buckets[GW_RULES_BUCKETS];
};

/* A load run through gw_pg_run(); v and rc are written on the threadpool and read after. */
typedef struct {
    gw_rules_t *r;
    entry_t *entry;
    char code[VC_CODE_MAX + 1];
    unsigned changes; /* rules_changes[] of the code's slot when the load began */
    vc_voucher_t v;
} load_t;

static const long list_max[2] = {[LIST_UNKNOWN] = GW_RULES_MAX_UNKNOWN,
                                 [LIST_KNOWN] = GW_RULES_MAX_KNOWN};

gw_rules_t *gw_rules_new(uv_loop_t *loop, gw_pg_pool_t *pool, int64_t ttl_ms, int64_t miss_ttl_ms,
                         int max_loads)
{
    gw_rules_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->loop = loop;
    r->pool = pool;
    r->ttl_ms = ttl_ms;
    r->miss_ttl_ms = miss_ttl_ms;
    r->max_loads = max_loads > 0 ? max_loads : 1;
    return r;
}

void gw_rules_set_loader(gw_rules_t *r, gw_rules_loader_fn loader)
{
    r->loader = loader;
}

static unsigned change_slot(const char *code)
{
    return (unsigned)(vc_hash_str(code) >> 40) % GW_CHANGE_SLOTS;
}

/* The change count rules of code are read at: both counts only grow, so their sum does too. */
static unsigned change_count(const char *code)
{
    return atomic_load_explicit(&rules_changes[change_slot(code)], memory_order_relaxed) +
           atomic_load_explicit(&rules_changes_all, memory_order_relaxed);
}

/* ---- the lists, least recently used first ---- */

static void lru_unlink(gw_rules_t *r, entry_t *e)
{
    lru_t *l = &r->lists[e->list];
    if (e->older)
        e->older->newer = e->newer;
    else
        l->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        l->newest = e->older;
    e->older = e->newer = NULL;
    l->count--;
}

static void lru_push(gw_rules_t *r, entry_t *e, int list)
{
    lru_t *l = &r->lists[list];
    e->list = list;
    e->older = l->newest;
    e->newer = NULL;
    if (l->newest)
        l->newest->newer = e;
    else
        l->oldest = e;
    l->newest = e;
    l->count++;
}

/* e was used now: it becomes the newest of list (which it may change to). */
static void lru_touch(gw_rules_t *r, entry_t *e, int list)
{
    lru_unlink(r, e);
    lru_push(r, e, list);
}

/* ---- the table ---- */

static entry_t *find(gw_rules_t *r, const char *code, uint64_t h)
{
    for (entry_t *e = r->buckets[h & (GW_RULES_BUCKETS - 1)]; e; e = e->next)
        if (e->hash == h && strcmp(e->code, code) == 0)
            return e;
    return NULL;
}

static void remove_entry(gw_rules_t *r, entry_t *e)
{
    entry_t **pp = &r->buckets[e->hash & (GW_RULES_BUCKETS - 1)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    lru_unlink(r, e);
    free(e);
}

/*
 * Evicts the least recently used entry of list that nothing waits for, when
 * the list is at its bound. Entries with a load running or queued stay (at
 * most max_loads + GW_RULES_MAX_QUEUED of them), so the walk is short.
 * Returns 0, or VC_ERR_UNAVAILABLE when every entry of the list is busy.
 */
static int make_room(gw_rules_t *r, int list)
{
    entry_t *e;

    if (r->lists[list].count < list_max[list])
        return 0;
    for (e = r->lists[list].oldest; e; e = e->newer)
        if (e->load == LOAD_NONE && !e->waiters) {
            remove_entry(r, e);
            return 0;
        }
    return VC_ERR_UNAVAILABLE;
}

static entry_t *find_or_add(gw_rules_t *r, const char *code)
{
    uint64_t h = vc_hash_str(code);
    entry_t *e = find(r, code, h);
    size_t b = h & (GW_RULES_BUCKETS - 1);

    if (e)
        return e;
    if (make_room(r, LIST_UNKNOWN) != 0 || !(e = calloc(1, sizeof(*e))))
        return NULL;
    snprintf(e->code, sizeof(e->code), "%s", code);
    e->hash = h;
    e->next = r->buckets[b];
    r->buckets[b] = e;
    lru_push(r, e, LIST_UNKNOWN);
    return e;
}

/* ---- loads ---- */

/* On the threadpool: reads the rules of l->code (conn is NULL in tests, with a loader). */
static int load_work(void *arg, PGconn *conn, char *err, size_t errlen)
{
    load_t *l = arg;

    if (l->r->loader)
        return l->r->loader(l->code, &l->v, err, errlen);
    if (!conn) {
        snprintf(err, errlen, "no PostgreSQL pool");
        return VC_ERR_UNAVAILABLE;
    }
    return vc_pg_load_voucher(conn, l->code, &l->v, err, errlen);
}

static void rules_destroy(gw_rules_t *r);
static int load_start(gw_rules_t *r, entry_t *e, waiter_t *wt);

static void answer_all(waiter_t *wt, int rc, const vc_voucher_t *v)
{
    waiter_t *next;
    for (; wt; wt = next) {
        next = wt->next;
        wt->cb(wt->arg, rc, v);
        free(wt);
    }
}

/* Starts queued loads while slots are free. */
static void pump(gw_rules_t *r)
{
    while (!r->closing && r->loading < r->max_loads && r->queue_first) {
        entry_t *e = r->queue_first;
        waiter_t *wt = e->waiters;

        r->queue_first = e->queue_next;
        if (!r->queue_first)
            r->queue_last = NULL;
        e->queue_next = NULL;
        r->queued--;
        e->load = LOAD_NONE;
        e->waiters = NULL;
        if (load_start(r, e, wt) != 0)
            answer_all(wt, VC_ERR_UNAVAILABLE, NULL); /* e is not touched after this */
    }
}

static void load_done_cb(void *arg, int rc, const char *err)
{
    load_t *l = arg;
    gw_rules_t *r = l->r;
    entry_t *e = l->entry;
    waiter_t *wt;
    int64_t now = vc_time_mono_ms();

    r->loading--;
    e->load = LOAD_NONE;
    if (rc == 0) {
        if (e->list != LIST_KNOWN) {
            /* Room among the known: the oldest idle voucher goes (it can be read again). */
            (void)make_room(r, LIST_KNOWN);
        }
        e->state = ENTRY_PRESENT;
        e->v = l->v;
        e->changes = l->changes;
        e->expires_ms = now + r->ttl_ms;
        lru_touch(r, e, LIST_KNOWN);
    } else if (rc == VC_E_NOT_FOUND) {
        e->state = ENTRY_MISSING;
        e->changes = l->changes;
        e->expires_ms = now + r->miss_ttl_ms;
        if (e->list != LIST_UNKNOWN)
            lru_touch(r, e, LIST_UNKNOWN);
    } else {
        /* A code no voucher was known to have may be a campaign's one-time code. */
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", vc_log_code(l->code, e->state != ENTRY_PRESENT, code)}};
        VC_LOG_F(VC_LOG_WARN, f, "reading voucher rules failed: %s", err);
        /* Stale rules stay better than none: serve them a while before asking again. */
        if (e->state == ENTRY_PRESENT)
            e->expires_ms = now + GW_RULES_RETRY_MS;
    }
    wt = e->waiters;
    e->waiters = NULL;
    /* The callbacks may look codes up again (and evict e): e is not touched after this. */
    answer_all(wt, rc, rc == 0 ? &l->v : NULL);
    free(l);
    if (r->closing) {
        if (r->loading == 0)
            rules_destroy(r);
        return;
    }
    pump(r);
}

/* Starts a load of e on the threadpool now; wt may be NULL (a background refresh). */
static int load_start(gw_rules_t *r, entry_t *e, waiter_t *wt)
{
    load_t *l = calloc(1, sizeof(*l));

    if (!l)
        return VC_ERR_NOMEM;
    l->r = r;
    l->entry = e;
    snprintf(l->code, sizeof(l->code), "%s", e->code);
    l->changes = change_count(e->code);
    if (gw_pg_run(r->loop, r->pool, load_work, load_done_cb, l) != 0) {
        free(l);
        return VC_ERR_UNAVAILABLE;
    }
    e->load = LOAD_RUNNING;
    e->waiters = wt;
    r->loading++;
    return 0;
}

/*
 * Loads e now if a slot is free, else queues it: a refresh of rules already
 * served (urgent) at the front, a first read at the back. Returns 0, or
 * VC_ERR_UNAVAILABLE when the queue is full (wt stays the caller's).
 */
static int load_request(gw_rules_t *r, entry_t *e, waiter_t *wt, int urgent)
{
    if (r->loading < r->max_loads && !r->queue_first)
        return load_start(r, e, wt);
    if (r->queued >= GW_RULES_MAX_QUEUED)
        return VC_ERR_UNAVAILABLE;
    e->load = LOAD_QUEUED;
    e->waiters = wt;
    if (urgent || !r->queue_last) {
        e->queue_next = r->queue_first;
        r->queue_first = e;
        if (!r->queue_last)
            r->queue_last = e;
    } else {
        r->queue_last->queue_next = e;
        r->queue_last = e;
    }
    r->queued++;
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
    lru_touch(r, e, e->list);
    /* Changed through this process since it was read: never served again, read anew. */
    if (e->state != ENTRY_EMPTY && e->changes != change_count(code))
        fresh = 1;
    if (!fresh && e->state == ENTRY_PRESENT) {
        /* Past its ttl: refresh in the background and answer from what is known. */
        if (e->expires_ms <= now && e->load == LOAD_NONE)
            (void)load_request(r, e, NULL, 1);
        *out = e->v;
        return 0;
    }
    if (!fresh && e->load == LOAD_NONE && e->expires_ms > now && e->state == ENTRY_MISSING)
        return VC_E_NOT_FOUND;
    if (!(wt = calloc(1, sizeof(*wt))))
        return VC_ERR_NOMEM;
    wt->cb = cb;
    wt->arg = arg;
    if (e->load != LOAD_NONE) {
        /* Join the query already running or queued. */
        wt->next = e->waiters;
        e->waiters = wt;
        return GW_RULES_PENDING;
    }
    if ((rc = load_request(r, e, wt, 0)) != 0) {
        free(wt);
        return rc;
    }
    return GW_RULES_PENDING;
}

void gw_rules_changed(const char *code)
{
    atomic_fetch_add(&rules_changes[change_slot(code)], 1);
}

void gw_rules_changed_all(void)
{
    atomic_fetch_add(&rules_changes_all, 1);
}

long gw_rules_loading(const gw_rules_t *r)
{
    return r->loading;
}

long gw_rules_queued(const gw_rules_t *r)
{
    return r->queued;
}

long gw_rules_known(const gw_rules_t *r)
{
    return r->lists[LIST_KNOWN].count;
}

long gw_rules_unknown(const gw_rules_t *r)
{
    return r->lists[LIST_UNKNOWN].count;
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
    r->closing = 1;
    /* Loads that never started: their requests get their one callback now. */
    while (r->queue_first) {
        entry_t *e = r->queue_first;
        waiter_t *wt = e->waiters;
        r->queue_first = e->queue_next;
        e->queue_next = NULL;
        e->waiters = NULL;
        e->load = LOAD_NONE;
        r->queued--;
        answer_all(wt, VC_ERR_SHUTDOWN, NULL);
    }
    r->queue_last = NULL;
    if (r->loading > 0)
        return; /* loads still run: the last one frees */
    rules_destroy(r);
}
