/*
 * Routes: which route a method and path name (code and orderId validated),
 * the query string of GET /vouchers, and which token each route needs. Pure,
 * so tests/unit/test_gateway.c checks it without a server.
 *
 * What a request body must contain is gw_body.h, the answers (status, error
 * name, JSON bodies) gw_answer.h, bearer tokens gw_auth.h and an orderId's
 * claim vc_claim.h (common: the reconciler reads claims too). This header includes them for the files that took them
 * from here before the split (gw_http.c, gw_admin.c, gw_campaign*.c); new
 * code includes the one it uses.
 */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "gw_answer.h"
#include "gw_auth.h"
#include "gw_body.h"
#include "vc_claim.h"
#include "vc_http.h"
#include "vc_order_value.h"
#include "vc_voucher.h"

/* The request methods and body limit are the HTTP server's (vc_http.h). */
typedef vc_http_method_t gw_method_t;
#define GW_M_GET VC_HTTP_GET
#define GW_M_POST VC_HTTP_POST
#define GW_M_DELETE VC_HTTP_DELETE
#define GW_M_PATCH VC_HTTP_PATCH
#define GW_M_OTHER VC_HTTP_OTHER

typedef enum {
    GW_ROUTE_NOT_FOUND = 0, /* 404: no such path, or a code/orderId that cannot exist */
    GW_ROUTE_BAD_METHOD,    /* 405: the path exists, the method does not; see allow */
    GW_ROUTE_HEALTHZ,       /* GET /healthz */
    GW_ROUTE_RESERVE,       /* POST /vouchers/{code}/reservations */
    GW_ROUTE_CONFIRM,       /* POST /vouchers/{code}/reservations/{orderId}/confirm */
    GW_ROUTE_CANCEL,        /* DELETE /vouchers/{code}/reservations/{orderId} */
    GW_ROUTE_READYZ,        /* GET /readyz */
    GW_ROUTE_METRICS,       /* GET /metrics */
    GW_ROUTE_CREATE,        /* POST /vouchers (admin) */
    GW_ROUTE_SHOW,          /* GET /vouchers/{code} (admin) */
    GW_ROUTE_QUOTE,         /* POST /vouchers/{code}/quote */
    GW_ROUTE_CAMPAIGN,      /* /campaigns... (admin): campaign_op says which (gw_campaign.h) */
    GW_ROUTE_UPDATE,        /* PATCH /vouchers/{code} (admin) */
    GW_ROUTE_LIST,          /* GET /vouchers (admin) */
    GW_ROUTE_LOOKUP,        /* GET /vouchers/{code}/reservations/{orderId} (admin) */
    GW_ROUTE_COUNT,
} gw_route_kind_t;

/* The route's name in metrics ("reserve", "not_found", ...); never NULL. */
const char *gw_route_name(gw_route_kind_t kind);

typedef struct {
    gw_route_kind_t kind;
    const char *allow; /* for GW_ROUTE_BAD_METHOD: the Allow header value */
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
    int campaign_op;     /* GW_ROUTE_CAMPAIGN: a gw_campaign_op_t */
    int64_t campaign_id; /* GW_ROUTE_CAMPAIGN: the {id} of the path, or 0 */
} gw_route_t;

/*
 * Routes method and path (len bytes, a query string after '?' is ignored).
 * Fills out completely; the code and orderId are validated here, so a
 * handler may use them as they are.
 */
void gw_route(gw_method_t method, const char *path, size_t len, gw_route_t *out);

/* GET /vouchers?active=&after=&limit=, parsed. */
#define GW_LIST_LIMIT_DEFAULT 20
#define GW_LIST_LIMIT_MAX 100
typedef struct {
    int has_active, active;
    char after[VC_CODE_MAX + 1]; /* "" from the first code on */
    int limit;
} gw_list_query_t;

/*
 * Parses the query string of GET /vouchers (query[0..len), without the '?';
 * values percent-decoded): active true or false, after a code (the last of
 * the previous page: codes sort byte by byte), limit 1..GW_LIST_LIMIT_MAX
 * (default GW_LIST_LIMIT_DEFAULT). A parameter given twice, an unknown one
 * or a bad value is VC_ERR_INVALID with err naming it. Pure.
 */
int gw_list_query_parse(const char *query, size_t len, gw_list_query_t *out, char *err,
                        size_t errlen);

/* Which token a route needs (gw_route_auth). */
enum {
    GW_AUTH_NONE = 0, /* /healthz, /readyz, /metrics, and paths that name no route */
    GW_AUTH_API,      /* the order service's routes: VOUCHER_API_TOKEN, when set */
    GW_AUTH_ADMIN,    /* POST /vouchers and GET /vouchers/{code}: VOUCHER_ADMIN_TOKEN, always */
};

/* The token kind (GW_AUTH_*) a route needs. */
int gw_route_auth(gw_route_kind_t kind);

/*
 * A stored order value of the Redis scripts. The one parser is
 * common/vc_order_value.h; these names remain for gw_admin.c and the fuzz
 * target only: new code uses vc_order_value_t and vc_order_value_parse().
 */
typedef vc_order_value_t gw_order_value_t;

static inline int gw_order_value_parse(const char *s, size_t len, gw_order_value_t *out)
{
    return vc_order_value_parse(s, len, out);
}

#endif
