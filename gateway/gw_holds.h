/*
 * What happens to a hold after its reservation, confirm and cancel
 * (gw_confirm_start() and gw_cancel_start(), gw_app.h): flash mode's flow in
 * gw_holds.c, a direct voucher's in gw_holds_direct.c. The answers both
 * modes give alike are written once, here.
 */
#ifndef GW_HOLDS_H
#define GW_HOLDS_H

#include "gw_answer.h"
#include "gw_app.h"
#include "gw_body.h"
#include "vc_event.h"
#include "vc_voucher.h"

/*
 * Answers a refused confirm given a total (422 NOT_ELIGIBLE or 409
 * ALREADY_CONFIRMED, rc's) with detail (NULL: rc's message) and the figures
 * fig under key ("quote" or "confirmed"). Frees req.
 */
void gw_holds_reply_refused(gw_request_t *req, int rc, const char *detail, const char *key,
                            const gw_figures_t *fig);

/*
 * Answers 404 for an order a real code does not have: which codes exist is
 * not told. type is the route's (VC_EV_CONFIRMED or VC_EV_RELEASED), has_total
 * whether a confirm was given one. Frees req.
 */
void gw_holds_not_found(gw_request_t *req, vc_event_type_t type, int has_total);

/*
 * A direct voucher's confirm (type VC_EV_CONFIRMED, in its body) or cancel
 * (VC_EV_RELEASED) of order_id, once the guessing limits let it on and the
 * rules v (a direct voucher's) are read: PostgreSQL alone decides, in one
 * call of dr_confirm or dr_cancel. Answers req exactly once. Everything is
 * copied: code, order_id, in and v are borrowed for the call only.
 */
void gw_holds_direct(gw_app_t *app, gw_request_t *req, vc_event_type_t type, const char *code,
                     const char *order_id, const gw_confirm_req_t *in, const vc_voucher_t *v);

#endif
