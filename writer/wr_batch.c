#include "wr_batch.h"
#include "wr_dlt.h"
#include "wr_state.h"

#include "vc_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wr_msg_decode(wr_msg_t *m)
{
    int rc;

    if (!m->payload) {
        m->decoded = 0;
        m->outcome = WR_OUT_POISON;
        m->dlt_class = WR_DLT_MALFORMED;
        snprintf(m->error, sizeof(m->error), "empty message");
        return VC_ERR_INVALID;
    }
    rc = vc_event_decode(m->payload, m->len, &m->ev, m->error, sizeof(m->error));
    if (rc != 0) {
        m->decoded = 0;
        m->outcome = WR_OUT_POISON;
        m->dlt_class = WR_DLT_MALFORMED;
        return VC_ERR_INVALID;
    }
    m->decoded = 1;
    m->outcome = WR_OUT_PENDING;
    m->error[0] = '\0';
    return 0;
}

void wr_queue_init(wr_queue_t *q, wr_release_cb release_cb)
{
    memset(q, 0, sizeof(*q));
    q->release_cb = release_cb;
}

static void release(wr_queue_t *q, wr_msg_t *m)
{
    if (q->release_cb && m->handle)
        q->release_cb(m->handle);
    m->handle = NULL;
}

void wr_queue_free(wr_queue_t *q)
{
    for (size_t i = 0; i < q->len; i++)
        release(q, &q->items[q->head + i]);
    free(q->items);
    memset(q, 0, sizeof(*q));
}

wr_msg_t *wr_queue_push(wr_queue_t *q)
{
    wr_msg_t *m;

    if (q->head + q->len == q->cap) {
        if (q->head > 0) {
            /* Slide the live messages to the front before growing. */
            memmove(q->items, q->items + q->head, q->len * sizeof(*q->items));
            q->head = 0;
        }
        if (q->len == q->cap) {
            size_t cap = q->cap ? q->cap * 2 : 256;
            wr_msg_t *items = realloc(q->items, cap * sizeof(*items));
            if (!items)
                return NULL;
            q->items = items;
            q->cap = cap;
        }
    }
    m = &q->items[q->head + q->len++];
    memset(m, 0, sizeof(*m));
    m->timestamp_ms = -1;
    return m;
}

wr_msg_t *wr_queue_at(wr_queue_t *q, size_t i)
{
    VC_ASSERT(i < q->len);
    return &q->items[q->head + i];
}

void wr_queue_drop_front(wr_queue_t *q, size_t n)
{
    VC_ASSERT(n <= q->len);
    for (size_t i = 0; i < n; i++)
        release(q, &q->items[q->head + i]);
    q->head += n;
    q->len -= n;
    if (q->len == 0)
        q->head = 0;
}

size_t wr_queue_drop_partitions(wr_queue_t *q, int (*revoked)(void *ctx, int32_t partition),
                                void *ctx)
{
    size_t kept = 0, dropped = 0;

    for (size_t i = 0; i < q->len; i++) {
        wr_msg_t *m = &q->items[q->head + i];
        if (revoked(ctx, m->partition)) {
            release(q, m);
            dropped++;
            continue;
        }
        if (kept != i)
            q->items[q->head + kept] = *m;
        kept++;
    }
    q->len = kept;
    if (q->len == 0)
        q->head = 0;
    return dropped;
}

int wr_queue_positions(wr_queue_t *q, size_t n, wr_position_t *out, size_t cap)
{
    size_t count = 0, j;

    VC_ASSERT(n <= q->len);
    for (size_t i = 0; i < n; i++) {
        const wr_msg_t *m = &q->items[q->head + i];
        for (j = 0; j < count; j++)
            if (out[j].partition == m->partition)
                break;
        if (j == count) {
            if (count == cap)
                return VC_ERR_TOO_LARGE;
            out[count].partition = m->partition;
            out[count].next_offset = m->offset + 1;
            count++;
        } else if (m->offset + 1 > out[j].next_offset) {
            out[j].next_offset = m->offset + 1;
        }
    }
    return (int)count;
}

static int bisect(size_t lo, size_t hi, wr_try_cb try_cb, wr_poison_cb poison_cb, void *ctx)
{
    char err[WR_ERR_MAX];
    size_t mid;
    int rc;

    if (lo == hi)
        return 0;
    err[0] = '\0';
    rc = try_cb(ctx, lo, hi, err, sizeof(err));
    if (rc != VC_ERR_INVALID)
        return rc;
    if (hi - lo == 1) {
        poison_cb(ctx, lo, err);
        return 0;
    }
    mid = lo + (hi - lo) / 2;
    if ((rc = bisect(lo, mid, try_cb, poison_cb, ctx)) != 0)
        return rc;
    return bisect(mid, hi, try_cb, poison_cb, ctx);
}

int wr_bisect(size_t n, wr_try_cb try_cb, wr_poison_cb poison_cb, void *ctx)
{
    return bisect(0, n, try_cb, poison_cb, ctx);
}
