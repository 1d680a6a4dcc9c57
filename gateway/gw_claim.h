/*
 * The value of an orderId's claim in Redis, voucher-order:{orderId}
 * (proto/redis-keys.md): written and read by gw_reserve.c. Pure.
 */
#ifndef GW_CLAIM_H
#define GW_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "vc_voucher.h"

/*
 * An orderId's claim, voucher-order:{orderId} (proto/redis-keys.md), holds
 * "CODE:TOKEN": the voucher code the orderId belongs to, and a token unique to
 * the request that wrote it, so that only that request may delete it. Claims
 * written before tokens hold the bare "CODE".
 */
#define GW_CLAIM_VALUE_MAX (VC_CODE_MAX + 40)

/* Writes "code:TOKEN" into out, TOKEN being process and seq as 32 hex digits. */
void gw_claim_value(char out[GW_CLAIM_VALUE_MAX], const char *code, uint64_t process,
                    uint64_t seq);

/* Whether a claim's value (len bytes) ties the orderId to code. */
int gw_claim_is_code(const char *value, size_t len, const char *code);

#endif
