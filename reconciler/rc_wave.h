/*
 * A wave of holds due (issue 43): a flash sale's holds come due together,
 * hundreds of thousands within minutes, and a voucher with a hold due was
 * read in full on every pass until they were all gone. Instead, a voucher
 * with holds due and no release under way (rc_pass.c, choose_full()) gets a
 * targeted read (rc_plan_judge_targeted()) that also lists the oldest due
 * holds of its holds set, at most a pass's batch, oldest heldUntil first, in
 * the same MULTI (rc_redis_targeted_due()); their rows come from the pass's
 * snapshot with the other orders'. Each is judged by the rule a full read
 * uses (rc_model_release(): it must come out EXPIRE), and the balance counts
 * the uses of those no row accounts for. Settled, the due holds are released
 * in slices, in that order: the release scripts per order, as today (each
 * checks the hold again), the slice's VoucherReleased events published in one
 * batch, then the uses given back. Anything else: the voucher is read in
 * full, as before. proto/redis-keys.md, "A wave of holds due".
 */
#ifndef RC_WAVE_H
#define RC_WAVE_H

#include <stdint.h>

#include "rc_pass.h"
#include "rc_plan.h"

/*
 * Judges the due holds a wave read listed (v->due, in v->orders with their
 * rows and the events in flight replayed), for a pass whose snapshot began at
 * snapshot_ms: each must be held in Redis and expire by rc_model_release()
 * (held past heldUntil + grace_ms, PostgreSQL after the events in flight
 * without a row or RESERVED, no dead letter parked). Sets v->due_unsent to the
 * due holds neither a row nor an event in flight accounts for (their uses are
 * Redis's alone until they expire). Returns 1 when every one does, else 0:
 * the caller reads the voucher in full. Pure.
 */
int rc_wave_judge(rc_voucher_t *v, int64_t snapshot_ms, int64_t grace_ms);

/*
 * After rc_plan_judge_targeted() settled a voucher with a wave read: due
 * holds no row accounts for are uses given back by this pass's repairs
 * (n.stranded, verdict undersold), as a full read would say. Pure.
 */
void rc_wave_settled(rc_voucher_t *v);

/*
 * Releases the due holds of a settled wave read in slices of
 * ctx->cfg->expiry_slice, oldest heldUntil first: per slice, release_begin.lua
 * "expire" on each (refused when the hold changed since the read), the
 * slice's events published, release_finish.lua on each acknowledged one
 * (rc_repair_voucher(), rc_repair_releases()). Between two slices the point
 * "reconciler-expiry-slice" pauses (fault points). *released counts the uses
 * given back. Returns 0 or a negative error with err set: the pass stops.
 */
int rc_wave_release(rc_ctx_t *ctx, rc_voucher_t *v, int64_t snapshot_ms, int64_t *released,
                    rc_summary_t *sum, char *err, size_t errlen);

/* The wave's per-voucher metric: the due holds this pass gave back from a wave read. */
void rc_wave_metrics(const rc_voucher_t *v, int64_t released);

#endif
