#include "vc_claim.h"
#include "vc_event.h"
#include "vc_model.h"

#include <string.h>

void vc_claim_key(const char *order_id, char key[VC_CLAIM_KEY_MAX])
{
    /*
     * Built on every reservation: copies, no format parsing (as gw_app_keys()). An
     * orderId is at most VC_ORDER_ID_MAX bytes: the key fits.
     */
    (void)vc_key_claim(key, VC_CLAIM_KEY_MAX, order_id);
}

/* Writes v as 16 hex digits. */
static void hex16(char *out, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = digits[v & 15];
}

void vc_claim_value(char out[VC_CLAIM_VALUE_MAX], const char *code, uint64_t process,
                    uint64_t seq)
{
    /* On every reservation that may take a use: no format parsing (see gw_app_keys). */
    size_t n = strnlen(code, VC_CODE_MAX);

    memcpy(out, code, n);
    out[n] = ':';
    hex16(out + n + 1, process);
    hex16(out + n + 17, seq);
    out[n + 33] = '\0';
}

int vc_claim_is_code(const char *value, size_t len, const char *code)
{
    size_t n = strlen(code);

    return len >= n && memcmp(value, code, n) == 0 && (len == n || value[n] == ':');
}

int vc_claim_code(const char *value, size_t len, char code[VC_CODE_MAX + 1])
{
    const char *colon = memchr(value, ':', len);
    size_t n = colon ? (size_t)(colon - value) : len;

    if (n == 0 || n > VC_CODE_MAX || !vc_code_valid(value, n))
        return -1;
    memcpy(code, value, n);
    code[n] = '\0';
    return 0;
}
