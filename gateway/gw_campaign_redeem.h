/*
 * Redemption of a campaign's one-time codes on the voucher routes
 * (proto/campaigns.md, "How a code reaches the campaign"). The voucher flows
 * (gw_reserve*.c, gw_holds.c) call in here only on their not-found path: a code
 * no voucher has is normalized and looked up in campaign_code, and the flow
 * then runs on the campaign's keys, {c<ID>}, with the campaign's scripts.
 */
#ifndef GW_CAMPAIGN_REDEEM_H
#define GW_CAMPAIGN_REDEEM_H

#include <stdint.h>

#include "gw_app.h"
#include "vc_voucher.h"

/*
 * The details of a campaign code's 409 ALREADY_USED (reserve and quote): the
 * code taken by another order, or the customer at the campaign's
 * perCustomerLimit. Both tell that the code exists, and both are failed tries.
 */
#define GW_CAMPAIGN_TAKEN_DETAIL "this code has already been used"
#define GW_CAMPAIGN_LIMIT_DETAIL                                                                   \
    "the customer already holds as many of the campaign's codes as it allows (perCustomerLimit)"

/* The campaign a code belongs to, as a flow needs it; id 0: not (yet) a campaign's. */
typedef struct {
    int64_t id;
    int64_t bound_customer; /* 0: unbound */
    /*
     * After VC_E_NOT_FOUND, a campaign whose rules and keys were read in the
     * code's stead (0: none): a flow that answers 404 does a found code's
     * work with it, for the same time (gw_campaign_find()).
     */
    int64_t stand_in;
    int active;             /* the campaign is ACTIVE */
    int revoked;            /* the code was revoked (voucher-admin campaign revoke, 023) */
    int loaded;             /* campaign.redis_loaded_at is set: Redis had its keys */
    char code[VC_CODE_MAX + 1]; /* stored form */
    char users[GW_KEY_MAX];     /* campaign:{cID}:users */
    char orders[GW_KEY_MAX];    /* campaign:{cID}:orders */
    char taken[GW_KEY_MAX];     /* campaign:{cID}:taken */
} gw_campaign_ref_t;

/*
 * rc 0: ref and v (the campaign's rules in a voucher's shape, code the stored
 * form) are filled; VC_E_NOT_FOUND: no campaign has this code, or it is bound
 * to another customer; a negative VC_ERR_* when PostgreSQL failed.
 */
typedef void (*gw_campaign_found_cb)(void *arg, int rc);

/*
 * Looks path_code up as a campaign code (vc_campaign_normalize() first: case
 * and separators do not matter). customer_id > 0 is checked against the
 * code's binding: a code bound to another customer is VC_E_NOT_FOUND, the
 * answer of an unknown code after the same one lookup; 0 checks nothing (the
 * order's own routes, where the order says who it is). ref and v are
 * borrowed until cb, which runs exactly once (maybe before this returns).
 * On VC_E_NOT_FOUND ref->id is 0, and when some campaign exists ref (but its
 * code) and v hold the rules and keys of ref->stand_in, read by the same
 * query: a flow may run its refusal on them, so that a code nobody has takes
 * the time of a campaign's code whose answer is also 404 (issue 42, item 5).
 */
void gw_campaign_find(gw_app_t *app, const char *path_code, int64_t customer_id,
                      gw_campaign_ref_t *ref, vc_voucher_t *v, gw_campaign_found_cb cb,
                      void *arg);

/*
 * After a found lookup: the flow's code becomes the stored form and its keys
 * the campaign's (code: VC_CODE_MAX + 1 bytes).
 */
void gw_campaign_take(const gw_campaign_ref_t *ref, char *code,
                      char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX]);

/*
 * Fills keys, indexed as gw_app_keys() fills a voucher's (VC_VOUCHER_KEY_*), with the
 * campaign id's keys of the same names (vc_model.h: the campaign family); a voucher key
 * no campaign has (limit, outside, soldout) is left empty.
 */
void gw_campaign_keys(int64_t id, char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX]);

/*
 * Runs the campaign's form of a voucher script (GW_SCRIPT_FORGET,
 * _RELEASE_BEGIN, _RELEASE_FINISH, _CONFIRM) with the keys and arguments the
 * voucher's takes: the users, orders and taken hashes, whether Redis had the
 * campaign's keys (ref->loaded) and the code are appended
 * (common/lua/campaign_guard.lua). Besides the voucher script's statuses the
 * answer may be -7: the campaign's keys are lost and the order cannot be
 * told (503 until the reconciler rebuilds them). Returns as gw_redis_eval().
 */
int gw_campaign_eval(gw_app_t *app, const gw_campaign_ref_t *ref, size_t script, gw_redis_cb cb,
                     void *arg, int nkeys, const char *const *keys, int nargs,
                     const char *const *args);

/*
 * campaign_reserve.lua for a request, on the campaign family's keys built from
 * ref->id: reserve.lua's arguments, then the code, the expiry and whether Redis
 * had the campaign's keys before (ref->loaded).
 * The first use of a campaign that took a code (status 1) then sets
 * campaign.redis_loaded_at (deploy/sql/017), so that losing all its keys later
 * is refused (503) until the reconciler rebuilds them, not taken as a fresh
 * campaign. cb gets the script's answer unchanged.
 */
int gw_campaign_reserve_eval(gw_app_t *app, const gw_campaign_ref_t *ref, const char *const *args,
                             int64_t expire_at_ms, gw_redis_cb cb, void *arg);

/* The refusal a campaign's request gets for a new order: an inactive campaign, a revoked code
 * or outside its window answers as an unknown code; others as the rules said. */
int gw_campaign_refusal(const gw_campaign_ref_t *ref, int refusal);

#endif
