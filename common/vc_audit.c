#include "vc_audit.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_error.h"
#include "vc_pg.h"

/*
 * A row as JSON, the one form every audit row's before and after take. A
 * voucher's redis_loaded_at is bookkeeping (whether Redis was loaded), not a
 * rule an admin sets. The campaign's id is compared as text: a cast of $1 to
 * bigint could be folded, and fail, where the target is a voucher's code.
 */
#define VOUCHER_JSON "(SELECT to_jsonb(t) - 'redis_loaded_at' FROM voucher t WHERE t.code = $1)"
#define CAMPAIGN_JSON "(SELECT to_jsonb(t) FROM campaign t WHERE t.id::text = $1)"

int vc_audit_record(PGconn *conn, const vc_audit_who_t *who, const vc_audit_action_t *action,
                    char *err, size_t errlen)
{
    const char *params[] = {action->target, who->actor,     action->action,
                            action->before, action->detail, who->source};
    const char *sql;
    char why[256];
    PGresult *res;
    int rc = 0;

    if (!action->with_after || action->kind == VC_AUDIT_NONE)
        sql = "INSERT INTO admin_audit (target, actor, action, before, after, detail, source)"
              " VALUES ($1, $2, $3, $4::jsonb, NULL, $5, $6)";
    else if (action->kind == VC_AUDIT_VOUCHER)
        sql = "INSERT INTO admin_audit (target, actor, action, before, after, detail, source)"
              " VALUES ($1, $2, $3, $4::jsonb, " VOUCHER_JSON ", $5, $6)";
    else
        sql = "INSERT INTO admin_audit (target, actor, action, before, after, detail, source)"
              " VALUES ($1, $2, $3, $4::jsonb, " CAMPAIGN_JSON ", $5, $6)";
    if (!(res = vc_pg_exec(conn, sql, 6, params, &rc, why, sizeof(why)))) {
        /*
         * Whatever PostgreSQL refused (a privilege, a CHECK) is this side's
         * failure, not the request's: the caller answers 503, not 400.
         */
        snprintf(err, errlen, "writing the audit row failed: %s", why);
        return VC_ERR_UNAVAILABLE;
    }
    PQclear(res);
    return 0;
}

int vc_audit_snapshot(PGconn *conn, vc_audit_kind_t kind, const char *target, char **json,
                      char *err, size_t errlen)
{
    const char *params[] = {target};
    PGresult *res;
    int rc = 0;

    *json = NULL;
    if (kind == VC_AUDIT_NONE)
        return 0;
    if (!(res = vc_pg_exec(conn,
                           kind == VC_AUDIT_VOUCHER ? "SELECT " VOUCHER_JSON "::text"
                                                    : "SELECT " CAMPAIGN_JSON "::text",
                           1, params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) && !(*json = strdup(PQgetvalue(res, 0, 0))))
        rc = VC_ERR_NOMEM;
    PQclear(res);
    return rc;
}
