/*
 * The admin audit (deploy/sql/021_admin_audit.sql): one row per admin change
 * or export, written by the gateway's admin routes and by voucher-admin in
 * the transaction of the change it records. Blocking libpq calls: the
 * gateway runs them on its threadpool (gw_pg_run), inside its work
 * functions.
 */
#ifndef VC_AUDIT_H
#define VC_AUDIT_H

#include <stddef.h>

struct pg_conn;

/* Who acted, and from where. Borrowed for the call. */
typedef struct {
    const char *actor;  /* the admin's name (a named token's, or voucher-admin's operator) */
    const char *source; /* the client's address, or "voucher-admin@HOST"; may be NULL */
} vc_audit_who_t;

/* Which row a target names: its after (and before) are that row as JSON. */
typedef enum {
    VC_AUDIT_NONE = 0, /* no row: after is NULL */
    VC_AUDIT_VOUCHER,  /* target is a voucher's code */
    VC_AUDIT_CAMPAIGN, /* target is a campaign's id */
} vc_audit_kind_t;

/* One action. Borrowed for the call. */
typedef struct {
    const char *action; /* "voucher.create", "voucher.update", "campaign.export", ... */
    const char *target; /* the voucher's code or the campaign's id */
    vc_audit_kind_t kind;
    int with_after;     /* after is the target's row as it is now (in conn's transaction) */
    const char *before; /* JSON text of the row before the change (vc_audit_snapshot), or NULL */
    const char *detail; /* free text (what was asked, a count), or NULL */
} vc_audit_action_t;

/*
 * Inserts the row of action by who, on conn, in the transaction conn is in
 * (if any: the caller commits it with its change). Returns 0, or a negative
 * VC_ERR_* with err set; the caller then rolls its change back, since a
 * change must not be committed unrecorded.
 */
int vc_audit_record(struct pg_conn *conn, const vc_audit_who_t *who,
                    const vc_audit_action_t *action, char *err, size_t errlen);

/*
 * Reads the row target names (kind) as JSON text, as an audit row's before
 * or after holds it, into *json (malloc'd, the caller frees; NULL when there
 * is no such row). Returns 0, or a negative VC_ERR_* with err set.
 */
int vc_audit_snapshot(struct pg_conn *conn, vc_audit_kind_t kind, const char *target, char **json,
                      char *err, size_t errlen);

#endif
