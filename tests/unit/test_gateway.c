/* Unit tests for the pure part of gateway/: routing, request bodies, answers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_router.h"
#include "vc_error.h"

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
     "DELETE"},
    {GW_M_POST, "/vouchers/FLASH100/reservations/o-1/confirm", GW_ROUTE_CONFIRM, "FLASH100", "o-1",
     NULL},
    {GW_M_DELETE, "/vouchers/FLASH100/reservations/o-1/confirm", GW_ROUTE_BAD_METHOD, "FLASH100",
     "o-1", "POST"},
    /* A code or orderId that cannot exist: 404, whatever the method. */
    {GW_M_POST, "/vouchers/flash100/reservations", GW_ROUTE_NOT_FOUND, "", "", NULL},
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
    {GW_M_POST, "/vouchers/FLASH100", GW_ROUTE_NOT_FOUND, "", "", NULL},
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
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1e3}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":99999999999999999999}", "orderAmount"},
    {"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1,\"coupon\":\"x\"}", "coupon"},
    {"{\"customerId\":1,\"customerId\":2,\"orderId\":\"o\",\"orderAmount\":1}", "customerId"},
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
        "",           "42:1:2",  "42:1:2:X", "42:1:2:HH", "x:1:2:H",
        "42:1:2:H:5", "42::2:H", "42:1:2:",  ":1:2:H",    "42:1:2:H\n"};

    ck_assert_int_eq(gw_order_value_parse(ok, strlen(ok), &o), 0);
    ck_assert_int_eq(o.customer_id, 42);
    ck_assert_int_eq(o.discount, 100000);
    ck_assert_int_eq(o.held_until_ms, 1795975982123LL);
    ck_assert_int_eq(o.state, 'H');
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
        {VC_ERR_INVALID, 400, "BAD_REQUEST", NULL},
        {VC_ERR_TOO_LARGE, 413, "PAYLOAD_TOO_LARGE", NULL},
        {VC_ERR_TIMEOUT, 503, "UNAVAILABLE", NULL},
        {VC_ERR_UNAVAILABLE, 503, "UNAVAILABLE", NULL},
        {VC_ERR_UNKNOWN_OUTCOME, 503, "UNAVAILABLE", NULL},
        {VC_ERR_NOMEM, 503, "UNAVAILABLE", NULL},
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
    ck_assert_str_eq(
        buf, "{\"error\":\"BAD_REQUEST\",\"detail\":\"field \\\"orderId\\\" is required\"}");
    gw_body_error(buf, sizeof(buf), "NOT_ELIGIBLE", "voucher expired", "EXPIRED");
    ck_assert_str_eq(
        buf, "{\"error\":\"NOT_ELIGIBLE\",\"detail\":\"voucher expired\",\"reason\":\"EXPIRED\"}");
    gw_body_reservation(buf, sizeof(buf), "order-42", "FLASH100", 100000, 1795975982123LL, 0);
    ck_assert_str_eq(buf,
                     "{\"orderId\":\"order-42\",\"code\":\"FLASH100\",\"discountAmount\":100000,"
                     "\"heldUntil\":\"2026-11-29T18:13:02.123Z\"}");
    gw_body_reservation(buf, sizeof(buf), "order-42", "FLASH100", 5, 1795975982123LL, 1);
    ck_assert_ptr_nonnull(strstr(buf, ",\"replayed\":true}"));
    gw_body_status(buf, sizeof(buf), "o-1", "FLASH100", "CONFIRMED", 0);
    ck_assert_str_eq(buf, "{\"orderId\":\"o-1\",\"code\":\"FLASH100\",\"status\":\"CONFIRMED\"}");
    ck_assert_uint_eq(gw_body_error(buf, 8, "BAD_REQUEST", "too long for the buffer", NULL), 0);
}
END_TEST

static Suite *gateway_suite(void)
{
    Suite *s = suite_create("gateway");
    TCase *tc = tcase_create("router");

    tcase_add_loop_test(tc, route_table, 0, sizeof(route_cases) / sizeof(route_cases[0]));
    tcase_add_test(tc, route_ignores_bytes_after_len);
    tcase_add_test(tc, body_valid);
    tcase_add_test(tc, body_limits_accepted);
    tcase_add_loop_test(tc, body_rejected, 0, sizeof(bad_bodies) / sizeof(bad_bodies[0]));
    tcase_add_test(tc, body_order_id_too_long);
    tcase_add_test(tc, body_with_nul_byte);
    tcase_add_test(tc, order_value);
    tcase_add_test(tc, status_mapping);
    tcase_add_test(tc, bodies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gateway_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
