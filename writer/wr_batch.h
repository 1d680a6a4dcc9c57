/*
 * The writer's in-memory side of a batch: the messages taken from Kafka in
 * the order they arrived, the batch cut from the front of that queue, and
 * the bisection that isolates a poison event. Pure: no server, no library
 * headers; the Kafka adapter fills wr_msg_t and keeps its own message in
 * `handle`.
 */
#ifndef WR_BATCH_H
#define WR_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"

#define WR_ERR_MAX 256

/* One consumed message and what became of it. */
typedef struct {
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* the message's timestamp, or -1 */
    const void *key;      /* borrowed from handle */
    size_t key_len;
    const void *payload; /* borrowed from handle */
    size_t len;
    void *handle; /* the adapter's message; released by the queue's release_cb */

    int decoded; /* 1 when ev holds the decoded event */
    vc_event_t ev;
    int outcome;            /* wr_outcome_t after the batch was applied */
    const char *dlt_class;  /* for WR_OUT_POISON, _CONFLICT, _MISMATCH: a WR_DLT_* name */
    int dlt_form;           /* a wr_dlt_form_t: how much of it the dead letter holds */
    int32_t dlt_partition;  /* where the dead-letter topic stored it, once acknowledged */
    int64_t dlt_offset;     /* -1 until then */
    /* The header dlt-replayed-from ("voucher-events.dlt/P/O") of a replayed event, or "". */
    char replayed_from[96];
    char error[WR_ERR_MAX]; /* why, for the dead-letter headers and the log */
} wr_msg_t;

/*
 * Decodes m->payload into m->ev. On failure marks m poison (class
 * "malformed") with the decoder's message. Returns 0 or VC_ERR_INVALID.
 */
int wr_msg_decode(wr_msg_t *m);

/* Releases the adapter's message behind a wr_msg_t. */
typedef void (*wr_release_cb)(void *handle);

/*
 * A FIFO of messages in arrival order. Messages of one partition keep their
 * offset order, and batches are always cut from the front, so the writer
 * never applies a later event of a partition before an earlier one.
 */
typedef struct {
    wr_msg_t *items;
    size_t head, len, cap;
    wr_release_cb release_cb; /* may be NULL */
} wr_queue_t;

void wr_queue_init(wr_queue_t *q, wr_release_cb release_cb);

/* Releases every message and the storage. */
void wr_queue_free(wr_queue_t *q);

/*
 * Appends a zeroed slot and returns it (owned by the queue; valid until the
 * next push or removal), or NULL when out of memory.
 */
wr_msg_t *wr_queue_push(wr_queue_t *q);

/* The i-th message from the front (i < len). */
wr_msg_t *wr_queue_at(wr_queue_t *q, size_t i);

/* Releases and removes the first n messages (n <= len). */
void wr_queue_drop_front(wr_queue_t *q, size_t n);

/*
 * Releases and removes every message of the partitions for which
 * revoked(ctx, partition) is true, keeping the order of the rest. Used when
 * partitions are taken away: their unapplied messages will be read again
 * from the committed offset by whoever owns them next. Returns the count.
 */
size_t wr_queue_drop_partitions(wr_queue_t *q, int (*revoked)(void *ctx, int32_t partition),
                                void *ctx);

/* The highest offset per partition in msgs[0..n), for storing offsets. */
typedef struct {
    int32_t partition;
    int64_t next_offset; /* the last applied offset + 1 */
} wr_position_t;

/*
 * Fills out (room for cap entries) with one entry per partition that has a
 * message in the first n messages of q, each holding that partition's last
 * offset + 1. Returns the number of entries, or VC_ERR_TOO_LARGE when cap is
 * too small.
 */
int wr_queue_positions(wr_queue_t *q, size_t n, wr_position_t *out, size_t cap);

/*
 * Tries to apply items [lo, hi) as one unit. Returns 0 (applied), or
 * VC_ERR_INVALID when the range holds an event that can never apply (the
 * attempt must then have left no trace), or another negative error to stop.
 */
typedef int (*wr_try_cb)(void *ctx, size_t lo, size_t hi, char *err, size_t errlen);

/* Records that item i can never apply, with the reason from the try. */
typedef void (*wr_poison_cb)(void *ctx, size_t i, const char *err);

/*
 * Applies items [0, n) in order through try_cb, isolating the ones that can
 * never apply: a failing range is split in two halves and each is tried in
 * turn, left first, down to single items, which go to poison_cb. Items
 * before and after a poison one are still applied, in their order.
 * A poison item costs about 2*log2(n) extra tries.
 *
 * Returns 0, or the first error from try_cb other than VC_ERR_INVALID (the
 * caller then rolls back everything). Neither callback runs after an error.
 */
int wr_bisect(size_t n, wr_try_cb try_cb, wr_poison_cb poison_cb, void *ctx);

#endif
