/* Unit tests for common/vc_kafka_conf: librdkafka settings passed through. */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"

static const char *const reserved[] = {"acks", "enable.idempotence", "group.id", NULL};

/* err starts with prefix and goes on with a reason of some words. */
static int has_reason(const char *err, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(err, prefix, n) == 0 && strlen(err + n) >= 3;
}

START_TEST(list_splits_pairs_in_order)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char err[256];

    ck_assert_int_eq(vc_kafka_settings_add_list(&s,
                                                "client.rack=r1, security.protocol=SASL_SSL,"
                                                "sasl.password=a=b,,socket.timeout.ms=",
                                                "test", err, sizeof(err)),
                     0);
    ck_assert_uint_eq(s.n, 4);
    ck_assert_str_eq(s.pairs[0].key, "client.rack");
    ck_assert_str_eq(s.pairs[0].value, "r1");
    ck_assert_str_eq(s.pairs[1].key, "security.protocol"); /* the space after ',' is not the key */
    ck_assert_str_eq(s.pairs[1].value, "SASL_SSL");
    ck_assert_str_eq(s.pairs[2].key, "sasl.password"); /* the value keeps its own '=' */
    ck_assert_str_eq(s.pairs[2].value, "a=b");
    ck_assert_str_eq(s.pairs[3].key, "socket.timeout.ms");
    ck_assert_str_eq(s.pairs[3].value, "");
    ck_assert_str_eq(s.pairs[3].from, "test");
    vc_kafka_settings_free(&s);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.pairs);
}
END_TEST

START_TEST(load_takes_the_flags_out_of_argv_after_the_variable)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char a0[] = "prog", a1[] = "--kafka", a2[] = "debug=broker,topic", a3[] = "--log-level",
         a4[] = "debug", a5[] = "--kafka=client.rack=r2", a6[] = "dlt", a7[] = "--",
         a8[] = "--kafka", a9[] = "after=dashes";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, NULL};
    int argc = 10;
    char err[256];

    ck_assert_int_eq(vc_kafka_settings_load(&s, "client.rack=r1,socket.keepalive.enable=true",
                                            &argc, argv, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(s.n, 4);
    ck_assert_str_eq(s.pairs[0].key, "client.rack");
    ck_assert_str_eq(s.pairs[0].value, "r1");
    ck_assert_ptr_nonnull(strstr(s.pairs[0].from, "VOUCHER_KAFKA_CONF"));
    ck_assert_str_eq(s.pairs[1].key, "socket.keepalive.enable");
    /* A flag's value is one pair: it may hold ','. */
    ck_assert_str_eq(s.pairs[2].key, "debug");
    ck_assert_str_eq(s.pairs[2].value, "broker,topic");
    ck_assert_ptr_nonnull(strstr(s.pairs[2].from, "--kafka"));
    ck_assert_str_eq(s.pairs[3].key, "client.rack");
    ck_assert_str_eq(s.pairs[3].value, "r2");
    /* The rest stays, in order; after "--" nothing is taken. */
    ck_assert_int_eq(argc, 7);
    ck_assert_str_eq(argv[1], "--log-level");
    ck_assert_str_eq(argv[2], "debug");
    ck_assert_str_eq(argv[3], "dlt");
    ck_assert_str_eq(argv[4], "--");
    ck_assert_str_eq(argv[5], "--kafka");
    ck_assert_str_eq(argv[6], "after=dashes");
    ck_assert_ptr_null(argv[7]);
    vc_kafka_settings_free(&s);
}
END_TEST

START_TEST(load_refuses_a_flag_without_value)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char a0[] = "prog", a1[] = "--kafka";
    char *argv[] = {a0, a1, NULL};
    int argc = 2;
    char err[256];

    ck_assert_int_eq(vc_kafka_settings_load(&s, NULL, &argc, argv, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_str_eq(err, "option --kafka needs a value (key=value)");
    vc_kafka_settings_free(&s);
}
END_TEST

/* Lists with a pair that is not key=value, and how the error must quote it. */
static const struct {
    const char *list, *quoted;
} malformed[] = {
    {"client.rack", "\"client.rack\""}, /* no '=' */
    {"=r1", "\"=r1\""},                 /* empty key */
    {"  =r1", "\"  =r1\""},             /* only spaces before '=' */
    {"a=1,b", "\"b\""},                 /* the second pair of the list */
};

START_TEST(malformed_pairs_are_refused)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char err[256];

    ck_assert_int_eq(vc_kafka_settings_add_list(&s, malformed[_i].list,
                                                "environment variable VOUCHER_KAFKA_CONF", err,
                                                sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_msg(strstr(err, malformed[_i].quoted), "%s: error does not quote %s: %s",
                  malformed[_i].list, malformed[_i].quoted, err);
    ck_assert_ptr_nonnull(strstr(err, "environment variable VOUCHER_KAFKA_CONF: kafka setting "));
    ck_assert_ptr_nonnull(strstr(err, ": expected key=value"));
    vc_kafka_settings_free(&s);
}
END_TEST

START_TEST(reserved_keys_are_refused_naming_key_and_owner)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256];

    ck_assert_int_eq(
        vc_kafka_settings_add(&s, "client.rack=r1", "option --kafka", err, sizeof(err)), 0);
    ck_assert_int_eq(
        vc_kafka_settings_add(&s, "group.id=other", "option --kafka", err, sizeof(err)), 0);
    ck_assert_int_eq(
        vc_kafka_settings_check(&s, "the writer's consumer", reserved, err, sizeof(err)),
        VC_ERR_INVALID);
    ck_assert_str_eq(err, "option --kafka: kafka setting group.id: the writer's consumer sets it "
                          "itself (its guarantees depend on it)");
    /* The daemon's own value stays in the conf. */
    ck_assert_int_eq(rd_kafka_conf_set(conf, "group.id", "mine", err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    ck_assert_int_eq(
        vc_kafka_settings_apply(&s, conf, "the writer's consumer", reserved, err, sizeof(err)),
        VC_ERR_INVALID);
    {
        char value[64];
        size_t len = sizeof(value);
        ck_assert_int_eq(rd_kafka_conf_get(conf, "group.id", value, &len), RD_KAFKA_CONF_OK);
        ck_assert_str_eq(value, "mine");
    }
    /* Without the reservation the same pairs are fine. */
    ck_assert_int_eq(vc_kafka_settings_check(&s, "a tool", NULL, err, sizeof(err)), 0);
    rd_kafka_conf_destroy(conf);
    vc_kafka_settings_free(&s);
}
END_TEST

START_TEST(the_partitioner_is_set_in_one_place_and_never_overridden)
{
    static const vc_kafka_own_t own[] = {VC_KAFKA_OWN_PARTITIONER, {NULL, NULL}};
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char err[512], value[64];
    size_t len = sizeof(value);
    rd_kafka_conf_t *conf =
        vc_kafka_conf_new("127.0.0.1:1", "test", own, NULL, "the test", NULL, err, sizeof(err));

    ck_assert_ptr_nonnull(conf);
    ck_assert_int_eq(rd_kafka_conf_get(conf, "partitioner", value, &len), RD_KAFKA_CONF_OK);
    ck_assert_str_eq(value, VC_KAFKA_PARTITIONER);
    ck_assert_str_eq(VC_KAFKA_PARTITIONER, "murmur2_random"); /* the Java client's, and the gateway's */

    /* Refused by every handle, even one whose own list does not name it. */
    ck_assert_int_eq(vc_kafka_settings_add(&s, "partitioner=consistent_random", "option --kafka",
                                           err, sizeof(err)),
                     0);
    ck_assert_int_eq(vc_kafka_settings_apply(&s, conf, "the dlt replayer", NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "partitioner"));
    ck_assert_ptr_nonnull(strstr(err, "murmur2_random"));
    ck_assert_int_eq(vc_kafka_settings_check(&s, "the dlt replayer", NULL, err, sizeof(err)),
                     VC_ERR_INVALID);
    len = sizeof(value);
    ck_assert_int_eq(rd_kafka_conf_get(conf, "partitioner", value, &len), RD_KAFKA_CONF_OK);
    ck_assert_str_eq(value, VC_KAFKA_PARTITIONER);
    rd_kafka_conf_destroy(conf);
    vc_kafka_settings_free(&s);
}
END_TEST

START_TEST(librdkafka_errors_are_passed_on)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char err[256];

    ck_assert_int_eq(
        vc_kafka_settings_add(&s, "no.such.property=1", "option --kafka", err, sizeof(err)), 0);
    ck_assert_int_eq(vc_kafka_settings_check(&s, "the gateway", reserved, err, sizeof(err)),
                     VC_ERR_INVALID);
    /* Ours is the prefix naming where the setting came from; the reason after
     * it is librdkafka's, whose wording is not ours to pin: only that it is there. */
    ck_assert_msg(has_reason(err, "option --kafka: kafka setting no.such.property: "), "%s", err);
    vc_kafka_settings_free(&s);

    ck_assert_int_eq(vc_kafka_settings_add(&s, "socket.keepalive.enable=maybe", "option --kafka",
                                           err, sizeof(err)),
                     0);
    ck_assert_int_eq(vc_kafka_settings_check(&s, "the gateway", reserved, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_msg(has_reason(err, "option --kafka: kafka setting socket.keepalive.enable: "),
                  "librdkafka's reason missing: %s", err);
    vc_kafka_settings_free(&s);
}
END_TEST

START_TEST(valid_pairs_reach_the_conf)
{
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256], value[64];
    size_t len = sizeof(value);

    ck_assert_int_eq(vc_kafka_settings_add_list(&s, "client.rack=r1,socket.keepalive.enable=true",
                                                "test", err, sizeof(err)),
                     0);
    ck_assert_int_eq(vc_kafka_settings_apply(&s, conf, "the gateway", reserved, err, sizeof(err)),
                     0);
    ck_assert_int_eq(rd_kafka_conf_get(conf, "client.rack", value, &len), RD_KAFKA_CONF_OK);
    ck_assert_str_eq(value, "r1");
    len = sizeof(value);
    ck_assert_int_eq(rd_kafka_conf_get(conf, "socket.keepalive.enable", value, &len),
                     RD_KAFKA_CONF_OK);
    ck_assert_str_eq(value, "true");
    /* None given, or no settings at all: nothing to refuse. */
    ck_assert_int_eq(vc_kafka_settings_apply(NULL, conf, "the gateway", reserved, err, sizeof(err)),
                     0);
    vc_kafka_settings_free(&s);
    ck_assert_int_eq(vc_kafka_settings_check(&s, "the gateway", reserved, err, sizeof(err)), 0);
    rd_kafka_conf_destroy(conf);
}
END_TEST

START_TEST(conf_new_builds_one_handle_the_same_way_for_every_daemon)
{
    static const char *const reserved[] = {"acks", NULL};
    const vc_kafka_own_t own[] = {
        {"acks", "all"}, {"group.id", NULL}, VC_KAFKA_OWN_PARTITIONER, {NULL, NULL}};
    const vc_kafka_own_t bad[] = {{"acks", "sometimes"}, {NULL, NULL}};
    vc_kafka_settings_t s = VC_KAFKA_SETTINGS_INIT;
    char err[512] = "", value[64];
    size_t len;
    rd_kafka_conf_t *conf;

    ck_assert_int_eq(vc_kafka_settings_add(&s, "linger.ms=7", "option --kafka", err, sizeof(err)),
                     0);
    conf = vc_kafka_conf_new("10.0.0.1:9092", "voucher-test", own, &s, "the test", reserved, err,
                             sizeof(err));
    ck_assert_msg(conf != NULL, "%s", err);
    static const char *const want[][2] = {{"bootstrap.servers", "10.0.0.1:9092"},
                                          {"client.id", "voucher-test"},
                                          {"acks", "-1"}, /* librdkafka's name for all */
                                          {"partitioner", VC_KAFKA_PARTITIONER},
                                          {"linger.ms", "7"}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        len = sizeof(value);
        ck_assert_int_eq(rd_kafka_conf_get(conf, want[i][0], value, &len), RD_KAFKA_CONF_OK);
        ck_assert_str_eq(value, want[i][1]);
    }
    /* A NULL value is skipped: no group.id was set. */
    len = sizeof(value);
    ck_assert(rd_kafka_conf_get(conf, "group.id", value, &len) != RD_KAFKA_CONF_OK ||
              value[0] == '\0');
    rd_kafka_conf_destroy(conf);

    /* A bad own setting, and a passthrough setting of a reserved key, give no conf. */
    ck_assert_ptr_null(vc_kafka_conf_new("h:1", "c", bad, NULL, "the test", NULL, err,
                                         sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "kafka setting acks=sometimes"));
    vc_kafka_settings_free(&s);
    ck_assert_int_eq(vc_kafka_settings_add(&s, "acks=1", "option --kafka", err, sizeof(err)), 0);
    ck_assert_ptr_null(vc_kafka_conf_new("h:1", "c", own, &s, "the test", reserved, err,
                                         sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "the test sets it itself"));
    vc_kafka_settings_free(&s);
}
END_TEST

static Suite *kafka_conf_suite(void)
{
    Suite *s = suite_create("kafka_conf");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, list_splits_pairs_in_order);
    tcase_add_test(tc, load_takes_the_flags_out_of_argv_after_the_variable);
    tcase_add_test(tc, load_refuses_a_flag_without_value);
    tcase_add_loop_test(tc, malformed_pairs_are_refused, 0,
                        sizeof(malformed) / sizeof(malformed[0]));
    tcase_add_test(tc, reserved_keys_are_refused_naming_key_and_owner);
    tcase_add_test(tc, the_partitioner_is_set_in_one_place_and_never_overridden);
    tcase_add_test(tc, librdkafka_errors_are_passed_on);
    tcase_add_test(tc, valid_pairs_reach_the_conf);
    tcase_add_test(tc, conf_new_builds_one_handle_the_same_way_for_every_daemon);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(kafka_conf_suite());
}
