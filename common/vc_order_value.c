#include "vc_order_value.h"
#include "vc_error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Parses a decimal integer of s[0..len): '-' and digits only, in range.
 * strtoll alone would take leading spaces and a '+': a value the scripts
 * never write is drift to report, not to read as if it were well formed.
 */
static int parse_i64(const char *s, size_t len, int64_t *out)
{
    char buf[24], *end;
    long long v;

    if (len == 0 || len >= sizeof(buf) || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (*end || end == buf || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

int vc_order_value_parse(const char *s, size_t len, vc_order_value_t *out)
{
    const char *field[4];
    size_t flen[4], i = 0;
    const char *p = s, *end = s + len;

    while (i < 4) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        field[i] = p;
        flen[i] = colon ? (size_t)(colon - p) : (size_t)(end - p);
        i++;
        if (!colon)
            break;
        p = colon + 1;
    }
    if (i != 4 || field[3] + flen[3] != end || flen[3] != 1)
        return VC_ERR_PROTOCOL;
    if (parse_i64(field[0], flen[0], &out->customer_id) != 0 ||
        parse_i64(field[1], flen[1], &out->discount) != 0 ||
        parse_i64(field[2], flen[2], &out->held_until_ms) != 0)
        return VC_ERR_PROTOCOL;
    out->state = field[3][0];
    if (!vc_state_known(out->state))
        return VC_ERR_PROTOCOL;
    return 0;
}
