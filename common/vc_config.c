#include "vc_config.h"
#include "vc_error.h"
#include "vc_num.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_ms(const char *s, int64_t *out)
{
    char *end;
    long long v;
    int64_t mult;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60 * 1000;
    else if (strcmp(end, "h") == 0)
        mult = 3600 * 1000;
    else
        return -1;
    if (v > INT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Stores text into the field p describes; "from" names where it came from, for errors. */
static int set_value(const vc_cfg_param_t *p, void *cfg, const char *text, const char *from,
                     char *err, size_t errlen)
{
    char *field = (char *)cfg + p->offset;
    int64_t v;
    int b;

    switch (p->type) {
    case VC_CFG_STRING_OFF:
        *(const char **)field = text;
        return 0;
    case VC_CFG_STRING:
        if (!*text && p->def && *p->def) {
            snprintf(err, errlen,
                     "%s: empty value for --%s: give one, or leave it unset for the default (%s)",
                     from, p->flag, p->def);
            return VC_ERR_INVALID;
        }
        *(const char **)field = text;
        return 0;
    case VC_CFG_BOOL:
        if (parse_bool(text, &b) != 0) {
            snprintf(err, errlen, "%s: invalid value \"%s\" for --%s: expected true or false",
                     from, text, p->flag);
            return VC_ERR_INVALID;
        }
        *(int *)field = b;
        return 0;
    case VC_CFG_INT:
    case VC_CFG_MS:
        if ((p->type == VC_CFG_INT ? parse_int(text, &v) : parse_ms(text, &v)) != 0) {
            snprintf(err, errlen, "%s: invalid value \"%s\" for --%s: expected %s", from, text,
                     p->flag,
                     p->type == VC_CFG_INT ? "an integer" : "a duration such as 500ms, 5s or 15m");
            return VC_ERR_INVALID;
        }
        if (v < p->min || v > p->max) {
            snprintf(err, errlen, "%s: value \"%s\" for --%s is out of range [%lld, %lld]%s", from,
                     text, p->flag, (long long)p->min, (long long)p->max,
                     p->type == VC_CFG_MS ? " milliseconds" : "");
            return VC_ERR_INVALID;
        }
        *(int64_t *)field = v;
        return 0;
    }
    return VC_ERR_INVALID;
}

static const char *type_hint(vc_cfg_type_t t)
{
    switch (t) {
    case VC_CFG_STRING:
    case VC_CFG_STRING_OFF:
        return "TEXT";
    case VC_CFG_INT:
        return "N";
    case VC_CFG_BOOL:
        return "BOOL";
    case VC_CFG_MS:
        return "DURATION";
    }
    return "";
}

void vc_config_usage(const vc_cfg_param_t *params, const char *prog, const char *summary,
                     FILE *out)
{
    fprintf(out, "%s\n\nSettings (command-line flag, environment variable, default):\n", summary);
    for (const vc_cfg_param_t *p = params; p->flag; p++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", p->flag, p->type == VC_CFG_BOOL ? "" : " ",
                 p->type == VC_CFG_BOOL ? "" : type_hint(p->type));
        fprintf(out, "  %-34s %s\n", left, p->help);
        char env[160];
        /* "A,B": A, or when A is unset, B (a daemon's own variable, then the shared one). */
        if (!p->env)
            snprintf(env, sizeof(env), "(flag only)");
        else if (strchr(p->env, ','))
            snprintf(env, sizeof(env), "%.*s (or %s)", (int)strcspn(p->env, ","), p->env,
                     strchr(p->env, ',') + 1);
        else
            snprintf(env, sizeof(env), "%s", p->env);
        fprintf(out, "  %-34s env %s, default: %s\n", "", env,
                p->def ? (*p->def ? p->def : "\"\"") : "(none)");
    }
    fprintf(out, "  %-34s %s\n  %-34s %s\n", "--help", "show this help and exit", "--version",
            "show the version and exit");
    fprintf(out, "\nDurations take a unit: 250ms, 5s, 15m, 1h (a bare number is milliseconds).\n"
                 "Flags override environment variables, which override defaults.\n");
    (void)prog;
}

/*
 * The value of the first variable of names ("A" or "A,B,...") that is set,
 * its name copied into name; NULL when none is set (or names is NULL).
 */
static const char *env_lookup(const char *names, char *name, size_t cap)
{
    while (names && *names) {
        size_t n = strcspn(names, ",");
        const char *v;

        snprintf(name, cap, "%.*s", (int)n, names);
        if ((v = getenv(name)))
            return v;
        names += n + (names[n] == ',');
    }
    return NULL;
}

int vc_config_load(const vc_cfg_param_t *params, void *cfg, const char *prog, const char *summary,
                   int argc, char **argv, int *first_arg, char *err, size_t errlen)
{
    const vc_cfg_param_t *p;
    int i, rc;
    char from[160];

    for (p = params; p->flag; p++) {
        if (p->def && (rc = set_value(p, cfg, p->def, "default", err, errlen)) != 0)
            return rc;
        if ((p->type == VC_CFG_STRING || p->type == VC_CFG_STRING_OFF) && !p->def)
            *(const char **)((char *)cfg + p->offset) = NULL;
    }
    for (p = params; p->flag; p++) {
        char name[96];
        const char *v = env_lookup(p->env, name, sizeof(name));
        if (v) {
            snprintf(from, sizeof(from), "environment variable %s", name);
            if ((rc = set_value(p, cfg, v, from, err, errlen)) != 0)
                return rc;
        }
    }
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *name, *eq, *value = NULL;
        size_t namelen;

        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (strncmp(arg, "--", 2) != 0)
            break;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            vc_config_usage(params, prog, summary, stdout);
            return VC_CFG_EXIT;
        }
        if (strcmp(arg, "--version") == 0) {
            printf("%s %s\n", prog, VC_VERSION);
            return VC_CFG_EXIT;
        }
        name = arg + 2;
        eq = strchr(name, '=');
        namelen = eq ? (size_t)(eq - name) : strlen(name);
        for (p = params; p->flag; p++)
            if (strlen(p->flag) == namelen && strncmp(p->flag, name, namelen) == 0)
                break;
        if (!p->flag) {
            snprintf(err, errlen, "unknown option \"%.*s\" (see --help)", (int)(namelen + 2), arg);
            return VC_ERR_INVALID;
        }
        if (eq) {
            value = eq + 1;
        } else if (p->type == VC_CFG_BOOL) {
            value = "true";
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(err, errlen, "option --%s needs a value (see --help)", p->flag);
            return VC_ERR_INVALID;
        }
        snprintf(from, sizeof(from), "option --%s", p->flag);
        if ((rc = set_value(p, cfg, value, from, err, errlen)) != 0)
            return rc;
    }
    if (first_arg)
        *first_arg = i;
    else if (i < argc) {
        snprintf(err, errlen, "unexpected argument \"%s\" (see --help)", argv[i]);
        return VC_ERR_INVALID;
    }
    return VC_CFG_RUN;
}

int vc_parse_host_port(const char *s, char *host, size_t hostcap, int *port)
{
    const char *colon = strrchr(s, ':');
    int64_t v;

    if (!colon || colon == s || (size_t)(colon - s) >= hostcap)
        return VC_ERR_INVALID;
    if (parse_int(colon + 1, &v) != 0 || v < 1 || v > 65535)
        return VC_ERR_INVALID;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)v;
    return 0;
}

/* The user part of a URL's authority: the text before the last '@' of it, or NULL. */
static const char *userinfo_end(const char *authority, size_t len)
{
    const char *at = NULL;

    for (size_t i = 0; i < len; i++)
        if (authority[i] == '@')
            at = authority + i;
    return at;
}

const char *vc_redis_url_redact(const char *url, char *buf, size_t cap)
{
    const char *scheme = strstr(url, "://");
    const char *authority = scheme ? scheme + 3 : url;
    size_t alen = strcspn(authority, "/");
    const char *at = userinfo_end(authority, alen);
    const char *colon;

    if (cap == 0)
        return buf;
    if (!at) {
        snprintf(buf, cap, "%s", url);
        return buf;
    }
    colon = memchr(authority, ':', (size_t)(at - authority));
    if (colon) /* user:password@: the user stays, the password goes */
        snprintf(buf, cap, "%.*s:***%s", (int)(colon - url), url, at);
    else /* no colon: whatever it is may be a password */
        snprintf(buf, cap, "%.*s***%s", (int)(authority - url), url, at);
    return buf;
}

/* Percent-decodes len bytes of s into out (cap bytes with the NUL). Returns 0 or -1. */
static int percent_decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            int hi, lo;
            /* A NUL (%00) would cut the password short: refused too. */
            if (i + 2 >= len || (hi = vc_hex_value(s[i + 1])) < 0 ||
                (lo = vc_hex_value(s[i + 2])) < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

int vc_parse_redis_url(const char *url, vc_redis_url_t *out, char *err, size_t errlen)
{
    const char *p = url, *slash, *at, *colon;
    char hp[256], shown[512];
    size_t len;
    int64_t v;

    memset(out, 0, sizeof(*out));
    vc_redis_url_redact(url, shown, sizeof(shown));
    if (strncmp(p, "redis+cluster://", 16) == 0) {
        /* The first seed, with the credentials, read as a one-node URL. */
        char first[768];
        size_t alen = strcspn(p + 16, "/"), hlen;
        const char *hosts = p + 16, *at = userinfo_end(hosts, alen);
        int rc;

        if (at)
            hosts = at + 1;
        hlen = strcspn(hosts, ",/");
        snprintf(first, sizeof(first), "redis://%.*s%.*s", (int)(hosts - (p + 16)), p + 16,
                 (int)hlen, hosts);
        if ((rc = vc_parse_redis_url(first, out, err, errlen)) != 0)
            return rc;
        out->cluster = 1;
        return 0;
    }
    if (strncmp(p, "rediss://", 9) == 0) {
        snprintf(err, errlen, "\"%s\": TLS (rediss://) is not supported", shown);
        return VC_ERR_INVALID;
    }
    if (strncmp(p, "redis://", 8) != 0) {
        snprintf(err, errlen, "\"%s\" is not redis://[user:password@]host:port/db", shown);
        return VC_ERR_INVALID;
    }
    p += 8;
    slash = strchr(p, '/');
    len = slash ? (size_t)(slash - p) : strlen(p);
    if ((at = userinfo_end(p, len))) {
        colon = memchr(p, ':', (size_t)(at - p));
        if (!colon) {
            snprintf(err, errlen,
                     "\"%s\": a user without a password; write redis://user:password@host "
                     "or redis://:password@host",
                     shown);
            return VC_ERR_INVALID;
        }
        if (percent_decode(p, (size_t)(colon - p), out->user, sizeof(out->user)) != 0 ||
            percent_decode(colon + 1, (size_t)(at - colon - 1), out->password,
                           sizeof(out->password)) != 0) {
            snprintf(err, errlen,
                     "\"%s\": the user or password is too long or has a bad %%-escape "
                     "(write '@', ':' and '/' as %%40, %%3A and %%2F)",
                     shown);
            return VC_ERR_INVALID;
        }
        if (!out->password[0]) {
            snprintf(err, errlen, "\"%s\": the password is empty", shown);
            return VC_ERR_INVALID;
        }
        len -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    if (len >= sizeof(hp))
        goto bad;
    memcpy(hp, p, len);
    hp[len] = '\0';
    if (slash && slash[1]) {
        if (parse_int(slash + 1, &v) != 0 || v < 0 || v > 15)
            goto bad;
        out->db = (int)v;
    }
    if (strchr(hp, ':')) {
        if (vc_parse_host_port(hp, out->host, sizeof(out->host), &out->port) != 0)
            goto bad;
        return 0;
    }
    snprintf(out->host, sizeof(out->host), "%s", len ? hp : "127.0.0.1");
    out->port = 6379;
    return 0;
bad:
    snprintf(err, errlen, "\"%s\" is not redis://[user:password@]host:port/db (db 0..15)", shown);
    return VC_ERR_INVALID;
}
