/*
 * The gateway's connections to PostgreSQL: a small process-wide pool, taken
 * from and given back to on libuv's threadpool. Work reaches it through the
 * runner of gw_pgrun.h, which the rules cache (gw_rules.h), the stores
 * (gw_store.h) and the admin routes use.
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

#endif
