#include "vc_json.h"
#include "vc_error.h"
#include "vc_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#define GEN(g) ((yajl_gen)(g)->gen)
#define CHECK(g, call)                                                                             \
    do {                                                                                           \
        if (!(g)->failed && (call) != yajl_gen_status_ok)                                          \
            (g)->failed = 1;                                                                       \
    } while (0)

int vc_jgen_init(vc_jgen_t *g)
{
    g->failed = 0;
    g->gen = yajl_gen_alloc(NULL);
    return g->gen ? 0 : VC_ERR_NOMEM;
}

void vc_jgen_map_open(vc_jgen_t *g)
{
    CHECK(g, yajl_gen_map_open(GEN(g)));
}

void vc_jgen_map_close(vc_jgen_t *g)
{
    CHECK(g, yajl_gen_map_close(GEN(g)));
}

void vc_jgen_strn(vc_jgen_t *g, const char *s, size_t len)
{
    CHECK(g, yajl_gen_string(GEN(g), (const unsigned char *)s, len));
}

void vc_jgen_str(vc_jgen_t *g, const char *s)
{
    vc_jgen_strn(g, s, strlen(s));
}

void vc_jgen_key(vc_jgen_t *g, const char *key)
{
    vc_jgen_str(g, key);
}

void vc_jgen_int(vc_jgen_t *g, int64_t v)
{
    CHECK(g, yajl_gen_integer(GEN(g), (long long)v));
}

void vc_jgen_bool(vc_jgen_t *g, int v)
{
    CHECK(g, yajl_gen_bool(GEN(g), v));
}

void vc_jgen_kv_str(vc_jgen_t *g, const char *key, const char *s)
{
    vc_jgen_key(g, key);
    vc_jgen_str(g, s);
}

void vc_jgen_kv_int(vc_jgen_t *g, const char *key, int64_t v)
{
    vc_jgen_key(g, key);
    vc_jgen_int(g, v);
}

void vc_jgen_kv_bool(vc_jgen_t *g, const char *key, int v)
{
    vc_jgen_key(g, key);
    vc_jgen_bool(g, v);
}

void vc_jgen_free(vc_jgen_t *g)
{
    if (g->gen)
        yajl_gen_free(GEN(g));
    g->gen = NULL;
}

int vc_jgen_finish(vc_jgen_t *g, char *buf, size_t cap, size_t *len)
{
    const unsigned char *out;
    size_t n;
    int rc = 0;

    if (g->failed || yajl_gen_get_buf(GEN(g), &out, &n) != yajl_gen_status_ok)
        rc = VC_ERR_INVALID;
    else if (n + 1 > cap)
        rc = VC_ERR_TOO_LARGE;
    else {
        memcpy(buf, out, n);
        buf[n] = '\0';
        *len = n;
    }
    vc_jgen_free(g);
    return rc;
}

int vc_jdoc_parse(vc_jdoc_t *doc, const char *json, size_t len, char *err, size_t errlen)
{
    char ebuf[256] = "";
    char *copy;
    yajl_val root;

    doc->root = NULL;
    /* yajl_tree_parse() wants a NUL-terminated string. */
    if (memchr(json, '\0', len)) {
        snprintf(err, errlen, "malformed JSON: contains a NUL byte");
        return VC_ERR_INVALID;
    }
    if (!(copy = malloc(len + 1)))
        return VC_ERR_NOMEM;
    memcpy(copy, json, len);
    copy[len] = '\0';
    root = yajl_tree_parse(copy, ebuf, sizeof(ebuf));
    free(copy);
    if (!root) {
        /* yajl's message spans lines and quotes the input: keep its first line. */
        char *nl = strchr(ebuf, '\n');
        if (nl)
            *nl = '\0';
        snprintf(err, errlen, "malformed JSON: %s", ebuf[0] ? ebuf : "empty input");
        return VC_ERR_INVALID;
    }
    if (!YAJL_IS_OBJECT(root)) {
        yajl_tree_free(root);
        snprintf(err, errlen, "malformed JSON: expected an object");
        return VC_ERR_INVALID;
    }
    doc->root = root;
    return 0;
}

void vc_jdoc_free(vc_jdoc_t *doc)
{
    if (doc->root)
        yajl_tree_free((yajl_val)doc->root);
    doc->root = NULL;
}

/* Returns the value for key, or NULL. */
static yajl_val lookup(const vc_jdoc_t *doc, const char *key)
{
    yajl_val root = doc->root;
    for (size_t i = 0; i < root->u.object.len; i++)
        if (strcmp(root->u.object.keys[i], key) == 0)
            return root->u.object.values[i];
    return NULL;
}

int vc_jdoc_has(const vc_jdoc_t *doc, const char *key)
{
    yajl_val root = doc->root;
    for (size_t i = 0; i < root->u.object.len; i++)
        if (strcmp(root->u.object.keys[i], key) == 0)
            return 1;
    return 0;
}

int vc_jdoc_check_keys(const vc_jdoc_t *doc, const char *const *allowed, char *err, size_t errlen)
{
    yajl_val root = doc->root;
    for (size_t i = 0; i < root->u.object.len; i++) {
        const char *key = root->u.object.keys[i];
        const char *const *a;
        for (a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                break;
        if (!*a) {
            snprintf(err, errlen, "unknown field \"%.64s\"", key);
            return VC_ERR_INVALID;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(root->u.object.keys[j], key) == 0) {
                snprintf(err, errlen, "field \"%.64s\" given twice", key);
                return VC_ERR_INVALID;
            }
        }
    }
    return 0;
}

static int missing(const char *key, char *err, size_t errlen)
{
    snprintf(err, errlen, "field \"%s\" is required", key);
    return VC_ERR_INVALID;
}

int vc_jdoc_str(const vc_jdoc_t *doc, const char *key, const char **out, char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);
    if (!v)
        return missing(key, err, errlen);
    if (!YAJL_IS_STRING(v)) {
        snprintf(err, errlen, "field \"%s\" must be a string", key);
        return VC_ERR_INVALID;
    }
    *out = YAJL_GET_STRING(v);
    return 0;
}

int vc_jdoc_strcpy(const vc_jdoc_t *doc, const char *key, char *out, size_t cap, char *err,
                   size_t errlen)
{
    const char *s;
    size_t n;
    int rc = vc_jdoc_str(doc, key, &s, err, errlen);
    if (rc)
        return rc;
    n = strlen(s);
    if (n + 1 > cap) {
        snprintf(err, errlen, "field \"%s\" is longer than %zu bytes", key, cap - 1);
        return VC_ERR_INVALID;
    }
    memcpy(out, s, n + 1);
    return 0;
}

int vc_jdoc_int(const vc_jdoc_t *doc, const char *key, int64_t *out, char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);
    if (!v)
        return missing(key, err, errlen);
    if (!YAJL_IS_INTEGER(v)) {
        snprintf(err, errlen,
                 YAJL_IS_NUMBER(v) ? "field \"%s\" must be a whole number within 64 bits"
                                   : "field \"%s\" must be an integer",
                 key);
        return VC_ERR_INVALID;
    }
    *out = YAJL_GET_INTEGER(v);
    return 0;
}

int vc_jdoc_time(const vc_jdoc_t *doc, const char *key, int required, int64_t *out_ms, char *err,
                 size_t errlen)
{
    const char *s;
    int rc;

    if (!required && !lookup(doc, key)) {
        *out_ms = 0;
        return 0;
    }
    if ((rc = vc_jdoc_str(doc, key, &s, err, errlen)) != 0)
        return rc;
    if (vc_time_parse(s, strlen(s), out_ms) != 0) {
        snprintf(err, errlen, "field \"%s\" must be an RFC 3339 time", key);
        return VC_ERR_INVALID;
    }
    return 0;
}
