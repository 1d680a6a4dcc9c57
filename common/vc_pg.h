/*
 * The PostgreSQL adapter: connecting, telling transient failures from
 * permanent ones, and reading a voucher's rules. Blocking (libpq's
 * synchronous API): callers on an event loop run it on a worker thread.
 */
#ifndef VC_PG_H
#define VC_PG_H

#include <libpq-fe.h>
#include <stddef.h>

#include "vc_voucher.h"

/*
 * The session settings every daemon connection gets (VC_PG_SESSION_OPTIONS,
 * libpq's "options"): a statement that runs longer than statement_timeout,
 * or waits longer than lock_timeout for a lock, fails instead of holding a
 * daemon's connection (and its locks) without end. A DSN that sets options
 * itself replaces these (deploy/README.md, "PostgreSQL roles").
 */
#define VC_PG_STATEMENT_TIMEOUT "30s"
#define VC_PG_LOCK_TIMEOUT "10s"
#define VC_PG_SESSION_OPTIONS                                                                      \
    "-c statement_timeout=" VC_PG_STATEMENT_TIMEOUT " -c lock_timeout=" VC_PG_LOCK_TIMEOUT

/*
 * What a failed statement's error says, for the callers that answer some
 * errors in their own words (a code taken: 409 EXISTS; a CHECK refusing a
 * limit: 409 LIMIT_CONFLICT; a data error: a poison event). The one place a
 * SQLSTATE is read: vc_pg_error_class() is VC_PG_TRANSIENT or not.
 */
typedef enum {
    VC_PG_PERMANENT = 0, /* none of the below: syntax, privilege, missing object */
    VC_PG_TRANSIENT,     /* trying again may pass: no SQLSTATE (connection lost), class 08,
                            40 (serialization failure, deadlock), 53, 57, 58, XX000 */
    VC_PG_DATA,          /* class 22, data exception */
    VC_PG_UNIQUE,        /* 23505, unique_violation */
    VC_PG_CHECK,         /* 23514, check_violation */
    VC_PG_FOREIGN_KEY,   /* 23503, foreign_key_violation */
    VC_PG_INTEGRITY,     /* any other of class 23 (not null, exclusion, restrict) */
} vc_pg_kind_t;

/*
 * Connects to dsn (a libpq conninfo string) with VC_PG_SESSION_OPTIONS.
 * Returns the connection, or NULL with err set. The caller owns the
 * connection (PQfinish).
 */
PGconn *vc_pg_connect(const char *dsn, const char *application_name, char *err, size_t errlen);

/*
 * As vc_pg_connect(), with more libpq keywords: keys and vals (each
 * NULL-terminated, at most 8 pairs) come after the DSN's, so they win over
 * it. Returns the connection (the caller owns it), or NULL with err set.
 */
PGconn *vc_pg_connect_with(const char *dsn, const char *application_name,
                           const char *const *keys, const char *const *vals, char *err,
                           size_t errlen);

/*
 * Takes a failed result (or NULL for a broken connection): sets err to its
 * text (as vc_pg_error_text; err may be NULL when errlen is 0), frees it,
 * and returns its class (as vc_pg_error_class).
 */
int vc_pg_fail(PGconn *conn, PGresult *res, char *err, size_t errlen);

/*
 * Runs sql, with nparams text parameters (params may be NULL when there are
 * none), on conn. Returns its result when it succeeded (rows or none: the
 * caller owns it, PQclear), or NULL with *rc set as vc_pg_fail() sets it.
 */
PGresult *vc_pg_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
                     int *rc, char *err, size_t errlen);

/*
 * Runs sql with nparams text parameters, its rows (if any) not wanted, for a
 * caller that words one refusal itself: an error of kind (vc_pg_kind())
 * returns answer, with err set as for any failure (a 409's detail). Returns
 * 0, answer, or a failure as vc_pg_fail() returns it.
 */
int vc_pg_command_kind(PGconn *conn, const char *sql, int nparams, const char *const *params,
                       vc_pg_kind_t kind, int answer, char *err, size_t errlen);

/*
 * Runs a statement whose rows, if any, are not wanted (BEGIN, COMMIT, SET).
 * Returns 0, or a failure as vc_pg_fail() returns it (err may be NULL when
 * errlen is 0: a failure the caller only counts).
 */
int vc_pg_command(PGconn *conn, const char *sql, char *err, size_t errlen);

/*
 * Rolls back the transaction conn is in, if any. Its failure is not
 * reported: the connection's status tells whether it can be used again.
 */
void vc_pg_rollback(PGconn *conn);

/*
 * Checks that dsn is a conninfo string libpq can parse ("host=... dbname=..."
 * or a postgresql:// URI), for the settings table (vc_cfg_param_t.check).
 * Returns 0, or VC_ERR_INVALID with err saying what libpq found wrong.
 */
int vc_pg_dsn_check(const char *dsn, char *err, size_t errlen);

/*
 * The kind of a SQLSTATE: state's first five characters (a SQLSTATE, or a
 * text that begins with one, as vc_pg_error_text() writes them). Pure. NULL,
 * or a text that does not begin with a SQLSTATE of the kinds above, is
 * VC_PG_PERMANENT: without a result to say otherwise, nothing says it passes.
 */
vc_pg_kind_t vc_pg_state_kind(const char *state);

/*
 * The kind of a failed result (or, with res NULL, of a broken connection):
 * VC_PG_TRANSIENT when conn is lost or res has no SQLSTATE, else as
 * vc_pg_state_kind() reads its SQLSTATE.
 */
vc_pg_kind_t vc_pg_kind(const PGconn *conn, const PGresult *res);

/*
 * Whether an error of this kind was caused by the data a statement wrote
 * (classes 22 and 23): the same data fails the same way, whatever the server.
 */
int vc_pg_kind_is_data(vc_pg_kind_t kind);

/*
 * The name of the constraint a failed result of class 23 names, or "" (never
 * NULL). Borrowed from res.
 */
const char *vc_pg_constraint(const PGresult *res);

/*
 * Classifies a failed result (or, with res NULL, a broken connection):
 * VC_ERR_UNAVAILABLE when trying again may succeed (vc_pg_kind() is
 * VC_PG_TRANSIENT), or VC_ERR_INVALID when it never will (constraint
 * violation, bad data).
 */
int vc_pg_error_class(const PGconn *conn, const PGresult *res);

/* A one-line description of the error of res (or of conn when res is NULL). */
void vc_pg_error_text(const PGconn *conn, const PGresult *res, char *buf, size_t cap);

/*
 * "SQLSTATE: primary message" for a failed result, without libpq's "ERROR:"
 * prefix and PL/pgSQL's context (a dead letter's error text); as
 * vc_pg_error_text() when res has no SQLSTATE or message.
 */
void vc_pg_error_primary(const PGconn *conn, const PGresult *res, char *buf, size_t cap);

/*
 * The voucher's limit lock ($1 its code): a transaction-level advisory lock
 * that PATCH /vouchers/{code} holds while it moves Redis's counter and
 * PostgreSQL's total_limit, and that the reconciler's limit sync takes
 * before it compares them (proto/redis-keys.md, "The limit key"). Its two
 * int4 keys never meet the reconciler's leadership lock (one bigint key).
 */
#define VC_PG_LIMIT_LOCK "SELECT pg_advisory_xact_lock(1818847604, hashtext($1))"
/* The same lock for a session (PATCH holds it across its commit); it conflicts with the above. */
#define VC_PG_LIMIT_LOCK_SESSION "SELECT pg_advisory_lock(1818847604, hashtext($1))"
#define VC_PG_LIMIT_UNLOCK "SELECT pg_advisory_unlock(1818847604, hashtext($1))"

/* The columns of a voucher's rules, in the order vc_pg_voucher_row() reads them. */
#define VC_PG_VOUCHER_COLUMNS                                                                      \
    "code, discount_amount, discount_percent, max_discount_amount, min_order_amount,"             \
    " total_limit, used_count, per_user_limit, (extract(epoch FROM starts_at) * 1000)::bigint,"   \
    " (extract(epoch FROM ends_at) * 1000)::bigint, NOT active, mode"

/* Reads row of res (selected with VC_PG_VOUCHER_COLUMNS first) into out. */
void vc_pg_voucher_row(const PGresult *res, int row, vc_voucher_t *out);

/*
 * Reads the rules of voucher code. Returns 0, VC_E_NOT_FOUND, or a negative
 * error (as vc_pg_error_class) with err set.
 */
int vc_pg_load_voucher(PGconn *conn, const char *code, vc_voucher_t *out, char *err, size_t errlen);

#endif
