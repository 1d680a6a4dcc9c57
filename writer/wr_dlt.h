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

/* Header names. Values are UTF-8 text. */
#define WR_HDR_TOPIC "dlt-original-topic"
#define WR_HDR_PARTITION "dlt-original-partition"
#define WR_HDR_OFFSET "dlt-original-offset"
#define WR_HDR_TIMESTAMP "dlt-original-timestamp" /* RFC 3339, empty when unknown */
#define WR_HDR_GROUP "dlt-consumer-group"
#define WR_HDR_CLASS "dlt-error-class"
#define WR_HDR_MESSAGE "dlt-error-message"
#define WR_HDR_FAILED_AT "dlt-failed-at" /* RFC 3339 */
/* Set on events `voucher-writer dlt replay` puts back on the main topic. */
#define WR_HDR_REPLAYED_FROM "dlt-replayed-from" /* "voucher-events.dlt/PARTITION/OFFSET" */

#define WR_DLT_NHEADERS 8
#define WR_HDR_VALUE_MAX 320

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
} wr_dlt_info_t;

typedef struct {
    const char *name; /* one of WR_HDR_* (static) */
    char value[WR_HDR_VALUE_MAX];
} wr_header_t;

/*
 * Writes the WR_DLT_NHEADERS headers describing info into out, in a fixed
 * order. Long texts are cut to fit. Returns the number written.
 */
size_t wr_dlt_headers(const wr_dlt_info_t *info, wr_header_t out[WR_DLT_NHEADERS]);

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
    const char *error_class; /* --error-class C (borrowed from argv), or NULL */
    int dry_run;             /* --dry-run */
} wr_dlt_filter_t;

/*
 * Parses the arguments of `dlt replay`. At least one of --all, --from/--to
 * or --error-class is required, so that nothing is replayed by accident;
 * --all goes with no other selector. Returns 0, or VC_ERR_INVALID with err
 * set.
 */
int wr_dlt_filter_parse(int argc, char **argv, wr_dlt_filter_t *f, char *err, size_t errlen);

/* Whether the dead letter at offset with error_class is selected by f. */
int wr_dlt_filter_match(const wr_dlt_filter_t *f, int64_t offset, const char *error_class);

/*
 * Writes a short age for ms milliseconds ("42s", "17m", "5h", "3d"; "-" when
 * negative) into buf. Returns buf.
 */
const char *wr_dlt_format_age(int64_t ms, char *buf, size_t cap);

#endif
