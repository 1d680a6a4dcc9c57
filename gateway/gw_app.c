#include "gw_app.h"

#include <stdio.h>
#include <string.h>

#include "vc_error.h"
#include "vc_event.h"
#include "vc_log.h"
#include "vc_lua.h"

const char *const gw_app_scripts[GW_SCRIPT_COUNT] = {
    [GW_SCRIPT_RESERVE] = vc_lua_reserve,
    [GW_SCRIPT_RELEASE] = vc_lua_release,
    [GW_SCRIPT_CONFIRM] = vc_lua_confirm,
};

void gw_app_keys(const char *code, char keys[GW_KEY_COUNT][GW_KEY_MAX])
{
    static const char *const suffix[GW_KEY_COUNT] = {"remaining", "users", "orders", "holds"};
    for (int i = 0; i < GW_KEY_COUNT; i++)
        snprintf(keys[i], GW_KEY_MAX, "voucher:{%s}:%s", code, suffix[i]);
}

void gw_app_reply(gw_request_t *req, int status, const char *body, size_t len)
{
    gw_http_respond(req, status, NULL, body, len);
}

void gw_app_reply_error(gw_request_t *req, int rc, const char *detail)
{
    const char *error, *reason;
    char body[768];
    int status = gw_status_for(rc, &error, &reason);
    size_t len =
        gw_body_error(body, sizeof(body), error, detail ? detail : vc_strerror(rc), reason);

    gw_http_respond(req, status, status == 503 ? "Retry-After: 1\r\n" : NULL, body, len);
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
    return gw_kafka_produce(app->kafka, app->inbox, app->cfg->kafka_topic, ev->code,
                            strlen(ev->code), payload, len, cb, arg);
}

void gw_app_handle(void *ctx, gw_request_t *req)
{
    gw_app_t *app = ctx;
    gw_route_t route;
    char body[256], allow[64];
    size_t len;

    gw_route(req->method, req->path, req->path_len, &route);
    switch (route.kind) {
    case GW_ROUTE_HEALTHZ:
        len = (size_t)snprintf(body, sizeof(body), "{\"status\":\"ok\"}");
        gw_app_reply(req, 200, body, len);
        return;
    case GW_ROUTE_RESERVE:
        gw_reserve_start(app, req, route.code);
        return;
    case GW_ROUTE_CONFIRM:
        gw_confirm_start(app, req, route.code, route.order_id);
        return;
    case GW_ROUTE_CANCEL:
        gw_cancel_start(app, req, route.code, route.order_id);
        return;
    case GW_ROUTE_BAD_METHOD:
        len = gw_body_error(body, sizeof(body), "METHOD_NOT_ALLOWED",
                            "this path does not take that method", NULL);
        snprintf(allow, sizeof(allow), "Allow: %s\r\n", route.allow);
        gw_http_respond(req, 405, allow, body, len);
        return;
    case GW_ROUTE_NOT_FOUND:
    default:
        len = gw_body_error(body, sizeof(body), "NOT_FOUND", "no such resource", NULL);
        gw_app_reply(req, 404, body, len);
        return;
    }
}
