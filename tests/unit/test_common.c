/* Unit tests for common/: the event codec, RFC 3339 times, configuration, voucher rules. */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ck_run.h"
#include "json_same.h"
#include "vc_config.h"
#include "vc_pg.h"
#include "vc_shutdown.h"
#include "vc_signal.h"
#include "vc_error.h"
#include "vc_event.h"
#include "vc_json.h"
#include "vc_utf8.h"
#include "vc_jout.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_time.h"
#include "vc_voucher.h"

static vc_event_t sample_reserved(void)
{
    vc_event_t ev = {0};
    ev.type = VC_EV_RESERVED;
    ev.version = 1;
    strcpy(ev.code, "FLASH100");
    ev.customer_id = 42;
    strcpy(ev.order_id, "order-42");
    ev.discount_amount = 100000;
    ev.order_amount = 250000;
    ev.at_ms = 1795975082123;
    ev.held_until_ms = 1795975982123;
    return ev;
}

START_TEST(event_roundtrip_reserved)
{
    vc_event_t in = sample_reserved(), out;
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_json_eq(buf, "{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"FLASH100\","
                          "\"customerId\":42,\"orderId\":\"order-42\",\"discountAmount\":100000,"
                          "\"orderAmount\":250000,\"reservedAt\":\"2026-11-29T17:58:02.123Z\","
                          "\"heldUntil\":\"2026-11-29T18:13:02.123Z\"}");
    ck_assert_int_eq(vc_event_decode(buf, len, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.type, VC_EV_RESERVED);
    ck_assert_str_eq(out.code, "FLASH100");
    ck_assert_str_eq(out.order_id, "order-42");
    ck_assert_int_eq(out.customer_id, 42);
    ck_assert_int_eq(out.discount_amount, 100000);
    ck_assert_int_eq(out.order_amount, 250000);
    ck_assert_int_eq(out.at_ms, in.at_ms);
    ck_assert_int_eq(out.held_until_ms, in.held_until_ms);
}
END_TEST

START_TEST(event_roundtrip_released)
{
    vc_event_t in = sample_reserved(), out;
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    in.type = VC_EV_RELEASED;
    strcpy(in.reason, "EXPIRED");
    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_ptr_null(strstr(buf, "discountAmount"));
    ck_assert_int_eq(vc_event_decode(buf, len, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.type, VC_EV_RELEASED);
    ck_assert_str_eq(out.reason, "EXPIRED");
}
END_TEST

/* A campaign's event carries campaignId; a voucher's does not, and old events decode as 0. */
START_TEST(event_roundtrip_campaign)
{
    static const char zero[] = "{\"type\":\"VoucherReleased\",\"version\":1,\"code\":\"K7QM\","
                               "\"customerId\":42,\"orderId\":\"o\",\"reason\":\"EXPIRED\","
                               "\"releasedAt\":\"2026-11-29T17:58:02.123Z\",\"campaignId\":0}";
    vc_event_t in = sample_reserved(), out;
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    in.campaign_id = 7;
    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(buf, "\"campaignId\":7"));
    ck_assert_int_eq(vc_event_decode(buf, len, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.campaign_id, 7);
    in.campaign_id = 0;
    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_ptr_null(strstr(buf, "campaignId"));
    ck_assert_int_eq(vc_event_decode(buf, len, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.campaign_id, 0);
    ck_assert_int_eq(vc_event_decode(zero, strlen(zero), &out, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "campaignId"));
}
END_TEST

/* A confirm given the final total carries its figures; an old confirm, none, and still decodes. */
START_TEST(event_roundtrip_confirmed_amounts)
{
    static const char old[] = "{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"FLASH100\","
                              "\"customerId\":42,\"orderId\":\"order-42\","
                              "\"confirmedAt\":\"2026-11-29T17:58:02.123Z\"}";
    vc_event_t in = sample_reserved(), out;
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    in.type = VC_EV_CONFIRMED;
    in.has_amounts = 1;
    in.order_amount = 80000;
    in.discount_amount = 8000;
    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_str_eq(buf, "{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"FLASH100\","
                          "\"customerId\":42,\"orderId\":\"order-42\",\"discountAmount\":8000,"
                          "\"orderAmount\":80000,\"confirmedAt\":\"2026-11-29T17:58:02.123Z\"}");
    ck_assert_int_eq(vc_event_decode(buf, len, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.type, VC_EV_CONFIRMED);
    ck_assert_int_eq(out.has_amounts, 1);
    ck_assert_int_eq(out.order_amount, 80000);
    ck_assert_int_eq(out.discount_amount, 8000);

    /* Without a total: no figures written, and none read back. */
    in.has_amounts = 0;
    ck_assert_int_eq(vc_event_encode(&in, buf, sizeof(buf), &len, err, sizeof(err)), 0);
    ck_assert_ptr_null(strstr(buf, "Amount"));
    ck_assert_int_eq(vc_event_decode(old, strlen(old), &out, err, sizeof(err)), 0);
    ck_assert_int_eq(out.type, VC_EV_CONFIRMED);
    ck_assert_int_eq(out.has_amounts, 0);
    ck_assert_int_eq(out.order_amount, 0);
    ck_assert_int_eq(out.discount_amount, 0);
}
END_TEST

/* A time as vc_time_format_ms() wrote it with printf (ms >= 0). */
static void format_with_printf(int64_t ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&secs, &tm);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/*
 * The encoder as it was, with yajl's generator: vc_event_encode() now writes
 * the text straight (vc_jout.h) and must write this, byte for byte.
 */
static int encode_with_generator(const vc_event_t *ev, char *buf, size_t cap, size_t *len)
{
    static const char *const at_keys[] = {NULL, "reservedAt", "confirmedAt", "releasedAt"};
    char ts[80];
    vc_jgen_t g;

    if (vc_jgen_init(&g) != 0)
        return VC_ERR_NOMEM;
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "type", vc_event_type_name(ev->type));
    vc_jgen_kv_int(&g, "version", VC_EVENT_VERSION);
    vc_jgen_kv_str(&g, "code", ev->code);
    vc_jgen_kv_int(&g, "customerId", ev->customer_id);
    vc_jgen_kv_str(&g, "orderId", ev->order_id);
    if (ev->type == VC_EV_RESERVED || (ev->type == VC_EV_CONFIRMED && ev->has_amounts)) {
        vc_jgen_kv_int(&g, "discountAmount", ev->discount_amount);
        vc_jgen_kv_int(&g, "orderAmount", ev->order_amount);
    }
    format_with_printf(ev->at_ms, ts, sizeof(ts));
    vc_jgen_kv_str(&g, at_keys[ev->type], ts);
    if (ev->type == VC_EV_RESERVED && ev->held_until_ms > 0) {
        format_with_printf(ev->held_until_ms, ts, sizeof(ts));
        vc_jgen_kv_str(&g, "heldUntil", ts);
    }
    if (ev->type == VC_EV_RELEASED)
        vc_jgen_kv_str(&g, "reason", ev->reason);
    if (ev->campaign_id > 0)
        vc_jgen_kv_int(&g, "campaignId", ev->campaign_id);
    vc_jgen_map_close(&g);
    return vc_jgen_finish(&g, buf, cap, len);
}

/* Every shape of event, with orderIds that need escaping, written as the generator wrote it. */
START_TEST(event_encode_is_the_generators_text)
{
    static const char *const ids[] = {"order-42", "a\"quoted\"id", "back\\slash", "x",
                                      "~!@$^&*()_+{}|:<>`-=[];',.", "ends\\"};
    static const int64_t times[] = {0, 1, 999, 1795975082123, 253402300799999, 951782400000};
    unsigned seed = 7;
    int n = 0;

    for (int type = VC_EV_RESERVED; type <= VC_EV_RELEASED; type++)
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
            for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++)
                for (int variant = 0; variant < 4; variant++) {
                    vc_event_t ev = sample_reserved();
                    char got[VC_EVENT_MAX_JSON], want[VC_EVENT_MAX_JSON], err[256];
                    size_t got_len = 0, want_len = 0;

                    ev.type = (vc_event_type_t)type;
                    snprintf(ev.order_id, sizeof(ev.order_id), "%s", ids[i]);
                    ev.at_ms = times[t];
                    ev.held_until_ms = variant & 1 ? 0 : times[(t + 1) % 6];
                    ev.has_amounts = variant & 2;
                    ev.campaign_id = variant == 3 ? 123456789012 : 0;
                    ev.customer_id = (int64_t)(rand_r(&seed) % 1000000) + 1;
                    ev.discount_amount = variant == 2 ? INT64_MAX : rand_r(&seed);
                    ev.order_amount = rand_r(&seed);
                    strcpy(ev.reason, variant & 1 ? "CANCELLED" : "EXPIRED");
                    ck_assert_int_eq(encode_with_generator(&ev, want, sizeof(want), &want_len), 0);
                    ck_assert_int_eq(vc_event_encode(&ev, got, sizeof(got), &got_len, err,
                                                     sizeof(err)),
                                     0);
                    ck_assert_str_eq(got, want);
                    ck_assert_uint_eq(got_len, want_len);
                    /* A buffer one byte short of the text and its NUL: too large, as before. */
                    ck_assert_int_eq(vc_event_encode(&ev, got, want_len, &got_len, err,
                                                     sizeof(err)),
                                     VC_ERR_TOO_LARGE);
                    ck_assert_int_eq(vc_event_encode(&ev, got, want_len + 1, &got_len, err,
                                                     sizeof(err)),
                                     0);
                    n++;
                }
    ck_assert_int_eq(n, 3 * 6 * 6 * 4);
}
END_TEST

/* vc_time_format_ms() without printf: the format's text for the years 1970 to 9999. */
START_TEST(time_format_is_the_formats_text)
{
    unsigned seed = 11;
    char got[40], want[80];

    for (int i = 0; i < 20000; i++) {
        int64_t ms = i < 3 ? (int64_t[]){0, 253402300799999, 946684799999}[i]
                           : (int64_t)(((uint64_t)rand_r(&seed) << 31 | (uint64_t)rand_r(&seed)) %
                                       253402300800000ULL);
        format_with_printf(ms, want, sizeof(want));
        ck_assert_uint_eq(vc_time_format_ms(ms, got, sizeof(got)), strlen(want));
        ck_assert_str_eq(got, want);
    }
    /* 25 bytes are enough, 24 are not; year 10000 takes five digits as printf writes them. */
    ck_assert_uint_eq(vc_time_format_ms(0, got, 25), 24);
    ck_assert_uint_eq(vc_time_format_ms(0, got, 24), 0);
    ck_assert_uint_eq(vc_time_format_ms(253402300800000, got, sizeof(got)), 25);
    ck_assert_str_eq(got, "10000-01-01T00:00:00.000Z");
    /* Runs of times within one second and across seconds, two of them in turn (two are kept). */
    for (int64_t t = 1764633599000; t < 1764633599000 + 3000; t += 7) {
        format_with_printf(t, want, sizeof(want));
        ck_assert_uint_eq(vc_time_format_ms(t, got, sizeof(got)), strlen(want));
        ck_assert_str_eq(got, want);
        format_with_printf(t - 86400000, want, sizeof(want)); /* the same second of the day before */
        ck_assert_uint_eq(vc_time_format_ms(t - 86400000, got, sizeof(got)), strlen(want));
        ck_assert_str_eq(got, want);
    }
    ck_assert_uint_eq(vc_time_format_ms(1764633599000, got, sizeof(got)), 24);
    ck_assert_uint_eq(vc_time_format_ms(1764633599001, got, 24), 0);
}
END_TEST

/* An orderId: 1..VC_ORDER_ID_MAX printable ASCII characters, none of / ? # %. Every byte tried. */
START_TEST(order_id_characters)
{
    char id[VC_ORDER_ID_MAX + 2];

    for (int c = 0; c < 256; c++) {
        int want = c > 0x20 && c < 0x7f && c != '/' && c != '?' && c != '#' && c != '%';

        memcpy(id, "abxd", 5);
        id[2] = (char)c;
        ck_assert_msg(vc_order_id_valid(id, 4) == want, "byte 0x%02x in the middle", c);
        ck_assert_msg(vc_order_id_valid(id + 2, 1) == want, "byte 0x%02x alone", c);
    }
    memset(id, 'o', sizeof(id));
    ck_assert_int_eq(vc_order_id_valid(id, VC_ORDER_ID_MAX), 1);
    ck_assert_int_eq(vc_order_id_valid(id, VC_ORDER_ID_MAX + 1), 0);
    ck_assert_int_eq(vc_order_id_valid(id, 0), 0);
}
END_TEST

START_TEST(jout_escapes_as_yajl)
{
    char got[128], want[128];
    size_t want_len;
    vc_jout_t o;
    vc_jgen_t g;
    static const char s[] = "a\"b\\c/d\r\n\f\b\t\x01\x1f\x7f\xc3\xa9 end";

    vc_jout_init(&o, got, sizeof(got));
    vc_jout_str(&o, s);
    ck_assert_uint_gt(vc_jout_end(&o), 0);
    ck_assert_int_eq(vc_jgen_init(&g), 0);
    vc_jgen_map_open(&g);
    vc_jgen_kv_str(&g, "k", s);
    vc_jgen_map_close(&g);
    ck_assert_int_eq(vc_jgen_finish(&g, want, sizeof(want), &want_len), 0);
    want[want_len - 1] = '\0'; /* {"k":TEXT} -> TEXT */
    ck_assert_str_eq(got, want + 5);
    /* Full: nothing more is written and the end says so. */
    vc_jout_init(&o, got, 4);
    vc_jout_lit(&o, "abc");
    ck_assert_uint_eq(vc_jout_end(&o), 3);
    vc_jout_init(&o, got, 4);
    vc_jout_lit(&o, "abcd");
    vc_jout_lit(&o, "");
    ck_assert_uint_eq(vc_jout_end(&o), 0);
}
END_TEST

START_TEST(event_encode_rejects_invalid)
{
    vc_event_t ev = sample_reserved();
    char buf[VC_EVENT_MAX_JSON], err[256];
    size_t len;

    strcpy(ev.code, "lower");
    ck_assert_int_eq(vc_event_encode(&ev, buf, sizeof(buf), &len, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "code"));
    ev = sample_reserved();
    ck_assert_int_eq(vc_event_encode(&ev, buf, 20, &len, err, sizeof(err)), VC_ERR_TOO_LARGE);
}
END_TEST

/* Malformed events, each with a word its error must contain. */
static const struct {
    const char *json;
    const char *detail;
} bad_events[] = {
    {"", "malformed JSON"},
    {"{", "malformed JSON"},
    {"[1,2]", "expected an object"},
    {"{\"type\":\"VoucherReserved\"}", "version"},
    {"{\"type\":\"Nope\",\"version\":1}", "unknown event type"},
    {"{\"type\":7,\"version\":1}", "must be a string"},
    {"{\"type\":\"VoucherReserved\",\"version\":2,\"code\":\"A\"}", "unsupported event version"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":\"x\"}",
     "customerId"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"reservedAt\":\"yesterday\"}",
     "RFC 3339"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"reservedAt\":\"2026-01-01T00:00:00Z\",\"orderAmount\":5}",
     "discountAmount"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"reservedAt\":\"2026-01-01T00:00:00Z\",\"discountAmount\":1e3,"
     "\"orderAmount\":5}",
     "discountAmount"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"reservedAt\":\"2026-01-01T00:00:00Z\","
     "\"discountAmount\":99999999999999999999999,\"orderAmount\":5}",
     "64 bits"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"bad code\",\"customerId\":1,"
     "\"orderId\":\"o\",\"reservedAt\":\"2026-01-01T00:00:00Z\",\"discountAmount\":1,"
     "\"orderAmount\":5}",
     "code"},
    {"{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"A\",\"customerId\":-3,"
     "\"orderId\":\"o\",\"reservedAt\":\"2026-01-01T00:00:00Z\",\"discountAmount\":1,"
     "\"orderAmount\":5}",
     "customerId"},
    {"{\"type\":\"VoucherReleased\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"releasedAt\":\"2026-01-01T00:00:00Z\"}",
     "reason"},
    /* A confirm's figures come both or neither, and not negative. */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\",\"orderAmount\":5}",
     "discountAmount"},
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\",\"discountAmount\":5}",
     "orderAmount"},
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\",\"discountAmount\":-1,"
     "\"orderAmount\":5}",
     "negative"},
};

START_TEST(event_decode_rejects_malformed)
{
    vc_event_t ev;
    char err[256] = "";
    const char *json = bad_events[_i].json;

    ck_assert_int_eq(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, bad_events[_i].detail), "case %d: error \"%s\" lacks \"%s\"", _i, err,
                  bad_events[_i].detail);
}
END_TEST

START_TEST(event_decode_rejects_embedded_nul)
{
    vc_event_t ev;
    char err[256];
    ck_assert_int_eq(vc_event_decode("{\"a\":\0}", 7, &ev, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/*
 * Every string field of every event type, one at a time, with "\u0000tail"
 * appended: yajl decodes it to a NUL byte, and a reader that measures the
 * field with strlen() would see only what comes before ("nul\u0000tail" read
 * as "nul"). Each must be refused, naming the field.
 */
static const char *const nul_templates[] = {
    "{\"type\":\"VoucherReserved%s\",\"version\":1,\"code\":\"A%s\",\"customerId\":1,"
    "\"orderId\":\"nul%s\",\"discountAmount\":1,\"orderAmount\":5,"
    "\"reservedAt\":\"2026-01-01T00:00:00Z%s\",\"heldUntil\":\"2026-01-01T00:15:00Z%s\"}",
    "{\"type\":\"VoucherConfirmed%s\",\"version\":1,\"code\":\"A%s\",\"customerId\":1,"
    "\"orderId\":\"nul%s\",\"confirmedAt\":\"2026-01-01T00:00:00Z%s\"}",
    "{\"type\":\"VoucherReleased%s\",\"version\":1,\"code\":\"A%s\",\"customerId\":1,"
    "\"orderId\":\"nul%s\",\"releasedAt\":\"2026-01-01T00:00:00Z%s\",\"reason\":\"EXPIRED%s\"}",
};
static const char *const nul_fields[][5] = {
    {"type", "code", "orderId", "reservedAt", "heldUntil"},
    {"type", "code", "orderId", "confirmedAt", NULL},
    {"type", "code", "orderId", "releasedAt", "reason"},
};

START_TEST(event_decode_rejects_nul_escape_in_every_string)
{
    const char *tmpl = nul_templates[_i];
    char json[512], err[256];
    vc_event_t ev;

    /* The template as it is decodes: the cases below differ by the escape alone. */
    snprintf(json, sizeof(json), tmpl, "", "", "", "", "");
    ck_assert_msg(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)) == 0, "%s: %s", json,
                  err);
    for (int f = 0; f < 5 && nul_fields[_i][f]; f++) {
        const char *arg[5] = {"", "", "", "", ""};
        arg[f] = "\\u0000tail";
        snprintf(json, sizeof(json), tmpl, arg[0], arg[1], arg[2], arg[3], arg[4]);
        err[0] = '\0';
        ck_assert_msg(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)) == VC_ERR_INVALID,
                      "accepted %s (orderId \"%s\")", json, ev.order_id);
        ck_assert_msg(strstr(err, nul_fields[_i][f]) && strstr(err, "NUL"),
                      "%s: error \"%s\" does not name the field", json, err);
    }
}
END_TEST

/* Events the decoder must refuse although each field it reads would be fine. */
static const struct {
    const char *json;
    const char *detail;
} strict_events[] = {
    /* A key with \u0000: read by strcmp(), "orderId\u0000x" would be "orderId". */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\\u0000x\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\"}",
     "NUL"},
    /* Comments are not JSON. */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "/* a comment */\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\"}",
     "comment"},
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\"} // trailing",
     "malformed JSON"},
    /* A key twice: which orderId would the writer apply? */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"orderId\":\"p\",\"confirmedAt\":\"2026-01-01T00:00:00Z\"}",
     "given twice"},
    /* Twice in a nested object, too (a field the codec does not read). */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\",\"x\":{\"k\":1,\"k\":2}}",
     "given twice"},
    /* Two documents. */
    {"{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\",\"customerId\":1,"
     "\"orderId\":\"o\",\"confirmedAt\":\"2026-01-01T00:00:00Z\"}{}",
     "malformed JSON"},
};

START_TEST(event_decode_is_strict)
{
    vc_event_t ev;
    char err[256] = "";
    const char *json = strict_events[_i].json;

    ck_assert_int_eq(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, strict_events[_i].detail), "case %d: error \"%s\" lacks \"%s\"", _i,
                  err, strict_events[_i].detail);
}
END_TEST

/* A valid VoucherConfirmed with an extra field x holding depth nested arrays. */
static char *nested_event(int depth)
{
    static const char head[] = "{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"A\","
                               "\"customerId\":1,\"orderId\":\"o\","
                               "\"confirmedAt\":\"2026-01-01T00:00:00Z\",\"x\":";
    size_t n = strlen(head);
    char *json = malloc(n + 2 * (size_t)depth + 2);

    ck_assert_ptr_nonnull(json);
    memcpy(json, head, n);
    memset(json + n, '[', (size_t)depth);
    memset(json + n + depth, ']', (size_t)depth);
    json[n + 2 * depth] = '}';
    json[n + 2 * depth + 1] = '\0';
    return json;
}

START_TEST(event_decode_bounds_nesting)
{
    vc_event_t ev;
    char err[256] = "";
    char *json;

    /* The event object is one level: VC_JSON_MAX_DEPTH - 1 arrays inside it still fit. */
    json = nested_event(VC_JSON_MAX_DEPTH - 1);
    ck_assert_msg(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)) == 0, "%s", err);
    free(json);
    json = nested_event(VC_JSON_MAX_DEPTH);
    ck_assert_int_eq(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, "nested deeper"), "%s", err);
    free(json);
    /* A million levels: refused at the bound, neither built nor freed by recursion. */
    json = nested_event(1000000);
    ck_assert_int_eq(vc_event_decode(json, strlen(json), &ev, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, "nested deeper"), "%s", err);
    free(json);
}
END_TEST

/* vc_jdoc itself: the bounds and what a field reader sees. */
/* Runs one vc_log_write with stderr sent to a file and returns the line (static). */
static const char *captured_log_line(const vc_log_field_t *fields, size_t n, const char *msg)
{
    static char line[16384];
    FILE *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    size_t len;

    ck_assert_ptr_nonnull(f);
    dup2(fileno(f), STDERR_FILENO);
    vc_log_write(VC_LOG_WARN, fields, n, "%s", msg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    len = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[len] = '\0';
    return line;
}

START_TEST(log_lines_are_json)
{
    char err[256] = "", big[3000];
    const char *line, *s;
    vc_jdoc_t doc;
    vc_log_field_t fields[] = {{"code", "Q\"\\\n\t\x01/\xc3\xa9"}, {"empty", ""}, {NULL, "skipped"}};

    /* One line, valid JSON, the values back as they were given, whatever they hold. */
    line = captured_log_line(fields, 3, "said \"no\"\r\n\x1f");
    ck_assert_ptr_nonnull(strchr(line, '\n'));
    ck_assert_ptr_eq(strchr(line, '\n'), line + strlen(line) - 1);
    ck_assert_msg(vc_jdoc_parse(&doc, line, strlen(line) - 1, err, sizeof(err)) == 0, "%s: %s", err, line);
    ck_assert_int_eq(vc_jdoc_str(&doc, "level", &s, err, sizeof(err)), 0);
    ck_assert_str_eq(s, "warn");
    ck_assert_int_eq(vc_jdoc_str(&doc, "code", &s, err, sizeof(err)), 0);
    ck_assert_str_eq(s, "Q\"\\\n\t\x01/\xc3\xa9");
    ck_assert_int_eq(vc_jdoc_str(&doc, "empty", &s, err, sizeof(err)), 0);
    ck_assert_str_eq(s, "");
    ck_assert_int_eq(vc_jdoc_str(&doc, "message", &s, err, sizeof(err)), 0);
    ck_assert_str_eq(s, "said \"no\"\r\n\x1f");
    vc_jdoc_free(&doc);

    /* A value too long is cut, never inside a character; the line stays JSON. */
    for (size_t i = 0; i + 2 < sizeof(big); i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof(big) - 1] = '\0';
    fields[0].value = big;
    line = captured_log_line(fields, 1, big);
    ck_assert_msg(vc_jdoc_parse(&doc, line, strlen(line) - 1, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_jdoc_str(&doc, "code", &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(s), 1024);
    ck_assert_int_eq(vc_jdoc_str(&doc, "message", &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(s) % 2, 0);
    ck_assert_uint_ge(strlen(s), 2040);
    vc_jdoc_free(&doc);
}
END_TEST

START_TEST(json_same_compares_meaning)
{
    ck_assert(json_same("{\"a\":1,\"b\":[true,null,\"x\"]}", "{\"b\":[true,null,\"x\"],\"a\":1}"));
    ck_assert(!json_same("{\"a\":1}", "{\"a\":2}"));
    ck_assert(!json_same("{\"a\":1}", "{\"a\":1,\"b\":1}"));
    ck_assert(!json_same("{\"a\":\"1\"}", "{\"a\":1}"));
    ck_assert(!json_same("{\"a\":[1,2]}", "{\"a\":[2,1]}"));
    ck_assert(!json_same("{\"a\":1", "{\"a\":1}"));
    ck_assert(json_has("{\"a\":1,\"b\":{\"c\":false}}", "{\"b\":{\"c\":false}}"));
    ck_assert(!json_has("{\"a\":1}", "{\"b\":1}"));
}
END_TEST

START_TEST(jdoc_parse_strict)
{
    vc_jdoc_t doc;
    char err[256] = "", json[4096];
    const char *s;
    int64_t i;
    size_t n = 0;

    /* Objects of VC_JSON_MAX_MEMBERS fields parse; one more is refused. */
    json[n++] = '{';
    for (int k = 0; k < VC_JSON_MAX_MEMBERS; k++)
        n += (size_t)snprintf(json + n, sizeof(json) - n, "%s\"k%d\":%d", k ? "," : "", k, k);
    json[n++] = '}';
    ck_assert_msg(vc_jdoc_parse(&doc, json, n, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_jdoc_int(&doc, "k63", &i, err, sizeof(err)), 0);
    ck_assert_int_eq(i, 63);
    vc_jdoc_free(&doc);
    n--;
    n += (size_t)snprintf(json + n, sizeof(json) - n, ",\"k%d\":0}", VC_JSON_MAX_MEMBERS);
    ck_assert_int_eq(vc_jdoc_parse(&doc, json, n, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_msg(strstr(err, "more than"), "%s", err);
    /* Escapes other than \u0000 still decode, and numbers keep their kinds. */
    s = "{\"a\":\"\\u00e9\\n\\\"\",\"b\":-9223372036854775808,\"c\":1.5,\"d\":[true,null,{}]}";
    ck_assert_msg(vc_jdoc_parse(&doc, s, strlen(s), err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_jdoc_str(&doc, "a", &s, err, sizeof(err)), 0);
    ck_assert_str_eq(s, "\xc3\xa9\n\"");
    ck_assert_int_eq(vc_jdoc_int(&doc, "b", &i, err, sizeof(err)), 0);
    ck_assert_int_eq(i, INT64_MIN);
    ck_assert_int_eq(vc_jdoc_int(&doc, "c", &i, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_int_eq(vc_jdoc_has(&doc, "d"), 1);
    vc_jdoc_free(&doc);
    /* Invalid UTF-8 and an empty body are refused. */
    ck_assert_int_eq(vc_jdoc_parse(&doc, "{\"a\":\"\xff\"}", 8, err, sizeof(err)), VC_ERR_INVALID);
    /* yajl's own check lets these through; written back they would change (fuzz_event found one). */
    {
        static const char *not_utf8[] = {
            "\xc1\xbb",         /* an overlong '{' */
            "\xc0\x80",         /* an overlong NUL */
            "\xe0\x80\xaf",     /* an overlong '/' in three bytes */
            "\xed\xa0\x80",     /* a surrogate */
            "\xf4\x90\x80\x80", /* past U+10FFFF */
        };
        char body[64];

        for (size_t k = 0; k < sizeof(not_utf8) / sizeof(not_utf8[0]); k++) {
            int n = snprintf(body, sizeof(body), "{\"reason\":\"ER%srve\"}", not_utf8[k]);

            ck_assert_int_eq(vc_jdoc_parse(&doc, body, (size_t)n, err, sizeof(err)), VC_ERR_INVALID);
            ck_assert_msg(strstr(err, "field \"reason\" is not valid UTF-8"), "%zu: %s", k, err);
            ck_assert_int_eq(vc_utf8_valid(not_utf8[k], strlen(not_utf8[k])), 0);
        }
        ck_assert_int_eq(vc_utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x8e\x9f", 10), 1);
        ck_assert_int_eq(vc_utf8_valid("a\xc3", 2), 0); /* cut short */
        ck_assert_int_eq(vc_utf8_valid("", 0), 1);
    }
    ck_assert_int_eq(vc_jdoc_parse(&doc, "  ", 2, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

START_TEST(time_parse_and_format)
{
    int64_t ms;
    char buf[40];

    ck_assert_int_eq(vc_time_parse("1970-01-01T00:00:00Z", 20, &ms), 0);
    ck_assert_int_eq(ms, 0);
    ck_assert_int_eq(vc_time_parse("2026-11-29T17:58:02.123Z", 24, &ms), 0);
    ck_assert_int_eq(ms, 1795975082123);
    ck_assert_int_eq(vc_time_parse("2026-11-29T19:58:02.1+02:00", 27, &ms), 0);
    ck_assert_int_eq(ms, 1795975082100);
    ck_assert_int_eq(vc_time_parse("2024-02-29T00:00:00Z", 20, &ms), 0);
    ck_assert_int_eq(vc_time_parse("2023-02-29T00:00:00Z", 20, &ms), VC_ERR_INVALID);
    ck_assert_int_eq(vc_time_parse("2026-13-01T00:00:00Z", 20, &ms), VC_ERR_INVALID);
    ck_assert_int_eq(vc_time_parse("2026-11-29T17:58:02", 19, &ms), VC_ERR_INVALID);
    ck_assert_int_eq(vc_time_parse("2026-11-29T17:58:02Zjunk", 24, &ms), VC_ERR_INVALID);
    ck_assert_uint_eq(vc_time_format_ms(1795975082123, buf, sizeof(buf)), 24);
    ck_assert_str_eq(buf, "2026-11-29T17:58:02.123Z");
}
END_TEST

typedef struct {
    const char *s;
    int64_t n;
    int64_t ms;
    int b;
    const char *addr;
} test_cfg_t;

static const vc_cfg_param_t test_params[] = {
    {"name", "VCTEST_NAME", VC_CFG_STRING, "dflt", offsetof(test_cfg_t, s), 0, 0, "a name"},
    {"count", "VCTEST_COUNT", VC_CFG_INT, "5", offsetof(test_cfg_t, n), 1, 100, "a count"},
    {"ttl", "VCTEST_TTL", VC_CFG_MS, "15m", offsetof(test_cfg_t, ms), 0, INT64_MAX, "a ttl"},
    {"once", NULL, VC_CFG_BOOL, "false", offsetof(test_cfg_t, b), 0, 1, "a flag"},
    {"addr", "VCTEST_ADDR", VC_CFG_STRING_OFF, "127.0.0.1:1", offsetof(test_cfg_t, addr), 0, 0,
     "an address; empty turns it off"},
    VC_CFG_END,
};

START_TEST(config_defaults_env_flags)
{
    test_cfg_t cfg;
    char err[256];
    char *argv[] = {"prog", "--count", "7", "--once", "--name=x", "dlt", "list", NULL};
    int first = 0;

    unsetenv("VCTEST_COUNT");
    setenv("VCTEST_TTL", "5s", 1);
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "prog", "s", 7, argv, &first, err,
                                    sizeof(err)),
                     VC_CFG_RUN);
    ck_assert_str_eq(cfg.s, "x");
    ck_assert_int_eq(cfg.n, 7);
    ck_assert_int_eq(cfg.ms, 5000);
    ck_assert_int_eq(cfg.b, 1);
    ck_assert_int_eq(first, 5);
    unsetenv("VCTEST_TTL");
}
END_TEST

/* "A,B": a daemon's own variable first, then the shared one (the per-daemon DSNs). */
START_TEST(config_env_fallback)
{
    static const vc_cfg_param_t params[] = {
        {"dsn", "VCTEST_OWN_DSN,VCTEST_DSN", VC_CFG_STRING, "d", offsetof(test_cfg_t, s), 0, 0,
         "a dsn"},
        {"ttl", "VCTEST_OWN_TTL,VCTEST_TTL", VC_CFG_MS, "1s", offsetof(test_cfg_t, ms), 0, 10000,
         "a ttl"},
        VC_CFG_END,
    };
    test_cfg_t cfg;
    char err[256], *argv[] = {"prog", NULL};

    unsetenv("VCTEST_OWN_DSN");
    setenv("VCTEST_DSN", "shared", 1);
    ck_assert_int_eq(vc_config_load(params, &cfg, "prog", "s", 1, argv, NULL, err, sizeof(err)),
                     VC_CFG_RUN);
    ck_assert_str_eq(cfg.s, "shared");
    setenv("VCTEST_OWN_DSN", "own", 1);
    ck_assert_int_eq(vc_config_load(params, &cfg, "prog", "s", 1, argv, NULL, err, sizeof(err)),
                     VC_CFG_RUN);
    ck_assert_str_eq(cfg.s, "own");
    /* An error names the variable the value came from. */
    setenv("VCTEST_TTL", "soon", 1);
    ck_assert_int_eq(vc_config_load(params, &cfg, "prog", "s", 1, argv, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "environment variable VCTEST_TTL"));
    unsetenv("VCTEST_OWN_DSN");
    unsetenv("VCTEST_DSN");
    unsetenv("VCTEST_TTL");
}
END_TEST

START_TEST(config_errors_name_the_setting)
{
    test_cfg_t cfg;
    char err[256];
    char *argv1[] = {"prog", "--count", "500", NULL};
    char *argv2[] = {"prog", "--bogus", NULL};
    char *argv3[] = {"prog", NULL};

    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 3, argv1, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "--count"));
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 2, argv2, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "--bogus"));
    setenv("VCTEST_TTL", "soon", 1);
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 1, argv3, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "VCTEST_TTL"));
    unsetenv("VCTEST_TTL");
}
END_TEST

/* An empty setting whose default is not empty stops start-up; it never means the default. */
START_TEST(config_empty_value_is_an_error)
{
    test_cfg_t cfg;
    char err[256];
    char *argv0[] = {"prog", NULL};
    char *argv1[] = {"prog", "--name=", NULL};

    setenv("VCTEST_NAME", "", 1);
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 1, argv0, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "VCTEST_NAME"));
    ck_assert_ptr_nonnull(strstr(err, "empty"));
    unsetenv("VCTEST_NAME");
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 2, argv1, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "--name"));
    setenv("VCTEST_COUNT", "", 1);
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 1, argv0, NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "VCTEST_COUNT"));
    unsetenv("VCTEST_COUNT");
    /* Where empty means "off", it is taken as given. */
    setenv("VCTEST_ADDR", "", 1);
    ck_assert_int_eq(vc_config_load(test_params, &cfg, "p", "s", 1, argv0, NULL, err, sizeof(err)),
                     VC_CFG_RUN);
    ck_assert_str_eq(cfg.addr, "");
    unsetenv("VCTEST_ADDR");
}
END_TEST

START_TEST(pg_dsn_check)
{
    char err[256];

    ck_assert_int_eq(vc_pg_dsn_check("host=127.0.0.1 port=5432 dbname=voucher", err, sizeof(err)),
                     0);
    ck_assert_int_eq(vc_pg_dsn_check("postgresql://u@127.0.0.1:5432/voucher", err, sizeof(err)),
                     0);
    ck_assert_int_eq(vc_pg_dsn_check("nonsense", err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "nonsense"));
    ck_assert_ptr_null(strchr(err, '\n'));
    ck_assert_int_eq(vc_pg_dsn_check("host=x bogus_key=1", err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/* librdkafka's statistics are larger than vc_jdoc_parse() takes: one field is picked out. */
START_TEST(json_pick_str_follows_the_path)
{
    static const char doc[] =
        "{\"name\":\"x\",\"state\":\"top\",\"brokers\":{\"b1\":{\"state\":\"UP\"}},"
        "\"topics\":[{\"cgrp\":{\"state\":\"in-array\"}}],"
        "\"cgrp\":{\"stateage\":5,\"inner\":{\"state\":\"deeper\"},\"state\":\"up\","
        "\"join_state\":\"steady\"}}";
    const char *cgrp_state[] = {"cgrp", "state", NULL};
    const char *join[] = {"cgrp", "join_state", NULL};
    const char *top[] = {"state", NULL};
    const char *absent[] = {"cgrp", "nothing", NULL};
    const char *not_str[] = {"cgrp", "stateage", NULL};
    char out[16];

    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), cgrp_state, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "up");
    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), join, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "steady");
    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), top, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "top");
    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), absent, out, sizeof(out)), VC_E_NOT_FOUND);
    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), not_str, out, sizeof(out)),
                     VC_E_NOT_FOUND);
    ck_assert_int_eq(vc_json_pick_str("{\"cgrp\":", 8, cgrp_state, out, sizeof(out)),
                     VC_ERR_INVALID);
    /* Cut to the buffer, still terminated. */
    ck_assert_int_eq(vc_json_pick_str(doc, strlen(doc), join, out, 4), 0);
    ck_assert_str_eq(out, "ste");
}
END_TEST

START_TEST(redis_url_parsing)
{
    vc_redis_url_t u;
    char err[512];

    ck_assert_int_eq(vc_parse_redis_url("redis://127.0.0.1:16381/0", &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 16381);
    ck_assert_int_eq(u.db, 0);
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "");
    ck_assert_int_eq(vc_parse_redis_url("redis://localhost", &u, err, sizeof(err)), 0);
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(vc_parse_redis_url("http://x:1", &u, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_int_eq(vc_parse_redis_url("redis://x:99999", &u, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_int_eq(vc_parse_redis_url("redis://x:1/16", &u, err, sizeof(err)), VC_ERR_INVALID);
}
END_TEST

/* Credentials: an ACL user, a password alone, %-escapes; none of it in an error. */
START_TEST(redis_url_credentials)
{
    vc_redis_url_t u;
    char err[512];

    ck_assert_int_eq(
        vc_parse_redis_url("redis://gateway:pa%40ss%3Aw%2Fd@10.0.0.5:6380/2", &u, err, sizeof(err)),
        0);
    ck_assert_str_eq(u.user, "gateway");
    ck_assert_str_eq(u.password, "pa@ss:w/d");
    ck_assert_str_eq(u.host, "10.0.0.5");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 2);
    /* A password alone (requirepass, the default user). */
    ck_assert_int_eq(vc_parse_redis_url("redis://:hunter2@redis", &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "hunter2");
    ck_assert_str_eq(u.host, "redis");
    ck_assert_int_eq(u.port, 6379);
    /* An '@' in the password unescaped: the last '@' ends the user part. */
    ck_assert_int_eq(vc_parse_redis_url("redis://u:a@b@h:1", &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.password, "a@b");
    ck_assert_str_eq(u.host, "h");

    static const char *const bad[] = {
        "redis://hunter2@h:1",       /* a user without a password, or a password without ':' */
        "redis://u:@h:1",            /* an empty password */
        "redis://u:hunter2%4@h:1",   /* a cut escape */
        "redis://u:hunter2%zz@h:1",  /* not hex */
        "redis://u:hunter2%00x@h:1", /* a NUL */
        "rediss://u:hunter2@h:1",    /* TLS */
        "redis://u:hunter2@h:0",     /* a bad port */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(vc_parse_redis_url(bad[i], &u, err, sizeof(err)) == VC_ERR_INVALID,
                      "accepted %s", bad[i]);
        ck_assert_msg(!strstr(err, "hunter2"), "error shows the password: %s", err);
        ck_assert_ptr_nonnull(strstr(err, "***"));
    }
}
END_TEST

START_TEST(redis_url_redaction)
{
    static const struct {
        const char *url, *shown;
    } cases[] = {
        {"redis://u:hunter2@h:1/0", "redis://u:***@h:1/0"},
        {"redis://:hunter2@h", "redis://:***@h"},
        {"redis://hunter2@h:1", "redis://***@h:1"},
        {"redis://u:a@b@h:1", "redis://u:***@h:1"},
        {"redis://h:1/0", "redis://h:1/0"},
        {"u:hunter2@h:1", "u:***@h:1"},
        {"redis://h/x@y", "redis://h/x@y"},
    };
    char buf[128], tiny[8];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_str_eq(vc_redis_url_redact(cases[i].url, buf, sizeof(buf)), cases[i].shown);
    /* Cut short, it still shows no password. */
    ck_assert_str_eq(vc_redis_url_redact("redis://u:hunter2@h", tiny, sizeof(tiny)), "redis:/");
}
END_TEST

START_TEST(voucher_rules)
{
    vc_voucher_t v = {0};
    int64_t d = -1;

    v.discount_amount = 100000;
    v.min_order_amount = 200000;
    v.starts_at_ms = 1000;
    v.ends_at_ms = 2000;
    ck_assert_int_eq(vc_voucher_check(&v, 999, 500000, &d), VC_E_NOT_STARTED);
    ck_assert_int_eq(vc_voucher_check(&v, 2000, 500000, &d), VC_E_EXPIRED);
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 199999, &d), VC_E_ORDER_TOO_SMALL);
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 200000, &d), 0);
    ck_assert_int_eq(d, 100000);
    /* Never more than the order itself. */
    v.min_order_amount = 0;
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 500, &d), 0);
    ck_assert_int_eq(d, 500);
    /* Percent: rounds down, capped. */
    v.discount_amount = 0;
    v.discount_percent = 15;
    ck_assert_int_eq(vc_voucher_discount(&v, 999), 149);
    v.max_discount_amount = 100;
    ck_assert_int_eq(vc_voucher_discount(&v, 999), 100);
    v.max_discount_amount = 0;
    v.discount_percent = 100;
    ck_assert_int_eq(vc_voucher_discount(&v, INT64_MAX), INT64_MAX);
    v.discount_percent = 99;
    ck_assert_int_eq(vc_voucher_discount(&v, INT64_MAX), 9131138316486228048LL);
}
END_TEST

/* A confirm's pricing: the minimum and the capped percent, and no clock. */
START_TEST(voucher_price_ignores_the_clock)
{
    const vc_voucher_t v = {.discount_percent = 10,
                            .max_discount_amount = 5000,
                            .min_order_amount = 20000,
                            .starts_at_ms = 1000,
                            .ends_at_ms = 2000};
    int64_t d = -1;

    ck_assert_int_eq(vc_voucher_price(&v, 19999, &d), VC_E_ORDER_TOO_SMALL);
    ck_assert_int_eq(d, -1);
    ck_assert_int_eq(vc_voucher_price(&v, 20000, &d), 0);
    ck_assert_int_eq(d, 2000);
    ck_assert_int_eq(vc_voucher_price(&v, 80000, &d), 0);
    ck_assert_int_eq(d, 5000); /* capped */
    /* The same answer as a reservation inside the window; none asked about the clock. */
    ck_assert_int_eq(vc_voucher_check(&v, 1500, 30000, &d), 0);
    ck_assert_int_eq(d, 3000);
    ck_assert_int_eq(vc_voucher_check(&v, 2500, 30000, &d), VC_E_EXPIRED);
}
END_TEST


START_TEST(metrics_render_prometheus_text)
{
    vc_metric_t *ok = vc_counter("t_requests_total", "Requests.", "route=\"reserve\",status=\"201\"");
    vc_metric_t *conflict =
        vc_counter("t_requests_total", "Requests.", "route=\"reserve\",status=\"409\"");
    vc_metric_t *lag = vc_gauge("t_lag", "Lag.", NULL);
    vc_metric_t *lat = vc_histogram("t_latency_seconds", "Latency.", NULL);
    size_t len;
    char *text;

    ck_assert_ptr_eq(ok, vc_counter("t_requests_total", "Requests.",
                                    "route=\"reserve\",status=\"201\""));
    vc_metric_add(ok, 3);
    vc_metric_add(conflict, 1);
    vc_metric_set(lag, 42);
    vc_metric_observe_us(lat, 700);     /* in the 1 ms bucket */
    vc_metric_observe_us(lat, 20000000); /* beyond the last bucket */
    text = vc_metrics_render(&len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE t_requests_total counter\n"
                                       "t_requests_total{route=\"reserve\",status=\"201\"} 3\n"
                                       "t_requests_total{route=\"reserve\",status=\"409\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE t_lag gauge\nt_lag 42\n"));
    ck_assert_ptr_nonnull(strstr(text, "t_latency_seconds_bucket{le=\"0.0005\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "t_latency_seconds_bucket{le=\"0.001\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "t_latency_seconds_bucket{le=\"10\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "t_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "t_latency_seconds_count 2\n"));
    /* The sum as a number, not as one printf format spells it. */
    const char *sum = strstr(text, "\nt_latency_seconds_sum ");
    ck_assert_ptr_nonnull(sum);
    ck_assert_double_eq_tol(strtod(sum + strlen("\nt_latency_seconds_sum "), NULL), 20.0007, 1e-9);
    /* HELP and TYPE once per family. */
    ck_assert_ptr_null(strstr(strstr(text, "# TYPE t_requests_total") + 1, "# TYPE t_requests_total"));
    free(text);
}
END_TEST

/* Integers as JSON Schema reads them (the HTTP bodies): any whole number within 64 bits. */
static const struct {
    const char *number;
    int ok;
    int64_t want;
} whole_cases[] = {
    {"5", 1, 5},
    {"5.0", 1, 5},
    {"5.000", 1, 5},
    {"0.5e1", 1, 5},
    {"50E-1", 1, 5},
    {"1.5e1", 1, 15},
    {"1e3", 1, 1000},
    {"-0.0", 1, 0},
    {"0e99", 1, 0},
    {"-12.0", 1, -12},
    {"9223372036854775807", 1, INT64_MAX},
    {"9223372036854775807.0", 1, INT64_MAX},
    {"-9223372036854775808", 1, INT64_MIN},
    {"9223372036854775808", 0, 0},
    {"92233720368547758070e-1", 1, INT64_MAX},
    {"1e19", 0, 0},
    {"1e999", 0, 0},
    {"5.5", 0, 0},
    {"5.0000000000000000000000000000000000000000000000000000000000000000000001", 0, 0},
    {"1e-1", 0, 0},
    {"\"5\"", 0, 0},
    {"true", 0, 0},
};

START_TEST(json_whole_numbers)
{
    vc_jdoc_t doc;
    char err[256] = "", json[256];
    int64_t got = -1;

    snprintf(json, sizeof(json), "{\"n\":%s}", whole_cases[_i].number);
    ck_assert_msg(vc_jdoc_parse(&doc, json, strlen(json), err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(vc_jdoc_whole(&doc, "n", &got, err, sizeof(err)),
                     whole_cases[_i].ok ? 0 : VC_ERR_INVALID);
    if (whole_cases[_i].ok)
        ck_assert_int_eq(got, whole_cases[_i].want);
    vc_jdoc_free(&doc);
}
END_TEST

static atomic_int stops, stop_signum;

static void count_stop(int signum)
{
    atomic_fetch_add(&stops, 1);
    atomic_store(&stop_signum, signum);
}

/*
 * vc_signal: SIGPIPE no longer ends the process, the first stop signal
 * reaches the callback after starting the shutdown's countdown, and later
 * ones change nothing. (raise() runs the handler before it returns.)
 */
START_TEST(signals_one_way)
{
    ck_assert_int_eq(vc_signal_install(count_stop), 0);
    ck_assert_int_eq(raise(SIGPIPE), 0);
    ck_assert_int_eq(atomic_load(&stops), 0);
    ck_assert_int_eq(vc_shutdown_deadline_ms(), 0);
    ck_assert_int_eq(raise(SIGTERM), 0);
    ck_assert_int_eq(atomic_load(&stops), 1);
    ck_assert_int_eq(atomic_load(&stop_signum), SIGTERM);
    ck_assert_int_eq(raise(SIGINT), 0);
    ck_assert_int_eq(raise(SIGTERM), 0);
    ck_assert_int_eq(atomic_load(&stops), 1);
}
END_TEST

static Suite *common_suite(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, json_whole_numbers, 0, sizeof(whole_cases) / sizeof(whole_cases[0]));
    tcase_add_test(tc, event_roundtrip_reserved);
    tcase_add_test(tc, event_roundtrip_released);
    tcase_add_test(tc, event_roundtrip_confirmed_amounts);
    tcase_add_test(tc, event_roundtrip_campaign);
    tcase_add_test(tc, event_encode_rejects_invalid);
    tcase_add_test(tc, event_encode_is_the_generators_text);
    tcase_add_test(tc, time_format_is_the_formats_text);
    tcase_add_test(tc, order_id_characters);
    tcase_add_test(tc, jout_escapes_as_yajl);
    tcase_add_loop_test(tc, event_decode_rejects_malformed, 0,
                        sizeof(bad_events) / sizeof(bad_events[0]));
    tcase_add_test(tc, event_decode_rejects_embedded_nul);
    tcase_add_loop_test(tc, event_decode_rejects_nul_escape_in_every_string, 0,
                        sizeof(nul_templates) / sizeof(nul_templates[0]));
    tcase_add_loop_test(tc, event_decode_is_strict, 0,
                        sizeof(strict_events) / sizeof(strict_events[0]));
    tcase_add_test(tc, event_decode_bounds_nesting);
    tcase_add_test(tc, json_same_compares_meaning);
    tcase_add_test(tc, jdoc_parse_strict);
    tcase_add_test(tc, log_lines_are_json);
    tcase_add_test(tc, time_parse_and_format);
    tcase_add_test(tc, config_defaults_env_flags);
    tcase_add_test(tc, config_env_fallback);
    tcase_add_test(tc, config_errors_name_the_setting);
    tcase_add_test(tc, config_empty_value_is_an_error);
    tcase_add_test(tc, pg_dsn_check);
    tcase_add_test(tc, json_pick_str_follows_the_path);
    tcase_add_test(tc, redis_url_parsing);
    tcase_add_test(tc, redis_url_credentials);
    tcase_add_test(tc, redis_url_redaction);
    tcase_add_test(tc, voucher_rules);
    tcase_add_test(tc, voucher_price_ignores_the_clock);
    tcase_add_test(tc, metrics_render_prometheus_text);
    tcase_add_test(tc, signals_one_way);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(common_suite());
}
