/*
 * vc_redis_cluster: the hash slot (the spec's CRC16 vector, the hash tag
 * rules), the slot map read from a CLUSTER SLOTS reply and the MOVED and ASK
 * errors, all recorded from the cluster deploy/stack up --cluster starts
 * (tests/unit/fixtures/redis_cluster, raw RESP as the server sent it), and
 * the cluster URL.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "vc_redis_block.h"
#include "vc_redis_cluster.h"

/* Reads a recorded reply through hiredis's own parser. The caller frees it. */
static redisReply *fixture_reply(const char *name)
{
    const char *dir = getenv("VC_FIXTURES");
    char path[512], buf[8192];
    redisReader *reader = redisReaderCreate();
    void *reply = NULL;
    size_t n;
    FILE *f;

    ck_assert_msg(dir != NULL, "VC_FIXTURES is not set (meson sets it)");
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_msg((f = fopen(path, "rb")) != NULL, "cannot open %s", path);
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    ck_assert_int_eq(redisReaderFeed(reader, buf, n), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(reader, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReaderFree(reader);
    return reply;
}

START_TEST(crc16_spec_vector)
{
    /* The Redis Cluster specification, appendix A: CRC16 of "123456789". */
    ck_assert_uint_eq(vc_redis_crc16("123456789", 9), 0x31C3);
    ck_assert_uint_eq(vc_redis_crc16("", 0), 0);
}
END_TEST

START_TEST(key_slot_follows_the_hash_tag)
{
    static const struct {
        const char *key;
        const char *hashed; /* what Redis hashes for it */
    } cases[] = {
        {"voucher:{SUMMER}:remaining", "SUMMER"},
        {"voucher:{SUMMER}:orders", "SUMMER"},
        {"foo{}{bar}", "foo{}{bar}"},   /* an empty tag: the whole key */
        {"foo{{bar}}zap", "{bar"},      /* up to the first '}' */
        {"foo{bar}{zap}", "bar"},       /* the first tag only */
        {"no-tag", "no-tag"},
        {"open{only", "open{only"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(vc_redis_key_slot(cases[i].key, strlen(cases[i].key)) ==
                          vc_redis_crc16(cases[i].hashed, strlen(cases[i].hashed)) % 16384,
                      "%s", cases[i].key);
    /* As CLUSTER KEYSLOT answered on the running cluster. */
    ck_assert_uint_eq(vc_redis_key_slot("voucher:{ABC}:remaining", 23), 14740);
    ck_assert_uint_eq(vc_redis_key_slot("voucher-order:{X1}", 18), 8548);
}
END_TEST

START_TEST(tag_slot_is_the_slot_of_every_tagged_key)
{
    char long_tag[600];

    /* The blocking client routes a voucher's or a claim's commands by their tag alone. */
    ck_assert_uint_eq(vc_redis_tag_slot("ABC"), 14740);
    ck_assert_uint_eq(vc_redis_tag_slot("X1"), 8548);
    ck_assert_uint_eq(vc_redis_tag_slot("SUMMER"),
                      vc_redis_key_slot("voucher:{SUMMER}:holds", 22));
    /* A tag longer than the stack buffer is hashed whole all the same. */
    memset(long_tag, 'Q', sizeof(long_tag) - 1);
    long_tag[sizeof(long_tag) - 1] = '\0';
    ck_assert_uint_eq(vc_redis_tag_slot(long_tag),
                      vc_redis_crc16(long_tag, sizeof(long_tag) - 1) % 16384);
}
END_TEST

START_TEST(slot_map_from_recorded_cluster_slots)
{
    static vc_redis_slot_map_t m;
    redisReply *reply = fixture_reply("cluster_slots.resp");
    char err[256];
    int a, b, c;

    ck_assert_int_eq(vc_redis_slot_map_from_reply(&m, reply, "127.0.0.1", err, sizeof(err)), 0);
    freeReplyObject(reply);
    /* Three masters; the replicas are not in the map. */
    ck_assert_int_eq(m.nnodes, 3);
    a = m.owner[0];
    b = m.owner[5461];
    c = m.owner[16383];
    ck_assert_int_eq(m.nodes[a].port, 22241);
    ck_assert_int_eq(m.nodes[b].port, 22242);
    ck_assert_int_eq(m.nodes[c].port, 22243);
    ck_assert_str_eq(m.nodes[c].host, "127.0.0.1");
    ck_assert_int_eq(m.owner[5460], a);
    ck_assert_int_eq(m.owner[10922], b);
    ck_assert_int_eq(m.owner[10923], c);
    for (int s = 0; s < VC_REDIS_SLOTS; s++)
        ck_assert_int_ne(m.owner[s], VC_REDIS_NO_NODE);
}
END_TEST

START_TEST(slot_map_refuses_other_shapes)
{
    static vc_redis_slot_map_t m;
    redisReply *reply = fixture_reply("moved.resp"); /* an error, not an array */
    char err[256];

    ck_assert_int_eq(vc_redis_slot_map_from_reply(&m, reply, "127.0.0.1", err, sizeof(err)),
                     VC_ERR_PROTOCOL);
    ck_assert_int_eq(m.nnodes, 0);
    ck_assert_int_eq(m.owner[0], VC_REDIS_NO_NODE);
    freeReplyObject(reply);
    ck_assert_int_eq(vc_redis_slot_map_from_reply(&m, NULL, "127.0.0.1", err, sizeof(err)),
                     VC_ERR_PROTOCOL);
}
END_TEST

START_TEST(moved_and_ask_from_recorded_errors)
{
    static vc_redis_slot_map_t m;
    redisReply *moved = fixture_reply("moved.resp"), *ask = fixture_reply("ask.resp"),
               *slots = fixture_reply("cluster_slots.resp");
    vc_redis_redirect_t r;
    char err[256];

    ck_assert_int_eq(moved->type, REDIS_REPLY_ERROR);
    ck_assert_int_eq(vc_redis_redirect_parse(moved->str, moved->len, &r), VC_REDIS_MOVED);
    ck_assert_uint_eq(r.slot, 14740);
    ck_assert_str_eq(r.host, "127.0.0.1");
    ck_assert_int_eq(r.port, 22243);

    ck_assert_int_eq(vc_redis_redirect_parse(ask->str, ask->len, &r), VC_REDIS_ASK);
    ck_assert_uint_eq(r.slot, 14740);
    ck_assert_int_eq(r.port, 22241);

    /* A MOVED moves the slot in the map, and that slot only. */
    ck_assert_int_eq(vc_redis_slot_map_from_reply(&m, slots, "127.0.0.1", err, sizeof(err)), 0);
    ck_assert_int_eq(m.nodes[m.owner[14740]].port, 22243);
    ck_assert_int_eq(vc_redis_redirect_parse(ask->str, ask->len, &r), VC_REDIS_ASK);
    r.kind = VC_REDIS_MOVED;
    ck_assert_int_eq(vc_redis_slot_map_moved(&m, &r), 0);
    ck_assert_int_eq(m.nodes[m.owner[14740]].port, 22241);
    ck_assert_int_eq(m.nodes[m.owner[14741]].port, 22243);
    ck_assert_int_eq(m.nnodes, 3);
    /* A node not yet known is added. */
    r.port = 22299;
    ck_assert_int_eq(vc_redis_slot_map_moved(&m, &r), 0);
    ck_assert_int_eq(m.nnodes, 4);
    ck_assert_int_eq(m.nodes[m.owner[14740]].port, 22299);
    freeReplyObject(moved);
    freeReplyObject(ask);
    freeReplyObject(slots);
}
END_TEST

START_TEST(other_errors_are_no_redirect)
{
    static const char *const cases[] = {
        "ERR unknown command", "MOVED", "MOVED 16384 127.0.0.1:1", "MOVED x 127.0.0.1:1",
        "MOVED 1 127.0.0.1", "MOVED 1 127.0.0.1:0", "ASK 1 127.0.0.1:1 more", "MOVEDX 1 a:1",
        "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys request during rehashing",
    };
    vc_redis_redirect_t r;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(vc_redis_redirect_parse(cases[i], strlen(cases[i]), &r) ==
                          VC_REDIS_NOT_REDIRECT,
                      "%s", cases[i]);
}
END_TEST

START_TEST(cluster_url)
{
    vc_redis_cluster_url_t u;
    char err[512];

    ck_assert(vc_redis_url_is_cluster("redis+cluster://127.0.0.1:7000"));
    ck_assert(!vc_redis_url_is_cluster("redis://127.0.0.1:7000/0"));
    ck_assert_int_eq(vc_redis_cluster_url_parse("redis+cluster://u:p%40ss@127.0.0.1:7000,"
                                                "127.0.0.1:7001/",
                                                &u, err, sizeof(err)),
                     0);
    ck_assert_int_eq(u.nseeds, 2);
    ck_assert_str_eq(u.seed[1].host, "127.0.0.1");
    ck_assert_int_eq(u.seed[1].port, 7001);
    ck_assert_str_eq(u.seed[1].user, "u");
    ck_assert_str_eq(u.seed[1].password, "p@ss");

    static const char *const bad[] = {
        "redis://127.0.0.1:7000",           "redis+cluster://",
        "redis+cluster://127.0.0.1:7000/3", "redis+cluster://127.0.0.1",
        "redis+cluster://a:1,,b:2",         "redis+cluster://u@127.0.0.1:7000",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(vc_redis_cluster_url_parse(bad[i], &u, err, sizeof(err)) == VC_ERR_INVALID,
                      "%s", bad[i]);
    /* The password is never shown. */
    ck_assert_int_eq(vc_redis_cluster_url_parse("redis+cluster://u:secret@h:1/5", &u, err,
                                                sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_ptr_null(strstr(err, "secret"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_cluster");
    TCase *tc = tcase_create("routing");

    tcase_add_test(tc, crc16_spec_vector);
    tcase_add_test(tc, key_slot_follows_the_hash_tag);
    tcase_add_test(tc, tag_slot_is_the_slot_of_every_tagged_key);
    tcase_add_test(tc, slot_map_from_recorded_cluster_slots);
    tcase_add_test(tc, slot_map_refuses_other_shapes);
    tcase_add_test(tc, moved_and_ask_from_recorded_errors);
    tcase_add_test(tc, other_errors_are_no_redirect);
    tcase_add_test(tc, cluster_url);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
