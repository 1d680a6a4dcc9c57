/*
 * A voucher's or campaign's aggregates (reconciler/rc_agg.h): Redis's fields
 * read back, the comparison with PostgreSQL's, and the judgement with what a
 * full read remembered, that decide whether a quiet voucher or campaign is
 * read in full. Pure, no servers.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "rc_agg.h"

/* Redis's aggregate from "field value" pairs, and HLEN orders. */
static rc_agg_t redis_agg(const char *const *fields, size_t n, int64_t size)
{
    rc_agg_t a = {0};

    for (size_t i = 0; i + 1 < n; i += 2)
        rc_agg_field(&a, fields[i], fields[i + 1]);
    a.present = n > 0;
    a.size = size;
    return a;
}

START_TEST(fields)
{
    static const char *const f[] = {"H", "2", "H_customers", "-7",     "C", "1",
                                    "R", "3", "R_customers", "900001", "?", "0"};
    rc_agg_t a = redis_agg(f, sizeof(f) / sizeof(f[0]), 6);

    ck_assert(!a.malformed);
    ck_assert_int_eq(a.count[RC_AGG_HELD], 2);
    ck_assert_int_eq(a.customers[RC_AGG_HELD], -7);
    ck_assert_int_eq(a.count[RC_AGG_CONFIRMED], 1);
    ck_assert_int_eq(a.count[RC_AGG_RELEASED], 3);
    ck_assert_int_eq(a.customers[RC_AGG_RELEASED], 900001);
    /* A field or number it does not know: never read as agreeing. */
    static const char *const bad[][2] = {{"Q", "1"}, {"H_x", "1"}, {"H", "1.5"},
                                         {"", "1"},  {"C", ""},    {"R", "99999999999999999999"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rc_agg_t b = {0};
        rc_agg_field(&b, bad[i][0], bad[i][1]);
        ck_assert_msg(b.malformed, "%s=%s", bad[i][0], bad[i][1]);
    }
}
END_TEST

START_TEST(compare)
{
    rc_agg_t pg = {.present = 1};
    rc_agg_diff_t d;
    static const char *const f[] = {"H", "1", "H_customers", "102", "C", "1", "C_customers", "101",
                                    "R", "1", "R_customers", "103"};
    rc_agg_t r = redis_agg(f, sizeof(f) / sizeof(f[0]), 3);

    pg.count[RC_AGG_HELD] = pg.count[RC_AGG_CONFIRMED] = pg.count[RC_AGG_RELEASED] = 1;
    pg.customers[RC_AGG_HELD] = 102;
    pg.customers[RC_AGG_CONFIRMED] = 101;
    pg.customers[RC_AGG_RELEASED] = 103;
    ck_assert_int_eq(rc_agg_compare(&r, &pg, &d), RC_AGG_COMPARED);
    ck_assert(rc_agg_diff_zero(&d));

    /* A use given back beside a hold nobody knows: the counts move apart. */
    rc_agg_t drift = r;
    drift.count[RC_AGG_CONFIRMED]--, drift.customers[RC_AGG_CONFIRMED] -= 101;
    drift.count[RC_AGG_RELEASED]++, drift.customers[RC_AGG_RELEASED] += 101;
    drift.count[RC_AGG_HELD]++, drift.customers[RC_AGG_HELD] += 109, drift.size++;
    ck_assert_int_eq(rc_agg_compare(&drift, &pg, &d), RC_AGG_COMPARED);
    ck_assert(!rc_agg_diff_zero(&d));
    ck_assert_int_eq(d.count[RC_AGG_CONFIRMED], 1);
    ck_assert_int_eq(d.count[RC_AGG_HELD], -1);

    /* Two customers' orders swapping states: the counts agree, the sums do not. */
    rc_agg_t swap = r;
    swap.customers[RC_AGG_HELD] = 103, swap.customers[RC_AGG_RELEASED] = 102;
    ck_assert_int_eq(rc_agg_compare(&swap, &pg, &d), RC_AGG_COMPARED);
    ck_assert(!rc_agg_diff_zero(&d));

    /* What Redis's aggregate cannot describe: read in full. */
    rc_agg_t lost = r;
    lost.size = 0; /* the orders hash lost, its aggregate kept */
    ck_assert_int_eq(rc_agg_compare(&lost, &pg, &d), RC_AGG_UNSOUND);
    rc_agg_t begun = r;
    begun.count[RC_AGG_CANCEL_BEGUN] = 1, begun.size++;
    ck_assert_int_eq(rc_agg_compare(&begun, &pg, &d), RC_AGG_UNSOUND);
    rc_agg_t unreadable = r;
    unreadable.unreadable = 1, unreadable.size++;
    ck_assert_int_eq(rc_agg_compare(&unreadable, &pg, &d), RC_AGG_UNSOUND);
    rc_agg_t odd = r;
    odd.malformed = 1;
    ck_assert_int_eq(rc_agg_compare(&odd, &pg, &d), RC_AGG_UNSOUND);

    /* None kept: the old rule. An empty hash with none is an empty aggregate. */
    rc_agg_t none = {0};
    none.size = 3;
    ck_assert_int_eq(rc_agg_compare(&none, &pg, &d), RC_AGG_ABSENT);
    rc_agg_t no_pg = {0};
    ck_assert_int_eq(rc_agg_compare(&r, &no_pg, &d), RC_AGG_ABSENT);
    rc_agg_t empty = {0}, pg_empty = {.present = 1};
    ck_assert_int_eq(rc_agg_compare(&empty, &pg_empty, &d), RC_AGG_COMPARED);
    ck_assert(rc_agg_diff_zero(&d));
}
END_TEST

/* The verdict, with and without what a full read remembered. */
START_TEST(judge)
{
    static const char *const f[] = {"H", "1", "H_customers", "5", "R", "1", "R_customers", "7"};
    rc_agg_t r = redis_agg(f, sizeof(f) / sizeof(f[0]), 2), pg = {.present = 1};
    rc_agg_base_t base = {0};
    rc_agg_diff_t d;
    int compared;

    pg.count[RC_AGG_HELD] = 1;
    pg.customers[RC_AGG_HELD] = 5;
    pg.count[RC_AGG_RELEASED] = 1;
    pg.customers[RC_AGG_RELEASED] = 7;
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_SETTLED);
    ck_assert(compared);
    /* A released row more than Redis's: read now, until a full read accepts it. */
    pg.count[RC_AGG_RELEASED] = 2;
    pg.customers[RC_AGG_RELEASED] = 10;
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_READ_NOW);
    rc_agg_remember(&base, 1, 0, &r, &pg, &d);
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_READ_NOW);
    rc_agg_remember(&base, 0, 1, &r, &pg, &d);
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_READ_NOW);
    rc_agg_remember(&base, 1, 1, &r, &pg, &d);
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_SETTLED);
    /* The same difference after both moved together: still accepted. */
    r.count[RC_AGG_HELD]++;
    r.size++;
    pg.count[RC_AGG_HELD]++;
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_SETTLED);
    /* Any other difference: read now. */
    pg.count[RC_AGG_HELD]++;
    ck_assert_int_eq(rc_agg_judge(&r, &pg, &base, &d, &compared), RC_AGG_READ_NOW);
    /* Redis's not describing its hash: read now, unless neither side moved since the base. */
    rc_agg_t unsound = r;
    unsound.size = 9;
    rc_agg_base_t none = {0};
    ck_assert_int_eq(rc_agg_judge(&unsound, &pg, &none, &d, &compared), RC_AGG_READ_NOW);
    ck_assert(!compared);
    rc_agg_remember(&base, 1, 1, &unsound, &pg, &d);
    ck_assert_int_eq(rc_agg_judge(&unsound, &pg, &base, &d, &compared), RC_AGG_SETTLED);
    /* Either side keeping none: the old rule. */
    rc_agg_t no_pg = {0};
    ck_assert_int_eq(rc_agg_judge(&r, &no_pg, &base, &d, &compared), RC_AGG_OLD_RULE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_agg");
    TCase *tc = tcase_create("aggregates");

    tcase_add_test(tc, fields);
    tcase_add_test(tc, compare);
    tcase_add_test(tc, judge);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
