/*
 * Decimal text of integers, for the arguments of Redis commands on the hot
 * path and in the JSON written straight (vc_jout.h): snprintf's format parsing
 * showed in the profile of the success path
 * (tests/bench/results/2026-11-30-gateway-cpu.md). Pure.
 */
#ifndef VC_NUM_H
#define VC_NUM_H

#include <stddef.h>
#include <stdint.h>

/* Longest text of an int64_t, with its sign and the NUL. */
#define VC_I64_TEXT 21

/* Writes v in decimal into out, NUL-terminated, as "%lld" would; returns its length. */
static inline size_t vc_i64_text(char out[VC_I64_TEXT], int64_t v)
{
    char tmp[VC_I64_TEXT];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, len = 0;

    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[len++] = '-';
    while (n)
        out[len++] = tmp[--n];
    out[len] = '\0';
    return len;
}

/* The value of one hexadecimal digit (either case), or -1 for any other character. */
static inline int vc_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
