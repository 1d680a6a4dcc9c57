#include "rc_repair.h"
#include "rc_grow.h"
#include "rc_kafka.h"
#include "rc_redis.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_model.h"
#include "vc_order_value.h"
#include "vc_retention.h"
#include "vc_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_releases_free(rc_releases_t *rs)
{
    free(rs->items);
    memset(rs, 0, sizeof(*rs));
}

static int add_release(rc_releases_t *rs, rc_voucher_t *v, const rc_order_t *o, const char *reason)
{
    rc_release_item_t *r;
    if (rc_grow((void **)&rs->items, &rs->cap, rs->len, sizeof(*rs->items), 64) != 0)
        return VC_ERR_NOMEM;
    r = &rs->items[rs->len++];
    memset(r, 0, sizeof(*r));
    r->v = v;
    r->ev.type = VC_EV_RELEASED;
    r->ev.version = VC_EVENT_VERSION;
    snprintf(r->ev.code, sizeof(r->ev.code), "%s", v->code);
    snprintf(r->ev.order_id, sizeof(r->ev.order_id), "%s", o->order_id);
    r->ev.customer_id = o->customer_id;
    r->ev.at_ms = vc_time_now_ms();
    snprintf(r->ev.reason, sizeof(r->ev.reason), "%s", reason);
    return 0;
}

/*
 * Begins the release of one order (release_begin.lua) and queues its event
 * when the release is begun now or was begun before and never finished.
 * why is release_begin.lua's: "resume" for a release begun before; for the
 * others the script checks that the order is still the hold the pass read
 * (heldUntil and state), and for "undelivered" that no retry published its
 * event again since snapshot_ms - grace (a retry's answer could come after
 * the pass read Kafka). Refused: the next pass decides again.
 */
static int begin_release(rc_ctx_t *ctx, rc_voucher_t *v, rc_order_t *o, const char *why,
                         const char *reason, int64_t snapshot_ms, rc_releases_t *rs, char *err,
                         size_t errlen)
{
    rc_keys_t k;
    char now[24], order[128], read[48], since[24];
    rc_order_t current = {0};
    int64_t status;
    int rc, nargs = 3;

    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        return rc;
    rc_keys_of(v->code, &k);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    snprintf(read, sizeof(read), "%lld:%c", (long long)o->redis_held_until_ms,
             o->redis_state ? o->redis_state : '?');
    snprintf(since, sizeof(since), "%lld", (long long)(snapshot_ms - ctx->cfg->grace_ms));
    if (strcmp(why, "resume") != 0)
        nargs = strcmp(why, "undelivered") == 0 ? 5 : 4;
    /* Up to resent: the others tell a lost hash apart for the gateway (release_begin.lua). */
    const char *keys[VC_RELEASE_BEGIN_KEY_RESENT + 1];
    const char *args[] = {o->order_id, why, now, read, since};
    rc_script_keys(&k, vc_release_begin_keys, VC_RELEASE_BEGIN_KEY_RESENT + 1, keys);
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_rc_release_begin, VC_RELEASE_BEGIN_KEY_RESENT + 1,
                            keys, nargs, args, &status, order, sizeof(order), err, errlen)) != 0)
        return rc;
    if (status == VC_RELEASE_BEGIN_CHANGED) {
        vc_log_field_t f[] = {{"code", v->code}, {"orderId", o->order_id}};
        VC_LOG_F(VC_LOG_INFO, f,
                 "not released (%s): the order changed, or a retry published it again, after "
                 "the pass read it; the next pass decides again",
                 why);
        return 0;
    }
    if (status != VC_RELEASE_BEGIN_BEGUN && status != VC_RELEASE_BEGIN_ALREADY_BEGUN)
        return 0;
    if (order[0] && rc_order_parse(order, strlen(order), &current) == 0) {
        if (o->customer_id <= 0)
            o->customer_id = current.customer_id;
        /* Begun before by a cancel: publish it as the cancel it is. */
        if (current.redis_state == VC_STATE_CANCEL_BEGUN && !o->discarded)
            reason = "CANCELLED";
    }
    return add_release(rs, v, o, reason);
}

/*
 * Repairs a hold that PostgreSQL (or an event in flight) has as confirmed:
 * H -> C in Redis, if it is still the hold the pass read (repair_confirmed.lua).
 */
static int repair_confirmed(rc_ctx_t *ctx, rc_voucher_t *v, const rc_order_t *o,
                            rc_summary_t *sum, char *err, size_t errlen)
{
    rc_keys_t k;
    char held[24];
    int64_t status;
    int rc;

    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        return rc;
    rc_keys_of(v->code, &k);
    snprintf(held, sizeof(held), "%lld", (long long)o->redis_held_until_ms);
    const char *keys[VC_REPAIR_CONFIRMED_NKEYS];
    const char *args[] = {o->order_id, held};
    rc_script_keys(&k, vc_repair_confirmed_keys, VC_REPAIR_CONFIRMED_NKEYS, keys);
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_rc_repair_confirmed, VC_REPAIR_CONFIRMED_NKEYS, keys,
                            2, args, &status, NULL, 0, err, errlen)) != 0)
        return rc;
    if (status == VC_REPAIR_CONFIRMED_REPAIRED) {
        vc_log_field_t f[] = {{"code", v->code}, {"orderId", o->order_id}};
        VC_LOG_F(VC_LOG_INFO, f,
                 "repair: held in Redis, confirmed in PostgreSQL: confirmed in Redis "
                 "(never expired)");
        sum->reconfirmed++;
    }
    return 0;
}

int rc_repair_publish_confirm(rc_ctx_t *ctx, const char *code, int64_t campaign_id,
                              const rc_order_t *o, rc_summary_t *sum, char *err, size_t errlen)
{
    char orders[VC_CODE_MAX + 32], paid_key[VC_CODE_MAX + 32], value[128], amount[24];
    char shown[VC_LOG_CODE_MAX]; /* a campaign's code is a one-time secret */
    vc_log_field_t f[] = {{"code", vc_log_code(code, campaign_id > 0, shown)},
                          {"orderId", o->order_id},
                          {"orderAmount", amount}};
    vc_order_value_t cur;
    vc_event_t ev;
    int64_t paid;
    int delivered = 0, rc;

    if (campaign_id > 0) {
        (void)vc_campaign_key(orders, sizeof(orders), campaign_id, VC_CAMPAIGN_KEY_ORDERS);
        (void)vc_campaign_key(paid_key, sizeof(paid_key), campaign_id, VC_CAMPAIGN_KEY_PAID);
    } else {
        (void)vc_voucher_key(orders, sizeof(orders), code, VC_VOUCHER_KEY_ORDERS);
        (void)vc_voucher_key(paid_key, sizeof(paid_key), code, VC_VOUCHER_KEY_PAID);
    }
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
        (rc = rc_redis_confirmed(ctx->redis, orders, paid_key, o->order_id, value, sizeof(value),
                                 &paid, err, errlen)) != 0)
        return rc;
    /*
     * Only the order the pass read. Cancelled since (X, R), the customer's
     * release decides; its VoucherReleased reaches PostgreSQL either way.
     */
    if (vc_order_value_parse(value, strlen(value), &cur) != 0 || cur.state != VC_STATE_CONFIRMED ||
        cur.held_until_ms != o->redis_held_until_ms) {
        snprintf(amount, sizeof(amount), "-");
        VC_LOG_F(VC_LOG_INFO, f,
                 "confirm not published: the order changed after the pass read it; the next "
                 "pass decides again");
        return 0;
    }
    memset(&ev, 0, sizeof(ev));
    ev.type = VC_EV_CONFIRMED;
    ev.version = VC_EVENT_VERSION;
    snprintf(ev.code, sizeof(ev.code), "%s", code);
    snprintf(ev.order_id, sizeof(ev.order_id), "%s", o->order_id);
    ev.customer_id = cur.customer_id;
    ev.campaign_id = campaign_id;
    /* When the reconciler learnt of it: the confirm's own moment is not kept anywhere. */
    ev.at_ms = vc_time_now_ms();
    if (paid >= 0) {
        /* What confirm.lua confirmed: the total, and the discount it wrote into the value. */
        ev.has_amounts = 1;
        ev.order_amount = paid;
        ev.discount_amount = cur.discount;
    }
    if (paid >= 0)
        snprintf(amount, sizeof(amount), "%lld", (long long)paid);
    else
        snprintf(amount, sizeof(amount), "none");
    if (!rc_ctx_publish_ok(ctx))
        return 0; /* Kafka took none of this pass's publishes: published next pass */
    if ((rc = rc_kafka_publish(ctx->kafka, &ev, 1, &delivered, ctx->cfg->timeout_ms, err,
                               errlen)) != 0)
        return rc;
    rc_ctx_published(ctx, &delivered, 1);
    if (delivered != 1) {
        VC_LOG_F(VC_LOG_WARN, f,
                 "the VoucherConfirmed of a confirm Redis took was not acknowledged by Kafka: "
                 "published again next pass");
        return 0;
    }
    sum->confirms_published++;
    vc_metric_add(vc_counter("voucher_reconciler_confirms_published_total",
                             "Confirms Redis took whose VoucherConfirmed never reached Kafka (the "
                             "confirm answered 503), published by the reconciler and acknowledged",
                             campaign_id > 0 ? "of=\"campaign\"" : "of=\"voucher\""),
                  1);
    VC_LOG_F(VC_LOG_INFO, f,
             "repair: confirmed in Redis, reserved in PostgreSQL past heldUntil and the grace: "
             "published the VoucherConfirmed its confirm never published");
    return 0;
}

typedef struct {
    rc_ctx_t *ctx;
    rc_voucher_t *v;
    int64_t snapshot_ms;
    rc_releases_t *rs;
    int rc;
    char *err;
    size_t errlen;
} due_t;

/* A release begun more than a grace ago and never finished: publish it again. */
static void due_cb(void *arg, const char *order_id)
{
    due_t *d = arg;
    rc_order_t *o = NULL;
    const char *reason;

    /* Only what the pass read as begun: a release begun since is its requester's to finish. */
    if (d->rc != 0 || !(reason = rc_plan_resume_reason(d->v, order_id, &o)))
        return;
    d->rc = begin_release(d->ctx, d->v, o, "resume", reason, d->snapshot_ms, d->rs, d->err,
                          d->errlen);
}

/* Logs and counts one kind of repair on a voucher, with Redis's counter before and after. */
static void log_repair(const rc_voucher_t *v, const char *kind, const char *what, int64_t count,
                       int64_t before, int64_t after)
{
    char n[24], b[24], a[24], labels[32];
    vc_log_field_t f[] = {{"code", v->code}, {"count", n}, {"remainingBefore", b},
                          {"remainingAfter", a}};
    snprintf(n, sizeof(n), "%lld", (long long)count);
    snprintf(b, sizeof(b), "%lld", (long long)before);
    snprintf(a, sizeof(a), "%lld", (long long)after);
    snprintf(labels, sizeof(labels), "kind=\"%s\"", kind);
    VC_LOG_F(VC_LOG_INFO, f, "repair: %s", what);
    vc_metric_add(vc_counter("voucher_reconciler_repairs_total", "Repairs made, by kind", labels),
                  count);
}

int rc_repair_eval(rc_ctx_t *ctx, const char *kind, const char *of, const char *name,
                   size_t orders, const char *script, int nkeys, const char *const *keys, int nargs,
                   const char *const *args, int64_t *status, char *answer, size_t answercap,
                   char *err, size_t errlen)
{
    char labels[48];
    int64_t started = vc_time_mono_ms(), took;
    int rc = rc_redis_eval(ctx->redis, script, nkeys, keys, nargs, args, status, answer,
                           answercap, err, errlen);

    took = vc_time_mono_ms() - started;
    snprintf(labels, sizeof(labels), "kind=\"%s\"", kind);
    vc_metric_observe_us(vc_histogram("voucher_reconciler_repair_script_seconds",
                                      "Round trip of the repair scripts that read or write "
                                      "every order of a voucher or campaign, by kind",
                                      labels),
                         took * 1000);
    if (took >= ctx->cfg->slow_repair_ms)
        vc_warn("%s of %s %s (%zu orders) held Redis for %lld ms: every other command waited, "
                "and gateways answered 503 to requests that timed out meanwhile "
                "(proto/redis-keys.md, \"What a repair costs Redis\")",
                kind, of, name, orders, (long long)took);
    return rc;
}

/*
 * The arguments of a counter repair (remaining_rule.lua): total_limit, the
 * uses counted without rows, the nextra of extra (restore: nowMs, expireAt;
 * retake: expireAt), then the orders to merge in fours. A restore merges every order the snapshot knows;
 * a retake those the snapshot counts and Redis lacked when read, or held R and
 * revivable. The caller frees with repair_args_free().
 */
typedef struct {
    const char **args;
    int nargs;
    char total[24], uncounted[24];
    char (*values)[128];
    char (*held)[24];
} repair_args_t;

static void repair_args_free(repair_args_t *a)
{
    free(a->args);
    free(a->values);
    free(a->held);
}

static int repair_args(rc_voucher_t *v, int every_order, const char *const *extra, size_t nextra,
                       repair_args_t *a)
{
    size_t n = 0, lead = 2 + nextra;

    memset(a, 0, sizeof(*a));
    a->args = calloc(lead + 4 * v->orders.len, sizeof(*a->args));
    a->values = calloc(v->orders.len + 1, sizeof(*a->values));
    a->held = calloc(v->orders.len + 1, sizeof(*a->held));
    if (!a->args || !a->values || !a->held)
        return VC_ERR_NOMEM;
    snprintf(a->total, sizeof(a->total), "%lld", (long long)v->n.total_limit);
    snprintf(a->uncounted, sizeof(a->uncounted), "%lld", (long long)v->n.uncounted);
    a->args[0] = a->total;
    a->args[1] = a->uncounted;
    for (size_t i = 0; i < nextra; i++)
        a->args[2 + i] = extra[i];
    for (size_t i = 0; i < v->orders.cap; i++) {
        rc_order_t *o = rc_orders_at(&v->orders, i);
        const char **arg = a->args + lead + 4 * n;
        if (!o || !rc_plan_merges(o, every_order))
            continue;
        rc_plan_order_value(o, a->values[n], sizeof(a->values[n]));
        snprintf(a->held[n], sizeof(a->held[n]), "%lld", (long long)o->held_until_ms);
        arg[0] = o->order_id;
        arg[1] = a->values[n];
        arg[2] = a->held[n];
        arg[3] = o->revivable ? "1" : "0";
        n++;
    }
    a->nargs = (int)(lead + 4 * n);
    return 0;
}

/*
 * The instant the voucher's keys expire, as the gateway gives it (endsAt plus
 * the retention, common/vc_retention.h), as a script argument; "0" (none)
 * when the retention is off.
 */
static void expire_at(const rc_ctx_t *ctx, const rc_voucher_t *v, char *buf, size_t cap)
{
    int64_t at = ctx->cfg->redis_retention_ms > 0
                     ? vc_redis_expire_at(v->ends_at_ms, ctx->cfg->redis_retention_ms)
                     : 0;
    snprintf(buf, cap, "%lld", (long long)at);
}

/* Parses a repair script's "a:b" answer; both -1 when it is not one. */
static void parse_pair(const char *s, int64_t *a, int64_t *b)
{
    long long x, y;

    *a = *b = -1;
    if (sscanf(s, "%lld:%lld", &x, &y) == 2) {
        *a = x;
        *b = y;
    }
}

/* Orders, and customers' counts, per restore_stage.lua of a repair in steps: ms of Redis each. */
#define RESTORE_SLICE 1000
/*
 * Orders per restore_slice.lua of a restore in slices: it merges as many of
 * the snapshot and reads as many of the hash (HSCAN's COUNT), about 4 ms of
 * Redis a call (tests/bench/repairs.py).
 */
#define RESTORE_SLICE_READ 500
#define RESTORE_SLICE_READ_ARG "500"
/* How long staged keys outlive a reconciler that stops midway (ms, as an argument). */
#define RESTORE_STAGED_MS "600000"

static int cmp_customer(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ", in N steps" for a repair made in steps, "" for one made in one script. */
static const char *steps_text(size_t steps, char *buf, size_t cap)
{
    if (steps <= 1)
        return "";
    snprintf(buf, cap, ", in %zu steps", steps);
    return buf;
}

/* Whether Redis held any order of the voucher when the pass read it. */
static int redis_has_orders(const rc_voucher_t *v)
{
    for (size_t i = 0; i < v->orders.cap; i++) {
        const rc_order_t *o = rc_orders_at(&v->orders, i);
        if (o && o->redis_state)
            return 1;
    }
    return 0;
}

/*
 * The customers' counts of a restore's orders (a's fours, from first on):
 * every H or C order of the snapshot holds a use (one written X was H or C),
 * as "customerId", "count" pairs in *pairs; *n customers. The caller frees.
 */
static int customer_counts(const repair_args_t *a, int first, char (**pairs)[24], size_t *n)
{
    size_t norders = (size_t)(a->nargs - first) / 4, held = 0;
    int64_t *ids = calloc(norders + 1, sizeof(*ids));

    *n = 0;
    *pairs = calloc(2 * norders + 1, sizeof(**pairs));
    if (!ids || !*pairs) {
        free(ids);
        return VC_ERR_NOMEM;
    }
    for (size_t i = 0; i < norders; i++) {
        const char *value = a->args[first + 4 * i + 1];
        vc_order_value_t v;
        /*
         * Through the one strict parser (vc_order_value.h): a value it refuses
         * is a bug of rc_plan_order_value(), which wrote it, and counts nobody.
         */
        if (vc_order_value_parse(value, strlen(value), &v) == 0 &&
            (v.state == VC_STATE_HELD || v.state == VC_STATE_CONFIRMED))
            ids[held++] = v.customer_id;
    }
    qsort(ids, held, sizeof(*ids), cmp_customer);
    for (size_t i = 0, j; i < held; i = j) {
        for (j = i; j < held && ids[j] == ids[i]; j++)
            ;
        snprintf((*pairs)[2 * *n], sizeof(**pairs), "%lld", (long long)ids[i]);
        snprintf((*pairs)[2 * *n + 1], sizeof(**pairs), "%zu", j - i);
        (*n)++;
    }
    free(ids);
    return 0;
}

/*
 * A restore or rebuild in steps (proto/redis-keys.md, "A restore in steps"):
 * the orders hash lost (the counter too for a restore, kept for a rebuild),
 * more orders than --orders-scan-above. restore_stage.lua writes
 * the snapshot's orders, holds and customers' counts into staging keys of
 * this repair, RESTORE_SLICE a call, then restore_swap.lua or
 * rebuild_swap.lua puts them in place and sets the counter at one moment; no
 * script holds Redis for every order. a holds the repair's arguments (total,
 * uncounted, the extras, then the fours from first on); expire is its
 * expireAt. *status and answer are the swap's (as restore.lua's or
 * rebuild.lua's), *steps the scripts it took.
 */
static int repair_in_steps(rc_ctx_t *ctx, rc_voucher_t *v, const repair_args_t *a, int first,
                           const char *expire, int rebuild, int64_t *status, char *answer,
                           size_t answercap, size_t *steps, char *err, size_t errlen)
{
    const char *kind = rebuild ? "rebuild" : "restore";
    size_t norders = (size_t)(a->nargs - first) / 4, ncust = 0, slices = 0;
    char (*pairs)[24] = NULL, token[33], got[64], ucount[24];
    char staged[VC_RESTORING_KEY_COUNT][VC_CODE_MAX + 80], live[24], count[24];
    const char **args = calloc(3 + 2 * RESTORE_SLICE + 4 * RESTORE_SLICE, sizeof(*args));
    int64_t st = 0, nstaged = 0, taken = 0;
    rc_keys_t k;
    int rc;

    if (!args) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    if ((rc = customer_counts(a, first, &pairs, &ncust)) != 0)
        goto out;
    rc_redis_token(token);
    rc_keys_of(v->code, &k);
    for (int i = 0; i < VC_RESTORING_KEY_COUNT; i++)
        (void)vc_restoring_key(staged[i], sizeof(staged[i]), v->code, token, (vc_restoring_key_t)i);
    const char *stage_keys[] = {staged[VC_RESTORING_KEY_ORDERS], staged[VC_RESTORING_KEY_HOLDS],
                                staged[VC_RESTORING_KEY_USERS], k.name[VC_VOUCHER_KEY_RELEASING],
                                k.name[VC_VOUCHER_KEY_REMAINING]};
    for (size_t o = 0, u = 0; o < norders || u < ncust; slices++) {
        size_t no = norders - o < RESTORE_SLICE ? norders - o : RESTORE_SLICE;
        size_t nu = ncust - u < RESTORE_SLICE ? ncust - u : RESTORE_SLICE;
        int n = 0;
        long long t;
        snprintf(ucount, sizeof(ucount), "%zu", nu);
        args[n++] = rebuild ? "1" : "0";
        args[n++] = RESTORE_STAGED_MS;
        args[n++] = ucount;
        for (size_t i = 0; i < 2 * nu; i++)
            args[n++] = pairs[2 * u + i];
        for (size_t i = 0; i < 4 * no; i++)
            args[n++] = a->args[first + 4 * o + i];
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
            (rc = rc_repair_eval(ctx, kind, "voucher", v->code, no, vc_lua_rc_restore_stage, 5,
                                 stage_keys, n, args, &st, got, sizeof(got), err, errlen)) != 0)
            goto out;
        if (st < 0)
            break; /* the counter changed: the swap drops what was staged */
        nstaged += st;
        if (sscanf(got, "%lld", &t) == 1)
            taken += t;
        o += no;
        u += nu;
    }
    *steps = slices + 1;
    snprintf(live, sizeof(live), "%lld", (long long)taken);
    snprintf(count, sizeof(count), "%lld", (long long)(st < 0 ? -1 : nstaged));
    const char *swap_args[] = {a->args[0], a->args[1], live, count, expire};
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        goto out;
    if (rebuild) {
        const char *keys[] = {k.name[VC_VOUCHER_KEY_REMAINING],
                              k.name[VC_VOUCHER_KEY_USERS],
                              k.name[VC_VOUCHER_KEY_ORDERS],
                              k.name[VC_VOUCHER_KEY_HOLDS],
                              k.name[VC_VOUCHER_KEY_RELEASING],
                              k.name[VC_VOUCHER_KEY_AMOUNTS],
                              staged[VC_RESTORING_KEY_ORDERS],
                              staged[VC_RESTORING_KEY_USERS],
                              staged[VC_RESTORING_KEY_HOLDS]};
        rc = rc_repair_eval(ctx, kind, "voucher", v->code, (size_t)nstaged, vc_lua_rc_rebuild_swap,
                            9, keys, 5, swap_args, status, answer, answercap, err, errlen);
    } else {
        const char *keys[] = {k.name[VC_VOUCHER_KEY_REMAINING],
                              k.name[VC_VOUCHER_KEY_USERS],
                              k.name[VC_VOUCHER_KEY_ORDERS],
                              k.name[VC_VOUCHER_KEY_HOLDS],
                              staged[VC_RESTORING_KEY_ORDERS],
                              staged[VC_RESTORING_KEY_USERS],
                              staged[VC_RESTORING_KEY_HOLDS]};
        rc = rc_repair_eval(ctx, kind, "voucher", v->code, (size_t)nstaged, vc_lua_rc_restore_swap,
                            7, keys, 5, swap_args, status, answer, answercap, err, errlen);
    }
    if (rc == 0 && *status == VC_REPAIR_ORDERS_STATE)
        vc_warn("%s: the %s in steps found the orders hash back (or no longer told lost), or a "
                "staged order gone, at its last step: nothing written, the next pass judges the "
                "voucher again",
                v->code, kind);
out:
    free(args);
    free(pairs);
    return rc;
}

/*
 * What a restore, a retake and a lower in slices do differently
 * (repair_in_slices()): their scripts, and what each script takes beyond
 * what all take.
 */
typedef struct {
    const char *kind; /* "restore", "retake", "lower": the metric's label and the logs' word */
    const char *slice_lua, *slice_file; /* the slice's script, and its file for an error */
    int64_t slice_read;                 /* the slice's answer when it merged and read */
    int slice_users;    /* the slice takes users last (KEYS[8]): a retake refuses it back */
    int slice_now;      /* the slice takes nowMs (a's third argument) after the cursor */
    int counts_written; /* the slice answers "cursor:taken:written", the finish the sum last */
    const char *finish_lua;
} slices_form_t;

/* restore_slice.lua and restore_finish.lua: the counter lost. */
static const slices_form_t restore_slices = {
    .kind = "restore",
    .slice_lua = vc_lua_rc_restore_slice,
    .slice_file = "restore_slice.lua",
    .slice_read = VC_RESTORE_SLICE_READ,
    .slice_now = 1,
    .finish_lua = vc_lua_rc_restore_finish,
};

/* retake_slice.lua and retake_finish.lua: the users hash lost. */
static const slices_form_t retake_slices = {
    .kind = "retake",
    .slice_lua = vc_lua_rc_retake_slice,
    .slice_file = "retake_slice.lua",
    .slice_read = VC_RETAKE_SLICE_READ,
    .slice_users = 1,
    .counts_written = 1,
    .finish_lua = vc_lua_rc_retake_finish,
};

/*
 * lower_slice.lua and lower_finish.lua: the counter above the rule's bound.
 * A slice only counts (a's arguments are total and uncounted alone: no fours
 * to merge), the finish lowers.
 */
static const slices_form_t lower_slices = {
    .kind = "lower",
    .slice_lua = vc_lua_rc_lower_slice,
    .slice_file = "lower_slice.lua",
    .slice_read = VC_LOWER_SLICE_READ,
    .finish_lua = vc_lua_rc_lower_finish,
};

/*
 * A restore, a retake or a lower in slices (proto/redis-keys.md, "A restore
 * in slices", "A retake in slices", "A lower in slices"): the counter lost
 * (restore), the users hash lost (retake) or the counter above the rule's
 * bound (lower), the orders hash kept, more orders than --orders-scan-above.
 * scan_begin.lua puts this repair's token in the voucher's scan key, so that
 * every order a script writes from then on is noted in touched; the form's
 * slice (restore_slice.lua, retake_slice.lua, lower_slice.lua), a call at a
 * time, merges RESTORE_SLICE_READ of the snapshot's orders (a's fours, from
 * first on; a lower has none) and reads the next piece of the orders hash
 * (HSCAN), copying what it read into the staged orders and counting the
 * customers' uses into the staged users (a lower counts only the uses); the
 * form's finish (restore_finish.lua, retake_finish.lua, lower_finish.lua)
 * counts again what was written since and, at one moment, sets the counter
 * (restore), puts the counts in place and lowers the counter (retake) or
 * lowers it (lower), or gives up (the next pass judges again). No script holds
 * Redis for more than RESTORE_SLICE_READ orders plus the orders written during
 * the repair. a holds the one script's arguments (restore.lua's: total,
 * uncounted, nowMs, expireAt; retake.lua's: total, uncounted, expireAt; then
 * the fours; lower.lua's: total, uncounted); the finish takes total,
 * uncounted, the uses the slices counted, the same extras, the token (and for
 * a retake the orders the slices wrote). *status and answer are the finish's
 * (as the one script's), *steps the scripts it took.
 */
static int repair_in_slices(rc_ctx_t *ctx, rc_voucher_t *v, const slices_form_t *form,
                            const repair_args_t *a, int first, int64_t *status, char *answer,
                            size_t answercap, size_t *steps, char *err, size_t errlen)
{
    size_t norders = (size_t)(a->nargs - first) / 4, slices = 0;
    char staged[VC_RESTORING_KEY_COUNT][VC_CODE_MAX + 80], token[33], cursor[64] = "0";
    char got[96], live[24], merged[24];
    const char **args = calloc(5 + 4 * RESTORE_SLICE_READ, sizeof(*args));
    int64_t st = 0, taken = 0, written = 0;
    rc_keys_t k;
    int rc;

    if (!args)
        return VC_ERR_NOMEM;
    rc_redis_token(token);
    rc_keys_of(v->code, &k);
    for (int i = 0; i < VC_RESTORING_KEY_COUNT; i++)
        (void)vc_restoring_key(staged[i], sizeof(staged[i]), v->code, token, (vc_restoring_key_t)i);
    /* The notes begin before the first slice: every write after it is in touched. */
    const char *begin_keys[] = {k.name[VC_VOUCHER_KEY_ORDERS], k.name[VC_VOUCHER_KEY_SCAN],
                                k.name[VC_VOUCHER_KEY_TOUCHED]};
    const char *begin_args[] = {token, "-1", RESTORE_STAGED_MS};
    if ((rc = rc_repair_eval(ctx, form->kind, "voucher", v->code, 0, vc_lua_scan_begin, 3,
                             begin_keys, 3, begin_args, &st, got, sizeof(got), err, errlen)) != 0)
        goto out;
    const char *slice_keys[] = {k.name[VC_VOUCHER_KEY_REMAINING], k.name[VC_VOUCHER_KEY_ORDERS],
                                k.name[VC_VOUCHER_KEY_HOLDS],     k.name[VC_VOUCHER_KEY_RELEASING],
                                k.name[VC_VOUCHER_KEY_SCAN],      staged[VC_RESTORING_KEY_ORDERS],
                                staged[VC_RESTORING_KEY_USERS],   k.name[VC_VOUCHER_KEY_USERS]};
    int nslice_keys = form->slice_users ? 8 : 7;
    for (size_t o = 0; o < norders || cursor[0]; slices++) {
        size_t no = norders - o < RESTORE_SLICE_READ ? norders - o : RESTORE_SLICE_READ;
        char *colon;
        long long t, w = 0;
        int n = 0;
        args[n++] = token;
        args[n++] = cursor;
        if (form->slice_now)
            args[n++] = a->args[2]; /* nowMs */
        args[n++] = RESTORE_STAGED_MS;
        args[n++] = RESTORE_SLICE_READ_ARG;
        for (size_t i = 0; i < 4 * no; i++)
            args[n++] = a->args[first + 4 * o + i];
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
            (rc = rc_repair_eval(ctx, form->kind, "voucher", v->code, no, form->slice_lua,
                                 nslice_keys, slice_keys, n, args, &st, got, sizeof(got), err,
                                 errlen)) != 0)
            goto out;
        if (st != form->slice_read)
            break; /* refused: the finish refuses too, and drops what was staged */
        if (!(colon = strchr(got, ':')) ||
            sscanf(colon + 1, "%lld:%lld", &t, &w) < (form->counts_written ? 2 : 1) ||
            (size_t)(colon - got) >= sizeof(cursor)) {
            snprintf(err, errlen, "%s of %s: unexpected answer", form->slice_file, v->code);
            rc = VC_ERR_PROTOCOL;
            goto out;
        }
        taken += t;
        written += w;
        o += no;
        /* "0": HSCAN came back to the start, the whole hash read; "": no read asked. */
        if (cursor[0] && memcmp(got, "0:", 2) == 0)
            cursor[0] = '\0';
        else if (cursor[0])
            snprintf(cursor, sizeof(cursor), "%.*s", (int)(colon - got), got);
    }
    *steps = slices + 2;
    snprintf(live, sizeof(live), "%lld", (long long)taken);
    snprintf(merged, sizeof(merged), "%lld", (long long)written);
    const char *finish_keys[] = {k.name[VC_VOUCHER_KEY_REMAINING], k.name[VC_VOUCHER_KEY_USERS],
                                 k.name[VC_VOUCHER_KEY_ORDERS],    k.name[VC_VOUCHER_KEY_HOLDS],
                                 k.name[VC_VOUCHER_KEY_RELEASING], k.name[VC_VOUCHER_KEY_SCAN],
                                 k.name[VC_VOUCHER_KEY_TOUCHED],   staged[VC_RESTORING_KEY_ORDERS],
                                 staged[VC_RESTORING_KEY_USERS]};
    const char *finish_args[7] = {a->args[0], a->args[1], live};
    int nfinish = 3;
    for (int i = 2; i < first; i++)
        finish_args[nfinish++] = a->args[i]; /* the extras: nowMs, expireAt */
    finish_args[nfinish++] = token;
    if (form->counts_written)
        finish_args[nfinish++] = merged;
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        goto out;
    rc = rc_repair_eval(ctx, form->kind, "voucher", v->code, v->orders.len, form->finish_lua, 9,
                        finish_keys, nfinish, finish_args, status, answer, answercap, err, errlen);
out:
    free(args);
    return rc;
}

/* Whether a restore of a voucher whose Redis still holds orders goes in slices. */
static int in_slices(const rc_ctx_t *ctx, const rc_voucher_t *v)
{
    return ctx->cfg->orders_scan_above >= 0 && redis_has_orders(v) &&
           v->orders.len > (size_t)ctx->cfg->orders_scan_above;
}

/* Whether a repair of a's orders (from first on) goes in steps: see repair_in_steps(). */
static int in_steps(const rc_ctx_t *ctx, const rc_voucher_t *v, const repair_args_t *a, int first)
{
    return ctx->cfg->orders_scan_above >= 0 &&
           (a->nargs - first) / 4 > ctx->cfg->orders_scan_above && !redis_has_orders(v);
}

/*
 * Redis lost the voucher's counter: rebuild it, merging PostgreSQL plus the
 * events in flight into the orders Redis still holds (restore.lua), or, the
 * orders hash lost too and larger than --orders-scan-above, in steps.
 */
static int restore(rc_ctx_t *ctx, rc_voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    repair_args_t a;
    rc_keys_t k;
    char now[24], expire[24], answer[64], what[200], many[40];
    int64_t status = 0, live, remaining;
    size_t steps = 1;
    int sliced = 0;
    int rc;

    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    expire_at(ctx, v, expire, sizeof(expire));
    const char *extra[] = {now, expire};
    if ((rc = repair_args(v, 1, extra, 2, &a)) != 0)
        goto out;
    if (in_steps(ctx, v, &a, 4)) {
        rc = repair_in_steps(ctx, v, &a, 4, expire, 0, &status, answer, sizeof(answer), &steps,
                             err, errlen);
    } else if (in_slices(ctx, v)) {
        rc = repair_in_slices(ctx, v, &restore_slices, &a, 4, &status, answer, sizeof(answer),
                              &steps, err, errlen);
        sliced = 1;
        if (rc == 0 && (status == VC_REPAIR_ORDERS_STATE || status == VC_REPAIR_NOTES_LOST))
            vc_warn("%s: the restore in slices found the orders hash changed without a note, or "
                    "its notes of what was written meanwhile lost, at its last step: nothing "
                    "written, the next pass judges the voucher again",
                    v->code);
    } else {
        rc_keys_of(v->code, &k);
        const char *keys[VC_RESTORE_NKEYS];
        rc_script_keys(&k, vc_restore_keys, VC_RESTORE_NKEYS, keys);
        rc = rc_repair_eval(ctx, "restore", "voucher", v->code, v->orders.len, vc_lua_rc_restore,
                            VC_RESTORE_NKEYS, keys, a.nargs, a.args, &status, answer,
                            sizeof(answer), err, errlen);
    }
    if (rc == 0 && status == VC_RESTORE_RESTORED) {
        parse_pair(answer, &live, &remaining);
        sum->restored++;
        if (sliced)
            snprintf(what, sizeof(what),
                     "restored a lost counter from PostgreSQL, the events in flight and the "
                     "orders Redis still holds, read in slices%s",
                     steps_text(steps, many, sizeof(many)));
        else if (steps > 1)
            snprintf(what, sizeof(what),
                     "restored a lost counter and orders hash from PostgreSQL and the events in "
                     "flight%s",
                     steps_text(steps, many, sizeof(many)));
        else
            snprintf(what, sizeof(what), "%s",
                     "restored a lost counter from PostgreSQL, the events in flight and the "
                     "orders Redis still holds");
        log_repair(v, "restore", what, live, -1, remaining);
    }
out:
    repair_args_free(&a);
    return rc;
}

/*
 * Whether a retake goes in slices: the pass found the users hash missing
 * beside the orders (reserve.lua then takes no use, so the counts can be read
 * in slices and put in place at once) on a voucher above --orders-scan-above.
 */
static int retake_sliced(const rc_ctx_t *ctx, const rc_voucher_t *v)
{
    return in_slices(ctx, v) && v->n.redis_users == 0;
}

/*
 * Writes again the orders PostgreSQL counts that Redis lost (or gave back,
 * where revivable), then lowers the counter to the rule's bound (retake.lua),
 * or, the users hash lost on a voucher above --orders-scan-above, in slices.
 */
static int retake(rc_ctx_t *ctx, rc_voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    repair_args_t a;
    rc_keys_t k;
    char expire[24], answer[64], what[200], many[40];
    int64_t status = 0, before, after;
    size_t steps = 1;
    int rc;

    expire_at(ctx, v, expire, sizeof(expire));
    const char *extra[] = {expire};
    if ((rc = repair_args(v, 0, extra, 1, &a)) != 0)
        goto out;
    if (retake_sliced(ctx, v)) {
        rc = repair_in_slices(ctx, v, &retake_slices, &a, 3, &status, answer, sizeof(answer),
                              &steps, err, errlen);
        if (rc == 0 && status < 0)
            vc_warn("%s: the retake in slices found at its last step the counter gone, the orders "
                    "hash lost or changed without a note, the users hash written again, or its "
                    "notes of what was written meanwhile lost (answer %lld): nothing written, the "
                    "next pass judges the voucher again",
                    v->code, (long long)status);
    } else {
        rc_keys_of(v->code, &k);
        const char *keys[VC_RETAKE_NKEYS];
        rc_script_keys(&k, vc_retake_keys, VC_RETAKE_NKEYS, keys);
        rc = rc_repair_eval(ctx, "retake", "voucher", v->code, v->orders.len, vc_lua_rc_retake,
                            VC_RETAKE_NKEYS, keys, a.nargs, a.args, &status, answer, sizeof(answer),
                            err, errlen);
    }
    if (rc != 0 || status < 0) {
        if (rc == 0 && status == VC_REPAIR_ORDERS_STATE)
            vc_warn("%s: the orders hash was lost since this pass read it: the retake wrote "
                    "nothing, the next pass rebuilds it",
                    v->code);
        goto out;
    }
    /* Taken again: the next pass must see them R anew before they count as revivable. */
    rc_plan_after_retake(v);
    parse_pair(answer, &before, &after);
    if (status > 0 || after < before) {
        sum->retaken += status;
        sum->lowered += after < before;
        log_repair(v, "retake", "took uses again that PostgreSQL counts and Redis lost", status,
                   before, after);
    }
    if (v->n.users_missing > 0) {
        snprintf(what, sizeof(what),
                 "counted again the uses of customers Redis's users hash lost%s%s",
                 steps > 1 ? ", read in slices" : "", steps_text(steps, many, sizeof(many)));
        log_repair(v, "users", what, v->n.users_missing, before, after);
    }
out:
    repair_args_free(&a);
    return rc;
}

/*
 * The orders hash lost, the counter kept: writes every order the snapshot
 * knows (released ones too), sets the counter and each customer's count to
 * what they hold (rebuild.lua). The plan waited a restore delay since the
 * loss was first seen, and reserve.lua took nothing since.
 */
static int rebuild(rc_ctx_t *ctx, rc_voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    repair_args_t a;
    rc_keys_t k;
    char expire[24], answer[64], what[240], many[40];
    int64_t status = 0, before, after;
    size_t steps = 1;
    int rc;

    expire_at(ctx, v, expire, sizeof(expire));
    const char *extra[] = {expire};
    if ((rc = repair_args(v, 1, extra, 1, &a)) != 0)
        goto out;
    if (in_steps(ctx, v, &a, 3)) {
        rc = repair_in_steps(ctx, v, &a, 3, expire, 1, &status, answer, sizeof(answer), &steps,
                             err, errlen);
    } else {
        rc_keys_of(v->code, &k);
        const char *keys[VC_REBUILD_NKEYS];
        rc_script_keys(&k, vc_rebuild_keys, VC_REBUILD_NKEYS, keys);
        rc = rc_repair_eval(ctx, "rebuild", "voucher", v->code, v->orders.len, vc_lua_rc_rebuild,
                            VC_REBUILD_NKEYS, keys, a.nargs, a.args, &status, answer,
                            sizeof(answer), err, errlen);
    }
    if (rc != 0 || status < 0)
        goto out;
    parse_pair(answer, &before, &after);
    sum->retaken += status;
    sum->lowered += after < before;
    snprintf(what, sizeof(what),
             "wrote again a lost orders hash from PostgreSQL and the events in flight, released "
             "orders included, and set the counter and the customers' counts to it%s",
             steps_text(steps, many, sizeof(many)));
    log_repair(v, "rebuild", what, status, before, after);
    v->mem->orders_lost_since_ms = 0;
out:
    repair_args_free(&a);
    return rc;
}

/*
 * Lowers a counter above the rule's bound, recounting Redis's orders as it
 * does (lower.lua), or, on a voucher whose Redis held more orders than
 * --orders-scan-above, in slices (lower_slice.lua, lower_finish.lua): the
 * same bound from the orders as they are at the finish.
 */
static int lower(rc_ctx_t *ctx, rc_voucher_t *v, rc_summary_t *sum, char *err, size_t errlen)
{
    char total[24], uncounted[24], answer[64], what[160], many[40];
    int64_t status = 0, before, after;
    size_t steps = 1;
    rc_keys_t k;
    int rc;

    rc_keys_of(v->code, &k);
    snprintf(total, sizeof(total), "%lld", (long long)v->n.total_limit);
    snprintf(uncounted, sizeof(uncounted), "%lld", (long long)v->n.uncounted);
    const char *args[] = {total, uncounted};
    if (in_slices(ctx, v)) {
        /* Borrowed: no fours to merge, so nothing to free. */
        const repair_args_t a = {.args = args, .nargs = 2};
        rc = repair_in_slices(ctx, v, &lower_slices, &a, 2, &status, answer, sizeof(answer), &steps,
                              err, errlen);
        if (rc == 0 && status < 0)
            vc_warn("%s: the lower in slices found at its last step the counter gone, the orders "
                    "hash changed without a note, or its notes of what was written meanwhile "
                    "lost (answer %lld): nothing written, the next pass judges the voucher again",
                    v->code, (long long)status);
    } else {
        const char *keys[VC_LOWER_NKEYS];
        rc_script_keys(&k, vc_lower_keys, VC_LOWER_NKEYS, keys);
        rc = rc_repair_eval(ctx, "lower", "voucher", v->code, v->orders.len, vc_lua_rc_lower,
                            VC_LOWER_NKEYS, keys, 2, args, &status, answer, sizeof(answer), err,
                            errlen);
    }
    if (rc == 0 && status == VC_LOWER_LOWERED) {
        parse_pair(answer, &before, &after);
        sum->lowered++;
        snprintf(what, sizeof(what),
                 "lowered a counter that offered more uses than the remaining rule allows%s%s",
                 steps > 1 ? ", its orders read in slices" : "",
                 steps_text(steps, many, sizeof(many)));
        log_repair(v, "lower", what, before - after, before, after);
    }
    return rc;
}

/* rc_repair.h */
int rc_repair_releases(rc_ctx_t *ctx, rc_releases_t *rs, rc_summary_t *sum, char *err,
                       size_t errlen)
{
    vc_event_t *events;
    int *delivered;
    int rc = 0;

    if (rs->len == 0)
        return 0;
    events = calloc(rs->len, sizeof(*events));
    delivered = calloc(rs->len, sizeof(*delivered));
    if (!events || !delivered) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < rs->len; i++)
        events[i] = rs->items[i].ev;
    /* After a publish of this pass Kafka did not acknowledge, none: they stay begun. */
    if (rc_ctx_publish_ok(ctx) &&
        (rc = rc_kafka_publish(ctx->kafka, events, (int)rs->len, delivered, ctx->cfg->timeout_ms,
                               err, errlen)) != 0)
        goto out;
    rc_ctx_published(ctx, delivered, (int)rs->len);
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        goto out;
    for (size_t i = 0; i < rs->len && rc == 0; i++) {
        rc_release_item_t *r = &rs->items[i];
        rc_keys_t k;
        int64_t status;
        if (delivered[i] != 1)
            continue; /* still X or E: the next pass publishes again */
        rc_keys_of(r->v->code, &k);
        const char *keys[VC_RELEASE_FINISH_NKEYS];
        const char *args[] = {r->ev.order_id};
        rc_script_keys(&k, vc_release_finish_keys, VC_RELEASE_FINISH_NKEYS, keys);
        if ((rc = rc_redis_eval(ctx->redis, vc_lua_rc_release_finish, VC_RELEASE_FINISH_NKEYS, keys,
                                1, args, &status, NULL, 0, err, errlen)) == 0 &&
            status == VC_RELEASE_FINISH_GIVEN_BACK) {
            sum->finished++;
            if (strcmp(r->ev.reason, "EXPIRED") == 0)
                vc_metric_add(vc_counter("voucher_reconciler_holds_expired_total",
                                         "Unpaid holds given back after their heldUntil", NULL),
                              1);
        }
    }
    /* One line per voucher, with the counts before and after. */
    for (size_t i = 0; i < rs->len; i++) {
        rc_voucher_t *v = rs->items[i].v;
        int64_t n = 0, failed = 0, rem;
        int loaded;
        if (i > 0 && rs->items[i - 1].v == v)
            continue;
        for (size_t j = i; j < rs->len && rs->items[j].v == v; j++) {
            n += delivered[j] == 1;
            failed += delivered[j] != 1;
        }
        if (rc_redis_remaining(ctx->redis, v->code, &loaded, &rem, err, errlen) != 0)
            rem = -1;
        log_repair(v, "release", "released expired, stranded or cancelled holds", n, v->n.redis_remaining, rem);
        if (failed)
            vc_warn("%s: %lld releases not published or not acknowledged by Kafka; they stay "
                    "begun and are published again next pass",
                    v->code, (long long)failed);
    }
out:
    free(events);
    free(delivered);
    return rc;
}

int rc_repair_voucher(rc_ctx_t *ctx, rc_voucher_t *v, const rc_plan_t *plan, int64_t snapshot_ms,
                      rc_releases_t *rs, rc_summary_t *sum, char *err, size_t errlen)
{
    int rc = 0;

    for (size_t i = 0; i < plan->len && rc == 0; i++) {
        const rc_action_t *a = &plan->items[i];
        size_t n = rs->len;

        switch (a->kind) {
        case RC_ACT_AWAIT_RESTORE:
            sum->awaiting_restore++;
            break;
        case RC_ACT_RESTORE:
            if ((rc = restore(ctx, v, sum, err, errlen)) == 0)
                v->mem->missing_since_ms = 0;
            break;
        case RC_ACT_RETAKE:
            rc = retake(ctx, v, sum, err, errlen);
            break;
        case RC_ACT_REBUILD:
            rc = rebuild(ctx, v, sum, err, errlen);
            break;
        case RC_ACT_LOWER:
            rc = lower(ctx, v, sum, err, errlen);
            break;
        case RC_ACT_RESUME_DUE: {
            due_t d = {ctx, v, snapshot_ms, rs, 0, err, errlen};
            if ((rc = rc_redis_due(ctx->redis, v->code, VC_VOUCHER_KEY_RELEASING,
                                   vc_time_now_ms() - ctx->cfg->grace_ms, ctx->cfg->batch, due_cb,
                                   &d, err, errlen)) == 0)
                rc = d.rc;
            break;
        }
        case RC_ACT_RELEASE:
            /* Kafka took none of this pass's publishes: not begun, the next pass decides. */
            if (!rc_ctx_publish_ok(ctx))
                break;
            rc = begin_release(ctx, v, a->order, a->why, a->reason, snapshot_ms, rs, err, errlen);
            if (strcmp(a->why, "expire") == 0)
                sum->expired += (int64_t)(rs->len - n);
            else if (strcmp(a->why, "undelivered") == 0)
                sum->stranded += (int64_t)(rs->len - n);
            else if (strcmp(a->reason, "DISCARDED") == 0)
                sum->discarded += (int64_t)(rs->len - n);
            break;
        case RC_ACT_CONFIRM:
            rc = repair_confirmed(ctx, v, a->order, sum, err, errlen);
            break;
        case RC_ACT_PUBLISH_CONFIRM:
            rc = rc_repair_publish_confirm(ctx, v->code, 0, a->order, sum, err, errlen);
            break;
        case RC_ACT_COUNT:
            break;
        }
    }
    return rc;
}
