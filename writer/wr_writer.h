/*
 * The writer's main loop: take events from Kafka in batches, apply each
 * batch to PostgreSQL in one transaction, dead-letter what can never apply,
 * and only then store the batch's offsets.
 */
#ifndef WR_WRITER_H
#define WR_WRITER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "vc_kafka_conf.h"

/* The writer daemon's settings (the table is in main.c). */
typedef struct {
    const char *brokers;
    const char *pg_dsn;
    const char *log_level;
    const char *group;
    const char *topic;
    const char *dlt_topic;
    int64_t batch;          /* most events per transaction */
    int64_t linger_ms;      /* longest wait for a batch to fill */
    int64_t lanes;          /* PostgreSQL sessions applying partitions side by side */
    int64_t shutdown_timeout_ms; /* after SIGTERM, the longest a clean stop may take */
    int64_t backoff_max_ms; /* longest wait between retries of a failed batch */
    /* Kafka session.timeout.ms: how soon the partitions of a dead writer move. */
    int64_t session_timeout_ms;
    const char *admin_addr; /* /healthz, /readyz, /metrics; empty: off */
    const char *kafka_conf; /* VOUCHER_KAFKA_CONF as given; kafka_extra holds it parsed */
    /* librdkafka settings passed through (VOUCHER_KAFKA_CONF, --kafka); NULL: none. */
    const vc_kafka_settings_t *kafka_extra;
} wr_config_t;

/* What the loop has done since it started. */
typedef struct {
    uint64_t batches;
    uint64_t events;       /* events in committed batches */
    uint64_t applied;      /* changed a redemption */
    uint64_t noops;        /* repeats: nothing to change */
    uint64_t tombstones;   /* releases recorded before their reservation */
    uint64_t early;        /* confirms recorded before their reservation (also in applied) */
    uint64_t dead_letters; /* sent to the dead-letter topic */
    uint64_t retries;      /* batches tried again after a transient failure */
} wr_stats_t;

/*
 * What the loop publishes for other threads (the admin endpoint's readiness
 * probe): plain atomics, read anywhere.
 */
typedef struct {
    atomic_int running;  /* 1 while the loop runs */
    atomic_int retrying; /* 1 while a batch waits to be retried after a transient failure */
    atomic_int pg_ok;    /* 1 while the PostgreSQL session is alive (checked every second) */
    atomic_int in_group; /* 1 while the consumer is a member of its group (librdkafka's stats) */
} wr_health_t;

/*
 * Runs until *stop becomes non-zero (a signal handler sets it): then the
 * batch in hand is finished if it can be, its offsets committed, and the
 * consumer closed. Returns 0 after such a stop, or a negative error when the
 * writer cannot run at all (bad configuration, missing schema, fatal Kafka
 * error). stats, when not NULL, receives the counters at the end; health,
 * when not NULL, is kept up to date (and borrowed until the return).
 * Counters also go to the process's metrics registry (vc_metrics.h) as
 * voucher_writer_*.
 */
int wr_writer_run(const wr_config_t *cfg, atomic_int *stop, wr_stats_t *stats,
                  wr_health_t *health);

#endif
