#include "vc_time.h"
#include "vc_error.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t vc_time_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t vc_time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* n as exactly width digits at p (0 <= n < 10^width). */
static void put_digits(char *p, int n, int width)
{
    for (int i = width - 1; i >= 0; i--, n /= 10)
        p[i] = (char)('0' + n % 10);
}

/*
 * The text of the last two seconds this thread formatted
 * ("YYYY-MM-DDTHH:MM:SS"). A busy gateway formats the same seconds again and
 * again: now and now plus the hold for every reservation (its event's time,
 * its heldUntil). gmtime_r() was 1,250 of a reservation's 45,800
 * instructions, with glibc's time-zone lock taken on each call.
 */
static _Thread_local struct {
    struct {
        time_t secs;
        int valid;
        char text[20];
    } kept[2];
    int next; /* the one to replace */
} seconds;

size_t vc_time_format_ms(int64_t ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    struct tm tm;
    int n, year;

    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    for (int i = 0; i < 2; i++)
        if (seconds.kept[i].valid && seconds.kept[i].secs == secs) {
            if (cap < 25)
                return 0;
            memcpy(buf, seconds.kept[i].text, 19);
            memcpy(buf + 19, ".000Z", 6);
            put_digits(buf + 20, frac, 3);
            return 24;
        }
    if (!gmtime_r(&secs, &tm))
        return 0;
    year = tm.tm_year + 1900;
    if (year >= 0 && year <= 9999) {
        /*
         * Every event and every 201 carries a time: digits written straight,
         * without printf's format parsing (it showed in the success path's
         * profile). The text is the format's below, to the byte.
         */
        if (cap < 25)
            return 0;
        memcpy(buf, "0000-00-00T00:00:00.000Z", 25);
        put_digits(buf, year, 4);
        put_digits(buf + 5, tm.tm_mon + 1, 2);
        put_digits(buf + 8, tm.tm_mday, 2);
        put_digits(buf + 11, tm.tm_hour, 2);
        put_digits(buf + 14, tm.tm_min, 2);
        put_digits(buf + 17, tm.tm_sec, 2);
        put_digits(buf + 20, frac, 3);
        memcpy(seconds.kept[seconds.next].text, buf, 19);
        seconds.kept[seconds.next].text[19] = '\0';
        seconds.kept[seconds.next].secs = secs;
        seconds.kept[seconds.next].valid = 1;
        seconds.next ^= 1;
        return 24;
    }
    /* Four digits no longer hold the year: printf widens it. */
    n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

/* Reads exactly n digits at *p into *out, advancing *p. */
static int read_digits(const char **p, const char *end, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (*p >= end || !isdigit((unsigned char)**p))
            return -1;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return 0;
}

static int expect(const char **p, const char *end, const char *chars)
{
    if (*p >= end || !strchr(chars, **p))
        return -1;
    (*p)++;
    return 0;
}

int vc_time_parse(const char *s, size_t len, int64_t *out_ms)
{
    const char *p = s, *end = s + len;
    int Y, M, D, h, m, sec, ms = 0, off = 0;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    if (read_digits(&p, end, 4, &Y) || expect(&p, end, "-") || read_digits(&p, end, 2, &M) ||
        expect(&p, end, "-") || read_digits(&p, end, 2, &D) || expect(&p, end, "Tt ") ||
        read_digits(&p, end, 2, &h) || expect(&p, end, ":") || read_digits(&p, end, 2, &m) ||
        expect(&p, end, ":") || read_digits(&p, end, 2, &sec))
        return VC_ERR_INVALID;
    if (p < end && *p == '.') {
        int digits = 0;
        p++;
        while (p < end && isdigit((unsigned char)*p)) {
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (digits == 0)
            return VC_ERR_INVALID;
        for (; digits < 3; digits++)
            ms *= 10;
    }
    if (p < end && (*p == 'Z' || *p == 'z')) {
        p++;
    } else if (p < end && (*p == '+' || *p == '-')) {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (read_digits(&p, end, 2, &oh) || expect(&p, end, ":") || read_digits(&p, end, 2, &om) ||
            oh > 23 || om > 59)
            return VC_ERR_INVALID;
        off = sign * (oh * 60 + om);
    } else {
        return VC_ERR_INVALID;
    }
    if (p != end)
        return VC_ERR_INVALID;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
        return VC_ERR_INVALID;
    if (M == 2 && D == 29 && !((Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0))
        return VC_ERR_INVALID;
    if (sec == 60)
        sec = 59; /* A leap second is read as the second before it. */

    /* The fields are checked above, so timegm only adds them up (in UTC). */
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D,
                    .tm_hour = h, .tm_min = m, .tm_sec = sec};
    time_t t = timegm(&tm);

    *out_ms = ((int64_t)t - (int64_t)off * 60) * 1000 + ms;
    return 0;
}
