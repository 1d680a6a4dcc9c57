/*
 * Voucher rules for the hot path: a per-worker cache of vc_voucher_t keyed
 * by code, filled from PostgreSQL on the libuv threadpool (never on the loop)
 * through the runner of gw_pgrun.h and the process-wide pool. Concurrent
 * loads of one code share a single query, and at most max_loads queries of a
 * worker run at once; the others wait in a bounded queue. Rules past their ttl are still
 * served while a refresh runs in the background (stale-while-revalidate), so
 * a request never waits for PostgreSQL once a code was seen.
 *
 * The codes are chosen by clients, so the cache is built to survive a flood
 * of unknown ones: the hash is keyed (vc_hash.h), unknown codes are kept in
 * a negative cache of their own, bounded, least recently used out first, and
 * known vouchers in another, so misses never push a real voucher out and a
 * full cache evicts instead of refusing. The sold-out marks are kept
 * apart, in gw_soldout.h.
 */
#ifndef GW_RULES_H
#define GW_RULES_H

#include <stdint.h>
#include <uv.h>

#include "gw_pgrun.h"
#include "vc_voucher.h"

/* gw_rules_get() result: the answer comes later, through the callback. */
#define GW_RULES_PENDING 1000

/* The bounds of one worker's cache (deploy/README.md, "The rules cache"). */
#define GW_RULES_MAX_KNOWN 32768  /* vouchers PostgreSQL has */
#define GW_RULES_MAX_UNKNOWN 8192 /* codes PostgreSQL does not have, or not read yet */
#define GW_RULES_MAX_QUEUED 1024  /* loads waiting for one of the max_loads slots */

typedef struct gw_rules gw_rules_t;

/*
 * rc is 0 with v set (borrowed until the callback returns), VC_E_NOT_FOUND,
 * or a negative VC_ERR_* when PostgreSQL could not be asked.
 */
typedef void (*gw_rules_cb)(void *arg, int rc, const vc_voucher_t *v);

/*
 * Creates a cache on loop. ttl_ms: how long loaded rules are trusted;
 * miss_ttl_ms: how long an unknown code stays unknown; max_loads: how many
 * of its queries may run at once (at least 1). The pool is borrowed (NULL
 * for a cache that never loads, in tests). Returns NULL when memory runs out.
 */
gw_rules_t *gw_rules_new(uv_loop_t *loop, gw_pg_pool_t *pool, int64_t ttl_ms, int64_t miss_ttl_ms,
                         int max_loads);

/*
 * Looks code up. With fresh set, the cache is bypassed and PostgreSQL is
 * read. Returns 0 with *out filled (cb does not run), VC_E_NOT_FOUND (a
 * remembered miss; cb does not run), GW_RULES_PENDING (cb runs exactly once,
 * later), or a negative VC_ERR_* (cb does not run): VC_ERR_UNAVAILABLE when
 * the queue of loads is full.
 */
int gw_rules_get(gw_rules_t *r, const char *code, int fresh, vc_voucher_t *out, gw_rules_cb cb,
                 void *arg);

/*
 * Says that code's rules changed in PostgreSQL (any thread): no worker of this
 * process serves rules of code read before this call; the next lookup reads
 * them anew, and waits for them. A load already running when this is called
 * still answers the requests that joined it.
 */
void gw_rules_changed(const char *code);

/* As gw_rules_changed(), for every code (changes of other gateways may have been missed). */
void gw_rules_changed_all(void);

/* Loads still running (waiting for PostgreSQL), and loads queued behind them. */
long gw_rules_loading(const gw_rules_t *r);
long gw_rules_queued(const gw_rules_t *r);

/* Entries kept: vouchers known to PostgreSQL, and the others (misses, not read yet). */
long gw_rules_known(const gw_rules_t *r);
long gw_rules_unknown(const gw_rules_t *r);

/*
 * A stand-in for PostgreSQL in tests: reads code's rules into *out on a
 * threadpool thread; returns 0, VC_E_NOT_FOUND or a negative VC_ERR_*.
 */
typedef int (*gw_rules_loader_fn)(const char *code, vc_voucher_t *out, char *err, size_t errlen);

/* Makes r read through loader instead of its pool (before any lookup). */
void gw_rules_set_loader(gw_rules_t *r, gw_rules_loader_fn loader);

/*
 * Frees the cache now, or once the loads still running are done. Requests
 * queued for a load get VC_ERR_SHUTDOWN through their callback.
 */
void gw_rules_free(gw_rules_t *r);

#endif
