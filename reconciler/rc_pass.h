/*
 * One reconciliation pass over every active voucher:
 *
 *   1. where the writer stands in Kafka (its committed offsets),
 *   2. PostgreSQL: the voucher's numbers and, for the vouchers read in full,
 *      every redemption row (one snapshot),
 *   3. the events after the writer's position, replayed on those rows as
 *      the writer will apply them,
 *   4. Redis: the counter and, for the vouchers read in full, every order.
 *
 * A voucher is read in full when its numbers do not settle it (Redis takes
 * other than the uses PostgreSQL counts, events in flight, holds due,
 * releases under way), and at least every full_every_ms anyway; a quiet one
 * costs a few commands, not its history. A quiet one whose aggregates agree
 * (Redis's voucher:{CODE}:agg and PostgreSQL's agg_* columns, rc_agg.h) is
 * read in full only every audit_every_ms; one whose aggregates disagree, in
 * full at once. One busy only with events in flight
 * is read by the orders those events name and its newest holds (a targeted
 * read), and in full only when those do not balance its numbers; one with
 * holds due gets the same read with its oldest due holds, which are released
 * in slices (rc_wave.h).
 *
 * Read in that order, everything PostgreSQL or the events count was taken
 * in Redis before Redis is read, so a quiet voucher never looks as if Redis
 * were behind. Then each voucher is judged and its repairs planned by the
 * pure planner (rc_plan.h, rc_model.h), and, when this reconciler acts, the
 * plan is run (rc_repair.h): expired holds and stranded ones released through
 * the two-phase release (proto/redis-keys.md), lost keys restored, a counter
 * that offers uses PostgreSQL counts lowered. Never anything that could
 * oversell: uses go back to the pool only after their VoucherReleased is in
 * Kafka, ahead of any later reservation of the same voucher.
 *
 * The direct vouchers (proto/direct-mode.md) come first and need PostgreSQL
 * alone: their expired holds released by dr_expire(), their numbers read and
 * judged (rc_model_judge_direct()). They are never in the list the steps
 * above read Redis for.
 */
#ifndef RC_PASS_H
#define RC_PASS_H

#include <stdint.h>
#include <stdio.h>

#include "rc_kafka.h"
#include "rc_model.h"
#include "rc_plan.h"
#include "rc_redis.h"
#include "vc_kafka_conf.h"

typedef struct {
    const char *pg_dsn;
    const char *redis_url;
    const char *kafka_brokers;
    const char *writer_group;
    const char *topic;
    int64_t timeout_ms; /* each call to Redis, Kafka */
    int64_t grace_ms;   /* before a hold unknown downstream, or a begun release, is acted on */
    int batch;          /* most holds or releases handled per voucher per pass */
    int64_t restore_delay_ms; /* how long a voucher's keys must stay missing before a restore */
    /* a quiet voucher is read in full (rows, orders) at least this often; 0: every pass */
    int64_t full_every_ms;
    const vc_kafka_settings_t *kafka_extra; /* librdkafka settings passed through; NULL: none */
    /* a voucher's rebuilt keys expire this long after its endsAt (vc_retention.h); 0: never */
    int64_t redis_retention_ms;
    /* an orders hash of more orders than this is read in pieces (rc_redis_orders()); -1: never */
    int64_t orders_scan_above;
    /* a repair script holding Redis this long is warned of (rc_repair_eval()) */
    int64_t slow_repair_ms;
    /* replicas each repair script's writes must reach before it counts (WAIT); 0: none */
    int64_t redis_wait_replicas;
    int64_t redis_wait_timeout_ms; /* how long that WAIT waits */
    /*
     * a quiet voucher whose aggregates agree (rc_agg.h) is read in full only
     * this often, not every full_every_ms; 0: as every other voucher
     */
    int64_t audit_every_ms;
    /*
     * due holds released per slice of a wave read (rc_wave.h); 0: a voucher
     * with holds due is read in full, as before
     */
    int expiry_slice;
} rc_config_t;

typedef struct rc_pg rc_pg_t; /* rc_pg.h */

typedef struct {
    const rc_config_t *cfg;
    rc_pg_t *pg; /* also holds the advisory lock while leader */
    rc_redis_t *redis;
    rc_kafka_t *kafka;
    int leader;
    int64_t generation;  /* while leader: the lock's fencing token (rc_leader.h), else 0 */
    int64_t proven_ms;   /* monotonic: when the last proof that pg holds the lock was sent */
    rc_memory_t *memory; /* what earlier passes saw: when each unsent hold was first seen */
    int force_full;      /* read every voucher and campaign in full (the restart fence) */
    int kafka_unacked;   /* this pass: Kafka left a publish unacknowledged (rc_ctx_publish_ok()) */
    int pg_lost; /* the session was found broken where the lock was proven: the caller logs it */
} rc_ctx_t;

/* What a pass found and did. */
typedef struct {
    int vouchers;
    int verdicts[RC_VERDICT_COUNT];
    int64_t in_flight;
    int64_t malformed;
    int64_t expired;     /* holds released after heldUntil */
    int64_t direct_expired; /* direct vouchers' holds released after heldUntil (dr_expire()) */
    int64_t stranded;    /* holds released because their event never reached Kafka */
    int64_t finished;    /* begun releases finished */
    int64_t restored;    /* vouchers whose lost keys were restored */
    int64_t retaken;     /* orders taken again in Redis */
    int64_t lowered;     /* counters lowered */
    int64_t reconfirmed; /* holds confirmed in PostgreSQL repaired to confirmed in Redis */
    /* confirms Redis took whose VoucherConfirmed never reached Kafka, published and acknowledged */
    int64_t confirms_published;
    int64_t discarded;   /* uses given back because an operator discarded their dead letter */
    int64_t parked;      /* dead letters parked, waiting for an operator */
    int awaiting_restore; /* vouchers missing from Redis, waiting out the restore delay */
    int read_in_full;     /* vouchers whose rows and orders were read (the others: numbers only) */
    int targeted;         /* vouchers judged by the orders their events in flight name */
    int offering_excess;  /* vouchers read in full whose counter offers more than the bound */
} rc_summary_t;

/*
 * Connects what is not connected yet. Returns 0, or a negative error with
 * err set (the caller retries later; connections made so far are kept).
 */
int rc_ctx_connect(rc_ctx_t *ctx, char *err, size_t errlen);
void rc_ctx_close(rc_ctx_t *ctx);

/*
 * Tries to become the reconciler that acts: a PostgreSQL advisory lock held by
 * ctx->pg's session, lost with it, and a new generation with it
 * (ctx->generation), which every script this reconciler writes with carries
 * (rc_redis_lead()). Sets and returns ctx->leader.
 */
int rc_ctx_lead(rc_ctx_t *ctx);

/*
 * Where a pass (or the fence's set) ends with rc: when Redis refused a
 * script's token because a newer reconciler marked the voucher
 * (VC_ERR_STALE_LEADER, err saying the generations), logs it and stops
 * acting as after a lost lock: the session is closed, the next pass tries to
 * take the lock again. Returns rc.
 */
int rc_ctx_refused(rc_ctx_t *ctx, int rc, const char *err);

/*
 * The instant the keys of a voucher or campaign ending at ends_at_ms expire
 * (common/vc_retention.h, with ctx's retention); 0 when the retention is off.
 */
int64_t rc_ctx_expire_at(const rc_ctx_t *ctx, int64_t ends_at_ms);

/* Whether the PostgreSQL session (and with it the lock, while leader) is up. */
int rc_ctx_pg_ok(const rc_ctx_t *ctx);

/*
 * Before a repair: whether this reconciler still holds the lock. Proven by a
 * round trip on the lock's session at most RC_PROOF_EVERY_MS ago (counted
 * from when the proof was sent); PostgreSQL cannot have given the lock to
 * another reconciler since, unless someone ended the session by hand.
 * Returns 0, or VC_ERR_UNAVAILABLE with err set after closing the session
 * (it frees the lock if the session was still alive): the pass stops, and the
 * next one starts by trying to take the lock again.
 */
int rc_ctx_still_leading(rc_ctx_t *ctx, char *err, size_t errlen);

/*
 * Whether a repair of this pass may publish: 0 once Kafka left one of the
 * pass's publishes unacknowledged (Kafka down, or the topic refusing writes).
 * Each publish waits up to its timeout for the acknowledgements, so a pass
 * that kept publishing one release after another into a Kafka that takes
 * none waited that long for each (a campaign's stranded holds, published one
 * at a time: eight seconds each at a 2 s timeout), and the outbox relay, the
 * direct vouchers' expiry and every other voucher's repairs waited behind
 * it. What is not published stays as it is (a release begun stays begun,
 * a hold due stays held) and the next pass tries again.
 */
int rc_ctx_publish_ok(const rc_ctx_t *ctx);

/*
 * Records what a publish of n events got acknowledged (delivered[i] == 1):
 * one left unacknowledged stops the pass's publishing (rc_ctx_publish_ok()),
 * said once per pass.
 */
void rc_ctx_published(rc_ctx_t *ctx, const int *delivered, int n);

/*
 * Runs one pass; repairs only when repair is set and ctx->leader. Writes a
 * table (one row per voucher) to table when it is not NULL. Returns 0 with
 * *sum filled, or a negative error with err set.
 */
int rc_pass(rc_ctx_t *ctx, int repair, FILE *table, rc_summary_t *sum, char *err, size_t errlen);

#endif
