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
