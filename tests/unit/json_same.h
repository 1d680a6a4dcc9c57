/*
 * JSON compared by meaning, for the unit tests: objects as sets of keys
 * (their order is not part of any contract here), arrays in order, numbers
 * by value, strings byte for byte. A test that pins a body or an event to
 * one key order breaks on a harmless reordering; this does not.
 */
#ifndef JSON_SAME_H
#define JSON_SAME_H

#include <string.h>
#include <yajl/yajl_tree.h>

static int json_same_val(yajl_val a, yajl_val b)
{
    if (!a || !b)
        return a == b;
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case yajl_t_string:
        return strcmp(a->u.string, b->u.string) == 0;
    case yajl_t_number:
        if (YAJL_IS_INTEGER(a) && YAJL_IS_INTEGER(b))
            return YAJL_GET_INTEGER(a) == YAJL_GET_INTEGER(b);
        return YAJL_GET_DOUBLE(a) == YAJL_GET_DOUBLE(b);
    case yajl_t_object:
        if (a->u.object.len != b->u.object.len)
            return 0;
        for (size_t i = 0; i < a->u.object.len; i++) {
            const char *path[] = {a->u.object.keys[i], NULL};
            yajl_val other = yajl_tree_get(b, path, yajl_t_any);

            if (!other || !json_same_val(a->u.object.values[i], other))
                return 0;
        }
        return 1;
    case yajl_t_array:
        if (a->u.array.len != b->u.array.len)
            return 0;
        for (size_t i = 0; i < a->u.array.len; i++)
            if (!json_same_val(a->u.array.values[i], b->u.array.values[i]))
                return 0;
        return 1;
    default: /* true, false, null: the type says it all */
        return 1;
    }
}

/* 1 when both parse and mean the same; 0 otherwise (a parse error included). */
static inline int json_same(const char *got, const char *want)
{
    yajl_val a = yajl_tree_parse(got, NULL, 0), b = yajl_tree_parse(want, NULL, 0);
    int same = a && b && json_same_val(a, b);

    yajl_tree_free(a);
    yajl_tree_free(b);
    return same;
}

/* 1 when got is an object holding every key of the object want, with the same values. */
static inline int json_has(const char *got, const char *want)
{
    yajl_val a = yajl_tree_parse(got, NULL, 0), b = yajl_tree_parse(want, NULL, 0);
    int has = a && b && YAJL_IS_OBJECT(a) && YAJL_IS_OBJECT(b);

    for (size_t i = 0; has && i < b->u.object.len; i++) {
        const char *path[] = {b->u.object.keys[i], NULL};
        yajl_val mine = yajl_tree_get(a, path, yajl_t_any);

        has = mine && json_same_val(mine, b->u.object.values[i]);
    }
    yajl_tree_free(a);
    yajl_tree_free(b);
    return has;
}

#define ck_assert_json_has(got, want)                                                              \
    ck_assert_msg(json_has((got), (want)), "JSON lacks %s:\n  got: %s", (want), (got))

#define ck_assert_json_eq(got, want)                                                               \
    ck_assert_msg(json_same((got), (want)), "JSON differs:\n  got:  %s\n  want: %s", (got), (want))

#endif
