#include "wr_pg.h"
#include "wr_dlt.h"
#include "wr_state.h"

#include "vc_error.h"
#include "vc_log.h"
#include "vc_pg.h"

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WR_PG_NPARAMS 11

/*
 * wr_apply_batch() (deploy/sql/009) is wr_apply_events() plus, in the same
 * transaction, the release reasons and the letters a replay settled; its form
 * with an 11th array, campaignId (deploy/sql/016), sends a campaign's events
 * to campaign_redemption and the others to the former.
 */
static const char apply_sql[] =
    "SELECT wr_apply_batch($1::smallint[], $2::text[], $3::bigint[], $4::text[],"
    " $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[],"
    " $11::bigint[])";

static const char park_sql[] =
    "SELECT wr_dlt_park($1, $2, $3, $4, $5::int, $6::bigint, $7, $8::int, $9::bigint, $10, $11,"
    " $12)";

struct wr_pg {
    PGconn *conn;
    char *dsn;
    int in_flight; /* wr_pg_send() sent a statement whose result is not read yet */
};

/* A growing text buffer for array literals; errors are sticky. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} wr_text_t;

static void text_reserve(wr_text_t *t, size_t more)
{
    size_t cap;
    char *data;

    if (t->failed || t->len + more + 1 <= t->cap)
        return;
    cap = t->cap ? t->cap : 256;
    while (cap < t->len + more + 1)
        cap *= 2;
    if (!(data = realloc(t->data, cap))) {
        t->failed = 1;
        return;
    }
    t->data = data;
    t->cap = cap;
}

static void text_putc(wr_text_t *t, char c)
{
    text_reserve(t, 1);
    if (t->failed)
        return;
    t->data[t->len++] = c;
    t->data[t->len] = '\0';
}

static void text_int(wr_text_t *t, long long v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", v);

    text_reserve(t, (size_t)n);
    if (t->failed)
        return;
    memcpy(t->data + t->len, num, (size_t)n + 1);
    t->len += (size_t)n;
}

/*
 * Appends an amount as an array element, or NULL when the event has none: a
 * VoucherConfirmed without the final figures (deploy/sql/011).
 */
static void text_amount(wr_text_t *t, const vc_event_t *ev, long long v)
{
    if (ev->type == VC_EV_CONFIRMED && !ev->has_amounts) {
        for (const char *s = "NULL"; *s; s++)
            text_putc(t, *s);
        return;
    }
    text_int(t, v);
}

/* Appends s as a quoted array element: "..." with " and \ escaped. */
static void text_quoted(wr_text_t *t, const char *s)
{
    text_putc(t, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            text_putc(t, '\\');
        text_putc(t, *s);
    }
    text_putc(t, '"');
}

/*
 * What a failed apply statement means. Only an error the events' data caused
 * (class 22, data exception; class 23, integrity constraint violation, which
 * wr_apply_events() also raises for an unknown voucher and the limits) marks
 * an event poison (VC_ERR_INVALID). Any other error that is not already
 * transient (vc_pg_error_class) is the schema's or the deployment's: an
 * undefined column after a bad migration (42703), a privilege taken away
 * (42501), a function missing. Each event would fail the same way, so
 * dead-lettering would empty the stream into the dead-letter topic; the batch
 * waits and is tried again instead (VC_ERR_UNAVAILABLE), loudly, until
 * someone mends the database.
 */
static int apply_error_class(const PGconn *conn, const PGresult *res)
{
    return vc_pg_kind_is_data(vc_pg_kind(conn, res)) ? VC_ERR_INVALID : VC_ERR_UNAVAILABLE;
}

const char *wr_pg_dlt_class(const char *error_text)
{
    switch (vc_pg_state_kind(error_text)) {
    case VC_PG_FOREIGN_KEY:
        return WR_DLT_UNKNOWN_VOUCHER;
    case VC_PG_UNIQUE:
    case VC_PG_CHECK:
    case VC_PG_INTEGRITY:
        return WR_DLT_CONSTRAINT;
    default:
        return WR_DLT_REJECTED;
    }
}

static int check_schema(PGconn *conn, char *err, size_t errlen)
{
    int rc = 0;
    PGresult *res = vc_pg_exec(conn,
                               "SELECT to_regprocedure('wr_apply_batch(smallint[], text[],"
                               " bigint[], text[], bigint[], bigint[], bigint[], bigint[],"
                               " text[], text[], bigint[])') IS NOT NULL",
                               0, NULL, &rc, err, errlen);

    if (res && strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        snprintf(err, errlen,
                 "function wr_apply_batch() is missing: run deploy/migrate (the migrations, "
                 "then deploy/sql/functions.sql)");
        rc = VC_ERR_INVALID;
    }
    PQclear(res);
    return rc;
}

static int exec_cmd(wr_pg_t *pg, const char *sql, char *err, size_t errlen);

/* Connects (again) when there is no healthy connection. */
static int ensure_conn(wr_pg_t *pg, char *err, size_t errlen)
{
    PGresult *res;
    int rc;

    if (pg->conn && PQstatus(pg->conn) == CONNECTION_OK &&
        PQtransactionStatus(pg->conn) == PQTRANS_IDLE)
        return 0;
    if (pg->conn)
        PQfinish(pg->conn);
    pg->conn = vc_pg_connect(pg->dsn, "voucher-writer", err, errlen);
    if (!pg->conn)
        return VC_ERR_UNAVAILABLE;
    /*
     * The per-customer check of deploy/sql/005 locks the voucher rows and
     * then counts with a fresh snapshot: right under READ COMMITTED only.
     * Whatever the server, the role or PGOPTIONS make the default, the
     * writer's transactions run READ COMMITTED (007 refuses REPEATABLE READ).
     */
    if ((rc = exec_cmd(pg, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
                       err, errlen)) != 0 ||
        (rc = check_schema(pg->conn, err, errlen)) != 0)
        goto fail;
    res = PQprepare(pg->conn, "wr_apply", apply_sql, WR_PG_NPARAMS, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        rc = vc_pg_fail(pg->conn, res, err, errlen);
        goto fail;
    }
    PQclear(res);
    vc_info("connected to PostgreSQL");
    return 0;
fail:
    PQfinish(pg->conn);
    pg->conn = NULL;
    return rc;
}

int wr_pg_open(wr_pg_t **out, const char *dsn, char *err, size_t errlen)
{
    wr_pg_t *pg = calloc(1, sizeof(*pg));
    int rc;

    *out = NULL;
    if (!pg || !(pg->dsn = strdup(dsn))) {
        free(pg);
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    rc = ensure_conn(pg, err, errlen);
    if (rc == VC_ERR_INVALID) {
        wr_pg_close(pg);
        return rc;
    }
    *out = pg;
    return rc;
}

void wr_pg_close(wr_pg_t *pg)
{
    if (!pg)
        return;
    if (pg->conn)
        PQfinish(pg->conn);
    free(pg->dsn);
    free(pg);
}

/* Parses "{1,2,3}" into the outcomes of msgs[lo..hi). */
static int read_outcomes(const char *text, wr_msg_t **msgs, size_t lo, size_t hi)
{
    const char *p = text;
    size_t i = lo;

    if (*p++ != '{')
        return VC_ERR_PROTOCOL;
    while (*p && *p != '}') {
        int v = 0;
        if (*p < '0' || *p > '9' || i >= hi)
            return VC_ERR_PROTOCOL;
        while (*p >= '0' && *p <= '9')
            v = v * 10 + (*p++ - '0');
        msgs[i]->outcome = v;
        if (v == WR_OUT_CONFLICT) {
            msgs[i]->dlt_class = WR_DLT_CONFLICT;
            snprintf(msgs[i]->error, sizeof(msgs[i]->error),
                     "%s for order %s of voucher %s: the order is redeemed on another voucher",
                     vc_event_type_name(msgs[i]->ev.type), msgs[i]->ev.order_id, msgs[i]->ev.code);
        } else if (v == WR_OUT_MISMATCH) {
            /* The row of a direct voucher is the truth: an event it does not bear out is parked. */
            msgs[i]->dlt_class = WR_DLT_DIRECT_MISMATCH;
            snprintf(msgs[i]->error, sizeof(msgs[i]->error),
                     "%s for order %s of direct voucher %s: its row does not bear it out (no "
                     "row, another state, or other figures)",
                     vc_event_type_name(msgs[i]->ev.type), msgs[i]->ev.order_id, msgs[i]->ev.code);
        } else if (v != WR_OUT_APPLIED && v != WR_OUT_NOOP && v != WR_OUT_EARLY &&
                   v != WR_OUT_TOMBSTONE) {
            return VC_ERR_PROTOCOL;
        }
        i++;
        if (*p == ',')
            p++;
    }
    return i == hi ? 0 : VC_ERR_PROTOCOL;
}

/* The statement's parameters for msgs[lo..hi): ten array literals. */
typedef struct {
    wr_text_t arr[WR_PG_NPARAMS];
    const char *values[WR_PG_NPARAMS];
} wr_params_t;

static void params_free(wr_params_t *p)
{
    for (int a = 0; a < WR_PG_NPARAMS; a++)
        free(p->arr[a].data);
}

/* Fills p (params_free() it whatever the result). Returns 0 or VC_ERR_NOMEM. */
static int params_build(wr_params_t *p, wr_msg_t **msgs, size_t lo, size_t hi, char *err,
                        size_t errlen)
{
    wr_text_t *arr = p->arr;

    memset(p, 0, sizeof(*p));
    for (int a = 0; a < WR_PG_NPARAMS; a++)
        text_putc(&arr[a], '{');
    for (size_t i = lo; i < hi; i++) {
        const vc_event_t *ev = &msgs[i]->ev;
        if (i > lo)
            for (int a = 0; a < WR_PG_NPARAMS; a++)
                text_putc(&arr[a], ',');
        text_int(&arr[0], ev->type);
        text_quoted(&arr[1], ev->code);
        text_int(&arr[2], ev->customer_id);
        text_quoted(&arr[3], ev->order_id);
        text_amount(&arr[4], ev, ev->discount_amount);
        text_amount(&arr[5], ev, ev->order_amount);
        text_int(&arr[6], ev->at_ms);
        text_int(&arr[7], ev->held_until_ms);
        text_quoted(&arr[8], ev->type == VC_EV_RELEASED ? ev->reason : "");
        text_quoted(&arr[9], msgs[i]->replayed_from);
        text_int(&arr[10], ev->campaign_id);
    }
    for (int a = 0; a < WR_PG_NPARAMS; a++) {
        text_putc(&arr[a], '}');
        if (arr[a].failed) {
            snprintf(err, errlen, "out of memory");
            return VC_ERR_NOMEM;
        }
        p->values[a] = arr[a].data;
    }
    return 0;
}

/*
 * Records the outcomes of msgs[lo..hi) from wr_apply_events()'s result, and
 * clears res. Returns 0, VC_ERR_INVALID (the statement failed and will fail
 * again; err holds "SQLSTATE: message"), VC_ERR_UNAVAILABLE or
 * VC_ERR_PROTOCOL.
 */
static int take_result(wr_pg_t *pg, PGresult *res, wr_msg_t **msgs, size_t lo, size_t hi,
                       char *err, size_t errlen)
{
    int rc = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = apply_error_class(pg->conn, res);
        /* What a dead letter and its log line need. */
        vc_pg_error_primary(pg->conn, res, err, errlen);
    } else if (PQntuples(res) != 1 || read_outcomes(PQgetvalue(res, 0, 0), msgs, lo, hi) != 0) {
        snprintf(err, errlen, "unexpected result from wr_apply_events(): %.80s",
                 PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "(no row)");
        rc = VC_ERR_PROTOCOL;
    }
    PQclear(res);
    return rc;
}

/*
 * Runs wr_apply_events() over msgs[lo..hi) as one statement and records the
 * outcomes. Returns as take_result().
 */
static int apply_range(wr_pg_t *pg, wr_msg_t **msgs, size_t lo, size_t hi, char *err, size_t errlen)
{
    wr_params_t p;
    int rc;

    if ((rc = params_build(&p, msgs, lo, hi, err, errlen)) == 0)
        rc = take_result(pg,
                         PQexecPrepared(pg->conn, "wr_apply", WR_PG_NPARAMS, p.values, NULL, NULL, 0),
                         msgs, lo, hi, err, errlen);
    params_free(&p);
    return rc;
}

/* Runs one utility statement; returns 0 or the class of its failure. */
static int exec_cmd(wr_pg_t *pg, const char *sql, char *err, size_t errlen)
{
    int rc = vc_pg_command(pg->conn, sql, err, errlen);

    /* A utility statement that fails for a reason other than the server is a bug
     * in this file, not bad data: never let it be taken for a poison event. */
    return rc == VC_ERR_INVALID ? VC_ERR_PROTOCOL : rc;
}

typedef struct {
    wr_pg_t *pg;
    wr_msg_t **msgs;
    char failure[WR_ERR_MAX]; /* why a try stopped the bisection */
} wr_pg_bisect_t;

/* wr_try_cb: one range under a savepoint, so a failure undoes only that range. */
static int try_range(void *ctx, size_t lo, size_t hi, char *err, size_t errlen)
{
    wr_pg_bisect_t *b = ctx;
    char undo[WR_ERR_MAX];
    int rc;

    if ((rc = exec_cmd(b->pg, "SAVEPOINT wr_range", err, errlen)) != 0)
        goto stop;
    rc = apply_range(b->pg, b->msgs, lo, hi, err, errlen);
    if (rc == 0 && (rc = exec_cmd(b->pg, "RELEASE SAVEPOINT wr_range", err, errlen)) == 0)
        return 0;
    if (rc != VC_ERR_INVALID)
        goto stop;
    if (exec_cmd(b->pg, "ROLLBACK TO SAVEPOINT wr_range", undo, sizeof(undo)) != 0 ||
        exec_cmd(b->pg, "RELEASE SAVEPOINT wr_range", undo, sizeof(undo)) != 0) {
        snprintf(b->failure, sizeof(b->failure), "undoing a failed range: %.200s", undo);
        return VC_ERR_UNAVAILABLE;
    }
    return VC_ERR_INVALID;
stop:
    snprintf(b->failure, sizeof(b->failure), "%s", err);
    return rc;
}

/* wr_poison_cb */
static void mark_poison(void *ctx, size_t i, const char *err)
{
    wr_pg_bisect_t *b = ctx;
    wr_msg_t *m = b->msgs[i];

    m->outcome = WR_OUT_POISON;
    m->dlt_class = wr_pg_dlt_class(err);
    snprintf(m->error, sizeof(m->error), "%s", err);
}

/*
 * The first statement over the whole batch failed with first_rc (first: its
 * error): isolate the events that can never apply, under savepoints, and
 * commit the rest. Returns as wr_pg_finish().
 */
static int after_first(wr_pg_t *pg, wr_msg_t **msgs, size_t n, int first_rc, const char *first,
                       char *err, size_t errlen)
{
    wr_pg_bisect_t b = {.pg = pg, .msgs = msgs};
    int rc;

    if (first_rc == 0)
        return 0;
    if (first_rc != VC_ERR_INVALID) {
        snprintf(err, errlen, "%s", first);
        return VC_ERR_UNAVAILABLE;
    }

    /* Some event can never apply: find it under savepoints, apply the rest. */
    vc_debug("batch of %zu failed (%s): isolating the poison event", n, first);
    if ((rc = exec_cmd(pg, "BEGIN", err, errlen)) != 0)
        goto fail;
    if ((rc = wr_bisect(n, try_range, mark_poison, &b)) != 0) {
        snprintf(err, errlen, "%s", b.failure);
        goto fail;
    }
    if ((rc = exec_cmd(pg, "COMMIT", err, errlen)) != 0)
        goto fail;
    return 0;
fail:
    /* Whatever failed, the batch as a whole is retried later; a broken
     * connection is replaced at the next attempt. */
    vc_pg_rollback(pg->conn);
    return VC_ERR_UNAVAILABLE;
}

int wr_pg_send(wr_pg_t *pg, wr_msg_t **msgs, size_t n, char *err, size_t errlen)
{
    wr_params_t p;
    int rc;

    VC_ASSERT(!pg->in_flight);
    if (n == 0)
        return 0;
    if ((rc = ensure_conn(pg, err, errlen)) != 0)
        return rc == VC_ERR_INVALID ? VC_ERR_UNAVAILABLE : rc;
    if ((rc = params_build(&p, msgs, 0, n, err, errlen)) == 0) {
        /* A blocking connection: the statement is on its way when this returns. */
        if (PQsendQueryPrepared(pg->conn, "wr_apply", WR_PG_NPARAMS, p.values, NULL, NULL, 0)) {
            pg->in_flight = 1;
        } else {
            vc_pg_error_text(pg->conn, NULL, err, errlen);
            rc = VC_ERR_UNAVAILABLE;
        }
    }
    params_free(&p);
    return rc;
}

int wr_pg_check(wr_pg_t *pg, char *err, size_t errlen)
{
    struct pollfd pfd;

    if (pg->in_flight)
        return 0;
    if (pg->conn && PQstatus(pg->conn) == CONNECTION_OK) {
        pfd.fd = PQsocket(pg->conn);
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 0) <= 0)
            return 0;
        /* A notice is harmless; an end of stream leaves the connection bad. */
        if (PQconsumeInput(pg->conn) && PQstatus(pg->conn) == CONNECTION_OK)
            return 0;
        vc_pg_error_text(pg->conn, NULL, err, errlen);
        vc_warn("PostgreSQL session lost: %s", err);
    }
    return ensure_conn(pg, err, errlen);
}

int wr_pg_wait(wr_pg_t *pg, int timeout_ms)
{
    struct pollfd pfd;

    if (!pg->in_flight)
        return 1;
    /* A broken connection is "ready": wr_pg_finish() reports it. */
    if (!PQconsumeInput(pg->conn) || !PQisBusy(pg->conn))
        return 1;
    if (timeout_ms <= 0)
        return 0;
    pfd.fd = PQsocket(pg->conn);
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return 0;
    return !PQconsumeInput(pg->conn) || !PQisBusy(pg->conn);
}

int wr_pg_socket(const wr_pg_t *pg)
{
    return pg->in_flight && pg->conn ? PQsocket(pg->conn) : -1;
}

int wr_pg_finish(wr_pg_t *pg, wr_msg_t **msgs, size_t n, char *err, size_t errlen)
{
    char first[WR_ERR_MAX];
    PGresult *res, *extra;
    int rc;

    if (n == 0)
        return 0;
    VC_ASSERT(pg->in_flight);
    pg->in_flight = 0;
    if (!(res = PQgetResult(pg->conn))) {
        vc_pg_error_text(pg->conn, NULL, err, errlen);
        return VC_ERR_UNAVAILABLE;
    }
    rc = take_result(pg, res, msgs, 0, n, first, sizeof(first));
    /* A statement has one result; read up to the end of the query. */
    while ((extra = PQgetResult(pg->conn)) != NULL)
        PQclear(extra);
    return after_first(pg, msgs, n, rc, first, err, errlen);
}

int wr_pg_park(wr_pg_t *pg, wr_msg_t *const *msgs, size_t n, const char *topic,
               const char *dlt_topic, char *err, size_t errlen)
{
    int rc;

    if (n == 0)
        return 0;
    VC_ASSERT(!pg->in_flight);
    if ((rc = ensure_conn(pg, err, errlen)) != 0)
        return VC_ERR_UNAVAILABLE;
    /* One transaction: the batch's letters are parked together or not at all. */
    if ((rc = exec_cmd(pg, "BEGIN", err, errlen)) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const wr_msg_t *m = msgs[i];
        char key[VC_CODE_MAX + 1], dpart[16], doff[24], part[16], off[24];
        const char *values[12];
        int lost = m->dlt_form == WR_DLT_LOST || m->dlt_offset < 0;
        PGresult *res;

        /* An undecodable event still has its key, which is the voucher code. */
        snprintf(key, sizeof(key), "%.*s",
                 m->key && m->key_len <= VC_CODE_MAX ? (int)m->key_len : 0,
                 m->key ? (const char *)m->key : "");
        snprintf(dpart, sizeof(dpart), "%d", (int)m->dlt_partition);
        snprintf(doff, sizeof(doff), "%lld", (long long)m->dlt_offset);
        snprintf(part, sizeof(part), "%d", (int)m->partition);
        snprintf(off, sizeof(off), "%lld", (long long)m->offset);
        values[0] = m->decoded ? m->ev.code : key;
        values[1] = m->decoded ? m->ev.order_id : "";
        values[2] = m->decoded ? vc_event_type_name(m->ev.type) : "";
        values[3] = dlt_topic;
        values[4] = lost ? NULL : dpart;
        values[5] = lost ? NULL : doff;
        values[6] = topic;
        values[7] = part;
        values[8] = off;
        values[9] = m->dlt_class ? m->dlt_class : WR_DLT_REJECTED;
        values[10] = m->error;
        values[11] = m->replayed_from;
        if (!(res = vc_pg_exec(pg->conn, park_sql, 12, values, &rc, err, errlen)))
            goto fail;
        PQclear(res);
    }
    if ((rc = exec_cmd(pg, "COMMIT", err, errlen)) != 0)
        goto fail;
    return 0;
fail:
    vc_pg_rollback(pg->conn);
    return VC_ERR_UNAVAILABLE;
}
