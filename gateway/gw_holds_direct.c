/*
 * A direct voucher's confirm and cancel (proto/direct-mode.md): one call of
 * dr_confirm or dr_cancel, one transaction that changes the order's row (and
 * used_count, for a release) and writes its event to the outbox, and the 200
 * after its commit. No Redis script, no Kafka: the answers are flash mode's
 * for the same situation (gw_holds.c), status, error, detail and figures.
 *
 * The event is built as flash mode builds it (common/vc_event.c) before the
 * call, so the outbox holds what Kafka would have had. It needs the order's
 * customer, which the request does not carry: one read of the row comes
 * first, in the same job on the same connection (a row never changes
 * customer, so the read needs no lock; the call then locks and decides).
 * No row is no call: 404, as flash mode answers an order Redis does not have.
 *
 * A confirm with the order's final total is priced here with the voucher's
 * rules (vc_voucher_price(), no clock), as flash mode prices it for
 * confirm.lua; dr_confirm judges that verdict against the row.
 *
 * The steps: the guessing limits and the rules (gw_holds.c), then
 *   job on the threadpool   read the row, build the event, call the function
 *   answer on the loop      the one answer, counted in the direct-mode metrics
 */
#include <stdio.h>
#include <string.h>

#include "gw_direct.h"
#include "gw_holds.h"
#include "gw_metrics.h"
#include "gw_pgrun.h"
#include "gw_rules.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

/* One request, in its arena. */
typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    vc_event_type_t type; /* VC_EV_CONFIRMED or VC_EV_RELEASED */
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
    gw_confirm_req_t in; /* a confirm's body: the final total, if given */
    vc_voucher_t v;
    int verdict;   /* vc_voucher_price() for the total: 0, or VC_E_ORDER_TOO_SMALL */
    int64_t price; /* the discount for the total, when verdict is 0 */
    int64_t now_ms;
    /* Written on the threadpool, read on the loop after the job: */
    gw_direct_order_t order;
    char event[VC_EVENT_MAX_JSON];
    gw_direct_result_t out;
} direct_hold_t;

static const char *verb(const direct_hold_t *h)
{
    return h->type == VC_EV_CONFIRMED ? "confirm" : "cancel";
}

static gw_route_kind_t route(const direct_hold_t *h)
{
    return h->type == VC_EV_CONFIRMED ? GW_ROUTE_CONFIRM : GW_ROUTE_CANCEL;
}

/* An infrastructure failure: logged once with the ids, answered 503. */
static void fail(direct_hold_t *h, int rc, const char *what)
{
    char detail[160], code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", vc_log_code(h->code, 0, code)}, {"orderId", h->order_id}};

    /* A failed statement is never the client's fault: no 400 (VC_ERR_INVALID). */
    if (rc == VC_ERR_INVALID)
        rc = VC_ERR_PROTOCOL;
    VC_LOG_F(VC_LOG_WARN, f, "%s failed: %s: %s", verb(h), what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(h->req, rc, detail);
}

/*
 * The event of this change, as gw_holds.c publishes it: the row's customer;
 * for a confirm given a total, the final figures (the reservation's discount
 * when the total is the reserved one, dr_confirm's rule and confirm.lua's).
 */
static int build_event(direct_hold_t *h, char *err, size_t errlen)
{
    vc_event_t ev;
    size_t len;

    memset(&ev, 0, sizeof(ev));
    ev.type = h->type;
    ev.version = VC_EVENT_VERSION;
    memcpy(ev.code, h->code, sizeof(ev.code));
    memcpy(ev.order_id, h->order_id, sizeof(ev.order_id));
    ev.customer_id = h->order.customer_id;
    ev.at_ms = h->now_ms;
    if (h->type == VC_EV_RELEASED)
        snprintf(ev.reason, sizeof(ev.reason), "CANCELLED");
    if (h->type == VC_EV_CONFIRMED && h->in.has_total &&
        (h->in.order_amount == h->order.order_amount || h->verdict == 0)) {
        ev.has_amounts = 1;
        ev.order_amount = h->in.order_amount;
        ev.discount_amount =
            h->in.order_amount == h->order.order_amount ? h->order.discount : h->price;
    }
    return vc_event_encode(&ev, h->event, sizeof(h->event), &len, err, errlen);
}

/* On the threadpool: the row, the event, the call. */
static int work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    direct_hold_t *h = arg;
    int64_t t0 = (int64_t)(uv_hrtime() / 1000);
    int rc;

    if ((rc = gw_direct_order(conn, h->code, h->order_id, &h->order, err, errlen)) != 0)
        return rc;
    if (!h->order.found) {
        memset(&h->out, 0, sizeof(h->out));
        h->out.answer = GW_DIRECT_NOT_FOUND;
        h->out.pg_us = (int64_t)(uv_hrtime() / 1000) - t0;
        return 0;
    }
    if ((rc = build_event(h, err, errlen)) != 0)
        return rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc;
    if (h->type == VC_EV_CONFIRMED)
        rc =
            gw_direct_confirm(conn, h->code, h->order_id, h->in.has_total, h->in.order_amount,
                              h->verdict == 0, h->price, h->now_ms, h->event, &h->out, err, errlen);
    else
        rc =
            gw_direct_cancel(conn, h->code, h->order_id, h->now_ms, h->event, &h->out, err, errlen);
    /* The whole job is the request's time in PostgreSQL: the read and the call. */
    h->out.pg_us = (int64_t)(uv_hrtime() / 1000) - t0;
    return rc;
}

/* A confirm's 200: with the figures when a total was given (flash mode's body). */
static void confirmed(direct_hold_t *h, int replayed)
{
    gw_figures_t fig = {
        .has_amount = 1, .order_amount = h->out.amount, .discount = h->out.discount};
    char body[512];
    size_t len;

    if (h->in.has_total)
        len = gw_body_confirmed(body, sizeof(body), h->order_id, h->code, &fig, replayed);
    else
        len = gw_body_status(body, sizeof(body), h->order_id, h->code, "CONFIRMED", replayed);
    gw_app_reply(h->req, 200, body, len);
}

static void released(direct_hold_t *h, int replayed)
{
    char body[512];
    size_t len = gw_body_status(body, sizeof(body), h->order_id, h->code, "RELEASED", replayed);

    gw_app_reply(h->req, 200, body, len);
}

static void answer_confirm(direct_hold_t *h)
{
    gw_figures_t fig = {
        .has_amount = 1, .order_amount = h->out.amount, .discount = h->out.discount};
    char detail[160];

    switch (h->out.answer) {
    case GW_DIRECT_CONFIRMED:
        confirmed(h, 0);
        return;
    case GW_DIRECT_RETRY:
        confirmed(h, 1);
        return;
    case GW_DIRECT_ALREADY_CONFIRMED:
        snprintf(detail, sizeof(detail), "the order was confirmed at orderAmount %lld",
                 (long long)h->out.amount);
        gw_holds_reply_refused(h->req, GW_E_CONFIRMED_OTHER, detail, "confirmed", &fig);
        return;
    case GW_DIRECT_ORDER_TOO_SMALL:
        /* Nothing changed: the hold and its quote stand, for a confirm with the right total. */
        gw_holds_reply_refused(h->req, VC_E_ORDER_TOO_SMALL, NULL, "quote", &fig);
        return;
    case GW_DIRECT_HOLD_EXPIRED:
        gw_app_reply_error(h->req, VC_E_HOLD_EXPIRED,
                           strcmp(h->out.status, "RESERVED") == 0
                               ? "the hold expired before the confirmation"
                               : "the reservation was released");
        return;
    default:
        fail(h, VC_ERR_PROTOCOL, "postgresql confirm: an answer of another call");
        return;
    }
}

static void answer_cancel(direct_hold_t *h)
{
    if (h->out.answer == GW_DIRECT_RELEASED)
        released(h, 0);
    else if (h->out.answer == GW_DIRECT_RETRY)
        released(h, 1); /* released before, by a cancel or an expiry: nothing changed */
    else
        fail(h, VC_ERR_PROTOCOL, "postgresql cancel: an answer of another call");
}

static void done(void *arg, int rc, const char *err)
{
    direct_hold_t *h = arg;
    char what[40];

    gw_metrics_direct(route(h), rc == 0 ? h->out.answer : GW_DIRECT_FAILED, h->out.pg_us);
    snprintf(what, sizeof(what), "postgresql %s", verb(h));
    if (rc != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", vc_log_code(h->code, 0, code)}, {"orderId", h->order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "dr_%s failed: %s", verb(h), err);
        /* It may have committed: the same request again is answered from the row. */
        fail(h, rc, what);
        return;
    }
    if (h->out.answer == GW_DIRECT_NOT_FOUND) {
        gw_holds_not_found(h->req, h->type, h->in.has_total);
        return;
    }
    if (h->out.answer == GW_DIRECT_NOT_DIRECT) {
        /* The cache said direct and the row says flash: read the rules again; retry. */
        gw_rules_changed(h->code);
        fail(h, VC_ERR_UNAVAILABLE, "the voucher's mode changed");
        return;
    }
    if (h->type == VC_EV_CONFIRMED)
        answer_confirm(h);
    else
        answer_cancel(h);
}

void gw_holds_direct(gw_app_t *app, gw_request_t *req, vc_event_type_t type, const char *code,
                     const char *order_id, const gw_confirm_req_t *in, const vc_voucher_t *v)
{
    direct_hold_t *h = gw_request_alloc(req, sizeof(*h));
    int rc;

    if (!h) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    memset(h, 0, sizeof(*h));
    h->app = app;
    h->req = req;
    h->type = type;
    snprintf(h->code, sizeof(h->code), "%s", code);
    snprintf(h->order_id, sizeof(h->order_id), "%s", order_id);
    h->in = *in;
    h->v = *v;
    h->now_ms = vc_time_now_ms();
    /* The final total priced without the clock: a hold is confirmable until its heldUntil. */
    if (type == VC_EV_CONFIRMED && in->has_total)
        h->verdict = vc_voucher_price(&h->v, in->order_amount, &h->price);
    if ((rc = gw_pg_run(app->loop, app->pg, work, done, h)) != 0) {
        gw_metrics_direct(route(h), GW_DIRECT_FAILED, 0);
        fail(h, rc, type == VC_EV_CONFIRMED ? "postgresql confirm" : "postgresql cancel");
    }
}
