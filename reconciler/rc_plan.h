/*
 * The reconciler's planner: from what one pass read (plain structs, no
 * connection) to what it decides, for each voucher: its verdict and the
 * repairs to run, in order. Pure: no I/O and no clock (the caller passes the
 * times in), so every decision is tested from a table (tests/unit) and
 * `voucher-reconciler plan` gives the same decisions for a JSON snapshot
 * (proto/reconciler-plan.md).
 *
 * rc_pass.c reads and calls these in this order, one voucher at a time:
 *
 *   rc_vouchers_add_event()   each event of the tail (step 3)
 *   rc_plan_replay()          the events in flight on the rows, before Redis's orders are read
 *   rc_plan_judge_full()      a voucher read in full: its verdict, the memory carried over
 *   rc_plan_judge_numbers()   a voucher judged by its numbers alone
 *   rc_plan_repairs()         after every voucher is judged: the repairs of one voucher
 *
 * What earlier passes saw (rc_memory_t) is plain data too: the planner reads
 * and updates it, rc_pass.c keeps it across passes.
 */
#ifndef RC_PLAN_H
#define RC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "rc_agg.h"
#include "rc_model.h"
#include "vc_event.h"

/*
 * What earlier passes saw of one voucher, kept across passes: when each
 * unsent hold was first seen (keyed by orderId, and valid only for the same
 * hold: rc_order_same_hold()), and more.
 */
typedef struct {
    char code[VC_CODE_MAX + 1];
    rc_orders_t seen;         /* first_unsent_ms, redis_state, redis_held_until_ms */
    int64_t missing_since_ms; /* when Redis was first seen without the voucher's counter */
    int64_t orders_lost_since_ms; /* when first seen with the counter and no orders hash
                                     (rc_numbers_t.orders_lost) */
    int64_t last_full_ms;     /* monotonic: when the voucher was last read in full */
    /*
     * Orders the last full read saw R in Redis and live in its snapshot
     * (redis_state VC_STATE_RELEASED; 0 once taken again): seen so again, they are
     * revivable (rc_model.h).
     */
    rc_orders_t released_seen;
    int64_t uncounted; /* used_count beyond the live rows at the last full read */
    /*
     * The aggregates a full read last found the voucher consistent with, and
     * their difference, which later passes accept (rc_agg.h, rc_agg_base_t).
     */
    rc_agg_base_t agg_base;
} rc_memory_entry_t;

/* The memory of every active voucher, sorted by code (rc_memory_align()). */
typedef struct rc_memory {
    rc_memory_entry_t *entries;
    size_t len;
} rc_memory_t;

void rc_memory_entry_free(rc_memory_entry_t *e);
/* Frees m and everything in it; NULL is fine. */
void rc_memory_free(rc_memory_t *m);

/* One active voucher, as read in one pass. */
typedef struct {
    char code[VC_CODE_MAX + 1];
    int claimed;        /* voucher.redis_loaded_at is set: Redis had it once */
    int full;           /* read in full this pass: every row, every Redis order (else numbers) */
    /*
     * Busy only with events in flight: read this pass by the orders those
     * events name and the newest holds (rc_plan_judge_targeted()), not in
     * full, unless that read does not settle it.
     */
    int targeted;
    int rows_read;      /* its rows are read (rc_pg_read_rows()) */
    int64_t ends_at_ms; /* voucher.ends_at: its Redis keys expire a retention after it */
    rc_numbers_t n;
    rc_orders_t orders;
    vc_event_t *events; /* its events in flight, in order, replayed once its rows are read */
    size_t nevents, cap;
    /* A targeted read: the newest holds of Redis's holds set, newest first (in orders too). */
    char (*newest)[VC_ORDER_ID_MAX + 1];
    size_t nnewest;
    /*
     * A wave read (rc_wave.h), with a targeted one: the holds due, oldest
     * heldUntil first (in orders too, marked due), and of those the ones no
     * row and no event accounts for, whose uses the balance counts as theirs.
     */
    int wave;
    char (*due)[VC_ORDER_ID_MAX + 1];
    size_t ndue;
    int64_t due_unsent;
    rc_memory_entry_t *mem; /* its entry in the memory, this pass (rc_memory_align()) */
    rc_verdict_t verdict;
    rc_agg_t agg_pg; /* PostgreSQL's aggregate, from the pass's snapshot */
    /*
     * Quiet, with both aggregates read and compared this pass (agg_diff:
     * PostgreSQL's less Redis's): what a full read that finds the voucher
     * consistent remembers (rc_memory_entry_t.agg_base.diff).
     */
    int agg_compared;
    rc_agg_diff_t agg_diff;
    int agg_read;      /* quiet, with Redis's aggregate read this pass into agg_redis */
    rc_agg_t agg_redis;
} rc_voucher_t;

/* The vouchers of one pass, sorted by code in byte order. */
typedef struct {
    rc_voucher_t *v;
    size_t len;
    int nomem; /* an event in flight could not be kept: the pass fails */
    /* The campaigns' events in flight (campaignId set), in order, for rc_campaign_pass(). */
    vc_event_t *campaign_events;
    size_t ncampaign_events, campaign_cap;
} rc_vouchers_t;

/*
 * Makes room for n vouchers (zeroed, with empty order maps). Returns 0 or
 * VC_ERR_NOMEM. The caller frees with rc_vouchers_free().
 */
int rc_vouchers_alloc(rc_vouchers_t *vs, size_t n);
void rc_vouchers_free(rc_vouchers_t *vs);

/* The voucher of this code (a binary search: vs is sorted by code), or NULL. */
rc_voucher_t *rc_vouchers_find(rc_vouchers_t *vs, const char *code);

/*
 * Keeps one event in flight with its voucher (copied); events of vouchers
 * not in vs are ignored. Out of memory sets vs->nomem.
 */
void rc_vouchers_add_event(rc_vouchers_t *vs, const vc_event_t *ev);

/*
 * Lines the memory up with this pass's vouchers, both sorted by code: one
 * entry per voucher, in the same order (new vouchers get an empty one), and
 * the entries of vouchers that left the active window are freed, so the
 * memory does not grow forever. Sets each voucher's mem. Returns 0 or
 * VC_ERR_NOMEM (the memory is then unchanged).
 */
int rc_memory_align(rc_memory_t *m, rc_vouchers_t *vs);

/*
 * Replays v's events in flight on its orders, as the writer will apply them
 * (pg_after; customer, discount and heldUntil where the rows had none).
 * Returns 0 or VC_ERR_NOMEM.
 */
int rc_plan_replay(rc_voucher_t *v);

/*
 * Judges a voucher read in full (rows, events replayed, Redis's orders and
 * counter read at one moment): carries over from v->mem when each unsent hold
 * was first seen and which orders are revivable, judges (rc_model_judge())
 * at now_ms, and remembers for the next pass what it must (v->mem, with
 * last_full_ms = mono_ms). Sets v->verdict. Returns 0 or VC_ERR_NOMEM.
 */
int rc_plan_judge_full(rc_voucher_t *v, int64_t now_ms, int64_t mono_ms, int64_t grace_ms);

/*
 * Judges a voucher whose numbers agree and with nothing under way
 * (rc_model_quiet()), by its numbers alone: what a full read would
 * conclude, uses counted without rows included (the last full read counted
 * them in v->mem; the writer never changes that difference). Sets v->verdict.
 */
void rc_plan_judge_numbers(rc_voucher_t *v);

/*
 * Judges a voucher busy only with events in flight (Redis loaded, no hold
 * due, no release under way, no dead letter parked) from a targeted read:
 * v->orders holds the orders its events name, with their rows (the pass's
 * snapshot) and Redis's values, and the newest holds of Redis's holds set
 * (v->newest, newest first, read with the counter at one moment), with their
 * rows; the events are replayed (rc_plan_replay()). It settles the voucher
 * when the numbers balance:
 *
 *   Redis's taken = used_count + (live after - live now, over the orders
 *                   the events name) + fresh,
 *
 * fresh being the newest holds, not named by an event, that PostgreSQL has
 * no row and no dead letter of, each first seen (v->mem) less than grace_ms
 * ago: holds taken since the tail was read, whose events are on their way
 * (a full read judges them so too). used_count counts the uses without rows
 * (v->mem->uncounted) on both sides, as rc_plan_judge_numbers() takes them.
 * Every order an event names must be in Redis as its replayed row explains:
 * H for RESERVED (C too, a confirm whose event may still come, before
 * heldUntil + grace_ms), C for CONFIRMED, R for RELEASED. Anything else (a
 * negative fresh, a hold of the newest known to PostgreSQL before fresh is
 * found, a hold unsent past the grace, a state its row does not explain, an
 * unreadable value) does not settle it: the caller reads it in full this
 * pass. A hold whose event was lost takes a use no event explains: it is
 * one of fresh until the grace has passed, then the voucher is read in full
 * and the hold released, as a full read every pass would. Drift that cancels
 * out in the counts is left to the periodic full read (full_every_ms).
 * With a wave read (v->wave: rc_wave_judge() settled its due holds first),
 * the due holds no row accounts for (v->due_unsent) are on the right side
 * too, and the walk of the newest passes over the due holds.
 *
 * Returns 1 with v->verdict (consistent, used-without-rows or behind) and
 * v->n set and the fresh holds remembered (v->mem), or 0 (v unchanged but
 * first_unsent_ms of its orders). Pure.
 */
int rc_plan_judge_targeted(rc_voucher_t *v, int64_t now_ms, int64_t grace_ms);

/* The settings the repairs are planned with (rc_config_t's). */
typedef struct {
    int64_t grace_ms;
    int64_t restore_delay_ms;
    int batch; /* most holds expired per voucher per pass */
} rc_plan_config_t;

/* A repair, in the order rc_plan_repairs() lists them. */
typedef enum {
    RC_ACT_AWAIT_RESTORE = 0, /* the counter is lost: wait out the restore delay */
    RC_ACT_RESTORE,           /* restore.lua: rebuild the lost counter */
    RC_ACT_RETAKE,            /* retake.lua: write again what Redis lost, then lower */
    RC_ACT_REBUILD,           /* rebuild.lua: the orders hash lost, the counter kept */
    RC_ACT_LOWER,             /* lower.lua: the counter offers uses that are not there */
    /*
     * Read the releases begun more than a grace ago (at most batch) and
     * publish again each one the pass read X or E (rc_plan_resume_reason()).
     * The set is read from Redis when the repair runs, not planned: a release
     * that finished since must not be published again.
     */
    RC_ACT_RESUME_DUE,
    RC_ACT_RELEASE, /* release_begin.lua: begin a release (why, reason) */
    RC_ACT_CONFIRM, /* repair_confirmed.lua: H -> C */
    /*
     * Publish the VoucherConfirmed of an order Redis confirmed whose own event
     * never reached Kafka (RC_RELEASE_CONFIRM_LOST), with the figures Redis
     * holds for it when the repair runs: PostgreSQL then has it CONFIRMED.
     */
    RC_ACT_PUBLISH_CONFIRM,
    RC_ACT_COUNT,
} rc_action_kind_t;

typedef struct {
    rc_action_kind_t kind;
    rc_order_t *order; /* RELEASE, CONFIRM, PUBLISH_CONFIRM: borrowed from the voucher's orders */
    const char *why;         /* RELEASE: release_begin.lua's why ("expire", ...) */
    const char *reason;      /* RELEASE: the VoucherReleased reason ("EXPIRED", ...) */
} rc_action_t;

/* The repairs of one voucher. rc_plan_free() frees the list. */
typedef struct {
    rc_action_t *items;
    size_t len, cap;
} rc_plan_t;

void rc_plan_free(rc_plan_t *p);

/*
 * Plans the repairs of one judged voucher, at now_ms, for a pass whose
 * snapshot of Kafka began at snapshot_ms (rc_model_release() says why that
 * matters), appending them to plan:
 *
 * - none for a voucher not read in full;
 * - counter lost (not loaded): nothing when Redis never had it (the gateway
 *   loads it on first use); else RESTORE once the pass's snapshot_ms is
 *   restore_delay_ms past when it was first seen missing
 *   (v->mem->missing_since_ms, set here), AWAIT_RESTORE before;
 * - loaded, the orders hash lost (n.orders_lost): REBUILD once the pass's
 *   snapshot_ms is restore_delay_ms past when it was first seen so
 *   (v->mem->orders_lost_since_ms, set here), AWAIT_RESTORE before; nothing
 *   else (no order to release, and a retake would write the live orders
 *   only, forgetting the released ones);
 * - loaded: RETAKE when PostgreSQL counts orders Redis lost or the users hash
 *   lost customers, else LOWER when the counter is above the rule's bound;
 *   then RESUME_DUE, then per order (rc_model_release()) a RELEASE, a
 *   CONFIRM or a PUBLISH_CONFIRM, at most batch expiries.
 *
 * Returns 0 or VC_ERR_NOMEM.
 */
int rc_plan_repairs(rc_voucher_t *v, const rc_plan_config_t *cfg, int64_t now_ms,
                    int64_t snapshot_ms, rc_plan_t *plan);

/*
 * For RC_ACT_RESUME_DUE: the reason to publish again the release of order_id
 * found begun (in the releasing set, past the grace), or NULL when the pass
 * did not read it X or E (a release begun since is its requester's to
 * finish): DISCARDED for a discarded letter, CANCELLED for X, EXPIRED for E.
 */
const char *rc_plan_resume_reason(const rc_voucher_t *v, const char *order_id,
                                  rc_order_t **order);

/*
 * After a retake ran: the orders it took again must be seen R anew by a later
 * pass before they count as revivable again.
 */
void rc_plan_after_retake(rc_voucher_t *v);

/*
 * The periodic full reads of a pass (VOUCHER_RECONCILE_FULL_EVERY): of the n
 * vouchers in due (judged by their numbers, their last full read older than
 * full_every), the budget read in full longest ago get full = 1; the others
 * wait for a later pass. Oldest first: taken in the pass's order, the first
 * ones came due again before the last had their turn, which then never came.
 * Reorders due.
 */
void rc_plan_pick_periodic(rc_voucher_t **due, size_t n, size_t budget);

/*
 * Whether a counter repair writes o again (merge() in remaining_rule.lua): a
 * restore (every_order) merges every order the snapshot knows; a retake those
 * the snapshot counts and Redis lacked when read, or held R and revivable,
 * and those it has released and Redis lacked (written R: released_unknown).
 */
int rc_plan_merges(const rc_order_t *o, int every_order);

/*
 * The value Redis should hold for an order PostgreSQL (after the events in
 * flight) has: "customerId:discount:heldUntilMs:state", state H, C or R.
 */
void rc_plan_order_value(const rc_order_t *o, char *buf, size_t cap);

/*
 * "await-restore", "restore", "retake", "rebuild", "lower", "resume-due", "release", "confirm",
 * "publish-confirm".
 */
const char *rc_action_name(rc_action_kind_t k);

#endif
