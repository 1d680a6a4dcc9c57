#include "rc_plan_json.h"
#include "rc_plan.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_order_value.h"
#include "vc_redemption.h"
#include "vc_retention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most a snapshot may be: a pass over many vouchers, each with its history. */
#define RC_PLAN_MAX_SNAPSHOT (256u << 20)

/* Where a field error happened, prefixed to err: "vouchers[2]: field ...". */
static int located(int rc, const char *what, size_t i, char *err, size_t errlen)
{
    char inner[256];

    if (rc == 0)
        return 0;
    snprintf(inner, sizeof(inner), "%s", err);
    snprintf(err, errlen, "%s[%zu]: %s", what, i, inner);
    return rc;
}

static int opt_int(const vc_jdoc_t *d, const char *key, int64_t def, int64_t *out, char *err,
                   size_t errlen)
{
    if (!vc_jdoc_has(d, key)) {
        *out = def;
        return 0;
    }
    return vc_jdoc_int(d, key, out, err, errlen);
}

static int opt_bool(const vc_jdoc_t *d, const char *key, int def, int *out, char *err,
                    size_t errlen)
{
    if (!vc_jdoc_has(d, key)) {
        *out = def;
        return 0;
    }
    return vc_jdoc_bool(d, key, out, err, errlen);
}

/* An optional array: *len 0 when absent. */
static int opt_array(const vc_jdoc_t *d, const char *key, size_t *len, char *err, size_t errlen)
{
    *len = 0;
    return vc_jdoc_has(d, key) ? vc_jdoc_array(d, key, len, err, errlen) : 0;
}

static int order_of(rc_orders_t *m, const char *id, rc_order_t **o, char *err, size_t errlen)
{
    if (!vc_order_id_valid(id, strlen(id))) {
        snprintf(err, errlen, "field \"orderId\" is not a valid orderId");
        return VC_ERR_INVALID;
    }
    if (!(*o = rc_orders_get(m, id)))
        return VC_ERR_NOMEM;
    return 0;
}

static int read_row(const vc_jdoc_t *d, rc_voucher_t *v, char *err, size_t errlen)
{
    const char *id, *status;
    rc_order_t *o;
    int rc;

    if ((rc = vc_jdoc_str(d, "orderId", &id, err, errlen)) != 0 ||
        (rc = vc_jdoc_str(d, "status", &status, err, errlen)) != 0 ||
        (rc = order_of(&v->orders, id, &o, err, errlen)) != 0 ||
        (rc = vc_jdoc_int(d, "customerId", &o->customer_id, err, errlen)) != 0 ||
        (rc = opt_int(d, "discount", 0, &o->discount, err, errlen)) != 0 ||
        (rc = opt_int(d, "heldUntilMs", 0, &o->held_until_ms, err, errlen)) != 0)
        return rc;
    if ((o->pg = o->pg_after = vc_rd_status_parse(status)) == VC_RD_NONE) {
        snprintf(err, errlen, "field \"status\" must be RESERVED, CONFIRMED or RELEASED");
        return VC_ERR_INVALID;
    }
    if (vc_rd_counts(o->pg))
        v->n.live_rows++;
    return 0;
}

static int read_letter(const vc_jdoc_t *d, rc_voucher_t *v, char *err, size_t errlen)
{
    const char *id;
    rc_order_t *o;
    int rc;

    if ((rc = vc_jdoc_str(d, "orderId", &id, err, errlen)) != 0 ||
        (rc = order_of(&v->orders, id, &o, err, errlen)) != 0 ||
        (rc = opt_bool(d, "parked", 0, &o->parked, err, errlen)) != 0)
        return rc;
    return opt_bool(d, "discarded", 0, &o->discarded, err, errlen);
}

static int read_event(const vc_jdoc_t *d, rc_voucher_t *v, rc_vouchers_t *vs, char *err,
                      size_t errlen)
{
    vc_event_t ev = {0};
    const char *type;
    int rc;

    if ((rc = vc_jdoc_str(d, "type", &type, err, errlen)) != 0 ||
        (rc = vc_jdoc_strcpy(d, "orderId", ev.order_id, sizeof(ev.order_id), err, errlen)) != 0 ||
        (rc = opt_int(d, "customerId", 0, &ev.customer_id, err, errlen)) != 0 ||
        (rc = opt_int(d, "discountAmount", 0, &ev.discount_amount, err, errlen)) != 0 ||
        (rc = opt_int(d, "heldUntilMs", 0, &ev.held_until_ms, err, errlen)) != 0)
        return rc;
    for (int t = VC_EV_RESERVED; t <= VC_EV_RELEASED; t++)
        if (strcmp(type, vc_event_type_name((vc_event_type_t)t)) == 0)
            ev.type = (vc_event_type_t)t;
    if (!ev.type) {
        snprintf(err, errlen,
                 "field \"type\" must be VoucherReserved, VoucherConfirmed or VoucherReleased");
        return VC_ERR_INVALID;
    }
    if (!vc_order_id_valid(ev.order_id, strlen(ev.order_id))) {
        snprintf(err, errlen, "field \"orderId\" is not a valid orderId");
        return VC_ERR_INVALID;
    }
    snprintf(ev.code, sizeof(ev.code), "%s", v->code);
    rc_vouchers_add_event(vs, &ev);
    return vs->nomem ? VC_ERR_NOMEM : 0;
}

/* One order Redis holds: merged as rc_redis_orders() does; an unreadable value is counted. */
static int read_order(const vc_jdoc_t *d, rc_voucher_t *v, int *bad, char *err, size_t errlen)
{
    const char *id, *value;
    vc_order_value_t parsed;
    rc_order_t *o;
    int rc;

    if ((rc = vc_jdoc_str(d, "orderId", &id, err, errlen)) != 0 ||
        (rc = vc_jdoc_str(d, "value", &value, err, errlen)) != 0)
        return rc;
    if (vc_order_value_parse(value, strlen(value), &parsed) != 0) {
        (*bad)++;
        return 0;
    }
    if ((rc = order_of(&v->orders, id, &o, err, errlen)) != 0)
        return rc;
    rc_order_merge_redis(o, &parsed);
    return 0;
}

static int read_memory(const vc_jdoc_t *d, rc_memory_entry_t *e, char *err, size_t errlen)
{
    size_t n;
    int rc;

    if ((rc = opt_int(d, "missingSinceMs", 0, &e->missing_since_ms, err, errlen)) != 0 ||
        (rc = opt_int(d, "uncounted", 0, &e->uncounted, err, errlen)) != 0 ||
        (rc = opt_array(d, "unsent", &n, err, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        vc_jdoc_t u;
        const char *id, *state;
        rc_order_t *o;
        if ((rc = vc_jdoc_at(d, "unsent", i, &u, err, errlen)) != 0 ||
            (rc = vc_jdoc_str(&u, "orderId", &id, err, errlen)) != 0 ||
            (rc = vc_jdoc_str(&u, "state", &state, err, errlen)) != 0 ||
            (rc = order_of(&e->seen, id, &o, err, errlen)) != 0 ||
            (rc = vc_jdoc_int(&u, "firstSeenMs", &o->first_unsent_ms, err, errlen)) != 0 ||
            (rc = vc_jdoc_int(&u, "heldUntilMs", &o->redis_held_until_ms, err, errlen)) != 0)
            return located(rc, "unsent", i, err, errlen);
        if (strcmp(state, "H") != 0 && strcmp(state, "C") != 0) {
            snprintf(err, errlen, "unsent[%zu]: field \"state\" must be H or C", i);
            return VC_ERR_INVALID;
        }
        o->redis_state = state[0];
    }
    if ((rc = opt_array(d, "releasedSeen", &n, err, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const char *id;
        rc_order_t *o;
        if ((rc = vc_jdoc_str_at(d, "releasedSeen", i, &id, err, errlen)) != 0 ||
            (rc = order_of(&e->released_seen, id, &o, err, errlen)) != 0)
            return located(rc, "releasedSeen", i, err, errlen);
        o->redis_state = VC_STATE_RELEASED;
    }
    return 0;
}

/* What a voucher holds of the snapshot beyond what the planner reads. */
typedef struct {
    char code[VC_CODE_MAX + 1];
    size_t at; /* its place in the document's vouchers */
    int bad_orders;
    size_t ndue;
    const char **due; /* releasingDue, borrowed from the document */
} extra_t;

/* The numbers and the verdict's inputs of one voucher; its rows and orders come after sorting. */
static int read_numbers(const vc_jdoc_t *d, rc_voucher_t *v, char *err, size_t errlen)
{
    vc_jdoc_t redis;
    int64_t users;
    int rc;

    if ((rc = vc_jdoc_strcpy(d, "code", v->code, sizeof(v->code), err, errlen)) != 0 ||
        (rc = vc_jdoc_int(d, "totalLimit", &v->n.total_limit, err, errlen)) != 0 ||
        (rc = vc_jdoc_int(d, "usedCount", &v->n.used_count, err, errlen)) != 0 ||
        (rc = opt_bool(d, "claimed", 1, &v->claimed, err, errlen)) != 0 ||
        (rc = opt_bool(d, "full", 1, &v->full, err, errlen)) != 0 ||
        (rc = opt_int(d, "parkedLetters", 0, &v->n.parked, err, errlen)) != 0 ||
        (rc = opt_int(d, "endsAtMs", 0, &v->ends_at_ms, err, errlen)) != 0)
        return rc;
    if (!vc_code_valid(v->code, strlen(v->code))) {
        snprintf(err, errlen, "field \"code\" is not a valid voucher code");
        return VC_ERR_INVALID;
    }
    v->n.live_rows = v->full ? 0 : v->n.used_count;
    v->n.redis_users = -1;
    v->n.redis_limit = -1; /* the plan's input carries no limit key: not told lost by it */
    if (!vc_jdoc_has(d, "redis"))
        return 0; /* Redis has no counter for it */
    if ((rc = vc_jdoc_obj(d, "redis", &redis, err, errlen)) != 0 ||
        (rc = vc_jdoc_int(&redis, "remaining", &v->n.redis_remaining, err, errlen)) != 0 ||
        (rc = opt_int(&redis, "users", -1, &users, err, errlen)) != 0)
        return rc;
    v->n.redis_loaded = 1;
    v->n.redis_users = users;
    return 0;
}

static int read_voucher(const vc_jdoc_t *d, rc_voucher_t *v, rc_vouchers_t *vs, extra_t *x,
                        char *err, size_t errlen)
{
    static const char *const lists[] = {"rows", "letters", "events", "orders"};
    size_t n;
    int rc;

    for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
        if ((rc = opt_array(d, lists[l], &n, err, errlen)) != 0)
            return rc;
        for (size_t i = 0; i < n; i++) {
            vc_jdoc_t e;
            if ((rc = vc_jdoc_at(d, lists[l], i, &e, err, errlen)) == 0)
                rc = l == 0   ? read_row(&e, v, err, errlen)
                     : l == 1 ? read_letter(&e, v, err, errlen)
                     : l == 2 ? read_event(&e, v, vs, err, errlen)
                              : read_order(&e, v, &x->bad_orders, err, errlen);
            if (rc != 0)
                return located(rc, lists[l], i, err, errlen);
        }
    }
    if ((rc = opt_array(d, "releasingDue", &x->ndue, err, errlen)) != 0)
        return rc;
    if (x->ndue && !(x->due = calloc(x->ndue, sizeof(*x->due))))
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < x->ndue; i++)
        if ((rc = vc_jdoc_str_at(d, "releasingDue", i, &x->due[i], err, errlen)) != 0)
            return rc;
    if (vc_jdoc_has(d, "memory")) {
        vc_jdoc_t m;
        if ((rc = vc_jdoc_obj(d, "memory", &m, err, errlen)) != 0 ||
            (rc = read_memory(&m, v->mem, err, errlen)) != 0)
            return located(rc, "memory", 0, err, errlen);
    }
    return 0;
}

static void write_numbers(vc_jgen_t *g, const rc_numbers_t *n)
{
    vc_jgen_key(g, "numbers");
    vc_jgen_map_open(g);
    vc_jgen_kv_int(g, "totalLimit", n->total_limit);
    vc_jgen_kv_int(g, "usedCount", n->used_count);
    vc_jgen_kv_int(g, "liveRows", n->live_rows);
    vc_jgen_kv_bool(g, "redisLoaded", n->redis_loaded);
    vc_jgen_kv_int(g, "redisRemaining", n->redis_remaining);
    vc_jgen_kv_int(g, "inFlightEvents", n->in_flight_events);
    vc_jgen_kv_int(g, "pgLiveAfter", n->pg_live_after);
    vc_jgen_kv_int(g, "redisTaken", n->redis_taken);
    vc_jgen_kv_int(g, "redisCounted", n->redis_counted);
    vc_jgen_kv_int(g, "releasing", n->releasing);
    vc_jgen_kv_int(g, "unsentFresh", n->unsent_fresh);
    vc_jgen_kv_int(g, "stranded", n->stranded);
    vc_jgen_kv_int(g, "releasedInPg", n->released_in_pg);
    vc_jgen_kv_int(g, "missingInRedis", n->missing_in_redis);
    vc_jgen_kv_int(g, "releasedUnknown", n->released_unknown);
    vc_jgen_kv_int(g, "releasedAfter", n->released_after);
    vc_jgen_kv_int(g, "confirmedUnsent", n->confirmed_unsent);
    vc_jgen_kv_int(g, "confirmedUnknown", n->confirmed_unknown);
    vc_jgen_kv_int(g, "confirmPending", n->confirm_pending);
    vc_jgen_kv_int(g, "confirmLost", n->confirm_lost);
    vc_jgen_kv_int(g, "uncounted", n->uncounted);
    vc_jgen_kv_int(g, "bound", n->bound);
    vc_jgen_kv_int(g, "usersMissing", n->users_missing);
    vc_jgen_kv_int(g, "ordersLost", n->orders_lost);
    vc_jgen_kv_int(g, "parked", n->parked);
    vc_jgen_kv_int(g, "parkedHeld", n->parked_held);
    vc_jgen_kv_int(g, "discarding", n->discarding);
    vc_jgen_kv_int(g, "excessRemaining", rc_model_excess_remaining(n));
    vc_jgen_map_close(g);
}

/* The orders a restore or a retake writes again, as the script's fours. */
static void write_merges(vc_jgen_t *g, const rc_voucher_t *v, int every_order)
{
    char value[128];

    vc_jgen_key(g, "orders");
    vc_jgen_array_open(g);
    for (size_t i = 0; i < v->orders.cap; i++) {
        const rc_order_t *o = rc_orders_at(&v->orders, i);
        if (!o || !rc_plan_merges(o, every_order))
            continue;
        rc_plan_order_value(o, value, sizeof(value));
        vc_jgen_map_open(g);
        vc_jgen_kv_str(g, "orderId", o->order_id);
        vc_jgen_kv_str(g, "value", value);
        vc_jgen_kv_int(g, "heldUntilMs", o->held_until_ms);
        vc_jgen_kv_bool(g, "revivable", o->revivable);
        vc_jgen_map_close(g);
    }
    vc_jgen_array_close(g);
}

static void write_release(vc_jgen_t *g, const rc_order_t *o, const char *why, const char *reason)
{
    char read[48];

    /* release_begin.lua's ARGV[4]: the hold the pass read, "heldUntil:state". */
    snprintf(read, sizeof(read), "%lld:%c", (long long)o->redis_held_until_ms,
             o->redis_state ? o->redis_state : '?');
    vc_jgen_map_open(g);
    vc_jgen_kv_str(g, "action", "release");
    vc_jgen_kv_str(g, "orderId", o->order_id);
    vc_jgen_kv_str(g, "why", why);
    vc_jgen_kv_str(g, "reason", reason);
    vc_jgen_kv_str(g, "read", read);
    vc_jgen_kv_int(g, "customerId", o->customer_id);
    vc_jgen_map_close(g);
}

static void write_repairs(vc_jgen_t *g, const rc_voucher_t *v, const rc_plan_t *plan,
                          const extra_t *x, int64_t batch, int64_t retention_ms)
{
    vc_jgen_key(g, "repairs");
    vc_jgen_array_open(g);
    for (size_t i = 0; i < plan->len; i++) {
        const rc_action_t *a = &plan->items[i];
        if (a->kind == RC_ACT_RESUME_DUE) {
            /* The releasing set as the snapshot gives it, read as the daemon reads it: batch. */
            for (size_t j = 0; j < x->ndue && (int64_t)j < batch; j++) {
                rc_order_t *o = NULL;
                const char *reason = rc_plan_resume_reason(v, x->due[j], &o);
                if (reason)
                    write_release(g, o, "resume", reason);
            }
            continue;
        }
        if (a->kind == RC_ACT_RELEASE) {
            write_release(g, a->order, a->why, a->reason);
            continue;
        }
        vc_jgen_map_open(g);
        vc_jgen_kv_str(g, "action", rc_action_name(a->kind));
        if (a->kind == RC_ACT_CONFIRM) {
            vc_jgen_kv_str(g, "orderId", a->order->order_id);
            vc_jgen_kv_int(g, "heldUntilMs", a->order->redis_held_until_ms);
        } else if (a->kind == RC_ACT_PUBLISH_CONFIRM) {
            /* The figures are read from Redis when it runs (orders and paid), not planned. */
            vc_jgen_kv_str(g, "orderId", a->order->order_id);
            vc_jgen_kv_int(g, "heldUntilMs", a->order->redis_held_until_ms);
            vc_jgen_kv_int(g, "customerId", a->order->customer_id);
        } else if (a->kind == RC_ACT_RESTORE || a->kind == RC_ACT_RETAKE ||
                   a->kind == RC_ACT_REBUILD) {
            /* The keys' expiry the script sets (vc_retention.h); 0: none. */
            vc_jgen_kv_int(g, "expireAt",
                           v->ends_at_ms > 0 && retention_ms > 0
                               ? vc_redis_expire_at(v->ends_at_ms, retention_ms)
                               : 0);
            write_merges(g, v, a->kind != RC_ACT_RETAKE);
        }
        vc_jgen_map_close(g);
    }
    vc_jgen_array_close(g);
}

static void write_memory(vc_jgen_t *g, const rc_memory_entry_t *e)
{
    const rc_order_t *o;

    vc_jgen_key(g, "memory");
    vc_jgen_map_open(g);
    vc_jgen_kv_int(g, "missingSinceMs", e->missing_since_ms);
    vc_jgen_kv_int(g, "uncounted", e->uncounted);
    vc_jgen_key(g, "unsent");
    vc_jgen_array_open(g);
    for (size_t i = 0; i < e->seen.cap; i++) {
        char state[2] = {0};
        if (!(o = rc_orders_at(&e->seen, i)))
            continue;
        state[0] = o->redis_state;
        vc_jgen_map_open(g);
        vc_jgen_kv_str(g, "orderId", o->order_id);
        vc_jgen_kv_int(g, "firstSeenMs", o->first_unsent_ms);
        vc_jgen_kv_str(g, "state", state);
        vc_jgen_kv_int(g, "heldUntilMs", o->redis_held_until_ms);
        vc_jgen_map_close(g);
    }
    vc_jgen_array_close(g);
    vc_jgen_key(g, "releasedSeen");
    vc_jgen_array_open(g);
    for (size_t i = 0; i < e->released_seen.cap; i++)
        if ((o = rc_orders_at(&e->released_seen, i)) && o->redis_state == VC_STATE_RELEASED)
            vc_jgen_str(g, o->order_id);
    vc_jgen_array_close(g);
    vc_jgen_map_close(g);
}

static int cmp_extra(const void *a, const void *b)
{
    return strcmp(((const extra_t *)a)->code, ((const extra_t *)b)->code);
}

int rc_plan_json(const char *json, size_t len, char **out, size_t *outlen, char *err,
                 size_t errlen)
{
    static const char *const top_keys[] = {"nowMs",       "snapshotMs",     "graceMs",
                                           "batch",       "repair",         "restoreDelayMs",
                                           "retentionMs", "vouchers",       NULL};
    vc_jdoc_t doc = {0}, d;
    rc_vouchers_t vs = {0};
    rc_memory_t mem = {0};
    extra_t *x = NULL;
    vc_jgen_t g = {0};
    int64_t now, snapshot, grace, delay, batch, retention;
    int repair, rc;
    size_t n = 0;

    *out = NULL;
    if ((rc = vc_jdoc_parse(&doc, json, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, top_keys, err, errlen)) != 0 ||
        (rc = vc_jdoc_int(&doc, "nowMs", &now, err, errlen)) != 0 ||
        (rc = opt_int(&doc, "snapshotMs", now, &snapshot, err, errlen)) != 0 ||
        (rc = opt_int(&doc, "graceMs", 30000, &grace, err, errlen)) != 0 ||
        (rc = opt_int(&doc, "restoreDelayMs", 10000, &delay, err, errlen)) != 0 ||
        (rc = opt_int(&doc, "batch", 1000, &batch, err, errlen)) != 0 ||
        (rc = opt_bool(&doc, "repair", 1, &repair, err, errlen)) != 0 ||
        (rc = opt_int(&doc, "retentionMs", 0, &retention, err, errlen)) != 0 ||
        (rc = vc_jdoc_array(&doc, "vouchers", &n, err, errlen)) != 0)
        goto out;
    if (batch < 1 || batch > 100000 || grace < 0 || delay < 0) {
        snprintf(err, errlen, "batch must be 1..100000, graceMs and restoreDelayMs not negative");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if ((rc = rc_vouchers_alloc(&vs, n)) != 0 ||
        (n && !(mem.entries = calloc(n, sizeof(*mem.entries)))) ||
        (n && !(x = calloc(n, sizeof(*x))))) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    mem.len = n;
    /* Sorted by code, as a pass has them (an event finds its voucher by a binary search). */
    for (size_t i = 0; i < n; i++) {
        x[i].at = i;
        if ((rc = vc_jdoc_at(&doc, "vouchers", i, &d, err, errlen)) != 0 ||
            (rc = vc_jdoc_strcpy(&d, "code", x[i].code, sizeof(x[i].code), err, errlen)) != 0) {
            rc = located(rc, "vouchers", i, err, errlen);
            goto out;
        }
    }
    if (n > 1) /* qsort() of no array at all (x is NULL when n is 0) is undefined */
        qsort(x, n, sizeof(*x), cmp_extra);
    for (size_t i = 0; i < n; i++) {
        rc_voucher_t *v = &vs.v[i];
        if (i > 0 && strcmp(x[i - 1].code, x[i].code) == 0) {
            snprintf(err, errlen, "vouchers[%zu]: code \"%s\" given twice", x[i].at, x[i].code);
            rc = VC_ERR_INVALID;
            goto out;
        }
        snprintf(mem.entries[i].code, sizeof(mem.entries[i].code), "%s", x[i].code);
        v->mem = &mem.entries[i];
        if ((rc = vc_jdoc_at(&doc, "vouchers", x[i].at, &d, err, errlen)) != 0 ||
            (rc = read_numbers(&d, v, err, errlen)) != 0) {
            rc = located(rc, "vouchers", x[i].at, err, errlen);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = vc_jdoc_at(&doc, "vouchers", x[i].at, &d, err, errlen)) != 0 ||
            (rc = read_voucher(&d, &vs.v[i], &vs, &x[i], err, errlen)) != 0) {
            rc = located(rc, "vouchers", x[i].at, err, errlen);
            goto out;
        }

    if ((rc = vc_jgen_init(&g)) != 0)
        goto out;
    vc_jgen_map_open(&g);
    vc_jgen_key(&g, "vouchers");
    vc_jgen_array_open(&g);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc_voucher_t *v = &vs.v[i];
        rc_plan_t plan = {0};
        const rc_plan_config_t cfg = {grace, delay, (int)batch};

        if (!v->full)
            rc_plan_judge_numbers(v);
        else if ((rc = rc_plan_replay(v)) != 0 ||
                 (rc = rc_plan_judge_full(v, now, now, grace)) != 0)
            break;
        if (repair && (rc = rc_plan_repairs(v, &cfg, now, snapshot, &plan)) != 0)
            break;
        vc_jgen_map_open(&g);
        vc_jgen_kv_str(&g, "code", v->code);
        vc_jgen_kv_str(&g, "verdict", rc_verdict_name(v->verdict));
        vc_jgen_kv_bool(&g, "full", v->full);
        vc_jgen_kv_int(&g, "badOrders", x[i].bad_orders);
        write_numbers(&g, &v->n);
        write_repairs(&g, v, &plan, &x[i], batch, retention);
        write_memory(&g, v->mem);
        vc_jgen_map_close(&g);
        rc_plan_free(&plan);
    }
    vc_jgen_array_close(&g);
    vc_jgen_map_close(&g);
    if (rc == 0)
        rc = vc_jgen_finish_alloc(&g, out, outlen);
out:
    if (rc == VC_ERR_NOMEM)
        snprintf(err, errlen, "out of memory");
    vc_jgen_free(&g);
    for (size_t i = 0; x && i < n; i++)
        free(x[i].due);
    free(x);
    for (size_t i = 0; i < mem.len; i++)
        rc_memory_entry_free(&mem.entries[i]);
    free(mem.entries);
    rc_vouchers_free(&vs);
    vc_jdoc_free(&doc);
    return rc;
}

int rc_plan_cli(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "-";
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL, *out = NULL, err[512];
    size_t len = 0, cap = 0, outlen = 0;
    int rc = 0;

    if (argc > 2 || (argc == 2 && argv[1][0] == '-' && argv[1][1])) {
        int help = argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
        fprintf(help ? stdout : stderr,
                "Usage: voucher-reconciler plan [FILE]\n\n"
                "Reads a snapshot of one pass (JSON, proto/reconciler-plan.md) from FILE\n"
                "or stdin, and prints the planned verdicts and repairs as JSON.\n");
        return help ? 0 : 2;
    }
    if (!in) {
        fprintf(stderr, "voucher-reconciler plan: %s: cannot open\n", path);
        return 2;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            char *more;
            cap = cap ? cap * 2 : 65536;
            if (cap > RC_PLAN_MAX_SNAPSHOT || !(more = realloc(buf, cap))) {
                snprintf(err, sizeof(err), "the snapshot is larger than %u bytes",
                         RC_PLAN_MAX_SNAPSHOT);
                rc = VC_ERR_TOO_LARGE;
                break;
            }
            buf = more;
        }
        if ((got = fread(buf + len, 1, cap - len, in)) == 0)
            break;
        len += got;
    }
    if (rc == 0 && ferror(in)) {
        snprintf(err, sizeof(err), "%s: read error", path);
        rc = VC_ERR_INVALID;
    }
    if (in != stdin)
        fclose(in);
    if (rc == 0)
        rc = rc_plan_json(buf ? buf : "", len, &out, &outlen, err, sizeof(err));
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "voucher-reconciler plan: %s\n", err);
        return 2;
    }
    fwrite(out, 1, outlen, stdout);
    fputc('\n', stdout);
    free(out);
    return 0;
}
