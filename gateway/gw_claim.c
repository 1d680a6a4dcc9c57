#include "gw_claim.h"

#include <string.h>

/* Writes v as 16 hex digits. */
static void hex16(char *out, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = digits[v & 15];
}

void gw_claim_value(char out[GW_CLAIM_VALUE_MAX], const char *code, uint64_t process,
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

int gw_claim_is_code(const char *value, size_t len, const char *code)
{
    size_t n = strlen(code);

    return len >= n && memcmp(value, code, n) == 0 && (len == n || value[n] == ':');
}
