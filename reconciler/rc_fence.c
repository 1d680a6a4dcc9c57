#include "rc_fence.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_time.h"

#include <string.h>

void rc_fence_init(rc_fence_t *f, const rc_config_t *cfg, int on)
{
    vc_redis_url_t url;
    char err[256];

    memset(f, 0, sizeof(*f));
    if (!on)
        return;
    /* A URL that does not parse fails the connection later, with its own message. */
    if (vc_parse_redis_url(cfg->redis_url, &url, err, sizeof(err)) == 0 && url.cluster) {
        vc_warn("VOUCHER_REDIS_FENCE is for one Redis node: not kept on this Redis Cluster");
        return;
    }
    f->enabled = 1;
}

int rc_fence_clean(const rc_summary_t *sum)
{
    return sum->offering_excess == 0 && sum->awaiting_restore == 0 && sum->restored == 0 &&
           sum->retaken == 0 && sum->lowered == 0 && sum->reconfirmed == 0;
}

static void set_gauge(int verified)
{
    vc_metric_set(vc_gauge("voucher_reconciler_redis_verified",
                           "1 when " VC_KEY_FENCE " holds the run_id of the Redis process now "
                           "running (the gateways with VOUCHER_REDIS_FENCE write to it), 0 while "
                           "it waits for a clean full pass",
                           NULL),
                  verified);
}

/* A Redis call of the fence failed: a broken connection is made anew next pass, as rc_pass() does. */
static int redis_failed(rc_ctx_t *ctx, int rc)
{
    if (rc == VC_ERR_UNAVAILABLE || rc == VC_ERR_TIMEOUT) {
        rc_redis_free(ctx->redis);
        ctx->redis = NULL;
    }
    return rc;
}

/*
 * Redis refused the script (VC_ERR_PROTOCOL: a user without +info or +eval):
 * the pass goes on without the fence, which then never lifts for gateways
 * that have it on; said once per refusal, and again after a success.
 */
static void refused(rc_fence_t *f, const char *why)
{
    if (!f->refused)
        vc_warn("cannot check the restart fence (%s): the Redis user needs +info and +eval; "
                "gateways with VOUCHER_REDIS_FENCE on refuse to write until it can",
                why);
    f->refused = 1;
}

int rc_fence_pass(rc_ctx_t *ctx, rc_fence_t *f, int repair, FILE *table, rc_summary_t *sum,
                  char *err, size_t errlen)
{
    char id[VC_RUN_ID_MAX], scratch[VC_RUN_ID_MAX];
    int verified = 0, due, rc;
    int64_t now;

    if (!repair || !f->enabled || !ctx->leader)
        return rc_pass(ctx, repair, table, sum, err, errlen);
    if ((rc = rc_ctx_connect(ctx, err, errlen)) != 0)
        return rc;
    if ((rc = rc_redis_fence(ctx->redis, NULL, id, &verified, err, errlen)) == VC_ERR_PROTOCOL) {
        refused(f, err);
        return rc_pass(ctx, repair, table, sum, err, errlen);
    }
    if (rc != 0)
        return redis_failed(ctx, rc);
    f->refused = 0;
    set_gauge(verified);
    if (verified) {
        f->run_id[0] = '\0';
        return rc_pass(ctx, repair, table, sum, err, errlen);
    }
    now = vc_time_now_ms();
    if (strcmp(f->run_id, id) != 0) {
        memcpy(f->run_id, id, sizeof(f->run_id));
        f->first_seen_ms = now;
        vc_warn("Redis run_id %s is not verified (it restarted, or lost " VC_KEY_FENCE
                "): gateways with the fence on refuse to write to it; a full pass checks it in "
                "%lld ms, once "
                "the events in flight before it started have reached Kafka",
                id, (long long)ctx->cfg->restore_delay_ms);
    }
    due = now - f->first_seen_ms >= ctx->cfg->restore_delay_ms;
    /* Marked before the pass the set follows: a newer reconciler's mark then refuses the set. */
    if (due && (rc = rc_redis_mark(ctx->redis, VC_KEY_FENCE_LEADER, 0, err, errlen)) != 0)
        return redis_failed(ctx, rc_ctx_refused(ctx, rc, err));
    ctx->force_full = due;
    rc = rc_pass(ctx, repair, table, sum, err, errlen);
    ctx->force_full = 0;
    if (rc != 0 || !due)
        return rc;
    if (!rc_fence_clean(sum)) {
        vc_info("Redis run_id %s: the full pass repaired drift (%lld restored, %lld taken again, "
                "%lld lowered, %lld confirmed again, %d offering more than their bound, %d waiting to "
                "be restored): checking again next pass",
                id, (long long)sum->restored, (long long)sum->retaken, (long long)sum->lowered,
                (long long)sum->reconfirmed, sum->offering_excess, sum->awaiting_restore);
        return 0;
    }
    /* Clean; a test (tests/model) may land a gateway step or a restart here. */
    VC_PAUSE("reconciler-before-fence");
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        return rc;
    if ((rc = rc_redis_fence(ctx->redis, id, scratch, &verified, err, errlen)) != 0)
        return redis_failed(ctx, rc_ctx_refused(ctx, rc, err));
    if (!verified) {
        vc_warn("Redis restarted again while run_id %s was being checked: starting over", id);
        return 0;
    }
    set_gauge(1);
    vc_info("Redis run_id %s verified against PostgreSQL and Kafka: the gateways may write to it",
            id);
    f->run_id[0] = '\0';
    return 0;
}

int rc_fence_report(rc_ctx_t *ctx, const rc_fence_t *f, FILE *out, char *err, size_t errlen)
{
    char id[VC_RUN_ID_MAX];
    int verified, rc;

    if (!f->enabled)
        return 0;
    if ((rc = rc_ctx_connect(ctx, err, errlen)) != 0)
        return rc;
    if ((rc = rc_redis_fence(ctx->redis, NULL, id, &verified, err, errlen)) == VC_ERR_PROTOCOL) {
        fprintf(out, "the restart fence cannot be checked (%s): the Redis user needs +info and "
                     "+eval\n",
                err);
        return 0;
    }
    if (rc != 0)
        return rc;
    fprintf(out,
            verified ? "Redis run_id %s: verified (" VC_KEY_FENCE " holds it)\n"
                     : "Redis run_id %s: NOT verified: gateways with VOUCHER_REDIS_FENCE refuse to "
                       "write until the reconciler daemon has checked it\n",
            id);
    return 0;
}
