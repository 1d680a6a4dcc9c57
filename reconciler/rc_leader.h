/*
 * The reconciler's fencing token (proto/redis-keys.md, "Leadership and
 * fencing"): the generation PostgreSQL gives the reconciler lock each time a
 * reconciler takes it (deploy/sql/018_reconciler_leader.sql), the leader key
 * in Redis that holds it for a voucher or a campaign, and the answers of a
 * script that checks it (common/lua/leader.lua, leader_mark.lua). Pure: no
 * I/O, so it is tested without servers.
 */
#ifndef RC_LEADER_H
#define RC_LEADER_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"

/* The largest generation: Lua compares numbers as doubles, exact up to 2^53. */
#define RC_LEADER_MAX ((int64_t)1 << 53)

/* A leader key: the longest hash tag of a reconciler's key, and ":leader". */
#define RC_LEADER_KEY_MAX (VC_CODE_MAX + 48)

/*
 * The first word of leader.lua's and leader_mark.lua's error replies (the
 * same words there): a higher generation in the key (a newer reconciler
 * marked it), or none or a lower one (the mark was lost since the pass made
 * it).
 */
#define RC_LEADER_STALE "STALE_LEADER"
#define RC_LEADER_UNMARKED "LEADER_UNMARKED"

/*
 * Parses the generation PostgreSQL returned (text, NUL-terminated): a
 * decimal from 1 to RC_LEADER_MAX, nothing else. Returns 0 with *generation
 * set, or VC_ERR_PROTOCOL (*generation 0): a reconciler never acts on a
 * token it cannot compare exactly.
 */
int rc_leader_parse(const char *text, int64_t *generation);

/*
 * The leader key of the hash tag key lives under: "voucher:{CODE}:remaining"
 * (or any key of the voucher, a staged one too) gives "voucher:{CODE}:leader",
 * "campaign:{c7}:orders" gives "campaign:{c7}:leader". So the key is in the
 * slot of the keys a script touches (one slot a script, on a Redis Cluster
 * too). Returns 0 with out (cap bytes) set, or VC_ERR_INVALID for a key
 * without a hash tag or too long.
 */
int rc_leader_key(const char *key, char *out, size_t cap);

/* What a refusal says (rc_leader_refusal()). */
typedef enum {
    RC_LEADER_REFUSED_STALE = 1, /* a newer reconciler: stop acting */
    RC_LEADER_REFUSED_UNMARKED,  /* the mark lost since the pass made it: read again */
} rc_leader_refused_t;

typedef struct {
    rc_leader_refused_t why;
    char key[RC_LEADER_KEY_MAX];
    int64_t held; /* the generation the key held; 0 when it held none */
    int64_t token;
} rc_leader_refusal_t;

/*
 * Reads an error reply of Redis (text, len bytes, not NUL-terminated): 1 when
 * it is a refusal of leader.lua or leader_mark.lua, with *r filled; 0 for any
 * other error (r untouched).
 */
int rc_leader_refusal(const char *text, size_t len, rc_leader_refusal_t *r);

/* The error code of a refusal: VC_ERR_STALE_LEADER or VC_ERR_LEADER_UNMARKED. */
int rc_leader_error(const rc_leader_refusal_t *r);

#endif
