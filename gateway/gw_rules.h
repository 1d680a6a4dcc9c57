/*
 * Voucher rules for the hot path: a per-worker cache of vc_voucher_t keyed
 * by code, filled from PostgreSQL on the libuv threadpool (never on the loop)
 * through a small process-wide pool of connections. Concurrent loads of one
 * code share a single query. Rules past their ttl are still served while a
 * refresh runs in the background (stale-while-revalidate), so a request never
 * waits for PostgreSQL once a code was seen. Unknown codes are remembered
 * briefly, and the cache also remembers which vouchers Redis last said were
 * sold out; a use given back on any worker clears that mark on all of them.
 */
#ifndef GW_RULES_H
#define GW_RULES_H

#include <stdint.h>
#include <uv.h>

#include "vc_voucher.h"

/* gw_rules_get() result: the answer comes later, through the callback. */
#define GW_RULES_PENDING 1000

typedef struct gw_pg_pool gw_pg_pool_t;
typedef struct gw_rules gw_rules_t;

/*
 * A process-wide pool of at most size PostgreSQL connections to dsn
 * (borrowed for the pool's life), opened on first use. NULL when memory runs out.
 */
gw_pg_pool_t *gw_pg_pool_new(const char *dsn, int size);

/* Closes every connection; no load may be running. */
void gw_pg_pool_free(gw_pg_pool_t *pool);

struct pg_conn; /* libpq's PGconn */

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

/*
 * rc is 0 with v set (borrowed until the callback returns), VC_E_NOT_FOUND,
 * or a negative VC_ERR_* when PostgreSQL could not be asked.
 */
typedef void (*gw_rules_cb)(void *arg, int rc, const vc_voucher_t *v);

/*
 * Creates a cache on loop. ttl_ms: how long loaded rules are trusted;
 * miss_ttl_ms: how long an unknown code stays unknown. The pool is borrowed.
 * Returns NULL when memory runs out.
 */
gw_rules_t *gw_rules_new(uv_loop_t *loop, gw_pg_pool_t *pool, int64_t ttl_ms, int64_t miss_ttl_ms);

/*
 * Looks code up. With fresh set, the cache is bypassed and PostgreSQL is
 * read. Returns 0 with *out filled (cb does not run), VC_E_NOT_FOUND (a
 * remembered miss; cb does not run), GW_RULES_PENDING (cb runs exactly once,
 * later), or a negative VC_ERR_* (cb does not run).
 */
int gw_rules_get(gw_rules_t *r, const char *code, int fresh, vc_voucher_t *out, gw_rules_cb cb,
                 void *arg);

/* Remembers that code was sold out as of now, until mono_until_ms (vc_time_mono_ms()). */
void gw_rules_mark_soldout(gw_rules_t *r, const char *code, int64_t mono_until_ms);

/*
 * Forgets the sold-out mark of code (a use came back) on every worker: the
 * marks are per worker, but each one is void once the process-wide clear
 * count of its code's slot moved on (any thread).
 */
void gw_rules_clear_soldout(const char *code);

/* Forgets what the cache knows of code (rules, miss), e.g. after it was created. */
void gw_rules_forget(gw_rules_t *r, const char *code);

/* Whether code is marked sold out at mono_now_ms. */
int gw_rules_soldout(gw_rules_t *r, const char *code, int64_t mono_now_ms);

/* Loads still running (waiting for PostgreSQL). */
long gw_rules_loading(const gw_rules_t *r);

/* Frees the cache now, or once the loads still running are done. */
void gw_rules_free(gw_rules_t *r);

#endif
