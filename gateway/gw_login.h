/*
 * Failed admin logins, limited per client address (issue 42, item 8;
 * deploy/README.md, "Admin logins"). Each address has a bucket of
 * VOUCHER_ADMIN_LOGIN_TRIES tries that refills evenly over
 * VOUCHER_ADMIN_LOGIN_WINDOW; a request to an admin route whose token is
 * refused (401) spends one, and an address whose bucket is empty gets 429
 * with Retry-After whatever its token: so a guesser learns nothing more, and
 * a right token waits at most one refill (window / tries). A right token
 * spends nothing. The token compare stays constant-time (gw_auth.h); this
 * only bounds how many compares one address gets.
 *
 * The buckets live in Redis (guard:{login:ADDRESS}, common/lua/admin_login.lua,
 * proto/redis-keys.md "Admin logins"), shared by every gateway as the
 * guessing limits' are: N gateways, or a gateway restarted, give a guesser
 * no more tries than one. A wrong token takes its try in the same script step
 * that checks for it, so wrong tokens sent together cannot all pass before
 * any is paid for; a right token only checks, and writes nothing. The token
 * is compared before Redis is asked (the script's op depends on it), but the
 * answer to an empty bucket is 429 for both ops, by the same path in the
 * script: it tells nothing of the token.
 *
 * When Redis refuses the script or does not answer in time (unreachable,
 * late, full at maxmemory, fenced), the request is decided by this process's
 * own buckets, the fallback, instead of refused: every failure this process
 * saw is counted there as well (a fixed table of GW_LOGIN_SLOTS, an address's
 * slot chosen by the process's keyed hash of it, an address that finds its
 * slot taken by another replaces it). So during an outage the limit is the
 * one before the buckets moved to Redis (per process), never off, and the
 * admin routes stay open to the operators who need them then (the runbook's
 * repairs); counted in voucher_gateway_admin_login_fallback_total and said
 * in the log. The probes and /metrics never come here (vc_admin_respond()
 * answers them first), so a locked address or a Redis outage never refuses
 * them.
 */
#ifndef GW_LOGIN_H
#define GW_LOGIN_H

#include <stdint.h>

#include "gw_app.h"
#include "gw_http.h"

#define GW_LOGIN_SLOTS 4096

/*
 * Sets the limit: tries per window_ms (tries 0: off, every check passes).
 * Registers voucher_gateway_admin_logins_refused_total and
 * voucher_gateway_admin_login_fallback_total. Call once, before the workers
 * start.
 */
void gw_login_configure(int tries, int64_t window_ms);

/* The decision of gw_login_try(): wait_ms 0, the token may be tried; else 429 for that long. */
typedef void (*gw_login_cb)(void *arg, int64_t wait_ms);

#define GW_LOGIN_GO 0      /* decided now: *wait_ms is set and cb never runs */
#define GW_LOGIN_PENDING 1 /* cb runs exactly once later (also on shutdown) */

/*
 * Whether the client of req (its address as the guessing limits name it:
 * gw_guard_address()) may try a token now; right says whether req's token
 * is an admin's. A wrong token that may be tried takes one of the address's
 * tries (its answer is then 401); a right one spends nothing. The wait is 0
 * when the token may be tried, else the ms until a try refills; a wait is
 * counted in voucher_gateway_admin_logins_refused_total. Returns GW_LOGIN_GO
 * with *wait_ms set (the limit off, req without an address, or Redis not
 * reachable now: the fallback), or GW_LOGIN_PENDING: cb(arg, wait_ms) runs
 * once, on app's loop. app and req are borrowed until the decision.
 */
int gw_login_try(gw_app_t *app, gw_request_t *req, int right, gw_login_cb cb, void *arg,
                 int64_t *wait_ms);

/* ---- pure: one bucket of the fallback, for the tests ---- */

/*
 * An address's bucket as the time its debt is paid off: each failure adds
 * window / tries to it (from now_ms when it lies in the past), and a try is
 * left while the debt is at most window - window / tries. (The Redis bucket
 * keeps the guessing limits' level instead, bucket_level.lua: the same
 * refill, evenly over the window.)
 */
int64_t gw_login_bucket_wait_ms(int64_t debt_until_ms, int tries, int64_t window_ms,
                                int64_t now_ms);
int64_t gw_login_bucket_spend(int64_t debt_until_ms, int tries, int64_t window_ms, int64_t now_ms);

#endif
