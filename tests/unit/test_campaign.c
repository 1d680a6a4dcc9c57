/*
 * vc_campaign: what makes a campaign possible, the generator (rejection
 * sampling, uniqueness and symbol frequencies over a million codes), the
 * check symbol, and the input and display forms.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_random.h"

static vc_campaign_spec_t good_spec(void)
{
    vc_campaign_spec_t s;

    memset(&s, 0, sizeof(s));
    strcpy(s.name, "mailing");
    s.alphabet = vc_alphabet_find("safe32");
    s.length = 12;
    s.count = 1000000;
    s.discount_amount = 2000;
    s.per_customer_limit = 1;
    s.starts_at_ms = 1000;
    s.ends_at_ms = 2000;
    return s;
}

START_TEST(spec_checks)
{
    static const struct {
        const char *what;
        int64_t count;
        const char *alphabet, *prefix;
        int length, check;
        const char *want; /* a piece of the message, or NULL: accepted */
    } cases[] = {
        {"the default", 1000000, "safe32", "", 12, 0, NULL},
        {"the maximum count", VC_CAMPAIGN_MAX_COUNT, "safe32", "", 12, 0, NULL},
        {"count 0", 0, "safe32", "", 12, 0, "\"count\" must be within 1..10000000"},
        {"count above the maximum", VC_CAMPAIGN_MAX_COUNT + 1, "safe32", "", 12, 0, "\"count\""},
        {"unknown alphabet", 10, "base64", "", 12, 0, "\"alphabet\" must be"},
        {"too short for a million", 1000000, "safe32", "", 9, 0, "at least 10"},
        {"the check symbol costs one", 1000000, "safe32", "", 10, 1, "at least 11"},
        {"long enough with it", 1000000, "safe32", "", 11, 1, NULL},
        {"digits need 15 for a million", 1000000, "digits", "", 14, 0, "at least 15"},
        {"prefix outside the alphabet", 10, "safe32", "SPRI", 12, 0, "'I' is not one"},
        {"prefix of the alphabet", 10, "safe32", "SPRNG", 12, 0, NULL},
        {"the longest code", 10, "safe32", "ABCDEFGH", 24, 0, NULL},
        {"length below 6", 1, "safe32", "", 5, 0, "within 6..24"},
    };
    char err[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vc_campaign_spec_t s = good_spec();
        int rc;

        s.count = cases[i].count;
        s.alphabet = vc_alphabet_find(cases[i].alphabet);
        strcpy(s.prefix, cases[i].prefix);
        s.length = cases[i].length;
        s.check_symbol = cases[i].check;
        err[0] = '\0';
        rc = vc_campaign_spec_check(&s, err, sizeof(err));
        if (!cases[i].want)
            ck_assert_msg(rc == 0, "%s: refused: %s", cases[i].what, err);
        else
            ck_assert_msg(rc == VC_ERR_INVALID && strstr(err, cases[i].want), "%s: rc %d, '%s'",
                          cases[i].what, rc, err);
    }
}
END_TEST

START_TEST(spec_checks_the_rules)
{
    vc_campaign_spec_t s = good_spec();
    char err[256];

    s.discount_percent = 10;
    ck_assert_int_eq(vc_campaign_spec_check(&s, err, sizeof(err)), VC_ERR_INVALID);
    s = good_spec();
    s.ends_at_ms = s.starts_at_ms;
    ck_assert_int_eq(vc_campaign_spec_check(&s, err, sizeof(err)), VC_ERR_INVALID);
    s = good_spec();
    s.name[0] = '\0';
    ck_assert_int_eq(vc_campaign_spec_check(&s, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/* A source that repeats a fixed sequence of bytes. */
typedef struct {
    const unsigned char *bytes;
    size_t len, next;
} fixed_source_t;

static int fixed_fill(void *arg, unsigned char *buf, size_t len)
{
    fixed_source_t *f = arg;

    for (size_t i = 0; i < len; i++)
        buf[i] = f->bytes[f->next++ % f->len];
    return 0;
}

START_TEST(rejection_drops_the_bytes_that_would_bias)
{
    /* For 10 symbols, 250..255 would make 0..5 likelier: each is dropped. */
    static const unsigned char bytes[] = {250, 251, 252, 253, 254, 255, 13, 249};
    fixed_source_t src = {bytes, sizeof(bytes), 0};
    vc_campaign_spec_t s = good_spec();
    vc_codegen_t *g = malloc(sizeof(*g));
    char code[VC_CODE_MAX + 1];

    s.alphabet = vc_alphabet_find("digits");
    s.length = 6;
    vc_codegen_init(g, &s, fixed_fill, &src);
    ck_assert_int_eq(vc_codegen_next(g, code), 6);
    /* Six dropped, 13 -> '3', 249 -> '9', three times over. */
    ck_assert_str_eq(code, "393939");
    ck_assert_uint_eq(g->rejected, 18);
    free(g);
}
END_TEST

static int cmp_code(const void *a, const void *b)
{
    return memcmp(a, b, 13);
}

/* The chi-square statistic of counts (n bins) against a uniform expectation. */
static double chi_square(const uint64_t *counts, unsigned n)
{
    uint64_t total = 0;
    double chi = 0;

    for (unsigned i = 0; i < n; i++)
        total += counts[i];
    for (unsigned i = 0; i < n; i++) {
        double e = (double)total / n, d = (double)counts[i] - e;
        chi += d * d / e;
    }
    return chi;
}

/*
 * A million codes from getrandom: unique, 12 symbols of safe32, and each
 * symbol about equally frequent overall and at every position. The bounds
 * are chi-square's upper 10^-6 tails (31 degrees of freedom: 84; 9: 46), so
 * a correct generator fails this once in a million runs.
 */
START_TEST(a_million_codes_unique_right_alphabet_uniform)
{
    enum { N = 1000000, LEN = 12 };
    vc_campaign_spec_t s = good_spec();
    vc_codegen_t *g = malloc(sizeof(*g));
    char *codes = malloc((size_t)N * 13);
    uint64_t all[32] = {0}, at[LEN][32];
    const char *sym = s.alphabet->symbols;

    memset(at, 0, sizeof(at));
    vc_codegen_init(g, &s, vc_random_fill, NULL);
    /* Check's asserts write to a pipe each: counted here, asserted once. */
    int bad_length = 0, bad_symbol = 0, repeats = 0;
    for (int i = 0; i < N; i++) {
        char *c = codes + (size_t)i * 13;

        bad_length += vc_codegen_next(g, c) != LEN;
        for (int k = 0; k < LEN; k++) {
            const char *p = c[k] ? strchr(sym, c[k]) : NULL;
            if (!p) {
                bad_symbol++;
                continue;
            }
            all[p - sym]++;
            at[k][p - sym]++;
        }
    }
    ck_assert_int_eq(bad_length, 0);
    ck_assert_int_eq(bad_symbol, 0);
    qsort(codes, N, 13, cmp_code);
    for (int i = 1; i < N; i++)
        repeats += memcmp(codes + (size_t)(i - 1) * 13, codes + (size_t)i * 13, 13) == 0;
    ck_assert_int_eq(repeats, 0);
    ck_assert_msg(chi_square(all, 32) < 84, "chi-square %f over all symbols", chi_square(all, 32));
    for (int k = 0; k < LEN; k++)
        ck_assert_msg(chi_square(at[k], 32) < 84, "chi-square %f at position %d",
                      chi_square(at[k], 32), k);
    free(codes);
    free(g);
}
END_TEST

/* Ten symbols do not divide 256: without the rejection, 0..5 come 4% more often. */
START_TEST(digits_are_uniform_too)
{
    vc_campaign_spec_t s = good_spec();
    vc_codegen_t *g = malloc(sizeof(*g));
    uint64_t counts[10] = {0};
    char c[VC_CODE_MAX + 1];

    s.alphabet = vc_alphabet_find("digits");
    s.length = 20;
    s.count = 1000;
    vc_codegen_init(g, &s, vc_random_fill, NULL);
    for (int i = 0; i < 200000; i++) {
        if (vc_codegen_next(g, c) != 20)
            ck_abort_msg("a code of another length: %s", c);
        for (int k = 0; k < 20; k++)
            counts[c[k] - '0']++;
    }
    ck_assert_msg(chi_square(counts, 10) < 46, "chi-square %f", chi_square(counts, 10));
    free(g);
}
END_TEST

START_TEST(check_symbol_catches_every_single_typo)
{
    vc_campaign_spec_t s = good_spec();
    vc_codegen_t *g = malloc(sizeof(*g));
    const vc_alphabet_t *a = s.alphabet;
    char c[VC_CODE_MAX + 1];
    int swaps = 0, swaps_caught = 0;

    strcpy(s.prefix, "SP");
    s.length = 13;
    s.check_symbol = 1;
    vc_codegen_init(g, &s, vc_random_fill, NULL);
    for (int i = 0; i < 2000; i++) {
        if (vc_codegen_next(g, c) != 15 || !vc_campaign_code_plausible(&s, c, 15))
            ck_abort_msg("code %s is not plausible", c);
        for (int k = 2; k < 15; k++) {
            char was = c[k];

            for (unsigned v = 0; v < a->size; v++) {
                if (a->symbols[v] == was)
                    continue;
                c[k] = a->symbols[v];
                if (vc_campaign_code_plausible(&s, c, 15))
                    ck_abort_msg("typo %s at %d passed", c, k);
            }
            c[k] = was;
            if (k < 14 && c[k] != c[k + 1]) {
                char t = c[k];
                c[k] = c[k + 1];
                c[k + 1] = t;
                swaps++;
                swaps_caught += !vc_campaign_code_plausible(&s, c, 15);
                c[k + 1] = c[k];
                c[k] = t;
            }
        }
    }
    /* Luhn mod N misses only the swaps of one pair of values: well under 1%. */
    ck_assert_msg(swaps_caught >= swaps * 99 / 100, "%d of %d swaps caught", swaps_caught, swaps);
    free(g);
}
END_TEST

START_TEST(input_and_display_forms)
{
    char out[VC_CODE_MAX + 1], shown[VC_CAMPAIGN_DISPLAY_MAX + 1];

    ck_assert_int_eq(vc_campaign_normalize("k7qm x3ra-9pzc", 14, out), 12);
    ck_assert_str_eq(out, "K7QMX3RA9PZC");
    ck_assert_int_eq(vc_campaign_normalize("K7QM_X3RA", 9, out), -1);
    ck_assert_int_eq(vc_campaign_normalize("--", 2, out), -1);
    ck_assert_int_eq(vc_campaign_normalize("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 33, out), -1);
    ck_assert_uint_eq(vc_campaign_display("K7QMX3RA9PZC", 0, shown, sizeof(shown)), 14);
    ck_assert_str_eq(shown, "K7QM-X3RA-9PZC");
    ck_assert_uint_eq(vc_campaign_display("SPRK7QMX3RA9PZCX", 3, shown, sizeof(shown)), 20);
    ck_assert_str_eq(shown, "SPR-K7QM-X3RA-9PZC-X");
    /* Display, then input: the stored form again. */
    ck_assert_int_eq(vc_campaign_normalize(shown, strlen(shown), out), 16);
    ck_assert_str_eq(out, "SPRK7QMX3RA9PZCX");
    ck_assert_uint_eq(vc_campaign_display("K7QMX3RA9PZC", 0, shown, 14), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("campaign");
    TCase *tc = tcase_create("campaign");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, spec_checks);
    tcase_add_test(tc, spec_checks_the_rules);
    tcase_add_test(tc, rejection_drops_the_bytes_that_would_bias);
    tcase_add_test(tc, a_million_codes_unique_right_alphabet_uniform);
    tcase_add_test(tc, digits_are_uniform_too);
    tcase_add_test(tc, check_symbol_catches_every_single_typo);
    tcase_add_test(tc, input_and_display_forms);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
