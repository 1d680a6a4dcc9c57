/*
 * JSON text written straight into a caller's buffer, for the answers and
 * events of every reservation: no yajl generator (an allocation each) and no
 * printf, both of which showed in the profile of the success path
 * (tests/bench/results/2026-11-30-gateway-cpu.md). The text is the
 * generator's to the byte: strings escaped as yajl_gen_string() escapes them
 * with its default options (no solidus), integers as "%lld", times as
 * vc_time_format_ms(); tests/unit/test_common.c compares the two.
 *
 * A writer that runs out of room remembers it (full) and writes nothing
 * more: the caller checks once, at the end (vc_jout_end).
 */
#ifndef VC_JOUT_H
#define VC_JOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *buf;
    char *p, *end; /* end: the last byte of buf, kept for the NUL */
    int full;
} vc_jout_t;

/* Starts writing into buf (cap bytes, cap > 0 for anything to fit). */
void vc_jout_init(vc_jout_t *o, char *buf, size_t cap);

/*
 * n bytes as they are (JSON punctuation, keys known to need no escape).
 * Inline, as vc_jout_lit(): most writes are a few bytes of a literal, whose
 * length the compiler then counts.
 */
static inline void vc_jout_raw(vc_jout_t *o, const char *s, size_t n)
{
    if (o->full || n > (size_t)(o->end - o->p)) {
        o->full = 1;
        return;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

static inline void vc_jout_lit(vc_jout_t *o, const char *s)
{
    vc_jout_raw(o, s, strlen(s));
}

/*
 * s as a JSON string, quoted and escaped, always valid UTF-8: a byte of s
 * that does not belong to a valid UTF-8 character is written as U+FFFD (the
 * text of valid input is yajl's, byte for byte).
 */
void vc_jout_str(vc_jout_t *o, const char *s);

/* The same for the len bytes at s, which may hold a NUL (written as \u0000). */
void vc_jout_strn(vc_jout_t *o, const char *s, size_t len);

/* v in decimal. */
void vc_jout_int(vc_jout_t *o, int64_t v);

/* ms as a quoted RFC 3339 time (vc_time_format_ms); 0 when it cannot be written, else 1. */
int vc_jout_time(vc_jout_t *o, int64_t ms);

/*
 * Ends the text with a NUL (not counted). Returns its length, or 0 when it
 * did not fit.
 */
size_t vc_jout_end(vc_jout_t *o);

#endif
