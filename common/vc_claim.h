/*
 * An orderId's claim in Redis, voucher-order:{orderId} (proto/redis-keys.md):
 * its key and value. The gateway writes and reads it (gw_reserve.c); the
 * reconciler reads the code of a campaign's hold that nothing else names
 * (rc_campaign.c). Pure.
 */
#ifndef VC_CLAIM_H
#define VC_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "vc_voucher.h"

/*
 * The claim holds "CODE:TOKEN": the voucher's (or campaign's) code the orderId
 * belongs to, and a token unique to the request that wrote it, so that only
 * that request may delete it. Claims written before tokens hold the bare
 * "CODE".
 */
#define VC_CLAIM_VALUE_MAX (VC_CODE_MAX + 40)
#define VC_CLAIM_KEY_MAX (VC_ORDER_ID_MAX + 32)

/*
 * Fills key with order_id's claim key (vc_model.h's vc_key_claim(): voucher-order:{order_id}),
 * in its own slot on Redis Cluster.
 */
void vc_claim_key(const char *order_id, char key[VC_CLAIM_KEY_MAX]);

/* Writes "code:TOKEN" into out, TOKEN being process and seq as 32 hex digits. */
void vc_claim_value(char out[VC_CLAIM_VALUE_MAX], const char *code, uint64_t process,
                    uint64_t seq);

/* Whether a claim's value (len bytes) ties the orderId to code. */
int vc_claim_is_code(const char *value, size_t len, const char *code);

/*
 * The code a claim's value (len bytes) names, into code: 0, or -1 when the
 * value names none (empty, too long, or not a code's characters).
 */
int vc_claim_code(const char *value, size_t len, char code[VC_CODE_MAX + 1]);

#endif
