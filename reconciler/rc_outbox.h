/*
 * The outbox relay (proto/direct-mode.md, "The outbox"): the acting
 * reconciler publishes the events a direct voucher's transactions wrote into
 * event_outbox. Woken by the NOTIFY each write sends (LISTEN voucher_outbox on
 * the lock's session, rc_ctx_lead()) and on a timer, it takes the unsent rows
 * in id order, produces each keyed by its event_key with the producer of the
 * repairs (idempotent, acks=all), and marks sent only the rows from the first
 * up to the first one Kafka did not acknowledge: that row and every later one
 * stay unsent and are taken again, so a voucher's events reach its partition
 * in the order of their rows, and a crash or an outage re-sends at most what
 * was not marked (the writer verifies a direct voucher's event twice as once).
 * Sent rows are deleted once older than a retention, a bounded batch a wake.
 */
#ifndef RC_OUTBOX_H
#define RC_OUTBOX_H

#include <stdatomic.h>
#include <stdint.h>

#include "rc_pass.h"

typedef struct {
    int64_t poll_ms;      /* relay at least this often, NOTIFY or not */
    int batch;            /* rows taken, produced and marked per round */
    int64_t retention_ms; /* a sent row is deleted this long after it was sent */
    int64_t timeout_ms;   /* how long a round waits for Kafka's delivery reports */
} rc_outbox_config_t;

/* What one relay did (rc_outbox_relay()). */
typedef struct {
    int64_t produced;  /* rows Kafka acknowledged, marked sent */
    int64_t failed;    /* rows taken and not acknowledged: left unsent, taken again later */
    int64_t pruned;    /* sent rows deleted after the retention */
    int64_t unsent;    /* unsent rows left */
    int64_t oldest_ms; /* the age of the oldest of them; 0 when none */
} rc_outbox_result_t;

/* The relay's state between wakes; zero it before the first use. */
typedef struct {
    const rc_outbox_config_t *cfg;
    int64_t last_ms; /* monotonic: when the last relay ran */
    int failing;     /* the last relay failed: the next success is logged */
} rc_outbox_t;

/*
 * How many rows, from the first, Kafka acknowledged: the index of the first
 * delivered[i] that is not 1 (failed, or no report in time), n when all are.
 * Only these are marked sent. Pure.
 */
int rc_outbox_sent_prefix(const int *delivered, int n);

/*
 * One relay, when ctx acts (else nothing, 0): rounds of cfg->batch rows while
 * each is acknowledged whole and full (at most a few rounds, so that a pass is
 * not held off by a long backlog), then the unsent rows counted for the
 * metrics and the sent ones past the retention deleted. The lock is proven
 * before each write (rc_ctx_still_leading()). Fills *res. Returns 0 or a
 * negative error with err set; rows it could not mark stay unsent.
 */
int rc_outbox_relay(rc_ctx_t *ctx, const rc_outbox_config_t *cfg, rc_outbox_result_t *res,
                    char *err, size_t errlen);

/*
 * The time between passes: waits ms (or until *stop is set), relaying on each
 * NOTIFY and every ob->cfg->poll_ms while ctx acts, and sets the metrics. A
 * standby only waits. Returns 1 when the PostgreSQL session broke while it
 * waited on it (the caller logs the loss; the next pass connects again), else 0.
 */
int rc_outbox_idle(rc_ctx_t *ctx, rc_outbox_t *ob, int64_t ms, const atomic_int *stop);

#endif
