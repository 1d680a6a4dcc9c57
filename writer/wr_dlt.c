#include "wr_dlt.h"

#include "vc_error.h"
#include "vc_time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_time(char *buf, size_t cap, int64_t ms)
{
    if (ms < 0 || vc_time_format_ms(ms, buf, cap) == 0)
        buf[0] = '\0';
}

const char *wr_dlt_form_name(wr_dlt_form_t form)
{
    switch (form) {
    case WR_DLT_WHOLE:
        return "whole";
    case WR_DLT_TRUNCATED:
        return "truncated";
    case WR_DLT_REFERENCE:
        return "reference";
    case WR_DLT_LOST:
        return "lost";
    }
    return "?";
}

size_t wr_dlt_form_keep(wr_dlt_form_t form, size_t len, int keep_key)
{
    size_t cap;

    if (form == WR_DLT_WHOLE)
        return len;
    if (form == WR_DLT_LOST || (form == WR_DLT_REFERENCE && !keep_key))
        return 0;
    cap = keep_key ? WR_DLT_KEEP_KEY : WR_DLT_KEEP_VALUE;
    return len < cap ? len : cap;
}

size_t wr_dlt_headers(const wr_dlt_info_t *info, wr_header_t out[WR_DLT_MAX_HEADERS])
{
    size_t n = 0;

    out[n].name = WR_HDR_TOPIC;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%s", info->topic);
    out[n].name = WR_HDR_PARTITION;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%d", (int)info->partition);
    out[n].name = WR_HDR_OFFSET;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%lld", (long long)info->offset);
    out[n].name = WR_HDR_TIMESTAMP;
    set_time(out[n++].value, WR_HDR_VALUE_MAX, info->timestamp_ms);
    out[n].name = WR_HDR_GROUP;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%s", info->group);
    out[n].name = WR_HDR_CLASS;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%s", info->error_class);
    out[n].name = WR_HDR_MESSAGE;
    snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%s", info->error_message);
    out[n].name = WR_HDR_FAILED_AT;
    set_time(out[n++].value, WR_HDR_VALUE_MAX, info->failed_at_ms);
    if (info->truncated_from >= 0) {
        out[n].name = WR_HDR_TRUNCATED;
        snprintf(out[n++].value, WR_HDR_VALUE_MAX, "%lld", (long long)info->truncated_from);
    }
    return n;
}

void wr_dlt_info_clear(wr_dlt_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->partition = -1;
    info->offset = -1;
    info->timestamp_ms = -1;
    info->failed_at_ms = -1;
    info->truncated_from = -1;
}

static void copy_text(char *dst, size_t cap, const void *value, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, value, len);
    dst[len] = '\0';
}

static int parse_int(const void *value, size_t len, int64_t *out)
{
    char buf[32], *end;
    long long v;

    if (len == 0 || len >= sizeof(buf))
        return VC_ERR_INVALID;
    memcpy(buf, value, len);
    buf[len] = '\0';
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno || *end)
        return VC_ERR_INVALID;
    *out = v;
    return 0;
}

static int parse_time(const void *value, size_t len, int64_t *out)
{
    if (len == 0) {
        *out = -1;
        return 0;
    }
    return vc_time_parse(value, len, out);
}

int wr_dlt_info_set(wr_dlt_info_t *info, const char *name, const void *value, size_t len)
{
    int64_t v;
    int rc;

    if (!value)
        len = 0;
    if (strcmp(name, WR_HDR_TOPIC) == 0) {
        copy_text(info->topic, sizeof(info->topic), value, len);
    } else if (strcmp(name, WR_HDR_PARTITION) == 0) {
        if ((rc = parse_int(value, len, &v)) != 0 || v < 0 || v > INT32_MAX)
            return VC_ERR_INVALID;
        info->partition = (int32_t)v;
    } else if (strcmp(name, WR_HDR_OFFSET) == 0) {
        if ((rc = parse_int(value, len, &v)) != 0 || v < 0)
            return VC_ERR_INVALID;
        info->offset = v;
    } else if (strcmp(name, WR_HDR_TIMESTAMP) == 0) {
        return parse_time(value, len, &info->timestamp_ms);
    } else if (strcmp(name, WR_HDR_GROUP) == 0) {
        copy_text(info->group, sizeof(info->group), value, len);
    } else if (strcmp(name, WR_HDR_CLASS) == 0) {
        copy_text(info->error_class, sizeof(info->error_class), value, len);
    } else if (strcmp(name, WR_HDR_MESSAGE) == 0) {
        copy_text(info->error_message, sizeof(info->error_message), value, len);
    } else if (strcmp(name, WR_HDR_FAILED_AT) == 0) {
        return parse_time(value, len, &info->failed_at_ms);
    } else if (strcmp(name, WR_HDR_TRUNCATED) == 0) {
        /* Unreadable, it still says the copy is not whole: never replay it as is. */
        if ((rc = parse_int(value, len, &v)) != 0 || v < 0) {
            info->truncated_from = 0;
            return VC_ERR_INVALID;
        }
        info->truncated_from = v;
    }
    return 0;
}

int wr_dlt_class_valid(const char *cls)
{
    static const char *const classes[] = {WR_DLT_MALFORMED,  WR_DLT_UNKNOWN_VOUCHER,
                                          WR_DLT_CONSTRAINT, WR_DLT_CONFLICT,
                                          WR_DLT_REJECTED,   WR_DLT_DIRECT_MISMATCH};
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
        if (strcmp(cls, classes[i]) == 0)
            return 1;
    return 0;
}

static int parse_offset_arg(const char *s, int64_t *out)
{
    return parse_int(s, strlen(s), out) == 0 && *out >= 0 ? 0 : VC_ERR_INVALID;
}

int wr_dlt_filter_parse(int argc, char **argv, wr_dlt_filter_t *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    f->from = f->to = -1;
    f->partition = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int64_t *target = NULL;

        if (strcmp(a, "--all") == 0) {
            f->all = 1;
            continue;
        }
        if (strcmp(a, "--dry-run") == 0) {
            f->dry_run = 1;
            continue;
        }
        if (strcmp(a, "--order") == 0 || strcmp(a, "--operator") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                snprintf(err, errlen, "%s needs a value", a);
                return VC_ERR_INVALID;
            }
            const char **field = strcmp(a, "--order") == 0 ? &f->order_id : &f->operator_name;
            *field = argv[i + 1];
            i++;
            continue;
        }
        if (strcmp(a, "--partition") == 0) {
            int64_t p;
            if (i + 1 >= argc) {
                snprintf(err, errlen, "--partition needs a value");
                return VC_ERR_INVALID;
            }
            if (parse_offset_arg(argv[++i], &p) != 0 || p > INT32_MAX) {
                snprintf(err, errlen, "--partition needs a partition number, got \"%s\"", argv[i]);
                return VC_ERR_INVALID;
            }
            f->partition = (int32_t)p;
            continue;
        }
        if (strcmp(a, "--from") == 0)
            target = &f->from;
        else if (strcmp(a, "--to") == 0)
            target = &f->to;
        else if (strcmp(a, "--error-class") != 0) {
            snprintf(err, errlen, "unknown replay option \"%s\"", a);
            return VC_ERR_INVALID;
        }
        if (i + 1 >= argc) {
            snprintf(err, errlen, "%s needs a value", a);
            return VC_ERR_INVALID;
        }
        if (!target) {
            f->error_class = argv[++i];
            if (!wr_dlt_class_valid(f->error_class)) {
                snprintf(err, errlen,
                         "unknown error class \"%s\" (one of malformed, unknown-voucher, "
                         "constraint, order-conflict, rejected)",
                         f->error_class);
                return VC_ERR_INVALID;
            }
        } else if (parse_offset_arg(argv[++i], target) != 0) {
            snprintf(err, errlen, "%s needs an offset, got \"%s\"", a, argv[i]);
            return VC_ERR_INVALID;
        }
    }
    if (f->from >= 0 && f->to >= 0 && f->from > f->to) {
        snprintf(err, errlen, "--from %lld is after --to %lld", (long long)f->from,
                 (long long)f->to);
        return VC_ERR_INVALID;
    }
    if (f->all && (f->from >= 0 || f->to >= 0 || f->error_class || f->order_id)) {
        snprintf(err, errlen, "--all goes alone: it replays every dead letter");
        return VC_ERR_INVALID;
    }
    if (!f->all && f->from < 0 && f->to < 0 && !f->error_class && !f->order_id) {
        snprintf(err, errlen, "say what to replay: [--partition P] --from N --to N, "
                              "--order ID, --error-class C, or --all");
        return VC_ERR_INVALID;
    }
    if (f->partition >= 0 && f->from < 0 && f->to < 0) {
        snprintf(err, errlen, "--partition goes with --from/--to: it says which partition's "
                              "offsets they are");
        return VC_ERR_INVALID;
    }
    return 0;
}

int wr_dlt_filter_resolve(wr_dlt_filter_t *f, int npartitions, char *err, size_t errlen)
{
    if (f->from < 0 && f->to < 0)
        return 0;
    if (f->partition >= npartitions) {
        snprintf(err, errlen, "--partition %d: the dead-letter topic has %d partition%s (0..%d)",
                 (int)f->partition, npartitions, npartitions == 1 ? "" : "s", npartitions - 1);
        return VC_ERR_INVALID;
    }
    if (f->partition < 0 && npartitions > 1) {
        snprintf(err, errlen,
                 "the dead-letter topic has %d partitions and offsets count in each: "
                 "say which with --partition P (dlt list shows P:OFFSET)",
                 npartitions);
        return VC_ERR_INVALID;
    }
    if (f->partition < 0)
        f->partition = 0;
    return 0;
}

int wr_dlt_filter_match(const wr_dlt_filter_t *f, int32_t partition, int64_t offset,
                        const char *error_class, const char *order_id)
{
    if (f->all)
        return 1;
    if ((f->from >= 0 || f->to >= 0) && f->partition >= 0 && partition != f->partition)
        return 0;
    if (f->from >= 0 && offset < f->from)
        return 0;
    if (f->to >= 0 && offset > f->to)
        return 0;
    if (f->error_class && strcmp(f->error_class, error_class ? error_class : "") != 0)
        return 0;
    if (f->order_id && strcmp(f->order_id, order_id ? order_id : "") != 0)
        return 0;
    return 1;
}

/* "90s", "15m", "2h", "3d": milliseconds, or -1. */
static int64_t parse_age(const char *s)
{
    char *end;
    long long n;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno || n < 0 || end[0] == '\0' || end[1] != '\0' || n > 100LL * 365 * 86400)
        return -1;
    switch (*end) {
    case 's':
        return n * 1000;
    case 'm':
        return n * 60000;
    case 'h':
        return n * 3600000;
    case 'd':
        return n * 86400000;
    }
    return -1;
}

int wr_dlt_list_parse(int argc, char **argv, int64_t now_ms, wr_dlt_list_t *l, char *err,
                      size_t errlen)
{
    static const char *const states[] = {"parked", "replayed", "discarded", "superseded",
                                         "unrecorded"};

    memset(l, 0, sizeof(*l));
    l->partition = -1;
    l->since_ms = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;

        if (strcmp(a, "--code") != 0 && strcmp(a, "--order") != 0 && strcmp(a, "--state") != 0 &&
            strcmp(a, "--partition") != 0 && strcmp(a, "--since") != 0) {
            snprintf(err, errlen, "unknown list option \"%s\" (--code, --order, --partition, "
                                  "--since, --state)", a);
            return VC_ERR_INVALID;
        }
        if (i + 1 >= argc || !argv[i + 1][0]) {
            snprintf(err, errlen, "%s needs a value", a);
            return VC_ERR_INVALID;
        }
        v = argv[++i];
        if (strcmp(a, "--code") == 0) {
            l->code = v;
        } else if (strcmp(a, "--order") == 0) {
            l->order_id = v;
        } else if (strcmp(a, "--state") == 0) {
            size_t k = 0;
            while (k < sizeof(states) / sizeof(states[0]) && strcmp(v, states[k]) != 0)
                k++;
            if (k == sizeof(states) / sizeof(states[0])) {
                snprintf(err, errlen, "unknown state \"%s\" (parked, replayed, discarded, "
                                      "superseded, unrecorded)", v);
                return VC_ERR_INVALID;
            }
            l->state = v;
        } else if (strcmp(a, "--partition") == 0) {
            if (parse_offset_arg(v, &n) != 0 || n > INT32_MAX) {
                snprintf(err, errlen, "--partition needs a partition number, got \"%s\"", v);
                return VC_ERR_INVALID;
            }
            l->partition = (int32_t)n;
        } else if ((n = parse_age(v)) >= 0) {
            l->since_ms = now_ms - n;
        } else if (vc_time_parse(v, strlen(v), &n) == 0) {
            l->since_ms = n;
        } else {
            snprintf(err, errlen, "--since needs an age (90s, 15m, 2h, 3d) or an RFC 3339 time, "
                                  "got \"%s\"", v);
            return VC_ERR_INVALID;
        }
    }
    return 0;
}

int wr_dlt_list_match(const wr_dlt_list_t *l, int32_t partition, int64_t failed_at_ms,
                      const char *code, const char *order_id, const char *state)
{
    if (l->partition >= 0 && partition != l->partition)
        return 0;
    if (l->since_ms >= 0 && failed_at_ms < l->since_ms)
        return 0;
    if (l->code && strcmp(l->code, code ? code : "") != 0)
        return 0;
    if (l->order_id && strcmp(l->order_id, order_id ? order_id : "") != 0)
        return 0;
    if (l->state && strcmp(l->state, state ? state : "") != 0)
        return 0;
    return 1;
}

const char *wr_dlt_format_age(int64_t ms, char *buf, size_t cap)
{
    int64_t s = ms / 1000;

    if (ms < 0)
        snprintf(buf, cap, "-");
    else if (s < 120)
        snprintf(buf, cap, "%llds", (long long)s);
    else if (s < 2 * 3600)
        snprintf(buf, cap, "%lldm", (long long)(s / 60));
    else if (s < 2 * 86400)
        snprintf(buf, cap, "%lldh", (long long)(s / 3600));
    else
        snprintf(buf, cap, "%lldd", (long long)(s / 86400));
    return buf;
}
