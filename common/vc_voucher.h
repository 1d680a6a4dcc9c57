/*
 * A voucher's rules and the pure decisions made from them: is it valid now,
 * is the order large enough, how much discount does it give. No I/O here.
 */
#ifndef VC_VOUCHER_H
#define VC_VOUCHER_H

#include <stdint.h>

#include "vc_event.h"

/*
 * Who decides a voucher's uses (proto/direct-mode.md), fixed at its creation:
 * flash mode (Redis, Kafka, the writer) or direct mode (one transaction in
 * PostgreSQL). VC_MODE_UNSET only in a creation that named none, which takes
 * the column's default; a voucher read from PostgreSQL always has one.
 */
typedef enum { VC_MODE_UNSET = 0, VC_MODE_FLASH, VC_MODE_DIRECT } vc_mode_t;

/* The mode's name as the API and the column spell it ("flash", "direct"), or NULL if unset. */
const char *vc_mode_name(vc_mode_t mode);

/*
 * The mode called name (NUL-terminated, borrowed): VC_MODE_FLASH,
 * VC_MODE_DIRECT, or VC_MODE_UNSET for any other text.
 */
vc_mode_t vc_mode_parse(const char *name);

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
    int inactive;       /* switched off (PATCH active=false): no new reservation */
    vc_mode_t mode;     /* fixed at creation; slice 1 stores it only (proto/direct-mode.md) */
} vc_voucher_t;

/*
 * The discount for an order of order_amount: the fixed amount, or the percent
 * rounded down and capped by max_discount_amount; never more than the order.
 */
int64_t vc_voucher_discount(const vc_voucher_t *v, int64_t order_amount);

/*
 * Checks the rules that need no shared state, in the order a buyer would want
 * to hear them: VC_E_INACTIVE, VC_E_NOT_STARTED, VC_E_EXPIRED, then vc_voucher_price().
 */
int vc_voucher_check(const vc_voucher_t *v, int64_t now_ms, int64_t order_amount,
                     int64_t *discount);

/*
 * The rules that follow the basket and not the clock: VC_E_ORDER_TOO_SMALL
 * when order_amount is below the minimum, else 0 with *discount set
 * (vc_voucher_discount). A reservation is judged by vc_voucher_check(); a
 * confirm with the final total by this alone, because a hold taken inside
 * the window keeps its promise until its heldUntil, also after endsAt
 * (proto/openapi.yaml, "Confirm against the final order"). Pure.
 */
int vc_voucher_price(const vc_voucher_t *v, int64_t order_amount, int64_t *discount);

/*
 * The remaining rule (proto/redis-keys.md, "The remaining rule"): every path
 * that sets or repairs voucher:{CODE}:remaining (the gateway's load, and the
 * reconciler's restore, retake and lower) offers at most
 *
 *     total_limit - uncounted - accounted, and never less than 0
 *
 * uses. uncounted is what vc_uses_without_rows() gives: uses PostgreSQL's
 * used_count counts with no row behind them (an imported campaign's past
 * uses). accounted is every order known to hold a use: live rows, the
 * reservations in flight, and the orders Redis holds as taken. At a load,
 * with no order anywhere but the rows, that is total_limit - max(used_count,
 * live rows). common/lua/remaining_rule.lua is the same line for the Lua
 * repair scripts, which count Redis's orders themselves. Pure.
 */
int64_t vc_remaining_bound(int64_t total_limit, int64_t uncounted, int64_t accounted);

/*
 * Uses used_count counts beyond its live rows (read in one snapshot), or 0
 * when the rows are as many or more (the rows then account for everything).
 * The difference stays constant while the writer applies events, which move
 * both together, so it may be added to orders counted later. Pure.
 */
int64_t vc_uses_without_rows(int64_t used_count, int64_t live_rows);

#endif
