/*
 * The reconciler's Kafka adapter: how many events the writer's consumer group
 * has not applied yet (its lag), read without joining the group.
 */
#ifndef RC_KAFKA_H
#define RC_KAFKA_H

#include <stddef.h>
#include <stdint.h>

typedef struct rc_kafka rc_kafka_t;

/* Returns a handle (the caller owns it: rc_kafka_free) or NULL with err set. */
rc_kafka_t *rc_kafka_new(const char *brokers, const char *group, char *err, size_t errlen);
void rc_kafka_free(rc_kafka_t *k);

/*
 * Sums, over the partitions of topic, the high watermark minus the group's
 * committed offset (the whole partition when nothing is committed yet).
 * Returns 0 with *lag set, or a negative error with err set.
 */
int rc_kafka_lag(rc_kafka_t *k, const char *topic, int64_t timeout_ms, int64_t *lag, char *err,
                 size_t errlen);

#endif
