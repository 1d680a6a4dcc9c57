#include "gw_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_answer.h"
#include "vc_error.h"
#include "vc_pg.h"
#include "vc_voucher.h"
#include "vc_voucher_create.h"

int gw_store_claim_load(PGconn *conn, const char *code, int64_t *remaining, int64_t *total,
                        char *err, size_t errlen)
{
    const char *params[] = {code};
    PGresult *res;
    int rc = 0;

    if (!(res = vc_pg_exec(conn,
                           "UPDATE voucher SET redis_loaded_at = now()"
                           " WHERE code = $1 AND redis_loaded_at IS NULL"
                           " RETURNING total_limit, used_count,"
                           " (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1"
                           "  AND r.status IN ('RESERVED', 'CONFIRMED'))",
                           1, params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1) {
        /* Nothing was loaded yet, so no reservation is in flight: the rows are every order. */
        int64_t rows = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        *total = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        *remaining = vc_remaining_bound(
            strtoll(PQgetvalue(res, 0, 0), NULL, 10),
            vc_uses_without_rows(strtoll(PQgetvalue(res, 0, 1), NULL, 10), rows), rows);
        goto out;
    }
    PQclear(res);
    /* No row: loaded before, or no such voucher. */
    if (!(res = vc_pg_exec(conn, "SELECT 1 FROM voucher WHERE code = $1", 1, params, &rc, err,
                           errlen)))
        return rc;
    rc = PQntuples(res) == 1 ? VC_E_REPLAYED : VC_E_NOT_FOUND;
out:
    PQclear(res);
    return rc;
}

int gw_store_update(PGconn *conn, const vc_voucher_t *v, int reload, char *err, size_t errlen)
{
    char buf[8][24];
    const char *params[11];

    vc_voucher_rule_params(v, buf, params);
    params[9] = v->inactive ? "f" : "t";
    params[10] = reload ? "t" : "f";
    /* A CHECK refused the total (below used_count): 409 LIMIT_CONFLICT, err its detail. */
    return vc_pg_command_kind(conn,
                              "UPDATE voucher SET discount_amount = $2,"
                              " discount_percent = nullif($3::int, 0),"
                              " max_discount_amount = nullif($4::bigint, 0), min_order_amount = $5,"
                              " total_limit = $6, per_user_limit = $7,"
                              " starts_at = to_timestamp($8::bigint / 1000.0),"
                              " ends_at = to_timestamp($9::bigint / 1000.0), active = $10,"
                              " redis_loaded_at = CASE WHEN $11::boolean THEN NULL"
                              "  ELSE redis_loaded_at END"
                              " WHERE code = $1",
                              11, params, VC_PG_CHECK, GW_E_LIMIT, err, errlen);
}
