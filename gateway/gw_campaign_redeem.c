/*
 * A campaign's code on the voucher routes: the lookup (one primary-key read of
 * campaign_code joined to its campaign), the campaign's keys, and its
 * scripts. The flows stay in gw_reserve*.c and gw_holds.c; see
 * gw_campaign_redeem.h and proto/campaigns.md.
 */
#include "gw_campaign_redeem.h"

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_model.h"
#include "vc_pg.h"

typedef struct {
    gw_campaign_ref_t *ref;
    vc_voucher_t *v;
    int64_t customer_id;
    gw_campaign_found_cb cb;
    void *arg;
} find_t;

static int64_t col_int(const PGresult *res, int c)
{
    return strtoll(PQgetvalue(res, 0, c), NULL, 10);
}

/*
 * The code's campaign row, and when no campaign has the code a stand-in's row
 * (STAND_IN: an SQL expression of a campaign id), so that one row comes back
 * whether the code exists or not: the same index probes on the server, the
 * same output, the same parsing here. A found row alone cost the server its
 * join and output and us their parsing, about 10 us over 1,500 samples, which
 * told a guesser the code existed though both answer 404 (issue 42, item 5).
 */
#define FIND_SQL(STAND_IN)                                                                         \
    "SELECT cc.campaign_id IS NOT NULL, c.id, coalesce(cc.customer_id, 0), c.state = 'ACTIVE',"    \
    " c.discount_amount, coalesce(c.discount_percent, 0), coalesce(c.max_discount_amount, 0),"     \
    " c.min_order_amount, c.per_customer_limit, c.total_count, c.used_count,"                      \
    " (extract(epoch FROM c.starts_at) * 1000)::bigint,"                                           \
    " (extract(epoch FROM c.ends_at) * 1000)::bigint,"                                             \
    " c.redis_loaded_at IS NOT NULL, cc.revoked_at IS NOT NULL"                                    \
    " FROM (VALUES ($1::text)) q (code) LEFT JOIN campaign_code cc ON cc.code = q.code"            \
    " LEFT JOIN campaign c ON c.id = coalesce(cc.campaign_id, " STAND_IN ")"

/*
 * The stand-in campaign's id, learned by the process's first lookup (0: not
 * yet, or it went away): passed as a parameter, because max(id) in every
 * lookup cost the server 40 us more to plan. Shared by the workers' lookups.
 */
static _Atomic int64_t stand_in_id;

/* On the threadpool: read the code's campaign; the binding is judged here, without I/O after. */
static int find_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    find_t *f = arg;
    int64_t stand_in = atomic_load(&stand_in_id);
    char stand_in_text[24];
    const char *params[] = {f->ref->code, stand_in_text};
    PGresult *res;
    int rc = 0;
    int found;

    snprintf(stand_in_text, sizeof(stand_in_text), "%lld", (long long)stand_in);
    res = stand_in > 0 ? vc_pg_exec(conn, FIND_SQL("$2::bigint"), 2, params, &rc, err, errlen)
                       : vc_pg_exec(conn, FIND_SQL("(SELECT max(id) FROM campaign)"), 1, params,
                                    &rc, err, errlen);
    if (!res)
        return rc;
    if (PQntuples(res) != 1) {
        rc = VC_E_NOT_FOUND; /* not reached: the VALUES row is always there */
    } else {
        vc_voucher_t *v = f->v;
        found = PQgetvalue(res, 0, 0)[0] == 't';
        f->ref->id = col_int(res, 1); /* 0: no campaign row (NULL) */
        f->ref->bound_customer = col_int(res, 2);
        f->ref->active = PQgetvalue(res, 0, 3)[0] == 't';
        f->ref->loaded = PQgetvalue(res, 0, 13)[0] == 't';
        f->ref->revoked = PQgetvalue(res, 0, 14)[0] == 't';
        memset(v, 0, sizeof(*v));
        memcpy(v->code, f->ref->code, sizeof(v->code));
        v->discount_amount = col_int(res, 4);
        v->discount_percent = (int)col_int(res, 5);
        v->max_discount_amount = col_int(res, 6);
        v->min_order_amount = col_int(res, 7);
        v->per_customer_limit = col_int(res, 8);
        v->total_limit = col_int(res, 9);
        v->used_count = col_int(res, 10);
        v->starts_at_ms = col_int(res, 11);
        v->ends_at_ms = col_int(res, 12);
        /* The stand-in learned, or gone (a deleted campaign): the next lookup asks again. */
        if (!found && f->ref->id != stand_in)
            atomic_store(&stand_in_id, f->ref->id);
        /* Bound to someone else: the answer of a code that does not exist. */
        if (!found || (f->customer_id > 0 && f->ref->bound_customer > 0 &&
                       f->ref->bound_customer != f->customer_id))
            rc = VC_E_NOT_FOUND;
    }
    PQclear(res);
    return rc;
}

static void find_done(void *arg, int rc, const char *err)
{
    find_t *f = arg;
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];

    (void)err; /* the caller logs with its own ids */
    if (rc == 0 || (rc == VC_E_NOT_FOUND && f->ref->id > 0)) {
        /* A stand-in's keys as well: the same work for a code that does not exist. */
        gw_campaign_keys(f->ref->id, keys);
        memcpy(f->ref->users, keys[VC_VOUCHER_KEY_USERS], sizeof(f->ref->users));
        memcpy(f->ref->orders, keys[VC_VOUCHER_KEY_ORDERS], sizeof(f->ref->orders));
        (void)vc_campaign_key(f->ref->taken, sizeof(f->ref->taken), f->ref->id,
                              VC_CAMPAIGN_KEY_TAKEN);
    }
    if (rc != 0) {
        f->ref->stand_in = rc == VC_E_NOT_FOUND ? f->ref->id : 0;
        f->ref->id = 0;
    }
    f->cb(f->arg, rc);
    free(f);
}

void gw_campaign_find(gw_app_t *app, const char *path_code, int64_t customer_id,
                      gw_campaign_ref_t *ref, vc_voucher_t *v, gw_campaign_found_cb cb,
                      void *arg)
{
    find_t *f;
    int rc;

    memset(ref, 0, sizeof(*ref));
    if (vc_campaign_normalize(path_code, strlen(path_code), ref->code) < 0) {
        cb(arg, VC_E_NOT_FOUND);
        return;
    }
    if (!(f = malloc(sizeof(*f)))) {
        cb(arg, VC_ERR_NOMEM);
        return;
    }
    *f = (find_t){.ref = ref, .v = v, .customer_id = customer_id, .cb = cb, .arg = arg};
    if ((rc = gw_pg_run(app->loop, app->pg, find_work, find_done, f)) != 0) {
        free(f);
        cb(arg, rc);
    }
}

void gw_campaign_keys(int64_t id, char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX])
{
    for (int i = 0; i < VC_VOUCHER_KEY_COUNT; i++) {
        int k = vc_campaign_key_of_voucher[i];

        /*
         * The campaign's key of the voucher key's name; none (limit, outside, soldout):
         * empty, since no voucher script a campaign runs takes one (the build checks it,
         * common/redis_model.py) and no campaign flow reads one.
         */
        keys[i][0] = '\0';
        if (k >= 0)
            (void)vc_campaign_key(keys[i], GW_KEY_MAX, (long long)id, (vc_campaign_key_t)k);
    }
}

void gw_campaign_take(const gw_campaign_ref_t *ref, char *code,
                      char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX])
{
    memcpy(code, ref->code, VC_CODE_MAX + 1);
    gw_campaign_keys(ref->id, keys);
}

static size_t campaign_script(size_t script)
{
    switch (script) {
    case GW_SCRIPT_FORGET:
        return GW_SCRIPT_CAMPAIGN_FORGET;
    case GW_SCRIPT_RELEASE_BEGIN:
        return GW_SCRIPT_CAMPAIGN_RELEASE_BEGIN;
    case GW_SCRIPT_RELEASE_FINISH:
        return GW_SCRIPT_CAMPAIGN_RELEASE_FINISH;
    case GW_SCRIPT_CONFIRM:
        return GW_SCRIPT_CAMPAIGN_CONFIRM;
    default:
        return GW_SCRIPT_COUNT;
    }
}

#define GW_CAMPAIGN_MAX_KEYS 8
#define GW_CAMPAIGN_MAX_ARGS 8

int gw_campaign_eval(gw_app_t *app, const gw_campaign_ref_t *ref, size_t script, gw_redis_cb cb,
                     void *arg, int nkeys, const char *const *keys, int nargs,
                     const char *const *args)
{
    const char *k[GW_CAMPAIGN_MAX_KEYS + 3], *a[GW_CAMPAIGN_MAX_ARGS + 2];
    size_t s = campaign_script(script);

    if (s == GW_SCRIPT_COUNT || nkeys > GW_CAMPAIGN_MAX_KEYS || nargs > GW_CAMPAIGN_MAX_ARGS)
        return VC_ERR_INVALID;
    memcpy(k, keys, (size_t)nkeys * sizeof(*k));
    memcpy(a, args, (size_t)nargs * sizeof(*a));
    k[nkeys] = ref->users;
    k[nkeys + 1] = ref->orders;
    k[nkeys + 2] = ref->taken;
    a[nargs] = ref->loaded ? "1" : "0";
    a[nargs + 1] = ref->code;
    return gw_redis_eval(app->redis, s, cb, arg, nkeys + 3, k, nargs + 2, a);
}

/* A reservation's script answer, passed on; the first take of a campaign marks it loaded. */
typedef struct {
    gw_app_t *app;
    int64_t id;
    int loaded;
    gw_redis_cb cb;
    void *arg;
} reserved_t;

static int mark_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    char id[24];
    const char *params[] = {id};
    int rc = 0;

    snprintf(id, sizeof(id), "%lld", (long long)*(int64_t *)arg);
    PQclear(vc_pg_exec(conn,
                       "UPDATE campaign SET redis_loaded_at = now()"
                       " WHERE id = $1::bigint AND redis_loaded_at IS NULL",
                       1, params, &rc, err, errlen));
    return rc;
}

static void mark_done(void *arg, int rc, const char *err)
{
    int64_t *id = arg;

    /* Not fatal: the next first take of the campaign marks it. */
    if (rc != 0)
        vc_warn("campaign %lld: marking its keys loaded in PostgreSQL failed: %s",
                (long long)*id, err && *err ? err : vc_strerror(rc));
    free(id);
}

static void reserved_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserved_t *r = arg;
    int64_t *id;

    /*
     * Taken (VC_RESERVE_TAKEN) while PostgreSQL did not know Redis has the keys: it
     * does now. The reservation's answer does not wait for it: until the mark
     * commits, a loss of every key at once looks like a fresh campaign, as it
     * did before the first use (proto/campaigns.md says what that costs).
     */
    if (rc == 0 && !r->loaded && reply && reply->n >= 1 && reply->item[0].type == GW_REDIS_INT &&
        reply->item[0].integer == VC_RESERVE_TAKEN && (id = malloc(sizeof(*id))) != NULL) {
        *id = r->id;
        if (gw_pg_run(r->app->loop, r->app->pg, mark_work, mark_done, id) != 0)
            free(id);
    }
    r->cb(r->arg, rc, reply);
    free(r);
}

int gw_campaign_reserve_eval(gw_app_t *app, const gw_campaign_ref_t *ref, const char *const *args,
                             int64_t expire_at_ms, gw_redis_cb cb, void *arg)
{
    char expire[32], built[VC_CAMPAIGN_RESERVE_NKEYS][GW_KEY_MAX];
    const char *k[VC_CAMPAIGN_RESERVE_NKEYS];
    const char *a[10];
    reserved_t *r;
    int rc;

    /*
     * campaign_reserve.lua's keys are the campaign family's, in its order (taken is no
     * voucher key): built here from the id, not picked out of the flow's keys.
     */
    for (int i = 0; i < VC_CAMPAIGN_RESERVE_NKEYS; i++) {
        (void)vc_campaign_key(built[i], GW_KEY_MAX, (long long)ref->id,
                              (vc_campaign_key_t)vc_campaign_reserve_keys[i]);
        k[i] = built[i];
    }
    if (!(r = malloc(sizeof(*r))))
        return VC_ERR_NOMEM;
    *r = (reserved_t){.app = app, .id = ref->id, .loaded = ref->loaded, .cb = cb, .arg = arg};
    /* One argument for both: the gateway's scripts take 16 keys and arguments at most. */
    snprintf(expire, sizeof(expire), "%lld:%d", (long long)expire_at_ms, ref->loaded ? 1 : 0);
    memcpy(a, args, 8 * sizeof(*a));
    a[8] = ref->code;
    a[9] = expire;
    if ((rc = gw_redis_eval(app->redis, GW_SCRIPT_CAMPAIGN_RESERVE, reserved_cb, r,
                            VC_CAMPAIGN_RESERVE_NKEYS, k, 10, a)) != 0)
        free(r);
    return rc;
}

int gw_campaign_refusal(const gw_campaign_ref_t *ref, int refusal)
{
    if (!ref->active || ref->revoked || refusal == VC_E_NOT_STARTED || refusal == VC_E_EXPIRED)
        return VC_E_NOT_FOUND;
    return refusal;
}
