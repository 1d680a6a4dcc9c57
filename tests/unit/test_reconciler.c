/* Unit tests for the reconciler's model: orders, in-flight replay, verdicts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "ck_run.h"
#include "rc_campaign.h"
#include "rc_fence.h"
#include "rc_kafka.h"
#include "rc_model.h"
#include "rc_outbox.h"
#include "vc_error.h"
#include "vc_voucher.h"

#define GRACE 30000
#define NOW 1000000

/* Adds an order: redis state (0 for none), PostgreSQL status. */
static rc_order_t *add(rc_orders_t *m, const char *id, char redis, vc_rd_status_t pg)
{
    rc_order_t *o = rc_orders_get(m, id);
    ck_assert_ptr_nonnull(o);
    o->customer_id = 7;
    o->redis_state = redis;
    o->pg = o->pg_after = pg;
    return o;
}

static vc_event_t event(vc_event_type_t type, const char *order)
{
    vc_event_t ev = {0};
    ev.type = type;
    strcpy(ev.order_id, order);
    return ev;
}

static rc_numbers_t numbers(int64_t total, int64_t used, int64_t remaining)
{
    rc_numbers_t n = {0};
    n.total_limit = total;
    n.used_count = n.live_rows = used;
    n.redis_loaded = 1;
    n.redis_remaining = remaining;
    n.redis_users = -1; /* not read: no users check */
    n.redis_limit = -1; /* no limit key */
    return n;
}

/*
 * What tells a voucher's orders hash lost (rc_model_orders_lost(), the same
 * rule as orders_lost.lua): Redis's reads of one moment in, the sign out.
 */
static const struct {
    const char *name;
    int loaded;
    int64_t orders, users, amounts, limit, remaining, outside;
    int lost;
} lost_cases[] = {
    {"users without orders", 1, 0, 2, 0, -1, 5, 0, 1},
    {"amounts without orders", 1, 0, 0, 1, -1, 5, 0, 1},
    {"all three lost, the counter below its limit key", 1, 0, 0, 0, 10, 8, 0, 1},
    {"all three lost, below by more than the outside key", 1, 0, 0, 0, 10, 6, 3, 1},
    {"no orders, below by the outside key: uses without rows", 1, 0, 0, 0, 10, 7, 3, 0},
    {"no orders, the counter at its limit key: never used (or all released, lost)", 1, 0, 0, 0,
     10, 10, 0, 0},
    {"no orders, no limit key (loaded before limit keys): nothing to compare", 1, 0, 0, 0, -1, 2,
     0, 0},
    {"no orders, raised above its limit key (set by hand): not lost", 1, 0, 0, 0, 10, 12, 0, 0},
    {"orders there, the counter below its limit key: uses held", 1, 2, 2, 1, 10, 8, 0, 0},
    {"the counter missing: the restore's case, not this", 0, 0, 2, 1, 10, 0, 0, 0},
};

START_TEST(orders_lost_from_the_table)
{
    rc_numbers_t n = numbers(10, 0, lost_cases[_i].remaining);

    n.redis_loaded = lost_cases[_i].loaded;
    n.redis_users = lost_cases[_i].users;
    n.redis_amounts = lost_cases[_i].amounts;
    n.redis_limit = lost_cases[_i].limit;
    n.redis_outside = lost_cases[_i].outside;
    ck_assert_msg(rc_model_orders_lost(&n, lost_cases[_i].orders) == lost_cases[_i].lost,
                  "%s: want %d", lost_cases[_i].name, lost_cases[_i].lost);
}
END_TEST

/*
 * The judge, orders, users and amounts lost with two uses taken: DRIFTED and
 * orders_lost (the plan rebuilds), not a retake that writes the live orders
 * back and never raises the counter; with the two uses held back for no
 * order instead (counted without rows), nothing is lost.
 */
START_TEST(judged_lost_when_the_counter_says_so)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 8);

    rc_orders_init(&m);
    add(&m, "a", 0, VC_RD_RESERVED);
    add(&m, "b", 0, VC_RD_CONFIRMED);
    n.redis_limit = 10;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.orders_lost, 1);
    rc_orders_free(&m);

    rc_orders_init(&m);
    n = numbers(10, 2, 8);
    n.live_rows = 0;
    n.redis_limit = 10;
    n.redis_outside = 2;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_USED_WITHOUT_ROWS);
    ck_assert_int_eq(n.orders_lost, 0);
    rc_orders_free(&m);
}
END_TEST

/* A campaign is read in full unless its numbers settle it: nothing lost, due, flying or releasing. */
START_TEST(campaign_needs_full)
{
    ck_assert_int_eq(rc_campaign_needs_full(0, 3, 3, 0, 0, 0), 0);
    ck_assert_int_eq(rc_campaign_needs_full(1, 3, 3, 0, 0, 0), 1);
    ck_assert_int_eq(rc_campaign_needs_full(0, 2, 3, 0, 0, 0), 1);
    ck_assert_int_eq(rc_campaign_needs_full(0, 4, 3, 0, 0, 0), 1);
    ck_assert_int_eq(rc_campaign_needs_full(0, 3, 3, 1, 0, 0), 1);
    ck_assert_int_eq(rc_campaign_needs_full(0, 3, 3, 0, 1, 0), 1);
    ck_assert_int_eq(rc_campaign_needs_full(0, 3, 3, 0, 0, 1), 1);
}
END_TEST

/*
 * campaign_due.lua's numbers are parsed strictly: a short or malformed line is an
 * error, never "every key present, nothing lost" (it used to start from 7 and
 * take whatever sscanf left).
 */
START_TEST(campaign_numbers_strict)
{
    static const char *const bad[] = {
        "",           "3 1 4 0",    "3 1 4 0 7 9", "3 1 4 2 7",
        "3 1 4 0 8",  "-1 1 4 0 7", "3 1 4 0 7x",  "three 1 4 0 7",
        "3 1 4 0 -1", "+3 1 4 0 7", " 3 1 4 0 7",  "3  1 4 0 7",
        "3 1 4 0 7 ", "3\t1 4 0 7", "3 1 4 0 7\n", "1234567890123456789 0 0 0 7",
    };
    rc_campaign_numbers_t n;

    ck_assert_int_eq(rc_campaign_numbers_parse("3 1 4 0 7", &n), 0);
    ck_assert(n.holds == 3 && n.releasing == 1 && n.orders == 4 && n.lost == 0 && n.present == 7);
    ck_assert_int_eq(rc_campaign_numbers_parse("0 0 0 1 0", &n), 0);
    ck_assert(n.lost == 1 && n.present == 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(rc_campaign_numbers_parse(bad[i], &n) == VC_ERR_PROTOCOL, "accepted \"%s\"",
                      bad[i]);
}
END_TEST

/*
 * campaign_due.lua's whole text answer is parsed strictly: the numbers line,
 * then one "orderId heldUntilMs:state" line per due hold. A short, empty or
 * malformed line, or more holds than asked for, is an error; before, the due
 * lines were only counted, so any text after the numbers read as due holds.
 */
START_TEST(campaign_due_strict)
{
    static const struct {
        const char *text;
        int due; /* -1: refused */
    } cases[] = {
        {"3 1 4 0 7", 0},
        {"3 1 4 0 7\no1 1700000000000:H", 1},
        {"2 0 2 0 7\norder-1 1700000000000:H\norder-2 5:E", 2},
        {"0 0 0 1 0", 0},
        {"", -1},                                  /* nothing: no numbers */
        {"3 1 4 0", -1},                           /* the numbers short */
        {"3 1 4 0 7\n", -1},                       /* an empty line after them */
        {"3 1 4 0 7\n\no1 1:H", -1},               /* an empty line between */
        {"3 1 4 0 7\no1", -1},                     /* a due line short: no heldUntil */
        {"3 1 4 0 7\no1 17", -1},                  /* no state */
        {"3 1 4 0 7\no1 17:", -1},                 /* an empty state */
        {"3 1 4 0 7\no1 17:Z", -1},                /* a state no script writes */
        {"3 1 4 0 7\no1 17:HH", -1},               /* two letters */
        {"3 1 4 0 7\no1 :H", -1},                  /* an empty heldUntil */
        {"3 1 4 0 7\no1 1x:H", -1},                /* not a number */
        {"3 1 4 0 7\no1 -5:H", -1},                /* a negative heldUntil */
        {"3 1 4 0 7\n 17:H", -1},                  /* an empty orderId */
        {"3 1 4 0 7\no1 1:H\no2 2:H\no3 3:H", -1}, /* more holds than asked for (2) */
        {"3 1 4 0 7\no1 2 3 4", -1},               /* another kind of line */
        {"3 1 4 0 7\n"
         "o1234567890123456789012345678901234567890123456789012345678901234 1:H",
         -1}, /* an orderId of 65 bytes */
    };
    rc_campaign_due_t d;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = rc_campaign_due_parse(cases[i].text, 2, &d);
        if (cases[i].due < 0) {
            ck_assert_msg(rc == VC_ERR_PROTOCOL, "accepted \"%s\"", cases[i].text);
        } else {
            ck_assert_msg(rc == 0, "refused \"%s\"", cases[i].text);
            ck_assert_int_eq(d.due, cases[i].due);
        }
    }
    ck_assert_int_eq(rc_campaign_due_parse("2 0 2 0 7\no1 1:H\no2 2:C", 2, &d), 0);
    ck_assert(d.numbers.holds == 2 && d.numbers.orders == 2 && d.numbers.present == 7 &&
              d.due == 2);
}
END_TEST

START_TEST(consistent_when_everything_agrees)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 3, 7);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'C', VC_RD_CONFIRMED);
    add(&m, "c", 'H', VC_RD_RESERVED);
    add(&m, "d", 'R', VC_RD_RELEASED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_CONSISTENT);
    ck_assert_int_eq(n.pg_live_after, 3);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0);
    rc_orders_free(&m);
}
END_TEST

START_TEST(behind_while_a_reservation_is_in_flight)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 1, 8);
    vc_event_t ev = event(VC_EV_RESERVED, "b");
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    rc_order_apply(add(&m, "b", 'H', VC_RD_NONE), &ev);
    n.in_flight_events = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.pg_live_after, 2);
    rc_orders_free(&m);
}
END_TEST

START_TEST(an_unsent_hold_is_fresh_then_stranded)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 0, 9);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_NONE);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.unsent_fresh, 1);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE - 1, GRACE), RC_BEHIND);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE, GRACE), RC_UNDERSOLD);
    ck_assert_int_eq(n.stranded, 1);
    rc_orders_free(&m);
}
END_TEST

START_TEST(behind_when_redis_gave_back_a_use_after_the_snapshot)
{
    /* A cancel acknowledged after the tail was read: R in Redis, live in the snapshot. */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 9);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'R', VC_RD_RESERVED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.missing_in_redis, 0); /* not taken again: the next pass decides */
    ck_assert_int_eq(n.released_after, 1);
    ck_assert_int_eq(n.bound, 9);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0); /* and not lowered either */
    rc_orders_free(&m);
}
END_TEST

START_TEST(drifted_when_redis_gave_back_a_use_postgres_still_counts)
{
    /* Seen R by an earlier pass too: the snapshot is younger than any release. */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 9);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'R', VC_RD_RESERVED)->revivable = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.missing_in_redis, 1);
    ck_assert_int_eq(n.bound, 8);
    rc_orders_free(&m);
}
END_TEST

START_TEST(lost_orders_are_missing_but_the_counter_already_counts_them)
{
    /* Only the orders hash was lost: retake writes them, and must not lower the counter. */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 3, 7);
    rc_orders_init(&m);
    add(&m, "a", 0, VC_RD_RESERVED);
    add(&m, "b", 0, VC_RD_RESERVED);
    add(&m, "c", 0, VC_RD_CONFIRMED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.missing_in_redis, 3);
    ck_assert_int_eq(n.accounted, 3);
    ck_assert_int_eq(n.bound, 7);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0);
    rc_orders_free(&m);
}
END_TEST

START_TEST(behind_when_reserved_and_confirmed_after_the_snapshot)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 1, 8);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'C', VC_RD_NONE)->held_until_ms = NOW + 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.confirmed_unsent, 1);
    /* Past heldUntil and the grace nothing is on its way: the writer refused it, or it was lost. */
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + 1 + GRACE, GRACE), RC_UNDERSOLD);
    ck_assert_int_eq(n.confirmed_unknown, 1);
    rc_orders_free(&m);
}
END_TEST

/*
 * A confirm answered 503 after Redis ran it: C in Redis, RESERVED downstream.
 * Its event may still come until heldUntil and a grace (behind); after that
 * it never does, and PostgreSQL keeps a hold that ended for a confirmed order
 * (undersold until the reconciler publishes the confirm), though both sides
 * count the use. A VoucherConfirmed in flight closes it; a parked letter is
 * the operator's.
 */
START_TEST(a_confirm_whose_event_was_lost)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 8);
    vc_event_t ev = event(VC_EV_CONFIRMED, "b");
    rc_order_t *b;

    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    b = add(&m, "b", 'C', VC_RD_RESERVED);
    b->held_until_ms = b->redis_held_until_ms = NOW;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE - 1, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.confirm_pending, 1);
    ck_assert_int_eq(n.confirm_lost, 0);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE, GRACE), RC_UNDERSOLD);
    ck_assert_int_eq(n.confirm_pending, 0);
    ck_assert_int_eq(n.confirm_lost, 1);
    ck_assert_int_eq(rc_model_redis_drift(&n), 0);
    b->parked = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE, GRACE), RC_CONSISTENT);
    ck_assert_int_eq(n.confirm_lost, 0);
    b->parked = 0;
    rc_order_apply(b, &ev);
    n.in_flight_events = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW + GRACE, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.confirm_lost + n.confirm_pending, 0);
    rc_orders_free(&m);
}
END_TEST

START_TEST(used_count_without_rows_is_its_own_verdict)
{
    /* Issue 26: total 10, used_count 10, no rows. Loaded by the rule: nothing to offer. */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 10, 0);
    n.live_rows = 0;
    rc_orders_init(&m);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_USED_WITHOUT_ROWS);
    ck_assert_int_eq(n.uncounted, 10);
    ck_assert_int_eq(n.bound, 0);
    ck_assert_str_eq(rc_verdict_name(RC_USED_WITHOUT_ROWS), "used-without-rows");
    /* Restored from the rows alone it offered 10: drifted, lowered by all 10. */
    n.redis_remaining = 10;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 10);
    rc_orders_free(&m);
}
END_TEST

START_TEST(used_count_partly_made_of_rows)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 6, 4);
    n.live_rows = 2;
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'C', VC_RD_CONFIRMED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_USED_WITHOUT_ROWS);
    ck_assert_int_eq(n.uncounted, 4);
    ck_assert_int_eq(n.bound, 4);
    n.redis_remaining = 8; /* 10 - the two rows */
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 4);
    rc_orders_free(&m);
}
END_TEST

START_TEST(more_orders_than_the_limit_never_ask_for_a_negative_counter)
{
    /* Three uses held on a voucher of two (an oversell already made): the bound stays 0. */
    rc_orders_t m;
    rc_numbers_t n = numbers(2, 2, 0);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'H', VC_RD_RESERVED);
    add(&m, "c", 'H', VC_RD_NONE);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.bound, 0);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0);
    rc_orders_free(&m);
}
END_TEST

START_TEST(drifted_when_the_users_hash_lost_customers)
{
    /* Two customers hold uses; the users hash has one field left: one could pass the limit. */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 3, 7);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'C', VC_RD_CONFIRMED);
    add(&m, "c", 'H', VC_RD_RESERVED)->customer_id = 8;
    n.redis_users = 2;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_CONSISTENT);
    n.redis_users = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.users_missing, 1);
    n.redis_users = 0;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(n.users_missing, 2);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0); /* the counter itself is right */
    rc_orders_free(&m);
}
END_TEST

START_TEST(a_reserve_during_the_pass_is_neither_drift_nor_excess)
{
    /*
     * Race 6: the counter and the orders read at one moment (MULTI) agree
     * during a sale; a hold reserved after the snapshot is on its way.
     */
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 1, 8);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'H', VC_RD_NONE);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 0);
    /* The old reads: the counter read before the reserve (9) with the orders after it. */
    n.redis_remaining = 9;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    rc_orders_free(&m);
}
END_TEST

START_TEST(the_remaining_rule)
{
    ck_assert_int_eq(vc_uses_without_rows(10, 0), 10);
    ck_assert_int_eq(vc_uses_without_rows(6, 2), 4);
    ck_assert_int_eq(vc_uses_without_rows(2, 3), 0); /* rows above the counter: they count */
    /* At a load the rows are every order: total_limit - max(used_count, rows). */
    ck_assert_int_eq(vc_remaining_bound(10, vc_uses_without_rows(10, 0), 0), 0);
    ck_assert_int_eq(vc_remaining_bound(10, vc_uses_without_rows(6, 2), 2), 4);
    ck_assert_int_eq(vc_remaining_bound(10, vc_uses_without_rows(2, 3), 3), 7);
    ck_assert_int_eq(vc_remaining_bound(10, 0, 0), 10);
    /* Never below 0. */
    ck_assert_int_eq(vc_remaining_bound(2, 0, 3), 0);
    ck_assert_int_eq(vc_remaining_bound(10, 9, 5), 0);
}
END_TEST

START_TEST(drifted_when_the_counter_offers_more_than_the_orders_allow)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 3, 8); /* taken 2, but 3 orders held */
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    add(&m, "b", 'H', VC_RD_RESERVED);
    add(&m, "c", 'C', VC_RD_CONFIRMED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert_int_eq(rc_model_excess_remaining(&n), 1);
    ck_assert(rc_model_redis_drift(&n));
    rc_orders_free(&m);
}
END_TEST

START_TEST(consistent_when_the_events_in_flight_are_already_applied)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 1, 9);
    vc_event_t ev = event(VC_EV_RESERVED, "a");
    rc_orders_init(&m);
    rc_order_apply(add(&m, "a", 'H', VC_RD_RESERVED), &ev); /* applied, offset not committed */
    n.in_flight_events = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_CONSISTENT);
    rc_orders_free(&m);
}
END_TEST

START_TEST(behind_while_a_release_is_under_way)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 8);
    vc_event_t ev = event(VC_EV_RELEASED, "b");
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RESERVED);
    rc_order_apply(add(&m, "b", 'X', VC_RD_RESERVED), &ev);
    n.in_flight_events = 1;
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_BEHIND);
    ck_assert_int_eq(n.releasing, 1);
    ck_assert_int_eq(n.pg_live_after, 1);
    rc_orders_free(&m);
}
END_TEST

START_TEST(drifted_when_postgres_disagrees_with_itself)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 2, 8);
    n.live_rows = 3;
    rc_orders_init(&m);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_DRIFTED);
    ck_assert(!rc_model_redis_drift(&n)); /* Redis has nothing to repair */
    rc_orders_free(&m);
}
END_TEST

/*
 * The restart fence lifts after a full pass that needed no repair towards an
 * oversell; expiries and releases only give uses back and do not hold it.
 */
START_TEST(fence_lifts_only_after_a_clean_pass)
{
    rc_summary_t sum = {0};

    sum.expired = 3;
    sum.stranded = 1;
    sum.finished = 2;
    /*
     * A drift no repair closes (PostgreSQL's own, or more orders than the
     * limit, where Redis already offers nothing) must not hold the fence
     * down for good: it was there before the restart.
     */
    sum.verdicts[RC_DRIFTED] = 2;
    ck_assert(rc_fence_clean(&sum));
    /* Each of these alone keeps it down. */
    int *waits[] = {&sum.offering_excess, &sum.awaiting_restore};
    int64_t *repairs[] = {&sum.restored, &sum.retaken, &sum.lowered, &sum.reconfirmed};
    /*
     * A lost confirm published: Redis was ahead of PostgreSQL, not behind; it
     * says nothing of writes Redis lost.
     */
    sum.confirms_published = 1;
    ck_assert(rc_fence_clean(&sum));
    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        *waits[i] = 1;
        ck_assert_msg(!rc_fence_clean(&sum), "wait %zu", i);
        *waits[i] = 0;
    }
    for (size_t i = 0; i < sizeof(repairs) / sizeof(repairs[0]); i++) {
        *repairs[i] = 1;
        ck_assert_msg(!rc_fence_clean(&sum), "repair %zu", i);
        *repairs[i] = 0;
    }
    ck_assert(rc_fence_clean(&sum));
}
END_TEST

START_TEST(undersold_when_redis_holds_what_postgres_released)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 0, 9);
    rc_orders_init(&m);
    add(&m, "a", 'H', VC_RD_RELEASED);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_UNDERSOLD);
    ck_assert_int_eq(n.released_in_pg, 1);
    rc_orders_free(&m);
}
END_TEST

START_TEST(not_loaded_without_a_counter)
{
    rc_orders_t m;
    rc_numbers_t n = numbers(10, 0, 0);
    n.redis_loaded = 0;
    rc_orders_init(&m);
    ck_assert_int_eq(rc_model_judge(&m, &n, NOW, GRACE), RC_NOT_LOADED);
    rc_orders_free(&m);
}
END_TEST

START_TEST(replay_follows_the_writer)
{
    rc_order_t o = {0};
    vc_event_t reserved = event(VC_EV_RESERVED, "a"), confirmed = event(VC_EV_CONFIRMED, "a"),
               released = event(VC_EV_RELEASED, "a");

    rc_order_apply(&o, &reserved);
    rc_order_apply(&o, &reserved); /* a redelivery */
    ck_assert_int_eq(o.pg_after, VC_RD_RESERVED);
    rc_order_apply(&o, &confirmed);
    ck_assert_int_eq(o.pg_after, VC_RD_CONFIRMED);
    rc_order_apply(&o, &reserved); /* a late redelivery changes nothing */
    ck_assert_int_eq(o.pg_after, VC_RD_CONFIRMED);
    rc_order_apply(&o, &released);
    rc_order_apply(&o, &reserved); /* released is final */
    ck_assert_int_eq(o.pg_after, VC_RD_RELEASED);
    ck_assert_int_eq(o.in_flight, 1);

    memset(&o, 0, sizeof(o));
    rc_order_apply(&o, &confirmed); /* confirmed before reserved: counted at the confirm */
    rc_order_apply(&o, &reserved);
    ck_assert_int_eq(o.pg_after, VC_RD_CONFIRMED);

    memset(&o, 0, sizeof(o));
    rc_order_apply(&o, &released); /* released before reserved: a tombstone */
    rc_order_apply(&o, &reserved);
    ck_assert_int_eq(o.pg_after, VC_RD_RELEASED);
}
END_TEST

START_TEST(order_values_parse)
{
    rc_order_t o = {0};
    /* Strict, as the gateway reads them: no sign but '-', no spaces (vc_order_value.h). */
    const char *bad[] = {"",       "1:2:3",    "1:2:3:Q", "x:2:3:H", "1:2:3:HH",
                         "1::3:H", "+5:2:3:H", " 5:2:3:H", "5:+2:3:H", "5:2: 3:H",
                         "5 :2:3:H", "5:2:99999999999999999999:H"};

    ck_assert_int_eq(rc_order_parse("42:100000:1795975982123:C", 25, &o), 0);
    ck_assert_int_eq(o.customer_id, 42);
    ck_assert_int_eq(o.discount, 100000);
    ck_assert_int_eq(o.held_until_ms, 1795975982123);
    ck_assert_int_eq(o.redis_state, 'C');
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(rc_order_parse(bad[i], strlen(bad[i]), &o) == VC_ERR_PROTOCOL, "%s", bad[i]);
}
END_TEST

START_TEST(order_map_grows_and_finds)
{
    rc_orders_t m;
    char id[32];
    size_t seen = 0;

    rc_orders_init(&m);
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof(id), "order-%d", i);
        rc_orders_get(&m, id)->customer_id = i;
    }
    ck_assert_uint_eq(m.len, 5000);
    ck_assert_int_eq(rc_orders_find(&m, "order-4321")->customer_id, 4321);
    ck_assert_ptr_null(rc_orders_find(&m, "order-5000"));
    ck_assert_ptr_eq(rc_orders_get(&m, "order-7"), rc_orders_find(&m, "order-7"));
    for (size_t i = 0; i < m.cap; i++)
        seen += rc_orders_at(&m, i) != NULL;
    ck_assert_uint_eq(seen, 5000);
    rc_orders_free(&m);
}
END_TEST


START_TEST(quiet_only_when_numbers_settle_it)
{
    rc_numbers_t n = {0};

    n.total_limit = 100;
    n.redis_loaded = 1;
    n.redis_remaining = 60;
    n.used_count = 40;
    ck_assert_int_eq(rc_model_quiet(&n, 0, 0), 1);
    ck_assert_int_eq(rc_model_quiet(&n, 1, 0), 0); /* a hold is due: expire it */
    ck_assert_int_eq(rc_model_quiet(&n, 0, 1), 0); /* a release is under way */
    n.in_flight_events = 1;
    ck_assert_int_eq(rc_model_quiet(&n, 0, 0), 0); /* an event of it is in flight */
    n.in_flight_events = 0;
    n.redis_remaining = 59; /* Redis takes one use PostgreSQL does not count (yet) */
    ck_assert_int_eq(rc_model_quiet(&n, 0, 0), 0);
    n.redis_remaining = 61; /* Redis offers a use PostgreSQL counts */
    ck_assert_int_eq(rc_model_quiet(&n, 0, 0), 0);
    n.redis_remaining = 60;
    n.redis_loaded = 0;
    ck_assert_int_eq(rc_model_quiet(&n, 0, 0), 0);
}
END_TEST

/*
 * A repair published while the broker is away: the call gives up waiting
 * (outcome unknown), and the delivery reports that come once the broker is
 * back belong to a call that has returned. They must not be written into the
 * caller's array (freed by then in the reconciler: the reports overwrote
 * heap memory and crashed it), nor count for the next call.
 */
START_TEST(publish_drops_reports_that_come_after_the_call)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mc;
    rc_kafka_t *k;
    vc_event_t ev[2];
    int first[2] = {0, 0}, second[1] = {0};

    /* The mock cluster lives in a handle of its own (which connects nowhere). */
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err)), RD_KAFKA_CONF_OK);
    host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ck_assert_ptr_nonnull(host);
    mc = rd_kafka_mock_cluster_new(host, 1);
    ck_assert_ptr_nonnull(mc);
    ck_assert_int_eq(rd_kafka_mock_topic_create(mc, "voucher-events", 1, 1), 0);
    k = rc_kafka_new(rd_kafka_mock_cluster_bootstraps(mc), NULL, "voucher-writer",
                     "voucher-events", err, sizeof(err));
    ck_assert_msg(k != NULL, "%s", err);

    memset(ev, 0, sizeof(ev));
    for (int i = 0; i < 2; i++) {
        ev[i].type = VC_EV_RELEASED;
        ev[i].version = VC_EVENT_VERSION;
        snprintf(ev[i].code, sizeof(ev[i].code), "MOCK");
        snprintf(ev[i].order_id, sizeof(ev[i].order_id), "mock-%d", i);
        ev[i].customer_id = 7;
        ev[i].at_ms = 1700000000000LL;
        snprintf(ev[i].reason, sizeof(ev[i].reason), "EXPIRED");
    }

    rd_kafka_mock_broker_set_down(mc, 1);
    ck_assert_int_eq(rc_kafka_publish(k, ev, 2, first, 500, err, sizeof(err)), 0);
    ck_assert_int_eq(first[0], 0); /* unknown: still queued in the producer */
    ck_assert_int_eq(first[1], 0);

    rd_kafka_mock_broker_set_up(mc, 1);
    ck_assert_int_eq(rc_kafka_publish(k, ev, 1, second, 30000, err, sizeof(err)), 0);
    ck_assert_int_eq(second[0], 1); /* delivered: the broker is back */
    ck_assert_int_eq(first[0], 0);  /* the late reports of the first call went nowhere */
    ck_assert_int_eq(first[1], 0);

    rc_kafka_free(k);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
}
END_TEST

/*
 * What the reconciler does with one order, on a pass whose snapshot of Kafka
 * began at SNAP (issue 22 races 2-4, issue 25 item 4). A hold whose heldUntil
 * or first sighting is exactly a grace before the snapshot is due.
 */
#define SNAP 10000000
START_TEST(release_decisions)
{
    static const struct {
        char redis;
        vc_rd_status_t pg_after;
        int64_t held_until, first_unsent;
        rc_release_t want;
        const char *why;
    } cases[] = {
        {'H', VC_RD_NONE, SNAP + 60000, 0, RC_RELEASE_NONE, "a fresh hold"},
        {'H', VC_RD_RESERVED, SNAP - GRACE, 0, RC_RELEASE_EXPIRE, "expired a grace before"},
        {'H', VC_RD_RESERVED, SNAP - GRACE + 1, 0, RC_RELEASE_NONE,
         "expired, but a confirm accepted just before may not be in the snapshot"},
        {'H', VC_RD_CONFIRMED, SNAP - 10 * GRACE, 0, RC_RELEASE_TO_CONFIRMED,
         "confirmed in PostgreSQL outranks held in Redis: never expired"},
        {'H', VC_RD_CONFIRMED, SNAP + 60000, 0, RC_RELEASE_TO_CONFIRMED,
         "repaired before heldUntil too"},
        {'C', VC_RD_CONFIRMED, SNAP - 10 * GRACE, 0, RC_RELEASE_NONE, "confirmed on both sides"},
        {'C', VC_RD_RESERVED, SNAP - GRACE + 1, 0, RC_RELEASE_NONE,
         "confirmed in Redis, reserved downstream: its confirm may be on its way, never expired"},
        {'C', VC_RD_RESERVED, SNAP - GRACE, 0, RC_RELEASE_CONFIRM_LOST,
         "confirmed in Redis, reserved downstream a grace past heldUntil: its confirm's event "
         "never comes, publish it"},
        {'C', VC_RD_RESERVED, SNAP - 10 * GRACE, SNAP - 10 * GRACE, RC_RELEASE_CONFIRM_LOST,
         "the same long after: published, never released"},
        {'H', VC_RD_RELEASED, SNAP + 60000, 0, RC_RELEASE_CANCEL, "released in PostgreSQL"},
        {'C', VC_RD_RELEASED, SNAP + 60000, 0, RC_RELEASE_CANCEL,
         "released in PostgreSQL (confirmed)"},
        {'H', VC_RD_NONE, SNAP + 60000, SNAP - GRACE, RC_RELEASE_UNDELIVERED,
         "unknown downstream since a grace before the snapshot"},
        {'H', VC_RD_NONE, SNAP + 60000, SNAP - GRACE + 1, RC_RELEASE_NONE,
         "unknown downstream, not yet a grace before the snapshot"},
        {'C', VC_RD_NONE, SNAP + 60000, SNAP - GRACE, RC_RELEASE_UNDELIVERED,
         "confirmed in Redis, no event anywhere after the grace: never answered 200"},
        {'C', VC_RD_NONE, SNAP + 60000, SNAP - GRACE + 1, RC_RELEASE_NONE,
         "confirmed in Redis, no event yet: its 200 may still come"},
        {'C', VC_RD_NONE, SNAP - 10 * GRACE, 0, RC_RELEASE_NONE, "a confirmed order never expires"},
        {'H', VC_RD_NONE, SNAP - GRACE, SNAP, RC_RELEASE_EXPIRE, "unsent and expired: expired"},
        {'H', VC_RD_NONE, SNAP + 60000, 0, RC_RELEASE_NONE, "unsent, never seen before"},
        {'X', VC_RD_RESERVED, SNAP - 10 * GRACE, SNAP - GRACE, RC_RELEASE_NONE, "a release begun"},
        {'E', VC_RD_NONE, SNAP - 10 * GRACE, SNAP - GRACE, RC_RELEASE_NONE, "a release begun"},
        {'R', VC_RD_RESERVED, SNAP - 10 * GRACE, SNAP - GRACE, RC_RELEASE_NONE,
         "released in Redis"},
        {0, VC_RD_RESERVED, SNAP - 10 * GRACE, SNAP - GRACE, RC_RELEASE_NONE, "not in Redis"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rc_order_t o = {0};
        o.redis_state = cases[i].redis;
        o.pg_after = cases[i].pg_after;
        o.redis_held_until_ms = cases[i].held_until;
        o.first_unsent_ms = cases[i].first_unsent;
        ck_assert_msg(rc_model_release(&o, SNAP, GRACE) == cases[i].want, "case %zu (%s): got %d",
                      i, cases[i].why, (int)rc_model_release(&o, SNAP, GRACE));
    }
}
END_TEST

/*
 * A parked dead letter (issue 13): the order is never released by a pass,
 * whatever its heldUntil or how long it has been unknown downstream; a
 * discarded one is released (reason DISCARDED) while nothing downstream
 * counts it; PostgreSQL's RELEASED or CONFIRMED still rules.
 */
START_TEST(release_decisions_parked)
{
    static const struct {
        char redis;
        vc_rd_status_t pg_after;
        int parked, discarded;
        rc_release_t want;
        const char *why;
    } cases[] = {
        {'H', VC_RD_NONE, 1, 0, RC_RELEASE_NONE, "parked: neither expired nor undelivered"},
        {'C', VC_RD_NONE, 1, 0, RC_RELEASE_NONE, "parked confirm (answered 200): kept"},
        {'H', VC_RD_RESERVED, 1, 0, RC_RELEASE_NONE, "a parked confirm of a reserved row"},
        {'C', VC_RD_RESERVED, 1, 0, RC_RELEASE_NONE,
         "confirmed in Redis, its confirm parked: the operator's, not published again"},
        {'C', VC_RD_RESERVED, 0, 1, RC_RELEASE_NONE,
         "confirmed in Redis, its confirm discarded: not published again, not released"},
        {'H', VC_RD_CONFIRMED, 1, 0, RC_RELEASE_TO_CONFIRMED, "confirmed in PostgreSQL still rules"},
        {'H', VC_RD_RELEASED, 1, 0, RC_RELEASE_CANCEL, "released in PostgreSQL still rules"},
        {'H', VC_RD_NONE, 0, 1, RC_RELEASE_DISCARD, "discarded: the use goes back"},
        {'C', VC_RD_NONE, 0, 1, RC_RELEASE_DISCARD, "discarded confirm, no row: the use goes back"},
        {'H', VC_RD_NONE, 1, 1, RC_RELEASE_NONE, "one letter discarded, another still parked"},
        {'E', VC_RD_NONE, 0, 1, RC_RELEASE_NONE, "already being released"},
        {'R', VC_RD_RELEASED, 0, 1, RC_RELEASE_NONE, "released on both sides"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rc_order_t o = {0};
        o.redis_state = cases[i].redis;
        o.pg_after = cases[i].pg_after;
        o.redis_held_until_ms = SNAP - 10 * GRACE; /* long past: expire would be due */
        o.first_unsent_ms = SNAP - 10 * GRACE;     /* undelivered would be due */
        o.parked = cases[i].parked;
        o.discarded = cases[i].discarded;
        ck_assert_msg(rc_model_release(&o, SNAP, GRACE) == cases[i].want, "case %zu (%s): got %d",
                      i, cases[i].why, (int)rc_model_release(&o, SNAP, GRACE));
    }
}
END_TEST

/* A voucher whose only gap is a parked hold is "parked", never "undersold" nor "consistent". */
/* A direct voucher is judged by its two numbers and its parked letters, never by Redis. */
START_TEST(direct_verdicts)
{
    static const struct {
        int64_t used, live, parked;
        rc_verdict_t want;
    } cases[] = {
        {0, 0, 0, RC_CONSISTENT},        {3, 3, 0, RC_CONSISTENT},        {3, 3, 2, RC_PARKED},
        {4, 3, 0, RC_USED_WITHOUT_ROWS}, {4, 3, 1, RC_USED_WITHOUT_ROWS}, {2, 3, 0, RC_DRIFTED},
        {0, 1, 1, RC_DRIFTED},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(rc_model_judge_direct(cases[i].used, cases[i].live, cases[i].parked) ==
                          cases[i].want,
                      "case %zu", i);
}
END_TEST

/* Only the rows from the first up to the first one not acknowledged are marked sent. */
START_TEST(outbox_marks_the_acknowledged_prefix)
{
    static const struct {
        int delivered[5];
        int n, want;
    } cases[] = {
        {{1, 1, 1, 1, 1}, 5, 5}, {{1, 1, -1, 1, 1}, 5, 2},     {{0, 1, 1, 1, 1}, 5, 0},
        {{1, 1, 1, 1, 0}, 5, 4}, {{-1, -1, -1, -1, -1}, 5, 0}, {{0}, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_int_eq(rc_outbox_sent_prefix(cases[i].delivered, cases[i].n), cases[i].want);
}
END_TEST

START_TEST(verdict_parked)
{
    rc_orders_t m;
    rc_numbers_t n = {0};
    rc_order_t *o;

    rc_orders_init(&m);
    o = rc_orders_get(&m, "o-1");
    o->redis_state = 'C';
    o->pg = o->pg_after = VC_RD_CONFIRMED;
    o = rc_orders_get(&m, "o-2");
    o->redis_state = 'H';
    o->parked = 1;
    n.total_limit = 10;
    n.used_count = n.live_rows = 1;
    n.redis_loaded = 1;
    n.redis_remaining = 8;
    n.redis_users = -1; /* not read: no users check */
    n.parked = 1;
    ck_assert_str_eq(rc_verdict_name(rc_model_judge(&m, &n, SNAP, GRACE)), "parked");
    ck_assert_int_eq(n.parked_held, 1);
    ck_assert_int_eq(n.stranded + n.unsent_fresh, 0);
    /* A long time later, still parked: never stranded. */
    ck_assert_int_eq(rc_model_judge(&m, &n, SNAP + 100 * GRACE, GRACE), RC_PARKED);
    /* Discarded: a release is due. */
    o->parked = 0;
    o->discarded = 1;
    n.parked = 0;
    ck_assert_int_eq(rc_model_judge(&m, &n, SNAP, GRACE), RC_UNDERSOLD);
    ck_assert_int_eq(n.discarding, 1);
    /* Replayed: the row is there, nothing parked: consistent. */
    o->discarded = 0;
    o->pg = o->pg_after = VC_RD_RESERVED;
    n.used_count = n.live_rows = 2;
    ck_assert_int_eq(rc_model_judge(&m, &n, SNAP, GRACE), RC_CONSISTENT);
    rc_orders_free(&m);
}
END_TEST

START_TEST(unsent_orders_and_hold_identity)
{
    rc_order_t a = {0}, b = {0};

    ck_assert_int_eq(rc_order_parse("7:100:5000:H", 12, &a), 0);
    ck_assert_int_eq(a.redis_held_until_ms, 5000);
    a.pg_after = VC_RD_NONE;
    ck_assert_int_eq(rc_order_unsent(&a), 1);
    a.redis_state = 'C';
    ck_assert_int_eq(rc_order_unsent(&a), 1);
    a.pg_after = VC_RD_RESERVED;
    ck_assert_int_eq(rc_order_unsent(&a), 0);
    a.pg_after = VC_RD_NONE;
    a.redis_state = 'E';
    ck_assert_int_eq(rc_order_unsent(&a), 0);

    /* The same orderId forgotten and taken again is another hold: another heldUntil. */
    ck_assert_int_eq(rc_order_parse("7:100:5000:H", 12, &a), 0);
    ck_assert_int_eq(rc_order_parse("7:100:5000:H", 12, &b), 0);
    ck_assert_int_eq(rc_order_same_hold(&a, &b), 1);
    ck_assert_int_eq(rc_order_parse("7:100:5001:H", 12, &b), 0);
    ck_assert_int_eq(rc_order_same_hold(&a, &b), 0);
    /* Held, then confirmed: first seen unsent again as confirmed (its 200 may come later). */
    ck_assert_int_eq(rc_order_parse("7:100:5000:C", 12, &b), 0);
    ck_assert_int_eq(rc_order_same_hold(&a, &b), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reconciler");
    TCase *tc = tcase_create("model");

    tcase_add_test(tc, consistent_when_everything_agrees);
    tcase_add_loop_test(tc, orders_lost_from_the_table, 0,
                        (int)(sizeof(lost_cases) / sizeof(lost_cases[0])));
    tcase_add_test(tc, judged_lost_when_the_counter_says_so);
    tcase_add_test(tc, campaign_needs_full);
    tcase_add_test(tc, behind_while_a_reservation_is_in_flight);
    tcase_add_test(tc, an_unsent_hold_is_fresh_then_stranded);
    tcase_add_test(tc, behind_when_redis_gave_back_a_use_after_the_snapshot);
    tcase_add_test(tc, drifted_when_redis_gave_back_a_use_postgres_still_counts);
    tcase_add_test(tc, lost_orders_are_missing_but_the_counter_already_counts_them);
    tcase_add_test(tc, behind_when_reserved_and_confirmed_after_the_snapshot);
    tcase_add_test(tc, a_confirm_whose_event_was_lost);
    tcase_add_test(tc, used_count_without_rows_is_its_own_verdict);
    tcase_add_test(tc, used_count_partly_made_of_rows);
    tcase_add_test(tc, more_orders_than_the_limit_never_ask_for_a_negative_counter);
    tcase_add_test(tc, drifted_when_the_users_hash_lost_customers);
    tcase_add_test(tc, a_reserve_during_the_pass_is_neither_drift_nor_excess);
    tcase_add_test(tc, the_remaining_rule);
    tcase_add_test(tc, drifted_when_the_counter_offers_more_than_the_orders_allow);
    tcase_add_test(tc, consistent_when_the_events_in_flight_are_already_applied);
    tcase_add_test(tc, behind_while_a_release_is_under_way);
    tcase_add_test(tc, drifted_when_postgres_disagrees_with_itself);
    tcase_add_test(tc, fence_lifts_only_after_a_clean_pass);
    tcase_add_test(tc, undersold_when_redis_holds_what_postgres_released);
    tcase_add_test(tc, not_loaded_without_a_counter);
    tcase_add_test(tc, replay_follows_the_writer);
    tcase_add_test(tc, order_values_parse);
    tcase_add_test(tc, order_map_grows_and_finds);
    tcase_add_test(tc, quiet_only_when_numbers_settle_it);
    suite_add_tcase(s, tc);
    tc = tcase_create("releases");
    tcase_add_test(tc, release_decisions);
    tcase_add_test(tc, campaign_numbers_strict);
    tcase_add_test(tc, campaign_due_strict);
    tcase_add_test(tc, release_decisions_parked);
    tcase_add_test(tc, verdict_parked);
    tcase_add_test(tc, direct_verdicts);
    tcase_add_test(tc, outbox_marks_the_acknowledged_prefix);
    tcase_add_test(tc, unsent_orders_and_hold_identity);
    suite_add_tcase(s, tc);
    tc = tcase_create("kafka");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, publish_drops_reports_that_come_after_the_call);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
