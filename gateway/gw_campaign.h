/*
 * The campaign admin routes (proto/campaigns.md, proto/openapi.yaml):
 *
 *   POST /campaigns                    create; 201 when small, else 202 + Location
 *   GET  /campaigns/{id}               state and progress (generated / total)
 *   GET  /campaigns/{id}/codes         chunked CSV code,customerId
 *   POST /campaigns/{id}/deactivate    turn it off
 *
 * gw_campaign_route.c holds the pure part (routing, the request body, the
 * JSON answer), tested in tests/unit/test_gateway_campaign.c; gw_campaign.c
 * the flows, which run vc_campaign_pg on the threadpool.
 */
#ifndef GW_CAMPAIGN_H
#define GW_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>

#include "gw_router.h"
#include "vc_campaign_pg.h"
#include "vc_json.h"

typedef enum {
    GW_CAMPAIGN_CREATE = 1,
    GW_CAMPAIGN_SHOW,
    GW_CAMPAIGN_CODES,
    GW_CAMPAIGN_DEACTIVATE,
    GW_CAMPAIGN_LIST,
} gw_campaign_op_t;

/* Up to this many codes a creation answers 201 after generating them; above, 202. */
#define GW_CAMPAIGN_SYNC_MAX 10000
/*
 * customerIds in one request at most: 500 ids of 19 digits and their commas
 * fit in a request body (16 KiB, GW_MAX_BODY) beside the other fields, so a
 * body the schema allows is never refused as too large. More are bound with
 * several campaigns, or by voucher-admin.
 */
#define GW_CAMPAIGN_CUSTOMERS_MAX 500

/*
 * Routes the segments after "/campaigns" (count of them, seg[i] n[i] bytes)
 * into out: kind GW_ROUTE_CAMPAIGN with campaign_op and campaign_id, 405
 * with allow for a known path and another method, or 404 (out as
 * gw_route() left it). Pure.
 */
void gw_campaign_route(gw_method_t method, const char *const *seg, const int *n, int count,
                       gw_route_t *out);

/* A parsed POST /campaigns. */
typedef struct {
    vc_campaign_spec_t spec;
    int64_t *customers; /* borrowed from the caller's array of GW_CAMPAIGN_CUSTOMERS_MAX */
    size_t ncustomers;
} gw_campaign_req_t;

/*
 * Parses the body of POST /campaigns into out (customers: the caller's
 * array of GW_CAMPAIGN_CUSTOMERS_MAX). Returns 0; VC_ERR_INVALID when the
 * body is not such a request (malformed JSON, an unknown field, a field of
 * the wrong type: 400); or GW_CAMPAIGN_E_UNPROCESSABLE when it is one but
 * describes a campaign that cannot be made (vc_campaign_spec_check(), a
 * customerId twice or more customers than codes: 422). err says why.
 */
#define GW_CAMPAIGN_E_UNPROCESSABLE 110
int gw_campaign_req_parse(const char *body, size_t len, gw_campaign_req_t *out, int64_t *customers,
                          char *err, size_t errlen);

/*
 * Writes a discount's fields into g, as the admin routes show vouchers and
 * campaigns alike: discountPercent (and maxDiscountAmount when max_amount >
 * 0) when percent > 0, else discountAmount. Defined in gw_router.c.
 */
void gw_jgen_discount(vc_jgen_t *g, int percent, int64_t max_amount, int64_t amount);

/* Writes a campaign as the admin routes show it into g. Returns 0, or -1 (a time out of range). */
int gw_jgen_campaign(vc_jgen_t *g, const vc_campaign_row_t *row);

/* The same as a whole body. Returns the length, or 0 if it does not fit. */
size_t gw_body_campaign(char *buf, size_t cap, const vc_campaign_row_t *row);

#endif
