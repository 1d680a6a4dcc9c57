/*
 * The reservation API as vc-load sees it: the request it sends and what it
 * reads back from a response body. Pure functions, no I/O, so they are
 * unit-tested without a server.
 */
#ifndef VL_PROTO_H
#define VL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define VL_ERROR_MAX 32 /* longest error code kept from a body, NUL included */

/* What a response body says beyond its status line. */
typedef struct {
    char error[VL_ERROR_MAX]; /* "OUT_OF_STOCK", or "" when the body has no "error" */
    int replayed;             /* 1 when the body has "replayed": true */
} vl_answer_t;

/*
 * Writes a complete HTTP/1.1 keep-alive request for
 * POST /vouchers/{code}/reservations with the JSON body
 * {"customerId":..,"orderId":"..","orderAmount":..} into buf. host is the
 * Host header ("127.0.0.1:15410"); token, when neither NULL nor empty, is
 * sent as "Authorization: Bearer <token>"; code is percent-encoded into the
 * path and order_id escaped into the body; with forwarded, an
 * X-Forwarded-For names the customer's own address (10.x.y.z from its id),
 * as an order service that the gateway trusts forwards the shopper's.
 * Returns the length, or 0 if it did not fit.
 */
size_t vl_request_format(char *buf, size_t cap, const char *host, const char *token,
                         const char *code, int64_t customer_id, const char *order_id,
                         int64_t order_amount, int forwarded);

/*
 * Reads "error" and "replayed" from a JSON body (len bytes). Returns 0, or
 * VC_ERR_INVALID when the body is not a JSON object; out is always filled
 * (empty when nothing could be read). A too-long error code is cut.
 */
int vl_answer_parse(const char *body, size_t len, vl_answer_t *out);

/*
 * Parses a Retry-After value given in seconds ("2"). Returns the delay in
 * milliseconds, or -1 when it is not a number of seconds (HTTP dates are not
 * supported: the gateway sends seconds).
 */
int64_t vl_retry_after_ms(const char *value, size_t len);

#endif
