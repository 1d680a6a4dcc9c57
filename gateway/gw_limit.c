#include "gw_limit.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_notify.h"
#include "vc_claim.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_lua.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"

/* Runs argv on slot; returns the reply (owned) or NULL with err set. */
static redisReply *run(gw_limit_redis_t *r, unsigned slot, int argc, const char **argv,
                       const size_t *argvlen, char *err, size_t errlen)
{
    char why[256];
    redisReply *reply = vc_redis_block_command(r, slot, argc, argv, argvlen, why, sizeof(why));

    if (!reply) {
        snprintf(err, errlen, "redis %s: %s", argv[0], why);
        return NULL;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis %s: %s", argv[0], reply->str);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

gw_limit_redis_t *gw_limit_connect(const char *url, int64_t timeout_ms, int fence, char *err,
                                   size_t errlen)
{
    gw_limit_redis_t *r = vc_redis_block_connect(url, timeout_ms, err, errlen);
    char run_id[VC_RUN_ID_MAX];
    int verified, rc;

    if (!r || !fence)
        return r;
    /*
     * The restart fence, as the workers' connections check it (gw_redis.h):
     * this connection writes only to the process checked here, since a
     * restart breaks it and it is not made again before the PATCH's end.
     */
    if ((rc = vc_redis_block_fence(r, NULL, run_id, &verified, err, errlen)) == 0 && verified)
        return r;
    if (rc == 0)
        snprintf(err, errlen, "%s", vc_strerror(VC_ERR_FENCED));
    vc_redis_block_free(r);
    return NULL;
}

void gw_limit_close(gw_limit_redis_t *r)
{
    vc_redis_block_free(r);
}

static int64_t reply_int(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0;
}

int gw_limit_move(gw_limit_redis_t *r, const char *code, int64_t base, int64_t want, int *status,
                  int64_t *remaining, int64_t *before, char *err, size_t errlen)
{
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX], b[24], w[24];
    const char *argv[] = {"EVAL", vc_lua_limit, "2", NULL, NULL, b, w};
    size_t argvlen[7];
    redisReply *reply;

    gw_app_keys(code, keys);
    argv[3] = keys[VC_VOUCHER_KEY_REMAINING];
    argv[4] = keys[VC_VOUCHER_KEY_LIMIT];
    snprintf(b, sizeof(b), "%lld", (long long)base);
    snprintf(w, sizeof(w), "%lld", (long long)want);
    for (int i = 0; i < 7; i++)
        argvlen[i] = strlen(argv[i]);
    if (!(reply = run(r, vc_redis_tag_slot(code), 7, argv, argvlen, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1) {
        snprintf(err, errlen, "limit.lua: unexpected reply");
        freeReplyObject(reply);
        return VC_ERR_PROTOCOL;
    }
    *status = (int)reply_int(reply->element[0]);
    *remaining = reply->elements > 1 ? reply_int(reply->element[1]) : 0;
    *before = reply->elements > 2 ? reply_int(reply->element[2]) : 0;
    freeReplyObject(reply);
    return 0;
}

int gw_limit_wait(gw_limit_redis_t *r, int64_t replicas, int64_t timeout_ms, char *err,
                  size_t errlen)
{
    int64_t acked = 0;
    int rc = vc_redis_block_wait(r, replicas, timeout_ms, &acked, err, errlen);

    if (rc == 0 && acked < replicas) {
        snprintf(err, errlen,
                 "the counter's move reached %lld of %lld Redis replicas within %lld ms",
                 (long long)acked, (long long)replicas, (long long)timeout_ms);
        rc = VC_ERR_UNAVAILABLE;
    }
    return rc;
}

/*
 * PEXPIREAT at GT on the claim of each orderId of page (an HSCAN page of
 * orders: orderId, value, ...). A claim lives in its orderId's slot: on a
 * cluster the page goes as one pipeline per master serving some of them,
 * each drained before the next is sent (a connection is borrowed only until
 * the next call on the client); on one node, as one pipeline. Returns 0, or
 * VC_ERR_UNAVAILABLE with err set when a claim could not be reached (a MOVED
 * means the map is stale: a later PATCH or the reconciler's pass completes it).
 */
static int extend_claims(gw_limit_redis_t *r, const redisReply *page, const char *at, char *err,
                         size_t errlen)
{
    size_t n = page->elements / 2;
    unsigned *slot = calloc(n ? n : 1, sizeof(*slot));
    int *node = calloc(n ? n : 1, sizeof(*node));
    char (*claim)[VC_CLAIM_KEY_MAX] = calloc(n ? n : 1, sizeof(*claim));
    int rc = 0;

    if (!slot || !node || !claim) {
        snprintf(err, errlen, "out of memory");
        rc = VC_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *id = page->element[2 * i];

        node[i] = -2; /* not a claim to move */
        if (id->type != REDIS_REPLY_STRING)
            continue;
        vc_claim_key(id->str, claim[i]);
        slot[i] = vc_redis_key_slot(claim[i], strlen(claim[i]));
        node[i] = vc_redis_block_node(r, slot[i]);
    }
    for (size_t i = 0; i < n; i++) {
        int target = node[i];
        redisContext *ctx;
        size_t sent = 0;

        if (target == -2)
            continue;
        if (!(ctx = vc_redis_block_conn(r, slot[i], err, errlen))) {
            rc = VC_ERR_UNAVAILABLE;
            goto done;
        }
        for (size_t j = i; j < n; j++) {
            const char *argv[] = {"PEXPIREAT", claim[j], at, "GT"};
            size_t argvlen[] = {9, strlen(claim[j]), strlen(at), 2};

            if (node[j] != target)
                continue;
            redisAppendCommandArgv(ctx, 4, argv, argvlen);
            node[j] = -2;
            sent++;
        }
        for (; sent > 0; sent--) {
            redisReply *out = NULL;

            if (redisGetReply(ctx, (void **)&out) != REDIS_OK) {
                snprintf(err, errlen, "PEXPIREAT of a claim: %s", ctx->errstr);
                rc = VC_ERR_UNAVAILABLE;
                goto done;
            }
            if (out->type == REDIS_REPLY_ERROR && rc == 0) {
                snprintf(err, errlen, "PEXPIREAT of a claim: %s", out->str);
                rc = VC_ERR_UNAVAILABLE;
            }
            freeReplyObject(out);
        }
    }
done:
    free(slot);
    free(node);
    free(claim);
    return rc;
}

int gw_limit_extend(gw_limit_redis_t *r, const char *code, int64_t expire_at_ms, char *err,
                    size_t errlen)
{
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX], at[24], cursor[24] = "0";
    /*
     * The outside key too (common/lua/outside.lua): expired before the
     * counter, it would read as 0, and a voucher holding uses back for no
     * order, with no orders hash, would look lost (503) until the rebuild.
     */
    const char *slot_keys[] = {keys[VC_VOUCHER_KEY_REMAINING], keys[VC_VOUCHER_KEY_USERS],
                               keys[VC_VOUCHER_KEY_ORDERS],    keys[VC_VOUCHER_KEY_HOLDS],
                               keys[VC_VOUCHER_KEY_AMOUNTS],   keys[VC_VOUCHER_KEY_LIMIT],
                               keys[VC_VOUCHER_KEY_OUTSIDE]};
    unsigned slot = vc_redis_tag_slot(code);
    redisReply *reply;
    int rc = 0;

    gw_app_keys(code, keys);
    snprintf(at, sizeof(at), "%lld", (long long)expire_at_ms);
    for (size_t i = 0; i < sizeof(slot_keys) / sizeof(slot_keys[0]); i++) {
        const char *argv[] = {"PEXPIREAT", slot_keys[i], at, "GT"};
        size_t argvlen[] = {9, strlen(argv[1]), strlen(at), 2};
        if (!(reply = run(r, slot, 4, argv, argvlen, err, errlen)))
            return VC_ERR_UNAVAILABLE;
        freeReplyObject(reply);
    }
    /* One HSCAN page of orders at a time. */
    do {
        const char *argv[] = {"HSCAN", keys[VC_VOUCHER_KEY_ORDERS], cursor, "COUNT", "500"};
        size_t argvlen[] = {5, strlen(argv[1]), strlen(cursor), 5, 3};

        if (!(reply = run(r, slot, 5, argv, argvlen, err, errlen)))
            return VC_ERR_UNAVAILABLE;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_STRING ||
            reply->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(reply);
            snprintf(err, errlen, "HSCAN: unexpected reply");
            return VC_ERR_PROTOCOL;
        }
        snprintf(cursor, sizeof(cursor), "%s", reply->element[0]->str);
        rc = extend_claims(r, reply->element[1], at, err, errlen);
        freeReplyObject(reply);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    return rc;
}

int gw_limit_publish(gw_limit_redis_t *r, const char *code, char *err, size_t errlen)
{
    const char *argv[] = {"PUBLISH", GW_NOTIFY_CHANNEL, code};
    size_t argvlen[] = {7, strlen(GW_NOTIFY_CHANNEL), strlen(code)};
    redisReply *reply = run(r, vc_redis_tag_slot(code), 3, argv, argvlen, err, errlen);

    if (!reply)
        return VC_ERR_UNAVAILABLE;
    freeReplyObject(reply);
    return 0;
}

int gw_limit_counters(gw_limit_redis_t *r, const char *code, int *has_remaining,
                      int64_t *remaining, int64_t *holds, char *err, size_t errlen)
{
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    const char *get[] = {"GET", keys[VC_VOUCHER_KEY_REMAINING]};
    const char *zcard[] = {"ZCARD", keys[VC_VOUCHER_KEY_HOLDS]};
    size_t get_len[2], zcard_len[2];
    redisReply *reply;

    gw_app_keys(code, keys);
    get_len[0] = 3;
    get_len[1] = strlen(get[1]);
    zcard_len[0] = 5;
    zcard_len[1] = strlen(zcard[1]);
    if (!(reply = run(r, vc_redis_tag_slot(code), 2, get, get_len, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    *has_remaining = reply->type == REDIS_REPLY_STRING;
    *remaining = *has_remaining ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    if (!(reply = run(r, vc_redis_tag_slot(code), 2, zcard, zcard_len, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    *holds = reply_int(reply);
    freeReplyObject(reply);
    return 0;
}
