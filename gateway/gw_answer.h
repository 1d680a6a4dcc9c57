/*
 * Answers: which HTTP status and error name a result code gets, and the JSON
 * bodies the routes answer with. Pure: tests/unit/test_gateway.c checks it
 * without a server.
 */
#ifndef GW_ANSWER_H
#define GW_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "vc_json.h"
#include "vc_voucher.h"

/*
 * Gateway-only domain outcomes (positive, like vc_error.h's VC_E_*), for the
 * admin routes: gw_status_for() maps them.
 */
#define GW_E_EXISTS 100       /* 409 EXISTS: a voucher with this code exists */
#define GW_E_UNAUTHORIZED 101 /* 401 UNAUTHORIZED: missing or wrong bearer token */
#define GW_E_LIMIT 102        /* 409 LIMIT_CONFLICT: a limit cannot go that low now */
#define GW_E_RULES 103        /* 409 RULES_CONFLICT: a change does not fit the voucher as it is */
/* 409 EXISTS, reason CAMPAIGN_CODE: the code is a campaign's one-time code (POST /vouchers). */
#define GW_E_CAMPAIGN_CODE 104
/* 409 MODE_LOCKED: PATCH names a mode, which is fixed at creation (proto/direct-mode.md). */
#define GW_E_MODE_LOCKED 105
/* 409 ALREADY_CONFIRMED: a confirm's total differs from the one the order was confirmed at. */
#define GW_E_CONFIRMED_OTHER 110

/*
 * The HTTP status and error name for a result code of vc_error.h: the name
 * is what goes in {"error": ...}, and *reason is set for NOT_ELIGIBLE answers
 * ("EXPIRED", ...) and GW_E_CAMPAIGN_CODE (EXISTS, "CAMPAIGN_CODE"), NULL
 * otherwise. Negative codes are 503 UNAVAILABLE, except VC_ERR_INVALID (400
 * BAD_REQUEST) and VC_ERR_TOO_LARGE (413). GW_E_EXISTS is 409 EXISTS and
 * GW_E_UNAUTHORIZED 401 UNAUTHORIZED. Every name and reason is in
 * proto/openapi.yaml's enums (tests/lint/check_contracts.py checks it).
 */
int gw_status_for(int rc, const char **error, const char **reason);

/*
 * Writes {"error":error,"detail":detail[,"reason":reason]} into buf, valid
 * UTF-8 JSON whatever detail holds: a character cut at detail's end is
 * dropped, a byte that is not UTF-8 becomes U+FFFD. Returns the length, or 0
 * if it does not fit. reason may be NULL.
 */
size_t gw_body_error(char *buf, size_t cap, const char *error, const char *detail,
                     const char *reason);

/*
 * Writes the 201 body of a reservation:
 * {"orderId","code","discountAmount","heldUntil"[,"replayed":true]}.
 * Returns the length, or 0 if it does not fit.
 */
size_t gw_body_reservation(char *buf, size_t cap, const char *order_id, const char *code,
                           int64_t discount, int64_t held_until_ms, int replayed);

/*
 * Writes the body of a confirm or cancel answer:
 * {"orderId","code","status"[,"replayed":true]}. Returns the length or 0.
 */
size_t gw_body_status(char *buf, size_t cap, const char *order_id, const char *code,
                      const char *status, int replayed);

/*
 * An order's figures in an answer to a confirm given a total:
 * {"orderAmount","discountAmount"}, orderAmount left out when has_amount is
 * 0 (an order the reconciler restored or repaired to confirmed: Redis does
 * not know the total it was confirmed at).
 */
typedef struct {
    int has_amount;
    int64_t order_amount;
    int64_t discount;
} gw_figures_t;

/*
 * Writes the 200 body of a confirm given a total: {"orderId","code",
 * "status":"CONFIRMED","orderAmount","discountAmount"[,"replayed":true]}
 * with the figures the order is confirmed at. Returns the length or 0.
 */
size_t gw_body_confirmed(char *buf, size_t cap, const char *order_id, const char *code,
                         const gw_figures_t *fig, int replayed);

/*
 * Writes a refused confirm's body, gw_body_error()'s fields plus the figures
 * under key: "quote" (422: the reservation's, which still stand) or
 * "confirmed" (409 ALREADY_CONFIRMED). Returns the length or 0.
 */
size_t gw_body_confirm_refused(char *buf, size_t cap, const char *error, const char *detail,
                               const char *reason, const char *key, const gw_figures_t *fig);

/*
 * Writes a voucher's rules and active as one JSON object into g, with
 * usedCount when with_used is set.
 */
int gw_jgen_voucher(vc_jgen_t *g, const vc_voucher_t *v, int with_used, int64_t used_count);

/*
 * Writes a voucher as the admin routes show it: its rules, then usedCount,
 * remaining (null when has_remaining is 0) and holds when with_counters is
 * set. Returns the length, or 0 if it does not fit.
 */
size_t gw_body_voucher(char *buf, size_t cap, const vc_voucher_t *v, int with_counters,
                       int64_t used_count, int has_remaining, int64_t remaining, int64_t holds);

/*
 * Writes a discount's fields into g, as the admin routes show vouchers and
 * campaigns alike: discountPercent (and maxDiscountAmount when max_amount >
 * 0) when percent > 0, else discountAmount.
 */
void gw_jgen_discount(vc_jgen_t *g, int percent, int64_t max_amount, int64_t amount);

#endif
