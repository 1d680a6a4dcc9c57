/*
 * The limit sync: brings Redis's counter to a total_limit that changed in
 * PostgreSQL without it (by hand in SQL, or a PATCH whose Redis step was
 * lost). The limit key (voucher:{CODE}:limit) holds the total the counter
 * reflects; when PostgreSQL says another, the difference is added (a raise)
 * or the counter is taken to the remaining rule's bound (a lower). Before it
 * the reconciler only lowered counters, so a total raised by hand stayed
 * undersold for good. proto/redis-keys.md, "The limit key", says why each
 * step is safe.
 */
#ifndef RC_RAISE_H
#define RC_RAISE_H

#include <stddef.h>
#include <stdint.h>

#include "rc_redis.h"

/* libpq's connection, kept opaque here as rc_pg.h does: no PostgreSQL type reaches the header. */
struct pg_conn;

typedef enum {
    RC_LIMIT_NONE,  /* the counter reflects PostgreSQL's total */
    RC_LIMIT_ADD,   /* PostgreSQL's total is higher: add the difference */
    RC_LIMIT_LOWER, /* lower: take the counter to the rule's bound */
    RC_LIMIT_ADOPT, /* no limit key (loaded before they existed): record the total */
} rc_limit_action_t;

/*
 * What the counter needs (pure): has_limit and limit are the limit key as
 * read, total_limit PostgreSQL's. *delta is total_limit - limit (0 for NONE
 * and ADOPT).
 */
rc_limit_action_t rc_limit_plan(int has_limit, int64_t limit, int64_t total_limit, int64_t *delta);

/*
 * Whether the acting reconciler still leads (rc_pass.c's proof); 0 when it
 * does, else a negative error with err set. A proof that fails may close the
 * session it was asked about (rc_limit_sync()'s pg): the caller then leaves
 * pg alone.
 */
typedef int (*rc_limit_proof_fn)(void *arg, char *err, size_t errlen);

/*
 * Syncs code's counter, loaded in Redis, with PostgreSQL's total_limit. Reads
 * the limit key; when it differs from snapshot_total (the pass's), takes the
 * voucher's limit lock on pg (no PATCH is half done while it is held), reads
 * total_limit and the uses counted without rows again under it, plans, proves
 * leadership, and runs limit_sync.lua, which acts only if the limit key is
 * still what was read. pg must be idle (no transaction open). Returns 0 (with
 * *changed 1 when the counter or the key was written), or a negative error
 * with err set.
 */
int rc_limit_sync(struct pg_conn *pg, rc_redis_t *redis, const char *code, int64_t snapshot_total,
                  rc_limit_proof_fn prove, void *prove_arg, int *changed, char *err,
                  size_t errlen);

#endif
