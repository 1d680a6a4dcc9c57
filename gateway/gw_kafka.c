#include "gw_kafka.h"

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_metrics.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_log.h"

struct gw_kafka {
    rd_kafka_t *rk;
    uv_thread_t poller;
    atomic_int stop;
    atomic_int brokers_up; /* brokers in state UP at the last statistics */
    atomic_int pid_assigned; /* the idempotent producer has its producer id */
    rd_kafka_topic_t *warm;  /* the topic gw_kafka_warm() looked up, kept known */
};

/* One produced message: travels as the msg_opaque, then as a report in an inbox. */
struct gw_kafka_report {
    gw_kafka_report_t *next;
    gw_kafka_inbox_t *inbox;
    gw_kafka_delivery_cb cb;
    void *arg;
    int rc;
    uint64_t produced_ns; /* uv_hrtime() when produced: the stage histograms */
};

/* Runs on the polling thread: classify, then hand the report to its worker. */
static void delivery_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    gw_kafka_report_t *rep = msg->_private;
    gw_kafka_inbox_t *inbox = rep->inbox;
    (void)rk;
    (void)opaque;

    gw_metrics_kafka_ack((int64_t)((uv_hrtime() - rep->produced_ns) / 1000));
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        rep->rc = 0;
    else if (rd_kafka_message_status(msg) == RD_KAFKA_MSG_STATUS_NOT_PERSISTED)
        rep->rc = VC_ERR_UNAVAILABLE;
    else
        rep->rc = VC_ERR_UNKNOWN_OUTCOME;
    if (msg->err)
        gw_metrics_kafka_error(rep->rc == VC_ERR_UNKNOWN_OUTCOME);
    if (msg->err)
        vc_warn("kafka delivery to partition %d failed: %s (%s)", (int)msg->partition,
                rd_kafka_err2str(msg->err),
                rep->rc == VC_ERR_UNAVAILABLE ? "not persisted" : "possibly persisted");
    uv_mutex_lock(&inbox->lock);
    if (inbox->closed) {
        uv_mutex_unlock(&inbox->lock);
        free(rep);
        return;
    }
    rep->next = NULL;
    if (inbox->tail)
        inbox->tail->next = rep;
    else
        inbox->head = rep;
    inbox->tail = rep;
    uv_mutex_unlock(&inbox->lock);
    uv_async_send(&inbox->async);
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (level <= 3)
        vc_error("kafka %s: %s", fac, buf);
    else if (level <= 4)
        vc_warn("kafka %s: %s", fac, buf);
    else
        vc_debug("kafka %s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    gw_kafka_t *k = opaque;
    (void)rk;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && k)
        atomic_store(&k->brokers_up, 0);
    vc_warn("kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/*
 * The statistics JSON lists every broker with its "state"; the internal
 * pseudo-broker is listed with "source":"internal" before its state. Counting
 * the others that are "UP" needs no full parse.
 */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    gw_kafka_t *k = opaque;
    const char *p = json, *end = json + len, *brokers = strstr(json, "\"brokers\":");
    int up = 0;
    (void)rk;

    if (brokers)
        p = brokers;
    while (p < end && (p = strstr(p, "\"source\":\"")) != NULL) {
        const char *state = strstr(p, "\"state\":\"");
        int internal = strncmp(p + 10, "internal\"", 9) == 0;
        if (!state)
            break;
        if (!internal && strncmp(state + 9, "UP\"", 3) == 0)
            up++;
        p = state + 9;
    }
    atomic_store(&k->brokers_up, up);
    /*
     * The idempotent producer sends nothing before the broker gave it a
     * producer id: until then the first reservations would wait for it
     * (about a second after start), so the gateway is not ready yet.
     */
    if ((p = strstr(json, "\"idemp_state\":\"")) != NULL && p < end)
        atomic_store(&k->pid_assigned, strncmp(p + 15, "Assigned\"", 9) == 0);
    else
        atomic_store(&k->pid_assigned, 1); /* no such section: nothing to wait for */
    return 0; /* librdkafka frees json */
}

int gw_kafka_ready(gw_kafka_t *k)
{
    return atomic_load(&k->brokers_up) > 0 && atomic_load(&k->pid_assigned);
}

/*
 * Keys a passthrough setting may not change: the delivery guarantees rest on
 * them. acks=all and idempotence are what make a 201 mean "in Kafka, on every
 * in-sync replica, once"; murmur2_random puts a code's events in the partition
 * Kafka's own tools and the reconciler's repairs use, so they stay in order;
 * the brokers come from --kafka-brokers alone.
 */
static const char *const reserved_keys[] = {
    "acks",        "request.required.acks", "enable.idempotence",
    "partitioner", "bootstrap.servers",     "metadata.broker.list",
    NULL};
#define OWNER "the gateway"

int gw_kafka_check_settings(const vc_kafka_settings_t *extra, char *err, size_t errlen)
{
    return vc_kafka_settings_check(extra, OWNER, reserved_keys, err, errlen);
}

/*
 * rd_kafka_poll() sleeps on the reply queue and returns as soon as a delivery
 * report is queued, so the 100 ms is only how often the thread looks at
 * stop: it is no delay for a report. The hop from here to the worker loop
 * (uv_async_send) was measured as a stage of its own in issue 17
 * (voucher_gateway_kafka_report_seconds against _kafka_ack_seconds,
 * tests/bench/results/2026-12-01-latency.md): mostly under 0.6 ms at p99 in the
 * open-loop runs, against a Redis round trip and an acknowledgement of
 * several ms. Serving the queue from a worker loop instead
 * (rd_kafka_queue_cb_event_enable and a uv_async) would save that hop for the
 * reports of that one worker only (one producer serves every worker), and
 * would need the last worker to stop to keep polling: not worth it for what
 * it saves.
 */
static void poll_thread(void *arg)
{
    gw_kafka_t *k = arg;
    while (!atomic_load(&k->stop))
        rd_kafka_poll(k->rk, 100);
}

gw_kafka_t *gw_kafka_new(const char *brokers, int64_t delivery_timeout_ms,
                         const vc_kafka_settings_t *extra, char *err, size_t errlen)
{
    char timeout[32], errstr[512];
    /*
     * linger.ms=2: the broker acknowledges in well under a millisecond, and
     * the linger is most of the wait for the acknowledgement (median 1.7 ms
     * against 0.2 at linger.ms=0, issue 17's stage histograms); without it
     * the gateway and the broker spend 1.3-2x the CPU per reservation
     * (tests/bench/results/2026-11-30-producer.md, 2026-12-01-latency.md).
     * The p99 of a reservation is not the linger's: it follows the Redis
     * round trip (AOF fsync on every write, cores shared), so the linger stays.
     * A fractional linger.ms=0.5 waited about as long (librdkafka wakes by
     * the millisecond).
     */
    const vc_kafka_own_t own[] = {
        {"enable.idempotence", "true"},  {"acks", "all"},
        {"linger.ms", "2"},              {"delivery.timeout.ms", timeout},
        VC_KAFKA_OWN_PARTITIONER,        {"statistics.interval.ms", "1000"},
        {NULL, NULL},
    };
    rd_kafka_conf_t *conf = NULL;
    gw_kafka_t *k = calloc(1, sizeof(*k));

    if (!k) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(timeout, sizeof(timeout), "%lld", (long long)delivery_timeout_ms);
    if (!(conf = vc_kafka_conf_new(brokers, "voucher-gateway", own, extra, OWNER, reserved_keys,
                                   err, errlen)))
        goto fail;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    if (!(k->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr)))) {
        snprintf(err, errlen, "kafka producer: %s", errstr);
        goto fail;
    }
    conf = NULL; /* rd_kafka_new() took it */
    if (uv_thread_create(&k->poller, poll_thread, k) != 0) {
        snprintf(err, errlen, "cannot start the kafka polling thread");
        rd_kafka_destroy(k->rk);
        goto fail;
    }
    return k;
fail:
    if (conf)
        rd_kafka_conf_destroy(conf);
    free(k);
    return NULL;
}

/* On the worker loop: run the callbacks of the reports that arrived. */
static void inbox_cb(uv_async_t *a)
{
    gw_kafka_inbox_t *inbox = a->data;
    gw_kafka_report_t *rep, *next;

    uv_mutex_lock(&inbox->lock);
    rep = inbox->head;
    inbox->head = inbox->tail = NULL;
    uv_mutex_unlock(&inbox->lock);
    for (; rep; rep = next) {
        next = rep->next;
        inbox->in_flight--;
        gw_metrics_kafka_report((int64_t)((uv_hrtime() - rep->produced_ns) / 1000));
        rep->cb(rep->arg, rep->rc);
        free(rep);
    }
}

int gw_kafka_inbox_init(gw_kafka_inbox_t *inbox, uv_loop_t *loop)
{
    memset(inbox, 0, sizeof(*inbox));
    if (uv_mutex_init(&inbox->lock) != 0)
        return VC_ERR_NOMEM;
    if (uv_async_init(loop, &inbox->async, inbox_cb) != 0) {
        uv_mutex_destroy(&inbox->lock);
        return VC_ERR_IO;
    }
    inbox->async.data = inbox;
    return 0;
}

static void inbox_closed_cb(uv_handle_t *h)
{
    gw_kafka_inbox_t *inbox = h->data;
    gw_kafka_report_t *rep, *next;

    for (rep = inbox->head; rep; rep = next) {
        next = rep->next;
        free(rep);
    }
    inbox->head = inbox->tail = NULL;
}

void gw_kafka_inbox_close(gw_kafka_inbox_t *inbox)
{
    uv_mutex_lock(&inbox->lock);
    inbox->closed = 1;
    uv_mutex_unlock(&inbox->lock);
    uv_close((uv_handle_t *)&inbox->async, inbox_closed_cb);
}

int gw_kafka_produce(gw_kafka_t *k, gw_kafka_inbox_t *inbox, const char *topic, const char *key,
                     size_t keylen, const char *payload, size_t len, gw_kafka_delivery_cb cb,
                     void *arg)
{
    gw_kafka_report_t *rep = calloc(1, sizeof(*rep));
    rd_kafka_resp_err_t e;

    if (!rep)
        return VC_ERR_NOMEM;
    rep->inbox = inbox;
    rep->cb = cb;
    rep->arg = arg;
    rep->produced_ns = uv_hrtime();
    e = rd_kafka_producev(k->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY((void *)key, keylen),
                          RD_KAFKA_V_VALUE((void *)payload, len),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(rep),
                          RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        vc_warn("kafka produce to %s failed: %s", topic, rd_kafka_err2str(e));
        free(rep);
        return VC_ERR_UNAVAILABLE;
    }
    inbox->in_flight++;
    return 0;
}

int gw_kafka_warm(gw_kafka_t *k, const char *topic, int64_t timeout_ms, char *err, size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e;

    if (!k->warm && !(k->warm = rd_kafka_topic_new(k->rk, topic, NULL))) {
        snprintf(err, errlen, "kafka topic %s: %s", topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return VC_ERR_INVALID;
    }
    e = rd_kafka_metadata(k->rk, 0, k->warm, &md, (int)timeout_ms);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka metadata of %s: %s", topic, rd_kafka_err2str(e));
        return VC_ERR_UNAVAILABLE;
    }
    e = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
    rd_kafka_metadata_destroy(md);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka topic %s: %s", topic, rd_kafka_err2str(e));
        return VC_ERR_UNAVAILABLE;
    }
    return 0;
}

int gw_kafka_close(gw_kafka_t *k, int64_t timeout_ms)
{
    rd_kafka_resp_err_t e;
    int rc = 0;

    atomic_store(&k->stop, 1);
    uv_thread_join(&k->poller);
    e = rd_kafka_flush(k->rk, (int)timeout_ms);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        vc_warn("kafka flush: %d messages still outstanding: %s", rd_kafka_outq_len(k->rk),
                rd_kafka_err2str(e));
        rc = VC_ERR_TIMEOUT;
    }
    if (k->warm)
        rd_kafka_topic_destroy(k->warm);
    rd_kafka_destroy(k->rk);
    free(k);
    return rc;
}
