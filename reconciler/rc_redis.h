/* The reconciler's Redis adapter: a blocking connection with timeouts. */
#ifndef RC_REDIS_H
#define RC_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "rc_agg.h"
#include "rc_model.h"
#include "vc_model.h"
#include "vc_redis_block.h"

typedef struct rc_redis rc_redis_t;

/*
 * The keys of one voucher, by the model's names (vc_model.h: VC_VOUCHER_KEY_ORDERS...,
 * proto/redis-model.json), the gateway's too; each script's own order is the definition's.
 */
typedef struct {
    char name[VC_VOUCHER_KEY_COUNT][VC_CODE_MAX + 32];
} rc_keys_t;

/* Fills the key names of voucher code (vc_voucher_key()). */
void rc_keys_of(const char *code, rc_keys_t *k);

/*
 * Points keys[0..n) at k's names of the keys a script takes, in the script's
 * order (order: vc_SCRIPT_keys of vc_model.h; n: VC_SCRIPT_NKEYS, or fewer to
 * leave its optional keys off). Borrowed from k.
 */
static inline void rc_script_keys(const rc_keys_t *k, const int *order, int n, const char **keys)
{
    vc_script_keys(order, n, k->name[0], sizeof(k->name[0]), keys);
}

/*
 * A fresh random token (32 hex digits), so that two readers, or two restores
 * in steps, never share keys: a read in pieces's, a restore's staged keys.
 */
void rc_redis_token(char token[33]);

/*
 * Connects to url ("redis://host:port/db"), timing out connect and every
 * command after timeout_ms. Returns the connection (the caller owns it:
 * rc_redis_free) or NULL with err set.
 */
rc_redis_t *rc_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen);
void rc_redis_free(rc_redis_t *r);

/*
 * Makes the scripts this connection writes with carry generation, the
 * fencing token of the lock this reconciler holds (rc_leader.h), and its
 * marks write it; 0 when it does not act: then no write is sent
 * (rc_redis_eval()) and nothing is marked.
 */
void rc_redis_lead(rc_redis_t *r, int64_t generation);

/*
 * The mark (common/lua/leader_mark.lua): writes this connection's generation
 * into leader_key (rc_leader_key()), which then expires at expire_at_ms (0:
 * never), unless the key holds a higher one. The acting reconciler marks a
 * voucher or campaign in each pass before the pass writes anything there;
 * the scripts it writes with run only while the key still holds its
 * generation. Does nothing when this connection does not lead, or when
 * expire_at_ms is past (the keys expired for good). Returns 0,
 * VC_ERR_STALE_LEADER (a newer reconciler marked it: err says the
 * generations), or another negative error with err set.
 */
int rc_redis_mark(rc_redis_t *r, const char *leader_key, int64_t expire_at_ms, char *err,
                  size_t errlen);

/*
 * rc_redis_remaining(), after marking the voucher as rc_redis_mark() does
 * (voucher:{code}:leader, expiring at expire_at_ms), in the same round trip.
 * Returns as both do.
 */
int rc_redis_remaining_marked(rc_redis_t *r, const char *code, int64_t expire_at_ms, int *loaded,
                              int64_t *remaining, char *err, size_t errlen);

/*
 * VOUCHER_REDIS_WAIT_REPLICAS for the repair scripts: once set (replicas > 0),
 * rc_redis_eval() sends WAIT replicas timeout_ms after each write (an rc_
 * script), on the connection the script ran on, and fails when fewer
 * replicas acknowledged its writes in time, so that nothing is acted on (a
 * release published, a repair counted) that a failover could undo
 * (proto/redis-keys.md, "Redis Cluster"). 0 (the default) sends no WAIT.
 */
void rc_redis_set_wait(rc_redis_t *r, int64_t replicas, int64_t timeout_ms);

/*
 * Reads voucher:{code}:remaining. Returns 0 with *loaded 1 and *remaining set,
 * 0 with *loaded 0 when the key is absent, or a negative error with err set.
 */
int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen);

/*
 * What rc_redis_orders() reads beside a voucher's orders, at the same moment:
 * what tells an orders hash lost from one never written (proto/redis-keys.md,
 * "A lost orders hash"; reserve.lua refuses new orders then).
 */
typedef struct {
    int loaded;        /* 1: the counter exists (rc_redis_remaining()) */
    int64_t remaining; /* the counter; 0 when it is missing */
    int64_t users;     /* customers in the users hash (HLEN) */
    int64_t amounts;   /* 1: the amounts hash exists */
    int64_t limit;     /* the limit key (the total_limit the counter reflects); -1 absent or
                          not read */
    int64_t outside;   /* the outside key (the uses the counter holds back for no order
                          Redis holds); 0 absent or not read */
} rc_redis_counts_t;

/*
 * Reads every order of the voucher into m (redis_state and the stored
 * fields), and *c at the same moment (MULTI/EXEC: no script runs between the
 * reads, so they describe one state of Redis). Unreadable values are skipped
 * and counted in *bad. An orders hash of more than scan_above orders (-1:
 * never) is read in pieces instead, with the same result: the state at one
 * moment, that of the read's last step (scan_begin.lua, HSCAN,
 * scan_finish.lua), so that no one command holds Redis up for long; such a
 * read, kept only while the hash exists, leaves c->limit and c->outside not
 * read. Returns 0 or a negative error with err set.
 */
int rc_redis_orders(rc_redis_t *r, const char *code, int64_t scan_above, rc_orders_t *m,
                    rc_redis_counts_t *c, int *bad, char *err, size_t errlen);

/*
 * A targeted read of a voucher (rc_plan_judge_targeted()), at one moment
 * (MULTI/EXEC): the counter into *loaded and *remaining, the value of every
 * order already in m (HMGET of the orders hash, each parsed strictly by
 * vc_order_value_parse(): an order Redis lacks keeps redis_state 0), and the
 * newest_max newest holds of the holds set (ZREVRANGE by heldUntil) into
 * *newest (newest first, *nnewest of them; the caller frees it), each added
 * to m as held until its score unless m has it already. A value that does not
 * parse, or a field the model cannot hold, counts in *bad. Returns 0 or a
 * negative error with err set (then *newest is NULL).
 */
int rc_redis_targeted(rc_redis_t *r, const char *code, rc_orders_t *m, size_t newest_max,
                      char (**newest)[VC_ORDER_ID_MAX + 1], size_t *nnewest, int *loaded,
                      int64_t *remaining, int *bad, char *err, size_t errlen);

/*
 * The due holds a targeted read takes with it (a wave of holds due,
 * rc_wave.h): due_max > 0 adds ZRANGEBYSCORE holds -inf due_before
 * WITHSCORES LIMIT 0 due_max to the same MULTI, oldest heldUntil first. Each
 * hold listed is added to m as held until its score unless m has it already
 * (an order an event names: its value read by the HMGET), and marked due;
 * *due gets their orderIds in that order (*ndue of them; the caller frees it).
 */
typedef struct {
    int64_t due_before;
    size_t due_max;
    char (*due)[VC_ORDER_ID_MAX + 1];
    size_t ndue;
} rc_redis_due_read_t;

/*
 * rc_redis_targeted() with the due holds read at the same moment (due may be
 * NULL: none read). Returns as rc_redis_targeted(); on an error due->due is
 * NULL.
 */
int rc_redis_targeted_due(rc_redis_t *r, const char *code, rc_orders_t *m, size_t newest_max,
                          char (**newest)[VC_ORDER_ID_MAX + 1], size_t *nnewest,
                          rc_redis_due_read_t *due, int *loaded, int64_t *remaining, int *bad,
                          char *err, size_t errlen);

/*
 * What a read of a campaign's Redis keys found (rc_redis_campaign()), handed
 * item by item to callbacks that return 0, or an error that ends the read.
 * Strings are borrowed for the call.
 */
typedef struct {
    void *arg;
    /* An order of campaign:{cID}:orders (an unreadable value is skipped). */
    int (*order_cb)(void *arg, const char *order_id, const vc_order_value_t *v);
    /* A code of campaign:{cID}:taken and the order it is taken by ("!" aside). */
    int (*taken_cb)(void *arg, const char *code, const char *order_id);
    /* A release (campaign:{cID}:releasing) begun at or before the read's time. */
    int (*releasing_cb)(void *arg, const char *order_id);
} rc_campaign_sink_t;

/*
 * The reconciler's full read of campaign campaign_id's Redis state, at one
 * moment: its orders, its taken codes, up to releasing_limit releases begun
 * at or before releasing_max_ms, and *keys: 1 when taken exists, plus 2 for
 * users, plus 4 for orders. One MULTI/EXEC; above scan_above orders (-1:
 * never) in pieces instead (HSCAN of orders and taken, then
 * campaign_scan_finish.lua), with the same result: the campaign as it was at
 * the read's last step, without any command holding Redis up for long
 * (proto/campaigns.md, "Reading a large campaign"). Returns 0 or a negative
 * error with err set; on an error, sink may have had part of the read.
 */
int rc_redis_campaign(rc_redis_t *r, int64_t campaign_id, int64_t scan_above,
                      int64_t releasing_max_ms, int releasing_limit,
                      const rc_campaign_sink_t *sink, int *keys, char *err, size_t errlen);

/*
 * Lists up to limit members of a sorted set (VC_VOUCHER_KEY_HOLDS or
 * VC_VOUCHER_KEY_RELEASING) scored at most max_score, calling cb for each.
 * Returns 0 or a negative error with err set.
 */
/*
 * Reads voucher:{code}:limit, the total_limit the counter reflects
 * (proto/redis-keys.md, "The limit key"): 0 with *present 1 and *limit set,
 * 0 with *present 0 when it is absent, or a negative error with err set.
 */
int rc_redis_limit(rc_redis_t *r, const char *code, int *present, int64_t *limit, char *err,
                   size_t errlen);

/*
 * Reads code's aggregate (voucher:{code}:agg, rc_agg.h) and the size of its
 * orders hash at one moment (MULTI/EXEC): one round trip, O(1). *agg is
 * filled (present 0 when the key is absent; malformed set for a field it does
 * not know). Returns 0 or a negative error with err set.
 */
int rc_redis_aggregate(rc_redis_t *r, const char *code, rc_agg_t *agg, char *err, size_t errlen);

/*
 * The same for a campaign: campaign:{c<campaign_id>}:agg and HLEN of its
 * orders hash, at one moment, one round trip (proto/campaigns.md,
 * "Aggregates"). Returns 0 or a negative error with err set.
 */
int rc_redis_campaign_aggregate(rc_redis_t *r, int64_t campaign_id, rc_agg_t *agg, char *err,
                                size_t errlen);

/*
 * What is under way for code: *due_holds, the holds whose heldUntil is at or
 * before now_ms, and *releasing, the releases begun and not finished. One
 * round trip. Returns 0 or a negative error with err set.
 */
int rc_redis_activity(rc_redis_t *r, const char *code, int64_t now_ms, int64_t *due_holds,
                      int64_t *releasing, char *err, size_t errlen);

int rc_redis_due(rc_redis_t *r, const char *code, vc_voucher_key_t set, int64_t max_score,
                 int limit, void (*cb)(void *arg, const char *order_id), void *arg, char *err,
                 size_t errlen);

/*
 * The code order_id's claim names (voucher-order:{ORDERID}, vc_claim.h), into
 * code: "" when there is no claim or it names no code. Returns 0 or a
 * negative error with err set.
 */
int rc_redis_claim_code(rc_redis_t *r, const char *order_id, char code[VC_CODE_MAX + 1],
                        char *err, size_t errlen);

/*
 * What Redis holds of one order for the VoucherConfirmed the reconciler
 * publishes when the confirm's own never reached Kafka: its value in
 * orders_key (into order, ordercap bytes; "" when there is none) and its
 * entry in paid_key, the total the gateway confirmed it at (*paid; -1 when
 * there is none or it is not a number), read at one moment (MULTI/EXEC). The
 * keys are one voucher's or one campaign's (one slot). Returns 0 or a
 * negative error with err set.
 */
int rc_redis_confirmed(rc_redis_t *r, const char *orders_key, const char *paid_key,
                       const char *order_id, char *order, size_t ordercap, int64_t *paid, char *err,
                       size_t errlen);

/*
 * Runs a script with the given keys and arguments (borrowed). Scripts answer
 * an integer or {status, order}: *status gets the integer, order (ordercap
 * bytes, may be NULL) the order value or "" (an order that does not fit is
 * VC_ERR_PROTOCOL, never cut short). A write, one of the rc_ scripts
 * (common/vc_lua.h: they start with leader.lua), also gets the leader key of
 * keys[0]'s hash tag as its last key and this connection's generation as its
 * last argument (rc_redis_lead()); it is not sent without one. Returns 0 or a
 * negative error: VC_ERR_STALE_LEADER or VC_ERR_LEADER_UNMARKED when Redis
 * refused the token (nothing was written; err says the generations). With
 * rc_redis_set_wait(), a write must then reach the replicas asked for: too few
 * in time returns VC_ERR_UNKNOWN_OUTCOME (counted in
 * voucher_reconciler_redis_wait_short_total), and the caller must not act on
 * its answer.
 */
int rc_redis_eval(rc_redis_t *r, const char *script, int nkeys, const char *const *keys, int nargs,
                  const char *const *args, int64_t *status, char *order, size_t ordercap,
                  char *err, size_t errlen);

/*
 * vc_redis_block_fence() on the reconciler's connection; the set through
 * rc_fence.lua (fence.lua behind leader.lua), carrying this connection's
 * generation, checked against voucher:fence:leader (VC_KEY_FENCE_LEADER,
 * marked with rc_redis_mark() first): VC_ERR_STALE_LEADER or
 * VC_ERR_LEADER_UNMARKED when Redis refused it.
 */
int rc_redis_fence(rc_redis_t *r, const char *set_run_id, char run_id[VC_RUN_ID_MAX],
                   int *verified, char *err, size_t errlen);

#endif
