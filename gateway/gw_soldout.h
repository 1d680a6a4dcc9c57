/*
 * The sold-out marks: which vouchers Redis last said were sold out, with a
 * snapshot of the orderIds Redis knew for the voucher at that moment, so that
 * a new order is answered OUT_OF_STOCK from memory (no Redis round trip) and
 * a retry of a known order still goes to reserve.lua and gets its own answer
 * (201 replayed). proto/redis-keys.md, "Sold out without a round trip", says
 * why this is safe with several gateways: each snapshot holds a lease in
 * voucher:{CODE}:soldout, and no other gateway answers 201 for the voucher
 * before the leases taken before its use have run out.
 *
 * The marks are kept for the whole process (every worker reads and writes
 * the same table): a use given back or taken on any worker clears the mark of
 * its code on all of them, at once. The table has a fixed number of slots,
 * chosen by a keyed hash of the code: a code marked in a slot another code
 * holds takes the slot over. That only costs the other code a script run,
 * never a wrong answer, and the key keeps anyone from choosing codes that
 * share a slot. Every function may be called from any thread.
 */
#ifndef GW_SOLDOUT_H
#define GW_SOLDOUT_H

#include <stddef.h>
#include <stdint.h>

/* How much longer a lease in Redis lasts than the mark it covers (clocks, scheduling). */
#define GW_SOLDOUT_LEASE_MARGIN_MS 250
/* The longest lease any gateway takes: the largest VOUCHER_SOLDOUT_RECHECK (1 h) plus the margin. */
#define GW_SOLDOUT_LEASE_MAX_MS (3600000 + GW_SOLDOUT_LEASE_MARGIN_MS)

/* gw_soldout_order() answers. */
enum {
    GW_SOLDOUT_NO = 0, /* not marked: reserve.lua decides */
    GW_SOLDOUT_NEW,    /* marked, and the orderId is not in the snapshot: OUT_OF_STOCK */
    GW_SOLDOUT_KNOWN,  /* marked, and the orderId is in the snapshot: reserve.lua "known" */
};

/* What a request that takes the snapshot must bring back to gw_soldout_answer(). */
typedef struct {
    unsigned clears; /* the slot's clear count when the snapshot was asked for */
    int64_t sent_ms; /* monotonic, before the script was sent */
} gw_soldout_ticket_t;

/*
 * Whether code is marked sold out at mono_now_ms, and if so whether order_id
 * was in the snapshot of its orders: GW_SOLDOUT_NO, _NEW or _KNOWN.
 */
int gw_soldout_order(const char *code, const char *order_id, int64_t mono_now_ms);

/* Whether code is marked sold out at mono_now_ms (the quote's answer). */
int gw_soldout_is(const char *code, int64_t mono_now_ms);

/*
 * reserve.lua said code is sold out, without a snapshot: returns 1 with *t
 * filled when this request should run the script again asking for one (no
 * other request of the process is on its way with the same question), 0
 * otherwise. A 1 must be followed by exactly one gw_soldout_answer().
 */
int gw_soldout_ask(const char *code, int64_t mono_now_ms, gw_soldout_ticket_t *t);

/*
 * The answer to a gw_soldout_ask(): ids (len bytes, orderIds separated by
 * '\n', borrowed) when reserve.lua said sold out and took the snapshot, NULL
 * for any other outcome. With ids, code is marked until t->sent_ms +
 * recheck_ms, unless a use came back or was taken since the ticket was given
 * (the snapshot may miss an order then). Returns 0, or VC_ERR_NOMEM (nothing
 * marked).
 */
int gw_soldout_answer(const char *code, const gw_soldout_ticket_t *t, int64_t recheck_ms,
                      const char *ids, size_t len);

/*
 * Forgets the sold-out mark of code (a use came back, or this process took
 * one) on every worker: a mark is void once the clear count of its code's
 * slot moved on.
 */
void gw_soldout_clear(const char *code);

/* This process's lease token (16 hex digits, random), for reserve.lua's ARGV[9]. */
const char *gw_soldout_token(void);

/* Test helper: marks code until mono_until_ms with the snapshot ids (as in gw_soldout_answer()). */
int gw_soldout_mark(const char *code, int64_t mono_until_ms, const char *ids, size_t len);

#endif
