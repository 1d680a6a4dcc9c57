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
    };
    return (unsigned)kind < GW_ROUTE_COUNT && names[kind] ? names[kind] : "unknown";
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
    int n[5], count = 0;
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
        one_method(out, method, GW_M_POST, GW_ROUTE_CREATE, "POST");
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
    if (!vc_code_valid(seg[1], (size_t)n[1]) && !campaign_code_form(seg[1], (size_t)n[1]))
        return;
    memcpy(out->code, seg[1], (size_t)n[1]);
    if (count >= 4) {
        if (!vc_order_id_valid(seg[3], (size_t)n[3])) {
            out->code[0] = '\0';
            return;
        }
        memcpy(out->order_id, seg[3], (size_t)n[3]);
    }
    switch (count) {
    case 2:
        one_method(out, method, GW_M_GET, GW_ROUTE_SHOW, "GET");
        break;
    case 3:
        if (seg_is(seg[2], n[2], "quote"))
            one_method(out, method, GW_M_POST, GW_ROUTE_QUOTE, "POST");
        else
            one_method(out, method, GW_M_POST, GW_ROUTE_RESERVE, "POST");
        break;
    case 4:
        one_method(out, method, GW_M_DELETE, GW_ROUTE_CANCEL, "DELETE");
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
    int rc = vc_jdoc_int(doc, key, out, err, errlen);

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
    if ((rc = vc_jdoc_int(&doc, "customerId", &out->customer_id, err, errlen)) != 0)
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
    if ((rc = vc_jdoc_int(&doc, "orderAmount", &out->order_amount, err, errlen)) != 0)
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

const char *gw_status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 422:
        return "Unprocessable Content";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
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

size_t gw_body_voucher(char *buf, size_t cap, const vc_voucher_t *v, int with_counters,
                       int64_t used_count, int has_remaining, int64_t remaining, int64_t holds)
{
    char starts[40], ends[40];
    vc_jgen_t g;
    size_t len;
    int n;

    if (vc_time_format_ms(v->starts_at_ms, starts, sizeof(starts)) == 0 ||
        vc_time_format_ms(v->ends_at_ms, ends, sizeof(ends)) == 0 || vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "code", v->code);
    gw_jgen_discount(&g, v->discount_percent, v->max_discount_amount, v->discount_amount);
    vc_jgen_kv_int(&g, "minOrderAmount", v->min_order_amount);
    vc_jgen_kv_int(&g, "totalLimit", v->total_limit);
    vc_jgen_kv_int(&g, "perUserLimit", v->per_customer_limit);
    vc_jgen_kv_str(&g, "startsAt", starts);
    vc_jgen_kv_str(&g, "endsAt", ends);
    if (with_counters)
        vc_jgen_kv_int(&g, "usedCount", used_count);
    vc_jgen_map_close(&g);
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
