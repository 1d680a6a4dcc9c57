/*
 * Prints one event of each type as the codec encodes it, one per line, for
 * check_contracts.py to hold against proto/event-v1.schema.json.
 */
#include <stdio.h>
#include <string.h>

#include "vc_event.h"

int main(void)
{
    /*
     * The second confirm carries the final figures of a confirm given a total;
     * the last reservation is a campaign's (campaignId).
     */
    static const vc_event_type_t types[] = {VC_EV_RESERVED, VC_EV_CONFIRMED, VC_EV_CONFIRMED,
                                            VC_EV_RELEASED, VC_EV_RESERVED};
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        vc_event_t ev = {0};
        ev.type = types[i];
        ev.version = VC_EVENT_VERSION;
        strcpy(ev.code, "FLASH-100_X");
        ev.customer_id = 9007199254740993LL; /* beyond a double's exact integers */
        strcpy(ev.order_id, "order:42~!");
        ev.discount_amount = 100000;
        ev.order_amount = 250000;
        ev.at_ms = 1795975082123;
        ev.held_until_ms = 1795975982123;
        strcpy(ev.reason, "EXPIRED");
        ev.has_amounts = i == 2;
        ev.campaign_id = i == 4 ? 9007199254740993LL : 0;
        if (vc_event_encode(&ev, buf, sizeof(buf), &len, err, sizeof(err)) != 0) {
            fprintf(stderr, "event_samples: %s\n", err);
            return 1;
        }
        puts(buf);
    }
    return 0;
}
