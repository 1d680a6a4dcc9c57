#include "gw_notify.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "gw_guard.h"
#include "gw_rules.h"
#include "vc_config.h"
#include "vc_fault.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"
#include "vc_time.h"

#define GW_NOTIFY_POLL_MS 200   /* how often the thread looks at the stop flag */
#define GW_NOTIFY_RETRY_MS 1000 /* pause before connecting again */
#define GW_NOTIFY_CLOCK_MS 10000 /* how often Redis's clock is read again (the spent set) */
#define GW_NOTIFY_INDEX_MAX GW_GUARD_SPENT_SLOTS /* index entries loaded at most */
#define GW_NOTIFY_PING_MS 1000 /* a PING on the subscription this often (the spent set) */
#define GW_NOTIFY_PONG_MS 3000 /* unanswered this long: the subscription is taken as lost */

/*
 * The nodes the listener may subscribe on: the URL's one node, or every seed
 * of a redis+cluster:// URL. In a Redis Cluster a PUBLISH on any node reaches
 * the subscribers of every node (the cluster bus carries it), so one
 * subscription on any live node hears every gateway; when that node dies the
 * listener moves on to the next seed.
 */
struct gw_notify {
    pthread_t thread;
    atomic_int stop;
    vc_redis_cluster_url_t nodes;
    int next; /* the seed to try first: the last one that worked */
    /*
     * The guessing limits' spent set (gw_guard.h): also subscribed to
     * GW_GUARD_CHANNEL, and the index read with a blocking client once
     * subscribed; NULL url when the limits are off.
     */
    char *url;
    vc_redis_block_t *block;
    int guard_subscribed; /* this subscription hears GW_GUARD_CHANNEL */
    int guard_loaded;     /* and the index was loaded since it began */
    int guard_warned;
    int64_t last_load_ms; /* monotonic: the last load or clock reading tried */
    int64_t ping_ms;      /* monotonic: when the last PING was sent */
    int ping_pending;     /* its pong has not come */
};

/* Whether reply (freed here) is an answer, not an error or a broken connection. */
static int answered(redisReply *reply)
{
    int ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (reply)
        freeReplyObject(reply);
    return ok;
}

static void handle(gw_notify_t *n, const redisReply *r);

/* Whether r is the confirmation of SUBSCRIBE channel: ["subscribe", channel, count]. */
static int confirms(const redisReply *r, const char *channel)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[0]->str, "subscribe") == 0 &&
           r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, channel) == 0;
}

/*
 * Sends SUBSCRIBE channel and returns its answer (owned): the confirmation or
 * an error, or NULL when the connection broke. A message of a channel this
 * connection already hears may come first (published between two
 * SUBSCRIBEs): it is handled as the listener handles it, not taken for the
 * answer, which would hide a refusal (an ACL without the channel) behind it.
 */
static redisReply *subscribe_one(gw_notify_t *n, redisContext *ctx, const char *channel)
{
    if (redisAppendCommand(ctx, "SUBSCRIBE %s", channel) != REDIS_OK)
        return NULL;
    for (;;) {
        void *got = NULL;
        redisReply *reply;

        if (redisGetReply(ctx, &got) != REDIS_OK || !got)
            return NULL;
        reply = got;
        if (reply->type == REDIS_REPLY_ERROR || confirms(reply, channel))
            return reply;
        handle(n, reply);
        freeReplyObject(reply);
    }
}

/*
 * Says when Redis may evict the gateway's keys: a maxmemory-policy other than
 * noeviction drops keys when Redis is full (volatile-* the guessing-limit
 * buckets first: they have a TTL), and an evicted bucket is a full one, a
 * guesser's tries forgotten without a word (issue 42; deploy/README.md,
 * "Redis memory"). Asked on the listener's connection (ctx, not yet
 * subscribed) each time it connects: at start and after every reconnection.
 * INFO memory, not CONFIG GET: the documented ACL allows +info and refuses
 * @dangerous (CONFIG would also show the passwords). An ACL that refuses INFO
 * too gets a warning that the policy could not be checked.
 */
static void check_policy(redisContext *ctx)
{
    static const char field[] = "maxmemory_policy:";
    redisReply *r = redisCommand(ctx, "INFO memory");
    const char *at;
    char policy[32] = "";

    if (!r)
        return; /* the connection broke: the SUBSCRIBE after says so */
    if (r->type == REDIS_REPLY_STRING && (at = strstr(r->str, field)) != NULL) {
        size_t len = strcspn(at + sizeof(field) - 1, "\r\n");
        snprintf(policy, sizeof(policy), "%.*s", (int)len, at + sizeof(field) - 1);
    }
    if (!policy[0])
        vc_warn("could not check redis's maxmemory-policy (%s): it must be noeviction "
                "(deploy/README.md, \"Redis memory\")",
                r->type == REDIS_REPLY_ERROR ? r->str : "no maxmemory_policy in INFO memory");
    else if (strcmp(policy, "noeviction") != 0)
        vc_warn("redis maxmemory-policy is %s: a full redis may evict voucher keys and the "
                "guessing-limit buckets (their tries forgotten); set noeviction "
                "(deploy/README.md, \"Redis memory\")",
                policy);
    freeReplyObject(r);
}

/*
 * Connects and subscribes; returns the context (owned) or NULL. The guard's
 * channel is a command of its own, after the rules': an ACL that refuses it
 * (a deployment not updated) leaves the rules heard as before, and only the
 * spent set untrusted (every check asks Redis).
 */
static redisContext *subscribe(gw_notify_t *n, const vc_redis_url_t *u)
{
    struct timeval tv = {2, 0};
    char err[256];
    redisContext *ctx = vc_redis_node_connect(u, u->host, u->port, tv, err, sizeof(err));
    redisReply *reply;

    if (ctx)
        check_policy(ctx);
    /* Channels are the same on every database (a SELECT changes nothing). */
    if (ctx && !answered(subscribe_one(n, ctx, GW_NOTIFY_CHANNEL))) {
        redisFree(ctx);
        return NULL;
    }
    n->guard_subscribed = 0;
    if (ctx && n->url) {
        VC_PAUSE("notify-between-subscribes");
        if (!(reply = subscribe_one(n, ctx, GW_GUARD_CHANNEL))) {
            redisFree(ctx);
            return NULL;
        }
        n->guard_subscribed = reply->type != REDIS_REPLY_ERROR;
        if (!n->guard_subscribed && !n->guard_warned++)
            vc_warn("guessing limits: cannot subscribe to Redis channel %s (%s); every check "
                    "asks Redis (an ACL user needs &%s: deploy/README.md)",
                    GW_GUARD_CHANNEL, reply->type == REDIS_REPLY_ERROR ? reply->str : "?",
                    GW_GUARD_CHANNEL);
        freeReplyObject(reply);
    }
    return ctx;
}

/* Runs argv on guard:index's node with the blocking client; the reply (owned) or NULL. */
static redisReply *index_command(gw_notify_t *n, int argc, const char **argv)
{
    char err[256];
    size_t len[8];
    redisReply *r;

    if (!n->block &&
        !(n->block = vc_redis_block_connect(n->url, 2000, err, sizeof(err)))) {
        vc_warn("guessing limits: cannot read %s: %s", VC_KEY_GUARD_INDEX, err);
        return NULL;
    }
    for (int i = 0; i < argc; i++)
        len[i] = strlen(argv[i]);
    r = vc_redis_block_command(n->block, vc_redis_tag_slot(VC_KEY_GUARD_INDEX), argc, argv, len,
                               err, sizeof(err));
    if (!r)
        vc_warn("guessing limits: cannot read %s: %s", VC_KEY_GUARD_INDEX, err);
    return r;
}

/* The first number of a reply element (a score, an integer); 0 when it is none. */
static int64_t reply_number(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return (int64_t)r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return (int64_t)strtod(r->str, NULL);
    return 0;
}

/*
 * Reads Redis's clock (TIME on guard:index's node, where guard_index.lua
 * reads it) and gives gw_guard the offset to the monotonic clock, taken at
 * the end of the round trip so that it is never ahead of Redis. Returns
 * Redis's now, or -1.
 */
static int64_t read_clock(gw_notify_t *n)
{
    const char *argv[] = {"TIME"};
    redisReply *r = index_command(n, 1, argv);
    int64_t now = -1;

    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        now = reply_number(r->element[0]) * 1000 + reply_number(r->element[1]) / 1000;
        gw_guard_sync_clock(now - vc_time_mono_ms());
    }
    if (r)
        freeReplyObject(r);
    return now;
}

/*
 * Loads the buckets not yet full from guard:index (after subscribing: a
 * spend indexed before is read here, one indexed after is heard) and makes
 * the spent set trusted. Returns 0, or -1 (to be tried again).
 */
static int load_index(gw_notify_t *n)
{
    char min[32], limit[32];
    const char *range[] = {"ZRANGEBYSCORE", VC_KEY_GUARD_INDEX, min, "+inf", "WITHSCORES",
                           "LIMIT", "0", limit};
    const char *last[] = {"ZRANGE", VC_KEY_GUARD_INDEX, "-1", "-1", "WITHSCORES"};
    int64_t now = read_clock(n), dropped = 0;
    redisReply *r;

    if (now < 0)
        return -1;
    snprintf(min, sizeof(min), "(%lld", (long long)now);
    snprintf(limit, sizeof(limit), "%d", GW_NOTIFY_INDEX_MAX);
    if (!(r = index_command(n, 8, range)))
        return -1;
    if (r->type != REDIS_REPLY_ARRAY) {
        vc_warn("guessing limits: cannot read %s: %s", VC_KEY_GUARD_INDEX,
                r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        return -1;
    }
    VC_PAUSE("guard-index-loaded");
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            gw_guard_sync_add(r->element[i]->str, r->element[i]->len,
                              reply_number(r->element[i + 1]));
    if (r->elements / 2 >= GW_NOTIFY_INDEX_MAX) {
        /* More than the set holds: not complete until the last of them is full. */
        redisReply *l = index_command(n, 5, last);
        if (!l || l->type != REDIS_REPLY_ARRAY || l->elements != 2) {
            if (l)
                freeReplyObject(l);
            freeReplyObject(r);
            return -1;
        }
        dropped = reply_number(l->element[1]);
        freeReplyObject(l);
    }
    freeReplyObject(r);
    gw_guard_sync_loaded(dropped);
    return 0;
}

/*
 * Whether the subscription still answers, for the spent set: a connection
 * that hangs without closing (a partition, a paused Redis) would otherwise
 * leave the set trusted while deaf. A PING every GW_NOTIFY_PING_MS (allowed
 * while subscribed); its pong not back within GW_NOTIFY_PONG_MS is a gap.
 * Returns 0, or -1 to drop the connection. Only with the limits on: the rules'
 * listener alone keeps its behaviour.
 */
static int still_heard(gw_notify_t *n, redisContext *ctx)
{
    int64_t now = vc_time_mono_ms();
    int done = 0;

    if (!n->url)
        return 0;
    if (n->ping_pending) {
        if (now - n->ping_ms < GW_NOTIFY_PONG_MS)
            return 0;
        vc_warn("guessing limits: the subscription to %s did not answer a PING in %d ms; "
                "subscribing again (every check asks Redis meanwhile)",
                GW_GUARD_CHANNEL, GW_NOTIFY_PONG_MS);
        return -1;
    }
    if (now - n->ping_ms < GW_NOTIFY_PING_MS)
        return 0;
    if (redisAppendCommand(ctx, "PING") != REDIS_OK)
        return -1;
    while (!done)
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return -1;
    n->ping_ms = now;
    n->ping_pending = 1;
    return 0;
}

/*
 * Gives the leases idle for GW_GUARD_LEASE_IDLE_MS (with all, every lease no
 * request holds) back to Redis (gw_guard.h, the lease): one guard_bucket.lua "give" of each lease's tries, on the
 * bucket's node, with the blocking client. A give that fails leaves those
 * tries taken until the bucket refills them (counted, and said, as a give).
 */
static void return_leases(gw_notify_t *n, int all)
{
    gw_guard_lease_t idle[16];
    int k;

    do {
        k = gw_guard_leases_idle(idle, 16, all);
        for (int i = 0; i < k; i++) {
            char tries[24], window[24], count[24], err[256];
            const char *argv[] = {
                "EVAL", vc_lua_guard_bucket, "1", idle[i].bucket, "give", tries, window, count};
            size_t len[8];
            redisReply *r = NULL;

            snprintf(tries, sizeof(tries), "%lld", (long long)idle[i].rate.tries);
            snprintf(window, sizeof(window), "%lld", (long long)idle[i].rate.window_ms);
            snprintf(count, sizeof(count), "%d", idle[i].held);
            for (int a = 0; a < 8; a++)
                len[a] = strlen(argv[a]);
            if (n->block || (n->block = vc_redis_block_connect(n->url, 2000, err, sizeof(err))))
                r = vc_redis_block_command(n->block, vc_redis_tag_slot(idle[i].bucket), 8, argv,
                                           len, err, sizeof(err));
            gw_guard_lease_given(r && r->type != REDIS_REPLY_ERROR ? 0 : VC_ERR_UNAVAILABLE);
            if (r)
                freeReplyObject(r);
        }
    } while (k == 16);
}

/*
 * The spent set's upkeep, on each turn of the listener: loads the index once
 * subscribed (again every GW_NOTIFY_RETRY_MS until it works), then reads
 * Redis's clock again every GW_NOTIFY_CLOCK_MS.
 */
static void guard_upkeep(gw_notify_t *n)
{
    int64_t now = vc_time_mono_ms();

    if (n->url)
        return_leases(n, 0);
    if (!n->guard_subscribed)
        return;
    if (!n->guard_loaded) {
        if (now - n->last_load_ms < GW_NOTIFY_RETRY_MS)
            return;
        n->last_load_ms = now;
        n->guard_loaded = load_index(n) == 0;
    } else if (now - n->last_load_ms >= GW_NOTIFY_CLOCK_MS) {
        n->last_load_ms = now;
        read_clock(n);
    }
}

/*
 * A message ["message", GW_GUARD_CHANNEL, "FULL_AT BUCKET"] feeds the spent
 * set; ["message", channel, code] of the rules' channel voids code's rules;
 * anything else is ignored.
 */
static void handle(gw_notify_t *n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "pong") == 0) {
        n->ping_pending = 0;
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return;
    if (r->element[1]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[1]->str, GW_GUARD_CHANNEL) == 0)
        gw_guard_heard(r->element[2]->str, r->element[2]->len);
    else if (r->element[2]->len <= VC_CODE_MAX)
        gw_rules_changed(r->element[2]->str);
}

/* Sleeps ms in slices, returning early once stop is set. */
static void pause_ms(gw_notify_t *n, int ms)
{
    for (; ms > 0 && !atomic_load(&n->stop); ms -= GW_NOTIFY_POLL_MS)
        poll(NULL, 0, GW_NOTIFY_POLL_MS);
}

/* Subscribes on the first node that answers, from n->next on; NULL when none does. */
static redisContext *subscribe_any(gw_notify_t *n)
{
    for (int i = 0; i < n->nodes.nseeds; i++) {
        int k = (n->next + i) % n->nodes.nseeds;
        redisContext *ctx = subscribe(n, &n->nodes.seed[k]);
        if (ctx) {
            n->next = k;
            return ctx;
        }
    }
    return NULL;
}

static void *listen_main(void *arg)
{
    gw_notify_t *n = arg;
    int warned = 0;

    while (!atomic_load(&n->stop)) {
        redisContext *ctx;

        /* A gap: spends published meanwhile are not heard; trusted again once loaded. */
        gw_guard_sync_lost();
        n->guard_loaded = 0;
        n->last_load_ms = 0;
        ctx = subscribe_any(n);
        if (!ctx) {
            if (!warned++)
                vc_warn("rule changes of other gateways: cannot subscribe to Redis channel %s "
                        "on any of %d node(s); cached rules are trusted for their ttl until "
                        "it works",
                        GW_NOTIFY_CHANNEL, n->nodes.nseeds);
            pause_ms(n, GW_NOTIFY_RETRY_MS);
            continue;
        }
        warned = 0;
        n->ping_ms = vc_time_mono_ms();
        n->ping_pending = 0;
        /* Messages sent while this gateway did not listen are lost: read every rule anew. */
        gw_rules_changed_all();
        while (!atomic_load(&n->stop)) {
            struct pollfd pfd = {.fd = ctx->fd, .events = POLLIN};
            void *reply = NULL;
            int ready;

            if (still_heard(n, ctx) != 0)
                break;
            guard_upkeep(n);
            ready = poll(&pfd, 1, GW_NOTIFY_POLL_MS);

            if (ready < 0 && errno == EINTR)
                continue;
            if (ready < 0 || (ready > 0 && redisBufferRead(ctx) != REDIS_OK))
                break;
            while (redisGetReplyFromReader(ctx, &reply) == REDIS_OK && reply) {
                handle(n, reply);
                freeReplyObject(reply);
                reply = NULL;
            }
            if (ctx->err)
                break;
        }
        gw_guard_sync_lost(); /* at once, not after the pause below */
        redisFree(ctx);
        /* The node went away: the next seed first (a cluster node may stay down). */
        n->next = (n->next + 1) % n->nodes.nseeds;
        if (!atomic_load(&n->stop))
            pause_ms(n, GW_NOTIFY_RETRY_MS);
    }
    return NULL;
}

gw_notify_t *gw_notify_start(const char *redis_url, char *err, size_t errlen)
{
    gw_notify_t *n = calloc(1, sizeof(*n));

    if (!n) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (vc_redis_url_is_cluster(redis_url)) {
        if (vc_redis_cluster_url_parse(redis_url, &n->nodes, err, errlen) != 0) {
            free(n);
            return NULL;
        }
    } else {
        if (vc_parse_redis_url(redis_url, &n->nodes.seed[0], err, errlen) != 0) {
            free(n);
            return NULL;
        }
        n->nodes.nseeds = 1;
    }
    if (gw_guard_spent_wanted() && !(n->url = strdup(redis_url))) {
        snprintf(err, errlen, "out of memory");
        free(n);
        return NULL;
    }
    if (pthread_create(&n->thread, NULL, listen_main, n) != 0) {
        snprintf(err, errlen, "cannot start the rule-change listener");
        free(n->url);
        free(n);
        return NULL;
    }
    return n;
}

void gw_notify_stop(gw_notify_t *n)
{
    if (!n)
        return;
    atomic_store(&n->stop, 1);
    pthread_join(n->thread, NULL);
    /* The workers are done (main.c joins them first): every lease goes back now. */
    if (n->url)
        return_leases(n, 1);
    if (n->block)
        vc_redis_block_free(n->block);
    free(n->url);
    free(n);
}
