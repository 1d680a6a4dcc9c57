#include "gw_router.h"

#include "gw_campaign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_time.h"

/* Splits the next path segment off *p (without the leading '/'); returns its length or -1. */
static int next_segment(const char **p, const char *end, const char **seg)
{
    const char *s = *p, *e;

    if (s >= end || *s != '/')
        return -1;
    s++;
    for (e = s; e < end && *e != '/'; e++)
        ;
    *seg = s;
    *p = e;
    return (int)(e - s);
}

static int seg_is(const char *seg, int n, const char *lit)
{
    return n >= 0 && (size_t)n == strlen(lit) && memcmp(seg, lit, (size_t)n) == 0;
}

const char *gw_route_name(gw_route_kind_t kind)
{
    static const char *const names[GW_ROUTE_COUNT] = {
        [GW_ROUTE_NOT_FOUND] = "not_found", [GW_ROUTE_BAD_METHOD] = "bad_method",
        [GW_ROUTE_HEALTHZ] = "healthz",     [GW_ROUTE_RESERVE] = "reserve",
        [GW_ROUTE_CONFIRM] = "confirm",     [GW_ROUTE_CANCEL] = "cancel",
        [GW_ROUTE_READYZ] = "readyz",       [GW_ROUTE_METRICS] = "metrics",
        [GW_ROUTE_CREATE] = "create",       [GW_ROUTE_SHOW] = "show",
        [GW_ROUTE_QUOTE] = "quote",         [GW_ROUTE_CAMPAIGN] = "campaign",
        [GW_ROUTE_UPDATE] = "update",       [GW_ROUTE_LIST] = "list",
        [GW_ROUTE_LOOKUP] = "lookup",
    };
    return (unsigned)kind < GW_ROUTE_COUNT && names[kind] ? names[kind] : "unknown";
}

/*
 * Percent-decodes the path segment seg[0..n) into out (cap bytes, NUL-terminated):
 * a client may encode any byte of a code or an orderId ("%26" for '&'), as
 * URL libraries do for every byte outside RFC 3986's unreserved set. Returns
 * the decoded length, or -1 for a bad escape or a result that does not fit.
 */
static int pct_decode(const char *seg, int n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;

    for (int i = 0; i < n; i++) {
        int c = (unsigned char)seg[i];
        if (c == '%') {
            const char *hi, *lo;
            if (i + 2 >= n)
                return -1;
            hi = strchr(hex, seg[i + 1] | 0x20);
            lo = strchr(hex, seg[i + 2] | 0x20);
            if (!hi || !lo || !*hi || !*lo)
                return -1;
            c = (int)((hi - hex) * 16 + (lo - hex));
            i += 2;
        }
        if (len + 1 >= cap)
            return -1;
        out[len++] = (char)c;
    }
    out[len] = '\0';
    return (int)len;
}

/* A route that takes exactly one method: kind for it, else 405 with allow. */
static void one_method(gw_route_t *out, gw_method_t method, gw_method_t want, gw_route_kind_t kind,
                       const char *allow)
{
    if (method == want) {
        out->kind = kind;
        out->allow = NULL;
    } else {
        out->kind = GW_ROUTE_BAD_METHOD;
        out->allow = allow;
    }
}

/* A campaign's code as a customer may type it: letters in either case, digits and '-'. */
static int campaign_code_form(const char *s, size_t len)
{
    char code[VC_CODE_MAX + 1];
    return len <= VC_CODE_MAX && vc_campaign_normalize(s, len, code) > 0;
}

void gw_route(gw_method_t method, const char *path, size_t len, gw_route_t *out)
{
    static const struct {
        const char *name;
        gw_route_kind_t kind;
    } probes[] = {
        {"healthz", GW_ROUTE_HEALTHZ},
        {"readyz", GW_ROUTE_READYZ},
        {"metrics", GW_ROUTE_METRICS},
    };
    const char *end, *p = path, *seg[5];
    char code[VC_CODE_MAX + 2], order_id[VC_ORDER_ID_MAX + 2];
    int n[5], count = 0, dlen;
    const char *q = memchr(path, '?', len);

    memset(out, 0, sizeof(*out));
    out->kind = GW_ROUTE_NOT_FOUND;
    end = q ? q : path + len;
    while (p < end) {
        if (count == 5)
            return;
        if ((n[count] = next_segment(&p, end, &seg[count])) < 0)
            return;
        count++;
    }
    if (count == 1) {
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
            if (seg_is(seg[0], n[0], probes[i].name)) {
                one_method(out, method, GW_M_GET, probes[i].kind, "GET");
                return;
            }
    }
    if (count >= 1 && seg_is(seg[0], n[0], "campaigns")) {
        gw_campaign_route(method, seg + 1, n + 1, count - 1, out);
        return;
    }
    if (count < 1 || !seg_is(seg[0], n[0], "vouchers"))
        return;
    if (count == 1) {
        if (method == GW_M_GET)
            out->kind = GW_ROUTE_LIST;
        else
            one_method(out, method, GW_M_POST, GW_ROUTE_CREATE, "GET, POST");
        return;
    }
    if (count >= 3 && !seg_is(seg[2], n[2], "reservations") &&
        !(count == 3 && seg_is(seg[2], n[2], "quote")))
        return;
    if (count == 5 && !seg_is(seg[4], n[4], "confirm"))
        return;
    /*
     * The path names a real route: a code or orderId that cannot exist is a
     * 404. A campaign's code may come in lower case (proto/campaigns.md).
     */
    if ((dlen = pct_decode(seg[1], n[1], code, sizeof(code))) < 0 ||
        (!vc_code_valid(code, (size_t)dlen) && !campaign_code_form(code, (size_t)dlen)))
        return;
    if (count >= 4 && ((dlen = pct_decode(seg[3], n[3], order_id, sizeof(order_id))) < 0 ||
                       !vc_order_id_valid(order_id, (size_t)dlen)))
        return;
    memcpy(out->code, code, strlen(code) + 1);
    if (count >= 4)
        memcpy(out->order_id, order_id, strlen(order_id) + 1);
    switch (count) {
    case 2:
        if (method == GW_M_PATCH)
            out->kind = GW_ROUTE_UPDATE;
        else
            one_method(out, method, GW_M_GET, GW_ROUTE_SHOW, "GET, PATCH");
        break;
    case 3:
        if (seg_is(seg[2], n[2], "quote"))
            one_method(out, method, GW_M_POST, GW_ROUTE_QUOTE, "POST");
        else
            one_method(out, method, GW_M_POST, GW_ROUTE_RESERVE, "POST");
        break;
    case 4:
        if (method == GW_M_GET)
            out->kind = GW_ROUTE_LOOKUP;
        else
            one_method(out, method, GW_M_DELETE, GW_ROUTE_CANCEL, "GET, DELETE");
        break;
    default:
        one_method(out, method, GW_M_POST, GW_ROUTE_CONFIRM, "POST");
        break;
    }
}

/* Reads key as an integer within [lo, hi]; err names the field. */
static int int_field(const vc_jdoc_t *doc, const char *key, int64_t lo, int64_t hi, int64_t *out,
                     char *err, size_t errlen)
{
    int rc = vc_jdoc_whole(doc, key, out, err, errlen);

    if (rc != 0)
        return rc;
    if (*out < lo || *out > hi) {
        if (hi == INT64_MAX)
            snprintf(err, errlen, "field \"%s\" must be at least %lld", key, (long long)lo);
        else
            snprintf(err, errlen, "field \"%s\" must be within %lld..%lld", key, (long long)lo,
                     (long long)hi);
        return VC_ERR_INVALID;
    }
    return 0;
}

int gw_quote_req_parse(const char *body, size_t len, gw_quote_req_t *out, char *err, size_t errlen)
{
    static const char *const allowed[] = {"customerId", "orderAmount", NULL};
    vc_jdoc_t doc;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) == 0 &&
        (rc = int_field(&doc, "customerId", 1, INT64_MAX, &out->customer_id, err, errlen)) == 0)
        rc = int_field(&doc, "orderAmount", 0, INT64_MAX, &out->order_amount, err, errlen);
    vc_jdoc_free(&doc);
    return rc;
}

int gw_confirm_req_parse(const char *body, size_t len, gw_confirm_req_t *out, char *err,
                         size_t errlen)
{
    static const char *const allowed[] = {"orderAmount", NULL};
    vc_jdoc_t doc;
    size_t i;
    int rc;

    memset(out, 0, sizeof(*out));
    for (i = 0; i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' ||
                            body[i] == '\n');
         i++)
        ;
    if (i == len)
        return 0; /* no body: the confirm of old */
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) == 0 &&
        vc_jdoc_has(&doc, "orderAmount") &&
        (rc = int_field(&doc, "orderAmount", 0, INT64_MAX, &out->order_amount, err, errlen)) == 0)
        out->has_total = 1;
    vc_jdoc_free(&doc);
    if (rc != 0)
        memset(out, 0, sizeof(*out)); /* a refused body gives no total */
    return rc;
}

int gw_voucher_req_parse(const char *body, size_t len, vc_voucher_t *out, char *err, size_t errlen)
{
    static const char *const allowed[] = {"code",
                                          "discountAmount",
                                          "discountPercent",
                                          "maxDiscountAmount",
                                          "minOrderAmount",
                                          "totalLimit",
                                          "perUserLimit",
                                          "startsAt",
                                          "endsAt",
                                          NULL};
    vc_jdoc_t doc;
    const char *code;
    int64_t percent = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_str(&doc, "code", &code, err, errlen)) != 0)
        goto out;
    if (!vc_code_valid(code, strlen(code))) {
        snprintf(err, errlen, "field \"code\" must be 1..%d characters of A-Z, 0-9, '_' or '-'",
                 VC_CODE_MAX);
        rc = VC_ERR_INVALID;
        goto out;
    }
    memcpy(out->code, code, strlen(code) + 1);
    if (vc_jdoc_has(&doc, "discountAmount") == vc_jdoc_has(&doc, "discountPercent")) {
        snprintf(err, errlen,
                 "exactly one of the fields \"discountAmount\" and \"discountPercent\" is "
                 "required");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if (vc_jdoc_has(&doc, "discountAmount")) {
        if ((rc = int_field(&doc, "discountAmount", 1, INT64_MAX, &out->discount_amount, err,
                            errlen)) != 0)
            goto out;
        if (vc_jdoc_has(&doc, "maxDiscountAmount")) {
            snprintf(err, errlen, "field \"maxDiscountAmount\" goes with \"discountPercent\" only");
            rc = VC_ERR_INVALID;
            goto out;
        }
    } else {
        if ((rc = int_field(&doc, "discountPercent", 1, 100, &percent, err, errlen)) != 0)
            goto out;
        out->discount_percent = (int)percent;
        if (vc_jdoc_has(&doc, "maxDiscountAmount") &&
            (rc = int_field(&doc, "maxDiscountAmount", 1, INT64_MAX, &out->max_discount_amount, err,
                            errlen)) != 0)
            goto out;
    }
    if ((rc = int_field(&doc, "minOrderAmount", 0, INT64_MAX, &out->min_order_amount, err,
                        errlen)) != 0 ||
        (rc = int_field(&doc, "totalLimit", 1, INT32_MAX, &out->total_limit, err, errlen)) != 0)
        goto out;
    out->per_customer_limit = 1;
    if (vc_jdoc_has(&doc, "perUserLimit") &&
        (rc = int_field(&doc, "perUserLimit", 1, INT32_MAX, &out->per_customer_limit, err,
                        errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_time(&doc, "startsAt", 1, &out->starts_at_ms, err, errlen)) != 0 ||
        (rc = vc_jdoc_time(&doc, "endsAt", 1, &out->ends_at_ms, err, errlen)) != 0)
        goto out;
    if (out->ends_at_ms <= out->starts_at_ms) {
        snprintf(err, errlen, "field \"endsAt\" must be after \"startsAt\"");
        rc = VC_ERR_INVALID;
        goto out;
    }
out:
    vc_jdoc_free(&doc);
    return rc;
}

int gw_voucher_patch_parse(const char *body, size_t len, gw_voucher_patch_t *out, char *err,
                           size_t errlen)
{
    static const char *const allowed[] = {"totalLimit",
                                          "perUserLimit",
                                          "startsAt",
                                          "endsAt",
                                          "discountAmount",
                                          "discountPercent",
                                          "maxDiscountAmount",
                                          "minOrderAmount",
                                          "active",
                                          NULL};
    vc_jdoc_t doc;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) != 0)
        goto out;
#define PATCH_INT(key, flag, field, lo, hi)                                                        \
    if ((out->flag = vc_jdoc_has(&doc, key)) &&                                                    \
        (rc = int_field(&doc, key, lo, hi, &out->field, err, errlen)) != 0)                        \
        goto out;
    PATCH_INT("totalLimit", has_total, total_limit, 1, INT32_MAX)
    PATCH_INT("perUserLimit", has_per_user, per_user_limit, 1, INT32_MAX)
    PATCH_INT("discountAmount", has_amount, discount_amount, 1, INT64_MAX)
    PATCH_INT("discountPercent", has_percent, discount_percent, 1, 100)
    PATCH_INT("maxDiscountAmount", has_max, max_discount_amount, 1, INT64_MAX)
    PATCH_INT("minOrderAmount", has_min, min_order_amount, 0, INT64_MAX)
#undef PATCH_INT
    if ((out->has_starts = vc_jdoc_has(&doc, "startsAt")) &&
        (rc = vc_jdoc_time(&doc, "startsAt", 1, &out->starts_at_ms, err, errlen)) != 0)
        goto out;
    if ((out->has_ends = vc_jdoc_has(&doc, "endsAt")) &&
        (rc = vc_jdoc_time(&doc, "endsAt", 1, &out->ends_at_ms, err, errlen)) != 0)
        goto out;
    if ((out->has_active = vc_jdoc_has(&doc, "active")) &&
        (rc = vc_jdoc_bool(&doc, "active", &out->active, err, errlen)) != 0)
        goto out;
    if (out->has_amount && (out->has_percent || out->has_max)) {
        snprintf(err, errlen,
                 "field \"discountAmount\" goes with neither \"discountPercent\" nor "
                 "\"maxDiscountAmount\"");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if (!(out->has_total | out->has_per_user | out->has_starts | out->has_ends | out->has_amount |
          out->has_percent | out->has_max | out->has_min | out->has_active)) {
        snprintf(err, errlen, "the body must change at least one field");
        rc = VC_ERR_INVALID;
    }
out:
    vc_jdoc_free(&doc);
    return rc;
}

int gw_voucher_patch_apply(const vc_voucher_t *cur, const gw_voucher_patch_t *p, vc_voucher_t *out,
                           char *err, size_t errlen)
{
    *out = *cur;
    if (p->has_per_user) {
        if (p->per_user_limit < cur->per_customer_limit) {
            snprintf(err, errlen,
                     "perUserLimit can only be raised (%lld now): reservations acknowledged "
                     "under the current limit would be refused downstream",
                     (long long)cur->per_customer_limit);
            return GW_E_LIMIT;
        }
        out->per_customer_limit = p->per_user_limit;
    }
    if (p->has_amount) {
        out->discount_amount = p->discount_amount;
        out->discount_percent = 0;
        out->max_discount_amount = 0;
    }
    if (p->has_percent) {
        out->discount_percent = (int)p->discount_percent;
        out->discount_amount = 0;
    }
    if (p->has_max) {
        if (out->discount_percent == 0) {
            snprintf(err, errlen, "field \"maxDiscountAmount\" goes with a percent discount only");
            return GW_E_RULES;
        }
        out->max_discount_amount = p->max_discount_amount;
    }
    if (p->has_min)
        out->min_order_amount = p->min_order_amount;
    if (p->has_total)
        out->total_limit = p->total_limit;
    if (p->has_starts)
        out->starts_at_ms = p->starts_at_ms;
    if (p->has_ends)
        out->ends_at_ms = p->ends_at_ms;
    if (out->ends_at_ms <= out->starts_at_ms) {
        snprintf(err, errlen, "field \"endsAt\" must be after \"startsAt\"");
        return GW_E_RULES;
    }
    if (p->has_active)
        out->inactive = !p->active;
    return 0;
}

int gw_list_query_parse(const char *query, size_t len, gw_list_query_t *out, char *err,
                        size_t errlen)
{
    const char *p = query, *end = query + len;
    int seen_active = 0, seen_after = 0, seen_limit = 0;

    memset(out, 0, sizeof(*out));
    out->limit = GW_LIST_LIMIT_DEFAULT;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p)), *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        char value[VC_CODE_MAX + 2];
        int klen = (int)((eq ? eq : pe) - p), vlen;

        if (klen == 0 && pe == p) { /* "a=1&&b=2": an empty pair is nothing */
            p = pe + 1;
            continue;
        }
        vlen = eq ? pct_decode(eq + 1, (int)(pe - eq - 1), value, sizeof(value)) : -1;
        if (seg_is(p, klen, "active") && !seen_active++) {
            if (vlen < 0 || (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)) {
                snprintf(err, errlen, "parameter \"active\" must be true or false");
                return VC_ERR_INVALID;
            }
            out->has_active = 1;
            out->active = value[0] == 't';
        } else if (seg_is(p, klen, "after") && !seen_after++) {
            if (vlen < 0 || !vc_code_valid(value, (size_t)vlen)) {
                snprintf(err, errlen, "parameter \"after\" must be a voucher code");
                return VC_ERR_INVALID;
            }
            memcpy(out->after, value, (size_t)vlen + 1);
        } else if (seg_is(p, klen, "limit") && !seen_limit++) {
            char *e = value;
            long v = vlen > 0 && value[0] >= '0' && value[0] <= '9' ? strtol(value, &e, 10) : 0;
            if (vlen <= 0 || e == value || *e || v < 1 || v > GW_LIST_LIMIT_MAX) {
                snprintf(err, errlen, "parameter \"limit\" must be within 1..%d",
                         GW_LIST_LIMIT_MAX);
                return VC_ERR_INVALID;
            }
            out->limit = (int)v;
        } else {
            snprintf(err, errlen, "unknown or repeated query parameter \"%.*s\"",
                     klen > 32 ? 32 : klen, p);
            return VC_ERR_INVALID;
        }
        p = pe + (pe < end);
    }
    return 0;
}

int gw_route_auth(gw_route_kind_t kind)
{
    switch (kind) {
    case GW_ROUTE_RESERVE:
    case GW_ROUTE_CONFIRM:
    case GW_ROUTE_CANCEL:
    case GW_ROUTE_QUOTE:
        return GW_AUTH_API;
    case GW_ROUTE_CREATE:
    case GW_ROUTE_SHOW:
    case GW_ROUTE_CAMPAIGN:
    case GW_ROUTE_UPDATE:
    case GW_ROUTE_LIST:
    case GW_ROUTE_LOOKUP:
        return GW_AUTH_ADMIN;
    default:
        return GW_AUTH_NONE;
    }
}

/*
 * Whether given (glen bytes) equals want (wlen bytes), in a time that depends
 * on wlen only: every byte of want is compared, whatever matched before.
 */
static unsigned token_differs(const char *given, size_t glen, const char *want, size_t wlen)
{
    unsigned diff = glen != wlen;

    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned)(unsigned char)want[i] ^
                (unsigned)(unsigned char)(i < glen ? given[i] : 0);
    return diff;
}

int gw_bearer_authorized(const char *auth, const char *tokens)
{
    static const char prefix[] = "Bearer ";
    const char *p, *end;
    size_t glen;
    int match = 0;

    if (!tokens || !auth || strncmp(auth, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    auth += sizeof(prefix) - 1;
    glen = strlen(auth);
    if (glen == 0)
        return 0;
    /*
     * Every token of the list is compared, also after one matched, so the
     * time tells neither which token matched nor how much of one did; only
     * the number and lengths of the tokens set, which are no secret.
     */
    for (p = tokens; *p; p = *end ? end + 1 : end) {
        size_t wlen;

        end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        while (p < end && *p == ' ')
            p++;
        wlen = (size_t)(end - p);
        while (wlen > 0 && p[wlen - 1] == ' ')
            wlen--;
        if (wlen > 0)
            match |= token_differs(auth, glen, p, wlen) == 0;
    }
    return match;
}

int gw_reserve_req_parse(const char *body, size_t len, gw_reserve_req_t *out, char *err,
                         size_t errlen)
{
    static const char *const allowed[] = {"customerId", "orderId", "orderAmount", NULL};
    vc_jdoc_t doc;
    const char *order_id;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_whole(&doc, "customerId", &out->customer_id, err, errlen)) != 0)
        goto out;
    if (out->customer_id <= 0) {
        snprintf(err, errlen, "field \"customerId\" must be a positive integer");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if ((rc = vc_jdoc_str(&doc, "orderId", &order_id, err, errlen)) != 0)
        goto out;
    if (!vc_order_id_valid(order_id, strlen(order_id))) {
        snprintf(err, errlen,
                 "field \"orderId\" must be 1..%d printable ASCII characters without spaces, "
                 "'/', '?', '#' or '%%'",
                 VC_ORDER_ID_MAX);
        rc = VC_ERR_INVALID;
        goto out;
    }
    memcpy(out->order_id, order_id, strlen(order_id) + 1);
    if ((rc = vc_jdoc_whole(&doc, "orderAmount", &out->order_amount, err, errlen)) != 0)
        goto out;
    if (out->order_amount < 0) {
        snprintf(err, errlen, "field \"orderAmount\" must not be negative");
        rc = VC_ERR_INVALID;
        goto out;
    }
out:
    vc_jdoc_free(&doc);
    return rc;
}

/* Writes v as 16 hex digits. */
static void hex16(char *out, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = digits[v & 15];
}

void gw_claim_value(char out[GW_CLAIM_VALUE_MAX], const char *code, uint64_t process,
                    uint64_t seq)
{
    /* On every reservation that may take a use: no format parsing (see gw_app_keys). */
    size_t n = strnlen(code, VC_CODE_MAX);

    memcpy(out, code, n);
    out[n] = ':';
    hex16(out + n + 1, process);
    hex16(out + n + 17, seq);
    out[n + 33] = '\0';
}

int gw_claim_is_code(const char *value, size_t len, const char *code)
{
    size_t n = strlen(code);

    return len >= n && memcmp(value, code, n) == 0 && (len == n || value[n] == ':');
}

int gw_status_for(int rc, const char **error, const char **reason)
{
    *reason = NULL;
    switch (rc) {
    case VC_E_OUT_OF_STOCK:
        *error = "OUT_OF_STOCK";
        return 409;
    case VC_E_ALREADY_USED:
        *error = "ALREADY_USED";
        return 409;
    case VC_E_ORDER_CONFLICT:
        *error = "ORDER_CONFLICT";
        return 409;
    case VC_E_HOLD_EXPIRED:
        *error = "HOLD_EXPIRED";
        return 409;
    case VC_E_NOT_FOUND:
        *error = "NOT_FOUND";
        return 404;
    case VC_E_NOT_STARTED:
        *error = "NOT_ELIGIBLE";
        *reason = "NOT_STARTED";
        return 422;
    case VC_E_EXPIRED:
        *error = "NOT_ELIGIBLE";
        *reason = "EXPIRED";
        return 422;
    case VC_E_ORDER_TOO_SMALL:
        *error = "NOT_ELIGIBLE";
        *reason = "ORDER_TOO_SMALL";
        return 422;
    case VC_E_INACTIVE:
        *error = "NOT_ELIGIBLE";
        *reason = "INACTIVE";
        return 422;
    case GW_E_LIMIT:
        *error = "LIMIT_CONFLICT";
        return 409;
    case GW_E_RULES:
        *error = "RULES_CONFLICT";
        return 409;
    case VC_ERR_INVALID:
        *error = "BAD_REQUEST";
        return 400;
    case VC_ERR_TOO_LARGE:
        *error = "PAYLOAD_TOO_LARGE";
        return 413;
    case GW_E_EXISTS:
        *error = "EXISTS";
        return 409;
    case GW_E_UNAUTHORIZED:
        *error = "UNAUTHORIZED";
        return 401;
    case GW_E_CONFIRMED_OTHER:
        *error = "ALREADY_CONFIRMED";
        return 409;
    default:
        /* Every other failure is ours, and trying again later may pass. */
        *error = "UNAVAILABLE";
        return 503;
    }
}

static size_t finish(vc_jgen_t *g, char *buf, size_t cap)
{
    size_t len = 0;
    if (vc_jgen_finish(g, buf, cap, &len) != 0)
        return 0;
    return len;
}

static void figures(vc_jgen_t *g, const gw_figures_t *fig)
{
    if (fig->has_amount)
        vc_jgen_kv_int(g, "orderAmount", fig->order_amount);
    vc_jgen_kv_int(g, "discountAmount", fig->discount);
}

/* An error body, with a refused confirm's figures under key (or none: key NULL). */
static size_t error_body(char *buf, size_t cap, const char *error, const char *detail,
                         const char *reason, const char *key, const gw_figures_t *fig)
{
    vc_jgen_t g;

    if (vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "error", error);
    vc_jgen_kv_str(&g, "detail", detail ? detail : "");
    if (reason)
        vc_jgen_kv_str(&g, "reason", reason);
    if (key) {
        vc_jgen_key(&g, key);
        vc_jgen_map_open(&g);
        figures(&g, fig);
        vc_jgen_map_close(&g);
    }
    vc_jgen_map_close(&g);
    return finish(&g, buf, cap);
}

size_t gw_body_error(char *buf, size_t cap, const char *error, const char *detail,
                     const char *reason)
{
    return error_body(buf, cap, error, detail, reason, NULL, NULL);
}

size_t gw_body_reservation(char *buf, size_t cap, const char *order_id, const char *code,
                           int64_t discount, int64_t held_until_ms, int replayed)
{
    char ts[40];
    vc_jgen_t g;

    if (vc_time_format_ms(held_until_ms, ts, sizeof(ts)) == 0)
        return 0;
    if (vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "orderId", order_id);
    vc_jgen_kv_str(&g, "code", code);
    vc_jgen_kv_int(&g, "discountAmount", discount);
    vc_jgen_kv_str(&g, "heldUntil", ts);
    if (replayed)
        vc_jgen_kv_bool(&g, "replayed", 1);
    vc_jgen_map_close(&g);
    return finish(&g, buf, cap);
}

/* A confirm's or a cancel's answer, with the figures of a confirm given a total (fig, or NULL). */
static size_t status_body(char *buf, size_t cap, const char *order_id, const char *code,
                          const char *status, const gw_figures_t *fig, int replayed)
{
    vc_jgen_t g;

    if (vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "orderId", order_id);
    vc_jgen_kv_str(&g, "code", code);
    vc_jgen_kv_str(&g, "status", status);
    if (fig)
        figures(&g, fig);
    if (replayed)
        vc_jgen_kv_bool(&g, "replayed", 1);
    vc_jgen_map_close(&g);
    return finish(&g, buf, cap);
}

size_t gw_body_status(char *buf, size_t cap, const char *order_id, const char *code,
                      const char *status, int replayed)
{
    return status_body(buf, cap, order_id, code, status, NULL, replayed);
}

size_t gw_body_confirmed(char *buf, size_t cap, const char *order_id, const char *code,
                         const gw_figures_t *fig, int replayed)
{
    return status_body(buf, cap, order_id, code, "CONFIRMED", fig, replayed);
}

size_t gw_body_confirm_refused(char *buf, size_t cap, const char *error, const char *detail,
                               const char *reason, const char *key, const gw_figures_t *fig)
{
    return error_body(buf, cap, error, detail, reason, key, fig);
}

int gw_jgen_voucher(vc_jgen_t *g, const vc_voucher_t *v, int with_used, int64_t used_count)
{
    char starts[40], ends[40];

    if (vc_time_format_ms(v->starts_at_ms, starts, sizeof(starts)) == 0 ||
        vc_time_format_ms(v->ends_at_ms, ends, sizeof(ends)) == 0)
        return -1;
    vc_jgen_map_open(g);
    vc_jgen_kv_str(g, "code", v->code);
    gw_jgen_discount(g, v->discount_percent, v->max_discount_amount, v->discount_amount);
    vc_jgen_kv_int(g, "minOrderAmount", v->min_order_amount);
    vc_jgen_kv_int(g, "totalLimit", v->total_limit);
    vc_jgen_kv_int(g, "perUserLimit", v->per_customer_limit);
    vc_jgen_kv_str(g, "startsAt", starts);
    vc_jgen_kv_str(g, "endsAt", ends);
    vc_jgen_kv_bool(g, "active", !v->inactive);
    if (with_used)
        vc_jgen_kv_int(g, "usedCount", used_count);
    vc_jgen_map_close(g);
    return 0;
}

size_t gw_body_voucher(char *buf, size_t cap, const vc_voucher_t *v, int with_counters,
                       int64_t used_count, int has_remaining, int64_t remaining, int64_t holds)
{
    vc_jgen_t g;
    size_t len;
    int n;

    if (vc_jgen_init(&g) != 0)
        return 0;
    if (gw_jgen_voucher(&g, v, with_counters, used_count) != 0) {
        vc_jgen_free(&g);
        return 0;
    }
    if ((len = finish(&g, buf, cap)) == 0 || !with_counters)
        return len;
    /* vc_json writes no null: the counters that may be null are appended here. */
    len--; /* the closing brace */
    if (has_remaining)
        n = snprintf(buf + len, cap - len, ",\"remaining\":%lld,\"holds\":%lld}",
                     (long long)remaining, (long long)holds);
    else
        n = snprintf(buf + len, cap - len, ",\"remaining\":null,\"holds\":%lld}", (long long)holds);
    return n < 0 || (size_t)n >= cap - len ? 0 : len + (size_t)n;
}

void gw_jgen_discount(vc_jgen_t *g, int percent, int64_t max_amount, int64_t amount)
{
    if (percent > 0) {
        vc_jgen_kv_int(g, "discountPercent", percent);
        if (max_amount > 0)
            vc_jgen_kv_int(g, "maxDiscountAmount", max_amount);
    } else {
        vc_jgen_kv_int(g, "discountAmount", amount);
    }
}
