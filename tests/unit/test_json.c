/*
 * vc_json_read_flat() (common/vc_json.h): a flat object read in one pass into
 * the caller's slots, and every other document left to vc_jdoc_parse(). Each
 * case is also given to vc_jdoc_parse(): what the pass reads, the general
 * parser reads with the same values.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "vc_json.h"

typedef struct {
    int64_t id, amount;
    char name[8];
} slots_t;

/* A name of letters only, so that str_ok has something to refuse. */
static int letters(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((s[i] < 'a' || s[i] > 'z') && (s[i] < 'A' || s[i] > 'Z'))
            return 0;
    return len > 0;
}

static int read_slots(const char *json, size_t len, slots_t *out)
{
    static const vc_jflat_field_t fields[] = {
        VC_JFLAT_FIELD_INT("id", slots_t, id),
        VC_JFLAT_FIELD_STR("name", slots_t, name, letters),
        VC_JFLAT_FIELD_INT("amount", slots_t, amount),
    };

    memset(out, 0, sizeof(*out));
    return vc_json_read_flat(json, len, fields, sizeof(fields) / sizeof(fields[0]), out);
}

static const struct {
    const char *json;
    int rc; /* 0: read in one pass; VC_JFLAT_OTHER: left to the general parser */
    int64_t id, amount;
    const char *name;
} cases[] = {
    /* The flat body, in any order and spacing. */
    {"{\"id\":7,\"name\":\"Ann\",\"amount\":1500}", 0, 7, 1500, "Ann"},
    {" { \"amount\" : 0 , \"id\" : -3 , \"name\" : \"Bo\" } ", 0, -3, 0, "Bo"},
    {"{\"name\":\"\\u0041b\",\"id\":1,\"amount\":2}", 0, 1, 2, "Ab"}, /* an escape decoded */
    {"{\"id\":999999999999999999,\"name\":\"x\",\"amount\":1}", 0, 999999999999999999, 1, "x"},
    {"{\"id\":-999999999999999999,\"name\":\"x\",\"amount\":1}", 0, -999999999999999999, 1, "x"},
    /* Huge numbers: 19 digits and more are the general parser's (it knows 64 bits). */
    {"{\"id\":1000000000000000000,\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":99999999999999999999999999,\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    /* Wrong types, or a valid form left alone. */
    {"{\"id\":\"7\",\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":5,\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1.0}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1e3}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":null,\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":true,\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    /* A string too long for its slot, refused by str_ok, or holding a NUL. */
    {"{\"id\":7,\"name\":\"Abcdefgh\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"Abcdefg\",\"amount\":1}", 0, 7, 1, "Abcdefg"},
    {"{\"id\":7,\"name\":\"a1\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"a\\u0000b\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    /* Nested, unknown, missing or repeated fields; not an object. */
    {"{\"id\":7,\"name\":\"x\",\"amount\":{\"v\":1}}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":[1]}", VC_JFLAT_OTHER, 0, 0, NULL},
    /* An empty object as a value: nothing inside it stops the pass, the nesting must. */
    {"{\"id\":{},\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1,\"extra\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\"}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1,\"id\":8}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"[7,\"x\",1]", VC_JFLAT_OTHER, 0, 0, NULL},
    {"7", VC_JFLAT_OTHER, 0, 0, NULL},
    /* Malformed or truncated. */
    {"", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amou", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1}}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1} {}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":7,\"name\":\"x\",\"amount\":1 /* c */}", VC_JFLAT_OTHER, 0, 0, NULL},
    {"{\"id\":07,\"name\":\"x\",\"amount\":1}", VC_JFLAT_OTHER, 0, 0, NULL},
};

START_TEST(each_document_is_read_or_left)
{
    const char *json = cases[_i].json;
    slots_t got;
    vc_jdoc_t doc;
    char err[256];
    int rc = read_slots(json, strlen(json), &got);

    ck_assert_msg(rc == cases[_i].rc, "%s: rc %d, want %d", json, rc, cases[_i].rc);
    if (rc != 0)
        return;
    ck_assert_int_eq(got.id, cases[_i].id);
    ck_assert_int_eq(got.amount, cases[_i].amount);
    ck_assert_str_eq(got.name, cases[_i].name);
    /* What the pass reads, the general parser reads the same. */
    ck_assert_msg(vc_jdoc_parse(&doc, json, strlen(json), err, sizeof(err)) == 0, "%s: %s", json,
                  err);
    {
        int64_t id, amount;
        const char *name;
        ck_assert_int_eq(vc_jdoc_int(&doc, "id", &id, err, sizeof(err)), 0);
        ck_assert_int_eq(vc_jdoc_int(&doc, "amount", &amount, err, sizeof(err)), 0);
        ck_assert_int_eq(vc_jdoc_str(&doc, "name", &name, err, sizeof(err)), 0);
        ck_assert_int_eq(id, got.id);
        ck_assert_int_eq(amount, got.amount);
        ck_assert_str_eq(name, got.name);
    }
    vc_jdoc_free(&doc);
}
END_TEST

/* A raw NUL byte inside the length is never read past, even inside a string. */
START_TEST(a_raw_nul_is_left_to_the_general_parser)
{
    static const char json[] = "{\"id\":7,\"name\":\"a\0b\",\"amount\":1}";
    slots_t got;

    ck_assert_int_eq(read_slots(json, sizeof(json) - 1, &got), VC_JFLAT_OTHER);
}
END_TEST

/* A NUL decoded from \u0000 would cut a string that nothing else checks. */
START_TEST(a_nul_escape_is_never_read)
{
    static const char json[] = "{\"name\":\"a\\u0000b\"}";
    slots_t got;
    static const vc_jflat_field_t fields[] = {VC_JFLAT_FIELD_STR("name", slots_t, name, NULL)};

    ck_assert_int_eq(vc_json_read_flat(json, sizeof(json) - 1, fields, 1, &got), VC_JFLAT_OTHER);
    ck_assert_int_eq(vc_json_read_flat("{\"name\":\"ab\"}", 13, fields, 1, &got), 0);
    ck_assert_str_eq(got.name, "ab");
}
END_TEST

/* Every prefix of a flat body is truncated input: none of them is read. */
START_TEST(no_prefix_of_a_body_is_read)
{
    static const char json[] = "{\"id\":7,\"name\":\"Ann\",\"amount\":1500}";
    slots_t got;

    for (size_t n = 0; n < sizeof(json) - 1; n++)
        ck_assert_msg(read_slots(json, n, &got) == VC_JFLAT_OTHER, "prefix of %zu bytes read", n);
    ck_assert_int_eq(read_slots(json, sizeof(json) - 1, &got), 0);
}
END_TEST

/* A long body (an unknown key of 10 kB) outgrows the stack buffer and is still refused cleanly. */
START_TEST(a_long_document_is_refused_without_leaking)
{
    static char json[12000];
    slots_t got;
    size_t n = 0;

    n += (size_t)snprintf(json + n, sizeof(json) - n, "{\"");
    for (int i = 0; i < 10000; i++)
        json[n++] = 'k';
    n += (size_t)snprintf(json + n, sizeof(json) - n, "\":1}");
    ck_assert_int_eq(read_slots(json, n, &got), VC_JFLAT_OTHER);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("flat");

    tcase_add_loop_test(tc, each_document_is_read_or_left, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, a_raw_nul_is_left_to_the_general_parser);
    tcase_add_test(tc, a_nul_escape_is_never_read);
    tcase_add_test(tc, no_prefix_of_a_body_is_read);
    tcase_add_test(tc, a_long_document_is_refused_without_leaking);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(json_suite());
}
