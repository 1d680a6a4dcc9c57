/*
 * libFuzzer harness of the Redis value parsers of the gateway
 * (gateway/gw_router.c): an order's value "customerId:discount:heldUntilMs:state"
 * and a claim's "CODE:TOKEN", as Redis (or whoever wrote to it) hands them back.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_router.h"
#include "vc_claim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    gw_order_value_t v;
    char code[VC_CODE_MAX + 1], claim[VC_CLAIM_VALUE_MAX];
    size_t n = 0;

    if (gw_order_value_parse((const char *)data, size, &v) == 0 &&
        (v.state == '\0' || !strchr("HCXER", v.state))) {
        fprintf(stderr, "fuzz_order_value: state '%c' accepted\n", v.state);
        abort();
    }
    /* A valid code made of the first bytes; the claim written for it names it. */
    for (; n < size && n < VC_CODE_MAX; n++)
        code[n] = alphabet[data[n] % (sizeof(alphabet) - 1)];
    code[n] = '\0';
    (void)vc_claim_is_code((const char *)data, size, code);
    if (n > 0) {
        vc_claim_value(claim, code, size, n);
        if (!vc_claim_is_code(claim, strlen(claim), code)) {
            fprintf(stderr, "fuzz_order_value: the claim %s does not name %s\n", claim, code);
            abort();
        }
    }
    return 0;
}
