#include "rc_wave.h"
#include "rc_repair.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_model.h"

#include <stdio.h>
#include <stdlib.h>

int rc_wave_judge(rc_voucher_t *v, int64_t snapshot_ms, int64_t grace_ms)
{
    v->due_unsent = 0;
    for (size_t i = 0; i < v->ndue; i++) {
        const rc_order_t *o = rc_orders_find(&v->orders, v->due[i]);

        /*
         * The full read's rule, on the hold as the read saw it: confirmed or
         * released in PostgreSQL, a dead letter parked or discarded, all want
         * a repair a full read plans.
         */
        if (!o || o->redis_state != VC_STATE_HELD ||
            rc_model_release(o, snapshot_ms, grace_ms) != RC_RELEASE_EXPIRE)
            return 0;
        /* Its use is in used_count (a row) or in the events' change (in flight); else Redis's. */
        if (!o->in_flight && o->pg == VC_RD_NONE)
            v->due_unsent++;
    }
    return 1;
}

void rc_wave_settled(rc_voucher_t *v)
{
    if (v->due_unsent == 0)
        return;
    v->n.stranded = v->due_unsent;
    v->verdict = RC_UNDERSOLD;
}

/* Runs one slice: its releases begun, published, and finished once Kafka has them. */
static int release_slice(rc_ctx_t *ctx, rc_voucher_t *v, size_t from, size_t to,
                         int64_t snapshot_ms, rc_summary_t *sum, char *err, size_t errlen)
{
    rc_plan_t plan = {0};
    rc_releases_t rs = {0};
    int rc;

    if (!(plan.items = calloc(to - from, sizeof(*plan.items)))) {
        snprintf(err, errlen, "out of memory planning a slice of due holds");
        return VC_ERR_NOMEM;
    }
    plan.cap = to - from;
    for (size_t i = from; i < to; i++) {
        rc_order_t *o = rc_orders_find(&v->orders, v->due[i]);

        if (o)
            plan.items[plan.len++] = (rc_action_t){RC_ACT_RELEASE, o, "expire", "EXPIRED"};
    }
    if ((rc = rc_repair_voucher(ctx, v, &plan, snapshot_ms, &rs, sum, err, errlen)) == 0)
        rc = rc_repair_releases(ctx, &rs, sum, err, errlen);
    rc_releases_free(&rs);
    rc_plan_free(&plan);
    return rc;
}

int rc_wave_release(rc_ctx_t *ctx, rc_voucher_t *v, int64_t snapshot_ms, int64_t *released,
                    rc_summary_t *sum, char *err, size_t errlen)
{
    size_t slice = ctx->cfg->expiry_slice > 0 ? (size_t)ctx->cfg->expiry_slice : v->ndue;
    int64_t finished = sum->finished;
    size_t slices = 0;
    int rc = 0;

    *released = 0;
    /* A slice Kafka did not acknowledge ends the wave: the rest wait for the next pass. */
    for (size_t from = 0; from < v->ndue && rc == 0 && rc_ctx_publish_ok(ctx); from += slice) {
        size_t to = from + slice < v->ndue ? from + slice : v->ndue;

        /* Gateways' commands run between two slices; each release checks its hold again. */
        if (from > 0)
            VC_PAUSE("reconciler-expiry-slice");
        rc = release_slice(ctx, v, from, to, snapshot_ms, sum, err, errlen);
        slices++;
    }
    *released = sum->finished - finished;
    vc_metric_add(vc_counter("voucher_reconciler_expiry_slices_total",
                             "Slices of due holds released from wave reads (rc_wave.c)", NULL),
                  (int64_t)slices);
    vc_info("%s: %lld of %zu holds due given back in %zu slices of at most %zu, oldest "
            "heldUntil first, from a targeted read (not read in full)",
            v->code, (long long)*released, v->ndue, slices, slice);
    return rc;
}

void rc_wave_metrics(const rc_voucher_t *v, int64_t released)
{
    char labels[64];

    snprintf(labels, sizeof(labels), "code=\"%s\"", v->code);
    vc_metric_set(vc_gauge("voucher_reconciler_wave_expired",
                           "Holds due the last pass gave back from a wave read (the oldest due "
                           "holds read with a targeted read and released in slices), per voucher",
                           labels),
                  released);
}
