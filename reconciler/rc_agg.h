/*
 * A voucher's or a campaign's aggregates (proto/redis-keys.md, "Aggregates";
 * proto/campaigns.md, "Aggregates"): per order state, how many orders there
 * are and the sum of their customers' last six digits, kept in Redis by every
 * order write (voucher:{CODE}:agg, campaign:{cID}:agg, orders_write.lua) and
 * in PostgreSQL by the triggers of the redemption rows (voucher_aggregate,
 * deploy/sql/030_voucher_aggregate_table.sql; campaign_aggregate,
 * 031_campaign_aggregate.sql). A quiet voucher or campaign whose two
 * aggregates agree is not read in full: its every order and row would agree
 * too, but for drift that cancels out in every one of those numbers, which the
 * slow audit (VOUCHER_RECONCILE_AUDIT_EVERY) still reads for.
 *
 * Pure: no I/O; rc_redis_aggregate(), rc_redis_campaign_aggregate(),
 * rc_pg_read_aggregates() and the campaign pass's query fill the structs.
 */
#ifndef RC_AGG_H
#define RC_AGG_H

#include <stdint.h>

/* The order states an aggregate counts, in the order of the arrays below. */
enum {
    RC_AGG_HELD,
    RC_AGG_CONFIRMED,
    RC_AGG_CANCEL_BEGUN,
    RC_AGG_EXPIRY_BEGUN,
    RC_AGG_RELEASED,
    RC_AGG_STATES
};

/* One side's aggregate of one voucher or campaign. */
typedef struct {
    int present;                      /* kept: the Redis key exists, the columns are not NULL */
    int64_t count[RC_AGG_STATES];     /* orders (rows) per state */
    int64_t customers[RC_AGG_STATES]; /* the sum of their customers' last six digits */
    int64_t unreadable;               /* Redis: values no parser reads ("?") */
    int64_t size;                     /* Redis: HLEN orders, read with the aggregate */
    int malformed;                    /* Redis: a field or number the reader did not know */
} rc_agg_t;

/* PostgreSQL's aggregate less Redis's, for the states both keep (H, C, R). */
typedef struct {
    int64_t count[RC_AGG_STATES];
    int64_t customers[RC_AGG_STATES];
} rc_agg_diff_t;

typedef enum {
    /* Both kept and comparable: *diff is PostgreSQL's less Redis's. */
    RC_AGG_COMPARED,
    /* Either side keeps none (a voucher loaded before the aggregates, a NULL column). */
    RC_AGG_ABSENT,
    /*
     * Redis's aggregate does not describe its orders hash, or holds what a
     * quiet voucher cannot: its counts do not add up to HLEN (the hash lost,
     * or written around orders_write.lua), an unreadable value, an order
     * whose release has begun, or a field the reader does not know.
     */
    RC_AGG_UNSOUND
} rc_agg_outcome_t;

/*
 * Compares redis's and pg's aggregates of one quiet voucher or campaign. Returns the
 * outcome; with RC_AGG_COMPARED, *diff is set.
 */
rc_agg_outcome_t rc_agg_compare(const rc_agg_t *redis, const rc_agg_t *pg, rc_agg_diff_t *diff);

/* Whether two aggregates (both Redis's, or both PostgreSQL's) are the same. */
int rc_agg_equal(const rc_agg_t *a, const rc_agg_t *b);

/* Whether a difference is nothing at all. */
int rc_agg_diff_zero(const rc_agg_diff_t *d);

/* Whether two differences are the same. */
int rc_agg_diff_equal(const rc_agg_diff_t *a, const rc_agg_diff_t *b);

/*
 * What a full read found consistent, remembered between passes (a voucher's
 * rc_memory_entry_t, a campaign's memory in rc_campaign.c): PostgreSQL's
 * aggregate less Redis's as that read's pass compared them, a difference the
 * full read explains (rows of uses PostgreSQL counted before Redis knew the
 * voucher, rows counted before the aggregates were kept, released rows a
 * rebuild did not put back in Redis), which later passes compare against
 * instead of nothing; and both aggregates as that pass read them, whatever
 * they were (a Redis one that does not describe its orders hash too):
 * unchanged since, nothing was written on either side.
 */
typedef struct {
    int known; /* a full read found it consistent, with both aggregates read in its pass */
    rc_agg_diff_t diff;
    rc_agg_t redis, pg;
} rc_agg_base_t;

/* What the aggregates of one quiet voucher or campaign say of its full read. */
typedef enum {
    /* Either side keeps none: the old rule (a full read every full_every_ms). */
    RC_AGG_OLD_RULE,
    /*
     * They agree, differ exactly as the base accepted, or neither moved since
     * the base was taken: the full read can wait for the slow audit.
     */
    RC_AGG_SETTLED,
    /* They differ otherwise, or Redis's does not describe its orders hash: read in full now. */
    RC_AGG_READ_NOW
} rc_agg_verdict_t;

/*
 * Judges a quiet voucher's or campaign's aggregates: redis and pg as read this
 * pass, base what its last full read remembered (rc_agg_remember()). Sets
 * *diff (PostgreSQL's less Redis's; zero unless compared) and *compared (both
 * kept and comparable, rc_agg_compare()'s RC_AGG_COMPARED). Pure.
 */
rc_agg_verdict_t rc_agg_judge(const rc_agg_t *redis, const rc_agg_t *pg, const rc_agg_base_t *base,
                              rc_agg_diff_t *diff, int *compared);

/*
 * After a full read: consistent when it found nothing apart, with redis, pg
 * and diff the aggregates its pass read and compared (read 0 when it read
 * none: a busy one, or one never judged by them). Remembers them into *base,
 * or forgets what base held. Pure.
 */
void rc_agg_remember(rc_agg_base_t *base, int read, int consistent, const rc_agg_t *redis,
                     const rc_agg_t *pg, const rc_agg_diff_t *diff);

/*
 * Reads one field of Redis's aggregate (a state's letter, the letter and
 * "_customers", or "?") with its integer value into a. A field it does not
 * know, or a value that is not an integer, sets a->malformed.
 */
void rc_agg_field(rc_agg_t *a, const char *field, const char *value);

#endif
