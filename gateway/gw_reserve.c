/*
 * POST /vouchers/{code}/reservations: rules from the cache (or PostgreSQL),
 * one use taken atomically by reserve.lua in Redis, VoucherReserved published
 * to Kafka, and 201 only once Kafka has the event. A use whose event was
 * definitely not persisted is given back before answering 503.
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
    char code[VC_CODE_MAX + 1];
    gw_reserve_req_t in;
    vc_voucher_t v;
    int64_t discount;
    int64_t now_ms, held_until_ms;
    int reloaded; /* the voucher was loaded into Redis once already */
    char keys[GW_KEY_COUNT][GW_KEY_MAX];
} reserve_t;

static void with_rules(reserve_t *x);

/* Logs an infrastructure failure once, with the ids, and answers 503. */
static void fail(reserve_t *x, int rc, const char *what)
{
    char detail[160];
    vc_log_field_t f[] = {{"code", x->code}, {"orderId", x->in.order_id}};

    VC_LOG_F(VC_LOG_WARN, f, "reservation failed: %s: %s", what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(x->req, rc, detail);
}

static void reply_created(reserve_t *x, int64_t discount, int64_t held_until_ms, int replayed)
{
    char body[512];
    size_t len = gw_body_reservation(body, sizeof(body), x->in.order_id, x->code, discount,
                                     held_until_ms, replayed);
    gw_app_reply(x->req, 201, body, len);
}

static void released_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;
    vc_log_field_t f[] = {{"code", x->code}, {"orderId", x->in.order_id}};

    if (rc != 0 || reply->n < 1 || reply->item[0].type != GW_REDIS_INT ||
        reply->item[0].integer != 1)
        VC_LOG_F(VC_LOG_WARN, f, "giving the use back failed (%s): the reconciler will",
                 rc ? vc_strerror(rc) : "order not held");
    else
        gw_rules_clear_soldout(x->app->rules, x->code);
    gw_app_reply_error(x->req, VC_ERR_UNAVAILABLE, "event log unavailable: use given back");
}

/* The event was definitely not persisted: forget the hold, then answer 503. */
static void give_back(reserve_t *x)
{
    const char *keys[GW_KEY_COUNT];
    const char *args[] = {x->in.order_id, "forget"};
    int rc;

    for (int i = 0; i < GW_KEY_COUNT; i++)
        keys[i] = x->keys[i];
    if ((rc = gw_redis_eval(x->app->redis, GW_SCRIPT_RELEASE, released_cb, x, GW_KEY_COUNT, keys, 2,
                            args)) != 0) {
        vc_log_field_t f[] = {{"code", x->code}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "giving the use back failed (%s): the reconciler will",
                 vc_strerror(rc));
        gw_app_reply_error(x->req, VC_ERR_UNAVAILABLE, "event log unavailable");
    }
}

static void delivered_cb(void *arg, int rc)
{
    reserve_t *x = arg;

    if (rc == 0) {
        reply_created(x, x->discount, x->held_until_ms, 0);
        return;
    }
    if (rc == VC_ERR_UNAVAILABLE) {
        give_back(x);
        return;
    }
    /* Possibly persisted: keep the hold; the writer or the reconciler settles it. */
    fail(x, rc, "event delivery (hold kept)");
}

static void publish(reserve_t *x)
{
    vc_event_t ev;
    int rc;

    memset(&ev, 0, sizeof(ev));
    ev.type = VC_EV_RESERVED;
    ev.version = VC_EVENT_VERSION;
    memcpy(ev.code, x->code, sizeof(ev.code));
    memcpy(ev.order_id, x->in.order_id, sizeof(ev.order_id));
    ev.customer_id = x->in.customer_id;
    ev.discount_amount = x->discount;
    ev.order_amount = x->in.order_amount;
    ev.at_ms = x->now_ms;
    ev.held_until_ms = x->held_until_ms;
    if ((rc = gw_app_publish(x->app, &ev, delivered_cb, x)) != 0) {
        vc_log_field_t f[] = {{"code", x->code}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "publishing VoucherReserved failed: %s", vc_strerror(rc));
        give_back(x);
    }
}

static void replay(reserve_t *x, const gw_redis_reply_t *reply)
{
    gw_order_value_t o;

    if (reply->n < 2 || reply->item[1].type != GW_REDIS_STR ||
        gw_order_value_parse(reply->item[1].str, reply->item[1].len, &o) != 0) {
        fail(x, VC_ERR_PROTOCOL, "stored order value unreadable");
        return;
    }
    if (o.state == 'R') {
        gw_app_reply_error(x->req, VC_E_HOLD_EXPIRED,
                           "this order's reservation was released; use a new orderId");
        return;
    }
    reply_created(x, o.discount, o.held_until_ms, 1);
}

static void set_loaded_cb(void *arg, int rc, const gw_redis_reply_t *reply);

static void fresh_rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    reserve_t *x = arg;
    char remaining[32];
    const char *argv[] = {"SET", x->keys[GW_KEY_REMAINING], remaining, "NX"};
    size_t argvlen[4];

    if (rc != 0) {
        if (rc > 0)
            gw_app_reply_error(x->req, rc, NULL);
        else
            fail(x, rc, "reading voucher rules");
        return;
    }
    x->v = *v;
    snprintf(remaining, sizeof(remaining), "%lld",
             (long long)(v->total_limit > v->used_count ? v->total_limit - v->used_count : 0));
    for (int i = 0; i < 4; i++)
        argvlen[i] = strlen(argv[i]);
    if ((rc = gw_redis_command(x->app->redis, set_loaded_cb, x, 4, argv, argvlen)) != 0)
        fail(x, rc, "loading the voucher into redis");
}

static void set_loaded_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;
    (void)reply; /* OK, or nil when another request loaded it first: both fine */

    if (rc != 0) {
        fail(x, rc, "loading the voucher into redis");
        return;
    }
    with_rules(x);
}

/* reserve.lua said the voucher is not in Redis: load it from fresh PostgreSQL data. */
static void load_into_redis(reserve_t *x)
{
    int rc;

    if (x->reloaded) {
        fail(x, VC_ERR_PROTOCOL, "voucher still not loaded in redis after loading it");
        return;
    }
    x->reloaded = 1;
    rc = gw_rules_get(x->app->rules, x->code, 1, &x->v, fresh_rules_cb, x);
    if (rc == GW_RULES_PENDING)
        return;
    if (rc == 0)
        fresh_rules_cb(x, 0, &x->v);
    else
        fresh_rules_cb(x, rc, NULL);
}

static void script_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    if (rc != 0) {
        fail(x, rc, "redis reserve");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    switch (reply->item[0].integer) {
    case 1:
        publish(x);
        return;
    case 0:
        replay(x, reply);
        return;
    case -1:
        gw_rules_mark_soldout(x->app->rules, x->code,
                              vc_time_mono_ms() + x->app->cfg->soldout_recheck_ms);
        gw_app_reply_error(x->req, VC_E_OUT_OF_STOCK, NULL);
        return;
    case -2:
        gw_app_reply_error(x->req, VC_E_ALREADY_USED, NULL);
        return;
    case -3:
        load_into_redis(x);
        return;
    case -4:
        gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT, NULL);
        return;
    default:
        fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
}

static void run_script(reserve_t *x)
{
    char customer[24], limit[24], discount[24], held[24];
    const char *keys[GW_KEY_COUNT];
    const char *args[] = {customer, limit, x->in.order_id, discount, held};
    int rc;

    for (int i = 0; i < GW_KEY_COUNT; i++)
        keys[i] = x->keys[i];
    snprintf(customer, sizeof(customer), "%lld", (long long)x->in.customer_id);
    snprintf(limit, sizeof(limit), "%lld", (long long)x->v.per_customer_limit);
    snprintf(discount, sizeof(discount), "%lld", (long long)x->discount);
    snprintf(held, sizeof(held), "%lld", (long long)x->held_until_ms);
    if ((rc = gw_redis_eval(x->app->redis, GW_SCRIPT_RESERVE, script_cb, x, GW_KEY_COUNT, keys, 5,
                            args)) != 0)
        fail(x, rc, "redis reserve");
}

/* Sold out a moment ago: only an order reserved before may still get its answer. */
static void soldout_probe_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    if (rc != 0) {
        fail(x, rc, "redis order lookup");
        return;
    }
    if (reply->n == 1 && reply->item[0].type == GW_REDIS_NIL) {
        gw_app_reply_error(x->req, VC_E_OUT_OF_STOCK, NULL);
        return;
    }
    run_script(x);
}

static void with_rules(reserve_t *x)
{
    int rc;

    x->now_ms = vc_time_now_ms();
    if ((rc = vc_voucher_check(&x->v, x->now_ms, x->in.order_amount, &x->discount)) != 0) {
        gw_app_reply_error(x->req, rc, NULL);
        return;
    }
    x->held_until_ms = x->now_ms + x->app->cfg->hold_ttl_ms;
    if (gw_rules_soldout(x->app->rules, x->code, vc_time_mono_ms())) {
        /*
         * The fast path skips the script, but not the one read that keeps
         * retries idempotent: an order reserved before still gets its 201.
         */
        const char *argv[] = {"HGET", x->keys[GW_KEY_ORDERS], x->in.order_id};
        size_t argvlen[] = {4, strlen(argv[1]), strlen(argv[2])};
        if ((rc = gw_redis_command(x->app->redis, soldout_probe_cb, x, 3, argv, argvlen)) != 0)
            fail(x, rc, "redis order lookup");
        return;
    }
    run_script(x);
}

static void rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    reserve_t *x = arg;

    if (rc > 0) {
        gw_app_reply_error(x->req, rc, NULL);
        return;
    }
    if (rc < 0) {
        fail(x, rc, "reading voucher rules");
        return;
    }
    x->v = *v;
    with_rules(x);
}

void gw_reserve_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    char err[256];
    gw_reserve_req_t in;
    reserve_t *x;
    int rc;

    if ((rc = gw_reserve_req_parse(req->body, req->body_len, &in, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    if (!(x = gw_request_alloc(req, sizeof(*x)))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    x->app = app;
    x->req = req;
    x->in = in;
    snprintf(x->code, sizeof(x->code), "%s", code);
    gw_app_keys(code, x->keys);
    rc = gw_rules_get(app->rules, code, 0, &x->v, rules_cb, x);
    if (rc == GW_RULES_PENDING)
        return;
    if (rc == 0)
        with_rules(x);
    else
        rules_cb(x, rc, NULL);
}
