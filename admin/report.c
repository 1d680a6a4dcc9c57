/*
 * voucher-admin's read-only views for support and finance (issue 44):
 *
 *   voucher-admin campaign code CODE    who used a one-time code, and when
 *   voucher-admin report (--campaign ID | --voucher CODE) [--by hour|day] [--since WHEN]
 *                                       orders by state per period, as CSV
 *
 * Both read PostgreSQL only (the truth, behind Redis by the events in
 * flight) with the columns the gateway's role may read (deploy/sql 012, 020,
 * 022), so the role voucher-admin runs with for campaigns suffices.
 */
#include "admin.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_audit.h"
#include "vc_campaign.h"
#include "vc_error.h"
#include "vc_pg.h"
#include "vc_time.h"

/* RFC 3339 in UTC, as the gateway writes times; the SQL of a timestamptz column. */
#define UTC(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

/* Prints res's rows as "name: value" lines, a blank line between rows. */
static void print_rows(PGresult *res)
{
    for (int r = 0; r < PQntuples(res); r++) {
        if (r > 0)
            putchar('\n');
        for (int c = 0; c < PQnfields(res); c++)
            if (!PQgetisnull(res, r, c))
                printf("%s: %s\n", PQfname(res, c), PQgetvalue(res, r, c));
    }
}

int admin_code(PGconn *conn, const char *typed)
{
    char code[VC_CODE_MAX + 1], err[512];
    const char *params[] = {code};
    PGresult *res;
    int rc, n;

    if (!typed || vc_campaign_normalize(typed, strlen(typed), code) < 0) {
        fprintf(stderr, "voucher-admin: campaign code: \"%s\" is not a code (letters, digits and "
                        "separators, at most %d symbols)\n",
                typed ? typed : "", VC_CODE_MAX);
        return 2;
    }
    if (!(res = vc_pg_exec(conn,
                           "SELECT k.code, k.campaign_id AS campaign, c.name AS \"campaignName\","
                           " c.state AS \"campaignState\", k.customer_id AS \"boundTo\","
                           " " UTC("k.revoked_at") " AS \"revokedAt\""
                           " FROM campaign_code k JOIN campaign c ON c.id = k.campaign_id"
                           " WHERE k.code = $1",
                           1, params, &rc, err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        fprintf(stderr, "voucher-admin: no campaign has the code %s\n", code);
        return 1;
    }
    print_rows(res);
    PQclear(res);
    if (!(res = vc_pg_exec(conn,
                           "SELECT order_id AS \"orderId\", customer_id AS \"customerId\", status,"
                           " " UTC("created_at") " AS \"reservedAt\","
                           " " UTC("updated_at") " AS \"updatedAt\","
                           " order_amount AS \"orderAmount\", discount_amount AS \"discountAmount\","
                           " confirmed_order_amount AS \"confirmedOrderAmount\","
                           " confirmed_discount_amount AS \"confirmedDiscountAmount\","
                           " release_reason AS \"releaseReason\""
                           " FROM campaign_redemption WHERE code = $1 ORDER BY created_at, order_id",
                           1, params, &rc, err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    n = PQntuples(res);
    /* Oldest first; a RELEASED use gave the code back. */
    printf("uses: %d\n", n);
    if (n > 0) {
        putchar('\n');
        print_rows(res);
    }
    PQclear(res);
    return 0;
}

int admin_revoke(PGconn *conn, const char *typed, const vc_audit_who_t *who)
{
    char code[VC_CODE_MAX + 1], err[512], detail[48];
    const char *params[] = {code};
    PGresult *res;
    int rc, changed;

    if (!typed || vc_campaign_normalize(typed, strlen(typed), code) < 0) {
        fprintf(stderr, "voucher-admin: campaign revoke: \"%s\" is not a code\n",
                typed ? typed : "");
        return 2;
    }
    /* The revoke and its audit row commit together, or neither (021). */
    if (vc_pg_command(conn, "BEGIN", err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-admin: campaign revoke: %s\n", err);
        return 1;
    }
    /* coalesce: a second revoke keeps the first instant, and says so. */
    if (!(res = vc_pg_exec(conn,
                           "UPDATE campaign_code SET revoked_at = coalesce(revoked_at, now())"
                           " WHERE code = $1 RETURNING campaign_id, revoked_at = now(), "
                           UTC("revoked_at") ","
                           " (SELECT count(*) FROM campaign_redemption r WHERE r.code = $1"
                           "   AND r.status <> 'RELEASED')",
                           1, params, &rc, err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: campaign revoke: %s\n", err);
        vc_pg_rollback(conn);
        return 1;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        vc_pg_rollback(conn);
        fprintf(stderr, "voucher-admin: campaign revoke: no campaign has the code %s\n", code);
        return 1;
    }
    changed = PQgetvalue(res, 0, 1)[0] == 't';
    snprintf(detail, sizeof(detail), "campaign %s", PQgetvalue(res, 0, 0));
    {
        vc_audit_action_t audit = {"campaign.revoke", code, VC_AUDIT_NONE, 0, NULL, detail};
        if ((changed && vc_audit_record(conn, who, &audit, err, sizeof(err)) != 0) ||
            vc_pg_command(conn, "COMMIT", err, sizeof(err)) != 0) {
            fprintf(stderr, "voucher-admin: campaign revoke: %s: not revoked\n", err);
            PQclear(res);
            vc_pg_rollback(conn);
            return 1;
        }
    }
    printf("%s %s of campaign %s at %s: a new reservation or quote of it is answered as an unknown "
           "code (404)\nlive orders holding it: %s (they stand; cancel one with DELETE "
           "/vouchers/%s/reservations/{orderId} if the leak used it)\n",
           changed ? "revoked" : "already revoked", code, PQgetvalue(res, 0, 0),
           PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3), code);
    PQclear(res);
    return 0;
}

static const char report_usage[] =
    "usage: voucher-admin report (--campaign ID | --voucher CODE) [--by hour|day] [--since WHEN]\n"
    "\n"
    "The orders of a campaign or a voucher, as CSV on stdout, one line per period (UTC) in which\n"
    "orders were taken: period,taken,held,confirmed,released,confirmedDiscount. taken counts the\n"
    "orders reserved in the period; held, confirmed and released say where those orders are now;\n"
    "confirmedDiscount sums the discount the confirmed ones were paid with (the final figure when\n"
    "the confirm gave a total, else the reservation's). From PostgreSQL: the events in flight are\n"
    "not in it yet.\n"
    "\n"
    "  --campaign ID    a campaign's one-time codes\n"
    "  --voucher CODE   a voucher\n"
    "  --by hour|day    the period (default day)\n"
    "  --since WHEN     only orders reserved at or after WHEN (RFC 3339)\n";

int admin_report(PGconn *conn, int argc, char **argv)
{
    enum { O_CAMPAIGN = 1, O_VOUCHER, O_BY, O_SINCE, O_HELP };
    static const struct option opts[] = {{"campaign", 1, NULL, O_CAMPAIGN},
                                         {"voucher", 1, NULL, O_VOUCHER},
                                         {"by", 1, NULL, O_BY},
                                         {"since", 1, NULL, O_SINCE},
                                         {"help", 0, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *campaign = NULL, *voucher = NULL, *by = "day", *since = "";
    char sql[1024], sincebuf[40], err[512];
    const char *params[3];
    int64_t since_ms = 0, id;
    PGresult *res;
    int o, rc;

    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_CAMPAIGN:
            campaign = optarg;
            break;
        case O_VOUCHER:
            voucher = optarg;
            break;
        case O_BY:
            by = optarg;
            break;
        case O_SINCE:
            since = optarg;
            break;
        case O_HELP:
            fputs(report_usage, stdout);
            return 0;
        default:
            fputs(report_usage, stderr);
            return 2;
        }
    }
    if (optind < argc || !campaign == !voucher) {
        fprintf(stderr, "voucher-admin: report: name one campaign or one voucher\n%s",
                report_usage);
        return 2;
    }
    if (strcmp(by, "hour") != 0 && strcmp(by, "day") != 0) {
        fprintf(stderr, "voucher-admin: report: --by hour or day, not \"%s\"\n", by);
        return 2;
    }
    if (campaign && (admin_parse_i64("campaign", campaign, &id) != 0 || id < 1)) {
        if (id < 1)
            fprintf(stderr, "voucher-admin: report: --campaign takes a campaign's id (1 or more)\n");
        return 2;
    }
    if (*since && vc_time_parse(since, strlen(since), &since_ms) != 0) {
        fprintf(stderr, "voucher-admin: report: --since takes an RFC 3339 time such as "
                        "2026-12-01T00:00:00Z, not \"%s\"\n",
                since);
        return 2;
    }
    snprintf(sincebuf, sizeof(sincebuf), "%" PRId64, since_ms);
    params[0] = campaign ? campaign : voucher;
    params[1] = by;
    params[2] = sincebuf;
    snprintf(sql, sizeof(sql),
             "SELECT " UTC("date_trunc($2, created_at, 'UTC')") ", count(*),"
             " count(*) FILTER (WHERE status = 'RESERVED'),"
             " count(*) FILTER (WHERE status = 'CONFIRMED'),"
             " count(*) FILTER (WHERE status = 'RELEASED'),"
             " coalesce(sum(coalesce(confirmed_discount_amount, discount_amount))"
             " FILTER (WHERE status = 'CONFIRMED'), 0)"
             " FROM %s WHERE %s AND created_at >= to_timestamp($3::bigint / 1000.0)"
             " GROUP BY 1 ORDER BY 1",
             campaign ? "campaign_redemption" : "voucher_redemption",
             campaign ? "campaign_id = $1::bigint" : "voucher_code = $1");
    if (!(res = vc_pg_exec(conn, sql, 3, params, &rc, err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: report: %s\n", err);
        return 1;
    }
    puts("period,taken,held,confirmed,released,confirmedDiscount");
    for (int r = 0; r < PQntuples(res); r++)
        printf("%s,%s,%s,%s,%s,%s\n", PQgetvalue(res, r, 0), PQgetvalue(res, r, 1),
               PQgetvalue(res, r, 2), PQgetvalue(res, r, 3), PQgetvalue(res, r, 4),
               PQgetvalue(res, r, 5));
    fprintf(stderr, "%d periods\n", PQntuples(res));
    PQclear(res);
    return 0;
}
