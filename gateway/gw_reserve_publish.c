/*
 * A use is held for this request (taken now, or a known order's, replayed):
 * the waits before its event, VoucherReserved published, and the 201 once
 * Kafka has it. The waits, in order, each only when asked for:
 *
 * - GW_RESERVE_LEASES: reserve.lua said that another gateway's sold-out
 *   snapshot may still answer from memory without this order
 *   (proto/redis-keys.md, "Sold out without a round trip");
 * - GW_RESERVE_REPLICAS, then GW_RESERVE_CLAIM_REPLICAS on a cluster whose
 *   claim lives on another master: VOUCHER_REDIS_WAIT_REPLICAS replicas have
 *   the writes (proto/redis-keys.md, "Redis Cluster").
 *
 * Then GW_RESERVE_PUBLISH. Once the event is handed to Kafka the hold is
 * never given back here, whatever Kafka says (delivered_cb()).
 */
#include <stdlib.h>
#include <string.h>

#include "gw_reserve_int.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"

/* ---- a timer of the request's own ---- */

typedef struct {
    uv_timer_t timer;
    gw_reserve_t *x;
    void (*then)(void *x);
} reserve_timer_t;

static void reserve_timer_closed_cb(uv_handle_t *h)
{
    free(h->data);
}

static void reserve_timer_cb(uv_timer_t *t)
{
    reserve_timer_t *w = t->data;

    uv_close((uv_handle_t *)&w->timer, reserve_timer_closed_cb);
    w->then(w->x);
}

int gw_reserve_timer(gw_reserve_t *x, uint64_t ms, void (*then)(void *x))
{
    reserve_timer_t *w = malloc(sizeof(*w));

    if (!w)
        return -1;
    w->x = x;
    w->then = then;
    w->timer.data = w;
    uv_timer_init(x->app->loop, &w->timer);
    uv_timer_start(&w->timer, reserve_timer_cb, ms, 0);
    return 0;
}

/* ---- VoucherReserved ---- */

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
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_PUBLISH);
    if (rc == 0) {
        gw_reserve_created(x);
        return;
    }
    gw_reserve_fail(x, rc == VC_ERR_UNAVAILABLE ? VC_ERR_UNKNOWN_OUTCOME : rc,
                    "event delivery (hold kept)");
}

/* A retry's event is acknowledged: the 201 replayed may go out now. */
static void redelivered_cb(void *arg, int rc)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_PUBLISH);
    if (rc != 0) {
        /* The hold stays whatever Kafka did: the original event may be stored. */
        gw_reserve_fail(x, rc, "event delivery of the retried reservation (hold kept)");
        return;
    }
    gw_reserve_created(x);
}

void gw_reserve_event(const gw_reserve_t *x, int64_t at_ms, vc_event_t *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = VC_EV_RESERVED;
    ev->version = VC_EVENT_VERSION;
    memcpy(ev->code, x->code, sizeof(ev->code));
    memcpy(ev->order_id, x->in.order_id, sizeof(ev->order_id));
    ev->customer_id = x->in.customer_id;
    ev->discount_amount = x->discount;
    ev->order_amount = x->in.order_amount;
    ev->at_ms = at_ms;
    ev->held_until_ms = x->held_until_ms;
    ev->campaign_id = x->camp.id;
}

static void publish(gw_reserve_t *x, int64_t at_ms, gw_kafka_delivery_cb cb)
{
    vc_event_t ev;
    int rc;

    gw_reserve_go(x,
                  GW_RESERVE_FROM(GW_RESERVE_SCRIPT) | GW_RESERVE_FROM(GW_RESERVE_LEASES) |
                      GW_RESERVE_FROM(GW_RESERVE_REPLICAS) |
                      GW_RESERVE_FROM(GW_RESERVE_CLAIM_REPLICAS),
                  GW_RESERVE_PUBLISH);
    gw_reserve_event(x, at_ms, &ev);
    if ((rc = gw_app_publish(x->app, &ev, cb, x)) != 0) {
        char code[VC_LOG_CODE_MAX];
        vc_log_field_t f[] = {{"code", gw_reserve_log_code(x, code)}, {"orderId", x->in.order_id}};
        VC_LOG_F(VC_LOG_WARN, f, "publishing VoucherReserved failed: %s", vc_strerror(rc));
        /* As a failed delivery (delivered_cb()): the hold is kept. */
        gw_reserve_fail(x, rc,
                        cb == delivered_cb ? "publishing the reservation (hold kept)"
                                           : "publishing the retried reservation (hold kept)");
    }
}

/*
 * The waits are over: a new use's event, at the reservation's time; or a
 * known order's again, at the time it was reserved (heldUntil minus the hold
 * ttl), acknowledged before the 201 replayed.
 */
static void publish_now(gw_reserve_t *x)
{
    if (x->replayed) {
        publish(x, x->held_until_ms - x->app->cfg->hold_ttl_ms, redelivered_cb);
        return;
    }
    /* Dying here strands a hold that Kafka never heard of: the reconciler releases it. */
    VC_FAULT("reserve-before-publish");
    publish(x, x->now_ms, delivered_cb);
}

/* ---- the replicas (VOUCHER_REDIS_WAIT_REPLICAS) ---- */

static void waited_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;
    int64_t want = x->app->cfg->redis_wait_replicas;

    VC_ASSERT(x->step == GW_RESERVE_REPLICAS || x->step == GW_RESERVE_CLAIM_REPLICAS);
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
        if (x->step == GW_RESERVE_REPLICAS &&
            (x->claim == GW_CLAIM_NEW || x->claim == GW_CLAIM_OURS) &&
            !gw_redis_same_node(x->app->redis, x->keys[0], x->claim_key)) {
            int wrc;
            gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_REPLICAS), GW_RESERVE_CLAIM_REPLICAS);
            wrc = gw_redis_wait(x->app->redis, x->claim_key, want,
                                x->app->cfg->redis_wait_timeout_ms, waited_cb, x);
            if (wrc != 0)
                gw_reserve_fail(x, wrc, "redis WAIT for a replica of the orderId's claim");
            return;
        }
        publish_now(x);
        return;
    }
    /*
     * The use is taken on the master but not known to be on a replica: a
     * failover could forget it. No event yet: 503 with the outcome unknown,
     * the hold kept; a retry publishes it (replayed), else the reconciler
     * releases the stranded hold.
     */
    gw_reserve_fail(x, rc != 0 ? rc : VC_ERR_UNKNOWN_OUTCOME, "redis WAIT for a replica");
}

/*
 * The use must reach VOUCHER_REDIS_WAIT_REPLICAS replicas before its event
 * goes. For a known order too: the first request may have answered 503
 * because its WAIT timed out, and a failover now would forget the use this
 * 201 acknowledges; the replay's script wrote (its resent marker) on the
 * voucher's master after that use, so a WAIT on that master covers both.
 */
static void wait_replicas(gw_reserve_t *x)
{
    int rc;

    if (x->app->cfg->redis_wait_replicas <= 0) {
        publish_now(x);
        return;
    }
    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_SCRIPT) | GW_RESERVE_FROM(GW_RESERVE_LEASES),
                  GW_RESERVE_REPLICAS);
    rc = gw_redis_wait(x->app->redis, x->keys[0], x->app->cfg->redis_wait_replicas,
                       x->app->cfg->redis_wait_timeout_ms, waited_cb, x);
    if (rc != 0)
        gw_reserve_fail(x, rc, "redis WAIT for a replica");
}

/* ---- other gateways' sold-out leases (redis-keys.md, "Sold out without a round trip") ---- */

static void leases_over(void *arg)
{
    wait_replicas(arg);
}

/*
 * A 201 is on its way: when reserve.lua said that another gateway's sold-out
 * snapshot may still answer from memory (the use came back after it was
 * taken), the answer waits until its lease ran out, so that a retry there
 * finds no snapshot that lacks this order.
 */
void gw_reserve_publish_after(gw_reserve_t *x, const gw_redis_reply_t *reply)
{
    int64_t wait =
        reply->n >= 4 && reply->item[3].type == GW_REDIS_INT ? reply->item[3].integer : 0;

    if (wait <= 0) {
        wait_replicas(x);
        return;
    }
    /*
     * Another gateway's lease is its recheck plus the margin, whatever this
     * one's recheck is: waiting less would let its snapshot answer 409 to this
     * order's retry. Only a value no configuration can give is cut.
     */
    if (wait > GW_SOLDOUT_LEASE_MAX_MS)
        wait = GW_SOLDOUT_LEASE_MAX_MS;
    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_SCRIPT), GW_RESERVE_LEASES);
    if (gw_reserve_timer(x, (uint64_t)wait, leases_over) != 0)
        /* The use stays taken; a retry replays it once the leases ran out. */
        gw_reserve_fail(x, VC_ERR_NOMEM, "waiting for the sold-out leases (hold kept)");
}
