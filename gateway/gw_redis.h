/*
 * The Redis adapter of one worker loop: one async hiredis connection, all
 * commands pipelined on it. hiredis 0.14 has no timeouts, so this module
 * keeps its own: commands wait in FIFO order with deadlines; a command whose
 * deadline passes fails alone with VC_ERR_TIMEOUT (its reply, when it comes,
 * is read and dropped), and only when the oldest has waited several
 * timeouts (2 s at least) is the connection taken as hung: then every pending
 * command fails and the connection is made again (with backoff).
 *
 * Scripts are registered once; gw_redis_eval() runs EVALSHA, loads the
 * scripts (SCRIPT LOAD) on every connect and falls back to EVAL on NOSCRIPT.
 * Nothing outside this file includes hiredis.
 */
#ifndef GW_REDIS_H
#define GW_REDIS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "vc_config.h"

typedef struct gw_redis gw_redis_t;

enum {
    GW_REDIS_NIL = 0,
    GW_REDIS_INT,
    GW_REDIS_STR, /* bulk string or status reply */
};

#define GW_REDIS_MAX_ITEMS 4

/*
 * A reply, flattened: a scalar reply is one item; an array reply gives its
 * first GW_REDIS_MAX_ITEMS elements (nested arrays read as NIL). Strings are
 * borrowed until the callback returns.
 */
typedef struct {
    size_t n;
    struct {
        int type;
        int64_t integer;
        const char *str;
        size_t len;
    } item[GW_REDIS_MAX_ITEMS];
} gw_redis_reply_t;

/*
 * rc is 0 with reply set, or VC_ERR_TIMEOUT, VC_ERR_UNAVAILABLE (connection
 * lost, Redis loading or busy) or VC_ERR_PROTOCOL (an error reply), with
 * reply NULL.
 */
typedef void (*gw_redis_cb)(void *arg, int rc, const gw_redis_reply_t *reply);

/*
 * Creates the adapter on loop and starts connecting to url's host:port,
 * database db (url copied); every connection, the reconnections too, sends
 * AUTH first when url has a password (as url's user when it has one).
 * scripts (nscripts Lua sources) are borrowed for the adapter's life.
 * up, if not NULL, is kept at 1 while connected and 0 otherwise, for other
 * threads to read (readiness); borrowed for the adapter's life.
 * fence turns the restart fence on (one node only; proto/redis-keys.md, "The
 * restart fence"): each connection first runs fence.lua's check, and until it
 * says that this Redis process is the one the reconciler verified, every
 * command is refused unsent with VC_ERR_FENCED (the check is sent again, at
 * most twice a second, as commands come).
 * Returns 0 and sets *out, or VC_ERR_NOMEM.
 */
int gw_redis_new(gw_redis_t **out, uv_loop_t *loop, const vc_redis_url_t *url, int64_t timeout_ms,
                 const char *const *scripts, size_t nscripts, atomic_int *up, int fence);

/*
 * Sends one command (argc strings of argvlen bytes; copied). Returns 0 and
 * cb runs exactly once later (also on close), or a negative VC_ERR_* (not
 * connected, too many pending, VC_ERR_FENCED) and cb never runs.
 */
int gw_redis_command(gw_redis_t *r, gw_redis_cb cb, void *arg, int argc, const char **argv,
                     const size_t *argvlen);

/*
 * Runs registered script number script with nkeys keys and nargs arguments
 * (NUL-terminated strings; copied). Same contract as gw_redis_command().
 */
int gw_redis_eval(gw_redis_t *r, size_t script, gw_redis_cb cb, void *arg, int nkeys,
                  const char *const *keys, int nargs, const char *const *args);

/*
 * WAIT replicas timeout_ms on the connection that serves key (the one node,
 * or the master of key's slot), so it covers the writes sent there before.
 * The reply is the number of replicas that acknowledged them. Same contract
 * as gw_redis_command().
 */
int gw_redis_wait(gw_redis_t *r, const char *key, int64_t replicas, int64_t timeout_ms,
                  gw_redis_cb cb, void *arg);

/*
 * Whether keys a and b are served by the same connection now (always on one
 * node; on a Redis Cluster, when one master serves both slots in the map), so
 * that one WAIT there covers the writes sent for both.
 */
int gw_redis_same_node(const gw_redis_t *r, const char *a, const char *b);

/*
 * Whether commands on keys of different slots are answered in the order
 * sent: 1 on one node (one connection), 0 on a Redis Cluster.
 */
int gw_redis_ordered(const gw_redis_t *r);

/*
 * Fails what is pending with VC_ERR_SHUTDOWN, closes the connection and the
 * timers, and frees r once the loop has closed them; closed_cb(arg) then runs.
 */
void gw_redis_close(gw_redis_t *r, void (*closed_cb)(void *arg), void *arg);

#endif
