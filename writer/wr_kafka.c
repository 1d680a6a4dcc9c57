#include "wr_kafka.h"
#include "wr_dlt.h"

#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_json.h"
#include "vc_log.h"
#include "vc_time.h"

#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WR_DLT_FLUSH_MS 10000

/*
 * The keys each handle sets itself and a passthrough setting (--kafka,
 * VOUCHER_KAFKA_CONF) may not change, because what the writer promises rests
 * on them. Everything else (security.protocol, sasl.*, ssl.*, client.id,
 * timeouts...) passes straight to librdkafka, after the writer's own values.
 * Every handle of the process gets the same pairs, so a key reserved by any
 * one of them is refused at start (wr_kafka_check_settings).
 *
 * The brokers come from --kafka-brokers alone, for every handle.
 *
 * The consumer: an event's offset is stored by hand only after the COMMIT
 * that applied it, and the stored offsets are committed automatically; an
 * automatic store would commit events not yet applied (lost on a crash), and
 * no auto commit would leave the group's offsets, which the reconciler reads
 * as the writer's position, behind. group.id is --group, which the
 * reconciler reads too; a new group starts from the earliest event, or the
 * events published before it first joined would never be applied. The
 * statistics tell /readyz whether the consumer is in its group.
 */
static const char *const consumer_keys[] = {
    "bootstrap.servers",  "metadata.broker.list", "group.id", "enable.auto.offset.store",
    "enable.auto.commit", "auto.offset.reset",    "statistics.interval.ms", NULL};
/*
 * The dead-letter producer, and the replayer of `dlt replay`: a batch's
 * offsets are stored (or a replay reported done) only once every message is
 * acknowledged by all in-sync replicas (acks=all, which idempotence implies),
 * and idempotence keeps librdkafka's retries from writing one twice. Their
 * message timeout is shorter than the wait for the acknowledgements, so every
 * message is settled, delivered or failed, when the wait ends.
 */
static const char *const producer_keys[] = {"bootstrap.servers",
                                            "metadata.broker.list",
                                            "acks",
                                            "request.required.acks",
                                            "enable.idempotence",
                                            "message.timeout.ms",
                                            "delivery.timeout.ms",
                                            NULL};
/*
 * The reader of the dlt tools: it joins no group and must commit nothing
 * (group.id only lets it assign), and a partition's scan ends at its end
 * mark when the last offsets hold no message.
 */
static const char *const scanner_keys[] = {"bootstrap.servers",  "metadata.broker.list", "group.id",
                                           "enable.auto.commit", "enable.partition.eof", NULL};

/* The handles, as errors name them. */
#define CONSUMER "the writer's consumer"
#define DLT_PRODUCER "the writer's dead-letter producer"
#define SCANNER "the dlt tools' reader"
#define REPLAYER "the dlt replayer"

/* What became of one dead letter of the current wr_kafka_dead_letter() call. */
typedef enum {
    SLOT_SEND = 0,  /* to be produced in this round, in the message's dlt_form */
    SLOT_IN_FLIGHT, /* produced, no delivery report yet */
    SLOT_DONE,    /* acknowledged, or given up (WR_DLT_LOST) */
    SLOT_REFUSED, /* the broker or librdkafka refused this message itself: try a smaller form */
    SLOT_FAILED   /* anything else (broker away, no such topic, not authorized): retry later */
} wr_slot_state_t;

typedef struct {
    wr_slot_state_t state;
    rd_kafka_resp_err_t err;
} wr_slot_t;

struct wr_kafka {
    rd_kafka_t *consumer;
    rd_kafka_t *producer;
    wr_kafka_conf_t conf;
    int paused;
    /*
     * The dead letters of the current round of a wr_kafka_dead_letter()
     * call, which is round number dlt_call; each message carries its round
     * and its index in slots as its opaque (dlt_opaque). A report that comes
     * after its round gave up waiting (a broker away for longer than
     * WR_DLT_FLUSH_MS) belongs to an earlier round and is ignored.
     */
    wr_slot_t *slots;
    size_t nslots;
    uint32_t dlt_call;
    wr_msg_t *const *dlt_msgs; /* the call's messages: a report names where its letter went */
    /*
     * Per partition of the consumed topic (indexed by partition number), the
     * offset of the first event not yet applied: what the last
     * wr_kafka_store() stored, or before any store since the partition was
     * assigned, the first offset fetched. -1 when unknown. The lag counts
     * from here, not from the fetch position, which runs ahead of what is
     * applied by two batches, and all the way while a batch is retried.
     */
    int64_t *applied;
    size_t napplied;
    /*
     * Whether the consumer is a member of its group now: librdkafka's
     * statistics (every WR_STATS_MS ms) say its coordinator is up and its join
     * state steady. Written by stats_cb, which runs inside
     * rd_kafka_consumer_poll() on the loop's thread.
     */
    int in_group;
};

/* How often librdkafka reports its statistics (the group's state), in ms. */
#define WR_STATS_MS "1000"

_Static_assert(sizeof(uintptr_t) >= 8, "dlt_opaque packs the round and the index in a pointer");

static void *dlt_opaque(uint32_t call, size_t index)
{
    return (void *)(((uintptr_t)call << 32) | (uintptr_t)(uint32_t)index);
}

/*
 * Whether the broker (or librdkafka, before sending) refused this message
 * for what it is, so that sending it again can never succeed: too large for
 * the topic or the producer, or an invalid record. Everything else (a broker
 * away, an unknown topic, no authorization, a timeout) is about the cluster,
 * and is retried until an operator mends it.
 */
static int message_refused(rd_kafka_resp_err_t e)
{
    return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE ||
           e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

static vc_log_level_t syslog_level(int level)
{
    if (level <= 3)
        return VC_LOG_ERROR;
    if (level == 4)
        return VC_LOG_WARN;
    if (level <= 6)
        return VC_LOG_INFO;
    return VC_LOG_DEBUG;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    vc_log_field_t fields[] = {{"kafka", rd_kafka_name(rk)}, {"facility", fac}};
    VC_LOG_F(syslog_level(level), fields, "%s", buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    vc_log_field_t fields[] = {{"kafka", rd_kafka_name(rk)}};
    (void)opaque;
    VC_LOG_F(err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN ? VC_LOG_ERROR : VC_LOG_WARN, fields,
             "kafka: %s: %s", rd_kafka_err2name(err), reason);
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    wr_kafka_t *k = opaque;
    uintptr_t packed = (uintptr_t)rkm->_private;
    size_t index = (size_t)(uint32_t)packed;
    wr_slot_t *slot;

    (void)rk;
    if ((uint32_t)(packed >> 32) != k->dlt_call || index >= k->nslots)
        return;
    slot = &k->slots[index];
    slot->err = rkm->err;
    if (!rkm->err && k->dlt_msgs) {
        k->dlt_msgs[index]->dlt_partition = rkm->partition;
        k->dlt_msgs[index]->dlt_offset = rkm->offset;
    }
    slot->state = !rkm->err                  ? SLOT_DONE
                  : message_refused(rkm->err) ? SLOT_REFUSED
                                              : SLOT_FAILED;
}

/* The lag's starting point of partition p: grows the table as needed. */
static void set_applied(wr_kafka_t *k, int32_t p, int64_t next_offset, int only_if_unknown)
{
    if (p < 0)
        return;
    if ((size_t)p >= k->napplied) {
        size_t n = (size_t)p + 16;
        int64_t *grown = realloc(k->applied, n * sizeof(*grown));
        if (!grown)
            return; /* the lag of p stays unknown */
        for (size_t i = k->napplied; i < n; i++)
            grown[i] = -1;
        k->applied = grown;
        k->napplied = n;
    }
    if (!only_if_unknown || k->applied[p] < 0)
        k->applied[p] = next_offset;
}

/* Pauses or resumes parts; logs a failure. */
static void pause_list(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int pause)
{
    rd_kafka_resp_err_t e =
        pause ? rd_kafka_pause_partitions(rk, parts) : rd_kafka_resume_partitions(rk, parts);
    if (e)
        vc_warn("could not %s partitions: %s", pause ? "pause" : "resume", rd_kafka_err2str(e));
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    wr_kafka_t *k = opaque;
    int cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t e = 0;
    char list[256];
    size_t used = 0;
    int32_t *ids;

    list[0] = '\0';
    for (int i = 0; i < parts->cnt && used < sizeof(list) - 8; i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", i ? "," : "",
                                 (int)parts->elems[i].partition);

    /* Whatever was known of these partitions is stale now. */
    for (int i = 0; i < parts->cnt; i++)
        if ((size_t)parts->elems[i].partition < k->napplied)
            k->applied[parts->elems[i].partition] = -1;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        vc_info("assigned partitions [%s]", list);
        if (cooperative)
            error = rd_kafka_incremental_assign(rk, parts);
        else
            e = rd_kafka_assign(rk, parts);
        if (!error && !e && k->paused)
            pause_list(rk, parts, 1);
    } else {
        vc_info("partitions [%s] revoked%s", list, rd_kafka_assignment_lost(rk) ? " (lost)" : "");
        ids = calloc((size_t)parts->cnt + 1, sizeof(*ids));
        if (ids) {
            for (int i = 0; i < parts->cnt; i++)
                ids[i] = parts->elems[i].partition;
            k->conf.revoke_cb(k->conf.ctx, ids, (size_t)parts->cnt);
            free(ids);
        } else {
            /* Cannot say which: drop everything buffered, all of it is re-read. */
            k->conf.revoke_cb(k->conf.ctx, NULL, 0);
        }
        if (!rd_kafka_assignment_lost(rk)) {
            rd_kafka_resp_err_t ce = rd_kafka_commit(rk, NULL, 0 /* sync */);
            if (ce && ce != RD_KAFKA_RESP_ERR__NO_OFFSET)
                vc_warn("commit on revoke failed: %s", rd_kafka_err2str(ce));
        }
        if (cooperative)
            error = rd_kafka_incremental_unassign(rk, parts);
        else
            e = rd_kafka_assign(rk, NULL);
    }
    if (error) {
        vc_error("rebalance: %s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    } else if (e) {
        vc_error("rebalance: %s", rd_kafka_err2str(e));
    }
}

/* librdkafka's statistics: only the consumer group's state is read. */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    static const char *const state_path[] = {"cgrp", "state", NULL};
    static const char *const join_path[] = {"cgrp", "join_state", NULL};
    wr_kafka_t *k = opaque;
    char state[32], join[32];
    int member;

    (void)rk;
    member = vc_json_pick_str(json, len, state_path, state, sizeof(state)) == 0 &&
             vc_json_pick_str(json, len, join_path, join, sizeof(join)) == 0 &&
             strcmp(state, "up") == 0 && strcmp(join, "steady") == 0;
    if (member != k->in_group)
        vc_info("consumer group: %s (coordinator %s, join state %s)",
                member ? "member" : "not a member", state, join);
    k->in_group = member;
    return 0; /* librdkafka frees json */
}

int wr_kafka_in_group(const wr_kafka_t *k)
{
    return k->in_group;
}

static int open_consumer(wr_kafka_t *k, char *err, size_t errlen)
{
    char session_timeout[24], heartbeat[24];
    const vc_kafka_own_t own[] = {
        {"group.id", k->conf.group},
        /* Offsets are stored by hand, after the COMMIT that applied them. */
        {"enable.auto.offset.store", "false"},
        {"enable.auto.commit", "true"},
        {"auto.commit.interval.ms", "1000"},
        {"auto.offset.reset", "earliest"},
        {"enable.partition.eof", "false"},
        {"session.timeout.ms", session_timeout},
        {"heartbeat.interval.ms", heartbeat},
        {"log.connection.close", "false"},
        /*
         * Caught up with a busy topic, the default (answer a fetch as soon as
         * one byte is there) made a fetch per handful of events: a fifth of a
         * core of the broker's during a sale. Batches wait for 20 ms anyway.
         */
        {"fetch.min.bytes", "65536"},
        {"fetch.wait.max.ms", "50"},
        {"statistics.interval.ms", WR_STATS_MS},
        {NULL, NULL},
    };
    rd_kafka_conf_t *conf;
    rd_kafka_topic_partition_list_t *topics = NULL;
    rd_kafka_resp_err_t e;
    int rc = 0;

    snprintf(session_timeout, sizeof(session_timeout), "%lld",
             (long long)k->conf.session_timeout_ms);
    snprintf(heartbeat, sizeof(heartbeat), "%lld", (long long)k->conf.session_timeout_ms / 3);
    if (!(conf = vc_kafka_conf_new(k->conf.brokers, "voucher-writer", own, k->conf.extra, CONSUMER,
                                   consumer_keys, err, errlen))) {
        rc = VC_ERR_INVALID;
        goto fail;
    }
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    k->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errlen);
    if (!k->consumer) {
        rc = VC_ERR_INVALID;
        goto fail;
    }
    conf = NULL; /* rd_kafka_new() took it */
    rd_kafka_poll_set_consumer(k->consumer);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, k->conf.topic, RD_KAFKA_PARTITION_UA);
    if ((e = rd_kafka_subscribe(k->consumer, topics)) != 0) {
        snprintf(err, errlen, "subscribe to %s: %s", k->conf.topic, rd_kafka_err2str(e));
        rc = VC_ERR_INVALID;
    }
    rd_kafka_topic_partition_list_destroy(topics);
    return rc;
fail:
    if (conf)
        rd_kafka_conf_destroy(conf);
    return rc;
}

static int open_producer(wr_kafka_t *k, char *err, size_t errlen)
{
    static const vc_kafka_own_t own[] = {
        VC_KAFKA_OWN_PARTITIONER,
        {"enable.idempotence", "true"},
        {"linger.ms", "5"},
        {"message.timeout.ms", "8000"},
        {"log.connection.close", "false"},
        {NULL, NULL},
    };
    rd_kafka_conf_t *conf = vc_kafka_conf_new(k->conf.brokers, "voucher-writer-dlt", own,
                                              k->conf.extra, DLT_PRODUCER, producer_keys, err,
                                              errlen);

    if (!conf)
        return VC_ERR_INVALID;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    k->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (!k->producer) {
        rd_kafka_conf_destroy(conf);
        return VC_ERR_INVALID;
    }
    return 0;
}

int wr_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen)
{
    int rc = vc_kafka_settings_check(extra, CONSUMER, consumer_keys, err, errlen);

    /* The replayer has the dead-letter producer's keys. */
    if (rc == 0)
        rc = vc_kafka_settings_check(extra, DLT_PRODUCER, producer_keys, err, errlen);
    if (rc == 0)
        rc = vc_kafka_settings_check(extra, SCANNER, scanner_keys, err, errlen);
    return rc;
}

int wr_kafka_open(wr_kafka_t **out, const wr_kafka_conf_t *conf, char *err, size_t errlen)
{
    wr_kafka_t *k = calloc(1, sizeof(*k));
    int rc;

    *out = NULL;
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    k->conf = *conf;
    if ((rc = open_producer(k, err, errlen)) != 0 || (rc = open_consumer(k, err, errlen)) != 0) {
        if (k->consumer)
            rd_kafka_destroy(k->consumer);
        if (k->producer)
            rd_kafka_destroy(k->producer);
        free(k);
        return rc;
    }
    *out = k;
    return 0;
}

int wr_kafka_poll(wr_kafka_t *k, int timeout_ms, wr_msg_t *m)
{
    rd_kafka_message_t *rkm = rd_kafka_consumer_poll(k->consumer, timeout_ms);
    rd_kafka_timestamp_type_t tstype;
    char reason[256];

    if (!rkm)
        return 0;
    if (rkm->err) {
        if (rd_kafka_fatal_error(k->consumer, reason, sizeof(reason))) {
            vc_error("fatal consumer error: %s", reason);
            rd_kafka_message_destroy(rkm);
            return VC_ERR_IO;
        }
        if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            vc_warn("consumer: %s", rd_kafka_message_errstr(rkm));
        rd_kafka_message_destroy(rkm);
        return 0;
    }
    set_applied(k, rkm->partition, rkm->offset, 1);
    memset(m, 0, sizeof(*m));
    m->partition = rkm->partition;
    m->offset = rkm->offset;
    m->timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
    m->key = rkm->key;
    m->key_len = rkm->key_len;
    m->payload = rkm->payload;
    m->len = rkm->len;
    m->handle = rkm;
    m->dlt_partition = -1;
    m->dlt_offset = -1;
    {
        rd_kafka_headers_t *hdrs = NULL;
        const void *value = NULL;
        size_t size = 0;
        /* A replayed event names its letter: applying it settles the letter (009). */
        if (rd_kafka_message_headers(rkm, &hdrs) == 0 &&
            rd_kafka_header_get_last(hdrs, WR_HDR_REPLAYED_FROM, &value, &size) == 0 && value &&
            size < sizeof(m->replayed_from)) {
            memcpy(m->replayed_from, value, size);
            m->replayed_from[size] = '\0';
        }
    }
    return 1;
}

void wr_kafka_msg_release(void *handle)
{
    rd_kafka_message_destroy(handle);
}

int wr_kafka_store(wr_kafka_t *k, const wr_position_t *pos, size_t n)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)n);
    rd_kafka_resp_err_t e;
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        rd_kafka_topic_partition_list_add(list, k->conf.topic, pos[i].partition)->offset =
            pos[i].next_offset;
        set_applied(k, pos[i].partition, pos[i].next_offset, 0);
    }
    e = rd_kafka_offsets_store(k->consumer, list);
    if (e) {
        vc_warn("storing offsets: %s", rd_kafka_err2str(e));
        rc = VC_ERR_INVALID;
    }
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

int wr_kafka_pause(wr_kafka_t *k, int pause)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t e;

    k->paused = pause;
    if ((e = rd_kafka_assignment(k->consumer, &parts)) != 0) {
        vc_warn("reading the assignment: %s", rd_kafka_err2str(e));
        return VC_ERR_INVALID;
    }
    if (parts->cnt > 0)
        pause_list(k->consumer, parts, pause);
    rd_kafka_topic_partition_list_destroy(parts);
    return 0;
}

/*
 * Queues m for the dead-letter topic in the form m->dlt_form (WR_DLT_WHOLE,
 * WR_DLT_TRUNCATED or WR_DLT_REFERENCE) as message index of the current
 * round. Returns librdkafka's immediate answer.
 */
static rd_kafka_resp_err_t produce_dead_letter(wr_kafka_t *k, const wr_msg_t *m, size_t index)
{
    wr_dlt_info_t info;
    wr_header_t hdrs[WR_DLT_MAX_HEADERS];
    wr_dlt_form_t form = (wr_dlt_form_t)m->dlt_form;
    rd_kafka_headers_t *h;
    rd_kafka_resp_err_t e;
    size_t nh;

    wr_dlt_info_clear(&info);
    snprintf(info.topic, sizeof(info.topic), "%s", k->conf.topic);
    info.partition = m->partition;
    info.offset = m->offset;
    info.timestamp_ms = m->timestamp_ms;
    snprintf(info.group, sizeof(info.group), "%s", k->conf.group);
    snprintf(info.error_class, sizeof(info.error_class), "%s",
             m->dlt_class ? m->dlt_class : WR_DLT_REJECTED);
    snprintf(info.error_message, sizeof(info.error_message), "%s", m->error);
    info.failed_at_ms = vc_time_now_ms();
    if (form != WR_DLT_WHOLE)
        info.truncated_from = (int64_t)m->len;
    nh = wr_dlt_headers(&info, hdrs);
    h = rd_kafka_headers_new(nh);
    for (size_t i = 0; i < nh; i++)
        rd_kafka_header_add(h, hdrs[i].name, -1, hdrs[i].value, -1);
    e = rd_kafka_producev(
        k->producer, RD_KAFKA_V_TOPIC(k->conf.dlt_topic),
        RD_KAFKA_V_KEY(m->key, wr_dlt_form_keep(form, m->key_len, 1)),
        RD_KAFKA_V_VALUE((void *)m->payload, wr_dlt_form_keep(form, m->len, 0)),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
        RD_KAFKA_V_OPAQUE(dlt_opaque(k->dlt_call, index)), RD_KAFKA_V_END);
    if (e)
        rd_kafka_headers_destroy(h); /* producev took it only on success */
    return e;
}

/*
 * After librdkafka's idempotent producer raised a fatal error (it can no
 * longer guarantee order or exactly-once), only a new producer can send.
 * The old one stays when no new one can be made (its produce calls then fail
 * as transient errors, and the next call tries again). Returns 0 or
 * VC_ERR_UNAVAILABLE.
 */
static int renew_producer(wr_kafka_t *k, const char *reason, char *err, size_t errlen)
{
    rd_kafka_t *old = k->producer;

    vc_error("the dead-letter producer failed for good (%s): making a new one", reason);
    k->producer = NULL;
    if (open_producer(k, err, errlen) != 0) {
        k->producer = old;
        return VC_ERR_UNAVAILABLE;
    }
    rd_kafka_destroy(old);
    return 0;
}

int wr_kafka_dead_letter(wr_kafka_t *k, wr_msg_t *const *msgs, size_t n, char *err, size_t errlen)
{
    char reason[256], why[256];
    size_t failed = 0;
    int again = 1;

    if (n > k->nslots) {
        wr_slot_t *grown = realloc(k->slots, n * sizeof(*grown));
        if (!grown) {
            snprintf(err, errlen, "out of memory");
            return VC_ERR_UNAVAILABLE;
        }
        k->slots = grown;
        k->nslots = n;
    }
    for (size_t i = 0; i < n; i++) {
        k->slots[i] = (wr_slot_t){msgs[i]->dlt_form == WR_DLT_LOST ? SLOT_DONE : SLOT_SEND, 0};
        msgs[i]->dlt_partition = -1;
        msgs[i]->dlt_offset = -1;
    }
    k->dlt_msgs = msgs;
    /*
     * Round after round, each message the topic refused for what it is steps
     * down one form (whole, truncated, reference) and goes again; its form
     * stays with the queued message, so a retry of the batch starts there. A
     * message refused even as a reference is given up (WR_DLT_LOST): the log
     * then holds its only trace. At most three rounds.
     */
    while (again) {
        size_t sent = 0;

        again = 0;
        k->dlt_call++;
        for (size_t i = 0; i < n; i++) {
            wr_slot_t *slot = &k->slots[i];
            rd_kafka_resp_err_t e;

            if (slot->state != SLOT_SEND)
                continue;
            for (;;) {
                e = produce_dead_letter(k, msgs[i], i);
                if (e == RD_KAFKA_RESP_ERR__FATAL &&
                    rd_kafka_fatal_error(k->producer, reason, sizeof(reason)) &&
                    renew_producer(k, reason, why, sizeof(why)) == 0)
                    e = produce_dead_letter(k, msgs[i], i);
                if (!e || !message_refused(e) || msgs[i]->dlt_form >= WR_DLT_REFERENCE)
                    break;
                msgs[i]->dlt_form++; /* librdkafka refused it before sending: smaller at once */
            }
            if (!e) {
                *slot = (wr_slot_t){SLOT_IN_FLIGHT, 0};
                sent++;
            } else if (message_refused(e)) {
                msgs[i]->dlt_form = WR_DLT_LOST;
                *slot = (wr_slot_t){SLOT_DONE, 0};
            } else {
                *slot = (wr_slot_t){SLOT_FAILED, e};
            }
        }
        if (sent > 0)
            rd_kafka_flush(k->producer, WR_DLT_FLUSH_MS);
        for (size_t i = 0; i < n; i++) {
            wr_slot_t *slot = &k->slots[i];
            if (slot->state == SLOT_IN_FLIGHT) {
                *slot = (wr_slot_t){SLOT_FAILED, RD_KAFKA_RESP_ERR__TIMED_OUT};
            } else if (slot->state == SLOT_REFUSED) {
                msgs[i]->dlt_form++;
                slot->state = msgs[i]->dlt_form == WR_DLT_LOST ? SLOT_DONE : SLOT_SEND;
                if (slot->state == SLOT_SEND)
                    again = 1;
            }
            if (slot->state == SLOT_FAILED && failed++ == 0)
                snprintf(reason, sizeof(reason), "%s", rd_kafka_err2str(slot->err));
        }
        if (failed > 0) {
            snprintf(err, errlen, "%zu of %zu dead letters not acknowledged by %s: %s", failed,
                     n, k->conf.dlt_topic, reason);
            break;
        }
    }
    k->dlt_msgs = NULL;
    if (rd_kafka_fatal_error(k->producer, reason, sizeof(reason)) &&
        renew_producer(k, reason, why, sizeof(why)) != 0)
        vc_error("a new dead-letter producer: %s", why); /* the next call tries again */
    return failed > 0 ? VC_ERR_UNAVAILABLE : 0;
}

int wr_kafka_commit(wr_kafka_t *k)
{
    rd_kafka_resp_err_t e = rd_kafka_commit(k->consumer, NULL, 0 /* sync */);

    if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        vc_warn("committing offsets: %s", rd_kafka_err2str(e));
        return VC_ERR_UNAVAILABLE;
    }
    return 0;
}

int64_t wr_kafka_lag(wr_kafka_t *k)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    int64_t lag = 0;

    if (rd_kafka_assignment(k->consumer, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR || !parts)
        return -1;
    for (int i = 0; i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        int64_t lo, hi, from = (size_t)p < k->napplied ? k->applied[p] : -1;
        /* Cached watermarks: no round trip to the broker. */
        if (from < 0 ||
            rd_kafka_get_watermark_offsets(k->consumer, parts->elems[i].topic, p, &lo, &hi) !=
                RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        if (hi > from)
            lag += hi - from;
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return lag;
}

void wr_kafka_close(wr_kafka_t *k)
{
    rd_kafka_resp_err_t e;

    if (!k)
        return;
    wr_kafka_commit(k);
    if ((e = rd_kafka_consumer_close(k->consumer)) != 0)
        vc_warn("closing the consumer: %s", rd_kafka_err2str(e));
    rd_kafka_destroy(k->consumer);
    rd_kafka_flush(k->producer, WR_DLT_FLUSH_MS);
    rd_kafka_destroy(k->producer);
    free(k->slots);
    free(k->applied);
    free(k);
}

/* ---- dead-letter tools */

/* What the replayer's delivery reports said. */
typedef struct {
    size_t delivered, failed;
    char delivery_error[128];
} wr_replay_counts_t;

static void replay_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    wr_replay_counts_t *c = opaque;

    (void)rk;
    if (rkm->err) {
        c->failed++;
        snprintf(c->delivery_error, sizeof(c->delivery_error), "%s", rd_kafka_err2str(rkm->err));
    } else {
        c->delivered++;
    }
}

static rd_kafka_t *tool_handle(rd_kafka_type_t type, const char *brokers,
                               const vc_kafka_settings_t *extra, void *opaque, char *err,
                               size_t errlen)
{
    static const vc_kafka_own_t scanner[] = {
        {"log.connection.close", "false"},
        /* assign() wants a group id; nothing joins or commits with it. */
        {"group.id", "voucher-writer-dlt-tool"},
        {"enable.auto.commit", "false"},
        {"enable.partition.eof", "true"},
        {NULL, NULL},
    };
    static const vc_kafka_own_t replayer[] = {
        {"log.connection.close", "false"},
        {"enable.idempotence", "true"},
        /* A replayed event must land where the gateway puts its voucher's events. */
        VC_KAFKA_OWN_PARTITIONER,
        {"message.timeout.ms", "15000"},
        {NULL, NULL},
    };
    rd_kafka_conf_t *conf =
        type == RD_KAFKA_CONSUMER
            ? vc_kafka_conf_new(brokers, "voucher-writer-dlt-tool", scanner, extra, SCANNER,
                                scanner_keys, err, errlen)
            : vc_kafka_conf_new(brokers, "voucher-writer-dlt-tool", replayer, extra, REPLAYER,
                                producer_keys, err, errlen);
    rd_kafka_t *rk;

    if (!conf)
        return NULL;
    rd_kafka_conf_set_opaque(conf, opaque);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    if (type == RD_KAFKA_PRODUCER)
        rd_kafka_conf_set_dr_msg_cb(conf, replay_dr_cb);
    if (!(rk = rd_kafka_new(type, conf, err, errlen)))
        rd_kafka_conf_destroy(conf);
    return rk;
}

static void read_record(const rd_kafka_message_t *rkm, wr_dlt_record_t *rec)
{
    rd_kafka_headers_t *hdrs = NULL;
    rd_kafka_timestamp_type_t tstype;
    const char *name;
    const void *value;
    size_t size;

    memset(rec, 0, sizeof(*rec));
    rec->partition = rkm->partition;
    rec->offset = rkm->offset;
    rec->timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
    rec->key = rkm->key;
    rec->key_len = rkm->key_len;
    rec->value = rkm->payload;
    rec->len = rkm->len;
    wr_dlt_info_clear(&rec->info);
    if (rd_kafka_message_headers(rkm, &hdrs) != 0)
        return;
    for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == 0; i++)
        wr_dlt_info_set(&rec->info, name, value, size); /* a bad header leaves its field unset */
}

/*
 * The metadata of topic, checked: one topic, known to the cluster. Returns 0
 * with *md set (the caller destroys it), or VC_ERR_UNAVAILABLE with err set.
 */
static int topic_metadata(rd_kafka_t *rk, const char *topic, const rd_kafka_metadata_t **md,
                          char *err, size_t errlen)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t e;

    *md = NULL;
    if (!rkt) {
        snprintf(err, errlen, "metadata of %s: %s", topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return VC_ERR_UNAVAILABLE;
    }
    e = rd_kafka_metadata(rk, 0, rkt, md, 10000);
    rd_kafka_topic_destroy(rkt);
    if (e != 0 || (*md)->topic_cnt != 1 || (*md)->topics[0].err) {
        snprintf(err, errlen, "metadata of %s: %s", topic,
                 rd_kafka_err2str(e                 ? e
                                  : (*md)->topic_cnt ? (*md)->topics[0].err
                                                     : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        if (*md)
            rd_kafka_metadata_destroy(*md);
        *md = NULL;
        return VC_ERR_UNAVAILABLE;
    }
    return 0;
}

int wr_kafka_dlt_scan(const char *brokers, const vc_kafka_settings_t *extra, const char *topic,
                      wr_dlt_record_cb cb, void *ctx, char *err, size_t errlen)
{
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_t *rk;
    rd_kafka_resp_err_t e;
    int64_t *high = NULL;
    int remaining = 0, rc = 0, npart;

    if (!(rk = tool_handle(RD_KAFKA_CONSUMER, brokers, extra, NULL, err, errlen)))
        return VC_ERR_INVALID;
    rd_kafka_poll_set_consumer(rk);
    if ((rc = topic_metadata(rk, topic, &md, err, errlen)) != 0)
        goto out;
    npart = md->topics[0].partition_cnt;
    high = calloc((size_t)npart + 1, sizeof(*high));
    parts = rd_kafka_topic_partition_list_new(npart);
    for (int i = 0; i < npart; i++) {
        int32_t p = md->topics[0].partitions[i].id;
        int64_t lo, hi;
        if ((e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 10000)) != 0) {
            snprintf(err, errlen, "offsets of %s/%d: %s", topic, (int)p, rd_kafka_err2str(e));
            rc = VC_ERR_UNAVAILABLE;
            goto out;
        }
        if (hi > lo) {
            rd_kafka_topic_partition_list_add(parts, topic, p)->offset = lo;
            high[i] = hi;
            remaining++;
        }
    }
    if (remaining == 0)
        goto out;
    if ((e = rd_kafka_assign(rk, parts)) != 0) {
        snprintf(err, errlen, "assign %s: %s", topic, rd_kafka_err2str(e));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    while (remaining > 0 && rc == 0) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 10000);
        wr_dlt_record_t rec;
        int idx = -1;

        if (!rkm) {
            snprintf(err, errlen, "no message from %s for 10 s", topic);
            rc = VC_ERR_UNAVAILABLE;
            break;
        }
        for (int i = 0; i < npart; i++)
            if (md->topics[0].partitions[i].id == rkm->partition)
                idx = i;
        if (rkm->err && rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            snprintf(err, errlen, "reading %s: %s", topic, rd_kafka_message_errstr(rkm));
            rc = VC_ERR_UNAVAILABLE;
        } else if (idx >= 0 && high[idx] > 0) {
            if (!rkm->err && rkm->offset < high[idx]) {
                read_record(rkm, &rec);
                rc = cb(ctx, &rec);
            }
            if (rkm->err || rkm->offset + 1 >= high[idx]) {
                high[idx] = 0; /* this partition is done */
                remaining--;
            }
        }
        rd_kafka_message_destroy(rkm);
    }
out:
    if (md)
        rd_kafka_metadata_destroy(md);
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    free(high);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

int wr_kafka_topic_partitions(const char *brokers, const vc_kafka_settings_t *extra,
                              const char *topic, int *npartitions, char *err, size_t errlen)
{
    const rd_kafka_metadata_t *md;
    rd_kafka_t *rk;
    int rc;

    if (!(rk = tool_handle(RD_KAFKA_CONSUMER, brokers, extra, NULL, err, errlen)))
        return VC_ERR_INVALID;
    if ((rc = topic_metadata(rk, topic, &md, err, errlen)) == 0) {
        *npartitions = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_destroy(rk);
    return rc;
}

struct wr_replayer {
    rd_kafka_t *rk;
    wr_replay_counts_t counts;
    size_t sent;
};

int wr_replayer_open(wr_replayer_t **out, const char *brokers, const vc_kafka_settings_t *extra,
                     char *err, size_t errlen)
{
    wr_replayer_t *r = calloc(1, sizeof(*r));

    *out = NULL;
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    if (!(r->rk = tool_handle(RD_KAFKA_PRODUCER, brokers, extra, &r->counts, err, errlen))) {
        free(r);
        return VC_ERR_INVALID;
    }
    *out = r;
    return 0;
}

int wr_replayer_send(wr_replayer_t *r, const char *topic, const wr_dlt_record_t *rec,
                     const char *replayed_from, char *err, size_t errlen)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(1);
    rd_kafka_resp_err_t e;

    rd_kafka_header_add(h, WR_HDR_REPLAYED_FROM, -1, replayed_from, -1);
    for (;;) {
        e = rd_kafka_producev(
            r->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(rec->key, rec->key_len),
            RD_KAFKA_V_VALUE((void *)rec->value, rec->len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(r->rk, 100); /* wait for room */
    }
    if (e) {
        rd_kafka_headers_destroy(h);
        snprintf(err, errlen, "producing to %s: %s", topic, rd_kafka_err2str(e));
        return VC_ERR_UNAVAILABLE;
    }
    r->sent++;
    rd_kafka_poll(r->rk, 0);
    return 0;
}

int wr_replayer_close(wr_replayer_t *r, size_t *delivered, char *err, size_t errlen)
{
    int rc = 0;

    rd_kafka_flush(r->rk, 30000);
    *delivered = r->counts.delivered;
    if (r->counts.delivered != r->sent) {
        snprintf(err, errlen, "%zu of %zu replayed events not acknowledged: %s",
                 r->sent - r->counts.delivered, r->sent,
                 r->counts.failed ? r->counts.delivery_error : "timed out");
        rc = VC_ERR_UNAVAILABLE;
    }
    rd_kafka_destroy(r->rk);
    free(r);
    return rc;
}
