#include "vc_voucher_create.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_json.h"
#include "vc_pg.h"

int vc_voucher_mode_field(const vc_jdoc_t *doc, vc_mode_t *out, char *err, size_t errlen)
{
    const char *name;
    int rc;

    if ((rc = vc_jdoc_str(doc, "mode", &name, err, errlen)) != 0)
        return rc;
    if ((*out = vc_mode_parse(name)) == VC_MODE_UNSET) {
        snprintf(err, errlen, "field \"mode\" must be \"direct\" or \"flash\"");
        return VC_ERR_INVALID;
    }
    return 0;
}

int vc_voucher_parse(const char *body, size_t len, vc_voucher_t *out, char *err, size_t errlen)
{
    static const char *const allowed[] = {"code",
                                          "discountAmount",
                                          "discountPercent",
                                          "maxDiscountAmount",
                                          "minOrderAmount",
                                          "totalLimit",
                                          "perUserLimit",
                                          "startsAt",
                                          "endsAt",
                                          "mode",
                                          NULL};
    vc_jdoc_t doc;
    const char *code;
    int64_t percent = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = vc_jdoc_parse(&doc, body, len, err, errlen)) != 0)
        return rc;
    if ((rc = vc_jdoc_check_keys(&doc, allowed, err, errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_str(&doc, "code", &code, err, errlen)) != 0)
        goto out;
    if (!vc_code_valid(code, strlen(code))) {
        snprintf(err, errlen, "field \"code\" must be 1..%d characters of A-Z, 0-9, '_' or '-'",
                 VC_CODE_MAX);
        rc = VC_ERR_INVALID;
        goto out;
    }
    memcpy(out->code, code, strlen(code) + 1);
    if (vc_jdoc_has(&doc, "discountAmount") == vc_jdoc_has(&doc, "discountPercent")) {
        snprintf(err, errlen,
                 "exactly one of the fields \"discountAmount\" and \"discountPercent\" is "
                 "required");
        rc = VC_ERR_INVALID;
        goto out;
    }
    if (vc_jdoc_has(&doc, "discountAmount")) {
        if ((rc = vc_jdoc_whole_in(&doc, "discountAmount", 1, INT64_MAX, &out->discount_amount, err,
                                   errlen)) != 0)
            goto out;
        if (vc_jdoc_has(&doc, "maxDiscountAmount")) {
            snprintf(err, errlen, "field \"maxDiscountAmount\" goes with \"discountPercent\" only");
            rc = VC_ERR_INVALID;
            goto out;
        }
    } else {
        if ((rc = vc_jdoc_whole_in(&doc, "discountPercent", 1, 100, &percent, err, errlen)) != 0)
            goto out;
        out->discount_percent = (int)percent;
        if (vc_jdoc_has(&doc, "maxDiscountAmount") &&
            (rc = vc_jdoc_whole_in(&doc, "maxDiscountAmount", 1, INT64_MAX,
                                   &out->max_discount_amount, err, errlen)) != 0)
            goto out;
    }
    if ((rc = vc_jdoc_whole_in(&doc, "minOrderAmount", 0, INT64_MAX, &out->min_order_amount, err,
                               errlen)) != 0 ||
        (rc = vc_jdoc_whole_in(&doc, "totalLimit", 1, INT32_MAX, &out->total_limit, err, errlen)) !=
            0)
        goto out;
    out->per_customer_limit = 1;
    if (vc_jdoc_has(&doc, "perUserLimit") &&
        (rc = vc_jdoc_whole_in(&doc, "perUserLimit", 1, INT32_MAX, &out->per_customer_limit, err,
                               errlen)) != 0)
        goto out;
    if ((rc = vc_jdoc_time(&doc, "startsAt", 1, &out->starts_at_ms, err, errlen)) != 0 ||
        (rc = vc_jdoc_time(&doc, "endsAt", 1, &out->ends_at_ms, err, errlen)) != 0)
        goto out;
    if (out->ends_at_ms <= out->starts_at_ms) {
        snprintf(err, errlen, "field \"endsAt\" must be after \"startsAt\"");
        rc = VC_ERR_INVALID;
        goto out;
    }
    /* Absent: VC_MODE_UNSET, and the column's default decides (025). */
    if (vc_jdoc_has(&doc, "mode"))
        rc = vc_voucher_mode_field(&doc, &out->mode, err, errlen);
out:
    vc_jdoc_free(&doc);
    return rc;
}

void vc_voucher_rule_params(const vc_voucher_t *v, char buf[8][24], const char *params[9])
{
    const long long values[8] = {v->discount_amount,  v->discount_percent, v->max_discount_amount,
                                 v->min_order_amount, v->total_limit,      v->per_customer_limit,
                                 v->starts_at_ms,     v->ends_at_ms};
    params[0] = v->code;
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], 24, "%lld", values[i]);
        params[i + 1] = buf[i];
    }
}

/* The insert, with the mode ($11) or without it (the column's default). */
#define CREATE_COLUMNS                                                                             \
    "INSERT INTO voucher (code, discount_amount, discount_percent, max_discount_amount,"           \
    " min_order_amount, total_limit, per_user_limit, starts_at, ends_at, redis_loaded_at"
#define CREATE_VALUES                                                                              \
    ") VALUES ($1, $2, nullif($3::int, 0), nullif($4::bigint, 0), $5, $6, $7,"                     \
    " to_timestamp($8::bigint / 1000.0), to_timestamp($9::bigint / 1000.0),"                       \
    " CASE WHEN $10::boolean THEN now() END"
#define CREATE_RETURNING " ON CONFLICT (code) DO NOTHING RETURNING mode"

/*
 * Inserts v's row, and sets v->mode to the mode stored (the column's default
 * when v->mode is VC_MODE_UNSET), in one statement. VC_E_CODE_TAKEN when a
 * voucher has the code: nothing inserted, no error (the transaction goes on
 * to its rollback).
 */
static int insert(PGconn *conn, vc_voucher_t *v, int loaded, char *err, size_t errlen)
{
    char buf[8][24];
    const char *params[11];
    PGresult *res;
    int rc = 0;

    vc_voucher_rule_params(v, buf, params);
    params[9] = loaded ? "t" : "f";
    params[10] = vc_mode_name(v->mode);
    if (!(res = vc_pg_exec(conn,
                           v->mode != VC_MODE_UNSET
                               ? CREATE_COLUMNS ", mode" CREATE_VALUES ", $11)" CREATE_RETURNING
                               : CREATE_COLUMNS CREATE_VALUES ")" CREATE_RETURNING,
                           v->mode != VC_MODE_UNSET ? 11 : 10, params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1)
        v->mode = vc_mode_parse(PQgetvalue(res, 0, 0));
    else
        rc = VC_E_CODE_TAKEN;
    PQclear(res);
    return rc;
}

static int rollback(PGconn *conn, int rc)
{
    vc_pg_rollback(conn);
    return rc;
}

int vc_voucher_create(PGconn *conn, vc_voucher_t *v, const vc_audit_who_t *who, int loaded,
                      int64_t *campaign_id, char *err, size_t errlen)
{
    char stored[VC_CODE_MAX + 1];
    const char *params[] = {stored};
    vc_audit_action_t audit = {"voucher.create", v->code, VC_AUDIT_VOUCHER, 1, NULL, NULL};
    PGresult *res;
    int rc = 0;

    *campaign_id = 0;
    if ((rc = vc_pg_command(conn, "BEGIN", err, errlen)) != 0)
        return rollback(conn, rc);
    /*
     * The gateway looks a code up as a voucher first, so a voucher with a
     * campaign's one-time code would hide it. Compared in the campaign's
     * stored form ('-' dropped, as a customer's input is), under the lock a
     * campaign's generation takes before it checks its batch against the
     * vouchers (vc_campaign_pg.c), so the two cannot both pass. A code with
     * '_' is never a campaign's: nothing to check.
     */
    if (vc_campaign_normalize(v->code, strlen(v->code), stored) >= 0) {
        if ((rc = vc_pg_command(
                 conn, "SELECT pg_advisory_xact_lock(hashtext('" VC_CAMPAIGN_CODE_LOCK "'))", err,
                 errlen)) != 0)
            return rollback(conn, rc);
        if (!(res = vc_pg_exec(conn, "SELECT campaign_id FROM campaign_code WHERE code = $1", 1,
                               params, &rc, err, errlen)))
            return rollback(conn, rc);
        if (PQntuples(res) == 1) {
            *campaign_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
            PQclear(res);
            return rollback(conn, VC_E_CODE_TAKEN);
        }
        PQclear(res);
    }
    /* The audit row is committed with the voucher, or neither is (vc_audit.h). */
    if ((rc = insert(conn, v, loaded, err, errlen)) != 0 ||
        (rc = vc_audit_record(conn, who, &audit, err, errlen)) != 0 ||
        (rc = vc_pg_command(conn, "COMMIT", err, errlen)) != 0)
        return rollback(conn, rc);
    return 0;
}
