/*
 * The restart fence, the reconciler's side (proto/redis-keys.md, "The restart
 * fence"). A Redis that restarted may have come back without its last writes
 * (appendfsync everysec, a restore from an older copy): uses sold and
 * published would be offered again. Gateways with VOUCHER_REDIS_FENCE on
 * refuse to write to a Redis process until voucher:fence holds its run_id;
 * the acting reconciler writes it there only after the process has been
 * compared with PostgreSQL and Kafka and found clean:
 *
 *   1. a run_id not verified is noted with the time it was first seen;
 *   2. until restore_delay has passed since then, passes run as usual: every
 *      event a gateway produced for a write the old process took is on its
 *      way to Kafka for at most the gateway's delivery timeout, which the
 *      restore delay must exceed (the same reason the restore of a lost
 *      voucher waits it);
 *   3. then every pass reads every voucher and campaign in full and repairs;
 *      the first one that needed no repair towards an oversell (nothing
 *      restored, taken again, lowered or confirmed again, no counter
 *      offering more than its bound, nothing waiting to be restored) is followed by fence.lua's set, which
 *      writes the run_id only if Redis has not restarted again since.
 *
 * Off unless VOUCHER_REDIS_FENCE is on, as the gateways': the full passes of
 * step 3 read every order of every voucher, a burst Redis's other clients
 * would feel after each restart for nothing when no gateway waits for the
 * fence. Only on one Redis node: on a Redis Cluster each master would need a
 * fence of its own (the gateway refuses the fence there; the reconciler
 * skips it).
 */
#ifndef RC_FENCE_H
#define RC_FENCE_H

#include <stdint.h>
#include <stdio.h>

#include "rc_pass.h"
#include "rc_redis.h"

typedef struct {
    int enabled;                /* one node: 1; a Redis Cluster: 0 */
    char run_id[VC_RUN_ID_MAX]; /* the process last found not verified; "" when none */
    int64_t first_seen_ms;      /* vc_time_now_ms() when it was first found so */
    int refused;                /* Redis refused fence.lua (an ACL without +info): said once */
} rc_fence_t;

/*
 * Sets f up: on when on (VOUCHER_REDIS_FENCE) and cfg's Redis is one node
 * (on a cluster it stays off, said once).
 */
void rc_fence_init(rc_fence_t *f, const rc_config_t *cfg, int on);

/*
 * Whether a pass's repairs and verdicts leave nothing that could let Redis
 * offer a use PostgreSQL and Kafka count (step 3 above). A lost confirm
 * published (sum->confirms_published) does not count: there Redis was ahead
 * of PostgreSQL, which a lost write cannot cause. Pure.
 */
int rc_fence_clean(const rc_summary_t *sum);

/*
 * One pass of the acting reconciler (rc_pass() with repairs), the fence's
 * steps around it. With repair 0 or the fence off, rc_pass() alone. Returns
 * 0 or a negative error with err set.
 */
int rc_fence_pass(rc_ctx_t *ctx, rc_fence_t *f, int repair, FILE *table, rc_summary_t *sum,
                  char *err, size_t errlen);

/*
 * For --once: prints whether Redis's current process is verified. Returns 0
 * or a negative error with err set.
 */
int rc_fence_report(rc_ctx_t *ctx, const rc_fence_t *f, FILE *out, char *err, size_t errlen);

#endif
