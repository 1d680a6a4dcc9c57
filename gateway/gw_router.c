#include "gw_router.h"

#include "gw_campaign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_campaign.h"
#include "vc_error.h"

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
                snprintf(err, errlen, "parameter \"after\" must be the previous page's next");
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
