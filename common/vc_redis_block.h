/*
 * The blocking Redis client of the code that runs off the event loop: the
 * reconciler's pass and the gateway's PATCH steps on the threadpool. One
 * node (redis://) or a Redis Cluster (redis+cluster://) behind the same
 * calls: every command names the slot of its keys, which a cluster routes to
 * the master serving it (vc_redis_cluster.h, MOVED and ASK followed) and one
 * node ignores. Every connection it makes, to one node or to each master,
 * authenticates as the URL says (vc_redis_node_connect), so that knowledge
 * lives here once.
 *
 * Each command is bounded by the timeout given at connect; hiredis 0.14
 * reports a timeout as an I/O error, which leaves that connection unusable:
 * it is dropped and made again on the next command (a write whose reply never
 * came is not sent twice: the caller decides what its outcome means).
 */
#ifndef VC_REDIS_BLOCK_H
#define VC_REDIS_BLOCK_H

#include "vc_config.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

struct redisContext;
struct redisReply;

typedef struct vc_redis_block vc_redis_block_t;

/*
 * A connection to host:port with every command bounded by timeout, logged in
 * with auth's user and password (when it has one) and on auth's database
 * (when not 0). Redis's refusal of AUTH never repeats the password, nor does
 * err. Returns the connection (owned: redisFree) or NULL with err set.
 */
struct redisContext *vc_redis_node_connect(const vc_redis_url_t *auth, const char *host, int port,
                                           struct timeval timeout, char *err, size_t errlen);

/*
 * Connects to url (one node, or the cluster's first seed that answers CLUSTER
 * SLOTS). err names VOUCHER_REDIS_URL when the URL itself is wrong. Returns a
 * client (owned: vc_redis_block_free) or NULL with err set.
 */
vc_redis_block_t *vc_redis_block_connect(const char *url, int64_t timeout_ms, char *err,
                                         size_t errlen);
void vc_redis_block_free(vc_redis_block_t *c);

#define VC_RUN_ID_MAX 48 /* a Redis run_id (40 hex digits) and its NUL */

/*
 * The restart fence (fence.lua, proto/redis-keys.md) on the node serving
 * voucher:fence: with set_run_id NULL, reads this Redis process's run_id
 * into run_id and sets *verified when voucher:fence holds it; otherwise
 * writes set_run_id there only if it is still this process's run_id, and
 * sets *verified when it did (run_id untouched). Returns 0,
 * VC_ERR_UNAVAILABLE (no reply), or VC_ERR_PROTOCOL (Redis refused: an ACL
 * without +info or +eval; an unexpected reply), with err set.
 */
int vc_redis_block_fence(vc_redis_block_t *c, const char *set_run_id, char run_id[VC_RUN_ID_MAX],
                         int *verified, char *err, size_t errlen);

/* The slot of the keys tagged {tag} (a voucher's code, an orderId's claim). */
unsigned vc_redis_tag_slot(const char *tag);

/*
 * Runs one command on the node serving slot. Returns the reply (owned:
 * freeReplyObject; it may be an error reply), or NULL with err set when no
 * reply came.
 */
struct redisReply *vc_redis_block_command(vc_redis_block_t *c, unsigned slot, int argc,
                                          const char **argv, const size_t *argvlen, char *err,
                                          size_t errlen);

/*
 * WAIT replicas timeout_ms on the connection that answered c's last
 * vc_redis_block_command() (on a cluster, after a MOVED or an ASK, the node
 * that ran it). Redis answers how many replicas acknowledged every write that
 * connection sent, so right after a script it tells whether the script's
 * writes (and all of that master's writes before them) reached them. The
 * command may block timeout_ms on top of the connection's own timeout.
 * Returns 0 with *acked set, or, with err set, VC_ERR_UNAVAILABLE (that
 * connection is gone, or no reply came: it is dropped, and the outcome is
 * unknown) or VC_ERR_PROTOCOL (Redis refused the WAIT).
 */
int vc_redis_block_wait(vc_redis_block_t *c, int64_t replicas, int64_t timeout_ms, int64_t *acked,
                        char *err, size_t errlen);

/*
 * The connection serving slot, for a pipeline of commands on that slot's
 * keys (or, with vc_redis_block_node, on keys of several slots the same node
 * serves): borrowed until the next call on c. A MOVED or ASK among a
 * pipeline's replies means the slot moved: the caller gives up the pipeline.
 * NULL with err set when that node cannot be reached.
 */
struct redisContext *vc_redis_block_conn(vc_redis_block_t *c, unsigned slot, char *err,
                                         size_t errlen);

/*
 * Which node serves slot as c knows it now, without I/O: 0 on one node, the
 * master's index in a cluster, -1 when no master serves it. Commands on slots
 * with the same node may share one pipeline.
 */
int vc_redis_block_node(const vc_redis_block_t *c, unsigned slot);

#endif
