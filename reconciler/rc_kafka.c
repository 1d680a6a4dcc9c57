#include "rc_kafka.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_log.h"

#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The keys the reconciler's handles set themselves and a passthrough setting
 * (--kafka, VOUCHER_KAFKA_CONF) may not change; everything else (SASL, TLS,
 * timeouts...) passes straight to librdkafka. Every handle gets the same
 * pairs, so a key either list holds is refused at start
 * (rc_kafka_check_settings). The brokers come from --kafka-brokers alone.
 *
 * The readers: one carries the writer's group.id only to read the writer's
 * committed offsets, and must never commit into that group (it would move
 * the writer's position); the other reads each pass's events and ends a
 * partition at its end mark (enable.partition.eof), or the pass would wait
 * out its timeout and fail.
 */
static const char *const reader_keys[] = {"bootstrap.servers",  "metadata.broker.list", "group.id",
                                          "enable.auto.commit", "enable.partition.eof", NULL};
/*
 * The producer of repairs: uses go back to the pool only once their
 * VoucherReleased is acknowledged by every in-sync replica, once (acks=all,
 * idempotence), and murmur2_random, the gateway's partitioner, puts it in the
 * partition of the voucher's other events, so the writer applies them in
 * order.
 */
static const char *const producer_keys[] = {
    "bootstrap.servers",  "metadata.broker.list", "acks", "request.required.acks",
    "enable.idempotence", "partitioner",          NULL};
#define READER "the reconciler's reader"
#define PRODUCER "the reconciler's producer"

struct rc_kafka {
    char *brokers;
    const vc_kafka_settings_t *extra; /* borrowed */
    char *topic;
    rd_kafka_t *group;    /* carries the writer's group.id, never subscribes: offsets only */
    rd_kafka_t *producer; /* created on first publish */
    /*
     * Delivery reports of the current rc_kafka_publish() call, number call:
     * each message's opaque is its index in results. A report can come
     * after its call stopped waiting (Kafka away longer than the timeout):
     * it then names an earlier call and is dropped, never written into
     * memory the caller has freed since.
     */
    uint32_t call;
    int *results; /* 1 delivered, -1 failed, 0 no report yet */
    int nresults, cap;
};

/* A message's opaque: the call it belongs to and its index in that call. */
_Static_assert(sizeof(void *) >= 8, "a report tag needs a 64-bit pointer");
static void *report_tag(uint32_t call, int index)
{
    return (void *)(uintptr_t)(((uint64_t)call << 32) | (uint32_t)index);
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (level <= 3)
        vc_warn("kafka %s: %s", fac, buf);
    else
        vc_debug("kafka %s: %s", fac, buf);
}

static void delivery_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    rc_kafka_t *k = opaque;
    uint64_t tag = (uint64_t)(uintptr_t)m->_private;
    int index = (int)(uint32_t)tag;
    (void)rk;

    if ((uint32_t)(tag >> 32) != k->call || index < 0 || index >= k->nresults)
        return; /* late: its call already gave up, the release is published again */
    k->results[index] = m->err == RD_KAFKA_RESP_ERR_NO_ERROR ? 1 : -1;
}

static rd_kafka_t *new_client(rd_kafka_type_t type, const char *brokers,
                              const vc_kafka_settings_t *extra, const char *group,
                              const char *client_id, void *opaque, char *err, size_t errlen)
{
    const vc_kafka_own_t reader[] = {
        {"group.id", group},
        {"enable.auto.commit", "false"},
        {"enable.partition.eof", "true"},
        {NULL, NULL},
    };
    static const vc_kafka_own_t producer[] = {
        {"enable.idempotence", "true"},
        {"acks", "all"},
        VC_KAFKA_OWN_PARTITIONER,
        {"linger.ms", "5"},
        {NULL, NULL},
    };
    rd_kafka_conf_t *conf =
        type == RD_KAFKA_CONSUMER
            ? vc_kafka_conf_new(brokers, client_id, reader, extra, READER, reader_keys, err, errlen)
            : vc_kafka_conf_new(brokers, client_id, producer, extra, PRODUCER, producer_keys, err,
                                errlen);
    rd_kafka_t *rk;

    if (!conf)
        return NULL;
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_opaque(conf, opaque);
    if (type == RD_KAFKA_PRODUCER)
        rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb);
    /* rd_kafka_new() takes the conf only when it succeeds. */
    if (!(rk = rd_kafka_new(type, conf, err, errlen)))
        rd_kafka_conf_destroy(conf);
    return rk;
}

int rc_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen)
{
    int rc = vc_kafka_settings_check(extra, READER, reader_keys, err, errlen);

    if (rc == 0)
        rc = vc_kafka_settings_check(extra, PRODUCER, producer_keys, err, errlen);
    return rc;
}

rc_kafka_t *rc_kafka_new(const char *brokers, const vc_kafka_settings_t *extra, const char *group,
                         const char *topic, char *err, size_t errlen)
{
    rc_kafka_t *k = calloc(1, sizeof(*k));

    if (!k || !(k->brokers = strdup(brokers)) || !(k->topic = strdup(topic))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    k->extra = extra;
    if (!(k->group = new_client(RD_KAFKA_CONSUMER, brokers, extra, group, "voucher-reconciler", NULL,
                                err, errlen)))
        goto fail;
    return k;
fail:
    rc_kafka_free(k);
    return NULL;
}

void rc_kafka_free(rc_kafka_t *k)
{
    if (!k)
        return;
    if (k->producer) {
        rd_kafka_flush(k->producer, 5000);
        rd_kafka_destroy(k->producer);
    }
    if (k->group)
        rd_kafka_destroy(k->group);
    free(k->results);
    free(k->brokers);
    free(k->topic);
    free(k);
}

int rc_kafka_positions(rc_kafka_t *k, int64_t timeout_ms, rc_positions_t *pos, char *err,
                       size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->group, k->topic, NULL);
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t e;
    int rc = 0;

    memset(pos, 0, sizeof(*pos));
    e = rd_kafka_metadata(k->group, 0, rkt, &md, (int)timeout_ms);
    if (e || md->topic_cnt != 1 || md->topics[0].err) {
        snprintf(err, errlen, "Kafka metadata for %s: %s", k->topic,
                 rd_kafka_err2str(e ? e : md->topics[0].err));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    if (md->topics[0].partition_cnt > 64) {
        snprintf(err, errlen, "%s has %d partitions; this build reads at most 64", k->topic,
                 md->topics[0].partition_cnt);
        rc = VC_ERR_INVALID;
        goto out;
    }
    parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; i++)
        rd_kafka_topic_partition_list_add(parts, k->topic, md->topics[0].partitions[i].id);
    if ((e = rd_kafka_committed(k->group, parts, (int)timeout_ms)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "Kafka committed offsets: %s", rd_kafka_err2str(e));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo, hi, committed = parts->elems[i].offset;
        e = rd_kafka_query_watermark_offsets(k->group, k->topic, parts->elems[i].partition, &lo,
                                             &hi, (int)timeout_ms);
        if (e) {
            snprintf(err, errlen, "Kafka watermarks of %s [%d]: %s", k->topic,
                     parts->elems[i].partition, rd_kafka_err2str(e));
            rc = VC_ERR_UNAVAILABLE;
            goto out;
        }
        /* Nothing committed yet: the writer starts from the earliest event. */
        pos->partition[pos->n] = parts->elems[i].partition;
        pos->committed[pos->n] = committed < 0 || committed < lo ? lo : committed;
        pos->n++;
    }
out:
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return rc;
}

int rc_kafka_tail(rc_kafka_t *k, const rc_positions_t *pos, int64_t timeout_ms,
                  void (*cb)(void *arg, const vc_event_t *ev), void *arg, int64_t *lag,
                  int64_t *malformed, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *assign = rd_kafka_topic_partition_list_new(pos->n);
    rd_kafka_t *reader = NULL;
    int64_t end[64];
    int done[64] = {0}, remaining = 0, rc = 0;
    rd_kafka_resp_err_t e;
    int64_t waited = 0;

    *lag = *malformed = 0;
    for (int i = 0; i < pos->n; i++) {
        int64_t lo, hi;
        e = rd_kafka_query_watermark_offsets(k->group, k->topic, pos->partition[i], &lo, &hi,
                                             (int)timeout_ms);
        if (e) {
            snprintf(err, errlen, "Kafka watermarks: %s", rd_kafka_err2str(e));
            rc = VC_ERR_UNAVAILABLE;
            goto out;
        }
        end[i] = hi;
        if (pos->committed[i] >= hi) {
            done[i] = 1;
            continue;
        }
        *lag += hi - pos->committed[i];
        rd_kafka_topic_partition_list_add(assign, k->topic, pos->partition[i])->offset =
            pos->committed[i];
        remaining++;
    }
    if (remaining == 0)
        goto out;
    /*
     * A reader of its own for each pass: nothing fetched for an earlier pass
     * (a message, an end-of-partition mark) can arrive first and end this
     * pass's read of a partition early.
     */
    if (!(reader = new_client(RD_KAFKA_CONSUMER, k->brokers, k->extra, "voucher-reconciler-tail",
                              "voucher-reconciler-tail", NULL, err, errlen))) {
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    if ((e = rd_kafka_assign(reader, assign)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "Kafka assign: %s", rd_kafka_err2str(e));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    while (remaining > 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(reader, 100);
        int idx = -1;

        if (!m) {
            if ((waited += 100) >= timeout_ms) {
                snprintf(err, errlen, "Kafka: reading the events in flight took over %lld ms",
                         (long long)timeout_ms);
                rc = VC_ERR_TIMEOUT;
                break;
            }
            continue;
        }
        for (int i = 0; i < pos->n; i++)
            if (pos->partition[i] == m->partition)
                idx = i;
        if (idx < 0 || done[idx]) {
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->offset >= end[idx]) {
                done[idx] = 1;
                remaining--;
            }
        } else if (m->err) {
            snprintf(err, errlen, "Kafka: %s", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            rc = VC_ERR_UNAVAILABLE;
            break;
        } else if (m->offset < end[idx]) {
            vc_event_t ev;
            char derr[128];
            if (vc_event_decode(m->payload, m->len, &ev, derr, sizeof(derr)) == 0)
                cb(arg, &ev);
            else
                (*malformed)++;
            if (m->offset + 1 >= end[idx]) {
                done[idx] = 1;
                remaining--;
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(reader, NULL);
out:
    if (reader)
        rd_kafka_destroy(reader);
    rd_kafka_topic_partition_list_destroy(assign);
    return rc;
}

/*
 * A new call of n messages: room for their delivery results, all zero (not
 * reported yet), and a call number that tells this call's reports from a late
 * one of an earlier call. 0, or VC_ERR_NOMEM with err set.
 */
static int begin_call(rc_kafka_t *k, int n, char *err, size_t errlen)
{
    if (n > k->cap) {
        int *results = realloc(k->results, (size_t)n * sizeof(*results));
        if (!results) {
            snprintf(err, errlen, "out of memory");
            return VC_ERR_NOMEM;
        }
        k->results = results;
        k->cap = n;
    }
    k->call++;
    k->nresults = n;
    memset(k->results, 0, (size_t)n * sizeof(*k->results));
    return 0;
}

int rc_kafka_publish(rc_kafka_t *k, const vc_event_t *events, int n, int *delivered,
                     int64_t timeout_ms, char *err, size_t errlen)
{
    char buf[VC_EVENT_MAX_JSON], eerr[128], shown[VC_LOG_CODE_MAX]; /* a campaign's code: a hash */
    size_t len;

    if (!k->producer) {
        if (!(k->producer = new_client(RD_KAFKA_PRODUCER, k->brokers, k->extra, NULL,
                                       "voucher-reconciler", k, err, errlen)))
            return VC_ERR_UNAVAILABLE;
    }
    if (begin_call(k, n, err, errlen) != 0)
        return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        rd_kafka_resp_err_t e;
        if (vc_event_encode(&events[i], buf, sizeof(buf), &len, eerr, sizeof(eerr)) != 0) {
            vc_warn("cannot encode a repair event for %s/%s: %s",
                    vc_log_code(events[i].code, events[i].campaign_id > 0, shown),
                    events[i].order_id, eerr);
            k->results[i] = -1;
            continue;
        }
        char key[40];
        /* A campaign's events share one key, campaign:<id> (proto/campaigns.md). */
        if (events[i].campaign_id > 0)
            snprintf(key, sizeof(key), "campaign:%lld", (long long)events[i].campaign_id);
        else
            snprintf(key, sizeof(key), "%s", events[i].code);
        e = rd_kafka_producev(k->producer, RD_KAFKA_V_TOPIC(k->topic),
                              RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE(report_tag(k->call, i)), RD_KAFKA_V_END);
        if (e) {
            vc_warn("cannot publish a repair event for %s/%s: %s",
                    vc_log_code(events[i].code, events[i].campaign_id > 0, shown),
                    events[i].order_id, rd_kafka_err2str(e));
            k->results[i] = -1;
            continue;
        }
    }
    /* Waits for the delivery reports (the callback runs from rd_kafka_flush's polls). */
    rd_kafka_flush(k->producer, (int)timeout_ms);
    memcpy(delivered, k->results, (size_t)n * sizeof(*delivered));
    k->nresults = 0; /* reports still to come are late: dropped */
    return 0;
}

int rc_kafka_send(rc_kafka_t *k, const rc_kafka_msg_t *msgs, int n, int *delivered,
                  int64_t timeout_ms, char *err, size_t errlen)
{
    memset(delivered, 0, (size_t)n * sizeof(*delivered));
    if (!k->producer) {
        if (!(k->producer = new_client(RD_KAFKA_PRODUCER, k->brokers, k->extra, NULL,
                                       "voucher-reconciler", k, err, errlen)))
            return VC_ERR_UNAVAILABLE;
    }
    /*
     * Messages of an earlier call still queued: Kafka has not answered them.
     * Producing the rows again would queue a copy per try for as long as
     * Kafka stays away; they are taken again once the queue has drained.
     */
    if (rd_kafka_outq_len(k->producer) > 0 &&
        (rd_kafka_flush(k->producer, (int)timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR ||
         rd_kafka_outq_len(k->producer) > 0))
        return 0;
    if (begin_call(k, n, err, errlen) != 0)
        return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        rd_kafka_resp_err_t e =
            rd_kafka_producev(k->producer, RD_KAFKA_V_TOPIC(k->topic),
                              RD_KAFKA_V_KEY(msgs[i].key, strlen(msgs[i].key)),
                              RD_KAFKA_V_VALUE((void *)msgs[i].value, msgs[i].len),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE(report_tag(k->call, i)), RD_KAFKA_V_END);
        if (e) {
            /* The rest would reach the partition ahead of this one: not produced either. */
            vc_warn("cannot produce an outbox row keyed %s: %s", msgs[i].key, rd_kafka_err2str(e));
            for (int j = i; j < n; j++)
                k->results[j] = -1;
            break;
        }
    }
    rd_kafka_flush(k->producer, (int)timeout_ms);
    memcpy(delivered, k->results, (size_t)n * sizeof(*delivered));
    k->nresults = 0; /* reports still to come are late: dropped */
    return 0;
}
