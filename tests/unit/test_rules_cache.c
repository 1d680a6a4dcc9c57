/*
 * gw_rules: the rules cache under codes a client chooses. PostgreSQL is
 * replaced by a loader on the threadpool (gw_rules_set_loader), so these run
 * with no server: misses coalesce per code, at most max_loads reads run at
 * once and the rest wait in a bounded queue, and a flood of distinct unknown
 * codes is evicted least recently used first without pushing a known voucher
 * out or refusing a new one.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ck_run.h"
#include "gw_rules.h"
#include "gw_soldout.h"
#include "vc_error.h"

static atomic_int loads, running, max_running;
static int slow_ms;

/* Codes that start with REAL exist; the others do not. */
static int test_loader(const char *code, vc_voucher_t *out, char *err, size_t errlen)
{
    int now = atomic_fetch_add(&running, 1) + 1, seen = atomic_load(&max_running);

    (void)err;
    (void)errlen;
    while (now > seen && !atomic_compare_exchange_weak(&max_running, &seen, now))
        ;
    atomic_fetch_add(&loads, 1);
    if (slow_ms)
        uv_sleep((unsigned)slow_ms);
    atomic_fetch_sub(&running, 1);
    if (strncmp(code, "REAL", 4) != 0)
        return VC_E_NOT_FOUND;
    memset(out, 0, sizeof(*out));
    snprintf(out->code, sizeof(out->code), "%s", code);
    out->total_limit = 10;
    return 0;
}

typedef struct {
    int calls, found, not_found, failed;
} answers_t;

static void answer_cb(void *arg, int rc, const vc_voucher_t *v)
{
    answers_t *a = arg;
    a->calls++;
    if (rc == 0 && v)
        a->found++;
    else if (rc == VC_E_NOT_FOUND)
        a->not_found++;
    else
        a->failed++;
}

static uv_loop_t loop;

static gw_rules_t *new_cache(int max_loads)
{
    gw_rules_t *r;

    atomic_store(&loads, 0);
    atomic_store(&running, 0);
    atomic_store(&max_running, 0);
    slow_ms = 0;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    r = gw_rules_new(&loop, NULL, 60000, 60000, max_loads);
    ck_assert_ptr_nonnull(r);
    gw_rules_set_loader(r, test_loader);
    return r;
}

static void drain(gw_rules_t *r)
{
    while (gw_rules_loading(r) > 0 || gw_rules_queued(r) > 0)
        uv_run(&loop, UV_RUN_ONCE);
}

static void end_cache(gw_rules_t *r)
{
    drain(r);
    gw_rules_free(r);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* Returns what gw_rules_get() did, counting synchronous answers into a. */
static int get(gw_rules_t *r, const char *code, answers_t *a)
{
    vc_voucher_t v;
    int rc = gw_rules_get(r, code, 0, &v, answer_cb, a);
    if (rc == 0) {
        a->calls++;
        a->found++;
    } else if (rc == VC_E_NOT_FOUND) {
        a->calls++;
        a->not_found++;
    } else if (rc != GW_RULES_PENDING) {
        a->calls++;
        a->failed++;
    }
    return rc;
}

START_TEST(misses_of_one_code_share_one_read)
{
    gw_rules_t *r = new_cache(2);
    answers_t a = {0};

    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(get(r, "NOPE", &a), GW_RULES_PENDING);
    drain(r);
    ck_assert_int_eq(a.not_found, 100);
    ck_assert_int_eq(atomic_load(&loads), 1);
    ck_assert_int_eq(get(r, "NOPE", &a), VC_E_NOT_FOUND); /* remembered */
    ck_assert_int_eq(atomic_load(&loads), 1);
    end_cache(r);
}
END_TEST

START_TEST(at_most_max_loads_reads_run_at_once)
{
    gw_rules_t *r = new_cache(2);
    answers_t a = {0};
    char code[32];

    slow_ms = 5;
    for (int i = 0; i < 40; i++) {
        snprintf(code, sizeof(code), "X%d", i);
        ck_assert_int_eq(get(r, code, &a), GW_RULES_PENDING);
    }
    ck_assert_int_eq(gw_rules_loading(r), 2);
    ck_assert_int_eq(gw_rules_queued(r), 38);
    drain(r);
    ck_assert_int_eq(a.not_found, 40);
    ck_assert_int_le(atomic_load(&max_running), 2);
    end_cache(r);
}
END_TEST

START_TEST(a_full_queue_refuses_and_recovers)
{
    gw_rules_t *r = new_cache(1);
    answers_t a = {0};
    char code[32];
    int refused = 0;

    slow_ms = 1;
    for (int i = 0; i < GW_RULES_MAX_QUEUED + 11; i++) {
        snprintf(code, sizeof(code), "Q%d", i);
        refused += get(r, code, &a) == VC_ERR_UNAVAILABLE;
    }
    ck_assert_int_eq(refused, 10); /* one running, GW_RULES_MAX_QUEUED waiting */
    drain(r);
    ck_assert_int_eq(a.not_found, GW_RULES_MAX_QUEUED + 1);
    ck_assert_int_eq(get(r, "REAL_LATER", &a), GW_RULES_PENDING);
    drain(r);
    ck_assert_int_eq(a.found, 1);
    end_cache(r);
}
END_TEST

START_TEST(a_flood_of_unknown_codes_leaves_known_ones)
{
    gw_rules_t *r = new_cache(2);
    answers_t real = {0}, flood = {0};
    char code[32];

    ck_assert_int_eq(get(r, "REAL_ONE", &real), GW_RULES_PENDING);
    drain(r);
    ck_assert_int_eq(real.found, 1);
    for (int i = 0; i < 100000; i++) {
        snprintf(code, sizeof(code), "FLOOD%d", i);
        ck_assert_int_eq(get(r, code, &flood), GW_RULES_PENDING);
        if (i % 500 == 499) {
            drain(r);
            /* The known voucher answers from memory all along. */
            ck_assert_int_eq(get(r, "REAL_ONE", &real), 0);
        }
    }
    drain(r);
    ck_assert_int_eq(flood.not_found, 100000);
    ck_assert_int_le(gw_rules_unknown(r), GW_RULES_MAX_UNKNOWN);
    ck_assert_int_eq(gw_rules_known(r), 1);
    /* A voucher never seen before still gets read (a full cache evicts, it does not refuse). */
    ck_assert_int_eq(get(r, "REAL_TWO", &real), GW_RULES_PENDING);
    drain(r);
    ck_assert_int_eq(real.failed, 0);
    ck_assert_int_eq(get(r, "REAL_TWO", &real), 0);
    ck_assert_int_eq(gw_rules_known(r), 2);
    end_cache(r);
}
END_TEST

START_TEST(soldout_marks_past_the_bound)
{
    gw_rules_t *r = new_cache(1);
    char code[32];

    /*
     * Marks of many codes take each other's slots over; the newest mark still
     * holds, and the marks take no room in the rules cache.
     */
    for (int i = 0; i < 70000; i++) {
        snprintf(code, sizeof(code), "S%d", i);
        gw_soldout_mark(code, 5000, "", 0);
    }
    ck_assert(gw_soldout_is("S69999", 1));
    ck_assert_int_eq(gw_rules_unknown(r), 0);
    end_cache(r);
}
END_TEST

START_TEST(a_change_voids_cached_rules_on_every_worker)
{
    /* Two workers' caches (ttl 60 s): a change is never served stale by either. */
    gw_rules_t *r = new_cache(2), *other = gw_rules_new(&loop, NULL, 60000, 60000, 2);
    answers_t a = {0}, b = {0};

    gw_rules_set_loader(other, test_loader);
    ck_assert_int_eq(get(r, "REALCHG", &a), GW_RULES_PENDING);
    ck_assert_int_eq(get(other, "REALCHG", &b), GW_RULES_PENDING);
    ck_assert_int_eq(get(r, "NOPECHG", &a), GW_RULES_PENDING);
    drain(r);
    drain(other);
    ck_assert_int_eq(atomic_load(&loads), 3);
    ck_assert_int_eq(get(r, "REALCHG", &a), 0); /* cached */
    ck_assert_int_eq(get(other, "REALCHG", &b), 0);
    gw_rules_changed("REALCHG");
    gw_rules_changed("NOPECHG"); /* created since it was missed */
    /* Read anew, and waited for, by both; the code's neighbours are not. */
    ck_assert_int_eq(get(r, "REALCHG", &a), GW_RULES_PENDING);
    ck_assert_int_eq(get(other, "REALCHG", &b), GW_RULES_PENDING);
    ck_assert_int_eq(get(r, "NOPECHG", &a), GW_RULES_PENDING);
    drain(r);
    drain(other);
    ck_assert_int_eq(atomic_load(&loads), 6);
    ck_assert_int_eq(get(r, "REALCHG", &a), 0);
    ck_assert_int_eq(get(other, "REALCHG", &b), 0);
    ck_assert_int_eq(atomic_load(&loads), 6);
    gw_rules_free(other);
    end_cache(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules_cache");
    TCase *tc = tcase_create("cache");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, misses_of_one_code_share_one_read);
    tcase_add_test(tc, at_most_max_loads_reads_run_at_once);
    tcase_add_test(tc, a_full_queue_refuses_and_recovers);
    tcase_add_test(tc, a_flood_of_unknown_codes_leaves_known_ones);
    tcase_add_test(tc, soldout_marks_past_the_bound);
    tcase_add_test(tc, a_change_voids_cached_rules_on_every_worker);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
