/*
 * Bearer tokens: whether a request's Authorization header carries one of the
 * tokens configured for its route (which token a route needs is
 * gw_route_auth(), in gw_router.h). Pure.
 */
#ifndef GW_AUTH_H
#define GW_AUTH_H

#include <stddef.h>

/*
 * Whether the Authorization header value (auth, may be NULL) carries
 * "Bearer <token>" with a token of the list tokens: comma-separated, spaces
 * around each ignored, empty entries skipped, so that a new token can be
 * added before the old one is removed (rotation). An empty list (or NULL)
 * refuses everything. The time taken does not depend on how much of any
 * token matched, nor on which one did (deploy/README.md, "Authentication").
 */
int gw_bearer_authorized(const char *auth, const char *tokens);

/* The shortest token a bearer token setting accepts: 32 characters (deploy/README.md). */
#define GW_TOKEN_MIN_LEN 32

/*
 * Checks a bearer token setting (tokens, a list as gw_bearer_authorized()
 * reads it) before the gateway starts: an empty string is fine (the
 * setting is off), else every token of the list must be at least
 * GW_TOKEN_MIN_LEN characters and must not be, nor contain, a placeholder
 * the documentation shows (CHANGE-ME: deploy/systemd/gateway.env), and the
 * list must hold a token. Returns 0, or VC_ERR_INVALID with err saying
 * which token of the list is refused and why (never the token itself).
 */
int gw_token_list_check(const char *tokens, char *err, size_t errlen);

#endif
