/*
 * voucher-admin audit: the admin audit's rows (deploy/sql/021_admin_audit.sql)
 * that pass every filter given, newest first. The table shows what changed
 * (the fields whose value differs between before and after), else the row's
 * detail; --json the whole rows, one JSON object a line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "vc_pg.h"
#include "vc_time.h"

static const char usage[] =
    "usage: voucher-admin audit [--actor NAME] [--action ACTION] [--target CODE|ID]\n"
    "                           [--since WHEN] [--limit N] [--json]\n"
    "  the admin audit's rows, newest first (default --limit 100): who, when, what\n"
    "  (voucher.create, voucher.update, campaign.create, campaign.deactivate,\n"
    "  campaign.export, campaign.resume), on what, from where, and what changed;\n"
    "  --since takes an RFC 3339 time or an age (30m, 12h, 7d); --json prints one JSON\n"
    "  object a line, with the rows before and after in full\n";

/* --since: an RFC 3339 time, or an age (N followed by s, m, h or d), as ms since the epoch. */
static int parse_since(const char *s, int64_t *out)
{
    char *end;
    long long n;

    if (vc_time_parse(s, strlen(s), out) == 0)
        return 0;
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno || end == s || n < 0 || !*end || end[1]) {
        fprintf(stderr,
                "voucher-admin: --since wants an RFC 3339 time or an age (30m, 12h, 7d),"
                " not '%s'\n",
                s);
        return -1;
    }
    switch (*end) {
    case 'd':
        n *= 24;
        /* fall through */
    case 'h':
        n *= 60;
        /* fall through */
    case 'm':
        n *= 60;
        /* fall through */
    case 's':
        *out = vc_time_now_ms() - n * 1000;
        return 0;
    default:
        fprintf(stderr, "voucher-admin: --since: an age ends in s, m, h or d, not '%s'\n", s);
        return -1;
    }
}

int admin_audit(PGconn *conn, int argc, char **argv)
{
    enum { O_ACTOR = 1, O_ACTION, O_TARGET, O_SINCE, O_LIMIT, O_JSON };
    static const struct option opts[] = {
        {"actor", 1, NULL, O_ACTOR},   {"action", 1, NULL, O_ACTION},
        {"target", 1, NULL, O_TARGET}, {"since", 1, NULL, O_SINCE},
        {"limit", 1, NULL, O_LIMIT},   {"json", 0, NULL, O_JSON},
        {"help", 0, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    static const char where[] =
        " FROM admin_audit WHERE ($1::text IS NULL OR actor = $1)"
        " AND ($2::text IS NULL OR action = $2) AND ($3::text IS NULL OR target = $3)"
        " AND ($4::bigint IS NULL OR at >= to_timestamp($4::bigint / 1000.0))"
        " ORDER BY id DESC LIMIT $5::int";
    char since[24], limit[24] = "100", sql[2048];
    const char *params[5] = {NULL, NULL, NULL, NULL, limit};
    int64_t v;
    int c, json = 0, rc = 0;
    PGresult *res;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_ACTOR:
        case O_ACTION:
        case O_TARGET:
            params[c - O_ACTOR] = optarg;
            break;
        case O_SINCE:
            if (parse_since(optarg, &v) != 0)
                return 2;
            snprintf(since, sizeof(since), "%" PRId64, v);
            params[3] = since;
            break;
        case O_LIMIT:
            if (admin_parse_i64("limit", optarg, &v) != 0 || v < 1 || v > 1000000) {
                fprintf(stderr, "voucher-admin: --limit is 1..1000000\n");
                return 2;
            }
            snprintf(limit, sizeof(limit), "%" PRId64, v);
            break;
        case O_JSON:
            json = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fputs(usage, stderr);
        return 2;
    }
    if (json)
        snprintf(sql, sizeof(sql),
                 "SELECT json_build_object('id', id, 'at', at, 'actor', actor, 'action', action,"
                 " 'target', target, 'before', before, 'after', after, 'detail', detail,"
                 " 'source', source)::text%s",
                 where);
    else
        snprintf(sql, sizeof(sql),
                 "SELECT id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
                 " actor, action, target, coalesce(source, ''),"
                 " coalesce((SELECT string_agg(k || ': ' || coalesce(before->>k, 'null') || ' -> '"
                 "  || coalesce(after->>k, 'null'), ', ' ORDER BY k)"
                 "  FROM jsonb_object_keys(after) k"
                 "  WHERE before IS NOT NULL AND before->k IS DISTINCT FROM after->k"
                 "  AND k <> 'updated_at'), detail, '')%s",
                 where);
    if (!(res = vc_pg_exec(conn, sql, 5, params, &rc, sql, sizeof(sql)))) {
        fprintf(stderr, "voucher-admin: %s\n", sql);
        return 1;
    }
    if (!json && PQntuples(res) > 0)
        printf("%-8s %-20s %-16s %-20s %-16s %-22s %s\n", "ID", "AT", "ACTOR", "ACTION", "TARGET",
               "SOURCE", "WHAT");
    for (int i = 0; i < PQntuples(res); i++) {
        if (json)
            puts(PQgetvalue(res, i, 0));
        else
            printf("%-8s %-20s %-16s %-20s %-16s %-22s %s\n", PQgetvalue(res, i, 0),
                   PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
                   PQgetvalue(res, i, 4), PQgetvalue(res, i, 5), PQgetvalue(res, i, 6));
    }
    PQclear(res);
    return 0;
}
