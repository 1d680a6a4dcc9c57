/*
 * The reconciler's fencing token (reconciler/rc_leader.h): the generation as
 * PostgreSQL returns it, the leader key of a voucher's or campaign's keys,
 * and the refusals of leader.lua and leader_mark.lua, read back. Pure, no
 * servers; the scripts' words are checked against the embedded scripts.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "rc_leader.h"
#include "rc_redis.h"
#include "vc_error.h"
#include "vc_lua.h"

START_TEST(parse)
{
    static const struct {
        const char *text;
        int rc;
        int64_t generation;
    } cases[] = {
        {"1", 0, 1},
        {"42", 0, 42},
        {"9007199254740992", 0, (int64_t)1 << 53}, /* the largest Lua compares exactly */
        {"9007199254740993", VC_ERR_PROTOCOL, 0},  /* one more: two generations would tie */
        {"99999999999999999999999", VC_ERR_PROTOCOL, 0},
        {"0", VC_ERR_PROTOCOL, 0}, /* the table starts at 0: no lock ever had it */
        {"", VC_ERR_PROTOCOL, 0},
        {"-3", VC_ERR_PROTOCOL, 0},
        {"12 ", VC_ERR_PROTOCOL, 0},
        {"1e3", VC_ERR_PROTOCOL, 0},
        {"0x10", VC_ERR_PROTOCOL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t g = -1;
        ck_assert_msg(rc_leader_parse(cases[i].text, &g) == cases[i].rc, "%s", cases[i].text);
        ck_assert_msg(g == cases[i].generation, "%s: %lld", cases[i].text, (long long)g);
    }
}
END_TEST

START_TEST(key)
{
    static const struct {
        const char *key, *leader;
    } cases[] = {
        {"voucher:{FLASH100}:remaining", "voucher:{FLASH100}:leader"},
        {"voucher:{FLASH100}:orders", "voucher:{FLASH100}:leader"},
        /* A restore in steps' staged keys: the voucher's slot, the voucher's leader key. */
        {"voucher:{A-1}:restoring:0123456789abcdef0123456789abcdef:orders", "voucher:{A-1}:leader"},
        {"campaign:{c7}:taken", "campaign:{c7}:leader"},
        /* Redis's rule: the first '{' and the first '}' after it. */
        {"voucher:{X}:{Y}:orders", "voucher:{X}:leader"},
    };
    char out[RC_LEADER_KEY_MAX];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(rc_leader_key(cases[i].key, out, sizeof(out)), 0);
        ck_assert_str_eq(out, cases[i].leader);
    }
    /* The key the pass marks (rc_keys_of()) is the one the scripts check (rc_redis_eval()). */
    rc_keys_t k;
    rc_keys_of("FLASH100", &k);
    for (int i = 0; i < VC_VOUCHER_KEY_COUNT; i++) {
        ck_assert_int_eq(rc_leader_key(k.name[i], out, sizeof(out)), 0);
        ck_assert_str_eq(out, k.name[VC_VOUCHER_KEY_LEADER]);
    }
    /* No hash tag, or an empty one: no slot of a voucher's to put it in. */
    ck_assert_int_eq(rc_leader_key("voucher:fence", out, sizeof(out)), VC_ERR_INVALID);
    ck_assert_int_eq(rc_leader_key("voucher:{}:orders", out, sizeof(out)), VC_ERR_INVALID);
    ck_assert_int_eq(rc_leader_key("voucher:{CODE:orders", out, sizeof(out)), VC_ERR_INVALID);
    ck_assert_int_eq(rc_leader_key("voucher:{FLASH100}:orders", out, 20), VC_ERR_INVALID);
}
END_TEST

/* rc_leader_refusal() of a C string. */
static int refusal(const char *text, rc_leader_refusal_t *r)
{
    return rc_leader_refusal(text, strlen(text), r);
}

START_TEST(refusals)
{
    rc_leader_refusal_t r;

    ck_assert_int_eq(refusal("STALE_LEADER voucher:{V}:leader 8 7", &r), 1);
    ck_assert_int_eq(r.why, RC_LEADER_REFUSED_STALE);
    ck_assert_str_eq(r.key, "voucher:{V}:leader");
    ck_assert_int_eq(r.held, 8);
    ck_assert_int_eq(r.token, 7);
    ck_assert_int_eq(rc_leader_error(&r), VC_ERR_STALE_LEADER);

    ck_assert_int_eq(refusal("LEADER_UNMARKED campaign:{c3}:leader - 7", &r), 1);
    ck_assert_int_eq(r.why, RC_LEADER_REFUSED_UNMARKED);
    ck_assert_int_eq(r.held, 0);
    ck_assert_int_eq(rc_leader_error(&r), VC_ERR_LEADER_UNMARKED);
    ck_assert_int_eq(refusal("LEADER_UNMARKED voucher:{V}:leader 5 7", &r), 1);
    ck_assert_int_eq(r.held, 5);

    /* Anything else is another error, left to its caller (never taken for a refusal). */
    memset(&r, 0x5a, sizeof(r));
    ck_assert_int_eq(refusal("ERR Error running script", &r), 0);
    ck_assert_int_eq(refusal("STALE_LEADER voucher:{V}:leader 7 7", &r), 0); /* not higher */
    ck_assert_int_eq(refusal("LEADER_UNMARKED voucher:{V}:leader 9 7", &r), 0); /* higher */
    ck_assert_int_eq(refusal("STALE_LEADER voucher:{V}:leader x 7", &r), 0);
    ck_assert_int_eq(refusal("STALE_LEADER voucher:{V}:leader 8", &r), 0);
    ck_assert_int_eq(refusal("NOSCRIPT STALE_LEADER", &r), 0);
    ck_assert_int_eq(r.held, 0x5a5a5a5a5a5a5a5a); /* untouched */
}
END_TEST

/* The words the C side reads are the ones the scripts write. */
START_TEST(words)
{
    ck_assert_ptr_nonnull(strstr(vc_lua_leader, "'" RC_LEADER_STALE " '"));
    ck_assert_ptr_nonnull(strstr(vc_lua_leader, "'" RC_LEADER_UNMARKED " '"));
    ck_assert_ptr_nonnull(strstr(vc_lua_leader_mark, "'" RC_LEADER_STALE " '"));
    /* Every rc_ script starts with the guard (what rc_redis_eval() tells them by). */
    const char *const scripts[] = {
        vc_lua_rc_restore,       vc_lua_rc_retake,         vc_lua_rc_lower,
        vc_lua_rc_rebuild,       vc_lua_rc_release_begin,  vc_lua_rc_release_finish,
        vc_lua_rc_repair_confirmed, vc_lua_rc_restore_stage, vc_lua_rc_restore_swap,
        vc_lua_rc_rebuild_swap,  vc_lua_rc_limit_sync,     vc_lua_rc_fence,
        vc_lua_rc_campaign_rebuild, vc_lua_rc_campaign_release_begin,
        vc_lua_rc_campaign_release_finish};
    for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
        ck_assert_msg(strncmp(scripts[i], vc_lua_leader, strlen(vc_lua_leader)) == 0,
                      "rc script %zu does not start with leader.lua", i);
    /* The gateway's own scripts do not: its hot path is unchanged. */
    ck_assert_int_ne(strncmp(vc_lua_release_begin, vc_lua_leader, strlen(vc_lua_leader)), 0);
    ck_assert_int_ne(strncmp(vc_lua_reserve, vc_lua_leader, strlen(vc_lua_leader)), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_leader");
    TCase *tc = tcase_create("token");

    tcase_add_test(tc, parse);
    tcase_add_test(tc, key);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, words);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
