/* The reconciler's growing arrays (events in flight, repairs, releases). */
#ifndef RC_GROW_H
#define RC_GROW_H

#include <stdlib.h>

#include "vc_error.h"

/*
 * Makes room for one more item of size bytes in *items (len used of *cap),
 * doubling from first. Returns 0, or VC_ERR_NOMEM with the array unchanged.
 */
static inline int rc_grow(void **items, size_t *cap, size_t len, size_t size, size_t first)
{
    size_t want;
    void *grown;

    if (len < *cap)
        return 0;
    want = *cap ? *cap * 2 : first;
    if (!(grown = realloc(*items, want * size)))
        return VC_ERR_NOMEM;
    *items = grown;
    *cap = want;
    return 0;
}

#endif
