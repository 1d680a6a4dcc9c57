/*
 * The gateway's writes and reads of PostgreSQL beyond the rules cache, each
 * a blocking call for the threadpool (gw_pg_run): claiming a voucher's first
 * load into Redis, creating a voucher, and changing one.
 */
#ifndef GW_STORE_H
#define GW_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "vc_voucher.h"

struct pg_conn;

/*
 * Claims the first load of code into Redis: sets voucher.redis_loaded_at if
 * it is still NULL. Returns 0 with *total (the total_limit read) and
 * *remaining set by the remaining rule
 * (vc_remaining_bound(): total_limit - max(used_count, live rows), never
 * below 0; the caller then sets the Redis counter with NX), VC_E_REPLAYED when the voucher
 * was loaded before (Redis lost it: the reconciler restores it, since
 * PostgreSQL's count alone misses the events in flight), VC_E_NOT_FOUND, or
 * a negative VC_ERR_* with err set.
 */
int gw_store_claim_load(struct pg_conn *conn, const char *code, int64_t *remaining,
                        int64_t *total, char *err, size_t errlen);

/*
 * Writes v's rules and active over its row (locked by the caller's
 * transaction, which it leaves open); with reload, clears redis_loaded_at so
 * that the next reservation loads the voucher anew. Returns 0, GW_E_LIMIT
 * when PostgreSQL's CHECK refuses the new total (used_count above it), or a
 * negative VC_ERR_* with err set.
 */
int gw_store_update(struct pg_conn *conn, const vc_voucher_t *v, int reload, char *err,
                    size_t errlen);

#endif
