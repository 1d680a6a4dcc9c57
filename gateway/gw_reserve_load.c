/*
 * The voucher's first load into Redis (step GW_RESERVE_LOAD): reserve.lua
 * found no counter. Once in the voucher's life a request claims the load in
 * PostgreSQL (redis_loaded_at) and sets the counter and its limit key
 * (load.lua), then runs the script again; a request that finds the load
 * claimed by another waits for it a few times. A voucher loaded before and
 * gone from Redis is not loaded here: the reconciler restores it.
 */
#include <stdio.h>

#include "gw_reserve_int.h"
#include "gw_store.h"
#include "vc_error.h"
#include "vc_log.h"

#define GW_LOAD_WAITS 10 /* script runs while another request's first load lands */
#define GW_LOAD_WAIT_MS 50

static void load_again(void *x)
{
    gw_reserve_run_script(x);
}

/*
 * The first load was claimed by a request that has not set the counter yet,
 * or Redis lost the voucher. Look again a few times before saying which.
 */
static void wait_for_load(gw_reserve_t *x)
{
    if (x->load_waits-- <= 0 || gw_reserve_timer(x, GW_LOAD_WAIT_MS, load_again) != 0) {
        /*
         * Loaded before and gone from Redis: total_limit - used_count would
         * miss the events in flight and oversell. The reconciler restores it.
         */
        gw_reserve_unclaim(x);
        gw_reserve_refuse(x, VC_ERR_UNAVAILABLE, "voucher is being restored");
    }
}

static int claim_load_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    gw_reserve_t *x = arg;
    return gw_store_claim_load(conn, x->code, &x->load_remaining, &x->load_total, err, errlen);
}

static void set_loaded_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;
    (void)reply; /* OK, or nil when another request loaded it first: both fine */

    VC_ASSERT(x->step == GW_RESERVE_LOAD);
    if (rc != 0) {
        /* redis_loaded_at is set now: the reconciler loads it (from PostgreSQL and Kafka). */
        gw_reserve_fail(x, rc, "loading the voucher into redis");
        return;
    }
    gw_reserve_run_script(x);
}

/* The load's claim in PostgreSQL failed: nothing was taken, the orderId's claim goes. */
static void claim_load_failed(gw_reserve_t *x, int rc, const char *err)
{
    gw_reserve_unclaim(x);
    if (rc > 0) {
        gw_reserve_refuse(x, rc, NULL);
    } else {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "claiming the first load failed: %s", err);
        gw_reserve_fail(x, rc, "claiming the voucher's first load");
    }
}

static void claim_load_done(void *arg, int rc, const char *err)
{
    gw_reserve_t *x = arg;
    char remaining[32], total[24], expire_at[24];
    const char *keys[] = {x->keys[VC_VOUCHER_KEY_REMAINING], x->keys[VC_VOUCHER_KEY_LIMIT]};
    const char *args[] = {remaining, total, expire_at};

    VC_ASSERT(x->step == GW_RESERVE_LOAD);
    if (rc == VC_E_REPLAYED) {
        x->load_waits = GW_LOAD_WAITS;
        wait_for_load(x);
        return;
    }
    if (rc != 0) {
        claim_load_failed(x, rc, err);
        return;
    }
    snprintf(remaining, sizeof(remaining), "%lld",
             (long long)(x->load_remaining > 0 ? x->load_remaining : 0));
    snprintf(total, sizeof(total), "%lld", (long long)x->load_total);
    gw_reserve_retention_at(x, expire_at);
    /* The counter and its limit key together (load.lua, proto/redis-keys.md "The limit key"). */
    if ((rc = gw_redis_eval(x->app->redis, GW_SCRIPT_LOAD, set_loaded_cb, x, 2, keys, 3, args)) !=
        0)
        gw_reserve_fail(x, rc, "loading the voucher into redis");
}

void gw_reserve_load(gw_reserve_t *x)
{
    int rc;

    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_SCRIPT), GW_RESERVE_LOAD);
    if (x->reloaded) {
        wait_for_load(x); /* a racing first load, or lost again */
        return;
    }
    x->reloaded = 1;
    if ((rc = gw_pg_run(x->app->loop, x->app->pg, claim_load_work, claim_load_done, x)) != 0) {
        gw_reserve_unclaim(x);
        gw_reserve_fail(x, rc, "claiming the voucher's first load");
    }
}
