#include "gw_admins.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "vc_error.h"
#include "vc_num.h"

#define FILE_MAX (1024 * 1024) /* a million bytes: ten thousand admins and more */

typedef struct {
    char name[GW_ADMIN_NAME_MAX + 1];
    unsigned char digest[SHA256_DIGEST_LENGTH];
} entry_t;

struct gw_admins {
    size_t n;
    entry_t entry[];
};

static int name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '@' || c == '-';
}

/* Parses one line (no newline) into e. 1: an entry, 0: blank or comment, -1: bad (err set). */
static int parse_line(const char *p, const char *end, int lineno, entry_t *e, char *err,
                      size_t errlen)
{
    const char *name, *hex;
    size_t nlen, hlen;

    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p == end || *p == '#')
        return 0;
    for (name = p; p < end && name_char(*p); p++)
        ;
    nlen = (size_t)(p - name);
    if (nlen == 0 || nlen > GW_ADMIN_NAME_MAX || p == end || (*p != ' ' && *p != '\t')) {
        snprintf(err, errlen,
                 "line %d: a name of 1..%d characters A-Z a-z 0-9 . _ @ - comes first, then a "
                 "space and the token's SHA-256",
                 lineno, GW_ADMIN_NAME_MAX);
        return -1;
    }
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    for (hex = p; p < end && vc_hex_value(*p) >= 0; p++)
        ;
    hlen = (size_t)(p - hex);
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (hlen != 2 * SHA256_DIGEST_LENGTH || (p < end && *p != '#')) {
        snprintf(err, errlen,
                 "line %d (%.*s): the token's SHA-256 is 64 hex digits, then nothing "
                 "but a comment",
                 lineno, (int)nlen, name);
        return -1;
    }
    memcpy(e->name, name, nlen);
    e->name[nlen] = '\0';
    for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++)
        e->digest[i] =
            (unsigned char)(vc_hex_value(hex[2 * i]) << 4 | vc_hex_value(hex[2 * i + 1]));
    return 1;
}

gw_admins_t *gw_admins_parse(const char *text, size_t len, char *err, size_t errlen)
{
    const char *p = text, *end = text + len;
    size_t lines = 1;
    gw_admins_t *t;
    int lineno = 0;

    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (!(t = calloc(1, sizeof(*t) + lines * sizeof(entry_t)))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        int rc;

        if (!eol)
            eol = end;
        lineno++;
        rc = parse_line(p, eol, lineno, &t->entry[t->n], err, errlen);
        if (rc < 0)
            goto bad;
        if (rc > 0) {
            for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->entry[i].name, t->entry[t->n].name) == 0) {
                    snprintf(err, errlen, "line %d: the name %s is there twice", lineno,
                             t->entry[i].name);
                    goto bad;
                }
            t->n++;
        }
        p = eol + 1;
    }
    return t;
bad:
    gw_admins_free(t);
    return NULL;
}

void gw_admins_free(gw_admins_t *t)
{
    if (t)
        OPENSSL_cleanse(t, sizeof(*t) + t->n * sizeof(entry_t));
    free(t);
}

size_t gw_admins_count(const gw_admins_t *t)
{
    return t ? t->n : 0;
}

int gw_admins_match(const gw_admins_t *t, const char *token, size_t len,
                    char name[GW_ADMIN_NAME_MAX + 1])
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    size_t found = 0, matched = 0;

    if (!t || len == 0)
        return 0;
    SHA256((const unsigned char *)token, len, digest);
    /* Every byte of every entry: the time depends on the table's size alone. */
    for (size_t i = 0; i < t->n; i++) {
        unsigned diff = 0;
        for (size_t j = 0; j < SHA256_DIGEST_LENGTH; j++)
            diff |= (unsigned)(digest[j] ^ t->entry[i].digest[j]);
        /* 1 when diff is 0, without a branch on it. */
        size_t hit = (size_t)(((diff | (0u - diff)) >> (sizeof(unsigned) * 8 - 1)) ^ 1u);
        found |= hit * (i + 1);
        matched |= hit;
    }
    if (!matched)
        return 0;
    memcpy(name, t->entry[found - 1].name, GW_ADMIN_NAME_MAX + 1);
    return 1;
}

/* ---- the process's table ---- */

static uv_once_t once = UV_ONCE_INIT;
static uv_rwlock_t lock;
static gw_admins_t *current;

static void init_lock(void)
{
    if (uv_rwlock_init(&lock) != 0)
        abort(); /* at start, from main(): nothing to run without it */
}

int gw_admins_load(const char *path, size_t *count, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text = NULL, why[200];
    size_t len;
    gw_admins_t *t, *old;

    uv_once(&once, init_lock);
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return VC_ERR_IO;
    }
    if (!(text = malloc(FILE_MAX + 1))) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    len = fread(text, 1, FILE_MAX + 1, f);
    if (ferror(f) || len > FILE_MAX) {
        snprintf(err, errlen, "%s: %s", path, ferror(f) ? "cannot read it" : "larger than 1 MB");
        fclose(f);
        free(text);
        return VC_ERR_IO;
    }
    fclose(f);
    t = gw_admins_parse(text, len, why, sizeof(why));
    OPENSSL_cleanse(text, len);
    free(text);
    if (!t) {
        snprintf(err, errlen, "%s: %s", path, why);
        return VC_ERR_INVALID;
    }
    uv_rwlock_wrlock(&lock);
    old = current;
    current = t;
    uv_rwlock_wrunlock(&lock);
    gw_admins_free(old);
    *count = t->n;
    return 0;
}

int gw_admins_authorized(const char *auth, char name[GW_ADMIN_NAME_MAX + 1])
{
    static const char prefix[] = "Bearer ";
    int match;

    if (!auth || strncmp(auth, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    auth += sizeof(prefix) - 1;
    uv_once(&once, init_lock);
    uv_rwlock_rdlock(&lock);
    match = gw_admins_match(current, auth, strlen(auth), name);
    uv_rwlock_rdunlock(&lock);
    return match;
}

void gw_admins_unload(void)
{
    uv_once(&once, init_lock);
    uv_rwlock_wrlock(&lock);
    gw_admins_free(current);
    current = NULL;
    uv_rwlock_wrunlock(&lock);
}
