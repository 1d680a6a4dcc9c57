/*
 * The reconciler's pass over campaigns (proto/campaigns.md, "The
 * reconciler"): per campaign, numbers only (PostgreSQL's live rows, Redis's
 * taken codes, holds and releases), and the holds past heldUntil + grace
 * expired with a VoucherReleased (EXPIRED) carrying the campaign.
 */
#ifndef RC_CAMPAIGN_H
#define RC_CAMPAIGN_H

#include <stdint.h>

#include "rc_pass.h"
#include "rc_plan.h"

/*
 * Pure: whether a hold may be expired. state and held_until are Redis's;
 * pg_status is PostgreSQL's row ("" for none); in_flight has bit 1 << type
 * set for each event of the order in flight. Expire only a hold nothing
 * downstream confirmed or released, whose reservation is known downstream
 * (a row, or its event in flight), a grace after its heldUntil.
 */
int rc_campaign_may_expire(char state, int64_t held_until, const char *pg_status, int in_flight,
                           int64_t snapshot_ms, int64_t grace_ms);

/*
 * Judges every campaign that may hold uses (ACTIVE or INACTIVE) and, with
 * repair, expires its due holds (at most a batch per campaign a pass). vs
 * holds the campaigns' events in flight read by the pass. Returns 0 or a
 * negative error with err set.
 */
int rc_campaign_pass(rc_ctx_t *ctx, const rc_vouchers_t *vs, int repair, int64_t snapshot_ms,
                     rc_summary_t *sum, char *err, size_t errlen);

#endif
