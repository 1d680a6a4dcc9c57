/*
 * A direct voucher's quote (proto/direct-mode.md): the rules were judged from
 * the cache (gw_quote.c); dr_quote gives the uses left and the same
 * statement the customer's live uses, read in one snapshot. Nothing changes.
 * The answers are flash mode's: the customer's limit first, then the stock,
 * as reserve.lua (and dr_reserve) judge them.
 */
#include <stdio.h>
#include <string.h>

#include "gw_direct.h"
#include "gw_metrics.h"
#include "gw_pgrun.h"
#include "gw_quote.h"
#include "gw_rules.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    char code[VC_CODE_MAX + 1];
    int64_t customer_id, discount, per_customer_limit, now_ms;
    gw_direct_result_t out; /* written on the threadpool */
} direct_quote_t;

static int work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    direct_quote_t *q = arg;
    return gw_direct_quote(conn, q->code, q->customer_id, q->now_ms, &q->out, err, errlen);
}

static void done(void *arg, int rc, const char *err)
{
    direct_quote_t *q = arg;
    char body[128], detail[160];
    size_t len;

    gw_metrics_direct(GW_ROUTE_QUOTE, rc == 0 ? q->out.answer : GW_DIRECT_FAILED, q->out.pg_us);
    if (rc == 0 && q->out.answer == GW_DIRECT_NOT_DIRECT) {
        /* The cache said direct and the row says flash: read the rules again; retry. */
        gw_rules_changed(q->code);
        rc = VC_ERR_UNAVAILABLE;
        err = "the voucher's mode changed";
    } else if (rc == 0 && q->out.answer == GW_DIRECT_NOT_FOUND) {
        gw_app_reply_error(q->req, VC_E_NOT_FOUND, NULL);
        return;
    } else if (rc == 0 && (q->out.answer != GW_DIRECT_OK || !q->out.has_remaining)) {
        rc = VC_ERR_PROTOCOL;
        err = "an answer of another call";
    }
    if (rc != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", vc_log_code(q->code, 0, code)}};
        VC_LOG_F(VC_LOG_WARN, f, "quote failed: dr_quote: %s", err);
        snprintf(detail, sizeof(detail), "postgresql read: %s",
                 vc_strerror(rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc));
        gw_app_reply_error(q->req, rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc, detail);
        return;
    }
    if (q->out.used >= q->per_customer_limit) {
        gw_app_reply_error(q->req, VC_E_ALREADY_USED, NULL);
        return;
    }
    if (q->out.remaining <= 0) {
        gw_app_reply_error(q->req, VC_E_OUT_OF_STOCK, NULL);
        return;
    }
    len = (size_t)snprintf(body, sizeof(body), "{\"discountAmount\":%lld}", (long long)q->discount);
    gw_app_reply(q->req, 200, body, len);
}

void gw_quote_direct(gw_app_t *app, gw_request_t *req, const char *code, int64_t customer_id,
                     int64_t discount, const vc_voucher_t *v)
{
    direct_quote_t *q = gw_request_alloc(req, sizeof(*q));
    int rc;

    if (!q) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    memset(q, 0, sizeof(*q));
    q->app = app;
    q->req = req;
    snprintf(q->code, sizeof(q->code), "%s", code);
    q->customer_id = customer_id;
    q->discount = discount;
    q->per_customer_limit = v->per_customer_limit;
    q->now_ms = vc_time_now_ms();
    if ((rc = gw_pg_run(app->loop, app->pg, work, done, q)) != 0) {
        gw_metrics_direct(GW_ROUTE_QUOTE, GW_DIRECT_FAILED, 0);
        gw_app_reply_error(req, rc, "postgresql read");
    }
}
