/*
 * Structured logs: one JSON object per line on stderr, with the time, level,
 * daemon, message and any ids the caller attaches (code, orderId, partition).
 *
 * A log call checks the level before anything is formatted, so debug logging
 * on a hot path costs one comparison when it is off.
 */
#ifndef VC_LOG_H
#define VC_LOG_H

#include <stddef.h>

typedef enum {
    VC_LOG_DEBUG = 0,
    VC_LOG_INFO = 1,
    VC_LOG_WARN = 2,
    VC_LOG_ERROR = 3,
} vc_log_level_t;

/* One extra key/value pair on a log line; the value is written as a JSON string. */
typedef struct {
    const char *key;
    const char *value;
} vc_log_field_t;

extern vc_log_level_t vc_log_min_level;

/*
 * Sets the daemon name printed on every line (borrowed: must outlive logging)
 * and the minimum level from its name ("debug", "info", "warn", "error").
 * Returns 0, or VC_ERR_INVALID for an unknown level name.
 */
int vc_log_init(const char *daemon, const char *level);

/* Parses a level name; returns 0 and sets *out, or VC_ERR_INVALID. */
int vc_log_level_parse(const char *name, vc_log_level_t *out);

/* Room for vc_log_code()'s answer: '#', 16 hex digits, the terminating NUL. */
#define VC_LOG_CODE_MAX 18

/*
 * A code as a log line may show it. A voucher's code (one_time 0) is shown as
 * it is: many customers share it, and operators search the logs for it. A
 * code that may be a campaign's one-time code (one_time 1: a campaign's, or
 * one whose kind the caller does not know, such as a path code not looked up
 * yet) is a secret worth a discount, so the line shows '#' and 16 hex digits
 * of the process's keyed hash of it (vc_hash_str(): SipHash under a random key
 * per process): the lines of one process about one code can be matched, and
 * nobody who reads the logs can tell the code, nor test a guess against them
 * (issue 42, item 8). Returns code, or out (VC_LOG_CODE_MAX bytes, the
 * caller's); both borrowed.
 */
const char *vc_log_code(const char *code, int one_time, char out[VC_LOG_CODE_MAX]);

/* Writes one line. Use the macros, which check the level first. */
void vc_log_write(vc_log_level_t level, const vc_log_field_t *fields, size_t nfields,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define VC_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) >= vc_log_min_level)                                                           \
            vc_log_write((level), NULL, 0, __VA_ARGS__);                                           \
    } while (0)

/* fields must be an array (not a pointer): its length is taken with sizeof. */
#define VC_LOG_F(level, fields, ...)                                                               \
    do {                                                                                           \
        if ((level) >= vc_log_min_level)                                                           \
            vc_log_write((level), (fields), sizeof(fields) / sizeof((fields)[0]), __VA_ARGS__);    \
    } while (0)

#define vc_debug(...) VC_LOG(VC_LOG_DEBUG, __VA_ARGS__)
#define vc_info(...) VC_LOG(VC_LOG_INFO, __VA_ARGS__)
#define vc_warn(...) VC_LOG(VC_LOG_WARN, __VA_ARGS__)
#define vc_error(...) VC_LOG(VC_LOG_ERROR, __VA_ARGS__)

#endif
