#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_campaign.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_time.h"
#include "vc_utf8.h"

/* A campaign id: 1..19 decimal digits, no sign, no leading zero. */
static int64_t parse_id(const char *s, int n)
{
    int64_t v = 0;

    if (n < 1 || n > 18 || s[0] == '0')
        return 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int is(const char *seg, int n, const char *lit)
{
    return (size_t)n == strlen(lit) && memcmp(seg, lit, (size_t)n) == 0;
}

void gw_campaign_route(gw_method_t method, const char *const *seg, const int *n, int count,
                       gw_route_t *out)
{
    gw_method_t want;
    int op;

    if (count == 0) {
        /* GET lists, POST creates: no other method. */
        if (method != GW_M_GET && method != GW_M_POST) {
            out->kind = GW_ROUTE_BAD_METHOD;
            out->allow = "GET, POST";
            return;
        }
        op = method == GW_M_GET ? GW_CAMPAIGN_LIST : GW_CAMPAIGN_CREATE;
        want = method;
    } else {
        if (count > 2 || (out->campaign_id = parse_id(seg[0], n[0])) == 0)
            return;
        if (count == 1) {
            op = GW_CAMPAIGN_SHOW;
            want = GW_M_GET;
        } else if (is(seg[1], n[1], "codes")) {
            op = GW_CAMPAIGN_CODES;
            want = GW_M_GET;
        } else if (is(seg[1], n[1], "deactivate")) {
            op = GW_CAMPAIGN_DEACTIVATE;
            want = GW_M_POST;
        } else {
            out->campaign_id = 0;
            return;
        }
    }
    if (method != want) {
        out->kind = GW_ROUTE_BAD_METHOD;
        out->allow = want == GW_M_GET ? "GET" : "POST";
        return;
    }
    out->kind = GW_ROUTE_CAMPAIGN;
    out->campaign_op = op;
}

static int range(const vc_jdoc_t *doc, const char *key, int64_t lo, int64_t hi, int64_t *out,
                 char *err, size_t errlen)
{
    int rc = vc_jdoc_whole(doc, key, out, err, errlen);

    if (rc == 0 && (*out < lo || *out > hi)) {
        snprintf(err, errlen, "field \"%s\" must be within %lld..%lld", key, (long long)lo,
                 (long long)hi);
        return GW_CAMPAIGN_E_UNPROCESSABLE;
    }
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int gw_campaign_req_parse(const char *body, size_t len, gw_campaign_req_t *out, int64_t *customers,
                          char *err, size_t errlen)
{
    static const char *const allowed[] = {
        "name",           "count",          "length",   "prefix",           "alphabet",
        "checkSymbol",    "discountAmount", "discountPercent", "maxDiscountAmount",
        "minOrderAmount", "perCustomerLimit", "startsAt", "endsAt",          "customerIds",
        NULL};
    vc_campaign_spec_t *s = &out->spec;
    vc_jdoc_t doc;
    const char *str;
    int64_t v;
    int rc;

    memset(out, 0, sizeof(*out));
    out->customers = customers;
    s->length = VC_CAMPAIGN_LENGTH_DEFAULT;
    s->per_customer_limit = 1;
    s->alphabet = vc_alphabet_find("safe32");
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_str(&doc, "name", &str, err, errlen)) != 0)
        goto out;
    /* Characters, as the spec's maxLength and PostgreSQL's check count them, not bytes. */
    if (vc_utf8_count(str) > VC_CAMPAIGN_NAME_MAX) {
        snprintf(err, errlen, "field \"name\" must be at most %d characters",
                 VC_CAMPAIGN_NAME_MAX);
        rc = GW_CAMPAIGN_E_UNPROCESSABLE;
        goto out;
    }
    snprintf(s->name, sizeof(s->name), "%s", str);
    if ((rc = vc_jdoc_whole(&doc, "count", &s->count, err, errlen)) != 0)
        goto out;
    if (vc_jdoc_has(&doc, "length")) {
        if ((rc = range(&doc, "length", VC_CAMPAIGN_LENGTH_MIN, VC_CAMPAIGN_LENGTH_MAX, &v, err,
                        errlen)) != 0)
            goto out;
        s->length = (int)v;
    }
    if (vc_jdoc_has(&doc, "prefix")) {
        if ((rc = vc_jdoc_str(&doc, "prefix", &str, err, errlen)) != 0)
            goto out;
        if (!str[0] || strlen(str) > VC_CAMPAIGN_PREFIX_MAX) {
            snprintf(err, errlen, "field \"prefix\" must be 1..%d symbols", VC_CAMPAIGN_PREFIX_MAX);
            rc = GW_CAMPAIGN_E_UNPROCESSABLE;
            goto out;
        }
        snprintf(s->prefix, sizeof(s->prefix), "%s", str);
    }
    if (vc_jdoc_has(&doc, "alphabet")) {
        if ((rc = vc_jdoc_str(&doc, "alphabet", &str, err, errlen)) != 0)
            goto out;
        s->alphabet = vc_alphabet_find(str); /* unknown: NULL, refused below */
    }
    if (vc_jdoc_has(&doc, "checkSymbol")) {
        if ((rc = vc_jdoc_bool(&doc, "checkSymbol", &s->check_symbol, err, errlen)) != 0)
            goto out;
    }
    if (vc_jdoc_has(&doc, "discountAmount") &&
        (rc = range(&doc, "discountAmount", 1, INT64_MAX, &s->discount_amount, err, errlen)) != 0)
        goto out;
    if (vc_jdoc_has(&doc, "discountPercent")) {
        if ((rc = range(&doc, "discountPercent", 1, 100, &v, err, errlen)) != 0)
            goto out;
        s->discount_percent = (int)v;
    }
    if (vc_jdoc_has(&doc, "maxDiscountAmount") &&
        (rc = range(&doc, "maxDiscountAmount", 1, INT64_MAX, &s->max_discount_amount, err,
                    errlen)) != 0)
        goto out;
    if (vc_jdoc_has(&doc, "minOrderAmount") &&
        (rc = range(&doc, "minOrderAmount", 0, INT64_MAX, &s->min_order_amount, err, errlen)) != 0)
        goto out;
    if (vc_jdoc_has(&doc, "perCustomerLimit") &&
        (rc = range(&doc, "perCustomerLimit", 1, INT32_MAX, &s->per_customer_limit, err,
                    errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_time(&doc, "startsAt", 1, &s->starts_at_ms, err, errlen)) != 0 ||
        (rc = vc_jdoc_time(&doc, "endsAt", 1, &s->ends_at_ms, err, errlen)) != 0)
        goto out;
    if (vc_jdoc_has(&doc, "customerIds") &&
        (rc = vc_jdoc_int_array(&doc, "customerIds", customers, GW_CAMPAIGN_CUSTOMERS_MAX,
                                &out->ncustomers, err, errlen)) != 0)
        goto out;
    /* The request is well formed: what follows is about the campaign it asks for. */
    if (vc_campaign_spec_check(s, err, errlen) != 0) {
        rc = GW_CAMPAIGN_E_UNPROCESSABLE;
        goto out;
    }
    if ((int64_t)out->ncustomers > s->count) {
        snprintf(err, errlen, "field \"customerIds\" has %zu entries for %lld codes",
                 out->ncustomers, (long long)s->count);
        rc = GW_CAMPAIGN_E_UNPROCESSABLE;
        goto out;
    }
    if (out->ncustomers > 0) {
        int64_t sorted[GW_CAMPAIGN_CUSTOMERS_MAX];

        memcpy(sorted, customers, out->ncustomers * sizeof(*sorted));
        qsort(sorted, out->ncustomers, sizeof(*sorted), cmp_i64);
        for (size_t i = 0; i < out->ncustomers; i++)
            if (sorted[i] < 1 || (i > 0 && sorted[i] == sorted[i - 1])) {
                snprintf(err, errlen,
                         sorted[i] < 1
                             ? "field \"customerIds\": %lld is not a customerId (>= 1)"
                             : "field \"customerIds\": %lld appears twice (one code each)",
                         (long long)sorted[i]);
                rc = GW_CAMPAIGN_E_UNPROCESSABLE;
                goto out;
            }
    }
out:
    vc_jdoc_free(&doc);
    return rc;
}

size_t gw_body_campaign(char *buf, size_t cap, const vc_campaign_row_t *row)
{
    vc_jgen_t g;
    size_t len = 0;

    if (vc_jgen_init(&g) != 0)
        return 0;
    if (gw_jgen_campaign(&g, row) != 0) {
        vc_jgen_free(&g);
        return 0;
    }
    /* finish frees the writer, whatever it returns. */
    return vc_jgen_finish(&g, buf, cap, &len) == 0 ? len : 0;
}

int gw_jgen_campaign(vc_jgen_t *g, const vc_campaign_row_t *row)
{
    const vc_campaign_spec_t *s = &row->spec;
    char starts[40], ends[40];

    if (vc_time_format_ms(s->starts_at_ms, starts, sizeof(starts)) == 0 ||
        vc_time_format_ms(s->ends_at_ms, ends, sizeof(ends)) == 0)
        return -1;
    vc_jgen_map_open(g);
    vc_jgen_kv_int(g, "id", row->id);
    vc_jgen_kv_str(g, "name", s->name);
    vc_jgen_kv_str(g, "state", row->state);
    vc_jgen_kv_bool(g, "stalled", row->stalled);
    vc_jgen_kv_int(g, "generated", row->generated);
    vc_jgen_kv_int(g, "total", s->count);
    if (row->has_usage) {
        vc_jgen_key(g, "codes");
        vc_jgen_map_open(g);
        vc_jgen_kv_int(g, "held", row->held);
        vc_jgen_kv_int(g, "redeemed", row->redeemed);
        vc_jgen_kv_int(g, "free", row->free);
        vc_jgen_map_close(g);
    }
    vc_jgen_kv_str(g, "alphabet", s->alphabet ? s->alphabet->name : "");
    vc_jgen_kv_str(g, "prefix", s->prefix);
    vc_jgen_kv_int(g, "length", s->length);
    vc_jgen_kv_bool(g, "checkSymbol", s->check_symbol);
    gw_jgen_discount(g, s->discount_percent, s->max_discount_amount, s->discount_amount);
    vc_jgen_kv_int(g, "minOrderAmount", s->min_order_amount);
    vc_jgen_kv_int(g, "perCustomerLimit", s->per_customer_limit);
    vc_jgen_kv_str(g, "startsAt", starts);
    vc_jgen_kv_str(g, "endsAt", ends);
    vc_jgen_map_close(g);
    return 0;
}
