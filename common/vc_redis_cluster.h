/*
 * Redis Cluster routing on hiredis 0.14, which has no cluster client: the
 * hash slot of a key (CRC16 of its hash tag), a slot map read from CLUSTER
 * SLOTS, the MOVED and ASK redirections, and a blocking client with one
 * connection per master for the reconciler. The gateway's asynchronous
 * client (gateway/gw_redis.c) uses the same map and redirection parser.
 *
 * The map and the parsers are pure (no I/O): they are unit-tested against
 * replies recorded from a running cluster (tests/unit/fixtures/redis_cluster).
 */
#ifndef VC_REDIS_CLUSTER_H
#define VC_REDIS_CLUSTER_H

#include "vc_config.h"

#include <stddef.h>
#include <stdint.h>

struct redisReply;

#define VC_REDIS_SLOTS 16384
#define VC_REDIS_CLUSTER_MAX_NODES 64
#define VC_REDIS_NO_NODE 0xFFFF

/* CRC16-CCITT (XModem), the one Redis Cluster hashes with: "123456789" -> 0x31C3. */
uint16_t vc_redis_crc16(const char *buf, size_t len);

/*
 * The slot of a key: CRC16 of its hash tag (what lies between the first '{'
 * and the first '}' after it, when not empty), else of the whole key, mod 16384.
 */
unsigned vc_redis_key_slot(const char *key, size_t len);

/* A master, by the address its cluster announces. */
typedef struct {
    char host[64];
    int port;
} vc_redis_node_t;

/* Which master serves each slot; VC_REDIS_NO_NODE where none does. */
typedef struct {
    uint16_t owner[VC_REDIS_SLOTS]; /* index into nodes */
    vc_redis_node_t nodes[VC_REDIS_CLUSTER_MAX_NODES];
    int nnodes;
} vc_redis_slot_map_t;

/* Empties the map: no slot served, no node known. */
void vc_redis_slot_map_init(vc_redis_slot_map_t *m);

/* The index of host:port in m, added when new. Returns it, or -1 when m is full. */
int vc_redis_slot_map_node(vc_redis_slot_map_t *m, const char *host, int port);

/*
 * Fills m from a CLUSTER SLOTS reply (borrowed): each range's first node is
 * its master; replicas are not used. A master announced with an empty host
 * ("" or "?") takes seed_host, the address the reply came from, as Redis
 * documents. Returns 0, or VC_ERR_PROTOCOL with err set for a reply of
 * another shape (m is then left empty).
 */
int vc_redis_slot_map_from_reply(vc_redis_slot_map_t *m, const struct redisReply *reply,
                                 const char *seed_host, char *err, size_t errlen);

/* A redirection read from an error reply. */
typedef enum { VC_REDIS_NOT_REDIRECT = 0, VC_REDIS_MOVED, VC_REDIS_ASK } vc_redis_redirect_kind_t;

typedef struct {
    vc_redis_redirect_kind_t kind;
    unsigned slot;
    char host[64];
    int port;
} vc_redis_redirect_t;

/*
 * Reads "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" (an error
 * reply's text, len bytes). Returns the kind, VC_REDIS_NOT_REDIRECT for any
 * other error or a malformed one.
 */
vc_redis_redirect_kind_t vc_redis_redirect_parse(const char *str, size_t len,
                                                 vc_redis_redirect_t *out);

/*
 * Records what a MOVED says: the slot now belongs to that node. Returns 0, or
 * -1 when the node cannot be added (the map is full).
 */
int vc_redis_slot_map_moved(vc_redis_slot_map_t *m, const vc_redis_redirect_t *r);

/* Seed nodes and credentials from "redis+cluster://[user:password@]host:port,host:port,...". */
typedef struct {
    vc_redis_url_t seed[16]; /* each with the shared credentials; db is always 0 */
    int nseeds;
} vc_redis_cluster_url_t;

/* Whether url asks for cluster mode (it starts with "redis+cluster://"). */
int vc_redis_url_is_cluster(const char *url);

/*
 * Parses a cluster URL into out. A database number is refused (a cluster has
 * only database 0). Returns 0, or VC_ERR_INVALID with err set (the password
 * never shown).
 */
int vc_redis_cluster_url_parse(const char *url, vc_redis_cluster_url_t *out, char *err,
                               size_t errlen);

/* ------------------------------------------------------- blocking client */

typedef struct vc_redis_cluster vc_redis_cluster_t;

/*
 * Connects to the first seed that answers CLUSTER SLOTS and builds the map;
 * the masters are connected on first use. Returns a client (free it with
 * vc_redis_cluster_free) or NULL with err set.
 */
vc_redis_cluster_t *vc_redis_cluster_connect(const vc_redis_cluster_url_t *url, int64_t timeout_ms,
                                             char *err, size_t errlen);
void vc_redis_cluster_free(vc_redis_cluster_t *c);

/*
 * Runs one command on the master serving slot, following MOVED (the map is
 * read again) and ASK (ASKING first, on the node named, once) up to five
 * times. Returns the reply (the caller frees it with freeReplyObject; it may
 * be an error reply other than a redirection), or NULL with err set when no
 * node answered.
 */
struct redisReply *vc_redis_cluster_command(vc_redis_cluster_t *c, unsigned slot, int argc,
                                            const char **argv, const size_t *argvlen, char *err,
                                            size_t errlen);

/*
 * The connection to the master serving slot (made on first use), for a
 * pipeline of commands on that slot's keys; borrowed until the next call on
 * c. A MOVED or ASK among the pipeline's replies means the map is stale:
 * the caller gives up and calls vc_redis_cluster_refresh, or connects anew.
 * NULL with err set when that master cannot be reached.
 */
struct redisContext *vc_redis_cluster_conn(vc_redis_cluster_t *c, unsigned slot, char *err,
                                           size_t errlen);

/*
 * The connection that answered c's last vc_redis_cluster_command() (after a
 * MOVED or an ASK, the node that ran it), borrowed until the next call on c;
 * NULL when that command got no reply or its connection was dropped since. A
 * WAIT sent there counts the writes that command made (vc_redis_block_wait).
 */
struct redisContext *vc_redis_cluster_last_conn(vc_redis_cluster_t *c);

/* Drops the connection vc_redis_cluster_last_conn() gave: a command on it got no reply. */
void vc_redis_cluster_drop_last(vc_redis_cluster_t *c);

/*
 * The index of the master serving slot in the map as c knows it now (no I/O),
 * or -1 when none does: commands on slots of one master may share a pipeline.
 */
int vc_redis_cluster_node(const vc_redis_cluster_t *c, unsigned slot);

/* Reads the map again from any master known (after a failover, say). Returns 0 or a VC_ERR_*. */
int vc_redis_cluster_refresh(vc_redis_cluster_t *c, char *err, size_t errlen);

#endif
