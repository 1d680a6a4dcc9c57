#include "rc_pass.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_pg.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int rc_ctx_connect(rc_ctx_t *ctx, char *err, size_t errlen)
{
    if (ctx->pg && PQstatus(ctx->pg) != CONNECTION_OK) {
        PQfinish(ctx->pg);
        ctx->pg = NULL;
    }
    if (!ctx->pg && !(ctx->pg = vc_pg_connect(ctx->cfg->pg_dsn, "voucher-reconciler", err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->redis &&
        !(ctx->redis = rc_redis_connect(ctx->cfg->redis_url, ctx->cfg->timeout_ms, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (!ctx->kafka && !(ctx->kafka = rc_kafka_new(ctx->cfg->kafka_brokers,
                                                   ctx->cfg->writer_group, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    return 0;
}

void rc_ctx_close(rc_ctx_t *ctx)
{
    if (ctx->pg)
        PQfinish(ctx->pg);
    rc_redis_free(ctx->redis);
    rc_kafka_free(ctx->kafka);
    ctx->pg = NULL;
    ctx->redis = NULL;
    ctx->kafka = NULL;
}

/* Drops a Redis connection that failed, so the next pass reconnects. */
static void redis_failed(rc_ctx_t *ctx)
{
    rc_redis_free(ctx->redis);
    ctx->redis = NULL;
}

/*
 * Reads one voucher's state: PostgreSQL first, then Redis, then the lag. In
 * that order every use PostgreSQL counts was already taken in Redis, so a
 * quiet voucher never looks as if Redis were ahead.
 */
static int read_state(rc_ctx_t *ctx, const char *code, rc_voucher_state_t *s, char *err,
                      size_t errlen)
{
    const char *params[] = {code};
    PGresult *res;
    int rc;

    res = PQexecParams(ctx->pg,
                       "SELECT v.total_limit, v.used_count,"
                       " (SELECT count(*) FROM voucher_redemption r"
                       "   WHERE r.voucher_code = v.code AND r.status <> 'RELEASED')"
                       " FROM voucher v WHERE v.code = $1",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        rc = PQresultStatus(res) == PGRES_TUPLES_OK ? VC_E_NOT_FOUND
                                                    : vc_pg_error_class(ctx->pg, res);
        vc_pg_error_text(ctx->pg, res, err, errlen);
        PQclear(res);
        return rc;
    }
    memset(s, 0, sizeof(*s));
    snprintf(s->code, sizeof(s->code), "%s", code);
    s->total_limit = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    s->used_count = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    s->live_rows = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);

    if ((rc = rc_redis_remaining(ctx->redis, code, &s->redis_loaded, &s->redis_remaining, err,
                                 errlen)) != 0) {
        redis_failed(ctx);
        return rc;
    }
    if (rc_kafka_lag(ctx->kafka, ctx->cfg->topic, ctx->cfg->timeout_ms, &s->in_flight, err,
                     errlen) != 0) {
        /* Without the lag nothing can be called "behind"; say so and go on. */
        vc_warn("cannot read the writer's lag: %s", err);
        s->in_flight = -1;
    }
    return 0;
}

/* Per-voucher gauges: the drift (what PostgreSQL allows minus what Redis offers) and the verdict. */
static void record_metrics(const rc_voucher_state_t *s, rc_verdict_t v)
{
    char labels[64];

    snprintf(labels, sizeof(labels), "code=\"%s\"", s->code);
    vc_metric_set(vc_gauge("voucher_reconciler_drift",
                           "PostgreSQL's remaining uses minus Redis's, per voucher (0 when they agree)",
                           labels),
                  s->redis_loaded ? (s->total_limit - s->used_count) - s->redis_remaining : 0);
    vc_metric_set(vc_gauge("voucher_reconciler_verdict",
                           "Last verdict per voucher: 0 consistent, 1 not loaded, 2 behind, 3 drifted",
                           labels),
                  (int64_t)v);
    if (s->in_flight >= 0)
        vc_metric_set(vc_gauge("voucher_reconciler_writer_lag_events",
                               "Events published but not yet applied by the writer", NULL),
                      s->in_flight);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int rc_pass(rc_ctx_t *ctx, FILE *table, rc_summary_t *sum, char *err, size_t errlen)
{
    PGresult *res;
    int rc = 0;

    memset(sum, 0, sizeof(*sum));
    if ((rc = rc_ctx_connect(ctx, err, errlen)) != 0)
        return rc;
    /* Active vouchers: not ended more than a day ago. */
    res = PQexec(ctx->pg, "SELECT code FROM voucher WHERE ends_at > now() - interval '1 day'"
                          " ORDER BY code");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = vc_pg_error_class(ctx->pg, res);
        vc_pg_error_text(ctx->pg, res, err, errlen);
        PQclear(res);
        return rc;
    }
    if (table)
        fprintf(table, "%-20s %8s %8s %9s %11s %9s  %s\n", "voucher", "limit", "used", "pg_left",
                "redis_left", "in_flight", "verdict");
    for (int i = 0; i < PQntuples(res); i++) {
        const char *code = PQgetvalue(res, i, 0);
        rc_voucher_state_t s;
        rc_verdict_t v;
        char redis_left[24], in_flight[24];

        if ((rc = read_state(ctx, code, &s, err, errlen)) != 0) {
            if (rc == VC_E_NOT_FOUND) /* deleted since the list was read */
                continue;
            break;
        }
        v = rc_judge(&s);
        for (int again = 0; again < 3 && v != RC_CONSISTENT && v != RC_NOT_LOADED; again++) {
            sleep_ms(300);
            if ((rc = read_state(ctx, code, &s, err, errlen)) != 0)
                break;
            v = rc_judge(&s);
        }
        if (rc != 0)
            break;
        sum->vouchers++;
        sum->in_flight = s.in_flight;
        switch (v) {
        case RC_CONSISTENT:
            sum->consistent++;
            break;
        case RC_NOT_LOADED:
            sum->not_loaded++;
            break;
        case RC_BEHIND:
            sum->behind++;
            break;
        case RC_DRIFTED:
            sum->drifted++;
            break;
        }
        if (s.redis_loaded)
            snprintf(redis_left, sizeof(redis_left), "%lld", (long long)s.redis_remaining);
        else
            snprintf(redis_left, sizeof(redis_left), "-");
        if (s.in_flight >= 0)
            snprintf(in_flight, sizeof(in_flight), "%lld", (long long)s.in_flight);
        else
            snprintf(in_flight, sizeof(in_flight), "?");
        if (table)
            fprintf(table, "%-20s %8lld %8lld %9lld %11s %9s  %s\n", s.code,
                    (long long)s.total_limit, (long long)s.used_count,
                    (long long)(s.total_limit - s.used_count), redis_left, in_flight,
                    rc_verdict_name(v));
        record_metrics(&s, v);
        if (v == RC_DRIFTED || v == RC_BEHIND) {
            char used[24], live[24];
            vc_log_field_t f[] = {{"code", s.code}, {"usedCount", used}, {"liveRows", live}};
            snprintf(used, sizeof(used), "%lld", (long long)s.used_count);
            snprintf(live, sizeof(live), "%lld", (long long)s.live_rows);
            VC_LOG_F(v == RC_DRIFTED ? VC_LOG_WARN : VC_LOG_INFO, f,
                     "%s: PostgreSQL allows %lld more, Redis offers %s, %s events in flight",
                     rc_verdict_name(v), (long long)(s.total_limit - s.used_count), redis_left,
                     in_flight);
        }
    }
    PQclear(res);
    return rc;
}
