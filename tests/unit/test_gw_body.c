/*
 * Unit tests for the reservation body's two readers (gateway/gw_body.c): the
 * one-pass reader takes the bodies clients send, and leaves everything else
 * to the general parser, so every refusal keeps its wording. Each case
 * checks what gw_reserve_req_parse() answers, and that whatever the one-pass
 * reader accepts, the general parser accepts with the same values.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "gw_body.h"
#include "vc_error.h"

/* Whether the one-pass reader takes the body (FAST) or leaves it (SLOW). */
enum { FAST, SLOW };

typedef struct {
    const char *name;
    const char *body;
    size_t len; /* 0: strlen(body) */
    int path;   /* FAST or SLOW */
    int rc;     /* what gw_reserve_req_parse() returns */
    const char *err; /* its err, when rc != 0 (a prefix is enough for yajl's own words) */
    int64_t customer_id, order_amount;
    const char *order_id;
} body_case_t;

#define OK_BODY "{\"customerId\":42,\"orderId\":\"o-1\",\"orderAmount\":50000}"

static const body_case_t cases[] = {
    /* What clients send: the one pass takes it. */
    {"plain", OK_BODY, 0, FAST, 0, NULL, 42, 50000, "o-1"},
    {"spaces and another order",
     " {\n \"orderAmount\" : 0 ,\t\"orderId\":\"A_b.c:9~\", \"customerId\": 1 }\r\n", 0, FAST, 0,
     NULL, 1, 0, "A_b.c:9~"},
    {"an escaped character, decoded", "{\"customerId\":7,\"orderId\":\"o\\u002d1\",\"orderAmount\":1}",
     0, FAST, 0, NULL, 7, 1, "o-1"},
    {"18 digits", "{\"customerId\":999999999999999999,\"orderId\":\"x\",\"orderAmount\":1}", 0, FAST,
     0, NULL, 999999999999999999LL, 1, "x"},
    {"minus zero amount", "{\"customerId\":3,\"orderId\":\"x\",\"orderAmount\":-0}", 0, FAST, 0,
     NULL, 3, 0, "x"},
    /* Valid forms the one pass leaves to the general parser, which takes them. */
    {"5.0 is an integer", "{\"customerId\":5.0,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW, 0,
     NULL, 5, 1, "x"},
    {"1e3 is an integer", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1e3}", 0, SLOW, 0,
     NULL, 1, 1000, "x"},
    {"19 digits", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":9223372036854775807}", 0,
     SLOW, 0, NULL, 1, INT64_MAX, "x"},
    /* Duplicate keys. */
    {"customerId twice",
     "{\"customerId\":1,\"customerId\":2,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: field \"customerId\" given twice", 0, 0, NULL},
    {"orderId twice, same value",
     "{\"customerId\":1,\"orderId\":\"x\",\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: field \"orderId\" given twice", 0, 0, NULL},
    {"a key spelt with an escape, twice",
     "{\"customerId\":1,\"customer\\u0049d\":2,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: field \"customerId\" given twice", 0, 0, NULL},
    /* Wrong types. */
    {"customerId a string", "{\"customerId\":\"42\",\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"customerId\" must be an integer", 0, 0, NULL},
    {"customerId a fraction", "{\"customerId\":1.5,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"customerId\" must be a whole number within 64 bits", 0, 0, NULL},
    {"orderId a number", "{\"customerId\":1,\"orderId\":42,\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderId\" must be a string", 0, 0, NULL},
    {"orderAmount null", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":null}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderAmount\" must be an integer", 0, 0, NULL},
    {"orderAmount true", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":true}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderAmount\" must be an integer", 0, 0, NULL},
    {"the body an array", "[1,2,3]", 0, SLOW, VC_ERR_INVALID,
     "malformed JSON: expected an object", 0, 0, NULL},
    {"the body a number", "42", 0, SLOW, VC_ERR_INVALID, "malformed JSON: expected an object", 0, 0, NULL},
    /* Nesting. */
    {"customerId an object",
     "{\"customerId\":{\"a\":1},\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW, VC_ERR_INVALID,
     "field \"customerId\" must be an integer", 0, 0, NULL},
    {"orderId an array", "{\"customerId\":1,\"orderId\":[\"x\"],\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderId\" must be a string", 0, 0, NULL},
    {"a duplicate inside a nested object",
     "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1,\"z\":{\"a\":1,\"a\":2}}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: field \"a\" given twice", 0, 0, NULL},
    {"nested too deep",
     "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1,\"z\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}",
     0, SLOW, VC_ERR_INVALID, "malformed JSON: nested deeper than 16 levels", 0, 0, NULL},
    /* Huge numbers. */
    {"customerId past 64 bits",
     "{\"customerId\":99999999999999999999,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"customerId\" must be a whole number within 64 bits", 0, 0, NULL},
    {"orderAmount past 64 bits, negative",
     "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":-9223372036854775809}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderAmount\" must be a whole number within 64 bits", 0, 0, NULL},
    {"an exponent past any bound", "{\"customerId\":1e999999,\"orderId\":\"x\",\"orderAmount\":1}",
     0, SLOW, VC_ERR_INVALID, "field \"customerId\" must be a whole number within 64 bits", 0, 0, NULL},
    /* Values out of their bounds. */
    {"customerId 0", "{\"customerId\":0,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"customerId\" must be a positive integer", 0, 0, NULL},
    {"customerId negative", "{\"customerId\":-5,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"customerId\" must be a positive integer", 0, 0, NULL},
    {"orderAmount negative", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":-1}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderAmount\" must not be negative", 0, 0, NULL},
    {"orderId with a space", "{\"customerId\":1,\"orderId\":\"a b\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderId\" must be 1..", 0, 0, NULL},
    {"orderId empty", "{\"customerId\":1,\"orderId\":\"\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "field \"orderId\" must be 1..", 0, 0, NULL},
    {"orderId too long",
     "{\"customerId\":1,\"orderId\":\"0123456789012345678901234567890123456789012345678901234567890123456789\",\"orderAmount\":1}",
     0, SLOW, VC_ERR_INVALID, "field \"orderId\" must be 1..", 0, 0, NULL},
    /* Missing and unknown fields. */
    {"orderAmount missing", "{\"customerId\":1,\"orderId\":\"x\"}", 0, SLOW, VC_ERR_INVALID,
     "field \"orderAmount\" is required", 0, 0, NULL},
    {"an empty object", "{}", 0, SLOW, VC_ERR_INVALID, "field \"customerId\" is required", 0, 0, NULL},
    {"an unknown field", "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1,\"coupon\":1}", 0,
     SLOW, VC_ERR_INVALID, "unknown field \"coupon\"", 0, 0, NULL},
    {"a key differing in case", "{\"customerid\":1,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "unknown field \"customerid\"", 0, 0, NULL},
    /* Bytes that are not JSON, or not UTF-8. */
    {"invalid UTF-8 in orderId", "{\"customerId\":1,\"orderId\":\"o-\xff\",\"orderAmount\":1}", 0,
     SLOW, VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
    /* yajl lets an overlong encoding through: the parser's own check refuses it. */
    {"an overlong UTF-8 encoding", "{\"customerId\":1,\"orderId\":\"\xc0\xaf\",\"orderAmount\":1}",
     0, SLOW, VC_ERR_INVALID, "malformed JSON: field \"orderId\" is not valid UTF-8", 0, 0, NULL},
    {"\\u0000 in orderId", "{\"customerId\":1,\"orderId\":\"a\\u0000b\",\"orderAmount\":1}", 0,
     SLOW, VC_ERR_INVALID, "malformed JSON: field \"orderId\" contains a NUL character", 0, 0, NULL},
    {"a raw NUL byte after the object", OK_BODY "\0", sizeof(OK_BODY), SLOW, VC_ERR_INVALID,
     "malformed JSON: contains a NUL byte", 0, 0, NULL},
    {"trailing garbage", OK_BODY "x", 0, SLOW, VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
    {"two objects", OK_BODY OK_BODY, 0, SLOW, VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
    {"a comment", "{/* c */\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
    {"cut short", "{\"customerId\":1,\"orderId\":\"x\",", 0, SLOW, VC_ERR_INVALID,
     "malformed JSON: ", 0, 0, NULL},
    {"empty", "", 0, SLOW, VC_ERR_INVALID, "malformed JSON: parse error: premature EOF", 0, 0, NULL},
    {"only whitespace", " \n", 0, SLOW, VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
    {"a leading zero", "{\"customerId\":01,\"orderId\":\"x\",\"orderAmount\":1}", 0, SLOW,
     VC_ERR_INVALID, "malformed JSON: ", 0, 0, NULL},
};

static size_t case_len(const body_case_t *c)
{
    return c->len ? c->len : strlen(c->body);
}

/*
 * What the one-pass reader accepts, the general parser accepts with the same
 * values; and gw_reserve_req_parse() answers as the general parser does.
 */
static void check_agrees(const char *body, size_t len)
{
    gw_reserve_req_t fast, general, parsed;
    char gerr[256] = "", perr[256] = "";
    int grc = gw_reserve_req_general(body, len, &general, gerr, sizeof(gerr));
    int prc = gw_reserve_req_parse(body, len, &parsed, perr, sizeof(perr));

    if (gw_reserve_req_fast(body, len, &fast) == 0) {
        ck_assert_int_eq(grc, 0);
        ck_assert_int_eq(fast.customer_id, general.customer_id);
        ck_assert_int_eq(fast.order_amount, general.order_amount);
        ck_assert_str_eq(fast.order_id, general.order_id);
    }
    ck_assert_int_eq(prc, grc);
    if (grc == 0) {
        ck_assert_int_eq(parsed.customer_id, general.customer_id);
        ck_assert_int_eq(parsed.order_amount, general.order_amount);
        ck_assert_str_eq(parsed.order_id, general.order_id);
    } else {
        ck_assert_str_eq(perr, gerr);
    }
}

START_TEST(each_body_gets_its_answer)
{
    const body_case_t *c = &cases[_i];
    size_t len = case_len(c);
    gw_reserve_req_t in;
    char err[256] = "";
    int rc;

    /* Which reader takes the body: the bodies clients send never reach the general one. */
    ck_assert_msg(gw_reserve_req_fast(c->body, len, &in) == (c->path == FAST ? 0 : 1), "%s: path",
                  c->name);
    rc = gw_reserve_req_parse(c->body, len, &in, err, sizeof(err));
    ck_assert_msg(rc == c->rc, "%s: rc %d (%s), want %d", c->name, rc, err, c->rc);
    if (rc == 0) {
        ck_assert_int_eq(in.customer_id, c->customer_id);
        ck_assert_int_eq(in.order_amount, c->order_amount);
        ck_assert_str_eq(in.order_id, c->order_id);
    } else {
        ck_assert_msg(strncmp(err, c->err, strlen(c->err)) == 0, "%s: err \"%s\", want \"%s\"",
                      c->name, err, c->err);
    }
    check_agrees(c->body, len);
}
END_TEST

/*
 * Bodies made by changing a valid one a byte at a time (deterministic): the
 * readers agree on each, and nothing reads out of bounds (run under ASan).
 */
START_TEST(mutated_bodies_get_the_general_answer)
{
    static const char base[] = OK_BODY;
    static const char alphabet[] = "{}[]\":,0123456789-+.eE \\u\xff\xc3\xa9\x00tnfx";
    uint32_t seed = 12345;
    char body[sizeof(base) + 8];

    for (int round = 0; round < 20000; round++) {
        size_t len = sizeof(base) - 1;
        int edits = 1 + round % 3;

        memcpy(body, base, len);
        for (int e = 0; e < edits; e++) {
            size_t at;
            char ch;

            seed = seed * 1103515245u + 12345u;
            at = (seed >> 8) % len;
            ch = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
            switch ((seed >> 4) % 3) {
            case 0: /* replace */
                body[at] = ch;
                break;
            case 1: /* delete */
                memmove(body + at, body + at + 1, len - at - 1);
                len--;
                break;
            default: /* insert */
                if (len + 1 < sizeof(body)) {
                    memmove(body + at + 1, body + at, len - at);
                    body[at] = ch;
                    len++;
                }
                break;
            }
        }
        check_agrees(body, len);
    }
}
END_TEST

/* A body bigger than the one-pass reader's buffer: its allocations move to the heap. */
START_TEST(a_long_escaped_unknown_key_is_refused)
{
    size_t n = 6000, len = 0;
    char *body = malloc(n * 6 + 128);
    char err[256];
    gw_reserve_req_t in;

    ck_assert_ptr_nonnull(body);
    len += (size_t)sprintf(body, "{\"customerId\":1,\"orderId\":\"x\",\"orderAmount\":1,\"");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(body + len, "\\u0041");
    len += (size_t)sprintf(body + len, "\":1}");
    ck_assert_int_eq(gw_reserve_req_fast(body, len, &in), 1);
    ck_assert_int_eq(gw_reserve_req_parse(body, len, &in, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strncmp(err, "unknown field \"AAAA", 19) == 0, "%s", err);
    free(body);
}
END_TEST

/* An orderId written with escapes only, long enough to grow yajl's string buffer. */
START_TEST(an_escaped_order_id_is_read_in_one_pass)
{
    char body[512], want[VC_ORDER_ID_MAX + 1];
    size_t len = 0;
    gw_reserve_req_t in;

    len += (size_t)sprintf(body, "{\"customerId\":9,\"orderId\":\"");
    for (int i = 0; i < VC_ORDER_ID_MAX; i++) {
        len += (size_t)sprintf(body + len, "\\u004%d", 1 + i % 9);
        want[i] = (char)('A' + i % 9);
    }
    want[VC_ORDER_ID_MAX] = '\0';
    len += (size_t)sprintf(body + len, "\",\"orderAmount\":2}");
    ck_assert_int_eq(gw_reserve_req_fast(body, len, &in), 0);
    ck_assert_str_eq(in.order_id, want);
    check_agrees(body, len);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gw_body");
    TCase *tc = tcase_create("reserve body");

    tcase_add_loop_test(tc, each_body_gets_its_answer, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, mutated_bodies_get_the_general_answer);
    tcase_add_test(tc, a_long_escaped_unknown_key_is_refused);
    tcase_add_test(tc, an_escaped_order_id_is_read_in_one_pass);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
