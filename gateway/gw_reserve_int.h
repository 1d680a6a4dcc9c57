/*
 * The reservation flow's inside (POST /vouchers/{code}/reservations), shared
 * by its files and by nothing else; gw_app.h has its one entry point,
 * gw_reserve_start(). The flow is one explicit state, gw_reserve_t.step: each
 * file moves it only through gw_reserve_go(), which checks the step it leaves.
 *
 *   gw_reserve.c          the map of the steps and who moves them; the start (body, guard)
 *   gw_reserve_rules.c    the code's rules (a voucher's or a campaign's), the
 *                         verdict, and which way the request goes from it
 *   gw_reserve_claim.c    the orderId's claim (voucher-order:{orderId})
 *   gw_reserve_script.c   reserve.lua: sent, and its answer read
 *   gw_reserve_load.c     the voucher's first load into Redis
 *   gw_reserve_publish.c  the waits before the event (leases, replicas), VoucherReserved
 *   gw_reserve_answer.c   every answer, and the log line of a failure
 *   gw_reserve_direct.c   a direct voucher's way from the rules on: the claim,
 *                         then PostgreSQL alone (dr_reserve)
 *
 * A gw_reserve_t lives in its request's arena: it is freed with the request,
 * when the flow answers (gw_reserve_answer.c, the step GW_RESERVE_DONE).
 * Nothing may touch it after an answer. Every function below takes x so
 * borrowed; a reply passed along is borrowed for the call only (a Redis
 * reply lives until its callback returns): what is kept is copied out.
 */
#ifndef GW_RESERVE_INT_H
#define GW_RESERVE_INT_H

#include <stdint.h>

#include "gw_app.h"
#include "gw_body.h"
#include "gw_campaign_redeem.h"
#include "gw_soldout.h"
#include "vc_claim.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_model.h"
#include "vc_num.h"
#include "vc_voucher.h"

/*
 * Where a reservation is. One step at a time; each names what the request
 * waits for. The numbering is the usual order, not the only one: a script
 * may run again (a snapshot, a load), and every step may answer.
 */
typedef enum {
    GW_RESERVE_PARSE = 0,    /* the body read, nothing asked yet (a new gw_reserve_t is zeroed) */
    GW_RESERVE_GUARD,        /* the guessing limits decide whether the request goes on */
    GW_RESERVE_RULES,        /* the code's rules: the cache, PostgreSQL, or a campaign's lookup */
    GW_RESERVE_PROBE,        /* refused by the rules: HGET asks whether Redis knows the order */
    GW_RESERVE_CLAIM,        /* the claim sent, reserve.lua pipelined behind it on one connection */
    GW_RESERVE_CLAIM_FIRST,  /* a Redis Cluster: the claim sent, reserve.lua waits for its answer */
    GW_RESERVE_CLAIM_UNSENT, /* the claim sent, reserve.lua could not be: 503 at its answer */
    GW_RESERVE_SCRIPT,       /* reserve.lua sent; the claim's answer, if one was asked, is in */
    GW_RESERVE_LOAD,         /* the voucher's first load into Redis, or a wait for another's */
    GW_RESERVE_FORGET,       /* a use taken for an order that may not have it goes back */
    GW_RESERVE_LEASES,       /* a 201 waits for other gateways' sold-out leases to run out */
    GW_RESERVE_REPLICAS,     /* WAIT: the voucher's master's replicas */
    GW_RESERVE_CLAIM_REPLICAS, /* WAIT: the claim's master's replicas (a cluster: another one) */
    GW_RESERVE_PUBLISH,        /* VoucherReserved handed to Kafka; its delivery report awaited */
    GW_RESERVE_DIRECT_CLAIM,   /* a direct voucher's: the orderId's claim sent, alone */
    GW_RESERVE_DIRECT_PROBE,   /* a direct voucher's, refused by the rules: is the order known? */
    GW_RESERVE_DIRECT,         /* a direct voucher's: dr_reserve runs in PostgreSQL */
    GW_RESERVE_DONE,           /* answered: the request, and this state with it, is freed */
    GW_RESERVE_STEPS,
} gw_reserve_step_t;

_Static_assert(GW_RESERVE_STEPS <= 32, "a set of steps is the bits of an unsigned");

/* A set of steps, for gw_reserve_go(): GW_RESERVE_FROM(GW_RESERVE_SCRIPT) | ... */
#define GW_RESERVE_FROM(step) (1u << (step))
/* Every step but the last: an answer may come from any of them, and only once. */
#define GW_RESERVE_ANSWERABLE (GW_RESERVE_FROM(GW_RESERVE_DONE) - 1u)

/* What SET voucher-order:{orderId} code NX GET said. */
typedef enum {
    GW_CLAIM_NONE = 0, /* none asked, no answer yet, or given up (gw_reserve_unclaim()) */
    GW_CLAIM_NEW,      /* this request claimed the orderId for the code */
    GW_CLAIM_OURS,     /* already claimed for this code (a retry, or a request racing it) */
    GW_CLAIM_OTHER,    /* claimed for another code: ORDER_CONFLICT */
    GW_CLAIM_FAILED,   /* the command failed */
} gw_claim_t;

/* This request's part in the voucher's sold-out snapshot (gw_soldout.h). */
typedef enum {
    GW_SNAPSHOT_NOT_ASKED = 0, /* not asked for */
    GW_SNAPSHOT_ASKING,        /* the script runs again to take it; the ticket is ours */
    GW_SNAPSHOT_ANSWERED,      /* given back to gw_soldout (the ticket spent) */
} gw_snapshot_t;

/* One reservation request, in its request's arena (zeroed there). */
typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    gw_reserve_step_t step;
    char code[VC_CODE_MAX + 1];
    gw_reserve_req_t in;
    vc_voucher_t v;
    int64_t discount;
    int64_t now_ms, held_until_ms;
    int refusal;    /* a new order's answer when it may not take a use (rules, sold out); 0 may */
    int replayed;   /* the order was known: its event goes again, and the 201 says replayed */
    int reloaded;   /* the first load was claimed (or found claimed) by this request */
    int load_waits; /* script runs left while another request's first load lands */
    gw_claim_t claim;
    int64_t load_remaining, load_total;
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    char claim_key[VC_CLAIM_KEY_MAX];
    char claim_value[VC_CLAIM_VALUE_MAX]; /* CODE:TOKEN, this request's own */
    gw_campaign_ref_t camp;               /* a campaign's code (id > 0): its keys and scripts */
    int absent;  /* no voucher or campaign has the code: 404 after a found code's work */
    int voucher; /* a voucher has the code: logged as it is (vc_log_code()) */
    gw_snapshot_t snapshot;
    gw_soldout_ticket_t ticket; /* while snapshot is GW_SNAPSHOT_ASKING */
    struct gw_reserve_direct *direct; /* a direct voucher's call (gw_reserve_direct.c), or NULL */
} gw_reserve_t;

/* ---- the steps ---- */

/*
 * Moves x to step to. x->step must be one of from (GW_RESERVE_FROM() bits):
 * any other is a broken flow, and the process stops there (VC_ASSERT) rather
 * than answer twice or act on a reply it did not expect. Inline: the success
 * path takes six of them, a compare and a store each.
 */
static inline void gw_reserve_go(gw_reserve_t *x, unsigned from, gw_reserve_step_t to)
{
    VC_ASSERT((from & GW_RESERVE_FROM(x->step)) != 0);
    x->step = to;
}

/* ---- gw_reserve_rules.c ---- */

/* The guessing limits let the request on (a gw_guard_enter() callback): look the code up. */
void gw_reserve_lookup(void *arg);

/* ---- gw_reserve_claim.c ---- */

/*
 * When the voucher's keys and its orderIds' claims expire (Unix ms, as text):
 * its endsAt plus VOUCHER_REDIS_RETENTION (proto/redis-keys.md, "Retention").
 */
void gw_reserve_retention_at(const gw_reserve_t *x, char buf[VC_I64_TEXT]);

/*
 * From GW_RESERVE_RULES, a new order that passed the rules: claims the
 * orderId, and sends reserve.lua "take" right behind it (or, on a Redis
 * Cluster, once the claim has answered). Answers on every failure.
 */
void gw_reserve_claim_and_run(gw_reserve_t *x);

/*
 * Gives up this request's claim of the orderId, if it made one (nothing was
 * taken); runs before an answer that leaves no use taken.
 */
void gw_reserve_unclaim(gw_reserve_t *x);

/*
 * The claim is another request's, and this one took the use under it: make
 * it ours (claim.lua "keep"), so that the other's release leaves it.
 */
void gw_reserve_keep_claim(gw_reserve_t *x);

/*
 * From GW_RESERVE_RULES, a direct voucher's order: claims the orderId alone
 * (no script behind it); gw_reserve_direct_claimed() runs with the outcome in
 * x->claim, GW_CLAIM_FAILED when Redis did not take or answer it.
 */
void gw_reserve_claim_direct(gw_reserve_t *x);

/* ---- gw_reserve_direct.c ---- */

/*
 * From GW_RESERVE_RULES: the code is a direct voucher's (x->v.mode), judged
 * by the rules into x->refusal and x->discount. Decides the request in
 * PostgreSQL alone; answers on every path.
 */
void gw_reserve_direct(gw_reserve_t *x);

/* From GW_RESERVE_DIRECT_CLAIM: the claim's outcome is in x->claim. */
void gw_reserve_direct_claimed(gw_reserve_t *x);

/* ---- gw_reserve_script.c ---- */

/*
 * Sends reserve.lua for this request: "take" when it passed the rules (with
 * the snapshot when one is asked), "known" when it did not. Returns 0 or the
 * error of sending it; does not move the step (the caller does).
 */
int gw_reserve_send_script(gw_reserve_t *x);

/*
 * Moves x to GW_RESERVE_SCRIPT and sends reserve.lua; answers 503 when it
 * cannot be sent. From the rules (a known order), the probe, the claim's
 * answer (a cluster), the script itself (a snapshot), or a load.
 */
void gw_reserve_run_script(gw_reserve_t *x);

/* ---- gw_reserve_load.c ---- */

/* From GW_RESERVE_SCRIPT: reserve.lua found no voucher in Redis. Load it, once in its life. */
void gw_reserve_load(gw_reserve_t *x);

/* ---- gw_reserve_publish.c ---- */

/*
 * From GW_RESERVE_SCRIPT, a use held for this request (taken now, or
 * x->replayed): waits as reserve.lua's reply asks (other gateways' sold-out
 * leases, its item 4) and for the replicas, then publishes VoucherReserved
 * and answers 201 once Kafka has it. reply is borrowed for the call.
 */
void gw_reserve_publish_after(gw_reserve_t *x, const gw_redis_reply_t *reply);

/*
 * The VoucherReserved of x's use, at at_ms (reservedAt): the one builder of
 * the event for both modes, published to Kafka in flash mode and written to
 * the outbox by dr_reserve in direct mode.
 */
void gw_reserve_event(const gw_reserve_t *x, int64_t at_ms, vc_event_t *ev);

/*
 * Runs then(x) after ms on a timer of its own (not in the request's arena:
 * libuv frees a handle only in its close callback, which the arena may not
 * outlive). Returns 0, or -1 when memory runs out (then never runs).
 */
int gw_reserve_timer(gw_reserve_t *x, uint64_t ms, void (*then)(void *x));

/* ---- gw_reserve_answer.c: each answers x's request and ends the flow (GW_RESERVE_DONE) ---- */

/* The code as this request's log lines show it: a campaign's, or a guess, as a keyed hash. */
const char *gw_reserve_log_code(const gw_reserve_t *x, char out[VC_LOG_CODE_MAX]);

/* Logs an infrastructure failure once, with the ids, and answers rc (503 for most). */
void gw_reserve_fail(gw_reserve_t *x, int rc, const char *what);

/* Answers rc's error with detail (NULL: the code's message). */
void gw_reserve_refuse(gw_reserve_t *x, int rc, const char *detail);

/* A rejection of an order that claimed: releases the claim, then answers as gw_reserve_refuse(). */
void gw_reserve_reject(gw_reserve_t *x, int rc, const char *detail);

/* A new order that may not take a use (x->refusal: the rules' rejection, or sold out). */
void gw_reserve_refuse_new(gw_reserve_t *x);

/* reserve.lua's -2 (ALREADY_USED): a campaign's code marks a failed try, then the claim goes. */
void gw_reserve_already_used(gw_reserve_t *x, const gw_redis_reply_t *reply);

/* The same orderId with another orderAmount than the one that took the use (409). */
void gw_reserve_other_amount(gw_reserve_t *x, const gw_redis_reply_t *reply);

/*
 * The same orderId with another orderAmount, amount (its text, len bytes),
 * than the one that took the use (409 ORDER_CONFLICT naming it).
 */
void gw_reserve_other_amount_was(gw_reserve_t *x, const char *amount, size_t len);

/* The orderId is this voucher's, another customer's (409 ORDER_CONFLICT). */
void gw_reserve_other_customer(gw_reserve_t *x);

/* The orderId was reserved with another voucher code (409 ORDER_CONFLICT). */
void gw_reserve_other_code(gw_reserve_t *x);

/* 201 with the reservation (replayed: the order was known); the figures are x's. */
void gw_reserve_created(gw_reserve_t *x);

#endif
