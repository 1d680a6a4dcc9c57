#include "rc_campaign.h"
#include "rc_kafka.h"
#include "rc_pg.h"
#include "rc_redis.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_pg.h"
#include "vc_time.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RC_CAMPAIGN_DUE_MAX 100 /* holds expired per campaign and pass */
#define RC_CAMPAIGN_DUE_BUF (RC_CAMPAIGN_DUE_MAX * (VC_ORDER_ID_MAX + 32) + 64)

int rc_campaign_may_expire(char state, int64_t held_until, const char *pg_status, int in_flight,
                           int64_t snapshot_ms, int64_t grace_ms)
{
    if (state != 'H' || held_until > snapshot_ms - grace_ms)
        return 0;
    /* Confirmed or released downstream: not a hold to expire (a repair, not an expiry). */
    if (in_flight & ((1 << VC_EV_CONFIRMED) | (1 << VC_EV_RELEASED)))
        return 0;
    if (strcmp(pg_status, "RESERVED") == 0)
        return 1;
    /* No row: only a reservation whose event is on its way (one never sent is not expired here). */
    return pg_status[0] == '\0' && (in_flight & (1 << VC_EV_RESERVED));
}

/* The events of order_id in flight as a bit set by type; *code from any of them. */
static int in_flight_of(const rc_vouchers_t *vs, int64_t id, const char *order_id,
                        char code[VC_CODE_MAX + 1])
{
    int mask = 0;

    for (size_t i = 0; i < vs->ncampaign_events; i++) {
        const vc_event_t *ev = &vs->campaign_events[i];
        if (ev->campaign_id != id || strcmp(ev->order_id, order_id) != 0)
            continue;
        mask |= 1 << ev->type;
        memcpy(code, ev->code, VC_CODE_MAX + 1);
    }
    return mask;
}

static size_t in_flight_count(const rc_vouchers_t *vs, int64_t id)
{
    size_t n = 0;

    for (size_t i = 0; i < vs->ncampaign_events; i++)
        n += vs->campaign_events[i].campaign_id == id;
    return n;
}

/* PostgreSQL's row of the order: *status ("" for none) and its code. */
static int read_row(PGconn *conn, const char *order_id, char status[16],
                    char code[VC_CODE_MAX + 1], char *err, size_t errlen)
{
    const char *params[] = {order_id};
    int rc = 0;
    PGresult *res = vc_pg_exec(conn,
                               "SELECT status, code FROM campaign_redemption WHERE order_id = $1",
                               1, params, &rc, err, errlen);

    status[0] = '\0';
    if (res && PQntuples(res) == 1) {
        snprintf(status, 16, "%s", PQgetvalue(res, 0, 0));
        snprintf(code, VC_CODE_MAX + 1, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return rc;
}

/*
 * Expires one hold: release begin (checked again in the script: still H with
 * the heldUntil the pass read, and past it), VoucherReleased EXPIRED with the
 * campaign, and only after Kafka acknowledged it the code back (release
 * finish). A failure leaves the order E: counted, resumed by a DELETE retry.
 */
static int expire(rc_ctx_t *ctx, int64_t id, const char *order_id, const char *held_state,
                  const char *code, rc_summary_t *sum, char *err, size_t errlen)
{
    char k[6][64], now[24], order[128];
    const char *begin_keys[] = {k[0], k[1], k[2], k[0], k[3]};
    const char *finish_keys[] = {k[4], k[5], k[0], k[2], k[0], k[3]};
    const char *begin_args[] = {order_id, "expire", now, held_state, code};
    const char *finish_args[] = {order_id, code};
    static const char *const suffix[] = {"orders", "holds", "releasing", "taken", "remaining",
                                         "users"};
    vc_event_t ev;
    int64_t status;
    int delivered = 0, rc;

    for (int i = 0; i < 6; i++)
        snprintf(k[i], sizeof(k[i]), "campaign:{c%lld}:%s", (long long)id, suffix[i]);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_campaign_release_begin, 5, begin_keys, 5,
                            begin_args, &status, order, sizeof(order), err, errlen)) != 0)
        return rc;
    if (status != 1 && status != 2)
        return 0; /* moved on since the read (confirmed, released, another hold): next pass */
    memset(&ev, 0, sizeof(ev));
    ev.type = VC_EV_RELEASED;
    ev.version = VC_EVENT_VERSION;
    ev.campaign_id = id;
    ev.customer_id = strtoll(order, NULL, 10);
    ev.at_ms = vc_time_now_ms();
    snprintf(ev.code, sizeof(ev.code), "%s", code);
    snprintf(ev.order_id, sizeof(ev.order_id), "%s", order_id);
    snprintf(ev.reason, sizeof(ev.reason), "EXPIRED");
    if ((rc = rc_kafka_publish(ctx->kafka, &ev, 1, &delivered, ctx->cfg->timeout_ms * 4, err,
                               errlen)) != 0)
        return rc;
    if (delivered != 1) {
        vc_warn("campaign %lld: the release of order %s was not acknowledged: kept E",
                (long long)id, order_id);
        return 0;
    }
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_campaign_release_finish, 6, finish_keys, 2,
                            finish_args, &status, NULL, 0, err, errlen)) != 0)
        return rc;
    sum->expired += status == 1;
    vc_info("campaign %lld: hold %s of code %s expired, the code is free again", (long long)id,
            order_id, code);
    return 0;
}

/* One campaign: its numbers, then (repair) its due holds. */
static int one(rc_ctx_t *ctx, const rc_vouchers_t *vs, int64_t id, int64_t live, int repair,
               int64_t snapshot_ms, rc_summary_t *sum, char *err, size_t errlen)
{
    char k[4][64], max[24], limit[24], *due, *line, *save = NULL;
    const char *keys[] = {k[0], k[1], k[2], k[3]};
    const char *args[] = {max, limit};
    static const char *const suffix[] = {"taken", "holds", "releasing", "orders"};
    long long holds = 0, releasing = 0;
    size_t flying = in_flight_count(vs, id);
    int64_t taken;
    int rc;

    if (!(due = malloc(RC_CAMPAIGN_DUE_BUF)))
        return VC_ERR_NOMEM;
    for (int i = 0; i < 4; i++)
        snprintf(k[i], sizeof(k[i]), "campaign:{c%lld}:%s", (long long)id, suffix[i]);
    snprintf(max, sizeof(max), "%lld", (long long)(snapshot_ms - ctx->cfg->grace_ms));
    snprintf(limit, sizeof(limit), "%d", RC_CAMPAIGN_DUE_MAX);
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_campaign_due, 4, keys, 2, args, &taken, due,
                            RC_CAMPAIGN_DUE_BUF, err, errlen)) != 0)
        goto out;
    line = strtok_r(due, "\n", &save);
    if (line)
        sscanf(line, "%lld %lld", &holds, &releasing);
    /*
     * Settled: every code Redis holds is a live row, nothing on its way. A
     * difference while events fly or releases are under way is the normal
     * lag; without them it is drift, reported with the numbers.
     */
    if (taken != live && flying == 0 && releasing == 0)
        vc_warn("campaign %lld: %lld codes taken in Redis, %lld live rows in PostgreSQL, "
                "%lld holds",
                (long long)id, (long long)taken, (long long)live, holds);
    while (repair && (line = strtok_r(NULL, "\n", &save)) != NULL) {
        char order_id[VC_ORDER_ID_MAX + 1], held_state[40], status[16];
        char code[VC_CODE_MAX + 1] = "";
        long long held;
        char state;
        int mask;

        if (sscanf(line, "%64s %39s", order_id, held_state) != 2 ||
            sscanf(held_state, "%lld:%c", &held, &state) != 2)
            continue;
        if ((rc = read_row(rc_pg_conn(ctx->pg), order_id, status, code, err, errlen)) != 0)
            goto out;
        mask = in_flight_of(vs, id, order_id, code);
        if (code[0] == '\0' || !rc_campaign_may_expire(state, held, status, mask, snapshot_ms,
                                                       ctx->cfg->grace_ms))
            continue;
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
            (rc = expire(ctx, id, order_id, held_state, code, sum, err, errlen)) != 0)
            goto out;
    }
out:
    free(due);
    return rc;
}

int rc_campaign_pass(rc_ctx_t *ctx, const rc_vouchers_t *vs, int repair, int64_t snapshot_ms,
                     rc_summary_t *sum, char *err, size_t errlen)
{
    PGconn *conn = rc_pg_conn(ctx->pg);
    PGresult *res;
    int rc = 0;

    /* Numbers only: the live rows are counted on the (campaign_id, status) index. */
    res = vc_pg_exec(conn,
                     "SELECT c.id, (SELECT count(*) FROM campaign_redemption r"
                     " WHERE r.campaign_id = c.id AND r.status <> 'RELEASED')"
                     " FROM campaign c WHERE c.state IN ('ACTIVE', 'INACTIVE') ORDER BY c.id",
                     0, NULL, &rc, err, errlen);
    if (!res)
        return rc;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++)
        rc = one(ctx, vs, strtoll(PQgetvalue(res, i, 0), NULL, 10),
                 strtoll(PQgetvalue(res, i, 1), NULL, 10), repair, snapshot_ms, sum, err, errlen);
    PQclear(res);
    return rc;
}
