#include "wr_cli.h"
#include "wr_dlt.h"
#include "wr_kafka.h"

#include "vc_error.h"
#include "vc_event.h"
#include "vc_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a dead letter is about, for the table: from its payload when it decodes. */
typedef struct {
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
    const char *type;
} wr_subject_t;

static void subject_of(const wr_dlt_record_t *rec, wr_subject_t *s)
{
    vc_event_t ev;
    char err[128];

    if (rec->value && vc_event_decode(rec->value, rec->len, &ev, err, sizeof(err)) == 0) {
        snprintf(s->code, sizeof(s->code), "%s", ev.code);
        snprintf(s->order_id, sizeof(s->order_id), "%s", ev.order_id);
        s->type = vc_event_type_name(ev.type);
        return;
    }
    /* The key is the voucher code even when the value is unreadable. */
    snprintf(s->code, sizeof(s->code), "%.*s",
             rec->key && rec->key_len <= VC_CODE_MAX ? (int)rec->key_len : 1,
             rec->key && rec->key_len <= VC_CODE_MAX ? (const char *)rec->key : "-");
    snprintf(s->order_id, sizeof(s->order_id), "-");
    s->type = "-";
}

static int64_t failed_at(const wr_dlt_record_t *rec)
{
    return rec->info.failed_at_ms >= 0 ? rec->info.failed_at_ms : rec->timestamp_ms;
}

typedef struct {
    int64_t now_ms;
    size_t count;
} wr_list_t;

static int list_cb(void *ctx, const wr_dlt_record_t *rec)
{
    wr_list_t *l = ctx;
    wr_subject_t s;
    char age[16], offset[32];

    subject_of(rec, &s);
    if (rec->partition == 0)
        snprintf(offset, sizeof(offset), "%lld", (long long)rec->offset);
    else
        snprintf(offset, sizeof(offset), "%d:%lld", (int)rec->partition, (long long)rec->offset);
    printf("%-8s %-20s %-24s %-17s %-16s %-6s %s%.70s\n", offset, s.code, s.order_id, s.type,
           rec->info.error_class[0] ? rec->info.error_class : "-",
           wr_dlt_format_age(l->now_ms - failed_at(rec), age, sizeof(age)),
           rec->info.truncated_from >= 0 ? "[not whole] " : "", rec->info.error_message);
    l->count++;
    return 0;
}

static int cmd_list(const wr_config_t *cfg)
{
    wr_list_t l = {vc_time_now_ms(), 0};
    char err[256];
    int rc;

    printf("%-8s %-20s %-24s %-17s %-16s %-6s %s\n", "OFFSET", "CODE", "ORDER_ID", "TYPE",
           "ERROR_CLASS", "AGE", "MESSAGE");
    rc = wr_kafka_dlt_scan(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic, list_cb, &l, err,
                           sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "voucher-writer: dlt list: %s\n", err);
        return 1;
    }
    fprintf(stderr, "%zu dead letters in %s\n", l.count, cfg->dlt_topic);
    return 0;
}

typedef struct {
    int32_t partition;
    int64_t offset;
    int found;
} wr_show_t;

static int show_cb(void *ctx, const wr_dlt_record_t *rec)
{
    wr_show_t *s = ctx;
    char ts[40];

    if (rec->partition != s->partition || rec->offset != s->offset)
        return 0;
    s->found = 1;
    printf("partition:  %d\noffset:     %lld\n", (int)rec->partition, (long long)rec->offset);
    if (rec->timestamp_ms >= 0 && vc_time_format_ms(rec->timestamp_ms, ts, sizeof(ts)))
        printf("timestamp:  %s\n", ts);
    printf("key:        %.*s\n", (int)rec->key_len, rec->key ? (const char *)rec->key : "");
    printf("headers:\n");
    {
        wr_header_t h[WR_DLT_MAX_HEADERS];
        size_t n = wr_dlt_headers(&rec->info, h);
        for (size_t i = 0; i < n; i++)
            printf("  %-24s %s\n", h[i].name, h[i].value);
    }
    if (rec->info.truncated_from >= 0)
        printf("value:      the first %zu of %lld bytes; the original is %s/%d/%lld while "
               "that topic keeps it\n",
               rec->len, (long long)rec->info.truncated_from, rec->info.topic,
               (int)rec->info.partition, (long long)rec->info.offset);
    printf("value:\n%.*s\n", (int)rec->len, rec->value ? (const char *)rec->value : "");
    return 1; /* found: stop reading */
}

static int cmd_show(const wr_config_t *cfg, const char *arg)
{
    wr_show_t s = {0, -1, 0};
    char err[256], *end;
    const char *colon = strchr(arg, ':');
    int rc;

    if (colon) {
        s.partition = (int32_t)strtol(arg, &end, 10);
        if (end != colon)
            goto usage;
        arg = colon + 1;
    }
    s.offset = strtoll(arg, &end, 10);
    if (*arg == '\0' || *end || s.offset < 0)
        goto usage;
    rc = wr_kafka_dlt_scan(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic, show_cb, &s, err,
                           sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "voucher-writer: dlt show: %s\n", err);
        return 1;
    }
    if (!s.found) {
        fprintf(stderr, "voucher-writer: dlt show: no dead letter at %d:%lld in %s\n",
                (int)s.partition, (long long)s.offset, cfg->dlt_topic);
        return 1;
    }
    return 0;
usage:
    fprintf(stderr, "voucher-writer: dlt show: OFFSET (or PARTITION:OFFSET) expected, got \"%s\"\n",
            arg);
    return 2;
}

typedef struct {
    const wr_config_t *cfg;
    const wr_dlt_filter_t *filter;
    wr_replayer_t *replayer;
    atomic_int *stop;
    size_t selected, sent, skipped;
    char err[256];
} wr_replay_t;

static int replay_cb(void *ctx, const wr_dlt_record_t *rec)
{
    wr_replay_t *r = ctx;
    wr_subject_t s;
    char from[160];

    if (*r->stop)
        return VC_ERR_SHUTDOWN;
    if (!wr_dlt_filter_match(r->filter, rec->partition, rec->offset, rec->info.error_class))
        return 0;
    r->selected++;
    subject_of(rec, &s);
    if (rec->info.truncated_from >= 0) {
        /* Replaying a part would dead-letter it again, as malformed, or worse. */
        fprintf(stderr,
                "not replaying %s/%d/%lld: it holds %zu of the original's %lld bytes; the "
                "original is %s/%d/%lld\n",
                r->cfg->dlt_topic, (int)rec->partition, (long long)rec->offset, rec->len,
                (long long)rec->info.truncated_from, rec->info.topic, (int)rec->info.partition,
                (long long)rec->info.offset);
        r->skipped++;
        return 0;
    }
    if (r->filter->dry_run) {
        if (rec->partition == 0)
            printf("would replay %lld  %s %s %s (%s)\n", (long long)rec->offset, s.code,
                   s.order_id, s.type, rec->info.error_class[0] ? rec->info.error_class : "-");
        else
            printf("would replay %d:%lld  %s %s %s (%s)\n", (int)rec->partition,
                   (long long)rec->offset, s.code, s.order_id, s.type,
                   rec->info.error_class[0] ? rec->info.error_class : "-");
        return 0;
    }
    snprintf(from, sizeof(from), "%s/%d/%lld", r->cfg->dlt_topic, (int)rec->partition,
             (long long)rec->offset);
    if (wr_replayer_send(r->replayer, r->cfg->topic, rec, from, r->err, sizeof(r->err)) != 0)
        return VC_ERR_UNAVAILABLE;
    r->sent++;
    if (r->sent % 100 == 0)
        fprintf(stderr, "replayed %zu...\n", r->sent);
    return 0;
}

static int cmd_replay(const wr_config_t *cfg, int argc, char **argv, atomic_int *stop)
{
    wr_dlt_filter_t filter;
    wr_replay_t r;
    char err[256];
    size_t delivered = 0;
    int rc, status = 0, npartitions = 0;

    if (wr_dlt_filter_parse(argc, argv, &filter, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
        return 2;
    }
    if (filter.from >= 0 || filter.to >= 0) {
        if ((rc = wr_kafka_topic_partitions(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic,
                                            &npartitions, err, sizeof(err))) != 0) {
            fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
            return 1;
        }
        if (wr_dlt_filter_resolve(&filter, npartitions, err, sizeof(err)) != 0) {
            fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
            return 2;
        }
    }
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.filter = &filter;
    r.stop = stop;
    if (!filter.dry_run &&
        wr_replayer_open(&r.replayer, cfg->brokers, cfg->kafka_extra, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
        return 1;
    }
    rc = wr_kafka_dlt_scan(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic, replay_cb, &r, err,
                           sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n",
                rc == VC_ERR_SHUTDOWN                  ? "interrupted"
                : rc == VC_ERR_UNAVAILABLE && r.err[0] ? r.err
                                                       : err);
        status = 1;
    }
    if (r.skipped > 0) {
        fprintf(stderr, "%zu selected dead letters not whole: not replayed\n", r.skipped);
        status = 1;
    }
    if (filter.dry_run) {
        fprintf(stderr, "%zu dead letters would be replayed to %s\n", r.selected - r.skipped,
                cfg->topic);
        return status;
    }
    if (wr_replayer_close(r.replayer, &delivered, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
        status = 1;
    }
    fprintf(stderr, "replayed %zu of %zu selected dead letters to %s\n", delivered, r.selected,
            cfg->topic);
    return status;
}

int wr_cli_dlt(const wr_config_t *cfg, int argc, char **argv, atomic_int *stop)
{
    if (argc >= 1 && strcmp(argv[0], "list") == 0 && argc == 1)
        return cmd_list(cfg);
    if (argc == 2 && strcmp(argv[0], "show") == 0)
        return cmd_show(cfg, argv[1]);
    if (argc >= 1 && strcmp(argv[0], "replay") == 0)
        return cmd_replay(cfg, argc - 1, argv + 1, stop);
    fprintf(stderr,
            "usage: voucher-writer dlt list\n"
            "       voucher-writer dlt show [PARTITION:]OFFSET\n"
            "       voucher-writer dlt replay [[--partition P] --from N --to N | --error-class C"
            " | --all] [--dry-run]\n"
            "  --from/--to are offsets of one partition of the dead-letter topic: --partition P\n"
            "  says which, and is required when the topic has more than one (dlt list shows\n"
            "  P:OFFSET for partitions other than 0).\n");
    return 2;
}
