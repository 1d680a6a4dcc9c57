/*
 * reserve.lua (or campaign_reserve.lua, a campaign's) for a request, and
 * what its answer leads to (step GW_RESERVE_SCRIPT): "take" takes one use
 * atomically for a new order that passed the rules, answers an order it
 * knows before it looks at stock or limits, and on a sold-out voucher may
 * take the snapshot other orders are answered from (gw_soldout.h); "known"
 * answers an order that the rules refused, and never takes.
 */
#include <stdio.h>
#include <string.h>

#include "gw_reserve_int.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_order_value.h"
#include "vc_time.h"

/*
 * Brings the snapshot this request asked for back to gw_soldout (what the
 * script said; reply NULL when it failed).
 */
static void snapshot_answer(gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    const char *ids = NULL;
    size_t len = 0;

    if (x->snapshot != GW_SNAPSHOT_ASKING)
        return;
    x->snapshot = GW_SNAPSHOT_ANSWERED;
    if (reply && reply->n >= 2 && reply->item[0].type == GW_REDIS_INT &&
        reply->item[0].integer == VC_RESERVE_OUT_OF_STOCK && reply->item[1].type == GW_REDIS_STR) {
        ids = reply->item[1].str;
        len = reply->item[1].len;
    }
    (void)gw_soldout_answer(x->code, &x->ticket, x->app->cfg->soldout_recheck_ms, ids, len);
}

/*
 * What forget.lua did, logged: returns its status, 1 forgotten, 0 or -1 not
 * held, -2 published again by a retry (kept); 0 when the call failed.
 */
static int64_t forgotten(gw_reserve_t *x, int rc, const gw_redis_reply_t *reply)
{
    char code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};
    int64_t status = 0;

    VC_ASSERT(x->step == GW_RESERVE_FORGET);
    if (rc == 0 && reply->n >= 1 && reply->item[0].type == GW_REDIS_INT)
        status = reply->item[0].integer;
    if (status == VC_FORGET_FORGOTTEN)
        gw_soldout_clear(x->code);
    else if (status == VC_FORGET_RESENT)
        VC_LOG_F(VC_LOG_INFO, f, "use kept: a retry published the reservation again");
    else
        VC_LOG_F(VC_LOG_WARN, f, "giving the use back failed (%s): the reconciler will",
                 rc ? vc_strerror(rc) : "order not held");
    return status;
}

/* The claim could not be made this request's: the use it took is forgotten, then 503. */
static void claim_failed_forgotten_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    (void)forgotten(x, rc, reply);
    gw_reserve_fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
}

/* The orderId is another code's: the use this request took is forgotten, then 409. */
static void conflict_forgotten_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    (void)forgotten(x, rc, reply);
    gw_reserve_other_code(x);
}

/*
 * Forgets the hold this request took (forget.lua); answers nothing. Only for a
 * use taken under a claim that is not this request's (script_cb()): no event
 * was published for it. A hold whose VoucherReserved went to Kafka is never
 * forgotten, see delivered_cb() (gw_reserve_publish.c).
 */
static int forget(gw_reserve_t *x, gw_redis_cb cb)
{
    const char *keys[VC_FORGET_NKEYS];
    const char *args[] = {x->in.order_id};
    int rc;

    vc_script_keys(vc_forget_keys, VC_FORGET_NKEYS, x->keys[0], GW_KEY_MAX, keys);
    if (x->camp.id)
        rc = gw_campaign_eval(x->app, &x->camp, GW_SCRIPT_FORGET, cb, x, VC_FORGET_NKEYS, keys, 1,
                              args);
    else
        rc = gw_redis_eval(x->app->redis, GW_SCRIPT_FORGET, cb, x, VC_FORGET_NKEYS, keys, 1, args);
    if (rc == 0)
        gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_SCRIPT), GW_RESERVE_FORGET);
    return rc;
}

/* The same orderId again: publish its event again and answer 201 replayed after the ack. */
static void replay(gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    vc_order_value_t o;

    if (reply->n < 2 || reply->item[1].type != GW_REDIS_STR ||
        vc_order_value_parse(reply->item[1].str, reply->item[1].len, &o) != 0) {
        gw_reserve_fail(x, VC_ERR_PROTOCOL, "stored order value unreadable");
        return;
    }
    if (o.state != VC_STATE_HELD && o.state != VC_STATE_CONFIRMED) {
        gw_reserve_refuse(x, VC_E_HOLD_EXPIRED,
                          "this order's reservation was released; use a new orderId");
        return;
    }
    x->discount = o.discount;
    x->held_until_ms = o.held_until_ms;
    x->replayed = 1;
    gw_reserve_publish_after(x, reply);
}

/* reserve.lua "known": nothing was claimed, nothing can have been taken. */
static void known_answered(gw_reserve_t *x, int64_t status, const gw_redis_reply_t *reply)
{
    if (status == VC_RESERVE_SAME_ORDER)
        replay(x, reply);
    else if (status == VC_RESERVE_OTHER_CUSTOMER)
        gw_reserve_other_customer(x);
    else if (status == VC_RESERVE_OTHER_AMOUNT)
        gw_reserve_other_amount(x, reply);
    else if (status == VC_RESERVE_NEW_ORDER)
        gw_reserve_refuse_new(x); /* forgotten since the probe */
    else
        gw_reserve_fail(x, VC_ERR_PROTOCOL, "redis reserve");
}

/* "take" under a claim that is not this request's (another code's, or failed). */
static void unclaimed_answered(gw_reserve_t *x, int64_t status)
{
    int conflict = x->claim == GW_CLAIM_OTHER;

    /* A use taken for an order that may not have it: give it back before answering. */
    if (status == VC_RESERVE_TAKEN &&
        forget(x, conflict ? conflict_forgotten_cb : claim_failed_forgotten_cb) == 0)
        return;
    if (conflict)
        gw_reserve_other_code(x);
    else
        gw_reserve_fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
}

/*
 * Sold out: once per process at a time, the script runs again for this
 * request to take the snapshot the next new orders are answered from (it may
 * take a use, if one came back meanwhile). Returns whether it runs.
 */
static int ask_snapshot(gw_reserve_t *x)
{
    if (x->snapshot != GW_SNAPSHOT_NOT_ASKED || x->app->cfg->soldout_recheck_ms <= 0 ||
        x->camp.id || !gw_soldout_ask(x->code, vc_time_mono_ms(), &x->ticket))
        return 0;
    x->snapshot = GW_SNAPSHOT_ASKING;
    gw_reserve_run_script(x);
    return 1;
}

/* "take" under this request's claim (new, or found for this code). */
static void take_answered(gw_reserve_t *x, int64_t status, const gw_redis_reply_t *reply)
{
    switch (status) {
    case VC_RESERVE_TAKEN:
        /* A use was there to take: any sold-out mark of this process is stale. */
        gw_soldout_clear(x->code);
        /*
         * The claim is another request's, which may be rejected and release
         * it: make it ours, so that its release finds another token and
         * leaves it (claim.lua). Sent before any WAIT of this request, on the
         * connection of the claim's node: a WAIT there covers it
         * (gw_redis_wait()), the one node's or, on a cluster, the claim's
         * master's (GW_RESERVE_CLAIM_REPLICAS).
         */
        if (x->claim == GW_CLAIM_OURS)
            gw_reserve_keep_claim(x);
        gw_reserve_publish_after(x, reply);
        return;
    case VC_RESERVE_SAME_ORDER:
        replay(x, reply);
        return;
    case VC_RESERVE_OUT_OF_STOCK:
        if (!ask_snapshot(x))
            gw_reserve_reject(x, VC_E_OUT_OF_STOCK, NULL);
        return;
    case VC_RESERVE_ALREADY_USED:
        gw_reserve_already_used(x, reply);
        return;
    case VC_RESERVE_NOT_LOADED:
        gw_reserve_load(x);
        return;
    case VC_RESERVE_OTHER_CUSTOMER:
        /* The orderId is this voucher's: the claim, if this request made it, is right. */
        gw_reserve_other_customer(x);
        return;
    case VC_RESERVE_OTHER_AMOUNT:
        gw_reserve_other_amount(x, reply);
        return;
    case VC_RESERVE_COUNTS_LOST:
        /* Nothing was taken: the claim goes, and the retry after the rebuild takes a use. */
        gw_reserve_unclaim(x);
        gw_reserve_fail(x, VC_ERR_UNAVAILABLE,
                        "the customers' counts in Redis were lost; the reconciler rebuilds them");
        return;
    default:
        gw_reserve_fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
}

static void script_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    /*
     * A script sent behind the claim is answered after it: claim_cb() moved
     * GW_RESERVE_CLAIM to GW_RESERVE_SCRIPT, and the script's answer reads
     * x->claim. hiredis answers the commands of one connection in the order
     * they were sent, and gw_redis.c keeps that order when it fails them (its
     * deadlines run out oldest first, a lost connection ends them in order;
     * only a script is sent again, on NOSCRIPT, and so after the claim). A
     * Redis Cluster, where that order does not hold, sends the script only
     * once the claim has answered (GW_RESERVE_CLAIM_FIRST).
     */
    VC_ASSERT(x->step == GW_RESERVE_SCRIPT);
    snapshot_answer(x, rc == 0 ? reply : NULL);
    if (rc != 0) {
        /* The script may have run: keep the claim, a retry finds the order. */
        gw_reserve_fail(x, rc, "redis reserve");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        gw_reserve_fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    if (x->refusal != 0)
        known_answered(x, reply->item[0].integer, reply);
    else if (x->claim != GW_CLAIM_NEW && x->claim != GW_CLAIM_OURS)
        unclaimed_answered(x, reply->item[0].integer);
    else
        take_answered(x, reply->item[0].integer, reply);
}

int gw_reserve_send_script(gw_reserve_t *x)
{
    char customer[VC_I64_TEXT], limit[VC_I64_TEXT], discount[VC_I64_TEXT], held[VC_I64_TEXT],
        now[VC_I64_TEXT], amount[VC_I64_TEXT], snapshot[40];
    const char *keys[VC_RESERVE_NKEYS];
    const char *mode = x->refusal ? "known" : x->snapshot == GW_SNAPSHOT_ASKING ? snapshot : "take";
    const char *args[] = {customer, limit,  x->in.order_id, discount,          held,
                          now,      amount, mode,           gw_soldout_token()};

    /* All seven, the sold-out leases last (a campaign's reservation takes its own). */
    vc_script_keys(vc_reserve_keys, VC_RESERVE_NKEYS, x->keys[0], GW_KEY_MAX, keys);
    /* "take", and on -1 the snapshot with its lease (reserve.lua ARGV[8]); off the success path. */
    if (x->snapshot == GW_SNAPSHOT_ASKING)
        snprintf(snapshot, sizeof(snapshot), "snapshot:%lld",
                 (long long)(x->app->cfg->soldout_recheck_ms + GW_SOLDOUT_LEASE_MARGIN_MS));
    vc_i64_text(customer, x->in.customer_id);
    vc_i64_text(limit, x->v.per_customer_limit);
    vc_i64_text(discount, x->discount);
    vc_i64_text(held, x->held_until_ms);
    vc_i64_text(now, x->now_ms);
    vc_i64_text(amount, x->in.order_amount);
    if (x->camp.id)
        return gw_campaign_reserve_eval(x->app, &x->camp, args,
                                        x->v.ends_at_ms + x->app->cfg->redis_retention_ms,
                                        script_cb, x);
    return gw_redis_eval(x->app->redis, GW_SCRIPT_RESERVE, script_cb, x, VC_RESERVE_NKEYS, keys, 9,
                         args);
}

void gw_reserve_run_script(gw_reserve_t *x)
{
    int rc;

    gw_reserve_go(x,
                  GW_RESERVE_FROM(GW_RESERVE_RULES) | GW_RESERVE_FROM(GW_RESERVE_PROBE) |
                      GW_RESERVE_FROM(GW_RESERVE_CLAIM_FIRST) | GW_RESERVE_FROM(GW_RESERVE_SCRIPT) |
                      GW_RESERVE_FROM(GW_RESERVE_LOAD),
                  GW_RESERVE_SCRIPT);
    if ((rc = gw_reserve_send_script(x)) != 0) {
        snapshot_answer(x, NULL);
        gw_reserve_fail(x, rc, "redis reserve");
    }
}
