#include "rc_kafka.h"
#include "vc_error.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rc_kafka {
    rd_kafka_t *rk;
};

rc_kafka_t *rc_kafka_new(const char *brokers, const char *group, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rc_kafka_t *k = calloc(1, sizeof(*k));

    if (!k) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, errlen) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "group.id", group, err, errlen) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, errlen) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "client.id", "voucher-reconciler", err, errlen) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "3", err, errlen) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        free(k);
        return NULL;
    }
    /* rd_kafka_new() takes the conf only when it succeeds. */
    if (!(k->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errlen))) {
        rd_kafka_conf_destroy(conf);
        free(k);
        return NULL;
    }
    return k;
}

void rc_kafka_free(rc_kafka_t *k)
{
    if (!k)
        return;
    rd_kafka_destroy(k->rk);
    free(k);
}

int rc_kafka_lag(rc_kafka_t *k, const char *topic, int64_t timeout_ms, int64_t *lag, char *err,
                 size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->rk, topic, NULL);
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t e;
    int rc = 0, nparts;

    *lag = 0;
    e = rd_kafka_metadata(k->rk, 0, rkt, &md, (int)timeout_ms);
    if (e || md->topic_cnt != 1 || md->topics[0].err) {
        snprintf(err, errlen, "Kafka metadata for %s: %s", topic,
                 rd_kafka_err2str(e ? e : md->topics[0].err));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    nparts = md->topics[0].partition_cnt;
    parts = rd_kafka_topic_partition_list_new(nparts);
    for (int i = 0; i < nparts; i++)
        rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id);
    if ((e = rd_kafka_committed(k->rk, parts, (int)timeout_ms)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "Kafka committed offsets: %s", rd_kafka_err2str(e));
        rc = VC_ERR_UNAVAILABLE;
        goto out;
    }
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo, hi, committed = parts->elems[i].offset;
        e = rd_kafka_query_watermark_offsets(k->rk, topic, parts->elems[i].partition, &lo, &hi,
                                             (int)timeout_ms);
        if (e) {
            snprintf(err, errlen, "Kafka watermarks of %s [%d]: %s", topic,
                     parts->elems[i].partition, rd_kafka_err2str(e));
            rc = VC_ERR_UNAVAILABLE;
            goto out;
        }
        if (committed < 0)
            committed = lo; /* nothing committed: the writer starts from the earliest */
        if (hi > committed)
            *lag += hi - committed;
    }
out:
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return rc;
}
