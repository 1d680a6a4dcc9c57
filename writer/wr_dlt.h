/*
 * The dead-letter topic's contract: which error classes an event can be
 * dead-lettered with, and the headers that travel with it so an operator can
 * tell where it came from and why it failed. Pure: the Kafka adapter turns
 * wr_header_t into librdkafka headers.
 */
#ifndef WR_DLT_H
#define WR_DLT_H

#include <stddef.h>
#include <stdint.h>

/* Error classes (the dlt-error-class header). */
#define WR_DLT_MALFORMED "malformed"             /* not a valid v1 event: JSON, field, version */
#define WR_DLT_UNKNOWN_VOUCHER "unknown-voucher" /* no such voucher code (SQLSTATE 23503) */
#define WR_DLT_CONSTRAINT "constraint"           /* a CHECK or other constraint (23xxx) */
#define WR_DLT_CONFLICT "order-conflict"         /* the orderId belongs to another voucher */
#define WR_DLT_REJECTED "rejected"               /* any other permanent database error */
/* A direct voucher's event that its row does not bear out (proto/direct-mode.md) */
#define WR_DLT_DIRECT_MISMATCH "direct-mismatch"

/* Header names. Values are UTF-8 text. */
#define WR_HDR_TOPIC "dlt-original-topic"
#define WR_HDR_PARTITION "dlt-original-partition"
#define WR_HDR_OFFSET "dlt-original-offset"
#define WR_HDR_TIMESTAMP "dlt-original-timestamp" /* RFC 3339, empty when unknown */
#define WR_HDR_GROUP "dlt-consumer-group"
#define WR_HDR_CLASS "dlt-error-class"
#define WR_HDR_MESSAGE "dlt-error-message"
#define WR_HDR_FAILED_AT "dlt-failed-at" /* RFC 3339 */
/*
 * Only on a dead letter that could not be stored whole (wr_dlt_form_t): the
 * original value's size in bytes. Its topic, partition and offset headers
 * then say where the whole original is, while the main topic keeps it.
 */
#define WR_HDR_TRUNCATED "dlt-truncated"
/* Set on events `voucher-writer dlt replay` puts back on the main topic. */
#define WR_HDR_REPLAYED_FROM "dlt-replayed-from" /* "voucher-events.dlt/PARTITION/OFFSET" */

#define WR_DLT_NHEADERS 8     /* on every dead letter */
#define WR_DLT_MAX_HEADERS 9  /* with dlt-truncated */
#define WR_HDR_VALUE_MAX 320

/*
 * How much of the original a dead letter holds. The writer tries each form
 * in turn while the broker refuses the message itself (too large, invalid
 * record), so that one event the dead-letter topic cannot take never stops
 * the writer: a bad message near the size limit of the main topic becomes
 * too large once the headers are added.
 */
typedef enum {
    WR_DLT_WHOLE = 0,  /* key and value byte for byte */
    WR_DLT_TRUNCATED,  /* key cut to WR_DLT_KEEP_KEY, value to WR_DLT_KEEP_VALUE bytes */
    WR_DLT_REFERENCE,  /* key cut as above, value empty: the headers point at the original */
    WR_DLT_LOST        /* even the reference was refused: only the writer's log has it */
} wr_dlt_form_t;

#define WR_DLT_KEEP_KEY 256
#define WR_DLT_KEEP_VALUE 4096

/* The form's name, for logs: "whole", "truncated", "reference", "lost". */
const char *wr_dlt_form_name(wr_dlt_form_t form);

/*
 * How many bytes of an original of len bytes the form keeps (the key with
 * keep_key = 1, the value otherwise).
 */
size_t wr_dlt_form_keep(wr_dlt_form_t form, size_t len, int keep_key);

/* Where a dead-lettered event came from and why it failed. */
typedef struct {
    char topic[128];
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* -1 when unknown */
    char group[128];
    char error_class[32];
    char error_message[WR_HDR_VALUE_MAX];
    int64_t failed_at_ms;
    int64_t truncated_from; /* dlt-truncated: the original value's size; -1 when stored whole */
} wr_dlt_info_t;

typedef struct {
    const char *name; /* one of WR_HDR_* (static) */
    char value[WR_HDR_VALUE_MAX];
} wr_header_t;

/*
 * Writes the WR_DLT_NHEADERS headers describing info into out, in a fixed
 * order, and dlt-truncated after them when info->truncated_from >= 0. Long
 * texts are cut to fit. Returns the number written.
 */
size_t wr_dlt_headers(const wr_dlt_info_t *info, wr_header_t out[WR_DLT_MAX_HEADERS]);

/*
 * Fills one field of info from a header read back from the topic (value is
 * len bytes, not NUL-terminated). Unknown names are ignored. Call
 * wr_dlt_info_clear() first. Returns 0, or VC_ERR_INVALID for a malformed
 * number or time.
 */
void wr_dlt_info_clear(wr_dlt_info_t *info);
int wr_dlt_info_set(wr_dlt_info_t *info, const char *name, const void *value, size_t len);

/* Whether class is one of the WR_DLT_* classes. */
int wr_dlt_class_valid(const char *cls);

/* Which dead letters `dlt replay` takes. */
typedef struct {
    int all;                 /* --all */
    int64_t from, to;        /* --from N --to N, inclusive; -1 when not given */
    int32_t partition;       /* --partition P: the DLT partition --from/--to count in; -1 when not given */
    const char *error_class; /* --error-class C (borrowed from argv), or NULL */
    const char *order_id;    /* --order ID (borrowed from argv), or NULL */
    const char *operator_name; /* --operator NAME (borrowed), or NULL: $USER */
    int dry_run;             /* --dry-run */
} wr_dlt_filter_t;

/*
 * Parses the arguments of `dlt replay`. At least one of --all, --from/--to,
 * --order or --error-class is required, so that nothing is replayed by accident;
 * --all goes with no other selector; --partition only goes with --from or
 * --to (an offset means nothing without its partition). Returns 0, or
 * VC_ERR_INVALID with err set.
 */
int wr_dlt_filter_parse(int argc, char **argv, wr_dlt_filter_t *f, char *err, size_t errlen);

/*
 * Checks f against the dead-letter topic, which has npartitions partitions:
 * an offset range needs --partition when there are more than one (offsets
 * of different partitions are unrelated, so a range alone would pick
 * unrelated dead letters from each), and --partition must exist. Fills in
 * partition 0 for a range on a one-partition topic. Returns 0, or
 * VC_ERR_INVALID with err set.
 */
int wr_dlt_filter_resolve(wr_dlt_filter_t *f, int npartitions, char *err, size_t errlen);

/*
 * Whether the dead letter at partition/offset with error_class, about
 * order_id ("-" or "" when unknown), is selected by f.
 */
int wr_dlt_filter_match(const wr_dlt_filter_t *f, int32_t partition, int64_t offset,
                        const char *error_class, const char *order_id);

/* Which dead letters `dlt list` shows: every one when nothing is given. */
typedef struct {
    const char *code;     /* --code C (borrowed from argv), or NULL */
    const char *order_id; /* --order ID, or NULL */
    const char *state;    /* --state S: parked, replayed, discarded, superseded, unrecorded */
    int32_t partition;    /* --partition P of the dead-letter topic; -1: all */
    int64_t since_ms;     /* --since: dead-lettered at or after; -1: any time */
} wr_dlt_list_t;

/*
 * Parses the arguments of `dlt list`: --code C, --order ID, --partition P,
 * --since WHEN (an RFC 3339 time, or an age such as 90s, 15m, 2h, 3d before
 * now_ms) and --state S. Returns 0, or VC_ERR_INVALID with err set. Pure.
 */
int wr_dlt_list_parse(int argc, char **argv, int64_t now_ms, wr_dlt_list_t *l, char *err,
                      size_t errlen);

/*
 * Whether a dead letter is shown by l: in DLT partition partition,
 * dead-lettered at failed_at_ms, about code and order_id, whose letter is in
 * state (as the register has it, "unrecorded" when it has none). Pure.
 */
int wr_dlt_list_match(const wr_dlt_list_t *l, int32_t partition, int64_t failed_at_ms,
                      const char *code, const char *order_id, const char *state);

/*
 * Writes a short age for ms milliseconds ("42s", "17m", "5h", "3d"; "-" when
 * negative) into buf. Returns buf.
 */
const char *wr_dlt_format_age(int64_t ms, char *buf, size_t cap);

#endif
