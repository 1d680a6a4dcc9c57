/*
 * The reconciler's model of one voucher: every order Redis knows, every order
 * PostgreSQL counts, and the events still in flight between them, replayed
 * the way the writer will apply them (proto/redemption-states.md). From it
 * come the verdict and the repairs. Pure: no I/O, so every case is tested.
 */
#ifndef RC_MODEL_H
#define RC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"
#include "vc_order_value.h"
#include "vc_redemption.h"

/* One order, as each side sees it. */
typedef struct {
    char order_id[VC_ORDER_ID_MAX + 1];
    int64_t customer_id;
    int64_t discount;
    int64_t held_until_ms;
    char redis_state;            /* a VC_STATE_ letter, or 0 when Redis has no such order */
    int64_t redis_held_until_ms; /* heldUntil in Redis's value: with the state, which hold it is */
    vc_rd_status_t pg;       /* as PostgreSQL has it now */
    vc_rd_status_t pg_after; /* once the writer applied the events in flight */
    int in_flight;           /* events of this order are in flight */
    int64_t first_unsent_ms; /* when this hold was first seen (held or confirmed) in Redis and
                                unknown downstream: rc_order_unsent() */
    /*
     * Redis holds it R, PostgreSQL counts it, and an earlier pass saw it R
     * too: its release, if it had one, is older than this pass's snapshot,
     * which would then show it. So the snapshot is right to count it, and a
     * repair may take its use again. Seen R only this pass, the release may
     * be younger than the snapshot (a cancel acknowledged meanwhile): the
     * repair waits for the next pass.
     */
    int revivable;
    int parked;    /* a dead letter of this order waits for an operator (deploy/sql/009) */
    int discarded; /* an operator discarded a dead letter of it: give its use back */
    int due;       /* a hold due that a wave read listed (rc_wave.h): expired from there */
} rc_order_t;

/* All orders of one voucher, by orderId (open addressing). */
typedef struct {
    rc_order_t *slots;
    size_t cap; /* a power of two */
    size_t len;
} rc_orders_t;

void rc_orders_init(rc_orders_t *m);
void rc_orders_free(rc_orders_t *m);

/* Returns the order, creating an empty one; NULL only when out of memory. */
rc_order_t *rc_orders_get(rc_orders_t *m, const char *order_id);
/* Returns the order or NULL. */
rc_order_t *rc_orders_find(const rc_orders_t *m, const char *order_id);

/* Iterates: for (size_t i = 0; ...; ) with rc_orders_at(m, i) non-NULL for used slots. */
rc_order_t *rc_orders_at(const rc_orders_t *m, size_t i);

/*
 * Parses a stored Redis order "customerId:discount:heldUntilMs:state" into o
 * (vc_order_value_parse(), strict): every field it holds is overwritten.
 * Returns 0 or VC_ERR_PROTOCOL (o unchanged).
 */
int rc_order_parse(const char *value, size_t len, rc_order_t *o);

/*
 * Adds what Redis holds of an order to o, which may already hold what
 * PostgreSQL or an event in flight says: the state and heldUntil of Redis's
 * value v (vc_order_value_parse()) always, the customer, discount and
 * heldUntil only where o has none.
 */
void rc_order_merge_redis(rc_order_t *o, const vc_order_value_t *v);

/*
 * Replays one in-flight event on its order's pg_after, as the writer will
 * apply it: the shared transition table (common/vc_redemption.h).
 */
void rc_order_apply(rc_order_t *o, const vc_event_t *ev);

typedef enum {
    RC_CONSISTENT = 0, /* Redis and PostgreSQL agree and nothing is in flight */
    RC_NOT_LOADED,     /* Redis has no counter for it */
    RC_BEHIND,         /* they differ only by what is on its way: events, releases, fresh holds */
    RC_UNDERSOLD,      /* Redis holds uses nothing explains, or PostgreSQL lacks a confirm
                          that will not come: safe, but a repair is due */
    RC_DRIFTED,        /* Redis offers a use PostgreSQL counts, or PostgreSQL disagrees with itself */
    RC_USED_WITHOUT_ROWS, /* otherwise consistent, but used_count counts uses no row accounts for */
    /*
     * Nothing else is wrong, but orders whose dead letters are parked hold
     * uses in Redis that PostgreSQL does not count (undersold) until an
     * operator replays or discards them. Parked letters that hold no use (a
     * malformed event) are counted in n->parked and change no verdict.
     */
    RC_PARKED,
    RC_VERDICT_COUNT,
} rc_verdict_t;

/* The numbers behind a verdict. */
typedef struct {
    int64_t total_limit;
    int64_t used_count; /* voucher.used_count */
    int64_t live_rows;  /* rows not RELEASED: used_count counts these, and uncounted more */
    int redis_loaded;
    int64_t redis_remaining; /* read with Redis's orders, at the same moment (rc_redis_orders()) */
    int64_t redis_users;     /* customers in Redis's users hash, read with them; -1 not read */
    int64_t redis_amounts;   /* 1: Redis's amounts hash exists, read with them */
    int64_t redis_limit;     /* Redis's limit key, read with them; -1 absent or not read */
    int64_t redis_outside;   /* Redis's outside key (the uses the counter holds back for no
                                order), read with them; 0 absent */
    /* Derived by rc_model_judge(): */
    int64_t in_flight_events;
    int64_t pg_live_after;    /* live orders once the writer caught up */
    int64_t pending_changes;  /* orders the events in flight will still change */
    int64_t redis_taken;      /* total_limit - redis_remaining */
    int64_t redis_counted;    /* orders Redis counts as taken: H, C, X, E */
    int64_t releasing;        /* X and E: releases begun, not finished */
    int64_t releasing_not_live; /* of those, released in PostgreSQL (or on the way there) */
    int64_t unsent_fresh;     /* held in Redis, unknown downstream, younger than the grace */
    int64_t stranded;         /* the same, older than the grace: to release */
    int64_t released_in_pg;   /* held in Redis, released in PostgreSQL: to release */
    int64_t missing_in_redis; /* live in PostgreSQL, lost (or given back, revivable) in Redis */
    int64_t released_unknown; /* released in PostgreSQL (or the tail), no order in Redis: lost
                                 with a rollback; a retry would be a new order (retake writes R) */
    int64_t released_after;   /* live in the snapshot, R in Redis, not revivable: a release the
                                 snapshot is too old to show, or drift the next pass proves */
    int64_t confirmed_unsent; /* C in Redis, unknown downstream: reserved and confirmed since */
    int64_t confirmed_unknown; /* the same, past heldUntil and the grace: refused or lost */
    int64_t confirm_pending;   /* C in Redis, RESERVED once the writer caught up: the confirm's
                                  VoucherConfirmed may still come (before heldUntil + grace) */
    int64_t confirm_lost;      /* the same past heldUntil + grace: the confirm answered 503
                                  and its event never comes; the reconciler publishes it */
    int64_t uncounted;        /* used_count beyond live_rows: uses counted without rows */
    int64_t accounted;        /* orders holding a use: Redis's H, C, X, E plus missing_in_redis */
    int64_t bound;            /* the most remaining may be: vc_remaining_bound() */
    int64_t users_missing;    /* customers holding uses in Redis's orders, absent from users
                                 (the hash was lost): they could pass their limit */
    int64_t orders_lost;      /* 1: the counter is loaded and the orders hash is not, while
                                 users or amounts is, or the counter is below the limit key
                                 by more than the outside key: the hash was lost (with its
                                 released orders) and reserve.lua refuses new orders until
                                 rebuild.lua (rc_model_orders_lost()) */
    int64_t parked;           /* dead letters of the voucher parked in PostgreSQL (read, not derived) */
    int64_t parked_held;      /* held or confirmed in Redis, unknown downstream, with a parked letter */
    int64_t discarding;       /* the same with a discarded letter: the use is to be given back */
} rc_numbers_t;

/*
 * Judges a voucher from its orders (pg_after already replayed) and numbers.
 * now_ms and grace_ms decide which unsent holds are stranded; an order first
 * seen unsent gets first_unsent_ms = now_ms here.
 */
rc_verdict_t rc_model_judge(rc_orders_t *orders, rc_numbers_t *n, int64_t now_ms, int64_t grace_ms);

/*
 * Whether a voucher's numbers alone settle it as consistent, so its rows and
 * orders need not be read this pass: Redis is loaded and takes exactly the
 * uses PostgreSQL counts (used_count), no event of it is in flight, no hold
 * is due (due_holds: holds whose heldUntil has passed) and no release is under
 * way (releasing). Reads n->redis_loaded, redis_remaining, total_limit,
 * used_count and in_flight_events. Pure.
 */
int rc_model_quiet(const rc_numbers_t *n, int64_t due_holds, int64_t releasing);

/*
 * Whether Redis lost the voucher's orders hash while its counter stayed
 * (proto/redis-keys.md, "A lost orders hash"; orders_lost.lua is the same
 * rule in Lua, which reserve.lua refuses new orders by): loaded, no order in
 * Redis (redis_orders, the orders read), and users or amounts there, or the
 * counter below the limit key by more than the outside key. Reads
 * n->redis_loaded, redis_remaining, redis_users, redis_amounts, redis_limit
 * and redis_outside. Pure.
 */
int rc_model_orders_lost(const rc_numbers_t *n, int64_t redis_orders);

/*
 * Whether Redis, loaded, disagrees with what PostgreSQL and the events in
 * flight count in a way only a repair of Redis closes: orders, users or
 * amounts lost, orders counted downstream and missing in Redis, a counter
 * offering more than the bound, fewer uses taken than orders hold. (The
 * RC_DRIFTED of PostgreSQL disagreeing with itself is not Redis's.)
 */
int rc_model_redis_drift(const rc_numbers_t *n);

/*
 * The verdict of a direct voucher (proto/direct-mode.md, "The reconciler"),
 * decided by PostgreSQL alone: its used_count against its live rows
 * (RESERVED or CONFIRMED), read in one statement, and its parked dead letters.
 * More uses than rows is RC_USED_WITHOUT_ROWS, fewer is RC_DRIFTED (rows the
 * CHECK on used_count does not guard); both can only come from a change made
 * by hand, and neither is repaired. Equal with letters parked is RC_PARKED,
 * else RC_CONSISTENT. Pure.
 */
rc_verdict_t rc_model_judge_direct(int64_t used_count, int64_t live_rows, int64_t parked);

/* "consistent", "not loaded", "behind", "undersold", "DRIFTED", "used-without-rows", "parked". */
const char *rc_verdict_name(rc_verdict_t v);

/*
 * How far Redis's remaining is above the remaining rule's bound (it offers
 * uses that are not there), as judged from the pass's reads: 0 when it is not.
 * lower.lua recounts at the moment it lowers. Orders PostgreSQL counts that
 * Redis lacks (missing_in_redis) are written again by retake.lua, which then
 * lowers the same way.
 */
int64_t rc_model_excess_remaining(const rc_numbers_t *n);

/*
 * Whether o is held or confirmed in Redis and unknown downstream: no row in
 * PostgreSQL and no event of it in flight. Pure.
 */
int rc_order_unsent(const rc_order_t *o);

/*
 * Whether a and b are the same hold in Redis: the same state and heldUntil.
 * An orderId forgotten (a use taken under another request's claim) may be
 * taken again: the new hold has a heldUntil of its own, and what was
 * remembered of the old one (when it was first seen unsent) must not carry
 * over to it. Pure.
 */
int rc_order_same_hold(const rc_order_t *a, const rc_order_t *b);

/* What the reconciler does with one order: rc_model_release(). */
typedef enum {
    RC_RELEASE_NONE = 0,
    RC_RELEASE_EXPIRE,      /* held past heldUntil: release_begin "expire" (reason EXPIRED) */
    RC_RELEASE_UNDELIVERED, /* held or confirmed, never known downstream: "undelivered" */
    RC_RELEASE_CANCEL,      /* held or confirmed in Redis, released in PostgreSQL: "cancel" */
    RC_RELEASE_TO_CONFIRMED, /* held in Redis, confirmed in PostgreSQL: repair_confirmed.lua */
    RC_RELEASE_DISCARD,      /* its dead letter discarded, unknown downstream: "cancel", DISCARDED */
    /*
     * Confirmed in Redis, RESERVED in PostgreSQL after the events in flight,
     * past heldUntil + grace: the confirm ran in Redis and its VoucherConfirmed
     * never reached Kafka (the confirm answered 503). Publish it.
     */
    RC_RELEASE_CONFIRM_LOST,
} rc_release_t;

/*
 * Decides what the reconciler does with one order of a voucher read in full
 * (pg_after replayed, first_unsent_ms carried over), from a pass whose
 * snapshot of Kafka began at snapshot_ms: every event Kafka acknowledged
 * before it is in PostgreSQL or among the events in flight. grace_ms exceeds
 * the gateway's Kafka delivery timeout, so an answer (a 201, a 200) the
 * gateway gave for a change Redis made before snapshot_ms - grace_ms has its
 * event in that snapshot. Hence:
 *
 * - confirmed in PostgreSQL (or by an event in flight) outranks held in
 *   Redis: TO_CONFIRMED, never EXPIRE;
 * - EXPIRE only once heldUntil + grace_ms <= snapshot_ms (a confirm accepted
 *   just before heldUntil has its VoucherConfirmed in the snapshot by then),
 *   and only when PostgreSQL does not say CONFIRMED;
 * - UNDELIVERED (held or confirmed, unknown downstream) only once
 *   first_unsent_ms + grace_ms <= snapshot_ms: the hold existed when it was
 *   first seen, so the event of its 201 or 200 would be in the snapshot;
 *   retries after that are checked in release_begin.lua (resent);
 * - CANCEL when PostgreSQL released the order (final there) and Redis still
 *   counts it held or confirmed;
 * - never EXPIRE nor UNDELIVERED while a dead letter of the order is parked
 *   (o->parked): the event was acknowledged (its 201 or 200 may have been
 *   given) and waits for an operator; its use stays taken;
 * - DISCARD when an operator discarded its dead letter (o->discarded, none
 *   parked) and nothing downstream counts it (no row, no event in flight);
 * - CONFIRM_LOST when Redis holds it confirmed, PostgreSQL (after the events
 *   in flight) RESERVED, and heldUntil + grace_ms <= snapshot_ms: confirm.lua
 *   confirms only before heldUntil and the gateway publishes at once, within
 *   its delivery timeout, so a VoucherConfirmed that is not in that snapshot
 *   never comes (the confirm answered 503 after Redis ran it). The customer
 *   asked to confirm and Redis accepted it: its confirm is published, the use
 *   never released (proto/redis-keys.md, "A confirm answered 503"). Not while
 *   a dead letter of the order is parked or was discarded: that letter is the
 *   confirm, and an operator decides.
 *
 * Releases already begun (X, E) are not decided here: the releasing set says
 * when they began. Pure.
 */
rc_release_t rc_model_release(const rc_order_t *o, int64_t snapshot_ms, int64_t grace_ms);

#endif
