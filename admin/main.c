/*
 * voucher-admin: the platform team's command line for what the gateway's
 * admin API does, run where PostgreSQL is reachable (VOUCHER_PG_DSN).
 *
 *   voucher-admin campaign create --name N --count C ...   create and generate
 *   voucher-admin campaign resume ID                         finish a stalled generation
 *   voucher-admin campaign show ID | deactivate ID | export ID [--partial]
 *   voucher-admin audit [--actor A] [--action X] [--target T] [--since WHEN] ...
 *   voucher-admin voucher create BODY|-                      a voucher, as POST /vouchers
 *   voucher-admin voucher show CODE | list [--mode direct|flash]
 *
 * A change (a campaign's create, resume, deactivate; a voucher's create) and an export write their row of the
 * admin audit (deploy/sql/021_admin_audit.sql) as the gateway's routes do,
 * the actor being --operator NAME, else $USER.
 *
 * Generation shows a progress bar when stderr is a terminal and one plain
 * line per batch otherwise (logs, CI).
 */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "vc_audit.h"
#include "vc_campaign.h"
#include "vc_campaign_pg.h"
#include "vc_error.h"
#include "vc_pg.h"
#include "vc_random.h"
#include "vc_time.h"
#include "vc_utf8.h"

static const char usage[] =
    "usage: voucher-admin [--operator NAME] campaign COMMAND [OPTIONS]\n"
    "       voucher-admin audit [--actor NAME] [--action ACTION] [--target CODE|ID]\n"
    "                           [--since WHEN] [--limit N] [--json]\n"
    "\n"
    "--operator NAME: who acts, in the admin audit (default: $USER); create, resume,\n"
    "deactivate, export and revoke each write one row, in the transaction of the change\n"
    "\n"
    "audit: the admin audit's rows, newest first (default --limit 100): who, when, what\n"
    "  (voucher.create, voucher.update, campaign.create, campaign.deactivate,\n"
    "  campaign.export, campaign.resume), on what, from where, and what changed;\n"
    "  --since takes an RFC 3339 time or an age (30m, 12h, 7d); --json prints one JSON\n"
    "  object a line with the rows before and after in full\n"
    "\n"
    "campaign commands:\n"
    "  create OPTIONS     create a campaign and generate its codes (proto/campaigns.md)\n"
    "  resume ID          generate the rest of a campaign that stopped (GENERATING or FAILED)\n"
    "  show ID            its state, progress, codes held, redeemed and free, and rules,\n"
    "                     one \"name: value\" per line\n"
    "  export ID [--partial]  its codes as CSV (code,customerId) on stdout; refused while\n"
    "                     the campaign is not fully generated (GENERATING, FAILED) unless\n"
    "                     --partial, which exports the codes made so far and says so\n"
    "  deactivate ID      turn it off (final)\n"
    "  revoke CODE        one leaked code off, its campaign on: new reservations and quotes\n"
    "                     of it answer as an unknown code; the orders holding it stand\n"
    "  code CODE          who used a one-time code, and when: its campaign and binding, then\n"
    "                     each order that took it, oldest first (RELEASED gave it back)\n"
    "\n"
    "       voucher-admin voucher create BODY|-\n"
    "                     a voucher from the JSON body POST /vouchers takes (\"-\": read from\n"
    "                     stdin), with its checks and its audit row; \"mode\": \"direct\" or\n"
    "                     \"flash\", fixed at creation (absent: the database's default). A flash\n"
    "                     voucher is loaded into Redis by its first reservation\n"
    "       voucher-admin voucher show CODE | voucher list [--mode direct|flash]\n"
    "                     a voucher's rules and mode, or every voucher's mode and uses as CSV\n"
    "\n"
    "       voucher-admin report (--campaign ID | --voucher CODE) [--by hour|day] [--since WHEN]\n"
    "                     orders by state per period, as CSV (report --help says more)\n"
    "\n"
    "create options:\n"
    "  --name TEXT                 required, 1..200 characters\n"
    "  --count N                   required, 1..10000000 codes\n"
    "  --length N                  symbols after the prefix, check symbol included (default 12)\n"
    "  --prefix TEXT               up to 8 symbols of the alphabet, put before every code\n"
    "  --alphabet NAME             safe32 (default: A-Z 2-9 without 0 O 1 I) or digits\n"
    "  --check-symbol              make the last symbol a Luhn mod N check\n"
    "  --discount-amount N         fixed discount in minor units, or\n"
    "  --discount-percent N        1..100, with an optional --max-discount-amount N\n"
    "  --min-order-amount N        default 0\n"
    "  --per-customer-limit N      uses a customer may hold across the campaign (default 1)\n"
    "  --starts-at RFC3339         default now\n"
    "  --ends-at RFC3339           required\n"
    "  --customers FILE            customerIds, one a line: the first codes are bound to them\n"
    "\n"
    "environment: VOUCHER_PG_DSN (libpq conninfo of voucher-admin's role voucher_admin,\n"
    "or the owner's)\n";

/* Who acts (main()), for the admin audit rows this process writes. */
static vc_audit_who_t who;

typedef struct {
    int tty;
    time_t started, last;
} progress_t;

static int progress_cb(void *arg, int64_t generated, int64_t total)
{
    progress_t *p = arg;
    double secs = difftime(time(NULL), p->started);

    if (p->tty) {
        int width = 40, filled = (int)(width * generated / (total ? total : 1));
        fprintf(stderr, "\r[%.*s%*s] %" PRId64 "/%" PRId64 " %3d%%", filled,
                "########################################", width - filled, "", generated, total,
                (int)(100 * generated / (total ? total : 1)));
        if (generated == total)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "generated %" PRId64 " of %" PRId64 " codes (%.0f s)\n", generated, total,
                secs);
    }
    fflush(stderr);
    return 0;
}

int admin_parse_i64(const char *opt, const char *s, int64_t *out)
{
    char *end;

    errno = 0;
    *out = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        fprintf(stderr, "voucher-admin: --%s wants an integer, not '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

static int parse_time(const char *opt, const char *s, int64_t *out)
{
    if (vc_time_parse(s, strlen(s), out) != 0) {
        fprintf(stderr, "voucher-admin: --%s wants an RFC 3339 time, not '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

/* Reads customerIds, one a line, from path into a new array (caller frees). */
static int read_customers(const char *path, int64_t **out, size_t *n)
{
    FILE *f = fopen(path, "r");
    char line[64];
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    if (!f) {
        fprintf(stderr, "voucher-admin: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        int64_t v;

        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        if (admin_parse_i64("customers", line, &v) != 0 || v < 1) {
            fprintf(stderr, "voucher-admin: %s: customerIds are integers >= 1\n", path);
            fclose(f);
            return -1;
        }
        if (*n == cap) {
            int64_t *grown = realloc(*out, (cap = cap ? cap * 2 : 1024) * sizeof(**out));
            if (!grown) {
                fclose(f);
                return -1;
            }
            *out = grown;
        }
        (*out)[(*n)++] = v;
    }
    fclose(f);
    return 0;
}

static void show(const vc_campaign_row_t *r)
{
    const vc_campaign_spec_t *s = &r->spec;
    char starts[40], ends[40];

    vc_time_format_ms(s->starts_at_ms, starts, sizeof(starts));
    vc_time_format_ms(s->ends_at_ms, ends, sizeof(ends));
    printf("id: %" PRId64 "\nname: %s\nstate: %s%s\ngenerated: %" PRId64 "\ntotal: %" PRId64 "\n",
           r->id, s->name, r->state, r->stalled ? " (stalled)" : "", r->generated, s->count);
    if (r->has_usage)
        printf("held: %" PRId64 "\nredeemed: %" PRId64 "\nfree: %" PRId64 "\n", r->held,
               r->redeemed, r->free);
    if (s->discount_percent > 0) {
        printf("discountPercent: %d\n", s->discount_percent);
        if (s->max_discount_amount > 0)
            printf("maxDiscountAmount: %" PRId64 "\n", s->max_discount_amount);
    } else {
        printf("discountAmount: %" PRId64 "\n", s->discount_amount);
    }
    printf("minOrderAmount: %" PRId64 "\nalphabet: %s\nprefix: %s\nlength: %d\ncheckSymbol: %s\n"
           "perCustomerLimit: %" PRId64 "\nstartsAt: %s\nendsAt: %s\n",
           s->min_order_amount, s->alphabet->name, s->prefix, s->length,
           s->check_symbol ? "true" : "false", s->per_customer_limit, starts, ends);
}

static int create(PGconn *conn, int argc, char **argv)
{
    enum {
        O_NAME = 1,
        O_COUNT,
        O_LENGTH,
        O_PREFIX,
        O_ALPHABET,
        O_CHECK,
        O_AMOUNT,
        O_PERCENT,
        O_MAX,
        O_MIN,
        O_PER,
        O_STARTS,
        O_ENDS,
        O_CUSTOMERS
    };
    static const struct option opts[] = {
        {"name", 1, NULL, O_NAME},
        {"count", 1, NULL, O_COUNT},
        {"length", 1, NULL, O_LENGTH},
        {"prefix", 1, NULL, O_PREFIX},
        {"alphabet", 1, NULL, O_ALPHABET},
        {"check-symbol", 0, NULL, O_CHECK},
        {"discount-amount", 1, NULL, O_AMOUNT},
        {"discount-percent", 1, NULL, O_PERCENT},
        {"max-discount-amount", 1, NULL, O_MAX},
        {"min-order-amount", 1, NULL, O_MIN},
        {"per-customer-limit", 1, NULL, O_PER},
        {"starts-at", 1, NULL, O_STARTS},
        {"ends-at", 1, NULL, O_ENDS},
        {"customers", 1, NULL, O_CUSTOMERS},
        {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    vc_campaign_spec_t s;
    const char *customers_path = NULL, *alphabet = "safe32";
    int64_t v, id, *customers = NULL;
    size_t ncustomers = 0;
    progress_t p = {isatty(STDERR_FILENO), time(NULL), 0};
    char err[512];
    int c, rc = 1;

    memset(&s, 0, sizeof(s));
    s.length = VC_CAMPAIGN_LENGTH_DEFAULT;
    s.per_customer_limit = 1;
    s.starts_at_ms = vc_time_now_ms();
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        const char *name = c > 0 && c <= O_CUSTOMERS ? opts[c - 1].name : "?";

        switch (c) {
        case O_NAME:
            snprintf(s.name, sizeof(s.name), "%s", optarg);
            /* Characters, as the gateway and PostgreSQL's check count them. */
            if (vc_utf8_count(optarg) > VC_CAMPAIGN_NAME_MAX || strlen(optarg) >= sizeof(s.name)) {
                fprintf(stderr, "voucher-admin: --name is at most 200 characters\n");
                return 2;
            }
            break;
        case O_PREFIX:
            if (strlen(optarg) > VC_CAMPAIGN_PREFIX_MAX) {
                fprintf(stderr, "voucher-admin: --prefix is at most %d symbols\n",
                        VC_CAMPAIGN_PREFIX_MAX);
                return 2;
            }
            snprintf(s.prefix, sizeof(s.prefix), "%s", optarg);
            break;
        case O_ALPHABET:
            alphabet = optarg;
            break;
        case O_CHECK:
            s.check_symbol = 1;
            break;
        case O_CUSTOMERS:
            customers_path = optarg;
            break;
        case O_STARTS:
            if (parse_time(name, optarg, &s.starts_at_ms) != 0)
                return 2;
            break;
        case O_ENDS:
            if (parse_time(name, optarg, &s.ends_at_ms) != 0)
                return 2;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case '?':
            fputs(usage, stderr);
            return 2;
        default:
            if (admin_parse_i64(name, optarg, &v) != 0)
                return 2;
            if (c == O_COUNT)
                s.count = v;
            else if (c == O_LENGTH)
                s.length = v > 100 ? 100 : v < 0 ? 0 : (int)v;
            else if (c == O_AMOUNT)
                s.discount_amount = v;
            else if (c == O_PERCENT)
                s.discount_percent = v > 1000 ? 1000 : v < -1 ? -1 : (int)v;
            else if (c == O_MAX)
                s.max_discount_amount = v;
            else if (c == O_MIN)
                s.min_order_amount = v;
            else if (c == O_PER)
                s.per_customer_limit = v;
            break;
        }
    }
    s.alphabet = vc_alphabet_find(alphabet);
    if (vc_campaign_spec_check(&s, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 2;
    }
    if (customers_path && read_customers(customers_path, &customers, &ncustomers) != 0)
        return 2;
    if ((int64_t)ncustomers > s.count) {
        fprintf(stderr, "voucher-admin: %zu customers for %" PRId64 " codes\n", ncustomers,
                s.count);
        goto out;
    }
    if ((rc = vc_campaign_create(conn, &s, &who, &id, err, sizeof(err))) != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        rc = rc > 0 ? 2 : 1;
        goto out;
    }
    fprintf(stderr, "campaign %" PRId64 " created; generating %" PRId64 " codes\n", id, s.count);
    if ((rc = vc_campaign_generate(conn, id, customers, ncustomers, vc_random_fill, progress_cb, &p,
                                   err, sizeof(err))) != 0) {
        fprintf(stderr, "voucher-admin: campaign %" PRId64 ": %s\n", id, err);
        rc = 1;
        goto out;
    }
    fprintf(stderr, "campaign %" PRId64 ": %" PRId64 " codes in %.0f s\n", id, s.count,
            difftime(time(NULL), p.started));
    printf("%" PRId64 "\n", id);
    rc = 0;
out:
    free(customers);
    return rc;
}

/*
 * Whether export may write row's codes: all of them are generated, or the
 * caller asked for the part there is (and is told so on stderr).
 */
static int export_ready(const vc_campaign_row_t *row, int64_t id, int partial)
{
    int done = strcmp(row->state, "GENERATING") != 0 && strcmp(row->state, "FAILED") != 0;

    if (done)
        return 1;
    if (!partial) {
        fprintf(stderr,
                "voucher-admin: campaign %" PRId64 " is %s: %" PRId64 " of %" PRId64
                " codes generated; `voucher-admin campaign resume %" PRId64
                "` makes the rest (or export --partial writes the codes made so far)\n",
                id, row->state, row->generated, row->spec.count, id);
        return 0;
    }
    fprintf(stderr,
            "voucher-admin: a PARTIAL export: campaign %" PRId64 " is %s, %" PRId64 " of %" PRId64
            " codes generated\n",
            id, row->state, row->generated, row->spec.count);
    return 1;
}

/*
 * Writes the audit row of action on campaign id by who, on its own (an export
 * or a resume changes no row of its own in one transaction): the campaign's
 * row as it is when the action starts is its before. Returns 0,
 * VC_CAMPAIGN_E_NOT_FOUND, or a negative VC_ERR_* with err.
 */
static int record_with_row(PGconn *conn, const char *action, int64_t id, const char *detail,
                           char *err, size_t errlen)
{
    char target[24], *before = NULL;
    vc_audit_action_t audit = {action, target, VC_AUDIT_CAMPAIGN, 0, NULL, detail};
    int rc;

    snprintf(target, sizeof(target), "%" PRId64, id);
    if ((rc = vc_audit_snapshot(conn, VC_AUDIT_CAMPAIGN, target, &before, err, errlen)) != 0)
        return rc;
    if (!before)
        return VC_CAMPAIGN_E_NOT_FOUND;
    audit.before = before;
    rc = vc_audit_record(conn, &who, &audit, err, errlen);
    free(before);
    return rc;
}

/* cmd ID [option]; nargs counts what follows cmd (1 or 2, else a usage error). */
static int with_id(PGconn *conn, const char *cmd, const char *arg, const char *option, int nargs)
{
    vc_campaign_row_t row;
    progress_t p = {isatty(STDERR_FILENO), time(NULL), 0};
    char err[512];
    int64_t id;
    int rc;

    if (!arg || nargs > 2 || admin_parse_i64("id", arg, &id) != 0 ||
        (option && (strcmp(cmd, "export") != 0 || strcmp(option, "--partial") != 0))) {
        fputs(usage, stderr);
        return 2;
    }
    if (strcmp(cmd, "show") == 0) {
        if ((rc = vc_campaign_load(conn, id, &row, err, sizeof(err))) == 0)
            rc = vc_campaign_load_usage(conn, id, &row, err, sizeof(err));
    }
    else if (strcmp(cmd, "deactivate") == 0)
        rc = vc_campaign_deactivate(conn, id, &who, &row, err, sizeof(err));
    else if (strcmp(cmd, "resume") == 0) {
        /* Recorded as it starts, as an export is: its batches commit one by one. */
        if ((rc = record_with_row(conn, "campaign.resume", id, NULL, err, sizeof(err))) == 0)
            rc = vc_campaign_generate(conn, id, NULL, 0, vc_random_fill, progress_cb, &p, err,
                                      sizeof(err));
    } else if ((rc = vc_campaign_load(conn, id, &row, err, sizeof(err))) == 0) {
        char *buf, detail[80];
        int64_t after = 0;
        size_t len;
        int rows;

        if (!export_ready(&row, id, option != NULL))
            return 1;
        /* Before the first code is written: an export that cannot be recorded does not start. */
        snprintf(detail, sizeof(detail), "%s%" PRId64 " codes", option ? "partial, " : "",
                 row.generated);
        if ((rc = record_with_row(conn, "campaign.export", id, detail, err, sizeof(err))) != 0) {
            fprintf(stderr, "voucher-admin: recording the export failed: %s\n", err);
            return 1;
        }
        buf = malloc(10000 * VC_CAMPAIGN_CSV_LINE_MAX);

        if (!buf)
            return 1;
        puts("code,customerId");
        while ((rows = vc_campaign_codes_page(conn, id, strlen(row.spec.prefix), &after, 10000,
                                              buf, 10000 * VC_CAMPAIGN_CSV_LINE_MAX, &len, err,
                                              sizeof(err))) > 0)
            fwrite(buf, 1, len, stdout);
        free(buf);
        rc = rows < 0 ? rows : 0;
    }
    if (rc == VC_CAMPAIGN_E_NOT_FOUND) {
        fprintf(stderr, "voucher-admin: no campaign %" PRId64 "\n", id);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    if (strcmp(cmd, "show") == 0 || strcmp(cmd, "deactivate") == 0)
        show(&row);
    return 0;
}

/* For tests/bench/campaign: the process's peak resident memory (VmHWM), on stderr. */
static void print_peak_memory(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    long kib;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            fprintf(stderr, "peak memory: %ld kB\n", kib);
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    const char *dsn = getenv("VOUCHER_PG_DSN");
    static char source[300];
    char host[256] = "";
    PGconn *conn;
    char err[512];
    int rc, is_audit;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "report") == 0 && strcmp(argv[2], "--help") == 0)
        return admin_report(NULL, argc - 1, argv + 1);
    /* The login's name when neither --operator nor USER says who acts (cron, a container). */
    if (!(who.actor = getenv("USER")) || !*who.actor) {
        const struct passwd *pw = getpwuid(getuid());
        who.actor = pw ? pw->pw_name : NULL;
    }
    if (argc >= 3 && strcmp(argv[1], "--operator") == 0) {
        who.actor = argv[2];
        argc -= 2;
        argv += 2;
    }
    is_audit = argc >= 2 && strcmp(argv[1], "audit") == 0;
    if (is_audit && argc >= 3 && strcmp(argv[2], "--help") == 0)
        return admin_audit(NULL, argc - 1, argv + 1);
    if (!is_audit && (argc < 3 || (strcmp(argv[1], "campaign") != 0 &&
                                   strcmp(argv[1], "report") != 0 &&
                                   strcmp(argv[1], "voucher") != 0))) {
        fputs(usage, stderr);
        return 2;
    }
    if (!is_audit && strcmp(argv[2], "create") == 0 && argc >= 4 &&
        strcmp(argv[3], "--help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    /* The audit's actor CHECK: 1..64 characters; an anonymous change is refused here. */
    if (!is_audit && (!who.actor || !*who.actor || strlen(who.actor) > 64)) {
        fprintf(stderr, "voucher-admin: who acts? --operator NAME (1..64 characters)\n");
        return 2;
    }
    (void)gethostname(host, sizeof(host) - 1);
    snprintf(source, sizeof(source), "voucher-admin@%s", host);
    who.source = source;
    if (!dsn || !*dsn) {
        fprintf(stderr, "voucher-admin: set VOUCHER_PG_DSN\n");
        return 2;
    }
    if (!(conn = vc_pg_connect(dsn, "voucher-admin", err, sizeof(err)))) {
        fprintf(stderr, "voucher-admin: %s\n", err);
        return 1;
    }
    /* A batch's COPY may take longer than the daemons' 30 s on a slow disk. */
    (void)vc_pg_command(conn, "SET statement_timeout = '10min'", NULL, 0);
    if (is_audit)
        rc = admin_audit(conn, argc - 1, argv + 1);
    else if (strcmp(argv[1], "report") == 0)
        rc = admin_report(conn, argc - 1, argv + 1);
    else if (strcmp(argv[1], "voucher") == 0)
        rc = admin_voucher(conn, argc - 1, argv + 1, &who);
    else if (strcmp(argv[2], "code") == 0 && argc == 4)
        rc = admin_code(conn, argv[3]);
    else if (strcmp(argv[2], "revoke") == 0 && argc == 4)
        rc = admin_revoke(conn, argv[3], &who);
    else if (strcmp(argv[2], "create") == 0)
        rc = create(conn, argc - 2, argv + 2);
    else if (strcmp(argv[2], "show") == 0 || strcmp(argv[2], "deactivate") == 0 ||
             strcmp(argv[2], "resume") == 0 || strcmp(argv[2], "export") == 0)
        rc = with_id(conn, argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL,
                     argc - 3);
    else {
        fputs(usage, stderr);
        rc = 2;
    }
    PQfinish(conn);
    if (getenv("VC_BENCH"))
        print_peak_memory();
    return rc;
}
