#include "vc_event.h"
#include "vc_jout.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_time.h"

#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

static const char *const type_names[] = {NULL, "VoucherReserved", "VoucherConfirmed",
                                         "VoucherReleased"};

const char *vc_event_type_name(vc_event_type_t type)
{
    if (type < VC_EV_RESERVED || type > VC_EV_RELEASED)
        return NULL;
    return type_names[type];
}

int vc_code_valid(const char *s, size_t len)
{
    if (len < 1 || len > VC_CODE_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int vc_order_id_valid(const char *s, size_t len)
{
    /* The refused characters below 0x40, as bits: one test a character, not four. */
    static const uint64_t refused = 1ULL << '/' | 1ULL << '?' | 1ULL << '#' | 1ULL << '%';

    if (len < 1 || len > VC_ORDER_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned c = (unsigned char)s[i];
        /* Printable ASCII is 0x21..0x7e; below 0x21 wraps around above 0x5d. */
        if (c - 0x21u > 0x7eu - 0x21u || (c < 64 && (refused >> c & 1)))
            return 0;
    }
    return 1;
}

/* 10000-01-01T00:00:00Z, the first instant a four-digit year cannot name. */
#define VC_EVENT_TIME_END_MS 253402300800000LL

static int check_event(const vc_event_t *ev, char *err, size_t errlen)
{
    if (ev->campaign_id < 0) {
        snprintf(err, errlen, "field \"campaignId\" must be a positive integer");
        return VC_ERR_INVALID;
    }
    if (!vc_event_type_name(ev->type)) {
        snprintf(err, errlen, "unknown event type %d", (int)ev->type);
        return VC_ERR_INVALID;
    }
    if (!vc_code_valid(ev->code, strlen(ev->code))) {
        snprintf(err, errlen, "field \"code\" must match [A-Z0-9_-]{1,32}");
        return VC_ERR_INVALID;
    }
    if (!vc_order_id_valid(ev->order_id, strlen(ev->order_id))) {
        snprintf(err, errlen, "field \"orderId\" must be 1..64 printable characters");
        return VC_ERR_INVALID;
    }
    if (ev->customer_id <= 0) {
        snprintf(err, errlen, "field \"customerId\" must be a positive integer");
        return VC_ERR_INVALID;
    }
    if ((ev->type == VC_EV_RESERVED || (ev->type == VC_EV_CONFIRMED && ev->has_amounts)) &&
        (ev->discount_amount < 0 || ev->order_amount < 0)) {
        snprintf(err, errlen, "amounts must not be negative");
        return VC_ERR_INVALID;
    }
    /*
     * Times from 1970 to 9999 (UTC): RFC 3339 with an offset can name an
     * instant outside them (0000-01-01T00:00:00+01:00), which the encoder
     * could not write back as it was read: a heldUntil before 1970 was
     * dropped, a year 10000 written with five digits (found by
     * tests/fuzz/fuzz_event).
     */
    if (ev->at_ms < 0 || ev->at_ms >= VC_EVENT_TIME_END_MS || ev->held_until_ms < 0 ||
        ev->held_until_ms >= VC_EVENT_TIME_END_MS) {
        snprintf(err, errlen, "times must be from 1970 to 9999 (UTC)");
        return VC_ERR_INVALID;
    }
    if (ev->type == VC_EV_RELEASED && ev->reason[0] == '\0') {
        snprintf(err, errlen, "field \"reason\" is required for VoucherReleased");
        return VC_ERR_INVALID;
    }
    return 0;
}

/*
 * Written straight into buf (vc_jout.h): the gateway encodes one event per
 * reservation, and the generator's allocation and printf of the times showed
 * in its profile. The text is the generator's, key for key and byte for byte
 * (tests/unit/test_common.c compares them); vc_event_decode() reads either.
 */
int vc_event_encode(const vc_event_t *ev, char *buf, size_t cap, size_t *len, char *err,
                    size_t errlen)
{
    static const char *const at_keys[] = {NULL, ",\"reservedAt\":", ",\"confirmedAt\":",
                                          ",\"releasedAt\":"};
    vc_jout_t o;
    int rc;

    if ((rc = check_event(ev, err, errlen)) != 0)
        return rc;
    vc_jout_init(&o, buf, cap);
    vc_jout_lit(&o, "{\"type\":");
    vc_jout_str(&o, vc_event_type_name(ev->type));
    vc_jout_lit(&o, ",\"version\":");
    vc_jout_int(&o, VC_EVENT_VERSION);
    vc_jout_lit(&o, ",\"code\":");
    vc_jout_str(&o, ev->code);
    vc_jout_lit(&o, ",\"customerId\":");
    vc_jout_int(&o, ev->customer_id);
    vc_jout_lit(&o, ",\"orderId\":");
    vc_jout_str(&o, ev->order_id);
    if (ev->type == VC_EV_RESERVED || (ev->type == VC_EV_CONFIRMED && ev->has_amounts)) {
        vc_jout_lit(&o, ",\"discountAmount\":");
        vc_jout_int(&o, ev->discount_amount);
        vc_jout_lit(&o, ",\"orderAmount\":");
        vc_jout_int(&o, ev->order_amount);
    }
    vc_jout_lit(&o, at_keys[ev->type]);
    /* check_event() kept the times within the years the format writes. */
    (void)vc_jout_time(&o, ev->at_ms);
    if (ev->type == VC_EV_RESERVED && ev->held_until_ms > 0) {
        vc_jout_lit(&o, ",\"heldUntil\":");
        (void)vc_jout_time(&o, ev->held_until_ms);
    }
    if (ev->type == VC_EV_RELEASED) {
        vc_jout_lit(&o, ",\"reason\":");
        vc_jout_str(&o, ev->reason);
    }
    if (ev->campaign_id > 0) {
        vc_jout_lit(&o, ",\"campaignId\":");
        vc_jout_int(&o, ev->campaign_id);
    }
    vc_jout_raw(&o, "}", 1);
    if ((*len = vc_jout_end(&o)) == 0) {
        snprintf(err, errlen, "event does not fit in %zu bytes", cap);
        return VC_ERR_TOO_LARGE;
    }
    return 0;
}

int vc_event_decode(const char *json, size_t len, vc_event_t *ev, char *err, size_t errlen)
{
    static const char *const at_keys[] = {NULL, "reservedAt", "confirmedAt", "releasedAt"};
    vc_jdoc_t doc;
    const char *type;
    int64_t version;
    int rc;

    memset(ev, 0, sizeof(*ev));
    if ((rc = vc_jdoc_parse(&doc, json, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_str(&doc, "type", &type, err, errlen)) != 0)
        goto out;
    for (int t = VC_EV_RESERVED; t <= VC_EV_RELEASED; t++)
        if (strcmp(type, type_names[t]) == 0)
            ev->type = (vc_event_type_t)t;
    if (!ev->type) {
        snprintf(err, errlen, "unknown event type \"%.40s\"", type);
        rc = VC_ERR_INVALID;
        goto out;
    }
    if ((rc = vc_jdoc_int(&doc, "version", &version, err, errlen)) != 0)
        goto out;
    if (version != VC_EVENT_VERSION) {
        snprintf(err, errlen, "unsupported event version %lld (this build reads version %d)",
                 (long long)version, VC_EVENT_VERSION);
        rc = VC_ERR_INVALID;
        goto out;
    }
    ev->version = (int)version;
    if ((rc = vc_jdoc_strcpy(&doc, "code", ev->code, sizeof(ev->code), err, errlen)) != 0 ||
        (rc = vc_jdoc_int(&doc, "customerId", &ev->customer_id, err, errlen)) != 0 ||
        (rc = vc_jdoc_strcpy(&doc, "orderId", ev->order_id, sizeof(ev->order_id), err, errlen)) !=
            0 ||
        (rc = vc_jdoc_time(&doc, at_keys[ev->type], 1, &ev->at_ms, err, errlen)) != 0)
        goto out;
    if (ev->type == VC_EV_RESERVED) {
        if ((rc = vc_jdoc_int(&doc, "discountAmount", &ev->discount_amount, err, errlen)) !=
                0 ||
            (rc = vc_jdoc_int(&doc, "orderAmount", &ev->order_amount, err, errlen)) != 0 ||
            (rc = vc_jdoc_time(&doc, "heldUntil", 0, &ev->held_until_ms, err, errlen)) != 0)
            goto out;
    }
    if (ev->type == VC_EV_CONFIRMED &&
        (vc_jdoc_has(&doc, "discountAmount") || vc_jdoc_has(&doc, "orderAmount"))) {
        /* The final figures of a confirm given a total; older confirms carry none. */
        if ((rc = vc_jdoc_int(&doc, "discountAmount", &ev->discount_amount, err, errlen)) !=
                0 ||
            (rc = vc_jdoc_int(&doc, "orderAmount", &ev->order_amount, err, errlen)) != 0)
            goto out;
        ev->has_amounts = 1;
    }
    if (ev->type == VC_EV_RELEASED &&
        (rc = vc_jdoc_strcpy(&doc, "reason", ev->reason, sizeof(ev->reason), err, errlen)) != 0)
        goto out;
    /* Only a campaign's events carry it; every event before campaigns decodes as a voucher's. */
    if (vc_jdoc_has(&doc, "campaignId")) {
        if ((rc = vc_jdoc_int(&doc, "campaignId", &ev->campaign_id, err, errlen)) != 0)
            goto out;
        if (ev->campaign_id < 1) {
            snprintf(err, errlen, "field \"campaignId\" must be a positive integer");
            rc = VC_ERR_INVALID;
            goto out;
        }
    }
    rc = check_event(ev, err, errlen);
out:
    vc_jdoc_free(&doc);
    return rc;
}
