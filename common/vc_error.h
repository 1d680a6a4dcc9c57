/*
 * Result codes shared by every module.
 *
 * A function returns 0 on success, a negative VC_ERR_* when the infrastructure
 * failed (the caller forwards it unchanged), or a positive VC_E_* when the
 * domain said no (the caller must handle it: it is an answer, not a failure).
 */
#ifndef VC_ERROR_H
#define VC_ERROR_H

/* X(name, value, message) */
#define VC_ERRNO_MAP(X)                                                                            \
    X(ERR_NOMEM, -1, "out of memory")                                                              \
    X(ERR_IO, -2, "input/output error")                                                            \
    X(ERR_TIMEOUT, -3, "timed out")                                                                \
    X(ERR_UNAVAILABLE, -4, "backend unavailable")                                                  \
    X(ERR_PROTOCOL, -5, "unexpected reply from backend")                                           \
    X(ERR_INVALID, -6, "invalid argument")                                                         \
    X(ERR_UNKNOWN_OUTCOME, -7, "outcome unknown")                                                  \
    X(ERR_SHUTDOWN, -8, "shutting down")                                                           \
    X(ERR_TOO_LARGE, -9, "too large")                                                              \
    X(ERR_FENCED, -10, "redis not verified by the reconciler since it started (restart fence)")    \
    X(ERR_STALE_LEADER, -11, "a newer reconciler holds the lock (fencing token refused)")          \
    X(ERR_LEADER_UNMARKED, -12, "reconciler's mark lost since its pass read the keys")             \
    X(E_OUT_OF_STOCK, 1, "no uses left")                                                           \
    X(E_ALREADY_USED, 2, "customer reached the per-customer limit")                                \
    X(E_NOT_FOUND, 3, "no such voucher")                                                           \
    X(E_ORDER_CONFLICT, 4, "order already reserved by another customer or voucher")                \
    X(E_NOT_STARTED, 5, "voucher not valid yet")                                                   \
    X(E_EXPIRED, 6, "voucher expired")                                                             \
    X(E_ORDER_TOO_SMALL, 7, "order amount below the voucher's minimum")                            \
    X(E_REPLAYED, 8, "request already applied")                                                    \
    X(E_HOLD_EXPIRED, 9, "hold was released or expired")                                           \
    X(E_NOT_LOADED, 10, "voucher not loaded in redis")                                             \
    X(E_INACTIVE, 11, "voucher switched off")                                                      \
    X(E_CODE_TAKEN, 12, "a voucher or a campaign's one-time code has this code")

enum {
#define VC_ERR_ENUM(name, value, msg) VC_##name = (value),
    VC_ERRNO_MAP(VC_ERR_ENUM)
#undef VC_ERR_ENUM
};

/* Returns a human-readable message for a result code; never NULL. */
const char *vc_strerror(int code);

/*
 * Always-on assertion for broken invariants (never for bad input, which gets a
 * clear reply instead). Logs the failed expression and aborts.
 */
#define VC_ASSERT(expr)                                                                            \
    do {                                                                                           \
        if (!(expr))                                                                               \
            vc_assert_fail(#expr, __FILE__, __LINE__);                                             \
    } while (0)

_Noreturn void vc_assert_fail(const char *expr, const char *file, int line);

#endif
