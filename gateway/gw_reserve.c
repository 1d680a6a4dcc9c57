/*
 * POST /vouchers/{code}/reservations: rules from the cache (or PostgreSQL),
 * the orderId claimed for this code (voucher-order:{orderId}, SET NX GET,
 * pipelined just before the script), one use taken atomically by reserve.lua
 * in Redis, VoucherReserved published to Kafka, and 201 only once Kafka has
 * the event. Once the use is taken and its event handed to Kafka, a failed
 * delivery keeps the hold, whatever Kafka says (503, outcome unknown): a
 * retry of the orderId publishes again, else the reconciler settles it.
 *
 * A retry is recognised as one before any rule decides: the rules are judged
 * first (no I/O), but their verdict applies to new orders only.
 * - Eligible, and the voucher not marked sold out (the success path): the
 *   claim and reserve.lua "take", one round trip as before. The script answers
 *   an order it knows before it looks at stock or limits.
 * - Marked sold out (gw_soldout.h): nothing may be taken, so no claim. An
 *   orderId not in the snapshot taken with the mark gets OUT_OF_STOCK from
 *   memory; one in it runs reserve.lua "known".
 * - Refused by the rules: nothing may be taken, so no claim; HGET asks
 *   whether Redis knows the order. Unknown (every new order): the refusal,
 *   after one read. Known (a retry): reserve.lua "known", which answers it as
 *   the success path would and takes nothing.
 * - A 201 (new or replayed) waits while another gateway's sold-out snapshot
 *   may still lack the order (proto/redis-keys.md, "Sold out without a round
 *   trip").
 *
 * A known order (reserve.lua status 0) publishes VoucherReserved again, from
 * the stored order (discount, heldUntil; reservedAt is heldUntil minus the
 * hold ttl) and the orderAmount, and answers 201 replayed only after Kafka
 * acknowledged it: a retry after a lost event repairs it, and the writer
 * applies a duplicate once. A retry with another orderAmount than the one
 * stored (voucher:{CODE}:amounts) is refused with 409 ORDER_CONFLICT, like a
 * retry from another customer.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_campaign_redeem.h"
#include "vc_claim.h"
#include "gw_guard.h"
#include "gw_metrics.h"
#include "vc_num.h"
#include "gw_soldout.h"
#include "gw_store.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_model.h"
#include "vc_order_value.h"
#include "vc_time.h"

/* What SET voucher-order:{orderId} code NX GET said. */
enum {
    CLAIM_PENDING = 0,
    CLAIM_NEW,    /* this request claimed the orderId for the code */
    CLAIM_OURS,   /* already claimed for this code (a retry, or a request racing it) */
    CLAIM_OTHER,  /* claimed for another code: ORDER_CONFLICT */
    CLAIM_FAILED, /* the command failed */
};

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    char code[VC_CODE_MAX + 1];
    gw_reserve_req_t in;
    vc_voucher_t v;
    int64_t discount;
    int64_t now_ms, held_until_ms;
    int refusal; /* a new order's answer when it may not take a use (rules, sold out); 0 may */
    int script_after_claim; /* Redis Cluster: the script goes once the claim has answered */
    int reloaded;   /* the first load was claimed (or found claimed) by this request */
    int load_waits; /* script runs left while another request's first load lands */
    int claim;
    int script_unsent; /* the script could not be sent after the claim: answer 503 in claim_cb */
    int claim_waited;  /* WAIT sent to the claim's master too (a cluster: another master) */
    void (*after_wait)(void *x); /* what the replicas' WAIT leads to: a publish, new or again */
    int64_t load_remaining, load_total;
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    char claim_key[VC_CLAIM_KEY_MAX];
    char claim_value[VC_CLAIM_VALUE_MAX]; /* CODE:TOKEN, this request's own */
    gw_campaign_ref_t camp; /* a campaign's code (id > 0): its keys and scripts */
    int absent; /* no voucher or campaign has the code: 404 after a found code's work */
    int voucher; /* a voucher has the code: logged as it is (vc_log_code()) */
    int snapshot;                  /* 1 asking reserve.lua for the sold-out snapshot, 2 asked */
    gw_soldout_ticket_t ticket;    /* while snapshot is 1 */
} reserve_t;

static void with_rules(reserve_t *x);
static void run_script(reserve_t *x);

/* The code as this request's log lines show it: a campaign's, or a guess, as a keyed hash. */
static const char *log_code(const reserve_t *x, char out[VC_LOG_CODE_MAX])
{
    return vc_log_code(x->code, !x->voucher, out);
}

/* Logs an infrastructure failure once, with the ids, and answers 503. */
static void fail(reserve_t *x, int rc, const char *what)
{
    char detail[160], code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", log_code(x, code)}, {"orderId", x->in.order_id}};

    VC_LOG_F(VC_LOG_WARN, f, "reservation failed: %s: %s", what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(x->req, rc, detail);
}

/*
 * When the voucher's keys and its orderIds' claims expire (Unix ms): its
 * endsAt plus VOUCHER_REDIS_RETENTION (proto/redis-keys.md, "Retention").
 */
static void retention_at(const reserve_t *x, char buf[VC_I64_TEXT])
{
    vc_i64_text(buf, x->v.ends_at_ms + x->app->cfg->redis_retention_ms);
}

/*
 * Runs claim.lua on the orderId's claim: op "release" or "keep". Nobody waits
 * for the answer: a release that finds the claim taken over leaves it, which
 * is the point, and a keep that finds another code cannot be helped here.
 */
static void claim_script(reserve_t *x, const char *op)
{
    char expire_at[VC_I64_TEXT];
    const char *keys[] = {x->claim_key};
    const char *args[] = {op, x->claim_value, x->code, expire_at};

    retention_at(x, expire_at);
    (void)gw_redis_eval(x->app->redis, GW_SCRIPT_CLAIM, gw_app_ignore_cb, NULL, 1, keys, 4, args);
}

/*
 * Gives up this request's claim of the orderId, if it made one: nothing was
 * taken. Only while the claim still holds this request's token: a request of
 * the same orderId that took a use since made the claim its own ("keep"), and
 * deleting it would let the orderId be reserved with another voucher.
 */
static void unclaim(reserve_t *x)
{
    if (x->claim != CLAIM_NEW)
        return;
    x->claim = CLAIM_PENDING;
    /* A test holds the release here while another request of the orderId takes a use. */
    VC_PAUSE("reserve-before-unclaim");
    claim_script(x, "release");
}

/* A rejection: release the claim, then answer. */
/*
 * What a -2 says (campaign_reserve.lua's reason; a voucher's -2 is always the
 * customer's limit): the default message names the per-customer limit, which
 * was wrong for a campaign's code another customer took.
 */
static const char *already_used_detail(const reserve_t *x, const gw_redis_reply_t *reply)
{
    if (!x->camp.id)
        return NULL;
    if (reply->n >= 2 && reply->item[1].type == GW_REDIS_STR && reply->item[1].len == 5 &&
        memcmp(reply->item[1].str, "taken", 5) == 0)
        return GW_CAMPAIGN_TAKEN_DETAIL;
    return GW_CAMPAIGN_LIMIT_DETAIL;
}

static void reject(reserve_t *x, int rc, const char *detail)
{
    unclaim(x);
    gw_app_reply_error(x->req, rc, detail);
}

static void reply_created(reserve_t *x, int64_t discount, int64_t held_until_ms, int replayed)
{
    char body[512];
    size_t len = gw_body_reservation(body, sizeof(body), x->in.order_id, x->code, discount,
                                     held_until_ms, replayed);
    gw_app_reply(x->req, 201, body, len);
}

/*
 * What forget.lua did, logged: returns its status, 1 forgotten, 0 or -1 not
 * held, -2 published again by a retry (kept); 0 when the call failed.
 */
static int64_t forgotten(reserve_t *x, int rc, const gw_redis_reply_t *reply)
{
    char code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", log_code(x, code)}, {"orderId", x->in.order_id}};
    int64_t status = 0;

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

/*
 * Forgets the hold this request took (forget.lua); answers nothing. Only for a
 * use taken under a claim that is not this request's (script_cb()): no event
 * was published for it. A hold whose VoucherReserved went to Kafka is never
 * forgotten, see delivered_cb().
 */
static int forget(reserve_t *x, gw_redis_cb cb)
{
    const char *keys[VC_FORGET_NKEYS];
    const char *args[] = {x->in.order_id};

    vc_script_keys(vc_forget_keys, VC_FORGET_NKEYS, x->keys[0], GW_KEY_MAX, keys);
    if (x->camp.id)
        return gw_campaign_eval(x->app, &x->camp, GW_SCRIPT_FORGET, cb, x, VC_FORGET_NKEYS, keys, 1,
                                args);
    return gw_redis_eval(x->app->redis, GW_SCRIPT_FORGET, cb, x, VC_FORGET_NKEYS, keys, 1, args);
}

/* The claim could not be made this request's: the use it took is forgotten, then 503. */
static void claim_failed_forgotten_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    (void)forgotten(x, rc, reply);
    fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
}

/*
 * Kafka's report on the reservation's event. Not stored (NOT_PERSISTED,
 * VC_ERR_UNAVAILABLE) is answered as possibly stored: the hold is kept, 503
 * with the outcome unknown. Since the script ran, the order could be
 * confirmed and its VoucherConfirmed acknowledged, and Redis may have lost
 * that confirm's write since (everysec, a failover, a restore): forgetting a
 * hold Redis shows as H would then offer a use that PostgreSQL counts for a
 * paid order. A retry of the orderId finds the hold and publishes again
 * (201 replayed); else the reconciler's undelivered release gives the use
 * back after its grace, or repairs the order to C when its snapshot has the
 * confirm (proto/redis-keys.md, "The reconciler's releases").
 */
static void delivered_cb(void *arg, int rc)
{
    reserve_t *x = arg;

    if (rc == 0) {
        reply_created(x, x->discount, x->held_until_ms, 0);
        return;
    }
    fail(x, rc == VC_ERR_UNAVAILABLE ? VC_ERR_UNKNOWN_OUTCOME : rc, "event delivery (hold kept)");
}

/* A retry's event is acknowledged: the 201 replayed may go out now. */
static void redelivered_cb(void *arg, int rc)
{
    reserve_t *x = arg;

    if (rc != 0) {
        /* The hold stays whatever Kafka did: the original event may be stored. */
        fail(x, rc, "event delivery of the retried reservation (hold kept)");
        return;
    }
    reply_created(x, x->discount, x->held_until_ms, 1);
}

static void publish(reserve_t *x, int64_t at_ms, gw_kafka_delivery_cb cb)
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
    ev.at_ms = at_ms;
    ev.held_until_ms = x->held_until_ms;
    ev.campaign_id = x->camp.id;
    if ((rc = gw_app_publish(x->app, &ev, cb, x)) != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", log_code(x, code)}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "publishing VoucherReserved failed: %s", vc_strerror(rc));
        /* As a failed delivery (delivered_cb()): the hold is kept. */
        fail(x, rc,
             cb == delivered_cb ? "publishing the reservation (hold kept)"
                                : "publishing the retried reservation (hold kept)");
    }
}

static void replay_publish(void *arg)
{
    reserve_t *x = arg;
    publish(x, x->held_until_ms - x->app->cfg->hold_ttl_ms, redelivered_cb);
}

static void after_leases(reserve_t *x, const gw_redis_reply_t *reply, void (*next)(void *));
static void wait_then(reserve_t *x, void (*then)(void *x));

/*
 * A retry's use must be on the replicas too before its event goes again: the
 * first request may have answered 503 because its WAIT timed out, and a
 * failover now would forget the use this 201 acknowledges. The replay's
 * script wrote (its resent marker) on the voucher's master after that use,
 * so a WAIT on that master covers both.
 */
static void replay_waited(void *arg)
{
    wait_then(arg, replay_publish);
}

/* The same orderId again: publish its event again and answer 201 replayed after the ack. */
static void replay(reserve_t *x, const gw_redis_reply_t *reply)
{
    vc_order_value_t o;

    if (reply->n < 2 || reply->item[1].type != GW_REDIS_STR ||
        vc_order_value_parse(reply->item[1].str, reply->item[1].len, &o) != 0) {
        fail(x, VC_ERR_PROTOCOL, "stored order value unreadable");
        return;
    }
    if (o.state != VC_STATE_HELD && o.state != VC_STATE_CONFIRMED) {
        gw_app_reply_error(x->req, VC_E_HOLD_EXPIRED,
                           "this order's reservation was released; use a new orderId");
        return;
    }
    x->discount = o.discount;
    x->held_until_ms = o.held_until_ms;
    after_leases(x, reply, replay_waited);
}

/* The same orderId with another orderAmount than the one that took the use. */
static void other_amount(reserve_t *x, const gw_redis_reply_t *reply)
{
    char detail[200];

    if (reply->n < 3 || reply->item[2].type != GW_REDIS_STR || reply->item[2].len > 20) {
        fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    snprintf(detail, sizeof(detail),
             "this orderId was reserved with orderAmount %.*s: a retry must repeat the original "
             "request; use a new orderId for another amount",
             (int)reply->item[2].len, reply->item[2].str);
    gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT, detail);
}

/* A new order that may not take a use: the rules' rejection, or sold out. */
static void refuse_new(reserve_t *x)
{
    if (x->refusal == VC_E_OUT_OF_STOCK)
        gw_metrics_soldout();
    gw_app_reply_error(x->req, x->refusal, NULL);
}

/* ---- other gateways' sold-out leases (proto/redis-keys.md, "Sold out without a round trip") ---- */

/*
 * Runs then(x) after ms, on a timer of its own (not in the request's arena:
 * libuv frees handles only in close_cb). Returns 0, or -1 when memory runs out.
 */
typedef struct {
    uv_timer_t timer;
    reserve_t *x;
    void (*then)(void *x);
} reserve_wait_t;

static void reserve_wait_closed_cb(uv_handle_t *h)
{
    free(h->data);
}

static void reserve_wait_cb(uv_timer_t *t)
{
    reserve_wait_t *w = t->data;

    uv_close((uv_handle_t *)&w->timer, reserve_wait_closed_cb);
    w->then(w->x);
}

static int reserve_wait(reserve_t *x, uint64_t ms, void (*then)(void *x))
{
    reserve_wait_t *w = malloc(sizeof(*w));

    if (!w)
        return -1;
    w->x = x;
    w->then = then;
    w->timer.data = w;
    uv_timer_init(x->app->loop, &w->timer);
    uv_timer_start(&w->timer, reserve_wait_cb, ms, 0);
    return 0;
}

/*
 * A 201 is on its way (next does what is left): when reserve.lua said that
 * another gateway's sold-out snapshot may still answer from memory (the use
 * came back after it was taken), the answer waits until its lease ran out,
 * so that a retry there finds no snapshot that lacks this order.
 */
static void after_leases(reserve_t *x, const gw_redis_reply_t *reply, void (*next)(void *))
{
    int64_t wait = reply->n >= 4 && reply->item[3].type == GW_REDIS_INT ? reply->item[3].integer : 0;

    if (wait <= 0) {
        next(x);
        return;
    }
    /*
     * Another gateway's lease is its recheck plus the margin, whatever this
     * one's recheck is: waiting less would let its snapshot answer 409 to this
     * order's retry. Only a value no configuration can give is cut.
     */
    if (wait > GW_SOLDOUT_LEASE_MAX_MS)
        wait = GW_SOLDOUT_LEASE_MAX_MS;
    if (reserve_wait(x, (uint64_t)wait, next) != 0)
        /* The use stays taken; a retry replays it once the leases ran out. */
        fail(x, VC_ERR_NOMEM, "waiting for the sold-out leases (hold kept)");
}

/* ---- the first load of a voucher into Redis ---- */

#define GW_LOAD_WAITS 10 /* script runs while another request's first load lands */
#define GW_LOAD_WAIT_MS 50

static void load_again(void *x)
{
    run_script(x);
}

/*
 * The first load was claimed by a request that has not set the counter yet,
 * or Redis lost the voucher. Look again a few times before saying which.
 */
static void wait_for_load(reserve_t *x)
{
    if (x->load_waits-- <= 0 || reserve_wait(x, GW_LOAD_WAIT_MS, load_again) != 0) {
        /*
         * Loaded before and gone from Redis: total_limit - used_count would
         * miss the events in flight and oversell. The reconciler restores it.
         */
        unclaim(x);
        gw_app_reply_error(x->req, VC_ERR_UNAVAILABLE, "voucher is being restored");
    }
}

static int claim_load_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    reserve_t *x = arg;
    return gw_store_claim_load(conn, x->code, &x->load_remaining, &x->load_total, err, errlen);
}

static void set_loaded_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;
    (void)reply; /* OK, or nil when another request loaded it first: both fine */

    if (rc != 0) {
        /* redis_loaded_at is set now: the reconciler loads it (from PostgreSQL and Kafka). */
        fail(x, rc, "loading the voucher into redis");
        return;
    }
    run_script(x);
}

static void claim_load_done(void *arg, int rc, const char *err)
{
    reserve_t *x = arg;
    char remaining[32], total[24], expire_at[24];
    const char *keys[] = {x->keys[VC_VOUCHER_KEY_REMAINING], x->keys[VC_VOUCHER_KEY_LIMIT]};
    const char *args[] = {remaining, total, expire_at};

    if (rc == VC_E_REPLAYED) {
        x->load_waits = GW_LOAD_WAITS;
        wait_for_load(x);
        return;
    }
    if (rc != 0) {
        unclaim(x);
        if (rc > 0) {
            gw_app_reply_error(x->req, rc, NULL);
        } else {
            char code[VC_LOG_CODE_MAX];
            vc_log_field_t f[] = {{"code", log_code(x, code)}, {"orderId", x->in.order_id}};
            VC_LOG_F(VC_LOG_WARN, f, "claiming the first load failed: %s", err);
            fail(x, rc, "claiming the voucher's first load");
        }
        return;
    }
    snprintf(remaining, sizeof(remaining), "%lld",
             (long long)(x->load_remaining > 0 ? x->load_remaining : 0));
    snprintf(total, sizeof(total), "%lld", (long long)x->load_total);
    retention_at(x, expire_at);
    /* The counter and its limit key together (load.lua, proto/redis-keys.md "The limit key"). */
    if ((rc = gw_redis_eval(x->app->redis, GW_SCRIPT_LOAD, set_loaded_cb, x, 2, keys, 3, args)) !=
        0)
        fail(x, rc, "loading the voucher into redis");
}

/* reserve.lua said the voucher is not in Redis: load it, once in its life. */
static void load_into_redis(reserve_t *x)
{
    int rc;

    if (x->reloaded) {
        wait_for_load(x); /* a racing first load, or lost again */
        return;
    }
    x->reloaded = 1;
    if ((rc = gw_pg_run(x->app->loop, x->app->pg, claim_load_work, claim_load_done, x)) != 0) {
        unclaim(x);
        fail(x, rc, "claiming the voucher's first load");
    }
}

/* ---- the script and the claim ---- */

static void waited_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;
    int64_t want = x->app->cfg->redis_wait_replicas;

    if (rc == 0 && reply->n == 1 && reply->item[0].type == GW_REDIS_INT &&
        reply->item[0].integer >= want) {
        /*
         * On a Redis Cluster the orderId's claim (written by this request:
         * SET NX, or claim.lua "keep") may live on another master, which the
         * WAIT above did not cover: a failover there before its replica had
         * the claim would let the orderId be claimed for another code and
         * take a second use, which PostgreSQL's unique order_id refuses after
         * its 201 (proto/redis-keys.md, "Redis Cluster"). Wait there too.
         */
        if (!x->claim_waited && (x->claim == CLAIM_NEW || x->claim == CLAIM_OURS) &&
            !gw_redis_same_node(x->app->redis, x->keys[0], x->claim_key)) {
            int wrc;
            x->claim_waited = 1;
            wrc = gw_redis_wait(x->app->redis, x->claim_key, want,
                                x->app->cfg->redis_wait_timeout_ms, waited_cb, x);
            if (wrc != 0)
                fail(x, wrc, "redis WAIT for a replica of the orderId's claim");
            return;
        }
        x->after_wait(x);
        return;
    }
    /*
     * The use is taken on the master but not known to be on a replica: a
     * failover could forget it. No event yet: 503 with the outcome unknown,
     * the hold kept; a retry publishes it (replayed), else the reconciler
     * releases the stranded hold.
     */
    fail(x, rc != 0 ? rc : VC_ERR_UNKNOWN_OUTCOME, "redis WAIT for a replica");
}

/* VOUCHER_REDIS_WAIT_REPLICAS: the use must reach that many replicas before its event goes. */
static void wait_replicas(reserve_t *x)
{
    int rc = gw_redis_wait(x->app->redis, x->keys[0], x->app->cfg->redis_wait_replicas,
                           x->app->cfg->redis_wait_timeout_ms, waited_cb, x);

    if (rc != 0)
        fail(x, rc, "redis WAIT for a replica");
}

/* Runs then(x) once VOUCHER_REDIS_WAIT_REPLICAS replicas have this request's writes. */
static void wait_then(reserve_t *x, void (*then)(void *x))
{
    if (x->app->cfg->redis_wait_replicas > 0) {
        x->after_wait = then;
        wait_replicas(x);
        return;
    }
    then(x);
}

static void publish_taken(void *arg)
{
    reserve_t *x = arg;

    /* Dying here strands a hold that Kafka never heard of: the reconciler releases it. */
    VC_FAULT("reserve-before-publish");
    publish(x, x->now_ms, delivered_cb);
}

/* A use is taken for this request: publish (after the replicas have it, if asked). */
static void taken(void *arg)
{
    wait_then(arg, publish_taken);
}

/*
 * Brings the snapshot this request asked for back to gw_soldout (what the
 * script said; reply NULL when it failed).
 */
static void snapshot_answer(reserve_t *x, const gw_redis_reply_t *reply)
{
    const char *ids = NULL;
    size_t len = 0;

    if (x->snapshot != 1)
        return;
    x->snapshot = 2;
    if (reply && reply->n >= 2 && reply->item[0].type == GW_REDIS_INT &&
        reply->item[0].integer == VC_RESERVE_OUT_OF_STOCK && reply->item[1].type == GW_REDIS_STR) {
        ids = reply->item[1].str;
        len = reply->item[1].len;
    }
    (void)gw_soldout_answer(x->code, &x->ticket, x->app->cfg->soldout_recheck_ms, ids, len);
}

static void conflict_forgotten_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    (void)forgotten(x, rc, reply);
    gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT,
                       "this orderId was reserved with another voucher code");
}

static void script_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;
    int64_t status;

    snapshot_answer(x, rc == 0 ? reply : NULL);
    if (rc != 0) {
        /* The script may have run: keep the claim, a retry finds the order. */
        fail(x, rc, "redis reserve");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    status = reply->item[0].integer;
    if (x->refusal != 0) {
        /* reserve.lua "known": nothing was claimed, nothing can have been taken. */
        if (status == VC_RESERVE_SAME_ORDER)
            replay(x, reply);
        else if (status == VC_RESERVE_OTHER_CUSTOMER)
            gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT,
                               "this orderId was reserved by another customer");
        else if (status == VC_RESERVE_OTHER_AMOUNT)
            other_amount(x, reply);
        else if (status == VC_RESERVE_NEW_ORDER)
            refuse_new(x); /* forgotten since the probe */
        else
            fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
    if (x->claim == CLAIM_OTHER || x->claim == CLAIM_FAILED || x->claim == CLAIM_PENDING) {
        int conflict = x->claim == CLAIM_OTHER;
        /* A use taken for an order that may not have it: give it back before answering. */
        if (status == VC_RESERVE_TAKEN &&
            forget(x, conflict ? conflict_forgotten_cb : claim_failed_forgotten_cb) == 0)
            return;
        if (conflict)
            gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT,
                               "this orderId was reserved with another voucher code");
        else
            fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
        return;
    }
    switch (status) {
    case VC_RESERVE_TAKEN:
        /* A use was there to take: any sold-out mark of this process is stale. */
        gw_soldout_clear(x->code);
        if (x->claim == CLAIM_OURS) {
            /*
             * The claim is another request's, which may be rejected and
             * release it: make it ours, so that its release finds another
             * token and leaves it (claim.lua).
             */
            claim_script(x, "keep");
        }
        after_leases(x, reply, taken);
        return;
    case VC_RESERVE_SAME_ORDER:
        replay(x, reply);
        return;
    case VC_RESERVE_OUT_OF_STOCK:
        /*
         * Sold out: once per process at a time, the script runs again for
         * this request to take the snapshot the next new orders are answered
         * from (it may take a use, if one came back meanwhile).
         */
        if (x->snapshot == 0 && x->app->cfg->soldout_recheck_ms > 0 && !x->camp.id &&
            gw_soldout_ask(x->code, vc_time_mono_ms(), &x->ticket)) {
            x->snapshot = 1;
            run_script(x);
            return;
        }
        reject(x, VC_E_OUT_OF_STOCK, NULL);
        return;
    case VC_RESERVE_ALREADY_USED:
        /*
         * A campaign's code taken by someone else tells that the code exists:
         * a failed try for the guessing limits, as an unknown code's 404 is.
         */
        if (x->camp.id)
            gw_guard_mark(x->req, 1);
        reject(x, VC_E_ALREADY_USED, already_used_detail(x, reply));
        return;
    case VC_RESERVE_NOT_LOADED:
        load_into_redis(x);
        return;
    case VC_RESERVE_OTHER_CUSTOMER:
        /* The orderId is this voucher's: the claim, if this request made it, is right. */
        gw_app_reply_error(x->req, VC_E_ORDER_CONFLICT,
                           "this orderId was reserved by another customer");
        return;
    case VC_RESERVE_OTHER_AMOUNT:
        other_amount(x, reply);
        return;
    case VC_RESERVE_COUNTS_LOST:
        /* Nothing was taken: the claim goes, and the retry after the rebuild takes a use. */
        unclaim(x);
        fail(x, VC_ERR_UNAVAILABLE, "the customers' counts in Redis were lost; the reconciler rebuilds them");
        return;
    default:
        fail(x, VC_ERR_PROTOCOL, "redis reserve");
        return;
    }
}

static void claim_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    if (rc != 0 || reply->n != 1)
        x->claim = CLAIM_FAILED;
    else if (reply->item[0].type == GW_REDIS_NIL)
        x->claim = CLAIM_NEW;
    else if (reply->item[0].type == GW_REDIS_STR &&
             vc_claim_is_code(reply->item[0].str, reply->item[0].len, x->code))
        x->claim = CLAIM_OURS;
    else if (reply->item[0].type == GW_REDIS_STR)
        x->claim = CLAIM_OTHER;
    else
        x->claim = CLAIM_FAILED;
    if (x->script_unsent) {
        unclaim(x);
        fail(x, VC_ERR_UNAVAILABLE, "redis reserve");
    } else if (x->script_after_claim) {
        /* Nothing taken yet: a claim whose outcome is unknown ends here (proto/redis-keys.md). */
        if (x->claim == CLAIM_FAILED)
            fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
        else
            run_script(x);
    }
}

/*
 * Sends reserve.lua for this request, "take" when it passed the rules and
 * "known" when it did not; returns 0 or the error of sending it.
 */
static int send_script(reserve_t *x)
{
    char customer[VC_I64_TEXT], limit[VC_I64_TEXT], discount[VC_I64_TEXT], held[VC_I64_TEXT],
        now[VC_I64_TEXT], amount[VC_I64_TEXT], snapshot[40];
    const char *keys[VC_RESERVE_NKEYS];
    const char *args[] = {customer, limit, x->in.order_id,
                          discount, held,  now,
                          amount,   x->refusal ? "known" : x->snapshot == 1 ? snapshot : "take",
                          gw_soldout_token()};

    /* All seven, the sold-out leases last (a campaign's reservation takes its own). */
    vc_script_keys(vc_reserve_keys, VC_RESERVE_NKEYS, x->keys[0], GW_KEY_MAX, keys);
    /* "take", and on -1 the snapshot with its lease (reserve.lua ARGV[8]); rare, off the success path. */
    if (x->snapshot == 1)
        snprintf(snapshot, sizeof(snapshot), "snapshot:%lld",
                 (long long)(x->app->cfg->soldout_recheck_ms + GW_SOLDOUT_LEASE_MARGIN_MS));
    vc_i64_text(customer, x->in.customer_id);
    vc_i64_text(limit, x->v.per_customer_limit);
    vc_i64_text(discount, x->discount);
    vc_i64_text(held, x->held_until_ms);
    vc_i64_text(now, x->now_ms);
    vc_i64_text(amount, x->in.order_amount);
    if (x->camp.id)
        return gw_campaign_reserve_eval(x->app, &x->camp, x->keys, args,
                                        x->v.ends_at_ms + x->app->cfg->redis_retention_ms,
                                        script_cb, x);
    return gw_redis_eval(x->app->redis, GW_SCRIPT_RESERVE, script_cb, x, VC_RESERVE_NKEYS, keys, 9,
                         args);
}

static void run_script(reserve_t *x)
{
    int rc;

    if ((rc = send_script(x)) != 0) {
        snapshot_answer(x, NULL);
        fail(x, rc, "redis reserve");
    }
}

/* A token part unique to this process (random), and one to each claim in it. */
static uv_once_t claim_once = UV_ONCE_INIT;
static uint64_t claim_process;
static atomic_uint_fast64_t claim_seq;

static void claim_process_init(void)
{
    if (uv_random(NULL, NULL, &claim_process, sizeof(claim_process), 0, NULL) != 0)
        claim_process = ((uint64_t)uv_os_getpid() << 32) ^ (uint64_t)vc_time_now_ms();
}

/*
 * Claims the orderId and runs the script right behind it, on the same
 * connection. On a Redis Cluster the claim's slot is not the voucher's: two
 * connections answer in no set order, so the script waits for the claim's
 * answer (one round trip more; proto/redis-keys.md, "Redis Cluster").
 */
static void claim_and_run(reserve_t *x)
{
    char expire_at[VC_I64_TEXT];
    const char *argv[] = {"SET", x->claim_key, x->claim_value, "NX", "GET", "PXAT", expire_at};
    size_t argvlen[7];
    int rc;

    uv_once(&claim_once, claim_process_init);
    vc_claim_value(x->claim_value, x->code, claim_process,
                   atomic_fetch_add_explicit(&claim_seq, 1, memory_order_relaxed));
    retention_at(x, expire_at);
    for (int i = 0; i < 7; i++)
        argvlen[i] = strlen(argv[i]);

    x->script_after_claim = !gw_redis_ordered(x->app->redis);
    if ((rc = gw_redis_command(x->app->redis, claim_cb, x, 7, argv, argvlen)) != 0) {
        fail(x, rc, "redis reserve");
        return;
    }
    if (!x->script_after_claim && send_script(x) != 0)
        x->script_unsent = 1; /* claim_cb answers, once the claim's outcome is known */
}

/* The request may not take a use: only an order Redis knows gets another answer. */
static void probe_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    reserve_t *x = arg;

    if (rc != 0) {
        /* Whether this is a retry of a reservation cannot be told: retry later. */
        fail(x, rc, "redis order lookup");
        return;
    }
    if (x->absent || (reply->n == 1 && reply->item[0].type == GW_REDIS_NIL)) {
        refuse_new(x); /* a stand-in's orders are not the absent code's: not read */
        return;
    }
    run_script(x); /* "known": replays, or ORDER_CONFLICT; never takes */
}

static void with_rules(reserve_t *x)
{
    const char *argv[] = {"HGET", x->keys[VC_VOUCHER_KEY_ORDERS], x->in.order_id};
    size_t argvlen[3];
    int rc, sold = GW_SOLDOUT_NO;

    x->now_ms = vc_time_now_ms();
    x->refusal = vc_voucher_check(&x->v, x->now_ms, x->in.order_amount, &x->discount);
    if (x->camp.id)
        x->refusal = gw_campaign_refusal(&x->camp, x->refusal);
    if (x->absent)
        x->refusal = VC_E_NOT_FOUND;
    if (x->refusal == 0 && !x->camp.id)
        sold = gw_soldout_order(x->code, x->in.order_id, vc_time_mono_ms());
    if (sold == GW_SOLDOUT_NEW) {
        /* Not an order Redis knew when the voucher sold out: no round trip, no key. */
        x->refusal = VC_E_OUT_OF_STOCK;
        refuse_new(x);
        return;
    }
    /* Named here, once the answer needs Redis (a campaign's came with its code). */
    if (!x->camp.id)
        gw_app_keys(x->code, x->keys); /* the sold-out leases too, :soldout */
    vc_claim_key(x->in.order_id, x->claim_key);
    if (sold == GW_SOLDOUT_KNOWN) {
        /* A retry (most likely): reserve.lua "known" answers it, takes nothing. */
        x->refusal = VC_E_OUT_OF_STOCK;
        run_script(x);
        return;
    }
    if (x->refusal == 0) {
        x->held_until_ms = x->now_ms + x->app->cfg->hold_ttl_ms;
        claim_and_run(x);
        return;
    }
    /*
     * The verdict stands for a new order only. Most such requests are new: one
     * read (cheaper than the script) tells, and only a known order runs
     * reserve.lua, to be answered from what Redis stores.
     */
    for (int i = 0; i < 3; i++)
        argvlen[i] = strlen(argv[i]);
    if ((rc = gw_redis_command(x->app->redis, probe_cb, x, 3, argv, argvlen)) != 0)
        fail(x, rc, "redis order lookup");
}

/* The path's code is a campaign's (or not: then the answer of an unknown voucher). */
static void campaign_cb(void *arg, int rc)
{
    reserve_t *x = arg;

    if (rc < 0) {
        fail(x, rc, "reading the campaign code");
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
        gw_app_reply_error(x->req, rc, NULL);
        return;
    }
    if (x->camp.id)
        gw_campaign_take(&x->camp, x->code, x->keys);
    with_rules(x);
}

static void rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    reserve_t *x = arg;

    if (rc == VC_E_NOT_FOUND) {
        gw_campaign_find(x->app, x->code, x->in.customer_id, &x->camp, &x->v, campaign_cb, x);
        return;
    }
    if (rc > 0) {
        gw_app_reply_error(x->req, rc, NULL);
        return;
    }
    if (rc < 0) {
        fail(x, rc, "reading voucher rules");
        return;
    }
    x->v = *v;
    x->voucher = 1;
    with_rules(x);
}

/* The guessing limits let the request on: look the code up. */
static void lookup(void *arg)
{
    reserve_t *x = arg;
    int rc = gw_rules_get(x->app->rules, x->code, 0, &x->v, rules_cb, x);

    if (rc == GW_RULES_PENDING)
        return;
    x->voucher = rc == 0;
    if (rc == 0)
        with_rules(x);
    else
        rules_cb(x, rc, NULL);
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
    memcpy(x->code, code, strnlen(code, VC_CODE_MAX)); /* x is zeroed: the code stays terminated */
    /* Before any lookup: an empty bucket gets 429 and learns nothing of the code. */
    if (gw_guard_enter(app, req, in.customer_id, lookup, x) == GW_GUARD_GO)
        lookup(x);
}
