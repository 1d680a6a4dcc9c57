#include "vc_json.h"
#include "vc_error.h"
#include "vc_time.h"
#include "vc_utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
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

void vc_jgen_array_open(vc_jgen_t *g)
{
    CHECK(g, yajl_gen_array_open(GEN(g)));
}

void vc_jgen_array_close(vc_jgen_t *g)
{
    CHECK(g, yajl_gen_array_close(GEN(g)));
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

int vc_jgen_emit(vc_jgen_t *g, int (*out)(void *arg, const char *doc, size_t len), void *arg)
{
    const unsigned char *doc;
    size_t n;
    int rc;

    if (g->failed || yajl_gen_get_buf(GEN(g), &doc, &n) != yajl_gen_status_ok)
        rc = VC_ERR_INVALID;
    else
        rc = out(arg, (const char *)doc, n);
    vc_jgen_free(g);
    return rc;
}

/* Where vc_jgen_finish() copies to. */
typedef struct {
    char *buf;
    size_t cap, *len;
} copy_to_t;

static int copy_to(void *arg, const char *doc, size_t n)
{
    copy_to_t *c = arg;

    if (n + 1 > c->cap)
        return VC_ERR_TOO_LARGE;
    memcpy(c->buf, doc, n);
    c->buf[n] = '\0';
    *c->len = n;
    return 0;
}

int vc_jgen_finish(vc_jgen_t *g, char *buf, size_t cap, size_t *len)
{
    copy_to_t c = {buf, cap, len};

    return vc_jgen_emit(g, copy_to, &c);
}

/* Where vc_jgen_finish_alloc() copies to. */
typedef struct {
    char **out;
    size_t *len;
} alloc_to_t;

static int alloc_to(void *arg, const char *doc, size_t n)
{
    alloc_to_t *a = arg;

    if (!(*a->out = malloc(n + 1)))
        return VC_ERR_NOMEM;
    memcpy(*a->out, doc, n);
    (*a->out)[n] = '\0';
    *a->len = n;
    return 0;
}

int vc_jgen_finish_alloc(vc_jgen_t *g, char **out, size_t *len)
{
    alloc_to_t a = {out, len};

    *out = NULL;
    return vc_jgen_emit(g, alloc_to, &a);
}

/*
 * The document is built by our own yajl callbacks rather than yajl_tree_parse(),
 * which turns on yajl's comment option and cannot refuse what below must be
 * refused: a document that yajl would read, but whose meaning we would change
 * or could not bound.
 */
typedef struct {
    yajl_val root;
    yajl_val open[VC_JSON_MAX_DEPTH]; /* the containers being filled, outermost first */
    char *key[VC_JSON_MAX_DEPTH];     /* for an object in open[]: the key of its next value */
    int depth;
    int failed; /* err is set: the callback that failed cancelled the parse */
    int nomem;
    char err[192];
} build_t;

/* Frees a value and everything in it; depth is bounded by VC_JSON_MAX_DEPTH. */
static void value_free(yajl_val v)
{
    if (!v)
        return;
    switch (v->type) {
    case yajl_t_string:
        free(v->u.string);
        break;
    case yajl_t_number:
        free(v->u.number.r);
        break;
    case yajl_t_object:
        for (size_t i = 0; i < v->u.object.len; i++) {
            free((char *)v->u.object.keys[i]);
            value_free(v->u.object.values[i]);
        }
        free(v->u.object.keys);
        free(v->u.object.values);
        break;
    case yajl_t_array:
        for (size_t i = 0; i < v->u.array.len; i++)
            value_free(v->u.array.values[i]);
        free(v->u.array.values);
        break;
    default:
        break;
    }
    free(v);
}

/* Cancels the parse with a reason; returns 0, for the callback to return. */
__attribute__((format(printf, 2, 3))) static int refuse(build_t *b, const char *fmt, ...)
{
    va_list ap;

    if (!b->failed) {
        va_start(ap, fmt);
        vsnprintf(b->err, sizeof(b->err), fmt, ap);
        va_end(ap);
    }
    b->failed = 1;
    return 0;
}

static int out_of_memory(build_t *b)
{
    b->nomem = 1;
    return refuse(b, "out of memory");
}

/*
 * Puts v (owned) where the document is now: the root, the next element of an
 * array, or the value of the pending key of an object. Returns 1, or 0 with
 * v freed when memory runs out.
 */
static int attach(build_t *b, yajl_val v)
{
    yajl_val parent;

    if (b->depth == 0) {
        b->root = v;
        return 1;
    }
    parent = b->open[b->depth - 1];
    if (parent->type == yajl_t_array) {
        yajl_val *values =
            realloc(parent->u.array.values, (parent->u.array.len + 1) * sizeof(*values));
        if (!values)
            goto nomem;
        parent->u.array.values = values;
        values[parent->u.array.len++] = v;
        return 1;
    } else {
        size_t n = parent->u.object.len;
        const char **keys = realloc(parent->u.object.keys, (n + 1) * sizeof(*keys));
        yajl_val *values;
        if (!keys)
            goto nomem;
        parent->u.object.keys = keys;
        if (!(values = realloc(parent->u.object.values, (n + 1) * sizeof(*values))))
            goto nomem;
        parent->u.object.values = values;
        keys[n] = b->key[b->depth - 1];
        values[n] = v;
        b->key[b->depth - 1] = NULL;
        parent->u.object.len = n + 1;
        return 1;
    }
nomem:
    value_free(v);
    return out_of_memory(b);
}

static yajl_val value_new(yajl_type type)
{
    yajl_val v = calloc(1, sizeof(*v));
    if (v)
        v->type = type;
    return v;
}

static int scalar(build_t *b, yajl_type type)
{
    yajl_val v = value_new(type);
    return v ? attach(b, v) : out_of_memory(b);
}

static int on_null(void *ctx)
{
    return scalar(ctx, yajl_t_null);
}

static int on_boolean(void *ctx, int boolean)
{
    return scalar(ctx, boolean ? yajl_t_true : yajl_t_false);
}

/* Keeps the text, and says whether it is an integer of 64 bits and a double, as yajl_tree does. */
static int on_number(void *ctx, const char *s, size_t len)
{
    build_t *b = ctx;
    yajl_val v = value_new(yajl_t_number);
    char *end;

    if (!v || !(v->u.number.r = malloc(len + 1))) {
        free(v);
        return out_of_memory(b);
    }
    memcpy(v->u.number.r, s, len);
    v->u.number.r[len] = '\0';
    errno = 0;
    v->u.number.i = strtoll(v->u.number.r, &end, 10);
    if (errno == 0 && *end == '\0')
        v->u.number.flags |= YAJL_NUMBER_INT_VALID;
    errno = 0;
    v->u.number.d = strtod(v->u.number.r, &end);
    if (errno == 0 && *end == '\0')
        v->u.number.flags |= YAJL_NUMBER_DOUBLE_VALID;
    return attach(b, v);
}

/*
 * yajl decodes \u0000 into a NUL byte, and every reader of a field measures
 * it with strlen(): "nul\u0000tail" would silently become "nul". Refused,
 * as bytes that are not UTF-8 and that yajl's check lets through (an
 * overlong C1 BB): written back, they would not be the same string.
 */
static int on_string(void *ctx, const unsigned char *s, size_t len)
{
    build_t *b = ctx;
    yajl_val v;

    if (memchr(s, '\0', len)) {
        if (b->depth > 0 && b->key[b->depth - 1])
            return refuse(b, "field \"%.*s\" contains a NUL character (\\u0000)",
                          vc_utf8_quote_len(b->key[b->depth - 1], 64), b->key[b->depth - 1]);
        return refuse(b, "a string contains a NUL character (\\u0000)");
    }
    if (!vc_utf8_valid((const char *)s, len)) {
        if (b->depth > 0 && b->key[b->depth - 1])
            return refuse(b, "field \"%.*s\" is not valid UTF-8",
                          vc_utf8_quote_len(b->key[b->depth - 1], 64), b->key[b->depth - 1]);
        return refuse(b, "a string is not valid UTF-8");
    }
    if (!(v = value_new(yajl_t_string)) || !(v->u.string = malloc(len + 1))) {
        free(v);
        return out_of_memory(b);
    }
    memcpy(v->u.string, s, len);
    v->u.string[len] = '\0';
    return attach(b, v);
}

/* Opens an object or array, at most VC_JSON_MAX_DEPTH deep. */
static int open_container(build_t *b, yajl_type type)
{
    yajl_val v;

    if (b->depth >= VC_JSON_MAX_DEPTH)
        return refuse(b, "nested deeper than %d levels", VC_JSON_MAX_DEPTH);
    if (!(v = value_new(type)))
        return out_of_memory(b);
    if (!attach(b, v))
        return 0;
    b->open[b->depth] = v;
    b->key[b->depth] = NULL;
    b->depth++;
    return 1;
}

static int on_start_map(void *ctx)
{
    return open_container(ctx, yajl_t_object);
}

static int on_start_array(void *ctx)
{
    return open_container(ctx, yajl_t_array);
}

static int on_end(void *ctx)
{
    build_t *b = ctx;
    b->depth--;
    return 1;
}

/*
 * A key given twice would leave its meaning to whichever reader looks first:
 * refused. Objects are bounded to VC_JSON_MAX_MEMBERS, which keeps this
 * check (linear per key) cheap on any input.
 */
static int on_map_key(void *ctx, const unsigned char *s, size_t len)
{
    build_t *b = ctx;
    yajl_val obj = b->open[b->depth - 1];
    char *key;

    if (memchr(s, '\0', len))
        return refuse(b, "a key contains a NUL character (\\u0000)");
    if (obj->u.object.len >= VC_JSON_MAX_MEMBERS)
        return refuse(b, "an object has more than %d fields", VC_JSON_MAX_MEMBERS);
    for (size_t i = 0; i < obj->u.object.len; i++) {
        const char *k = obj->u.object.keys[i];
        if (strlen(k) == len && memcmp(k, s, len) == 0)
            return refuse(b, "field \"%.*s\" given twice", vc_utf8_quote_len(k, 64), k);
    }
    if (!(key = malloc(len + 1)))
        return out_of_memory(b);
    memcpy(key, s, len);
    key[len] = '\0';
    b->key[b->depth - 1] = key;
    return 1;
}

static const yajl_callbacks build_callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

int vc_jdoc_parse(vc_jdoc_t *doc, const char *json, size_t len, char *err, size_t errlen)
{
    build_t b;
    yajl_handle h;
    yajl_status st;
    int rc = 0;

    doc->root = NULL;
    if (memchr(json, '\0', len)) {
        snprintf(err, errlen, "malformed JSON: contains a NUL byte");
        return VC_ERR_INVALID;
    }
    memset(&b, 0, sizeof(b));
    /* Comments stay off (yajl's default), and so do trailing garbage and several values. */
    if (!(h = yajl_alloc(&build_callbacks, NULL, &b)))
        return VC_ERR_NOMEM;
    st = yajl_parse(h, (const unsigned char *)json, len);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    if (st != yajl_status_ok) {
        if (b.failed) {
            snprintf(err, errlen, "malformed JSON: %s", b.err);
            rc = b.nomem ? VC_ERR_NOMEM : VC_ERR_INVALID;
        } else {
            /* yajl's message spans lines and quotes the input: keep its first line. */
            unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)json, len);
            char *nl = msg ? strchr((char *)msg, '\n') : NULL;
            if (nl)
                *nl = '\0';
            snprintf(err, errlen, "malformed JSON: %s", msg && *msg ? (char *)msg : "empty input");
            if (msg)
                yajl_free_error(h, msg);
            rc = VC_ERR_INVALID;
        }
    } else if (!b.root) {
        snprintf(err, errlen, "malformed JSON: empty input");
        rc = VC_ERR_INVALID;
    } else if (!YAJL_IS_OBJECT(b.root)) {
        snprintf(err, errlen, "malformed JSON: expected an object");
        rc = VC_ERR_INVALID;
    }
    yajl_free(h);
    if (rc != 0) {
        /* Keys read but not yet attached belong to no value. */
        for (int i = 0; i < VC_JSON_MAX_DEPTH; i++)
            free(b.key[i]);
        value_free(b.root);
        return rc;
    }
    doc->root = b.root;
    return 0;
}

/* vc_json_pick_str(): walks the events, following path while the keys match. */
typedef struct {
    const char *const *path;
    int plen;
    int depth;   /* how many objects we are inside */
    int matched; /* how many leading keys of path the enclosing objects matched */
    int at_key;  /* the last key read matched path[depth - 1] at this depth */
    char *out;
    size_t cap;
    int found;
} pick_t;

/* A value (or the start of a container) after the key at this depth. */
static int pick_value(pick_t *k)
{
    k->at_key = 0;
    return 1;
}

static int pick_null(void *ctx)
{
    return pick_value(ctx);
}

static int pick_bool(void *ctx, int b)
{
    (void)b;
    return pick_value(ctx);
}

static int pick_number(void *ctx, const char *s, size_t len)
{
    (void)s;
    (void)len;
    return pick_value(ctx);
}

static int pick_string(void *ctx, const unsigned char *s, size_t len)
{
    pick_t *k = ctx;

    if (k->at_key && k->depth == k->plen && k->matched == k->plen - 1) {
        size_t n = len < k->cap - 1 ? len : k->cap - 1;
        memcpy(k->out, s, n);
        k->out[n] = '\0';
        k->found = 1;
        return 0; /* stop: found */
    }
    return pick_value(k);
}

static int pick_start_map(void *ctx)
{
    pick_t *k = ctx;

    /* Entering the object that a matching key opens: one more key of path matched. */
    if (k->at_key)
        k->matched = k->depth;
    k->depth++;
    k->at_key = 0;
    return 1;
}

static int pick_end_map(void *ctx)
{
    pick_t *k = ctx;

    /* Leaving a matched object: its key no longer counts. */
    k->depth--;
    if (k->matched > k->depth - 1)
        k->matched = k->depth > 0 ? k->depth - 1 : 0;
    k->at_key = 0;
    return 1;
}

static int pick_start_array(void *ctx)
{
    pick_t *k = ctx;

    /* Arrays are not on any path: their objects never match. */
    k->depth += 1000;
    k->at_key = 0;
    return 1;
}

static int pick_end_array(void *ctx)
{
    pick_t *k = ctx;

    k->depth -= 1000;
    k->at_key = 0;
    return 1;
}

static int pick_key(void *ctx, const unsigned char *s, size_t len)
{
    pick_t *k = ctx;
    const char *want;

    k->at_key = 0;
    if (k->depth < 1 || k->depth > k->plen || k->matched != k->depth - 1)
        return 1;
    want = k->path[k->depth - 1];
    k->at_key = strlen(want) == len && memcmp(want, s, len) == 0;
    return 1;
}

static const yajl_callbacks pick_callbacks = {
    .yajl_null = pick_null,
    .yajl_boolean = pick_bool,
    .yajl_number = pick_number,
    .yajl_string = pick_string,
    .yajl_start_map = pick_start_map,
    .yajl_map_key = pick_key,
    .yajl_end_map = pick_end_map,
    .yajl_start_array = pick_start_array,
    .yajl_end_array = pick_end_array,
};

int vc_json_pick_str(const char *json, size_t len, const char *const *path, char *out, size_t cap)
{
    pick_t k;
    yajl_handle h;
    yajl_status st;

    memset(&k, 0, sizeof(k));
    k.path = path;
    while (path[k.plen])
        k.plen++;
    k.out = out;
    k.cap = cap;
    if (k.plen == 0 || cap == 0)
        return VC_E_NOT_FOUND;
    if (!(h = yajl_alloc(&pick_callbacks, NULL, &k)))
        return VC_ERR_NOMEM;
    st = yajl_parse(h, (const unsigned char *)json, len);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    yajl_free(h);
    if (k.found)
        return 0;
    return st == yajl_status_ok ? VC_E_NOT_FOUND : VC_ERR_INVALID;
}

/*
 * ---- vc_json_read_flat(): the callbacks stop the pass (return 0) on
 * anything it leaves to vc_jdoc_parse() ----
 */

#define FLAT_ARENA 4096 /* yajl's handle, lexer, stack and string buffer fit */

typedef struct {
    const vc_jflat_field_t *fields;
    size_t nfields;
    unsigned char *out;           /* the caller's struct */
    const vc_jflat_field_t *next; /* the field whose value comes next */
    uint32_t seen;                /* bit i: fields[i] was given */
    int depth;
    size_t used; /* bytes of arena handed out */
    _Alignas(max_align_t) unsigned char arena[FLAT_ARENA];
} flat_t;

/* Each block of the arena starts with its size, so realloc knows what to copy. */
#define FLAT_HDR ((sizeof(size_t) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

static int in_arena(const flat_t *f, const void *p)
{
    return (const unsigned char *)p >= f->arena && (const unsigned char *)p < f->arena + FLAT_ARENA;
}

/* From the arena while it lasts, then from the heap (freed by flat_free). */
static void *flat_malloc(void *ctx, size_t n)
{
    flat_t *f = ctx;
    size_t need = (FLAT_HDR + n + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    unsigned char *p;

    if (n > FLAT_ARENA || need > FLAT_ARENA - f->used)
        return malloc(n);
    p = f->arena + f->used + FLAT_HDR;
    memcpy(p - sizeof(size_t), &n, sizeof(n));
    f->used += need;
    return p;
}

static void flat_free(void *ctx, void *p)
{
    if (p && !in_arena(ctx, p))
        free(p); /* a block of the arena goes with the parse */
}

static void *flat_realloc(void *ctx, void *p, size_t n)
{
    size_t old;
    void *q;

    if (!p)
        return flat_malloc(ctx, n);
    if (!in_arena(ctx, p))
        return realloc(p, n);
    memcpy(&old, (unsigned char *)p - sizeof(size_t), sizeof(old));
    if (n <= old)
        return p;
    if ((q = flat_malloc(ctx, n)))
        memcpy(q, p, old);
    return q;
}

/* A number of plain digits (with a '-'), at most 18 of them, so it fits 64 bits. */
static int flat_int(const char *s, size_t len, int64_t *out)
{
    size_t i = s[0] == '-';
    int64_t v = 0;

    if (len == i || len - i > 18)
        return 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = s[0] == '-' ? -v : v;
    return 1;
}

static int flat_stop(void *ctx)
{
    (void)ctx;
    return 0;
}

static int flat_bool(void *ctx, int b)
{
    (void)b;
    return flat_stop(ctx);
}

/* The field whose value this is, once: a value belongs to the key before it. */
static const vc_jflat_field_t *flat_take(flat_t *f, vc_jflat_type_t type)
{
    const vc_jflat_field_t *field = f->next;

    f->next = NULL;
    return f->depth == 1 && field && field->type == type ? field : NULL;
}

static int flat_number(void *ctx, const char *s, size_t len)
{
    flat_t *f = ctx;
    const vc_jflat_field_t *field = flat_take(f, VC_JFLAT_INT);
    int64_t v;

    if (!field || !flat_int(s, len, &v))
        return 0;
    memcpy(f->out + field->offset, &v, sizeof(v));
    return 1;
}

static int flat_string(void *ctx, const unsigned char *s, size_t len)
{
    flat_t *f = ctx;
    const vc_jflat_field_t *field = flat_take(f, VC_JFLAT_STR);
    char *slot;

    /* A NUL (from \u0000) cuts the value, bytes not UTF-8 change it: vc_jdoc_parse() refuses both. */
    if (!field || len >= field->cap || memchr(s, '\0', len) ||
        !vc_utf8_valid((const char *)s, len) ||
        (field->str_ok && !field->str_ok((const char *)s, len)))
        return 0;
    slot = (char *)f->out + field->offset;
    memcpy(slot, s, len);
    slot[len] = '\0';
    return 1;
}

static int flat_start_map(void *ctx)
{
    flat_t *f = ctx;
    return f->depth++ == 0;
}

static int flat_end_map(void *ctx)
{
    flat_t *f = ctx;
    f->depth--;
    return 1;
}

static int flat_key(void *ctx, const unsigned char *s, size_t len)
{
    flat_t *f = ctx;

    for (size_t i = 0; i < f->nfields; i++)
        if (f->fields[i].key_len == len && memcmp(s, f->fields[i].key, len) == 0) {
            if (f->seen & (UINT32_C(1) << i))
                return 0; /* given twice */
            f->seen |= UINT32_C(1) << i;
            f->next = &f->fields[i];
            return 1;
        }
    return 0;
}

static const yajl_callbacks flat_callbacks = {
    .yajl_null = flat_stop,
    .yajl_boolean = flat_bool,
    .yajl_number = flat_number,
    .yajl_string = flat_string,
    .yajl_start_map = flat_start_map,
    .yajl_map_key = flat_key,
    .yajl_end_map = flat_end_map,
    .yajl_start_array = flat_stop,
    .yajl_end_array = flat_stop,
};

int vc_json_read_flat(const char *json, size_t len, const vc_jflat_field_t *fields, size_t nfields,
                      void *out)
{
    flat_t f;
    yajl_alloc_funcs af = {flat_malloc, flat_realloc, flat_free, &f};
    yajl_handle h;
    int ok;

    VC_ASSERT(nfields > 0 && nfields <= VC_JFLAT_MAX_FIELDS);
    /* A raw NUL byte: vc_jdoc_parse() refuses it before yajl sees it. */
    if (memchr(json, '\0', len))
        return VC_JFLAT_OTHER;
    f.fields = fields;
    f.nfields = nfields;
    f.out = out;
    f.next = NULL;
    f.seen = 0;
    f.depth = 0;
    f.used = 0;
    if (!(h = yajl_alloc(&flat_callbacks, &af, &f)))
        return VC_JFLAT_OTHER;
    ok = yajl_parse(h, (const unsigned char *)json, len) == yajl_status_ok &&
         yajl_complete_parse(h) == yajl_status_ok;
    yajl_free(h);
    return ok && f.seen == (UINT32_C(1) << nfields) - 1 ? 0 : VC_JFLAT_OTHER;
}

void vc_jdoc_free(vc_jdoc_t *doc)
{
    value_free((yajl_val)doc->root);
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
            snprintf(err, errlen, "unknown field \"%.*s\"", vc_utf8_quote_len(key, 64), key);
            return VC_ERR_INVALID;
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

/* The error of a field that holds no integer vc_jdoc_int() or vc_jdoc_whole() takes. */
static int not_integer(yajl_val v, const char *key, char *err, size_t errlen)
{
    snprintf(err, errlen,
             YAJL_IS_NUMBER(v) ? "field \"%s\" must be a whole number within 64 bits"
                               : "field \"%s\" must be an integer",
             key);
    return VC_ERR_INVALID;
}

int vc_jdoc_int(const vc_jdoc_t *doc, const char *key, int64_t *out, char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);
    if (!v)
        return missing(key, err, errlen);
    if (!YAJL_IS_INTEGER(v))
        return not_integer(v, key, err, errlen);
    *out = YAJL_GET_INTEGER(v);
    return 0;
}

static int whole_number(const char *s, int64_t *out);

int vc_jdoc_int_array(const vc_jdoc_t *doc, const char *key, int64_t *out, size_t cap, size_t *n,
                      char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);

    if (!v)
        return missing(key, err, errlen);
    if (!YAJL_IS_ARRAY(v)) {
        snprintf(err, errlen, "field \"%s\" must be an array of integers", key);
        return VC_ERR_INVALID;
    }
    if (v->u.array.len > cap) {
        snprintf(err, errlen, "field \"%s\" has more than %zu entries", key, cap);
        return VC_ERR_INVALID;
    }
    for (size_t i = 0; i < v->u.array.len; i++) {
        yajl_val e = v->u.array.values[i];

        /* Integers as JSON Schema reads them (5.0 too), as vc_jdoc_whole(). */
        if (!YAJL_IS_NUMBER(e) || !e->u.number.r || whole_number(e->u.number.r, &out[i]) != 0) {
            snprintf(err, errlen, "field \"%s\" must be an array of integers (entry %zu is not)",
                     key, i);
            return VC_ERR_INVALID;
        }
    }
    *n = v->u.array.len;
    return 0;
}

/*
 * The integer a JSON number's text names, when it names one: JSON Schema's
 * "integer" is any number whose fraction is zero, so 5, 5.0, 5.00 and 0.5e1
 * are all 5. Returns 0 with *out set, or -1 when the number has a fraction or
 * lies outside 64 bits. The text is yajl's own (a valid JSON number).
 */
static int whole_number(const char *s, int64_t *out)
{
    char digits[64];
    size_t n = 0, lead;
    long point, exp = 0;
    int neg = *s == '-', zero = 1;
    uint64_t v = 0, limit;

    s += neg;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n == sizeof(digits))
            return -1; /* more than 64 digits before the point: past 64 bits */
        zero &= *s == '0';
        digits[n++] = *s;
    }
    point = (long)n;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++) {
            zero &= *s == '0';
            if (n < sizeof(digits))
                digits[n++] = *s;
            else if (*s != '0')
                return -1; /* a digit this far right is never cancelled within 64 bits */
        }
    }
    if (zero) {
        *out = 0;
        return 0;
    }
    if (*s == 'e' || *s == 'E') {
        exp = strtol(s + 1, NULL, 10);
        if (exp > 64 || exp < -64)
            return -1; /* a non-zero value: past 64 bits, or a fraction */
    }
    point += exp;
    /* Every digit at or after the point must be 0. */
    for (long i = point < 0 ? 0 : point; i < (long)n; i++)
        if (digits[i] != '0')
            return -1;
    for (lead = 0; lead < n && (long)lead < point && digits[lead] == '0'; lead++)
        ;
    if (point - (long)lead > 19)
        return -1;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (long i = (long)lead; i < point; i++) {
        unsigned d = i < (long)n ? (unsigned)(digits[i] - '0') : 0;
        if (v > (limit - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int vc_jdoc_whole(const vc_jdoc_t *doc, const char *key, int64_t *out, char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);
    if (!v)
        return missing(key, err, errlen);
    if (!YAJL_IS_NUMBER(v) || !v->u.number.r || whole_number(v->u.number.r, out) != 0)
        return not_integer(v, key, err, errlen);
    return 0;
}

int vc_jdoc_whole_in(const vc_jdoc_t *doc, const char *key, int64_t lo, int64_t hi, int64_t *out,
                     char *err, size_t errlen)
{
    int rc = vc_jdoc_whole(doc, key, out, err, errlen);

    if (rc != 0)
        return rc;
    if (*out < lo || *out > hi) {
        if (hi == INT64_MAX)
            snprintf(err, errlen, "field \"%s\" must be at least %lld", key, (long long)lo);
        else
            snprintf(err, errlen, "field \"%s\" must be within %lld..%lld", key, (long long)lo,
                     (long long)hi);
        return VC_ERR_INVALID;
    }
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

/*
 * The value at key when its type is one of a or b; else NULL with err saying
 * the field is missing or must be what.
 */
static yajl_val typed(const vc_jdoc_t *doc, const char *key, yajl_type a, yajl_type b,
                      const char *what, char *err, size_t errlen)
{
    yajl_val v = lookup(doc, key);

    if (!v) {
        missing(key, err, errlen);
        return NULL;
    }
    if (v->type != a && v->type != b) {
        snprintf(err, errlen, "field \"%s\" must be %s", key, what);
        return NULL;
    }
    return v;
}

int vc_jdoc_bool(const vc_jdoc_t *doc, const char *key, int *out, char *err, size_t errlen)
{
    yajl_val v = typed(doc, key, yajl_t_true, yajl_t_false, "true or false", err, errlen);
    if (!v)
        return VC_ERR_INVALID;
    *out = YAJL_IS_TRUE(v);
    return 0;
}

int vc_jdoc_obj(const vc_jdoc_t *doc, const char *key, vc_jdoc_t *out, char *err, size_t errlen)
{
    yajl_val v = typed(doc, key, yajl_t_object, yajl_t_object, "an object", err, errlen);
    if (!v)
        return VC_ERR_INVALID;
    out->root = v;
    return 0;
}

int vc_jdoc_array(const vc_jdoc_t *doc, const char *key, size_t *len, char *err, size_t errlen)
{
    yajl_val v = typed(doc, key, yajl_t_array, yajl_t_array, "an array", err, errlen);
    if (!v)
        return VC_ERR_INVALID;
    *len = v->u.array.len;
    return 0;
}

/* Element i of the array at key when its type is t; else NULL with err set. */
static yajl_val element(const vc_jdoc_t *doc, const char *key, size_t i, yajl_type t,
                        const char *what, char *err, size_t errlen)
{
    size_t len;
    yajl_val v;

    if (vc_jdoc_array(doc, key, &len, err, errlen) != 0)
        return NULL;
    if (i >= len) {
        snprintf(err, errlen, "field \"%s\" has no element %zu", key, i);
        return NULL;
    }
    v = lookup(doc, key)->u.array.values[i];
    if (v->type != t) {
        snprintf(err, errlen, "field \"%s\"[%zu] must be %s", key, i, what);
        return NULL;
    }
    return v;
}

int vc_jdoc_at(const vc_jdoc_t *doc, const char *key, size_t i, vc_jdoc_t *out, char *err,
               size_t errlen)
{
    yajl_val v = element(doc, key, i, yajl_t_object, "an object", err, errlen);
    if (!v)
        return VC_ERR_INVALID;
    out->root = v;
    return 0;
}

int vc_jdoc_str_at(const vc_jdoc_t *doc, const char *key, size_t i, const char **out, char *err,
                   size_t errlen)
{
    yajl_val v = element(doc, key, i, yajl_t_string, "a string", err, errlen);
    if (!v)
        return VC_ERR_INVALID;
    *out = YAJL_GET_STRING(v);
    return 0;
}
