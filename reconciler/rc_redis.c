#include "rc_redis.h"
#include "vc_config.h"
#include "vc_error.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>

struct rc_redis {
    redisContext *ctx;
};

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

int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen)
{
    redisReply *reply = redisCommand(r->ctx, "GET voucher:{%s}:remaining", code);
    int rc = 0;

    if (!reply) {
        snprintf(err, errlen, "Redis: %s", r->ctx->errstr);
        return VC_ERR_UNAVAILABLE;
    }
    *loaded = 0;
    if (reply->type == REDIS_REPLY_NIL) {
        *remaining = 0;
    } else if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        *remaining = strtoll(reply->str, &end, 10);
        *loaded = 1;
        if (*end) {
            snprintf(err, errlen, "Redis: voucher:{%s}:remaining is not a number", code);
            rc = VC_ERR_PROTOCOL;
        }
    } else {
        snprintf(err, errlen, "Redis: unexpected reply to GET voucher:{%s}:remaining", code);
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}
