/* Unit tests for vc_hist: bucket arithmetic and percentiles of known distributions. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/ck_run.h"
#include "vc_hist.h"

/* A histogram is ~60 KB: keep it off the test's stack. */
static vc_hist_t *new_hist(void)
{
    vc_hist_t *h = malloc(sizeof(*h));
    ck_assert_ptr_nonnull(h);
    vc_hist_reset(h);
    return h;
}

/* Asserts got is within rel (a fraction) of want. */
#define ck_assert_near(got, want, rel)                                                             \
    do {                                                                                           \
        double g_ = (double)(got), w_ = (double)(want);                                            \
        ck_assert_msg(g_ >= w_ * (1 - (rel)) && g_ <= w_ * (1 + (rel)),                            \
                      "%s = %.0f, want %.0f within %.2f%%", #got, g_, w_, (rel)*100);              \
    } while (0)

START_TEST(bucket_edges)
{
    static const struct {
        uint64_t value;
        size_t bucket;
        uint64_t low, high;
    } cases[] = {
        {0, 0, 0, 0},
        {1, 1, 1, 1},
        {255, 255, 255, 255},
        {256, 256, 256, 257},
        {257, 256, 256, 257},
        {258, 257, 258, 259},
        {511, 383, 510, 511},
        {512, 384, 512, 515},
        {1000, 506, 1000, 1003},
        {UINT64_MAX, VC_HIST_BUCKETS - 1, (uint64_t)255 << 56, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t b = vc_hist_bucket_of(cases[i].value);
        ck_assert_uint_eq(b, cases[i].bucket);
        ck_assert_uint_eq(vc_hist_bucket_low(b), cases[i].low);
        ck_assert_uint_eq(vc_hist_bucket_high(b), cases[i].high);
    }
}
END_TEST

START_TEST(buckets_tile_the_range)
{
    /* Each bucket starts right after the previous one ends and is narrow. */
    for (size_t b = 1; b < VC_HIST_BUCKETS; b++) {
        uint64_t low = vc_hist_bucket_low(b), high = vc_hist_bucket_high(b);
        ck_assert_uint_eq(low, vc_hist_bucket_high(b - 1) + 1);
        ck_assert_uint_ge(high, low);
        ck_assert_uint_le(high - low, low / 128);
        ck_assert_uint_eq(vc_hist_bucket_of(low), b);
        ck_assert_uint_eq(vc_hist_bucket_of(high), b);
    }
}
END_TEST

START_TEST(empty_and_single)
{
    vc_hist_t *h = new_hist();
    ck_assert_uint_eq(vc_hist_percentile(h, 50), 0);
    ck_assert(vc_hist_mean(h) == 0.0);
    vc_hist_record(h, 12345);
    /* One value: every percentile is that value exactly (clamped to min and max). */
    ck_assert_uint_eq(vc_hist_percentile(h, 0), 12345);
    ck_assert_uint_eq(vc_hist_percentile(h, 50), 12345);
    ck_assert_uint_eq(vc_hist_percentile(h, 99.9), 12345);
    ck_assert_uint_eq(vc_hist_percentile(h, 100), 12345);
    free(h);
}
END_TEST

START_TEST(uniform_1_to_100000)
{
    static const double ps[] = {1, 10, 50, 90, 99, 99.9, 99.99};
    vc_hist_t *h = new_hist();

    for (uint64_t v = 1; v <= 100000; v++)
        vc_hist_record(h, v);
    ck_assert_uint_eq(h->total, 100000);
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        ck_assert_near(vc_hist_percentile(h, ps[i]), ps[i] * 1000, 1.0 / 128);
    ck_assert_uint_eq(vc_hist_percentile(h, 100), 100000);
    ck_assert_uint_eq(vc_hist_percentile(h, 0), 1);
    ck_assert_near(vc_hist_mean(h), 50000.5, 1e-9);
    free(h);
}
END_TEST

START_TEST(small_values_are_exact)
{
    vc_hist_t *h = new_hist();
    for (uint64_t v = 1; v <= 200; v++)
        vc_hist_record(h, v);
    ck_assert_uint_eq(vc_hist_percentile(h, 50), 100);
    ck_assert_uint_eq(vc_hist_percentile(h, 90), 180);
    ck_assert_uint_eq(vc_hist_percentile(h, 99), 198);
    ck_assert_uint_eq(vc_hist_percentile(h, 99.5), 199);
    ck_assert_uint_eq(vc_hist_percentile(h, 99.9), 200);
    free(h);
}
END_TEST

START_TEST(bimodal_tail)
{
    /* 99% fast answers at 800 us and a 1% tail at 250 ms: p99 is fast, p99.9 is the tail. */
    vc_hist_t *h = new_hist();
    vc_hist_record_n(h, 800, 9900);
    vc_hist_record_n(h, 250000, 100);
    ck_assert_near(vc_hist_percentile(h, 50), 800, 1.0 / 128);
    ck_assert_near(vc_hist_percentile(h, 99), 800, 1.0 / 128);
    ck_assert_uint_eq(vc_hist_percentile(h, 99.9), 250000);
    ck_assert_uint_eq(vc_hist_percentile(h, 100), 250000);
    ck_assert_uint_eq(h->min, 800);
    free(h);
}
END_TEST

START_TEST(exponential_distribution)
{
    /*
     * A deterministic exponential with mean 1000: value k of n is the quantile
     * -1000 ln(1 - (k - 0.5)/n), so the p-th percentile is -1000 ln(1 - p/100).
     */
    static const struct {
        double p, want;
    } cases[] = {{50, 693.1}, {90, 2302.6}, {99, 4605.2}, {99.9, 6907.8}};
    vc_hist_t *h = new_hist();
    const int n = 100000;

    for (int k = 1; k <= n; k++)
        vc_hist_record(h, (uint64_t)(-1000.0 * log(1.0 - (k - 0.5) / n) + 0.5));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_near(vc_hist_percentile(h, cases[i].p), cases[i].want, 0.01);
    free(h);
}
END_TEST

START_TEST(merge_adds_counts)
{
    vc_hist_t *a = new_hist(), *b = new_hist();
    for (uint64_t v = 1; v <= 500; v++)
        vc_hist_record(a, v);
    for (uint64_t v = 501; v <= 1000; v++)
        vc_hist_record(b, v);
    vc_hist_merge(a, b);
    ck_assert_uint_eq(a->total, 1000);
    ck_assert_uint_eq(a->min, 1);
    ck_assert_uint_eq(a->max, 1000);
    ck_assert_near(vc_hist_percentile(a, 50), 500, 1.0 / 128);
    ck_assert_near(vc_hist_percentile(a, 90), 900, 1.0 / 128);
    free(a);
    free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hist");
    TCase *tc = tcase_create("hist");

    tcase_add_test(tc, bucket_edges);
    tcase_add_test(tc, buckets_tile_the_range);
    tcase_add_test(tc, empty_and_single);
    tcase_add_test(tc, uniform_1_to_100000);
    tcase_add_test(tc, small_values_are_exact);
    tcase_add_test(tc, bimodal_tail);
    tcase_add_test(tc, exponential_distribution);
    tcase_add_test(tc, merge_adds_counts);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
