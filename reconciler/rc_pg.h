/*
 * The reconciler's PostgreSQL adapter: the one session a reconciler keeps,
 * which holds the advisory lock of the reconciler that acts, and the reads of
 * a pass (one REPEATABLE READ snapshot). Nothing else in the reconciler
 * includes libpq.
 */
#ifndef RC_PG_H
#define RC_PG_H

#include <stddef.h>
#include <stdint.h>

#include "rc_plan.h"

typedef struct rc_pg rc_pg_t;

/*
 * The acting reconciler proves, at most this long before each repair, that
 * its session still holds the lock (rc_pg_holds_lock()); PostgreSQL cannot
 * give the lock away sooner than a silent session's end (rc_pg.c).
 */
#define RC_PROOF_EVERY_MS 1000

/*
 * Opens the session: keepalives and a user timeout on both ends, so that a
 * half-open connection ends (and frees the lock) within RC_SILENCE_MS, and a
 * statement timeout derived from timeout_ms (each call to Redis or Kafka).
 * Returns it (the caller frees with rc_pg_free()) or NULL with err set.
 */
rc_pg_t *rc_pg_connect(const char *dsn, int64_t timeout_ms, char *err, size_t errlen);
void rc_pg_free(rc_pg_t *pg);

/* The session, for a caller that runs its own statements on it (rc_raise.c); borrowed. */
struct pg_conn *rc_pg_conn(rc_pg_t *pg);

/* Whether the session is still up (as libpq last saw it). */
int rc_pg_ok(const rc_pg_t *pg);

/*
 * Tries to take the reconcilers' advisory lock and, when it was taken, adds
 * one to the generation (deploy/sql/018_reconciler_leader.sql) in the same
 * statement: the fencing token of this hold of the lock (rc_leader.h), higher
 * than any earlier holder's. Returns 1 taken, with *generation set; 0 taken
 * by another; or a negative error with err set (the table missing, the
 * role without its grant): the session may hold the lock then, and the
 * caller must close it. Call it only while this session does not hold the
 * lock (a second call would raise the generation again).
 */
int rc_pg_try_lock(rc_pg_t *pg, int64_t *generation, char *err, size_t errlen);

/*
 * Asks PostgreSQL whether this session holds the lock. Returns 1, or 0 with
 * err saying why not (released, or the query failed).
 */
int rc_pg_holds_lock(rc_pg_t *pg, char *err, size_t errlen);

/*
 * Step 2: every active voucher (not ended more than a day ago) and its
 * numbers, into vs (sorted by code in byte order; the caller frees with
 * rc_vouchers_free()). This opens a read-only REPEATABLE READ transaction
 * that stays open until rc_pg_read_rows(): the rows read then, of the
 * vouchers that need them, describe the same moment as these numbers.
 * Returns 0 or a negative error with err set.
 */
int rc_pg_read_vouchers(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen);

/*
 * Step 2 too, in the same snapshot: PostgreSQL's aggregate of every voucher
 * of vs that keeps one (the agg_* columns of 027 not NULL: agg_pg.present),
 * one query (rc_agg.h). Returns 0 or a negative error with err set.
 */
int rc_pg_read_aggregates(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen);

/*
 * Step 2, second half: every row and every parked or discarded dead letter
 * of the vouchers with full set and rows_read not (then set), from the
 * snapshot rc_pg_read_vouchers() took, which stays open (a targeted read may
 * fall back to a full one: rc_pg_read_orders()) until rc_pg_end_snapshot().
 * Their live rows are counted here. Returns 0 or a negative error with err
 * set.
 */
int rc_pg_read_rows(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen);

/*
 * The rows and parked or discarded dead letters of every order in the maps
 * of the vouchers with targeted set (the orders their events in flight name,
 * their newest holds: rc_plan_judge_targeted()), from the same snapshot: one
 * query by orderId. Orders without a row keep pg VC_RD_NONE. Returns 0 or a
 * negative error with err set.
 */
int rc_pg_read_orders(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen);

/* Ends the snapshot rc_pg_read_vouchers() opened (read only: nothing to commit); NULL is fine. */
void rc_pg_end_snapshot(rc_pg_t *pg);

/*
 * The direct vouchers (proto/direct-mode.md; active as rc_pg_read_vouchers()
 * means it), into vs (sorted by code; the caller frees with
 * rc_vouchers_free()): code, total_limit, used_count, the live rows counted
 * (n.live_rows) and the parked dead letters, all read by one statement, so
 * one snapshot. Their rows are never loaded, and vs is never the list a pass
 * reads Redis for: a direct voucher has no Redis keys. Returns 0 or a
 * negative error with err set.
 */
int rc_pg_read_direct(rc_pg_t *pg, rc_vouchers_t *vs, char *err, size_t errlen);

/*
 * One slice of the direct vouchers' expiry: dr_expire() releases up to limit
 * RESERVED rows past held_until + grace_ms at now_ms, with their outbox rows,
 * in one transaction (its own statement). Sets *released to their number.
 * Returns 0 or a negative error with err set.
 */
int rc_pg_expire_direct(rc_pg_t *pg, int limit, int64_t now_ms, int64_t grace_ms, int64_t *released,
                        char *err, size_t errlen);

/* An unsent outbox row (rc_pg_outbox_take()); the strings are owned by the row. */
typedef struct {
    int64_t id;
    char *key;     /* event_key: the voucher's code */
    char *payload; /* the event, as written in the outbox */
    size_t len;
} rc_outbox_row_t;

/*
 * Up to limit unsent outbox rows, in id order (dr_outbox_take()), into
 * *rows (the caller frees with rc_outbox_rows_free()) and *n. Returns 0 or a
 * negative error with err set (*rows NULL, *n 0).
 */
int rc_pg_outbox_take(rc_pg_t *pg, int limit, rc_outbox_row_t **rows, int *n, char *err,
                      size_t errlen);
void rc_outbox_rows_free(rc_outbox_row_t *rows, int n);

/*
 * Marks rows[0..n) sent (dr_outbox_sent()), in one statement. Returns 0 or a
 * negative error with err set.
 */
int rc_pg_outbox_sent(rc_pg_t *pg, const rc_outbox_row_t *rows, int n, char *err, size_t errlen);

/*
 * The unsent rows' number and the age of the oldest in ms (0 when none),
 * from dr_outbox_stats(). Returns 0 or a negative error with err set.
 */
int rc_pg_outbox_stats(rc_pg_t *pg, int64_t *unsent, int64_t *oldest_ms, char *err, size_t errlen);

/*
 * Deletes up to limit rows sent more than retention_ms ago
 * (dr_outbox_prune()), oldest first; *deleted their number. Returns 0 or a
 * negative error with err set.
 */
int rc_pg_outbox_prune(rc_pg_t *pg, int64_t retention_ms, int limit, int64_t *deleted, char *err,
                       size_t errlen);

/*
 * LISTEN voucher_outbox on the session: the NOTIFY every outbox write sends
 * wakes rc_pg_wait_notify(). Only the acting reconciler listens: a session
 * that listens and does not read holds PostgreSQL's notification queue back.
 * Returns 0 or a negative error with err set.
 */
int rc_pg_listen(rc_pg_t *pg, char *err, size_t errlen);

/*
 * Waits up to timeout_ms for a notification on the session (rc_pg_listen())
 * and takes every one that came. Returns 1 when one came, 0 when none did,
 * or VC_ERR_UNAVAILABLE when the session broke.
 */
int rc_pg_wait_notify(rc_pg_t *pg, int64_t timeout_ms);

#endif
