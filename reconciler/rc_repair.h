/*
 * Runs the repairs a plan lists (rc_plan.h) through the Redis scripts, and
 * publishes the releases they begin: the reconciler's hands. Every script
 * checks Redis again as it runs (proto/redis-keys.md, "The reconciler's
 * releases"); a refusal is not an error, the next pass decides again.
 */
#ifndef RC_REPAIR_H
#define RC_REPAIR_H

#include "rc_pass.h"
#include "rc_plan.h"

/* A release begun this pass: its VoucherReleased to publish, then finish. */
typedef struct {
    rc_voucher_t *v;
    vc_event_t ev;
} rc_release_item_t;

typedef struct {
    rc_release_item_t *items;
    size_t len, cap;
} rc_releases_t;

void rc_releases_free(rc_releases_t *rs);

/*
 * Runs the repairs of one voucher, in the plan's order, proving before each
 * that this reconciler still acts (rc_ctx_still_leading()). Releases begun
 * are queued in rs for rc_repair_releases(); sum counts what was done.
 * snapshot_ms is the pass's (rc_model_release()). Returns 0 or a negative
 * error with err set: the pass stops.
 */
int rc_repair_voucher(rc_ctx_t *ctx, rc_voucher_t *v, const rc_plan_t *plan, int64_t snapshot_ms,
                      rc_releases_t *rs, rc_summary_t *sum, char *err, size_t errlen);

/*
 * Publishes the queued releases, then gives back (release_finish.lua) the uses
 * whose events Kafka acknowledged; the others stay begun and are published
 * again by a later pass. Returns 0 or a negative error with err set.
 */
int rc_repair_releases(rc_ctx_t *ctx, rc_releases_t *rs, rc_summary_t *sum, char *err,
                       size_t errlen);

/*
 * Publishes the VoucherConfirmed of an order Redis holds confirmed while
 * PostgreSQL, after the events in flight, has it RESERVED past heldUntil and
 * the grace (rc_model_release()'s RC_RELEASE_CONFIRM_LOST): confirm.lua ran,
 * its confirm answered 503, and its own event never comes. Reads the order
 * and its paid entry again (rc_redis_confirmed()) and publishes only when it
 * is still the C order the pass read (same heldUntil); the event carries the
 * total Redis confirmed it at (paid) and the discount of its value, the
 * confirmed one, or no figures when paid has none (as a confirm without a
 * total). Counted in sum->confirms_published and
 * voucher_reconciler_confirms_published_total only once Kafka acknowledged
 * it; otherwise the next pass publishes it again (the writer applies it once).
 * code is the voucher's code, or with campaign_id > 0 the order's one-time
 * code of that campaign; o is borrowed. Returns 0 or a negative error with
 * err set.
 */
int rc_repair_publish_confirm(rc_ctx_t *ctx, const char *code, int64_t campaign_id,
                              const rc_order_t *o, rc_summary_t *sum, char *err, size_t errlen);

/*
 * A repair script that reads or writes every order of a voucher or campaign
 * (restore, retake, rebuild, lower, campaign_rebuild): rc_redis_eval(), timed.
 * Such a script runs alone in Redis, every other command of every gateway
 * waiting behind it, for a time that grows with the orders (proto/redis-keys.md,
 * "What a repair costs Redis"). Its round trip is observed in
 * voucher_reconciler_repair_script_seconds{kind}, and one of --slow-repair
 * (ctx->cfg->slow_repair_ms) or more is warned of, naming it (of "voucher" or
 * "campaign", and its code or id) and its orders.
 */
int rc_repair_eval(rc_ctx_t *ctx, const char *kind, const char *of, const char *name,
                   size_t orders, const char *script, int nkeys, const char *const *keys, int nargs,
                   const char *const *args, int64_t *status, char *answer, size_t answercap,
                   char *err, size_t errlen);

#endif
