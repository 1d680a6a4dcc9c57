#include "rc_redis.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_fault.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rc_redis {
    redisContext *ctx;
};

void rc_keys_of(const char *code, rc_keys_t *k)
{
    static const char *const suffix[RC_KEY_COUNT] = {"remaining", "users", "orders", "holds",
                                                     "releasing", "resent"};
    for (int i = 0; i < RC_KEY_COUNT; i++)
        snprintf(k->name[i], sizeof(k->name[i]), "voucher:{%s}:%s", code, suffix[i]);
}

rc_redis_t *rc_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen)
{
    char host[256];
    int port, db;
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)((timeout_ms % 1000) * 1000)};
    rc_redis_t *r;
    redisReply *reply;

    if (vc_parse_redis_url(url, host, sizeof(host), &port, &db) != 0) {
        snprintf(err, errlen, "invalid Redis URL \"%s\" (expected redis://host:port/db)", url);
        return NULL;
    }
    if (!(r = calloc(1, sizeof(*r)))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->ctx = redisConnectWithTimeout(host, port, tv);
    if (!r->ctx || r->ctx->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s:%d: %s", host, port,
                 r->ctx ? r->ctx->errstr : "out of memory");
        goto fail;
    }
    redisSetTimeout(r->ctx, tv);
    if (db != 0) {
        reply = redisCommand(r->ctx, "SELECT %d", db);
        if (!reply || reply->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "Redis SELECT %d failed", db);
            if (reply)
                freeReplyObject(reply);
            goto fail;
        }
        freeReplyObject(reply);
    }
    return r;
fail:
    rc_redis_free(r);
    return NULL;
}

void rc_redis_free(rc_redis_t *r)
{
    if (!r)
        return;
    if (r->ctx)
        redisFree(r->ctx);
    free(r);
}

/* Turns a missing or error reply into our error, with err set. Frees an error reply. */
static int check_reply(rc_redis_t *r, redisReply *reply, const char *what, char *err,
                       size_t errlen)
{
    if (!reply) {
        snprintf(err, errlen, "Redis %s: %s", what, r->ctx->errstr);
        return VC_ERR_UNAVAILABLE; /* hiredis 0.14 reports a timeout as an I/O error */
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "Redis %s: %s", what, reply->str);
        freeReplyObject(reply);
        return VC_ERR_PROTOCOL;
    }
    return 0;
}

int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen)
{
    redisReply *reply = redisCommand(r->ctx, "GET voucher:{%s}:remaining", code);
    int rc;

    if ((rc = check_reply(r, reply, "GET remaining", err, errlen)) != 0)
        return rc;
    *loaded = 0;
    *remaining = 0;
    if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        *remaining = strtoll(reply->str, &end, 10);
        *loaded = 1;
        if (*end) {
            snprintf(err, errlen, "Redis: voucher:{%s}:remaining is not a number", code);
            rc = VC_ERR_PROTOCOL;
        }
    } else if (reply->type != REDIS_REPLY_NIL) {
        snprintf(err, errlen, "Redis: unexpected reply to GET voucher:{%s}:remaining", code);
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}

int rc_redis_activity(rc_redis_t *r, const char *code, int64_t now_ms, int64_t *due_holds,
                      int64_t *releasing, char *err, size_t errlen)
{
    int64_t *out[2] = {due_holds, releasing};
    int rc = 0;

    /* Pipelined: both commands go out before either reply is read. */
    redisAppendCommand(r->ctx, "ZCOUNT voucher:{%s}:holds -inf %lld", code, (long long)now_ms);
    redisAppendCommand(r->ctx, "ZCARD voucher:{%s}:releasing", code);
    for (int i = 0; i < 2; i++) {
        redisReply *reply;
        void *got = NULL;

        if (redisGetReply(r->ctx, &got) != REDIS_OK || !got) {
            /* A broken connection: the pass drops it, the unread reply with it. */
            snprintf(err, errlen, "Redis ZCOUNT/ZCARD: %s", r->ctx->errstr);
            return VC_ERR_UNAVAILABLE;
        }
        reply = got;
        if (rc == 0 && reply->type == REDIS_REPLY_INTEGER) {
            *out[i] = reply->integer;
        } else if (rc == 0) {
            snprintf(err, errlen, "Redis ZCOUNT/ZCARD of %s: %s", code,
                     reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
            rc = VC_ERR_PROTOCOL;
        }
        freeReplyObject(reply);
    }
    return rc;
}

int rc_redis_orders(rc_redis_t *r, const char *code, rc_orders_t *m, int *bad, char *err,
                    size_t errlen)
{
    redisReply *reply = redisCommand(r->ctx, "HGETALL voucher:{%s}:orders", code);
    int rc;

    *bad = 0;
    if ((rc = check_reply(r, reply, "HGETALL orders", err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(reply);
        snprintf(err, errlen, "Redis: unexpected reply to HGETALL voucher:{%s}:orders", code);
        return VC_ERR_PROTOCOL;
    }
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        redisReply *k = reply->element[i], *v = reply->element[i + 1];
        rc_order_t parsed = {0}, *o;
        char id[VC_ORDER_ID_MAX + 1];

        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || k->len == 0 ||
            k->len > VC_ORDER_ID_MAX || rc_order_parse(v->str, v->len, &parsed) != 0) {
            (*bad)++;
            continue;
        }
        memcpy(id, k->str, k->len);
        id[k->len] = '\0';
        if (!(o = rc_orders_get(m, id))) {
            freeReplyObject(reply);
            snprintf(err, errlen, "out of memory");
            return VC_ERR_NOMEM;
        }
        o->redis_state = parsed.redis_state;
        o->redis_held_until_ms = parsed.redis_held_until_ms;
        if (!o->customer_id)
            o->customer_id = parsed.customer_id;
        if (!o->discount)
            o->discount = parsed.discount;
        if (!o->held_until_ms)
            o->held_until_ms = parsed.held_until_ms;
    }
    freeReplyObject(reply);
    return 0;
}

int rc_redis_due(rc_redis_t *r, const char *code, rc_key_t set, int64_t max_score, int limit,
                 void (*cb)(void *arg, const char *order_id), void *arg, char *err, size_t errlen)
{
    rc_keys_t k;
    redisReply *reply;
    int rc;

    rc_keys_of(code, &k);
    reply = redisCommand(r->ctx, "ZRANGEBYSCORE %s -inf %lld LIMIT 0 %d", k.name[set],
                         (long long)max_score, limit);
    if ((rc = check_reply(r, reply, "ZRANGEBYSCORE", err, errlen)) != 0)
        return rc;
    if (reply->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < reply->elements; i++)
            if (reply->element[i]->type == REDIS_REPLY_STRING)
                cb(arg, reply->element[i]->str);
    }
    freeReplyObject(reply);
    return 0;
}

int rc_redis_eval(rc_redis_t *r, const char *script, int nkeys, const char *const *keys, int nargs,
                  const char *const *args, int64_t *status, char *order, size_t ordercap,
                  char *err, size_t errlen)
{
    int argc = 3 + nkeys + nargs, rc;
    const char **argv = malloc(sizeof(*argv) * (size_t)argc);
    char numkeys[16];
    redisReply *reply;

    /*
     * Every repair script of a pass runs through here: a test (tests/model)
     * steps the reconciler from one repair to the next, so that any gateway
     * step can land between two of them.
     */
    VC_PAUSE("reconciler-each-repair");
    if (!argv)
        return VC_ERR_NOMEM;
    snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = numkeys;
    for (int i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i];
    reply = redisCommandArgv(r->ctx, argc, argv, NULL);
    free(argv);
    if ((rc = check_reply(r, reply, "EVAL", err, errlen)) != 0)
        return rc;
    if (order && ordercap)
        order[0] = '\0';
    if (reply->type == REDIS_REPLY_INTEGER) {
        *status = reply->integer;
    } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
               reply->element[0]->type == REDIS_REPLY_INTEGER) {
        *status = reply->element[0]->integer;
        if (order && ordercap && reply->elements >= 2 &&
            reply->element[1]->type == REDIS_REPLY_STRING)
            snprintf(order, ordercap, "%s", reply->element[1]->str);
    } else {
        snprintf(err, errlen, "Redis: unexpected reply to a script");
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}
