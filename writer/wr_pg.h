/*
 * The writer's PostgreSQL adapter: applies a batch of decoded events with
 * wr_apply_events() (deploy/sql/003_writer_apply.sql) in one transaction,
 * and isolates the events that can never apply. The only writer file that
 * speaks libpq. Blocking, except that a statement is sent and its result
 * taken in two calls (wr_pg_send, wr_pg_finish).
 */
#ifndef WR_PG_H
#define WR_PG_H

#include <stddef.h>

#include "wr_batch.h"

typedef struct wr_pg wr_pg_t;

/*
 * Creates the adapter for dsn (a libpq conninfo string, copied) and connects.
 * Returns 0, VC_ERR_NOMEM, VC_ERR_UNAVAILABLE (the server cannot be reached
 * now: *out is still set and wr_pg_send() reconnects), or VC_ERR_INVALID
 * when the database lacks wr_apply_events() (err says which migration).
 * The caller owns *out (wr_pg_close).
 */
int wr_pg_open(wr_pg_t **out, const char *dsn, char *err, size_t errlen);

void wr_pg_close(wr_pg_t *pg);

/*
 * Applies msgs[0..n) (each decoded, in partition order) in one transaction,
 * in two halves, so the caller can work while PostgreSQL does:
 *
 * wr_pg_send() reconnects if needed and sends the batch's statement. Returns
 * 0, or VC_ERR_UNAVAILABLE (err says why; nothing is then in flight).
 *
 * wr_pg_wait() says whether the result came (1), waiting at most timeout_ms
 * (0: do not wait); a broken connection counts as come.
 *
 * wr_pg_finish() takes the result and sets each message's outcome:
 * WR_OUT_APPLIED, WR_OUT_NOOP, WR_OUT_EARLY, WR_OUT_TOMBSTONE, or
 * WR_OUT_CONFLICT, WR_OUT_MISMATCH (a direct voucher's event its row does not
 * bear out) and WR_OUT_POISON (with dlt_class and error set) for the
 * ones to dead-letter, isolated under savepoints when the statement failed.
 * Returns 0 once the transaction committed, or VC_ERR_UNAVAILABLE when it did
 * not and trying the same batch again later may succeed (err says why);
 * nothing of the batch is then visible.
 *
 * Between send and finish the messages may move in memory (finish gets them
 * again, in the same order) but their events must not change, and nothing
 * else may use the adapter. The messages stay owned by the caller.
 */
/*
 * Checks, without blocking when it is healthy, that the session is alive:
 * an idle session has nothing to read, so data or an end of stream on its
 * socket means the server went away (a killed postmaster, a restart). A
 * session found dead, or missing, is made again (which blocks up to the
 * connect timeout). While a statement is in flight its result tells, and
 * this returns 0. Returns 0, or VC_ERR_UNAVAILABLE / VC_ERR_INVALID with err
 * set.
 */
int wr_pg_check(wr_pg_t *pg, char *err, size_t errlen);

int wr_pg_send(wr_pg_t *pg, wr_msg_t **msgs, size_t n, char *err, size_t errlen);
int wr_pg_wait(wr_pg_t *pg, int timeout_ms);
/* The socket a result in flight comes on (to wait on several adapters at once), or -1. */
int wr_pg_socket(const wr_pg_t *pg);
int wr_pg_finish(wr_pg_t *pg, wr_msg_t **msgs, size_t n, char *err, size_t errlen);

/*
 * Parks msgs[0..n), which the dead-letter topic dlt_topic acknowledged (or
 * refused even as a reference: dlt_form WR_DLT_LOST), read from topic: one
 * dead_letter row each (deploy/sql/009, wr_dlt_park()), in one transaction.
 * A letter already recorded for the same original is left as it is. Call it
 * before storing the batch's offsets: a crash before it reads the batch
 * again, dead-letters its poison again and parks it then. Returns 0, or
 * VC_ERR_UNAVAILABLE (err says why; nothing parked: try the batch again).
 */
int wr_pg_park(wr_pg_t *pg, wr_msg_t *const *msgs, size_t n, const char *topic,
               const char *dlt_topic, char *err, size_t errlen);

/*
 * The dead-letter class for a permanent error text as vc_pg_error_text()
 * writes it ("SQLSTATE: message"): WR_DLT_UNKNOWN_VOUCHER, WR_DLT_CONSTRAINT
 * or WR_DLT_REJECTED. Pure.
 */
const char *wr_pg_dlt_class(const char *error_text);

#endif
