/*
 * Unit tests for common/vc_redemption.c, the one table of a redemption's
 * transitions (its SQL forms are checked against it on a real PostgreSQL by
 * tests/integration/test_redemption_oracle.sh), and for
 * common/vc_order_value.c, the one parser of a Redis order value.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "vc_order_value.h"
#include "vc_redemption.h"


static const struct {
    vc_rd_status_t from;
    vc_event_type_t type;
    vc_rd_status_t to;
    int delta;
    vc_rd_outcome_t outcome;
} transitions[] = {
    {VC_RD_NONE, VC_EV_RESERVED, VC_RD_RESERVED, +1, VC_RD_OUT_APPLIED},
    {VC_RD_NONE, VC_EV_CONFIRMED, VC_RD_CONFIRMED, +1, VC_RD_OUT_EARLY},
    {VC_RD_NONE, VC_EV_RELEASED, VC_RD_RELEASED, 0, VC_RD_OUT_TOMBSTONE},
    {VC_RD_RESERVED, VC_EV_RESERVED, VC_RD_RESERVED, 0, VC_RD_OUT_NOOP},
    {VC_RD_RESERVED, VC_EV_CONFIRMED, VC_RD_CONFIRMED, 0, VC_RD_OUT_APPLIED},
    {VC_RD_RESERVED, VC_EV_RELEASED, VC_RD_RELEASED, -1, VC_RD_OUT_APPLIED},
    {VC_RD_CONFIRMED, VC_EV_RESERVED, VC_RD_CONFIRMED, 0, VC_RD_OUT_NOOP},
    {VC_RD_CONFIRMED, VC_EV_CONFIRMED, VC_RD_CONFIRMED, 0, VC_RD_OUT_NOOP},
    {VC_RD_CONFIRMED, VC_EV_RELEASED, VC_RD_RELEASED, -1, VC_RD_OUT_APPLIED},
    {VC_RD_RELEASED, VC_EV_RESERVED, VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
    {VC_RD_RELEASED, VC_EV_CONFIRMED, VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
    {VC_RD_RELEASED, VC_EV_RELEASED, VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
};

START_TEST(state_transition_table)
{
    size_t i = (size_t)_i;
    vc_rd_step_t s = vc_rd_step(transitions[i].from, transitions[i].type);

    ck_assert_msg(s.next == transitions[i].to, "%s + %s -> %s, want %s",
                  vc_rd_status_name(transitions[i].from), vc_event_type_name(transitions[i].type),
                  vc_rd_status_name(s.next), vc_rd_status_name(transitions[i].to));
    ck_assert_int_eq(s.used_delta, transitions[i].delta);
    ck_assert_int_eq(s.outcome, transitions[i].outcome);
}
END_TEST

START_TEST(state_rejects_unknown_type)
{
    vc_rd_step_t s = vc_rd_step(VC_RD_RESERVED, (vc_event_type_t)9);
    ck_assert_int_eq(s.next, VC_RD_RESERVED);
    ck_assert_int_eq(s.used_delta, 0);
    ck_assert_int_eq(s.outcome, VC_RD_OUT_POISON);
}
END_TEST

/* Applies seq (types 1..3) to one redemption; returns the final status and the used_count sum. */
static vc_rd_status_t run_sequence(const int *seq, size_t n, int *used)
{
    vc_rd_status_t st = VC_RD_NONE;
    *used = 0;
    for (size_t i = 0; i < n; i++) {
        vc_rd_step_t s = vc_rd_step(st, (vc_event_type_t)seq[i]);
        st = s.next;
        *used += s.used_delta;
    }
    return st;
}

/*
 * Every sequence of up to 6 events: used_count is 1 exactly while the
 * redemption holds a use (RESERVED or CONFIRMED) and never leaves [0, 1];
 * and repeating the whole sequence (a redelivery) changes nothing.
 */
START_TEST(state_any_sequence_counts_once_and_redelivery_is_noop)
{
    int seq[12];

    for (size_t len = 1; len <= 6; len++) {
        size_t total = 1;
        for (size_t i = 0; i < len; i++)
            total *= 3;
        for (size_t code = 0; code < total; code++) {
            size_t c = code;
            int used, used2;
            vc_rd_status_t st, st2;
            for (size_t i = 0; i < len; i++, c /= 3)
                seq[i] = (int)(c % 3) + 1;
            st = run_sequence(seq, len, &used);
            ck_assert_int_eq(used, st == VC_RD_RESERVED || st == VC_RD_CONFIRMED);
            memcpy(seq + len, seq, len * sizeof(int));
            st2 = run_sequence(seq, 2 * len, &used2);
            ck_assert_int_eq(st2, st);
            ck_assert_int_eq(used2, used);
        }
    }
}
END_TEST

/* A release that overtakes its reservation ends where the in-order pair ends. */
START_TEST(state_release_before_reserve_converges)
{
    int in_order[] = {VC_EV_RESERVED, VC_EV_RELEASED};
    int swapped[] = {VC_EV_RELEASED, VC_EV_RESERVED};
    int u1, u2;

    ck_assert_int_eq(run_sequence(in_order, 2, &u1), VC_RD_RELEASED);
    ck_assert_int_eq(run_sequence(swapped, 2, &u2), VC_RD_RELEASED);
    ck_assert_int_eq(u1, 0);
    ck_assert_int_eq(u2, 0);
}
END_TEST

START_TEST(outcome_names)
{
    ck_assert_str_eq(vc_rd_outcome_name(VC_RD_OUT_APPLIED), "applied");
    ck_assert_str_eq(vc_rd_outcome_name(VC_RD_OUT_EARLY), "early-confirm");
    ck_assert_str_eq(vc_rd_outcome_name(VC_RD_OUT_CONFLICT), "order-conflict");
    ck_assert_str_eq(vc_rd_outcome_name(42), "unknown");
    ck_assert_str_eq(vc_rd_status_name(VC_RD_NONE), "(none)");
    ck_assert_str_eq(vc_rd_status_name(VC_RD_CONFIRMED), "CONFIRMED");
}
END_TEST

START_TEST(status_names_parse_back)
{
    for (int st = VC_RD_RESERVED; st < VC_RD_STATUS_COUNT; st++)
        ck_assert_int_eq(vc_rd_status_parse(vc_rd_status_name((vc_rd_status_t)st)), st);
    ck_assert_int_eq(vc_rd_status_parse("reserved"), VC_RD_NONE);
    ck_assert_int_eq(vc_rd_status_parse(""), VC_RD_NONE);
    ck_assert_int_eq(vc_rd_counts(VC_RD_RESERVED) + vc_rd_counts(VC_RD_CONFIRMED), 2);
    ck_assert_int_eq(vc_rd_counts(VC_RD_NONE) + vc_rd_counts(VC_RD_RELEASED), 0);
}
END_TEST

/* ---- the Redis order value ---- */

START_TEST(order_value_strict)
{
    vc_order_value_t o;
    const char *ok = "42:100000:1795975982123:H";
    /* The scripts write "-"? digits only: a sign or a space is drift, not a number. */
    static const char *const bad[] = {
        "",         "42:1:2",   "42:1:2:Q", "42:1:2:HH", "x:1:2:H",    "42:1:2:H:5",
        "42::2:H",  "42:1:2:",  ":1:2:H",   "42:1:2:H\n", "+5:1:2:H",   " 5:1:2:H",
        "5 :1:2:H", "5:+1:2:H", "5:1: 2:H", "-:1:2:H",   "5:1:99999999999999999999:H"};

    ck_assert_int_eq(vc_order_value_parse(ok, strlen(ok), &o), 0);
    ck_assert_int_eq(o.customer_id, 42);
    ck_assert_int_eq(o.discount, 100000);
    ck_assert_int_eq(o.held_until_ms, 1795975982123LL);
    ck_assert_int_eq(o.state, 'H');
    ck_assert_int_eq(vc_order_value_parse("-1:0:-5:R", 9, &o), 0);
    ck_assert_int_eq(o.customer_id, -1);
    ck_assert_int_eq(o.held_until_ms, -5);
    /* Not NUL-terminated: only len bytes are read. */
    ck_assert_int_eq(vc_order_value_parse("7:1:2:Cjunk", 7, &o), 0);
    ck_assert_int_eq(o.state, 'C');
    for (const char *st = "HCXER"; *st; st++) {
        char v[32];
        snprintf(v, sizeof(v), "7:1:2:%c", *st);
        ck_assert_int_eq(vc_order_value_parse(v, strlen(v), &o), 0);
        ck_assert_int_eq(o.state, *st);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(vc_order_value_parse(bad[i], strlen(bad[i]), &o) == VC_ERR_PROTOCOL,
                      "accepted \"%s\"", bad[i]);
}
END_TEST

static Suite *redemption_suite(void)
{
    Suite *s = suite_create("redemption");
    TCase *tc = tcase_create("state");

    tcase_add_loop_test(tc, state_transition_table, 0,
                        (int)(sizeof(transitions) / sizeof(transitions[0])));
    tcase_add_test(tc, state_rejects_unknown_type);
    tcase_add_test(tc, state_any_sequence_counts_once_and_redelivery_is_noop);
    tcase_add_test(tc, state_release_before_reserve_converges);
    tcase_add_test(tc, outcome_names);
    tcase_add_test(tc, status_names_parse_back);
    suite_add_tcase(s, tc);

    tc = tcase_create("order_value");
    tcase_add_test(tc, order_value_strict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(redemption_suite());
}
