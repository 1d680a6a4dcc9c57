/*
 * Unit tests for the reconciler's planner (rc_plan.c) and its JSON form
 * (rc_plan_json.c, `voucher-reconciler plan`): a voucher as one pass read it
 * in, the verdict and the repairs out, in order. No server.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "rc_plan.h"
#include "rc_plan_json.h"
#include "rc_wave.h"
#include "vc_error.h"
#include "vc_json.h"

#define NOW 10000000
#define GRACE 30000

/*
 * One order of a case: "id:redis:pg:heldUntil[:event]" where redis is H C X
 * E R or '-' (Redis has none), pg is - R C X (no row, RESERVED, CONFIRMED,
 * RELEASED); heldUntil is relative to NOW; event, when given, is an event of
 * the order in flight: R C X (VoucherReserved, VoucherConfirmed,
 * VoucherReleased).
 */
typedef struct {
    const char *name;
    int64_t total, used, remaining; /* remaining < 0: Redis lost the counter */
    const char *orders[6];
    const char *first_seen;   /* an orderId remembered unsent since NOW - 2 * GRACE, or NULL */
    const char *seen_released; /* an orderId the last full read saw R and live, or NULL */
    int64_t missing_since;    /* memory: counter first seen missing at NOW - this (0: never) */
    rc_verdict_t verdict;
    const char *repairs;      /* the plan: kinds, with the orderId and why of each release */
} plan_case_t;

static const plan_case_t cases[] = {
    {"consistent: nothing to repair but the resumes",
     10, 2, 8, {"a:H:R:60000", "b:C:C:60000"}, NULL, NULL, 0, RC_CONSISTENT, "resume-due"},
    {"held past heldUntil and the grace: expired",
     10, 1, 9, {"a:H:R:-40000"}, NULL, NULL, 0, RC_CONSISTENT, "resume-due release(a,expire)"},
    {"held past heldUntil within the grace: left alone",
     10, 1, 9, {"a:H:R:-10000"}, NULL, NULL, 0, RC_CONSISTENT, "resume-due"},
    {"held, confirmed in PostgreSQL: confirmed in Redis, never expired",
     10, 1, 9, {"a:H:C:-40000"}, NULL, NULL, 0, RC_CONSISTENT, "resume-due confirm(a)"},
    {"held, released in PostgreSQL: cancelled",
     10, 0, 9, {"a:H:X:60000"}, NULL, NULL, 0, RC_UNDERSOLD, "resume-due release(a,cancel)"},
    {"unsent, first seen a grace ago: undelivered",
     10, 0, 9, {"a:H:-:60000"}, "a", NULL, 0, RC_UNDERSOLD, "resume-due release(a,undelivered)"},
    {"unsent, first seen now: fresh, left alone",
     10, 0, 9, {"a:H:-:60000"}, NULL, NULL, 0, RC_BEHIND, "resume-due"},
    {"lost from Redis, counted in PostgreSQL: taken again",
     10, 2, 8, {"a:H:R:60000", "b:-:C:60000"}, NULL, NULL, 0, RC_DRIFTED, "retake resume-due"},
    {"counter above the bound: lowered",
     10, 1, 12, {"a:H:R:60000"}, NULL, NULL, 0, RC_DRIFTED, "lower resume-due"},
    {"counter lost, missing long enough: restored",
     10, 1, -1, {"a:-:R:60000"}, NULL, NULL, 20000, RC_NOT_LOADED, "restore"},
    {"given back in Redis, counted in the snapshot, seen so once: a release too young to show",
     10, 1, 10, {"a:R:R:60000"}, NULL, NULL, 0, RC_BEHIND, "resume-due"},
    {"given back in Redis, counted in the snapshot, seen so by the last pass too: taken again",
     10, 1, 10, {"a:R:R:60000"}, NULL, "a", 0, RC_DRIFTED, "retake resume-due"},
    {"released downstream, no order in Redis (rolled back): written again as released",
     10, 1, 9, {"a:H:R:60000", "b:-:X:60000"}, NULL, NULL, 0, RC_CONSISTENT, "retake resume-due"},
    {"counter lost just now: waits out the restore delay",
     10, 1, -1, {"a:-:R:60000"}, NULL, NULL, 0, RC_NOT_LOADED, "await-restore"},
    {"confirmed in Redis, reserved after the events in flight, a grace past heldUntil: the "
     "confirm's lost event published",
     10, 1, 9, {"a:C:R:-30000"}, NULL, NULL, 0, RC_UNDERSOLD, "resume-due publish-confirm(a)"},
    {"confirmed in Redis, reserved, heldUntil + grace not passed: its confirm may still come",
     10, 1, 9, {"a:C:R:-29999"}, NULL, NULL, 0, RC_BEHIND, "resume-due"},
    {"confirmed in Redis, reserved with its VoucherConfirmed in flight: nothing to publish",
     10, 1, 9, {"a:C:R:-40000:C"}, NULL, NULL, 0, RC_BEHIND, "resume-due"},
};

/*
 * No orders hash in Redis, nor users nor amounts (lost together, or never
 * written): the counter against Redis's limit key (-1: absent) and outside
 * key (the uses it holds back for no order) tells a loss (proto/redis-keys.md,
 * "A lost orders hash").
 */
static const struct {
    plan_case_t c;
    int64_t limit_key, outside;
} lost_cases[] = {
    {{"orders, users and amounts lost, the counter below its limit key: rebuilt after the delay, "
      "never a retake that only lowers",
      10, 2, 8, {"a:-:R:60000", "b:-:C:60000"}, NULL, NULL, 0, RC_DRIFTED, "await-restore"},
     10, 0},
    {{"the counter below its limit key by the uses it holds back (without rows): nothing lost",
      10, 3, 7, {NULL}, NULL, NULL, 0, RC_USED_WITHOUT_ROWS, "resume-due"},
     10, 3},
    {{"the counter below its limit key by more than it holds back: lost",
      10, 3, 6, {"a:-:R:60000"}, NULL, NULL, 0, RC_DRIFTED, "await-restore"},
     10, 2},
    {{"no limit key (loaded before limit keys): not told lost, retaken",
      10, 1, 9, {"a:-:R:60000"}, NULL, NULL, 0, RC_DRIFTED, "retake resume-due"},
     -1, 0},
};

static vc_rd_status_t pg_of(char c)
{
    return c == 'R' ? VC_RD_RESERVED : c == 'C' ? VC_RD_CONFIRMED : c == 'X' ? VC_RD_RELEASED
                                                                            : VC_RD_NONE;
}

/* The plan as one line: "kind kind(order,why) ...". */
static void describe(const rc_plan_t *p, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < p->len && len < cap; i++) {
        const rc_action_t *a = &p->items[i];
        const char *sep = i ? " " : "";
        if (a->kind == RC_ACT_RELEASE)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s(%s,%s)", sep,
                                    rc_action_name(a->kind), a->order->order_id, a->why);
        else if (a->kind == RC_ACT_CONFIRM || a->kind == RC_ACT_PUBLISH_CONFIRM)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s(%s)", sep, rc_action_name(a->kind),
                                    a->order->order_id);
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", sep, rc_action_name(a->kind));
    }
}

/*
 * One voucher in vs (freed by the caller with rc_vouchers_free()), read in
 * full, with its memory mem: total_limit, used_count, and Redis's counter
 * (remaining < 0: Redis lost it).
 */
static rc_voucher_t *voucher(rc_vouchers_t *vs, rc_memory_entry_t *mem, int64_t total,
                             int64_t used, int64_t remaining)
{
    rc_voucher_t *v;

    ck_assert_int_eq(rc_vouchers_alloc(vs, 1), 0);
    v = &vs->v[0];
    strcpy(v->code, "SALE");
    v->mem = mem;
    v->full = 1;
    v->claimed = 1;
    v->n.total_limit = total;
    v->n.used_count = used;
    v->n.redis_loaded = remaining >= 0;
    v->n.redis_remaining = remaining >= 0 ? remaining : 0;
    v->n.redis_users = -1;
    v->n.redis_limit = -1;
    return v;
}

/*
 * Adds to v the order spec describes, "id:redis:pg:heldInMs[:flying]": redis a
 * state letter or '-'; pg R reserved, C confirmed, X released or '-'; flying
 * the type of an event of it in flight (R reserved, C confirmed, anything else
 * released), which is added to vs. Returns the order.
 */
static rc_order_t *add_order(rc_vouchers_t *vs, rc_voucher_t *v, const char *spec)
{
    char id[16], redis, pg, flying = 0;
    long long held;
    rc_order_t *o;

    ck_assert_int_ge(sscanf(spec, "%15[^:]:%c:%c:%lld:%c", id, &redis, &pg, &held, &flying), 4);
    ck_assert_ptr_nonnull(o = rc_orders_get(&v->orders, id));
    o->customer_id = 7;
    o->held_until_ms = o->redis_held_until_ms = NOW + held;
    o->redis_state = redis == '-' ? 0 : redis;
    o->pg = o->pg_after = pg_of(pg);
    if (flying) {
        vc_event_t ev = {.type = flying == 'R'   ? VC_EV_RESERVED
                                 : flying == 'C' ? VC_EV_CONFIRMED
                                                 : VC_EV_RELEASED,
                         .customer_id = 7};
        strcpy(ev.code, v->code);
        strcpy(ev.order_id, id);
        rc_vouchers_add_event(vs, &ev);
        ck_assert_int_eq(vs->nomem, 0);
    }
    return o;
}

/* Remembers order_id of v as first seen unsent two graces ago, in its present state. */
static void first_seen_long_ago(rc_memory_entry_t *mem, rc_voucher_t *v, const char *order_id)
{
    rc_order_t *seen = rc_orders_get(&mem->seen, order_id);
    const rc_order_t *o = rc_orders_find(&v->orders, order_id);

    seen->first_unsent_ms = NOW - 2 * GRACE;
    seen->redis_state = o->redis_state;
    seen->redis_held_until_ms = o->redis_held_until_ms;
}

/* Judges and plans case c with Redis's limit key (-1: absent) and outside key. */
static void check_plan(const plan_case_t *c, int64_t limit_key, int64_t outside)
{
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_plan_config_t cfg = {GRACE, 10000, 1000};
    rc_plan_t plan = {0};
    rc_voucher_t *v;
    char got[256];

    v = voucher(&vs, &mem, c->total, c->used, c->remaining);
    v->n.redis_limit = limit_key;
    v->n.redis_outside = outside;
    mem.missing_since_ms = c->missing_since ? NOW - c->missing_since : 0;
    for (size_t i = 0; i < 6 && c->orders[i]; i++)
        v->n.live_rows += vc_rd_counts(add_order(&vs, v, c->orders[i])->pg);
    if (c->first_seen)
        first_seen_long_ago(&mem, v, c->first_seen);
    if (c->seen_released)
        rc_orders_get(&mem.released_seen, c->seen_released)->redis_state = 'R';
    ck_assert_int_eq(rc_plan_replay(v), 0);
    ck_assert_int_eq(rc_plan_judge_full(v, NOW, 1, GRACE), 0);
    ck_assert_msg(v->verdict == c->verdict, "%s: verdict %s, want %s", c->name,
                  rc_verdict_name(v->verdict), rc_verdict_name(c->verdict));
    ck_assert_int_eq(rc_plan_repairs(v, &cfg, NOW, NOW, &plan), 0);
    describe(&plan, got, sizeof(got));
    ck_assert_msg(strcmp(got, c->repairs) == 0, "%s: planned \"%s\", want \"%s\"", c->name, got,
                  c->repairs);
    rc_plan_free(&plan);
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}

START_TEST(plans_from_the_table)
{
    check_plan(&cases[_i], -1, 0);
}
END_TEST

START_TEST(plans_for_a_lost_orders_hash)
{
    check_plan(&lost_cases[_i].c, lost_cases[_i].limit_key, lost_cases[_i].outside);
}
END_TEST

/*
 * The plan of one voucher at now_ms for a pass whose snapshot was read at
 * snapshot_ms, as one line (describe()); judged again each time, as a pass does.
 */
static void plan_at(rc_voucher_t *v, const rc_plan_config_t *cfg, int64_t now_ms,
                    int64_t snapshot_ms, char *got, size_t cap)
{
    rc_plan_t plan = {0};

    ck_assert_int_eq(rc_plan_judge_full(v, now_ms, 1, GRACE), 0);
    ck_assert_int_eq(rc_plan_repairs(v, cfg, now_ms, snapshot_ms, &plan), 0);
    describe(&plan, got, cap);
    rc_plan_free(&plan);
}

/*
 * The orders hash lost, the counter kept (users or amounts still there): the
 * voucher is DRIFTED and rebuilt, released orders included, only from a
 * snapshot read a restore delay after the loss was first seen; nothing else
 * is planned for it meanwhile (a retake would write the live orders only).
 */
START_TEST(lost_orders_are_rebuilt_after_the_delay)
{
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_plan_config_t cfg = {GRACE, 10000, 1000};
    rc_voucher_t *v;
    rc_order_t *o;
    char got[256];

    v = voucher(&vs, &mem, 10, 1, 8);
    v->n.live_rows = 1;
    v->n.redis_users = 1;
    o = rc_orders_get(&v->orders, "held");
    o->customer_id = 7;
    o->held_until_ms = NOW + 60000;
    o->pg = o->pg_after = VC_RD_RESERVED;
    o = rc_orders_get(&v->orders, "cancelled");
    o->customer_id = 7;
    o->held_until_ms = NOW + 60000;
    o->pg = o->pg_after = VC_RD_RELEASED;
    plan_at(v, &cfg, NOW, NOW - 5, got, sizeof(got));
    ck_assert_int_eq(v->n.orders_lost, 1);
    ck_assert_str_eq(rc_verdict_name(v->verdict), "DRIFTED");
    ck_assert_str_eq(got, "await-restore");
    ck_assert_int_eq(mem.orders_lost_since_ms, NOW);
    /* Later, but from a snapshot read before the delay passed: still waiting. */
    plan_at(v, &cfg, NOW + 20000, NOW + 9999, got, sizeof(got));
    ck_assert_str_eq(got, "await-restore");
    plan_at(v, &cfg, NOW + 20000, NOW + 10000, got, sizeof(got));
    ck_assert_str_eq(got, "rebuild");
    /* amounts alone tells the loss as well (users lost with orders). */
    v->n.redis_users = 0;
    v->n.redis_amounts = 1;
    plan_at(v, &cfg, NOW + 20000, NOW + 10000, got, sizeof(got));
    ck_assert_str_eq(got, "rebuild");
    /* Neither: a voucher with no order in Redis yet, nothing lost. */
    v->n.redis_amounts = 0;
    plan_at(v, &cfg, NOW + 20000, NOW + 10000, got, sizeof(got));
    ck_assert_int_eq(v->n.orders_lost, 0);
    ck_assert_str_eq(got, "retake resume-due");
    ck_assert_int_eq(mem.orders_lost_since_ms, 0);
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}
END_TEST

/*
 * A lost counter is restored from a snapshot read a restore delay after it
 * was first seen missing, however late the pass plans: the snapshot of a
 * pass that waited between its reads and its repairs can miss an event
 * acknowledged inside the delay (regressions/new-restore-stale-snapshot.json).
 */
START_TEST(restore_waits_for_a_snapshot_past_the_delay)
{
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_plan_config_t cfg = {GRACE, 10000, 1000};
    rc_voucher_t *v;
    char got[256];

    v = voucher(&vs, &mem, 10, 0, -1);
    mem.missing_since_ms = NOW - 20000;
    plan_at(v, &cfg, NOW, NOW - 15000, got, sizeof(got));
    ck_assert_str_eq(got, "await-restore");
    plan_at(v, &cfg, NOW, NOW - 10000, got, sizeof(got));
    ck_assert_str_eq(got, "restore");
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}
END_TEST

/* Expiries are bounded per voucher per pass; the other releases are not. */
START_TEST(expiries_are_bounded_by_batch)
{
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_plan_config_t cfg = {GRACE, 10000, 2};
    rc_plan_t plan = {0};
    rc_voucher_t *v;
    size_t expire = 0;

    v = voucher(&vs, &mem, 10, 5, 5);
    v->n.live_rows = 5;
    for (int i = 0; i < 5; i++) {
        char id[8];
        rc_order_t *o;
        snprintf(id, sizeof(id), "o%d", i);
        o = rc_orders_get(&v->orders, id);
        o->redis_state = 'H';
        o->held_until_ms = o->redis_held_until_ms = NOW - 2 * GRACE;
        o->pg = o->pg_after = VC_RD_RESERVED;
    }
    ck_assert_int_eq(rc_plan_judge_full(v, NOW, 1, GRACE), 0);
    ck_assert_int_eq(rc_plan_repairs(v, &cfg, NOW, NOW, &plan), 0);
    for (size_t i = 0; i < plan.len; i++)
        expire += plan.items[i].kind == RC_ACT_RELEASE;
    ck_assert_int_eq(expire, 2);
    rc_plan_free(&plan);
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}
END_TEST

/* A voucher judged by its numbers is never repaired, and keeps its uses counted without rows. */
/*
 * The periodic full reads: 40 quiet vouchers, a budget of 6 a pass (as rc_pass.c), a read
 * due 30 s after the last, a pass every 5 s. Taken in the pass's order, the
 * first ones came due again before the last had their turn; oldest first,
 * every voucher is read within the time the budget needs to go round.
 */
START_TEST(periodic_full_reads_go_round)
{
    enum { N = 40, BUDGET = N / 8 + 1, EVERY = 30000, INTERVAL = 5000 };
    rc_vouchers_t vs;
    rc_memory_entry_t mem[N];
    rc_voucher_t *due[N];
    int64_t last_read[N];

    memset(mem, 0, sizeof(mem));
    ck_assert_int_eq(rc_vouchers_alloc(&vs, N), 0);
    for (int i = 0; i < N; i++) {
        snprintf(vs.v[i].code, sizeof(vs.v[i].code), "V%02d", i);
        vs.v[i].mem = &mem[i];
        mem[i].last_full_ms = 1; /* all read once, at the daemon's first pass */
        last_read[i] = 1;
    }
    for (int64_t now = EVERY; now < 10 * EVERY; now += INTERVAL) {
        size_t n = 0;
        for (int i = 0; i < N; i++) {
            vs.v[i].full = 0;
            if (now - mem[i].last_full_ms >= EVERY)
                due[n++] = &vs.v[i];
        }
        rc_plan_pick_periodic(due, n, BUDGET);
        for (int i = 0; i < N; i++) {
            if (!vs.v[i].full)
                continue;
            mem[i].last_full_ms = now;
            last_read[i] = now;
        }
        /* Nobody waits longer than the read's period plus a round of the budget. */
        for (int i = 0; i < N; i++)
            ck_assert_msg(now - last_read[i] <= EVERY + (N / BUDGET + 1) * INTERVAL,
                          "%s last read at %lld, now %lld", vs.v[i].code,
                          (long long)last_read[i], (long long)now);
    }
    /* Oldest first, and no more than the budget. */
    mem[5].last_full_ms = 10;
    mem[2].last_full_ms = 20;
    mem[9].last_full_ms = 5;
    mem[0].last_full_ms = 30;
    for (int i = 0; i < N; i++)
        vs.v[i].full = 0;
    rc_voucher_t *some[] = {&vs.v[0], &vs.v[2], &vs.v[5], &vs.v[9]};
    rc_plan_pick_periodic(some, 4, 2);
    ck_assert(vs.v[9].full && vs.v[5].full && !vs.v[2].full && !vs.v[0].full);
    rc_vouchers_free(&vs);
}
END_TEST

START_TEST(numbers_only_plans_nothing)
{
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_plan_config_t cfg = {GRACE, 10000, 1000};
    rc_plan_t plan = {0};
    rc_voucher_t *v;

    v = voucher(&vs, &mem, 10, 3, 7);
    v->full = 0;
    mem.uncounted = 1;
    rc_plan_judge_numbers(v);
    ck_assert_int_eq(v->verdict, RC_USED_WITHOUT_ROWS);
    ck_assert_int_eq(v->n.live_rows, 2);
    ck_assert_int_eq(rc_plan_repairs(v, &cfg, NOW, NOW, &plan), 0);
    ck_assert_uint_eq(plan.len, 0);
    rc_plan_free(&plan);
    rc_vouchers_free(&vs);
}
END_TEST

/*
 * A targeted read (rc_plan_judge_targeted()): the orders its events in flight
 * name and the newest holds, in the format of cases[], with newest the holds
 * set's newest first ("b,a"), and first_seen remembered unsent a grace ago.
 */
typedef struct {
    const char *name;
    int64_t total, used, remaining, uncounted;
    const char *orders[4];
    const char *newest;
    const char *first_seen;
    int settled;
    rc_verdict_t verdict;
    int64_t fresh;
} targeted_case_t;

/* One case a line or two, as cases[]. */
/* clang-format off */
static const targeted_case_t targeted_cases[] = {
    {"a reservation in flight, held in Redis: behind", 10, 0, 9, 0, {"a:H:-:60000:R"}, "a", NULL,
     1, RC_BEHIND, 0},
    {"a confirm in flight, confirmed in Redis: behind", 10, 1, 9, 0, {"a:C:R:60000:C"}, "", NULL,
     1, RC_BEHIND, 0},
    {"a cancel in flight, given back in Redis: behind", 10, 1, 10, 0, {"a:R:R:60000:X"}, "",
     NULL, 1, RC_BEHIND, 0},
    {"events applied, their offsets not committed: consistent", 10, 1, 9, 0, {"a:H:R:60000:R"},
     "a", NULL, 1, RC_CONSISTENT, 0},
    {"uses counted without rows on both sides", 10, 2, 7, 1, {"a:H:-:60000:R"}, "a", NULL, 1,
     RC_BEHIND, 0},
    {"a hold taken since the tail was read: fresh, behind", 10, 0, 8, 0,
     {"a:H:-:60000:R", "b:H:-:60001"}, "b,a", NULL, 1, RC_BEHIND, 1},
    {"a confirm Redis ran, its event still to come before heldUntil: behind", 10, 0, 9, 0,
     {"a:C:-:60000:R"}, "", NULL, 1, RC_BEHIND, 0},
    {"the same past heldUntil and the grace: read in full", 10, 0, 9, 0, {"a:C:-:-40000:R"}, "",
     NULL, 0, RC_CONSISTENT, 0},
    {"a hold whose event was lost, first seen a grace ago: read in full", 10, 0, 8, 0,
     {"a:H:-:60000:R", "b:H:-:60001"}, "b,a", "b", 0, RC_CONSISTENT, 0},
    {"a use Redis took that no newest hold explains: read in full", 10, 0, 8, 0,
     {"a:H:-:60000:R"}, "a", NULL, 0, RC_CONSISTENT, 0},
    {"an unsent hold older than one PostgreSQL knows: read in full", 10, 1, 7, 0,
     {"a:H:-:60000:R", "c:H:R:60002", "b:H:-:50000"}, "c,a,b", NULL, 0, RC_CONSISTENT, 0},
    {"Redis gave back a use PostgreSQL will count: read in full", 10, 2, 9, 0, {"a:H:-:60000:R"},
     "a", NULL, 0, RC_CONSISTENT, 0},
    {"a cancel in flight, still held in Redis: read in full", 10, 1, 9, 0, {"a:H:R:60000:X"}, "a",
     NULL, 0, RC_CONSISTENT, 0},
    {"a reservation in flight, no order in Redis: read in full", 10, 0, 9, 0, {"a:-:-:60000:R"},
     "", NULL, 0, RC_CONSISTENT, 0},
};
/* clang-format on */

START_TEST(targeted_reads_settle_or_fall_back)
{
    const targeted_case_t *c = &targeted_cases[_i];
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_voucher_t *v;
    char list[64], *tok, *save = NULL;

    v = voucher(&vs, &mem, c->total, c->used, c->remaining);
    v->full = 0;
    v->targeted = 1;
    mem.uncounted = c->uncounted;
    mem.last_full_ms = 1;
    for (size_t i = 0; i < 4 && c->orders[i]; i++)
        (void)add_order(&vs, v, c->orders[i]);
    ck_assert_ptr_nonnull(v->newest = calloc(4, sizeof(*v->newest)));
    snprintf(list, sizeof(list), "%s", c->newest);
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        strcpy(v->newest[v->nnewest++], tok);
    if (c->first_seen)
        first_seen_long_ago(&mem, v, c->first_seen);
    ck_assert_int_eq(rc_plan_replay(v), 0);
    v->verdict = RC_CONSISTENT;
    ck_assert_msg(rc_plan_judge_targeted(v, NOW, GRACE) == c->settled, "%s: settled %d, want %d",
                  c->name, !c->settled, c->settled);
    ck_assert_msg(v->verdict == c->verdict, "%s: verdict %s, want %s", c->name,
                  rc_verdict_name(v->verdict), rc_verdict_name(c->verdict));
    if (c->settled) {
        ck_assert_int_eq(v->n.unsent_fresh, c->fresh);
        /* What the metrics call drift: the fresh holds, as after a full read. */
        ck_assert_int_eq(v->n.redis_taken - v->n.pg_live_after - v->n.uncounted, c->fresh);
        /* A fresh hold is remembered, so that a full read after the grace releases it. */
        for (size_t i = 0; i < v->nnewest && c->fresh; i++) {
            const rc_order_t *o = rc_orders_find(&v->orders, v->newest[i]);
            if (!o->in_flight)
                ck_assert_int_eq(rc_orders_find(&mem.seen, o->order_id)->first_unsent_ms, NOW);
        }
    }
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}
END_TEST

/*
 * A wave read (rc_wave_judge(), then rc_plan_judge_targeted()): the due holds
 * it listed, oldest first ("a,b"), in the format of cases[]; nothing newest
 * but the due holds themselves.
 */
typedef struct {
    const char *name;
    int64_t total, used, remaining;
    const char *orders[3];
    const char *due;
    int settled;
    rc_verdict_t verdict;
    int64_t due_unsent;
} wave_case_t;

/* clang-format off */
static const wave_case_t wave_cases[] = {
    {"due holds PostgreSQL has RESERVED, nothing in flight: settled", 10, 2, 8,
     {"a:H:R:-40000", "b:H:R:-39000"}, "a,b", 1, RC_CONSISTENT, 0},
    {"a due hold no row accounts for: settled, undersold until it expires", 10, 1, 8,
     {"a:H:R:-40000", "b:H:-:-39000"}, "a,b", 1, RC_UNDERSOLD, 1},
    {"a due hold whose reservation is in flight: settled, behind", 10, 0, 9,
     {"a:H:-:-40000:R"}, "a", 1, RC_BEHIND, 0},
    {"a due hold PostgreSQL has CONFIRMED (a confirm Redis lost): read in full", 10, 1, 9,
     {"a:H:C:-40000"}, "a", 0, RC_CONSISTENT, 0},
    {"a due hold PostgreSQL released: read in full", 10, 0, 9, {"a:H:X:-40000"}, "a", 0,
     RC_CONSISTENT, 0},
    {"a hold past heldUntil, not yet past the grace: read in full", 10, 1, 9, {"a:H:R:-100"},
     "a", 0, RC_CONSISTENT, 0},
    {"a due hold no row accounts for beside a use nothing explains: read in full", 10, 1, 7,
     {"a:H:R:-40000", "b:H:-:-39000"}, "a,b", 0, RC_CONSISTENT, 0},
};
/* clang-format on */

START_TEST(wave_reads_settle_or_fall_back)
{
    const wave_case_t *c = &wave_cases[_i];
    rc_vouchers_t vs;
    rc_memory_entry_t mem = {0};
    rc_voucher_t *v;
    char list[64], *tok, *save = NULL;
    int settled;

    v = voucher(&vs, &mem, c->total, c->used, c->remaining);
    v->full = 0;
    v->targeted = v->wave = 1;
    mem.last_full_ms = 1;
    for (size_t i = 0; i < 3 && c->orders[i]; i++)
        (void)add_order(&vs, v, c->orders[i]);
    ck_assert_ptr_nonnull(v->due = calloc(3, sizeof(*v->due)));
    snprintf(list, sizeof(list), "%s", c->due);
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        strcpy(v->due[v->ndue++], tok);
        rc_orders_find(&v->orders, tok)->due = 1;
    }
    ck_assert_int_eq(rc_plan_replay(v), 0);
    v->verdict = RC_CONSISTENT;
    settled = rc_wave_judge(v, NOW, GRACE) && rc_plan_judge_targeted(v, NOW, GRACE);
    if (settled)
        rc_wave_settled(v);
    ck_assert_msg(settled == c->settled, "%s: settled %d, want %d", c->name, settled, c->settled);
    ck_assert_msg(v->verdict == c->verdict, "%s: verdict %s, want %s", c->name,
                  rc_verdict_name(v->verdict), rc_verdict_name(c->verdict));
    if (settled)
        ck_assert_int_eq(v->due_unsent, c->due_unsent);
    rc_memory_entry_free(&mem);
    rc_vouchers_free(&vs);
}
END_TEST

/* ---- the JSON form ---- */

/* Plans json and returns the voucher of the output at index i (borrowed from *out). */
static void plan_json(const char *json, vc_jdoc_t *out)
{
    char *doc = NULL, err[256] = "";
    size_t len;

    ck_assert_msg(rc_plan_json(json, strlen(json), &doc, &len, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_jdoc_parse(out, doc, len, err, sizeof(err)), 0);
    free(doc);
}

static const char *str_of(const vc_jdoc_t *d, const char *key)
{
    const char *s = NULL;
    char err[128];
    ck_assert_msg(vc_jdoc_str(d, key, &s, err, sizeof(err)) == 0, "%s", err);
    return s;
}

static int64_t int_of(const vc_jdoc_t *d, const char *key)
{
    int64_t k = 0;
    char err[128];
    ck_assert_msg(vc_jdoc_int(d, key, &k, err, sizeof(err)) == 0, "%s", err);
    return k;
}

static size_t len_of(const vc_jdoc_t *d, const char *key)
{
    size_t n = 0;
    char err[128];
    ck_assert_msg(vc_jdoc_array(d, key, &n, err, sizeof(err)) == 0, "%s", err);
    return n;
}

/* Element i (an object) of the array at key. */
static vc_jdoc_t at(const vc_jdoc_t *d, const char *key, size_t i)
{
    vc_jdoc_t e = {0};
    char err[128];
    ck_assert_msg(vc_jdoc_at(d, key, i, &e, err, sizeof(err)) == 0, "%s", err);
    return e;
}

/*
 * A snapshot with an event in flight, a stranded hold remembered from an
 * earlier pass and an unreadable Redis value: the verdicts and repairs come
 * out in the vouchers' code order, and the memory for the next pass with them.
 */
START_TEST(json_snapshot_plans_as_the_daemon_does)
{
    const char *json =
        "{\"nowMs\": 10000000, \"graceMs\": 30000, \"vouchers\": ["
        " {\"code\": \"ZED\", \"totalLimit\": 5, \"usedCount\": 0, \"redis\": {\"remaining\": 4},"
        "  \"orders\": [{\"orderId\": \"s\", \"value\": \"3:100:10060000:H\"},"
        "              {\"orderId\": \"bad\", \"value\": \" 5:1:2:H\"}],"
        "  \"memory\": {\"unsent\": [{\"orderId\": \"s\", \"firstSeenMs\": 9000000,"
        "                            \"state\": \"H\", \"heldUntilMs\": 10060000}]}},"
        " {\"code\": \"ABC\", \"totalLimit\": 5, \"usedCount\": 0, \"redis\": {\"remaining\": 4},"
        "  \"events\": [{\"type\": \"VoucherReserved\", \"orderId\": \"e\", \"customerId\": 1,"
        "              \"discountAmount\": 10, \"heldUntilMs\": 10060000}],"
        "  \"orders\": [{\"orderId\": \"e\", \"value\": \"1:10:10060000:H\"}]}]}";
    vc_jdoc_t doc, v, rep, num;
    char err[128];

    plan_json(json, &doc);
    ck_assert_uint_eq(len_of(&doc, "vouchers"), 2);
    /* ABC: behind (its reservation is in flight): nothing to repair (no release is due). */
    v = at(&doc, "vouchers", 0);
    ck_assert_str_eq(str_of(&v, "code"), "ABC");
    ck_assert_str_eq(str_of(&v, "verdict"), "behind");
    ck_assert_int_eq(vc_jdoc_obj(&v, "numbers", &num, err, sizeof(err)), 0);
    ck_assert_int_eq(int_of(&num, "inFlightEvents"), 1);
    ck_assert_uint_eq(len_of(&v, "repairs"), 0);
    /* ZED: the remembered hold is stranded and released; the bad value is counted. */
    v = at(&doc, "vouchers", 1);
    ck_assert_str_eq(str_of(&v, "code"), "ZED");
    ck_assert_str_eq(str_of(&v, "verdict"), "undersold");
    ck_assert_int_eq(int_of(&v, "badOrders"), 1);
    ck_assert_uint_eq(len_of(&v, "repairs"), 1);
    rep = at(&v, "repairs", 0);
    ck_assert_str_eq(str_of(&rep, "action"), "release");
    ck_assert_str_eq(str_of(&rep, "orderId"), "s");
    ck_assert_str_eq(str_of(&rep, "why"), "undelivered");
    ck_assert_str_eq(str_of(&rep, "read"), "10060000:H");
    vc_jdoc_free(&doc);
}
END_TEST

/* A release begun long ago is resumed as what the pass read it to be; one it did not read is not. */
START_TEST(json_snapshot_resumes_what_the_pass_read_begun)
{
    const char *json =
        "{\"nowMs\": 10000000, \"vouchers\": ["
        " {\"code\": \"V\", \"totalLimit\": 5, \"usedCount\": 1, \"redis\": {\"remaining\": 4},"
        "  \"rows\": [{\"orderId\": \"x\", \"customerId\": 1, \"status\": \"RESERVED\"}],"
        "  \"orders\": [{\"orderId\": \"x\", \"value\": \"1:0:0:X\"}],"
        "  \"releasingDue\": [\"x\", \"later\"]}]}";
    vc_jdoc_t doc, v, rep;

    plan_json(json, &doc);
    v = at(&doc, "vouchers", 0);
    ck_assert_uint_eq(len_of(&v, "repairs"), 1);
    rep = at(&v, "repairs", 0);
    ck_assert_str_eq(str_of(&rep, "orderId"), "x");
    ck_assert_str_eq(str_of(&rep, "why"), "resume");
    ck_assert_str_eq(str_of(&rep, "reason"), "CANCELLED");
    vc_jdoc_free(&doc);
}
END_TEST

/*
 * The reviewer's state: a confirm answered 503 after Redis ran it, heldUntil
 * 1,000 s before the snapshot. The plan publishes its VoucherConfirmed and
 * says undersold until then; the figures are Redis's when the repair runs.
 */
START_TEST(json_snapshot_publishes_a_lost_confirm)
{
    const char *json = "{\"nowMs\": 10000000, \"graceMs\": 6000, \"vouchers\": ["
                       " {\"code\": \"SALE\", \"totalLimit\": 5, \"usedCount\": 1,"
                       "  \"redis\": {\"remaining\": 4, \"users\": 1},"
                       "  \"rows\": [{\"orderId\": \"o1\", \"customerId\": 7, \"discount\": 100,"
                       "            \"heldUntilMs\": 9000000, \"status\": \"RESERVED\"}],"
                       "  \"orders\": [{\"orderId\": \"o1\", \"value\": \"7:90:9000000:C\"}]}]}";
    vc_jdoc_t doc, v, rep, num;
    char err[128];

    plan_json(json, &doc);
    v = at(&doc, "vouchers", 0);
    ck_assert_str_eq(str_of(&v, "verdict"), "undersold");
    ck_assert_int_eq(vc_jdoc_obj(&v, "numbers", &num, err, sizeof(err)), 0);
    ck_assert_int_eq(int_of(&num, "confirmLost"), 1);
    ck_assert_uint_eq(len_of(&v, "repairs"), 1);
    rep = at(&v, "repairs", 0);
    ck_assert_str_eq(str_of(&rep, "action"), "publish-confirm");
    ck_assert_str_eq(str_of(&rep, "orderId"), "o1");
    ck_assert_int_eq(int_of(&rep, "heldUntilMs"), 9000000);
    ck_assert_int_eq(int_of(&rep, "customerId"), 7);
    vc_jdoc_free(&doc);
}
END_TEST

/* No vouchers: an empty plan (the fuzzer's first find: the sort was given no array). */
START_TEST(json_snapshot_of_no_vouchers_plans_nothing)
{
    static const char json[] = "{\"nowMs\": 1001, \"vouchers\": []}";
    char *out = NULL, err[256] = "";
    size_t len;

    ck_assert_int_eq(rc_plan_json(json, strlen(json), &out, &len, err, sizeof(err)), 0);
    ck_assert_str_eq(out, "{\"vouchers\":[]}");
    free(out);
}
END_TEST

START_TEST(json_snapshot_errors_name_the_field)
{
    static const struct {
        const char *json, *want;
    } bad[] = {
        {"[]", ""},
        {"{\"vouchers\": []}", "nowMs"},
        {"{\"nowMs\": 1, \"vouchers\": [], \"extra\": 1}", "extra"},
        {"{\"nowMs\": 1, \"vouchers\": [{\"code\": \"A\", \"totalLimit\": 1}]}", "usedCount"},
        {"{\"nowMs\": 1, \"vouchers\": [{\"code\": \"a b\", \"totalLimit\": 1, \"usedCount\": 0}]}",
         "code"},
        {"{\"nowMs\": 1, \"vouchers\": [{\"code\": \"A\", \"totalLimit\": 1, \"usedCount\": 0,"
         " \"rows\": [{\"orderId\": \"o\", \"customerId\": 1, \"status\": \"PAID\"}]}]}",
         "rows[0]"},
        {"{\"nowMs\": 1, \"vouchers\": [{\"code\": \"A\", \"totalLimit\": 1, \"usedCount\": 0},"
         " {\"code\": \"A\", \"totalLimit\": 1, \"usedCount\": 0}]}",
         "twice"},
        {"{\"nowMs\": 1, \"vouchers\": [{\"code\": \"A\", \"totalLimit\": 1, \"usedCount\": 0,"
         " \"events\": [{\"type\": \"VoucherLost\", \"orderId\": \"o\"}]}]}",
         "events[0]"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL, err[256] = "";
        size_t len;
        ck_assert_msg(rc_plan_json(bad[i].json, strlen(bad[i].json), &out, &len, err,
                                   sizeof(err)) == VC_ERR_INVALID,
                      "accepted %s", bad[i].json);
        ck_assert_ptr_null(out);
        ck_assert_msg(strstr(err, bad[i].want), "%s: error \"%s\" does not name %s", bad[i].json,
                      err, bad[i].want);
    }
}
END_TEST

static Suite *planner_suite(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("plan");

    tcase_add_loop_test(tc, plans_from_the_table, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_loop_test(tc, plans_for_a_lost_orders_hash, 0,
                        (int)(sizeof(lost_cases) / sizeof(lost_cases[0])));
    tcase_add_test(tc, lost_orders_are_rebuilt_after_the_delay);
    tcase_add_test(tc, restore_waits_for_a_snapshot_past_the_delay);
    tcase_add_test(tc, expiries_are_bounded_by_batch);
    tcase_add_test(tc, numbers_only_plans_nothing);
    tcase_add_test(tc, periodic_full_reads_go_round);
    tcase_add_loop_test(tc, targeted_reads_settle_or_fall_back, 0,
                        (int)(sizeof(targeted_cases) / sizeof(targeted_cases[0])));
    tcase_add_loop_test(tc, wave_reads_settle_or_fall_back, 0,
                        (int)(sizeof(wave_cases) / sizeof(wave_cases[0])));
    suite_add_tcase(s, tc);

    tc = tcase_create("json");
    tcase_add_test(tc, json_snapshot_plans_as_the_daemon_does);
    tcase_add_test(tc, json_snapshot_resumes_what_the_pass_read_begun);
    tcase_add_test(tc, json_snapshot_publishes_a_lost_confirm);
    tcase_add_test(tc, json_snapshot_of_no_vouchers_plans_nothing);
    tcase_add_test(tc, json_snapshot_errors_name_the_field);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(planner_suite());
}
