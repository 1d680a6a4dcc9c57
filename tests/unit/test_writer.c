/*
 * Unit tests for writer/: the message queue,
 * poison isolation by bisection, dead-letter headers. No server needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "wr_batch.h"
#include "wr_dlt.h"
#include "wr_pg.h"
#include "wr_state.h"

/* ------------------------------------------------------------ queue */

static int released;

static void count_release(void *handle)
{
    (void)handle;
    released++;
}

static void push(wr_queue_t *q, int32_t partition, int64_t offset)
{
    wr_msg_t *m = wr_queue_push(q);
    ck_assert_ptr_nonnull(m);
    m->partition = partition;
    m->offset = offset;
    m->handle = &released; /* any non-NULL handle */
}

START_TEST(queue_fifo_and_positions)
{
    wr_queue_t q;
    wr_position_t pos[4];
    int n;

    released = 0;
    wr_queue_init(&q, count_release);
    push(&q, 0, 10);
    push(&q, 3, 7);
    push(&q, 0, 11);
    push(&q, 3, 8);
    push(&q, 5, 1);
    n = wr_queue_positions(&q, 4, pos, 4);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(pos[0].partition, 0);
    ck_assert_int_eq(pos[0].next_offset, 12);
    ck_assert_int_eq(pos[1].partition, 3);
    ck_assert_int_eq(pos[1].next_offset, 9);
    ck_assert_int_eq(wr_queue_positions(&q, 5, pos, 2), VC_ERR_TOO_LARGE);

    wr_queue_drop_front(&q, 3);
    ck_assert_int_eq(released, 3);
    ck_assert_uint_eq(q.len, 2);
    ck_assert_int_eq(wr_queue_at(&q, 0)->offset, 8);
    wr_queue_free(&q);
    ck_assert_int_eq(released, 5);
}
END_TEST

START_TEST(queue_grows_keeping_order)
{
    wr_queue_t q;

    released = 0;
    wr_queue_init(&q, count_release);
    for (int i = 0; i < 1000; i++) {
        push(&q, i % 12, i);
        if (i % 7 == 6)
            wr_queue_drop_front(&q, 3);
    }
    for (size_t i = 1; i < q.len; i++)
        ck_assert_int_lt(wr_queue_at(&q, i - 1)->offset, wr_queue_at(&q, i)->offset);
    ck_assert_uint_eq(q.len + (size_t)released, 1000);
    wr_queue_free(&q);
    ck_assert_int_eq(released, 1000);
}
END_TEST

static int odd_partition(void *ctx, int32_t partition)
{
    (void)ctx;
    return partition % 2 == 1;
}

START_TEST(queue_drop_revoked_partitions)
{
    wr_queue_t q;
    const int64_t want[] = {1, 3, 5};

    released = 0;
    wr_queue_init(&q, count_release);
    for (int i = 0; i < 6; i++)
        push(&q, i % 2 ? 1 : 2, i + 1);
    wr_queue_drop_front(&q, 0);
    ck_assert_uint_eq(wr_queue_drop_partitions(&q, odd_partition, NULL), 3);
    ck_assert_int_eq(released, 3);
    ck_assert_uint_eq(q.len, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(wr_queue_at(&q, i)->offset, want[i]);
    wr_queue_free(&q);
}
END_TEST

START_TEST(msg_decode_marks_malformed_poison)
{
    wr_msg_t m;
    const char *good =
        "{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A1\","
        "\"customerId\":7,\"orderId\":\"o-7\",\"confirmedAt\":\"2026-11-29T18:00:00Z\"}";

    memset(&m, 0, sizeof(m));
    m.payload = "{\"type\":\"VoucherConfirmed\",\"version\":3}";
    m.len = strlen(m.payload);
    ck_assert_int_eq(wr_msg_decode(&m), VC_ERR_INVALID);
    ck_assert_int_eq(m.outcome, WR_OUT_POISON);
    ck_assert_str_eq(m.dlt_class, WR_DLT_MALFORMED);
    ck_assert_int_eq(m.decoded, 0);
    ck_assert(strlen(m.error) > 0);

    m.payload = NULL;
    m.len = 0;
    ck_assert_int_eq(wr_msg_decode(&m), VC_ERR_INVALID);

    m.payload = good;
    m.len = strlen(good);
    ck_assert_int_eq(wr_msg_decode(&m), 0);
    ck_assert_int_eq(m.decoded, 1);
    ck_assert_int_eq(m.ev.type, VC_EV_CONFIRMED);
    ck_assert_str_eq(m.ev.order_id, "o-7");
}
END_TEST

/* ------------------------------------------------------------ bisection */

#define BISECT_N 64

typedef struct {
    int bad[BISECT_N];     /* items that can never apply */
    int applied[BISECT_N]; /* applied count per item */
    int order[BISECT_N];   /* items in the order they were applied */
    size_t norder;
    int poisoned[BISECT_N];
    int tries;
    int fail_transient_at_try; /* 0: never */
} fake_db_t;

static int fake_try(void *ctx, size_t lo, size_t hi, char *err, size_t errlen)
{
    fake_db_t *db = ctx;

    db->tries++;
    if (db->fail_transient_at_try && db->tries == db->fail_transient_at_try)
        return VC_ERR_UNAVAILABLE;
    for (size_t i = lo; i < hi; i++)
        if (db->bad[i]) {
            snprintf(err, errlen, "23514: item %zu", i);
            return VC_ERR_INVALID; /* the whole range is undone */
        }
    for (size_t i = lo; i < hi; i++) {
        db->applied[i]++;
        db->order[db->norder++] = (int)i;
    }
    return 0;
}

static void fake_poison(void *ctx, size_t i, const char *err)
{
    fake_db_t *db = ctx;
    char want[32];

    snprintf(want, sizeof(want), "23514: item %zu", i);
    ck_assert_str_eq(err, want);
    db->poisoned[i]++;
}

static const struct {
    size_t n;
    int bad[6]; /* -1 terminated */
} bisect_cases[] = {
    {1, {-1}},
    {1, {0, -1}},
    {2, {1, -1}},
    {7, {0, 6, -1}},
    {64, {-1}},
    {64, {31, -1}},
    {64, {0, 1, 2, 63, -1}},
    {63, {10, 11, 40, -1}},
    {5, {0, 1, 2, 3, 4, -1}},
};

START_TEST(bisect_isolates_poison_and_keeps_order)
{
    size_t c = (size_t)_i, n = bisect_cases[c].n, nbad = 0;
    fake_db_t db;

    memset(&db, 0, sizeof(db));
    for (size_t j = 0; bisect_cases[c].bad[j] >= 0; j++, nbad++)
        db.bad[bisect_cases[c].bad[j]] = 1;
    ck_assert_int_eq(wr_bisect(n, fake_try, fake_poison, &db), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(db.applied[i], !db.bad[i]);
        ck_assert_int_eq(db.poisoned[i], db.bad[i]);
    }
    ck_assert_uint_eq(db.norder, n - nbad);
    for (size_t i = 1; i < db.norder; i++)
        ck_assert_int_lt(db.order[i - 1], db.order[i]);
    if (nbad == 0)
        ck_assert_int_eq(db.tries, 1);
    if (nbad == 1 && n == 64)
        ck_assert_int_le(db.tries, 2 * 6 + 1);
}
END_TEST

START_TEST(bisect_stops_on_transient_error)
{
    fake_db_t db;

    memset(&db, 0, sizeof(db));
    db.bad[3] = 1;
    db.fail_transient_at_try = 3;
    ck_assert_int_eq(wr_bisect(8, fake_try, fake_poison, &db), VC_ERR_UNAVAILABLE);
    ck_assert_int_eq(db.tries, 3);
    for (size_t i = 0; i < 8; i++)
        ck_assert_int_eq(db.poisoned[i], 0);
    ck_assert_int_eq(wr_bisect(0, fake_try, fake_poison, &db), 0);
}
END_TEST

/* ------------------------------------------------------------ dead letters */

START_TEST(dlt_headers_round_trip)
{
    wr_dlt_info_t in, out;
    wr_header_t h[WR_DLT_MAX_HEADERS];
    static const char *const names[] = {WR_HDR_TOPIC,     WR_HDR_PARTITION, WR_HDR_OFFSET,
                                        WR_HDR_TIMESTAMP, WR_HDR_GROUP,     WR_HDR_CLASS,
                                        WR_HDR_MESSAGE,   WR_HDR_FAILED_AT};

    wr_dlt_info_clear(&in);
    strcpy(in.topic, "voucher-events");
    in.partition = 7;
    in.offset = 123456789012;
    in.timestamp_ms = 1795975082123;
    strcpy(in.group, "voucher-writer");
    strcpy(in.error_class, WR_DLT_CONSTRAINT);
    strcpy(in.error_message, "23514: voucher A: order o-1 would raise used_count to 3");
    in.failed_at_ms = 1795975083000;

    ck_assert_uint_eq(wr_dlt_headers(&in, h), WR_DLT_NHEADERS);
    for (size_t i = 0; i < WR_DLT_NHEADERS; i++)
        ck_assert_str_eq(h[i].name, names[i]);
    ck_assert_str_eq(h[1].value, "7");
    ck_assert_str_eq(h[2].value, "123456789012");
    ck_assert_str_eq(h[3].value, "2026-11-29T17:58:02.123Z");
    ck_assert_str_eq(h[7].value, "2026-11-29T17:58:03.000Z");

    wr_dlt_info_clear(&out);
    for (size_t i = 0; i < WR_DLT_NHEADERS; i++)
        ck_assert_int_eq(wr_dlt_info_set(&out, h[i].name, h[i].value, strlen(h[i].value)), 0);
    ck_assert_int_eq(wr_dlt_info_set(&out, "x-unknown", "1", 1), 0);
    ck_assert_int_eq(memcmp(&in, &out, sizeof(in)), 0);
    ck_assert_int_eq(out.truncated_from, -1); /* a whole copy has no dlt-truncated */
}
END_TEST

START_TEST(dlt_headers_say_when_the_copy_is_not_whole)
{
    wr_dlt_info_t in, out;
    wr_header_t h[WR_DLT_MAX_HEADERS];
    size_t n;

    wr_dlt_info_clear(&in);
    in.truncated_from = 1048000;
    n = wr_dlt_headers(&in, h);
    ck_assert_uint_eq(n, WR_DLT_NHEADERS + 1);
    ck_assert_str_eq(h[WR_DLT_NHEADERS].name, WR_HDR_TRUNCATED);
    ck_assert_str_eq(h[WR_DLT_NHEADERS].value, "1048000");

    wr_dlt_info_clear(&out);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_TRUNCATED, "1048000", 7), 0);
    ck_assert_int_eq(out.truncated_from, 1048000);
    /* Unreadable, the header still marks the copy as not whole: never replayed. */
    wr_dlt_info_clear(&out);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_TRUNCATED, "lots", 4), VC_ERR_INVALID);
    ck_assert_int_ge(out.truncated_from, 0);
}
END_TEST

START_TEST(dlt_forms_keep_less_and_less)
{
    /* key, then value, for an original of 300-byte key and 1 MB value */
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_WHOLE, 300, 1), 300);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_WHOLE, 1048000, 0), 1048000);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_TRUNCATED, 300, 1), WR_DLT_KEEP_KEY);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_TRUNCATED, 1048000, 0), WR_DLT_KEEP_VALUE);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_TRUNCATED, 12, 1), 12);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_REFERENCE, 12, 1), 12);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_REFERENCE, 1048000, 0), 0);
    ck_assert_uint_eq(wr_dlt_form_keep(WR_DLT_LOST, 12, 1), 0);
    ck_assert_str_eq(wr_dlt_form_name(WR_DLT_TRUNCATED), "truncated");
    ck_assert_str_eq(wr_dlt_form_name(WR_DLT_LOST), "lost");
}
END_TEST

START_TEST(dlt_headers_unknown_timestamp_and_long_message)
{
    wr_dlt_info_t in, out;
    wr_header_t h[WR_DLT_MAX_HEADERS];

    wr_dlt_info_clear(&in);
    in.timestamp_ms = -1;
    memset(in.error_message, 'x', sizeof(in.error_message) - 1);
    wr_dlt_headers(&in, h);
    ck_assert_str_eq(h[3].value, "");
    ck_assert_uint_eq(strlen(h[6].value), WR_HDR_VALUE_MAX - 1);

    wr_dlt_info_clear(&out);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_TIMESTAMP, "", 0), 0);
    ck_assert_int_eq(out.timestamp_ms, -1);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_OFFSET, "12x", 3), VC_ERR_INVALID);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_PARTITION, "-1", 2), VC_ERR_INVALID);
    ck_assert_int_eq(wr_dlt_info_set(&out, WR_HDR_FAILED_AT, "yesterday", 9), VC_ERR_INVALID);
}
END_TEST

START_TEST(dlt_classes)
{
    ck_assert_str_eq(wr_pg_dlt_class("23503: unknown voucher GHOST"), WR_DLT_UNKNOWN_VOUCHER);
    ck_assert_str_eq(wr_pg_dlt_class("23514: voucher A: ..."), WR_DLT_CONSTRAINT);
    ck_assert_str_eq(wr_pg_dlt_class("23505: duplicate key"), WR_DLT_CONSTRAINT);
    ck_assert_str_eq(wr_pg_dlt_class("22003: numeric value out of range"), WR_DLT_REJECTED);
    ck_assert(wr_dlt_class_valid("order-conflict"));
    ck_assert(wr_dlt_class_valid("direct-mismatch"));
    ck_assert(wr_dlt_class_valid("malformed"));
    ck_assert(!wr_dlt_class_valid("transient"));
}
END_TEST

static const struct {
    const char *args[6];
    int ok;
} replay_args[] = {
    {{NULL}, 0},
    {{"--all", NULL}, 1},
    {{"--all", "--dry-run", NULL}, 1},
    {{"--from", "3", "--to", "9", NULL}, 1},
    {{"--from", "9", "--to", "3", NULL}, 0},
    {{"--from", "x", NULL}, 0},
    {{"--to", NULL}, 0},
    {{"--error-class", "constraint", NULL}, 1},
    {{"--error-class", "transient", NULL}, 0},
    {{"--all", "--from", "1", NULL}, 0},
    {{"--dry-run", NULL}, 0},
    {{"--bogus", NULL}, 0},
    {{"--partition", "2", "--from", "3", NULL}, 1},
    {{"--partition", "2", "--all", NULL}, 0},      /* a partition without offsets means nothing */
    {{"--partition", "2", "--error-class", "constraint", NULL}, 0},
    {{"--partition", "-1", "--from", "3", NULL}, 0},
    {{"--partition", "x", "--from", "3", NULL}, 0},
    {{"--from", "3", "--partition", NULL}, 0},
};

START_TEST(dlt_replay_arguments)
{
    size_t i = (size_t)_i;
    char *argv[6], err[256];
    int argc = 0;
    wr_dlt_filter_t f;

    while (replay_args[i].args[argc]) {
        argv[argc] = (char *)replay_args[i].args[argc];
        argc++;
    }
    err[0] = '\0';
    ck_assert_msg((wr_dlt_filter_parse(argc, argv, &f, err, sizeof(err)) == 0) == replay_args[i].ok,
                  "case %zu: %s", i, err);
    if (!replay_args[i].ok)
        ck_assert(strlen(err) > 0);
}
END_TEST

START_TEST(dlt_replay_selection)
{
    char *range[] = {"--from", "3", "--to", "5"};
    char *cls[] = {"--error-class", "constraint", "--from", "4"};
    char *all[] = {"--all"};
    char err[128];
    wr_dlt_filter_t f;

    ck_assert_int_eq(wr_dlt_filter_parse(4, range, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(f.partition, 0);
    ck_assert(!wr_dlt_filter_match(&f, 0, 2, "constraint", "o-1"));
    ck_assert(wr_dlt_filter_match(&f, 0, 3, "malformed", "o-1"));
    ck_assert(wr_dlt_filter_match(&f, 0, 5, "constraint", "o-1"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 6, "constraint", "o-1"));

    ck_assert_int_eq(wr_dlt_filter_parse(4, cls, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 1, err, sizeof(err)), 0);
    ck_assert(!wr_dlt_filter_match(&f, 0, 3, "constraint", "o-1"));
    ck_assert(wr_dlt_filter_match(&f, 0, 4, "constraint", "o-1"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 4, "malformed", "o-1"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 4, NULL, "o-1"));

    ck_assert_int_eq(wr_dlt_filter_parse(1, all, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 3, err, sizeof(err)), 0);
    ck_assert(wr_dlt_filter_match(&f, 0, 0, "", "o-1"));
    ck_assert(wr_dlt_filter_match(&f, 2, 0, "", "o-1"));
    ck_assert(!f.dry_run);
}
END_TEST

/* `dlt replay --order ID` selects that order's letters; --operator is kept for the audit. */
START_TEST(dlt_replay_by_order)
{
    char *order[] = {"--order", "o-7", "--operator", "alice"};
    char *order_all[] = {"--all", "--order", "o-7"};
    char *empty[] = {"--order", ""};
    char err[128];
    wr_dlt_filter_t f;

    ck_assert_int_eq(wr_dlt_filter_parse(4, order, &f, err, sizeof(err)), 0);
    ck_assert_str_eq(f.operator_name, "alice");
    ck_assert(wr_dlt_filter_match(&f, 0, 9, "constraint", "o-7"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 9, "constraint", "o-70"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 9, "malformed", "-"));
    ck_assert_int_eq(wr_dlt_filter_parse(3, order_all, &f, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_int_eq(wr_dlt_filter_parse(2, empty, &f, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/* `dlt list` filters: --code, --order, --partition, --since (an age or a time), --state. */
START_TEST(dlt_list_filters)
{
    const int64_t now = 1800000000000LL;
    char *all[] = {"--code", "A", "--order", "o-1", "--partition", "2", "--since", "15m",
                   "--state", "parked"};
    char *time[] = {"--since", "2027-01-15T08:00:00Z"};
    char *bad[][2] = {{"--since", "yesterday"}, {"--state", "lost"}, {"--partition", "-1"},
                      {"--colour", "red"}, {"--code", ""}};
    char err[128];
    wr_dlt_list_t l;

    ck_assert_int_eq(wr_dlt_list_parse(0, NULL, now, &l, err, sizeof(err)), 0);
    ck_assert(wr_dlt_list_match(&l, 5, 0, "Z", "-", "unrecorded"));
    ck_assert_int_eq(wr_dlt_list_parse(10, all, now, &l, err, sizeof(err)), 0);
    ck_assert_int_eq(l.since_ms, now - 15 * 60000);
    ck_assert(wr_dlt_list_match(&l, 2, now - 60000, "A", "o-1", "parked"));
    ck_assert(!wr_dlt_list_match(&l, 1, now - 60000, "A", "o-1", "parked"));
    ck_assert(!wr_dlt_list_match(&l, 2, now - 16 * 60000, "A", "o-1", "parked"));
    ck_assert(!wr_dlt_list_match(&l, 2, now - 60000, "B", "o-1", "parked"));
    ck_assert(!wr_dlt_list_match(&l, 2, now - 60000, "A", "o-2", "parked"));
    ck_assert(!wr_dlt_list_match(&l, 2, now - 60000, "A", "o-1", "replayed"));
    ck_assert_int_eq(wr_dlt_list_parse(2, time, now, &l, err, sizeof(err)), 0);
    ck_assert_int_eq(l.since_ms, 1800000000000LL);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(wr_dlt_list_parse(2, bad[i], now, &l, err, sizeof(err)) == VC_ERR_INVALID,
                      "%s %s accepted", bad[i][0], bad[i][1]);
}
END_TEST

START_TEST(dlt_replay_range_is_one_partitions)
{
    char *range[] = {"--from", "3", "--to", "5"};
    char *in_two[] = {"--partition", "2", "--from", "3", "--to", "5"};
    char err[256];
    wr_dlt_filter_t f;

    /* Offsets count in each partition: a bare range on several is refused. */
    ck_assert_int_eq(wr_dlt_filter_parse(4, range, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 3, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "--partition"));

    ck_assert_int_eq(wr_dlt_filter_parse(6, in_two, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 3, err, sizeof(err)), 0);
    ck_assert(wr_dlt_filter_match(&f, 2, 4, "constraint", "o-1"));
    ck_assert(!wr_dlt_filter_match(&f, 0, 4, "constraint", "o-1"));
    ck_assert(!wr_dlt_filter_match(&f, 1, 4, "constraint", "o-1"));

    /* A partition the topic does not have. */
    ck_assert_int_eq(wr_dlt_filter_parse(6, in_two, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(wr_dlt_filter_resolve(&f, 1, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "1 partition"));
}
END_TEST

START_TEST(dlt_age)
{
    char buf[16];

    ck_assert_str_eq(wr_dlt_format_age(-5, buf, sizeof(buf)), "-");
    ck_assert_str_eq(wr_dlt_format_age(42999, buf, sizeof(buf)), "42s");
    ck_assert_str_eq(wr_dlt_format_age(17 * 60000, buf, sizeof(buf)), "17m");
    ck_assert_str_eq(wr_dlt_format_age(5 * 3600000LL, buf, sizeof(buf)), "5h");
    ck_assert_str_eq(wr_dlt_format_age(3 * 86400000LL, buf, sizeof(buf)), "3d");
}
END_TEST

static Suite *writer_suite(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("batch");
    tcase_add_test(tc, queue_fifo_and_positions);
    tcase_add_test(tc, queue_grows_keeping_order);
    tcase_add_test(tc, queue_drop_revoked_partitions);
    tcase_add_test(tc, msg_decode_marks_malformed_poison);
    tcase_add_loop_test(tc, bisect_isolates_poison_and_keeps_order, 0,
                        (int)(sizeof(bisect_cases) / sizeof(bisect_cases[0])));
    tcase_add_test(tc, bisect_stops_on_transient_error);
    suite_add_tcase(s, tc);

    tc = tcase_create("dlt");
    tcase_add_test(tc, dlt_headers_round_trip);
    tcase_add_test(tc, dlt_headers_unknown_timestamp_and_long_message);
    tcase_add_test(tc, dlt_headers_say_when_the_copy_is_not_whole);
    tcase_add_test(tc, dlt_forms_keep_less_and_less);
    tcase_add_test(tc, dlt_classes);
    tcase_add_loop_test(tc, dlt_replay_arguments, 0,
                        (int)(sizeof(replay_args) / sizeof(replay_args[0])));
    tcase_add_test(tc, dlt_replay_selection);
    tcase_add_test(tc, dlt_replay_range_is_one_partitions);
    tcase_add_test(tc, dlt_replay_by_order);
    tcase_add_test(tc, dlt_list_filters);
    tcase_add_test(tc, dlt_age);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(writer_suite());
}
