#include "rc_outbox.h"
#include "rc_kafka.h"
#include "rc_pg.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_time.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * The most rounds one relay runs: a backlog (Kafka back after an outage)
 * drains over several wakes, each of them short, instead of one that keeps
 * the passes waiting.
 */
#define RC_OUTBOX_ROUNDS 10
/* The slice the idle wait sleeps or polls the session in, so a stop is seen quickly. */
#define RC_OUTBOX_SLICE_MS 100

int rc_outbox_sent_prefix(const int *delivered, int n)
{
    int k = 0;

    while (k < n && delivered[k] == 1)
        k++;
    return k;
}

/* One round: up to cfg->batch rows taken, produced, and the acknowledged prefix marked. */
static int relay_round(rc_ctx_t *ctx, const rc_outbox_config_t *cfg, rc_outbox_result_t *res,
                       int *more, char *err, size_t errlen)
{
    rc_outbox_row_t *rows = NULL;
    rc_kafka_msg_t *msgs = NULL;
    int *delivered = NULL;
    int n = 0, sent = 0, rc;

    *more = 0;
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
        (rc = rc_pg_outbox_take(ctx->pg, cfg->batch, &rows, &n, err, errlen)) != 0 || n == 0)
        goto out;
    if (!(msgs = calloc((size_t)n, sizeof(*msgs))) ||
        !(delivered = calloc((size_t)n, sizeof(*delivered)))) {
        snprintf(err, errlen, "out of memory relaying the outbox");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++)
        msgs[i] = (rc_kafka_msg_t){rows[i].key, rows[i].payload, rows[i].len};
    if ((rc = rc_kafka_send(ctx->kafka, msgs, n, delivered, cfg->timeout_ms, err, errlen)) != 0)
        goto out;
    sent = rc_outbox_sent_prefix(delivered, n);
    res->failed += n - sent;
    /*
     * Produced, the delivery reports in, nothing marked yet: where a relay that
     * dies leaves its rows to be produced again (the explorer kills it here).
     */
    VC_PAUSE("reconciler-outbox-produced");
    if (sent > 0 && ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
                     (rc = rc_pg_outbox_sent(ctx->pg, rows, sent, err, errlen)) != 0))
        goto out;
    res->produced += sent;
    if (sent < n)
        vc_debug("outbox: %d of %d rows acknowledged; from id %lld on they stay unsent", sent, n,
                 (long long)rows[sent].id);
    *more = sent == n && n == cfg->batch;
out:
    free(delivered);
    free(msgs);
    rc_outbox_rows_free(rows, n);
    return rc;
}

int rc_outbox_relay(rc_ctx_t *ctx, const rc_outbox_config_t *cfg, rc_outbox_result_t *res,
                    char *err, size_t errlen)
{
    int more = 1, rc = 0;

    memset(res, 0, sizeof(*res));
    if (!ctx->leader || !ctx->pg || !ctx->kafka)
        return 0;
    for (int round = 0; rc == 0 && more && round < RC_OUTBOX_ROUNDS; round++)
        rc = relay_round(ctx, cfg, res, &more, err, errlen);
    if (rc == 0 && cfg->retention_ms > 0 && (rc = rc_ctx_still_leading(ctx, err, errlen)) == 0)
        rc = rc_pg_outbox_prune(ctx->pg, cfg->retention_ms, cfg->batch, &res->pruned, err, errlen);
    if (rc == 0)
        rc = rc_pg_outbox_stats(ctx->pg, &res->unsent, &res->oldest_ms, err, errlen);
    return rc;
}

/* The relay's metrics: the backlog as this replica last saw it, and what it did. */
static void record(const rc_outbox_result_t *res, int leading)
{
    static const char help[] = "Outbox rows the relay handled: produced (acknowledged by Kafka "
                               "and marked sent) or failed (not acknowledged: left unsent, taken "
                               "again)";

    /* A standby relays nothing: its gauges say nothing is waiting on it. */
    vc_metric_set(vc_gauge("voucher_outbox_unsent",
                           "Outbox rows not yet published to Kafka (direct vouchers' events), as "
                           "the acting reconciler last counted them",
                           NULL),
                  leading ? res->unsent : 0);
    vc_metric_set(vc_gauge("voucher_outbox_oldest_seconds",
                           "Age of the oldest unsent outbox row, in seconds (0: none)", NULL),
                  leading ? res->oldest_ms / 1000 : 0);
    vc_metric_add(vc_counter("voucher_outbox_events_total", help, "result=\"produced\""),
                  res->produced);
    vc_metric_add(vc_counter("voucher_outbox_events_total", help, "result=\"failed\""),
                  res->failed);
    vc_metric_add(vc_counter("voucher_outbox_pruned_total",
                             "Sent outbox rows deleted after the retention", NULL),
                  res->pruned);
}

/* One relay from the idle wait, logged once per change between failing and working. */
static void relay_now(rc_ctx_t *ctx, rc_outbox_t *ob)
{
    rc_outbox_result_t res;
    char err[512];

    ob->last_ms = vc_time_mono_ms();
    if (rc_outbox_relay(ctx, ob->cfg, &res, err, sizeof(err)) != 0) {
        if (!ob->failing)
            vc_warn("outbox relay failed, will try again: %s", err);
        ob->failing = 1;
        record(&res, ctx->leader);
        return;
    }
    if (ob->failing)
        vc_info("outbox relay works again: %lld rows published, %lld unsent",
                (long long)res.produced, (long long)res.unsent);
    ob->failing = 0;
    record(&res, ctx->leader);
}

/* Sleeps one slice of the wait between passes. */
static void nap(int64_t slice_ms)
{
    struct timespec ts = {0, slice_ms * 1000000L};

    nanosleep(&ts, NULL);
}

int rc_outbox_idle(rc_ctx_t *ctx, rc_outbox_t *ob, int64_t ms, const atomic_int *stop)
{
    int64_t waited = 0;
    int lost = 0;

    /*
     * The wait is counted in slices, as the nap of the reconciler before the
     * relay was: a slice that ran its course counts whole however long it
     * took (the explorer's clock shim makes a 100 ms one 1 ms long:
     * tests/model/clock_shim.c), one a NOTIFY cut short counts what it took.
     */
    while (!atomic_load(stop) && waited < ms) {
        int64_t slice = ms - waited < RC_OUTBOX_SLICE_MS ? ms - waited : RC_OUTBOX_SLICE_MS;
        int64_t began = vc_time_mono_ms();
        int woken = 0;

        if (ctx->leader && rc_ctx_pg_ok(ctx)) {
            /*
             * The session broke while it waited (the server ended it: the
             * FATAL arrives here, between passes): the caller says so, and
             * the next pass connects again.
             */
            if ((woken = rc_pg_wait_notify(ctx->pg, slice)) < 0 || !rc_ctx_pg_ok(ctx)) {
                lost = 1;
                nap(slice);
                waited += slice;
                continue;
            }
            if (ctx->leader && (woken || vc_time_mono_ms() - ob->last_ms >= ob->cfg->poll_ms))
                relay_now(ctx, ob);
            /*
             * The session ended under the relay (a statement failed on it, or
             * the lock's proof did and closed it): said as a wait's loss.
             */
            if ((ctx->pg && !rc_ctx_pg_ok(ctx)) || ctx->pg_lost)
                lost = 1;
            ctx->pg_lost = 0;
        } else {
            nap(slice);
        }
        if (woken > 0) {
            int64_t took = vc_time_mono_ms() - began;

            waited += took > 0 ? took : 1; /* a stream of NOTIFYs never holds the passes off */
        } else {
            waited += slice;
        }
    }
    return lost;
}
