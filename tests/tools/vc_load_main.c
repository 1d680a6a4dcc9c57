/*
 * vc-load: fires reservation attempts at the gateway over keep-alive
 * connections and reports what came back. Parses the settings, runs the
 * engine (vl_load.c) and prints the report (vl_report.c).
 *
 * Exit status: 0 when the load ran, whatever the gateway answered; 2 for bad
 * usage; 3 when no connection to the gateway could be made at all; 1 for any
 * other failure (out of memory, the --out file).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vc_config.h"
#include "vc_error.h"
#include "vl_load.h"
#include "vl_report.h"

enum { EXIT_RAN = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_NO_CONNECTION = 3 };

typedef struct {
    const char *addr;
    const char *code;
    const char *codes_file;
    int64_t attempts;
    int64_t connections;
    int64_t customers;
    int random_customers;
    int64_t customer_base;
    const char *order_prefix;
    int64_t amount;
    int64_t timeout_ms;
    int64_t retries;
    int64_t rate;
    int64_t duration_ms;
    int64_t connect_timeout_ms;
    int64_t seed;
    const char *out;
    int json;
    int forwarded;
    const char *token;
} load_cfg_t;

#define OFF(field) offsetof(load_cfg_t, field)
#define DAY_MS (24LL * 3600 * 1000)

static const vc_cfg_param_t params[] = {
    {"addr", "VOUCHER_HTTP_ADDR", VC_CFG_STRING, "127.0.0.1:15410", OFF(addr), 0, 0,
     "gateway HOST:PORT (loopback only)"},
    {"code", "VC_LOAD_CODE", VC_CFG_STRING, NULL, OFF(code), 0, 0,
     "voucher code to reserve (this or --codes-file)"},
    {"codes-file", NULL, VC_CFG_STRING, NULL, OFF(codes_file), 0, 0,
     "a file of codes, one a line (a campaign's one-time codes): attempt i reserves line "
     "(i % lines) + 1"},
    {"attempts", NULL, VC_CFG_INT, "1000", OFF(attempts), 0, 100000000,
     "reservation attempts (distinct orderIds) to make"},
    {"connections", NULL, VC_CFG_INT, "200", OFF(connections), 1, 10000,
     "concurrent keep-alive connections, one request in flight on each"},
    {"customers", NULL, VC_CFG_INT, "0", OFF(customers), 0, INT32_MAX,
     "customer ids 1..N; attempt i uses (i % N) + 1; 0 gives every attempt its own (i + 1)"},
    {"random-customers", NULL, VC_CFG_BOOL, "false", OFF(random_customers), 0, 0,
     "pick each attempt's customer from 1..N with a generator seeded by --seed"},
    {"customer-base", NULL, VC_CFG_INT, "0", OFF(customer_base), 0, INT64_MAX / 2,
     "added to every customer id, to keep runs apart"},
    {"order-prefix", NULL, VC_CFG_STRING, NULL, OFF(order_prefix), 0, 0,
     "orderId = prefix + attempt index (default \"o-<pid>-\")"},
    {"amount", NULL, VC_CFG_INT, "100000000", OFF(amount), 0, INT64_MAX / 2,
     "orderAmount of every attempt"},
    {"timeout", NULL, VC_CFG_MS, "5s", OFF(timeout_ms), 0, DAY_MS,
     "per request; no answer in time counts as \"timeout\" (outcome unknown); 0 for none"},
    {"retries", NULL, VC_CFG_INT, "0", OFF(retries), 0, 100,
     "resend the same orderId up to N times after a timeout, connection error or 503"},
    {"rate", NULL, VC_CFG_INT, "0", OFF(rate), 0, 1000000,
     "0: closed loop, as fast as answers come; N: open loop at N attempts/s on a fixed "
     "schedule, latency counted from the scheduled time"},
    {"duration", NULL, VC_CFG_MS, "0", OFF(duration_ms), 0, DAY_MS,
     "stop issuing attempts (and retries) after this long; 0 for no limit"},
    {"connect-timeout", NULL, VC_CFG_MS, "10s", OFF(connect_timeout_ms), 1, DAY_MS,
     "give up when no connection to the gateway has worked for this long"},
    {"seed", NULL, VC_CFG_INT, "1", OFF(seed), 0, INT64_MAX, "seed for --random-customers"},
    {"out", NULL, VC_CFG_STRING, NULL, OFF(out), 0, 0,
     "write one TSV line per attempt to this file (columns in its first line)"},
    {"json", NULL, VC_CFG_BOOL, "false", OFF(json), 0, 0, "print the summary as JSON"},
    {"forwarded-for", NULL, VC_CFG_BOOL, "false", OFF(forwarded), 0, 0,
     "send X-Forwarded-For with each customer's own address (10.x.y.z from its id), as an "
     "order service the gateway trusts (VOUCHER_TRUSTED_PROXIES) forwards the shopper's"},
    {"token", "VOUCHER_API_TOKEN", VC_CFG_STRING, NULL, OFF(token), 0, 0,
     "bearer token sent as Authorization with every request; of a comma-separated list "
     "(the gateway's rotation setting) the first"},
    VC_CFG_END,
};

static const char summary[] =
    "Usage: vc-load --code CODE [settings]\n"
    "       vc-load --codes-file FILE [settings]\n"
    "Fires reservation attempts (POST /vouchers/CODE/reservations) at the gateway over\n"
    "HTTP/1.1 keep-alive connections and prints counts by status and latency percentiles.";

/* Reads the non-empty lines of path into *codes (each its own string). */
static int read_codes(const char *path, char ***codes, int64_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, **v = NULL;
    size_t cap = 0, vcap = 0;
    ssize_t len;
    int64_t count = 0;

    if (!f) {
        snprintf(err, errlen, "cannot read --codes-file %s: %s", path, strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if ((size_t)count == vcap) {
            size_t ncap = vcap ? vcap * 2 : 1024;
            char **nv = realloc(v, ncap * sizeof(*nv));
            if (!nv)
                goto oom;
            v = nv;
            vcap = ncap;
        }
        if (!(v[count] = strdup(line)))
            goto oom;
        count++;
    }
    free(line);
    fclose(f);
    if (count == 0) {
        free(v);
        snprintf(err, errlen, "--codes-file %s has no codes", path);
        return -1;
    }
    *codes = v;
    *n = count;
    return 0;
oom:
    while (count > 0)
        free(v[--count]);
    free(v);
    free(line);
    fclose(f);
    snprintf(err, errlen, "out of memory reading --codes-file %s", path);
    return -1;
}

static void on_result(const vl_result_t *r, void *arg)
{
    vl_tsv_write(arg, r);
}

int main(int argc, char **argv)
{
    load_cfg_t cfg;
    vl_options_t opt;
    vl_stats_t *stats = NULL;
    FILE *out = NULL;
    char **codes = NULL, err[512], prefix[64], token[512];
    int rc, status = EXIT_FAILED;

    memset(&cfg, 0, sizeof(cfg));
    rc = vc_config_load(params, &cfg, "vc-load", summary, argc, argv, NULL, err, sizeof(err));
    if (rc == VC_CFG_EXIT)
        return EXIT_RAN;
    if (rc != VC_CFG_RUN) {
        fprintf(stderr, "vc-load: %s\n", err);
        return EXIT_USAGE;
    }
    if ((!cfg.code || !*cfg.code) == !cfg.codes_file) {
        fprintf(stderr, "vc-load: give --code or --codes-file, one of them (see --help)\n");
        return EXIT_USAGE;
    }
    memset(&opt, 0, sizeof(opt));
    if (vc_parse_host_port(cfg.addr, opt.host, sizeof(opt.host), &opt.port) != 0) {
        fprintf(stderr, "vc-load: --addr \"%s\" is not HOST:PORT\n", cfg.addr);
        return EXIT_USAGE;
    }
    /* Brackets around an IPv6 host ("[::1]:15410") are for the text only. */
    if (opt.host[0] == '[' && opt.host[strlen(opt.host) - 1] == ']') {
        memmove(opt.host, opt.host + 1, strlen(opt.host) - 2);
        opt.host[strlen(opt.host) - 2] = '\0';
    }
    if (!cfg.order_prefix) {
        snprintf(prefix, sizeof(prefix), "o-%ld-", (long)getpid());
        cfg.order_prefix = prefix;
    }
    opt.code = cfg.code;
    if (cfg.codes_file) {
        if (read_codes(cfg.codes_file, &codes, &opt.ncodes, err, sizeof(err)) != 0) {
            fprintf(stderr, "vc-load: %s\n", err);
            return EXIT_USAGE;
        }
        opt.codes = (const char *const *)codes;
        opt.code = cfg.codes_file; /* what the summary names */
    }
    opt.order_prefix = cfg.order_prefix;
    opt.attempts = cfg.attempts;
    opt.connections = cfg.connections;
    opt.customers = cfg.customers;
    opt.random_customers = cfg.random_customers;
    opt.customer_base = cfg.customer_base;
    opt.amount = cfg.amount;
    opt.retries = cfg.retries;
    opt.rate = cfg.rate;
    opt.timeout_ms = cfg.timeout_ms;
    opt.duration_ms = cfg.duration_ms;
    opt.connect_timeout_ms = cfg.connect_timeout_ms;
    opt.seed = (uint64_t)cfg.seed;
    opt.forwarded = cfg.forwarded;
    /* The gateway takes a list for rotation; a client sends one: the first. */
    if (cfg.token) {
        size_t n = strcspn(cfg.token, ",");
        if (n >= sizeof(token)) {
            fprintf(stderr, "vc-load: --token is longer than %zu bytes\n", sizeof(token) - 1);
            return EXIT_USAGE;
        }
        memcpy(token, cfg.token, n);
        token[n] = '\0';
        opt.token = token;
    }

    if (cfg.out) {
        if (!(out = fopen(cfg.out, "w"))) {
            fprintf(stderr, "vc-load: cannot write %s: %s\n", cfg.out, strerror(errno));
            return EXIT_USAGE;
        }
        vl_tsv_header(out);
    }
    if (!(stats = malloc(sizeof(*stats)))) {
        fprintf(stderr, "vc-load: out of memory\n");
        goto out;
    }
    rc = vl_run(&opt, out ? on_result : NULL, out, stats, err, sizeof(err));
    if (rc == VC_ERR_INVALID) {
        fprintf(stderr, "vc-load: %s\n", err);
        status = EXIT_USAGE;
        goto out;
    }
    if (rc == VC_ERR_UNAVAILABLE) {
        fprintf(stderr, "vc-load: %s\n", err);
        status = EXIT_NO_CONNECTION;
        goto out;
    }
    if (rc != 0) {
        fprintf(stderr, "vc-load: %s\n", vc_strerror(rc));
        goto out;
    }
    if (cfg.json)
        rc = vl_summary_json(stdout, &opt, cfg.addr, stats);
    else
        vl_summary_text(stdout, &opt, cfg.addr, stats);
    if (rc != 0) {
        fprintf(stderr, "vc-load: summary: %s\n", vc_strerror(rc));
        goto out;
    }
    status = EXIT_RAN;
out:
    if (out && fclose(out) != 0 && status == EXIT_RAN) {
        fprintf(stderr, "vc-load: writing %s: %s\n", cfg.out, strerror(errno));
        status = EXIT_FAILED;
    }
    free(stats);
    if (codes) {
        for (int64_t i = 0; i < opt.ncodes; i++)
            free(codes[i]);
        free(codes);
    }
    return status;
}
