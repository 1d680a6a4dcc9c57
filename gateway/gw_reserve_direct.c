/*
 * A direct voucher's reservation (proto/direct-mode.md): from the rules on,
 * PostgreSQL alone decides, in one call of dr_reserve (one transaction: the
 * redemption row, the conditional UPDATE of used_count, the VoucherReserved
 * in the outbox), and the 201 follows its commit. No reserve.lua, no sold-out
 * mark, no Kafka: a direct voucher answers while Redis or Kafka is down.
 *
 * The rules' verdict is for a new order only, as in flash mode:
 * - Eligible: the orderId's claim first (voucher-order:{orderId}, as flash
 *   mode claims it), so that an orderId in flight on a flash voucher, whose
 *   event PostgreSQL has not seen yet, is refused here too (409, another
 *   voucher code). A claim Redis does not take or answer is gone without:
 *   the unique order_id decides alone. Then dr_reserve.
 * - Refused: nothing may be taken, so no claim. One read asks PostgreSQL
 *   whether the voucher has the order (flash mode asks Redis): unknown (every
 *   new order), the refusal; known (a retry), dr_reserve answers it from its
 *   row and takes nothing (the row is there: its insert finds it).
 *
 * The steps (gw_reserve_int.h), each move checked by gw_reserve_go():
 *
 *   RULES -> DIRECT_CLAIM           gw_reserve_claim_direct()  eligible: the claim, alone
 *   RULES -> DIRECT_PROBE           probe()                    refused: is the order known?
 *   DIRECT_CLAIM, DIRECT_PROBE -> DIRECT
 *                                   call()                     dr_reserve
 *   any of them -> DONE             the answers (gw_reserve_answer.c), once
 */
#include <stdio.h>
#include <string.h>

#include "gw_direct.h"
#include "gw_metrics.h"
#include "gw_reserve_int.h"
#include "gw_rules.h"
#include "vc_error.h"
#include "vc_log.h"

/* The call's state, in the request's arena beside x (only a direct voucher's request has one). */
struct gw_reserve_direct {
    gw_direct_reserve_t in;        /* dr_reserve's arguments; strings point into x and here */
    char event[VC_EVENT_MAX_JSON]; /* the VoucherReserved the outbox gets if a use is taken */
    gw_direct_result_t out;        /* what it answered (written on the threadpool) */
    int known;                     /* the probe: the voucher has the orderId */
    int64_t probe_us;
};

/* A failed PostgreSQL call: never the client's fault, so never a 400 (VC_ERR_INVALID). */
static int unavailable(int rc)
{
    return rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc;
}

/* ---- the answer ---- */

/* dr_reserve answered (rc 0) or failed: the one answer of the request. */
static void answer(gw_reserve_t *x, int rc, const char *err)
{
    const gw_direct_result_t *out = &x->direct->out;
    char amount[VC_I64_TEXT];

    gw_metrics_direct(GW_ROUTE_RESERVE, rc == 0 ? out->answer : GW_DIRECT_FAILED, out->pg_us);
    if (rc != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "dr_reserve failed: %s", err);
        /* It may have committed: the claim stays, and a retry is answered from the row. */
        gw_reserve_fail(x, unavailable(rc), "postgresql reserve");
        return;
    }
    switch (out->answer) {
    case GW_DIRECT_RESERVED:
        /*
         * As in flash mode, a claim found for this code becomes this request's, so
         * that the release of the request that made it leaves it.
         */
        if (x->claim == GW_CLAIM_OURS)
            gw_reserve_keep_claim(x);
        /* fall through */
    case GW_DIRECT_RETRY:
        if (!out->has_discount || !out->has_held_until) {
            gw_reserve_fail(x, VC_ERR_PROTOCOL, "postgresql reserve: no figures");
            return;
        }
        x->discount = out->discount;
        x->held_until_ms = out->held_until_ms;
        x->replayed = out->answer == GW_DIRECT_RETRY;
        gw_reserve_created(x);
        return;
    case GW_DIRECT_ORDER_CONFLICT:
        if (out->has_amount) {
            /* This code's and customer's orderId, with another amount: its claim is right. */
            vc_i64_text(amount, out->amount);
            gw_reserve_other_amount_was(x, amount, strlen(amount));
        } else if (x->claim == GW_CLAIM_OURS) {
            /* Claimed for this code before: the orderId is this voucher's, another customer's. */
            gw_reserve_other_customer(x);
        } else {
            /* Another code's, or this one's other customer's: the function does not say which. */
            gw_reserve_reject(x, VC_E_ORDER_CONFLICT, NULL);
        }
        return;
    case GW_DIRECT_HOLD_EXPIRED:
        /* The orderId is this voucher's, released: flash mode's words for its retry. */
        gw_reserve_refuse(x, VC_E_HOLD_EXPIRED,
                          "this order's reservation was released; use a new orderId");
        return;
    case GW_DIRECT_NOT_DIRECT:
        /* The cache said direct and the row says flash: read the rules again; retry. */
        gw_rules_changed(x->code);
        gw_reserve_reject(x, VC_ERR_UNAVAILABLE, "the voucher's mode changed: retry");
        return;
    default:
        rc = gw_direct_answer_rc(out->answer);
        if (rc <= 0) {
            gw_reserve_reject(x, VC_ERR_PROTOCOL, "postgresql reserve: an answer of another call");
            return;
        }
        /* OUT_OF_STOCK, ALREADY_USED, NOT_ELIGIBLE with its reason, NOT_FOUND: nothing taken. */
        gw_reserve_reject(x, rc, NULL);
        return;
    }
}

/* ---- dr_reserve ---- */

static int call_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    gw_reserve_t *x = arg;
    return gw_direct_reserve(conn, &x->direct->in, &x->direct->out, err, errlen);
}

static void call_done(void *arg, int rc, const char *err)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_DIRECT);
    answer(x, rc, err);
}

/*
 * dr_reserve for x: the event built as flash mode builds it (one builder,
 * gw_reserve_event()), so the outbox holds what Kafka would have had.
 */
static void call(gw_reserve_t *x)
{
    struct gw_reserve_direct *d = x->direct;
    char err[160];
    vc_event_t ev;
    size_t len;
    int rc;

    gw_reserve_go(
        x, GW_RESERVE_FROM(GW_RESERVE_DIRECT_CLAIM) | GW_RESERVE_FROM(GW_RESERVE_DIRECT_PROBE),
        GW_RESERVE_DIRECT);
    gw_reserve_event(x, x->now_ms, &ev);
    if ((rc = vc_event_encode(&ev, d->event, sizeof(d->event), &len, err, sizeof(err))) != 0) {
        gw_reserve_reject(x, rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc, err);
        return;
    }
    d->in.code = x->code;
    d->in.order_id = x->in.order_id;
    d->in.customer_id = x->in.customer_id;
    d->in.order_amount = x->in.order_amount;
    d->in.discount = x->discount;
    d->in.now_ms = x->now_ms;
    d->in.held_until_ms = x->held_until_ms;
    d->in.event = d->event;
    if ((rc = gw_pg_run(x->app->loop, x->app->pg, call_work, call_done, x)) != 0) {
        gw_metrics_direct(GW_ROUTE_RESERVE, GW_DIRECT_FAILED, 0);
        gw_reserve_reject(x, rc, "postgresql reserve");
    }
}

void gw_reserve_direct_claimed(gw_reserve_t *x)
{
    VC_ASSERT(x->step == GW_RESERVE_DIRECT_CLAIM);
    if (x->claim == GW_CLAIM_OTHER) {
        /* In flight, or held, on another code (a flash voucher's, maybe not in PostgreSQL yet). */
        gw_metrics_direct(GW_ROUTE_RESERVE, GW_DIRECT_ORDER_CONFLICT, 0);
        gw_reserve_other_code(x);
        return;
    }
    call(x);
}

/* ---- the probe of a refused order ---- */

static int probe_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    gw_reserve_t *x = arg;
    int64_t t0 = (int64_t)(uv_hrtime() / 1000);
    int rc = gw_direct_known(conn, x->code, x->in.order_id, &x->direct->known, err, errlen);

    x->direct->probe_us = (int64_t)(uv_hrtime() / 1000) - t0;
    return rc;
}

static void probe_done(void *arg, int rc, const char *err)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_DIRECT_PROBE);
    if (rc != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "the order's lookup failed: %s", err);
        gw_metrics_direct(GW_ROUTE_RESERVE, GW_DIRECT_FAILED, x->direct->probe_us);
        /* Whether this is a retry of a reservation cannot be told: retry later. */
        gw_reserve_fail(x, unavailable(rc), "postgresql order lookup");
        return;
    }
    if (!x->direct->known) {
        gw_metrics_direct(GW_ROUTE_RESERVE, gw_direct_answer_for(x->refusal), x->direct->probe_us);
        gw_reserve_refuse(x, x->refusal, NULL);
        return;
    }
    call(x); /* a retry: answered from its row, nothing taken */
}

static void probe(gw_reserve_t *x)
{
    int rc;

    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_RULES), GW_RESERVE_DIRECT_PROBE);
    if ((rc = gw_pg_run(x->app->loop, x->app->pg, probe_work, probe_done, x)) != 0) {
        gw_metrics_direct(GW_ROUTE_RESERVE, GW_DIRECT_FAILED, 0);
        gw_reserve_fail(x, rc, "postgresql order lookup");
    }
}

void gw_reserve_direct(gw_reserve_t *x)
{
    VC_ASSERT(x->step == GW_RESERVE_RULES && x->v.mode == VC_MODE_DIRECT && !x->camp.id);
    if (!(x->direct = gw_request_alloc(x->req, sizeof(*x->direct)))) {
        gw_reserve_refuse(x, VC_ERR_NOMEM, NULL);
        return;
    }
    x->held_until_ms = x->now_ms + x->app->cfg->hold_ttl_ms;
    vc_claim_key(x->in.order_id, x->claim_key);
    if (x->refusal != 0) {
        probe(x);
        return;
    }
    gw_reserve_claim_direct(x);
}
