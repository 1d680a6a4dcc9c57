/*
 * The pure part of the HTTP API: which route a method and path name, what a
 * request body must contain, which status and error name a result code gets,
 * and the JSON bodies of the answers. No I/O here, so tests/unit/test_gateway.c
 * checks all of it without a server.
 */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"
#include "vc_http.h"
#include "vc_json.h"
#include "vc_order_value.h"
#include "vc_voucher.h"

/*
 * Gateway-only domain outcomes (positive, like vc_error.h's VC_E_*), for the
 * admin routes: gw_status_for() maps them.
 */
#define GW_E_EXISTS 100       /* 409 EXISTS: a voucher with this code exists */
#define GW_E_UNAUTHORIZED 101 /* 401 UNAUTHORIZED: missing or wrong bearer token */
#define GW_E_LIMIT 102        /* 409 LIMIT_CONFLICT: a limit cannot go that low now */
#define GW_E_RULES 103        /* 409 RULES_CONFLICT: a change does not fit the voucher as it is */
/* 409 ALREADY_CONFIRMED: a confirm's total differs from the one the order was confirmed at. */
#define GW_E_CONFIRMED_OTHER 110

/* The request methods and body limit are the HTTP server's (vc_http.h). */
#define GW_MAX_BODY VC_HTTP_MAX_BODY
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

/* The body of POST /vouchers/{code}/reservations. */
typedef struct {
    int64_t customer_id; /* > 0 */
    char order_id[VC_ORDER_ID_MAX + 1];
    int64_t order_amount; /* >= 0, minor units */
} gw_reserve_req_t;

/*
 * Parses and validates a reservation body (len bytes). Returns 0, or
 * VC_ERR_INVALID with err naming the field and what is wrong, or
 * VC_ERR_NOMEM.
 */
int gw_reserve_req_parse(const char *body, size_t len, gw_reserve_req_t *out, char *err,
                         size_t errlen);

/* The body of POST /vouchers/{code}/quote. */
typedef struct {
    int64_t customer_id;  /* > 0 */
    int64_t order_amount; /* >= 0, minor units */
} gw_quote_req_t;

/* Parses and validates a quote body; the same contract as gw_reserve_req_parse(). */
int gw_quote_req_parse(const char *body, size_t len, gw_quote_req_t *out, char *err, size_t errlen);

/*
 * The body of POST /vouchers/{code}/reservations/{orderId}/confirm: optional.
 * No body, an empty one (only whitespace) or {} is a confirm without a total,
 * answered as before the total existed.
 */
typedef struct {
    int has_total;        /* orderAmount was given */
    int64_t order_amount; /* >= 0, minor units: the order's final total */
} gw_confirm_req_t;

/* Parses and validates a confirm body; the same contract as gw_reserve_req_parse(). */
int gw_confirm_req_parse(const char *body, size_t len, gw_confirm_req_t *out, char *err,
                         size_t errlen);

/*
 * Parses and validates the body of POST /vouchers into out (used_count 0):
 * code [A-Z0-9_-]{1,32}; exactly one of discountAmount (>= 1) and
 * discountPercent (1..100); maxDiscountAmount (>= 1, with discountPercent
 * only); minOrderAmount >= 0; totalLimit and perUserLimit (default 1) in
 * 1..2^31-1; startsAt before endsAt, both RFC 3339. Unknown fields are
 * rejected. Returns 0, or VC_ERR_INVALID with err naming the field, or
 * VC_ERR_NOMEM.
 */
int gw_voucher_req_parse(const char *body, size_t len, vc_voucher_t *out, char *err, size_t errlen);

/* The body of PATCH /vouchers/{code}: each field with whether it was given. */
typedef struct {
    int has_total, has_per_user, has_starts, has_ends, has_amount, has_percent, has_max, has_min,
        has_active;
    int64_t total_limit, per_user_limit, starts_at_ms, ends_at_ms, discount_amount,
        discount_percent, max_discount_amount, min_order_amount;
    int active;
} gw_voucher_patch_t;

/*
 * Parses the body of PATCH /vouchers/{code}: at least one of totalLimit,
 * perUserLimit, startsAt, endsAt, discountAmount, discountPercent,
 * maxDiscountAmount, minOrderAmount and active, each with the bounds of
 * gw_voucher_req_parse(); maxDiscountAmount never with discountAmount.
 * Unknown fields are rejected. Returns 0, or VC_ERR_INVALID with err set.
 */
int gw_voucher_patch_parse(const char *body, size_t len, gw_voucher_patch_t *out, char *err,
                           size_t errlen);

/*
 * The voucher cur becomes with p applied, into out (pure): a discountAmount
 * makes the discount fixed, a discountPercent makes it a percent (its cap
 * kept unless given); the window must stay non-empty. perUserLimit may only
 * grow: the writer judges every event with the limit it reads when it
 * applies it, so a lower limit would refuse reservations the gateway already
 * acknowledged under the old one. Returns 0, GW_E_RULES (a window that would
 * end before it starts, a cap on a fixed discount) or GW_E_LIMIT (both 409:
 * the body is valid, the voucher as it is now refuses it), with err set.
 */
int gw_voucher_patch_apply(const vc_voucher_t *cur, const gw_voucher_patch_t *p, vc_voucher_t *out,
                           char *err, size_t errlen);

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

/*
 * Writes a voucher's rules and active as one JSON object into g, with
 * usedCount when with_used is set.
 */
int gw_jgen_voucher(vc_jgen_t *g, const vc_voucher_t *v, int with_used, int64_t used_count);

/*
 * Writes a voucher as the admin routes show it: its rules, then usedCount,
 * remaining (null when has_remaining is 0) and holds when with_counters is
 * set. Returns the length, or 0 if it does not fit.
 */
size_t gw_body_voucher(char *buf, size_t cap, const vc_voucher_t *v, int with_counters,
                       int64_t used_count, int has_remaining, int64_t remaining, int64_t holds);

/* Which token a route needs (gw_route_auth). */
enum {
    GW_AUTH_NONE = 0, /* /healthz, /readyz, /metrics, and paths that name no route */
    GW_AUTH_API,      /* the order service's routes: VOUCHER_API_TOKEN, when set */
    GW_AUTH_ADMIN,    /* POST /vouchers and GET /vouchers/{code}: VOUCHER_ADMIN_TOKEN, always */
};

/* The token kind (GW_AUTH_*) a route needs. */
int gw_route_auth(gw_route_kind_t kind);

/*
 * Whether the Authorization header value (auth, may be NULL) carries
 * "Bearer <token>" with a token of the list tokens: comma-separated, spaces
 * around each ignored, empty entries skipped, so that a new token can be
 * added before the old one is removed (rotation). An empty list (or NULL)
 * refuses everything. The time taken does not depend on how much of any
 * token matched, nor on which one did (deploy/README.md, "Authentication").
 */
int gw_bearer_authorized(const char *auth, const char *tokens);

/* A stored order value of the Redis scripts: the one strict parser is common/vc_order_value.h. */
typedef vc_order_value_t gw_order_value_t;

static inline int gw_order_value_parse(const char *s, size_t len, gw_order_value_t *out)
{
    return vc_order_value_parse(s, len, out);
}

/*
 * An orderId's claim, voucher-order:{orderId} (proto/redis-keys.md), holds
 * "CODE:TOKEN": the voucher code the orderId belongs to, and a token unique to
 * the request that wrote it, so that only that request may delete it. Claims
 * written before tokens hold the bare "CODE".
 */
#define GW_CLAIM_VALUE_MAX (VC_CODE_MAX + 40)

/* Writes "code:TOKEN" into out, TOKEN being process and seq as 32 hex digits. */
void gw_claim_value(char out[GW_CLAIM_VALUE_MAX], const char *code, uint64_t process,
                    uint64_t seq);

/* Whether a claim's value (len bytes) ties the orderId to code. */
int gw_claim_is_code(const char *value, size_t len, const char *code);

/*
 * The HTTP status and error name for a result code of vc_error.h: the name
 * is what goes in {"error": ...}, and *reason is set for NOT_ELIGIBLE answers
 * ("EXPIRED", ...) and NULL otherwise. Negative codes are 503 UNAVAILABLE,
 * except VC_ERR_INVALID (400 BAD_REQUEST) and VC_ERR_TOO_LARGE (413).
 * GW_E_EXISTS is 409 EXISTS and GW_E_UNAUTHORIZED 401 UNAUTHORIZED.
 */
int gw_status_for(int rc, const char **error, const char **reason);

/*
 * Writes {"error":error,"detail":detail[,"reason":reason]} into buf.
 * Returns the length, or 0 if it does not fit. reason may be NULL.
 */
size_t gw_body_error(char *buf, size_t cap, const char *error, const char *detail,
                     const char *reason);

/*
 * Writes the 201 body of a reservation:
 * {"orderId","code","discountAmount","heldUntil"[,"replayed":true]}.
 * Returns the length, or 0 if it does not fit.
 */
size_t gw_body_reservation(char *buf, size_t cap, const char *order_id, const char *code,
                           int64_t discount, int64_t held_until_ms, int replayed);

/*
 * Writes the body of a confirm or cancel answer:
 * {"orderId","code","status"[,"replayed":true]}. Returns the length or 0.
 */
size_t gw_body_status(char *buf, size_t cap, const char *order_id, const char *code,
                      const char *status, int replayed);

/*
 * An order's figures in an answer to a confirm given a total:
 * {"orderAmount","discountAmount"}, orderAmount left out when has_amount is
 * 0 (an order the reconciler restored or repaired to confirmed: Redis does
 * not know the total it was confirmed at).
 */
typedef struct {
    int has_amount;
    int64_t order_amount;
    int64_t discount;
} gw_figures_t;

/*
 * Writes the 200 body of a confirm given a total: {"orderId","code",
 * "status":"CONFIRMED","orderAmount","discountAmount"[,"replayed":true]}
 * with the figures the order is confirmed at. Returns the length or 0.
 */
size_t gw_body_confirmed(char *buf, size_t cap, const char *order_id, const char *code,
                         const gw_figures_t *fig, int replayed);

/*
 * Writes a refused confirm's body, gw_body_error()'s fields plus the figures
 * under key: "quote" (422: the reservation's, which still stand) or
 * "confirmed" (409 ALREADY_CONFIRMED). Returns the length or 0.
 */
size_t gw_body_confirm_refused(char *buf, size_t cap, const char *error, const char *detail,
                               const char *reason, const char *key, const gw_figures_t *fig);

#endif
