#include "vc_redis_cluster.h"
#include "vc_error.h"
#include "vc_redis_block.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint16_t vc_redis_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned vc_redis_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len), *close;

    if (open) {
        size_t rest = len - (size_t)(open + 1 - key);

        close = memchr(open + 1, '}', rest);
        /* "{}" is no tag: the whole key is hashed, as Redis does. */
        if (close && close > open + 1)
            return vc_redis_crc16(open + 1, (size_t)(close - open - 1)) % VC_REDIS_SLOTS;
    }
    return vc_redis_crc16(key, len) % VC_REDIS_SLOTS;
}

void vc_redis_slot_map_init(vc_redis_slot_map_t *m)
{
    for (int s = 0; s < VC_REDIS_SLOTS; s++)
        m->owner[s] = VC_REDIS_NO_NODE;
    m->nnodes = 0;
}

int vc_redis_slot_map_node(vc_redis_slot_map_t *m, const char *host, int port)
{
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0)
            return i;
    if (m->nnodes == VC_REDIS_CLUSTER_MAX_NODES || strlen(host) >= sizeof(m->nodes[0].host))
        return -1;
    snprintf(m->nodes[m->nnodes].host, sizeof(m->nodes[0].host), "%s", host);
    m->nodes[m->nnodes].port = port;
    return m->nnodes++;
}

int vc_redis_slot_map_from_reply(vc_redis_slot_map_t *m, const redisReply *reply,
                                 const char *seed_host, char *err, size_t errlen)
{
    vc_redis_slot_map_init(m);
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "CLUSTER SLOTS: not an array");
        return VC_ERR_PROTOCOL;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *range = reply->element[i], *master;
        const char *host;
        int node;

        /* [first, last, [host, port, id, ...], replicas...] */
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2)
            goto bad;
        master = range->element[2];
        if (master->element[0]->type != REDIS_REPLY_STRING ||
            master->element[1]->type != REDIS_REPLY_INTEGER)
            goto bad;
        long long first = range->element[0]->integer, last = range->element[1]->integer;
        if (first < 0 || last < first || last >= VC_REDIS_SLOTS)
            goto bad;
        host = master->element[0]->str;
        /* An empty or "?" endpoint means the node the reply came from. */
        if (!host[0] || strcmp(host, "?") == 0)
            host = seed_host;
        node = vc_redis_slot_map_node(m, host, (int)master->element[1]->integer);
        if (node < 0) {
            snprintf(err, errlen, "CLUSTER SLOTS: more than %d masters, or a host name too long",
                     VC_REDIS_CLUSTER_MAX_NODES);
            vc_redis_slot_map_init(m);
            return VC_ERR_PROTOCOL;
        }
        for (long long s = first; s <= last; s++)
            m->owner[s] = (uint16_t)node;
    }
    return 0;
bad:
    snprintf(err, errlen, "CLUSTER SLOTS: a range of an unexpected shape");
    vc_redis_slot_map_init(m);
    return VC_ERR_PROTOCOL;
}

vc_redis_redirect_kind_t vc_redis_redirect_parse(const char *str, size_t len,
                                                 vc_redis_redirect_t *out)
{
    char text[160], addr[96];
    unsigned slot;
    char extra;

    memset(out, 0, sizeof(*out));
    if (len >= sizeof(text))
        return VC_REDIS_NOT_REDIRECT;
    memcpy(text, str, len);
    text[len] = '\0';
    if (strncmp(text, "MOVED ", 6) == 0)
        out->kind = VC_REDIS_MOVED;
    else if (strncmp(text, "ASK ", 4) == 0)
        out->kind = VC_REDIS_ASK;
    else
        return VC_REDIS_NOT_REDIRECT;
    /* Exactly "<slot> <host>:<port>": a third word makes it some other error. */
    if (sscanf(strchr(text, ' ') + 1, "%u %95s %c", &slot, addr, &extra) != 2 ||
        slot >= VC_REDIS_SLOTS ||
        vc_parse_host_port(addr, out->host, sizeof(out->host), &out->port) != 0) {
        memset(out, 0, sizeof(*out));
        return VC_REDIS_NOT_REDIRECT;
    }
    out->slot = slot;
    return out->kind;
}

int vc_redis_slot_map_moved(vc_redis_slot_map_t *m, const vc_redis_redirect_t *r)
{
    int node = vc_redis_slot_map_node(m, r->host, r->port);

    if (node < 0)
        return -1;
    m->owner[r->slot] = (uint16_t)node;
    return 0;
}

int vc_redis_url_is_cluster(const char *url)
{
    return strncmp(url, "redis+cluster://", 16) == 0;
}

int vc_redis_cluster_url_parse(const char *url, vc_redis_cluster_url_t *out, char *err,
                               size_t errlen)
{
    const char *authority, *hosts, *at = NULL;
    char shown[512], one[640], why[384];
    size_t alen, ulen = 0;

    memset(out, 0, sizeof(*out));
    vc_redis_url_redact(url, shown, sizeof(shown));
    if (!vc_redis_url_is_cluster(url)) {
        snprintf(err, errlen, "\"%s\" is not redis+cluster://[user:password@]host:port,...", shown);
        return VC_ERR_INVALID;
    }
    authority = url + 16;
    alen = strcspn(authority, "/");
    if (authority[alen] && strcmp(authority + alen, "/") != 0 &&
        strcmp(authority + alen, "/0") != 0) {
        snprintf(err, errlen, "\"%s\": a Redis Cluster has database 0 only", shown);
        return VC_ERR_INVALID;
    }
    for (size_t i = 0; i < alen; i++)
        if (authority[i] == '@')
            at = authority + i;
    if (at)
        ulen = (size_t)(at + 1 - authority);
    hosts = authority + ulen;
    while (hosts < authority + alen) {
        size_t hlen = strcspn(hosts, ",/");

        if (out->nseeds == (int)(sizeof(out->seed) / sizeof(out->seed[0]))) {
            snprintf(err, errlen, "\"%s\": more than %d seed nodes", shown, out->nseeds);
            return VC_ERR_INVALID;
        }
        /* Each seed as a one-node URL with the shared credentials, read by the one parser. */
        if (hlen == 0 || !strchr((snprintf(one, sizeof(one), "%.*s", (int)hlen, hosts), one), ':')) {
            snprintf(err, errlen, "\"%s\": each seed node is host:port", shown);
            return VC_ERR_INVALID;
        }
        snprintf(one, sizeof(one), "redis://%.*s%.*s", (int)ulen, authority, (int)hlen, hosts);
        if (vc_parse_redis_url(one, &out->seed[out->nseeds], why, sizeof(why)) != 0) {
            snprintf(err, errlen, "\"%s\": a seed node: %s", shown, why);
            return VC_ERR_INVALID;
        }
        out->nseeds++;
        hosts += hlen;
        if (*hosts == ',')
            hosts++;
    }
    if (out->nseeds == 0) {
        snprintf(err, errlen, "\"%s\": no seed node", shown);
        return VC_ERR_INVALID;
    }
    return 0;
}

/* ------------------------------------------------------- blocking client */

struct vc_redis_cluster {
    vc_redis_cluster_url_t url;
    struct timeval timeout;
    vc_redis_slot_map_t map;
    redisContext *conn[VC_REDIS_CLUSTER_MAX_NODES]; /* by node index of map; NULL until used */
    redisContext *last; /* the one of conn that answered the last command; NULL: none */
};

/* A connection to host:port, authenticated as the URL says, or NULL with err set. */
static redisContext *node_connect(const vc_redis_cluster_t *c, const char *host, int port,
                                  char *err, size_t errlen)
{
    return vc_redis_node_connect(&c->url.seed[0], host, port, c->timeout, err, errlen);
}

/* The connection to node i of the map, made when missing; NULL with err set. */
static redisContext *node_conn(vc_redis_cluster_t *c, int i, char *err, size_t errlen)
{
    if (!c->conn[i])
        c->conn[i] = node_connect(c, c->map.nodes[i].host, c->map.nodes[i].port, err, errlen);
    return c->conn[i];
}

static void node_drop(vc_redis_cluster_t *c, int i)
{
    if (c->conn[i] && c->conn[i] == c->last)
        c->last = NULL;
    if (c->conn[i])
        redisFree(c->conn[i]);
    c->conn[i] = NULL;
}

/* CLUSTER SLOTS on ctx into fresh (host: the node asked). Returns 0 or a VC_ERR_*. */
static int read_map(redisContext *ctx, const char *host, vc_redis_slot_map_t *fresh, char *err,
                    size_t errlen)
{
    redisReply *reply = redisCommand(ctx, "CLUSTER SLOTS");
    int rc;

    if (!reply) {
        snprintf(err, errlen, "CLUSTER SLOTS: %s", ctx->errstr);
        return VC_ERR_UNAVAILABLE;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "CLUSTER SLOTS: %s (is this node in cluster mode?)", reply->str);
        rc = VC_ERR_PROTOCOL;
    } else {
        rc = vc_redis_slot_map_from_reply(fresh, reply, host, err, errlen);
    }
    freeReplyObject(reply);
    return rc;
}

int vc_redis_cluster_refresh(vc_redis_cluster_t *c, char *err, size_t errlen)
{
    vc_redis_slot_map_t *fresh = malloc(sizeof(*fresh));
    redisContext *moved[VC_REDIS_CLUSTER_MAX_NODES] = {0};
    int rc = VC_ERR_UNAVAILABLE, ncand = c->map.nnodes + c->url.nseeds;

    if (!fresh) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    snprintf(err, errlen, "no Redis Cluster node answered");
    /* The masters known first, then the seeds: after a failover a seed may be the one gone. */
    for (int k = 0; k < ncand && rc != 0; k++) {
        redisContext *ctx;
        const char *host;
        int own = 0;

        if (k < c->map.nnodes) {
            host = c->map.nodes[k].host;
            ctx = node_conn(c, k, err, errlen);
        } else {
            const vc_redis_url_t *s = &c->url.seed[k - c->map.nnodes];
            host = s->host;
            ctx = node_connect(c, s->host, s->port, err, errlen);
            own = 1;
        }
        if (!ctx)
            continue;
        rc = read_map(ctx, host, fresh, err, errlen);
        if (own)
            redisFree(ctx);
        else if (rc == VC_ERR_UNAVAILABLE)
            node_drop(c, k);
    }
    if (rc == 0) {
        /* Connections follow their node to its index in the new map; the rest are closed. */
        for (int i = 0; i < c->map.nnodes; i++) {
            int j;

            for (j = 0; j < fresh->nnodes; j++)
                if (fresh->nodes[j].port == c->map.nodes[i].port &&
                    strcmp(fresh->nodes[j].host, c->map.nodes[i].host) == 0)
                    break;
            if (j < fresh->nnodes) {
                moved[j] = c->conn[i];
                c->conn[i] = NULL;
            } else {
                node_drop(c, i);
            }
        }
        memcpy(c->conn, moved, sizeof(moved));
        memcpy(&c->map, fresh, sizeof(*fresh));
    }
    free(fresh);
    return rc;
}

vc_redis_cluster_t *vc_redis_cluster_connect(const vc_redis_cluster_url_t *url, int64_t timeout_ms,
                                             char *err, size_t errlen)
{
    vc_redis_cluster_t *c = calloc(1, sizeof(*c));

    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->url = *url;
    c->timeout.tv_sec = (time_t)(timeout_ms / 1000);
    c->timeout.tv_usec = (suseconds_t)((timeout_ms % 1000) * 1000);
    vc_redis_slot_map_init(&c->map);
    if (vc_redis_cluster_refresh(c, err, errlen) != 0) {
        vc_redis_cluster_free(c);
        return NULL;
    }
    return c;
}

void vc_redis_cluster_free(vc_redis_cluster_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->map.nnodes; i++)
        node_drop(c, i);
    free(c);
}

redisContext *vc_redis_cluster_last_conn(vc_redis_cluster_t *c)
{
    return c->last;
}

void vc_redis_cluster_drop_last(vc_redis_cluster_t *c)
{
    for (int i = 0; c->last && i < c->map.nnodes; i++)
        if (c->conn[i] == c->last)
            node_drop(c, i);
    c->last = NULL;
}

int vc_redis_cluster_node(const vc_redis_cluster_t *c, unsigned slot)
{
    int node = c->map.owner[slot % VC_REDIS_SLOTS];

    return node == VC_REDIS_NO_NODE ? -1 : node;
}

redisContext *vc_redis_cluster_conn(vc_redis_cluster_t *c, unsigned slot, char *err, size_t errlen)
{
    int node = c->map.owner[slot % VC_REDIS_SLOTS];
    char scratch[256];
    redisContext *ctx;

    if (node == VC_REDIS_NO_NODE) {
        snprintf(err, errlen, "Redis Cluster: slot %u is served by no master", slot % VC_REDIS_SLOTS);
        return NULL;
    }
    if (!(ctx = node_conn(c, node, err, errlen)))
        vc_redis_cluster_refresh(c, scratch, sizeof(scratch));
    return ctx;
}

redisReply *vc_redis_cluster_command(vc_redis_cluster_t *c, unsigned slot, int argc,
                                     const char **argv, const size_t *argvlen, char *err,
                                     size_t errlen)
{
    char scratch[256];
    int ask_node = -1, redirected = 0;

    c->last = NULL;
    snprintf(err, errlen, "Redis Cluster: slot %u is served by no master", slot % VC_REDIS_SLOTS);
    for (int attempt = 0; attempt < 5; attempt++) {
        int node = ask_node >= 0 ? ask_node : c->map.owner[slot % VC_REDIS_SLOTS];
        vc_redis_redirect_t r;
        redisContext *ctx;
        redisReply *reply;

        if (node == VC_REDIS_NO_NODE) {
            if (vc_redis_cluster_refresh(c, err, errlen) != 0 ||
                c->map.owner[slot % VC_REDIS_SLOTS] == VC_REDIS_NO_NODE)
                return NULL;
            continue;
        }
        redirected = 0;
        if (!(ctx = node_conn(c, node, err, errlen))) {
            /* A master gone: its replica takes over once the cluster agrees. */
            vc_redis_cluster_refresh(c, scratch, sizeof(scratch));
            ask_node = -1;
            continue;
        }
        if (ask_node >= 0) {
            /* ASK: the importing node answers for this one command after ASKING. */
            redisReply *asking = redisCommand(ctx, "ASKING");
            if (asking)
                freeReplyObject(asking);
            ask_node = -1;
        }
        reply = redisCommandArgv(ctx, argc, argv, argvlen);
        if (!reply) {
            snprintf(err, errlen, "Redis %s:%d: %s", c->map.nodes[node].host,
                     c->map.nodes[node].port, ctx->errstr);
            /* The outcome is unknown: a write is not sent twice; the caller decides. */
            node_drop(c, node);
            vc_redis_cluster_refresh(c, scratch, sizeof(scratch));
            return NULL;
        }
        if (reply->type != REDIS_REPLY_ERROR ||
            vc_redis_redirect_parse(reply->str, reply->len, &r) == VC_REDIS_NOT_REDIRECT) {
            c->last = ctx;
            return reply;
        }
        freeReplyObject(reply);
        redirected = 1;
        if (r.kind == VC_REDIS_MOVED) {
            /* The map is stale: this slot at once, the rest from CLUSTER SLOTS. */
            vc_redis_slot_map_moved(&c->map, &r);
            vc_redis_cluster_refresh(c, scratch, sizeof(scratch));
        } else if ((ask_node = vc_redis_slot_map_node(&c->map, r.host, r.port)) < 0) {
            snprintf(err, errlen, "Redis Cluster: ASK to %s:%d, more nodes than %d", r.host,
                     r.port, VC_REDIS_CLUSTER_MAX_NODES);
            return NULL;
        }
    }
    /* err says what the last try met: a node unreachable, or this redirection. */
    if (redirected)
        snprintf(err, errlen, "Redis Cluster: slot %u still redirected after five tries",
                 slot % VC_REDIS_SLOTS);
    return NULL;
}
