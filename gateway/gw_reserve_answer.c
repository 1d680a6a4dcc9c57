/*
 * Every answer of a reservation, in one place: each ends the flow
 * (GW_RESERVE_DONE, checked to come once) and frees the request, and the
 * gw_reserve_t with it. An infrastructure failure is logged here, once, with
 * the code (as vc_log_code() shows it) and the orderId.
 */
#include <stdio.h>
#include <string.h>

#include "gw_answer.h"
#include "gw_guard.h"
#include "gw_metrics.h"
#include "gw_reserve_int.h"
#include "vc_error.h"
#include "vc_log.h"

/* The flow ends: no step may follow, and x goes with the request's answer. */
static void done(gw_reserve_t *x)
{
    gw_reserve_go(x, GW_RESERVE_ANSWERABLE, GW_RESERVE_DONE);
}

const char *gw_reserve_log_code(const gw_reserve_t *x, char out[VC_LOG_CODE_MAX])
{
    return vc_log_code(x->code, !x->voucher, out);
}

void gw_reserve_fail(gw_reserve_t *x, int rc, const char *what)
{
    char detail[160], code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};

    done(x);
    VC_LOG_F(VC_LOG_WARN, f, "reservation failed: %s: %s", what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(x->req, rc, detail);
}

void gw_reserve_refuse(gw_reserve_t *x, int rc, const char *detail)
{
    done(x);
    gw_app_reply_error(x->req, rc, detail);
}

void gw_reserve_reject(gw_reserve_t *x, int rc, const char *detail)
{
    gw_reserve_unclaim(x);
    gw_reserve_refuse(x, rc, detail);
}

void gw_reserve_refuse_new(gw_reserve_t *x)
{
    if (x->refusal == VC_E_OUT_OF_STOCK)
        gw_metrics_soldout();
    gw_reserve_refuse(x, x->refusal, NULL);
}

/*
 * What a -2 says (campaign_reserve.lua's reason; a voucher's -2 is always the
 * customer's limit): the default message names the per-customer limit, which
 * was wrong for a campaign's code another customer took.
 */
static const char *already_used_detail(const gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    if (!x->camp.id)
        return NULL;
    if (reply->n >= 2 && reply->item[1].type == GW_REDIS_STR && reply->item[1].len == 5 &&
        memcmp(reply->item[1].str, "taken", 5) == 0)
        return GW_CAMPAIGN_TAKEN_DETAIL;
    return GW_CAMPAIGN_LIMIT_DETAIL;
}

void gw_reserve_already_used(gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    /*
     * A campaign's code taken by someone else tells that the code exists:
     * a failed try for the guessing limits, as an unknown code's 404 is.
     */
    if (x->camp.id)
        gw_guard_mark(x->req, 1);
    gw_reserve_reject(x, VC_E_ALREADY_USED, already_used_detail(x, reply));
}

void gw_reserve_other_amount(gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    if (reply->n < 3 || reply->item[2].type != GW_REDIS_STR || reply->item[2].len > 20) {
        gw_reserve_fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    gw_reserve_other_amount_was(x, reply->item[2].str, reply->item[2].len);
}

void gw_reserve_other_amount_was(gw_reserve_t *x, const char *amount, size_t len)
{
    char detail[200];

    snprintf(detail, sizeof(detail),
             "this orderId was reserved with orderAmount %.*s: a retry must repeat the original "
             "request; use a new orderId for another amount",
             (int)len, amount);
    gw_reserve_refuse(x, VC_E_ORDER_CONFLICT, detail);
}

void gw_reserve_other_customer(gw_reserve_t *x)
{
    gw_reserve_refuse(x, VC_E_ORDER_CONFLICT, "this orderId was reserved by another customer");
}

void gw_reserve_other_code(gw_reserve_t *x)
{
    gw_reserve_refuse(x, VC_E_ORDER_CONFLICT,
                      "this orderId was reserved with another voucher code");
}

void gw_reserve_created(gw_reserve_t *x)
{
    char body[512];
    size_t len = gw_body_reservation(body, sizeof(body), x->in.order_id, x->code, x->discount,
                                     x->held_until_ms, x->replayed);

    done(x);
    gw_app_reply(x->req, 201, body, len);
}
