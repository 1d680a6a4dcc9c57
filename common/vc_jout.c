#include "vc_jout.h"

#include <string.h>

#include "vc_num.h"
#include "vc_time.h"
#include "vc_utf8.h"

void vc_jout_init(vc_jout_t *o, char *buf, size_t cap)
{
    o->buf = o->p = buf;
    o->end = cap ? buf + cap - 1 : buf;
    o->full = cap == 0;
}

void vc_jout_strn(vc_jout_t *o, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF"; /* yajl's case */
    const char *end = s + len;

    vc_jout_raw(o, "\"", 1);
    while (s < end) {
        const char *run = s;
        unsigned char ch;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;

        /* The run of ASCII bytes a JSON string holds as they are. */
        while (s < end && (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x80 && *s != '"' &&
               *s != '\\')
            s++;
        vc_jout_raw(o, run, (size_t)(s - run));
        if (s == end)
            break;
        ch = (unsigned char)*s;
        if (ch >= 0x80) {
            /*
             * A whole UTF-8 character goes as it is; a byte that is not one
             * becomes U+FFFD, so that the text stays valid UTF-8 whatever
             * it quotes (a client's bytes in an error's detail).
             */
            n = vc_utf8_char(s, (size_t)(end - s));
            if (n > 0) {
                vc_jout_raw(o, s, n);
                s += n;
            } else {
                vc_jout_raw(o, VC_UTF8_REPLACEMENT, sizeof(VC_UTF8_REPLACEMENT) - 1);
                s++;
            }
            continue;
        }
        switch (ch) {
        case '"':
        case '\\':
            esc[1] = (char)ch;
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            n = 6;
            break;
        }
        vc_jout_raw(o, esc, n);
        s++;
    }
    vc_jout_raw(o, "\"", 1);
}

void vc_jout_str(vc_jout_t *o, const char *s)
{
    vc_jout_strn(o, s, strlen(s));
}

void vc_jout_int(vc_jout_t *o, int64_t v)
{
    char text[VC_I64_TEXT];
    vc_jout_raw(o, text, vc_i64_text(text, v));
}

int vc_jout_time(vc_jout_t *o, int64_t ms)
{
    char ts[40];
    size_t n = vc_time_format_ms(ms, ts, sizeof(ts));

    if (n == 0)
        return 0;
    vc_jout_raw(o, "\"", 1);
    vc_jout_raw(o, ts, n);
    vc_jout_raw(o, "\"", 1);
    return 1;
}

size_t vc_jout_end(vc_jout_t *o)
{
    if (o->full)
        return 0;
    *o->p = '\0';
    return (size_t)(o->p - o->buf);
}
