/*
 * Named admin credentials (VOUCHER_ADMIN_TOKENS_FILE): a file of lines
 *
 *     NAME SHA256-HEX-OF-THE-TOKEN
 *
 * ('#' starts a comment, blank lines are skipped), so that each admin holds a
 * token of their own and the admin audit (vc_audit.h) names who acted. The
 * file holds no token, only its SHA-256: reading it gives no one a way in.
 * The gateway loads it at start and again on SIGHUP (main.c): a token is
 * added, rotated or revoked without a restart. The parsing and matching are
 * pure (tests/unit/test_gateway.c); the process's table is swapped under a
 * lock its readers hold only for one match.
 */
#ifndef GW_ADMINS_H
#define GW_ADMINS_H

#include <stddef.h>

#define GW_ADMIN_NAME_MAX 64 /* the audit's actor: 1..64 characters */

typedef struct gw_admins gw_admins_t;

/*
 * Parses the file's text (len bytes, borrowed) into a new table (the caller
 * frees it with gw_admins_free). A name is 1..64 characters of A-Z a-z 0-9
 * . _ @ -, each name once; the hash 64 hex digits. Returns NULL with err
 * naming the first bad line (and never the hash), or on no memory.
 */
gw_admins_t *gw_admins_parse(const char *text, size_t len, char *err, size_t errlen);

void gw_admins_free(gw_admins_t *t);

/* How many admins t names. */
size_t gw_admins_count(const gw_admins_t *t);

/*
 * Whether token (len bytes) is the token of one of t's admins: its SHA-256 is
 * compared with every entry's, all bytes of all of them whatever matched, so
 * the time tells nothing of which matched. Copies that admin's name into
 * name and returns 1, else returns 0.
 */
int gw_admins_match(const gw_admins_t *t, const char *token, size_t len,
                    char name[GW_ADMIN_NAME_MAX + 1]);

/*
 * Reads path and makes it the process's table (any thread; SIGHUP's handler
 * on the main loop). On any failure the table in use stays, and err says why.
 * Returns 0 with *count the admins named, or a negative VC_ERR_*.
 */
int gw_admins_load(const char *path, size_t *count, char *err, size_t errlen);

/*
 * Whether the Authorization header value (auth, may be NULL) carries
 * "Bearer <token>" of an admin of the process's table (none loaded: no);
 * copies the admin's name into name. Any thread.
 */
int gw_admins_authorized(const char *auth, char name[GW_ADMIN_NAME_MAX + 1]);

/* Frees the process's table, at exit, once no worker runs. */
void gw_admins_unload(void);

#endif
