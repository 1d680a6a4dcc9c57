/*
 * The runner of blocking PostgreSQL work: libpq calls run on libuv's
 * threadpool (never on a worker's loop) with a connection of the pool
 * (gw_pgpool.h), and their outcome comes back on the loop.
 */
#ifndef GW_PGRUN_H
#define GW_PGRUN_H

#include <stddef.h>
#include <uv.h>

#include "gw_pgpool.h"

/*
 * Work run on the threadpool with a pooled connection (blocking libpq is fine
 * there). Returns 0, a positive domain outcome, or a negative VC_ERR_* with
 * err set.
 */
typedef int (*gw_pg_work_fn)(void *arg, struct pg_conn *conn, char *err, size_t errlen);

/* The outcome of a gw_pg_run() on the loop: rc as work returned, err its detail. */
typedef void (*gw_pg_done_cb)(void *arg, int rc, const char *err);

/*
 * Runs work(arg, conn) on loop's threadpool with a connection of pool, then
 * done(arg, rc, err) on the loop: rc VC_ERR_SHUTDOWN when the loop cancelled
 * the work, VC_ERR_UNAVAILABLE when no connection could be had. Returns 0 and
 * done runs exactly once, or a negative VC_ERR_* and done never runs. arg is
 * borrowed until done. pool may be NULL: work then runs with conn NULL (a
 * stand-in for PostgreSQL in tests).
 */
int gw_pg_run(uv_loop_t *loop, gw_pg_pool_t *pool, gw_pg_work_fn work, gw_pg_done_cb done,
              void *arg);

#endif
