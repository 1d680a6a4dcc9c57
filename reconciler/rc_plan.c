#include "rc_plan.h"
#include "rc_grow.h"
#include "vc_error.h"
#include "vc_model.h"
#include "vc_voucher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_memory_entry_free(rc_memory_entry_t *e)
{
    rc_orders_free(&e->seen);
    rc_orders_free(&e->released_seen);
}

void rc_memory_free(rc_memory_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->len; i++)
        rc_memory_entry_free(&m->entries[i]);
    free(m->entries);
    free(m);
}

int rc_vouchers_alloc(rc_vouchers_t *vs, size_t n)
{
    memset(vs, 0, sizeof(*vs));
    if (n && !(vs->v = calloc(n, sizeof(*vs->v))))
        return VC_ERR_NOMEM;
    vs->len = n;
    for (size_t i = 0; i < n; i++)
        rc_orders_init(&vs->v[i].orders);
    return 0;
}

void rc_vouchers_free(rc_vouchers_t *vs)
{
    for (size_t i = 0; i < vs->len; i++) {
        rc_orders_free(&vs->v[i].orders);
        free(vs->v[i].events);
        free(vs->v[i].newest);
        free(vs->v[i].due);
    }
    free(vs->v);
    vs->v = NULL;
    vs->len = 0;
    free(vs->campaign_events);
    vs->campaign_events = NULL;
    vs->ncampaign_events = vs->campaign_cap = 0;
}

rc_voucher_t *rc_vouchers_find(rc_vouchers_t *vs, const char *code)
{
    size_t lo = 0, hi = vs->len;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(vs->v[mid].code, code);
        if (cmp == 0)
            return &vs->v[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void rc_vouchers_add_event(rc_vouchers_t *vs, const vc_event_t *ev)
{
    rc_voucher_t *v;

    if (ev->campaign_id > 0) {
        /* A campaign's: judged by rc_campaign_pass(), never as a voucher's of the same code. */
        if (rc_grow((void **)&vs->campaign_events, &vs->campaign_cap, vs->ncampaign_events,
                    sizeof(*vs->campaign_events), 16) != 0)
            vs->nomem = 1;
        else
            vs->campaign_events[vs->ncampaign_events++] = *ev;
        return;
    }
    if (!(v = rc_vouchers_find(vs, ev->code)))
        return;
    if (rc_grow((void **)&v->events, &v->cap, v->nevents, sizeof(*v->events), 16) != 0) {
        vs->nomem = 1;
        return;
    }
    v->events[v->nevents++] = *ev;
    v->n.in_flight_events++;
}

int rc_memory_align(rc_memory_t *m, rc_vouchers_t *vs)
{
    rc_memory_entry_t *entries = vs->len ? calloc(vs->len, sizeof(*entries)) : NULL;
    size_t j = 0;

    if (vs->len && !entries)
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < vs->len; i++) {
        rc_voucher_t *v = &vs->v[i];
        int cmp = 1;

        while (j < m->len && (cmp = strcmp(m->entries[j].code, v->code)) < 0)
            rc_memory_entry_free(&m->entries[j++]);
        if (j < m->len && cmp == 0)
            entries[i] = m->entries[j++];
        else
            snprintf(entries[i].code, sizeof(entries[i].code), "%s", v->code);
        v->mem = &entries[i];
    }
    for (; j < m->len; j++)
        rc_memory_entry_free(&m->entries[j]);
    free(m->entries);
    m->entries = entries;
    m->len = vs->len;
    return 0;
}

int rc_plan_replay(rc_voucher_t *v)
{
    for (size_t i = 0; i < v->nevents; i++) {
        const vc_event_t *ev = &v->events[i];
        rc_order_t *o = rc_orders_get(&v->orders, ev->order_id);

        if (!o)
            return VC_ERR_NOMEM;
        if (!o->customer_id)
            o->customer_id = ev->customer_id;
        if (ev->type == VC_EV_RESERVED) {
            if (!o->discount)
                o->discount = ev->discount_amount;
            if (!o->held_until_ms)
                o->held_until_ms = ev->held_until_ms;
        }
        rc_order_apply(o, ev);
    }
    return 0;
}

/*
 * Carries "first seen unsent" from the last pass into this one's orders, for
 * the same hold only: an orderId forgotten and taken again is a new hold,
 * first seen now (an old time would release it within seconds). Orders
 * unsent and not remembered are first seen now.
 */
static void remember_before(rc_voucher_t *v, int64_t now_ms)
{
    rc_memory_entry_t *e = v->mem;
    rc_order_t *seen, *o;

    for (size_t i = 0; i < e->seen.cap; i++)
        if ((seen = rc_orders_at(&e->seen, i)) &&
            (o = rc_orders_find(&v->orders, seen->order_id)) && rc_order_unsent(o) &&
            rc_order_same_hold(o, seen))
            o->first_unsent_ms = seen->first_unsent_ms;
    for (size_t i = 0; i < v->orders.cap; i++)
        if ((o = rc_orders_at(&v->orders, i)) && rc_order_unsent(o) && !o->first_unsent_ms)
            o->first_unsent_ms = now_ms;
}

/* Keeps the orders still unsent, with their hold, for the next pass; the rest is forgotten. */
static void remember_after(rc_voucher_t *v)
{
    rc_memory_entry_t *e = v->mem;
    rc_order_t *o, *seen;

    rc_orders_free(&e->seen);
    for (size_t i = 0; i < v->orders.cap; i++) {
        if (!(o = rc_orders_at(&v->orders, i)) || !o->first_unsent_ms || !rc_order_unsent(o))
            continue;
        if ((seen = rc_orders_get(&e->seen, o->order_id))) {
            seen->first_unsent_ms = o->first_unsent_ms;
            seen->redis_state = o->redis_state;
            seen->redis_held_until_ms = o->redis_held_until_ms;
        }
    }
}


/* Marks the orders Redis holds R now that the last full read saw R and live too. */
static void released_before(rc_voucher_t *v)
{
    rc_order_t *seen, *o;

    for (size_t i = 0; i < v->mem->released_seen.cap; i++)
        if ((seen = rc_orders_at(&v->mem->released_seen, i)) &&
            seen->redis_state == VC_STATE_RELEASED &&
            (o = rc_orders_find(&v->orders, seen->order_id)) && o->redis_state == VC_STATE_RELEASED)
            o->revivable = 1;
}

/* Remembers the orders Redis holds R and the snapshot counts, for the next full read. */
static int released_after(rc_voucher_t *v)
{
    rc_order_t *o, *seen;

    rc_orders_free(&v->mem->released_seen);
    for (size_t i = 0; i < v->orders.cap; i++) {
        if (!(o = rc_orders_at(&v->orders, i)) || o->redis_state != VC_STATE_RELEASED ||
            !vc_rd_counts(o->pg_after))
            continue;
        if (!(seen = rc_orders_get(&v->mem->released_seen, o->order_id)))
            return VC_ERR_NOMEM;
        seen->redis_state = VC_STATE_RELEASED;
    }
    return 0;
}

int rc_plan_judge_full(rc_voucher_t *v, int64_t now_ms, int64_t mono_ms, int64_t grace_ms)
{
    int rc;

    remember_before(v, now_ms);
    released_before(v);
    v->verdict = rc_model_judge(&v->orders, &v->n, now_ms, grace_ms);
    remember_after(v);
    if ((rc = released_after(v)) != 0)
        return rc;
    v->mem->uncounted = v->n.uncounted;
    v->mem->last_full_ms = mono_ms;
    return 0;
}

void rc_plan_judge_numbers(rc_voucher_t *v)
{
    v->n.uncounted = v->mem->uncounted;
    v->n.live_rows = v->n.pg_live_after = v->n.used_count - v->n.uncounted;
    v->n.redis_taken = v->n.redis_loaded ? v->n.total_limit - v->n.redis_remaining : 0;
    v->n.redis_counted = v->n.redis_loaded ? v->n.redis_taken - v->n.uncounted : 0;
    v->n.bound = vc_remaining_bound(v->n.total_limit, v->n.uncounted, v->n.live_rows);
    v->verdict = !v->n.redis_loaded      ? RC_NOT_LOADED
                 : v->mem->uncounted > 0 ? RC_USED_WITHOUT_ROWS
                                         : RC_CONSISTENT;
}

/*
 * Whether Redis holds o (an order an event in flight names) as its row after
 * the events explains; a confirm Redis ran whose event may still come (before
 * heldUntil and the grace) counts in *confirm_pending.
 */
static int explained(const rc_order_t *o, int64_t now_ms, int64_t grace_ms,
                     int64_t *confirm_pending)
{
    /* An operator decides a dead letter's order: only a full read plans for it. */
    if (o->parked || o->discarded)
        return 0;
    switch (o->pg_after) {
    case VC_RD_RESERVED:
        if (o->redis_state == VC_STATE_HELD)
            return 1;
        if (o->redis_state != VC_STATE_CONFIRMED || now_ms >= o->redis_held_until_ms + grace_ms)
            return 0;
        (*confirm_pending)++;
        return 1;
    case VC_RD_CONFIRMED:
        return o->redis_state == VC_STATE_CONFIRMED;
    case VC_RD_RELEASED:
        return o->redis_state == VC_STATE_RELEASED;
    default:
        return 0; /* events that leave no row: a full read says what Redis holds for them */
    }
}

int rc_plan_judge_targeted(rc_voucher_t *v, int64_t now_ms, int64_t grace_ms)
{
    int64_t delta = 0, pending = 0, confirm_pending = 0, fresh = 0, need, taken;
    int64_t uncounted = v->mem->uncounted;
    rc_order_t *o, *seen;
    size_t i, last = 0;

    if (!v->n.redis_loaded)
        return 0;
    for (i = 0; i < v->orders.cap; i++) {
        if (!(o = rc_orders_at(&v->orders, i)) || !o->in_flight)
            continue;
        if (!explained(o, now_ms, grace_ms, &confirm_pending))
            return 0;
        delta += vc_rd_counts(o->pg_after) - vc_rd_counts(o->pg);
        pending += o->pg_after != o->pg;
    }
    /* The uses Redis took that neither PostgreSQL nor the events in flight count. */
    taken = v->n.total_limit - v->n.redis_remaining;
    need = taken - v->n.used_count - delta - v->due_unsent;
    if (need < 0)
        return 0; /* Redis gave back a use PostgreSQL will count: a full read says which */
    /*
     * The newest holds explain them, if anything does: a hold taken since
     * the tail was read is newer than every hold whose event it read (the
     * same hold time); an older one unknown downstream is one the full read
     * must see, and stops the walk.
     */
    for (i = 0; i < v->nnewest && fresh < need; i++) {
        if (!(o = rc_orders_find(&v->orders, v->newest[i])))
            return 0;
        if (o->in_flight || o->due)
            continue; /* its use is explained with the events, or with the wave */
        if (o->pg != VC_RD_NONE || o->parked || o->discarded || o->redis_state != VC_STATE_HELD)
            return 0;
        seen = rc_orders_find(&v->mem->seen, o->order_id);
        o->first_unsent_ms = seen && seen->first_unsent_ms && rc_order_same_hold(o, seen)
                                 ? seen->first_unsent_ms
                                 : now_ms;
        if (now_ms - o->first_unsent_ms >= grace_ms)
            return 0; /* stranded: a full read releases it */
        fresh++;
        last = i + 1;
    }
    if (fresh < need)
        return 0;
    /* Settled: the fresh holds are remembered as a full read remembers them (remember_after). */
    for (i = 0; i < last; i++) {
        o = rc_orders_find(&v->orders, v->newest[i]);
        if (o->in_flight || o->due)
            continue;
        if (!(seen = rc_orders_get(&v->mem->seen, o->order_id)))
            return 0;
        seen->first_unsent_ms = o->first_unsent_ms;
        seen->redis_state = o->redis_state;
        seen->redis_held_until_ms = o->redis_held_until_ms;
    }
    v->n.uncounted = uncounted;
    v->n.live_rows = v->n.used_count - uncounted;
    v->n.pg_live_after = v->n.live_rows + delta;
    v->n.pending_changes = pending;
    v->n.redis_taken = taken;
    v->n.redis_counted = taken - uncounted;
    v->n.unsent_fresh = fresh;
    v->n.confirm_pending = confirm_pending;
    v->n.bound = vc_remaining_bound(v->n.total_limit, uncounted, v->n.redis_counted);
    if (fresh == 0 && pending == 0 && confirm_pending == 0)
        v->verdict = uncounted > 0 ? RC_USED_WITHOUT_ROWS : RC_CONSISTENT;
    else
        v->verdict = RC_BEHIND;
    return 1;
}

void rc_plan_free(rc_plan_t *p)
{
    free(p->items);
    memset(p, 0, sizeof(*p));
}

static int add(rc_plan_t *p, rc_action_kind_t kind, rc_order_t *o, const char *why,
               const char *reason)
{
    if (rc_grow((void **)&p->items, &p->cap, p->len, sizeof(*p->items), 16) != 0)
        return VC_ERR_NOMEM;
    p->items[p->len++] = (rc_action_t){kind, o, why, reason};
    return 0;
}

/*
 * What each decision of rc_model_release() runs: release_begin.lua's why and
 * the reason its VoucherReleased carries, the repair to confirmed, or the
 * publish of a lost confirm. A discarded dead letter (voucher-writer dlt
 * discard) is released as a cancel.
 */
static const struct {
    rc_action_kind_t kind;
    const char *why, *reason;
} releases[] = {
    [RC_RELEASE_EXPIRE] = {RC_ACT_RELEASE, "expire", "EXPIRED"},
    [RC_RELEASE_UNDELIVERED] = {RC_ACT_RELEASE, "undelivered", "UNDELIVERED"},
    [RC_RELEASE_CANCEL] = {RC_ACT_RELEASE, "cancel", "REPAIR"},
    [RC_RELEASE_DISCARD] = {RC_ACT_RELEASE, "cancel", "DISCARDED"},
    [RC_RELEASE_TO_CONFIRMED] = {RC_ACT_CONFIRM, NULL, NULL},
    [RC_RELEASE_CONFIRM_LOST] = {RC_ACT_PUBLISH_CONFIRM, NULL, NULL},
};

/*
 * Whether a rebuild of keys Redis lost (first seen at since_ms) still waits:
 * until the pass's snapshot was read restore_delay_ms after it. A delay of 0
 * (an operator's choice, or a test's) acts at once, in the pass that saw it.
 */
static int waiting(const rc_plan_config_t *cfg, int64_t snapshot_ms, int64_t since_ms)
{
    return cfg->restore_delay_ms > 0 && snapshot_ms - since_ms < cfg->restore_delay_ms;
}

int rc_plan_repairs(rc_voucher_t *v, const rc_plan_config_t *cfg, int64_t now_ms,
                    int64_t snapshot_ms, rc_plan_t *plan)
{
    int64_t expiring = 0;
    int rc = 0;

    if (!v->full)
        return 0;
    if (!v->n.redis_loaded) {
        /*
         * Never loaded: the gateway loads it on first use. Loaded once:
         * restore it, but only once it has been missing for longer than a
         * gateway takes to deliver an event. Reservations taken just before
         * the keys vanished are then in Kafka, where the restore counts
         * them; restoring sooner would offer their uses again. The delay
         * is counted to when this pass read its snapshot, not to now: a
         * pass that waited between its reads and its repairs would restore
         * from a snapshot older than the delay, without an event acknowledged
         * meanwhile (tests/model/regressions/new-restore-stale-snapshot.json).
         */
        if (!v->claimed)
            return 0;
        if (!v->mem->missing_since_ms)
            v->mem->missing_since_ms = now_ms;
        if (waiting(cfg, snapshot_ms, v->mem->missing_since_ms))
            return add(plan, RC_ACT_AWAIT_RESTORE, NULL, NULL, NULL);
        return add(plan, RC_ACT_RESTORE, NULL, NULL, NULL);
    }
    v->mem->missing_since_ms = 0;
    if (v->n.orders_lost) {
        /*
         * The orders hash lost, the counter kept: rebuild it from a snapshot
         * read a restore delay after the loss was first seen (it happened
         * before), so that the events of orders taken before it are in the
         * snapshot. Its read time, not the pass's clock: a pass that waited
         * between its reads and its repairs must not rebuild from reads
         * older than the delay. Until then reserve.lua refuses new orders.
         */
        if (!v->mem->orders_lost_since_ms)
            v->mem->orders_lost_since_ms = now_ms;
        if (waiting(cfg, snapshot_ms, v->mem->orders_lost_since_ms))
            return add(plan, RC_ACT_AWAIT_RESTORE, NULL, NULL, NULL);
        return add(plan, RC_ACT_REBUILD, NULL, NULL, NULL);
    }
    v->mem->orders_lost_since_ms = 0;
    /* Both recount Redis's orders when they run; a retake lowers as a lower would. */
    if (v->n.missing_in_redis > 0 || v->n.users_missing > 0 || v->n.released_unknown > 0)
        rc = add(plan, RC_ACT_RETAKE, NULL, NULL, NULL);
    else if (rc_model_excess_remaining(&v->n) > 0)
        rc = add(plan, RC_ACT_LOWER, NULL, NULL, NULL);
    /* Releases begun more than a grace ago and never finished: publish again. */
    if (rc == 0)
        rc = add(plan, RC_ACT_RESUME_DUE, NULL, NULL, NULL);
    for (size_t i = 0; i < v->orders.cap && rc == 0; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i);
        rc_release_t what;
        if (!o || (what = rc_model_release(o, snapshot_ms, cfg->grace_ms)) == RC_RELEASE_NONE)
            continue;
        if (what == RC_RELEASE_EXPIRE && expiring++ >= cfg->batch)
            continue;
        rc = add(plan, releases[what].kind, o, releases[what].why, releases[what].reason);
    }
    return rc;
}

const char *rc_plan_resume_reason(const rc_voucher_t *v, const char *order_id,
                                  rc_order_t **order)
{
    rc_order_t *o = rc_orders_find(&v->orders, order_id);

    if (!o || (o->redis_state != VC_STATE_CANCEL_BEGUN && o->redis_state != VC_STATE_EXPIRY_BEGUN))
        return NULL;
    *order = o;
    return o->discarded                              ? "DISCARDED"
           : o->redis_state == VC_STATE_CANCEL_BEGUN ? "CANCELLED"
                                                     : "EXPIRED";
}

static int by_last_full(const void *a, const void *b)
{
    const rc_voucher_t *x = *(rc_voucher_t *const *)a, *y = *(rc_voucher_t *const *)b;

    if (x->mem->last_full_ms != y->mem->last_full_ms)
        return x->mem->last_full_ms < y->mem->last_full_ms ? -1 : 1;
    return strcmp(x->code, y->code);
}

void rc_plan_pick_periodic(rc_voucher_t **due, size_t n, size_t budget)
{
    if (n > 1)
        qsort(due, n, sizeof(*due), by_last_full);
    for (size_t i = 0; i < n && i < budget; i++)
        due[i]->full = 1;
}

void rc_plan_after_retake(rc_voucher_t *v)
{
    for (size_t i = 0; i < v->orders.cap; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i), *seen;
        if (o && o->revivable && (seen = rc_orders_find(&v->mem->released_seen, o->order_id)))
            seen->redis_state = 0;
    }
}

int rc_plan_merges(const rc_order_t *o, int every_order)
{
    if (o->pg_after == VC_RD_NONE)
        return 0;
    /* Released and unknown to Redis: written R, so that a retry is answered as released. */
    if (o->pg_after == VC_RD_RELEASED && !o->redis_state)
        return 1;
    return every_order ||
           (vc_rd_counts(o->pg_after) &&
            (!o->redis_state || (o->redis_state == VC_STATE_RELEASED && o->revivable)));
}

void rc_plan_order_value(const rc_order_t *o, char *buf, size_t cap)
{
    char state = o->pg_after == VC_RD_RESERVED    ? VC_STATE_HELD
                 : o->pg_after == VC_RD_CONFIRMED ? VC_STATE_CONFIRMED
                                                  : VC_STATE_RELEASED;

    snprintf(buf, cap, "%lld:%lld:%lld:%c", (long long)o->customer_id, (long long)o->discount,
             (long long)o->held_until_ms, state);
}

const char *rc_action_name(rc_action_kind_t k)
{
    static const char *const names[RC_ACT_COUNT] = {
        [RC_ACT_AWAIT_RESTORE] = "await-restore", [RC_ACT_RESTORE] = "restore",
        [RC_ACT_RETAKE] = "retake",               [RC_ACT_REBUILD] = "rebuild",
        [RC_ACT_LOWER] = "lower",
        [RC_ACT_RESUME_DUE] = "resume-due",       [RC_ACT_RELEASE] = "release",
        [RC_ACT_CONFIRM] = "confirm",             [RC_ACT_PUBLISH_CONFIRM] = "publish-confirm",
    };
    return (unsigned)k < RC_ACT_COUNT ? names[k] : "?";
}
