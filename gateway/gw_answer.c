#include "gw_answer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "vc_error.h"
#include "vc_jout.h"
#include "vc_time.h"
#include "vc_utf8.h"

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
    case GW_E_MODE_LOCKED:
        *error = "MODE_LOCKED";
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
    case GW_E_CAMPAIGN_CODE:
        *error = "EXISTS";
        *reason = "CAMPAIGN_CODE";
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
 * straight into buf (vc_jout.h), without a yajl generator (an allocation)
 * and without printf (both showed in the profile of the success path); the
 * text is the generator's to the byte (tests/unit/test_gateway.c compares).
 */
size_t gw_body_reservation(char *buf, size_t cap, const char *order_id, const char *code,
                           int64_t discount, int64_t held_until_ms, int replayed)
{
    vc_jout_t o;

    vc_jout_init(&o, buf, cap);
    vc_jout_lit(&o, "{\"orderId\":");
    vc_jout_str(&o, order_id);
    vc_jout_lit(&o, ",\"code\":");
    vc_jout_str(&o, code);
    vc_jout_lit(&o, ",\"discountAmount\":");
    vc_jout_int(&o, discount);
    vc_jout_lit(&o, ",\"heldUntil\":");
    if (!vc_jout_time(&o, held_until_ms))
        return 0;
    if (replayed)
        vc_jout_lit(&o, ",\"replayed\":true");
    vc_jout_raw(&o, "}", 1);
    return vc_jout_end(&o);
}

/*
 * Every refusal has this body (a sold-out answer, a 404, a 429), so it is
 * written straight (vc_jout.h) as gw_body_reservation() is: a yajl generator per answer
 * (its allocation, its buffer) was a tenth of the sold-out path's user time.
 * The text is the generator's to the byte (tests/unit/test_gateway.c).
 */
size_t gw_body_error(char *buf, size_t cap, const char *error, const char *detail,
                     const char *reason)
{
    vc_jout_t o;

    vc_jout_init(&o, buf, cap);
    vc_jout_lit(&o, "{\"error\":");
    vc_jout_str(&o, error);
    vc_jout_lit(&o, ",\"detail\":");
    /*
     * A detail cut short by its buffer may end inside a character: the cut
     * moves back to the character's start (and vc_jout_strn() replaces any
     * byte of it that is not UTF-8), so the body stays valid UTF-8 JSON.
     */
    detail = detail ? detail : "";
    vc_jout_strn(&o, detail, vc_utf8_cut(detail, strlen(detail)));
    if (reason) {
        vc_jout_lit(&o, ",\"reason\":");
        vc_jout_str(&o, reason);
    }
    vc_jout_raw(&o, "}", 1);
    return vc_jout_end(&o);
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
    if (vc_mode_name(v->mode))
        vc_jgen_kv_str(g, "mode", vc_mode_name(v->mode));
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
