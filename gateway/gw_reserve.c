/*
 * POST /vouchers/{code}/reservations: rules from the cache (or PostgreSQL),
 * the orderId claimed for this code (voucher-order:{orderId}, SET NX GET,
 * pipelined just before the script), one use taken atomically by reserve.lua
 * in Redis, VoucherReserved published to Kafka, and 201 only once Kafka has
 * the event. Once the use is taken and its event handed to Kafka, a failed
 * delivery keeps the hold, whatever Kafka says (503, outcome unknown): a
 * retry of the orderId publishes again, else the reconciler settles it.
 *
 * A retry is recognised as one before any rule decides: the rules are judged
 * first (no I/O), but their verdict applies to new orders only.
 * - Eligible, and the voucher not marked sold out (the success path): the
 *   claim and reserve.lua "take", one round trip as before. The script answers
 *   an order it knows before it looks at stock or limits.
 * - Marked sold out (gw_soldout.h): nothing may be taken, so no claim. An
 *   orderId not in the snapshot taken with the mark gets OUT_OF_STOCK from
 *   memory; one in it runs reserve.lua "known".
 * - Refused by the rules: nothing may be taken, so no claim; HGET asks
 *   whether Redis knows the order. Unknown (every new order): the refusal,
 *   after one read. Known (a retry): reserve.lua "known", which answers it as
 *   the success path would and takes nothing.
 * - A 201 (new or replayed) waits while another gateway's sold-out snapshot
 *   may still lack the order (proto/redis-keys.md, "Sold out without a round
 *   trip").
 *
 * A known order (reserve.lua status 0) publishes VoucherReserved again, from
 * the stored order (discount, heldUntil; reservedAt is heldUntil minus the
 * hold ttl) and the orderAmount, and answers 201 replayed only after Kafka
 * acknowledged it: a retry after a lost event repairs it, and the writer
 * applies a duplicate once. A retry with another orderAmount than the one
 * stored (voucher:{CODE}:amounts) is refused with 409 ORDER_CONFLICT, like a
 * retry from another customer.
 *
 * The flow is one state, gw_reserve_t.step (gw_reserve_int.h). Each move
 * is one named function, which checks the step it leaves (gw_reserve_go()):
 *
 *   PARSE -> GUARD           gw_reserve_start()          the body read
 *   GUARD -> RULES           gw_reserve_lookup()         the guessing limits let it on
 *   RULES -> PROBE           probe()                     refused: does Redis know the order?
 *   RULES -> CLAIM           gw_reserve_claim_and_run()  the claim, the script right behind it
 *   RULES -> CLAIM_FIRST     gw_reserve_claim_and_run()  (a cluster) the script after the claim
 *   CLAIM -> CLAIM_UNSENT    gw_reserve_claim_and_run()  the script could not be sent
 *   CLAIM -> SCRIPT          claim_cb()                  the claim answered, the script next
 *   RULES, PROBE, CLAIM_FIRST, SCRIPT, LOAD -> SCRIPT
 *                            gw_reserve_run_script()     reserve.lua, or again
 *   SCRIPT -> LOAD           gw_reserve_load()           the voucher's first load
 *   SCRIPT -> FORGET         forget()                    a use taken under another's claim
 *   SCRIPT -> LEASES         gw_reserve_publish_after()  other gateways' sold-out leases
 *   SCRIPT, LEASES -> REPLICAS       wait_replicas()     VOUCHER_REDIS_WAIT_REPLICAS
 *   REPLICAS -> CLAIM_REPLICAS       waited_cb()         (a cluster) the claim's master too
 *   SCRIPT, LEASES, REPLICAS, CLAIM_REPLICAS -> PUBLISH
 *                            publish()                   VoucherReserved to Kafka
 *   RULES -> DIRECT_CLAIM, DIRECT_PROBE -> DIRECT
 *                            gw_reserve_direct()         a direct voucher: PostgreSQL alone
 *                                                        (gw_reserve_direct.c has its map)
 *   any but DONE -> DONE     the answers (gw_reserve_answer.c), once
 *
 * The files, one concern each, are listed in gw_reserve_int.h.
 */
#include <string.h>

#include "gw_guard.h"
#include "gw_reserve_int.h"
#include "vc_error.h"

void gw_reserve_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    char err[256];
    gw_reserve_req_t in;
    gw_reserve_t *x;
    int rc;

    if ((rc = gw_reserve_req_parse(req->body, req->body_len, &in, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    if (!(x = gw_request_alloc(req, sizeof(*x)))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    x->app = app;
    x->req = req;
    x->in = in;
    memcpy(x->code, code, strnlen(code, VC_CODE_MAX)); /* x is zeroed: the code stays terminated */
    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_PARSE), GW_RESERVE_GUARD);
    /* Before any lookup: an empty bucket gets 429 and learns nothing of the code. */
    if (gw_guard_enter(app, req, in.customer_id, gw_reserve_lookup, x) == GW_GUARD_GO)
        gw_reserve_lookup(x);
}
