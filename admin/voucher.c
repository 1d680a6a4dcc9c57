/*
 * `voucher create BODY`, `voucher show CODE` and `voucher list [--mode
 * direct|flash]`, as voucher-admin's own role (021 grants it SELECT on
 * voucher, 029 INSERT): a voucher created from the body POST /vouchers takes,
 * with the same checks and audit (vc_voucher_create()); a voucher's rules,
 * its mode (proto/direct-mode.md) and PostgreSQL's used_count. A voucher is
 * changed through the gateway's PATCH /vouchers, which also moves Redis's
 * counter.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "vc_error.h"
#include "vc_pg.h"
#include "vc_time.h"
#include "vc_voucher.h"
#include "vc_voucher_create.h"

/* The voucher's rules, one "name: value" a line, the names of the API's. */
static void show(const vc_voucher_t *v)
{
    char starts[40], ends[40];

    vc_time_format_ms(v->starts_at_ms, starts, sizeof(starts));
    vc_time_format_ms(v->ends_at_ms, ends, sizeof(ends));
    printf("code: %s\nmode: %s\nactive: %s\n", v->code,
           vc_mode_name(v->mode) ? vc_mode_name(v->mode) : "?", v->inactive ? "false" : "true");
    if (v->discount_percent > 0) {
        printf("discountPercent: %d\n", v->discount_percent);
        if (v->max_discount_amount > 0)
            printf("maxDiscountAmount: %" PRId64 "\n", v->max_discount_amount);
    } else {
        printf("discountAmount: %" PRId64 "\n", v->discount_amount);
    }
    printf("minOrderAmount: %" PRId64 "\ntotalLimit: %" PRId64 "\nusedCount: %" PRId64
           "\nperUserLimit: %" PRId64 "\nstartsAt: %s\nendsAt: %s\n",
           v->min_order_amount, v->total_limit, v->used_count, v->per_customer_limit, starts, ends);
}

static int show_one(PGconn *conn, const char *code)
{
    vc_voucher_t v;
    char err[256];
    int rc = vc_pg_load_voucher(conn, code, &v, err, sizeof(err));

    if (rc == VC_E_NOT_FOUND) {
        fprintf(stderr, "voucher-admin: no voucher %s\n", code);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    show(&v);
    return 0;
}

/* Every voucher (of one mode), by code: code, mode, active, used of total. */
static int list(PGconn *conn, const char *mode)
{
    const char *params[] = {mode};
    vc_voucher_t v;
    PGresult *res;
    char err[256];
    int rc = 0;

    if (!(res = vc_pg_exec(conn,
                           "SELECT " VC_PG_VOUCHER_COLUMNS " FROM voucher"
                           " WHERE $1::text IS NULL OR mode = $1 ORDER BY code COLLATE \"C\"",
                           1, params, &rc, err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    printf("code,mode,active,usedCount,totalLimit\n");
    for (int i = 0; i < PQntuples(res); i++) {
        vc_pg_voucher_row(res, i, &v);
        printf("%s,%s,%s,%" PRId64 ",%" PRId64 "\n", v.code,
               vc_mode_name(v.mode) ? vc_mode_name(v.mode) : "?", v.inactive ? "false" : "true",
               v.used_count, v.total_limit);
    }
    PQclear(res);
    return 0;
}

/* The body from the argument, or from stdin when it is "-", into buf (NUL-terminated). */
static int read_body(const char *arg, char *buf, size_t cap, size_t *len)
{
    if (strcmp(arg, "-") != 0) {
        *len = strlen(arg);
        if (*len >= cap)
            return -1;
        memcpy(buf, arg, *len + 1);
        return 0;
    }
    *len = fread(buf, 1, cap - 1, stdin);
    if (ferror(stdin) || !feof(stdin))
        return -1;
    buf[*len] = '\0';
    return 0;
}

/*
 * Creates a voucher from a body of POST /vouchers. The row has no
 * redis_loaded_at: a flash voucher is loaded into Redis by its first
 * reservation, as one made by SQL is; a direct voucher never is.
 */
static int create(PGconn *conn, const char *arg, const vc_audit_who_t *who)
{
    char body[4096], err[256];
    int64_t campaign_id;
    size_t len;
    vc_voucher_t v;
    int rc;

    if (read_body(arg, body, sizeof(body), &len) != 0) {
        fprintf(stderr, "voucher-admin: the body could not be read, or is over %zu bytes\n",
                sizeof(body) - 1);
        return 2;
    }
    if ((rc = vc_voucher_parse(body, len, &v, err, sizeof(err))) != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 2;
    }
    rc = vc_voucher_create(conn, &v, who, 0, &campaign_id, err, sizeof(err));
    if (rc == VC_E_CODE_TAKEN && campaign_id > 0) {
        fprintf(stderr, "voucher-admin: %s is a one-time code of campaign %" PRId64 "\n", v.code,
                campaign_id);
        return 1;
    }
    if (rc == VC_E_CODE_TAKEN) {
        fprintf(stderr, "voucher-admin: a voucher with the code %s exists\n", v.code);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    show(&v);
    return 0;
}

int admin_voucher(PGconn *conn, int argc, char **argv, const vc_audit_who_t *who)
{
    if (argc == 3 && strcmp(argv[1], "create") == 0)
        return create(conn, argv[2], who);
    if (argc == 3 && strcmp(argv[1], "show") == 0)
        return show_one(conn, argv[2]);
    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return list(conn, NULL);
    if (argc == 4 && strcmp(argv[1], "list") == 0 && strcmp(argv[2], "--mode") == 0) {
        if (vc_mode_parse(argv[3]) == VC_MODE_UNSET) {
            fprintf(stderr, "voucher-admin: --mode is direct or flash\n");
            return 2;
        }
        return list(conn, argv[3]);
    }
    fprintf(stderr, "usage: voucher-admin voucher create BODY|- | voucher show CODE |"
                    " voucher list [--mode direct|flash]\n");
    return 2;
}
