/*
 * One reconciliation pass: read every active voucher from PostgreSQL and
 * Redis, and the writer's lag from Kafka, judge each voucher and report.
 */
#ifndef RC_PASS_H
#define RC_PASS_H

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>

#include "rc_diff.h"
#include "rc_kafka.h"
#include "rc_redis.h"

typedef struct {
    const char *pg_dsn;
    const char *redis_url;
    const char *kafka_brokers;
    const char *writer_group;
    const char *topic;
    int64_t timeout_ms;
} rc_config_t;

typedef struct {
    const rc_config_t *cfg;
    PGconn *pg;
    rc_redis_t *redis;
    rc_kafka_t *kafka;
} rc_ctx_t;

/* What a pass found. */
typedef struct {
    int vouchers;
    int consistent;
    int not_loaded;
    int behind;
    int drifted;
    int64_t in_flight;
} rc_summary_t;

/*
 * Connects what is not connected yet. Returns 0, or a negative error with
 * err set (the caller retries later; connections made so far are kept).
 */
int rc_ctx_connect(rc_ctx_t *ctx, char *err, size_t errlen);
void rc_ctx_close(rc_ctx_t *ctx);

/*
 * Runs one pass. Writes a table (one row per voucher) to table when it is not
 * NULL, and logs each voucher that is not consistent. A voucher that looks
 * drifted is read again after a short pause before it is reported, since
 * reads of three systems under traffic are never quite simultaneous.
 * Returns 0 with *sum filled, or a negative error with err set.
 */
int rc_pass(rc_ctx_t *ctx, FILE *table, rc_summary_t *sum, char *err, size_t errlen);

#endif
