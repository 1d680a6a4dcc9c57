#include "rc_raise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_error.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_model.h"
#include "vc_pg.h"
#include "vc_voucher.h"

rc_limit_action_t rc_limit_plan(int has_limit, int64_t limit, int64_t total_limit, int64_t *delta)
{
    *delta = 0;
    if (!has_limit)
        return RC_LIMIT_ADOPT;
    if (limit == total_limit)
        return RC_LIMIT_NONE;
    *delta = total_limit - limit;
    return *delta > 0 ? RC_LIMIT_ADD : RC_LIMIT_LOWER;
}

/* Ends the lock's transaction; keeps rc. */
static int end_tx(PGconn *pg, int rc)
{
    /* Only a lock and reads: a COMMIT that fails loses nothing. */
    if (rc == 0)
        (void)vc_pg_command(pg, "COMMIT", NULL, 0);
    else
        vc_pg_rollback(pg);
    return rc;
}

/*
 * Under the limit lock: total_limit, and the uses used_count counts beyond
 * its live rows, in one statement (one snapshot). Returns 0, VC_E_NOT_FOUND,
 * or a negative error.
 */
static int read_locked(PGconn *pg, const char *code, int64_t *total, int64_t *uncounted, char *err,
                       size_t errlen)
{
    const char *params[] = {code};
    int rc = 0;
    PGresult *res = vc_pg_exec(pg, VC_PG_LIMIT_LOCK, 1, params, &rc, err, errlen);

    if (!res)
        return rc;
    PQclear(res);
    res = vc_pg_exec(pg,
                     "SELECT total_limit, used_count,"
                     " (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1"
                     "  AND r.status IN ('RESERVED', 'CONFIRMED'))"
                     " FROM voucher WHERE code = $1",
                     1, params, &rc, err, errlen);
    if (!res)
        return rc;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return VC_E_NOT_FOUND;
    }
    *total = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    *uncounted = vc_uses_without_rows(strtoll(PQgetvalue(res, 0, 1), NULL, 10),
                                      strtoll(PQgetvalue(res, 0, 2), NULL, 10));
    PQclear(res);
    return 0;
}

int rc_limit_sync(PGconn *pg, rc_redis_t *redis, const char *code, int64_t snapshot_total,
                  rc_limit_proof_fn prove, void *prove_arg, int *changed, char *err,
                  size_t errlen)
{
    static const char *const what[] = {
        [RC_LIMIT_ADD] = "added the uses of a total_limit raised without Redis",
        [RC_LIMIT_LOWER] = "lowered a counter to a total_limit lowered without Redis",
        [RC_LIMIT_ADOPT] = "recorded the total_limit a counter without a limit key reflects",
    };
    char total_s[24], uncounted_s[24], limit_s[24] = "", answer[64] = "";
    int64_t limit = 0, total = 0, uncounted = 0, delta, status = 0;
    int present, rc;
    rc_limit_action_t action;
    rc_keys_t k;

    *changed = 0;
    if ((rc = rc_redis_limit(redis, code, &present, &limit, err, errlen)) != 0)
        return rc;
    /* The usual case: no lock, no second read. */
    if (rc_limit_plan(present, limit, snapshot_total, &delta) == RC_LIMIT_NONE)
        return 0;
    if ((rc = vc_pg_command(pg, "BEGIN", err, errlen)) != 0)
        return rc;
    if ((rc = read_locked(pg, code, &total, &uncounted, err, errlen)) != 0)
        return end_tx(pg, rc == VC_E_NOT_FOUND ? 0 : rc);
    if ((action = rc_limit_plan(present, limit, total, &delta)) == RC_LIMIT_NONE)
        return end_tx(pg, 0);
    /*
     * A failed proof closed the lock's session, pg with it (rc_ctx_still_leading()):
     * the transaction ended there, and pg must not be touched again.
     */
    if ((rc = prove(prove_arg, err, errlen)) != 0)
        return rc;
    rc_keys_of(code, &k);
    snprintf(total_s, sizeof(total_s), "%lld", (long long)total);
    snprintf(uncounted_s, sizeof(uncounted_s), "%lld", (long long)uncounted);
    if (present)
        snprintf(limit_s, sizeof(limit_s), "%lld", (long long)limit);
    const char *keys[VC_LIMIT_SYNC_NKEYS];
    const char *args[] = {total_s, uncounted_s, limit_s};
    rc_script_keys(&k, vc_limit_sync_keys, VC_LIMIT_SYNC_NKEYS, keys);
    rc = rc_redis_eval(redis, vc_lua_rc_limit_sync, VC_LIMIT_SYNC_NKEYS, keys, 3, args, &status,
                       answer, sizeof(answer), err, errlen);
    /* The lock is held until Redis answered: a PATCH waits for this step to end. */
    end_tx(pg, 0);
    if (rc == 0 && status == VC_LIMIT_SYNC_ORDERS_LOST)
        vc_warn("%s: the limit sync waits: the voucher's orders hash is lost, and the rebuild "
                "comes first (a lower counts the orders)",
                code);
    if (rc != 0 || status != VC_LIMIT_SYNC_DONE)
        return rc;
    *changed = 1;
    {
        char limit_f[24], total_f[24];
        vc_log_field_t f[] = {{"code", code}, {"repair", "limit"}, {"limitBefore", limit_f},
                              {"totalLimit", total_f}, {"counter", answer}};
        snprintf(limit_f, sizeof(limit_f), "%s", present ? limit_s : "none");
        snprintf(total_f, sizeof(total_f), "%lld", (long long)total);
        VC_LOG_F(VC_LOG_INFO, f, "repair: %s (counter before:after %s)", what[action], answer);
        vc_metric_add(vc_counter("voucher_reconciler_repairs_total", "Repairs made, by kind",
                                 "kind=\"limit\""),
                      1);
    }
    return 0;
}
