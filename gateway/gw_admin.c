/*
 * The admin routes, served on the admin address only (gw_app_handle_admin, which
 * checks the token and names the admin):
 * POST /vouchers         creates a voucher in PostgreSQL (the truth), with
 *                        redis_loaded_at set in the same statement, then sets
 *                        its Redis counter with NX after the commit;
 * GET  /vouchers/{code}  its rules, PostgreSQL's used_count, Redis's remaining
 *                        (null when absent) and the holds outstanding;
 * PATCH /vouchers/{code} changes its rules (proto/openapi.yaml): a new
 *                        totalLimit moves Redis's counter by the difference
 *                        (limit.lua), after PostgreSQL's commit for a raise,
 *                        before it for a lower, under the voucher's row lock
 *                        and limit lock (proto/redis-keys.md, "The limit key").
 * POST and PATCH write their admin_audit row (vc_audit.h) in the transaction
 * of the change, before its COMMIT: a change is never committed unrecorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_campaign_redeem.h"
#include "gw_limit.h"
#include "gw_notify.h"
#include "gw_router.h"
#include "gw_store.h"
#include "gw_soldout.h"
#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_model.h"
#include "vc_fault.h"
#include "vc_json.h"
#include "vc_pg.h"
#include "vc_time.h"
#include "vc_voucher_create.h"

#define GW_VOUCHER_BODY_MAX 1024

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    vc_voucher_t v;
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    int answers, failed, has_remaining;
    int64_t remaining, holds;
    int64_t campaign_id; /* POST /vouchers: the campaign whose one-time code this is, or 0 */
} admin_t;

static void reply_voucher(admin_t *a, int status, int has_remaining)
{
    char body[GW_VOUCHER_BODY_MAX];
    size_t len = gw_body_voucher(body, sizeof(body), &a->v, 1, a->v.used_count, has_remaining,
                                 a->remaining, a->holds);
    gw_app_reply(a->req, status, body, len);
}

/* ---- POST /vouchers ---- */

/* Ends the transaction conn is in, if any, and passes rc on. */
static int rollback(PGconn *conn, int rc)
{
    vc_pg_rollback(conn);
    return rc;
}

/* POST /vouchers on the threadpool: vc_voucher_create(), Redis's counter set next. */
static int create_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    admin_t *a = arg;
    vc_audit_who_t who;
    int rc;

    gw_app_who(a->req, &who);
    rc = vc_voucher_create(conn, &a->v, &who, 1, &a->campaign_id, err, errlen);
    return rc == VC_E_CODE_TAKEN ? GW_E_EXISTS : rc;
}

static void counter_set_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;
    (void)reply;

    if (rc != 0) {
        /* Committed already: the reconciler sets the counter (redis_loaded_at is set). */
        vc_log_field_t f[] = {{"code", a->v.code}};
        VC_LOG_F(VC_LOG_WARN, f, "voucher created, but setting its redis counter failed: %s",
                 vc_strerror(rc));
        reply_voucher(a, 201, 0);
        return;
    }
    a->remaining = a->v.total_limit;
    /* Ended longer than the retention ago: the counter expired as it was set. */
    reply_voucher(a, 201,
                  vc_time_now_ms() < a->v.ends_at_ms + a->app->cfg->redis_retention_ms);
}

static void created_cb(void *arg, int rc, const char *err)
{
    admin_t *a = arg;
    char total[24], expire_at[24];
    const char *keys[] = {a->keys[VC_VOUCHER_KEY_REMAINING], a->keys[VC_VOUCHER_KEY_LIMIT]};
    const char *args[] = {total, total, expire_at};

    if (rc != 0) {
        if (rc < 0) {
            vc_log_field_t f[] = {{"code", a->v.code}};
            VC_LOG_F(VC_LOG_WARN, f, "creating the voucher failed: %s", err);
        }
        if (rc == GW_E_EXISTS && a->campaign_id > 0) {
            char why[96];
            snprintf(why, sizeof(why), "this code is a one-time code of campaign %lld",
                     (long long)a->campaign_id);
            gw_app_reply_error(a->req, GW_E_CAMPAIGN_CODE, why);
            return;
        }
        gw_app_reply_error(a->req, rc,
                           rc == GW_E_EXISTS ? "a voucher with this code exists"
                           : rc < 0          ? "PostgreSQL unavailable"
                                             : NULL);
        return;
    }
    gw_rules_changed(a->v.code);
    {
        /* Other gateways may remember the code as unknown (gw_notify.h); nobody waits. */
        const char *pub[] = {"PUBLISH", GW_NOTIFY_CHANNEL, a->v.code};
        size_t pub_len[] = {7, strlen(GW_NOTIFY_CHANNEL), strlen(a->v.code)};
        (void)gw_redis_command(a->app->redis, gw_app_ignore_cb, NULL, 3, pub, pub_len);
    }
    snprintf(total, sizeof(total), "%lld", (long long)a->v.total_limit);
    /* Its keys expire with the retention after endsAt, as a first load's do. */
    snprintf(expire_at, sizeof(expire_at), "%lld",
             (long long)(a->v.ends_at_ms + a->app->cfg->redis_retention_ms));
    if ((rc = gw_redis_eval(a->app->redis, GW_SCRIPT_LOAD, counter_set_cb, a, 2, keys, 3, args)) !=
        0)
        counter_set_cb(a, rc, NULL);
}

void gw_create_start(gw_app_t *app, gw_request_t *req)
{
    char err[256];
    admin_t *a = gw_request_alloc(req, sizeof(*a));
    int rc;

    if (!a) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    if ((rc = vc_voucher_parse(req->body, req->body_len, &a->v, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    gw_app_keys(a->v.code, a->keys);
    if ((rc = gw_pg_run(app->loop, app->pg, create_work, created_cb, a)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}

/* ---- GET /vouchers/{code} ---- */

static int show_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    admin_t *a = arg;
    return vc_pg_load_voucher(conn, a->v.code, &a->v, err, errlen);
}

static void counted(admin_t *a)
{
    if (--a->answers > 0)
        return;
    if (a->failed) {
        gw_app_reply_error(a->req, a->failed, "redis read");
        return;
    }
    reply_voucher(a, 200, a->has_remaining);
}

static void remaining_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;

    if (rc != 0)
        a->failed = rc;
    else if (reply->n == 1 && reply->item[0].type == GW_REDIS_STR) {
        char buf[24];
        size_t n = reply->item[0].len < sizeof(buf) - 1 ? reply->item[0].len : sizeof(buf) - 1;
        memcpy(buf, reply->item[0].str, n);
        buf[n] = '\0';
        a->remaining = strtoll(buf, NULL, 10);
        a->has_remaining = 1;
    }
    counted(a);
}

static void holds_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;

    if (rc != 0)
        a->failed = rc;
    else if (reply->n == 1 && reply->item[0].type == GW_REDIS_INT)
        a->holds = reply->item[0].integer;
    counted(a);
}

static void loaded_cb(void *arg, int rc, const char *err)
{
    admin_t *a = arg;
    const char *get[] = {"GET", a->keys[VC_VOUCHER_KEY_REMAINING]};
    size_t get_len[] = {3, strlen(get[1])};
    const char *zcard[] = {"ZCARD", a->keys[VC_VOUCHER_KEY_HOLDS]};
    size_t zcard_len[] = {5, strlen(zcard[1])};

    if (rc != 0) {
        if (rc < 0) {
            vc_log_field_t f[] = {{"code", a->v.code}};
            VC_LOG_F(VC_LOG_WARN, f, "reading the voucher failed: %s", err);
        }
        gw_app_reply_error(a->req, rc, rc < 0 ? "PostgreSQL unavailable" : NULL);
        return;
    }
    a->answers = 1; /* held until both are sent */
    if ((rc = gw_redis_command(a->app->redis, remaining_cb, a, 2, get, get_len)) == 0)
        a->answers++;
    else
        a->failed = rc;
    if (rc == 0 && (rc = gw_redis_command(a->app->redis, holds_cb, a, 2, zcard, zcard_len)) == 0)
        a->answers++;
    else if (rc != 0)
        a->failed = rc;
    counted(a);
}

void gw_show_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    admin_t *a = gw_request_alloc(req, sizeof(*a));
    int rc;

    if (!a) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    snprintf(a->v.code, sizeof(a->v.code), "%s", code);
    gw_app_keys(code, a->keys);
    if ((rc = gw_pg_run(app->loop, app->pg, show_work, loaded_cb, a)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}

/* ---- PATCH /vouchers/{code} ---- */

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    char code[VC_CODE_MAX + 1];
    gw_voucher_patch_t patch;
    vc_voucher_t cur, v; /* before and after */
    int loaded;          /* redis_loaded_at is set: Redis has (or had) the counter */
    int reload;          /* its keys went by retention: clear redis_loaded_at */
    /* Redis as the change left it, for the answer; and a 409's numbers. */
    int has_remaining;
    int64_t remaining, holds, limit_before;
    char note[256]; /* what went wrong in Redis after the commit (logged, not answered) */
    char *before;   /* the row as the change found it, JSON for the audit (malloc'd) */
} update_t;

/*
 * Writes u->v's rules over the locked row, and its audit row (the PATCH's
 * body as the detail), and commits. Returns 0, GW_E_LIMIT (PostgreSQL's CHECK
 * refused the total), or an error.
 */
static int update_row(PGconn *conn, const update_t *u, char *err, size_t errlen)
{
    vc_audit_who_t who;
    vc_audit_action_t audit = {"voucher.update", u->code, VC_AUDIT_VOUCHER, 1, u->before,
                               u->req->body};
    PGresult *res;
    int rc;

    gw_app_who(u->req, &who);
    if ((rc = gw_store_update(conn, &u->v, u->reload, err, errlen)) != 0 ||
        (rc = vc_audit_record(conn, &who, &audit, err, errlen)) != 0)
        return rc;
    if (!(res = vc_pg_exec(conn, "COMMIT", 0, NULL, &rc, err, errlen)))
        return rc;
    PQclear(res);
    return 0;
}

/*
 * The whole change, on the threadpool, under the voucher's limit lock (taken
 * by update_work() for the session, so that it also covers the Redis step
 * after the commit: two PATCHes never interleave their steps): BEGIN; the
 * row lock; then, for a lower, Redis first (the uses leave the counter while it still
 * has them, atomically against reservations), PostgreSQL second; for a
 * raise, PostgreSQL first, Redis after the commit. Redis never offers a use
 * PostgreSQL's total does not have: a crash between the two steps leaves
 * Redis short (undersell), and the reconciler's limit sync adds the
 * difference (rc_raise.h).
 */
static int update_locked(update_t *u, PGconn *conn, char *err, size_t errlen)
{
    const char *params[] = {u->code};
    gw_limit_redis_t *redis = NULL;
    PGresult *res;
    int rc = 0, status, retired;
    int64_t after, retention = u->app->cfg->redis_retention_ms;

    if (!(res = vc_pg_exec(conn, "BEGIN", 0, NULL, &rc, err, errlen)))
        return rc;
    PQclear(res);
    if (!(res = vc_pg_exec(conn,
                           "SELECT redis_loaded_at IS NOT NULL FROM voucher WHERE code = $1"
                           " FOR UPDATE",
                           1, params, &rc, err, errlen)))
        return rollback(conn, rc);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return rollback(conn, VC_E_NOT_FOUND);
    }
    u->loaded = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    /* The row is locked: this read is what the change applies to. */
    if ((rc = vc_pg_load_voucher(conn, u->code, &u->cur, err, errlen)) != 0 ||
        (rc = vc_audit_snapshot(conn, VC_AUDIT_VOUCHER, u->code, &u->before, err, errlen)) != 0 ||
        (rc = gw_voucher_patch_apply(&u->cur, &u->patch, &u->v, err, errlen)) != 0)
        return rollback(conn, rc);
    retired = u->loaded && vc_time_now_ms() >= u->cur.ends_at_ms + retention;
    if (u->loaded && (u->v.total_limit != u->cur.total_limit ||
                      u->v.ends_at_ms > u->cur.ends_at_ms || retired) &&
        !(redis = gw_limit_connect(u->app->cfg->redis_url, u->app->cfg->redis_timeout_ms,
                                   u->app->cfg->redis_fence, err, errlen)))
        return rollback(conn, VC_ERR_UNAVAILABLE);
    if (retired) {
        /*
         * Its keys expired a retention after its end (proto/redis-keys.md,
         * "Retention"), and nothing restores them: the reconciler looks at
         * vouchers ended less than a day ago. If they are gone, the change
         * is PostgreSQL's alone, and the voucher is loaded anew (the first
         * load, from PostgreSQL's rows: nothing is in flight this long after
         * its end) should a later endsAt let it sell again.
         */
        if ((rc = gw_limit_counters(redis, u->code, &u->has_remaining, &u->remaining, &u->holds,
                                    err, errlen)) != 0)
            goto fail;
        u->reload = !u->has_remaining;
    }
    if (u->reload) {
        gw_limit_close(redis);
        redis = NULL;
    }
    if (redis && u->v.total_limit < u->cur.total_limit) {
        if ((rc = gw_limit_move(redis, u->code, u->cur.total_limit, u->v.total_limit, &status,
                                &u->remaining, &u->limit_before, err, errlen)) != 0)
            goto fail;
        if (status == GW_LIMIT_NOT_LOADED) {
            /* Lost from Redis: the reconciler restores it, from a snapshot older than this. */
            snprintf(err, errlen, "the voucher's counter is missing from Redis; retry later");
            rc = VC_ERR_UNAVAILABLE;
            goto fail;
        }
        if (status == GW_LIMIT_TOO_LOW) {
            u->has_remaining = 1;
            snprintf(err, errlen,
                     "totalLimit %lld is below the uses taken (used or held): %lld of %lld",
                     (long long)u->v.total_limit, (long long)(u->limit_before - u->remaining),
                     (long long)u->limit_before);
            rc = GW_E_LIMIT;
            goto fail;
        }
    }
    /*
     * A lower must be on the replicas before PostgreSQL commits the new
     * total: a failover that lost it would offer uses beyond that total, and
     * their 201s would be refused by its CHECK (proto/redis-keys.md, "Redis
     * Cluster"). Too few in time: the uses are given back (the lower may or
     * may not be on a replica), nothing is committed, 503.
     */
    if (redis && u->v.total_limit < u->cur.total_limit && u->app->cfg->redis_wait_replicas > 0 &&
        (rc = gw_limit_wait(redis, u->app->cfg->redis_wait_replicas,
                            u->app->cfg->redis_wait_timeout_ms, err, errlen)) != 0) {
        size_t said = strlen(err);
        if (gw_limit_move(redis, u->code, u->v.total_limit, u->cur.total_limit, &status, &after,
                          &u->limit_before, u->note, sizeof(u->note)) != 0) {
            /* Redis stays short of PostgreSQL: the reconciler's limit sync gives the uses back. */
            vc_log_field_t f[] = {{"code", u->code}};
            VC_LOG_F(VC_LOG_WARN, f, "giving back a lower no replica acknowledged failed: %s",
                     u->note);
        }
        if (said < errlen)
            snprintf(err + said, errlen - said, " (WAIT): nothing changed; retry");
        goto fail;
    }
    if ((rc = update_row(conn, u, err, errlen)) != 0) {
        vc_pg_rollback(conn);
        if (redis && u->v.total_limit < u->cur.total_limit &&
            gw_limit_move(redis, u->code, u->v.total_limit, u->cur.total_limit, &status, &after,
                          &u->limit_before, u->note, sizeof(u->note)) != 0) {
            /* Redis stays short of PostgreSQL: the reconciler's limit sync gives the uses back. */
            vc_log_field_t f[] = {{"code", u->code}};
            VC_LOG_F(VC_LOG_WARN, f, "giving back a lower that PostgreSQL refused failed: %s",
                     u->note);
        }
        gw_limit_close(redis);
        return rc;
    }
    /* Committed: what follows may fail, and the change stands (the reconciler completes it). */
    VC_PAUSE("gateway-patch-after-commit");
    if (redis && u->v.total_limit > u->cur.total_limit)
        (void)gw_limit_move(redis, u->code, u->cur.total_limit, u->v.total_limit, &status, &after,
                            &u->limit_before, u->note, sizeof(u->note));
    if (redis && u->v.ends_at_ms > u->cur.ends_at_ms)
        (void)gw_limit_extend(redis, u->code,
                              u->v.ends_at_ms + u->app->cfg->redis_retention_ms, u->note,
                              sizeof(u->note));
    /*
     * A change of rules alone moved nothing in Redis and opened no
     * connection: one is opened for the reads and the PUBLISH below, which
     * change no state (no fence).
     */
    if (!redis)
        redis = gw_limit_connect(u->app->cfg->redis_url, u->app->cfg->redis_timeout_ms, 0,
                                 u->note, sizeof(u->note));
    /* The answer shows the counters as the change left them, as a GET would. */
    if (!redis || gw_limit_counters(redis, u->code, &u->has_remaining, &u->remaining, &u->holds,
                                    u->note, sizeof(u->note)) != 0)
        u->has_remaining = 0;
    /* The other gateways drop their cached rules (gw_notify.h); else their ttl bounds them. */
    if (redis)
        (void)gw_limit_publish(redis, u->code, u->note, sizeof(u->note));
    gw_limit_close(redis);
    return 0;
fail:
    gw_limit_close(redis);
    return rollback(conn, rc);
}

/*
 * Holds the voucher's limit lock for the session around update_locked(): a
 * raise moves Redis after its commit, and a PATCH behind it must not read
 * PostgreSQL's new total while Redis still reflects the old one. The
 * reconciler's limit sync takes the same lock (VC_PG_LIMIT_LOCK). The lock is
 * given back before the connection returns to the pool; a broken session
 * gives it back by ending.
 */
static int update_work(void *arg, PGconn *conn, char *err, size_t errlen)
{
    update_t *u = arg;
    const char *params[] = {u->code};
    PGresult *res;
    int rc = 0;

    if (!(res = vc_pg_exec(conn, VC_PG_LIMIT_LOCK_SESSION, 1, params, &rc, err, errlen)))
        return rc;
    PQclear(res);
    rc = update_locked(u, conn, err, errlen);
    free(u->before);
    u->before = NULL;
    PQclear(PQexecParams(conn, VC_PG_LIMIT_UNLOCK, 1, NULL, params, NULL, NULL, 0));
    return rc;
}

static void reply_limit_conflict(update_t *u, const char *detail)
{
    char body[GW_VOUCHER_BODY_MAX];
    size_t len = 0;
    vc_jgen_t g;

    if (vc_jgen_init(&g) == 0) {
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "error", "LIMIT_CONFLICT");
        vc_jgen_kv_str(&g, "detail", detail);
        if (u->has_remaining) {
            /* What Redis counts: every use taken, confirmed or held, events in flight too. */
            vc_jgen_kv_int(&g, "totalLimit", u->limit_before);
            vc_jgen_kv_int(&g, "taken", u->limit_before - u->remaining);
            vc_jgen_kv_int(&g, "remaining", u->remaining);
            vc_jgen_kv_int(&g, "usedCount", u->cur.used_count);
        }
        vc_jgen_map_close(&g);
        if (vc_jgen_finish(&g, body, sizeof(body), &len) != 0)
            len = 0;
    }
    gw_app_reply(u->req, 409, body, len);
}

static void updated_cb(void *arg, int rc, const char *err)
{
    update_t *u = arg;
    char body[GW_VOUCHER_BODY_MAX];
    size_t len;

    if (rc == 0 || rc < 0) {
        gw_rules_changed(u->code); /* also when unsure whether it committed */
        /* A raise offers uses again: no worker may answer OUT_OF_STOCK from its mark. */
        gw_soldout_clear(u->code);
    }
    if (rc == GW_E_LIMIT) {
        reply_limit_conflict(u, err);
        return;
    }
    if (rc == VC_ERR_INVALID || rc > 0) {
        gw_app_reply_error(
            u->req, rc,
            rc == VC_ERR_INVALID || rc == GW_E_RULES || rc == GW_E_MODE_LOCKED ? err : NULL);
        return;
    }
    if (rc < 0) {
        vc_log_field_t f[] = {{"code", u->code}};
        VC_LOG_F(VC_LOG_WARN, f, "changing the voucher failed: %s", err);
        gw_app_reply_error(u->req, rc, err);
        return;
    }
    if (u->note[0]) {
        vc_log_field_t f[] = {{"code", u->code}};
        VC_LOG_F(VC_LOG_WARN, f,
                 "voucher changed in PostgreSQL; its Redis step failed (the reconciler "
                 "completes it): %s",
                 u->note);
    }
    len = gw_body_voucher(body, sizeof(body), &u->v, 1, u->cur.used_count, u->has_remaining,
                          u->remaining, u->holds);
    gw_app_reply(u->req, 200, body, len);
}

void gw_update_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    char err[256];
    update_t *u = gw_request_alloc(req, sizeof(*u));
    int rc;

    if (!u) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    u->app = app;
    u->req = req;
    snprintf(u->code, sizeof(u->code), "%s", code);
    if ((rc = gw_voucher_patch_parse(req->body, req->body_len, &u->patch, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    if ((rc = gw_pg_run(app->loop, app->pg, update_work, updated_cb, u)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}

/* ---- GET /vouchers?active=&after=&limit= ---- */

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    gw_list_query_t q;
    vc_voucher_t *v; /* up to q.limit, in the request's arena */
    int n, more;     /* more: a voucher follows the last one */
} list_t;

static int list_work(void *arg, PGconn *conn, char *err, size_t errlen)
{
    list_t *l = arg;
    char limit[16];
    const char *params[] = {l->q.has_active ? (l->q.active ? "t" : "f") : NULL, l->q.after, limit};
    PGresult *res;
    int rc = 0;

    snprintf(limit, sizeof(limit), "%d", l->q.limit + 1);
    /* Codes sort byte by byte (COLLATE "C"): the cursor is the last code of a page. */
    if (!(res = vc_pg_exec(conn,
                           "SELECT " VC_PG_VOUCHER_COLUMNS " FROM voucher"
                           " WHERE ($1::boolean IS NULL OR active = $1)"
                           " AND code COLLATE \"C\" > $2 ORDER BY code COLLATE \"C\" LIMIT $3",
                           3, params, &rc, err, errlen)))
        return rc;
    l->n = PQntuples(res) < l->q.limit ? PQntuples(res) : l->q.limit;
    l->more = PQntuples(res) > l->q.limit;
    for (int i = 0; i < l->n; i++)
        vc_pg_voucher_row(res, i, &l->v[i]);
    PQclear(res);
    return 0;
}

static void listed_cb(void *arg, int rc, const char *err)
{
    list_t *l = arg;
    size_t cap = (size_t)l->n * 512 + 128, len = 0;
    char *body;
    vc_jgen_t g;

    if (rc != 0) {
        vc_log_field_t f[] = {{"route", "list"}};
        VC_LOG_F(VC_LOG_WARN, f, "listing vouchers failed: %s", err);
        gw_app_reply_error(l->req, rc, "PostgreSQL unavailable");
        return;
    }
    if (!(body = malloc(cap)) || vc_jgen_init(&g) != 0) {
        free(body);
        gw_app_reply_error(l->req, VC_ERR_NOMEM, NULL);
        return;
    }
    vc_jgen_map_open(&g);
    vc_jgen_key(&g, "vouchers");
    vc_jgen_array_open(&g);
    for (int i = 0; i < l->n; i++)
        if (gw_jgen_voucher(&g, &l->v[i], 1, l->v[i].used_count) != 0)
            rc = VC_ERR_INVALID;
    vc_jgen_array_close(&g);
    if (l->more)
        vc_jgen_kv_str(&g, "next", l->v[l->n - 1].code);
    vc_jgen_map_close(&g);
    if (rc != 0 || vc_jgen_finish(&g, body, cap, &len) != 0)
        gw_app_reply_error(l->req, VC_ERR_PROTOCOL, "a voucher could not be written");
    else
        gw_app_reply(l->req, 200, body, len);
    free(body);
}

void gw_list_start(gw_app_t *app, gw_request_t *req)
{
    const char *q = memchr(req->path, '?', req->path_len);
    size_t qlen = q ? (size_t)(req->path + req->path_len - q - 1) : 0;
    char err[256];
    list_t *l = gw_request_alloc(req, sizeof(*l));
    int rc;

    if (!l) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    l->app = app;
    l->req = req;
    if ((rc = gw_list_query_parse(q ? q + 1 : "", qlen, &l->q, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    if (!(l->v = gw_request_alloc(req, sizeof(*l->v) * (size_t)l->q.limit))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    if ((rc = gw_pg_run(app->loop, app->pg, list_work, listed_cb, l)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}

/* ---- GET /vouchers/{code}/reservations/{orderId} ---- */

typedef struct lookup lookup_t;

/* One of the Redis reads of a lookup: where its string answer goes. */
typedef struct {
    lookup_t *k;
    char *out;
    size_t cap;
} lookup_read_t;

struct lookup {
    gw_app_t *app;
    gw_request_t *req;
    char code[VC_CODE_MAX + 1], order_id[VC_ORDER_ID_MAX + 1];
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    /* A campaign's code (no voucher has it): its campaign, and its rules unused. */
    int campaign;
    gw_campaign_ref_t ref;
    vc_voucher_t rules;
    /* PostgreSQL's row */
    int has_row;
    char status[16], release_reason[40];
    int64_t customer_id, discount, order_amount, held_until_ms, created_ms, updated_ms;
    int has_confirmed; /* the confirm gave the final total: the two below are set */
    int64_t confirmed_amount, confirmed_discount;
    /* Redis */
    int answers, failed;
    char order[128];            /* the orders hash's value, "" when Redis has none */
    char amount[24], begun[24]; /* amounts, and the releasing set's score, "" when absent */
    lookup_read_t read[3];      /* order, amount, begun */
};

static int lookup_work(void *arg, PGconn *conn, char *err, size_t errlen)
{
    lookup_t *k = arg;
    const char *params[] = {k->code, k->order_id};
    PGresult *res;
    int rc = 0;

#define LOOKUP_COLUMNS                                                                             \
    "SELECT customer_id, status, discount_amount, order_amount,"                                  \
    " (extract(epoch FROM held_until) * 1000)::bigint,"                                           \
    " (extract(epoch FROM created_at) * 1000)::bigint,"                                           \
    " (extract(epoch FROM updated_at) * 1000)::bigint, coalesce(release_reason, ''),"            \
    " confirmed_order_amount, confirmed_discount_amount"

    /* A campaign's code was found in campaign_code already (lookup_found_cb()). */
    if (!k->campaign) {
        if (!(res = vc_pg_exec(conn, "SELECT 1 FROM voucher WHERE code = $1", 1, params, &rc, err,
                               errlen)))
            return rc;
        rc = PQntuples(res) == 1 ? 0 : VC_E_NOT_FOUND;
        PQclear(res);
        if (rc != 0)
            return rc;
    }
    if (!(res = vc_pg_exec(conn,
                           k->campaign ? LOOKUP_COLUMNS " FROM campaign_redemption"
                                         " WHERE code = $1 AND order_id = $2"
                                       : LOOKUP_COLUMNS " FROM voucher_redemption"
                                         " WHERE voucher_code = $1 AND order_id = $2",
                           2, params, &rc, err, errlen)))
        return rc;
    if ((k->has_row = PQntuples(res) == 1)) {
        k->customer_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        snprintf(k->status, sizeof(k->status), "%s", PQgetvalue(res, 0, 1));
        k->discount = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        k->order_amount = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
        k->held_until_ms = PQgetisnull(res, 0, 4) ? 0 : strtoll(PQgetvalue(res, 0, 4), NULL, 10);
        k->created_ms = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
        k->updated_ms = strtoll(PQgetvalue(res, 0, 6), NULL, 10);
        snprintf(k->release_reason, sizeof(k->release_reason), "%s", PQgetvalue(res, 0, 7));
        /* Stored together, by the confirm that confirmed the row with a total (011). */
        if ((k->has_confirmed = !PQgetisnull(res, 0, 8) && !PQgetisnull(res, 0, 9))) {
            k->confirmed_amount = strtoll(PQgetvalue(res, 0, 8), NULL, 10);
            k->confirmed_discount = strtoll(PQgetvalue(res, 0, 9), NULL, 10);
        }
    }
    PQclear(res);
    return 0;
}

/* The name the contract gives an order state of proto/redis-keys.md. */
static const char *state_name(char state)
{
    switch (state) {
    case VC_STATE_HELD:
        return "HELD";
    case VC_STATE_CONFIRMED:
        return "CONFIRMED";
    case VC_STATE_CANCEL_BEGUN:
        return "CANCELLING"; /* release begun by a cancel, use still taken */
    case VC_STATE_EXPIRY_BEGUN:
        return "EXPIRING"; /* release begun by the reconciler, use still taken */
    default:
        return "RELEASED";
    }
}

static void kv_time(vc_jgen_t *g, const char *key, int64_t ms)
{
    char ts[40];
    if (vc_time_format_ms(ms, ts, sizeof(ts)) != 0)
        vc_jgen_kv_str(g, key, ts);
}

static void lookup_reply(lookup_t *k)
{
    gw_order_value_t o;
    int in_redis = k->order[0] && gw_order_value_parse(k->order, strlen(k->order), &o) == 0;
    char body[2048];
    size_t len = 0;
    vc_jgen_t g;

    if (!in_redis && !k->has_row) {
        gw_app_reply_error(k->req, VC_E_NOT_FOUND, "no such reservation");
        return;
    }
    if (vc_jgen_init(&g) != 0) {
        gw_app_reply_error(k->req, VC_ERR_NOMEM, NULL);
        return;
    }
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "orderId", k->order_id);
    vc_jgen_kv_str(&g, "code", k->code);
    if (in_redis) {
        vc_jgen_key(&g, "redis");
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "state", state_name(o.state));
        vc_jgen_kv_int(&g, "customerId", o.customer_id);
        vc_jgen_kv_int(&g, "discountAmount", o.discount);
        if (k->amount[0])
            vc_jgen_kv_int(&g, "orderAmount", strtoll(k->amount, NULL, 10));
        kv_time(&g, "heldUntil", o.held_until_ms);
        if (k->begun[0])
            kv_time(&g, "releaseBegunAt", (int64_t)strtod(k->begun, NULL));
        vc_jgen_map_close(&g);
    }
    if (k->has_row) {
        vc_jgen_key(&g, "postgres");
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "status", k->status);
        vc_jgen_kv_int(&g, "customerId", k->customer_id);
        vc_jgen_kv_int(&g, "discountAmount", k->discount);
        vc_jgen_kv_int(&g, "orderAmount", k->order_amount);
        if (k->held_until_ms)
            kv_time(&g, "heldUntil", k->held_until_ms);
        kv_time(&g, "createdAt", k->created_ms);
        kv_time(&g, "updatedAt", k->updated_ms);
        if (k->has_confirmed) {
            vc_jgen_kv_int(&g, "confirmedOrderAmount", k->confirmed_amount);
            vc_jgen_kv_int(&g, "confirmedDiscountAmount", k->confirmed_discount);
        }
        if (k->release_reason[0])
            vc_jgen_kv_str(&g, "releaseReason", k->release_reason);
        vc_jgen_map_close(&g);
    }
    vc_jgen_map_close(&g);
    if (vc_jgen_finish(&g, body, sizeof(body), &len) != 0)
        gw_app_reply_error(k->req, VC_ERR_PROTOCOL, "the reservation could not be written");
    else
        gw_app_reply(k->req, 200, body, len);
}

/* Copies a string reply into out (cap bytes), "" for nil. */
static void reply_str(const gw_redis_reply_t *reply, char *out, size_t cap)
{
    size_t n;

    out[0] = '\0';
    if (reply->n != 1 || reply->item[0].type != GW_REDIS_STR)
        return;
    n = reply->item[0].len < cap - 1 ? reply->item[0].len : cap - 1;
    memcpy(out, reply->item[0].str, n);
    out[n] = '\0';
}

static void lookup_answered(lookup_t *k)
{
    if (--k->answers > 0)
        return;
    if (k->failed)
        gw_app_reply_error(k->req, k->failed, "redis read");
    else
        lookup_reply(k);
}

static void read_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    lookup_read_t *r = arg;
    if (rc != 0)
        r->k->failed = rc;
    else
        reply_str(reply, r->out, r->cap);
    lookup_answered(r->k);
}

static void looked_up_cb(void *arg, int rc, const char *err);

/* The code is a campaign's (or nobody's): its order is read as a voucher's is. */
static void lookup_found_cb(void *arg, int rc)
{
    lookup_t *k = arg;

    if (rc != 0) {
        gw_app_reply_error(k->req, rc, rc < 0 ? "PostgreSQL unavailable" : NULL);
        return;
    }
    k->campaign = 1;
    gw_campaign_take(&k->ref, k->code, k->keys);
    if ((rc = gw_pg_run(k->app->loop, k->app->pg, lookup_work, looked_up_cb, k)) != 0)
        gw_app_reply_error(k->req, rc, "PostgreSQL unavailable");
}

static void looked_up_cb(void *arg, int rc, const char *err)
{
    lookup_t *k = arg;
    const char *order[] = {"HGET", k->keys[VC_VOUCHER_KEY_ORDERS], k->order_id};
    const char *amount[] = {"HGET", k->keys[VC_VOUCHER_KEY_AMOUNTS], k->order_id};
    const char *begun[] = {"ZSCORE", k->keys[VC_VOUCHER_KEY_RELEASING], k->order_id};
    const char *const *cmds[] = {order, amount, begun};
    char *outs[] = {k->order, k->amount, k->begun};
    size_t caps[] = {sizeof(k->order), sizeof(k->amount), sizeof(k->begun)};

    if (rc == VC_E_NOT_FOUND && !k->campaign) {
        /* No voucher has the code: a campaign's, found as the order's own routes find it. */
        gw_campaign_find(k->app, k->code, 0, &k->ref, &k->rules, lookup_found_cb, k);
        return;
    }
    if (rc != 0) {
        if (rc < 0) {
            char code[VC_LOG_CODE_MAX]; /* maybe a campaign's one-time code */
            vc_log_field_t f[] = {{"code", vc_log_code(k->code, 1, code)},
                                  {"orderId", k->order_id}};
            VC_LOG_F(VC_LOG_WARN, f, "reading the reservation failed: %s", err);
        }
        gw_app_reply_error(k->req, rc, rc < 0 ? "PostgreSQL unavailable" : NULL);
        return;
    }
    k->answers = 1; /* held until all are sent */
    for (int i = 0; i < 3 && !k->failed; i++) {
        size_t lens[3];
        for (int j = 0; j < 3; j++)
            lens[j] = strlen(cmds[i][j]);
        k->read[i] = (lookup_read_t){k, outs[i], caps[i]};
        if ((rc = gw_redis_command(k->app->redis, read_cb, &k->read[i], 3, (const char **)cmds[i],
                                   lens)) == 0)
            k->answers++;
        else
            k->failed = rc;
    }
    lookup_answered(k);
}

void gw_lookup_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id)
{
    lookup_t *k = gw_request_alloc(req, sizeof(*k));
    int rc;

    if (!k) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    k->app = app;
    k->req = req;
    snprintf(k->code, sizeof(k->code), "%s", code);
    snprintf(k->order_id, sizeof(k->order_id), "%s", order_id);
    gw_app_keys(code, k->keys);
    if ((rc = gw_pg_run(app->loop, app->pg, lookup_work, looked_up_cb, k)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}
