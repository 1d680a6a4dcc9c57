/*
 * Failed admin logins, limited per client address (issue 42, item 8;
 * deploy/README.md, "Admin logins"). Each address has a bucket of
 * VOUCHER_ADMIN_LOGIN_TRIES tries that refills evenly over
 * VOUCHER_ADMIN_LOGIN_WINDOW; a request to an admin route whose token is
 * refused (401) spends one, and an address whose bucket is empty gets 429
 * with Retry-After before its token is looked at, whatever the token: so a
 * guesser learns nothing more, and a right token waits at most one refill
 * (window / tries). A right token spends nothing. The token compare stays
 * constant-time (gw_auth.h); this only bounds how many compares one address
 * gets.
 *
 * The buckets live in the process (the admin address is served by one
 * worker): a fixed table of GW_LOGIN_SLOTS, an address's slot chosen by the
 * process's keyed hash of it, an address that finds its slot taken by
 * another replaces it. Memory stays bounded whatever the addresses; with
 * many addresses the limit is per address as long as they do not share a
 * slot, which a guesser cannot choose.
 */
#ifndef GW_LOGIN_H
#define GW_LOGIN_H

#include <stdint.h>

#include "gw_http.h"

#define GW_LOGIN_SLOTS 4096

/*
 * Sets the limit: tries per window_ms (tries 0: off, every check passes).
 * Registers voucher_gateway_admin_logins_refused_total. Call once, before the
 * workers start.
 */
void gw_login_configure(int tries, int64_t window_ms);

/*
 * How long the client of req (its address as the guessing limits name it:
 * gw_guard_address()) must wait before it may try a token at now_ms: 0 it
 * may now, else the ms until a try refills. A wait is counted in the metric.
 */
int64_t gw_login_wait_ms(const gw_request_t *req, int64_t now_ms);

/* The token req carried was refused at now_ms: its client's bucket loses a try. */
void gw_login_failed(const gw_request_t *req, int64_t now_ms);

/* ---- pure: one bucket, for the tests ---- */

/*
 * An address's bucket as the time its debt is paid off: each failure adds
 * window / tries to it (from now_ms when it lies in the past), and a try is
 * left while the debt is at most window - window / tries.
 */
int64_t gw_login_bucket_wait_ms(int64_t debt_until_ms, int tries, int64_t window_ms,
                                int64_t now_ms);
int64_t gw_login_bucket_spend(int64_t debt_until_ms, int tries, int64_t window_ms, int64_t now_ms);

#endif
