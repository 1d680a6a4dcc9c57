#include "rc_redis.h"
#include "vc_claim.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_random.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * One node (redis://), or a Redis Cluster (redis+cluster://host:port,...):
 * every command of the reconciler names one voucher, whose keys share a slot,
 * so each goes to the node serving that slot (vc_redis_block.h).
 */
struct rc_redis {
    vc_redis_block_t *c;
    char why[256]; /* why command_on() got no reply */
};

void rc_keys_of(const char *code, rc_keys_t *k)
{
    static const char *const suffix[RC_KEY_COUNT] = {
        "remaining", "users", "orders", "holds", "releasing", "resent", "amounts", "scan",
        "touched"};
    for (int i = 0; i < RC_KEY_COUNT; i++)
        snprintf(k->name[i], sizeof(k->name[i]), "voucher:{%s}:%s", code, suffix[i]);
}

rc_redis_t *rc_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen)
{
    rc_redis_t *r = calloc(1, sizeof(*r));

    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(r->c = vc_redis_block_connect(url, timeout_ms, err, errlen))) {
        free(r);
        return NULL;
    }
    return r;
}

void rc_redis_free(rc_redis_t *r)
{
    if (!r)
        return;
    vc_redis_block_free(r->c);
    free(r);
}

/*
 * The connection for a pipeline on code's keys: the one node, or the master
 * of their slot. NULL with err set.
 */
static redisContext *conn_for(rc_redis_t *r, const char *code, char *err, size_t errlen)
{
    return vc_redis_block_conn(r->c, vc_redis_tag_slot(code), err, errlen);
}

/* One command on keys of one slot. NULL with r->why set when no reply came. */
static redisReply *command_on(rc_redis_t *r, unsigned slot, int argc, const char **argv)
{
    return vc_redis_block_command(r->c, slot, argc, argv, NULL, r->why, sizeof(r->why));
}

/*
 * In a pipeline on a cluster, a MOVED or ASK means the slot left this master
 * (a failover, a resharding): the pass fails as with a broken connection, and
 * the next connection reads the map again.
 */
static int pipeline_error(const redisReply *reply, const char *what, const char *code, char *err,
                          size_t errlen)
{
    vc_redis_redirect_t moved;

    snprintf(err, errlen, "Redis %s of %s: %s", what, code, reply->str);
    if (vc_redis_redirect_parse(reply->str, reply->len, &moved) != VC_REDIS_NOT_REDIRECT)
        return VC_ERR_UNAVAILABLE;
    return VC_ERR_PROTOCOL;
}

/* Turns a missing or error reply into our error, with err set. Frees an error reply. */
static int check_reply(rc_redis_t *r, redisReply *reply, const char *what, char *err,
                       size_t errlen)
{
    if (!reply) {
        snprintf(err, errlen, "Redis %s: %s", what, r->why);
        return VC_ERR_UNAVAILABLE; /* hiredis 0.14 reports a timeout as an I/O error */
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "Redis %s: %s", what, reply->str);
        freeReplyObject(reply);
        return VC_ERR_PROTOCOL;
    }
    return 0;
}

/* Parses a counter's value: 0, or VC_ERR_PROTOCOL with err set. */
static int parse_remaining(const redisReply *reply, const char *code, int *loaded,
                           int64_t *remaining, char *err, size_t errlen)
{
    *loaded = 0;
    *remaining = 0;
    if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        *remaining = strtoll(reply->str, &end, 10);
        *loaded = 1;
        if (*end) {
            snprintf(err, errlen, "Redis: voucher:{%s}:remaining is not a number", code);
            return VC_ERR_PROTOCOL;
        }
    } else if (reply->type != REDIS_REPLY_NIL) {
        snprintf(err, errlen, "Redis: unexpected reply to GET voucher:{%s}:remaining", code);
        return VC_ERR_PROTOCOL;
    }
    return 0;
}

int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen)
{
    rc_keys_t k;
    const char *argv[2] = {"GET", k.name[RC_KEY_REMAINING]};
    redisReply *reply;
    int rc;

    rc_keys_of(code, &k);
    reply = command_on(r, vc_redis_tag_slot(code), 2, argv);
    if ((rc = check_reply(r, reply, "GET remaining", err, errlen)) != 0)
        return rc;
    rc = parse_remaining(reply, code, loaded, remaining, err, errlen);
    freeReplyObject(reply);
    return rc;
}

int rc_redis_limit(rc_redis_t *r, const char *code, int *present, int64_t *limit, char *err,
                   size_t errlen)
{
    char key[VC_CODE_MAX + 32];
    const char *argv[2] = {"GET", key};
    redisReply *reply;
    int rc;

    snprintf(key, sizeof(key), "voucher:{%s}:limit", code);
    reply = command_on(r, vc_redis_tag_slot(code), 2, argv);
    if ((rc = check_reply(r, reply, "GET limit", err, errlen)) != 0)
        return rc;
    rc = parse_remaining(reply, code, present, limit, err, errlen);
    freeReplyObject(reply);
    return rc;
}

int rc_redis_activity(rc_redis_t *r, const char *code, int64_t now_ms, int64_t *due_holds,
                      int64_t *releasing, char *err, size_t errlen)
{
    int64_t *out[2] = {due_holds, releasing};
    redisContext *ctx = conn_for(r, code, err, errlen);
    int rc = 0;

    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    /* Pipelined: both commands go out before either reply is read. */
    redisAppendCommand(ctx, "ZCOUNT voucher:{%s}:holds -inf %lld", code, (long long)now_ms);
    redisAppendCommand(ctx, "ZCARD voucher:{%s}:releasing", code);
    for (int i = 0; i < 2; i++) {
        redisReply *reply;
        void *got = NULL;

        if (redisGetReply(ctx, &got) != REDIS_OK || !got) {
            /* A broken connection: the pass drops it, the unread reply with it. */
            snprintf(err, errlen, "Redis ZCOUNT/ZCARD: %s", ctx->errstr);
            return VC_ERR_UNAVAILABLE;
        }
        reply = got;
        if (rc == 0 && reply->type == REDIS_REPLY_INTEGER) {
            *out[i] = reply->integer;
        } else if (rc == 0 && reply->type == REDIS_REPLY_ERROR) {
            rc = pipeline_error(reply, "ZCOUNT/ZCARD", code, err, errlen);
        } else if (rc == 0) {
            snprintf(err, errlen, "Redis ZCOUNT/ZCARD of %s: unexpected reply", code);
            rc = VC_ERR_PROTOCOL;
        }
        freeReplyObject(reply);
    }
    return rc;
}

/* The orders, the counter and the sizes in one MULTI/EXEC (rc_redis_orders()). */
static int orders_at_once(rc_redis_t *r, const char *code, rc_orders_t *m, int *loaded,
                          int64_t *remaining, int64_t *users, int64_t *amounts, int *bad,
                          char *err, size_t errlen)
{
    redisReply *reply = NULL, *orders;
    redisContext *ctx = conn_for(r, code, err, errlen);
    int rc = 0;

    *bad = 0;
    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    /* Pipelined: MULTI, GET, HGETALL, HLEN, EXISTS, EXEC; only EXEC's reply carries the values. */
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "GET voucher:{%s}:remaining", code);
    redisAppendCommand(ctx, "HGETALL voucher:{%s}:orders", code);
    redisAppendCommand(ctx, "HLEN voucher:{%s}:users", code);
    redisAppendCommand(ctx, "EXISTS voucher:{%s}:amounts", code);
    redisAppendCommand(ctx, "EXEC");
    for (int i = 0; i < 6; i++) {
        void *got = NULL;
        if (redisGetReply(ctx, &got) != REDIS_OK || !got) {
            /* A broken connection: the pass drops it, the unread replies with it. */
            snprintf(err, errlen, "Redis MULTI GET HGETALL HLEN EXISTS EXEC: %s", ctx->errstr);
            if (reply)
                freeReplyObject(reply);
            return VC_ERR_UNAVAILABLE;
        }
        if (i < 5) {
            if (((redisReply *)got)->type == REDIS_REPLY_ERROR && rc == 0)
                rc = pipeline_error(got, "MULTI", code, err, errlen);
            freeReplyObject(got);
        } else {
            reply = got;
        }
    }
    if (rc != 0)
        goto out;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4 ||
        reply->element[1]->type != REDIS_REPLY_ARRAY ||
        reply->element[2]->type != REDIS_REPLY_INTEGER ||
        reply->element[3]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "Redis: unexpected reply to EXEC (GET, HGETALL, HLEN, EXISTS) of %s",
                 code);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    if ((rc = parse_remaining(reply->element[0], code, loaded, remaining, err, errlen)) != 0)
        goto out;
    *users = reply->element[2]->integer;
    *amounts = reply->element[3]->integer;
    orders = reply->element[1];
    for (size_t i = 0; i + 1 < orders->elements; i += 2) {
        redisReply *k = orders->element[i], *v = orders->element[i + 1];
        vc_order_value_t parsed;
        rc_order_t *o;
        char id[VC_ORDER_ID_MAX + 1];

        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || k->len == 0 ||
            k->len > VC_ORDER_ID_MAX || vc_order_value_parse(v->str, v->len, &parsed) != 0) {
            (*bad)++;
            continue;
        }
        memcpy(id, k->str, k->len);
        id[k->len] = '\0';
        if (!(o = rc_orders_get(m, id))) {
            snprintf(err, errlen, "out of memory");
            rc = VC_ERR_NOMEM;
            goto out;
        }
        rc_order_merge_redis(o, &parsed);
    }
out:
    if (reply)
        freeReplyObject(reply);
    return rc;
}

/* Orders per HSCAN call of a read in pieces: 0.4 to 1.2 ms of Redis each (measured). */
#define SCAN_COUNT "1000"
/* How long a read in pieces may take before its keys expire and it is not kept. */
#define SCAN_LIFETIME_MS "60000"

/*
 * One order of a read in pieces into t, its Redis fields replaced (value
 * NULL: Redis has no such order now). An unreadable value is kept as state
 * '?', counted bad when t is merged; an orderId the model cannot hold is not
 * kept at all, which the size check then reports (the read goes at once).
 */
static int piece_put(rc_orders_t *t, const char *id, size_t idlen, const char *value,
                     size_t vlen)
{
    char key[VC_ORDER_ID_MAX + 1];
    vc_order_value_t v;
    rc_order_t *o;

    if (idlen == 0 || idlen > VC_ORDER_ID_MAX)
        return 0;
    memcpy(key, id, idlen);
    key[idlen] = '\0';
    if (!(o = rc_orders_get(t, key)))
        return VC_ERR_NOMEM;
    memset(&v, 0, sizeof(v));
    if (value && vc_order_value_parse(value, vlen, &v) != 0)
        v.state = '?';
    o->customer_id = v.customer_id;
    o->discount = v.discount;
    o->held_until_ms = v.held_until_ms;
    o->redis_state = v.state;
    return 0;
}

/* A reply's element as an integer, or -1. */
static long long reply_int(const redisReply *reply)
{
    return reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
}

/*
 * A large orders hash read in pieces (proto/redis-keys.md, "Reading a large
 * orders hash"): scan_begin.lua, HSCAN to the end, scan_finish.lua. Only
 * orders no script wrote during the read are taken from the pieces (each
 * write is noted: orders_write.lua); those written are read again by the
 * finish, with the counter and the sizes, at one moment. So t ends as the hash
 * was at the finish, as one MULTI/EXEC would have read it then, without any
 * command of the read costing Redis more than one piece. *kept is 0 when the
 * read cannot be trusted to be that (its token expired, or the hash lost
 * orders without a write: expired, deleted): the caller reads at once.
 */
static int orders_in_pieces(rc_redis_t *r, const char *code, const rc_keys_t *k,
                            const char *token, rc_orders_t *t, int *loaded, int64_t *remaining,
                            int64_t *users, int64_t *amounts, int *kept, char *err,
                            size_t errlen)
{
    char cursor[32] = "0";
    unsigned slot = vc_redis_tag_slot(code);
    redisReply *reply, *done, *written;
    size_t held = 0;
    int rc;

    *kept = 0;
    do {
        const char *argv[] = {"HSCAN", k->name[RC_KEY_ORDERS], cursor, "COUNT", SCAN_COUNT};
        redisReply *items;

        reply = command_on(r, slot, 5, argv);
        if ((rc = check_reply(r, reply, "HSCAN", err, errlen)) != 0)
            return rc;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_STRING ||
            reply->element[0]->len >= sizeof(cursor) ||
            reply->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(reply);
            snprintf(err, errlen, "Redis: unexpected reply to HSCAN of %s", code);
            return VC_ERR_PROTOCOL;
        }
        memcpy(cursor, reply->element[0]->str, reply->element[0]->len + 1);
        items = reply->element[1];
        for (size_t i = 0; rc == 0 && i + 1 < items->elements; i += 2) {
            redisReply *f = items->element[i], *v = items->element[i + 1];
            if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
                rc = piece_put(t, f->str, f->len, v->str, v->len);
        }
        freeReplyObject(reply);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory reading the orders of %s", code);
            return rc;
        }
    } while (strcmp(cursor, "0") != 0);

    /* The explorer (tests/model) lands gateway steps here: writes the finish must see. */
    VC_PAUSE("reconciler-orders-scanned");
    {
        const char *argv[] = {"EVAL",
                              vc_lua_scan_finish,
                              "6",
                              k->name[RC_KEY_REMAINING],
                              k->name[RC_KEY_ORDERS],
                              k->name[RC_KEY_USERS],
                              k->name[RC_KEY_AMOUNTS],
                              k->name[RC_KEY_SCAN],
                              k->name[RC_KEY_TOUCHED],
                              token};
        reply = command_on(r, slot, 10, argv);
    }
    if ((rc = check_reply(r, reply, "EVAL scan_finish", err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        rc = VC_ERR_PROTOCOL;
    } else if (reply->element[0]->integer == 0) {
        freeReplyObject(reply);
        return 0; /* the token is gone: not kept */
    } else if (reply->elements != 6 || reply_int(reply->element[2]) < 0 ||
               reply_int(reply->element[3]) < 0 || reply_int(reply->element[4]) < 0 ||
               reply->element[5]->type != REDIS_REPLY_ARRAY) {
        rc = VC_ERR_PROTOCOL;
    }
    if (rc != 0) {
        freeReplyObject(reply);
        snprintf(err, errlen, "Redis: unexpected reply to scan_finish.lua of %s", code);
        return rc;
    }
    if ((rc = parse_remaining(reply->element[1], code, loaded, remaining, err, errlen)) != 0) {
        freeReplyObject(reply);
        return rc;
    }
    *users = reply->element[3]->integer;
    *amounts = reply->element[4]->integer;
    written = reply->element[5];
    for (size_t i = 0; rc == 0 && i + 1 < written->elements; i += 2) {
        redisReply *f = written->element[i], *v = written->element[i + 1];
        if (f->type == REDIS_REPLY_STRING)
            rc = piece_put(t, f->str, f->len, v->type == REDIS_REPLY_STRING ? v->str : NULL,
                           v->type == REDIS_REPLY_STRING ? v->len : 0);
    }
    done = reply;
    if (rc != 0) {
        freeReplyObject(done);
        snprintf(err, errlen, "out of memory reading the orders of %s", code);
        return rc;
    }
    for (size_t i = 0; i < t->cap; i++) {
        rc_order_t *o = rc_orders_at(t, i);
        held += o && o->redis_state;
    }
    *kept = (long long)held == done->element[2]->integer;
    freeReplyObject(done);
    return 0;
}

/* A fresh token for one read in pieces: random, so that readers never share one. */
static void scan_token(char token[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16] = {0};
    static unsigned long long n;

    if (vc_random_fill(NULL, raw, sizeof(raw)) != 0)
        memcpy(raw, &n, sizeof(n)); /* getrandom failed: still unique within this process */
    n++;
    for (int i = 0; i < 16; i++) {
        token[2 * i] = hex[raw[i] >> 4];
        token[2 * i + 1] = hex[raw[i] & 15];
    }
    token[32] = '\0';
}

int rc_redis_orders(rc_redis_t *r, const char *code, int64_t scan_above, rc_orders_t *m,
                    int *loaded, int64_t *remaining, int64_t *users, int64_t *amounts, int *bad,
                    char *err, size_t errlen)
{
    rc_keys_t k;
    rc_orders_t t;
    char token[33], above[24];
    const char *argv[] = {"EVAL",
                          vc_lua_scan_begin,
                          "3",
                          k.name[RC_KEY_ORDERS],
                          k.name[RC_KEY_SCAN],
                          k.name[RC_KEY_TOUCHED],
                          token,
                          above,
                          SCAN_LIFETIME_MS};
    redisReply *reply;
    int begun, kept = 0, rc;

    if (scan_above < 0)
        return orders_at_once(r, code, m, loaded, remaining, users, amounts, bad, err, errlen);
    rc_keys_of(code, &k);
    snprintf(above, sizeof(above), "%lld", (long long)scan_above);
    scan_token(token);
    reply = command_on(r, vc_redis_tag_slot(code), 9, argv);
    if ((rc = check_reply(r, reply, "EVAL scan_begin", err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply_int(reply->element[0]) < 0 || reply_int(reply->element[1]) < 0) {
        freeReplyObject(reply);
        snprintf(err, errlen, "Redis: unexpected reply to scan_begin.lua of %s", code);
        return VC_ERR_PROTOCOL;
    }
    begun = reply->element[0]->integer == 1;
    freeReplyObject(reply);
    if (!begun)
        return orders_at_once(r, code, m, loaded, remaining, users, amounts, bad, err, errlen);

    rc_orders_init(&t);
    *bad = 0;
    rc = orders_in_pieces(r, code, &k, token, &t, loaded, remaining, users, amounts, &kept, err,
                          errlen);
    for (size_t i = 0; rc == 0 && kept && i < t.cap; i++) {
        rc_order_t *o = rc_orders_at(&t, i), *into;
        vc_order_value_t v;

        if (!o || !o->redis_state)
            continue;
        if (o->redis_state == '?') {
            (*bad)++;
            continue;
        }
        if (!(into = rc_orders_get(m, o->order_id))) {
            snprintf(err, errlen, "out of memory");
            rc = VC_ERR_NOMEM;
            break;
        }
        v = (vc_order_value_t){o->customer_id, o->discount, o->held_until_ms, o->redis_state};
        rc_order_merge_redis(into, &v);
    }
    rc_orders_free(&t);
    if (rc == 0)
        vc_metric_add(vc_counter("voucher_reconciler_orders_read_in_pieces_total",
                                 "Reads of a voucher's orders in pieces (HSCAN): kept, or read "
                                 "again at once (a read at once holds Redis up)",
                                 kept ? "result=\"kept\"" : "result=\"read_again\""),
                      1);
    if (rc != 0 || kept)
        return rc;
    vc_warn("%s: the orders changed under their read in pieces in a way it cannot follow (the "
            "read outlived its %s ms, or the hash lost orders without a write): read at once",
            code, SCAN_LIFETIME_MS);
    return orders_at_once(r, code, m, loaded, remaining, users, amounts, bad, err, errlen);
}

int rc_redis_due(rc_redis_t *r, const char *code, rc_key_t set, int64_t max_score, int limit,
                 void (*cb)(void *arg, const char *order_id), void *arg, char *err, size_t errlen)
{
    rc_keys_t k;
    char max[24], count[16];
    const char *argv[7] = {"ZRANGEBYSCORE", k.name[set], "-inf", max, "LIMIT", "0", count};
    redisReply *reply;
    int rc;

    rc_keys_of(code, &k);
    snprintf(max, sizeof(max), "%lld", (long long)max_score);
    snprintf(count, sizeof(count), "%d", limit);
    reply = command_on(r, vc_redis_tag_slot(code), 7, argv);
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

int rc_redis_claim_code(rc_redis_t *r, const char *order_id, char code[VC_CODE_MAX + 1],
                        char *err, size_t errlen)
{
    char key[VC_CLAIM_KEY_MAX];
    const char *argv[2] = {"GET", key};
    redisReply *reply;
    int rc;

    code[0] = '\0';
    vc_claim_key(order_id, key);
    reply = command_on(r, vc_redis_tag_slot(order_id), 2, argv);
    if ((rc = check_reply(r, reply, "GET claim", err, errlen)) != 0)
        return rc;
    if (reply->type == REDIS_REPLY_STRING && vc_claim_code(reply->str, reply->len, code) != 0)
        code[0] = '\0';
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
    /* A repair script takes the keys of one voucher: the first names their slot. */
    reply = command_on(r, nkeys ? vc_redis_key_slot(keys[0], strlen(keys[0])) : 0, argc, argv);
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

int rc_redis_fence(rc_redis_t *r, const char *set_run_id, char run_id[VC_RUN_ID_MAX],
                   int *verified, char *err, size_t errlen)
{
    return vc_redis_block_fence(r->c, set_run_id, run_id, verified, err, errlen);
}
