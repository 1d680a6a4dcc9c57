#include "vc_log.h"
#include "vc_error.h"
#include "vc_time.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

vc_log_level_t vc_log_min_level = VC_LOG_INFO;
static const char *log_daemon = "voucher";

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int vc_log_level_parse(const char *name, vc_log_level_t *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (vc_log_level_t)i;
            return 0;
        }
    }
    return VC_ERR_INVALID;
}

int vc_log_init(const char *daemon, const char *level)
{
    if (daemon)
        log_daemon = daemon;
    if (level)
        return vc_log_level_parse(level, &vc_log_min_level);
    return 0;
}

size_t vc_json_escape(char *buf, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (cap == 0)
        return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7];
        size_t elen = 0;

        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            elen = 2;
        } else if (c == '\n') {
            memcpy(esc, "\\n", 2);
            elen = 2;
        } else if (c < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        } else {
            esc[0] = (char)c;
            elen = 1;
        }
        if (n + elen >= cap)
            break;
        memcpy(buf + n, esc, elen);
        n += elen;
    }
    buf[n] = '\0';
    return n;
}

void vc_log_write(vc_log_level_t level, const vc_log_field_t *fields, size_t nfields,
                  const char *fmt, ...)
{
    char msg[2048], line[4096], ts[40];
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    vc_time_format_ms(vc_time_now_ms(), ts, sizeof(ts));
    n = (size_t)snprintf(line, sizeof(line), "{\"time\":\"%s\",\"level\":\"%s\",\"daemon\":\"%s\"",
                         ts, level_names[level], log_daemon);
    for (size_t i = 0; i < nfields && n < sizeof(line) - 8; i++) {
        if (!fields[i].key || !fields[i].value)
            continue;
        n += (size_t)snprintf(line + n, sizeof(line) - n, ",\"%s\":\"", fields[i].key);
        if (n >= sizeof(line) - 8)
            break;
        n += vc_json_escape(line + n, sizeof(line) - n - 4, fields[i].value);
        line[n++] = '"';
    }
    if (n < sizeof(line) - 16) {
        memcpy(line + n, ",\"message\":\"", 12);
        n += 12;
        n += vc_json_escape(line + n, sizeof(line) - n - 3, msg);
    }
    if (n > sizeof(line) - 3)
        n = sizeof(line) - 3;
    line[n++] = '"';
    line[n++] = '}';
    line[n++] = '\n';
    /* One write(2) per line keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
