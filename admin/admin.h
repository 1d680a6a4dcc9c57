/*
 * voucher-admin's commands, across its files: main.c (campaigns), report.c
 * (the read-only views for support and finance), audit.c (the admin audit),
 * voucher.c (vouchers, read only).
 * Each returns the process's exit status: 0, 1 (it failed: PostgreSQL,
 * nothing found), 2 (usage).
 */
#ifndef ADMIN_H
#define ADMIN_H

#include <stdint.h>

#include <libpq-fe.h>

#include "vc_audit.h"

/* Parses s, the value of --opt, as a decimal integer; says why on stderr. 0 or -1. */
int admin_parse_i64(const char *opt, const char *s, int64_t *out);

/* `campaign code CODE`: the code's campaign and binding, and every use of it. */
int admin_code(PGconn *conn, const char *typed);

/*
 * `campaign revoke CODE`: the code answers as an unknown one to new
 * reservations and quotes (023); the orders holding it stand. The revoke and
 * its audit row (by who) commit together.
 */
int admin_revoke(PGconn *conn, const char *typed, const vc_audit_who_t *who);

/* `report ...` (argv[0] is "report"): orders by state per period, CSV. */
int admin_report(PGconn *conn, int argc, char **argv);

/* `audit ...` (argv[0] is "audit"): the admin audit's rows, filtered. */
int admin_audit(PGconn *conn, int argc, char **argv);

/*
 * `voucher create BODY|- | show CODE | list [--mode direct|flash]` (argv[0]
 * is "voucher"): a voucher created from a body of POST /vouchers (its audit
 * row by who), a voucher's rules and mode, or every voucher's mode and count.
 */
int admin_voucher(PGconn *conn, int argc, char **argv, const vc_audit_who_t *who);

#endif
