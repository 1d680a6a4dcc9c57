#include "gw_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_router.h"
#include "vc_error.h"
#include "vc_pg.h"
#include "vc_voucher.h"

int gw_store_claim_load(PGconn *conn, const char *code, int64_t *remaining, int64_t *total,
                        char *err, size_t errlen)
{
    const char *params[] = {code};
    PGresult *res;
    int rc = 0;

    res = PQexecParams(conn,
                       "UPDATE voucher SET redis_loaded_at = now()"
                       " WHERE code = $1 AND redis_loaded_at IS NULL"
                       " RETURNING total_limit, used_count,"
                       " (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1"
                       "  AND r.status IN ('RESERVED', 'CONFIRMED'))",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = vc_pg_error_class(conn, res);
        vc_pg_error_text(conn, res, err, errlen);
        goto out;
    }
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
    res =
        PQexecParams(conn, "SELECT 1 FROM voucher WHERE code = $1", 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = vc_pg_error_class(conn, res);
        vc_pg_error_text(conn, res, err, errlen);
        goto out;
    }
    rc = PQntuples(res) == 1 ? VC_E_REPLAYED : VC_E_NOT_FOUND;
out:
    PQclear(res);
    return rc;
}

int gw_store_create(PGconn *conn, const vc_voucher_t *v, char *err, size_t errlen)
{
    char amount[24], percent[24], max[24], min[24], total[24], per[24], starts[24], ends[24];
    const char *params[9] = {v->code, amount, percent, max, min, total, per, starts, ends};
    const char *state;
    PGresult *res;
    int rc = 0;

    snprintf(amount, sizeof(amount), "%lld", (long long)v->discount_amount);
    snprintf(percent, sizeof(percent), "%d", v->discount_percent);
    snprintf(max, sizeof(max), "%lld", (long long)v->max_discount_amount);
    snprintf(min, sizeof(min), "%lld", (long long)v->min_order_amount);
    snprintf(total, sizeof(total), "%lld", (long long)v->total_limit);
    snprintf(per, sizeof(per), "%lld", (long long)v->per_customer_limit);
    snprintf(starts, sizeof(starts), "%lld", (long long)v->starts_at_ms);
    snprintf(ends, sizeof(ends), "%lld", (long long)v->ends_at_ms);
    res = PQexecParams(conn,
                       "INSERT INTO voucher (code, discount_amount, discount_percent,"
                       " max_discount_amount, min_order_amount, total_limit, per_user_limit,"
                       " starts_at, ends_at, redis_loaded_at)"
                       " VALUES ($1, $2, nullif($3::int, 0), nullif($4::bigint, 0), $5, $6, $7,"
                       " to_timestamp($8::bigint / 1000.0), to_timestamp($9::bigint / 1000.0),"
                       " now())",
                       9, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (state && strcmp(state, "23505") == 0) {
            rc = GW_E_EXISTS;
        } else {
            rc = vc_pg_error_class(conn, res);
            vc_pg_error_text(conn, res, err, errlen);
        }
    }
    PQclear(res);
    return rc;
}
