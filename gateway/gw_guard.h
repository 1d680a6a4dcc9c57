/*
 * Guessing limits (issue 16, seeds decision 5): token buckets that only
 * failed tries spend, one per customer and one per client IP, kept in Redis
 * so that every gateway enforces the same allowance (common/lua/guard_bucket.lua,
 * proto/redis-keys.md "Guessing limits").
 *
 * The flow of a guarded request (quote, reservation, confirm, cancel):
 * 1. gw_guard_enter(), before the code is looked up: a try is taken from
 *    each bucket, the check and the take in one script (guard_bucket.lua
 *    "take"), both buckets pipelined in one round trip. An empty bucket
 *    answers 429 TOO_MANY_ATTEMPTS with Retry-After at once (nothing is
 *    looked up, so an empty bucket learns nothing), and gives back what the
 *    other bucket took. A bucket this gateway knows to be full (the check
 *    cache and the spent set below) is let through from memory instead,
 *    with no round trip, for at most GW_GUARD_MEMORY_IN_FLIGHT requests of
 *    that bucket in flight at a time on this gateway.
 * 2. The route answers as it always did.
 * 3. gw_guard_settle(), from the observer of every answer: an answer that is
 *    a failed try (404 on a guarded route, or marked with gw_guard_mark())
 *    keeps its taken tries and spends one of each bucket let through from
 *    memory; each bucket is then indexed and published (guard_index.lua).
 *    Any other answer (a success, a sold-out answer, a 503) gives its taken
 *    tries back and spends nothing.
 * Tries in flight (issue 42): requests sent together used to be all checked
 * before any of them spent, so 500 parallel guesses from one address all
 * passed. Now each one taken in Redis is paid for before its lookup, so at
 * most the bucket's level of them passes, at any concurrency; what passes
 * beyond it is what memory lets through, at most GW_GUARD_MEMORY_IN_FLIGHT a
 * bucket per gateway before its first failure puts the bucket in that
 * gateway's spent set (a spend below zero, debt down to GW_GUARD_MAX_DEBT
 * tries, pays for those). The bound, per customer and per address: the
 * allowance plus GW_GUARD_MEMORY_IN_FLIGHT per gateway process, plus what
 * other gateways let through while a spend's message travels (their own
 * in-flight bound each). The price: honest requests of one bucket in flight
 * together beyond the bucket's level get 429, and each one that is taken in
 * Redis (not answered from memory) pays a round trip before its lookup and a
 * give-back write after it (not waited for). So a request from a trusted
 * proxy that names no client (no X-Forwarded-For: the order service calling
 * for all its shoppers, whose address is every shopper's) gets no address
 * bucket, only its customer's: counted and said once (address_bucket()).
 * A take or a spend that Redis refuses (full at maxmemory) or does not answer
 * stops the memory answers until a take succeeds: the limits never let a try
 * through unpaid while Redis cannot write (voucher_gateway_guard_write_errors_total).
 * A take that fails so is decided by the local limiter instead (below,
 * gw_guard_local_t): the same buckets in this process's memory until a take
 * succeeds again, and only a direct voucher's request goes on; every other
 * request gets 503 from its route as before (gw_guard_local()).
 *
 * The pure parts (bucket arithmetic, client address, CIDR lists) take
 * values in and give decisions out; tests/unit/test_guard.c checks them.
 */
#ifndef GW_GUARD_H
#define GW_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "gw_app.h"
#include "gw_config.h"

/* One bucket's allowance: tries failed tries per window_ms, refilled continuously. */
typedef struct {
    int64_t tries;     /* capacity; 0 turns the bucket off */
    int64_t window_ms; /* time to refill from empty to full */
} gw_guard_rate_t;

/*
 * The limits that apply to a guarded request: the two rates. Every code has
 * the same ones (VOUCHER_GUARD_*): the seeds' decision 5 limits a customer's
 * and an address's failed tries, whatever code they guess at. The buckets'
 * keys carry the scope "v" (proto/redis-keys.md), room for limits of
 * another kind later without touching these buckets.
 */
typedef struct {
    gw_guard_rate_t customer;
    gw_guard_rate_t ip;
} gw_guard_limits_t;

/* ---- pure: bucket arithmetic (mirrored by common/lua/guard_bucket.lua) ---- */

/*
 * A bucket's level is kept in units of 1/tries of a millisecond's refill:
 * full is tries * window_ms, one try costs window_ms, and each millisecond
 * adds tries. All integers, so the C and the Lua agree to the unit (exact
 * in Lua's doubles: at most 100,000 tries and 24 h a window, so the level
 * stays within 2^53). Only spend() takes the level below zero (debt).
 */
typedef struct {
    int64_t level; /* -GW_GUARD_MAX_DEBT * window_ms .. tries * window_ms (full) */
    int64_t at_ms; /* when level was computed */
} gw_guard_bucket_t;

/* A bucket never seen (or expired in Redis): full as of now_ms. */
void gw_guard_bucket_full(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms);

/* Refills b to now_ms (a clock that went back refills nothing). */
void gw_guard_bucket_refill(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms);

/*
 * Takes one try at now_ms. Returns 1 taken, or 0 when the bucket is empty,
 * with *retry_ms set to the milliseconds until the next whole try (>= 1).
 * (guard_bucket.lua takes, gives back and spends; check() is take() on a copy.)
 */
int gw_guard_bucket_take(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms,
                         int64_t *retry_ms);

/*
 * Whether a try could be taken at now_ms (1, or 0 with *retry_ms), without
 * taking it: b is not changed.
 */
int gw_guard_bucket_check(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms,
                          int64_t *retry_ms);

/* How many tries a bucket may owe (gw_guard_bucket_spend()). */
#define GW_GUARD_MAX_DEBT 1000000

/*
 * Spends one try at now_ms even if none is left: the level may go below zero,
 * down to GW_GUARD_MAX_DEBT tries owed (at 5 an hour, 23 years: in effect,
 * every failure is paid for).
 */
void gw_guard_bucket_spend(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms);

/* Gives one try back at now_ms, up to full (guard_bucket.lua "give" with one try). */
void gw_guard_bucket_give(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms);

/* Milliseconds until b is full again: the TTL its Redis key gets (0: full, deleted). */
int64_t gw_guard_bucket_ttl_ms(const gw_guard_bucket_t *b, const gw_guard_rate_t *r);

/* Retry-After in whole seconds for retry_ms (rounded up, at least 1). */
int64_t gw_guard_retry_after_s(int64_t retry_ms);

/* ---- pure: what this gateway knows without asking (the check cache) ---- */

/*
 * A bucket whose taken try was given back (a take found it there, and the
 * request was no failure) is remembered for GW_GUARD_CACHE_TTL_MS, so the
 * next request of that bucket on this gateway needs no round trip; the first
 * failed try this gateway settles on it forgets it. Why the guarantees above
 * still hold (proto/redis-keys.md, "Guessing limits", "Checks from memory"):
 *
 * - Every failed try is still paid for in Redis (taken, or spent into debt),
 *   and a take succeeds only at a level of one try or more. The cache
 *   changes which tries pass, never what a failure costs.
 * - An entry is made only from a take sent at an epoch no failure settled on
 *   this gateway has ended since (so it never remembers a level from before
 *   one of this gateway's own spends), and only once its try was given back
 *   (an attacker's failures make none); it is forgotten when this gateway
 *   settles a failure on the bucket (and again when that spend is answered,
 *   for a take of another worker's connection that Redis ran before it).
 * - So tries that pass on one entry are at most GW_GUARD_MEMORY_IN_FLIGHT,
 *   until the first failure forgets it; all are spent, and a new entry needs
 *   a take to find a try again, so the debt is paid first. In the long run a
 *   guesser gets capacity + rate x time + GW_GUARD_MEMORY_IN_FLIGHT per
 *   gateway; the debt floor (GW_GUARD_MAX_DEBT) forgives only past that many
 *   tries owed.
 *
 * The cache says only "a try was there". The opposite knowledge, "nobody
 * spent this bucket", which spares the round trip of a customer never seen
 * before, is the spent set below.
 *
 * Keys are a keyed hash of the bucket's key and its rate (limits changed by
 * a restart with other settings get other entries); slots are direct-mapped and
 * overwritten. Losing an entry (overwritten, expired) only costs a round
 * trip; a false hit would need a SipHash collision under a secret key.
 */
#define GW_GUARD_CACHE_SLOTS 4096 /* a power of two */
#define GW_GUARD_CACHE_TTL_MS 1000
/*
 * Requests of one bucket let through from memory (the cache or the spent set)
 * at a time on one gateway; the others take their try in Redis. This is the
 * "small bound" of issue 42 beyond a bucket's allowance, per gateway process.
 * Counted per slot: buckets that share a slot share the count, which only
 * sends more requests to Redis.
 */
#define GW_GUARD_MEMORY_IN_FLIGHT 1

/*
 * The lease of a bucket on this gateway: tries taken in Redis by requests
 * that succeeded, kept here instead of given back, for the next requests of
 * the bucket (issue 42: many honest requests of one address at once, an
 * order service, each paid a take and a give). A try of the lease is a try
 * taken: a failure that used it keeps it (paid), a success puts it back.
 * Once no request of the bucket has been in flight on this gateway for
 * GW_GUARD_LEASE_IDLE_MS, the listener thread gives the lease back to Redis
 * (one give of all of it, gw_guard_leases_idle()). So the bound above holds
 * as it is, and a lease holds no more tries than the bucket's requests in
 * flight together here (at most GW_GUARD_LEASE_MAX): tries other gateways
 * cannot take meanwhile, as the takes in flight were. A gateway that stops
 * gives them back once its workers are done; one that dies loses them (the
 * bucket refills them with time). One lease a
 * slot of the cache: a bucket whose slot another bucket's lease holds takes
 * and gives back each try as before.
 */
#define GW_GUARD_LEASE_MAX 256
#define GW_GUARD_LEASE_IDLE_MS 100
#define GW_GUARD_KEY_MAX 96 /* guard:{cu:SCOPE:ID} and guard:{ip:SCOPE:ADDR} */
/*
 * The SCOPE of every bucket (vc_key_guard_customer(), vc_key_guard_address()): every
 * code has the same limits (proto/redis-keys.md, "Guessing limits").
 */
#define GW_GUARD_SCOPE "v"

typedef struct {
    uint64_t key;    /* the bucket (a cache key), or 0: free */
    int busy;        /* its requests in flight that took in Redis or use the lease */
    int held;        /* tries taken in Redis and kept here */
    int in_use;      /* of them, used by requests in flight */
    int64_t full_at; /* the latest take's answer (Redis's clock): for a failure's index */
    int64_t idle_ms; /* when busy last came to 0 (monotonic clock) */
    gw_guard_rate_t rate;
    char bucket[GW_GUARD_KEY_MAX]; /* its Redis key, to give the lease back */
} gw_guard_lease_t;

/* How a request of a leased bucket came by its try (gw_guard_lease_settle()). */
enum { GW_GUARD_LEASE_NONE, GW_GUARD_LEASE_TAKEN, GW_GUARD_LEASE_USED };

typedef struct {
    uint64_t epoch; /* failures settled (and their spends answered) so far */
    struct {
        uint64_t key;     /* 0: empty */
        int64_t until_ms; /* remembered until then (monotonic clock) */
    } slot[GW_GUARD_CACHE_SLOTS];
    int in_flight[GW_GUARD_CACHE_SLOTS]; /* let through from memory and not settled, by slot */
    gw_guard_lease_t lease[GW_GUARD_CACHE_SLOTS];
} gw_guard_cache_t;

/* Empties c (all zero is empty too). */
void gw_guard_cache_init(gw_guard_cache_t *c);

/* Whether bucket key (a gw_guard_cache_key()) had a try, as remembered at now_ms. */
int gw_guard_cache_has(const gw_guard_cache_t *c, uint64_t key, int64_t now_ms);

/* The epoch to give gw_guard_cache_put() when a check is sent. */
uint64_t gw_guard_cache_epoch(const gw_guard_cache_t *c);

/*
 * Remembers that Redis found a try in bucket key, for a check sent at epoch
 * sent_epoch: kept until now_ms + GW_GUARD_CACHE_TTL_MS, unless a failure was
 * settled (or its spend answered) since the check was sent: then nothing.
 */
void gw_guard_cache_put(gw_guard_cache_t *c, uint64_t key, uint64_t sent_epoch, int64_t now_ms);

/*
 * A failed try on bucket key was settled, or its spend answered: forgets the
 * bucket and starts a new epoch. Only key's low bits are read (its slot,
 * emptied whichever bucket holds it), so a callback may carry it in a pointer.
 */
void gw_guard_cache_fail(gw_guard_cache_t *c, uint64_t key);

/*
 * A request of bucket key is to be let through from memory: returns 1 and
 * counts it in flight, or 0 when GW_GUARD_MEMORY_IN_FLIGHT are already
 * (the request then takes its try in Redis).
 */
int gw_guard_flight_enter(gw_guard_cache_t *c, uint64_t key);

/* A request that gw_guard_flight_enter() let through is settled. */
void gw_guard_flight_leave(gw_guard_cache_t *c, uint64_t key);

/*
 * A request of bucket key needs a try that memory did not give: returns
 * GW_GUARD_LEASE_USED when it takes one of the lease (nothing to ask Redis),
 * GW_GUARD_LEASE_TAKEN when it is to take its try in Redis and settle with
 * the lease, or GW_GUARD_LEASE_NONE when another bucket's requests hold the
 * slot (it takes in Redis and gives back on its own, as without a lease).
 */
int gw_guard_lease_enter(gw_guard_cache_t *c, uint64_t key, const char *bucket,
                         const gw_guard_rate_t *rate);

/* A take in Redis for bucket key answered full_at: kept for a failure's index. */
void gw_guard_lease_taken(gw_guard_cache_t *c, uint64_t key, int64_t full_at);

/*
 * A request that gw_guard_lease_enter() answered how (USED or TAKEN) is
 * settled: got says whether it had its try (a take that found the bucket
 * empty, or failed, had none), failed whether its answer was a failed try.
 * now_ms is the monotonic clock. Returns how many tries to give back to
 * Redis now: a success's taken try when the lease is full, else 0 (an idle
 * lease goes back through gw_guard_lease_sweep()). *full_at is the lease's
 * latest take answer.
 */
int gw_guard_lease_settle(gw_guard_cache_t *c, uint64_t key, int how, int got, int failed,
                          int64_t now_ms, int64_t *full_at);

/*
 * Takes out of c up to max leases idle for GW_GUARD_LEASE_IDLE_MS at now_ms
 * (no request in flight, tries held), copied to out, for the caller to give
 * their tries back to Redis. Returns how many.
 */
int gw_guard_lease_sweep(gw_guard_cache_t *c, int64_t now_ms, gw_guard_lease_t *out, int max);

/* The cache key of a bucket: a keyed hash of its Redis key and its rate; never 0. */
uint64_t gw_guard_cache_key(const char *bucket_key, const gw_guard_rate_t *rate);

/* The same, from the bucket's gw_guard_spent_key() (hashed once for both). */
uint64_t gw_guard_cache_key_of(uint64_t spent_key, const gw_guard_rate_t *rate);

/* ---- pure: the buckets other gateways spent (the spent set) ---- */

/*
 * The opposite knowledge of the check cache: "no gateway spent this bucket",
 * which answers a customer never seen before without a round trip. Every
 * spend's answer (guard_bucket.lua: when the bucket is full again, Redis's
 * clock) is put in guard:index and then published on voucher-guard, in that
 * order and in one script on guard:index's node (common/lua/guard_index.lua).
 * Each gateway keeps the buckets spent and not yet full: what it hears, what
 * it spends itself, and, after each subscription, the index read once
 * subscribed. A check of a bucket not in the set is answered from memory
 * ("full: a try is there") only while the set is trusted: subscribed, the
 * index loaded since, and no entry dropped for room whose time has not
 * passed. Otherwise, and for a bucket in the set, Redis is asked as before.
 *
 * Why the guarantees still hold (proto/redis-keys.md, "Guessing limits"):
 * - Every failed try is still spent in Redis, into debt when need be; a
 *   memory answer changes which tries pass, never what a failure costs.
 * - The index is read after subscribing and each spend is indexed before it
 *   is published, so a spend is either in what a gateway loaded or a message
 *   it hears: a gateway that starts, or comes back after a gap, never trusts
 *   a bucket in debt. A bucket stays in the set until its full-again time
 *   (plus GW_GUARD_SPENT_MARGIN_MS for the clock conversion below), so a
 *   bucket answered from memory is one nobody spent, or one full again.
 * - What passes wrongly is what was in flight while a spend's message
 *   travelled (the spender's own set takes the bucket at once): failures on
 *   other gateways during those milliseconds, all spent, into debt: the
 *   "tries in flight" burst above, and the debt is paid before Redis sees a
 *   try again. Long run: capacity + rate x time + one burst per gateway per
 *   message delay; the debt floor is unchanged.
 * - A gateway that dies between the spend and guard_index.lua leaves that
 *   spend known only to the bucket. Every other gateway may then answer the
 *   bucket from memory, but its own first failure on it is spent, indexed
 *   and published, and from then on it is in every set: at most the tries
 *   in flight on each gateway until its first failure's spend is answered
 *   (one burst per gateway, once per lost publication, all spent).
 * - A gap (a lost connection, a node change, the channel refused by an ACL)
 *   stops the trust until subscribed and loaded again; the set keeps what it
 *   had (an entry is only ever a reason to ask Redis).
 *
 * Times are Redis's (TIME, ms since the epoch) everywhere in the set: the
 * gateway reads "Redis now" as its monotonic clock plus an offset learnt from
 * TIME when it loads the index (taken at the end of that round trip, so it
 * is never ahead of Redis's clock), and keeps an entry GW_GUARD_SPENT_MARGIN_MS
 * past its time, for the drift of the two clocks between loads.
 *
 * Keys are vc_hash_str() of the bucket's Redis key (a message names no rate:
 * any spend of the key counts). Open addressing, probed at most
 * GW_GUARD_SPENT_PROBE slots; an entry whose time passed is free again. An
 * entry that finds no room is dropped and the set is not complete until its
 * time (plus the margin) passes.
 */
#define GW_GUARD_SPENT_SLOTS 65536 /* a power of two */
#define GW_GUARD_SPENT_PROBE 32
#define GW_GUARD_SPENT_MARGIN_MS 1000

typedef struct {
    int synced;              /* subscribed and the index loaded since */
    int64_t dropped_until;   /* incomplete until then (Redis's clock), or 0 */
    struct {
        uint64_t key;    /* 0: never used */
        int64_t full_at; /* Redis's clock, ms */
    } slot[GW_GUARD_SPENT_SLOTS];
} gw_guard_spent_t;

/* Empties s, not synced (all zero is that too). */
void gw_guard_spent_init(gw_guard_spent_t *s);

/*
 * Bucket key (never 0) was spent and is full again at full_at; now is Redis's
 * clock. Keeps the later time of an entry already there. An entry already
 * full (full_at + margin <= now) is not kept.
 */
void gw_guard_spent_add(gw_guard_spent_t *s, uint64_t key, int64_t full_at, int64_t now);

/* Whether bucket key is in s (spent and not full again) at now. */
int gw_guard_spent_has(const gw_guard_spent_t *s, uint64_t key, int64_t now);

/* Subscribed and loaded (1), or a gap began (0). */
void gw_guard_spent_sync(gw_guard_spent_t *s, int synced);

/*
 * Whether a bucket absent from s may be taken as full at now: synced and no
 * dropped entry still pending.
 */
int gw_guard_spent_trusted(const gw_guard_spent_t *s, int64_t now);

/* The key of a bucket in the spent set: a keyed hash of its Redis key; never 0. */
uint64_t gw_guard_spent_key(const char *bucket_key, size_t len);

/* ---- pure: the local limiter, while Redis is away ---- */

/*
 * The buckets this gateway process counts in its own memory while its Redis
 * cannot take a try (unreachable, late, fenced, or refusing writes: every
 * failure a take can meet but a script Redis refused to run). The same
 * buckets as in Redis (a customer's and an address's, the same rate), the
 * same arithmetic (gw_guard_bucket_*), keyed by the check cache's key (a
 * keyed hash of the bucket's Redis key and its rate) in as many slots as the
 * cache, direct-mapped: a bucket whose slot another bucket holds replaces it
 * and starts full, as the admin logins' fallback does (gw_login.h). Losing an
 * entry that way needs another bucket of the same slot under a secret key;
 * it gives back at most one bucket's allowance, and only to the bucket
 * that was pushed out.
 *
 * Why a limit per process is accepted for the outage (deploy/README.md,
 * "Guessing limits while Redis is away"): a guesser spread over N gateways
 * gets at most N times the tries for the outage's length, against none at
 * all if the limits failed open, and a direct voucher's shop against a 503
 * for every request if they failed closed. The counts are dropped, not
 * merged, when Redis takes a try again: the buckets in Redis hold what they
 * held before the outage, and the outage is the window the N-fold margin is
 * accepted for.
 */
typedef struct {
    uint64_t key; /* the bucket (a cache key), or 0: free */
    gw_guard_bucket_t bucket;
} gw_guard_local_slot_t;

typedef struct {
    gw_guard_local_slot_t slot[GW_GUARD_CACHE_SLOTS];
} gw_guard_local_t;

/* Empties l: every bucket full (all zero is that too). */
void gw_guard_local_init(gw_guard_local_t *l);

/*
 * Takes one try of bucket key (rate *r) at now_ms (the monotonic clock).
 * Returns 1 taken, or 0 when the bucket is empty, with *retry_ms set
 * (gw_guard_bucket_take()). A bucket not in l starts full.
 */
int gw_guard_local_take(gw_guard_local_t *l, uint64_t key, const gw_guard_rate_t *r, int64_t now_ms,
                        int64_t *retry_ms);

/*
 * Gives back the try a request of bucket key took (its answer was no failed
 * try). A bucket no longer in l (pushed out, or the counts dropped since the
 * take) gets nothing: it is full already.
 */
void gw_guard_local_give(gw_guard_local_t *l, uint64_t key, const gw_guard_rate_t *r,
                         int64_t now_ms);

/* ---- pure: the client's address ---- */

/* A CIDR list, VOUCHER_TRUSTED_PROXIES parsed. */
#define GW_GUARD_MAX_PROXIES 32
typedef struct {
    int n;
    struct {
        int family; /* 4 or 6 */
        int prefix;
        unsigned char addr[16];
    } net[GW_GUARD_MAX_PROXIES];
} gw_guard_proxies_t;

/*
 * Parses a comma-separated list of CIDRs ("10.0.0.0/8, ::1/128"; a bare
 * address is a /32 or /128). "" is the empty list. Returns 0, or
 * VC_ERR_INVALID with err naming the entry.
 */
int gw_guard_proxies_parse(const char *list, gw_guard_proxies_t *out, char *err, size_t errlen);

/* Whether addr (text) is inside one of the list's networks; an unparsable addr is not. */
int gw_guard_proxies_contain(const gw_guard_proxies_t *p, const char *addr);

#define GW_GUARD_ADDR_MAX 56

/*
 * The client's address for the IP bucket, written to out as the bucket's
 * name: the socket peer; or, when the peer is a trusted proxy, the
 * right-most hop of forwarded_for (X-Forwarded-For, may be NULL) that is not
 * itself trusted (a hop that does not parse stops the walk: it is taken as
 * the client, so a forged value cannot hide behind it). IPv4 is written as
 * is; IPv6 as its /64 ("2001:db8:1:2::/64"): one home or phone gets one /64.
 * Returns 0; GW_GUARD_UNNAMED when the address believed is itself a trusted
 * proxy (one that named no client: no X-Forwarded-For, or only trusted or
 * empty hops; out is then that proxy's name); or VC_ERR_INVALID when peer is
 * not an address.
 */
#define GW_GUARD_UNNAMED 1
int gw_guard_client(const gw_guard_proxies_t *p, const char *peer, const char *forwarded_for,
                    char out[GW_GUARD_ADDR_MAX]);

/*
 * gw_guard_client() of req with the configured VOUCHER_TRUSTED_PROXIES: the
 * address the guessing limits and the admin logins' limit (gw_login.h) name
 * req's client by. Returns 0, or VC_ERR_INVALID when req has no address.
 */
int gw_guard_address(const gw_request_t *req, char out[GW_GUARD_ADDR_MAX]);

/* ---- the gateway's side (I/O) ---- */

/*
 * Loads the defaults and the trusted proxies from cfg; once at start-up.
 * Returns 0, or VC_ERR_INVALID with err (a bad VOUCHER_TRUSTED_PROXIES).
 */
int gw_guard_configure(const gw_config_t *cfg, char *err, size_t errlen);

#define GW_GUARD_GO 0      /* the caller goes on now; cb never runs */
#define GW_GUARD_PENDING 1 /* cb runs exactly once later, or the guard answered req itself */

typedef void (*gw_guard_cb)(void *arg);

/*
 * Takes a try from the buckets of customer_id (0: none, as on confirm and
 * cancel) and of the client. Returns GW_GUARD_GO when no bucket applies (all
 * turned off) or every bucket that applies is let through from memory (the
 * check cache or the spent set above, within GW_GUARD_MEMORY_IN_FLIGHT; the
 * request is guarded all the same: a failure spends), or GW_GUARD_PENDING:
 * then either cb(arg) runs once (a try was taken from each bucket, or Redis
 * refused to run a bucket's script: it does not apply), or the guard answered
 * req (429) and cb never runs. When Redis cannot take a try (unreachable,
 * late, fenced or full), the local limiter takes it instead: cb runs with
 * gw_guard_local(req) true, or the guard answers 429 from the local buckets.
 * Either way gw_guard_settle() ends the hold. app is borrowed.
 */
int gw_guard_enter(gw_app_t *app, gw_request_t *req, int64_t customer_id, gw_guard_cb cb,
                   void *arg);

/*
 * Whether req's tries were taken by the local limiter (gw_guard_local_t):
 * Redis could not take them. Only a direct voucher's request may then go on
 * (it needs no Redis); a route answers every other request 503, or 404 for a
 * code nobody has (a failed try, counted locally), before it asks Redis for
 * anything. A try Redis never took must not let a flash voucher's or a
 * campaign's request reach Redis, if Redis came back meanwhile.
 */
int gw_guard_local(const gw_request_t *req);

/*
 * Marks req's answer as a failed try whatever its status (a campaign's answer
 * that is not a 404 but reveals a code, say), or, with failed 0, as not one
 * even if it is a 404. Call before answering; no effect on an unguarded req.
 */
void gw_guard_mark(gw_request_t *req, int failed);

/*
 * Settles req once its answer is status (called by the observer,
 * gw_app_observe): a failed try keeps its taken tries and spends one of each
 * bucket let through from memory; anything else gives its taken tries back.
 */
void gw_guard_settle(gw_request_t *req, int status);

/* ---- the spent set's feed (gw_notify.c, the listener thread) ---- */

#define GW_GUARD_CHANNEL "voucher-guard"
/* The index of spent buckets is VC_KEY_GUARD_INDEX (vc_model.h). */

/*
 * The listener's share of the leases (gw_guard.h, the lease): up to max
 * leases idle long enough (with all, every lease no request holds: the
 * gateway stops), taken out for the caller to give back to Redis
 * (guard_bucket.lua "give" with their held count). Returns how many.
 */
int gw_guard_leases_idle(gw_guard_lease_t *out, int max, int all);

/* A lease's give (gw_guard_leases_idle()) answered rc (0, or the failure). */
void gw_guard_lease_given(int rc);

/* Whether this gateway keeps the spent set: guessing limits on. */
int gw_guard_spent_wanted(void);

/* The subscription to GW_GUARD_CHANNEL is gone (or not made yet): every check asks Redis. */
void gw_guard_sync_lost(void);

/* Redis's clock is the monotonic clock plus offset_ms (learnt from TIME, never ahead). */
void gw_guard_sync_clock(int64_t offset_ms);

/* Bucket key (len bytes) is full again at full_at (Redis's clock): a loaded index entry. */
void gw_guard_sync_add(const char *bucket_key, size_t len, int64_t full_at);

/*
 * The index was loaded after subscribing: the set is trusted from now on,
 * except that, when the index held more than was loaded, not before
 * dropped_until (Redis's clock; 0 when nothing was left out).
 */
void gw_guard_sync_loaded(int64_t dropped_until);

/*
 * A message of GW_GUARD_CHANNEL ("FULL_AT BUCKETKEY", len bytes): the bucket
 * goes in the spent set; one that does not parse is dropped.
 */
void gw_guard_heard(const char *msg, size_t len);

#endif
