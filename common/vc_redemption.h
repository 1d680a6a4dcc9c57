/*
 * The state machine of one redemption: what each event does to a redemption
 * in a given state. The one source of truth for the transitions: the
 * reconciler replays the events in flight with it (rc_order_apply()), and
 * tests/integration/test_redemption_oracle.sh runs every apply path of the
 * writer's SQL on a real PostgreSQL, every state with every event, against
 * it. proto/redemption-states.md explains it for people. Pure.
 */
#ifndef VC_REDEMPTION_H
#define VC_REDEMPTION_H

#include "vc_event.h"

/* The status column of voucher_redemption; VC_RD_NONE means no row yet. */
typedef enum {
    VC_RD_NONE = 0,
    VC_RD_RESERVED,
    VC_RD_CONFIRMED,
    VC_RD_RELEASED,
    VC_RD_STATUS_COUNT,
} vc_rd_status_t;

/*
 * What applying an event did. The numeric values are the ones the writer's
 * SQL (wr_apply_events() and the functions it calls) returns per event.
 * PENDING, CONFLICT and POISON are the writer's, not the table's: not yet
 * applied, an orderId taken by another voucher, an event that cannot apply.
 * X(name, value, text)
 */
#define VC_RD_OUTCOME_MAP(X)                                                                       \
    X(PENDING, 0, "pending")                                                                       \
    X(APPLIED, 1, "applied")                                                                       \
    X(NOOP, 2, "no-op")                                                                            \
    X(EARLY, 3, "early-confirm")                                                                   \
    X(TOMBSTONE, 4, "tombstone")                                                                   \
    X(CONFLICT, 5, "order-conflict")                                                               \
    X(POISON, 6, "poison")                                                                         \
    X(MISMATCH, 7, "direct-mismatch")

typedef enum {
#define VC_RD_OUTCOME_ENUM(name, value, text) VC_RD_OUT_##name = (value),
    VC_RD_OUTCOME_MAP(VC_RD_OUTCOME_ENUM)
#undef VC_RD_OUTCOME_ENUM
} vc_rd_outcome_t;

/* The decision for one event on one redemption. */
typedef struct {
    vc_rd_status_t next; /* the status after the event */
    int used_delta;      /* what the event does to voucher.used_count: -1, 0 or +1 */
    vc_rd_outcome_t outcome;
} vc_rd_step_t;

/*
 * Decides what event type does to a redemption whose status is cur (the row
 * matched by voucher code and orderId; a row of the same orderId under
 * another voucher is the caller's CONFLICT). An unknown type or status gives
 * {cur, 0, VC_RD_OUT_POISON}.
 *
 * The status is a function of the set of event types seen, whatever their
 * order or repetition: RELEASED once a release was seen, else CONFIRMED once
 * a confirm was seen, else RESERVED. used_count holds one use exactly while
 * the status is RESERVED or CONFIRMED.
 */
vc_rd_step_t vc_rd_step(vc_rd_status_t cur, vc_event_type_t type);

/* Whether a redemption in status s holds a use (counted in used_count). */
int vc_rd_counts(vc_rd_status_t s);

/* "RESERVED", "CONFIRMED", "RELEASED"; "(none)" for VC_RD_NONE, "(invalid)" otherwise. */
const char *vc_rd_status_name(vc_rd_status_t st);

/* The status named s ("RESERVED", ...; as PostgreSQL stores it), or VC_RD_NONE. */
vc_rd_status_t vc_rd_status_parse(const char *s);

/* "applied", "no-op", ...; "unknown" for a value outside the map. */
const char *vc_rd_outcome_name(int outcome);

#endif
