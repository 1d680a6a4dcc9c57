/* The limit sync's plan (reconciler/rc_raise.h): pure, no servers. */
#include <check.h>
#include <stdlib.h>

#include "ck_run.h"
#include "rc_raise.h"

START_TEST(plan)
{
    int64_t delta = -1;

    /* The counter reflects PostgreSQL's total: nothing, and no lock taken. */
    ck_assert_int_eq(rc_limit_plan(1, 100, 100, &delta), RC_LIMIT_NONE);
    ck_assert_int_eq(delta, 0);
    /* Raised by hand in SQL: the difference is added (before this, never: undersold for good). */
    ck_assert_int_eq(rc_limit_plan(1, 100, 150, &delta), RC_LIMIT_ADD);
    ck_assert_int_eq(delta, 50);
    /* Lowered by hand: the rule's bound, counted in Redis. */
    ck_assert_int_eq(rc_limit_plan(1, 100, 60, &delta), RC_LIMIT_LOWER);
    ck_assert_int_eq(delta, -40);
    /* No limit key (loaded before they existed): adopt PostgreSQL's total, move nothing. */
    ck_assert_int_eq(rc_limit_plan(0, 0, 60, &delta), RC_LIMIT_ADOPT);
    ck_assert_int_eq(delta, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_raise");
    TCase *tc = tcase_create("plan");

    tcase_add_test(tc, plan);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
