/*
 * The writer's Kafka adapter: the consumer-group member that reads
 * voucher-events with offsets stored by hand, and the producer that writes
 * the dead-letter topic. The only writer file that speaks librdkafka.
 */
#ifndef WR_KAFKA_H
#define WR_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "vc_kafka_conf.h"
#include "wr_batch.h"

typedef struct wr_kafka wr_kafka_t;

/*
 * Called from inside wr_kafka_poll() when partitions are taken from this
 * member, before the stored offsets are committed and the partitions
 * released. partitions is borrowed for the call. The callee drops what it
 * buffered from them and must not call back into the adapter.
 */
typedef void (*wr_revoke_cb)(void *ctx, const int32_t *partitions, size_t n);

typedef struct {
    const char *brokers;   /* bootstrap.servers */
    const char *group;     /* group.id */
    const char *topic;     /* the topic to consume */
    const char *dlt_topic; /* where dead letters go */
    int64_t session_timeout_ms;
    const vc_kafka_settings_t *extra; /* --kafka and VOUCHER_KAFKA_CONF, or NULL */
    wr_revoke_cb revoke_cb;
    void *ctx;
} wr_kafka_conf_t;

/*
 * Checks extra as every handle of this adapter (the consumer, the dead-letter
 * producer, the dlt tools' reader and replayer) will apply it, without making
 * one, so that main() can refuse a bad setting at start: a key any of them
 * sets itself, or one librdkafka refuses. Returns 0 or VC_ERR_INVALID (or
 * VC_ERR_NOMEM) with err naming the key.
 */
int wr_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen);

/*
 * Creates the consumer (subscribed to conf->topic) and the dead-letter
 * producer, both with conf->extra applied after the writer's own settings.
 * The strings in conf and conf->extra are borrowed for the adapter's
 * lifetime. Returns 0, or VC_ERR_INVALID with err set. The caller owns *out
 * (wr_kafka_close).
 */
int wr_kafka_open(wr_kafka_t **out, const wr_kafka_conf_t *conf, char *err, size_t errlen);

/*
 * Waits up to timeout_ms for one message. Returns 1 and fills m (m->handle
 * is then owned by the caller: release it with wr_kafka_msg_release), 0 when
 * none came, or VC_ERR_IO after a fatal consumer error. Rebalances happen
 * inside this call.
 */
int wr_kafka_poll(wr_kafka_t *k, int timeout_ms, wr_msg_t *m);

/* Releases a message handle from wr_kafka_poll(); a wr_release_cb. */
void wr_kafka_msg_release(void *handle);

/*
 * Stores the given next offsets, to be committed by the next auto commit,
 * revoke or close. Only call once what comes before them is durable.
 * Returns 0, or VC_ERR_INVALID when librdkafka refused (e.g. the partition
 * is no longer assigned; its new owner reads again from the committed
 * offset, which is harmless).
 */
int wr_kafka_store(wr_kafka_t *k, const wr_position_t *pos, size_t n);

/*
 * Pauses (pause = 1) or resumes fetching of every assigned partition;
 * partitions assigned while paused start paused. Returns 0 or VC_ERR_INVALID.
 */
int wr_kafka_pause(wr_kafka_t *k, int pause);

/*
 * Produces msgs[0..n) to the dead-letter topic (same key and value, plus
 * the headers of wr_dlt.h built from each message's dlt_class and error)
 * and waits until each is acknowledged. A message the topic refuses for
 * what it is (too large, an invalid record) is sent again truncated, then
 * as a reference (wr_dlt_form_t); each message's dlt_form says what was
 * stored in the end, WR_DLT_LOST when not even the reference was taken.
 * Returns 0, or VC_ERR_UNAVAILABLE with err set when any was not
 * acknowledged for another reason (the topic or the cluster, not the
 * message): produce them all again later, from the forms reached.
 */
int wr_kafka_dead_letter(wr_kafka_t *k, wr_msg_t *const *msgs, size_t n, char *err, size_t errlen);

/* Commits the stored offsets synchronously. Returns 0 or VC_ERR_UNAVAILABLE. */
int wr_kafka_commit(wr_kafka_t *k);

/*
 * Events in the assigned partitions not yet applied: after the offsets
 * last stored, or before any store, from the first event fetched (from the
 * cached high watermarks: no broker round trip), or -1 when unknown.
 */
int64_t wr_kafka_lag(wr_kafka_t *k);

/*
 * Commits the stored offsets, leaves the group (the revoke callback runs
 * once more), flushes the producer and frees everything.
 */
/*
 * Whether the consumer is a member of its group now (its coordinator is up
 * and it has joined: an assignment, possibly empty, and heartbeats), as
 * librdkafka's statistics last said; 0 until they first say so. Call on the
 * loop's thread.
 */
int wr_kafka_in_group(const wr_kafka_t *k);

void wr_kafka_close(wr_kafka_t *k);

/* ---- Tools for `voucher-writer dlt`: reading the dead-letter topic, replaying. */

#include "wr_dlt.h"

/* One message read back from the dead-letter topic. */
typedef struct {
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* when it was dead-lettered (the DLT message's timestamp) */
    const void *key;      /* borrowed until the callback returns */
    size_t key_len;
    const void *value; /* borrowed until the callback returns */
    size_t len;
    wr_dlt_info_t info; /* from its headers */
} wr_dlt_record_t;

/* Returns 0 to go on reading, anything else to stop the scan with that value. */
typedef int (*wr_dlt_record_cb)(void *ctx, const wr_dlt_record_t *rec);

/*
 * Reads every message of topic (all partitions, from the oldest kept to the
 * end as it was when the scan started; partition by partition, in offset
 * order) and calls cb for each. Joins no consumer group and commits
 * nothing. extra (borrowed during the call; NULL for none) is applied to its
 * reader. Returns 0, the callback's non-zero value, VC_ERR_INVALID when the
 * reader cannot be made, or VC_ERR_UNAVAILABLE with err set.
 */
int wr_kafka_dlt_scan(const char *brokers, const vc_kafka_settings_t *extra, const char *topic,
                      wr_dlt_record_cb cb, void *ctx, char *err, size_t errlen);

/*
 * Sets *npartitions to the partition count of topic. extra as for
 * wr_kafka_dlt_scan(). Returns 0, VC_ERR_INVALID when the reader cannot be
 * made, or VC_ERR_UNAVAILABLE with err set.
 */
int wr_kafka_topic_partitions(const char *brokers, const vc_kafka_settings_t *extra,
                              const char *topic, int *npartitions, char *err, size_t errlen);

typedef struct wr_replayer wr_replayer_t;

/*
 * A producer for replays, with extra (borrowed during the call; NULL for
 * none) applied, and the gateway's partitioner (VC_KAFKA_PARTITIONER), so
 * that a replayed event joins its voucher's partition. Returns 0 or VC_ERR_INVALID; caller owns *out.
 */
int wr_replayer_open(wr_replayer_t **out, const char *brokers, const vc_kafka_settings_t *extra,
                     char *err, size_t errlen);

/*
 * Queues rec's key and value for topic with the header dlt-replayed-from
 * set to replayed_from (copied). Returns 0 or VC_ERR_UNAVAILABLE.
 */
int wr_replayer_send(wr_replayer_t *r, const char *topic, const wr_dlt_record_t *rec,
                     const char *replayed_from, char *err, size_t errlen);

/*
 * Waits for every queued message, then frees the producer. Sets *delivered
 * and returns 0 when all were acknowledged, else VC_ERR_UNAVAILABLE.
 */
int wr_replayer_close(wr_replayer_t *r, size_t *delivered, char *err, size_t errlen);

#endif
