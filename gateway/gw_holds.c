/*
 * What happens to a hold after the reservation:
 * POST   /vouchers/{code}/reservations/{orderId}/confirm  (confirm.lua, VoucherConfirmed)
 * DELETE /vouchers/{code}/reservations/{orderId}          (VoucherReleased CANCELLED; a held
 *                                                          or a confirmed use)
 *
 * A confirm changes Redis first (H -> C), then publishes; confirming again
 * publishes again (the writer applies it once), so a retry after a 503
 * repairs a lost event.
 *
 * A cancel has two steps (proto/redis-keys.md): release_begin.lua (H|C -> X:
 * no longer confirmable, the use still taken), VoucherReleased published, and
 * only after Kafka's acknowledgement release_finish.lua (X -> R: the use is
 * back). If the publish fails the order stays X, counted in Redis as in
 * PostgreSQL; a retry of the DELETE (status 2: already begun) publishes again
 * and finishes.
 */
#include <stdio.h>
#include <string.h>

#include "gw_app.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    vc_event_type_t type; /* VC_EV_CONFIRMED or VC_EV_RELEASED */
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
    char keys[GW_KEY_COUNT][GW_KEY_MAX];
    int replayed;
} hold_t;

static void finish_release(hold_t *h);

static const char *verb(const hold_t *h)
{
    return h->type == VC_EV_CONFIRMED ? "confirm" : "cancel";
}

static void fail(hold_t *h, int rc, const char *what)
{
    char detail[160];
    vc_log_field_t f[] = {{"code", h->code}, {"orderId", h->order_id}};

    VC_LOG_F(VC_LOG_WARN, f, "%s failed: %s: %s", verb(h), what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(h->req, rc, detail);
}

static void delivered_cb(void *arg, int rc)
{
    hold_t *h = arg;
    char body[512];
    size_t len;

    if (rc != 0) {
        /* Redis already changed (C, or X: the use still taken); asking again publishes again. */
        fail(h, rc, "event delivery");
        return;
    }
    if (h->type == VC_EV_RELEASED) {
        finish_release(h);
        return;
    }
    len = gw_body_status(body, sizeof(body), h->order_id, h->code,
                         h->type == VC_EV_CONFIRMED ? "CONFIRMED" : "RELEASED", h->replayed);
    gw_app_reply(h->req, 200, body, len);
}

static void publish(hold_t *h, const gw_order_value_t *o)
{
    vc_event_t ev;
    int rc;

    memset(&ev, 0, sizeof(ev));
    ev.type = h->type;
    ev.version = VC_EVENT_VERSION;
    memcpy(ev.code, h->code, sizeof(ev.code));
    memcpy(ev.order_id, h->order_id, sizeof(ev.order_id));
    ev.customer_id = o->customer_id;
    ev.at_ms = vc_time_now_ms();
    if (h->type == VC_EV_RELEASED)
        snprintf(ev.reason, sizeof(ev.reason), "CANCELLED");
    if ((rc = gw_app_publish(h->app, &ev, delivered_cb, h)) != 0)
        fail(h, rc, "publishing the event");
}

static void reply_released(hold_t *h)
{
    char body[512];
    size_t len = gw_body_status(body, sizeof(body), h->order_id, h->code, "RELEASED", h->replayed);
    gw_app_reply(h->req, 200, body, len);
}

static void finished_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    hold_t *h = arg;
    int64_t status;

    if (rc != 0) {
        /* The event is stored; the order stays X until a retry or the reconciler finishes. */
        fail(h, rc, "redis release finish");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(h, VC_ERR_PROTOCOL, "redis release finish");
        return;
    }
    status = reply->item[0].integer;
    if (status == 1) {
        /* A use is back: every worker may offer it again. */
        gw_rules_clear_soldout(h->code);
    } else if (status == 0) {
        h->replayed = 1; /* a racing request finished it first */
    } else {
        fail(h, VC_ERR_PROTOCOL, "redis release finish: order not releasing");
        return;
    }
    reply_released(h);
}

/* VoucherReleased is acknowledged: X -> R, the use goes back. */
static void finish_release(hold_t *h)
{
    const char *keys[] = {h->keys[GW_KEY_REMAINING], h->keys[GW_KEY_USERS], h->keys[GW_KEY_ORDERS],
                          h->keys[GW_KEY_RELEASING]};
    const char *args[] = {h->order_id};
    int rc;

    if ((rc = gw_redis_eval(h->app->redis, GW_SCRIPT_RELEASE_FINISH, finished_cb, h, 4, keys, 1,
                            args)) != 0)
        fail(h, rc, "redis release finish");
}

static void script_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    hold_t *h = arg;
    gw_order_value_t o;
    int64_t status;

    if (rc != 0) {
        fail(h, rc, "redis");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(h, VC_ERR_PROTOCOL, "redis");
        return;
    }
    status = reply->item[0].integer;
    if (status == -1) {
        gw_app_reply_error(h->req, VC_E_NOT_FOUND, "no such reservation");
        return;
    }
    if (reply->n < 2 || reply->item[1].type != GW_REDIS_STR ||
        gw_order_value_parse(reply->item[1].str, reply->item[1].len, &o) != 0) {
        fail(h, VC_ERR_PROTOCOL, "stored order value unreadable");
        return;
    }
    if (h->type == VC_EV_CONFIRMED) {
        if (status == -2) {
            gw_app_reply_error(h->req, VC_E_HOLD_EXPIRED,
                               o.state == 'H' ? "the hold expired before the confirmation"
                                              : "the reservation was released");
            return;
        }
        h->replayed = status == 0;
        publish(h, &o);
        return;
    }
    switch (status) {
    case 0: /* already R: its event was acknowledged before the use came back */
        h->replayed = 1;
        reply_released(h);
        return;
    case 1: /* begun now */
    case 2: /* begun before (a retry after a failed publish): publish again and finish */
        publish(h, &o);
        return;
    default:
        fail(h, VC_ERR_PROTOCOL, "redis release begin");
        return;
    }
}

static void start(gw_app_t *app, gw_request_t *req, vc_event_type_t type, const char *code,
                  const char *order_id)
{
    char now[24];
    const char *keys[3], *args[3];
    hold_t *h = gw_request_alloc(req, sizeof(*h));
    int rc;

    if (!h) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    h->app = app;
    h->req = req;
    h->type = type;
    snprintf(h->code, sizeof(h->code), "%s", code);
    snprintf(h->order_id, sizeof(h->order_id), "%s", order_id);
    gw_app_keys(code, h->keys);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    keys[0] = h->keys[GW_KEY_ORDERS];
    keys[1] = h->keys[GW_KEY_HOLDS];
    args[0] = h->order_id;
    if (type == VC_EV_CONFIRMED) {
        /* confirm.lua marks a confirm of a confirmed order in resent (it publishes again). */
        keys[2] = h->keys[GW_KEY_RESENT];
        args[1] = now;
        rc = gw_redis_eval(app->redis, GW_SCRIPT_CONFIRM, script_cb, h, 3, keys, 2, args);
    } else {
        keys[2] = h->keys[GW_KEY_RELEASING];
        args[1] = "cancel";
        args[2] = now;
        rc = gw_redis_eval(app->redis, GW_SCRIPT_RELEASE_BEGIN, script_cb, h, 3, keys, 3, args);
    }
    if (rc != 0)
        fail(h, rc, "redis");
}

void gw_confirm_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id)
{
    start(app, req, VC_EV_CONFIRMED, code, order_id);
}

void gw_cancel_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id)
{
    start(app, req, VC_EV_RELEASED, code, order_id);
}
