/*
 * The reconciler's Kafka adapter: where the writer's consumer group stands,
 * the events after that point (published but not yet applied: "in flight"),
 * and publishing the VoucherReleased events of the repairs.
 */
#ifndef RC_KAFKA_H
#define RC_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"
#include "vc_kafka_conf.h"

typedef struct rc_kafka rc_kafka_t;

/* The writer's committed offset in each partition. */
typedef struct {
    int n;
    int32_t partition[64];
    int64_t committed[64]; /* the next offset the writer will apply */
} rc_positions_t;

/*
 * Checks extra as every handle of this adapter (the readers, the producer of
 * repairs) will apply it, without making one, so that main() can refuse a bad
 * setting at start: a key any of them sets itself, or one librdkafka refuses.
 * Returns 0 or VC_ERR_INVALID (or VC_ERR_NOMEM) with err naming the key.
 */
int rc_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen);

/*
 * Returns a handle (the caller owns it: rc_kafka_free) or NULL with err set.
 * extra (--kafka and VOUCHER_KAFKA_CONF; NULL for none) is applied to every
 * rd_kafka handle it makes, after the reconciler's own settings, and is
 * borrowed until rc_kafka_free.
 */
rc_kafka_t *rc_kafka_new(const char *brokers, const vc_kafka_settings_t *extra, const char *group,
                         const char *topic, char *err, size_t errlen);
void rc_kafka_free(rc_kafka_t *k);

/*
 * Reads the writer group's committed offsets (the earliest offset where it
 * committed nothing yet). Returns 0 or a negative error with err set.
 */
int rc_kafka_positions(rc_kafka_t *k, int64_t timeout_ms, rc_positions_t *pos, char *err,
                       size_t errlen);

/*
 * Calls cb for every event from pos up to the end of each partition, in
 * partition order, and sets *lag to their number. Events that do not decode
 * are counted in *malformed and skipped (the writer dead-letters them).
 * Returns 0 or a negative error with err set.
 */
int rc_kafka_tail(rc_kafka_t *k, const rc_positions_t *pos, int64_t timeout_ms,
                  void (*cb)(void *arg, const vc_event_t *ev), void *arg, int64_t *lag,
                  int64_t *malformed, char *err, size_t errlen);

/*
 * Publishes events (keyed by code) and waits up to timeout_ms for their
 * delivery reports: delivered[i] becomes 1 when Kafka acknowledged event i,
 * -1 when it failed, 0 when its outcome is still unknown. Returns 0, or a
 * negative error with err set when no producer could be made.
 */
int rc_kafka_publish(rc_kafka_t *k, const vc_event_t *events, int n, int *delivered,
                     int64_t timeout_ms, char *err, size_t errlen);

/* One message for rc_kafka_send(): borrowed for the call. */
typedef struct {
    const char *key; /* NUL-terminated */
    const char *value;
    size_t len;
} rc_kafka_msg_t;

/*
 * Produces msgs as they are (the outbox's rows: their event already encoded)
 * to the events topic, in their order, with the producer of the repairs
 * (idempotent, acks=all, the gateway's partitioner), and waits up to
 * timeout_ms for their delivery reports: delivered[i] becomes 1 when Kafka
 * acknowledged message i, -1 when it failed, 0 when its outcome is unknown.
 * While the producer still holds messages of an earlier call (Kafka away),
 * it waits for them up to timeout_ms and, if they stay, produces nothing
 * (every delivered[i] 0): the rows are taken again later, not queued once
 * more on every try. Returns 0, or a negative error with err set when no
 * producer could be made.
 */
int rc_kafka_send(rc_kafka_t *k, const rc_kafka_msg_t *msgs, int n, int *delivered,
                  int64_t timeout_ms, char *err, size_t errlen);

#endif
