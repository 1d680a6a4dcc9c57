/*
 * The pure part of the campaign routes (gw_campaign_route.c): which path is
 * which operation, and which bodies are malformed (400) or describe a
 * campaign that cannot be made (422).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "gw_campaign.h"
#include "vc_error.h"

START_TEST(routes)
{
    static const struct {
        gw_method_t method;
        const char *path;
        gw_route_kind_t kind;
        int op;
        int64_t id;
    } cases[] = {
        {GW_M_POST, "/campaigns", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_CREATE, 0},
        {GW_M_GET, "/campaigns", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_LIST, 0},
        {GW_M_GET, "/campaigns?active=true&limit=5", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_LIST, 0},
        {GW_M_DELETE, "/campaigns", GW_ROUTE_BAD_METHOD, 0, 0},
        {GW_M_GET, "/campaigns/42", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_SHOW, 42},
        {GW_M_GET, "/campaigns/42?x=1", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_SHOW, 42},
        {GW_M_GET, "/campaigns/42/codes", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_CODES, 42},
        {GW_M_POST, "/campaigns/42/deactivate", GW_ROUTE_CAMPAIGN, GW_CAMPAIGN_DEACTIVATE, 42},
        {GW_M_GET, "/campaigns/42/deactivate", GW_ROUTE_BAD_METHOD, 0, 42},
        {GW_M_DELETE, "/campaigns/42", GW_ROUTE_BAD_METHOD, 0, 42},
        {GW_M_GET, "/campaigns/0", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/042", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/-1", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/abc", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/9999999999999999999", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/42/other", GW_ROUTE_NOT_FOUND, 0, 0},
        {GW_M_GET, "/campaigns/42/codes/x", GW_ROUTE_NOT_FOUND, 0, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_route_t r;

        gw_route(cases[i].method, cases[i].path, strlen(cases[i].path), &r);
        ck_assert_msg(r.kind == cases[i].kind, "%s: kind %d", cases[i].path, r.kind);
        if (r.kind == GW_ROUTE_CAMPAIGN) {
            ck_assert_msg(r.campaign_op == cases[i].op, "%s: op %d", cases[i].path, r.campaign_op);
            ck_assert_msg(r.campaign_id == cases[i].id, "%s: id", cases[i].path);
            ck_assert_int_eq(gw_route_auth(r.kind), GW_AUTH_ADMIN);
        }
    }
}
END_TEST

#define WINDOW "\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\""

START_TEST(bodies)
{
    static const struct {
        const char *body;
        int want; /* 0, VC_ERR_INVALID (400) or GW_CAMPAIGN_E_UNPROCESSABLE (422) */
        const char *detail;
    } cases[] = {
        {"{\"name\":\"a\",\"count\":10,\"discountAmount\":5," WINDOW "}", 0, NULL},
        {"{\"name\":\"a\",\"count\":10,\"discountPercent\":5,\"maxDiscountAmount\":9,"
         "\"prefix\":\"AB\",\"length\":13,\"checkSymbol\":true,\"alphabet\":\"safe32\","
         "\"perCustomerLimit\":2,\"customerIds\":[1,2]," WINDOW "}",
         0, NULL},
        {"{\"name\":\"a\",\"count\":10", VC_ERR_INVALID, NULL},
        {"{\"name\":\"a\",\"count\":10,\"discountAmount\":5,\"extra\":1," WINDOW "}",
         VC_ERR_INVALID, "extra"},
        {"{\"name\":\"a\",\"count\":\"10\",\"discountAmount\":5," WINDOW "}", VC_ERR_INVALID,
         "count"},
        {"{\"name\":\"a\",\"count\":10,\"checkSymbol\":1,\"discountAmount\":5," WINDOW "}",
         VC_ERR_INVALID, "checkSymbol"},
        {"{\"name\":\"a\",\"count\":10,\"customerIds\":[1,\"2\"],\"discountAmount\":5," WINDOW "}",
         VC_ERR_INVALID, "customerIds"},
        {"{\"name\":\"a\",\"count\":0,\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "count"},
        {"{\"name\":\"a\",\"count\":10000001,\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "count"},
        {"{\"name\":\"a\",\"count\":10,\"alphabet\":\"hex\",\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "alphabet"},
        {"{\"name\":\"a\",\"count\":1000000,\"length\":9,\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "at least 10"},
        {"{\"name\":\"a\",\"count\":10,\"length\":30,\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "length"},
        {"{\"name\":\"a\",\"count\":10,\"prefix\":\"ABCDEFGHJ\",\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "prefix"},
        {"{\"name\":\"a\",\"count\":10,\"prefix\":\"AB0\",\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "'0' is not one"},
        {"{\"name\":\"a\",\"count\":10," WINDOW "}", GW_CAMPAIGN_E_UNPROCESSABLE, "exactly one"},
        {"{\"name\":\"a\",\"count\":2,\"customerIds\":[1,2,3],\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "3 entries for 2 codes"},
        {"{\"name\":\"a\",\"count\":5,\"customerIds\":[7,1,7],\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "7 appears twice"},
        {"{\"name\":\"a\",\"count\":5,\"customerIds\":[0],\"discountAmount\":5," WINDOW "}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "not a customerId"},
        {"{\"name\":\"a\",\"count\":5,\"discountAmount\":5,\"startsAt\":\"2030-01-01T00:00:00Z\","
         "\"endsAt\":\"2029-01-01T00:00:00Z\"}",
         GW_CAMPAIGN_E_UNPROCESSABLE, "endsAt"},
    };
    static int64_t customers[GW_CAMPAIGN_CUSTOMERS_MAX];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_campaign_req_t req;
        char err[512] = "";
        int rc = gw_campaign_req_parse(cases[i].body, strlen(cases[i].body), &req, customers, err,
                                       sizeof(err));

        ck_assert_msg(rc == cases[i].want, "case %zu: rc %d (%s)", i, rc, err);
        if (cases[i].detail)
            ck_assert_msg(strstr(err, cases[i].detail), "case %zu: '%s'", i, err);
    }
}
END_TEST

/*
 * A name is at most 200 characters, as the spec's maxLength and PostgreSQL's
 * check count them: 200 two-, three- or four-byte characters are accepted
 * (up to 800 bytes) and kept whole; 201 are refused.
 */
START_TEST(name_counted_in_characters)
{
    static const char *const chars[] = {"\xC3\x84", "\xE2\x82\xAC", "\xF0\x9F\x8E\x9F", "a"};
    static int64_t customers[GW_CAMPAIGN_CUSTOMERS_MAX];

    for (size_t c = 0; c < sizeof(chars) / sizeof(chars[0]); c++)
        for (int n = 199; n <= 201; n++) {
            char name[1024] = "", body[1400], err[512] = "";
            gw_campaign_req_t req;
            int rc;

            for (int i = 0; i < n; i++)
                strcat(name, chars[c]);
            snprintf(body, sizeof(body),
                     "{\"name\":\"%s\",\"count\":10,\"discountAmount\":5," WINDOW "}", name);
            rc = gw_campaign_req_parse(body, strlen(body), &req, customers, err, sizeof(err));
            if (n <= 200) {
                ck_assert_msg(rc == 0, "%d of %s: rc %d (%s)", n, chars[c], rc, err);
                ck_assert_str_eq(req.spec.name, name);
            } else {
                ck_assert_int_eq(rc, GW_CAMPAIGN_E_UNPROCESSABLE);
                ck_assert_ptr_nonnull(strstr(err, "at most 200 characters"));
            }
        }
}
END_TEST

START_TEST(body_of_a_campaign)
{
    vc_campaign_row_t row;
    char buf[2048];
    size_t len;

    memset(&row, 0, sizeof(row));
    row.id = 7;
    strcpy(row.spec.name, "spring \"mailing\"");
    strcpy(row.state, "GENERATING");
    row.generated = 50000;
    row.spec.count = 120000;
    row.spec.alphabet = vc_alphabet_find("safe32");
    row.spec.length = 12;
    row.spec.discount_percent = 10;
    row.spec.max_discount_amount = 2000;
    row.spec.per_customer_limit = 1;
    row.spec.ends_at_ms = 1000;
    len = gw_body_campaign(buf, sizeof(buf), &row);
    ck_assert_uint_gt(len, 0);
    ck_assert_ptr_nonnull(strstr(buf, "\"id\":7,\"name\":\"spring \\\"mailing\\\"\",\"state\":"
                                      "\"GENERATING\",\"stalled\":false,\"generated\":50000,"
                                      "\"total\":120000"));
    ck_assert_ptr_nonnull(strstr(buf, "\"discountPercent\":10,\"maxDiscountAmount\":2000"));
    ck_assert_ptr_null(strstr(buf, "discountAmount\""));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_campaign");
    TCase *tc = tcase_create("gateway_campaign");

    tcase_add_test(tc, routes);
    tcase_add_test(tc, bodies);
    tcase_add_test(tc, name_counted_in_characters);
    tcase_add_test(tc, body_of_a_campaign);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
