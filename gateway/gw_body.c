#include "gw_body.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_answer.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_voucher_create.h"

int gw_reserve_req_general(const char *body, size_t len, gw_reserve_req_t *out, char *err,
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

/*
 * ---- POST /vouchers/{code}/reservations, the body as it should be ----
 *
 * Every reservation comes with this body, so it is read in one pass
 * (vc_json_read_flat(): no tree, no allocation). The pass accepts only what
 * the general parser accepts too, with the same values: one object of
 * exactly the three fields, once each, integers as plain digits, an orderId
 * that is valid as it is. Anything else (an error, or a valid form it leaves
 * alone: 5.0, 1e3) stops it, and the general parser reads the body again and
 * words the answer, so every refusal is the one it always was.
 */
int gw_reserve_req_fast(const char *body, size_t len, gw_reserve_req_t *out)
{
    static const vc_jflat_field_t fields[] = {
        VC_JFLAT_FIELD_INT("customerId", gw_reserve_req_t, customer_id),
        VC_JFLAT_FIELD_STR("orderId", gw_reserve_req_t, order_id, vc_order_id_valid),
        VC_JFLAT_FIELD_INT("orderAmount", gw_reserve_req_t, order_amount),
    };

    memset(out, 0, sizeof(*out));
    if (vc_json_read_flat(body, len, fields, sizeof(fields) / sizeof(fields[0]), out) == 0 &&
        out->customer_id > 0 && out->order_amount >= 0)
        return 0;
    memset(out, 0, sizeof(*out));
    return 1;
}

int gw_reserve_req_parse(const char *body, size_t len, gw_reserve_req_t *out, char *err,
                         size_t errlen)
{
    if (gw_reserve_req_fast(body, len, out) == 0)
        return 0;
    return gw_reserve_req_general(body, len, out, err, errlen);
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
        (rc = vc_jdoc_whole_in(&doc, "customerId", 1, INT64_MAX, &out->customer_id, err, errlen)) ==
            0)
        rc = vc_jdoc_whole_in(&doc, "orderAmount", 0, INT64_MAX, &out->order_amount, err, errlen);
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
    for (i = 0;
         i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'); i++)
        ;
    if (i == len)
        return 0; /* no body: the confirm of old */
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) == 0 &&
        vc_jdoc_has(&doc, "orderAmount") &&
        (rc = vc_jdoc_whole_in(&doc, "orderAmount", 0, INT64_MAX, &out->order_amount, err,
                               errlen)) == 0)
        out->has_total = 1;
    vc_jdoc_free(&doc);
    if (rc != 0)
        memset(out, 0, sizeof(*out)); /* a refused body gives no total */
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
                                          "mode",
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
        (rc = vc_jdoc_whole_in(&doc, key, lo, hi, &out->field, err, errlen)) != 0)                 \
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
    if ((out->has_mode = vc_jdoc_has(&doc, "mode")) &&
        (rc = vc_voucher_mode_field(&doc, &out->mode, err, errlen)) != 0)
        goto out;
    if (out->has_amount && (out->has_percent || out->has_max)) {
        snprintf(err, errlen,
                 "field \"discountAmount\" goes with neither \"discountPercent\" nor "
                 "\"maxDiscountAmount\"");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if (!(out->has_total | out->has_per_user | out->has_starts | out->has_ends | out->has_amount |
          out->has_percent | out->has_max | out->has_min | out->has_active | out->has_mode)) {
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
    /*
     * A switch would hand the voucher's state between two deciders while
     * requests run; until that hand-over is modelled (proto/direct-mode.md)
     * it is refused, also to the mode it has: the field is not changeable.
     */
    if (p->has_mode) {
        snprintf(err, errlen, "a voucher's mode is fixed at creation: create a new voucher");
        return GW_E_MODE_LOCKED;
    }
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
