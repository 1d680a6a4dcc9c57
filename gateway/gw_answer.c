#include "gw_answer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gw_num.h"
#include "vc_error.h"
#include "vc_time.h"

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


/*
 * The 201 of a reservation is the answer of every success, so it is written
 * straight into buf, without a yajl generator (an allocation) and without
 * printf (both showed in the profile of the success path). The text is the
 * generator's to the byte: strings escaped as yajl_gen_string() escapes them
 * (no solidus), integers and the time as vc_jgen and vc_time_format_ms()
 * write them; tests/unit/test_gateway.c compares the two.
 */
typedef struct {
    char *p, *end; /* end: the last byte, kept for the NUL */
    int full;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->full || n > (size_t)(o->end - o->p)) {
        o->full = 1;
        return;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

static void put_lit(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

/* A JSON string, escaped as yajl_gen_string() does with its default options. */
static void put_str(out_t *o, const char *s)
{
    static const char hex[] = "0123456789ABCDEF"; /* yajl's case */

    put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;

        switch (ch) {
        case '"':
        case '\\':
            esc[1] = (char)ch;
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (ch >= 0x20) {
                put(o, s, 1);
                continue;
            }
            esc[1] = 'u';
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            n = 6;
            break;
        }
        put(o, esc, n);
    }
    put(o, "\"", 1);
}

static void put_int(out_t *o, int64_t v)
{
    char text[GW_I64_TEXT];
    put(o, text, gw_i64_text(text, v));
}

/* n as exactly width digits (n >= 0, and below 10^width). */
static void put_digits(out_t *o, int n, int width)
{
    char d[4];
    for (int i = width - 1; i >= 0; i--, n /= 10)
        d[i] = (char)('0' + n % 10);
    put(o, d, (size_t)width);
}

/* ms as vc_time_format_ms() writes it, "2026-11-29T18:13:02.123Z"; 0 when it cannot. */
static int put_time(out_t *o, int64_t ms)
{
    time_t secs = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    struct tm tm;
    char ts[40];
    size_t n;

    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    if (!gmtime_r(&secs, &tm))
        return 0;
    if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
        /* Four digits no longer hold the year: as printf widens it. */
        if ((n = vc_time_format_ms(ms, ts, sizeof(ts))) == 0)
            return 0;
        put(o, "\"", 1);
        put(o, ts, n);
        put(o, "\"", 1);
        return 1;
    }
    put(o, "\"", 1);
    put_digits(o, tm.tm_year + 1900, 4);
    put(o, "-", 1);
    put_digits(o, tm.tm_mon + 1, 2);
    put(o, "-", 1);
    put_digits(o, tm.tm_mday, 2);
    put(o, "T", 1);
    put_digits(o, tm.tm_hour, 2);
    put(o, ":", 1);
    put_digits(o, tm.tm_min, 2);
    put(o, ":", 1);
    put_digits(o, tm.tm_sec, 2);
    put(o, ".", 1);
    put_digits(o, frac, 3);
    put(o, "Z\"", 2);
    return 1;
}

size_t gw_body_reservation(char *buf, size_t cap, const char *order_id, const char *code,
                           int64_t discount, int64_t held_until_ms, int replayed)
{
    out_t o = {buf, buf + cap - 1, 0};

    if (cap == 0)
        return 0;
    put_lit(&o, "{\"orderId\":");
    put_str(&o, order_id);
    put_lit(&o, ",\"code\":");
    put_str(&o, code);
    put_lit(&o, ",\"discountAmount\":");
    put_int(&o, discount);
    put_lit(&o, ",\"heldUntil\":");
    if (!put_time(&o, held_until_ms))
        return 0;
    if (replayed)
        put_lit(&o, ",\"replayed\":true");
    put(&o, "}", 1);
    if (o.full)
        return 0;
    *o.p = '\0';
    return (size_t)(o.p - buf);
}

/*
 * Every refusal has this body (a sold-out answer, a 404, a 429), so it is
 * written straight as gw_body_reservation() is: a yajl generator per answer
 * (its allocation, its buffer) was a tenth of the sold-out path's user time.
 * The text is the generator's to the byte (tests/unit/test_gateway.c).
 */
size_t gw_body_error(char *buf, size_t cap, const char *error, const char *detail,
                     const char *reason)
{
    out_t o = {buf, buf + cap - 1, 0};

    if (cap == 0)
        return 0;
    put_lit(&o, "{\"error\":");
    put_str(&o, error);
    put_lit(&o, ",\"detail\":");
    put_str(&o, detail ? detail : "");
    if (reason) {
        put_lit(&o, ",\"reason\":");
        put_str(&o, reason);
    }
    put(&o, "}", 1);
    if (o.full)
        return 0;
    *o.p = '\0';
    return (size_t)(o.p - buf);
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
