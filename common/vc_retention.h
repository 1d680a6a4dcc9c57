/*
 * The retention of a voucher's Redis keys (proto/redis-keys.md, "Retention"):
 * they expire together at the voucher's endsAt plus VOUCHER_REDIS_RETENTION.
 * One definition of the setting, read by every daemon that writes the keys:
 * the gateway when it loads a voucher and takes a use, the reconciler when it
 * rebuilds them (restore.lua, retake.lua). Both must name the same instant.
 */
#ifndef VC_RETENTION_H
#define VC_RETENTION_H

#include <stdint.h>

#define VC_REDIS_RETENTION_FLAG "redis-retention"
#define VC_REDIS_RETENTION_ENV "VOUCHER_REDIS_RETENTION"
#define VC_REDIS_RETENTION_DEFAULT "72h"
/* 48 h at least: a hold taken just before endsAt (24 h at most) is settled first. */
#define VC_REDIS_RETENTION_MIN_MS 172800000LL
#define VC_REDIS_RETENTION_MAX_MS 31622400000LL
#define VC_REDIS_RETENTION_HELP                                                                    \
    "how long after a voucher's endsAt its Redis keys and its orderIds' claims are kept (the "   \
    "same on every gateway and reconciler)"

/* The instant a voucher's keys expire, ms since the epoch (PXAT, PEXPIREAT). */
static inline int64_t vc_redis_expire_at(int64_t ends_at_ms, int64_t retention_ms)
{
    return ends_at_ms + retention_ms;
}

#endif
