/*
 * The events the gateway publishes to `voucher-events` and the writer applies,
 * version 1, encoded as JSON. proto/events.md and proto/event-v1.schema.json
 * describe the same format for people.
 */
#ifndef VC_EVENT_H
#define VC_EVENT_H

#include <stddef.h>
#include <stdint.h>

#define VC_EVENT_VERSION 1
#define VC_CODE_MAX 32     /* voucher code: [A-Z0-9_-]{1,32} */
#define VC_ORDER_ID_MAX 64 /* orderId: 1..64 bytes */
#define VC_REASON_MAX 16
#define VC_EVENT_MAX_JSON 1024 /* an encoded event always fits this */

typedef enum {
    VC_EV_RESERVED = 1,
    VC_EV_CONFIRMED = 2,
    VC_EV_RELEASED = 3,
} vc_event_type_t;

typedef struct {
    vc_event_type_t type;
    int version;
    char code[VC_CODE_MAX + 1];
    int64_t customer_id;
    char order_id[VC_ORDER_ID_MAX + 1];
    /*
     * Minor units. VoucherReserved: always, the reservation's quote.
     * VoucherConfirmed: only when has_amounts, the final order total the
     * confirm was given and the discount for it (events before that field
     * existed, and confirms without a total, carry none).
     */
    int64_t discount_amount;
    int64_t order_amount;
    int has_amounts; /* VoucherConfirmed: discountAmount and orderAmount are given */
    int64_t at_ms;           /* reservedAt, confirmedAt or releasedAt */
    int64_t held_until_ms;   /* VoucherReserved; 0 when absent */
    char reason[VC_REASON_MAX + 1]; /* VoucherReleased: CANCELLED, EXPIRED, ... */
    /*
     * A campaign's event (proto/campaigns.md): the campaign's id, and code is
     * the one-time code; 0 for a voucher's event (the field is absent).
     */
    int64_t campaign_id;
} vc_event_t;

/* "VoucherReserved" etc., or NULL for a type outside the enum. */
const char *vc_event_type_name(vc_event_type_t type);

/*
 * Encodes ev as one JSON object into buf. Returns 0 and sets *len, or
 * VC_ERR_INVALID if ev is not a valid event (err says why), or
 * VC_ERR_TOO_LARGE if buf is too small (VC_EVENT_MAX_JSON always suffices).
 */
int vc_event_encode(const vc_event_t *ev, char *buf, size_t cap, size_t *len, char *err,
                    size_t errlen);

/*
 * Decodes and validates one event. Returns 0, or VC_ERR_INVALID with err
 * saying what is wrong (malformed JSON, a missing or mistyped field, an
 * unknown type or version). ev is fully overwritten on success. A
 * VoucherConfirmed carries discountAmount and orderAmount both or neither
 * (has_amounts says which): one without the other is malformed.
 */
int vc_event_decode(const char *json, size_t len, vc_event_t *ev, char *err, size_t errlen);

/* Whether s (len bytes) is a valid voucher code: [A-Z0-9_-]{1,32}. */
int vc_code_valid(const char *s, size_t len);

/* Whether s (len bytes) is a valid orderId: 1..64 printable ASCII bytes, none of / ? # %. */
int vc_order_id_valid(const char *s, size_t len);

#endif
