#include "vc_log.h"
#include "vc_error.h"
#include "vc_hash.h"
#include "vc_json.h"
#include "vc_time.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
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

/*
 * Field values are cut at this many bytes (at a character boundary): a log
 * line names things, it does not carry payloads.
 */
#define LOG_VALUE_MAX 1024

/* The length of s cut to at most max bytes, not inside a UTF-8 sequence. */
static size_t cut_len(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* One write(2) per line keeps lines from different threads whole. */
static int write_line(void *arg, const char *doc, size_t len)
{
    struct iovec iov[2] = {{(void *)doc, len}, {"\n", 1}};
    ssize_t w = writev(STDERR_FILENO, iov, 2);

    (void)arg;
    (void)w;
    return 0;
}

void vc_log_write(vc_log_level_t level, const vc_log_field_t *fields, size_t nfields,
                  const char *fmt, ...)
{
    char msg[2048], ts[40];
    vc_jgen_t g;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    vc_time_format_ms(vc_time_now_ms(), ts, sizeof(ts));

    /* yajl escapes; a line it cannot build (no memory) is lost, as a full disk would lose it. */
    if (vc_jgen_init(&g) != 0)
        return;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "time", ts);
    vc_jgen_kv_str(&g, "level", level_names[level]);
    vc_jgen_kv_str(&g, "daemon", log_daemon);
    for (size_t i = 0; i < nfields; i++) {
        if (!fields[i].key || !fields[i].value)
            continue;
        vc_jgen_key(&g, fields[i].key);
        vc_jgen_strn(&g, fields[i].value, cut_len(fields[i].value, LOG_VALUE_MAX));
    }
    vc_jgen_key(&g, "message");
    /* vsnprintf may have cut a character in two at the end. */
    vc_jgen_strn(&g, msg, cut_len(msg, sizeof(msg) - 2));
    vc_jgen_map_close(&g);
    vc_jgen_emit(&g, write_line, NULL);
}

const char *vc_log_code(const char *code, int one_time, char out[VC_LOG_CODE_MAX])
{
    if (!one_time || !code)
        return code;
    snprintf(out, VC_LOG_CODE_MAX, "#%016llx", (unsigned long long)vc_hash_str(code));
    return out;
}
