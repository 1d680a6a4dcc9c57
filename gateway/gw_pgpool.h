/*
 * The gateway's way to PostgreSQL: a small process-wide pool of connections,
 * and a runner that does blocking libpq work on libuv's threadpool (never on
 * a worker's loop) and reports back on the loop. The rules cache
 * (gw_rules.h) and the stores (gw_store.h) run their queries through it.
 */
#ifndef GW_PGPOOL_H
#define GW_PGPOOL_H

#include <stddef.h>
#include <uv.h>

typedef struct gw_pg_pool gw_pg_pool_t;

/*
 * A process-wide pool of at most size idle PostgreSQL connections to dsn
 * (borrowed for the pool's life), opened on first use. NULL when memory runs out.
 */
gw_pg_pool_t *gw_pg_pool_new(const char *dsn, int size);

/* Closes every connection; no work may be running. */
void gw_pg_pool_free(gw_pg_pool_t *pool);

struct pg_conn; /* libpq's PGconn */

/*
 * A connection of pool for the calling thread (a threadpool thread): an idle
 * one, or a new one. NULL with err set when PostgreSQL cannot be reached.
 */
struct pg_conn *gw_pg_pool_take(gw_pg_pool_t *pool, char *err, size_t errlen);

/* Gives conn back to pool (takes ownership): kept if healthy and there is room, else closed. */
void gw_pg_pool_put(gw_pg_pool_t *pool, struct pg_conn *conn);

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
 * done(arg, rc, err) on the loop. Returns 0 and done runs exactly once, or a
 * negative VC_ERR_* and done never runs. arg is borrowed until done.
 */
int gw_pg_run(uv_loop_t *loop, gw_pg_pool_t *pool, gw_pg_work_fn work, gw_pg_done_cb done,
              void *arg);

#endif
