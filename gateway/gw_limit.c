#include "gw_limit.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "gw_app.h"
#include "gw_notify.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_lua.h"
#include "vc_redis_cluster.h"

struct gw_limit_redis {
    redisContext *ctx;
};

/* Runs argv; returns the reply (owned) or NULL with err set. */
static redisReply *run(gw_limit_redis_t *r, int argc, const char **argv, const size_t *argvlen,
                       char *err, size_t errlen)
{
    redisReply *reply = redisCommandArgv(r->ctx, argc, argv, argvlen);

    if (!reply) {
        snprintf(err, errlen, "redis %s: %s", argv[0], r->ctx->errstr);
        return NULL;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis %s: %s", argv[0], reply->str);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

/* Connects to one node of u and logs in; returns the connection (owned) or NULL with err set. */
static gw_limit_redis_t *connect_node(const vc_redis_url_t *u, int64_t timeout_ms, char *err,
                                      size_t errlen)
{
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)((timeout_ms % 1000) * 1000)};
    gw_limit_redis_t *r;
    redisReply *reply;
    char db[8];

    if (!(r = calloc(1, sizeof(*r)))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(r->ctx = redisConnectWithTimeout(u->host, u->port, tv)) || r->ctx->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s:%d", u->host, u->port);
        gw_limit_close(r);
        return NULL;
    }
    redisSetTimeout(r->ctx, tv);
    if (u->password[0]) {
        /* Redis's answer (WRONGPASS ...) never repeats the password. */
        const char *argv[] = {"AUTH", u->user[0] ? u->user : u->password, u->password};
        size_t argvlen[] = {4, strlen(argv[1]), strlen(argv[2])};
        if (!(reply = run(r, u->user[0] ? 3 : 2, argv, argvlen, err, errlen))) {
            gw_limit_close(r);
            return NULL;
        }
        freeReplyObject(reply);
    }
    if (u->db != 0) {
        const char *argv[] = {"SELECT", db};
        size_t argvlen[] = {6, (size_t)snprintf(db, sizeof(db), "%d", u->db)};
        if (!(reply = run(r, 2, argv, argvlen, err, errlen))) {
            gw_limit_close(r);
            return NULL;
        }
        freeReplyObject(reply);
    }
    return r;
}

gw_limit_redis_t *gw_limit_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen)
{
    vc_redis_cluster_url_t nodes;
    gw_limit_redis_t *r = NULL;

    if (!vc_redis_url_is_cluster(url)) {
        if (vc_parse_redis_url(url, &nodes.seed[0], err, errlen) != 0)
            return NULL;
        return connect_node(&nodes.seed[0], timeout_ms, err, errlen);
    }
    /* A cluster: the first seed that answers (a PUBLISH there reaches every node). */
    if (vc_redis_cluster_url_parse(url, &nodes, err, errlen) != 0)
        return NULL;
    for (int i = 0; i < nodes.nseeds && !r; i++)
        r = connect_node(&nodes.seed[i], timeout_ms, err, errlen);
    return r;
}

void gw_limit_close(gw_limit_redis_t *r)
{
    if (!r)
        return;
    if (r->ctx)
        redisFree(r->ctx);
    free(r);
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
    char keys[GW_KEY_COUNT][GW_KEY_MAX], b[24], w[24];
    const char *argv[] = {"EVAL", vc_lua_limit, "2", NULL, NULL, b, w};
    size_t argvlen[7];
    redisReply *reply;

    gw_app_keys(code, keys);
    argv[3] = keys[GW_KEY_REMAINING];
    argv[4] = keys[GW_KEY_LIMIT];
    snprintf(b, sizeof(b), "%lld", (long long)base);
    snprintf(w, sizeof(w), "%lld", (long long)want);
    for (int i = 0; i < 7; i++)
        argvlen[i] = strlen(argv[i]);
    if (!(reply = run(r, 7, argv, argvlen, err, errlen)))
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

int gw_limit_extend(gw_limit_redis_t *r, const char *code, int64_t expire_at_ms, char *err,
                    size_t errlen)
{
    static const int slot_keys[] = {GW_KEY_REMAINING, GW_KEY_USERS,   GW_KEY_ORDERS,
                                    GW_KEY_HOLDS,     GW_KEY_AMOUNTS, GW_KEY_LIMIT};
    char keys[GW_KEY_COUNT][GW_KEY_MAX], at[24], cursor[24] = "0";
    redisReply *reply;
    int rc = 0;

    gw_app_keys(code, keys);
    snprintf(at, sizeof(at), "%lld", (long long)expire_at_ms);
    for (size_t i = 0; i < sizeof(slot_keys) / sizeof(slot_keys[0]); i++) {
        const char *argv[] = {"PEXPIREAT", keys[slot_keys[i]], at, "GT"};
        size_t argvlen[] = {9, strlen(argv[1]), strlen(at), 2};
        if (!(reply = run(r, 4, argv, argvlen, err, errlen)))
            return VC_ERR_UNAVAILABLE;
        freeReplyObject(reply);
    }
    /* The claims live in the orderIds' slots: one HSCAN page of orders at a time. */
    do {
        const char *argv[] = {"HSCAN", keys[GW_KEY_ORDERS], cursor, "COUNT", "500"};
        size_t argvlen[] = {5, strlen(argv[1]), strlen(cursor), 5, 3};
        redisReply *page;
        size_t sent = 0;

        if (!(reply = run(r, 5, argv, argvlen, err, errlen)))
            return VC_ERR_UNAVAILABLE;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_STRING ||
            reply->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(reply);
            snprintf(err, errlen, "HSCAN: unexpected reply");
            return VC_ERR_PROTOCOL;
        }
        snprintf(cursor, sizeof(cursor), "%s", reply->element[0]->str);
        page = reply->element[1];
        for (size_t i = 0; i + 1 < page->elements; i += 2) {
            char claim[GW_CLAIM_KEY_MAX];
            const char *cargv[] = {"PEXPIREAT", claim, at, "GT"};
            size_t cargvlen[4] = {9, 0, strlen(at), 2};
            if (page->element[i]->type != REDIS_REPLY_STRING)
                continue;
            gw_app_claim_key(page->element[i]->str, claim);
            cargvlen[1] = strlen(claim);
            redisAppendCommandArgv(r->ctx, 4, cargv, cargvlen);
            sent++;
        }
        freeReplyObject(reply);
        for (; sent > 0; sent--) {
            void *out = NULL;
            if (redisGetReply(r->ctx, &out) != REDIS_OK) {
                snprintf(err, errlen, "PEXPIREAT of a claim: %s", r->ctx->errstr);
                return VC_ERR_UNAVAILABLE;
            }
            freeReplyObject(out);
        }
    } while (strcmp(cursor, "0") != 0);
    return rc;
}

int gw_limit_publish(gw_limit_redis_t *r, const char *code, char *err, size_t errlen)
{
    const char *argv[] = {"PUBLISH", GW_NOTIFY_CHANNEL, code};
    size_t argvlen[] = {7, strlen(GW_NOTIFY_CHANNEL), strlen(code)};
    redisReply *reply = run(r, 3, argv, argvlen, err, errlen);

    if (!reply)
        return VC_ERR_UNAVAILABLE;
    freeReplyObject(reply);
    return 0;
}

int gw_limit_counters(gw_limit_redis_t *r, const char *code, int *has_remaining,
                      int64_t *remaining, int64_t *holds, char *err, size_t errlen)
{
    char keys[GW_KEY_COUNT][GW_KEY_MAX];
    const char *get[] = {"GET", keys[GW_KEY_REMAINING]};
    const char *zcard[] = {"ZCARD", keys[GW_KEY_HOLDS]};
    size_t get_len[2], zcard_len[2];
    redisReply *reply;

    gw_app_keys(code, keys);
    get_len[0] = 3;
    get_len[1] = strlen(get[1]);
    zcard_len[0] = 5;
    zcard_len[1] = strlen(zcard[1]);
    if (!(reply = run(r, 2, get, get_len, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    *has_remaining = reply->type == REDIS_REPLY_STRING;
    *remaining = *has_remaining ? strtoll(reply->str, NULL, 10) : 0;
    freeReplyObject(reply);
    if (!(reply = run(r, 2, zcard, zcard_len, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    *holds = reply_int(reply);
    freeReplyObject(reply);
    return 0;
}
