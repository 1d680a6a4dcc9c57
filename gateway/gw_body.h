/*
 * Request bodies read into structs: what each route's JSON body must contain,
 * checked field by field, with err naming the field and what is wrong (a 400
 * answer's detail). Pure: tests/unit/test_gateway.c checks it without a server.
 */
#ifndef GW_BODY_H
#define GW_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"
#include "vc_voucher.h"

#define GW_MAX_BODY (16 * 1024) /* request bodies above this get 413 */

/* The body of POST /vouchers/{code}/reservations. */
typedef struct {
    int64_t customer_id; /* > 0 */
    char order_id[VC_ORDER_ID_MAX + 1];
    int64_t order_amount; /* >= 0, minor units */
} gw_reserve_req_t;

/*
 * Parses and validates a reservation body (len bytes). Returns 0, or
 * VC_ERR_INVALID with err naming the field and what is wrong, or
 * VC_ERR_NOMEM.
 */
int gw_reserve_req_parse(const char *body, size_t len, gw_reserve_req_t *out, char *err,
                         size_t errlen);

/*
 * The two ways gw_reserve_req_parse() reads a body, apart for the tests.
 * gw_reserve_req_fast() takes the body as clients send it, in one pass with
 * no allocation: it returns 0 with *out filled, or 1 (out zeroed) for
 * anything else, valid or not, which is then gw_reserve_req_general()'s:
 * the general parser (vc_jdoc_parse()), whose answers word every refusal.
 * What the fast one accepts, the general one accepts with the same values.
 */
int gw_reserve_req_fast(const char *body, size_t len, gw_reserve_req_t *out);
int gw_reserve_req_general(const char *body, size_t len, gw_reserve_req_t *out, char *err,
                           size_t errlen);

/* The body of POST /vouchers/{code}/quote. */
typedef struct {
    int64_t customer_id;  /* > 0 */
    int64_t order_amount; /* >= 0, minor units */
} gw_quote_req_t;

/* Parses and validates a quote body; the same contract as gw_reserve_req_parse(). */
int gw_quote_req_parse(const char *body, size_t len, gw_quote_req_t *out, char *err, size_t errlen);

/*
 * The body of POST /vouchers/{code}/reservations/{orderId}/confirm: optional.
 * No body, an empty one (only whitespace) or {} is a confirm without a total,
 * answered as before the total existed.
 */
typedef struct {
    int has_total;        /* orderAmount was given */
    int64_t order_amount; /* >= 0, minor units: the order's final total */
} gw_confirm_req_t;

/* Parses and validates a confirm body; the same contract as gw_reserve_req_parse(). */
int gw_confirm_req_parse(const char *body, size_t len, gw_confirm_req_t *out, char *err,
                         size_t errlen);

/* The body of PATCH /vouchers/{code}: each field with whether it was given. */
typedef struct {
    int has_total, has_per_user, has_starts, has_ends, has_amount, has_percent, has_max, has_min,
        has_active, has_mode;
    int64_t total_limit, per_user_limit, starts_at_ms, ends_at_ms, discount_amount,
        discount_percent, max_discount_amount, min_order_amount;
    int active;
    vc_mode_t mode; /* parsed to answer a bad value 400; any mode is then refused (409) */
} gw_voucher_patch_t;

/*
 * Parses the body of PATCH /vouchers/{code}: at least one of totalLimit,
 * perUserLimit, startsAt, endsAt, discountAmount, discountPercent,
 * maxDiscountAmount, minOrderAmount, active and mode, each with the bounds of
 * vc_voucher_parse(); maxDiscountAmount never with discountAmount.
 * Unknown fields are rejected. Returns 0, or VC_ERR_INVALID with err set.
 */
int gw_voucher_patch_parse(const char *body, size_t len, gw_voucher_patch_t *out, char *err,
                           size_t errlen);

/*
 * The voucher cur becomes with p applied, into out (pure): a discountAmount
 * makes the discount fixed, a discountPercent makes it a percent (its cap
 * kept unless given); the window must stay non-empty. perUserLimit may only
 * grow: the writer judges every event with the limit it reads when it
 * applies it, so a lower limit would refuse reservations the gateway already
 * acknowledged under the old one. A mode, even the voucher's own, is
 * GW_E_MODE_LOCKED (fixed at creation). Returns 0, GW_E_RULES (a window that
 * would end before it starts, a cap on a fixed discount), GW_E_LIMIT or
 * GW_E_MODE_LOCKED (all 409: the body is valid, the voucher as it is now
 * refuses it), with err set.
 */
int gw_voucher_patch_apply(const vc_voucher_t *cur, const gw_voucher_patch_t *p, vc_voucher_t *out,
                           char *err, size_t errlen);

#endif
