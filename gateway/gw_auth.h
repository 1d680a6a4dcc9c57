/*
 * Bearer tokens: whether a request's Authorization header carries one of the
 * tokens configured for its route (which token a route needs is
 * gw_route_auth(), in gw_router.h). Pure.
 */
#ifndef GW_AUTH_H
#define GW_AUTH_H

/*
 * Whether the Authorization header value (auth, may be NULL) carries
 * "Bearer <token>" with a token of the list tokens: comma-separated, spaces
 * around each ignored, empty entries skipped, so that a new token can be
 * added before the old one is removed (rotation). An empty list (or NULL)
 * refuses everything. The time taken does not depend on how much of any
 * token matched, nor on which one did (deploy/README.md, "Authentication").
 */
int gw_bearer_authorized(const char *auth, const char *tokens);

#endif
