/* Unit tests for the pure part of gateway/: routing, request bodies, answers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "json_same.h"
#include "gw_admins.h"
#include "gw_app.h"
#include "gw_campaign.h"
#include "gw_campaign_redeem.h"
#include "gw_guard.h"
#include "gw_http.h"
#include "vc_num.h"
#include "gw_router.h"
#include "gw_rules.h"
#include "gw_soldout.h"
#include "vc_claim.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_time.h"
#include "vc_voucher_create.h"

/* ---- routing ---- */

static const struct {
    gw_method_t method;
    const char *path;
    gw_route_kind_t kind;
    const char *code, *order_id, *allow;
} route_cases[] = {
    {GW_M_GET, "/healthz", GW_ROUTE_HEALTHZ, "", "", NULL},
    {GW_M_GET, "/healthz?verbose=1", GW_ROUTE_HEALTHZ, "", "", NULL},
    {GW_M_POST, "/healthz", GW_ROUTE_BAD_METHOD, "", "", "GET"},
    {GW_M_POST, "/vouchers/FLASH100/reservations", GW_ROUTE_RESERVE, "FLASH100", "", NULL},
    {GW_M_POST, "/vouchers/A-B_9/reservations?x=1", GW_ROUTE_RESERVE, "A-B_9", "", NULL},
    {GW_M_GET, "/vouchers/FLASH100/reservations", GW_ROUTE_BAD_METHOD, "FLASH100", "", "POST"},
    {GW_M_DELETE, "/vouchers/FLASH100/reservations/o-1", GW_ROUTE_CANCEL, "FLASH100", "o-1", NULL},
    {GW_M_POST, "/vouchers/FLASH100/reservations/o-1", GW_ROUTE_BAD_METHOD, "FLASH100", "o-1",
     "GET, DELETE"},
    {GW_M_POST, "/vouchers/FLASH100/reservations/o-1/confirm", GW_ROUTE_CONFIRM, "FLASH100", "o-1",
     NULL},
    {GW_M_DELETE, "/vouchers/FLASH100/reservations/o-1/confirm", GW_ROUTE_BAD_METHOD, "FLASH100",
     "o-1", "POST"},
    /* A code or orderId that cannot exist: 404, whatever the method. */
    /* Lower case routes: a campaign's code may be typed so (proto/campaigns.md). */
    {GW_M_POST, "/vouchers/flash100/reservations", GW_ROUTE_RESERVE, "flash100", "", NULL},
    {GW_M_POST, "/vouchers/flash_100/reservations", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456/reservations", GW_ROUTE_NOT_FOUND, "",
     "", NULL},
    {GW_M_POST, "/vouchers//reservations", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_DELETE, "/vouchers/FLASH100/reservations/o%201", GW_ROUTE_NOT_FOUND, "", "", NULL},
    /* Paths that are not routes. */
    {GW_M_GET, "/", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_GET, "", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_GET, "*", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_GET, "/healthz/", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100/reservations/", GW_ROUTE_NOT_FOUND, "", "", NULL},
    /* Every route of proto/openapi.yaml. */
    {GW_M_GET, "/readyz", GW_ROUTE_READYZ, "", "", NULL},
    {GW_M_DELETE, "/readyz", GW_ROUTE_BAD_METHOD, "", "", "GET"},
    {GW_M_GET, "/metrics", GW_ROUTE_METRICS, "", "", NULL},
    {GW_M_POST, "/metrics", GW_ROUTE_BAD_METHOD, "", "", "GET"},
    {GW_M_POST, "/vouchers", GW_ROUTE_CREATE, "", "", NULL},
    {GW_M_POST, "/vouchers?dry=1", GW_ROUTE_CREATE, "", "", NULL},
    {GW_M_GET, "/vouchers", GW_ROUTE_LIST, "", "", NULL},
    {GW_M_GET, "/vouchers?active=true&limit=5", GW_ROUTE_LIST, "", "", NULL},
    {GW_M_DELETE, "/vouchers", GW_ROUTE_BAD_METHOD, "", "", "GET, POST"},
    {GW_M_GET, "/vouchers/F/reservations/o-1", GW_ROUTE_LOOKUP, "F", "o-1", NULL},
    {GW_M_GET, "/vouchers/FLASH100", GW_ROUTE_SHOW, "FLASH100", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100", GW_ROUTE_BAD_METHOD, "FLASH100", "", "GET, PATCH"},
    {GW_M_PATCH, "/vouchers/FLASH100", GW_ROUTE_UPDATE, "FLASH100", "", NULL},
    /* Percent-encoded segments are decoded, as URL libraries encode them. */
    {GW_M_DELETE, "/vouchers/FLASH%31/reservations/a%26b%40c", GW_ROUTE_CANCEL, "FLASH1", "a&b@c",
     NULL},
    {GW_M_POST, "/vouchers/F/reservations/%5Co%7e/confirm", GW_ROUTE_CONFIRM, "F", "\\o~", NULL},
    {GW_M_DELETE, "/vouchers/F/reservations/a%2Fb", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_DELETE, "/vouchers/F/reservations/a%25b", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_DELETE, "/vouchers/F/reservations/a%00b", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_DELETE, "/vouchers/F/reservations/a%2", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_DELETE, "/vouchers/F/reservations/a%zz", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_GET, "/vouchers/%66", GW_ROUTE_SHOW, "f", "", NULL}, /* a campaign code may be lower case */
    {GW_M_PATCH, "/vouchers/FLASH100/reservations", GW_ROUTE_BAD_METHOD, "FLASH100", "", "POST"},
    {GW_M_GET, "/vouchers/flash100", GW_ROUTE_SHOW, "flash100", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100/quote", GW_ROUTE_QUOTE, "FLASH100", "", NULL},
    {GW_M_GET, "/vouchers/FLASH100/quote", GW_ROUTE_BAD_METHOD, "FLASH100", "", "POST"},
    {GW_M_POST, "/vouchers/FLASH100/quote/o-1", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100/holds", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100/reservations/o-1/pay", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_POST, "/vouchers/FLASH100/reservations/o-1/confirm/x", GW_ROUTE_NOT_FOUND, "", "", NULL},
    {GW_M_OTHER, "/vouchers/FLASH100/reservations", GW_ROUTE_BAD_METHOD, "FLASH100", "", "POST"},
};

START_TEST(route_table)
{
    gw_route_t r;
    const char *path = route_cases[_i].path;

    gw_route(route_cases[_i].method, path, strlen(path), &r);
    ck_assert_msg(r.kind == route_cases[_i].kind, "%s: kind %d, want %d", path, (int)r.kind,
                  (int)route_cases[_i].kind);
    ck_assert_str_eq(r.code, route_cases[_i].code);
    ck_assert_str_eq(r.order_id, route_cases[_i].order_id);
    if (route_cases[_i].allow)
        ck_assert_str_eq(r.allow, route_cases[_i].allow);
    else
        ck_assert_ptr_null(r.allow);
}
END_TEST

START_TEST(route_ignores_bytes_after_len)
{
    gw_route_t r;
    const char *path = "/healthzXXXX";
    gw_route(GW_M_GET, path, 8, &r);
    ck_assert_int_eq(r.kind, GW_ROUTE_HEALTHZ);
}
END_TEST

/* ---- reservation bodies ---- */

START_TEST(body_valid)
{
    gw_reserve_req_t in;
    char err[256];
    const char *b = "{\"customerId\":42,\"orderId\":\"order-42\",\"orderAmount\":250000}";

    ck_assert_int_eq(gw_reserve_req_parse(b, strlen(b), &in, err, sizeof(err)), 0);
    ck_assert_int_eq(in.customer_id, 42);
    ck_assert_str_eq(in.order_id, "order-42");
    ck_assert_int_eq(in.order_amount, 250000);
}
END_TEST

START_TEST(body_limits_accepted)
{
    gw_reserve_req_t in;
    char err[256], b[256];
    char id[VC_ORDER_ID_MAX + 1];

    memset(id, 'x', VC_ORDER_ID_MAX);
    id[VC_ORDER_ID_MAX] = '\0';
    snprintf(b, sizeof(b),
             "{\"orderAmount\":0,\"orderId\":\"%s\",\"customerId\":9223372036854775807}", id);
    ck_assert_int_eq(gw_reserve_req_parse(b, strlen(b), &in, err, sizeof(err)), 0);
    ck_assert_int_eq(in.customer_id, INT64_MAX);
    ck_assert_str_eq(in.order_id, id);
    ck_assert_int_eq(in.order_amount, 0);
}
END_TEST

/* Each bad body must be a 400 whose detail names the field (or says what is wrong). */
static const struct {
    const char *body;
    const char *detail_has;
} bad_bodies[] = {
    {"", "malformed"},
    {"{", "malformed"},
    {"[1,2]", "object"},
    {"null", "malformed"},
    {"{\"customerId\":1,\"orderId\":", "malformed"},
    {"{\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":1,\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"o\"}", "orderAmount"},
    {"{\"customerId\":\"seven\",\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":1.5,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":0,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":-3,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":null,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":9223372036854775808,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    {"{\"customerId\":1,\"orderId\":7,\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"\",\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"a b\",\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"a/b\",\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":-1}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":\"10\"}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1.5e0}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":99999999999999999999}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1,\"coupon\":\"x\"}", "coupon"},
    {"{\"customerId\":1,\"customerId\":2,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
    /* Reserved as "nul" by a reader that measures the decoded string with strlen(). */
    {"{\"customerId\":1,\"orderId\":\"nul\\u0000tail\",\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"\\u0000\",\"orderAmount\":1}", "orderId"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1,\"orderId\\u0000\":2}", "NUL"},
    /* Comments are not JSON. */
    {"{\"customerId\":1,/* a comment */\"orderId\":\"o\",\"orderAmount\":1}", "comment"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1}// trailing", "malformed"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1,"
     "\"x\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}",
     "nested"},
};

START_TEST(body_rejected)
{
    gw_reserve_req_t in;
    char err[256] = "";
    const char *b = bad_bodies[_i].body;

    ck_assert_int_eq(gw_reserve_req_parse(b, strlen(b), &in, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, bad_bodies[_i].detail_has) != NULL, "body %s: detail \"%s\"", b, err);
}
END_TEST

START_TEST(body_order_id_too_long)
{
    gw_reserve_req_t in;
    char err[256], b[256], id[VC_ORDER_ID_MAX + 2];

    memset(id, 'x', VC_ORDER_ID_MAX + 1);
    id[VC_ORDER_ID_MAX + 1] = '\0';
    snprintf(b, sizeof(b), "{\"customerId\":1,\"orderId\":\"%s\",\"orderAmount\":1}", id);
    ck_assert_int_eq(gw_reserve_req_parse(b, strlen(b), &in, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "orderId"));
}
END_TEST

START_TEST(body_with_nul_byte)
{
    gw_reserve_req_t in;
    char err[256];
    const char b[] = "{\"customerId\":1,\"orderId\":\"o\0\",\"orderAmount\":1}";

    ck_assert_int_eq(gw_reserve_req_parse(b, sizeof(b) - 1, &in, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/* ---- stored order values ---- */

START_TEST(order_value)
{
    gw_order_value_t o;
    const char *ok = "42:100000:1795975982123:H";
    static const char *const bad[] = {
        "",           "42:1:2",  "42:1:2:Q", "42:1:2:HH", "x:1:2:H",
        "42:1:2:H:5", "42::2:H", "42:1:2:",  ":1:2:H",    "42:1:2:H\n"};

    ck_assert_int_eq(gw_order_value_parse(ok, strlen(ok), &o), 0);
    ck_assert_int_eq(o.customer_id, 42);
    ck_assert_int_eq(o.discount, 100000);
    ck_assert_int_eq(o.held_until_ms, 1795975982123LL);
    ck_assert_int_eq(o.state, 'H');
    /* Every state of proto/redis-keys.md reads. */
    for (const char *st = "HCXER"; *st; st++) {
        char v[32];
        snprintf(v, sizeof(v), "7:1:2:%c", *st);
        ck_assert_int_eq(gw_order_value_parse(v, strlen(v), &o), 0);
        ck_assert_int_eq(o.state, *st);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(gw_order_value_parse(bad[i], strlen(bad[i]), &o) == VC_ERR_PROTOCOL,
                      "accepted \"%s\"", bad[i]);
}
END_TEST

/* ---- answers ---- */

START_TEST(status_mapping)
{
    static const struct {
        int rc, status;
        const char *error, *reason;
    } cases[] = {
        {VC_E_OUT_OF_STOCK, 409, "OUT_OF_STOCK", NULL},
        {VC_E_ALREADY_USED, 409, "ALREADY_USED", NULL},
        {VC_E_ORDER_CONFLICT, 409, "ORDER_CONFLICT", NULL},
        {VC_E_HOLD_EXPIRED, 409, "HOLD_EXPIRED", NULL},
        {VC_E_NOT_FOUND, 404, "NOT_FOUND", NULL},
        {VC_E_EXPIRED, 422, "NOT_ELIGIBLE", "EXPIRED"},
        {VC_E_NOT_STARTED, 422, "NOT_ELIGIBLE", "NOT_STARTED"},
        {VC_E_ORDER_TOO_SMALL, 422, "NOT_ELIGIBLE", "ORDER_TOO_SMALL"},
        {VC_E_INACTIVE, 422, "NOT_ELIGIBLE", "INACTIVE"},
        {GW_E_LIMIT, 409, "LIMIT_CONFLICT", NULL},
        {GW_E_RULES, 409, "RULES_CONFLICT", NULL},
        {GW_E_MODE_LOCKED, 409, "MODE_LOCKED", NULL},
        {VC_ERR_INVALID, 400, "BAD_REQUEST", NULL},
        {VC_ERR_TOO_LARGE, 413, "PAYLOAD_TOO_LARGE", NULL},
        {VC_ERR_TIMEOUT, 503, "UNAVAILABLE", NULL},
        {VC_ERR_UNAVAILABLE, 503, "UNAVAILABLE", NULL},
        {VC_ERR_UNKNOWN_OUTCOME, 503, "UNAVAILABLE", NULL},
        {VC_ERR_NOMEM, 503, "UNAVAILABLE", NULL},
        {GW_E_EXISTS, 409, "EXISTS", NULL},
        {GW_E_CAMPAIGN_CODE, 409, "EXISTS", "CAMPAIGN_CODE"},
        {GW_E_UNAUTHORIZED, 401, "UNAUTHORIZED", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *error, *reason;
        ck_assert_int_eq(gw_status_for(cases[i].rc, &error, &reason), cases[i].status);
        ck_assert_str_eq(error, cases[i].error);
        if (cases[i].reason)
            ck_assert_str_eq(reason, cases[i].reason);
        else
            ck_assert_ptr_null(reason);
    }
}
END_TEST

START_TEST(bodies)
{
    char buf[512];
    size_t n;

    n = gw_body_error(buf, sizeof(buf), "BAD_REQUEST", "field \"orderId\" is required", NULL);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_json_eq(
        buf, "{\"error\":\"BAD_REQUEST\",\"detail\":\"field \\\"orderId\\\" is required\"}");
    gw_body_error(buf, sizeof(buf), "NOT_ELIGIBLE", "voucher expired", "EXPIRED");
    ck_assert_json_eq(
        buf, "{\"error\":\"NOT_ELIGIBLE\",\"detail\":\"voucher expired\",\"reason\":\"EXPIRED\"}");
    gw_body_reservation(buf, sizeof(buf), "order-42", "FLASH100", 100000, 1795975982123LL, 0);
    ck_assert_json_eq(buf,
                     "{\"orderId\":\"order-42\",\"code\":\"FLASH100\",\"discountAmount\":100000,"
                     "\"heldUntil\":\"2026-11-29T18:13:02.123Z\"}");
    gw_body_reservation(buf, sizeof(buf), "order-42", "FLASH100", 5, 1795975982123LL, 1);
    ck_assert_json_has(buf, "{\"replayed\":true}");
    gw_body_status(buf, sizeof(buf), "o-1", "FLASH100", "CONFIRMED", 0);
    ck_assert_json_eq(buf, "{\"orderId\":\"o-1\",\"code\":\"FLASH100\",\"status\":\"CONFIRMED\"}");
    ck_assert_uint_eq(gw_body_error(buf, 8, "BAD_REQUEST", "too long for the buffer", NULL), 0);
}
END_TEST

/* ---- error bodies quote input: always valid UTF-8 JSON ---- */

/*
 * Whether the n bytes at s are valid UTF-8 (RFC 3629), decoded by code point
 * here, apart from the code under test (common/vc_utf8.c checks byte ranges).
 */
static int utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;

    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t len = u[i] < 0x80                   ? 1
                     : u[i] >= 0xC0 && u[i] < 0xE0 ? 2
                     : u[i] >= 0xE0 && u[i] < 0xF0 ? 3
                     : u[i] >= 0xF0 && u[i] < 0xF8 ? 4
                                                   : 0;

        if (len == 0 || i + len > n)
            return 0;
        cp = len == 1 ? u[i] : u[i] & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (u[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/*
 * Checks that body is valid UTF-8 and JSON with a detail (the parser,
 * yajl, refuses a string that is not UTF-8), and copies the detail out.
 */
static void assert_utf8_json(const char *body, size_t n, char *detail, size_t cap)
{
    char err[256];
    vc_jdoc_t doc;

    ck_assert_msg(n > 0, "the body was written");
    ck_assert_msg(utf8_valid(body, n), "valid UTF-8: %s", body);
    ck_assert_msg(vc_jdoc_parse(&doc, body, n, err, sizeof(err)) == 0, "JSON: %s (%s)", body, err);
    ck_assert_int_eq(vc_jdoc_strcpy(&doc, "detail", detail, cap, err, sizeof(err)), 0);
    vc_jdoc_free(&doc);
}

/*
 * A detail that quotes input and is cut by its buffer (snprintf into err of
 * every size) at every byte of a 2-, 3- and 4-byte character: the body is
 * valid UTF-8 JSON, and its detail is the text up to the last whole
 * character, nothing replaced.
 */
START_TEST(error_detail_cut_at_every_byte)
{
    static const char *const chars[] = {"\xC3\x84" /* Ä */, "\xE2\x82\xAC" /* € */,
                                        "\xF0\x9F\x8E\x9F" /* a ticket, U+1F39F */};

    for (size_t c = 0; c < sizeof(chars) / sizeof(chars[0]); c++) {
        char whole[64], cut[64], body[256], detail[64];
        int len = snprintf(whole, sizeof(whole), "prefix '%s%s' is not one", chars[c], chars[c]);

        for (int errlen = 1; errlen <= len + 1; errlen++) {
            size_t kept = (size_t)errlen - 1, want = kept;

            snprintf(cut, (size_t)errlen, "%s", whole);
            /* The whole characters of the cut: a character split by it is left out. */
            for (size_t i = 0; i < kept;) {
                size_t clen = whole[i] & 0x80 ? strlen(chars[c]) : 1;
                if (i + clen > kept) {
                    want = i;
                    break;
                }
                i += clen;
            }
            assert_utf8_json(body, gw_body_error(body, sizeof(body), "BAD_REQUEST", cut, NULL),
                             detail, sizeof(detail));
            ck_assert_uint_eq(strlen(detail), want);
            ck_assert_int_eq(memcmp(detail, whole, want), 0);
        }
    }
}
END_TEST

/* Bytes that are not UTF-8 in a detail: each becomes U+FFFD, the rest stays as it was. */
START_TEST(error_detail_invalid_bytes_replaced)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a\x80z", "a\xEF\xBF\xBDz"},                                 /* a lone continuation byte */
        {"a\xC3z", "a\xEF\xBF\xBDz"},                                 /* a lead without its byte */
        {"a\xC0\xAFz", "a\xEF\xBF\xBD\xEF\xBF\xBDz"},                 /* an overlong '/' */
        {"a\xE0\x80\x80z", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz"}, /* an overlong NUL */
        {"a\xED\xA0\x80z", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz"}, /* a surrogate */
        {"a\xF4\x90\x80\x80z",
         "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz"}, /* above U+10FFFF */
        {"a\xF5z", "a\xEF\xBF\xBDz"},
        {"a\xFFz", "a\xEF\xBF\xBDz"},
        {"a\xE2\x82z", "a\xEF\xBF\xBD\xEF\xBF\xBDz"}, /* a 3-byte character cut inside */
        {"\xC3\x84\xE2\x82\xAC\xF0\x9F\x8E\x9F", "\xC3\x84\xE2\x82\xAC\xF0\x9F\x8E\x9F"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256], detail[64];

        assert_utf8_json(body, gw_body_error(body, sizeof(body), "BAD_REQUEST", cases[i].in, NULL),
                         detail, sizeof(detail));
        ck_assert_str_eq(detail, cases[i].out);
    }
}
END_TEST

/*
 * The parsers' details that quote a client's text: an unknown field's name
 * of multibyte characters, cut at 64 bytes at every offset of its
 * characters; a campaign prefix whose refused symbol is not ASCII.
 */
START_TEST(error_detail_quotes_input_whole_characters)
{
    static const char *const chars[] = {"\xC3\x84", "\xE2\x82\xAC", "\xF0\x9F\x8E\x9F"};
    char json[512], err[256], body[512], detail[256];
    gw_campaign_req_t campaign;
    int64_t customers[GW_CAMPAIGN_CUSTOMERS_MAX];
    gw_quote_req_t quote;

    for (size_t c = 0; c < sizeof(chars) / sizeof(chars[0]); c++)
        for (int pad = 0; pad < 4; pad++) {
            char key[160] = "";
            size_t n = 0;

            for (int i = 0; i < pad; i++)
                key[n++] = 'k';
            while (n < 80) {
                memcpy(key + n, chars[c], strlen(chars[c]));
                n += strlen(chars[c]);
            }
            key[n] = '\0';
            snprintf(json, sizeof(json), "{\"customerId\":1,\"orderAmount\":1,\"%s\":1}", key);
            ck_assert_int_eq(gw_quote_req_parse(json, strlen(json), &quote, err, sizeof(err)),
                             VC_ERR_INVALID);
            assert_utf8_json(body, gw_body_error(body, sizeof(body), "BAD_REQUEST", err, NULL),
                             detail, sizeof(detail));
            /* The name is quoted up to a whole character, 64 bytes at most. */
            ck_assert_ptr_nonnull(strstr(detail, "unknown field"));
            ck_assert_ptr_null(strstr(detail, "\xEF\xBF\xBD"));
        }
    snprintf(json, sizeof(json),
             "{\"name\":\"n\",\"count\":1,\"prefix\":\"\xC3\x84\",\"discountAmount\":1,"
             "\"startsAt\":\"2026-01-01T00:00:00Z\",\"endsAt\":\"2026-02-01T00:00:00Z\"}");
    ck_assert_int_eq(
        gw_campaign_req_parse(json, strlen(json), &campaign, customers, err, sizeof(err)),
        GW_CAMPAIGN_E_UNPROCESSABLE);
    assert_utf8_json(body, gw_body_error(body, sizeof(body), "UNPROCESSABLE", err, NULL), detail,
                     sizeof(detail));
    ck_assert_ptr_nonnull(strstr(detail, "'\xC3\x84' is not one"));
}
END_TEST

/* ---- admin bodies ---- */

#define WINDOW "\"startsAt\":\"2026-01-01T00:00:00Z\",\"endsAt\":\"2026-02-01T00:00:00+01:00\""

START_TEST(voucher_body_fixed)
{
    vc_voucher_t v;
    char err[256] = "";
    const char *b = "{\"code\":\"FLASH-100_X\",\"discountAmount\":100000,\"minOrderAmount\":0,"
                    "\"totalLimit\":10," WINDOW "}";

    ck_assert_msg(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(v.code, "FLASH-100_X");
    ck_assert_int_eq(v.discount_amount, 100000);
    ck_assert_int_eq(v.discount_percent, 0);
    ck_assert_int_eq(v.total_limit, 10);
    ck_assert_int_eq(v.per_customer_limit, 1); /* the default */
    ck_assert_int_eq(v.used_count, 0);
    ck_assert_int_eq(v.starts_at_ms, 1767225600000LL);
    ck_assert_int_eq(v.ends_at_ms, 1769900400000LL);
}
END_TEST

START_TEST(voucher_body_percent)
{
    vc_voucher_t v;
    char err[256] = "";
    const char *b =
        "{\"code\":\"P\",\"discountPercent\":15,\"maxDiscountAmount\":2000,"
        "\"minOrderAmount\":1000,\"totalLimit\":2147483647,\"perUserLimit\":2," WINDOW "}";

    ck_assert_msg(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(v.discount_percent, 15);
    ck_assert_int_eq(v.max_discount_amount, 2000);
    ck_assert_int_eq(v.min_order_amount, 1000);
    ck_assert_int_eq(v.total_limit, 2147483647);
    ck_assert_int_eq(v.per_customer_limit, 2);
}
END_TEST

/* Each bad admin body: 400 whose detail names the field. */
static const struct {
    const char *body;
    const char *detail_has;
} bad_vouchers[] = {
    {"{", "malformed"},
    {"{\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}", "code"},
    {"{\"code\":\"lower\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "code"},
    {"{\"code\":\"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456\",\"discountAmount\":1,\"minOrderAmount\":0,"
     "\"totalLimit\":1," WINDOW "}",
     "code"},
    {"{\"code\":\"A\",\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}", "discountAmount"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"discountPercent\":5,\"minOrderAmount\":0,"
     "\"totalLimit\":1," WINDOW "}",
     "discountPercent"},
    {"{\"code\":\"A\",\"discountAmount\":0,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "discountAmount"},
    {"{\"code\":\"A\",\"discountPercent\":0,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "discountPercent"},
    {"{\"code\":\"A\",\"discountPercent\":101,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "discountPercent"},
    {"{\"code\":\"A\",\"discountPercent\":1.5,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "discountPercent"},
    {"{\"code\":\"A\",\"discountAmount\":5,\"maxDiscountAmount\":3,\"minOrderAmount\":0,"
     "\"totalLimit\":1," WINDOW "}",
     "maxDiscountAmount"},
    {"{\"code\":\"A\",\"discountPercent\":5,\"maxDiscountAmount\":0,\"minOrderAmount\":0,"
     "\"totalLimit\":1," WINDOW "}",
     "maxDiscountAmount"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":-1,\"totalLimit\":1," WINDOW "}",
     "minOrderAmount"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"totalLimit\":1," WINDOW "}", "minOrderAmount"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":0," WINDOW "}",
     "totalLimit"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":2147483648," WINDOW
     "}",
     "totalLimit"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,\"perUserLimit\":"
     "0," WINDOW "}",
     "perUserLimit"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,"
     "\"startsAt\":\"yesterday\",\"endsAt\":\"2026-02-01T00:00:00Z\"}",
     "startsAt"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,"
     "\"startsAt\":\"2026-01-01T00:00:00Z\"}",
     "endsAt"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,"
     "\"startsAt\":\"2026-01-01T00:00:00Z\",\"endsAt\":\"2026-01-01T00:00:00Z\"}",
     "endsAt"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,\"usedCount\":"
     "0," WINDOW "}",
     "usedCount"},
    {"{\"code\":\"A\",\"code\":\"B\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":"
     "1," WINDOW "}",
     "code"},    /* "A\u0000B" would be created as "A". */
    {"{\"code\":\"A\\u0000B\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW
     "}",
     "code"},
    {"{\"code\":\"A\",\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1,"
     "\"startsAt\":\"2026-01-01T00:00:00Z\\u0000junk\",\"endsAt\":\"2026-02-01T00:00:00Z\"}",
     "startsAt"},
    {"{\"code\":\"A\",/**/\"discountAmount\":1,\"minOrderAmount\":0,\"totalLimit\":1," WINDOW "}",
     "comment"},
};

START_TEST(voucher_body_rejected)
{
    vc_voucher_t v;
    char err[256] = "";
    const char *b = bad_vouchers[_i].body;

    ck_assert_int_eq(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, bad_vouchers[_i].detail_has) != NULL, "body %s: detail \"%s\"", b,
                  err);
}
END_TEST

/* The discount a created voucher gives, through the gateway's own parse and check. */
static const struct {
    const char *rules; /* the discount part of an admin body */
    int64_t order_amount;
    int rc;
    int64_t discount;
} discount_cases[] = {
    {"\"discountAmount\":500,\"minOrderAmount\":0", 2000, 0, 500},
    {"\"discountAmount\":500,\"minOrderAmount\":0", 300, 0, 300}, /* never above the order */
    {"\"discountAmount\":500,\"minOrderAmount\":1000", 999, VC_E_ORDER_TOO_SMALL, 0},
    {"\"discountAmount\":500,\"minOrderAmount\":1000", 1000, 0, 500},
    {"\"discountPercent\":10,\"minOrderAmount\":0", 2345, 0, 234}, /* rounds down */
    {"\"discountPercent\":10,\"maxDiscountAmount\":200,\"minOrderAmount\":0", 2345, 0, 200},
    {"\"discountPercent\":100,\"minOrderAmount\":0", 777, 0, 777},
    {"\"discountPercent\":33,\"minOrderAmount\":0", 9223372036854775807LL, 0,
     3043712772162076016LL}, /* no overflow */
    {"\"discountPercent\":1,\"minOrderAmount\":0", 99, 0, 0},
    {"\"discountPercent\":15,\"minOrderAmount\":0", 0, 0, 0},
};

START_TEST(discount_through_gateway)
{
    vc_voucher_t v;
    char err[256] = "", b[512];
    int64_t discount = -1;
    int64_t now = 1767225600000LL + 1000; /* inside WINDOW */

    snprintf(b, sizeof(b), "{\"code\":\"D\",%s,\"totalLimit\":1," WINDOW "}",
             discount_cases[_i].rules);
    ck_assert_msg(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_voucher_check(&v, now, discount_cases[_i].order_amount, &discount),
                     discount_cases[_i].rc);
    if (discount_cases[_i].rc == 0)
        ck_assert_int_eq(discount, discount_cases[_i].discount);
    /* The window: before and at the end. */
    ck_assert_int_eq(vc_voucher_check(&v, 1767225600000LL - 1, 1000000, &discount),
                     VC_E_NOT_STARTED);
    ck_assert_int_eq(vc_voucher_check(&v, 1769900400000LL, 1000000, &discount), VC_E_EXPIRED);
}
END_TEST

START_TEST(quote_body)
{
    gw_quote_req_t q;
    char err[256] = "";
    static const char *const bad[] = {"{\"customerId\":1}", "{\"orderAmount\":1}",
                                      "{\"customerId\":0,\"orderAmount\":1}",
                                      "{\"customerId\":1,\"orderAmount\":-1}",
                                      "{\"customerId\":1,\"orderAmount\":1,\"orderId\":\"o\"}",
                                      "{\"customerId\":1,/* c */\"orderAmount\":1}",
                                      "{\"customerId\":1,\"orderAmount\":1,\"orderAmount\":2}"};
    const char *ok = "{\"customerId\":7,\"orderAmount\":1500}";

    ck_assert_int_eq(gw_quote_req_parse(ok, strlen(ok), &q, err, sizeof(err)), 0);
    ck_assert_int_eq(q.customer_id, 7);
    ck_assert_int_eq(q.order_amount, 1500);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_int_eq(gw_quote_req_parse(bad[i], strlen(bad[i]), &q, err, sizeof(err)),
                         VC_ERR_INVALID);
}
END_TEST

/* The optional body of a confirm: none, blank or {} is the confirm of before. */
static const struct {
    const char *body;
    int rc, has_total;
    int64_t order_amount;
} confirm_bodies[] = {
    {"", 0, 0, 0},
    {" \r\n\t", 0, 0, 0},
    {"{}", 0, 0, 0},
    {"{\"orderAmount\":0}", 0, 1, 0},
    {" {\"orderAmount\":25000} ", 0, 1, 25000},
    {"{\"orderAmount\":9223372036854775807}", 0, 1, INT64_MAX},
    {"{\"orderAmount\":-1}", VC_ERR_INVALID, 0, 0},
    {"{\"orderAmount\":\"25000\"}", VC_ERR_INVALID, 0, 0},
    {"{\"orderAmount\":2.5}", VC_ERR_INVALID, 0, 0},
    {"{\"orderAmount\":null}", VC_ERR_INVALID, 0, 0},
    {"{\"orderAmount\":1,\"orderAmount\":2}", VC_ERR_INVALID, 0, 0},
    {"{\"total\":25000}", VC_ERR_INVALID, 0, 0},
    {"{\"orderAmount\":", VC_ERR_INVALID, 0, 0},
    {"null", VC_ERR_INVALID, 0, 0},
    {"[25000]", VC_ERR_INVALID, 0, 0},
};

START_TEST(confirm_body)
{
    gw_confirm_req_t c;
    char err[256] = "";
    const char *body = confirm_bodies[_i].body;

    ck_assert_int_eq(gw_confirm_req_parse(body, strlen(body), &c, err, sizeof(err)),
                     confirm_bodies[_i].rc);
    ck_assert_int_eq(c.has_total, confirm_bodies[_i].has_total);
    ck_assert_int_eq(c.order_amount, confirm_bodies[_i].order_amount);
    if (confirm_bodies[_i].rc)
        ck_assert_msg(err[0], "case %d: no error text", _i);
}
END_TEST

/* The three answers of a confirm given a total, and the 409 for another total. */
START_TEST(confirm_answers)
{
    gw_figures_t fig = {1, 25000, 1000}, unknown = {0, 0, 1000};
    const char *error, *reason;
    char buf[512];

    ck_assert_uint_gt(gw_body_confirmed(buf, sizeof(buf), "o1", "FIX", &fig, 0), 0);
    ck_assert_str_eq(buf, "{\"orderId\":\"o1\",\"code\":\"FIX\",\"status\":\"CONFIRMED\","
                          "\"orderAmount\":25000,\"discountAmount\":1000}");
    ck_assert_uint_gt(gw_body_confirmed(buf, sizeof(buf), "o1", "FIX", &unknown, 1), 0);
    ck_assert_str_eq(buf, "{\"orderId\":\"o1\",\"code\":\"FIX\",\"status\":\"CONFIRMED\","
                          "\"discountAmount\":1000,\"replayed\":true}");
    ck_assert_int_eq(gw_status_for(VC_E_ORDER_TOO_SMALL, &error, &reason), 422);
    ck_assert_uint_gt(gw_body_confirm_refused(buf, sizeof(buf), error, "d", reason, "quote", &fig),
                      0);
    ck_assert_str_eq(buf, "{\"error\":\"NOT_ELIGIBLE\",\"detail\":\"d\",\"reason\":\"ORDER_TOO_SMALL\","
                          "\"quote\":{\"orderAmount\":25000,\"discountAmount\":1000}}");
    ck_assert_int_eq(gw_status_for(GW_E_CONFIRMED_OTHER, &error, &reason), 409);
    ck_assert_str_eq(error, "ALREADY_CONFIRMED");
    ck_assert_ptr_null(reason);
    ck_assert_uint_gt(
        gw_body_confirm_refused(buf, sizeof(buf), error, "d", reason, "confirmed", &fig), 0);
    ck_assert_str_eq(buf, "{\"error\":\"ALREADY_CONFIRMED\",\"detail\":\"d\","
                          "\"confirmed\":{\"orderAmount\":25000,\"discountAmount\":1000}}");
    ck_assert_uint_eq(gw_body_confirm_refused(buf, 20, error, "d", reason, "confirmed", &fig), 0);
}
END_TEST

START_TEST(admin_token)
{
    ck_assert(gw_bearer_authorized("Bearer s3cret", "s3cret"));
    ck_assert(!gw_bearer_authorized("Bearer s3cre", "s3cret"));
    ck_assert(!gw_bearer_authorized("Bearer s3cretX", "s3cret"));
    ck_assert(!gw_bearer_authorized("bearer s3cret", "s3cret"));
    ck_assert(!gw_bearer_authorized("s3cret", "s3cret"));
    ck_assert(!gw_bearer_authorized(NULL, "s3cret"));
    /* No token configured: nobody is admin, not even with an empty bearer. */
    ck_assert(!gw_bearer_authorized("Bearer ", ""));
    ck_assert(!gw_bearer_authorized("Bearer x", NULL));
}
END_TEST

/* Several tokens at once, for rotation: each is accepted, nothing else is. */
START_TEST(token_list)
{
    static const struct {
        const char *auth, *tokens;
        int ok;
    } cases[] = {
        {"Bearer old-one", "old-one,new-one", 1},
        {"Bearer new-one", "old-one,new-one", 1},
        {"Bearer new-one", " old-one , new-one ", 1},
        {"Bearer old-one,new-one", "old-one,new-one", 0},
        {"Bearer old", "old-one,new-one", 0},
        {"Bearer new-on", "old-one,new-one", 0},
        {"Bearer ", "old-one,,new-one", 0},
        {"Bearer ", ",", 0},
        {"Bearer  ", " , ", 0},
        {"Bearer x", ",x,", 1},
        {"Bearer x", "", 0},
        {"Bearer x ", "x", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(gw_bearer_authorized(cases[i].auth, cases[i].tokens) == cases[i].ok,
                      "case %zu: \"%s\" against \"%s\"", i, cases[i].auth, cases[i].tokens);
}
END_TEST

/*
 * A token setting the gateway refuses at start (gw_token_list_check()): a
 * short token, the template's placeholder (also padded to the length), a
 * list with no token; an empty setting (off) and long tokens pass.
 */
START_TEST(token_setting_check)
{
    static const struct {
        const char *tokens;
        int ok;
        const char *said; /* in the error, when refused */
    } cases[] = {
        {"", 1, NULL},
        {"0123456789abcdef0123456789abcdef", 1, NULL},
        {" 0123456789abcdef0123456789abcdef , fedcba9876543210fedcba9876543210 ", 1, NULL},
        {"0123456789abcdef0123456789abcdef,", 1, NULL},
        {"x", 0, "token 1 of the list has 1 characters, fewer than 32"},
        {"0123456789abcdef0123456789abcde", 0, "31 characters"},
        {"0123456789abcdef0123456789abcdef,short", 0, "token 2 of the list has 5 characters"},
        {"CHANGE-ME", 0, "token 1 of the list is the template's placeholder"},
        {"change-me-change-me-change-me-change-me", 0, "placeholder"},
        {"0123456789abcdef0123456789abcdef,CHANGE-ME", 0, "token 2 of the list is the template"},
        {",", 0, "holds no token"},
        {" ", 0, "holds no token"},
    };
    char err[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        int rc = gw_token_list_check(cases[i].tokens, err, sizeof(err));
        ck_assert_msg((rc == 0) == cases[i].ok, "case %zu: \"%s\": %d", i, cases[i].tokens, rc);
        if (!cases[i].ok)
            ck_assert_msg(strstr(err, cases[i].said) && !strstr(err, "abcdef"),
                          "case %zu: \"%s\"", i, err);
    }
}
END_TEST

/* Which routes need which token: every order-service route, the admin ones, no probe. */
START_TEST(route_auth)
{
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_RESERVE), GW_AUTH_API);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_CONFIRM), GW_AUTH_API);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_CANCEL), GW_AUTH_API);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_QUOTE), GW_AUTH_API);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_CREATE), GW_AUTH_ADMIN);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_SHOW), GW_AUTH_ADMIN);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_UPDATE), GW_AUTH_ADMIN);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_HEALTHZ), GW_AUTH_NONE);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_READYZ), GW_AUTH_NONE);
    ck_assert_int_eq(gw_route_auth(GW_ROUTE_METRICS), GW_AUTH_NONE);
}
END_TEST

START_TEST(voucher_body_out)
{
    vc_voucher_t v;
    char err[256] = "", buf[1024];
    const char *b = "{\"code\":\"P\",\"discountPercent\":15,\"maxDiscountAmount\":2000,"
                    "\"minOrderAmount\":1000,\"totalLimit\":5," WINDOW "}";

    ck_assert_int_eq(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)), 0);
    gw_body_voucher(buf, sizeof(buf), &v, 1, 3, 0, 0, 2);
    ck_assert_json_eq(buf, "{\"code\":\"P\",\"discountPercent\":15,\"maxDiscountAmount\":2000,"
                          "\"minOrderAmount\":1000,\"totalLimit\":5,\"perUserLimit\":1,"
                          "\"startsAt\":\"2026-01-01T00:00:00.000Z\","
                          "\"endsAt\":\"2026-01-31T23:00:00.000Z\",\"active\":true,\"usedCount\":3,"
                          "\"remaining\":null,\"holds\":2}");
    gw_body_voucher(buf, sizeof(buf), &v, 1, 3, 1, 2, 2);
    ck_assert_json_has(buf, "{\"remaining\":2,\"holds\":2}");
    ck_assert_uint_eq(gw_body_voucher(buf, 40, &v, 1, 3, 1, 2, 2), 0);
}
END_TEST

START_TEST(route_names)
{
    for (int k = 0; k < GW_ROUTE_COUNT; k++)
        ck_assert_str_ne(gw_route_name((gw_route_kind_t)k), "unknown");
    ck_assert_str_eq(gw_route_name(GW_ROUTE_RESERVE), "reserve");
    ck_assert_str_eq(gw_route_name(GW_ROUTE_COUNT), "unknown");
}
END_TEST

/* A use given back on one worker clears the sold-out mark on every worker. */
START_TEST(soldout_cleared_everywhere)
{
    char other[32];

    /* The marks are the process's: whichever worker marked, all read them. */
    gw_soldout_mark("SOLD", 5000, "", 0);
    ck_assert(gw_soldout_is("SOLD", 4999));
    ck_assert(!gw_soldout_is("SOLD", 5000)); /* the recheck time passed */
    /* Another code whose slot is not SOLD's (slots are chosen by a keyed hash). */
    for (int i = 0;; i++) {
        snprintf(other, sizeof(other), "OTHER%d", i);
        gw_soldout_mark(other, 5000, "", 0);
        if (gw_soldout_is("SOLD", 1))
            break;
        gw_soldout_mark("SOLD", 5000, "", 0);
    }
    ck_assert(!gw_soldout_is("NEVER", 1));
    gw_soldout_clear("SOLD"); /* from any thread */
    ck_assert(!gw_soldout_is("SOLD", 1));
    ck_assert(gw_soldout_is(other, 1));
    /* Marked again after the clear: sold out again. */
    gw_soldout_mark("SOLD", 5000, "", 0);
    ck_assert(gw_soldout_is("SOLD", 1));
}
END_TEST

/* A marked voucher answers new orders from memory and sends the snapshot's orderIds to Redis. */
START_TEST(soldout_snapshot_tells_known_orders)
{
    static const char ids[] = "order-1\norder-2\nlast";
    gw_soldout_ticket_t t;

    ck_assert_int_eq(gw_soldout_mark("SNAP", 5000, ids, sizeof(ids) - 1), 0);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-1", 1), GW_SOLDOUT_KNOWN);
    ck_assert_int_eq(gw_soldout_order("SNAP", "last", 1), GW_SOLDOUT_KNOWN);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-3", 1), GW_SOLDOUT_NEW);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order", 1), GW_SOLDOUT_NEW);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-1", 5000), GW_SOLDOUT_NO);
    ck_assert_int_eq(gw_soldout_order("ELSE", "order-1", 1), GW_SOLDOUT_NO);
    /* One question at a time; a use taken since it was asked voids its answer. */
    gw_soldout_clear("SNAP");
    ck_assert(gw_soldout_ask("SNAP", 10, &t));
    ck_assert(!gw_soldout_ask("SNAP", 11, &t));
    gw_soldout_clear("SNAP");
    ck_assert_int_eq(gw_soldout_answer("SNAP", &t, 1000, ids, sizeof(ids) - 1), 0);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-3", 20), GW_SOLDOUT_NO);
    /* Answered as asked: marked until the time of the question plus the recheck. */
    ck_assert(gw_soldout_ask("SNAP", 30, &t));
    ck_assert_int_eq(gw_soldout_answer("SNAP", &t, 1000, "", 0), 0);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-3", 1029), GW_SOLDOUT_NEW);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-3", 1030), GW_SOLDOUT_NO);
    /* A question that came back without a snapshot marks nothing, and may be asked again. */
    ck_assert(gw_soldout_ask("SNAP", 40, &t));
    ck_assert_int_eq(gw_soldout_answer("SNAP", &t, 1000, NULL, 0), 0);
    ck_assert_int_eq(gw_soldout_order("SNAP", "order-3", 41), GW_SOLDOUT_NEW); /* the last mark */
    ck_assert(gw_soldout_ask("SNAP", 42, &t));
    ck_assert_int_eq(gw_soldout_answer("SNAP", &t, 1000, NULL, 0), 0);
}
END_TEST

START_TEST(answer_head)
{
    char buf[256];
    size_t n;

    n = gw_http_format_head(buf, sizeof(buf), 201, 57, 1, "Content-Type: application/json\r\n",
                            NULL);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                          "Content-Length: 57\r\n\r\n");
    n = gw_http_format_head(buf, sizeof(buf), 503, 0, 0, "", "Retry-After: 1\r\n");
    buf[n] = '\0';
    ck_assert_str_eq(buf, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                          "Connection: close\r\nRetry-After: 1\r\n\r\n");
    /* Exactly full fits; one byte short does not. */
    n = gw_http_format_head(buf, sizeof(buf), 409, 1234567890, 1, "", NULL);
    ck_assert_uint_eq(n, strlen("HTTP/1.1 409 Conflict\r\nContent-Length: 1234567890\r\n\r\n"));
    ck_assert_uint_eq(gw_http_format_head(buf, n, 409, 1234567890, 1, "", NULL), n);
    ck_assert_uint_eq(gw_http_format_head(buf, n - 1, 409, 1234567890, 1, "", NULL), 0);
    ck_assert_uint_eq(gw_http_format_head(buf, sizeof(buf), 42, 0, 1, "", NULL), 0);
}
END_TEST


/* GET /vouchers query strings: the cursor, the filter, the page size, and what is refused. */
static const struct {
    const char *query;
    int rc, has_active, active, limit;
    const char *after;
} list_queries[] = {
    {"", 0, 0, 0, GW_LIST_LIMIT_DEFAULT, ""},
    {"active=true", 0, 1, 1, GW_LIST_LIMIT_DEFAULT, ""},
    {"active=false&after=FLASH_1&limit=100", 0, 1, 0, 100, "FLASH_1"},
    {"after=A%2DB&limit=1", 0, 0, 0, 1, "A-B"},
    {"limit=5&&after=X", 0, 0, 0, 5, "X"},
    {"active=yes", VC_ERR_INVALID, 0, 0, 0, ""},
    {"active", VC_ERR_INVALID, 0, 0, 0, ""},
    {"active=true&active=false", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=0", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=101", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=-1", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=5x", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=x", VC_ERR_INVALID, 0, 0, 0, ""},
    {"limit=", VC_ERR_INVALID, 0, 0, 0, ""},
    {"after=lower", VC_ERR_INVALID, 0, 0, 0, ""},
    {"after=", VC_ERR_INVALID, 0, 0, 0, ""},
    {"after=%zz", VC_ERR_INVALID, 0, 0, 0, ""},
    {"sort=code", VC_ERR_INVALID, 0, 0, 0, ""},
};

START_TEST(list_query)
{
    gw_list_query_t q;
    char err[256] = "";
    const char *s = list_queries[_i].query;

    ck_assert_int_eq(gw_list_query_parse(s, strlen(s), &q, err, sizeof(err)), list_queries[_i].rc);
    if (list_queries[_i].rc != 0) {
        ck_assert_str_ne(err, "");
        return;
    }
    ck_assert_int_eq(q.has_active, list_queries[_i].has_active);
    ck_assert_int_eq(q.active, list_queries[_i].active);
    ck_assert_int_eq(q.limit, list_queries[_i].limit);
    ck_assert_str_eq(q.after, list_queries[_i].after);
}
END_TEST

/* PATCH bodies: each field alone, the bounds, and what is refused before any I/O. */
static const struct {
    const char *body;
    int rc;
} patch_bodies[] = {
    {"{\"totalLimit\":5}", 0},
    {"{\"perUserLimit\":3}", 0},
    {"{\"active\":false}", 0},
    {"{\"active\":true,\"minOrderAmount\":0}", 0},
    {"{\"endsAt\":\"2026-03-01T00:00:00Z\"}", 0},
    {"{\"discountPercent\":10,\"maxDiscountAmount\":500}", 0},
    {"{}", VC_ERR_INVALID},
    {"{\"totalLimit\":0}", VC_ERR_INVALID},
    {"{\"totalLimit\":2147483648}", VC_ERR_INVALID},
    {"{\"totalLimit\":\"5\"}", VC_ERR_INVALID},
    {"{\"active\":1}", VC_ERR_INVALID},
    {"{\"active\":null}", VC_ERR_INVALID},
    {"{\"code\":\"X\"}", VC_ERR_INVALID},
    {"{\"usedCount\":1}", VC_ERR_INVALID},
    {"{\"discountAmount\":5,\"discountPercent\":5}", VC_ERR_INVALID},
    {"{\"discountAmount\":5,\"maxDiscountAmount\":5}", VC_ERR_INVALID},
    {"{\"discountPercent\":101}", VC_ERR_INVALID},
    {"{\"endsAt\":\"tomorrow\"}", VC_ERR_INVALID},
    {"[1]", VC_ERR_INVALID},
};

START_TEST(patch_body)
{
    gw_voucher_patch_t p;
    char err[256] = "";
    const char *b = patch_bodies[_i].body;

    ck_assert_int_eq(gw_voucher_patch_parse(b, strlen(b), &p, err, sizeof(err)),
                     patch_bodies[_i].rc);
    if (patch_bodies[_i].rc != 0)
        ck_assert_str_ne(err, "");
}
END_TEST

START_TEST(patch_apply)
{
    vc_voucher_t cur, v;
    gw_voucher_patch_t p;
    char err[256] = "";
    const char *b = "{\"code\":\"P\",\"discountPercent\":15,\"maxDiscountAmount\":2000,"
                    "\"minOrderAmount\":1000,\"totalLimit\":5,\"perUserLimit\":2," WINDOW "}";
    const char *fixed = "{\"discountAmount\":700,\"totalLimit\":9,\"active\":false}";
    const char *lower_per_user = "{\"perUserLimit\":1}";
    const char *empty_window = "{\"endsAt\":\"2025-12-31T00:00:00Z\"}";
    const char *max_on_fixed = "{\"maxDiscountAmount\":10}";

    ck_assert_int_eq(vc_voucher_parse(b, strlen(b), &cur, err, sizeof(err)), 0);
    cur.used_count = 3;
    ck_assert_int_eq(gw_voucher_patch_parse(fixed, strlen(fixed), &p, err, sizeof(err)), 0);
    ck_assert_int_eq(gw_voucher_patch_apply(&cur, &p, &v, err, sizeof(err)), 0);
    ck_assert_int_eq(v.discount_amount, 700);
    ck_assert_int_eq(v.discount_percent, 0);
    ck_assert_int_eq(v.max_discount_amount, 0);
    ck_assert_int_eq(v.total_limit, 9);
    ck_assert_int_eq(v.inactive, 1);
    ck_assert_int_eq(v.used_count, 3);
    ck_assert_int_eq(v.per_customer_limit, 2);
    ck_assert_int_eq(v.starts_at_ms, cur.starts_at_ms);
    /* A percent cap on a fixed discount is refused once the merge shows it. */
    ck_assert_int_eq(gw_voucher_patch_parse(max_on_fixed, strlen(max_on_fixed), &p, err,
                                            sizeof(err)),
                     0);
    ck_assert_int_eq(gw_voucher_patch_apply(&v, &p, &v, err, sizeof(err)), GW_E_RULES);
    /* perUserLimit only grows: a lower one would refuse reservations already acknowledged. */
    ck_assert_int_eq(gw_voucher_patch_parse(lower_per_user, strlen(lower_per_user), &p, err,
                                            sizeof(err)),
                     0);
    ck_assert_int_eq(gw_voucher_patch_apply(&cur, &p, &v, err, sizeof(err)), GW_E_LIMIT);
    ck_assert_int_eq(gw_voucher_patch_parse(empty_window, strlen(empty_window), &p, err,
                                            sizeof(err)),
                     0);
    ck_assert_int_eq(gw_voucher_patch_apply(&cur, &p, &v, err, sizeof(err)), GW_E_RULES);
}
END_TEST

/*
 * A voucher's mode (proto/direct-mode.md): given or not at creation, never
 * changed by a PATCH, whatever the value, the voucher's own included.
 */
START_TEST(voucher_mode)
{
    vc_voucher_t cur, v;
    gw_voucher_patch_t p;
    char err[256] = "";
    const char *base = "{\"code\":\"M\",\"discountAmount\":5,\"minOrderAmount\":0,"
                       "\"totalLimit\":5," WINDOW;
    char b[512];
    const struct {
        const char *field;
        int rc;
        vc_mode_t mode;
    } cases[] = {
        {"", 0, VC_MODE_UNSET},
        {",\"mode\":\"direct\"", 0, VC_MODE_DIRECT},
        {",\"mode\":\"flash\"", 0, VC_MODE_FLASH},
        {",\"mode\":\"Direct\"", VC_ERR_INVALID, VC_MODE_UNSET},
        {",\"mode\":\"\"", VC_ERR_INVALID, VC_MODE_UNSET},
        {",\"mode\":1", VC_ERR_INVALID, VC_MODE_UNSET},
        {",\"mode\":null", VC_ERR_INVALID, VC_MODE_UNSET},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(b, sizeof(b), "%s%s}", base, cases[i].field);
        ck_assert_int_eq(vc_voucher_parse(b, strlen(b), &v, err, sizeof(err)), cases[i].rc);
        if (cases[i].rc == 0)
            ck_assert_int_eq(v.mode, cases[i].mode);
    }
    ck_assert_str_eq(vc_mode_name(VC_MODE_DIRECT), "direct");
    ck_assert_str_eq(vc_mode_name(VC_MODE_FLASH), "flash");
    ck_assert_ptr_null(vc_mode_name(VC_MODE_UNSET));

    snprintf(b, sizeof(b), "%s,\"mode\":\"direct\"}", base);
    ck_assert_int_eq(vc_voucher_parse(b, strlen(b), &cur, err, sizeof(err)), 0);
    for (int same = 0; same < 2; same++) {
        const char *patch =
            same ? "{\"mode\":\"direct\",\"totalLimit\":9}" : "{\"mode\":\"flash\"}";
        ck_assert_int_eq(gw_voucher_patch_parse(patch, strlen(patch), &p, err, sizeof(err)), 0);
        ck_assert_int_eq(gw_voucher_patch_apply(&cur, &p, &v, err, sizeof(err)), GW_E_MODE_LOCKED);
        ck_assert_str_eq(err, "a voucher's mode is fixed at creation: create a new voucher");
    }
    ck_assert_int_eq(gw_voucher_patch_parse("{\"mode\":\"turbo\"}", 16, &p, err, sizeof(err)),
                     VC_ERR_INVALID);
}
END_TEST

START_TEST(inactive_refuses_first)
{
    vc_voucher_t v = {.total_limit = 1, .starts_at_ms = 1000, .ends_at_ms = 2000,
                      .discount_amount = 5, .inactive = 1};
    int64_t d = 0;

    /* Inactive wins over the window: an operator's switch is the first thing a buyer hears. */
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 100, &d), VC_E_INACTIVE);
    ck_assert_int_eq(vc_voucher_check(&v, 5000, 100, &d), VC_E_INACTIVE);
    v.inactive = 0;
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 100, &d), 0);
}
END_TEST

START_TEST(redis_keys)
{
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX], claim[VC_CLAIM_KEY_MAX];
    char code[VC_CODE_MAX + 1], order[VC_ORDER_ID_MAX + 1];

    gw_app_keys("FLASH100", keys);
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_REMAINING], "voucher:{FLASH100}:remaining");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_ORDERS], "voucher:{FLASH100}:orders");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_RESENT], "voucher:{FLASH100}:resent");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_AMOUNTS], "voucher:{FLASH100}:amounts");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_PAID], "voucher:{FLASH100}:paid");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_RELEASING], "voucher:{FLASH100}:releasing");
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_LIMIT], "voucher:{FLASH100}:limit");
    vc_claim_key("order-7", claim);
    ck_assert_str_eq(claim, "voucher-order:{order-7}");
    /* The longest code and orderId fit whole. */
    memset(code, 'C', VC_CODE_MAX);
    code[VC_CODE_MAX] = '\0';
    memset(order, 'o', VC_ORDER_ID_MAX);
    order[VC_ORDER_ID_MAX] = '\0';
    gw_app_keys(code, keys);
    ck_assert_uint_eq(strlen(keys[VC_VOUCHER_KEY_RELEASING]),
                      strlen("voucher:{}:releasing") + VC_CODE_MAX);
    vc_claim_key(order, claim);
    ck_assert_uint_eq(strlen(claim), strlen("voucher-order:{}") + VC_ORDER_ID_MAX);
}
END_TEST

/*
 * A campaign's keys in a voucher flow's array: each the campaign's key of the voucher
 * key's name, as the gateway wrote them by hand before (campaign:{c<id>}:NAME); none for a
 * key no campaign has. The other keys the model names, as Redis has them today.
 */
START_TEST(redis_model_keys)
{
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX], want[GW_KEY_MAX], key[GW_GUARD_KEY_MAX];
    int n = 0;

    gw_campaign_keys(7, keys);
    for (int i = 0; i < VC_VOUCHER_KEY_COUNT; i++) {
        if (vc_campaign_key_of_voucher[i] < 0) {
            ck_assert_str_eq(keys[i], "");
            continue;
        }
        snprintf(want, sizeof(want), "campaign:{c7}:%s", vc_voucher_key_names[i]);
        ck_assert_str_eq(keys[i], want);
        n++;
    }
    ck_assert_int_eq(n, VC_VOUCHER_KEY_COUNT - 3); /* limit, outside, soldout */
    ck_assert_str_eq(keys[VC_VOUCHER_KEY_ORDERS], "campaign:{c7}:orders");
    ck_assert_int_eq(vc_key_guard_customer(key, sizeof(key), GW_GUARD_SCOPE, "42"), 15);
    ck_assert_str_eq(key, "guard:{cu:v:42}");
    vc_key_guard_address(key, sizeof(key), GW_GUARD_SCOPE, "2001:db8:1:2::/64");
    ck_assert_str_eq(key, "guard:{ip:v:2001:db8:1:2::/64}");
    vc_restoring_key(key, sizeof(key), "A-1", "ab12", VC_RESTORING_KEY_HOLDS);
    ck_assert_str_eq(key, "voucher:{A-1}:restoring:ab12:holds");
    ck_assert_str_eq(VC_KEY_GUARD_INDEX, "guard:index");
    ck_assert_str_eq(VC_KEY_FENCE, "voucher:fence");
    ck_assert_str_eq(VC_KEY_FENCE_LEADER, "voucher:fence:leader");
    /* Cut as snprintf cuts, and said. */
    ck_assert_int_eq(vc_key_claim(key, 10, "order-7"), -1);
    ck_assert_str_eq(key, "voucher-o");
}
END_TEST

/* A claim's value names the code and the request; which code it names, and only that. */
START_TEST(claim_values)
{
    char value[VC_CLAIM_VALUE_MAX], code[VC_CODE_MAX + 1];

    vc_claim_value(value, "FLASH100", 0x0123456789abcdefULL, 7);
    ck_assert_str_eq(value, "FLASH100:0123456789abcdef0000000000000007");
    ck_assert(vc_claim_is_code(value, strlen(value), "FLASH100"));
    ck_assert(!vc_claim_is_code(value, strlen(value), "FLASH10"));
    ck_assert(!vc_claim_is_code(value, strlen(value), "FLASH1000"));
    ck_assert(vc_claim_is_code("FLASH100", 8, "FLASH100")); /* written before tokens */
    ck_assert(!vc_claim_is_code("FLASH100", 7, "FLASH100"));
    ck_assert(!vc_claim_is_code("FLASH100X:1", 11, "FLASH100"));
    /* The longest code and token fit whole. */
    memset(code, 'C', VC_CODE_MAX);
    code[VC_CODE_MAX] = '\0';
    vc_claim_value(value, code, UINT64_MAX, UINT64_MAX);
    ck_assert_uint_eq(strlen(value), VC_CODE_MAX + 33);
    ck_assert(vc_claim_is_code(value, strlen(value), code));
}
END_TEST

/* The reconciler reads back the code a claim names (a campaign hold's, when taken was lost). */
START_TEST(claim_code_read_back)
{
    char value[VC_CLAIM_VALUE_MAX], code[VC_CODE_MAX + 1], back[VC_CODE_MAX + 1];

    vc_claim_value(value, "K7Q2ZX", 3, 9);
    ck_assert_int_eq(vc_claim_code(value, strlen(value), back), 0);
    ck_assert_str_eq(back, "K7Q2ZX");
    ck_assert_int_eq(vc_claim_code("FLASH100", 8, back), 0); /* written before tokens */
    ck_assert_str_eq(back, "FLASH100");
    memset(code, 'C', VC_CODE_MAX);
    code[VC_CODE_MAX] = '\0';
    vc_claim_value(value, code, UINT64_MAX, UINT64_MAX);
    ck_assert_int_eq(vc_claim_code(value, strlen(value), back), 0);
    ck_assert_str_eq(back, code);
    /* Names no code: empty, a code too long, characters no code has. */
    ck_assert_int_eq(vc_claim_code(":123", 4, back), -1);
    ck_assert_int_eq(vc_claim_code("", 0, back), -1);
    memset(value, 'C', VC_CODE_MAX + 1);
    ck_assert_int_eq(vc_claim_code(value, VC_CODE_MAX + 1, back), -1);
    ck_assert_int_eq(vc_claim_code("ab c:1", 6, back), -1);
}
END_TEST

/* The 201 body as the yajl generator wrote it before gw_body_reservation() wrote it by hand. */
static size_t reservation_by_jgen(char *buf, size_t cap, const char *order_id, const char *code,
                                  int64_t discount, int64_t held_until_ms, int replayed)
{
    char ts[40];
    vc_jgen_t g;
    size_t len = 0;

    if (vc_time_format_ms(held_until_ms, ts, sizeof(ts)) == 0 || vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "orderId", order_id);
    vc_jgen_kv_str(&g, "code", code);
    vc_jgen_kv_int(&g, "discountAmount", discount);
    vc_jgen_kv_str(&g, "heldUntil", ts);
    if (replayed)
        vc_jgen_kv_bool(&g, "replayed", 1);
    vc_jgen_map_close(&g);
    return vc_jgen_finish(&g, buf, cap, &len) == 0 ? len : 0;
}

/*
 * Byte for byte the generator's text: every byte in an orderId, bounds of
 * numbers and times, every cap. A byte of 0x80 and above alone is no UTF-8
 * character: the generator copies it, gw_body_reservation() writes U+FFFD
 * (error_detail_invalid_bytes_replaced); both write the same text otherwise.
 */
START_TEST(reservation_body_matches_the_generator)
{
    static const int64_t discounts[] = {0, 1, -1, 100000, INT64_MAX, INT64_MIN};
    static const int64_t times[] = {0, 1, -1, 999, -1001, 1795975982123LL, 253402300799999LL,
                                    253402300800000LL, -62167219200000LL, -62167219200001LL};
    char order_id[8], got[512], want[512];

    for (int ch = 1; ch < 256; ch++) {
        snprintf(order_id, sizeof(order_id), "a%cb", ch);
        for (size_t d = 0; d < sizeof(discounts) / sizeof(discounts[0]); d++)
            for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++) {
                int replayed = (int)((ch + d + t) % 2);
                size_t n = gw_body_reservation(got, sizeof(got), order_id, "FLASH100", discounts[d],
                                               times[t], replayed);
                size_t m = reservation_by_jgen(want, sizeof(want), order_id, "FLASH100",
                                               discounts[d], times[t], replayed);
                if (ch >= 0x80) {
                    ck_assert_uint_eq(n, m + 2); /* one byte became the three of U+FFFD */
                    ck_assert_msg(utf8_valid(got, n), "valid UTF-8: %s", got);
                    continue;
                }
                ck_assert_uint_eq(n, m);
                ck_assert_str_eq(got, want);
            }
    }
    /* Too small a buffer: 0 exactly where the generator's copy gave 0. */
    for (size_t cap = 0; cap < 140; cap++) {
        size_t n = gw_body_reservation(got, cap, "o\"1", "FLASH100", 5, 1795975982123LL, 1);
        size_t m = reservation_by_jgen(want, cap ? cap : 1, "o\"1", "FLASH100", 5, 1795975982123LL, 1);
        ck_assert_uint_eq(n, cap ? m : 0);
        if (n)
            ck_assert_str_eq(got, want);
    }
}
END_TEST

/*
 * An error body as the yajl generator writes it: a refused confirm's body
 * without figures, which gw_answer.c still builds with the generator.
 */
static size_t error_by_jgen(char *buf, size_t cap, const char *error, const char *detail,
                            const char *reason)
{
    return gw_body_confirm_refused(buf, cap, error, detail, reason, NULL, NULL);
}

/*
 * Byte for byte the generator's text: every byte in the detail, with and
 * without a reason, every cap; but a byte of 0x80 and above alone, which
 * gw_body_error() writes as U+FFFD and the generator copies.
 */
START_TEST(error_body_matches_the_generator)
{
    char detail[8], got[256], want[256];

    for (int ch = 1; ch < 256; ch++) {
        snprintf(detail, sizeof(detail), "d%c\"", ch);
        for (int r = 0; r < 3; r++) {
            const char *reason = r == 0 ? NULL : r == 1 ? "EXPIRED" : detail;
            size_t n = gw_body_error(got, sizeof(got), "OUT_OF_STOCK", detail, reason);
            size_t m = error_by_jgen(want, sizeof(want), "OUT_OF_STOCK", detail, reason);
            if (ch >= 0x80) {
                ck_assert_uint_eq(n, m + (r == 2 ? 4 : 2)); /* U+FFFD: 3 bytes for 1 */
                ck_assert_msg(utf8_valid(got, n), "valid UTF-8: %s", got);
                continue;
            }
            ck_assert_uint_eq(n, m);
            ck_assert_str_eq(got, want);
        }
    }
    ck_assert_uint_eq(gw_body_error(got, sizeof(got), "NOT_FOUND", NULL, NULL),
                      error_by_jgen(want, sizeof(want), "NOT_FOUND", NULL, NULL));
    ck_assert_str_eq(got, want);
    for (size_t cap = 0; cap < 80; cap++) {
        size_t n = gw_body_error(got, cap, "TOO_MANY_ATTEMPTS", "a\tb", "X");
        size_t m = error_by_jgen(want, cap ? cap : 1, "TOO_MANY_ATTEMPTS", "a\tb", "X");
        ck_assert_uint_eq(n, cap ? m : 0);
        if (n)
            ck_assert_str_eq(got, want);
    }
}
END_TEST

/* vc_i64_text() writes what "%lld" writes, at the bounds and in between. */
START_TEST(i64_text_matches_printf)
{
    int64_t values[] = {0, 1, -1, 9, 10, -10, 99, 100, 1234567890123LL, INT64_MAX, INT64_MIN,
                        INT64_MIN + 1, INT64_MAX - 1};
    uint64_t x = 88172645463325252ULL;

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]) + 1000; i++) {
        int64_t v;
        char got[VC_I64_TEXT], want[32];

        if (i < sizeof(values) / sizeof(values[0])) {
            v = values[i];
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = (int64_t)x >> (x % 64);
        }
        snprintf(want, sizeof(want), "%lld", (long long)v);
        ck_assert_uint_eq(vc_i64_text(got, v), strlen(want));
        ck_assert_str_eq(got, want);
    }
}
END_TEST

/* ---- named admin tokens (gw_admins.h) ---- */

#define SHA_ONE "4c178b47e243199a7716a369a7b9ef4220286168a6bc142aaa2d4aa09b94324c"
#define SHA_TWO "7dff714c82143fa7213371a5521190b43c506321a83631d4b44fa248b0b83a4f"

START_TEST(admins_match_by_name)
{
    static const char text[] = "# admins\n\nalice " SHA_ONE "\n  bob.ops@x\t" SHA_TWO
                               "  # on call\r\n";
    char err[200], name[GW_ADMIN_NAME_MAX + 1];
    gw_admins_t *t = gw_admins_parse(text, sizeof(text) - 1, err, sizeof(err));

    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(gw_admins_count(t), 2);
    ck_assert_int_eq(gw_admins_match(t, "admin-token-one", 15, name), 1);
    ck_assert_str_eq(name, "alice");
    ck_assert_int_eq(gw_admins_match(t, "admin-token-two", 15, name), 1);
    ck_assert_str_eq(name, "bob.ops@x");
    ck_assert_int_eq(gw_admins_match(t, "admin-token-on", 14, name), 0);
    ck_assert_int_eq(gw_admins_match(t, SHA_ONE, 64, name), 0); /* the hash is no token */
    ck_assert_int_eq(gw_admins_match(t, "", 0, name), 0);
    ck_assert_int_eq(gw_admins_match(NULL, "admin-token-one", 15, name), 0);
    gw_admins_free(t);
}
END_TEST

static const struct {
    const char *text, *why;
} bad_admins[] = {
    {"alice\n", "line 1"},
    {"alice " SHA_ONE "0\n", "64 hex"},
    {"alice " SHA_ONE " extra\n", "nothing but a comment"},
    {"al ice " SHA_ONE "\n", "line 1"},
    {"# ok\nalice " SHA_ONE "\nalice " SHA_TWO "\n", "line 3: the name alice is there twice"},
    {"alice zz" SHA_ONE "\n", "64 hex"},
    {"a234567890123456789012345678901234567890123456789012345678901234x " SHA_ONE, "line 1"},
};

START_TEST(admins_refused)
{
    char err[200] = "";
    gw_admins_t *t = gw_admins_parse(bad_admins[_i].text, strlen(bad_admins[_i].text), err,
                                     sizeof(err));

    ck_assert_msg(t == NULL, "accepted: %s", bad_admins[_i].text);
    ck_assert_msg(strstr(err, bad_admins[_i].why), "\"%s\" does not say \"%s\"", err,
                  bad_admins[_i].why);
    ck_assert_msg(!strstr(err, SHA_ONE), "the error shows the hash: %s", err);
}
END_TEST

static Suite *gateway_suite(void)
{
    Suite *s = suite_create("gateway");
    TCase *tc = tcase_create("router");

    tcase_add_loop_test(tc, route_table, 0, sizeof(route_cases) / sizeof(route_cases[0]));
    tcase_add_test(tc, route_ignores_bytes_after_len);
    tcase_add_test(tc, body_valid);
    tcase_add_test(tc, error_detail_cut_at_every_byte);
    tcase_add_test(tc, error_detail_invalid_bytes_replaced);
    tcase_add_test(tc, error_detail_quotes_input_whole_characters);
    tcase_add_test(tc, body_limits_accepted);
    tcase_add_loop_test(tc, body_rejected, 0, sizeof(bad_bodies) / sizeof(bad_bodies[0]));
    tcase_add_test(tc, body_order_id_too_long);
    tcase_add_test(tc, body_with_nul_byte);
    tcase_add_test(tc, order_value);
    tcase_add_test(tc, i64_text_matches_printf);
    tcase_add_test(tc, reservation_body_matches_the_generator);
    tcase_add_test(tc, error_body_matches_the_generator);
    tcase_add_test(tc, status_mapping);
    tcase_add_test(tc, bodies);
    tcase_add_test(tc, voucher_body_fixed);
    tcase_add_test(tc, voucher_body_percent);
    tcase_add_loop_test(tc, voucher_body_rejected, 0,
                        sizeof(bad_vouchers) / sizeof(bad_vouchers[0]));
    tcase_add_loop_test(tc, discount_through_gateway, 0,
                        sizeof(discount_cases) / sizeof(discount_cases[0]));
    tcase_add_test(tc, quote_body);
    tcase_add_loop_test(tc, confirm_body, 0, sizeof(confirm_bodies) / sizeof(confirm_bodies[0]));
    tcase_add_test(tc, confirm_answers);
    tcase_add_test(tc, admin_token);
    tcase_add_test(tc, token_list);
    tcase_add_test(tc, token_setting_check);
    tcase_add_test(tc, route_auth);
    tcase_add_test(tc, voucher_body_out);
    tcase_add_test(tc, route_names);
    tcase_add_test(tc, soldout_cleared_everywhere);
    tcase_add_test(tc, soldout_snapshot_tells_known_orders);
    tcase_add_test(tc, answer_head);
    tcase_add_test(tc, redis_keys);
    tcase_add_test(tc, redis_model_keys);
    tcase_add_loop_test(tc, patch_body, 0, sizeof(patch_bodies) / sizeof(patch_bodies[0]));
    tcase_add_test(tc, patch_apply);
    tcase_add_loop_test(tc, list_query, 0, sizeof(list_queries) / sizeof(list_queries[0]));
    tcase_add_test(tc, voucher_mode);
    tcase_add_test(tc, inactive_refuses_first);
    tcase_add_test(tc, claim_values);
    tcase_add_test(tc, claim_code_read_back);
    tcase_add_test(tc, admins_match_by_name);
    tcase_add_loop_test(tc, admins_refused, 0, sizeof(bad_admins) / sizeof(bad_admins[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(gateway_suite());
}
