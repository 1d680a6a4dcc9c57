/*
 * A voucher's aggregates (proto/redis-keys.md, "Aggregates"): per order state,
 * how many orders there are and the sum of their customers' last six digits,
 * kept in Redis by every order write (voucher:{CODE}:agg, orders_write.lua)
 * and in PostgreSQL by the triggers of its redemption rows (the voucher row's
 * agg_* columns, deploy/sql/027_voucher_aggregates.sql). A quiet voucher whose
 * two aggregates agree is not read in full: its every order and row would
 * agree too, but for drift that cancels out in every one of those numbers,
 * which the slow audit (VOUCHER_RECONCILE_AUDIT_EVERY) still reads for.
 *
 * Pure: no I/O; rc_redis_aggregate() and rc_pg_read_aggregates() fill the
 * structs.
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

/* One side's aggregate of one voucher. */
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
 * Compares redis's and pg's aggregates of one quiet voucher. Returns the
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
 * Reads one field of Redis's aggregate (a state's letter, the letter and
 * "_customers", or "?") with its integer value into a. A field it does not
 * know, or a value that is not an integer, sets a->malformed.
 */
void rc_agg_field(rc_agg_t *a, const char *field, const char *value);

#endif
