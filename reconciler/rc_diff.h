/*
 * The reconciler's verdict on one voucher: does Redis agree with PostgreSQL?
 * Pure: numbers in, a verdict out, so every case is unit-tested.
 */
#ifndef RC_DIFF_H
#define RC_DIFF_H

#include <stdint.h>

#include "vc_event.h"

typedef enum {
    RC_CONSISTENT = 0, /* Redis remaining equals total_limit - used_count */
    RC_NOT_LOADED,     /* Redis has no keys for it: loaded on its first request */
    RC_BEHIND,         /* Redis is ahead by no more than the events still in flight */
    RC_DRIFTED,        /* a difference in-flight events cannot explain */
} rc_verdict_t;

typedef struct {
    char code[VC_CODE_MAX + 1];
    int64_t total_limit;
    int64_t used_count;     /* voucher.used_count */
    int64_t live_rows;      /* redemptions not RELEASED: must equal used_count */
    int redis_loaded;       /* whether voucher:{CODE}:remaining exists */
    int64_t redis_remaining;
    int64_t in_flight;      /* events published but not yet applied (consumer lag), or -1 unknown */
} rc_voucher_state_t;

/*
 * Judges one voucher. PostgreSQL allows total_limit - used_count more uses;
 * Redis may show fewer while reservations are still on their way to the
 * writer (BEHIND), never more (that would let the gateway oversell) and
 * never fewer by more than what is in flight.
 */
rc_verdict_t rc_judge(const rc_voucher_state_t *s);

/* "consistent", "not loaded", "behind", "DRIFTED". */
const char *rc_verdict_name(rc_verdict_t v);

#endif
