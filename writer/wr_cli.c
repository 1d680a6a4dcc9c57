#include "wr_cli.h"
#include "wr_dlt.h"
#include "wr_kafka.h"
#include "wr_letters.h"

#include "vc_error.h"
#include "vc_event.h"
#include "vc_log.h"
#include "vc_time.h"

#include "vc_fault.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/*
 * The register's letter for a record of the topic: found by the event it
 * holds (topic, partition, offset of the original). Returns 1 with *out set,
 * 0 when the register has none, or a negative error.
 */
static int letter_of(wr_letters_t *letters, const wr_dlt_record_t *rec, wr_letter_t *out,
                     char *err, size_t errlen)
{
    if (!rec->info.topic[0] || rec->info.partition < 0 || rec->info.offset < 0)
        return 0;
    return wr_letters_find(letters, rec->info.topic, rec->info.partition, rec->info.offset, out,
                           err, errlen);
}

typedef struct {
    int64_t now_ms;
    const wr_dlt_list_t *select;
    wr_letters_t *letters;
    size_t count;
    char err[256];
} wr_list_t;

static int list_cb(void *ctx, const wr_dlt_record_t *rec)
{
    wr_list_t *l = ctx;
    wr_subject_t s;
    wr_letter_t letter;
    char age[16], offset[32];
    int found;

    subject_of(rec, &s);
    if ((found = letter_of(l->letters, rec, &letter, l->err, sizeof(l->err))) < 0)
        return found;
    if (!wr_dlt_list_match(l->select, rec->partition, failed_at(rec), s.code, s.order_id,
                           found ? letter.state : "unrecorded"))
        return 0;
    if (rec->partition == 0)
        snprintf(offset, sizeof(offset), "%lld", (long long)rec->offset);
    else
        snprintf(offset, sizeof(offset), "%d:%lld", (int)rec->partition, (long long)rec->offset);
    printf("%-8s %-20s %-24s %-17s %-16s %-6s %-10s %s", offset, s.code, s.order_id, s.type,
           rec->info.error_class[0] ? rec->info.error_class : "-",
           wr_dlt_format_age(l->now_ms - failed_at(rec), age, sizeof(age)),
           found ? letter.state : "unrecorded",
           rec->info.truncated_from >= 0 ? "[not whole] " : "");
    /*
     * The message whole, last on the line: the figure that explains a refusal
     * (a constraint's values, a limit) is often at its end. On one line.
     */
    for (const char *c = rec->info.error_message; *c; c++)
        putchar((unsigned char)*c < ' ' ? ' ' : *c);
    putchar('\n');
    l->count++;
    return 0;
}

static int cmd_list(const wr_config_t *cfg, int argc, char **argv)
{
    wr_dlt_list_t select;
    wr_list_t l = {vc_time_now_ms(), &select, NULL, 0, ""};
    char err[256];
    int rc;

    if (wr_dlt_list_parse(argc, argv, l.now_ms, &select, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt list: %s\n", err);
        return 2;
    }
    if (wr_letters_open(&l.letters, cfg->pg_dsn, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt list: PostgreSQL (the letters' states): %s\n", err);
        return 1;
    }
    printf("%-8s %-20s %-24s %-17s %-16s %-6s %-10s %s\n", "OFFSET", "CODE", "ORDER_ID", "TYPE",
           "ERROR_CLASS", "AGE", "STATE", "MESSAGE");
    rc = wr_kafka_dlt_scan(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic, list_cb, &l, err,
                           sizeof(err));
    wr_letters_close(l.letters);
    if (rc != 0) {
        fprintf(stderr, "voucher-writer: dlt list: %s\n", l.err[0] ? l.err : err);
        return 1;
    }
    fprintf(stderr, "%zu dead letters shown from %s\n", l.count, cfg->dlt_topic);
    return 0;
}

/* --operator, else $USER, else "unknown": who the audit names. */
static const char *operator_of(const char *given)
{
    const char *user = getenv("USER");

    if (given && *given)
        return given;
    return user && *user ? user : "unknown";
}

/* One JSON line per operator action (vc_log), besides its audit row. */
static void log_action(const char *action, const char *outcome, const char *operator_name,
                       const wr_letter_t *letter, const char *detail)
{
    char id[24], code[VC_LOG_CODE_MAX];
    /* The letter may be a campaign's: its code a one-time secret (the letter id finds it). */
    vc_log_field_t f[] = {{"action", action},
                          {"outcome", outcome},
                          {"operator", operator_name},
                          {"letter", id},
                          {"code", vc_log_code(letter->code, 1, code)},
                          {"orderId", letter->order_id},
                          {"deadLetter", letter->dlt_at}};

    snprintf(id, sizeof(id), "%lld", (long long)letter->id);
    VC_LOG_F(VC_LOG_INFO, f, "dlt %s: %s", action, detail);
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
    wr_letters_t *letters;
    const char *operator_name;
    atomic_int *stop;
    size_t selected, sent, skipped, noops;
    int64_t *sent_ids; /* the letters sent by this run, marked sent once delivered */
    wr_letter_t *sent_letters;
    size_t cap;
    char claim[128]; /* this run's name on the letters it claims: operator@host:pid */
    char err[256];
} wr_replay_t;

/*
 * Whether letter may be sent again; if not, says why on stdout and in the
 * audit (a no-op, or a refusal). lost: the letter as read after this run's
 * claim on it failed (wr_letters_replay_claim()), so a parked letter never
 * sent is another replay's. Returns 1 to send, 0 to skip, or an error.
 */
static int replay_allowed(wr_replay_t *r, const wr_letter_t *letter, int lost)
{
    char why[256];
    const char *outcome = "noop";

    if (strcmp(letter->state, "replayed") == 0) {
        snprintf(why, sizeof(why), "already replayed (applied at %s): nothing sent",
                 letter->settled_at);
    } else if (strcmp(letter->state, "discarded") == 0) {
        snprintf(why, sizeof(why), "discarded at %s: not replayed", letter->settled_at);
        outcome = "refused";
    } else if (strcmp(letter->state, "superseded") == 0) {
        snprintf(why, sizeof(why),
                 "replayed and dead-lettered again: replay the newer letter of order %s",
                 letter->order_id);
        outcome = "refused";
    } else if (letter->replay_sent_at[0]) {
        snprintf(why, sizeof(why),
                 "already sent for replay at %s, not applied yet: nothing sent (dlt list "
                 "shows replayed once the writer applied it)",
                 letter->replay_sent_at);
    } else if (lost) {
        snprintf(why, sizeof(why),
                 "being replayed by %s since %s: nothing sent (a claim older than %d minutes is "
                 "taken over)",
                 letter->replay_claim[0] ? letter->replay_claim : "another replay",
                 letter->replay_claimed_at, WR_REPLAY_CLAIM_TTL_S / 60);
    } else {
        for (size_t i = 0; i < r->sent; i++)
            if (r->sent_ids[i] == letter->id) {
                snprintf(why, sizeof(why), "another copy of this letter was just sent");
                goto noop;
            }
        return 1;
    }
noop:
    printf("letter %lld (%s, order %s): %s\n", (long long)letter->id, letter->dlt_at,
           letter->order_id, why);
    log_action("replay", outcome, r->operator_name, letter, why);
    r->noops++;
    if (wr_letters_audit(r->letters, letter->id, "replay", r->operator_name, outcome, why, r->err,
                         sizeof(r->err)) != 0)
        return VC_ERR_UNAVAILABLE;
    return 0;
}

/* This run's name on its claims: the operator, the host and the process. */
static void claim_name(const char *operator_name, char *out, size_t cap)
{
    char host[64];

    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "unknown-host");
    host[sizeof(host) - 1] = '\0';
    snprintf(out, cap, "%s@%s:%ld", operator_name, host, (long)getpid());
}

static int replay_cb(void *ctx, const wr_dlt_record_t *rec)
{
    wr_replay_t *r = ctx;
    wr_subject_t s;
    wr_letter_t letter;
    int rc;

    if (*r->stop)
        return VC_ERR_SHUTDOWN;
    subject_of(rec, &s);
    if (!wr_dlt_filter_match(r->filter, rec->partition, rec->offset, rec->info.error_class,
                             s.order_id))
        return 0;
    r->selected++;
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
    /* A letter the register lacks (from before it, or a crash) is parked first. */
    if ((rc = letter_of(r->letters, rec, &letter, r->err, sizeof(r->err))) < 0)
        return rc;
    if (rc == 0) {
        wr_letter_new_t n = {s.code,          strcmp(s.order_id, "-") ? s.order_id : "",
                             strcmp(s.type, "-") ? s.type : "",
                             r->cfg->dlt_topic, rec->partition, rec->offset,
                             rec->info.topic,   rec->info.partition, rec->info.offset,
                             rec->info.error_class[0] ? rec->info.error_class : WR_DLT_REJECTED,
                             rec->info.error_message};
        if (!rec->info.topic[0] || rec->info.partition < 0 || rec->info.offset < 0) {
            fprintf(stderr, "not replaying %s/%d/%lld: its headers do not say where it came "
                            "from\n",
                    r->cfg->dlt_topic, (int)rec->partition, (long long)rec->offset);
            r->skipped++;
            return 0;
        }
        if ((rc = wr_letters_park(r->letters, &n, &letter, r->err, sizeof(r->err))) != 0)
            return rc;
    }
    if ((rc = replay_allowed(r, &letter, 0)) <= 0)
        return rc;
    /*
     * Claimed before it is sent, by one UPDATE only one replay wins: two
     * replays of the letter at the same moment send it once.
     */
    if ((rc = wr_letters_replay_claim(r->letters, letter.id, r->claim, &letter, r->err,
                                      sizeof(r->err))) < 0)
        return rc;
    if (rc == 0)
        return replay_allowed(r, &letter, 1) < 0 ? VC_ERR_UNAVAILABLE : 0;
    VC_PAUSE("dlt-replay-before-send"); /* claimed, not yet sent */
    if (r->sent == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        int64_t *ids = realloc(r->sent_ids, cap * sizeof(*ids));
        wr_letter_t *ls;
        if (ids)
            r->sent_ids = ids;
        ls = ids ? realloc(r->sent_letters, cap * sizeof(*ls)) : NULL;
        if (!ids || !ls) {
            snprintf(r->err, sizeof(r->err), "out of memory");
            return VC_ERR_NOMEM;
        }
        r->sent_letters = ls;
        r->cap = cap;
    }
    /* The header names the recorded copy: applying the event settles that letter. */
    if (wr_replayer_send(r->replayer, r->cfg->topic, rec, letter.dlt_at, r->err,
                         sizeof(r->err)) != 0)
        return VC_ERR_UNAVAILABLE;
    r->sent_ids[r->sent] = letter.id;
    r->sent_letters[r->sent] = letter;
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
    r.operator_name = operator_of(filter.operator_name);
    claim_name(r.operator_name, r.claim, sizeof(r.claim));
    if (!filter.dry_run &&
        wr_letters_open(&r.letters, cfg->pg_dsn, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: PostgreSQL (the letters' states): %s\n", err);
        return 1;
    }
    if (!filter.dry_run &&
        wr_replayer_open(&r.replayer, cfg->brokers, cfg->kafka_extra, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n", err);
        wr_letters_close(r.letters);
        return 1;
    }
    rc = wr_kafka_dlt_scan(cfg->brokers, cfg->kafka_extra, cfg->dlt_topic, replay_cb, &r, err,
                           sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "voucher-writer: dlt replay: %s\n",
                rc == VC_ERR_SHUTDOWN ? "interrupted"
                : r.err[0]            ? r.err
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
    /*
     * Kafka did not acknowledge them all: which it has is unknown, so none is
     * recorded as sent and every claim is given back; a replay may send them
     * again (the writer applies an event once however often it comes).
     */
    for (size_t i = 0; i < r.sent && delivered != r.sent; i++)
        if (wr_letters_replay_unclaim(r.letters, r.sent_ids[i], r.claim, err, sizeof(err)) != 0)
            fprintf(stderr, "voucher-writer: dlt replay: giving back the claim on letter %lld: %s "
                            "(it lapses after %d minutes)\n",
                    (long long)r.sent_ids[i], err, WR_REPLAY_CLAIM_TTL_S / 60);
    /* Only once Kafka has them all: a letter marked sent is never sent again. */
    for (size_t i = 0; i < r.sent && delivered == r.sent; i++) {
        wr_letter_t *letter = &r.sent_letters[i];
        if (wr_letters_replay_sent(r.letters, letter->id, r.operator_name, err, sizeof(err)) != 0) {
            fprintf(stderr, "voucher-writer: dlt replay: recording the replay of letter %lld: %s\n",
                    (long long)letter->id, err);
            status = 1;
        }
        printf("letter %lld (%s, order %s): sent to %s\n", (long long)letter->id, letter->dlt_at,
               letter->order_id, cfg->topic);
        log_action("replay", "sent", r.operator_name, letter, "sent to the main topic");
    }
    fprintf(stderr, "replayed %zu of %zu selected dead letters to %s", delivered, r.selected,
            cfg->topic);
    if (r.noops)
        fprintf(stderr, " (%zu not sent: already replayed, sent, discarded or superseded)",
                r.noops);
    fprintf(stderr, "\n");
    wr_letters_close(r.letters);
    free(r.sent_ids);
    free(r.sent_letters);
    return status;
}

/*
 * `dlt discard`: the letters are marked discarded in the register, with the
 * audit; the reconciler then gives the order's use back (VoucherReleased with
 * reason DISCARDED, then release_finish.lua) in its next pass. The command
 * needs no Redis and publishes nothing itself: the two-phase release stays
 * in the one place that already does it (proto/redemption-states.md).
 */
/* What a discard did to letter (as it is after the discard), in words. */
static void discard_why(const wr_letter_t *letter, int changed, char *why, size_t cap)
{
    if (changed && !letter->order_id[0])
        snprintf(why, cap, "discarded: it names no order, so there is no use to give back");
    else if (changed)
        snprintf(why, cap, "discarded: the reconciler gives the order's use back (reason "
                           "DISCARDED) in its next pass");
    else if (strcmp(letter->state, "parked") != 0)
        snprintf(why, cap, "%s, not parked: nothing to discard", letter->state);
    else if (letter->replay_sent_at[0])
        snprintf(why, cap, "sent for replay at %s: not discarded (wait until the writer applies "
                           "it, or dead-letters it again)",
                 letter->replay_sent_at);
    else
        snprintf(why, cap, "being replayed by %s since %s: not discarded (wait until the writer "
                           "applies it, or the claim lapses after %d minutes)",
                 letter->replay_claim[0] ? letter->replay_claim : "another replay",
                 letter->replay_claimed_at, WR_REPLAY_CLAIM_TTL_S / 60);
}

static int cmd_discard(const wr_config_t *cfg, int argc, char **argv)
{
    const char *order_id = NULL, *operator_name = NULL, *at = NULL;
    wr_letters_t *letters = NULL;
    wr_letter_t found[32];
    char err[256];
    int n, status = 0;

    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "--order") == 0 || strcmp(argv[i], "--operator") == 0) &&
            i + 1 < argc && argv[i + 1][0]) {
            const char **target = strcmp(argv[i], "--order") == 0 ? &order_id : &operator_name;
            *target = argv[i + 1];
            i++;
        } else if (argv[i][0] != '-' && !at) {
            at = argv[i];
        } else {
            fprintf(stderr, "voucher-writer: dlt discard: unexpected \"%s\" (usage: dlt discard "
                            "[PARTITION:]OFFSET | --order ID  [--operator NAME])\n",
                    argv[i]);
            return 2;
        }
    }
    if (!order_id == !at) {
        fprintf(stderr, "voucher-writer: dlt discard: name one letter ([PARTITION:]OFFSET) or "
                        "one order (--order ID)\n");
        return 2;
    }
    operator_name = operator_of(operator_name);
    if (wr_letters_open(&letters, cfg->pg_dsn, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: dlt discard: PostgreSQL: %s\n", err);
        return 1;
    }
    if (order_id) {
        n = wr_letters_of_order(letters, order_id, found, sizeof(found) / sizeof(found[0]), err,
                                sizeof(err));
    } else {
        int32_t partition = 0;
        int64_t offset;
        const char *colon = strchr(at, ':');
        char *end;
        if (colon) {
            partition = (int32_t)strtol(at, &end, 10);
            if (end != colon || partition < 0) {
                fprintf(stderr, "voucher-writer: dlt discard: [PARTITION:]OFFSET expected, "
                                "got \"%s\"\n", at);
                wr_letters_close(letters);
                return 2;
            }
        }
        offset = strtoll(colon ? colon + 1 : at, &end, 10);
        if (*end || end == (colon ? colon + 1 : at) || offset < 0) {
            fprintf(stderr, "voucher-writer: dlt discard: [PARTITION:]OFFSET expected, got \"%s\"\n",
                    at);
            wr_letters_close(letters);
            return 2;
        }
        n = wr_letters_at(letters, cfg->dlt_topic, partition, offset, found, err, sizeof(err));
    }
    if (n < 0) {
        fprintf(stderr, "voucher-writer: dlt discard: %s\n", err);
        wr_letters_close(letters);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "voucher-writer: dlt discard: no letter %s %s in the register (dlt list "
                        "shows the letters and their states)\n",
                order_id ? "of order" : "at", order_id ? order_id : at);
        wr_letters_close(letters);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        wr_letter_t *letter = &found[i];
        int changed = 0;
        char why[200];

        if (wr_letters_discard(letters, letter->id, operator_name, &changed, err, sizeof(err)) != 0) {
            fprintf(stderr, "voucher-writer: dlt discard: letter %lld: %s\n",
                    (long long)letter->id, err);
            status = 1;
            continue;
        }
        /* Not discarded: the letter as it is now says why (a replay may have come first). */
        if (!changed && wr_letters_get(letters, letter->id, letter, err, sizeof(err)) < 0) {
            fprintf(stderr, "voucher-writer: dlt discard: letter %lld: %s\n",
                    (long long)letter->id, err);
            status = 1;
            continue;
        }
        discard_why(letter, changed, why, sizeof(why));
        if (letter->order_id[0])
            printf("letter %lld (%s, order %s, %s): %s\n", (long long)letter->id,
                   letter->dlt_at[0] ? letter->dlt_at : "not stored", letter->order_id,
                   letter->event_type[0] ? letter->event_type : "unknown event", why);
        else
            printf("letter %lld (%s, unreadable: no order): %s\n", (long long)letter->id,
                   letter->dlt_at[0] ? letter->dlt_at : "not stored", why);
        log_action("discard", changed ? "discarded" : "noop", operator_name, letter, why);
    }
    wr_letters_close(letters);
    return status;
}

int wr_cli_dlt(const wr_config_t *cfg, int argc, char **argv, atomic_int *stop)
{
    if (argc >= 1 && strcmp(argv[0], "list") == 0)
        return cmd_list(cfg, argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "discard") == 0)
        return cmd_discard(cfg, argc - 1, argv + 1);
    if (argc == 2 && strcmp(argv[0], "show") == 0)
        return cmd_show(cfg, argv[1]);
    if (argc >= 1 && strcmp(argv[0], "replay") == 0)
        return cmd_replay(cfg, argc - 1, argv + 1, stop);
    fprintf(stderr,
            "usage: voucher-writer dlt list [--code C] [--order ID] [--partition P] [--since WHEN]"
            " [--state S]\n"
            "       voucher-writer dlt show [PARTITION:]OFFSET\n"
            "       voucher-writer dlt replay [[--partition P] --from N --to N | --order ID |"
            " --error-class C | --all] [--dry-run] [--operator NAME]\n"
            "       voucher-writer dlt discard [PARTITION:]OFFSET | --order ID  [--operator NAME]\n"
            "  --from/--to are offsets of one partition of the dead-letter topic: --partition P\n"
            "  says which, and is required when the topic has more than one (dlt list shows\n"
            "  P:OFFSET for partitions other than 0).\n");
    return 2;
}
