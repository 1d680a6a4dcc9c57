#include "vc_voucher.h"

#include <string.h>

#include "vc_error.h"

const char *vc_mode_name(vc_mode_t mode)
{
    switch (mode) {
    case VC_MODE_FLASH:
        return "flash";
    case VC_MODE_DIRECT:
        return "direct";
    default:
        return NULL;
    }
}

vc_mode_t vc_mode_parse(const char *name)
{
    if (strcmp(name, "flash") == 0)
        return VC_MODE_FLASH;
    if (strcmp(name, "direct") == 0)
        return VC_MODE_DIRECT;
    return VC_MODE_UNSET;
}

int64_t vc_voucher_discount(const vc_voucher_t *v, int64_t order_amount)
{
    int64_t d;

    if (order_amount <= 0)
        return 0;
    if (v->discount_percent > 0) {
        /* floor(order_amount * percent / 100) without overflowing 64 bits. */
        d = (order_amount / 100) * v->discount_percent +
            (order_amount % 100) * v->discount_percent / 100;
        if (v->max_discount_amount > 0 && d > v->max_discount_amount)
            d = v->max_discount_amount;
    } else {
        d = v->discount_amount;
    }
    return d > order_amount ? order_amount : d;
}

int vc_voucher_check(const vc_voucher_t *v, int64_t now_ms, int64_t order_amount,
                     int64_t *discount)
{
    if (v->inactive)
        return VC_E_INACTIVE;
    if (now_ms < v->starts_at_ms)
        return VC_E_NOT_STARTED;
    if (now_ms >= v->ends_at_ms)
        return VC_E_EXPIRED;
    return vc_voucher_price(v, order_amount, discount);
}

int vc_voucher_price(const vc_voucher_t *v, int64_t order_amount, int64_t *discount)
{
    if (order_amount < v->min_order_amount)
        return VC_E_ORDER_TOO_SMALL;
    *discount = vc_voucher_discount(v, order_amount);
    return 0;
}

int64_t vc_remaining_bound(int64_t total_limit, int64_t uncounted, int64_t accounted)
{
    int64_t bound = total_limit - uncounted - accounted;
    return bound > 0 ? bound : 0;
}

int64_t vc_uses_without_rows(int64_t used_count, int64_t live_rows)
{
    return used_count > live_rows ? used_count - live_rows : 0;
}
