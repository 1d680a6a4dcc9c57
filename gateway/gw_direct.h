/*
 * Direct mode's PostgreSQL calls (proto/direct-mode.md): a direct voucher's
 * quote, reservation, confirm and cancel are each decided by one call of a
 * function of deploy/sql/functions.sql (dr_quote, dr_reserve, dr_confirm,
 * dr_cancel), SECURITY DEFINER, the only way the gateway's role may write a
 * redemption. Each call below is blocking libpq, for the threadpool
 * (gw_pg_run()): conn is the pool's, borrowed for the call.
 *
 * The functions answer with a word (`answer`); gw_direct_answer_parse()
 * names it once here, and gw_direct_answer_rc() gives the result code flash
 * mode answers the same situation with, so that both modes share one
 * mapping to HTTP (gw_status_for()). The flows that call these live beside
 * their flash forms: gw_reserve_direct.c, gw_holds_direct.c, gw_quote_direct.c.
 */
#ifndef GW_DIRECT_H
#define GW_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "gw_answer.h"
#include "vc_error.h"
#include "vc_event.h"

struct pg_conn; /* libpq's PGconn */

/*
 * X(name, the function's word, the result code of the answer (0: done or
 * replayed)). Every word a dr_* function answers; a word not listed is a
 * protocol error, never guessed at.
 */
#define GW_DIRECT_ANSWER_MAP(X)                                                                    \
    X(RESERVED, "RESERVED", 0)                                                                     \
    X(CONFIRMED, "CONFIRMED", 0)                                                                   \
    X(RELEASED, "RELEASED", 0)                                                                     \
    X(RETRY, "RETRY", 0)                                                                           \
    X(OK, "OK", 0)                                                                                 \
    X(ORDER_CONFLICT, "ORDER_CONFLICT", VC_E_ORDER_CONFLICT)                                       \
    X(HOLD_EXPIRED, "HOLD_EXPIRED", VC_E_HOLD_EXPIRED)                                             \
    X(OUT_OF_STOCK, "OUT_OF_STOCK", VC_E_OUT_OF_STOCK)                                             \
    X(ALREADY_USED, "ALREADY_USED", VC_E_ALREADY_USED)                                             \
    X(ALREADY_CONFIRMED, "ALREADY_CONFIRMED", GW_E_CONFIRMED_OTHER)                                \
    X(INACTIVE, "NOT_ELIGIBLE:INACTIVE", VC_E_INACTIVE)                                            \
    X(NOT_STARTED, "NOT_ELIGIBLE:NOT_STARTED", VC_E_NOT_STARTED)                                   \
    X(EXPIRED, "NOT_ELIGIBLE:EXPIRED", VC_E_EXPIRED)                                               \
    X(ORDER_TOO_SMALL, "NOT_ELIGIBLE:ORDER_TOO_SMALL", VC_E_ORDER_TOO_SMALL)                       \
    X(NOT_FOUND, "NOT_FOUND", VC_E_NOT_FOUND)                                                      \
    X(NOT_DIRECT, "NOT_DIRECT", VC_ERR_UNAVAILABLE)

typedef enum {
    GW_DIRECT_FAILED = 0, /* no answer: the call failed, or answered a word not listed */
#define GW_DIRECT_ENUM(name, word, rc) GW_DIRECT_##name,
    GW_DIRECT_ANSWER_MAP(GW_DIRECT_ENUM)
#undef GW_DIRECT_ENUM
        GW_DIRECT_ANSWERS,
} gw_direct_answer_t;

/* The answer a function's word names, or GW_DIRECT_FAILED for NULL or a word not listed. Pure. */
gw_direct_answer_t gw_direct_answer_parse(const char *word);

/* The word of an answer, as the function says it ("failed" for GW_DIRECT_FAILED). Pure. */
const char *gw_direct_answer_word(gw_direct_answer_t a);

/*
 * The result code flash mode answers the same situation with: 0 for a use
 * taken, confirmed, released or replayed, a VC_E_* (or GW_E_CONFIRMED_OTHER)
 * for a refusal, VC_ERR_UNAVAILABLE for NOT_DIRECT (the rules said direct and
 * the row says flash: the cache is stale, retry) and VC_ERR_PROTOCOL for
 * GW_DIRECT_FAILED. Pure.
 */
int gw_direct_answer_rc(gw_direct_answer_t a);

/*
 * The answer whose result code is rc (a refusal: rc > 0), for counting a
 * refusal the gateway gave from the rules alone as the function would have
 * answered it; GW_DIRECT_FAILED for any other rc. Pure.
 */
gw_direct_answer_t gw_direct_answer_for(int rc);

/* What a call answered: the answer and the figures the function gave with it. */
typedef struct {
    gw_direct_answer_t answer;
    int has_discount, has_amount, has_held_until, has_remaining;
    int64_t discount;      /* minor units: the reservation's, or what it is confirmed at */
    int64_t amount;        /* the orderAmount of that figure (the row's, for a conflict) */
    int64_t held_until_ms; /* the hold's heldUntil */
    int64_t remaining;     /* uses left (reserve, quote) */
    char status[16];       /* dr_confirm, dr_cancel: the row's status ("" when none) */
    int64_t used;          /* quote: the customer's live uses of the voucher */
    int64_t pg_us;         /* how long the call took, for voucher_gateway_direct_pg_seconds */
} gw_direct_result_t;

/* dr_reserve's arguments: the request and the gateway's quote and times. Borrowed. */
typedef struct {
    const char *code, *order_id;
    int64_t customer_id, order_amount, discount, now_ms, held_until_ms;
    const char *event; /* VoucherReserved as flash mode publishes it (vc_event_encode()) */
} gw_direct_reserve_t;

/*
 * SELECT * FROM dr_reserve(...): one transaction that takes a use, or answers
 * from the orderId's row, or refuses leaving nothing. Returns 0 with *out
 * set (its answer may be a refusal), or a negative VC_ERR_* with err set
 * (VC_ERR_PROTOCOL for an answer not listed): the transaction may then have
 * committed or not.
 */
int gw_direct_reserve(struct pg_conn *conn, const gw_direct_reserve_t *in, gw_direct_result_t *out,
                      char *err, size_t errlen);

/*
 * Whether code's redemptions hold order_id (a read, no lock): the probe of an
 * order the cached rules refuse, as flash mode asks Redis whether it is a
 * retry before it answers the refusal. Returns 0 with *known set, or a
 * negative VC_ERR_* with err set.
 */
int gw_direct_known(struct pg_conn *conn, const char *code, const char *order_id, int *known,
                    char *err, size_t errlen);

/* An order's row, as the events of its confirm and cancel need it. */
typedef struct {
    int found;
    int64_t customer_id, order_amount, discount;
} gw_direct_order_t;

/*
 * Reads code's order_id: its customer and reservation's figures, which the
 * VoucherConfirmed and VoucherReleased events carry and the request does not
 * (a customer's row never changes customer, so this read may come before the
 * call that locks it). Returns 0 with *out set (found 0: no such order of
 * code), or a negative VC_ERR_* with err set.
 */
int gw_direct_order(struct pg_conn *conn, const char *code, const char *order_id,
                    gw_direct_order_t *out, char *err, size_t errlen);

/*
 * SELECT * FROM dr_confirm(code, order_id, total, price, now_ms, event): with
 * has_total, the order's final total and the rules' discount for it
 * (has_price 0: the rules refuse it). Returns as gw_direct_reserve().
 */
int gw_direct_confirm(struct pg_conn *conn, const char *code, const char *order_id, int has_total,
                      int64_t total, int has_price, int64_t price, int64_t now_ms,
                      const char *event, gw_direct_result_t *out, char *err, size_t errlen);

/* SELECT * FROM dr_cancel(code, order_id, now_ms, event). Returns as gw_direct_reserve(). */
int gw_direct_cancel(struct pg_conn *conn, const char *code, const char *order_id, int64_t now_ms,
                     const char *event, gw_direct_result_t *out, char *err, size_t errlen);

/*
 * dr_quote(code, now_ms) with, in the same statement, the customer's live
 * uses of code (rows not RELEASED, as the per-customer trigger counts them):
 * out->remaining and out->used. Reads only. Returns as gw_direct_reserve().
 */
int gw_direct_quote(struct pg_conn *conn, const char *code, int64_t customer_id, int64_t now_ms,
                    gw_direct_result_t *out, char *err, size_t errlen);

#endif
