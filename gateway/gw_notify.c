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

#include "gw_rules.h"
#include "vc_config.h"
#include "vc_log.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"

#define GW_NOTIFY_POLL_MS 200   /* how often the thread looks at the stop flag */
#define GW_NOTIFY_RETRY_MS 1000 /* pause before connecting again */

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
};

/* Whether reply (freed here) is an answer, not an error or a broken connection. */
static int answered(redisReply *reply)
{
    int ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (reply)
        freeReplyObject(reply);
    return ok;
}

/* Connects and subscribes; returns the context (owned) or NULL. */
static redisContext *subscribe(const vc_redis_url_t *u)
{
    struct timeval tv = {2, 0};
    char err[256];
    redisContext *ctx = vc_redis_node_connect(u, u->host, u->port, tv, err, sizeof(err));

    /* Channels are the same on every database (a SELECT changes nothing). */
    if (ctx && !answered(redisCommand(ctx, "SUBSCRIBE %s", GW_NOTIFY_CHANNEL))) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* A message ["message", channel, code] voids code's rules; anything else is ignored. */
static void handle(const redisReply *r)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0 &&
        r->element[2]->type == REDIS_REPLY_STRING && r->element[2]->len <= VC_CODE_MAX)
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
        redisContext *ctx = subscribe(&n->nodes.seed[k]);
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
        redisContext *ctx = subscribe_any(n);
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
        /* Messages sent while this gateway did not listen are lost: read every rule anew. */
        gw_rules_changed_all();
        while (!atomic_load(&n->stop)) {
            struct pollfd pfd = {.fd = ctx->fd, .events = POLLIN};
            void *reply = NULL;
            int ready = poll(&pfd, 1, GW_NOTIFY_POLL_MS);

            if (ready < 0 && errno == EINTR)
                continue;
            if (ready < 0 || (ready > 0 && redisBufferRead(ctx) != REDIS_OK))
                break;
            while (redisGetReplyFromReader(ctx, &reply) == REDIS_OK && reply) {
                handle(reply);
                freeReplyObject(reply);
                reply = NULL;
            }
            if (ctx->err)
                break;
        }
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
    if (pthread_create(&n->thread, NULL, listen_main, n) != 0) {
        snprintf(err, errlen, "cannot start the rule-change listener");
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
    free(n);
}
