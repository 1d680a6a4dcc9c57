/*
 * The Redis steps of PATCH /vouchers/{code}, blocking, for the libuv
 * threadpool: they run while the gateway holds the voucher's row lock and
 * its limit lock in PostgreSQL (gw_admin.c), which a loop callback cannot
 * hold. One short-lived connection per change: changes are rare, and the
 * hot path's connections (gw_redis.h) never wait for them.
 */
#ifndef GW_LIMIT_H
#define GW_LIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "vc_model.h"

/*
 * The blocking client itself (vc_redis_block.h): on a cluster each step goes
 * to the master of the keys it touches, the voucher's slot or a claim's.
 */
typedef struct vc_redis_block gw_limit_redis_t;

/*
 * Connects to url (VOUCHER_REDIS_URL, with its credentials), each command
 * bounded by timeout_ms: one node, or a Redis Cluster whose masters each step
 * reaches by the slot of the keys it touches (vc_redis_block.h). With fence
 * (VOUCHER_REDIS_FENCE), only to a Redis process the reconciler verified
 * (proto/redis-keys.md, "The restart fence"). Returns a connection (owned:
 * gw_limit_close()), or NULL with err set.
 */
gw_limit_redis_t *gw_limit_connect(const char *url, int64_t timeout_ms, int fence, char *err,
                                   size_t errlen);
void gw_limit_close(gw_limit_redis_t *r);

/* What limit.lua said (its answers, proto/redis-model.json). */
enum {
    GW_LIMIT_MOVED = VC_LIMIT_DONE,
    GW_LIMIT_NOT_LOADED = VC_LIMIT_COUNTER_MISSING,
    GW_LIMIT_TOO_LOW = VC_LIMIT_BELOW_ZERO
};

/*
 * Runs limit.lua for code: moves the counter by want minus the total it
 * reflects (the limit key, else base). Returns 0 with *status one of the
 * GW_LIMIT_* values, *remaining the counter after (before, for TOO_LOW) and
 * *before the total the counter reflected; or a negative VC_ERR_* with err.
 */
int gw_limit_move(gw_limit_redis_t *r, const char *code, int64_t base, int64_t want, int *status,
                  int64_t *remaining, int64_t *before, char *err, size_t errlen);

/*
 * WAIT replicas timeout_ms on the connection the last step ran on (the
 * voucher's master after gw_limit_move()): 0 when that many replicas
 * acknowledged its writes in time; VC_ERR_UNAVAILABLE when fewer did, or a
 * negative VC_ERR_* of the WAIT itself, with err set.
 */
int gw_limit_wait(gw_limit_redis_t *r, int64_t replicas, int64_t timeout_ms, char *err,
                  size_t errlen);

/*
 * Moves the expiry of every key of code, and of the claims of its orders,
 * to expire_at_ms when that is later (PEXPIREAT GT): a voucher whose endsAt
 * moved later keeps its orders and claims for the retention after the new
 * end (proto/redis-keys.md, "Retention"). Returns 0 or a negative VC_ERR_*.
 */
int gw_limit_extend(gw_limit_redis_t *r, const char *code, int64_t expire_at_ms, char *err,
                    size_t errlen);

/*
 * Tells every gateway that code's rules changed: PUBLISH on the channel the
 * listeners of gw_notify.h read. Returns 0 or a negative VC_ERR_*.
 */
int gw_limit_publish(gw_limit_redis_t *r, const char *code, char *err, size_t errlen);

/*
 * Reads the counter (*has_remaining 0 when it is missing) and the number of
 * holds of code. Returns 0 or a negative VC_ERR_*.
 */
int gw_limit_counters(gw_limit_redis_t *r, const char *code, int *has_remaining,
                      int64_t *remaining, int64_t *holds, char *err, size_t errlen);

#endif
