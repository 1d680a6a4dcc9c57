/*
 * A voucher's rules and the pure decisions made from them: is it valid now,
 * is the order large enough, how much discount does it give. No I/O here.
 */
#ifndef VC_VOUCHER_H
#define VC_VOUCHER_H

#include <stdint.h>

#include "vc_event.h"

typedef struct {
    char code[VC_CODE_MAX + 1];
    int64_t discount_amount;     /* fixed discount in minor units; 0 when percent is used */
    int discount_percent;        /* 1..100, or 0 for a fixed discount */
    int64_t max_discount_amount; /* cap on a percent discount; 0 means no cap */
    int64_t min_order_amount;
    int64_t total_limit;
    int64_t used_count; /* PostgreSQL's count when the rules were read */
    int64_t per_customer_limit;
    int64_t starts_at_ms;
    int64_t ends_at_ms; /* exclusive */
} vc_voucher_t;

/*
 * The discount for an order of order_amount: the fixed amount, or the percent
 * rounded down and capped by max_discount_amount; never more than the order.
 */
int64_t vc_voucher_discount(const vc_voucher_t *v, int64_t order_amount);

/*
 * Checks the rules that need no shared state, in the order a buyer would want
 * to hear them: VC_E_NOT_STARTED, VC_E_EXPIRED, VC_E_ORDER_TOO_SMALL, or 0
 * with *discount set.
 */
int vc_voucher_check(const vc_voucher_t *v, int64_t now_ms, int64_t order_amount,
                     int64_t *discount);

#endif
