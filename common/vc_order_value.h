/*
 * The value the Redis scripts store for one order in voucher:{CODE}:orders,
 * "customerId:discount:heldUntilMs:state" (proto/redis-keys.md). One strict
 * parser, used by the gateway and the reconciler alike; the scripts' twin,
 * common/lua/order_value.lua, accepts the same values. Pure.
 */
#ifndef VC_ORDER_VALUE_H
#define VC_ORDER_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "vc_model.h"

typedef struct {
    int64_t customer_id;
    int64_t discount;
    int64_t held_until_ms;
    char state; /* one of the VC_STATE_ letters (vc_model.h) */
} vc_order_value_t;

/*
 * Parses s (len bytes, need not be NUL-terminated): three decimal integers,
 * each an optional '-' and digits only (no '+', no spaces), and one state
 * letter, separated by ':'. Returns 0 with *out filled, or VC_ERR_PROTOCOL
 * (out unspecified) when s is not such a value.
 */
int vc_order_value_parse(const char *s, size_t len, vc_order_value_t *out);

#endif
