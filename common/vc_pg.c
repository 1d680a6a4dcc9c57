#include "vc_pg.h"

#include "vc_error.h"
#include "vc_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PGconn *vc_pg_connect(const char *dsn, const char *application_name, char *err, size_t errlen)
{
    static const char *const none[] = {NULL};

    return vc_pg_connect_with(dsn, application_name, none, none, err, errlen);
}

/*
 * libpq's messages outside a query (a NOTICE, or the FATAL a session gets
 * when the server ends it while it idles or LISTENs: "terminating connection
 * due to administrator command"): a log line like every other, not libpq's
 * default of the raw text on stderr, which breaks the one-JSON-object-a-line
 * log (deploy/README.md, "Logs").
 */
static void notice_log(void *arg, const char *message)
{
    size_t len = strlen(message);

    (void)arg;
    while (len > 0 && (message[len - 1] == '\n' || message[len - 1] == ' '))
        len--;
    vc_warn("PostgreSQL says: %.*s", (int)len, message);
}

PGconn *vc_pg_connect_with(const char *dsn, const char *application_name,
                           const char *const *more_keys, const char *const *more_vals, char *err,
                           size_t errlen)
{
    /*
     * Keywords are read in order and a later one wins: options comes before
     * the DSN (expanded from dbname), so that a DSN setting options replaces
     * ours; application_name, connect_timeout and the caller's come after it
     * and are ours.
     */
    const char *keys[16] = {"options", "dbname", "application_name", "connect_timeout"};
    const char *vals[16] = {VC_PG_SESSION_OPTIONS, dsn, application_name, "5"};
    PGconn *conn;
    int n = 4;

    for (int i = 0; more_keys[i]; i++, n++) {
        VC_ASSERT(n < 15);
        keys[n] = more_keys[i];
        vals[n] = more_vals[i];
    }
    keys[n] = vals[n] = NULL;
    if (!(conn = PQconnectdbParams(keys, vals, 1 /* expand dbname as a conninfo */))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        vc_pg_error_text(conn, NULL, err, errlen);
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, notice_log, NULL);
    return conn;
}

/* vc_pg_exec(), and *kind the failure's kind (VC_PG_PERMANENT when it succeeded). */
static PGresult *exec_kind(PGconn *conn, const char *sql, int nparams, const char *const *params,
                           int *rc, vc_pg_kind_t *kind, char *err, size_t errlen)
{
    PGresult *res = nparams > 0 ? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)
                                : PQexec(conn, sql);

    *kind = VC_PG_PERMANENT;
    if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
        return res;
    *kind = vc_pg_kind(conn, res);
    *rc = vc_pg_fail(conn, res, err, errlen);
    return NULL;
}

PGresult *vc_pg_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
                     int *rc, char *err, size_t errlen)
{
    vc_pg_kind_t kind;

    return exec_kind(conn, sql, nparams, params, rc, &kind, err, errlen);
}

int vc_pg_command_kind(PGconn *conn, const char *sql, int nparams, const char *const *params,
                       vc_pg_kind_t kind, int answer, char *err, size_t errlen)
{
    vc_pg_kind_t failed;
    int rc = 0;
    PGresult *res = exec_kind(conn, sql, nparams, params, &rc, &failed, err, errlen);

    if (!res)
        return failed == kind ? answer : rc;
    PQclear(res);
    return 0;
}

int vc_pg_fail(PGconn *conn, PGresult *res, char *err, size_t errlen)
{
    int rc = vc_pg_error_class(conn, res);

    if (errlen > 0)
        vc_pg_error_text(conn, res, err, errlen);
    PQclear(res);
    return rc;
}

int vc_pg_command(PGconn *conn, const char *sql, char *err, size_t errlen)
{
    int rc = 0;
    PGresult *res = vc_pg_exec(conn, sql, 0, NULL, &rc, err, errlen);

    PQclear(res);
    return rc;
}

void vc_pg_rollback(PGconn *conn)
{
    PGTransactionStatusType t = PQtransactionStatus(conn);

    if (t == PQTRANS_INTRANS || t == PQTRANS_INERROR)
        PQclear(PQexec(conn, "ROLLBACK"));
}

int vc_pg_dsn_check(const char *dsn, char *err, size_t errlen)
{
    char *why = NULL;
    PQconninfoOption *opts = PQconninfoParse(dsn, &why);

    if (!opts) {
        snprintf(err, errlen,
                 "the PostgreSQL DSN (--pg-dsn, VOUCHER_PG_DSN) is not a libpq connection string: %s",
                 why ? why : "out of memory");
        /* libpq's own message ends in a newline. */
        err[strcspn(err, "\n")] = '\0';
        PQfreemem(why);
        return VC_ERR_INVALID;
    }
    PQconninfoFree(opts);
    return 0;
}

vc_pg_kind_t vc_pg_state_kind(const char *state)
{
    /*
     * Class 08 connection exception, 40 transaction rollback (serialization
     * failure, deadlock), 53 insufficient resources, 57 operator intervention
     * (admin shutdown, cannot connect now), 58 system error, XX000 internal
     * error: all may pass. Classes 22 and 23 are the data's.
     */
    static const struct {
        const char *prefix; /* a class (two characters) or a whole SQLSTATE */
        vc_pg_kind_t kind;
    } kinds[] = {
        {"08", VC_PG_TRANSIENT},    {"40", VC_PG_TRANSIENT},    {"53", VC_PG_TRANSIENT},
        {"57", VC_PG_TRANSIENT},    {"58", VC_PG_TRANSIENT},    {"XX000", VC_PG_TRANSIENT},
        {"22", VC_PG_DATA},         {"23505", VC_PG_UNIQUE},    {"23514", VC_PG_CHECK},
        {"23503", VC_PG_FOREIGN_KEY}, {"23", VC_PG_INTEGRITY},
    };

    if (!state)
        return VC_PG_PERMANENT;
    /* The first prefix that matches wins: a whole SQLSTATE before its class. */
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strncmp(state, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
            return kinds[i].kind;
    return VC_PG_PERMANENT;
}

vc_pg_kind_t vc_pg_kind(const PGconn *conn, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    if (!conn || PQstatus(conn) != CONNECTION_OK || !state)
        return VC_PG_TRANSIENT;
    return vc_pg_state_kind(state);
}

int vc_pg_kind_is_data(vc_pg_kind_t kind)
{
    return kind == VC_PG_DATA || kind == VC_PG_UNIQUE || kind == VC_PG_CHECK ||
           kind == VC_PG_FOREIGN_KEY || kind == VC_PG_INTEGRITY;
}

const char *vc_pg_constraint(const PGresult *res)
{
    const char *name = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

    return name ? name : "";
}

int vc_pg_error_class(const PGconn *conn, const PGresult *res)
{
    return vc_pg_kind(conn, res) == VC_PG_TRANSIENT ? VC_ERR_UNAVAILABLE : VC_ERR_INVALID;
}

void vc_pg_error_text(const PGconn *conn, const PGresult *res, char *buf, size_t cap)
{
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    size_t n;

    if (!msg || !*msg)
        msg = conn ? PQerrorMessage(conn) : "no connection";
    if (!msg || !*msg)
        msg = "unknown PostgreSQL error";
    if (state)
        snprintf(buf, cap, "%s: %s", state, msg);
    else
        snprintf(buf, cap, "%s", msg);
    /* libpq ends messages with a newline, sometimes several lines: keep one. */
    for (n = 0; buf[n]; n++)
        if (buf[n] == '\n' || buf[n] == '\r')
            buf[n] = buf[n + 1] ? ' ' : '\0';
}

void vc_pg_error_primary(const PGconn *conn, const PGresult *res, char *buf, size_t cap)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    if (state && primary)
        snprintf(buf, cap, "%s: %s", state, primary);
    else
        vc_pg_error_text(conn, res, buf, cap);
}

void vc_pg_voucher_row(const PGresult *res, int row, vc_voucher_t *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->code, sizeof(out->code), "%s", PQgetvalue(res, row, 0));
    out->discount_amount = strtoll(PQgetvalue(res, row, 1), NULL, 10);
    out->discount_percent = PQgetisnull(res, row, 2) ? 0 : atoi(PQgetvalue(res, row, 2));
    out->max_discount_amount =
        PQgetisnull(res, row, 3) ? 0 : strtoll(PQgetvalue(res, row, 3), NULL, 10);
    out->min_order_amount = strtoll(PQgetvalue(res, row, 4), NULL, 10);
    out->total_limit = strtoll(PQgetvalue(res, row, 5), NULL, 10);
    out->used_count = strtoll(PQgetvalue(res, row, 6), NULL, 10);
    out->per_customer_limit = strtoll(PQgetvalue(res, row, 7), NULL, 10);
    out->starts_at_ms = strtoll(PQgetvalue(res, row, 8), NULL, 10);
    out->ends_at_ms = strtoll(PQgetvalue(res, row, 9), NULL, 10);
    out->inactive = strcmp(PQgetvalue(res, row, 10), "t") == 0;
    out->mode = vc_mode_parse(PQgetvalue(res, row, 11));
}

int vc_pg_load_voucher(PGconn *conn, const char *code, vc_voucher_t *out, char *err, size_t errlen)
{
    const char *params[] = {code};
    PGresult *res;
    int rc = 0;

    if (!(res = vc_pg_exec(conn, "SELECT " VC_PG_VOUCHER_COLUMNS " FROM voucher WHERE code = $1",
                           1, params, &rc, err, errlen)))
        return rc;
    if (PQntuples(res) == 0) {
        rc = VC_E_NOT_FOUND;
        goto out;
    }
    vc_pg_voucher_row(res, 0, out);
out:
    PQclear(res);
    return rc;
}
