#include "vc_utf8.h"

#include <string.h>

/*
 * The length (1..4) of the character whose first bytes are u[0..have)
 * (have > 0), when those bytes begin a valid character, whole or not yet;
 * 0 when they cannot.
 */
static size_t char_length(const unsigned char *u, size_t have)
{
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
    size_t len;

    if (u[0] < 0x80)
        return 1;
    if (u[0] >= 0xC2 && u[0] <= 0xDF) {
        len = 2;
    } else if (u[0] >= 0xE0 && u[0] <= 0xEF) {
        len = 3;
        /* E0 is overlong below A0; ED A0..BF are the surrogates. */
        lo = u[0] == 0xE0 ? 0xA0 : 0x80;
        hi = u[0] == 0xED ? 0x9F : 0xBF;
    } else if (u[0] >= 0xF0 && u[0] <= 0xF4) {
        len = 4;
        /* F0 is overlong below 90; F4 90 and above is past U+10FFFF. */
        lo = u[0] == 0xF0 ? 0x90 : 0x80;
        hi = u[0] == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0; /* a continuation byte, C0 and C1 (overlong), F5..FF */
    }
    for (size_t i = 1; i < len && i < have; i++)
        if (u[i] < (i == 1 ? lo : 0x80) || u[i] > (i == 1 ? hi : 0xBF))
            return 0;
    return len;
}

size_t vc_utf8_char(const char *s, size_t n)
{
    size_t len = char_length((const unsigned char *)s, n);

    return len <= n ? len : 0;
}

int vc_utf8_valid(const char *s, size_t n)
{
    const char *end = s + n;

    while (s < end) {
        size_t len;

        if ((unsigned char)*s < 0x80) {
            s++;
            continue;
        }
        if (!(len = vc_utf8_char(s, (size_t)(end - s))))
            return 0;
        s += len;
    }
    return 1;
}

size_t vc_utf8_cut(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;

    /* A character is 4 bytes at most: when one is cut, its lead is among the last 3 bytes. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char *lead = u + n - back;

        if (*lead < 0x80)
            return n; /* ASCII ends a character: nothing after it was cut */
        if (*lead < 0xC0)
            continue; /* a continuation byte: its lead is further back */
        /* A valid start whose last bytes did not come is dropped; an invalid one is kept. */
        return char_length(lead, back) > back ? n - back : n;
    }
    return n;
}

int vc_utf8_quote_len(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);

    return (int)(n <= max ? n : vc_utf8_cut(s, max));
}

size_t vc_utf8_count(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}
