#include "gw_direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "vc_num.h"
#include "vc_pg.h"

static const char *const words[GW_DIRECT_ANSWERS] = {
    [GW_DIRECT_FAILED] = "failed",
#define GW_DIRECT_WORD(name, word, rc) [GW_DIRECT_##name] = word,
    GW_DIRECT_ANSWER_MAP(GW_DIRECT_WORD)
#undef GW_DIRECT_WORD
};

static const int codes[GW_DIRECT_ANSWERS] = {
    [GW_DIRECT_FAILED] = VC_ERR_PROTOCOL,
#define GW_DIRECT_RC(name, word, rc) [GW_DIRECT_##name] = (rc),
    GW_DIRECT_ANSWER_MAP(GW_DIRECT_RC)
#undef GW_DIRECT_RC
};

gw_direct_answer_t gw_direct_answer_parse(const char *word)
{
    if (!word)
        return GW_DIRECT_FAILED;
    for (int a = GW_DIRECT_FAILED + 1; a < GW_DIRECT_ANSWERS; a++)
        if (strcmp(words[a], word) == 0)
            return (gw_direct_answer_t)a;
    return GW_DIRECT_FAILED;
}

const char *gw_direct_answer_word(gw_direct_answer_t a)
{
    return (unsigned)a < GW_DIRECT_ANSWERS ? words[a] : words[GW_DIRECT_FAILED];
}

int gw_direct_answer_rc(gw_direct_answer_t a)
{
    return (unsigned)a < GW_DIRECT_ANSWERS ? codes[a] : VC_ERR_PROTOCOL;
}

gw_direct_answer_t gw_direct_answer_for(int rc)
{
    if (rc <= 0)
        return GW_DIRECT_FAILED;
    for (int a = GW_DIRECT_FAILED + 1; a < GW_DIRECT_ANSWERS; a++)
        if (codes[a] == rc)
            return (gw_direct_answer_t)a;
    return GW_DIRECT_FAILED;
}

/* Column col of res's first row as an integer: 1 read, 0 NULL (or no such column). */
static int column_int(const PGresult *res, int col, int64_t *out)
{
    if (col < 0 || col >= PQnfields(res) || PQgetisnull(res, 0, col))
        return 0;
    *out = strtoll(PQgetvalue(res, 0, col), NULL, 10);
    return 1;
}

/* The column named name of res, or -1. */
static int column(const PGresult *res, const char *name)
{
    return PQfnumber(res, name);
}

static int64_t now_us(void)
{
    return (int64_t)(uv_hrtime() / 1000);
}

/*
 * Runs a dr_* function's SELECT and reads its one row into out: the answer,
 * and whichever figures its columns carry (by name: each function returns
 * the ones its answers need). Starts from failure: out->answer stays
 * GW_DIRECT_FAILED unless a listed word came back.
 */
static int call(PGconn *conn, const char *sql, int nparams, const char *const *params,
                gw_direct_result_t *out, char *err, size_t errlen)
{
    int64_t t0 = now_us();
    PGresult *res;
    int rc = 0, col;

    memset(out, 0, sizeof(*out));
    res = vc_pg_exec(conn, sql, nparams, params, &rc, err, errlen);
    out->pg_us = now_us() - t0;
    if (!res)
        return rc;
    if (PQntuples(res) != 1 || (col = column(res, "answer")) < 0 || PQgetisnull(res, 0, col)) {
        snprintf(err, errlen, "the function answered %d rows, without an answer", PQntuples(res));
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    if ((out->answer = gw_direct_answer_parse(PQgetvalue(res, 0, col))) == GW_DIRECT_FAILED) {
        snprintf(err, errlen, "the function answered \"%.40s\", not one of gw_direct.h's",
                 PQgetvalue(res, 0, col));
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    out->has_discount = column_int(res, column(res, "discount"), &out->discount);
    out->has_amount = column_int(res, column(res, "amount"), &out->amount);
    out->has_held_until = column_int(res, column(res, "held_until_ms"), &out->held_until_ms);
    out->has_remaining = column_int(res, column(res, "remaining"), &out->remaining);
    (void)column_int(res, column(res, "used"), &out->used);
    if ((col = column(res, "status")) >= 0 && !PQgetisnull(res, 0, col))
        snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(res, 0, col));
out:
    PQclear(res);
    return rc;
}

int gw_direct_reserve(PGconn *conn, const gw_direct_reserve_t *in, gw_direct_result_t *out,
                      char *err, size_t errlen)
{
    char customer[VC_I64_TEXT], amount[VC_I64_TEXT], discount[VC_I64_TEXT], now[VC_I64_TEXT],
        held[VC_I64_TEXT];
    const char *params[] = {in->code, in->order_id, customer, amount,
                            discount, now,          held,     in->event};

    vc_i64_text(customer, in->customer_id);
    vc_i64_text(amount, in->order_amount);
    vc_i64_text(discount, in->discount);
    vc_i64_text(now, in->now_ms);
    vc_i64_text(held, in->held_until_ms);
    return call(conn,
                "SELECT * FROM dr_reserve($1, $2, $3, $4::bigint, $5::bigint, $6::bigint,"
                " $7::bigint, $8)",
                8, params, out, err, errlen);
}

int gw_direct_known(PGconn *conn, const char *code, const char *order_id, int *known, char *err,
                    size_t errlen)
{
    const char *params[] = {order_id, code};
    PGresult *res;
    int rc = 0;

    if (!(res = vc_pg_exec(conn,
                           "SELECT 1 FROM voucher_redemption"
                           " WHERE order_id = $1 AND voucher_code = $2",
                           2, params, &rc, err, errlen)))
        return rc;
    *known = PQntuples(res) > 0;
    PQclear(res);
    return 0;
}

int gw_direct_order(PGconn *conn, const char *code, const char *order_id, gw_direct_order_t *out,
                    char *err, size_t errlen)
{
    const char *params[] = {order_id, code};
    PGresult *res;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (!(res = vc_pg_exec(conn,
                           "SELECT customer_id, order_amount, discount_amount"
                           " FROM voucher_redemption WHERE order_id = $1 AND voucher_code = $2",
                           2, params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 1) {
        out->found = 1;
        out->customer_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        out->order_amount = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        out->discount = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    }
    PQclear(res);
    return 0;
}

int gw_direct_confirm(PGconn *conn, const char *code, const char *order_id, int has_total,
                      int64_t total, int has_price, int64_t price, int64_t now_ms,
                      const char *event, gw_direct_result_t *out, char *err, size_t errlen)
{
    char total_s[VC_I64_TEXT], price_s[VC_I64_TEXT], now[VC_I64_TEXT];
    const char *params[] = {code, order_id, has_total ? total_s : NULL,
                            has_total && has_price ? price_s : NULL, now, event};

    vc_i64_text(total_s, total);
    vc_i64_text(price_s, price);
    vc_i64_text(now, now_ms);
    return call(conn, "SELECT * FROM dr_confirm($1, $2, $3::bigint, $4::bigint, $5::bigint, $6)",
                6, params, out, err, errlen);
}

int gw_direct_cancel(PGconn *conn, const char *code, const char *order_id, int64_t now_ms,
                     const char *event, gw_direct_result_t *out, char *err, size_t errlen)
{
    char now[VC_I64_TEXT];
    const char *params[] = {code, order_id, now, event};

    vc_i64_text(now, now_ms);
    return call(conn, "SELECT * FROM dr_cancel($1, $2, $3::bigint, $4)", 4, params, out, err,
                errlen);
}

int gw_direct_quote(PGconn *conn, const char *code, int64_t customer_id, int64_t now_ms,
                    gw_direct_result_t *out, char *err, size_t errlen)
{
    char customer[VC_I64_TEXT], now[VC_I64_TEXT];
    const char *params[] = {code, now, customer};

    vc_i64_text(customer, customer_id);
    vc_i64_text(now, now_ms);
    /* The customer's uses in the same snapshot as the count left, as one reservation sees both. */
    return call(conn,
                "SELECT q.answer, q.remaining,"
                " (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1"
                "   AND r.customer_id = $3::bigint AND r.status <> 'RELEASED') AS used"
                " FROM dr_quote($1, $2::bigint) q",
                3, params, out, err, errlen);
}
