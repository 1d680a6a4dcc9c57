/*
 * The Kafka adapter: one idempotent producer for the whole process
 * (acks=all, enable.idempotence=true), a thread that polls it, and per-worker
 * inboxes that bring each delivery report back to the worker loop that
 * produced the message. Nothing outside this file includes librdkafka.
 */
#ifndef GW_KAFKA_H
#define GW_KAFKA_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "vc_kafka_conf.h"

typedef struct gw_kafka gw_kafka_t;
typedef struct gw_kafka_inbox gw_kafka_inbox_t;
typedef struct gw_kafka_report gw_kafka_report_t;

/*
 * A delivery outcome: 0 (persisted: acknowledged by all in-sync replicas),
 * VC_ERR_UNAVAILABLE (this message definitely not persisted), or
 * VC_ERR_UNKNOWN_OUTCOME (may have been persisted). Neither says that nothing
 * downstream knows the change: a reservation keeps its hold on both
 * (gw_reserve_publish.c delivered_cb()).
 */
typedef void (*gw_kafka_delivery_cb)(void *arg, int rc);

/* Per-worker inbox; lives inside the worker, initialised by gw_kafka_inbox_init(). */
struct gw_kafka_inbox {
    uv_async_t async;
    uv_mutex_t lock;
    gw_kafka_report_t *head, *tail; /* reports waiting for the loop */
    long in_flight;                 /* produced, report not yet handled; loop thread only */
    int closed;
};

/*
 * Creates the producer for brokers (bootstrap.servers) with
 * delivery.timeout.ms = delivery_timeout_ms and the partitioner
 * murmur2_random (Java's, so Kafka's own tools route a code's key to the same
 * partition), then applies extra (--kafka and VOUCHER_KAFKA_CONF, borrowed
 * during the call; NULL for none) straight to librdkafka, and starts the
 * polling thread. The settings the gateway's guarantees rest on (acks,
 * enable.idempotence, partitioner, bootstrap.servers) cannot be overridden.
 * Returns the producer, or NULL with err naming the offending key.
 */
gw_kafka_t *gw_kafka_new(const char *brokers, int64_t delivery_timeout_ms,
                         const vc_kafka_settings_t *extra, char *err, size_t errlen);

/*
 * Checks extra as gw_kafka_new() will apply it, without making a producer, so
 * that main() can refuse a bad setting at start. Returns 0 or VC_ERR_INVALID
 * (or VC_ERR_NOMEM) with err naming the key.
 */
int gw_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen);

/*
 * Asks the broker for topic's metadata, waiting up to timeout_ms, so the
 * first event published does not wait for it (about a second otherwise).
 * Returns 0, or a negative VC_ERR_* with err saying why; the producer works
 * either way (it asks again when it publishes).
 */
int gw_kafka_warm(gw_kafka_t *k, const char *topic, int64_t timeout_ms, char *err, size_t errlen);

/*
 * Whether the producer has a connection up to at least one broker and its
 * producer id (idempotence), as its statistics said within the last second or
 * two (any thread).
 */
int gw_kafka_ready(gw_kafka_t *k);

/* Prepares inbox on loop (the worker's). Returns 0 or a negative VC_ERR_*. */
int gw_kafka_inbox_init(gw_kafka_inbox_t *inbox, uv_loop_t *loop);

/*
 * Closes the inbox's handle; reports that still arrive are dropped. Call once
 * in_flight is 0. The inbox memory must stay valid until the loop closed it.
 */
void gw_kafka_inbox_close(gw_kafka_inbox_t *inbox);

/*
 * Produces payload (copied) with key (copied) to topic. Returns 0 and cb runs
 * exactly once on inbox's loop, or VC_ERR_UNAVAILABLE (not queued: the
 * message was definitely not persisted) and cb never runs.
 */
int gw_kafka_produce(gw_kafka_t *k, gw_kafka_inbox_t *inbox, const char *topic, const char *key,
                     size_t keylen, const char *payload, size_t len, gw_kafka_delivery_cb cb,
                     void *arg);

/*
 * Stops the polling thread, waits up to timeout_ms for outstanding messages
 * (rd_kafka_flush) and frees the producer. Returns 0, or VC_ERR_TIMEOUT when
 * messages were still outstanding.
 */
int gw_kafka_close(gw_kafka_t *k, int64_t timeout_ms);

#endif
