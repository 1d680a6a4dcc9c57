/*
 * Creating a voucher, the one way both creators take: the gateway's
 * POST /vouchers and `voucher-admin voucher create` parse the same body with
 * the same checks and insert the row, its campaign-code check and its audit
 * row in one transaction (proto/openapi.yaml, createVoucher). Blocking libpq
 * calls: the gateway runs vc_voucher_create() on its threadpool.
 */
#ifndef VC_VOUCHER_CREATE_H
#define VC_VOUCHER_CREATE_H

#include <stddef.h>
#include <stdint.h>

#include "vc_audit.h"
#include "vc_json.h"
#include "vc_voucher.h"

struct pg_conn;

/*
 * Parses and validates the body of POST /vouchers into out (used_count 0):
 * code [A-Z0-9_-]{1,32}; exactly one of discountAmount (>= 1) and
 * discountPercent (1..100); maxDiscountAmount (>= 1, with discountPercent
 * only); minOrderAmount >= 0; totalLimit and perUserLimit (default 1) in
 * 1..2^31-1; startsAt before endsAt, both RFC 3339; mode "direct" or
 * "flash", or absent (out->mode VC_MODE_UNSET). Unknown fields are
 * rejected. Returns 0, or VC_ERR_INVALID with err naming the field, or
 * VC_ERR_NOMEM.
 */
int vc_voucher_parse(const char *body, size_t len, vc_voucher_t *out, char *err, size_t errlen);

/* The field "mode" of doc, which must be "direct" or "flash", into *out; err names it. */
int vc_voucher_mode_field(const vc_jdoc_t *doc, vc_mode_t *out, char *err, size_t errlen);

/*
 * The rules of v as the text parameters $1..$9 of an insert or update of its
 * row: code, discount_amount, discount_percent (0: none), max_discount_amount
 * (0: none), min_order_amount, total_limit, per_user_limit, starts_at and
 * ends_at in ms. params point into buf and v.
 */
void vc_voucher_rule_params(const vc_voucher_t *v, char buf[8][24], const char *params[9]);

/*
 * Creates v in one transaction on conn (none open): under the lock a
 * campaign's generation takes for its own check, refuses a code that is a
 * campaign's one-time code (the gateway looks a code up as a voucher first,
 * so the voucher would hide it: proto/campaigns.md); inserts the row with its
 * mode (the column's default when v->mode is VC_MODE_UNSET: v->mode is then
 * set to the one stored); records who created it (voucher.create, the row as
 * written) in the admin audit. loaded sets redis_loaded_at in the same
 * statement, for a creator that sets Redis's counter next (the gateway); else
 * it stays NULL and the first reservation of a flash voucher loads it. v and
 * who are borrowed. Returns 0; VC_E_CODE_TAKEN when a voucher has the code,
 * or a campaign does (*campaign_id is then its id, else 0); or a negative
 * VC_ERR_* with err set. Nothing is written unless it returns 0.
 */
int vc_voucher_create(struct pg_conn *conn, vc_voucher_t *v, const vc_audit_who_t *who,
                      int loaded, int64_t *campaign_id, char *err, size_t errlen);

#endif
