/* Wall-clock time in milliseconds since the epoch, and RFC 3339 text. */
#ifndef VC_TIME_H
#define VC_TIME_H

#include <stddef.h>
#include <stdint.h>

/* Milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t vc_time_now_ms(void);

/* Milliseconds from a monotonic clock, for deadlines and durations. */
int64_t vc_time_mono_ms(void);

/*
 * Formats ms as RFC 3339 in UTC with milliseconds: "2026-11-29T17:56:43.123Z".
 * buf needs at least 25 bytes. Returns the length written, or 0 if it did not fit.
 */
size_t vc_time_format_ms(int64_t ms, char *buf, size_t cap);

/*
 * Parses an RFC 3339 timestamp ("2026-11-29T17:56:43Z", optional fraction,
 * "Z" or "+hh:mm" offset) into ms since the epoch.
 * Returns 0, or VC_ERR_INVALID when the text is not such a timestamp.
 */
int vc_time_parse(const char *s, size_t len, int64_t *out_ms);

#endif
