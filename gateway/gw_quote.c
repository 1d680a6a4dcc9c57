/*
 * POST /vouchers/{code}/quote: the discount a reservation would get now, or
 * the rejection it would get, from the cached rules and two read-only Redis
 * reads (the customer's uses and the remaining count, pipelined). Nothing
 * changes and nothing is published. A direct voucher's counts are
 * PostgreSQL's (gw_quote_direct.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_campaign_redeem.h"
#include "gw_guard.h"
#include "gw_metrics.h"
#include "gw_quote.h"
#include "gw_soldout.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    char code[VC_CODE_MAX + 1];
    char customer[24];
    gw_quote_req_t in;
    vc_voucher_t v;
    int64_t discount;
    int answers;       /* Redis replies still expected */
    int failed;        /* rc of a failed read, or 0 */
    int has_remaining; /* the counter exists */
    int64_t remaining, used;
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    gw_campaign_ref_t camp; /* a campaign's code (id > 0): its keys */
    int absent;             /* no voucher or campaign has the code: a found one's work, 404 */
} quote_t;

static void decide(quote_t *q)
{
    char body[128];
    size_t len;
    int64_t remaining = q->has_remaining ? q->remaining : q->v.total_limit - q->v.used_count;

    if (q->failed) {
        char detail[160];
        snprintf(detail, sizeof(detail), "redis read: %s", vc_strerror(q->failed));
        gw_app_reply_error(q->req, q->failed, detail);
        return;
    }
    /* The order of reserve.lua: the customer's limit, then the stock. */
    /* A campaign's code refused tells that it exists: a failed try (gw_guard.h). */
    if (q->used >= q->v.per_customer_limit) {
        if (q->camp.id)
            gw_guard_mark(q->req, 1);
        gw_app_reply_error(q->req, VC_E_ALREADY_USED,
                           q->camp.id ? GW_CAMPAIGN_LIMIT_DETAIL : NULL);
        return;
    }
    if (remaining <= 0) {
        /* A campaign's code taken: ALREADY_USED, as campaign_reserve.lua answers. */
        if (q->camp.id)
            gw_guard_mark(q->req, 1);
        gw_app_reply_error(q->req, q->camp.id ? VC_E_ALREADY_USED : VC_E_OUT_OF_STOCK,
                           q->camp.id ? GW_CAMPAIGN_TAKEN_DETAIL : NULL);
        return;
    }
    len = (size_t)snprintf(body, sizeof(body), "{\"discountAmount\":%lld}", (long long)q->discount);
    gw_app_reply(q->req, 200, body, len);
}

/* Parses an integer reply item (string or integer); nil reads as absent. */
static int reply_int(const gw_redis_reply_t *reply, int64_t *out)
{
    char buf[24];

    if (reply->n != 1 || reply->item[0].type == GW_REDIS_NIL)
        return 0;
    if (reply->item[0].type == GW_REDIS_INT) {
        *out = reply->item[0].integer;
        return 1;
    }
    if (reply->item[0].len == 0 || reply->item[0].len >= sizeof(buf))
        return -1;
    memcpy(buf, reply->item[0].str, reply->item[0].len);
    buf[reply->item[0].len] = '\0';
    *out = strtoll(buf, NULL, 10);
    return 1;
}

static void used_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    quote_t *q = arg;

    if (rc != 0)
        q->failed = rc;
    else if (reply_int(reply, &q->used) < 0)
        q->failed = VC_ERR_PROTOCOL;
    if (--q->answers == 0)
        decide(q);
}

static void remaining_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    quote_t *q = arg;
    int got = 0;

    if (rc != 0)
        q->failed = rc;
    else if ((got = reply_int(reply, &q->remaining)) < 0)
        q->failed = VC_ERR_PROTOCOL;
    else
        q->has_remaining = got;
    /* A campaign's code: HEXISTS taken code, so one use left when it is not taken. */
    if (q->camp.id && got > 0)
        q->remaining = 1 - q->remaining;
    if (--q->answers == 0)
        decide(q);
}

static void with_rules(quote_t *q)
{
    const char *used_argv[] = {"HGET", q->keys[VC_VOUCHER_KEY_USERS], q->customer};
    size_t used_len[3];
    const char *rem_argv[] = {"GET", q->keys[VC_VOUCHER_KEY_REMAINING]};
    size_t rem_len[] = {3, strlen(rem_argv[1])};
    const char *taken_argv[] = {"HEXISTS", q->camp.taken, q->camp.code};
    size_t taken_len[] = {7, strlen(q->camp.taken), strlen(q->camp.code)};
    int rc = vc_voucher_check(&q->v, vc_time_now_ms(), q->in.order_amount, &q->discount);

    if (q->camp.id)
        rc = gw_campaign_refusal(&q->camp, rc);
    if (q->absent)
        rc = VC_E_NOT_FOUND;
    if (rc != 0) {
        gw_app_reply_error(q->req, rc, NULL);
        return;
    }
    if (q->v.mode == VC_MODE_DIRECT && !q->camp.id) {
        gw_quote_direct(q->app, q->req, q->code, q->in.customer_id, q->discount, &q->v);
        return;
    }
    if (gw_guard_local(q->req)) {
        /* As a reservation (gw_reserve_rules.c): only a direct voucher goes on without Redis. */
        gw_app_reply_error(q->req, VC_ERR_UNAVAILABLE, "redis: guessing limits");
        return;
    }
    snprintf(q->customer, sizeof(q->customer), "%lld", (long long)q->in.customer_id);
    for (int i = 0; i < 3; i++)
        used_len[i] = strlen(used_argv[i]);
    if ((rc = gw_redis_command(q->app->redis, used_cb, q, 3, used_argv, used_len)) != 0) {
        gw_app_reply_error(q->req, rc, "redis read");
        return;
    }
    q->answers = 1;
    if (gw_soldout_is(q->code, vc_time_mono_ms())) {
        /* Sold out a moment ago: as a reservation would, answer from memory. */
        gw_metrics_soldout();
        q->has_remaining = 1;
        q->remaining = 0;
        return;
    }
    if (q->camp.id)
        rc = gw_redis_command(q->app->redis, remaining_cb, q, 3, taken_argv, taken_len);
    else
        rc = gw_redis_command(q->app->redis, remaining_cb, q, 2, rem_argv, rem_len);
    if (rc != 0)
        q->failed = rc; /* used_cb answers */
    else
        q->answers++;
}

/* The path's code is a campaign's (or not: then the answer of an unknown voucher). */
static void campaign_cb(void *arg, int rc)
{
    quote_t *q = arg;

    if (rc == VC_E_NOT_FOUND && q->camp.stand_in > 0) {
        /* As gw_reserve_rules.c: the refusal runs on the stand-in's rules, as for a campaign's code
         * out of its window, so that its 404 takes that one's time (issue 42, item 5). */
        q->absent = 1;
        q->camp.id = q->camp.stand_in;
    } else if (rc != 0) {
        gw_app_reply_error(q->req, rc, rc < 0 ? "reading the campaign code" : NULL);
        return;
    }
    gw_campaign_take(&q->camp, q->code, q->keys);
    with_rules(q);
}

static void rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    quote_t *q = arg;

    if (rc == VC_E_NOT_FOUND) {
        gw_campaign_find(q->app, q->code, q->in.customer_id, &q->camp, &q->v, campaign_cb, q);
        return;
    }
    if (rc != 0) {
        gw_app_reply_error(q->req, rc, rc < 0 ? "reading voucher rules" : NULL);
        return;
    }
    q->v = *v;
    with_rules(q);
}

/* The guessing limits let the request on: look the code up. */
static void lookup(void *arg)
{
    quote_t *q = arg;
    int rc = gw_rules_get(q->app->rules, q->code, 0, &q->v, rules_cb, q);

    if (rc == GW_RULES_PENDING)
        return;
    if (rc == 0)
        with_rules(q);
    else
        rules_cb(q, rc, NULL);
}

void gw_quote_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    char err[256];
    gw_quote_req_t in;
    quote_t *q;
    int rc;

    if ((rc = gw_quote_req_parse(req->body, req->body_len, &in, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    if (!(q = gw_request_alloc(req, sizeof(*q)))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    q->app = app;
    q->req = req;
    q->in = in;
    snprintf(q->code, sizeof(q->code), "%s", code);
    gw_app_keys(code, q->keys);
    /* A quote spends like a reservation: an unknown code costs the same try. */
    if (gw_guard_enter(app, req, in.customer_id, lookup, q) == GW_GUARD_GO)
        lookup(q);
}
