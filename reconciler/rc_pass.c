#include "rc_pass.h"
#include "rc_raise.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_pg.h"
#include "vc_time.h"
#include "vc_voucher.h"

#include <stdlib.h>
#include <string.h>

/* The advisory lock that makes one reconciler the one that acts. */
#define RC_LOCK_KEY "7461736b"

/*
 * The lock's session, kept honest (deploy/README.md, "Reconciler leadership"). Both ends
 * probe a silent connection: after RC_KEEPALIVE_IDLE_S of silence, every
 * RC_KEEPALIVE_INTERVAL_S, RC_KEEPALIVE_COUNT times; data left unacknowledged
 * for RC_SILENCE_MS ends it too. So PostgreSQL ends the session of a leader
 * that vanished (and frees the lock for a standby) no sooner than
 * RC_SILENCE_MS after it last heard from it, and no later than about that.
 * The leader proves its session at most RC_PROOF_EVERY_MS before each
 * repair: it stops acting long before PostgreSQL could give the lock away.
 */
#define RC_KEEPALIVE_IDLE_S 10
#define RC_KEEPALIVE_INTERVAL_S 5
#define RC_KEEPALIVE_COUNT 3
#define RC_SILENCE_MS ((RC_KEEPALIVE_IDLE_S + RC_KEEPALIVE_INTERVAL_S * RC_KEEPALIVE_COUNT) * 1000)
#define RC_PROOF_EVERY_MS 1000
#define RC_STR_(x) #x
#define RC_STR(x) RC_STR_(x)

/*
 * What earlier passes saw of a voucher, kept across passes: when each unsent
 * hold was first seen (keyed by orderId, and valid only for the same hold:
 * rc_order_same_hold()), and more. One entry per active voucher, in the order
 * of the vouchers (memory_align()).
 */
typedef struct {
    char code[VC_CODE_MAX + 1];
    rc_orders_t seen;
    int64_t missing_since_ms; /* when Redis was first seen without the voucher's counter */
    int64_t last_full_ms;     /* when the voucher was last read in full */
    /*
     * Orders the last full read saw R in Redis and live in its snapshot
     * (redis_state 'R'; 0 once taken again): seen so again, they are
     * revivable (rc_model.h).
     */
    rc_orders_t released_seen;
    int64_t uncounted; /* used_count beyond the live rows at the last full read */
} memory_entry_t;

struct rc_memory {
    memory_entry_t *entries;
    size_t len;
};

/* One active voucher, as read in one pass. */
typedef struct {
    char code[VC_CODE_MAX + 1];
    int claimed; /* voucher.redis_loaded_at is set: Redis had it once */
    int full;    /* read in full this pass: every row, every Redis order (else numbers only) */
    rc_numbers_t n;
    rc_orders_t orders;
    vc_event_t *events; /* its events in flight, in order, replayed once its rows are read */
    size_t nevents, cap;
    memory_entry_t *mem; /* its entry in ctx->memory, this pass */
    rc_verdict_t verdict;
} voucher_t;


typedef struct {
    voucher_t *v;
    size_t len;
    int nomem; /* an event in flight could not be kept: the pass fails */
} vouchers_t;

/* A release to publish, then finish. */
typedef struct {
    voucher_t *v;
    vc_event_t ev;
} release_t;

typedef struct {
    release_t *items;
    size_t len, cap;
} releases_t;

/*
 * Opens the session that also holds the lock: keepalives and a user timeout
 * on our side (libpq) and on PostgreSQL's (the session's settings), so that a
 * half-open connection ends within RC_SILENCE_MS instead of keeping the lock
 * for hours, and a statement timeout, so that a blocked read fails the pass
 * instead of stalling every pass. Returns the connection or NULL with err set.
 */
static PGconn *lock_session(const rc_config_t *cfg, char *err, size_t errlen)
{
    const char *keys[] = {"dbname",           "application_name", "connect_timeout",
                          "keepalives",       "keepalives_idle",  "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout", NULL};
    const char *vals[] = {cfg->pg_dsn,
                          "voucher-reconciler",
                          "5",
                          "1",
                          RC_STR(RC_KEEPALIVE_IDLE_S),
                          RC_STR(RC_KEEPALIVE_INTERVAL_S),
                          RC_STR(RC_KEEPALIVE_COUNT),
                          "25000",
                          NULL};
    char set[320];
    PGconn *conn = PQconnectdbParams(keys, vals, 1 /* expand dbname as a conninfo */);
    PGresult *res;

    _Static_assert(RC_SILENCE_MS == 25000, "tcp_user_timeout above is RC_SILENCE_MS");
    if (!conn) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        vc_pg_error_text(conn, NULL, err, errlen);
        PQfinish(conn);
        return NULL;
    }
    /* The longest read of a pass: six Redis or Kafka timeouts, 30 s at least. */
    snprintf(set, sizeof(set),
             "SET tcp_keepalives_idle = %d; SET tcp_keepalives_interval = %d;"
             " SET tcp_keepalives_count = %d; SET tcp_user_timeout = %d;"
             " SET statement_timeout = %lld",
             RC_KEEPALIVE_IDLE_S, RC_KEEPALIVE_INTERVAL_S, RC_KEEPALIVE_COUNT, RC_SILENCE_MS,
             (long long)(cfg->timeout_ms * 6 > 30000 ? cfg->timeout_ms * 6 : 30000));
    res = PQexec(conn, set);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        vc_pg_error_text(conn, res, err, errlen);
        PQclear(res);
        PQfinish(conn);
        return NULL;
    }
    PQclear(res);
    return conn;
}

int rc_ctx_connect(rc_ctx_t *ctx, char *err, size_t errlen)
{
    if (ctx->pg && PQstatus(ctx->pg) != CONNECTION_OK) {
        PQfinish(ctx->pg);
        ctx->pg = NULL;
        ctx->leader = 0; /* the lock went with the session */
    }
    if (!ctx->pg && !(ctx->pg = lock_session(ctx->cfg, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->redis &&
        !(ctx->redis = rc_redis_connect(ctx->cfg->redis_url, ctx->cfg->timeout_ms, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->kafka &&
        !(ctx->kafka = rc_kafka_new(ctx->cfg->kafka_brokers, ctx->cfg->kafka_extra,
                                    ctx->cfg->writer_group, ctx->cfg->topic, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->memory && !(ctx->memory = calloc(1, sizeof(*ctx->memory)))) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    return 0;
}

static void entry_free(memory_entry_t *e)
{
    rc_orders_free(&e->seen);
    rc_orders_free(&e->released_seen);
}

static void memory_free(rc_memory_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->len; i++)
        entry_free(&m->entries[i]);
    free(m->entries);
    free(m);
}

void rc_ctx_close(rc_ctx_t *ctx)
{
    if (ctx->pg)
        PQfinish(ctx->pg);
    rc_redis_free(ctx->redis);
    rc_kafka_free(ctx->kafka);
    memory_free(ctx->memory);
    ctx->pg = NULL;
    ctx->redis = NULL;
    ctx->kafka = NULL;
    ctx->memory = NULL;
    ctx->leader = 0;
}

int rc_ctx_lead(rc_ctx_t *ctx)
{
    PGresult *res;
    int64_t sent = vc_time_mono_ms();

    if (!ctx->pg || PQstatus(ctx->pg) != CONNECTION_OK)
        return ctx->leader = 0;
    if (ctx->leader)
        return 1;
    res = PQexec(ctx->pg, "SELECT pg_try_advisory_lock(x'" RC_LOCK_KEY "'::bigint)");
    ctx->leader = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
                  strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (ctx->leader)
        ctx->proven_ms = sent;
    return ctx->leader;
}

/*
 * Before a repair: whether this reconciler still holds the lock. Proven by a
 * round trip on the lock's session at most RC_PROOF_EVERY_MS ago (counted from
 * when the proof was sent); PostgreSQL cannot have given the lock to another
 * reconciler since, unless someone ended the session by hand. Returns 0, or
 * VC_ERR_UNAVAILABLE with err set after closing the session (it frees the lock
 * if the session was still alive): the pass stops, and the next one starts by
 * trying to take the lock again.
 */
static int still_leading(rc_ctx_t *ctx, char *err, size_t errlen)
{
    int64_t sent = vc_time_mono_ms();
    PGresult *res;
    int held;

    if (!ctx->leader || !ctx->pg) {
        snprintf(err, errlen, "not the acting reconciler any more: stopped repairing");
        return VC_ERR_UNAVAILABLE;
    }
    if (sent - ctx->proven_ms < RC_PROOF_EVERY_MS)
        return 0;
    res = PQexec(ctx->pg, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                          " AND pid = pg_backend_pid() AND granted AND classid = 0"
                          " AND objid = x'" RC_LOCK_KEY "'::bigint::oid AND objsubid = 1");
    held = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
           strcmp(PQgetvalue(res, 0, 0), "1") == 0;
    if (held) {
        PQclear(res);
        ctx->proven_ms = sent;
        return 0;
    }
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
        snprintf(err, errlen, "the session no longer holds it");
    else
        vc_pg_error_text(ctx->pg, res, err, errlen);
    PQclear(res);
    vc_warn("lost the lock (%s): stopped repairing; the next pass tries to take it again", err);
    snprintf(err, errlen, "lost the reconciler lock: stopped repairing");
    PQfinish(ctx->pg);
    ctx->pg = NULL;
    ctx->leader = 0;
    return VC_ERR_UNAVAILABLE;
}

/* still_leading() for rc_limit_sync(). */
static int prove_lead(void *ctx, char *err, size_t errlen)
{
    return still_leading(ctx, err, errlen);
}

static rc_pg_status_t parse_status(const char *s)
{
    if (strcmp(s, "RESERVED") == 0)
        return RC_PG_RESERVED;
    if (strcmp(s, "CONFIRMED") == 0)
        return RC_PG_CONFIRMED;
    if (strcmp(s, "RELEASED") == 0)
        return RC_PG_RELEASED;
    return RC_PG_NONE;
}

static void vouchers_free(vouchers_t *vs)
{
    for (size_t i = 0; i < vs->len; i++) {
        rc_orders_free(&vs->v[i].orders);
        free(vs->v[i].events);
    }
    free(vs->v);
    vs->v = NULL;
    vs->len = 0;
}

/* The vouchers are sorted by code in byte order (read_vouchers()): a binary search. */
static voucher_t *find_voucher(vouchers_t *vs, const char *code)
{
    size_t lo = 0, hi = vs->len;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(vs->v[mid].code, code);
        if (cmp == 0)
            return &vs->v[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Runs a query that returns rows; on failure sets rc and err and returns NULL. */
static PGresult *query(rc_ctx_t *ctx, const char *sql, int *rc, char *err, size_t errlen)
{
    PGresult *res = PQexec(ctx->pg, sql);

    if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
        return res;
    *rc = vc_pg_error_class(ctx->pg, res);
    vc_pg_error_text(ctx->pg, res, err, errlen);
    PQclear(res);
    return NULL;
}

/*
 * Step 2: every active voucher (not ended more than a day ago) and its
 * numbers. This opens a read-only REPEATABLE READ transaction that stays
 * open until read_rows(): the rows read then, of the vouchers that need them,
 * describe the same moment as these numbers.
 */
static int read_vouchers(rc_ctx_t *ctx, vouchers_t *vs, char *err, size_t errlen)
{
    PGresult *res;
    int rc = 0;

    if (!(res = query(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", &rc, err, errlen)))
        return rc;
    PQclear(res);
    if (!(res = query(ctx,
                      "SELECT v.code, v.total_limit, v.used_count, v.redis_loaded_at IS NOT NULL,"
                      " (SELECT count(*) FROM dead_letter d WHERE d.voucher_code = v.code"
                      "   AND d.state = 'parked')"
                      " FROM voucher v WHERE v.ends_at > now() - interval '1 day'"
                      " ORDER BY v.code COLLATE \"C\"",
                      &rc, err, errlen)))
        return rc;
    vs->len = (size_t)PQntuples(res);
    if (vs->len && !(vs->v = calloc(vs->len, sizeof(*vs->v)))) {
        PQclear(res);
        vs->len = 0;
        return VC_ERR_NOMEM;
    }
    for (size_t i = 0; i < vs->len; i++) {
        voucher_t *v = &vs->v[i];
        snprintf(v->code, sizeof(v->code), "%s", PQgetvalue(res, (int)i, 0));
        v->n.total_limit = strtoll(PQgetvalue(res, (int)i, 1), NULL, 10);
        v->n.used_count = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
        v->n.live_rows = v->n.used_count; /* counted from the rows when they are read */
        v->claimed = strcmp(PQgetvalue(res, (int)i, 3), "t") == 0;
        v->n.parked = strtoll(PQgetvalue(res, (int)i, 4), NULL, 10);
        rc_orders_init(&v->orders);
    }
    PQclear(res);
    return 0;
}

static int read_letters(rc_ctx_t *ctx, vouchers_t *vs, const char *codes, char *err,
                        size_t errlen);

/*
 * Step 2, second half: every row of the vouchers read in full, from the
 * snapshot read_vouchers() took; then the transaction ends. Their live rows
 * are counted here.
 */
static int read_rows(rc_ctx_t *ctx, vouchers_t *vs, char *err, size_t errlen)
{
    size_t cap = 3, len = 0;
    char *codes;
    const char *params[1];
    PGresult *res = NULL;
    voucher_t *v = NULL;
    int rc = 0;

    /* The codes as an array literal, {A,B}: [A-Z0-9_-], nothing to quote. */
    for (size_t i = 0; i < vs->len; i++)
        cap += vs->v[i].full ? strlen(vs->v[i].code) + 1 : 0;
    if (!(codes = malloc(cap)))
        return VC_ERR_NOMEM;
    codes[len++] = '{';
    for (size_t i = 0; i < vs->len; i++) {
        size_t n = strlen(vs->v[i].code);
        if (!vs->v[i].full)
            continue;
        vs->v[i].n.live_rows = 0;
        if (len > 1)
            codes[len++] = ',';
        memcpy(codes + len, vs->v[i].code, n);
        len += n;
    }
    codes[len++] = '}';
    codes[len] = '\0';
    if (len == 2)
        goto out; /* no voucher needs its rows */
    params[0] = codes;
    res = PQexecParams(ctx->pg,
                       "SELECT r.voucher_code, r.order_id, r.customer_id, r.discount_amount,"
                       " r.status,"
                       " coalesce((extract(epoch FROM r.held_until) * 1000)::bigint, 0)"
                       " FROM voucher_redemption r WHERE r.voucher_code = ANY ($1::text[])"
                       " ORDER BY r.voucher_code",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = vc_pg_error_class(ctx->pg, res);
        vc_pg_error_text(ctx->pg, res, err, errlen);
        goto out;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        const char *code = PQgetvalue(res, r, 0);
        rc_order_t *o;

        if ((!v || strcmp(v->code, code) != 0) && !(v = find_voucher(vs, code)))
            continue;
        if (!(o = rc_orders_get(&v->orders, PQgetvalue(res, r, 1)))) {
            rc = VC_ERR_NOMEM;
            break;
        }
        o->customer_id = strtoll(PQgetvalue(res, r, 2), NULL, 10);
        o->discount = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        o->pg = o->pg_after = parse_status(PQgetvalue(res, r, 4));
        o->held_until_ms = strtoll(PQgetvalue(res, r, 5), NULL, 10);
        if (o->pg == RC_PG_RESERVED || o->pg == RC_PG_CONFIRMED)
            v->n.live_rows++;
    }
    if (rc == 0)
        rc = read_letters(ctx, vs, params[0], err, errlen);
out:
    PQclear(res);
    free(codes);
    /* Read only: ending it either way changes nothing. */
    PQclear(PQexec(ctx->pg, "COMMIT"));
    return rc;
}

/*
 * Step 2, the dead letters of the vouchers read in full (same snapshot):
 * which orders have a letter parked (never released by a pass) or
 * discarded by an operator (released with reason DISCARDED).
 */
static int read_letters(rc_ctx_t *ctx, vouchers_t *vs, const char *codes, char *err,
                        size_t errlen)
{
    const char *params[1] = {codes};
    PGresult *res;
    voucher_t *v = NULL;
    int rc = 0;

    res = PQexecParams(ctx->pg,
                       "SELECT d.voucher_code, d.order_id, bool_or(d.state = 'parked'),"
                       " bool_or(d.state = 'discarded')"
                       " FROM dead_letter d WHERE d.voucher_code = ANY ($1::text[])"
                       " AND d.order_id IS NOT NULL AND d.state IN ('parked', 'discarded')"
                       " GROUP BY 1, 2 ORDER BY 1",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = vc_pg_error_class(ctx->pg, res);
        vc_pg_error_text(ctx->pg, res, err, errlen);
        PQclear(res);
        return rc;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        const char *code = PQgetvalue(res, r, 0);
        rc_order_t *o;

        if ((!v || strcmp(v->code, code) != 0) && !(v = find_voucher(vs, code)))
            continue;
        if (!(o = rc_orders_get(&v->orders, PQgetvalue(res, r, 1)))) {
            rc = VC_ERR_NOMEM;
            break;
        }
        o->parked = strcmp(PQgetvalue(res, r, 2), "t") == 0;
        o->discarded = strcmp(PQgetvalue(res, r, 3), "t") == 0;
    }
    PQclear(res);
    return rc;
}

/* Step 3: each event in flight, kept with its voucher until its rows are read. */
static void tail_cb(void *arg, const vc_event_t *ev)
{
    vouchers_t *vs = arg;
    voucher_t *v = find_voucher(vs, ev->code);

    if (!v)
        return;
    if (v->nevents == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        vc_event_t *events = realloc(v->events, cap * sizeof(*events));
        if (!events) {
            vs->nomem = 1;
            return;
        }
        v->events = events;
        v->cap = cap;
    }
    v->events[v->nevents++] = *ev;
    v->n.in_flight_events++;
}

/* The events in flight, replayed on the orders as the writer will apply them. */
static int replay_events(voucher_t *v)
{
    for (size_t i = 0; i < v->nevents; i++) {
        const vc_event_t *ev = &v->events[i];
        rc_order_t *o = rc_orders_get(&v->orders, ev->order_id);

        if (!o)
            return VC_ERR_NOMEM;
        if (!o->customer_id)
            o->customer_id = ev->customer_id;
        if (ev->type == VC_EV_RESERVED) {
            if (!o->discount)
                o->discount = ev->discount_amount;
            if (!o->held_until_ms)
                o->held_until_ms = ev->held_until_ms;
        }
        rc_order_apply(o, ev);
    }
    return 0;
}

/*
 * Lines the memory up with this pass's vouchers, both sorted by code: one
 * entry per voucher, in the same order (new vouchers get an empty one), and
 * the entries of vouchers that left the active window are freed, so the
 * memory does not grow forever. Sets each voucher's mem.
 */
static int memory_align(rc_memory_t *m, vouchers_t *vs)
{
    memory_entry_t *entries = vs->len ? calloc(vs->len, sizeof(*entries)) : NULL;
    size_t j = 0;

    if (vs->len && !entries)
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < vs->len; i++) {
        voucher_t *v = &vs->v[i];
        int cmp = 1;

        while (j < m->len && (cmp = strcmp(m->entries[j].code, v->code)) < 0)
            entry_free(&m->entries[j++]);
        if (j < m->len && cmp == 0)
            entries[i] = m->entries[j++];
        else
            snprintf(entries[i].code, sizeof(entries[i].code), "%s", v->code);
        v->mem = &entries[i];
    }
    for (; j < m->len; j++)
        entry_free(&m->entries[j]);
    free(m->entries);
    m->entries = entries;
    m->len = vs->len;
    return 0;
}

/*
 * Carries "first seen unsent" from the last pass into this one's orders, for
 * the same hold only: an orderId forgotten and taken again is a new hold,
 * first seen now (an old time would release it within seconds). Orders
 * unsent and not remembered are first seen now.
 */
static void remember_before(voucher_t *v, int64_t now_ms)
{
    memory_entry_t *e = v->mem;
    rc_order_t *seen, *o;

    for (size_t i = 0; i < e->seen.cap; i++)
        if ((seen = rc_orders_at(&e->seen, i)) &&
            (o = rc_orders_find(&v->orders, seen->order_id)) && rc_order_unsent(o) &&
            rc_order_same_hold(o, seen))
            o->first_unsent_ms = seen->first_unsent_ms;
    for (size_t i = 0; i < v->orders.cap; i++)
        if ((o = rc_orders_at(&v->orders, i)) && rc_order_unsent(o) && !o->first_unsent_ms)
            o->first_unsent_ms = now_ms;
}

/* Keeps the orders still unsent, with their hold, for the next pass; the rest is forgotten. */
static void remember_after(voucher_t *v)
{
    memory_entry_t *e = v->mem;
    rc_order_t *o, *seen;

    rc_orders_free(&e->seen);
    for (size_t i = 0; i < v->orders.cap; i++) {
        if (!(o = rc_orders_at(&v->orders, i)) || !o->first_unsent_ms || !rc_order_unsent(o))
            continue;
        if ((seen = rc_orders_get(&e->seen, o->order_id))) {
            seen->first_unsent_ms = o->first_unsent_ms;
            seen->redis_state = o->redis_state;
            seen->redis_held_until_ms = o->redis_held_until_ms;
        }
    }
}

static int pg_counts(rc_pg_status_t s)
{
    return s == RC_PG_RESERVED || s == RC_PG_CONFIRMED;
}

/* Marks the orders Redis holds R now that the last full read saw R and live too. */
static void released_before(voucher_t *v)
{
    rc_order_t *seen, *o;

    for (size_t i = 0; i < v->mem->released_seen.cap; i++)
        if ((seen = rc_orders_at(&v->mem->released_seen, i)) && seen->redis_state == 'R' &&
            (o = rc_orders_find(&v->orders, seen->order_id)) && o->redis_state == 'R')
            o->revivable = 1;
}

/* Remembers the orders Redis holds R and the snapshot counts, for the next full read. */
static int released_after(voucher_t *v)
{
    rc_order_t *o, *seen;

    rc_orders_free(&v->mem->released_seen);
    for (size_t i = 0; i < v->orders.cap; i++) {
        if (!(o = rc_orders_at(&v->orders, i)) || o->redis_state != 'R' || !pg_counts(o->pg_after))
            continue;
        if (!(seen = rc_orders_get(&v->mem->released_seen, o->order_id)))
            return VC_ERR_NOMEM;
        seen->redis_state = 'R';
    }
    return 0;
}

static int add_release(releases_t *rs, voucher_t *v, const rc_order_t *o, const char *reason)
{
    release_t *r;
    if (rs->len == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 64;
        release_t *items = realloc(rs->items, cap * sizeof(*items));
        if (!items)
            return VC_ERR_NOMEM;
        rs->items = items;
        rs->cap = cap;
    }
    r = &rs->items[rs->len++];
    memset(r, 0, sizeof(*r));
    r->v = v;
    r->ev.type = VC_EV_RELEASED;
    r->ev.version = VC_EVENT_VERSION;
    snprintf(r->ev.code, sizeof(r->ev.code), "%s", v->code);
    snprintf(r->ev.order_id, sizeof(r->ev.order_id), "%s", o->order_id);
    r->ev.customer_id = o->customer_id;
    r->ev.at_ms = vc_time_now_ms();
    snprintf(r->ev.reason, sizeof(r->ev.reason), "%s", reason);
    return 0;
}

/*
 * Begins the release of one order (release_begin.lua) and queues its event
 * when the release is begun now or was begun before and never finished.
 * why is release_begin.lua's: "resume" for a release begun before; for the
 * others the script checks that the order is still the hold the pass read
 * (heldUntil and state), and for "undelivered" that no retry published its
 * event again since snapshot_ms - grace (a retry's answer could come after
 * the pass read Kafka). Refused: the next pass decides again.
 */
static int begin_release(rc_ctx_t *ctx, voucher_t *v, rc_order_t *o, const char *why,
                         const char *reason, int64_t snapshot_ms, releases_t *rs, char *err,
                         size_t errlen)
{
    rc_keys_t k;
    char now[24], order[128], read[48], since[24];
    rc_order_t current = {0};
    int64_t status;
    int rc, nargs = 3;

    if ((rc = still_leading(ctx, err, errlen)) != 0)
        return rc;
    rc_keys_of(v->code, &k);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    snprintf(read, sizeof(read), "%lld:%c", (long long)o->redis_held_until_ms,
             o->redis_state ? o->redis_state : '?');
    snprintf(since, sizeof(since), "%lld", (long long)(snapshot_ms - ctx->cfg->grace_ms));
    if (strcmp(why, "resume") != 0)
        nargs = strcmp(why, "undelivered") == 0 ? 5 : 4;
    const char *keys[] = {k.name[RC_KEY_ORDERS], k.name[RC_KEY_HOLDS], k.name[RC_KEY_RELEASING],
                          k.name[RC_KEY_RESENT]};
    const char *args[] = {o->order_id, why, now, read, since};
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_release_begin, 4, keys, nargs, args, &status, order,
                            sizeof(order), err, errlen)) != 0)
        return rc;
    if (status == -3) {
        vc_log_field_t f[] = {{"code", v->code}, {"orderId", o->order_id}};
        VC_LOG_F(VC_LOG_INFO, f,
                 "not released (%s): the order changed, or a retry published it again, after "
                 "the pass read it; the next pass decides again",
                 why);
        return 0;
    }
    if (status != 1 && status != 2)
        return 0;
    if (order[0] && rc_order_parse(order, strlen(order), &current) == 0) {
        if (o->customer_id <= 0)
            o->customer_id = current.customer_id;
        /* Begun before by a cancel: publish it as the cancel it is. */
        if (current.redis_state == 'X' && !o->discarded)
            reason = "CANCELLED";
    }
    return add_release(rs, v, o, reason);
}

/*
 * Repairs a hold that PostgreSQL (or an event in flight) has as confirmed:
 * H -> C in Redis, if it is still the hold the pass read (repair_confirmed.lua).
 */
static int repair_confirmed(rc_ctx_t *ctx, voucher_t *v, const rc_order_t *o,
                            rc_summary_t *sum, char *err, size_t errlen)
{
    rc_keys_t k;
    char held[24];
    int64_t status;
    int rc;

    if ((rc = still_leading(ctx, err, errlen)) != 0)
        return rc;
    rc_keys_of(v->code, &k);
    snprintf(held, sizeof(held), "%lld", (long long)o->redis_held_until_ms);
    const char *keys[] = {k.name[RC_KEY_ORDERS], k.name[RC_KEY_HOLDS]};
    const char *args[] = {o->order_id, held};
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_repair_confirmed, 2, keys, 2, args, &status, NULL,
                            0, err, errlen)) != 0)
        return rc;
    if (status == 1) {
        vc_log_field_t f[] = {{"code", v->code}, {"orderId", o->order_id}};
        VC_LOG_F(VC_LOG_INFO, f,
                 "repair: held in Redis, confirmed in PostgreSQL: confirmed in Redis "
                 "(never expired)");
        sum->reconfirmed++;
    }
    return 0;
}

typedef struct {
    rc_ctx_t *ctx;
    voucher_t *v;
    int64_t snapshot_ms;
    releases_t *rs;
    int rc;
    char *err;
    size_t errlen;
} due_t;

/* A release begun more than a grace ago and never finished: publish it again. */
static void due_cb(void *arg, const char *order_id)
{
    due_t *d = arg;
    rc_order_t *o;

    /* Only what the pass read as begun: a release begun since is its requester's to finish. */
    if (d->rc != 0 || !(o = rc_orders_find(&d->v->orders, order_id)) ||
        (o->redis_state != 'X' && o->redis_state != 'E'))
        return;
    d->rc = begin_release(d->ctx, d->v, o, "resume",
                          o->discarded              ? "DISCARDED"
                          : o->redis_state == 'X' ? "CANCELLED"
                                                  : "EXPIRED",
                          d->snapshot_ms, d->rs, d->err, d->errlen);
}

/* Logs and counts one kind of repair on a voucher, with Redis's counter before and after. */
static void log_repair(const voucher_t *v, const char *kind, const char *what, int64_t count,
                       int64_t before, int64_t after)
{
    char n[24], b[24], a[24], labels[32];
    vc_log_field_t f[] = {{"code", v->code}, {"count", n}, {"remainingBefore", b},
                          {"remainingAfter", a}};
    snprintf(n, sizeof(n), "%lld", (long long)count);
    snprintf(b, sizeof(b), "%lld", (long long)before);
    snprintf(a, sizeof(a), "%lld", (long long)after);
    snprintf(labels, sizeof(labels), "kind=\"%s\"", kind);
    VC_LOG_F(VC_LOG_INFO, f, "repair: %s", what);
    vc_metric_add(vc_counter("voucher_reconciler_repairs_total", "Repairs made, by kind", labels),
                  count);
}

/* The order value Redis should hold for an order PostgreSQL (after the events in flight) has. */
static void order_value(const rc_order_t *o, char state, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld:%lld:%lld:%c", (long long)o->customer_id, (long long)o->discount,
             (long long)o->held_until_ms, state);
}

static char redis_state_for(rc_pg_status_t s)
{
    return s == RC_PG_RESERVED ? 'H' : s == RC_PG_CONFIRMED ? 'C' : 'R';
}

/*
 * The arguments of a counter repair (remaining_rule.lua): total_limit, the
 * uses counted without rows, lead_extra (restore: nowMs) when given, then the
 * orders to merge in fours. A restore merges every order the snapshot knows;
 * a retake those the snapshot counts and Redis lacked when read, or held R and
 * revivable. The caller frees with repair_args_free().
 */
typedef struct {
    const char **args;
    int nargs;
    char total[24], uncounted[24];
    char (*values)[128];
    char (*held)[24];
} repair_args_t;

static void repair_args_free(repair_args_t *a)
{
    free(a->args);
    free(a->values);
    free(a->held);
}

static int repair_args(voucher_t *v, int every_order, const char *lead_extra, repair_args_t *a)
{
    size_t n = 0, lead = lead_extra ? 3 : 2;

    memset(a, 0, sizeof(*a));
    a->args = calloc(lead + 4 * v->orders.len, sizeof(*a->args));
    a->values = calloc(v->orders.len + 1, sizeof(*a->values));
    a->held = calloc(v->orders.len + 1, sizeof(*a->held));
    if (!a->args || !a->values || !a->held)
        return VC_ERR_NOMEM;
    snprintf(a->total, sizeof(a->total), "%lld", (long long)v->n.total_limit);
    snprintf(a->uncounted, sizeof(a->uncounted), "%lld", (long long)v->n.uncounted);
    a->args[0] = a->total;
    a->args[1] = a->uncounted;
    if (lead_extra)
        a->args[2] = lead_extra;
    for (size_t i = 0; i < v->orders.cap; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i);
        const char **arg = a->args + lead + 4 * n;
        if (!o || o->pg_after == RC_PG_NONE)
            continue;
        if (!every_order && !(pg_counts(o->pg_after) &&
                              (!o->redis_state || (o->redis_state == 'R' && o->revivable))))
            continue;
        order_value(o, redis_state_for(o->pg_after), a->values[n], sizeof(a->values[n]));
        snprintf(a->held[n], sizeof(a->held[n]), "%lld", (long long)o->held_until_ms);
        arg[0] = o->order_id;
        arg[1] = a->values[n];
        arg[2] = a->held[n];
        arg[3] = o->revivable ? "1" : "0";
        n++;
    }
    a->nargs = (int)(lead + 4 * n);
    return 0;
}

/* Parses a repair script's "a:b" answer; both -1 when it is not one. */
static void parse_pair(const char *s, int64_t *a, int64_t *b)
{
    long long x, y;

    *a = *b = -1;
    if (sscanf(s, "%lld:%lld", &x, &y) == 2) {
        *a = x;
        *b = y;
    }
}

/*
 * Redis lost the voucher's counter: rebuild it, merging PostgreSQL plus the
 * events in flight into the orders Redis still holds (restore.lua).
 */
static int restore(rc_ctx_t *ctx, voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    repair_args_t a;
    rc_keys_t k;
    char now[24], answer[64];
    int64_t status = 0, live, remaining;
    int rc;

    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    if ((rc = repair_args(v, 1, now, &a)) != 0)
        goto out;
    rc_keys_of(v->code, &k);
    const char *keys[] = {k.name[RC_KEY_REMAINING], k.name[RC_KEY_USERS], k.name[RC_KEY_ORDERS],
                          k.name[RC_KEY_HOLDS], k.name[RC_KEY_RELEASING]};
    rc = rc_redis_eval(ctx->redis, vc_lua_restore, 5, keys, a.nargs, a.args, &status, answer,
                       sizeof(answer), err, errlen);
    if (rc == 0 && status == 1) {
        parse_pair(answer, &live, &remaining);
        sum->restored++;
        log_repair(v, "restore",
                   "restored a lost counter from PostgreSQL, the events in flight and the "
                   "orders Redis still holds",
                   live, -1, remaining);
    }
out:
    repair_args_free(&a);
    return rc;
}

/*
 * Writes again the orders PostgreSQL counts that Redis lost (or gave back,
 * where revivable), then lowers the counter to the rule's bound (retake.lua).
 */
static int retake(rc_ctx_t *ctx, voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    repair_args_t a;
    rc_keys_t k;
    char answer[64];
    int64_t status = 0, before, after;
    int rc;

    if ((rc = repair_args(v, 0, NULL, &a)) != 0)
        goto out;
    rc_keys_of(v->code, &k);
    const char *keys[] = {k.name[RC_KEY_REMAINING], k.name[RC_KEY_USERS], k.name[RC_KEY_ORDERS],
                          k.name[RC_KEY_HOLDS], k.name[RC_KEY_RELEASING]};
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_retake, 5, keys, a.nargs, a.args, &status, answer,
                            sizeof(answer), err, errlen)) != 0 ||
        status < 0)
        goto out;
    /* Taken again: the next pass must see them R anew before they count as revivable. */
    for (size_t i = 0; i < v->orders.cap; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i), *seen;
        if (o && o->revivable && (seen = rc_orders_find(&v->mem->released_seen, o->order_id)))
            seen->redis_state = 0;
    }
    parse_pair(answer, &before, &after);
    if (status > 0 || after < before) {
        sum->retaken += status;
        sum->lowered += after < before;
        log_repair(v, "retake", "took uses again that PostgreSQL counts and Redis lost", status,
                   before, after);
    }
    if (v->n.users_missing > 0)
        log_repair(v, "users", "counted again the uses of customers Redis's users hash lost",
                   v->n.users_missing, before, after);
out:
    repair_args_free(&a);
    return rc;
}

/* Lowers a counter above the rule's bound, recounting Redis's orders as it does (lower.lua). */
static int lower(rc_ctx_t *ctx, voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    char total[24], uncounted[24], answer[64];
    int64_t status, before, after;
    rc_keys_t k;
    int rc;

    rc_keys_of(v->code, &k);
    snprintf(total, sizeof(total), "%lld", (long long)v->n.total_limit);
    snprintf(uncounted, sizeof(uncounted), "%lld", (long long)v->n.uncounted);
    const char *keys[] = {k.name[RC_KEY_REMAINING], k.name[RC_KEY_ORDERS]};
    const char *args[] = {total, uncounted};
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_lower, 2, keys, 2, args, &status, answer,
                            sizeof(answer), err, errlen)) == 0 &&
        status == 1) {
        parse_pair(answer, &before, &after);
        sum->lowered++;
        log_repair(v, "lower",
                   "lowered a counter that offered more uses than the remaining rule allows",
                   before - after, before, after);
    }
    return rc;
}

/*
 * Queues the releases this voucher needs, decided by rc_model_release() on the
 * pass's snapshot (which began at snapshot_ms) and checked again by the
 * scripts against Redis as it is: expired holds, holds or confirmed orders
 * that never reached Kafka, orders PostgreSQL released, unfinished releases;
 * and repairs holds PostgreSQL has as confirmed. At most batch holds expire,
 * and batch releases resume, per voucher per pass.
 */
static int plan_releases(rc_ctx_t *ctx, voucher_t *v, int64_t snapshot_ms, releases_t *rs,
                         rc_summary_t *sum, char *err, size_t errlen)
{
    int64_t now = vc_time_now_ms(), expiring = 0;
    due_t d = {ctx, v, snapshot_ms, rs, 0, err, errlen};
    int rc = 0;

    /* Releases begun more than a grace ago and never finished: publish again. */
    if ((rc = rc_redis_due(ctx->redis, v->code, RC_KEY_RELEASING, now - ctx->cfg->grace_ms,
                           ctx->cfg->batch, due_cb, &d, err, errlen)) != 0 ||
        (rc = d.rc) != 0)
        return rc;
    for (size_t i = 0; i < v->orders.cap && rc == 0; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i);
        size_t n = rs->len;
        if (!o)
            continue;
        switch (rc_model_release(o, snapshot_ms, ctx->cfg->grace_ms)) {
        case RC_RELEASE_EXPIRE:
            if (expiring++ >= ctx->cfg->batch)
                break;
            rc = begin_release(ctx, v, o, "expire", "EXPIRED", snapshot_ms, rs, err, errlen);
            sum->expired += (int64_t)(rs->len - n);
            break;
        case RC_RELEASE_UNDELIVERED:
            rc = begin_release(ctx, v, o, "undelivered", "UNDELIVERED", snapshot_ms, rs, err,
                               errlen);
            sum->stranded += (int64_t)(rs->len - n);
            break;
        case RC_RELEASE_CANCEL:
            rc = begin_release(ctx, v, o, "cancel", "REPAIR", snapshot_ms, rs, err, errlen);
            break;
        case RC_RELEASE_DISCARD:
            /* An operator discarded its dead letter (voucher-writer dlt discard). */
            rc = begin_release(ctx, v, o, "cancel", "DISCARDED", snapshot_ms, rs, err, errlen);
            sum->discarded += (int64_t)(rs->len - n);
            break;
        case RC_RELEASE_TO_CONFIRMED:
            rc = repair_confirmed(ctx, v, o, sum, err, errlen);
            break;
        case RC_RELEASE_NONE:
            break;
        }
    }
    return rc;
}

/* Publishes the queued releases, then gives back the uses Kafka acknowledged. */
static int run_releases(rc_ctx_t *ctx, releases_t *rs, rc_summary_t *sum, char *err, size_t errlen)
{
    vc_event_t *events;
    int *delivered;
    int rc = 0;

    if (rs->len == 0)
        return 0;
    events = calloc(rs->len, sizeof(*events));
    delivered = calloc(rs->len, sizeof(*delivered));
    if (!events || !delivered) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < rs->len; i++)
        events[i] = rs->items[i].ev;
    if ((rc = rc_kafka_publish(ctx->kafka, events, (int)rs->len, delivered, ctx->cfg->timeout_ms,
                               err, errlen)) != 0 ||
        (rc = still_leading(ctx, err, errlen)) != 0)
        goto out;
    for (size_t i = 0; i < rs->len && rc == 0; i++) {
        release_t *r = &rs->items[i];
        rc_keys_t k;
        int64_t status;
        if (delivered[i] != 1)
            continue; /* still X or E: the next pass publishes again */
        rc_keys_of(r->v->code, &k);
        const char *keys[] = {k.name[RC_KEY_REMAINING], k.name[RC_KEY_USERS],
                              k.name[RC_KEY_ORDERS], k.name[RC_KEY_RELEASING]};
        const char *args[] = {r->ev.order_id};
        if ((rc = rc_redis_eval(ctx->redis, vc_lua_release_finish, 4, keys, 1, args, &status,
                                NULL, 0, err, errlen)) == 0 &&
            status == 1) {
            sum->finished++;
            if (strcmp(r->ev.reason, "EXPIRED") == 0)
                vc_metric_add(vc_counter("voucher_reconciler_holds_expired_total",
                                         "Unpaid holds given back after their heldUntil", NULL),
                              1);
        }
    }
    /* One line per voucher, with the counts before and after. */
    for (size_t i = 0; i < rs->len; i++) {
        voucher_t *v = rs->items[i].v;
        int64_t n = 0, failed = 0, rem;
        int loaded;
        if (i > 0 && rs->items[i - 1].v == v)
            continue;
        for (size_t j = i; j < rs->len && rs->items[j].v == v; j++) {
            n += delivered[j] == 1;
            failed += delivered[j] != 1;
        }
        if (rc_redis_remaining(ctx->redis, v->code, &loaded, &rem, err, errlen) != 0)
            rem = -1;
        log_repair(v, "release", "released expired, stranded or cancelled holds", n, v->n.redis_remaining, rem);
        if (failed)
            vc_warn("%s: %lld releases not acknowledged by Kafka; they stay begun and are "
                    "published again next pass",
                    v->code, (long long)failed);
    }
out:
    free(events);
    free(delivered);
    return rc;
}

/*
 * Whether this pass reads v in full (every row, every Redis order) or judges
 * it by its numbers alone. A quiet voucher (Redis takes exactly the uses
 * PostgreSQL counts, no event in flight, no hold due, no release under way)
 * would be judged consistent by a full read too, except for drift that
 * cancels out in the counts (one use Redis gave back and PostgreSQL counts,
 * one Redis holds and nothing downstream knows): so each voucher is still
 * read in full once full_every_ms has passed since its last full read. Those
 * periodic reads take at most *periodic_left more of this pass (the caller
 * allows an eighth of the vouchers), so they spread over passes instead of
 * all coming due together. Reading everything every pass costs time and
 * memory in proportion to every row of every active voucher.
 */
static int choose_full(rc_ctx_t *ctx, voucher_t *v, int *periodic_left, char *err, size_t errlen)
{
    int64_t due = 0, releasing = 0;
    int rc = 0;

    v->full = 1;
    if (ctx->cfg->full_every_ms <= 0 || !v->mem->last_full_ms)
        return 0; /* always in full, or never read in full yet */
    if (v->n.redis_loaded) {
        /* The numbers first: the two counts cost a round trip only when they agree. */
        if (!rc_model_quiet(&v->n, 0, 0) ||
            (rc = rc_redis_activity(ctx->redis, v->code, vc_time_now_ms() - ctx->cfg->grace_ms,
                                    &due, &releasing, err, errlen)) != 0 ||
            !rc_model_quiet(&v->n, due, releasing))
            return rc;
    } else if (v->claimed || v->n.in_flight_events > 0) {
        return 0; /* loaded once and lost: restore it (never loaded: nothing to compare) */
    }
    if (vc_time_mono_ms() - v->mem->last_full_ms >= ctx->cfg->full_every_ms && *periodic_left > 0) {
        (*periodic_left)--;
        return 0;
    }
    v->full = 0;
    return 0;
}

static void record_metrics(const voucher_t *v)
{
    char labels[64];

    snprintf(labels, sizeof(labels), "code=\"%s\"", v->code);
    vc_metric_set(vc_gauge("voucher_reconciler_drift",
                           "Uses Redis holds beyond what PostgreSQL will count, per voucher "
                           "(negative: Redis offers uses PostgreSQL counts)",
                           labels),
                  v->n.redis_loaded ? v->n.redis_taken - v->n.pg_live_after - v->n.uncounted : 0);
    vc_metric_set(vc_gauge("voucher_reconciler_verdict",
                           "Last verdict per voucher: 0 consistent, 1 not loaded, 2 behind, "
                           "3 undersold, 4 drifted, 5 used_count counts uses without rows, "
                           "6 parked (dead letters wait for an operator)",
                           labels),
                  (int64_t)v->verdict);
    vc_metric_set(vc_gauge("voucher_reconciler_parked_letters",
                           "Dead letters parked per voucher, waiting for an operator "
                           "(voucher-writer dlt replay or discard); their uses stay taken",
                           labels),
                  v->n.parked);
    /* The numbers of the sale itself, for the dashboard: what is left, what is counted. */
    vc_metric_set(vc_gauge("voucher_reconciler_limit", "total_limit per voucher", labels),
                  v->n.total_limit);
    vc_metric_set(vc_gauge("voucher_reconciler_used", "used_count in PostgreSQL per voucher",
                           labels),
                  v->n.used_count);
    if (v->n.redis_loaded)
        vc_metric_set(vc_gauge("voucher_reconciler_remaining",
                               "Uses Redis may still give out per voucher, as the last pass read",
                               labels),
                      v->n.redis_remaining);
}

static void print_row(FILE *table, const voucher_t *v)
{
    char redis_left[24];
    if (v->n.redis_loaded)
        snprintf(redis_left, sizeof(redis_left), "%lld", (long long)v->n.redis_remaining);
    else
        snprintf(redis_left, sizeof(redis_left), "-");
    fprintf(table, "%-20s %7lld %7lld %8lld %10s %9lld %6lld %8lld %9lld  %s\n", v->code,
            (long long)v->n.total_limit, (long long)v->n.used_count,
            (long long)(v->n.total_limit - v->n.used_count), redis_left,
            (long long)v->n.in_flight_events, (long long)v->n.parked, (long long)v->n.releasing,
            (long long)(v->n.unsent_fresh + v->n.stranded), rc_verdict_name(v->verdict));
}

int rc_pass(rc_ctx_t *ctx, int repair, FILE *table, rc_summary_t *sum, char *err, size_t errlen)
{
    vouchers_t vs = {0};
    releases_t rs = {0};
    rc_positions_t pos;
    /* Every event Kafka acknowledged before this is in PostgreSQL or read from the tail. */
    int64_t snapshot_ms = vc_time_now_ms(), lag = 0;
    int rc, periodic_left;

    memset(sum, 0, sizeof(*sum));
    repair = repair && ctx->leader;
    if ((rc = rc_ctx_connect(ctx, err, errlen)) != 0)
        return rc;
    /* 1, 2, 3, 4: in this order (see rc_pass.h). */
    if ((rc = rc_kafka_positions(ctx->kafka, ctx->cfg->timeout_ms, &pos, err, errlen)) != 0 ||
        (rc = read_vouchers(ctx, &vs, err, errlen)) != 0 ||
        (rc = memory_align(ctx->memory, &vs)) != 0 ||
        (rc = rc_kafka_tail(ctx->kafka, &pos, ctx->cfg->timeout_ms * 4, tail_cb, &vs, &lag,
                            &sum->malformed, err, errlen)) != 0)
        goto out;
    VC_PAUSE("reconciler-after-tail");
    if (vs.nomem) {
        snprintf(err, errlen, "out of memory keeping the events in flight");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    sum->in_flight = lag;
    vc_metric_set(vc_gauge("voucher_reconciler_writer_lag_events",
                           "Events published but not yet applied by the writer", NULL),
                  lag);

    /* Which vouchers need their rows and orders read; the quiet ones are judged by numbers. */
    periodic_left = (int)(vs.len / 8) + 1;
    for (size_t i = 0; i < vs.len; i++) {
        voucher_t *v = &vs.v[i];
        if ((rc = rc_redis_remaining(ctx->redis, v->code, &v->n.redis_loaded,
                                     &v->n.redis_remaining, err, errlen)) != 0 ||
            (rc = choose_full(ctx, v, &periodic_left, err, errlen)) != 0)
            goto out;
        sum->read_in_full += v->full;
    }
    VC_PAUSE("reconciler-after-remaining");
    if ((rc = read_rows(ctx, &vs, err, errlen)) != 0)
        goto out;

    for (size_t i = 0; i < vs.len; i++) {
        voucher_t *v = &vs.v[i];
        int bad = 0;

        if (!v->full) {
            /*
             * Numbers agree and nothing is under way: what a full read would
             * conclude, uses counted without rows included (the last full
             * read counted them; the writer never changes that difference).
             */
            v->n.uncounted = v->mem->uncounted;
            v->n.live_rows = v->n.pg_live_after = v->n.used_count - v->n.uncounted;
            v->n.redis_taken = v->n.redis_loaded ? v->n.total_limit - v->n.redis_remaining : 0;
            v->n.redis_counted = v->n.redis_loaded ? v->n.redis_taken - v->n.uncounted : 0;
            v->n.bound = vc_remaining_bound(v->n.total_limit, v->n.uncounted, v->n.live_rows);
            v->verdict = !v->n.redis_loaded      ? RC_NOT_LOADED
                         : v->mem->uncounted > 0 ? RC_USED_WITHOUT_ROWS
                                                 : RC_CONSISTENT;
            continue;
        }
        /* The counter is read again with the orders, at one moment: the verdict compares those. */
        if ((rc = replay_events(v)) != 0 ||
            (rc = rc_redis_orders(ctx->redis, v->code, &v->orders, &v->n.redis_loaded,
                                  &v->n.redis_remaining, &v->n.redis_users, &bad, err,
                                  errlen)) != 0)
            goto out;
        if (bad)
            vc_warn("%s: %d orders in Redis could not be read", v->code, bad);
        remember_before(v, vc_time_now_ms());
        released_before(v);
        v->verdict = rc_model_judge(&v->orders, &v->n, vc_time_now_ms(), ctx->cfg->grace_ms);
        remember_after(v);
        if ((rc = released_after(v)) != 0)
            goto out;
        v->mem->uncounted = v->n.uncounted;
        v->mem->last_full_ms = vc_time_mono_ms();
    }

    /* Everything is read and judged; the repairs below act on Redis as it is now. */
    VC_PAUSE("reconciler-before-repair");
    if (table)
        fprintf(table, "%-20s %7s %7s %8s %10s %9s %6s %8s %9s  %s\n", "voucher", "limit",
                "used", "pg_left", "redis_left", "in_flight", "parked", "releasing", "unsent",
                "verdict");
    for (size_t i = 0; i < vs.len; i++) {
        voucher_t *v = &vs.v[i];
        int changed = 0;

        sum->vouchers++;
        sum->verdicts[v->verdict]++;
        sum->parked += v->n.parked;
        record_metrics(v);
        if (table)
            print_row(table, v);
        if (v->verdict != RC_CONSISTENT && v->verdict != RC_NOT_LOADED && v->verdict != RC_PARKED) {
            char taken[24], live[24];
            vc_log_field_t f[] = {{"code", v->code}, {"redisTaken", taken}, {"pgLive", live}};
            snprintf(taken, sizeof(taken), "%lld", (long long)v->n.redis_taken);
            snprintf(live, sizeof(live), "%lld", (long long)v->n.pg_live_after);
            /* A lasting used-without-rows warns at each full read, not each pass. */
            int warn = v->verdict == RC_USED_WITHOUT_ROWS ? v->full : v->verdict >= RC_UNDERSOLD;
            VC_LOG_F(warn ? VC_LOG_WARN : VC_LOG_DEBUG, f,
                     "%s: used_count %lld, %lld events in flight, %lld releases under way, "
                     "%lld fresh and %lld stranded holds, %lld released in PostgreSQL, "
                     "%lld counted in PostgreSQL and lost in Redis, %lld given back in Redis "
                     "after the snapshot, %lld confirmed in Redis and unknown downstream past "
                     "heldUntil; total_limit %lld, live rows %lld, %lld uses counted "
                     "without rows, remaining %lld of at most %lld",
                     rc_verdict_name(v->verdict), (long long)v->n.used_count,
                     (long long)v->n.in_flight_events, (long long)v->n.releasing,
                     (long long)v->n.unsent_fresh, (long long)v->n.stranded,
                     (long long)v->n.released_in_pg, (long long)v->n.missing_in_redis,
                     (long long)v->n.released_after, (long long)v->n.confirmed_unknown,
                     (long long)v->n.total_limit,
                     (long long)v->n.live_rows, (long long)v->n.uncounted,
                     (long long)v->n.redis_remaining, (long long)v->n.bound);
        }
        /* A total_limit changed without Redis (rc_raise.h): every loaded voucher, quiet or not. */
        if (repair && v->n.redis_loaded &&
            (rc = rc_limit_sync(ctx->pg, ctx->redis, v->code, v->n.total_limit, prove_lead, ctx,
                                &changed, err, errlen)) != 0)
            goto out;
        if (!repair || !v->full)
            continue;
        if ((rc = still_leading(ctx, err, errlen)) != 0)
            goto out;
        if (!v->n.redis_loaded) {
            /*
             * Never loaded: the gateway loads it on first use. Loaded once:
             * restore it, but only once it has been missing for longer than a
             * gateway takes to deliver an event. Reservations taken just
             * before the keys vanished are then in Kafka, where the restore
             * counts them; restoring sooner would offer their uses again.
             */
            memory_entry_t *e = v->mem;
            if (!v->claimed)
                continue;
            if (!e->missing_since_ms)
                e->missing_since_ms = vc_time_now_ms();
            if (vc_time_now_ms() - e->missing_since_ms < ctx->cfg->restore_delay_ms) {
                sum->awaiting_restore++;
                continue;
            }
            if ((rc = restore(ctx, v, sum, err, errlen)) != 0)
                goto out;
            e->missing_since_ms = 0;
            continue;
        }
        v->mem->missing_since_ms = 0;
        /* Both recount Redis's orders when they run; a retake lowers as a lower would. */
        if ((v->n.missing_in_redis > 0 || v->n.users_missing > 0) &&
            (rc = retake(ctx, v, sum, err, errlen)) != 0)
            goto out;
        if (v->n.missing_in_redis == 0 && v->n.users_missing == 0 &&
            rc_model_excess_remaining(&v->n) > 0 &&
            (rc = lower(ctx, v, sum, err, errlen)) != 0)
            goto out;
        if ((rc = plan_releases(ctx, v, snapshot_ms, &rs, sum, err, errlen)) != 0)
            goto out;
    }
    if (repair)
        rc = run_releases(ctx, &rs, sum, err, errlen);
out:
    /* A pass that failed between read_vouchers() and read_rows() left the snapshot open. */
    if (ctx->pg && PQtransactionStatus(ctx->pg) != PQTRANS_IDLE &&
        PQtransactionStatus(ctx->pg) != PQTRANS_UNKNOWN)
        PQclear(PQexec(ctx->pg, "ROLLBACK"));
    if (rc != 0 && ctx->redis && (rc == VC_ERR_UNAVAILABLE || rc == VC_ERR_TIMEOUT)) {
        /* A broken Redis connection is made anew next pass. */
        rc_redis_free(ctx->redis);
        ctx->redis = NULL;
    }
    free(rs.items);
    vouchers_free(&vs);
    return rc;
}
