#include "rc_pass.h"
#include "rc_campaign.h"
#include "rc_raise.h"
#include "rc_pg.h"
#include "rc_repair.h"
#include "rc_table.h"
#include "rc_wave.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_retention.h"
#include "vc_time.h"

#include <stdlib.h>
#include <string.h>

/*
 * This reconciler no longer acts: the lock went, or will go, with the
 * session, which is closed; its scripts carry no token any more.
 */
static void stop_acting(rc_ctx_t *ctx)
{
    rc_pg_free(ctx->pg);
    ctx->pg = NULL;
    ctx->leader = 0;
    ctx->generation = 0;
    if (ctx->redis)
        rc_redis_lead(ctx->redis, 0);
}

int rc_ctx_connect(rc_ctx_t *ctx, char *err, size_t errlen)
{
    if (ctx->pg && !rc_pg_ok(ctx->pg))
        stop_acting(ctx); /* the lock went with the session */
    if (!ctx->pg &&
        !(ctx->pg = rc_pg_connect(ctx->cfg->pg_dsn, ctx->cfg->timeout_ms, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->redis) {
        if (!(ctx->redis =
                  rc_redis_connect(ctx->cfg->redis_url, ctx->cfg->timeout_ms, err, errlen)))
            return VC_ERR_UNAVAILABLE;
        rc_redis_lead(ctx->redis, ctx->leader ? ctx->generation : 0);
        rc_redis_set_wait(ctx->redis, ctx->cfg->redis_wait_replicas,
                          ctx->cfg->redis_wait_timeout_ms);
    }
    if (!ctx->kafka &&
        !(ctx->kafka = rc_kafka_new(ctx->cfg->kafka_brokers, ctx->cfg->kafka_extra,
                                    ctx->cfg->writer_group, ctx->cfg->topic, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->memory && !(ctx->memory = calloc(1, sizeof(*ctx->memory)))) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    return 0;
}

void rc_ctx_close(rc_ctx_t *ctx)
{
    rc_pg_free(ctx->pg);
    rc_redis_free(ctx->redis);
    rc_kafka_free(ctx->kafka);
    rc_memory_free(ctx->memory);
    ctx->pg = NULL;
    ctx->redis = NULL;
    ctx->kafka = NULL;
    ctx->memory = NULL;
    ctx->leader = 0;
    ctx->generation = 0;
}

int rc_ctx_pg_ok(const rc_ctx_t *ctx)
{
    return rc_pg_ok(ctx->pg);
}

int rc_ctx_lead(rc_ctx_t *ctx)
{
    int64_t sent = vc_time_mono_ms();
    char err[256];
    int rc;

    if (!rc_pg_ok(ctx->pg))
        return ctx->leader = 0;
    if (ctx->leader)
        return 1;
    if ((rc = rc_pg_try_lock(ctx->pg, &ctx->generation, err, sizeof(err))) < 0) {
        /* The session may hold the lock without a token: closed, it frees it. */
        vc_warn("cannot take the lock with a new generation (%s): not acting (is "
                "deploy/sql/018_reconciler_leader.sql applied?)",
                err);
        stop_acting(ctx);
        return 0;
    }
    ctx->leader = rc == 1;
    if (ctx->leader) {
        ctx->proven_ms = sent;
        if (ctx->redis)
            rc_redis_lead(ctx->redis, ctx->generation);
        vc_info("took the lock: generation %lld, the fencing token of this reconciler's "
                "scripts (proto/redis-keys.md, \"Leadership and fencing\")",
                (long long)ctx->generation);
        /* The outbox relay's wake-up (rc_outbox.h); without it, its timer still relays. */
        if (rc_pg_listen(ctx->pg, err, sizeof(err)) != 0)
            vc_warn("cannot LISTEN voucher_outbox (%s): the outbox is relayed on the timer only",
                    err);
    }
    return ctx->leader;
}

int rc_ctx_refused(rc_ctx_t *ctx, int rc, const char *err)
{
    if (rc != VC_ERR_STALE_LEADER)
        return rc;
    vc_warn("a newer reconciler holds the lock (%s): stopped acting with generation %lld; "
            "the next pass tries to take the lock again",
            err, (long long)ctx->generation);
    stop_acting(ctx);
    return rc;
}

int rc_ctx_still_leading(rc_ctx_t *ctx, char *err, size_t errlen)
{
    int64_t sent = vc_time_mono_ms();

    if (!ctx->leader || !ctx->pg) {
        snprintf(err, errlen, "not the acting reconciler any more: stopped repairing");
        return VC_ERR_UNAVAILABLE;
    }
    if (sent - ctx->proven_ms < RC_PROOF_EVERY_MS)
        return 0;
    if (rc_pg_holds_lock(ctx->pg, err, errlen)) {
        ctx->proven_ms = sent;
        return 0;
    }
    vc_warn("lost the lock (%s): stopped repairing; the next pass tries to take it again", err);
    snprintf(err, errlen, "lost the reconciler lock: stopped repairing");
    /* Gone with the session (the server ended it): the lock's proof found it first. */
    ctx->pg_lost = !rc_pg_ok(ctx->pg);
    stop_acting(ctx);
    return VC_ERR_UNAVAILABLE;
}

/* Step 3: each event in flight, kept with its voucher until its rows are read. */
static void tail_cb(void *arg, const vc_event_t *ev)
{
    rc_vouchers_add_event(arg, ev);
}

/*
 * Whether this pass reads v in full (every row, every Redis order), by a
 * targeted read, or judges it by its numbers alone. A quiet voucher (Redis
 * takes exactly the uses PostgreSQL counts, no event in flight, no hold due,
 * no release under way) would be judged consistent by a full read too, except
 * for drift that cancels out in the counts (one use Redis gave back and
 * PostgreSQL counts, one Redis holds and nothing downstream knows). A voucher
 * busy only because events of it are in flight (no hold due, no release under
 * way, no dead letter parked) gets v->targeted: the pass reads the orders
 * those events name and the newest holds, and reads it in full only when
 * those do not settle it (rc_plan_judge_targeted()); during a flash sale the
 * writer is never caught up, and a full read every pass costs every row and
 * Redis order of the sale. A voucher with holds due (and no release under
 * way) gets v->wave too: its oldest due holds are read with the targeted read
 * and released in slices (rc_wave.h), for the minutes a sale's wave of holds
 * takes to expire. So each voucher is still read in full once
 * full_every_ms has passed since its last full read: such a voucher gets
 * *due_periodic, and the caller reads at most an eighth of the vouchers so,
 * the longest unread first (rc_plan_pick_periodic()), so that they spread
 * over passes instead of all coming due together. Reading everything every
 * pass costs time and memory in proportion to every row of every active
 * voucher.
 */
/*
 * A quiet voucher's aggregates (rc_agg.h): Redis's read now (one round trip,
 * O(1)) and compared with PostgreSQL's from the pass's snapshot. *settled when
 * they agree, when they differ exactly as they did when a full read last found
 * the voucher consistent (the memory's agg_base: rows PostgreSQL counted before
 * Redis knew the voucher, say), or when neither moved at all since that read
 * (a Redis aggregate that does not describe its hash, written around the
 * scripts, stays so): its full read can wait for the slow audit. v->full when
 * they differ otherwise, or Redis's does not describe its orders hash (the hash
 * lost beside a counter that still agrees): read in full now. Neither when
 * either side keeps none.
 */
static int judge_aggregates(rc_ctx_t *ctx, rc_voucher_t *v, int *settled, char *err,
                            size_t errlen)
{
    rc_agg_verdict_t verdict;
    int rc;

    *settled = 0;
    if (!v->agg_pg.present || ctx->cfg->audit_every_ms <= 0)
        return 0;
    if ((rc = rc_redis_aggregate(ctx->redis, v->code, &v->agg_redis, err, errlen)) != 0)
        return rc;
    v->agg_read = 1;
    verdict = rc_agg_judge(&v->agg_redis, &v->agg_pg, &v->mem->agg_base, &v->agg_diff,
                           &v->agg_compared);
    *settled = verdict == RC_AGG_SETTLED;
    if (verdict != RC_AGG_READ_NOW)
        return 0;
    vc_info("%s: its aggregates in Redis and PostgreSQL %s: read in full", v->code,
            v->agg_compared ? "disagree" : "do not describe its orders hash");
    v->full = 1;
    return 0;
}

/*
 * After v's verdict: a full read that found it consistent with its
 * aggregates read this pass remembers them and their difference, which later
 * passes then accept (judge_aggregates()); any other full read forgets them.
 */
static void remember_aggregates(rc_voucher_t *v)
{
    if (!v->full)
        return;
    rc_agg_remember(&v->mem->agg_base, v->agg_read,
                    v->verdict == RC_CONSISTENT || v->verdict == RC_USED_WITHOUT_ROWS,
                    &v->agg_redis, &v->agg_pg, &v->agg_diff);
}

static int choose_full(rc_ctx_t *ctx, rc_voucher_t *v, int *due_periodic, char *err,
                       size_t errlen)
{
    int settled = 0;
    int64_t due = 0, releasing = 0;
    int rc = 0, quiet;

    v->full = 1;
    if (ctx->force_full || ctx->cfg->full_every_ms <= 0 || !v->mem->last_full_ms)
        return 0; /* always in full, or never read in full yet */
    if (v->n.redis_loaded) {
        /* The numbers first: the two counts cost a round trip only when they agree. */
        quiet = rc_model_quiet(&v->n, 0, 0);
        if (!quiet && (v->n.in_flight_events == 0 || v->n.parked > 0))
            return 0;
        if ((rc = rc_redis_activity(ctx->redis, v->code, vc_time_now_ms() - ctx->cfg->grace_ms,
                                    &due, &releasing, err, errlen)) != 0 ||
            releasing > 0 || (due > 0 && ctx->cfg->expiry_slice <= 0))
            return rc;
        /* Holds due: the oldest of them read with the targeted read (rc_wave.h). */
        v->wave = due > 0;
        v->targeted = !quiet || v->wave;
    } else if (v->claimed || v->n.in_flight_events > 0) {
        return 0; /* loaded once and lost: restore it (never loaded: nothing to compare) */
    }
    v->full = 0;
    if (!v->targeted && v->n.redis_loaded &&
        ((rc = judge_aggregates(ctx, v, &settled, err, errlen)) != 0 || v->full))
        return rc;
    *due_periodic = vc_time_mono_ms() - v->mem->last_full_ms >=
                    (settled ? ctx->cfg->audit_every_ms : ctx->cfg->full_every_ms);
    return 0;
}

/*
 * The newest holds a targeted read lists: more holds taken between the tail's
 * read and the targeted one than this (2,000 reservations a second on one
 * voucher for half a second) and the voucher is read in full.
 */
#define RC_TARGETED_NEWEST 1000
/*
 * The most orders a targeted read names: its HMGET of as many costs Redis what
 * a read at once of as many does, about 5 ms (VOUCHER_RECONCILE_ORDERS_SCAN_ABOVE's
 * default); beyond it, a full read in pieces.
 */
#define RC_TARGETED_ORDERS_MAX 10000

/* Forgets what a targeted read of v put in it, so that it is read in full instead. */
static void untarget(rc_voucher_t *v)
{
    rc_orders_free(&v->orders);
    rc_orders_init(&v->orders);
    free(v->newest);
    v->newest = NULL;
    v->nnewest = 0;
    free(v->due);
    v->due = NULL;
    v->ndue = 0;
    v->due_unsent = 0;
    v->wave = 0;
    v->targeted = 0;
    v->full = 1;
}

/*
 * The targeted reads of the pass (choose_full()), in the snapshot the full
 * reads' rows came from, which is still open: Redis (the orders the events in
 * flight name, the newest holds), then their rows, the events replayed, the
 * judgement. A voucher they do not settle is read in full: its rows read here,
 * in the same snapshot. *settled counts the others.
 */
static int targeted_reads(rc_ctx_t *ctx, rc_vouchers_t *vs, int64_t snapshot_ms, int *settled,
                          char *err, size_t errlen)
{
    int rc = 0, any = 0;

    for (size_t i = 0; i < vs->len; i++) {
        rc_voucher_t *v = &vs->v[i];
        int bad = 0;

        if (!v->targeted)
            continue;
        for (size_t j = 0; j < v->nevents && v->targeted; j++)
            if (!rc_orders_get(&v->orders, v->events[j].order_id))
                untarget(v); /* out of memory: read in full, which fails the pass as it would */
        /* A writer far behind: one HMGET of so many would hold Redis up. */
        if (v->targeted && v->orders.len > RC_TARGETED_ORDERS_MAX)
            untarget(v);
        if (!v->targeted)
            continue;
        /* A wave: the oldest holds due that this pass may expire, at most a batch. */
        rc_redis_due_read_t due = {snapshot_ms - ctx->cfg->grace_ms,
                                   v->wave ? (size_t)ctx->cfg->batch : 0, NULL, 0};
        if ((rc = rc_redis_targeted_due(ctx->redis, v->code, &v->orders, RC_TARGETED_NEWEST,
                                        &v->newest, &v->nnewest, &due, &v->n.redis_loaded,
                                        &v->n.redis_remaining, &bad, err, errlen)) != 0)
            return rc;
        v->due = due.due;
        v->ndue = due.ndue;
        if (bad) {
            vc_warn("%s: %d orders in Redis could not be read: read in full", v->code, bad);
            untarget(v);
            continue;
        }
        any = 1;
    }
    if (any && (rc = rc_pg_read_orders(ctx->pg, vs, err, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < vs->len; i++) {
        rc_voucher_t *v = &vs->v[i];

        if (!v->targeted)
            continue;
        if ((rc = rc_plan_replay(v)) != 0)
            return rc;
        if ((!v->wave || rc_wave_judge(v, snapshot_ms, ctx->cfg->grace_ms)) &&
            rc_plan_judge_targeted(v, vc_time_now_ms(), ctx->cfg->grace_ms)) {
            rc_wave_settled(v);
            (*settled)++;
            continue;
        }
        vc_debug("%s: the orders its events in flight name do not settle it: read in full",
                 v->code);
        untarget(v);
    }
    /* The rows of those read in full instead (none: no query). */
    return rc_pg_read_rows(ctx->pg, vs, err, errlen);
}

static void record_metrics(const rc_voucher_t *v)
{
    char labels[64];

    snprintf(labels, sizeof(labels), "code=\"%s\"", v->code);
    vc_metric_set(vc_gauge("voucher_reconciler_drift",
                           "Uses Redis holds beyond what PostgreSQL will count, per voucher "
                           "(negative: Redis offers uses PostgreSQL counts)",
                           labels),
                  v->n.redis_loaded ? v->n.redis_taken - v->n.pg_live_after - v->n.uncounted : 0);
    vc_metric_set(vc_gauge("voucher_reconciler_verdict",
                           "Last verdict per voucher: 0 consistent, 1 not loaded, 2 behind, "
                           "3 undersold, 4 drifted, 5 used_count counts uses without rows, "
                           "6 parked (dead letters wait for an operator)",
                           labels),
                  (int64_t)v->verdict);
    vc_metric_set(vc_gauge("voucher_reconciler_read",
                           "How the last pass read each voucher: 0 by its numbers alone, 1 by "
                           "the orders its events in flight name (a targeted read), 2 in full",
                           labels),
                  v->full       ? 2
                  : v->targeted ? 1
                                : 0);
    vc_metric_set(vc_gauge("voucher_reconciler_parked_letters",
                           "Dead letters parked per voucher, waiting for an operator "
                           "(voucher-writer dlt replay or discard); their uses stay taken",
                           labels),
                  v->n.parked);
    /* The numbers of the sale itself, for the dashboard: what is left, what is counted. */
    vc_metric_set(vc_gauge("voucher_reconciler_limit", "total_limit per voucher", labels),
                  v->n.total_limit);
    vc_metric_set(vc_gauge("voucher_reconciler_used", "used_count in PostgreSQL per voucher",
                           labels),
                  v->n.used_count);
    if (v->n.redis_loaded)
        vc_metric_set(vc_gauge("voucher_reconciler_remaining",
                               "Uses Redis may still give out per voucher, as the last pass read",
                               labels),
                      v->n.redis_remaining);
}


/* Says why a voucher is not consistent: at warn when it needs a repair, else at debug. */
static void log_verdict(const rc_voucher_t *v)
{
    char taken[24], live[24];
    vc_log_field_t f[] = {{"code", v->code}, {"redisTaken", taken}, {"pgLive", live}};
    /* A lasting used-without-rows warns at each full read, not each pass. */
    int warn = v->verdict == RC_USED_WITHOUT_ROWS ? v->full : v->verdict >= RC_UNDERSOLD;

    snprintf(taken, sizeof(taken), "%lld", (long long)v->n.redis_taken);
    snprintf(live, sizeof(live), "%lld", (long long)v->n.pg_live_after);
    VC_LOG_F(warn ? VC_LOG_WARN : VC_LOG_DEBUG, f,
             "%s: used_count %lld, %lld events in flight, %lld releases under way, "
             "%lld fresh and %lld stranded holds, %lld released in PostgreSQL, "
             "%lld counted in PostgreSQL and lost in Redis, %lld given back in Redis "
             "after the snapshot, %lld confirmed in Redis and unknown downstream past "
             "heldUntil, %lld confirmed in Redis and reserved in PostgreSQL past heldUntil "
             "(their confirm's event lost); total_limit %lld, live rows %lld, %lld uses counted "
             "without rows, remaining %lld of at most %lld",
             rc_verdict_name(v->verdict), (long long)v->n.used_count,
             (long long)v->n.in_flight_events, (long long)v->n.releasing,
             (long long)v->n.unsent_fresh, (long long)v->n.stranded, (long long)v->n.released_in_pg,
             (long long)v->n.missing_in_redis, (long long)v->n.released_after,
             (long long)v->n.confirmed_unknown, (long long)v->n.confirm_lost,
             (long long)v->n.total_limit, (long long)v->n.live_rows, (long long)v->n.uncounted,
             (long long)v->n.redis_remaining, (long long)v->n.bound);
}

/* Says why a direct voucher is not consistent: its two numbers, at warn (never repaired). */
static void log_direct_verdict(const rc_voucher_t *v)
{
    vc_log_field_t f[] = {{"code", v->code}};

    VC_LOG_F(VC_LOG_WARN, f,
             "%s: direct voucher: used_count %lld, live rows %lld; not repaired (in direct mode "
             "only a change by hand makes them differ: proto/direct-mode.md)",
             rc_verdict_name(v->verdict), (long long)v->n.used_count, (long long)v->n.live_rows);
}

/*
 * The instant a voucher's or campaign's keys expire (vc_retention.h), for its
 * leader key: that of its other keys. 0 when the retention is off.
 */
int64_t rc_ctx_expire_at(const rc_ctx_t *ctx, int64_t ends_at_ms)
{
    return ctx->cfg->redis_retention_ms > 0
               ? vc_redis_expire_at(ends_at_ms, ctx->cfg->redis_retention_ms)
               : 0;
}

/*
 * The most expiry slices of direct vouchers one pass runs: a backlog larger
 * than this many batches is released over the next passes.
 */
#define RC_DIRECT_SLICES_MAX 100

/*
 * The direct vouchers (proto/direct-mode.md, "The reconciler"), by PostgreSQL
 * alone: when acting, their holds past heldUntil plus the grace released by
 * dr_expire() in slices of cfg->batch, each one transaction with its outbox
 * rows, until a slice finds fewer; then their numbers, each judged by
 * rc_model_judge_direct() (never repaired). They are read into direct, never
 * into the list the pass reads Redis for, so no Redis command names them.
 */
static int direct_pass(rc_ctx_t *ctx, int repair, rc_vouchers_t *direct, rc_summary_t *sum,
                       char *err, size_t errlen)
{
    int64_t released = ctx->cfg->batch;
    int rc;

    for (int slice = 0; repair && released == ctx->cfg->batch && slice < RC_DIRECT_SLICES_MAX;
         slice++) {
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
            (rc = rc_pg_expire_direct(ctx->pg, ctx->cfg->batch, vc_time_now_ms(),
                                      ctx->cfg->grace_ms, &released, err, errlen)) != 0)
            return rc;
        sum->direct_expired += released;
    }
    if ((rc = rc_pg_read_direct(ctx->pg, direct, err, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < direct->len; i++) {
        rc_voucher_t *v = &direct->v[i];
        v->verdict = rc_model_judge_direct(v->n.used_count, v->n.live_rows, v->n.parked);
    }
    return 0;
}

/* rc_ctx_still_leading() for rc_limit_sync(). */
static int prove_lead(void *ctx, char *err, size_t errlen)
{
    return rc_ctx_still_leading(ctx, err, errlen);
}

/* rc_pass.h */
int rc_ctx_publish_ok(const rc_ctx_t *ctx)
{
    return !ctx->kafka_unacked;
}

/* rc_pass.h */
void rc_ctx_published(rc_ctx_t *ctx, const int *delivered, int n)
{
    for (int i = 0; i < n && !ctx->kafka_unacked; i++)
        if (delivered[i] != 1) {
            ctx->kafka_unacked = 1;
            vc_warn("Kafka left a publish of this pass unacknowledged: the pass publishes nothing "
                    "more (its releases and confirms wait for the next pass)");
        }
}

int rc_pass(rc_ctx_t *ctx, int repair, FILE *table, rc_summary_t *sum, char *err, size_t errlen)
{
    rc_vouchers_t vs = {0}, direct = {0};
    rc_releases_t rs = {0};
    rc_positions_t pos;
    /* Every event Kafka acknowledged before this is in PostgreSQL or read from the tail. */
    int64_t snapshot_ms = vc_time_now_ms(), lag = 0;
    const rc_plan_config_t plan_cfg = {ctx->cfg->grace_ms, ctx->cfg->restore_delay_ms,
                                       ctx->cfg->batch};
    rc_voucher_t **due = NULL;
    size_t ndue = 0;
    int rc;

    memset(sum, 0, sizeof(*sum));
    ctx->kafka_unacked = 0;
    repair = repair && ctx->leader;
    if ((rc = rc_ctx_connect(ctx, err, errlen)) != 0)
        return rc;
    /* The direct vouchers first: PostgreSQL alone, whatever Redis or Kafka does next. */
    if ((rc = direct_pass(ctx, repair, &direct, sum, err, errlen)) != 0)
        goto out;
    /* 1, 2, 3, 4: in this order (see rc_pass.h). */
    if ((rc = rc_kafka_positions(ctx->kafka, ctx->cfg->timeout_ms, &pos, err, errlen)) != 0 ||
        (rc = rc_pg_read_vouchers(ctx->pg, &vs, err, errlen)) != 0 ||
        (rc = rc_pg_read_aggregates(ctx->pg, &vs, err, errlen)) != 0 ||
        (rc = rc_memory_align(ctx->memory, &vs)) != 0 ||
        (rc = rc_kafka_tail(ctx->kafka, &pos, ctx->cfg->timeout_ms * 4, tail_cb, &vs, &lag,
                            &sum->malformed, err, errlen)) != 0)
        goto out;
    VC_PAUSE("reconciler-after-tail");
    if (vs.nomem) {
        snprintf(err, errlen, "out of memory keeping the events in flight");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    sum->in_flight = lag;
    vc_metric_set(vc_gauge("voucher_reconciler_writer_lag_events",
                           "Events published but not yet applied by the writer", NULL),
                  lag);

    /* Which vouchers need their rows and orders read; the quiet ones are judged by numbers. */
    if (!(due = calloc(vs.len ? vs.len : 1, sizeof(*due)))) {
        snprintf(err, errlen, "out of memory choosing the full reads");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < vs.len; i++) {
        rc_voucher_t *v = &vs.v[i];
        int due_periodic = 0;
        int64_t expire = rc_ctx_expire_at(ctx, v->ends_at_ms);
        /* The leader marks each voucher here, before anything of the pass writes to it. */
        if ((rc = rc_redis_remaining_marked(ctx->redis, v->code, expire, &v->n.redis_loaded,
                                            &v->n.redis_remaining, err, errlen)) != 0 ||
            (rc = choose_full(ctx, v, &due_periodic, err, errlen)) != 0)
            goto out;
        if (due_periodic)
            due[ndue++] = v;
    }
    rc_plan_pick_periodic(due, ndue, vs.len / 8 + 1);
    for (size_t i = 0; i < vs.len; i++) {
        vs.v[i].targeted &= !vs.v[i].full; /* a periodic full read comes first */
        vs.v[i].wave &= vs.v[i].targeted;
    }
    VC_PAUSE("reconciler-after-remaining");
    if ((rc = rc_pg_read_rows(ctx->pg, &vs, err, errlen)) != 0 ||
        (rc = targeted_reads(ctx, &vs, snapshot_ms, &sum->targeted, err, errlen)) != 0)
        goto out;
    rc_pg_end_snapshot(ctx->pg);
    for (size_t i = 0; i < vs.len; i++)
        sum->read_in_full += vs.v[i].full;

    for (size_t i = 0; i < vs.len; i++) {
        rc_voucher_t *v = &vs.v[i];
        rc_redis_counts_t c;
        int bad = 0;

        if (v->targeted)
            continue; /* judged by rc_plan_judge_targeted() */
        if (!v->full) {
            rc_plan_judge_numbers(v);
            continue;
        }
        /* The counter is read again with the orders, at one moment: the verdict compares those. */
        if ((rc = rc_plan_replay(v)) != 0 ||
            (rc = rc_redis_orders(ctx->redis, v->code, ctx->cfg->orders_scan_above, &v->orders, &c,
                                  &bad, err, errlen)) != 0)
            goto out;
        v->n.redis_loaded = c.loaded;
        v->n.redis_remaining = c.remaining;
        v->n.redis_users = c.users;
        v->n.redis_amounts = c.amounts;
        v->n.redis_limit = c.limit;
        v->n.redis_outside = c.outside;
        if (bad)
            vc_warn("%s: %d orders in Redis could not be read", v->code, bad);
        if ((rc = rc_plan_judge_full(v, vc_time_now_ms(), vc_time_mono_ms(),
                                     ctx->cfg->grace_ms)) != 0)
            goto out;
    }

    /* Everything is read and judged; the repairs below act on Redis as it is now. */
    VC_PAUSE("reconciler-before-repair");
    if (table)
        rc_table_header(table);
    for (size_t i = 0; i < vs.len; i++) {
        rc_voucher_t *v = &vs.v[i];
        rc_plan_t plan = {0};
        int64_t wave_released = 0;
        int changed = 0;

        sum->vouchers++;
        sum->verdicts[v->verdict]++;
        remember_aggregates(v);
        sum->offering_excess += v->full && rc_model_excess_remaining(&v->n) > 0;
        sum->parked += v->n.parked;
        record_metrics(v);
        if (table)
            rc_table_row(table, v);
        if (v->verdict != RC_CONSISTENT && v->verdict != RC_NOT_LOADED && v->verdict != RC_PARKED)
            log_verdict(v);
        /*
         * A total_limit changed without Redis (rc_raise.h): every loaded voucher,
         * quiet or not. The lock is proven first, as before any repair: the sync
         * runs its first statements on the lock's session, and a session ended by
         * then must stop the pass as the lost lock it is, not as a broken
         * connection ("server closed the connection unexpectedly").
         */
        if (repair && v->n.redis_loaded &&
            ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
             (rc = rc_limit_sync(rc_pg_conn(ctx->pg), ctx->redis, v->code, v->n.total_limit,
                                 prove_lead, ctx, &changed, err, errlen)) != 0))
            goto out;
        /* A wave of holds due, read with the targeted read: released in slices (rc_wave.h). */
        if (repair && v->targeted && v->ndue > 0 &&
            (rc = rc_wave_release(ctx, v, snapshot_ms, &wave_released, sum, err, errlen)) != 0)
            goto out;
        rc_wave_metrics(v, wave_released);
        if (!repair || !v->full)
            continue;
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
            goto out;
        if ((rc = rc_plan_repairs(v, &plan_cfg, vc_time_now_ms(), snapshot_ms, &plan)) == 0)
            rc = rc_repair_voucher(ctx, v, &plan, snapshot_ms, &rs, sum, err, errlen);
        rc_plan_free(&plan);
        if (rc != 0)
            goto out;
    }
    /* The direct vouchers' rows, judged by direct_pass(): reported as the others. */
    for (size_t i = 0; i < direct.len; i++) {
        rc_voucher_t *v = &direct.v[i];

        sum->vouchers++;
        sum->verdicts[v->verdict]++;
        sum->parked += v->n.parked;
        record_metrics(v);
        if (table)
            rc_table_row(table, v);
        if (v->verdict != RC_CONSISTENT && v->verdict != RC_PARKED)
            log_direct_verdict(v);
    }
    if (repair)
        rc = rc_repair_releases(ctx, &rs, sum, err, errlen);
    /* The campaigns: numbers, and their due holds expired (rc_campaign.c). */
    if (rc == 0)
        rc = rc_campaign_pass(ctx, &vs, repair, snapshot_ms, sum, err, errlen);
out:
    /* A pass that failed between reading the vouchers and their rows left the snapshot open. */
    rc_pg_end_snapshot(ctx->pg);
    rc = rc_ctx_refused(ctx, rc, err);
    if (rc != 0 && ctx->redis && (rc == VC_ERR_UNAVAILABLE || rc == VC_ERR_TIMEOUT)) {
        /* A broken Redis connection is made anew next pass. */
        rc_redis_free(ctx->redis);
        ctx->redis = NULL;
    }
    free(due);
    rc_releases_free(&rs);
    rc_vouchers_free(&vs);
    rc_vouchers_free(&direct);
    return rc;
}
