#include "rc_redis.h"
#include "rc_grow.h"
#include "rc_leader.h"
#include "vc_claim.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_hash.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_random.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"
#include "vc_time.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * One node (redis://), or a Redis Cluster (redis+cluster://host:port,...):
 * every command of the reconciler names one voucher, whose keys share a slot,
 * so each goes to the node serving that slot (vc_redis_block.h).
 */
/* How many scripts a connection remembers the SHA of (the reconciler sends about 40). */
#define RC_SCRIPTS_MAX 64

/* A script's SHA as Redis named it (SCRIPT LOAD), by the script's text (vc_lua_*, static). */
typedef struct {
    const char *script;
    char sha[41];
} rc_script_sha_t;

struct rc_redis {
    vc_redis_block_t *c;
    char why[256];           /* why command_on() got no reply */
    rc_script_sha_t sha[RC_SCRIPTS_MAX]; /* the scripts command_on() sends by EVALSHA */
    int nsha;
    int64_t generation;      /* the fencing token its scripts carry (rc_redis_lead()); 0: none */
    int64_t wait_replicas;   /* WAIT after each write for this many replicas; 0: none */
    int64_t wait_timeout_ms; /* for so long */
};

void rc_keys_of(const char *code, rc_keys_t *k)
{
    for (int i = 0; i < VC_VOUCHER_KEY_COUNT; i++)
        (void)vc_voucher_key(k->name[i], sizeof(k->name[i]), code, (vc_voucher_key_t)i);
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

void rc_redis_set_wait(rc_redis_t *r, int64_t replicas, int64_t timeout_ms)
{
    r->wait_replicas = replicas;
    r->wait_timeout_ms = timeout_ms;
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
static redisReply *command_raw(rc_redis_t *r, unsigned slot, int argc, const char **argv)
{
    return vc_redis_block_command(r->c, slot, argc, argv, NULL, r->why, sizeof(r->why));
}

/*
 * The SHA of script (a vc_lua_* text: its address names it), learnt by
 * SCRIPT LOAD on slot's node the first time; NULL when Redis did not say
 * (the caller sends the text). Redis names a script by the SHA1 of its text,
 * so the SHA learnt on one node holds on every node.
 */
static const char *script_sha(rc_redis_t *r, unsigned slot, const char *script)
{
    const char *argv[] = {"SCRIPT", "LOAD", script};
    redisReply *reply;
    rc_script_sha_t *s;

    for (int i = 0; i < r->nsha; i++)
        if (r->sha[i].script == script)
            return r->sha[i].sha;
    if (r->nsha == RC_SCRIPTS_MAX)
        return NULL;
    if (!(reply = command_raw(r, slot, 3, argv)))
        return NULL;
    if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
        freeReplyObject(reply);
        return NULL;
    }
    s = &r->sha[r->nsha++];
    s->script = script;
    memcpy(s->sha, reply->str, 40);
    s->sha[40] = '\0';
    freeReplyObject(reply);
    return s->sha;
}

/*
 * Sends argv on slot's node. A script (argv[0] "EVAL", argv[1] its text) goes
 * as EVALSHA: a repair script of the reconciler is 10-20 KB that Redis would
 * otherwise read and hash on every call, and a wave of releases sends two a
 * hold. A node that lacks it (restarted, flushed, another node of a cluster:
 * NOSCRIPT) gets the text once more, which loads it there.
 */
static redisReply *command_on(rc_redis_t *r, unsigned slot, int argc, const char **argv)
{
    const char *script = argv[1], *sha;
    redisReply *reply;

    if (argc < 3 || strcmp(argv[0], "EVAL") != 0 || !(sha = script_sha(r, slot, script)))
        return command_raw(r, slot, argc, argv);
    argv[0] = "EVALSHA";
    argv[1] = sha;
    reply = command_raw(r, slot, argc, argv);
    argv[0] = "EVAL";
    argv[1] = script;
    if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(reply);
        reply = command_raw(r, slot, argc, argv);
    }
    return reply;
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

void rc_redis_lead(rc_redis_t *r, int64_t generation)
{
    r->generation = generation;
}

/*
 * An error reply that is leader.lua's or leader_mark.lua's refusal: counted,
 * err set, and VC_ERR_STALE_LEADER or VC_ERR_LEADER_UNMARKED returned; 0 for
 * any other reply (left to the caller).
 */
static int leader_refused(const redisReply *reply, char *err, size_t errlen)
{
    rc_leader_refusal_t why;
    char labels[32];

    if (reply->type != REDIS_REPLY_ERROR || !rc_leader_refusal(reply->str, reply->len, &why))
        return 0;
    snprintf(labels, sizeof(labels), "why=\"%s\"",
             why.why == RC_LEADER_REFUSED_STALE ? "stale" : "unmarked");
    vc_metric_add(vc_counter("voucher_reconciler_fencing_refusals_total",
                             "Reconciler scripts Redis refused for their fencing token, nothing "
                             "written: stale (a newer reconciler marked the voucher or campaign: "
                             "this one stopped acting) or unmarked (its mark was lost since the "
                             "pass made it: the pass stopped)",
                             labels),
                  1);
    if (why.why == RC_LEADER_REFUSED_STALE)
        snprintf(err, errlen,
                 "Redis refused a repair: %s holds generation %lld, this reconciler's is %lld",
                 why.key, (long long)why.held, (long long)why.token);
    else
        snprintf(err, errlen,
                 "Redis refused a repair: %s lost this pass's mark (generation %lld; it holds "
                 "%lld): its keys were lost after the pass read them; the next pass reads again",
                 why.key, (long long)why.token, (long long)why.held);
    return rc_leader_error(&why);
}

/*
 * leader_mark.lua's command for leader_key into argv (8 entries; gen and
 * expire are its buffers): the number of arguments.
 */
static int mark_argv(const rc_redis_t *r, const char *leader_key, int64_t expire_at_ms,
                     const char **argv, char gen[24], char expire[24])
{
    snprintf(gen, 24, "%lld", (long long)r->generation);
    snprintf(expire, 24, "%lld", (long long)expire_at_ms);
    argv[0] = "EVAL";
    argv[1] = vc_lua_leader_mark;
    argv[2] = "1";
    argv[3] = leader_key;
    argv[4] = gen;
    argv[5] = expire;
    return 6;
}

/* Whether this connection marks now: it leads, and the keys have not expired for good. */
static int marks(const rc_redis_t *r, int64_t expire_at_ms)
{
    return r->generation > 0 && (expire_at_ms == 0 || expire_at_ms > vc_time_now_ms());
}

int rc_redis_mark(rc_redis_t *r, const char *leader_key, int64_t expire_at_ms, char *err,
                  size_t errlen)
{
    const char *argv[8];
    char gen[24], expire[24];
    redisReply *reply;
    int argc, rc;

    if (!marks(r, expire_at_ms))
        return 0;
    argc = mark_argv(r, leader_key, expire_at_ms, argv, gen, expire);
    reply = command_on(r, vc_redis_key_slot(leader_key, strlen(leader_key)), argc, argv);
    if (reply && (rc = leader_refused(reply, err, errlen)) != 0) {
        freeReplyObject(reply);
        return rc;
    }
    if ((rc = check_reply(r, reply, "EVAL leader_mark", err, errlen)) != 0)
        return rc;
    freeReplyObject(reply);
    return 0;
}

/* Parses a counter's value: 0, or VC_ERR_PROTOCOL with err set. */
/*
 * A GET of code's key key, a number: *present 1 and *value set, or *present 0
 * and *value 0 for nil. 0, or an error with err set (naming the key).
 */
static int parse_number(const redisReply *reply, const char *code, vc_voucher_key_t key,
                        int *present, int64_t *value, char *err, size_t errlen)
{
    char name[VC_CODE_MAX + 32] = "";

    *present = 0;
    *value = 0;
    if (reply->type == REDIS_REPLY_STRING) {
        char *end;
        *value = strtoll(reply->str, &end, 10);
        *present = 1;
        if (*end || reply->len == 0) {
            (void)vc_voucher_key(name, sizeof(name), code, key);
            snprintf(err, errlen, "Redis: %s is not a number", name);
            return VC_ERR_PROTOCOL;
        }
    } else if (reply->type != REDIS_REPLY_NIL) {
        (void)vc_voucher_key(name, sizeof(name), code, key);
        snprintf(err, errlen, "Redis: unexpected reply to GET %s", name);
        return VC_ERR_PROTOCOL;
    }
    return 0;
}

static int parse_remaining(const redisReply *reply, const char *code, int *loaded,
                           int64_t *remaining, char *err, size_t errlen)
{
    return parse_number(reply, code, VC_VOUCHER_KEY_REMAINING, loaded, remaining, err, errlen);
}

int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen)
{
    rc_keys_t k;
    const char *argv[2] = {"GET", k.name[VC_VOUCHER_KEY_REMAINING]};
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

int rc_redis_remaining_marked(rc_redis_t *r, const char *code, int64_t expire_at_ms, int *loaded,
                              int64_t *remaining, char *err, size_t errlen)
{
    char gen[24], expire[24];
    const char *argv[8];
    redisContext *ctx;
    rc_keys_t k;
    int argc, rc = 0;

    if (!marks(r, expire_at_ms))
        return rc_redis_remaining(r, code, loaded, remaining, err, errlen);
    rc_keys_of(code, &k);
    if (!(ctx = conn_for(r, code, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    /* Pipelined: the mark, then the counter; one round trip, as the GET alone was. */
    argc = mark_argv(r, k.name[VC_VOUCHER_KEY_LEADER], expire_at_ms, argv, gen, expire);
    redisAppendCommandArgv(ctx, argc, argv, NULL);
    redisAppendCommand(ctx, "GET %s", k.name[VC_VOUCHER_KEY_REMAINING]);
    for (int i = 0; i < 2; i++) {
        redisReply *reply;
        void *got = NULL;

        if (redisGetReply(ctx, &got) != REDIS_OK || !got) {
            /* A broken connection: the pass drops it, the unread reply with it. */
            snprintf(err, errlen, "Redis leader_mark/GET: %s", ctx->errstr);
            return VC_ERR_UNAVAILABLE;
        }
        reply = got;
        /* After an error of the mark, which is the answer, the counter's reply only drains. */
        if (rc == 0 && i == 0 && (rc = leader_refused(reply, err, errlen)) == 0 &&
            reply->type == REDIS_REPLY_ERROR)
            rc = pipeline_error(reply, "leader_mark", code, err, errlen);
        else if (rc == 0 && i == 1 && reply->type == REDIS_REPLY_ERROR)
            rc = pipeline_error(reply, "GET remaining", code, err, errlen);
        else if (rc == 0 && i == 1)
            rc = parse_remaining(reply, code, loaded, remaining, err, errlen);
        freeReplyObject(reply);
    }
    return rc;
}

int rc_redis_limit(rc_redis_t *r, const char *code, int *present, int64_t *limit, char *err,
                   size_t errlen)
{
    char key[VC_CODE_MAX + 32];
    const char *argv[2] = {"GET", key};
    redisReply *reply;
    int rc;

    (void)vc_voucher_key(key, sizeof(key), code, VC_VOUCHER_KEY_LIMIT);
    reply = command_on(r, vc_redis_tag_slot(code), 2, argv);
    if ((rc = check_reply(r, reply, "GET limit", err, errlen)) != 0)
        return rc;
    rc = parse_number(reply, code, VC_VOUCHER_KEY_LIMIT, present, limit, err, errlen);
    freeReplyObject(reply);
    return rc;
}

int rc_redis_activity(rc_redis_t *r, const char *code, int64_t now_ms, int64_t *due_holds,
                      int64_t *releasing, char *err, size_t errlen)
{
    int64_t *out[2] = {due_holds, releasing};
    redisContext *ctx = conn_for(r, code, err, errlen);
    rc_keys_t k;
    int rc = 0;

    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    rc_keys_of(code, &k);
    /* Pipelined: both commands go out before either reply is read. */
    redisAppendCommand(ctx, "ZCOUNT %s -inf %lld", k.name[VC_VOUCHER_KEY_HOLDS], (long long)now_ms);
    redisAppendCommand(ctx, "ZCARD %s", k.name[VC_VOUCHER_KEY_RELEASING]);
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

/*
 * Reads the replies of a pipeline of MULTI, n commands and EXEC (what names
 * them in errors): *exec gets EXEC's reply, owned by the caller; the others
 * only say QUEUED. 0, or an error with err set and *exec NULL.
 */
static int exec_reply(redisContext *ctx, int n, const char *what, const char *code,
                      redisReply **exec, char *err, size_t errlen)
{
    int rc = 0;

    *exec = NULL;
    for (int i = 0; i < n + 2; i++) {
        void *got = NULL;
        if (redisGetReply(ctx, &got) != REDIS_OK || !got) {
            /* A broken connection: the pass drops it, the unread replies with it. */
            snprintf(err, errlen, "Redis %s: %s", what, ctx->errstr);
            return VC_ERR_UNAVAILABLE;
        }
        if (i == n + 1 && rc == 0) {
            *exec = got;
            break;
        }
        if (((redisReply *)got)->type == REDIS_REPLY_ERROR && rc == 0)
            rc = pipeline_error(got, "MULTI", code, err, errlen);
        freeReplyObject(got);
    }
    return rc;
}

/* The orders, the counter and the sizes in one MULTI/EXEC (rc_redis_orders()). */
static int orders_at_once(rc_redis_t *r, const char *code, rc_orders_t *m, rc_redis_counts_t *c,
                          int *bad, char *err, size_t errlen)
{
    redisReply *reply = NULL, *orders;
    redisContext *ctx = conn_for(r, code, err, errlen);
    rc_keys_t k;
    int rc = 0, present;

    *bad = 0;
    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    rc_keys_of(code, &k);
    /*
     * Pipelined: MULTI, GET, HGETALL, HLEN, EXISTS, GET, GET, EXEC; only
     * EXEC's reply carries the values.
     */
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "GET %s", k.name[VC_VOUCHER_KEY_REMAINING]);
    redisAppendCommand(ctx, "HGETALL %s", k.name[VC_VOUCHER_KEY_ORDERS]);
    redisAppendCommand(ctx, "HLEN %s", k.name[VC_VOUCHER_KEY_USERS]);
    redisAppendCommand(ctx, "EXISTS %s", k.name[VC_VOUCHER_KEY_AMOUNTS]);
    redisAppendCommand(ctx, "GET %s", k.name[VC_VOUCHER_KEY_LIMIT]);
    redisAppendCommand(ctx, "GET %s", k.name[VC_VOUCHER_KEY_OUTSIDE]);
    redisAppendCommand(ctx, "EXEC");
    if ((rc = exec_reply(ctx, 6, "MULTI GET HGETALL HLEN EXISTS GET GET EXEC", code, &reply, err,
                         errlen)) != 0)
        goto out;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 6 ||
        reply->element[1]->type != REDIS_REPLY_ARRAY ||
        reply->element[2]->type != REDIS_REPLY_INTEGER ||
        reply->element[3]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen,
                 "Redis: unexpected reply to EXEC (GET, HGETALL, HLEN, EXISTS, GET, GET) of %s",
                 code);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    if ((rc = parse_remaining(reply->element[0], code, &c->loaded, &c->remaining, err, errlen)) !=
            0 ||
        (rc = parse_number(reply->element[4], code, VC_VOUCHER_KEY_LIMIT, &present, &c->limit, err,
                           errlen)) != 0)
        goto out;
    if (!present)
        c->limit = -1;
    if ((rc = parse_number(reply->element[5], code, VC_VOUCHER_KEY_OUTSIDE, &present, &c->outside,
                           err, errlen)) != 0)
        goto out;
    c->users = reply->element[2]->integer;
    c->amounts = reply->element[3]->integer;
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

/* Parses a ZREVRANGE WITHSCORES entry's score, a heldUntil in ms: 0, or -1. */
static int parse_score(const redisReply *score, int64_t *ms)
{
    char buf[32], *end;

    if (score->type != REDIS_REPLY_STRING || score->len == 0 || score->len >= sizeof(buf))
        return -1;
    memcpy(buf, score->str, score->len);
    buf[score->len] = '\0';
    *ms = strtoll(buf, &end, 10);
    return *end ? -1 : 0;
}

/*
 * The due holds of a targeted read's EXEC reply (rc_redis_targeted_due()):
 * each added to m as held until its score unless m has it, marked due, and
 * listed in due->due, oldest first. Returns 0 or VC_ERR_NOMEM.
 */
static int take_due(const redisReply *holds, rc_orders_t *m, rc_redis_due_read_t *due, int *bad)
{
    rc_order_t *o;

    for (size_t j = 0; j + 1 < holds->elements && due->ndue < due->due_max; j += 2) {
        const redisReply *id = holds->element[j];
        char *order_id = due->due[due->ndue];
        int64_t held_until;

        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > VC_ORDER_ID_MAX ||
            parse_score(holds->element[j + 1], &held_until) != 0) {
            (*bad)++;
            continue;
        }
        memcpy(order_id, id->str, id->len);
        order_id[id->len] = '\0';
        if (!(o = rc_orders_find(m, order_id))) {
            /* The holds set lists the orders Redis holds H, and only those. */
            if (!(o = rc_orders_get(m, order_id)))
                return VC_ERR_NOMEM;
            o->redis_state = VC_STATE_HELD;
            o->redis_held_until_ms = o->held_until_ms = held_until;
        }
        o->due = 1;
        due->ndue++;
    }
    return 0;
}

int rc_redis_targeted(rc_redis_t *r, const char *code, rc_orders_t *m, size_t newest_max,
                      char (**newest)[VC_ORDER_ID_MAX + 1], size_t *nnewest, int *loaded,
                      int64_t *remaining, int *bad, char *err, size_t errlen)
{
    return rc_redis_targeted_due(r, code, m, newest_max, newest, nnewest, NULL, loaded, remaining,
                                 bad, err, errlen);
}

int rc_redis_targeted_due(rc_redis_t *r, const char *code, rc_orders_t *m, size_t newest_max,
                          char (**newest)[VC_ORDER_ID_MAX + 1], size_t *nnewest,
                          rc_redis_due_read_t *due, int *loaded, int64_t *remaining, int *bad,
                          char *err, size_t errlen)
{
    redisReply *reply = NULL, *values, *holds;
    redisContext *ctx = conn_for(r, code, err, errlen);
    size_t n = 0, argc = 2, j, queued = 3;
    const char **argv = NULL;
    char stop[24];
    rc_order_t *o;
    rc_keys_t k;
    int rc = 0, with_due = due && due->due_max > 0;

    *newest = NULL;
    *nnewest = 0;
    *bad = 0;
    if (due) {
        due->due = NULL;
        due->ndue = 0;
    }
    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    rc_keys_of(code, &k);
    if (!(argv = malloc((m->len + 2) * sizeof(*argv))) ||
        (newest_max && !(*newest = calloc(newest_max, sizeof(**newest)))) ||
        (with_due && !(due->due = calloc(due->due_max, sizeof(*due->due))))) {
        snprintf(err, errlen, "out of memory");
        rc = VC_ERR_NOMEM;
        goto out;
    }
    argv[0] = "HMGET";
    argv[1] = k.name[VC_VOUCHER_KEY_ORDERS];
    for (size_t i = 0; i < m->cap; i++)
        if ((o = rc_orders_at(m, i)))
            argv[argc++] = o->order_id;
    snprintf(stop, sizeof(stop), "%zu", newest_max ? newest_max - 1 : 0);
    /* Pipelined: MULTI, GET, HMGET, ZREVRANGE, EXEC; only EXEC's reply carries the values. */
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "GET %s", k.name[VC_VOUCHER_KEY_REMAINING]);
    if (argc > 2)
        redisAppendCommandArgv(ctx, (int)argc, argv, NULL);
    else
        redisAppendCommand(ctx, "EXISTS %s", k.name[VC_VOUCHER_KEY_ORDERS]);
    redisAppendCommand(ctx, "ZREVRANGE %s 0 %s WITHSCORES", k.name[VC_VOUCHER_KEY_HOLDS], stop);
    if (with_due) {
        /* The oldest due first: the uses come back in order of expiry (rc_wave.h). */
        redisAppendCommand(ctx, "ZRANGEBYSCORE %s -inf %lld WITHSCORES LIMIT 0 %llu",
                           k.name[VC_VOUCHER_KEY_HOLDS], (long long)due->due_before,
                           (unsigned long long)due->due_max);
        queued++;
    }
    redisAppendCommand(ctx, "EXEC");
    if ((rc = exec_reply(ctx, (int)queued, "MULTI GET HMGET ZREVRANGE ZRANGEBYSCORE EXEC", code,
                         &reply, err, errlen)) != 0)
        goto out;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != queued ||
        (argc > 2 && (reply->element[1]->type != REDIS_REPLY_ARRAY ||
                      reply->element[1]->elements != argc - 2)) ||
        reply->element[2]->type != REDIS_REPLY_ARRAY ||
        (with_due && reply->element[3]->type != REDIS_REPLY_ARRAY)) {
        snprintf(err, errlen, "Redis: unexpected reply to EXEC (GET, HMGET, ZREVRANGE) of %s",
                 code);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    if ((rc = parse_remaining(reply->element[0], code, loaded, remaining, err, errlen)) != 0)
        goto out;
    values = reply->element[1];
    for (j = 2; argc > 2 && j < argc; j++) {
        redisReply *v = values->element[j - 2];
        vc_order_value_t parsed;

        if (v->type == REDIS_REPLY_NIL)
            continue; /* not in Redis: redis_state stays 0 */
        if (v->type != REDIS_REPLY_STRING || vc_order_value_parse(v->str, v->len, &parsed) != 0) {
            (*bad)++;
            continue;
        }
        rc_order_merge_redis(rc_orders_find(m, argv[j]), &parsed);
    }
    holds = reply->element[2];
    for (j = 0; j + 1 < holds->elements && n < newest_max; j += 2) {
        redisReply *id = holds->element[j];
        int64_t held_until;

        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > VC_ORDER_ID_MAX ||
            parse_score(holds->element[j + 1], &held_until) != 0) {
            (*bad)++;
            continue;
        }
        memcpy((*newest)[n], id->str, id->len);
        (*newest)[n][id->len] = '\0';
        if (!rc_orders_find(m, (*newest)[n])) {
            /* The holds set lists the orders Redis holds H, and only those. */
            if (!(o = rc_orders_get(m, (*newest)[n]))) {
                snprintf(err, errlen, "out of memory");
                rc = VC_ERR_NOMEM;
                goto out;
            }
            o->redis_state = VC_STATE_HELD;
            o->redis_held_until_ms = o->held_until_ms = held_until;
        }
        n++;
    }
    *nnewest = n;
    if (with_due && take_due(reply->element[3], m, due, bad) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = VC_ERR_NOMEM;
    }
out:
    if (reply)
        freeReplyObject(reply);
    free(argv);
    if (rc != 0) {
        free(*newest);
        *newest = NULL;
        if (due) {
            free(due->due);
            due->due = NULL;
            due->ndue = 0;
        }
    }
    return rc;
}

/* Orders per HSCAN call of a read in pieces: 0.4 to 1.2 ms of Redis each (measured). */
#define SCAN_COUNT "1000"
/* How long a read in pieces may take before its keys expire and it is not kept. */
#define SCAN_LIFETIME_MS "60000"

/*
 * A field the model cannot hold (an orderId empty or over VC_ORDER_ID_MAX
 * bytes, a code over VC_CODE_MAX: written by hand only, the gateway refuses
 * them) under a name of its own: '#' and a hash of it, which no orderId nor
 * code can be ('#' is refused in both), so that a field HSCAN returns twice
 * counts once in the size check.
 */
static void odd_name(const char *field, size_t len, char name[18])
{
    static const unsigned char key[16] = {0}; /* no secret: the names stay in this process */

    snprintf(name, 18, "#%016llx", (unsigned long long)vc_siphash24(key, field, len));
}

/*
 * One order of a read in pieces into t, its Redis fields replaced (value
 * NULL: Redis has no such order now). An unreadable value is kept as state
 * '?', counted bad when t is merged, as a read at once counts it; so is an
 * orderId the model cannot hold, under its odd_name().
 */
static int piece_put(rc_orders_t *t, const char *id, size_t idlen, const char *value,
                     size_t vlen)
{
    char key[VC_ORDER_ID_MAX + 1];
    int odd = idlen == 0 || idlen > VC_ORDER_ID_MAX;
    vc_order_value_t v;
    rc_order_t *o;

    if (odd) {
        odd_name(id, idlen, key);
    } else {
        memcpy(key, id, idlen);
        key[idlen] = '\0';
    }
    if (!(o = rc_orders_get(t, key)))
        return VC_ERR_NOMEM;
    memset(&v, 0, sizeof(v));
    if (value && (odd || vc_order_value_parse(value, vlen, &v) != 0))
        v.state = '?';
    o->customer_id = v.customer_id;
    o->discount = v.discount;
    o->held_until_ms = v.held_until_ms;
    o->redis_state = v.state;
    return 0;
}

/*
 * The orders a finish script read again ({orderId, value or nil, ...}) into
 * t, replacing what the pieces held (nil: the order is gone). 0 or NOMEM.
 */
static int put_written(rc_orders_t *t, const redisReply *written)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i + 1 < written->elements; i += 2) {
        redisReply *f = written->element[i], *v = written->element[i + 1];
        if (f->type == REDIS_REPLY_STRING)
            rc = piece_put(t, f->str, f->len, v->type == REDIS_REPLY_STRING ? v->str : NULL,
                           v->type == REDIS_REPLY_STRING ? v->len : 0);
    }
    return rc;
}

/* How many orders t holds in Redis's state (for the size check against HLEN). */
static long long held_orders(const rc_orders_t *t)
{
    long long held = 0;

    for (size_t i = 0; i < t->cap; i++) {
        rc_order_t *o = rc_orders_at(t, i);
        held += o && o->redis_state;
    }
    return held;
}

/* A piece of an orders hash into the rc_orders_t arg (scan_hash()'s put). */
static int order_piece(void *arg, const char *f, size_t flen, const char *v, size_t vlen)
{
    return piece_put(arg, f, flen, v, vlen);
}

/*
 * Reads hash key (of code, for errors) with HSCAN to the end, handing each
 * field and value to put (which returns 0, or an error that ends the read).
 * A field may come twice (HSCAN's guarantee is at least once for a field
 * present throughout). 0, or an error with err set.
 */
static int scan_hash(rc_redis_t *r, unsigned slot, const char *key, const char *code,
                     int (*put)(void *arg, const char *f, size_t flen, const char *v,
                                size_t vlen),
                     void *arg, char *err, size_t errlen)
{
    char cursor[32] = "0";
    int rc;

    do {
        const char *argv[] = {"HSCAN", key, cursor, "COUNT", SCAN_COUNT};
        redisReply *reply = command_on(r, slot, 5, argv), *items;

        if ((rc = check_reply(r, reply, "HSCAN", err, errlen)) != 0)
            return rc;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_STRING ||
            reply->element[0]->len >= sizeof(cursor) ||
            reply->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(reply);
            snprintf(err, errlen, "Redis: unexpected reply to HSCAN of %s", key);
            return VC_ERR_PROTOCOL;
        }
        memcpy(cursor, reply->element[0]->str, reply->element[0]->len + 1);
        items = reply->element[1];
        for (size_t i = 0; rc == 0 && i + 1 < items->elements; i += 2) {
            redisReply *f = items->element[i], *v = items->element[i + 1];
            if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
                rc = put(arg, f->str, f->len, v->str, v->len);
        }
        freeReplyObject(reply);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory reading %s of %s", key, code);
            return rc;
        }
    } while (strcmp(cursor, "0") != 0);
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
static int orders_in_pieces(rc_redis_t *r, const char *code, const rc_keys_t *k, const char *token,
                            rc_orders_t *t, rc_redis_counts_t *c, int *kept, char *err,
                            size_t errlen)
{
    unsigned slot = vc_redis_tag_slot(code);
    redisReply *reply, *done;
    int rc;

    *kept = 0;
    if ((rc = scan_hash(r, slot, k->name[VC_VOUCHER_KEY_ORDERS], code, order_piece, t, err,
                        errlen)) != 0)
        return rc;

    /* The explorer (tests/model) lands gateway steps here: writes the finish must see. */
    VC_PAUSE("reconciler-orders-scanned");
    {
        /* EVAL, the script, how many keys, its keys in the definition's order, the token. */
        char numkeys[8];
        const char *argv[3 + VC_SCAN_FINISH_NKEYS + 1] = {"EVAL", vc_lua_scan_finish, numkeys};

        snprintf(numkeys, sizeof(numkeys), "%d", VC_SCAN_FINISH_NKEYS);
        rc_script_keys(k, vc_scan_finish_keys, VC_SCAN_FINISH_NKEYS, argv + 3);
        argv[3 + VC_SCAN_FINISH_NKEYS] = token;
        reply = command_on(r, slot, 3 + VC_SCAN_FINISH_NKEYS + 1, argv);
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
    if ((rc = parse_remaining(reply->element[1], code, &c->loaded, &c->remaining, err, errlen)) !=
        0) {
        freeReplyObject(reply);
        return rc;
    }
    c->users = reply->element[3]->integer;
    c->amounts = reply->element[4]->integer;
    /*
     * Not read: a read in pieces is kept only when the hash still holds what
     * the pieces did (*kept below), so the orders hash exists and is not lost
     * whatever the counter says against its limit key.
     */
    c->limit = -1;
    c->outside = 0;
    rc = put_written(t, reply->element[5]);
    done = reply;
    if (rc != 0) {
        freeReplyObject(done);
        snprintf(err, errlen, "out of memory reading the orders of %s", code);
        return rc;
    }
    *kept = held_orders(t) == done->element[2]->integer;
    freeReplyObject(done);
    return 0;
}

/* rc_redis.h */
void rc_redis_token(char token[33])
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

/*
 * scan_begin.lua on keys (the hash to read, its scan key, then the sets that
 * note writes): *begun 1 when the hash has more than above fields and a read
 * in pieces began under a fresh token, else 0 (read it at once). 0, or an
 * error with err set.
 */
static int pieces_begin(rc_redis_t *r, unsigned slot, const char *const *keys, int nkeys,
                        int64_t above, char token[33], int *begun, char *err, size_t errlen)
{
    const char *argv[3 + 5 + 3];
    char numkeys[8], limit[24];
    redisReply *reply;
    int argc = 0, rc;

    if (nkeys > 5)
        return VC_ERR_INVALID;
    snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
    snprintf(limit, sizeof(limit), "%lld", (long long)above);
    rc_redis_token(token);
    argv[argc++] = "EVAL";
    argv[argc++] = vc_lua_scan_begin;
    argv[argc++] = numkeys;
    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    argv[argc++] = token;
    argv[argc++] = limit;
    argv[argc++] = SCAN_LIFETIME_MS;
    reply = command_on(r, slot, argc, argv);
    if ((rc = check_reply(r, reply, "EVAL scan_begin", err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply_int(reply->element[0]) < 0 || reply_int(reply->element[1]) < 0) {
        freeReplyObject(reply);
        snprintf(err, errlen, "Redis: unexpected reply to scan_begin.lua of %s", keys[0]);
        return VC_ERR_PROTOCOL;
    }
    *begun = reply->element[0]->integer == 1;
    freeReplyObject(reply);
    return 0;
}

/* Counts a read in pieces: kept, or read again at once. */
static void pieces_count(const char *of, int kept)
{
    char labels[64];

    snprintf(labels, sizeof(labels), "of=\"%s\",result=\"%s\"", of, kept ? "kept" : "read_again");
    vc_metric_add(vc_counter("voucher_reconciler_orders_read_in_pieces_total",
                             "Reads of a voucher's or a campaign's orders in pieces (HSCAN): "
                             "kept, or read again at once (a read at once holds Redis up)",
                             labels),
                  1);
}

int rc_redis_orders(rc_redis_t *r, const char *code, int64_t scan_above, rc_orders_t *m,
                    rc_redis_counts_t *c, int *bad, char *err, size_t errlen)
{
    rc_keys_t k;
    rc_orders_t t;
    char token[33];
    int begun, kept = 0, rc;

    if (scan_above < 0)
        return orders_at_once(r, code, m, c, bad, err, errlen);
    rc_keys_of(code, &k);
    {
        const char *keys[VC_SCAN_BEGIN_NKEYS];

        rc_script_keys(&k, vc_scan_begin_keys, VC_SCAN_BEGIN_NKEYS, keys);
        if ((rc = pieces_begin(r, vc_redis_tag_slot(code), keys, VC_SCAN_BEGIN_NKEYS, scan_above,
                               token, &begun, err, errlen)) != 0)
            return rc;
    }
    if (!begun)
        return orders_at_once(r, code, m, c, bad, err, errlen);

    rc_orders_init(&t);
    *bad = 0;
    rc = orders_in_pieces(r, code, &k, token, &t, c, &kept, err, errlen);
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
        pieces_count("voucher", kept);
    if (rc != 0 || kept)
        return rc;
    vc_warn("%s: the orders changed under their read in pieces in a way it cannot follow (the "
            "read outlived its %s ms, or the hash lost orders without a write): read at once",
            code, SCAN_LIFETIME_MS);
    return orders_at_once(r, code, m, c, bad, err, errlen);
}

/* A campaign's keys, by the model's names (vc_model.h: VC_CAMPAIGN_KEY_ORDERS...). */
typedef struct {
    char tag[24]; /* "c<ID>", the keys' hash tag */
    char name[VC_CAMPAIGN_KEY_COUNT][48];
} campaign_keys_t;

static void campaign_keys_of(int64_t id, campaign_keys_t *k)
{
    snprintf(k->tag, sizeof(k->tag), "c%lld", (long long)id);
    for (int i = 0; i < VC_CAMPAIGN_KEY_COUNT; i++)
        (void)vc_campaign_key(k->name[i], sizeof(k->name[i]), id, (vc_campaign_key_t)i);
}

/* A field of taken (code, orderId), as the pieces hold it until the finish. */
typedef struct {
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
} taken_piece_t;

typedef struct {
    taken_piece_t *items;
    size_t len, cap;
} taken_pieces_t;

/*
 * A field of taken into the taken_pieces_t arg (scan_hash()'s put). A field
 * the model cannot hold is kept under its odd_name(), which sink_taken()
 * skips (as a read at once skips it) and the size check counts.
 */
static int taken_piece(void *arg, const char *f, size_t flen, const char *v, size_t vlen)
{
    taken_pieces_t *p = arg;
    taken_piece_t *t;

    if (rc_grow((void **)&p->items, &p->cap, p->len, sizeof(*p->items), 1024) != 0)
        return VC_ERR_NOMEM;
    t = &p->items[p->len++];
    if (flen == 0 || flen > VC_CODE_MAX || vlen > VC_ORDER_ID_MAX) {
        odd_name(f, flen, t->code);
        t->order_id[0] = '\0';
        return 0;
    }
    memcpy(t->code, f, flen);
    t->code[flen] = '\0';
    memcpy(t->order_id, v, vlen);
    t->order_id[vlen] = '\0';
    return 0;
}

static int taken_piece_cmp(const void *a, const void *b)
{
    return strcmp(((const taken_piece_t *)a)->code, ((const taken_piece_t *)b)->code);
}

/* Hands sink one order of Redis (unreadable values are skipped, as a read at once does). */
static int sink_order(const rc_campaign_sink_t *sink, const char *id, size_t idlen,
                      const char *value, size_t vlen)
{
    char key[VC_ORDER_ID_MAX + 1];
    vc_order_value_t v;

    if (idlen == 0 || idlen > VC_ORDER_ID_MAX || vc_order_value_parse(value, vlen, &v) != 0)
        return 0;
    memcpy(key, id, idlen);
    key[idlen] = '\0';
    return sink->order_cb(sink->arg, key, &v);
}

/* Hands sink one field of taken, the "!" field (it only marks the hash as kept) aside. */
static int sink_taken(const rc_campaign_sink_t *sink, const char *code, size_t clen,
                      const char *order_id, size_t olen)
{
    char c[VC_CODE_MAX + 1], o[VC_ORDER_ID_MAX + 1];

    if ((clen == 1 && code[0] == '!') || clen == 0 || clen > VC_CODE_MAX ||
        olen > VC_ORDER_ID_MAX || code[0] == '#')
        return 0;
    memcpy(c, code, clen);
    c[clen] = '\0';
    memcpy(o, order_id, olen);
    o[olen] = '\0';
    return sink->taken_cb(sink->arg, c, o);
}

/* Hands sink the due releases of an array reply. */
static int sink_releasing(const rc_campaign_sink_t *sink, const redisReply *due)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < due->elements; i++) {
        char o[VC_ORDER_ID_MAX + 1];
        const redisReply *e = due->element[i];
        if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > VC_ORDER_ID_MAX)
            continue;
        memcpy(o, e->str, e->len);
        o[e->len] = '\0';
        rc = sink->releasing_cb(sink->arg, o);
    }
    return rc;
}

/* A campaign read in one MULTI/EXEC (rc_redis_campaign()). */
static int campaign_at_once(rc_redis_t *r, const campaign_keys_t *k, const char *max,
                            const char *limit, const rc_campaign_sink_t *sink, int *keys,
                            char *err, size_t errlen)
{
    redisReply *reply = NULL, **e;
    redisContext *ctx = conn_for(r, k->tag, err, errlen);
    int rc;

    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "HGETALL %s", k->name[VC_CAMPAIGN_KEY_ORDERS]);
    redisAppendCommand(ctx, "HGETALL %s", k->name[VC_CAMPAIGN_KEY_TAKEN]);
    redisAppendCommand(ctx, "ZRANGEBYSCORE %s -inf %s LIMIT 0 %s",
                       k->name[VC_CAMPAIGN_KEY_RELEASING], max, limit);
    redisAppendCommand(ctx, "EXISTS %s", k->name[VC_CAMPAIGN_KEY_TAKEN]);
    redisAppendCommand(ctx, "EXISTS %s", k->name[VC_CAMPAIGN_KEY_USERS]);
    redisAppendCommand(ctx, "EXISTS %s", k->name[VC_CAMPAIGN_KEY_ORDERS]);
    redisAppendCommand(ctx, "EXEC");
    if ((rc = exec_reply(ctx, 6, "MULTI HGETALL HGETALL ZRANGEBYSCORE EXISTS EXEC", k->tag, &reply,
                         err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 6 ||
        reply->element[0]->type != REDIS_REPLY_ARRAY ||
        reply->element[1]->type != REDIS_REPLY_ARRAY ||
        reply->element[2]->type != REDIS_REPLY_ARRAY || reply_int(reply->element[3]) < 0 ||
        reply_int(reply->element[4]) < 0 || reply_int(reply->element[5]) < 0) {
        snprintf(err, errlen, "Redis: unexpected reply to EXEC (HGETALL, ...) of campaign %s",
                 k->tag);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    e = reply->element;
    *keys = (int)(e[3]->integer + 2 * e[4]->integer + 4 * e[5]->integer);
    for (size_t i = 0; rc == 0 && i + 1 < e[0]->elements; i += 2) {
        redisReply *f = e[0]->element[i], *v = e[0]->element[i + 1];
        if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
            rc = sink_order(sink, f->str, f->len, v->str, v->len);
    }
    for (size_t i = 0; rc == 0 && i + 1 < e[1]->elements; i += 2) {
        redisReply *f = e[1]->element[i], *v = e[1]->element[i + 1];
        if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
            rc = sink_taken(sink, f->str, f->len, v->str, v->len);
    }
    if (rc == 0)
        rc = sink_releasing(sink, e[2]);
out:
    freeReplyObject(reply);
    return rc;
}

/*
 * A campaign read in pieces (as orders_in_pieces() a voucher's orders): HSCAN
 * of orders and of taken, then campaign_scan_finish.lua reads again what any
 * script wrote meanwhile, with the sizes, the keys and the due releases, at
 * one moment. *kept is 0 when the read cannot be trusted (token gone, or a
 * hash lost fields without a write): the caller reads at once, and nothing
 * was handed to sink. Otherwise sink gets the campaign as it was at the finish.
 */
static int campaign_in_pieces(rc_redis_t *r, const campaign_keys_t *k, const char *token,
                              const char *max, const char *limit,
                              const rc_campaign_sink_t *sink, int *keys, int *kept, char *err,
                              size_t errlen)
{
    unsigned slot = vc_redis_tag_slot(k->tag);
    rc_orders_t t, codes_again;
    taken_pieces_t p = {0};
    redisReply *reply = NULL, **e = NULL;
    size_t codes_held = 0;
    int rc;

    *kept = 0;
    rc_orders_init(&t);
    rc_orders_init(&codes_again);
    if ((rc = scan_hash(r, slot, k->name[VC_CAMPAIGN_KEY_ORDERS], k->tag, order_piece, &t, err,
                        errlen)) != 0 ||
        (rc = scan_hash(r, slot, k->name[VC_CAMPAIGN_KEY_TAKEN], k->tag, taken_piece, &p, err,
                        errlen)) != 0)
        goto out;
    /* The explorer (tests/model) lands gateway steps here: writes the finish must see. */
    VC_PAUSE("reconciler-orders-scanned");
    {
        /* EVAL, the script, how many keys, its keys in the definition's order, 3 arguments. */
        enum { NKEYS = VC_CAMPAIGN_SCAN_FINISH_NKEYS };
        char numkeys[8];
        const char *argv[3 + NKEYS + 3] = {"EVAL", vc_lua_campaign_scan_finish, numkeys};

        snprintf(numkeys, sizeof(numkeys), "%d", NKEYS);
        vc_script_keys(vc_campaign_scan_finish_keys, NKEYS, k->name[0], sizeof(k->name[0]),
                       argv + 3);
        argv[3 + NKEYS] = token;
        argv[3 + NKEYS + 1] = max;
        argv[3 + NKEYS + 2] = limit;
        reply = command_on(r, slot, 3 + NKEYS + 3, argv);
    }
    if ((rc = check_reply(r, reply, "EVAL campaign_scan_finish", err, errlen)) != 0) {
        reply = NULL;
        goto out;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
        rc = VC_ERR_PROTOCOL;
    } else if (reply->element[0]->integer == 0) {
        goto out; /* the token is gone: not kept */
    } else if (reply->elements != 7 || reply_int(reply->element[1]) < 0 ||
               reply_int(reply->element[2]) < 0 || reply_int(reply->element[3]) < 0 ||
               reply->element[4]->type != REDIS_REPLY_ARRAY ||
               reply->element[5]->type != REDIS_REPLY_ARRAY ||
               reply->element[6]->type != REDIS_REPLY_ARRAY) {
        rc = VC_ERR_PROTOCOL;
    }
    if (rc != 0) {
        snprintf(err, errlen, "Redis: unexpected reply to campaign_scan_finish.lua of %s", k->tag);
        goto out;
    }
    e = reply->element;
    /* The orders written meanwhile, as they are now (nil: gone). */
    rc = put_written(&t, e[4]);
    /* The codes written meanwhile: their pieces are stale, the finish's values stand. */
    for (size_t i = 0; rc == 0 && i + 1 < e[5]->elements; i += 2) {
        redisReply *f = e[5]->element[i], *v = e[5]->element[i + 1];
        char c[VC_CODE_MAX + 1];
        if (f->type != REDIS_REPLY_STRING)
            continue;
        if (f->len == 0 || f->len > VC_CODE_MAX) {
            odd_name(f->str, f->len, c);
        } else {
            memcpy(c, f->str, f->len);
            c[f->len] = '\0';
        }
        if (!rc_orders_get(&codes_again, c))
            rc = VC_ERR_NOMEM;
        codes_held += v->type == REDIS_REPLY_STRING;
    }
    if (rc != 0) {
        snprintf(err, errlen, "out of memory reading campaign %s", k->tag);
        goto out;
    }
    /* HSCAN may return a field twice: sorted, each code counts once. */
    qsort(p.items, p.len, sizeof(*p.items), taken_piece_cmp);
    for (size_t i = 0; i < p.len; i++)
        codes_held += (i == 0 || strcmp(p.items[i].code, p.items[i - 1].code) != 0) &&
                      !rc_orders_find(&codes_again, p.items[i].code);
    if (held_orders(&t) != e[1]->integer || (long long)codes_held != e[2]->integer)
        goto out; /* fields gone without a write (expired, deleted): not kept */
    *kept = 1;
    *keys = (int)e[3]->integer;
    for (size_t i = 0; rc == 0 && i < t.cap; i++) {
        rc_order_t *o = rc_orders_at(&t, i);
        vc_order_value_t v;
        if (!o || !o->redis_state || o->redis_state == '?')
            continue;
        v = (vc_order_value_t){o->customer_id, o->discount, o->held_until_ms, o->redis_state};
        rc = sink->order_cb(sink->arg, o->order_id, &v);
    }
    for (size_t i = 0; rc == 0 && i < p.len; i++) {
        taken_piece_t *c = &p.items[i];
        if ((i == 0 || strcmp(c->code, p.items[i - 1].code) != 0) &&
            !rc_orders_find(&codes_again, c->code))
            rc = sink_taken(sink, c->code, strlen(c->code), c->order_id, strlen(c->order_id));
    }
    for (size_t i = 0; rc == 0 && i + 1 < e[5]->elements; i += 2) {
        redisReply *f = e[5]->element[i], *v = e[5]->element[i + 1];
        if (f->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
            rc = sink_taken(sink, f->str, f->len, v->str, v->len);
    }
    if (rc == 0)
        rc = sink_releasing(sink, e[6]);
out:
    if (reply)
        freeReplyObject(reply);
    rc_orders_free(&t);
    rc_orders_free(&codes_again);
    free(p.items);
    return rc;
}

int rc_redis_campaign(rc_redis_t *r, int64_t campaign_id, int64_t scan_above,
                      int64_t releasing_max_ms, int releasing_limit,
                      const rc_campaign_sink_t *sink, int *keys, char *err, size_t errlen)
{
    campaign_keys_t k;
    char token[33], max[24], limit[24];
    int begun = 0, kept = 0, rc;

    /*
     * As every script of a pass, the read goes after a pause: a test
     * (tests/model) steps the reconciler to it (it was a script before).
     */
    VC_PAUSE_WITH("reconciler-each-repair", NULL, "campaign-read");
    campaign_keys_of(campaign_id, &k);
    snprintf(max, sizeof(max), "%lld", (long long)releasing_max_ms);
    snprintf(limit, sizeof(limit), "%d", releasing_limit);
    *keys = 0;
    if (scan_above >= 0) {
        const char *names[] = {k.name[VC_CAMPAIGN_KEY_ORDERS], k.name[VC_CAMPAIGN_KEY_SCAN],
                               k.name[VC_CAMPAIGN_KEY_TOUCHED],
                               k.name[VC_CAMPAIGN_KEY_TOUCHED_CODES]};
        if ((rc = pieces_begin(r, vc_redis_tag_slot(k.tag), names, 4, scan_above, token, &begun,
                               err, errlen)) != 0)
            return rc;
    }
    if (!begun)
        return campaign_at_once(r, &k, max, limit, sink, keys, err, errlen);
    if ((rc = campaign_in_pieces(r, &k, token, max, limit, sink, keys, &kept, err, errlen)) != 0)
        return rc;
    pieces_count("campaign", kept);
    if (kept)
        return 0;
    vc_warn("campaign %lld: its orders or codes changed under their read in pieces in a way it "
            "cannot follow (the read outlived its %s ms, or a hash lost fields without a write): "
            "read at once",
            (long long)campaign_id, SCAN_LIFETIME_MS);
    return campaign_at_once(r, &k, max, limit, sink, keys, err, errlen);
}

int rc_redis_due(rc_redis_t *r, const char *code, vc_voucher_key_t set, int64_t max_score,
                 int limit, void (*cb)(void *arg, const char *order_id), void *arg, char *err,
                 size_t errlen)
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

/* Whether script is one of the reconciler's writes: it starts with leader.lua (the rc_ scripts). */
static int guarded(const char *script)
{
    return strncmp(script, vc_lua_leader, strlen(vc_lua_leader)) == 0;
}

/*
 * Sends script with keys and args (borrowed) on the node of slot, and, when
 * leader_key is not NULL, leader_key as the last key and this connection's
 * generation as the last argument (leader.lua takes them off). Returns 0 with
 * *reply (the caller frees it; not an error reply), or a negative error with
 * err set: a refusal of the token (leader_refused()), Redis's error, no reply.
 */
static int eval_reply(rc_redis_t *r, unsigned slot, const char *script, int nkeys,
                      const char *const *keys, int nargs, const char *const *args,
                      const char *leader_key, redisReply **reply, char *err, size_t errlen)
{
    int extra = leader_key ? 1 : 0, argc = 3 + nkeys + nargs + 2 * extra, n = 0, rc;
    const char **argv = malloc(sizeof(*argv) * (size_t)argc);
    char numkeys[16], gen[24];

    *reply = NULL;
    if (!argv)
        return VC_ERR_NOMEM;
    snprintf(numkeys, sizeof(numkeys), "%d", nkeys + extra);
    snprintf(gen, sizeof(gen), "%lld", (long long)r->generation);
    argv[n++] = "EVAL";
    argv[n++] = script;
    argv[n++] = numkeys;
    for (int i = 0; i < nkeys; i++)
        argv[n++] = keys[i];
    if (leader_key)
        argv[n++] = leader_key;
    for (int i = 0; i < nargs; i++)
        argv[n++] = args[i];
    if (leader_key)
        argv[n++] = gen;
    *reply = command_on(r, slot, argc, argv);
    free(argv);
    if (*reply && (rc = leader_refused(*reply, err, errlen)) != 0) {
        freeReplyObject(*reply);
        *reply = NULL;
        return rc;
    }
    if ((rc = check_reply(r, *reply, "EVAL", err, errlen)) != 0)
        *reply = NULL;
    return rc;
}

int rc_redis_confirmed(rc_redis_t *r, const char *orders_key, const char *paid_key,
                       const char *order_id, char *order, size_t ordercap, int64_t *paid, char *err,
                       size_t errlen)
{
    redisContext *ctx;
    redisReply *reply = NULL, *value, *total;
    int rc;

    /*
     * A repair's step like the scripts' (rc_redis_eval()), named as a read
     * (as "campaign-read"): tests/model lands gateway steps here, between the
     * read and the publish that follows it.
     */
    VC_PAUSE_WITH("reconciler-each-repair", orders_key, "confirm-read");
    if (ordercap)
        order[0] = '\0';
    *paid = -1;
    ctx = vc_redis_block_conn(r->c, vc_redis_key_slot(orders_key, strlen(orders_key)), err, errlen);
    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    /* Pipelined: MULTI, HGET, HGET, EXEC; only EXEC's reply carries the values. */
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "HGET %s %s", orders_key, order_id);
    redisAppendCommand(ctx, "HGET %s %s", paid_key, order_id);
    redisAppendCommand(ctx, "EXEC");
    if ((rc = exec_reply(ctx, 2, "MULTI HGET HGET EXEC", orders_key, &reply, err, errlen)) != 0)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
        snprintf(err, errlen, "Redis: unexpected reply to EXEC (HGET, HGET) of %s", orders_key);
        freeReplyObject(reply);
        return VC_ERR_PROTOCOL;
    }
    value = reply->element[0];
    total = reply->element[1];
    if (value->type == REDIS_REPLY_STRING && ordercap)
        snprintf(order, ordercap, "%.*s", (int)value->len, value->str);
    if (total->type == REDIS_REPLY_STRING && total->len > 0) {
        char *end;
        long long n = strtoll(total->str, &end, 10);
        if (*end == '\0' && n >= 0)
            *paid = n;
    }
    freeReplyObject(reply);
    return 0;
}

/*
 * After a write: whether it reached r->wait_replicas replicas within
 * the WAIT timeout (0), else VC_ERR_UNKNOWN_OUTCOME with err set (counted), or
 * the WAIT's own error. On the connection the script ran on (on a cluster,
 * its voucher's master): WAIT counts that connection's writes. what names
 * the script's first key, for the log.
 */
static int replicas_have_it(rc_redis_t *r, const char *what, char *err, size_t errlen)
{
    int64_t acked = 0;
    int rc;

    if (r->wait_replicas <= 0)
        return 0;
    if ((rc = vc_redis_block_wait(r->c, r->wait_replicas, r->wait_timeout_ms, &acked, err,
                                  errlen)) != 0)
        return rc;
    if (acked >= r->wait_replicas)
        return 0;
    vc_metric_add(vc_counter("voucher_reconciler_redis_wait_short_total",
                             "Repair scripts whose writes reached fewer Redis replicas than "
                             "VOUCHER_REDIS_WAIT_REPLICAS in time: the pass stopped before "
                             "acting on them",
                             NULL),
                  1);
    snprintf(err, errlen,
             "the writes of a repair script on %s reached %lld of %lld Redis replicas within "
             "%lld ms (WAIT): not acted on (nothing published), the next pass looks again",
             what, (long long)acked, (long long)r->wait_replicas, (long long)r->wait_timeout_ms);
    return VC_ERR_UNKNOWN_OUTCOME;
}

int rc_redis_eval(rc_redis_t *r, const char *script, int nkeys, const char *const *keys, int nargs,
                  const char *const *args, int64_t *status, char *order, size_t ordercap,
                  char *err, size_t errlen)
{
    char leader[RC_LEADER_KEY_MAX];
    const char *leader_key = NULL;
    redisReply *reply;
    int rc;

    /*
     * Every repair script of a pass runs through here: a test (tests/model)
     * steps the reconciler from one repair to the next, so that any gateway
     * step can land between two of them. The note names the first key: a
     * test waits for the repair of its own voucher (tests/integration); the
     * detail is the script, which the explorer names (its coverage).
     */
    VC_PAUSE_WITH("reconciler-each-repair", nkeys ? keys[0] : "", script);
    if (guarded(script)) {
        /* A write: it carries this reconciler's token, checked in the script (leader.lua). */
        if (r->generation <= 0 || nkeys == 0 ||
            rc_leader_key(keys[0], leader, sizeof(leader)) != 0) {
            snprintf(err, errlen,
                     "a repair script without a fencing token (not the acting "
                     "reconciler, or a key without a hash tag): not sent");
            return VC_ERR_INVALID;
        }
        leader_key = leader;
    }
    /* A repair script takes the keys of one voucher: the first names their slot. */
    if ((rc = eval_reply(r, nkeys ? vc_redis_key_slot(keys[0], strlen(keys[0])) : 0, script, nkeys,
                         keys, nargs, args, leader_key, &reply, err, errlen)) != 0)
        return rc;
    if (order && ordercap)
        order[0] = '\0';
    if (reply->type == REDIS_REPLY_INTEGER) {
        *status = reply->integer;
    } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
               reply->element[0]->type == REDIS_REPLY_INTEGER) {
        *status = reply->element[0]->integer;
        if (order && ordercap && reply->elements >= 2 &&
            reply->element[1]->type == REDIS_REPLY_STRING) {
            /* Cut short, an answer would read as another (a due list one hold shorter). */
            if (reply->element[1]->len >= ordercap) {
                snprintf(err, errlen, "Redis: a script's answer of %zu bytes, %zu at most expected",
                         reply->element[1]->len, ordercap - 1);
                rc = VC_ERR_PROTOCOL;
            } else {
                memcpy(order, reply->element[1]->str, reply->element[1]->len + 1);
            }
        }
    } else {
        snprintf(err, errlen, "Redis: unexpected reply to a script");
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    /*
     * A write's answer counts only once the replicas have it: a release begun
     * (E) and published, then lost in a failover, would leave the order held
     * again for a downstream that released it. The reads (campaign_due.lua)
     * send no WAIT: a pass that repairs nothing never waits for a replica.
     */
    if (rc == 0 && leader_key)
        rc = replicas_have_it(r, keys[0], err, errlen);
    return rc;
}

int rc_redis_fence(rc_redis_t *r, const char *set_run_id, char run_id[VC_RUN_ID_MAX],
                   int *verified, char *err, size_t errlen)
{
    const char *keys[] = {VC_KEY_FENCE}, *args[] = {"set", set_run_id};
    redisReply *reply;
    int rc;

    if (!set_run_id)
        return vc_redis_block_fence(r->c, NULL, run_id, verified, err, errlen);
    /* The set is a write: fence.lua behind leader.lua, with the fence's own leader key. */
    *verified = 0;
    if (r->generation <= 0) {
        snprintf(err, errlen, "the restart fence's set without a fencing token: not sent");
        return VC_ERR_INVALID;
    }
    if ((rc = eval_reply(r, vc_redis_key_slot(VC_KEY_FENCE, strlen(VC_KEY_FENCE)),
                         vc_lua_rc_fence, 1, keys, 2, args, VC_KEY_FENCE_LEADER, &reply, err,
                         errlen)) != 0)
        return rc;
    if (reply->type == REDIS_REPLY_INTEGER) {
        *verified = reply->integer == 1;
    } else {
        snprintf(err, errlen, "fence.lua: unexpected reply");
        rc = VC_ERR_PROTOCOL;
    }
    freeReplyObject(reply);
    return rc;
}

/*
 * An aggregate (agg_key) and the size of the orders hash beside it
 * (orders_key), both of hash tag tag, at one moment: rc_redis_aggregate() and
 * rc_redis_campaign_aggregate(). what names the voucher or campaign in errors.
 */
static int aggregate_at_once(rc_redis_t *r, const char *tag, const char *agg_key,
                             const char *orders_key, const char *what, rc_agg_t *agg, char *err,
                             size_t errlen)
{
    redisReply *reply = NULL, *fields;
    redisContext *ctx = conn_for(r, tag, err, errlen);
    int rc = 0;

    memset(agg, 0, sizeof(*agg));
    if (!ctx)
        return VC_ERR_UNAVAILABLE;
    /* At one moment, so that the counts are those of the hash they are compared with. */
    redisAppendCommand(ctx, "MULTI");
    redisAppendCommand(ctx, "HGETALL %s", agg_key);
    redisAppendCommand(ctx, "HLEN %s", orders_key);
    redisAppendCommand(ctx, "EXEC");
    if ((rc = exec_reply(ctx, 2, "MULTI HGETALL HLEN EXEC", what, &reply, err, errlen)) != 0)
        goto out;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_ARRAY ||
        reply->element[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "Redis: unexpected reply to EXEC (HGETALL agg, HLEN orders) of %s",
                 what);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    fields = reply->element[0];
    agg->present = fields->elements > 0;
    agg->size = reply->element[1]->integer;
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        redisReply *f = fields->element[i], *v = fields->element[i + 1];
        char name[32], value[32];

        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            f->len >= sizeof(name) || v->len >= sizeof(value)) {
            agg->malformed = 1;
            continue;
        }
        memcpy(name, f->str, f->len);
        name[f->len] = '\0';
        memcpy(value, v->str, v->len);
        value[v->len] = '\0';
        rc_agg_field(agg, name, value);
    }
out:
    if (reply)
        freeReplyObject(reply);
    return rc;
}

int rc_redis_aggregate(rc_redis_t *r, const char *code, rc_agg_t *agg, char *err, size_t errlen)
{
    rc_keys_t k;

    rc_keys_of(code, &k);
    return aggregate_at_once(r, code, k.name[VC_VOUCHER_KEY_AGG], k.name[VC_VOUCHER_KEY_ORDERS],
                             code, agg, err, errlen);
}

int rc_redis_campaign_aggregate(rc_redis_t *r, int64_t campaign_id, rc_agg_t *agg, char *err,
                                size_t errlen)
{
    campaign_keys_t k;
    char what[40];

    campaign_keys_of(campaign_id, &k);
    snprintf(what, sizeof(what), "campaign %lld", (long long)campaign_id);
    return aggregate_at_once(r, k.tag, k.name[VC_CAMPAIGN_KEY_AGG], k.name[VC_CAMPAIGN_KEY_ORDERS],
                             what, agg, err, errlen);
}
