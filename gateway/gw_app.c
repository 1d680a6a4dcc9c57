#include "gw_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_admins.h"
#include "gw_campaign.h"
#include "gw_guard.h"
#include "gw_login.h"
#include "gw_metrics.h"
#include "vc_error.h"
#include "vc_event.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_time.h"

const char *const gw_app_scripts[GW_SCRIPT_COUNT] = {
    /* A campaign's code (gw_campaign_redeem.c). */
    [GW_SCRIPT_CAMPAIGN_RESERVE] = vc_lua_campaign_reserve,
    [GW_SCRIPT_CAMPAIGN_FORGET] = vc_lua_campaign_forget,
    [GW_SCRIPT_CAMPAIGN_CONFIRM] = vc_lua_campaign_confirm,
    [GW_SCRIPT_CAMPAIGN_RELEASE_BEGIN] = vc_lua_campaign_release_begin,
    [GW_SCRIPT_CAMPAIGN_RELEASE_FINISH] = vc_lua_campaign_release_finish,
    [GW_SCRIPT_RESERVE] = vc_lua_reserve,
    [GW_SCRIPT_FORGET] = vc_lua_forget,
    [GW_SCRIPT_CONFIRM] = vc_lua_confirm,
    [GW_SCRIPT_RELEASE_BEGIN] = vc_lua_release_begin,
    [GW_SCRIPT_RELEASE_FINISH] = vc_lua_release_finish,
    [GW_SCRIPT_CLAIM] = vc_lua_claim,
    [GW_SCRIPT_LOAD] = vc_lua_load,
    [GW_SCRIPT_LIMIT] = vc_lua_limit,
    [GW_SCRIPT_GUARD] = vc_lua_guard_bucket,
    [GW_SCRIPT_GUARD_INDEX] = vc_lua_guard_index,
    [GW_SCRIPT_ADMIN_LOGIN] = vc_lua_admin_login,
};

void gw_app_keys(const char *code, char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX])
{
    /*
     * On every request, for each key: counting the code with strlen() per key (and
     * snprintf() before that) was 1,400 of the 18,000 instructions of a sold-out answer
     * under callgrind, so the code is counted once and the names' lengths are the model's
     * (vc_voucher_key_n()). A code is at most VC_CODE_MAX bytes: every key fits.
     */
    size_t code_len = strnlen(code, GW_KEY_MAX);

    for (int i = 0; i < VC_VOUCHER_KEY_COUNT; i++)
        (void)vc_voucher_key_n(keys[i], GW_KEY_MAX, code, code_len, (vc_voucher_key_t)i);
}

void gw_app_ignore_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    (void)arg;
    (void)rc;
    (void)reply;
}

void gw_app_observe(void *ctx, const gw_request_t *req, int status)
{
    (void)ctx;
    gw_guard_settle((gw_request_t *)req, status); /* a failed try keeps its tokens */
    if (!req) {
        gw_metrics_request(GW_ROUTE_NOT_FOUND, status, 0);
        return;
    }
    gw_metrics_request((gw_route_kind_t)req->route, status,
                       (int64_t)((uv_hrtime() - req->start_ns) / 1000));
}

void gw_app_reply(gw_request_t *req, int status, const char *body, size_t len)
{
    gw_http_respond(req, status, NULL, body, len);
}

/*
 * The body of an error answer without a detail of its own depends on rc
 * alone. A flood of one answer (a sold-out voucher's 409s) builds it once per
 * worker thread: writing its JSON was 500 of a sold-out answer's
 * instructions.
 */
static _Thread_local struct {
    int rc;
    size_t len; /* 0: nothing kept */
    char body[768];
} last_error;

void gw_app_reply_error(gw_request_t *req, int rc, const char *detail)
{
    const char *error, *reason;
    char body[768];
    int status = gw_status_for(rc, &error, &reason);
    size_t len;

    if (!detail && last_error.len && last_error.rc == rc) {
        /* Copied: answering may run code that answers another error on this thread. */
        len = last_error.len;
        memcpy(body, last_error.body, len);
    } else {
        len = gw_body_error(body, sizeof(body), error, detail ? detail : vc_strerror(rc), reason);
        if (!detail && len) {
            last_error.rc = rc;
            last_error.len = len;
            memcpy(last_error.body, body, len);
        }
    }
    gw_http_respond(req, status,
                    status == 503   ? "Retry-After: 1\r\n"
                    : status == 401 ? "WWW-Authenticate: Bearer\r\n"
                                    : NULL,
                    body, len);
}

int gw_app_publish(gw_app_t *app, const vc_event_t *ev, gw_kafka_delivery_cb cb, void *arg)
{
    char payload[VC_EVENT_MAX_JSON], err[256];
    size_t len;
    int rc;

    if ((rc = vc_event_encode(ev, payload, sizeof(payload), &len, err, sizeof(err))) != 0) {
        vc_error("cannot encode %s for order %s: %s", vc_event_type_name(ev->type), ev->order_id,
                 err);
        return rc;
    }
    /* A campaign's events share one key, so they stay in order on one partition. */
    if (ev->campaign_id > 0) {
        char key[40];
        int klen = snprintf(key, sizeof(key), "campaign:%lld", (long long)ev->campaign_id);
        return gw_kafka_produce(app->kafka, app->inbox, app->cfg->kafka_topic, key,
                                (size_t)klen, payload, len, cb, arg);
    }
    return gw_kafka_produce(app->kafka, app->inbox, app->cfg->kafka_topic, ev->code,
                            strlen(ev->code), payload, len, cb, arg);
}

void gw_app_who(const gw_request_t *req, vc_audit_who_t *who)
{
    who->actor = req->actor ? req->actor : GW_ADMIN_ACTOR;
    who->source = req->peer;
}

static void serve(gw_app_t *app, gw_request_t *req, const gw_route_t *route);

/* An admin route's request while its client's failed logins are looked at (gw_login.h). */
typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    gw_route_t route;
    int named, shared;
    char name[GW_ADMIN_NAME_MAX + 1];
} admin_try_t;

/*
 * The login limit's decision for a's request (gw_login_try()): 429 when its
 * address is out of tries, whatever the token (an empty bucket learns nothing
 * of it); else the route for an admin's token (req->actor set), and 401 for
 * any other.
 */
static void admin_tried_cb(void *arg, int64_t wait_ms)
{
    admin_try_t *a = arg;
    gw_request_t *req = a->req;
    char body[160], headers[48];
    size_t len;

    if (wait_ms > 0) {
        len = gw_body_error(body, sizeof(body), "TOO_MANY_ATTEMPTS",
                            "too many failed admin logins from this address: retry after the "
                            "time in Retry-After",
                            NULL);
        snprintf(headers, sizeof(headers), "Retry-After: %lld\r\n",
                 (long long)gw_guard_retry_after_s(wait_ms));
        gw_http_respond(req, 429, headers, body, len);
        return;
    }
    if (a->named) {
        req->actor = a->name; /* a copy in req's arena: the table may be swapped meanwhile */
        serve(a->app, req, &a->route);
        return;
    }
    if (a->shared) {
        req->actor = GW_ADMIN_ACTOR; /* VOUCHER_ADMIN_TOKEN's: one name for all who hold it */
        serve(a->app, req, &a->route);
        return;
    }
    gw_app_reply_error(req, GW_E_UNAUTHORIZED,
                       a->app->cfg->admin_token[0] || a->app->cfg->admin_tokens_file[0]
                           ? "this route needs Authorization: Bearer <an admin token>"
                           : "admin routes are off: neither VOUCHER_ADMIN_TOKEN nor "
                             "VOUCHER_ADMIN_TOKENS_FILE is set");
}

/*
 * An admin route: whether req carries an admin's token, a named one
 * (gw_admins.h, its name the actor) or one of VOUCHER_ADMIN_TOKEN's (the
 * actor "admin"), then whether its address may try a token (gw_login.h),
 * then admin_tried_cb() answers or serves route. Both tokens are checked,
 * whatever the first found, so the time tells neither which.
 */
static void admin_route(gw_app_t *app, gw_request_t *req, const gw_route_t *route)
{
    admin_try_t *a;
    int64_t wait_ms;

    if (!(a = gw_request_alloc(req, sizeof(*a)))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    a->route = *route;
    a->named = gw_admins_authorized(req->authorization, a->name);
    a->shared = gw_bearer_authorized(req->authorization, app->cfg->admin_token);
    if (gw_login_try(app, req, a->named || a->shared, admin_tried_cb, a, &wait_ms) == GW_LOGIN_GO)
        admin_tried_cb(a, wait_ms);
}

/*
 * Routes req and answers it. on_admin: req came to the admin address. Each
 * address serves its own routes only: an admin route asked on the API port,
 * or an order-service route on the admin address, answers 404 as an unknown
 * path does (the API port does not tell the order service's network where
 * the admin routes are), before any token is looked at.
 */
static void dispatch(gw_app_t *app, gw_request_t *req, int on_admin)
{
    gw_route_t route;
    int auth;

    gw_route(req->method, req->path, req->path_len, &route);
    auth = gw_route_auth(route.kind);
    /* /healthz (GW_AUTH_NONE) and a 405's Allow are the same on both. */
    if (auth != GW_AUTH_NONE && (auth == GW_AUTH_ADMIN) != on_admin) {
        route.kind = GW_ROUTE_NOT_FOUND;
        auth = GW_AUTH_NONE;
    }
    req->route = (int)route.kind;
    switch (auth) {
    case GW_AUTH_ADMIN:
        admin_route(app, req, &route); /* serve() once its token and its tries are looked at */
        return;
    case GW_AUTH_API:
        /* An empty VOUCHER_API_TOKEN leaves the order service's routes open. */
        if (!app->cfg->api_token[0] ||
            gw_bearer_authorized(req->authorization, app->cfg->api_token))
            break;
        gw_app_reply_error(req, GW_E_UNAUTHORIZED,
                           "this route needs Authorization: Bearer <VOUCHER_API_TOKEN>");
        return;
    default:
        break;
    }
    serve(app, req, &route);
}

/* Answers req, whose access was granted, by its route. */
static void serve(gw_app_t *app, gw_request_t *req, const gw_route_t *route)
{
    char body[256], allow[64];
    size_t len;

    switch (route->kind) {
    case GW_ROUTE_HEALTHZ:
        len = (size_t)snprintf(body, sizeof(body), "{\"status\":\"ok\"}");
        gw_app_reply(req, 200, body, len);
        return;
    case GW_ROUTE_READYZ:
    case GW_ROUTE_METRICS:
        /* Served on the admin address (gw_app_handle_admin), the API's port serves the API. */
        len = gw_body_error(body, sizeof(body), "NOT_FOUND",
                            "served on the admin address (VOUCHER_GATEWAY_ADMIN_ADDR)", NULL);
        gw_app_reply(req, 404, body, len);
        return;
    case GW_ROUTE_RESERVE:
        gw_reserve_start(app, req, route->code);
        return;
    case GW_ROUTE_CONFIRM:
        gw_confirm_start(app, req, route->code, route->order_id);
        return;
    case GW_ROUTE_CANCEL:
        gw_cancel_start(app, req, route->code, route->order_id);
        return;
    case GW_ROUTE_QUOTE:
        gw_quote_start(app, req, route->code);
        return;
    case GW_ROUTE_CREATE:
        gw_create_start(app, req);
        return;
    case GW_ROUTE_SHOW:
        gw_show_start(app, req, route->code);
        return;
    case GW_ROUTE_CAMPAIGN:
        gw_campaign_start(app, req, route);
        return;
    case GW_ROUTE_UPDATE:
        gw_update_start(app, req, route->code);
        return;
    case GW_ROUTE_LIST:
        gw_list_start(app, req);
        return;
    case GW_ROUTE_LOOKUP:
        gw_lookup_start(app, req, route->code, route->order_id);
        return;
    case GW_ROUTE_BAD_METHOD:
        len = gw_body_error(body, sizeof(body), "METHOD_NOT_ALLOWED",
                            "this path does not take that method", NULL);
        snprintf(allow, sizeof(allow), "Allow: %s\r\n", route->allow);
        gw_http_respond(req, 405, allow, body, len);
        return;
    case GW_ROUTE_NOT_FOUND:
    default:
        len = gw_body_error(body, sizeof(body), "NOT_FOUND", "no such resource", NULL);
        gw_app_reply(req, 404, body, len);
        return;
    }
}

void gw_app_handle(void *ctx, gw_request_t *req)
{
    dispatch(ctx, req, 0);
}

void gw_app_handle_admin(void *ctx, gw_request_t *req)
{
    gw_app_t *app = ctx;

    /* The probes and the metrics, as every daemon's admin endpoint answers them. */
    if (vc_admin_respond(app->ready, app->ready_arg, req))
        return;
    dispatch(app, req, 1);
}
