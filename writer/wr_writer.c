#include "wr_writer.h"
#include "wr_batch.h"
#include "wr_dlt.h"
#include "wr_kafka.h"
#include "wr_pg.h"
#include "wr_state.h"

#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_time.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WR_POLL_MS 100          /* longest a poll blocks, so a stop is seen quickly */
#define WR_BACKOFF_FIRST_MS 100 /* first wait after a transient failure */
#define WR_STATS_EVERY_MS 10000
#define WR_OVERLAP_WAIT_MS 2 /* while batches are in flight and Kafka has nothing: wait on PostgreSQL */
#define WR_LANES_MAX 64

/* How often the PostgreSQL sessions and the group membership are checked for /readyz. */
#define WR_HEALTH_MS 1000

/* The writer's series in the metrics registry, created once. */
typedef struct {
    vc_metric_t *applied, *noops, *early, *tombstones, *dead_letters;
    vc_metric_t *batches, *retries, *queued, *batch_seconds, *batch_events, *lag;
} wr_metrics_t;

/*
 * An apply lane: one PostgreSQL session and the queue of the partitions it
 * owns (partition % lanes). A partition's events stay in one lane, so their
 * order holds; lanes apply their batches side by side, each in its own
 * transaction, and a lane's offsets are stored only when its own batch
 * committed. A voucher's events share a partition (the code is the key), so
 * two lanes never update the same voucher row.
 */
typedef struct {
    wr_pg_t *pg;
    wr_queue_t queue;
    size_t in_flight; /* events of the batch sent to PostgreSQL, result not taken yet */
    int64_t sent_at;  /* monotonic ms the batch in flight was sent */
    int64_t first_at; /* monotonic ms the lane's queue last went from empty to not (linger) */
    int64_t backoff_ms;
    int64_t retry_at; /* monotonic ms; 0 when no retry is pending */
    int pg_ok;        /* the last health check of the session */
} wr_lane_t;

typedef struct {
    const wr_config_t *cfg;
    wr_health_t *health;
    wr_metrics_t metrics;
    wr_kafka_t *kafka;
    wr_lane_t *lanes;
    size_t nlanes;
    wr_msg_t **sql;  /* the decoded messages of the batch in hand (one lane at a time) */
    wr_msg_t **dead; /* the ones to dead-letter */
    wr_position_t *positions;
    wr_stats_t stats;
    int paused;
    uint64_t last_events;
    int64_t last_stats_at;
    int64_t health_at; /* when the PostgreSQL sessions and the group were last looked at */
    int64_t last_lag_at;
} wr_writer_t;

typedef struct {
    const int32_t *partitions;
    size_t n;
} wr_revoked_t;

static void metrics_init(wr_metrics_t *m)
{
    static const char events[] = "voucher_writer_events_total";
    static const char events_help[] = "Events in committed batches, by what they did";

    m->applied = vc_counter(events, events_help, "outcome=\"applied\"");
    m->noops = vc_counter(events, events_help, "outcome=\"noop\"");
    m->early = vc_counter(events, events_help, "outcome=\"early_confirm\"");
    m->tombstones = vc_counter(events, events_help, "outcome=\"tombstone\"");
    m->dead_letters = vc_counter(events, events_help, "outcome=\"dead_letter\"");
    m->batches = vc_counter("voucher_writer_batches_total", "Committed batches", NULL);
    m->retries = vc_counter("voucher_writer_retries_total",
                            "Batches tried again after a transient failure", NULL);
    m->queued = vc_gauge("voucher_writer_queued_events", "Events read and not yet applied", NULL);
    m->batch_events = vc_gauge("voucher_writer_batch_events", "Events in the last committed batch",
                               NULL);
    m->lag = vc_gauge("voucher_writer_consumer_lag_events",
                      "Events in this writer's partitions not yet applied (after its stored offsets)", NULL);
    m->batch_seconds = vc_histogram("voucher_writer_batch_seconds",
                                    "Time to apply a batch, dead letters included", NULL);
}

static int is_revoked(void *ctx, int32_t partition)
{
    const wr_revoked_t *r = ctx;

    if (!r->partitions)
        return 1;
    for (size_t i = 0; i < r->n; i++)
        if (r->partitions[i] == partition)
            return 1;
    return 0;
}

/* The lane owning partition p. */
static wr_lane_t *lane_of(wr_writer_t *w, int32_t p)
{
    return &w->lanes[(size_t)(p < 0 ? 0 : p) % w->nlanes];
}

static size_t queued_total(const wr_writer_t *w)
{
    size_t n = 0;

    for (size_t i = 0; i < w->nlanes; i++)
        n += w->lanes[i].queue.len;
    return n;
}

static void complete_batch(wr_writer_t *w, wr_lane_t *l);

/*
 * wr_revoke_cb: unapplied messages of lost partitions are read again by their
 * next owner. Batches in flight are finished first (their offsets are then
 * stored, and committed right after this), and a queue cannot be compacted
 * under its batch.
 */
static void on_revoke(void *ctx, const int32_t *partitions, size_t n)
{
    wr_writer_t *w = ctx;
    wr_revoked_t r = {partitions, n};
    size_t dropped = 0;

    for (size_t i = 0; i < w->nlanes; i++)
        if (w->lanes[i].in_flight)
            complete_batch(w, &w->lanes[i]);
    for (size_t i = 0; i < w->nlanes; i++)
        dropped += wr_queue_drop_partitions(&w->lanes[i].queue, is_revoked, &r);

    if (dropped)
        vc_info("dropped %zu unapplied events of revoked partitions", dropped);
}

/*
 * Polls once and queues what came in its partition's lane. Returns 1 when a
 * message came, 2 when it filled its lane (two batches queued), 0 when none
 * came, or VC_ERR_IO / VC_ERR_NOMEM.
 */
static int poll_one(wr_writer_t *w, int timeout_ms)
{
    wr_msg_t m, *slot;
    wr_lane_t *l;
    int rc = wr_kafka_poll(w->kafka, timeout_ms, &m);

    if (rc <= 0)
        return rc;
    l = lane_of(w, m.partition);
    if (!(slot = wr_queue_push(&l->queue))) {
        wr_kafka_msg_release(m.handle);
        return VC_ERR_NOMEM;
    }
    *slot = m;
    if (l->queue.len == 1)
        l->first_at = vc_time_mono_ms();
    /* Decoding is pure and done once; a malformed event is poison from here on. */
    wr_msg_decode(slot);
    return l->queue.len >= 2 * (size_t)w->cfg->batch ? 2 : 1;
}

static void check_health(wr_writer_t *w);

static void log_dead_letter(const wr_msg_t *m)
{
    char partition[16], offset[24], key[VC_CODE_MAX + 1], letter[40];
    vc_log_field_t fields[] = {
        /* An undecodable event still has its key, which is the voucher code. */
        {"code", m->decoded ? m->ev.code : key},
        {"orderId", m->decoded ? m->ev.order_id : ""},
        {"partition", partition},
        {"offset", offset},
        {"errorClass", m->dlt_class ? m->dlt_class : ""},
        {"stored", wr_dlt_form_name((wr_dlt_form_t)m->dlt_form)},
        {"deadLetter", letter}, /* PARTITION/OFFSET in the dead-letter topic; parked there */
    };

    snprintf(key, sizeof(key), "%.*s", m->key && m->key_len <= VC_CODE_MAX ? (int)m->key_len : 0,
             m->key ? (const char *)m->key : "");
    snprintf(partition, sizeof(partition), "%d", (int)m->partition);
    snprintf(offset, sizeof(offset), "%lld", (long long)m->offset);
    if (m->dlt_offset >= 0)
        snprintf(letter, sizeof(letter), "%d/%lld", (int)m->dlt_partition,
                 (long long)m->dlt_offset);
    else
        snprintf(letter, sizeof(letter), "-");
    if (m->dlt_form == WR_DLT_LOST)
        /* The dead-letter topic refused even a reference: this line is all that is left. */
        VC_LOG_F(VC_LOG_ERROR, fields,
                 "event not dead-lettered: the dead-letter topic refused even a reference to it; "
                 "the original stays in its partition at that offset until retention: %s",
                 m->error);
    else
        VC_LOG_F(VC_LOG_WARN, fields, "event dead-lettered and parked: %s", m->error);
}

/* Points w->sql at the decoded messages among the first n of the lane's queue; returns how many. */
static size_t collect_sql(wr_writer_t *w, wr_lane_t *l, size_t n)
{
    size_t nsql = 0;

    for (size_t i = 0; i < n; i++) {
        wr_msg_t *m = wr_queue_at(&l->queue, i);
        if (m->decoded)
            w->sql[nsql++] = m;
    }
    return nsql;
}

/*
 * Sends the statement applying the first n messages of the lane's queue (the
 * decoded ones, in one transaction) without waiting for it. Returns 0
 * (l->in_flight is n), or VC_ERR_UNAVAILABLE when the batch must be tried
 * again.
 */
static int send_batch(wr_writer_t *w, wr_lane_t *l, size_t n)
{
    char err[WR_ERR_MAX];
    size_t nsql = collect_sql(w, l, n);

    for (size_t i = 0; i < nsql; i++)
        w->sql[i]->outcome = WR_OUT_PENDING;
    l->sent_at = vc_time_mono_ms();
    if (wr_pg_send(l->pg, w->sql, nsql, err, sizeof(err)) != 0) {
        vc_warn("applying a batch of %zu events failed, will retry: %s", n, err);
        return VC_ERR_UNAVAILABLE;
    }
    l->in_flight = n;
    return 0;
}

/*
 * Finishes the batch of the first n messages of the lane's queue that
 * send_batch() sent: takes PostgreSQL's result, then dead-letters the poison
 * and orphan ones, then stores the offsets (the lane's partitions only, up to
 * what this batch committed). Returns 0, or VC_ERR_UNAVAILABLE when the batch
 * must be tried again (nothing of it stored; the database part may have
 * committed, which a retry repeats as no-ops).
 */
static int finish_batch(wr_writer_t *w, wr_lane_t *l, size_t n)
{
    char err[WR_ERR_MAX];
    size_t nsql, ndead = 0, counts[8] = {0};
    int rc, npos;

    /* The queue may have moved while the batch was in flight: point at it again. */
    nsql = collect_sql(w, l, n);
    if ((rc = wr_pg_finish(l->pg, w->sql, nsql, err, sizeof(err))) != 0) {
        vc_warn("applying a batch of %zu events failed, will retry: %s", n, err);
        return VC_ERR_UNAVAILABLE;
    }
    for (size_t i = 0; i < n; i++) {
        wr_msg_t *m = wr_queue_at(&l->queue, i);
        if (m->outcome == WR_OUT_POISON || m->outcome == WR_OUT_CONFLICT ||
            m->outcome == WR_OUT_MISMATCH)
            w->dead[ndead++] = m;
    }
    if (ndead > 0 && (rc = wr_kafka_dead_letter(w->kafka, w->dead, ndead, err, sizeof(err))) != 0) {
        vc_warn("dead-lettering %zu events failed, will retry the batch: %s", ndead, err);
        return VC_ERR_UNAVAILABLE;
    }
    if (ndead > 0)
        VC_PAUSE("writer-before-park"); /* the letters are in the topic, not yet parked */
    /*
     * Parked before the offsets are stored: a crash between the letter and
     * its row reads the batch again, and the row is made then (a second copy
     * of the letter in the topic is the same letter, by its original).
     */
    if (ndead > 0 && (rc = wr_pg_park(l->pg, w->dead, ndead, w->cfg->topic, w->cfg->dlt_topic,
                                      err, sizeof(err))) != 0) {
        vc_warn("parking %zu dead letters in PostgreSQL failed, will retry the batch: %s", ndead,
                err);
        return VC_ERR_UNAVAILABLE;
    }
    for (size_t i = 0; i < ndead; i++)
        log_dead_letter(w->dead[i]);

    npos = wr_queue_positions(&l->queue, n, w->positions, n);
    VC_ASSERT(npos >= 0);
    wr_kafka_store(w->kafka, w->positions, (size_t)npos);

    w->stats.batches++;
    w->stats.events += n;
    w->stats.dead_letters += ndead;
    for (size_t i = 0; i < nsql; i++) {
        switch (w->sql[i]->outcome) {
        case WR_OUT_APPLIED:
        case WR_OUT_EARLY:
            w->stats.applied++;
            break;
        case WR_OUT_NOOP:
            w->stats.noops++;
            break;
        case WR_OUT_TOMBSTONE:
            w->stats.tombstones++;
            break;
        default:
            break;
        }
        if (w->sql[i]->outcome == WR_OUT_EARLY)
            w->stats.early++;
        if (w->sql[i]->outcome >= 0 && w->sql[i]->outcome < 8)
            counts[w->sql[i]->outcome]++;
    }
    vc_metric_add(w->metrics.applied, (int64_t)counts[WR_OUT_APPLIED]);
    vc_metric_add(w->metrics.noops, (int64_t)counts[WR_OUT_NOOP]);
    vc_metric_add(w->metrics.early, (int64_t)counts[WR_OUT_EARLY]);
    vc_metric_add(w->metrics.tombstones, (int64_t)counts[WR_OUT_TOMBSTONE]);
    vc_metric_add(w->metrics.dead_letters, (int64_t)ndead);
    vc_metric_add(w->metrics.batches, 1);
    vc_metric_set(w->metrics.batch_events, (int64_t)n);
    vc_metric_observe_us(w->metrics.batch_seconds, (vc_time_mono_ms() - l->sent_at) * 1000);
    vc_debug("batch of %zu events committed (%zu dead-lettered)", n, ndead);
    return 0;
}

static void log_stats(wr_writer_t *w, int force)
{
    int64_t now = vc_time_mono_ms();

    /* The lag gauge, once a second: it walks the assignment. */
    if (now - w->last_lag_at >= 1000) {
        int64_t lag = wr_kafka_lag(w->kafka);
        if (lag >= 0)
            vc_metric_set(w->metrics.lag, lag);
        w->last_lag_at = now;
    }

    if (!force && now - w->last_stats_at < WR_STATS_EVERY_MS)
        return;
    if (force || w->stats.events != w->last_events)
        vc_info("events=%llu (+%llu) applied=%llu noops=%llu early=%llu tombstones=%llu "
                "dead_letters=%llu batches=%llu retries=%llu queued=%zu",
                (unsigned long long)w->stats.events,
                (unsigned long long)(w->stats.events - w->last_events),
                (unsigned long long)w->stats.applied, (unsigned long long)w->stats.noops,
                (unsigned long long)w->stats.early, (unsigned long long)w->stats.tombstones,
                (unsigned long long)w->stats.dead_letters, (unsigned long long)w->stats.batches,
                (unsigned long long)w->stats.retries, queued_total(w));
    w->last_events = w->stats.events;
    w->last_stats_at = now;
}

static int any_retrying(const wr_writer_t *w)
{
    for (size_t i = 0; i < w->nlanes; i++)
        if (w->lanes[i].retry_at)
            return 1;
    return 0;
}

/*
 * After a transient failure of a lane: stop fetching (for every lane: a
 * lane's queue cannot be paused apart) and wait, longer each time. The other
 * lanes go on applying what they hold.
 */
static void schedule_retry(wr_writer_t *w, wr_lane_t *l)
{
    if (!w->paused) {
        wr_kafka_pause(w->kafka, 1);
        w->paused = 1;
    }
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : WR_BACKOFF_FIRST_MS;
    if (l->backoff_ms > w->cfg->backoff_max_ms)
        l->backoff_ms = w->cfg->backoff_max_ms;
    l->retry_at = vc_time_mono_ms() + l->backoff_ms;
    w->stats.retries++;
    vc_metric_add(w->metrics.retries, 1);
    if (w->health)
        atomic_store(&w->health->retrying, 1);
}

static void recovered(wr_writer_t *w, wr_lane_t *l)
{
    l->backoff_ms = 0;
    l->retry_at = 0;
    if (any_retrying(w))
        return;
    if (w->paused) {
        wr_kafka_pause(w->kafka, 0);
        w->paused = 0;
        vc_info("recovered after %llu retries", (unsigned long long)w->stats.retries);
    }
    if (w->health)
        atomic_store(&w->health->retrying, 0);
}

/* Takes the result of the lane's batch in flight: drops it from the queue, or schedules its retry. */
static void complete_batch(wr_writer_t *w, wr_lane_t *l)
{
    size_t n = l->in_flight;

    l->in_flight = 0;
    if (finish_batch(w, l, n) == 0) {
        wr_queue_drop_front(&l->queue, n);
        /* What is left waited during the batch: it lingers afresh from now, as before lanes. */
        l->first_at = vc_time_mono_ms();
        recovered(w, l);
    } else {
        schedule_retry(w, l);
    }
}

/*
 * What /readyz tells: every second, whether every lane's PostgreSQL session
 * is alive (made again if it is not, so readiness comes back without waiting
 * for an event; a session with a batch in flight is judged by its result) and
 * whether the consumer is in its group.
 */
static void check_health(wr_writer_t *w)
{
    char err[WR_ERR_MAX];
    int64_t now = vc_time_mono_ms();
    int ok = 1;

    if (now - w->health_at < WR_HEALTH_MS)
        return;
    w->health_at = now;
    if (!w->health)
        return;
    for (size_t i = 0; i < w->nlanes; i++) {
        wr_lane_t *l = &w->lanes[i];
        if (!l->in_flight)
            l->pg_ok = wr_pg_check(l->pg, err, sizeof(err)) == 0;
        ok = ok && l->pg_ok;
    }
    atomic_store(&w->health->pg_ok, ok);
    atomic_store(&w->health->in_group, wr_kafka_in_group(w->kafka));
}

/*
 * Whether the lane should send its next batch now: nothing in flight, no
 * retry waiting, and a full batch queued or its first event lingered long
 * enough (a retry sends at once what is left).
 */
static int lane_ready(const wr_writer_t *w, const wr_lane_t *l, int64_t now)
{
    if (l->in_flight || l->queue.len == 0)
        return 0;
    if (l->retry_at)
        return now >= l->retry_at;
    return l->queue.len >= (size_t)w->cfg->batch || now - l->first_at >= w->cfg->linger_ms;
}

/* Monotonic ms until the first lane wants to send (its linger or retry), capped at cap. */
static int next_deadline(const wr_writer_t *w, int64_t now, int cap)
{
    int64_t t = cap;

    for (size_t i = 0; i < w->nlanes; i++) {
        const wr_lane_t *l = &w->lanes[i];
        int64_t at;
        if (l->in_flight || l->queue.len == 0)
            continue;
        at = l->retry_at ? l->retry_at : l->first_at + w->cfg->linger_ms;
        if (at - now < t)
            t = at - now;
    }
    return t < 0 ? 0 : (int)t;
}

/*
 * Takes the results that came, waiting at most timeout_ms for one when none
 * had: on every lane in flight at once, so the first lane done is served
 * first. Returns how many lanes are still in flight.
 */
static size_t take_results(wr_writer_t *w, int timeout_ms)
{
    struct pollfd fds[WR_LANES_MAX];
    size_t busy = 0, done = 0, nfds = 0;

    for (size_t i = 0; i < w->nlanes; i++) {
        wr_lane_t *l = &w->lanes[i];
        if (!l->in_flight)
            continue;
        if (wr_pg_wait(l->pg, 0)) {
            complete_batch(w, l);
            done++;
        } else {
            fds[nfds++] = (struct pollfd){.fd = wr_pg_socket(l->pg), .events = POLLIN};
            busy++;
        }
    }
    if (done || !busy || timeout_ms <= 0 || poll(fds, nfds, timeout_ms) <= 0)
        return busy;
    busy = 0;
    for (size_t i = 0; i < w->nlanes; i++) {
        wr_lane_t *l = &w->lanes[i];
        if (l->in_flight && wr_pg_wait(l->pg, 0))
            complete_batch(w, l);
        busy += l->in_flight ? 1 : 0;
    }
    return busy;
}

/*
 * One pass: results taken, ready lanes sent, then Kafka read. While batches
 * are in flight Kafka is read without blocking (events are decoded then,
 * beside PostgreSQL's work) until each lane holds two batches, and then the
 * writer waits on PostgreSQL a moment; with nothing in flight it blocks on
 * Kafka until a lane's linger or retry is due.
 */
static int loop(wr_writer_t *w, atomic_int *stop)
{
    size_t batch = (size_t)w->cfg->batch;
    int rc = 0;

    while (!*stop) {
        int64_t now;
        size_t busy = 0;
        int full = 0;

        log_stats(w, 0);
        check_health(w);
        vc_metric_set(w->metrics.queued, (int64_t)queued_total(w));
        take_results(w, 0);
        now = vc_time_mono_ms();
        for (size_t i = 0; i < w->nlanes; i++) {
            wr_lane_t *l = &w->lanes[i];
            if (lane_ready(w, l, now)) {
                size_t n = l->queue.len < batch ? l->queue.len : batch;
                if (send_batch(w, l, n) != 0)
                    schedule_retry(w, l);
            }
            if (l->retry_at && !l->in_flight && l->queue.len == 0)
                recovered(w, l); /* the failed batch was revoked meanwhile */
            busy += l->in_flight ? 1 : 0;
            full = full || l->queue.len >= 2 * batch;
        }
        if (busy && full) {
            take_results(w, WR_OVERLAP_WAIT_MS);
            continue;
        }
        /*
         * What Kafka has at hand is taken (up to a batch, or until a lane is
         * full) before PostgreSQL is looked at again: one look per event
         * would cost a read on every lane's socket per event. Paused, Kafka
         * still is polled: it serves rebalances and keeps us in the group.
         */
        rc = poll_one(w, busy ? 0 : next_deadline(w, now, WR_POLL_MS));
        for (size_t got = 1; rc == 1 && got < batch; got++)
            rc = poll_one(w, 0);
        if (rc < 0)
            break;
        if (rc == 0 && busy)
            take_results(w, WR_OVERLAP_WAIT_MS);
        rc = 0;
    }
    /*
     * A stop (or a fatal error) finishes the batches in hand: each lane's in
     * flight, or else its next one if no retry waits; their offsets are
     * stored then.
     */
    for (size_t i = 0; i < w->nlanes; i++) {
        wr_lane_t *l = &w->lanes[i];
        if (!l->in_flight && !l->retry_at && l->queue.len > 0 &&
            send_batch(w, l, l->queue.len < batch ? l->queue.len : batch) != 0)
            continue;
        if (l->in_flight)
            complete_batch(w, l);
    }
    return *stop ? 0 : rc;
}

int wr_writer_run(const wr_config_t *cfg, atomic_int *stop, wr_stats_t *stats,
                  wr_health_t *health)
{
    wr_writer_t w;
    wr_kafka_conf_t kconf;
    char err[WR_ERR_MAX];
    size_t batch = (size_t)cfg->batch;
    int rc = 0;

    memset(&w, 0, sizeof(w));
    w.cfg = cfg;
    w.health = health;
    metrics_init(&w.metrics);
    w.last_stats_at = vc_time_mono_ms();
    w.nlanes = cfg->lanes < 1 ? 1 : cfg->lanes > WR_LANES_MAX ? WR_LANES_MAX : (size_t)cfg->lanes;
    w.lanes = calloc(w.nlanes, sizeof(*w.lanes));
    w.sql = calloc(batch, sizeof(*w.sql));
    w.dead = calloc(batch, sizeof(*w.dead));
    w.positions = calloc(batch, sizeof(*w.positions));
    if (!w.lanes || !w.sql || !w.dead || !w.positions) {
        vc_error("out of memory");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < w.nlanes; i++) {
        wr_queue_init(&w.lanes[i].queue, wr_kafka_msg_release);
        w.lanes[i].pg_ok = 1;
    }

    for (size_t i = 0; i < w.nlanes; i++) {
        rc = wr_pg_open(&w.lanes[i].pg, cfg->pg_dsn, err, sizeof(err));
        if (rc == VC_ERR_UNAVAILABLE) {
            if (i == 0)
                vc_warn("PostgreSQL not reachable yet, will retry: %s", err);
            rc = 0;
        } else if (rc != 0) {
            vc_error("PostgreSQL: %s", err);
            goto out;
        }
    }

    kconf = (wr_kafka_conf_t){
        .brokers = cfg->brokers,
        .group = cfg->group,
        .topic = cfg->topic,
        .dlt_topic = cfg->dlt_topic,
        .session_timeout_ms = cfg->session_timeout_ms,
        .extra = cfg->kafka_extra,
        .revoke_cb = on_revoke,
        .ctx = &w,
    };
    if ((rc = wr_kafka_open(&w.kafka, &kconf, err, sizeof(err))) != 0) {
        vc_error("Kafka: %s", err);
        goto out;
    }
    vc_info("consuming %s as group %s (batch %zu, linger %lld ms, %zu apply lanes), dead letters "
            "to %s",
            cfg->topic, cfg->group, batch, (long long)cfg->linger_ms, w.nlanes, cfg->dlt_topic);

    if (health)
        atomic_store(&health->running, 1);
    rc = loop(&w, stop);
    if (health)
        atomic_store(&health->running, 0);
    if (rc != 0)
        vc_error("stopping: %s", vc_strerror(rc));
    else
        vc_info("stopping: finished the batches in hand");
    log_stats(&w, 1);
out:
    /* librdkafka wants every message destroyed before its handle: free the
     * queues first (the last revoke callback then finds them empty). */
    for (size_t i = 0; w.lanes && i < w.nlanes; i++)
        wr_queue_free(&w.lanes[i].queue);
    wr_kafka_close(w.kafka);
    for (size_t i = 0; w.lanes && i < w.nlanes; i++)
        wr_pg_close(w.lanes[i].pg);
    free(w.lanes);
    free(w.sql);
    free(w.dead);
    free(w.positions);
    if (stats)
        *stats = w.stats;
    return rc;
}
