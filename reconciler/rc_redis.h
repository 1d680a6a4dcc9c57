/* The reconciler's Redis adapter: a blocking connection with timeouts. */
#ifndef RC_REDIS_H
#define RC_REDIS_H

#include <stddef.h>
#include <stdint.h>

typedef struct rc_redis rc_redis_t;

/*
 * Connects to url ("redis://host:port/db"), timing out connect and every
 * command after timeout_ms. Returns the connection (the caller owns it:
 * rc_redis_free) or NULL with err set.
 */
rc_redis_t *rc_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen);
void rc_redis_free(rc_redis_t *r);

/*
 * Reads voucher:{code}:remaining. Returns 0 with *loaded 1 and *remaining set,
 * 0 with *loaded 0 when the key is absent, or a negative error with err set.
 */
int rc_redis_remaining(rc_redis_t *r, const char *code, int *loaded, int64_t *remaining, char *err,
                       size_t errlen);

#endif
