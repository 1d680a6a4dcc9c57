/*
 * POST /vouchers/{code}/quote (gw_quote_start(), gw_app.h): flash mode's
 * quote in gw_quote.c (the cached rules and two Redis reads), a direct
 * voucher's in gw_quote_direct.c (the cached rules and one PostgreSQL read).
 */
#ifndef GW_QUOTE_H
#define GW_QUOTE_H

#include <stdint.h>

#include "gw_app.h"
#include "vc_voucher.h"

/*
 * A direct voucher's quote for customer_id, whose rules v (borrowed for the
 * call) passed and priced the order at discount: dr_quote says how many uses
 * are left, and the same statement counts the customer's. Answers req
 * exactly once, as flash mode would (the customer's limit, then the stock).
 */
void gw_quote_direct(gw_app_t *app, gw_request_t *req, const char *code, int64_t customer_id,
                     int64_t discount, const vc_voucher_t *v);

#endif
