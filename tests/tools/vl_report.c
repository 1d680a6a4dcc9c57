#include "vl_report.h"
#include "vc_error.h"
#include "vc_json.h"

#include <inttypes.h>
#include <string.h>

/* Statuses always shown, even at zero, so scripts can read them without a default. */
static const int fixed_statuses[] = {
    201, 409, 422, 404, 400, 503, VL_STATUS_TIMEOUT, VL_STATUS_ERROR};
#define NFIXED (sizeof(fixed_statuses) / sizeof(fixed_statuses[0]))

static const struct {
    const char *key, *label; /* JSON key, text label */
    double p;
} percentiles[] = {
    {"p50", "p50", 50}, {"p90", "p90", 90}, {"p99", "p99", 99}, {"p999", "p99.9", 99.9}};
#define NPERCENTILES (sizeof(percentiles) / sizeof(percentiles[0]))

const char *vl_status_name(int status, char *buf, size_t cap)
{
    if (status == VL_STATUS_TIMEOUT)
        return "timeout";
    if (status == VL_STATUS_ERROR)
        return "error";
    snprintf(buf, cap, "%d", status);
    return buf;
}

void vl_tsv_header(FILE *out)
{
    fputs("#attempt\torderId\tcustomerId\tstatus\terror\treplayed\tlatencyUs\ttries\tstartUs"
          "\tendUs\n",
          out);
}

void vl_tsv_write(FILE *out, const vl_result_t *r)
{
    char sbuf[16];

    fprintf(out,
            "%" PRId64 "\t%s\t%" PRId64 "\t%s\t%s\t%d\t%" PRIu64 "\t%d\t%" PRId64 "\t%" PRId64 "\n",
            r->index, r->order_id, r->customer_id, vl_status_name(r->status, sbuf, sizeof(sbuf)),
            *r->error ? r->error : "-", r->replayed, r->latency_us, r->tries, r->start_us,
            r->end_us);
}

static uint64_t count_status(const vl_stats_t *s, int status)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->noutcomes; i++)
        if (s->outcomes[i].status == status)
            n += s->outcomes[i].count;
    return n;
}

static int is_fixed(int status)
{
    for (size_t i = 0; i < NFIXED; i++)
        if (fixed_statuses[i] == status)
            return 1;
    return 0;
}

/* Whether outcome i is the first with its status (so each status is listed once). */
static int first_of_status(const vl_stats_t *s, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (s->outcomes[j].status == s->outcomes[i].status)
            return 0;
    return 1;
}

static int first_of_error(const vl_stats_t *s, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(s->outcomes[j].error, s->outcomes[i].error) == 0)
            return 0;
    return 1;
}

static uint64_t count_error(const vl_stats_t *s, const char *error)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->noutcomes; i++)
        if (strcmp(s->outcomes[i].error, error) == 0)
            n += s->outcomes[i].count;
    return n;
}

static uint64_t throughput(const vl_stats_t *s)
{
    return s->elapsed_us ? (uint64_t)((double)s->finished * 1e6 / (double)s->elapsed_us + 0.5) : 0;
}

static void text_status(FILE *out, const vl_stats_t *s, int status)
{
    char sbuf[16];

    fprintf(out, "  %-22s %10" PRIu64, vl_status_name(status, sbuf, sizeof(sbuf)),
            count_status(s, status));
    if (status == 201)
        fprintf(out, "  (replayed %" PRIu64 ")", s->replayed);
    fputc('\n', out);
    for (size_t i = 0; i < s->noutcomes; i++)
        if (s->outcomes[i].status == status && *s->outcomes[i].error)
            fprintf(out, "    %-20s %10" PRIu64 "\n", s->outcomes[i].error, s->outcomes[i].count);
}

void vl_summary_text(FILE *out, const vl_options_t *opt, const char *addr, const vl_stats_t *s)
{
    const vc_hist_t *h = &s->latency_us;

    fprintf(out,
            "vc-load: %" PRIu64 " attempts on %s at %s in %.3f s: %" PRIu64
            " attempts/s (%lld connections, ",
            s->finished, opt->code, addr, (double)s->elapsed_us / 1e6, throughput(s),
            (long long)opt->connections);
    if (opt->rate > 0)
        fprintf(out, "open loop at %lld/s)\n", (long long)opt->rate);
    else
        fprintf(out, "closed loop)\n");
    if (s->finished < s->planned)
        fprintf(out, "  %" PRIu64 " of %" PRIu64 " planned attempts not sent: %s\n",
                s->planned - s->finished, s->planned,
                s->gave_up       ? "gave up, no connection worked"
                : s->interrupted ? "interrupted"
                                 : "duration over");
    for (size_t i = 0; i < NFIXED; i++)
        text_status(out, s, fixed_statuses[i]);
    for (size_t i = 0; i < s->noutcomes; i++)
        if (!is_fixed(s->outcomes[i].status) && first_of_status(s, i))
            text_status(out, s, s->outcomes[i].status);
    if (s->outcomes_dropped)
        fprintf(out, "  %-22s %10" PRIu64 "\n", "(other)", s->outcomes_dropped);
    fprintf(out,
            "requests %" PRIu64 " (retries %" PRIu64 ", stale keep-alive resends %" PRIu64
            "); connects %" PRIu64 ", connect errors %" PRIu64 ", server closes %" PRIu64 "\n",
            s->requests, s->retries, s->stale_resends, s->connects, s->connect_errors,
            s->server_closes);
    fprintf(out, "latency us: min %" PRIu64, h->total ? h->min : 0);
    for (size_t i = 0; i < NPERCENTILES; i++)
        fprintf(out, "  %s %" PRIu64, percentiles[i].label,
                vc_hist_percentile(h, percentiles[i].p));
    fprintf(out, "  max %" PRIu64 "  mean %.0f\n", h->max, vc_hist_mean(h));
}

int vl_summary_json(FILE *out, const vl_options_t *opt, const char *addr, const vl_stats_t *s)
{
    const vc_hist_t *h = &s->latency_us;
    char sbuf[16], buf[16384];
    size_t len;
    vc_jgen_t g;
    int rc;

    if ((rc = vc_jgen_init(&g)) != 0)
        return rc;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "addr", addr);
    vc_jgen_kv_str(&g, "code", opt->code);
    vc_jgen_kv_int(&g, "planned", (int64_t)s->planned);
    vc_jgen_kv_int(&g, "attempts", (int64_t)s->finished);
    vc_jgen_kv_int(&g, "unsent", (int64_t)(s->planned - s->finished));
    vc_jgen_kv_int(&g, "requests", (int64_t)s->requests);
    vc_jgen_kv_int(&g, "retries", (int64_t)s->retries);
    vc_jgen_kv_int(&g, "staleResends", (int64_t)s->stale_resends);
    vc_jgen_key(&g, "byStatus");
    vc_jgen_map_open(&g);
    for (size_t i = 0; i < NFIXED; i++)
        vc_jgen_kv_int(&g, vl_status_name(fixed_statuses[i], sbuf, sizeof(sbuf)),
                       (int64_t)count_status(s, fixed_statuses[i]));
    for (size_t i = 0; i < s->noutcomes; i++)
        if (!is_fixed(s->outcomes[i].status) && first_of_status(s, i))
            vc_jgen_kv_int(&g, vl_status_name(s->outcomes[i].status, sbuf, sizeof(sbuf)),
                           (int64_t)count_status(s, s->outcomes[i].status));
    vc_jgen_map_close(&g);
    vc_jgen_key(&g, "byError");
    vc_jgen_map_open(&g);
    for (size_t i = 0; i < s->noutcomes; i++)
        if (*s->outcomes[i].error && first_of_error(s, i))
            vc_jgen_kv_int(&g, s->outcomes[i].error, (int64_t)count_error(s, s->outcomes[i].error));
    vc_jgen_map_close(&g);
    vc_jgen_kv_int(&g, "otherOutcomes", (int64_t)s->outcomes_dropped);
    vc_jgen_kv_int(&g, "replayed", (int64_t)s->replayed);
    vc_jgen_kv_int(&g, "connects", (int64_t)s->connects);
    vc_jgen_kv_int(&g, "connectErrors", (int64_t)s->connect_errors);
    vc_jgen_kv_int(&g, "serverCloses", (int64_t)s->server_closes);
    vc_jgen_kv_int(&g, "elapsedUs", (int64_t)s->elapsed_us);
    vc_jgen_kv_int(&g, "throughput", (int64_t)throughput(s));
    vc_jgen_key(&g, "latencyUs");
    vc_jgen_map_open(&g);
    vc_jgen_kv_int(&g, "min", (int64_t)(h->total ? h->min : 0));
    for (size_t i = 0; i < NPERCENTILES; i++)
        vc_jgen_kv_int(&g, percentiles[i].key, (int64_t)vc_hist_percentile(h, percentiles[i].p));
    vc_jgen_kv_int(&g, "max", (int64_t)h->max);
    vc_jgen_kv_int(&g, "mean", (int64_t)(vc_hist_mean(h) + 0.5));
    vc_jgen_map_close(&g);
    vc_jgen_kv_bool(&g, "interrupted", s->interrupted);
    vc_jgen_kv_bool(&g, "gaveUp", s->gave_up);
    vc_jgen_map_close(&g);
    if ((rc = vc_jgen_finish(&g, buf, sizeof(buf), &len)) != 0)
        return rc;
    fprintf(out, "%s\n", buf);
    return 0;
}
