/* Unit tests for vl_proto: the request vc-load sends and what it reads from answers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/ck_run.h"
#include "vc_error.h"
#include "vl_proto.h"

START_TEST(request_is_complete_http)
{
    char buf[1024];
    size_t n =
        vl_request_format(buf, sizeof(buf), "127.0.0.1:15410", NULL, "FLASH 50/x", 42, "o-\"1\"",
                          250000, 0);
    const char *body = "{\"customerId\":42,\"orderId\":\"o-\\\"1\\\"\",\"orderAmount\":250000}";
    char want[1024];

    snprintf(want, sizeof(want),
             "POST /vouchers/FLASH%%2050%%2Fx/reservations HTTP/1.1\r\n"
             "Host: 127.0.0.1:15410\r\n"
             "User-Agent: vc-load\r\n"
             "Content-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(buf, want);
}
END_TEST

START_TEST(request_carries_the_token)
{
    char buf[1024];

    ck_assert_uint_gt(vl_request_format(buf, sizeof(buf), "h:1", "t0k", "C", 1, "o", 1, 0), 0);
    ck_assert_ptr_nonnull(strstr(buf, "\r\nAuthorization: Bearer t0k\r\n"));
    ck_assert_uint_gt(vl_request_format(buf, sizeof(buf), "h:1", "", "C", 1, "o", 1, 0), 0);
    ck_assert_ptr_null(strstr(buf, "Authorization"));
}
END_TEST

START_TEST(request_forwards_the_customer_address)
{
    char buf[1024];

    ck_assert_uint_gt(vl_request_format(buf, sizeof(buf), "h:1", NULL, "C", 70000, "o", 1, 1), 0);
    ck_assert_ptr_nonnull(strstr(buf, "\r\nX-Forwarded-For: 10.1.17.112\r\n"));
    ck_assert_uint_gt(vl_request_format(buf, sizeof(buf), "h:1", NULL, "C", 70000, "o", 1, 0), 0);
    ck_assert_ptr_null(strstr(buf, "X-Forwarded-For"));
}
END_TEST

START_TEST(request_too_long_is_refused)
{
    char buf[64];
    ck_assert_uint_eq(vl_request_format(buf, sizeof(buf), "h:1", NULL, "C", 1, "o", 1, 0), 0);
}
END_TEST

START_TEST(answers)
{
    static const struct {
        const char *body;
        int rc;
        const char *error;
        int replayed;
    } cases[] = {
        {"{\"orderId\":\"o1\",\"code\":\"F\",\"discountAmount\":5,\"heldUntil\":\"x\"}", 0, "", 0},
        {"{\"orderId\":\"o1\",\"replayed\":true}", 0, "", 1},
        {"{\"orderId\":\"o1\",\"replayed\":false}", 0, "", 0},
        {"{\"error\":\"OUT_OF_STOCK\"}", 0, "OUT_OF_STOCK", 0},
        {"{\"error\":\"NOT_ELIGIBLE\",\"reason\":\"EXPIRED\"}", 0, "NOT_ELIGIBLE", 0},
        {"{\"error\":\"A_VERY_LONG_ERROR_CODE_THAT_DOES_NOT_FIT_AT_ALL\"}", 0,
         "A_VERY_LONG_ERROR_CODE_THAT_DOE", 0},
        {"{\"error\":7}", 0, "", 0},
        {"<html>bad gateway</html>", VC_ERR_INVALID, "", 0},
        {"", VC_ERR_INVALID, "", 0},
        {"[1,2]", VC_ERR_INVALID, "", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vl_answer_t a;
        ck_assert_int_eq(vl_answer_parse(cases[i].body, strlen(cases[i].body), &a), cases[i].rc);
        ck_assert_str_eq(a.error, cases[i].error);
        ck_assert_int_eq(a.replayed, cases[i].replayed);
    }
}
END_TEST

START_TEST(retry_after)
{
    ck_assert_int_eq(vl_retry_after_ms("2", 1), 2000);
    ck_assert_int_eq(vl_retry_after_ms(" 0 ", 3), 0);
    ck_assert_int_eq(vl_retry_after_ms("", 0), -1);
    ck_assert_int_eq(vl_retry_after_ms("1.5", 3), -1);
    ck_assert_int_eq(vl_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", 29), -1);
    ck_assert_int_eq(vl_retry_after_ms("99999999999999999999", 20), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("proto");

    tcase_add_test(tc, request_is_complete_http);
    tcase_add_test(tc, request_carries_the_token);
    tcase_add_test(tc, request_forwards_the_customer_address);
    tcase_add_test(tc, request_too_long_is_refused);
    tcase_add_test(tc, answers);
    tcase_add_test(tc, retry_after);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
