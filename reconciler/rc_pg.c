#include "rc_pg.h"
#include "rc_grow.h"
#include "rc_leader.h"
#include "vc_error.h"
#include "vc_pg.h"

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
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
 * The leader proves its session at most RC_PROOF_EVERY_MS (rc_pg.h) before
 * each repair: it stops acting long before PostgreSQL could give the lock away.
 */
#define RC_KEEPALIVE_IDLE_S 10
#define RC_KEEPALIVE_INTERVAL_S 5
#define RC_KEEPALIVE_COUNT 3
#define RC_SILENCE_MS ((RC_KEEPALIVE_IDLE_S + RC_KEEPALIVE_INTERVAL_S * RC_KEEPALIVE_COUNT) * 1000)
#define RC_STR_(x) #x
#define RC_STR(x) RC_STR_(x)

/*
 * Opens the session that also holds the lock: keepalives and a user timeout
 * on our side (libpq) and on PostgreSQL's (the session's settings), so that a
 * half-open connection ends within RC_SILENCE_MS instead of keeping the lock
 * for hours, and a statement timeout, so that a blocked read fails the pass
 * instead of stalling every pass. Returns the connection or NULL with err set.
 */
static PGconn *lock_session(const char *dsn, int64_t timeout_ms, char *err, size_t errlen)
{
    static const char *const keys[] = {"keepalives",       "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout", NULL};
    static const char *const vals[] = {"1",
                                       RC_STR(RC_KEEPALIVE_IDLE_S),
                                       RC_STR(RC_KEEPALIVE_INTERVAL_S),
                                       RC_STR(RC_KEEPALIVE_COUNT),
                                       "25000",
                                       NULL};
    char set[320];
    PGconn *conn;

    _Static_assert(RC_SILENCE_MS == 25000, "tcp_user_timeout above is RC_SILENCE_MS");
    if (!(conn = vc_pg_connect_with(dsn, "voucher-reconciler", keys, vals, err, errlen)))
        return NULL;
    /* The longest read of a pass: six Redis or Kafka timeouts, 30 s at least. */
    snprintf(set, sizeof(set),
             "SET tcp_keepalives_idle = %d; SET tcp_keepalives_interval = %d;"
             " SET tcp_keepalives_count = %d; SET tcp_user_timeout = %d;"
             " SET statement_timeout = %lld",
             RC_KEEPALIVE_IDLE_S, RC_KEEPALIVE_INTERVAL_S, RC_KEEPALIVE_COUNT, RC_SILENCE_MS,
             (long long)(timeout_ms * 6 > 30000 ? timeout_ms * 6 : 30000));
    if (vc_pg_command(conn, set, err, errlen) != 0) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

struct rc_pg {
    PGconn *conn;
};

PGconn *rc_pg_conn(rc_pg_t *pg)
{
    return pg->conn;
}

rc_pg_t *rc_pg_connect(const char *dsn, int64_t timeout_ms, char *err, size_t errlen)
{
    rc_pg_t *pg = calloc(1, sizeof(*pg));

    if (!pg) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(pg->conn = lock_session(dsn, timeout_ms, err, errlen))) {
        free(pg);
        return NULL;
    }
    return pg;
}

void rc_pg_free(rc_pg_t *pg)
{
    if (!pg)
        return;
    PQfinish(pg->conn);
    free(pg);
}

int rc_pg_ok(const rc_pg_t *pg)
{
    return pg && PQstatus(pg->conn) == CONNECTION_OK;
}

int rc_pg_try_lock(rc_pg_t *pg, int64_t *generation, char *err, size_t errlen)
{
    int rc = 0, taken = 0;
    /*
     * One statement: the lock, and only when it was taken the generation
     * raised and returned. It commits on its own, so the new value is durable
     * before any Redis sees it. The lock is the session's: it outlives the
     * statement, even one that failed after taking it (the caller then closes
     * the session).
     */
    PGresult *res = vc_pg_exec(pg->conn,
                               "UPDATE reconciler_leader SET generation = generation + 1"
                               " WHERE pg_try_advisory_lock(x'" RC_LOCK_KEY "'::bigint)"
                               " RETURNING generation",
                               0, NULL, &rc, err, errlen);

    *generation = 0;
    if (!res)
        return rc;
    if (PQntuples(res) == 1) {
        if ((rc = rc_leader_parse(PQgetvalue(res, 0, 0), generation)) == 0)
            taken = 1;
        else
            snprintf(err, errlen, "reconciler_leader.generation is not a generation: %s",
                     PQgetvalue(res, 0, 0));
    } else if (PQntuples(res) > 1) {
        snprintf(err, errlen, "reconciler_leader has %d rows, not one", PQntuples(res));
        rc = VC_ERR_PROTOCOL;
    }
    PQclear(res);
    return rc != 0 ? rc : taken;
}

int rc_pg_holds_lock(rc_pg_t *pg, char *err, size_t errlen)
{
    int rc = 0;
    PGresult *res = vc_pg_exec(pg->conn,
                               "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                               " AND pid = pg_backend_pid() AND granted AND classid = 0"
                               " AND objid = x'" RC_LOCK_KEY "'::bigint::oid AND objsubid = 1",
                               0, NULL, &rc, err, errlen);
    int held = res && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "1") == 0;

    if (res && !held)
        snprintf(err, errlen, "the session no longer holds it");
    PQclear(res);
    return held;
}

void rc_pg_end_snapshot(rc_pg_t *pg)
{
    if (pg)
        vc_pg_rollback(pg->conn);
}

/* Runs a query that returns rows; on failure sets rc and err and returns NULL. */
static PGresult *query(rc_pg_t *pg, const char *sql, int *rc, char *err, size_t errlen)
{
    return vc_pg_exec(pg->conn, sql, 0, NULL, rc, err, errlen);
}

/* Runs sql with the array literal codes as $1; on failure sets rc and err and returns NULL. */
static PGresult *query_codes(rc_pg_t *pg, const char *sql, const char *codes, int *rc, char *err,
                             size_t errlen)
{
    const char *params[1] = {codes};

    return vc_pg_exec(pg->conn, sql, 1, params, rc, err, errlen);
}

/*
 * The order of row r of a result sorted by voucher code (code in column 0,
 * orderId in 1), created when new; *v caches the row's voucher. Returns NULL
 * when the voucher is not among vs (the row is skipped) or, with *rc set,
 * when out of memory.
 */
static rc_order_t *row_order(rc_vouchers_t *vs, rc_voucher_t **v, const PGresult *res, int r,
                             int *rc)
{
    const char *code = PQgetvalue(res, r, 0);
    rc_order_t *o;

    if ((!*v || strcmp((*v)->code, code) != 0) && !(*v = rc_vouchers_find(vs, code)))
        return NULL;
    if (!(o = rc_orders_get(&(*v)->orders, PQgetvalue(res, r, 1))))
        *rc = VC_ERR_NOMEM;
    return o;
}

/*
 * The vouchers of res, selected as code, total_limit, used_count, a fourth
 * column, parked dead letters, ends_at in ms, into vs (allocated here). The
 * fourth is, for a flash voucher, whether Redis was loaded (redis_loaded_at);
 * for a direct one (direct), its live rows, which are then read (rows_read).
 * Frees res. 0 or VC_ERR_NOMEM.
 */
static int voucher_rows(PGresult *res, rc_vouchers_t *vs, int direct)
{
    if (rc_vouchers_alloc(vs, (size_t)PQntuples(res)) != 0) {
        PQclear(res);
        return VC_ERR_NOMEM;
    }
    for (size_t i = 0; i < vs->len; i++) {
        rc_voucher_t *v = &vs->v[i];
        snprintf(v->code, sizeof(v->code), "%s", PQgetvalue(res, (int)i, 0));
        v->n.total_limit = strtoll(PQgetvalue(res, (int)i, 1), NULL, 10);
        v->n.used_count = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
        if (direct) {
            v->n.live_rows = strtoll(PQgetvalue(res, (int)i, 3), NULL, 10);
            v->n.pg_live_after = v->n.live_rows;
            v->rows_read = 1;
        } else {
            v->n.live_rows = v->n.used_count; /* counted from the rows when they are read */
            v->claimed = strcmp(PQgetvalue(res, (int)i, 3), "t") == 0;
        }
        v->n.parked = strtoll(PQgetvalue(res, (int)i, 4), NULL, 10);
        v->ends_at_ms = strtoll(PQgetvalue(res, (int)i, 5), NULL, 10);
    }
    PQclear(res);
    return 0;
}

/*
 * Step 2: every active voucher (not ended more than a day ago) and its
 * numbers. This opens a read-only REPEATABLE READ transaction that stays
 * open until rc_pg_read_rows() (rc_pg.h).
 */
int rc_pg_read_vouchers(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen)
{
    PGresult *res;
    int rc = 0;

    if (!(res = query(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", &rc, err, errlen)))
        return rc;
    PQclear(res);
    if (!(res = query(pg,
                      "SELECT v.code, v.total_limit, v.used_count, v.redis_loaded_at IS NOT NULL,"
                      " (SELECT count(*) FROM dead_letter d WHERE d.voucher_code = v.code"
                      "   AND d.state = 'parked'),"
                      " (extract(epoch FROM v.ends_at) * 1000)::bigint"
                      " FROM voucher v WHERE v.ends_at > now() - interval '1 day'"
                      /* A direct voucher is never read for Redis: rc_pg_read_direct(). */
                      "   AND v.mode = 'flash'"
                      " ORDER BY v.code COLLATE \"C\"",
                      &rc, err, errlen)))
        return rc;
    return voucher_rows(res, vs, 0);
}

int rc_pg_read_aggregates(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen)
{
    PGresult *res;
    rc_voucher_t *v = NULL;
    int rc = 0;

    /* The vouchers rc_pg_read_vouchers() read, by the same filter, in the same snapshot. */
    if (!(res = query(pg,
                      "SELECT v.code, a.agg_reserved, a.agg_confirmed, a.agg_released,"
                      " a.agg_reserved_customers, a.agg_confirmed_customers,"
                      " a.agg_released_customers"
                      " FROM voucher v JOIN voucher_aggregate a ON a.code = v.code"
                      " WHERE v.ends_at > now() - interval '1 day'"
                      " AND a.agg_reserved IS NOT NULL AND a.agg_confirmed IS NOT NULL"
                      " AND a.agg_released IS NOT NULL AND a.agg_reserved_customers IS NOT NULL"
                      " AND a.agg_confirmed_customers IS NOT NULL"
                      " AND a.agg_released_customers IS NOT NULL",
                      &rc, err, errlen)))
        return rc;
    for (int r = 0; r < PQntuples(res); r++) {
        static const int states[] = {RC_AGG_HELD, RC_AGG_CONFIRMED, RC_AGG_RELEASED};

        if (!(v = rc_vouchers_find(vs, PQgetvalue(res, r, 0))))
            continue; /* not among this pass's vouchers */
        memset(&v->agg_pg, 0, sizeof(v->agg_pg));
        v->agg_pg.present = 1;
        for (int i = 0; i < 3; i++) {
            v->agg_pg.count[states[i]] = strtoll(PQgetvalue(res, r, 1 + i), NULL, 10);
            v->agg_pg.customers[states[i]] = strtoll(PQgetvalue(res, r, 4 + i), NULL, 10);
        }
    }
    PQclear(res);
    return 0;
}

static int read_letters(rc_pg_t *pg, rc_vouchers_t *vs, const char *codes, char *err,
                        size_t errlen);

/*
 * Step 2, second half: every row of the vouchers read in full whose rows are
 * not read yet, from the snapshot rc_pg_read_vouchers() took, which stays
 * open. Their live rows are counted here.
 */
int rc_pg_read_rows(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen)
{
    size_t cap = 3, len = 0;
    char *codes;
    PGresult *res = NULL;
    rc_voucher_t *v = NULL;
    int rc = 0;

    /* The codes as an array literal, {A,B}: [A-Z0-9_-], nothing to quote. */
    for (size_t i = 0; i < vs->len; i++)
        cap += vs->v[i].full && !vs->v[i].rows_read ? strlen(vs->v[i].code) + 1 : 0;
    if (!(codes = malloc(cap)))
        return VC_ERR_NOMEM;
    codes[len++] = '{';
    for (size_t i = 0; i < vs->len; i++) {
        size_t n = strlen(vs->v[i].code);
        if (!vs->v[i].full || vs->v[i].rows_read)
            continue;
        vs->v[i].rows_read = 1;
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
    if (!(res = query_codes(pg,
                            "SELECT r.voucher_code, r.order_id, r.customer_id, r.discount_amount,"
                            " r.status,"
                            " coalesce((extract(epoch FROM r.held_until) * 1000)::bigint, 0)"
                            " FROM voucher_redemption r WHERE r.voucher_code = ANY ($1::text[])"
                            " ORDER BY r.voucher_code",
                            codes, &rc, err, errlen)))
        goto out;
    for (int r = 0; r < PQntuples(res) && rc == 0; r++) {
        rc_order_t *o = row_order(vs, &v, res, r, &rc);

        if (!o)
            continue;
        o->customer_id = strtoll(PQgetvalue(res, r, 2), NULL, 10);
        o->discount = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        o->pg = o->pg_after = vc_rd_status_parse(PQgetvalue(res, r, 4));
        o->held_until_ms = strtoll(PQgetvalue(res, r, 5), NULL, 10);
        if (vc_rd_counts(o->pg))
            v->n.live_rows++;
    }
    if (rc == 0)
        rc = read_letters(pg, vs, codes, err, errlen);
out:
    PQclear(res);
    free(codes);
    return rc;
}

/* A growing array literal of quoted text elements; out of memory is sticky. */
typedef struct {
    char *s;
    size_t len, cap;
    int nomem;
} text_array_t;

static void text_put(text_array_t *t, char c)
{
    if (t->nomem)
        return;
    if (rc_grow((void **)&t->s, &t->cap, t->len, 1, 256) != 0) {
        t->nomem = 1;
        return;
    }
    t->s[t->len++] = c;
}

/* Appends s as an element: "..." with " and \ escaped (an orderId is the client's text). */
static void text_quoted(text_array_t *t, const char *s)
{
    if (t->len > 1)
        text_put(t, ','); /* after the opening brace and an element */
    text_put(t, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            text_put(t, '\\');
        text_put(t, *s);
    }
    text_put(t, '"');
}

/*
 * The order row r of res names (its voucher code in column 0, its orderId in
 * column 1) when that voucher is read by a targeted read and has the order in
 * its map; else NULL (a row of another voucher than the order's is not the
 * order's).
 */
static rc_order_t *targeted_order(rc_vouchers_t *vs, const PGresult *res, int r)
{
    rc_voucher_t *v = rc_vouchers_find(vs, PQgetvalue(res, r, 0));

    return v && v->targeted ? rc_orders_find(&v->orders, PQgetvalue(res, r, 1)) : NULL;
}

/*
 * The rows and dead letters of the orders of the targeted vouchers (every
 * order in their maps: those their events in flight name, their newest
 * holds), from the snapshot rc_pg_read_vouchers() took: one query by orderId
 * (UNIQUE), whatever voucher a row is of; a row of another voucher than the
 * order's is not the order's.
 */
int rc_pg_read_orders(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen)
{
    text_array_t ids = {0};
    PGresult *res = NULL;
    const char *params[1];
    int rc = 0;

    text_put(&ids, '{');
    for (size_t i = 0; i < vs->len; i++) {
        rc_order_t *o;
        for (size_t j = 0; vs->v[i].targeted && j < vs->v[i].orders.cap; j++)
            if ((o = rc_orders_at(&vs->v[i].orders, j)))
                text_quoted(&ids, o->order_id);
    }
    text_put(&ids, '}');
    text_put(&ids, '\0');
    if (ids.nomem) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    if (ids.len == 3)
        goto out; /* no order to read */
    params[0] = ids.s;
    if (!(res = vc_pg_exec(pg->conn,
                           "SELECT r.voucher_code, r.order_id, r.customer_id, r.discount_amount,"
                           " r.status,"
                           " coalesce((extract(epoch FROM r.held_until) * 1000)::bigint, 0)"
                           " FROM voucher_redemption r WHERE r.order_id = ANY ($1::text[])",
                           1, params, &rc, err, errlen)))
        goto out;
    for (int r = 0; r < PQntuples(res); r++) {
        rc_order_t *o = targeted_order(vs, res, r);

        if (!o)
            continue;
        o->customer_id = strtoll(PQgetvalue(res, r, 2), NULL, 10);
        o->discount = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        o->pg = o->pg_after = vc_rd_status_parse(PQgetvalue(res, r, 4));
        o->held_until_ms = strtoll(PQgetvalue(res, r, 5), NULL, 10);
    }
    PQclear(res);
    /* Their dead letters, parked or discarded, with a row or without (read_letters()). */
    if (!(res = vc_pg_exec(pg->conn,
                           "SELECT d.voucher_code, d.order_id, bool_or(d.state = 'parked'),"
                           " bool_or(d.state = 'discarded')"
                           " FROM dead_letter d WHERE d.order_id = ANY ($1::text[])"
                           " AND d.state IN ('parked', 'discarded') GROUP BY 1, 2",
                           1, params, &rc, err, errlen)))
        goto out;
    for (int r = 0; r < PQntuples(res); r++) {
        rc_order_t *o = targeted_order(vs, res, r);

        if (!o)
            continue;
        o->parked = strcmp(PQgetvalue(res, r, 2), "t") == 0;
        o->discarded = strcmp(PQgetvalue(res, r, 3), "t") == 0;
    }
out:
    PQclear(res);
    free(ids.s);
    return rc;
}

/*
 * Step 2, the dead letters of the vouchers read in full (same snapshot):
 * which orders have a letter parked (never released by a pass) or
 * discarded by an operator (released with reason DISCARDED).
 */
static int read_letters(rc_pg_t *pg, rc_vouchers_t *vs, const char *codes, char *err,
                        size_t errlen)
{
    PGresult *res;
    rc_voucher_t *v = NULL;
    int rc = 0;

    if (!(res = query_codes(pg,
                            "SELECT d.voucher_code, d.order_id, bool_or(d.state = 'parked'),"
                            " bool_or(d.state = 'discarded')"
                            " FROM dead_letter d WHERE d.voucher_code = ANY ($1::text[])"
                            " AND d.order_id IS NOT NULL AND d.state IN ('parked', 'discarded')"
                            " GROUP BY 1, 2 ORDER BY 1",
                            codes, &rc, err, errlen)))
        return rc;
    for (int r = 0; r < PQntuples(res) && rc == 0; r++) {
        rc_order_t *o = row_order(vs, &v, res, r, &rc);

        if (!o)
            continue;
        o->parked = strcmp(PQgetvalue(res, r, 2), "t") == 0;
        o->discarded = strcmp(PQgetvalue(res, r, 3), "t") == 0;
    }
    PQclear(res);
    return rc;
}

int rc_pg_read_direct(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen)
{
    PGresult *res;
    int rc = 0;

    /*
     * One statement, one snapshot: used_count and the live rows at one
     * moment. The live rows are the aggregates' count (030: kept by the
     * redemptions' trigger in the transactions that change them, so O(1) a
     * voucher), or counted when they are not kept (no row yet, or NULL).
     */
    if (!(res = query(pg,
                      "SELECT v.code, v.total_limit, v.used_count,"
                      " CASE WHEN a.agg_reserved IS NOT NULL AND a.agg_confirmed IS NOT NULL"
                      "  THEN a.agg_reserved + a.agg_confirmed"
                      "  ELSE (SELECT count(*) FROM voucher_redemption r"
                      "   WHERE r.voucher_code = v.code AND r.status IN ('RESERVED', 'CONFIRMED'))"
                      " END,"
                      " (SELECT count(*) FROM dead_letter d WHERE d.voucher_code = v.code"
                      "   AND d.state = 'parked'),"
                      " (extract(epoch FROM v.ends_at) * 1000)::bigint"
                      " FROM voucher v LEFT JOIN voucher_aggregate a ON a.code = v.code"
                      " WHERE v.ends_at > now() - interval '1 day' AND v.mode = 'direct'"
                      " ORDER BY v.code COLLATE \"C\"",
                      &rc, err, errlen)))
        return rc;
    return voucher_rows(res, vs, 1);
}

int rc_pg_expire_direct(rc_pg_t *pg, int limit, int64_t now_ms, int64_t grace_ms, int64_t *released,
                        char *err, size_t errlen)
{
    char a[16], b[24], c[24];
    const char *params[3] = {a, b, c};
    PGresult *res;
    int rc = 0;

    *released = 0;
    snprintf(a, sizeof(a), "%d", limit);
    snprintf(b, sizeof(b), "%lld", (long long)now_ms);
    snprintf(c, sizeof(c), "%lld", (long long)grace_ms);
    /* Its own statement outside any transaction: the slice commits on its own. */
    if (!(res = vc_pg_exec(pg->conn,
                           "SELECT count(*) FROM dr_expire($1::int, $2::bigint, $3::bigint)", 3,
                           params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1)
        *released = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

void rc_outbox_rows_free(rc_outbox_row_t *rows, int n)
{
    for (int i = 0; rows && i < n; i++) {
        free(rows[i].key);
        free(rows[i].payload);
    }
    free(rows);
}

int rc_pg_outbox_take(rc_pg_t *pg, int limit, rc_outbox_row_t **rows, int *n, char *err,
                      size_t errlen)
{
    char a[16];
    const char *params[1] = {a};
    rc_outbox_row_t *out = NULL;
    PGresult *res;
    int rc = 0, got;

    *rows = NULL;
    *n = 0;
    snprintf(a, sizeof(a), "%d", limit);
    if (!(res = vc_pg_exec(pg->conn,
                           "SELECT id, event_key, payload FROM dr_outbox_take($1::int) ORDER BY id",
                           1, params, &rc, err, errlen)))
        return rc;
    got = PQntuples(res);
    if (got > 0 && !(out = calloc((size_t)got, sizeof(*out)))) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < got; i++) {
        out[i].id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        out[i].len = (size_t)PQgetlength(res, i, 2);
        if (!(out[i].key = strdup(PQgetvalue(res, i, 1))) ||
            !(out[i].payload = strdup(PQgetvalue(res, i, 2)))) {
            rc_outbox_rows_free(out, i + 1);
            out = NULL;
            rc = VC_ERR_NOMEM;
            goto out;
        }
    }
    *rows = out;
    *n = got;
out:
    if (rc == VC_ERR_NOMEM)
        snprintf(err, errlen, "out of memory reading the outbox");
    PQclear(res);
    return rc;
}

int rc_pg_outbox_sent(rc_pg_t *pg, const rc_outbox_row_t *rows, int n, char *err, size_t errlen)
{
    text_array_t ids = {0};
    const char *params[1];
    char id[24];
    PGresult *res;
    int rc = 0;

    text_put(&ids, '{');
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "%lld", (long long)rows[i].id);
        text_quoted(&ids, id);
    }
    text_put(&ids, '}');
    text_put(&ids, '\0');
    if (ids.nomem) {
        free(ids.s);
        snprintf(err, errlen, "out of memory marking the outbox");
        return VC_ERR_NOMEM;
    }
    params[0] = ids.s;
    res = vc_pg_exec(pg->conn, "SELECT dr_outbox_sent($1::bigint[])", 1, params, &rc, err, errlen);
    PQclear(res);
    free(ids.s);
    return rc;
}

int rc_pg_outbox_stats(rc_pg_t *pg, int64_t *unsent, int64_t *oldest_ms, char *err, size_t errlen)
{
    PGresult *res;
    int rc = 0;

    *unsent = *oldest_ms = 0;
    if (!(res = query(pg, "SELECT unsent, oldest_ms FROM dr_outbox_stats()", &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1) {
        *unsent = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        *oldest_ms = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    } else {
        snprintf(err, errlen, "dr_outbox_stats() returned %d rows, not one", PQntuples(res));
        rc = VC_ERR_PROTOCOL;
    }
    PQclear(res);
    return rc;
}

int rc_pg_outbox_prune(rc_pg_t *pg, int64_t retention_ms, int limit, int64_t *deleted, char *err,
                       size_t errlen)
{
    char a[24], b[16];
    const char *params[2] = {a, b};
    PGresult *res;
    int rc = 0;

    *deleted = 0;
    snprintf(a, sizeof(a), "%lld", (long long)retention_ms);
    snprintf(b, sizeof(b), "%d", limit);
    if (!(res = vc_pg_exec(pg->conn, "SELECT dr_outbox_prune($1::bigint, $2::int)", 2, params, &rc,
                           err, errlen)))
        return rc;
    if (PQntuples(res) == 1)
        *deleted = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

int rc_pg_listen(rc_pg_t *pg, char *err, size_t errlen)
{
    return vc_pg_command(pg->conn, "LISTEN voucher_outbox", err, errlen);
}

int rc_pg_wait_notify(rc_pg_t *pg, int64_t timeout_ms)
{
    struct pollfd fd = {.fd = PQsocket(pg->conn), .events = POLLIN};
    PGnotify *note;
    int got = 0;

    if (fd.fd < 0 || !PQconsumeInput(pg->conn))
        return VC_ERR_UNAVAILABLE;
    /* Those a statement of the pass already read come first: no wait for them. */
    if (!(note = PQnotifies(pg->conn))) {
        if (poll(&fd, 1, (int)timeout_ms) > 0 && !PQconsumeInput(pg->conn))
            return VC_ERR_UNAVAILABLE;
        note = PQnotifies(pg->conn);
    }
    for (; note; note = PQnotifies(pg->conn)) {
        got = 1;
        PQfreemem(note);
    }
    return got;
}
