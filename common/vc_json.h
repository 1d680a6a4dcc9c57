/*
 * A thin layer over yajl: building JSON with yajl_gen, and reading fields of a
 * parsed object (a tree of yajl_tree's types, built by our own callbacks),
 * with errors that name the field.
 */
#ifndef VC_JSON_H
#define VC_JSON_H

#include <stddef.h>
#include <stdint.h>

/* A JSON writer. Errors are sticky: check once, at vc_jgen_finish(). */
typedef struct {
    void *gen; /* yajl_gen */
    int failed;
} vc_jgen_t;

/* Returns 0 or VC_ERR_NOMEM. */
int vc_jgen_init(vc_jgen_t *g);
void vc_jgen_map_open(vc_jgen_t *g);
void vc_jgen_map_close(vc_jgen_t *g);
void vc_jgen_array_open(vc_jgen_t *g);
void vc_jgen_array_close(vc_jgen_t *g);
void vc_jgen_key(vc_jgen_t *g, const char *key);
void vc_jgen_str(vc_jgen_t *g, const char *s);
void vc_jgen_strn(vc_jgen_t *g, const char *s, size_t len);
void vc_jgen_int(vc_jgen_t *g, int64_t v);
void vc_jgen_bool(vc_jgen_t *g, int v);
void vc_jgen_kv_str(vc_jgen_t *g, const char *key, const char *s);
void vc_jgen_kv_int(vc_jgen_t *g, const char *key, int64_t v);
void vc_jgen_kv_bool(vc_jgen_t *g, const char *key, int v);

/*
 * Hands over the document as a malloc'd NUL-terminated string (the caller
 * frees it) and frees the writer, for documents of no fixed size. Returns 0
 * and sets *out and *len, VC_ERR_NOMEM, or VC_ERR_INVALID as vc_jgen_finish().
 */
int vc_jgen_finish_alloc(vc_jgen_t *g, char **out, size_t *len);

/*
 * Copies the document into buf (NUL-terminated) and frees the writer.
 * Returns 0 and sets *len, VC_ERR_TOO_LARGE if it does not fit, or
 * VC_ERR_INVALID if a call above was out of place.
 */
int vc_jgen_finish(vc_jgen_t *g, char *buf, size_t cap, size_t *len);

/*
 * Hands the document to out(arg, doc, len) without copying it, then frees the
 * writer. Returns out's result, or VC_ERR_INVALID if a call above was out of
 * place (out is not called then).
 */
int vc_jgen_emit(vc_jgen_t *g, int (*out)(void *arg, const char *doc, size_t len), void *arg);

/* Frees the writer without output (for error paths). */
void vc_jgen_free(vc_jgen_t *g);

/*
 * Reads one string out of a large document without building a tree: the
 * value at path (keys of nested objects, NULL-terminated, e.g. {"cgrp",
 * "state", NULL}), copied into out (NUL-terminated, cut to cap-1 bytes). For
 * documents from a trusted source, such as librdkafka's statistics, that
 * are too big for vc_jdoc_parse()'s limits. Returns 0, VC_E_NOT_FOUND when
 * the path is absent or not a string, VC_ERR_INVALID for malformed JSON.
 */
int vc_json_pick_str(const char *json, size_t len, const char *const *path, char *out, size_t cap);

/*
 * ---- A flat object read in one pass ----
 *
 * For a body every request carries (the gateway's reservation): the fields go
 * straight into the caller's slots with yajl's callbacks, without the tree of
 * vc_jdoc_parse() (a dozen small allocations), and yajl's own allocations
 * come from a buffer on the stack. Only the plainest form is read; anything
 * else, valid or not, is the caller's to hand to vc_jdoc_parse(), whose
 * answers word every refusal.
 */
typedef enum {
    VC_JFLAT_INT, /* an int64_t: plain digits, a '-' and at most 18 of them */
    VC_JFLAT_STR, /* a char[cap]: a string without NUL characters shorter than cap */
} vc_jflat_type_t;

/*
 * One field of a flat object: its key, and where in the caller's struct its
 * value goes. Meant for a static const table built with the two macros
 * below, so that a read measures and fills nothing per call.
 */
typedef struct {
    const char *key;
    size_t key_len; /* strlen(key) */
    vc_jflat_type_t type;
    size_t offset; /* of the value's slot in the caller's struct */
    size_t cap;    /* VC_JFLAT_STR: the slot's size */
    /* VC_JFLAT_STR, optional: a value (len bytes) for which it returns 0 is not read. */
    int (*str_ok)(const char *s, size_t len);
} vc_jflat_field_t;

/* Field key (a string literal) into the int64_t member of struct_type. */
#define VC_JFLAT_FIELD_INT(key, struct_type, member)                                               \
    {(key), sizeof(key) - 1, VC_JFLAT_INT, offsetof(struct_type, member), 0, NULL}
/* Field key into the char array member of struct_type, checked by ok (or NULL). */
#define VC_JFLAT_FIELD_STR(key, struct_type, member, ok)                                           \
    {(key), sizeof(key) - 1, VC_JFLAT_STR, offsetof(struct_type, member),                          \
     sizeof(((struct_type *)0)->member), (ok)}

#define VC_JFLAT_MAX_FIELDS 16
#define VC_JFLAT_OTHER 1 /* vc_json_read_flat(): not a document of that shape */

/*
 * Reads json (len bytes, need not be NUL-terminated) when it is one object of
 * exactly the nfields fields (at most VC_JFLAT_MAX_FIELDS, keys unique), each
 * once, in any order, each value of its field's type: 5.0, 1e3, a number of
 * 19 digits or more, null, a boolean, a nested object or array, an unknown
 * or repeated key, a NUL byte and malformed or truncated JSON are not read.
 * The values go into out, the caller's struct that the fields' offsets are
 * of. Returns 0 with every slot written, or VC_JFLAT_OTHER, after which the
 * slots hold whatever was read before the pass stopped (the caller resets
 * them).
 * Never allocates for documents of up to a few kilobytes.
 */
int vc_json_read_flat(const char *json, size_t len, const vc_jflat_field_t *fields,
                      size_t nfields, void *out);

/* A parsed JSON object. */
typedef struct {
    void *root; /* yajl_val */
} vc_jdoc_t;

#define VC_JSON_MAX_DEPTH 16   /* objects and arrays nested deeper are refused */
#define VC_JSON_MAX_MEMBERS 64  /* objects with more fields are refused */

/*
 * Parses json (len bytes, need not be NUL-terminated) and requires an object
 * at the top. Strict: refused with VC_ERR_INVALID and err saying why are
 * comments, a string or key holding a NUL character (raw, or \u0000: every
 * reader measures strings with strlen, so "a\u0000b" would silently become
 * "a"), a key given twice in one object, nesting deeper than
 * VC_JSON_MAX_DEPTH and objects of more than VC_JSON_MAX_MEMBERS fields (so
 * neither building nor freeing the tree recurses without bound, and the
 * duplicate check stays cheap). Returns 0, VC_ERR_INVALID, or VC_ERR_NOMEM.
 * On success the caller must call vc_jdoc_free(); on failure there is nothing
 * to free.
 */
int vc_jdoc_parse(vc_jdoc_t *doc, const char *json, size_t len, char *err, size_t errlen);
void vc_jdoc_free(vc_jdoc_t *doc);

/*
 * Rejects keys not in allowed (NULL-terminated); vc_jdoc_parse() already
 * refused keys given twice. Returns 0 or VC_ERR_INVALID naming the key.
 */
int vc_jdoc_check_keys(const vc_jdoc_t *doc, const char *const *allowed, char *err, size_t errlen);

/* Whether the object has this key (with any value, null included). */
int vc_jdoc_has(const vc_jdoc_t *doc, const char *key);

/*
 * Field readers: each returns 0, or VC_ERR_INVALID with err naming the field
 * when it is missing or of the wrong type. Strings are borrowed from doc.
 */
int vc_jdoc_str(const vc_jdoc_t *doc, const char *key, const char **out, char *err, size_t errlen);
int vc_jdoc_strcpy(const vc_jdoc_t *doc, const char *key, char *out, size_t cap, char *err,
                   size_t errlen);
int vc_jdoc_int(const vc_jdoc_t *doc, const char *key, int64_t *out, char *err, size_t errlen);
/*
 * An integer as JSON Schema reads one (the HTTP bodies of proto/openapi.yaml):
 * any number whose value is whole and within 64 bits, 5.0 and 5e0 too.
 * vc_jdoc_int() takes integer tokens only (the events' codec).
 */
int vc_jdoc_whole(const vc_jdoc_t *doc, const char *key, int64_t *out, char *err, size_t errlen);
/* vc_jdoc_whole() within [lo, hi]: VC_ERR_INVALID otherwise, err naming the field and bounds. */
int vc_jdoc_whole_in(const vc_jdoc_t *doc, const char *key, int64_t lo, int64_t hi, int64_t *out,
                     char *err, size_t errlen);
int vc_jdoc_bool(const vc_jdoc_t *doc, const char *key, int *out, char *err, size_t errlen);

/*
 * Nested values. vc_jdoc_obj() and vc_jdoc_at() give a borrowed object
 * (never vc_jdoc_free() it: it lives as long as doc). vc_jdoc_array() sets
 * *len to the length of the array at key; vc_jdoc_at() and vc_jdoc_str_at()
 * read its element i (an object, a string). Each returns 0, or VC_ERR_INVALID
 * with err naming the field when it is missing or of the wrong type.
 */
int vc_jdoc_obj(const vc_jdoc_t *doc, const char *key, vc_jdoc_t *out, char *err, size_t errlen);
int vc_jdoc_array(const vc_jdoc_t *doc, const char *key, size_t *len, char *err, size_t errlen);
int vc_jdoc_at(const vc_jdoc_t *doc, const char *key, size_t i, vc_jdoc_t *out, char *err,
               size_t errlen);
int vc_jdoc_str_at(const vc_jdoc_t *doc, const char *key, size_t i, const char **out, char *err,
                   size_t errlen);

/* An array of at most cap integers (whole numbers, as vc_jdoc_whole()), copied into out; *n is how many. */
int vc_jdoc_int_array(const vc_jdoc_t *doc, const char *key, int64_t *out, size_t cap, size_t *n,
                      char *err, size_t errlen);
/* An RFC 3339 string; when !required and the key is absent, *out_ms = 0. */
int vc_jdoc_time(const vc_jdoc_t *doc, const char *key, int required, int64_t *out_ms, char *err,
                 size_t errlen);

#endif
