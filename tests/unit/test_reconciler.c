/* Unit tests for the reconciler's verdict: rc_judge(). */
#include <check.h>
#include <stdlib.h>

#include "rc_diff.h"

static const struct {
    const char *name;
    rc_voucher_state_t s;
    rc_verdict_t want;
} cases[] = {
    /* name, {code, limit, used, live, loaded, redis_left, in_flight}, verdict */
    {"agree", {"A", 10, 4, 4, 1, 6, 0}, RC_CONSISTENT},
    {"agree while events fly", {"A", 10, 4, 4, 1, 6, 7}, RC_CONSISTENT},
    {"not loaded yet", {"A", 10, 0, 0, 0, 0, 0}, RC_NOT_LOADED},
    {"redis ahead by the lag", {"A", 10, 4, 4, 1, 3, 3}, RC_BEHIND},
    {"redis ahead by more than the lag", {"A", 10, 4, 4, 1, 3, 2}, RC_DRIFTED},
    {"redis ahead, lag unknown", {"A", 10, 4, 4, 1, 3, -1}, RC_DRIFTED},
    {"redis offers more than pg allows", {"A", 10, 4, 4, 1, 7, 100}, RC_DRIFTED},
    {"used_count disagrees with rows", {"A", 10, 4, 5, 1, 6, 0}, RC_DRIFTED},
    {"sold out everywhere", {"A", 10, 10, 10, 1, 0, 0}, RC_CONSISTENT},
};

START_TEST(judge_table)
{
    rc_verdict_t got = rc_judge(&cases[_i].s);
    ck_assert_msg(got == cases[_i].want, "%s: got %s, want %s", cases[_i].name,
                  rc_verdict_name(got), rc_verdict_name(cases[_i].want));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reconciler");
    TCase *tc = tcase_create("judge");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, judge_table, 0, sizeof(cases) / sizeof(cases[0]));
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
