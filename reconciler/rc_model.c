#include "rc_model.h"
#include "vc_error.h"
#include "vc_hash.h"
#include "vc_order_value.h"
#include "vc_voucher.h"

#include <stdlib.h>
#include <string.h>

/*
 * OrderIds are chosen by clients: keyed (vc_hash), so that nobody can pick
 * orderIds that share a probe sequence and make a pass quadratic.
 */
static uint64_t hash_str(const char *s)
{
    return vc_hash_str(s);
}

void rc_orders_init(rc_orders_t *m)
{
    memset(m, 0, sizeof(*m));
}

void rc_orders_free(rc_orders_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static rc_order_t *probe(rc_order_t *slots, size_t cap, const char *order_id)
{
    size_t i = (size_t)hash_str(order_id) & (cap - 1);
    while (slots[i].order_id[0] && strcmp(slots[i].order_id, order_id) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int grow(rc_orders_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    rc_order_t *slots = calloc(cap, sizeof(*slots));

    if (!slots)
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].order_id[0])
            *probe(slots, cap, m->slots[i].order_id) = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

rc_order_t *rc_orders_find(const rc_orders_t *m, const char *order_id)
{
    rc_order_t *o;
    if (!m->cap)
        return NULL;
    o = probe(m->slots, m->cap, order_id);
    return o->order_id[0] ? o : NULL;
}

rc_order_t *rc_orders_get(rc_orders_t *m, const char *order_id)
{
    rc_order_t *o;

    if (!*order_id || strlen(order_id) > VC_ORDER_ID_MAX)
        return NULL;
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return NULL;
    o = probe(m->slots, m->cap, order_id);
    if (!o->order_id[0]) {
        strcpy(o->order_id, order_id);
        m->len++;
    }
    return o;
}

rc_order_t *rc_orders_at(const rc_orders_t *m, size_t i)
{
    return i < m->cap && m->slots[i].order_id[0] ? &m->slots[i] : NULL;
}

int rc_order_parse(const char *value, size_t len, rc_order_t *o)
{
    vc_order_value_t v;
    int rc;

    if ((rc = vc_order_value_parse(value, len, &v)) != 0)
        return rc;
    o->customer_id = v.customer_id;
    o->discount = v.discount;
    o->held_until_ms = v.held_until_ms;
    o->redis_held_until_ms = v.held_until_ms;
    o->redis_state = v.state;
    return 0;
}

void rc_order_merge_redis(rc_order_t *o, const vc_order_value_t *v)
{
    o->redis_state = v->state;
    o->redis_held_until_ms = v->held_until_ms;
    if (!o->customer_id)
        o->customer_id = v->customer_id;
    if (!o->discount)
        o->discount = v->discount;
    if (!o->held_until_ms)
        o->held_until_ms = v->held_until_ms;
}

void rc_order_apply(rc_order_t *o, const vc_event_t *ev)
{
    o->in_flight = 1;
    o->pg_after = vc_rd_step(o->pg_after, ev->type).next;
}

static int pg_live(vc_rd_status_t s)
{
    return vc_rd_counts(s);
}

static int cmp_customer(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * How many customers hold a use in Redis's orders (H, C, X, E): each has a
 * field in the users hash while they do (release_finish leaves a 0). 0 when
 * out of memory: the check is skipped, nothing is repaired on a guess.
 */
static int64_t customers_holding(const rc_orders_t *orders)
{
    int64_t *ids = orders->len ? malloc(orders->len * sizeof(*ids)) : NULL, n = 0, distinct = 0;
    rc_order_t *o;

    if (!ids)
        return 0;
    for (size_t i = 0; i < orders->cap; i++)
        if ((o = rc_orders_at(orders, i)) && vc_state_taken(o->redis_state))
            ids[n++] = o->customer_id;
    qsort(ids, (size_t)n, sizeof(*ids), cmp_customer);
    for (int64_t i = 0; i < n; i++)
        distinct += i == 0 || ids[i] != ids[i - 1];
    free(ids);
    return distinct;
}

/* How many orders Redis's orders hash holds, whatever their state. */
static int64_t redis_orders(const rc_orders_t *orders)
{
    const rc_order_t *o;
    int64_t n = 0;

    for (size_t i = 0; i < orders->cap; i++)
        if ((o = rc_orders_at(orders, i)) && o->redis_state)
            n++;
    return n;
}

rc_verdict_t rc_model_judge(rc_orders_t *orders, rc_numbers_t *n, int64_t now_ms, int64_t grace_ms)
{
    rc_order_t *o;

    n->pg_live_after = n->redis_counted = n->releasing = n->unsent_fresh = n->stranded = 0;
    n->released_in_pg = n->missing_in_redis = n->releasing_not_live = n->pending_changes = 0;
    n->released_after = n->confirmed_unsent = n->confirmed_unknown = n->users_missing = 0;
    n->confirm_pending = n->confirm_lost = 0;
    n->uncounted = vc_uses_without_rows(n->used_count, n->live_rows);
    n->parked_held = n->discarding = n->orders_lost = n->released_unknown = 0;
    n->redis_taken = n->total_limit - n->redis_remaining;
    for (size_t i = 0; i < orders->cap; i++) {
        if (!(o = rc_orders_at(orders, i)))
            continue;
        if (pg_live(o->pg_after))
            n->pg_live_after++;
        if (o->pg_after != o->pg)
            n->pending_changes++;
        if (vc_state_taken(o->redis_state))
            n->redis_counted++;
        if (o->redis_state == VC_STATE_CANCEL_BEGUN || o->redis_state == VC_STATE_EXPIRY_BEGUN) {
            n->releasing++;
            if (!pg_live(o->pg_after))
                n->releasing_not_live++;
        } else if (o->redis_state == VC_STATE_HELD || o->redis_state == VC_STATE_CONFIRMED) {
            if (o->pg_after == VC_RD_RELEASED) {
                n->released_in_pg++;
            } else if (o->pg_after == VC_RD_NONE && o->parked) {
                n->parked_held++; /* waits for an operator, not for an event */
            } else if (o->pg_after == VC_RD_NONE && o->discarded) {
                n->discarding++;
            } else if (o->pg_after == VC_RD_NONE && o->redis_state == VC_STATE_HELD) {
                if (!o->first_unsent_ms)
                    o->first_unsent_ms = now_ms;
                if (now_ms - o->first_unsent_ms >= grace_ms)
                    n->stranded++;
                else
                    n->unsent_fresh++;
            } else if (o->pg_after == VC_RD_NONE) {
                /*
                 * Confirmed, and neither event downstream: both may be on
                 * their way. A confirm runs before heldUntil and publishes
                 * then, so past heldUntil and a grace they are not: the
                 * writer refused them, or they were lost. Paid: never released.
                 */
                if (now_ms < o->held_until_ms + grace_ms)
                    n->confirmed_unsent++;
                else
                    n->confirmed_unknown++;
            } else if (o->redis_state == VC_STATE_CONFIRMED && o->pg_after == VC_RD_RESERVED &&
                       !o->parked && !o->discarded) {
                /*
                 * Confirmed in Redis, only reserved downstream: the confirm's
                 * event is on its way until heldUntil and a grace have passed
                 * (a confirm runs before heldUntil and publishes then); after
                 * that it never comes. Both sides count the use, so the numbers
                 * agree; PostgreSQL holds a hold that ended as far as it knows,
                 * for an order neither paid nor given back there, until the
                 * reconciler publishes the confirm (rc_model_release()).
                 */
                if (now_ms < o->redis_held_until_ms + grace_ms)
                    n->confirm_pending++;
                else
                    n->confirm_lost++;
            }
        }
        /*
         * Nothing deletes an order once its release is downstream: Redis went
         * back to before it (a restart without its last writes, an older
         * copy), and a retry of the orderId would take a new use that the
         * writer ignores and the next pass releases behind the customer.
         */
        if (o->pg_after == VC_RD_RELEASED && !o->redis_state && n->redis_loaded)
            n->released_unknown++;
        if (pg_live(o->pg_after) && !vc_state_taken(o->redis_state)) {
            /*
             * Given back in Redis: by a release the snapshot may be too old to
             * show (a cancel since the tail was read), unless an earlier pass
             * saw it so too. Lost from Redis (no order): nothing gives an
             * order back by deleting it once Kafka has its event.
             */
            if (o->redis_state == VC_STATE_RELEASED && !o->revivable)
                n->released_after++;
            else if (n->redis_loaded)
                n->missing_in_redis++;
        }
    }
    n->accounted = n->redis_counted + n->missing_in_redis;
    if (n->redis_users >= 0) {
        int64_t customers = customers_holding(orders);
        n->users_missing = customers > n->redis_users ? customers - n->redis_users : 0;
        /*
         * No users hash beside orders, even if nobody holds a use now: the
         * hash was lost, and reserve.lua refuses every new order until a
         * rebuild (retake) writes it again.
         */
        if (n->redis_users == 0 && n->users_missing == 0 && redis_orders(orders) > 0)
            n->users_missing = 1;
    }
    n->orders_lost = rc_model_orders_lost(n, redis_orders(orders));
    n->bound = vc_remaining_bound(n->total_limit, n->uncounted, n->accounted);

    if (n->live_rows > n->used_count)
        return RC_DRIFTED; /* rows the counter misses: its CHECK guards fewer uses than are sold */
    if (!n->redis_loaded)
        return RC_NOT_LOADED;
    if (rc_model_redis_drift(n))
        return RC_DRIFTED;
    if (n->redis_taken > n->redis_counted + n->uncounted)
        return RC_UNDERSOLD;
    if (n->stranded > 0 || n->released_in_pg > 0 || n->confirmed_unknown > 0 || n->discarding > 0 ||
        n->confirm_lost > 0)
        return RC_UNDERSOLD;
    /* Events applied but not yet committed replay as no change: they do not count. */
    if (n->redis_counted == n->pg_live_after && n->pending_changes == 0 && n->releasing == 0 &&
        n->unsent_fresh == 0 && n->confirmed_unsent == 0 && n->released_after == 0 &&
        n->confirm_pending == 0)
        /*
         * Letters parked here hold no use (a malformed event, a confirm of a
         * counted row): reported in n->parked, but nothing disagrees.
         */
        return n->uncounted > 0 ? RC_USED_WITHOUT_ROWS : RC_CONSISTENT;
    /*
     * Every order PostgreSQL will count is taken in Redis or given back by a
     * release younger than the snapshot, and every other order Redis counts
     * is a release under way or an order whose events may still be coming:
     * the gap closes by itself.
     */
    if (n->redis_counted + n->released_after == n->pg_live_after + n->unsent_fresh +
                                                   n->confirmed_unsent + n->releasing_not_live +
                                                   n->parked_held)
        return n->parked_held > 0 ? RC_PARKED : RC_BEHIND;
    return RC_UNDERSOLD;
}

int rc_model_orders_lost(const rc_numbers_t *n, int64_t redis_orders)
{
    if (!n->redis_loaded || redis_orders > 0)
        return 0;
    /*
     * No orders hash beside users or amounts (written with every order, and
     * deleted by forget.lua with the last one): it was lost, and its
     * released orders with it. rc_plan_repairs() rebuilds it (rebuild.lua).
     */
    if (n->redis_users > 0 || n->redis_amounts > 0)
        return 1;
    /*
     * Users and amounts lost with it: the counter still tells. Every use
     * taken has its order in the hash until it is given back, so with no
     * orders the counter is the limit key less the uses it holds back for no
     * order (the outside key); below that, orders holding uses were lost.
     */
    return n->redis_limit >= 0 && n->redis_limit - n->redis_remaining > n->redis_outside;
}

int rc_model_redis_drift(const rc_numbers_t *n)
{
    /*
     * The counter and the orders were read at one moment: during a sale they
     * still agree (each script moves both), so these hold only for drift.
     */
    return n->redis_loaded &&
           (n->orders_lost || n->missing_in_redis > 0 || n->users_missing > 0 ||
            n->redis_remaining > n->bound ||
            /* the last: more orders hold uses than the limit has */
            n->redis_taken < n->redis_counted + n->uncounted);
}

int rc_model_quiet(const rc_numbers_t *n, int64_t due_holds, int64_t releasing)
{
    return n->redis_loaded && n->in_flight_events == 0 &&
           n->total_limit - n->redis_remaining == n->used_count && due_holds == 0 &&
           releasing == 0;
}

int64_t rc_model_excess_remaining(const rc_numbers_t *n)
{
    if (!n->redis_loaded || n->redis_remaining <= n->bound)
        return 0;
    return n->redis_remaining - n->bound;
}

const char *rc_verdict_name(rc_verdict_t v)
{
    switch (v) {
    case RC_CONSISTENT:
        return "consistent";
    case RC_NOT_LOADED:
        return "not loaded";
    case RC_BEHIND:
        return "behind";
    case RC_UNDERSOLD:
        return "undersold";
    case RC_DRIFTED:
        return "DRIFTED";
    case RC_USED_WITHOUT_ROWS:
        return "used-without-rows";
    case RC_PARKED:
        return "parked";
    case RC_VERDICT_COUNT:
        break;
    }
    return "?";
}

int rc_order_unsent(const rc_order_t *o)
{
    return (o->redis_state == VC_STATE_HELD || o->redis_state == VC_STATE_CONFIRMED) &&
           o->pg_after == VC_RD_NONE;
}

int rc_order_same_hold(const rc_order_t *a, const rc_order_t *b)
{
    return a->redis_state == b->redis_state && a->redis_held_until_ms == b->redis_held_until_ms;
}

rc_release_t rc_model_release(const rc_order_t *o, int64_t snapshot_ms, int64_t grace_ms)
{
    if (o->redis_state != VC_STATE_HELD && o->redis_state != VC_STATE_CONFIRMED)
        return RC_RELEASE_NONE;
    if (o->pg_after == VC_RD_RELEASED)
        return RC_RELEASE_CANCEL;
    if (o->pg_after == VC_RD_CONFIRMED)
        return o->redis_state == VC_STATE_HELD ? RC_RELEASE_TO_CONFIRMED : RC_RELEASE_NONE;
    /* A parked letter's use stays taken until an operator decides (issue 13). */
    if (o->parked)
        return RC_RELEASE_NONE;
    if (o->discarded && o->pg_after == VC_RD_NONE)
        return RC_RELEASE_DISCARD;
    if (o->redis_state == VC_STATE_CONFIRMED && o->pg_after == VC_RD_RESERVED) {
        /* The confirm's event is in the snapshot by now if it ever comes; never released. */
        if (!o->discarded && o->redis_held_until_ms <= snapshot_ms - grace_ms)
            return RC_RELEASE_CONFIRM_LOST;
        return RC_RELEASE_NONE;
    }
    if (o->redis_state == VC_STATE_HELD && o->redis_held_until_ms <= snapshot_ms - grace_ms)
        return RC_RELEASE_EXPIRE;
    if (rc_order_unsent(o) && o->first_unsent_ms && o->first_unsent_ms <= snapshot_ms - grace_ms)
        return RC_RELEASE_UNDELIVERED;
    return RC_RELEASE_NONE;
}

rc_verdict_t rc_model_judge_direct(int64_t used_count, int64_t live_rows, int64_t parked)
{
    if (used_count > live_rows)
        return RC_USED_WITHOUT_ROWS;
    if (used_count < live_rows)
        return RC_DRIFTED;
    return parked > 0 ? RC_PARKED : RC_CONSISTENT;
}
