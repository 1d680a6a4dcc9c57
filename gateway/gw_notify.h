/*
 * Rule changes between gateways: a gateway that changed a voucher (PATCH,
 * POST /vouchers) publishes its code on the Redis channel voucher-rules; every
 * gateway listens there and voids the code's cached rules on all its workers
 * (gw_rules_changed). So a change reaches every gateway within a Redis round
 * trip. A message can be lost (a gateway not connected when it was sent):
 * after each (re)connection the listener voids every cached rule once, and
 * the rules cache's ttl bounds the rest (deploy/README.md, "The rules
 * cache").
 */
#ifndef GW_NOTIFY_H
#define GW_NOTIFY_H

#include <stddef.h>

#define GW_NOTIFY_CHANNEL "voucher-rules"

typedef struct gw_notify gw_notify_t;

/*
 * Starts the listener: a thread of its own with a blocking connection to
 * redis_url (copied), reconnecting with a pause when Redis goes away. With a
 * redis+cluster:// URL it subscribes on one seed node and moves to the next
 * seed when that node goes away (a PUBLISH on any node reaches them all).
 * Returns it (gw_notify_stop() ends it), or NULL with err set.
 */
gw_notify_t *gw_notify_start(const char *redis_url, char *err, size_t errlen);

/* Stops and joins the listener (within about 200 ms), then frees it. NULL is a no-op. */
void gw_notify_stop(gw_notify_t *n);

#endif
