/*
 * The state machine of one redemption as the writer sees it: what each event
 * does to a redemption in a given state. Pure: no server, no library.
 *
 * deploy/sql/003_writer_apply.sql applies the same table inside PostgreSQL
 * (one call per batch); proto/redemption-states.md explains it for people.
 * This copy is the reference the unit tests check the documented decisions
 * against.
 */
#ifndef WR_STATE_H
#define WR_STATE_H

#include "vc_event.h"

/* The status column of voucher_redemption; WR_ST_NONE means no row yet. */
typedef enum {
    WR_ST_NONE = 0,
    WR_ST_RESERVED,
    WR_ST_CONFIRMED,
    WR_ST_RELEASED,
} wr_status_t;

/*
 * What applying an event did. The numeric values are the ones
 * wr_apply_events() returns, so keep them in step with the SQL.
 * X(name, value, text)
 */
#define WR_OUTCOME_MAP(X)                                                                          \
    X(PENDING, 0, "pending")                                                                       \
    X(APPLIED, 1, "applied")                                                                       \
    X(NOOP, 2, "no-op")                                                                            \
    X(EARLY, 3, "early-confirm")                                                                   \
    X(TOMBSTONE, 4, "tombstone")                                                                   \
    X(CONFLICT, 5, "order-conflict")                                                               \
    X(POISON, 6, "poison")

typedef enum {
#define WR_OUTCOME_ENUM(name, value, text) WR_OUT_##name = (value),
    WR_OUTCOME_MAP(WR_OUTCOME_ENUM)
#undef WR_OUTCOME_ENUM
} wr_outcome_t;

/* "applied", "no-op", ...; never NULL. */
const char *wr_outcome_name(int outcome);

/* The decision for one event on one redemption. */
typedef struct {
    wr_status_t next; /* the status after the event */
    int used_delta;   /* what the event does to voucher.used_count: -1, 0 or +1 */
    wr_outcome_t outcome;
} wr_step_t;

/*
 * Decides what event type does to a redemption whose status is cur. The
 * caller has already matched the row by voucher code and orderId (a row of
 * the same orderId under another voucher is WR_OUT_CONFLICT, decided by the
 * caller). Returns the decision; an unknown type or status gives
 * {cur, 0, WR_OUT_POISON}.
 *
 * The status is a function of the set of event types seen, whatever their
 * order or repetition: RELEASED once a release was seen, else CONFIRMED once
 * a confirm was seen, else RESERVED. used_count holds one use exactly while
 * the status is RESERVED or CONFIRMED.
 */
wr_step_t wr_redemption_step(wr_status_t cur, vc_event_type_t type);

/* "RESERVED" etc.; "(none)" for WR_ST_NONE. */
const char *wr_status_name(wr_status_t st);

#endif
