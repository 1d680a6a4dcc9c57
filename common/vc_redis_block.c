#include "vc_redis_block.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_error.h"
#include "vc_lua.h"
#include "vc_redis_cluster.h"

struct vc_redis_block {
    vc_redis_cluster_t *cluster; /* NULL on one node */
    redisContext *one;           /* the one node; NULL until (re)connected, and in a cluster */
    vc_redis_url_t url;          /* the one node's address and credentials */
    struct timeval timeout;
};

redisContext *vc_redis_node_connect(const vc_redis_url_t *auth, const char *host, int port,
                                    struct timeval timeout, char *err, size_t errlen)
{
    redisContext *ctx = redisConnectWithTimeout(host, port, timeout);
    redisReply *reply;

    if (!ctx || ctx->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s:%d: %s", host, port,
                 ctx ? ctx->errstr : "out of memory");
        goto fail;
    }
    redisSetTimeout(ctx, timeout);
    if (auth->password[0]) {
        int with_user = auth->user[0] != '\0';
        const char *argv[] = {"AUTH", with_user ? auth->user : auth->password, auth->password};
        size_t argvlen[] = {4, strlen(argv[1]), strlen(auth->password)};

        reply = redisCommandArgv(ctx, with_user ? 3 : 2, argv, argvlen);
        if (!reply || reply->type == REDIS_REPLY_ERROR) {
            /* Redis's answer (WRONGPASS ...) never repeats the password. */
            snprintf(err, errlen, "Redis AUTH%s%s at %s:%d failed: %s",
                     with_user ? " as user " : "", auth->user, host, port,
                     reply ? reply->str : ctx->errstr);
            if (reply)
                freeReplyObject(reply);
            goto fail;
        }
        freeReplyObject(reply);
    }
    if (auth->db != 0) {
        char db[12];
        const char *argv[] = {"SELECT", db};
        size_t argvlen[] = {6, (size_t)snprintf(db, sizeof(db), "%d", auth->db)};

        reply = redisCommandArgv(ctx, 2, argv, argvlen);
        if (!reply || reply->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "Redis SELECT %d at %s:%d failed: %s", auth->db, host, port,
                     reply ? reply->str : ctx->errstr);
            if (reply)
                freeReplyObject(reply);
            goto fail;
        }
        freeReplyObject(reply);
    }
    return ctx;
fail:
    if (ctx)
        redisFree(ctx);
    return NULL;
}

vc_redis_block_t *vc_redis_block_connect(const char *url, int64_t timeout_ms, char *err,
                                         size_t errlen)
{
    vc_redis_block_t *c = calloc(1, sizeof(*c));
    vc_redis_cluster_url_t *nodes = NULL;
    char why[384];

    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->timeout.tv_sec = (time_t)(timeout_ms / 1000);
    c->timeout.tv_usec = (suseconds_t)((timeout_ms % 1000) * 1000);
    if (!vc_redis_url_is_cluster(url)) {
        if (vc_parse_redis_url(url, &c->url, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "VOUCHER_REDIS_URL %s", why);
            goto fail;
        }
        if (!(c->one = vc_redis_node_connect(&c->url, c->url.host, c->url.port, c->timeout, err,
                                             errlen)))
            goto fail;
        return c;
    }
    /* The seed list is large (sixteen URLs): not on a threadpool thread's stack. */
    if (!(nodes = malloc(sizeof(*nodes)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (vc_redis_cluster_url_parse(url, nodes, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "VOUCHER_REDIS_URL %s", why);
        goto fail;
    }
    if (!(c->cluster = vc_redis_cluster_connect(nodes, timeout_ms, err, errlen)))
        goto fail;
    free(nodes);
    return c;
fail:
    free(nodes);
    vc_redis_block_free(c);
    return NULL;
}

void vc_redis_block_free(vc_redis_block_t *c)
{
    if (!c)
        return;
    if (c->one)
        redisFree(c->one);
    vc_redis_cluster_free(c->cluster);
    free(c);
}

unsigned vc_redis_tag_slot(const char *tag)
{
    size_t n = strlen(tag);
    char stack[256], *key = n + 2 <= sizeof(stack) ? stack : malloc(n + 2);
    unsigned slot;

    if (!key)
        return vc_redis_crc16(tag, n) % VC_REDIS_SLOTS; /* the same unless tag holds a '}' */
    key[0] = '{';
    memcpy(key + 1, tag, n);
    key[n + 1] = '}';
    slot = vc_redis_key_slot(key, n + 2);
    if (key != stack)
        free(key);
    return slot;
}

/* The one node's connection, made again after a broken one; NULL with err set. */
static redisContext *one_conn(vc_redis_block_t *c, char *err, size_t errlen)
{
    if (!c->one)
        c->one = vc_redis_node_connect(&c->url, c->url.host, c->url.port, c->timeout, err, errlen);
    return c->one;
}

redisReply *vc_redis_block_command(vc_redis_block_t *c, unsigned slot, int argc, const char **argv,
                                   const size_t *argvlen, char *err, size_t errlen)
{
    redisReply *reply;

    if (c->cluster)
        return vc_redis_cluster_command(c->cluster, slot, argc, argv, argvlen, err, errlen);
    if (!one_conn(c, err, errlen))
        return NULL;
    if (!(reply = redisCommandArgv(c->one, argc, argv, argvlen))) {
        snprintf(err, errlen, "Redis %s:%d: %s", c->url.host, c->url.port, c->one->errstr);
        redisFree(c->one);
        c->one = NULL;
    }
    return reply;
}

int vc_redis_block_wait(vc_redis_block_t *c, int64_t replicas, int64_t timeout_ms, int64_t *acked,
                        char *err, size_t errlen)
{
    redisContext *ctx = c->cluster ? vc_redis_cluster_last_conn(c->cluster) : c->one;
    struct timeval longer = c->timeout;
    char n[24], ms[24];
    const char *argv[] = {"WAIT", n, ms};
    size_t argvlen[3];
    redisReply *reply;
    int rc = 0;

    if (!ctx) {
        snprintf(err, errlen, "Redis WAIT: the connection the last command ran on is gone");
        return VC_ERR_UNAVAILABLE;
    }
    argvlen[0] = 4;
    argvlen[1] = (size_t)snprintf(n, sizeof(n), "%lld", (long long)replicas);
    argvlen[2] = (size_t)snprintf(ms, sizeof(ms), "%lld", (long long)timeout_ms);
    /* WAIT may block its whole timeout: the socket's own timeout must not end it first. */
    longer.tv_sec += (time_t)(timeout_ms / 1000);
    longer.tv_usec += (suseconds_t)((timeout_ms % 1000) * 1000);
    if (longer.tv_usec >= 1000000) {
        longer.tv_sec++;
        longer.tv_usec -= 1000000;
    }
    redisSetTimeout(ctx, longer);
    if (!(reply = redisCommandArgv(ctx, 3, argv, argvlen))) {
        snprintf(err, errlen, "Redis WAIT: %s", ctx->errstr);
        if (c->cluster) {
            vc_redis_cluster_drop_last(c->cluster);
        } else {
            redisFree(c->one);
            c->one = NULL;
        }
        return VC_ERR_UNAVAILABLE;
    }
    redisSetTimeout(ctx, c->timeout);
    if (reply->type == REDIS_REPLY_INTEGER) {
        *acked = reply->integer;
    } else {
        snprintf(err, errlen, "Redis WAIT: %s",
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}

redisContext *vc_redis_block_conn(vc_redis_block_t *c, unsigned slot, char *err, size_t errlen)
{
    if (c->cluster)
        return vc_redis_cluster_conn(c->cluster, slot, err, errlen);
    /* A pipeline left broken by the last caller is made again. */
    if (c->one && c->one->err) {
        redisFree(c->one);
        c->one = NULL;
    }
    return one_conn(c, err, errlen);
}

int vc_redis_block_node(const vc_redis_block_t *c, unsigned slot)
{
    return c->cluster ? vc_redis_cluster_node(c->cluster, slot) : 0;
}

int vc_redis_block_fence(vc_redis_block_t *c, const char *set_run_id, char run_id[VC_RUN_ID_MAX],
                         int *verified, char *err, size_t errlen)
{
    const char *argv[] = {"EVAL", vc_lua_fence, "1", VC_KEY_FENCE, set_run_id ? "set" : "check",
                          set_run_id};
    redisReply *reply;
    int rc = 0;

    *verified = 0;
    if (!(reply = vc_redis_block_command(c, vc_redis_key_slot(VC_KEY_FENCE, strlen(VC_KEY_FENCE)),
                                         set_run_id ? 6 : 5, argv, NULL, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "fence.lua: %s", reply->str);
        rc = VC_ERR_PROTOCOL;
    } else if (set_run_id && reply->type == REDIS_REPLY_INTEGER) {
        *verified = reply->integer == 1;
    } else if (!set_run_id && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
               reply->element[0]->type == REDIS_REPLY_STRING &&
               reply->element[0]->len < VC_RUN_ID_MAX &&
               reply->element[1]->type == REDIS_REPLY_STRING) {
        memcpy(run_id, reply->element[0]->str, reply->element[0]->len);
        run_id[reply->element[0]->len] = '\0';
        *verified = strcmp(run_id, reply->element[1]->str) == 0;
    } else {
        snprintf(err, errlen, "fence.lua: unexpected reply");
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}
