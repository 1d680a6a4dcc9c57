/*
 * The reservation's rules (step GW_RESERVE_RULES): the code looked up (the
 * rules cache, PostgreSQL, or a campaign's code), the voucher's rules judged
 * (no I/O), and which way the request goes from the verdict: refused from
 * memory, reserve.lua "known" (sold out, an order of the snapshot), the
 * orderId's claim and reserve.lua "take" (the success path), or the probe of
 * a refused order (GW_RESERVE_PROBE); or, for a direct voucher, PostgreSQL
 * alone (gw_reserve_direct.c). The verdict is for a new order only: a retry is
 * answered from what Redis stores (gw_reserve.c's opening comment), or a
 * direct voucher's from its row.
 */
#include <string.h>

#include "gw_guard.h"
#include "gw_reserve_int.h"
#include "vc_error.h"
#include "vc_time.h"

/* The refused order's probe answered: only an order Redis knows gets another answer. */
static void probe_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_PROBE);
    if (rc != 0) {
        /* Whether this is a retry of a reservation cannot be told: retry later. */
        gw_reserve_fail(x, rc, "redis order lookup");
        return;
    }
    if (x->absent || (reply->n == 1 && reply->item[0].type == GW_REDIS_NIL)) {
        gw_reserve_refuse_new(x); /* a stand-in's orders are not the absent code's: not read */
        return;
    }
    gw_reserve_run_script(x); /* "known": replays, or ORDER_CONFLICT; never takes */
}

/*
 * The verdict stands for a new order only. Most such requests are new: one
 * read (cheaper than the script) tells, and only a known order runs
 * reserve.lua, to be answered from what Redis stores.
 */
static void probe(gw_reserve_t *x)
{
    const char *argv[] = {"HGET", x->keys[VC_VOUCHER_KEY_ORDERS], x->in.order_id};
    size_t argvlen[3];
    int rc;

    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_RULES), GW_RESERVE_PROBE);
    for (int i = 0; i < 3; i++)
        argvlen[i] = strlen(argv[i]);
    if ((rc = gw_redis_command(x->app->redis, probe_cb, x, 3, argv, argvlen)) != 0)
        gw_reserve_fail(x, rc, "redis order lookup");
}

/* The rules are in x->v (a voucher's, a campaign's, or a stand-in's): judge, and go on. */
static void with_rules(gw_reserve_t *x)
{
    int sold = GW_SOLDOUT_NO;

    VC_ASSERT(x->step == GW_RESERVE_RULES);
    x->now_ms = vc_time_now_ms();
    x->refusal = vc_voucher_check(&x->v, x->now_ms, x->in.order_amount, &x->discount);
    if (x->camp.id)
        x->refusal = gw_campaign_refusal(&x->camp, x->refusal);
    if (x->absent)
        x->refusal = VC_E_NOT_FOUND;
    if (x->v.mode == VC_MODE_DIRECT && !x->camp.id) {
        /* PostgreSQL decides it alone (gw_reserve_direct.c): no sold-out mark, no script. */
        gw_reserve_direct(x);
        return;
    }
    if (gw_guard_local(x->req)) {
        /*
         * Redis could not take the guard's tries (gw_guard.h, the local
         * limiter): a flash voucher's or a campaign's reservation answers 503
         * as it did before, never going on to Redis on a try it did not take.
         * A code nobody has answers 404 at once, a failed try the local limiter
         * keeps: a 503 would give its try back, and a guesser could then tell
         * the direct vouchers' codes (not 503) from the others for nothing.
         */
        if (x->absent)
            gw_reserve_refuse_new(x);
        else
            gw_reserve_fail(x, VC_ERR_UNAVAILABLE, "redis: guessing limits");
        return;
    }
    if (x->refusal == 0 && !x->camp.id)
        sold = gw_soldout_order(x->code, x->in.order_id, vc_time_mono_ms());
    if (sold == GW_SOLDOUT_NEW) {
        /* Not an order Redis knew when the voucher sold out: no round trip, no key. */
        x->refusal = VC_E_OUT_OF_STOCK;
        gw_reserve_refuse_new(x);
        return;
    }
    /* Named here, once the answer needs Redis (a campaign's came with its code). */
    if (!x->camp.id)
        gw_app_keys(x->code, x->keys); /* the sold-out leases too, :soldout */
    vc_claim_key(x->in.order_id, x->claim_key);
    if (sold == GW_SOLDOUT_KNOWN) {
        /* A retry (most likely): reserve.lua "known" answers it, takes nothing. */
        x->refusal = VC_E_OUT_OF_STOCK;
        gw_reserve_run_script(x);
        return;
    }
    if (x->refusal == 0) {
        x->held_until_ms = x->now_ms + x->app->cfg->hold_ttl_ms;
        gw_reserve_claim_and_run(x);
        return;
    }
    probe(x);
}

/* The path's code is a campaign's (or not: then the answer of an unknown voucher). */
static void campaign_cb(void *arg, int rc)
{
    gw_reserve_t *x = arg;

    if (rc < 0) {
        gw_reserve_fail(x, rc, "reading the campaign code");
        return;
    }
    if (rc == VC_E_NOT_FOUND) {
        /*
         * A code no voucher and no campaign has (or a campaign's code bound to
         * another customer) runs the path of a campaign's code that is not in
         * its window (inactive, ended, not started, revoked), whose answer is
         * also 404: the stand-in campaign's rules are checked, its keys named
         * and its orders hash read (the answer not looked at). Every "no such
         * code" then does the same work, PostgreSQL's, ours and Redis's, and
         * its timing tells a guesser nothing (issue 42, item 5: it was 10 to
         * 15 us more for the campaign's). With no campaign at all there is no
         * code to tell apart: the voucher's own keys are read.
         */
        x->absent = 1;
        x->camp.id = x->camp.stand_in;
    } else if (rc > 0) {
        gw_reserve_refuse(x, rc, NULL);
        return;
    }
    if (x->camp.id)
        gw_campaign_take(&x->camp, x->code, x->keys);
    with_rules(x);
}

static void rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    gw_reserve_t *x = arg;

    if (rc == VC_E_NOT_FOUND) {
        gw_campaign_find(x->app, x->code, x->in.customer_id, &x->camp, &x->v, campaign_cb, x);
        return;
    }
    if (rc > 0) {
        gw_reserve_refuse(x, rc, NULL);
        return;
    }
    if (rc < 0) {
        gw_reserve_fail(x, rc, "reading voucher rules");
        return;
    }
    x->v = *v;
    x->voucher = 1;
    with_rules(x);
}

void gw_reserve_lookup(void *arg)
{
    gw_reserve_t *x = arg;
    int rc;

    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_GUARD), GW_RESERVE_RULES);
    rc = gw_rules_get(x->app->rules, x->code, 0, &x->v, rules_cb, x);
    if (rc == GW_RULES_PENDING)
        return;
    x->voucher = rc == 0;
    if (rc == 0)
        with_rules(x);
    else
        rules_cb(x, rc, NULL);
}
