/*
 * What a worker's request handlers share: the settings and the worker's
 * adapters, the route dispatch, and the helpers that turn result codes into
 * answers. The flows themselves live in gw_reserve*.c and gw_holds.c.
 */
#ifndef GW_APP_H
#define GW_APP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gw_config.h"
#include "gw_http.h"
#include "gw_kafka.h"
#include "gw_pgrun.h"
#include "gw_redis.h"
#include "gw_rules.h"
#include "vc_admin.h"
#include "vc_audit.h"
#include "vc_model.h"

/* The registered Redis scripts, in gw_app_scripts[] order. */
enum {
    /* A campaign's code (gw_campaign_redeem.c). */
    GW_SCRIPT_CAMPAIGN_RESERVE,
    GW_SCRIPT_CAMPAIGN_FORGET,
    GW_SCRIPT_CAMPAIGN_CONFIRM,
    GW_SCRIPT_CAMPAIGN_RELEASE_BEGIN,
    GW_SCRIPT_CAMPAIGN_RELEASE_FINISH,
    GW_SCRIPT_RESERVE,
    GW_SCRIPT_FORGET,
    GW_SCRIPT_CONFIRM,
    GW_SCRIPT_RELEASE_BEGIN,
    GW_SCRIPT_RELEASE_FINISH,
    GW_SCRIPT_CLAIM,
    GW_SCRIPT_LOAD,
    GW_SCRIPT_LIMIT,
    GW_SCRIPT_GUARD, /* guard_bucket.lua (gw_guard.h) */
    GW_SCRIPT_GUARD_INDEX, /* guard_index.lua (gw_guard.h, the spent set) */
    GW_SCRIPT_ADMIN_LOGIN, /* admin_login.lua (gw_login.h) */
    GW_SCRIPT_COUNT,
};

extern const char *const gw_app_scripts[GW_SCRIPT_COUNT];

/* One worker's view; all borrowed, all used on the worker's loop only. */
typedef struct {
    const gw_config_t *cfg;
    uv_loop_t *loop;
    gw_redis_t *redis;
    gw_rules_t *rules;
    gw_kafka_t *kafka; /* shared by all workers */
    gw_kafka_inbox_t *inbox;
    gw_pg_pool_t *pg; /* shared by all workers */
    atomic_int *draining; /* shared: 1 once shutdown began (background work stops between steps) */
    vc_admin_ready_cb ready; /* /readyz, on the admin worker (gw_worker.h) */
    void *ready_arg;
} gw_app_t;

/* The Redis keys of a voucher: the first six in the order of reserve.lua. */
#define GW_KEY_MAX (VC_CODE_MAX + 32)

/*
 * Fills keys with every key of voucher code, voucher:{code}:NAME, by the model's names
 * (vc_model.h: keys[VC_VOUCHER_KEY_ORDERS] is voucher:{code}:orders). A script's keys, in
 * its order: vc_script_keys(vc_SCRIPT_keys, VC_SCRIPT_NKEYS, keys[0], GW_KEY_MAX, out).
 */
void gw_app_keys(const char *code, char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX]);

/* A gw_redis_cb that ignores the reply, for commands nobody waits for. */
void gw_app_ignore_cb(void *arg, int rc, const gw_redis_reply_t *reply);

/* The actor of the shared VOUCHER_ADMIN_TOKEN in the admin audit. */
#define GW_ADMIN_ACTOR "admin"

/*
 * Fills who with the admin an authenticated request acts as (req->actor,
 * set by gw_app_handle) and its client's address, for the admin audit
 * (vc_audit.h). who borrows from req: valid until req is answered.
 */
void gw_app_who(const gw_request_t *req, vc_audit_who_t *who);

/*
 * The gw_http_handler_cb of an API worker (ctx is its gw_app_t): the order
 * service's routes and /healthz; the admin routes answer 404 there, as any
 * path that is not the API's.
 */
void gw_app_handle(void *ctx, gw_request_t *req);

/*
 * The gw_http_handler_cb of the admin worker, on the admin address:
 * /healthz, /readyz, /metrics and the admin routes (gw_route_auth() is
 * GW_AUTH_ADMIN); the order service's routes answer 404 there.
 */
void gw_app_handle_admin(void *ctx, gw_request_t *req);

/*
 * Answers req with the error body for rc (gw_status_for), detail (may be
 * NULL: the code's message is used), and Retry-After on 503. Frees req.
 */
void gw_app_reply_error(gw_request_t *req, int rc, const char *detail);

/* Answers req with status and a JSON body of len bytes. Frees req. */
void gw_app_reply(gw_request_t *req, int status, const char *body, size_t len);

/*
 * Encodes ev and produces it keyed by its code. Returns 0 and cb runs once
 * with the delivery outcome, or a negative VC_ERR_* and cb never runs.
 */
int gw_app_publish(gw_app_t *app, const vc_event_t *ev, gw_kafka_delivery_cb cb, void *arg);

/* The gw_http_observe_cb of a worker: counts the answer in the metrics. */
void gw_app_observe(void *ctx, const gw_request_t *req, int status);

/* Starts the flows; each answers req exactly once. */
void gw_reserve_start(gw_app_t *app, gw_request_t *req, const char *code);
void gw_quote_start(gw_app_t *app, gw_request_t *req, const char *code);
void gw_create_start(gw_app_t *app, gw_request_t *req);
void gw_show_start(gw_app_t *app, gw_request_t *req, const char *code);
void gw_update_start(gw_app_t *app, gw_request_t *req, const char *code);
void gw_list_start(gw_app_t *app, gw_request_t *req);
void gw_lookup_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id);
void gw_confirm_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id);
void gw_cancel_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id);
/* The campaign routes (gw_campaign.c); route is what gw_route() gave. */
void gw_campaign_start(gw_app_t *app, gw_request_t *req, const gw_route_t *route);

#endif
