/*
 * libFuzzer harness of the event decoder (common/vc_event.c): any bytes a
 * topic may hold. What decodes is a valid event, so it must encode, and
 * decode again to the same event.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_event.h"

static void same(const vc_event_t *a, const vc_event_t *b)
{
    if (a->type != b->type || a->version != b->version || strcmp(a->code, b->code) != 0 ||
        a->customer_id != b->customer_id || strcmp(a->order_id, b->order_id) != 0 ||
        a->discount_amount != b->discount_amount || a->order_amount != b->order_amount ||
        a->at_ms != b->at_ms || a->held_until_ms != b->held_until_ms ||
        strcmp(a->reason, b->reason) != 0) {
        fprintf(stderr, "fuzz_event: an event changed through encode and decode\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_event_t ev, again;
    char err[256], json[VC_EVENT_MAX_JSON];
    size_t len;

    if (vc_event_decode((const char *)data, size, &ev, err, sizeof(err)) != 0)
        return 0;
    if (vc_event_encode(&ev, json, sizeof(json), &len, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_event: a decoded event does not encode: %s\n", err);
        abort();
    }
    if (vc_event_decode(json, len, &again, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_event: an encoded event does not decode: %s\n%.*s\n", err,
                (int)len, json);
        abort();
    }
    same(&ev, &again);
    return 0;
}
