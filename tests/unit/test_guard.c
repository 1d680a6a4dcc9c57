/*
 * gw_guard's pure parts: the token bucket's arithmetic (the same as
 * common/lua/guard_take.lua's), the trusted-proxy list, and which address a
 * request is counted against.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ck_run.h"
#include "gw_guard.h"
#include "gw_login.h"
#include "vc_error.h"

static const gw_guard_rate_t hourly5 = {5, 3600000};

/* Fills b at now_ms and takes every try of it: each one is there, and then none. */
static void drain(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms)
{
    int64_t retry = -1;

    gw_guard_bucket_full(b, r, now_ms);
    for (int i = 0; i < r->tries; i++) {
        ck_assert_int_eq(gw_guard_bucket_take(b, r, now_ms, &retry), 1);
        ck_assert_int_eq(retry, 0);
    }
    ck_assert_int_eq(gw_guard_bucket_take(b, r, now_ms, &retry), 0);
}

/* Five failed tries, then the sixth is refused with the time to the next token. */
START_TEST(bucket_five_then_empty_with_retry)
{
    gw_guard_bucket_t b;
    int64_t retry = -1;

    drain(&b, &hourly5, 1000);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &hourly5, 1000, &retry), 0);
    /* One try in 3600/5 = 720 s. */
    ck_assert_int_eq(retry, 720000);
    ck_assert_int_eq(gw_guard_retry_after_s(retry), 720);
    /* Half-way there, half the wait is left; a refusal spends nothing. */
    ck_assert_int_eq(gw_guard_bucket_take(&b, &hourly5, 1000 + 360000, &retry), 0);
    ck_assert_int_eq(retry, 360000);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &hourly5, 1000 + 720000, &retry), 1);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &hourly5, 1000 + 720000, &retry), 0);
}
END_TEST

/* A check takes nothing: a success (checked, never spent) spends nothing. */
START_TEST(bucket_check_takes_nothing)
{
    gw_guard_bucket_t b;
    int64_t retry;

    gw_guard_bucket_full(&b, &hourly5, 0);
    for (int i = 0; i < 4; i++)
        gw_guard_bucket_spend(&b, &hourly5, 0); /* four typos */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(gw_guard_bucket_check(&b, &hourly5, 0, &retry), 1); /* successes */
    gw_guard_bucket_spend(&b, &hourly5, 0); /* the fifth typo */
    ck_assert_int_eq(gw_guard_bucket_check(&b, &hourly5, 0, &retry), 0);
    ck_assert_int_eq(b.level, 0);
    ck_assert_int_eq(gw_guard_bucket_ttl_ms(&b, &hourly5), 3600000);
}
END_TEST

/* Continuous refill, no lockout: full again after one window, never more than full. */
START_TEST(bucket_refills_continuously_and_caps)
{
    gw_guard_bucket_t b;
    int64_t retry;

    drain(&b, &hourly5, 0);
    ck_assert_int_eq(gw_guard_bucket_ttl_ms(&b, &hourly5), 3600000);
    /* Years later: full, not overflowed. */
    gw_guard_bucket_refill(&b, &hourly5, 1000LL * 3600000 * 24 * 365);
    ck_assert_int_eq(b.level, 5 * 3600000LL);
    drain(&b, &hourly5, b.at_ms);
    /* A clock that goes back refills nothing and takes nothing. */
    ck_assert_int_eq(gw_guard_bucket_take(&b, &hourly5, b.at_ms - 5000000, &retry), 0);
}
END_TEST

/*
 * The IP bucket: checked before, spent after a failure, into debt when
 * failures were in flight together; the debt is paid before the next try.
 */
START_TEST(bucket_check_and_spend_with_debt)
{
    const gw_guard_rate_t r = {4, 1000}; /* one try each 250 ms */
    gw_guard_bucket_t b;
    int64_t retry;

    gw_guard_bucket_full(&b, &r, 0);
    /* Ten failures in flight at once: each saw a try there. */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(gw_guard_bucket_check(&b, &r, 0, &retry), 1);
    ck_assert_int_eq(b.level, 4000); /* checking takes nothing */
    for (int i = 0; i < 10; i++)
        gw_guard_bucket_spend(&b, &r, 0);
    ck_assert_int_eq(b.level, -6000); /* 6 tries owed */
    ck_assert_int_eq(gw_guard_bucket_check(&b, &r, 0, &retry), 0);
    ck_assert_int_eq(retry, 1750); /* 7 tries to refill: the 6 owed and the next */
    ck_assert_int_eq(gw_guard_bucket_check(&b, &r, 1749, &retry), 0);
    ck_assert_int_eq(gw_guard_bucket_check(&b, &r, 1750, &retry), 1);
    ck_assert_int_eq(gw_guard_bucket_ttl_ms(&b, &r), 2500);
    /* The debt has a floor: GW_GUARD_MAX_DEBT tries. */
    b.level = -(GW_GUARD_MAX_DEBT - 1) * 1000LL;
    gw_guard_bucket_spend(&b, &r, 0);
    gw_guard_bucket_spend(&b, &r, 0);
    ck_assert_int_eq(b.level, -GW_GUARD_MAX_DEBT * 1000LL);
    /* And a bucket idle long enough is full again, even from the deepest debt. */
    gw_guard_bucket_refill(&b, &r, 1000000000);
    ck_assert_int_eq(b.level, 4000);
}
END_TEST

/* Uneven rates round the wait up to whole milliseconds and seconds. */
START_TEST(bucket_retry_rounds_up)
{
    const gw_guard_rate_t r = {3, 1000}; /* one try each 333.3 ms */
    gw_guard_bucket_t b;
    int64_t retry;

    drain(&b, &r, 0);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &r, 0, &retry), 0);
    ck_assert_int_eq(retry, 334);
    ck_assert_int_eq(gw_guard_retry_after_s(retry), 1);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &r, 333, &retry), 0);
    ck_assert_int_eq(retry, 1);
    ck_assert_int_eq(gw_guard_bucket_take(&b, &r, 334, &retry), 1);
    ck_assert_int_eq(gw_guard_retry_after_s(1001), 2);
}
END_TEST

/*
 * The check cache: remembered for its ttl, never across a failure of this
 * gateway (settled, or its spend answered), never from a check whose flight
 * overlapped one.
 */
START_TEST(cache_remembers_a_try_until_a_failure)
{
    static gw_guard_cache_t c; /* static: 64 KiB is much for a test's stack */
    const gw_guard_rate_t ip100 = {100, 3600000};
    uint64_t ip = gw_guard_cache_key("guard:{ip:v:10.0.0.1}", &ip100);
    uint64_t cu = gw_guard_cache_key("guard:{cu:v:42}", &hourly5);
    uint64_t e;

    gw_guard_cache_init(&c);
    ck_assert_uint_ne(ip, 0);
    ck_assert_uint_ne(ip, cu);
    /* Another rate is another entry (a campaign whose limits changed). */
    ck_assert_uint_ne(ip, gw_guard_cache_key("guard:{ip:v:10.0.0.1}", &hourly5));
    ck_assert_uint_eq(ip, gw_guard_cache_key("guard:{ip:v:10.0.0.1}", &ip100));

    /* Nothing is known before Redis said so. */
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 1000), 0);
    e = gw_guard_cache_epoch(&c);
    gw_guard_cache_put(&c, ip, e, 1000);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 1000), 1);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 1000 + GW_GUARD_CACHE_TTL_MS - 1), 1);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 1000 + GW_GUARD_CACHE_TTL_MS), 0);
    ck_assert_int_eq(gw_guard_cache_has(&c, cu, 1000), 0);

    /* A failure on the bucket forgets it at once. */
    gw_guard_cache_put(&c, ip, gw_guard_cache_epoch(&c), 2000);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 2001), 1);
    gw_guard_cache_fail(&c, ip);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 2001), 0);

    /*
     * A check sent before a failure (on any bucket) and answered after it is
     * not remembered: Redis may have run it before the spend.
     */
    e = gw_guard_cache_epoch(&c);
    gw_guard_cache_fail(&c, cu);
    gw_guard_cache_put(&c, ip, e, 3000);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 3000), 0);
    /* Sent after it: remembered. */
    gw_guard_cache_put(&c, ip, gw_guard_cache_epoch(&c), 3000);
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 3000), 1);

    /* Forgetting needs only the key's low bits (the spend's callback carries it in a pointer). */
    gw_guard_cache_fail(&c, ip & (GW_GUARD_CACHE_SLOTS - 1));
    ck_assert_int_eq(gw_guard_cache_has(&c, ip, 3000), 0);
}
END_TEST

/*
 * The spent set: a bucket is in it until its full-again time (plus the
 * margin), a later spend moves that later, never earlier; the set is trusted
 * only once synced, and after an entry found no room not before that entry's
 * time passed.
 */
START_TEST(spent_set_add_expire_overflow_sync)
{
    static gw_guard_spent_t s; /* static: 1 MiB */
    const int64_t now = 1764500000000; /* Redis's clock, ms */
    const int64_t m = GW_GUARD_SPENT_MARGIN_MS;
    uint64_t a = gw_guard_spent_key("guard:{cu:v:42}", strlen("guard:{cu:v:42}"));
    uint64_t b = gw_guard_spent_key("guard:{cu:v:43}", strlen("guard:{cu:v:43}"));

    gw_guard_spent_init(&s);
    ck_assert_uint_ne(a, b);
    ck_assert_uint_eq(a, gw_guard_spent_key("guard:{cu:v:42}xyz", strlen("guard:{cu:v:42}")));
    /* Not synced: nothing absent is trusted, even with an empty set. */
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now), 0);
    gw_guard_spent_sync(&s, 1);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now), 1);
    gw_guard_spent_sync(&s, 0);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now), 0);
    gw_guard_spent_sync(&s, 1);

    /* Add and expiry: in the set until full_at + margin. */
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now), 0);
    gw_guard_spent_add(&s, a, now + 5000, now);
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now), 1);
    ck_assert_int_eq(gw_guard_spent_has(&s, b, now), 0);
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now + 5000 + m - 1), 1);
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now + 5000 + m), 0);
    /* A later spend moves it later; an earlier time (a message late) does not shorten it. */
    gw_guard_spent_add(&s, a, now + 9000, now + 1000);
    gw_guard_spent_add(&s, a, now + 2000, now + 1000);
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now + 9000 + m - 1), 1);
    ck_assert_int_eq(gw_guard_spent_has(&s, a, now + 9000 + m), 0);
    /* An entry already full is not kept. */
    gw_guard_spent_add(&s, b, now - m, now);
    ck_assert_int_eq(gw_guard_spent_has(&s, b, now - m - 1), 0);

    /*
     * Overflow: keys that all probe from one slot fill its run; the next one
     * is dropped and the set is not trusted until that one's time passed;
     * the entries kept are still found, and a slot whose time passed is
     * reused.
     */
    gw_guard_spent_init(&s);
    gw_guard_spent_sync(&s, 1);
    for (uint64_t k = 0; k < GW_GUARD_SPENT_PROBE; k++)
        gw_guard_spent_add(&s, 7 + k * GW_GUARD_SPENT_SLOTS, now + 1000 + (int64_t)k, now);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now), 1);
    uint64_t extra = 7 + (uint64_t)GW_GUARD_SPENT_PROBE * GW_GUARD_SPENT_SLOTS;
    gw_guard_spent_add(&s, extra, now + 60000, now);
    ck_assert_int_eq(gw_guard_spent_has(&s, extra, now), 0);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now), 0);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now + 60000 + m - 1), 0);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now + 60000 + m), 1);
    for (uint64_t k = 0; k < GW_GUARD_SPENT_PROBE; k++)
        ck_assert_int_eq(gw_guard_spent_has(&s, 7 + k * GW_GUARD_SPENT_SLOTS, now), 1);
    /* Once the first entries are full, their slots take new ones. */
    gw_guard_spent_add(&s, extra, now + 90000, now + 1000 + m);
    ck_assert_int_eq(gw_guard_spent_has(&s, extra, now + 1000 + m), 1);
    /* An unsynced set stays untrusted whatever its entries. */
    gw_guard_spent_sync(&s, 0);
    ck_assert_int_eq(gw_guard_spent_trusted(&s, now + 100000), 0);
}
END_TEST

START_TEST(proxies_parse_and_contain)
{
    gw_guard_proxies_t p;
    char err[128];

    ck_assert_int_eq(gw_guard_proxies_parse("", &p, err, sizeof(err)), 0);
    ck_assert_int_eq(p.n, 0);
    ck_assert_int_eq(gw_guard_proxies_parse(" 10.0.0.0/8, 192.168.1.7 ,2001:db8::/32,", &p, err,
                                            sizeof(err)),
                     0);
    ck_assert_int_eq(p.n, 3);
    ck_assert(gw_guard_proxies_contain(&p, "10.200.3.4"));
    ck_assert(!gw_guard_proxies_contain(&p, "11.0.0.1"));
    ck_assert(gw_guard_proxies_contain(&p, "192.168.1.7"));
    ck_assert(!gw_guard_proxies_contain(&p, "192.168.1.8"));
    ck_assert(gw_guard_proxies_contain(&p, "2001:db8:ffff::1"));
    ck_assert(!gw_guard_proxies_contain(&p, "2001:db9::1"));
    ck_assert(gw_guard_proxies_contain(&p, "::ffff:10.1.1.1")); /* IPv4-mapped */
    ck_assert(!gw_guard_proxies_contain(&p, "not-an-ip"));
    ck_assert_int_eq(gw_guard_proxies_parse("10.0.0.0/33", &p, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert(strstr(err, "10.0.0.0/33"));
    ck_assert_int_eq(gw_guard_proxies_parse("10.0.0.0/", &p, err, sizeof(err)), VC_ERR_INVALID);
    ck_assert_int_eq(gw_guard_proxies_parse("proxy.example", &p, err, sizeof(err)),
                     VC_ERR_INVALID);
    ck_assert_int_eq(gw_guard_proxies_parse("10.0.0.0/8x", &p, err, sizeof(err)), VC_ERR_INVALID);
    /* More entries than the list holds: refused, nothing written past it. */
    {
        char many[40 * 16] = "";
        for (int i = 0; i < GW_GUARD_MAX_PROXIES + 1; i++)
            strcat(many, "10.0.0.1/32,");
        ck_assert_int_eq(gw_guard_proxies_parse(many, &p, err, sizeof(err)), VC_ERR_INVALID);
        ck_assert(strstr(err, "more than"));
    }
}
END_TEST

/*
 * The socket peer, or the right-most untrusted hop behind trusted proxies; IPv6 by /64. A
 * trusted proxy that names no client: GW_GUARD_UNNAMED.
 */
START_TEST(client_address)
{
    static const struct {
        const char *peer, *xff, *want;
        int rc;
    } cases[] = {
        {"203.0.113.9", NULL, "203.0.113.9", 0},
        /* An untrusted peer's X-Forwarded-For is ignored: it could be forged. */
        {"203.0.113.9", "198.51.100.1", "203.0.113.9", 0},
        /* A trusted proxy: the hop it appended. */
        {"10.0.0.5", "198.51.100.1", "198.51.100.1", 0},
        /* The client forged a left part: only the right-most untrusted hop counts. */
        {"10.0.0.5", "1.2.3.4, 198.51.100.1", "198.51.100.1", 0},
        /* Two trusted proxies in a row. */
        {"10.0.0.5", "198.51.100.1, 10.0.0.7", "198.51.100.1", 0},
        /* Only trusted hops: the left-most of them. */
        {"10.0.0.5", "10.0.0.8, 10.0.0.7", "10.0.0.8", GW_GUARD_UNNAMED},
        /* Garbage stops the walk at the last hop believed. */
        {"10.0.0.5", "198.51.100.1, junk", "10.0.0.5", GW_GUARD_UNNAMED},
        {"10.0.0.5", "", "10.0.0.5", GW_GUARD_UNNAMED},
        {"10.0.0.5", " , ", "10.0.0.5", GW_GUARD_UNNAMED},
        /* A trusted proxy that names no client (the order service calling directly). */
        {"10.0.0.5", NULL, "10.0.0.5", GW_GUARD_UNNAMED},
        /* IPv6: the /64. */
        {"2001:db8:1:2:3:4:5:6", NULL, "2001:db8:1:2::/64", 0},
        {"10.0.0.5", "2001:db8:1:2::99", "2001:db8:1:2::/64", 0},
        {"::ffff:203.0.113.9", NULL, "203.0.113.9", 0},
        /* IPv4 written as inet_ntop() writes it, at the bounds of each byte. */
        {"0.0.0.0", NULL, "0.0.0.0", 0},
        {"255.255.255.255", NULL, "255.255.255.255", 0},
        {"127.0.10.1", NULL, "127.0.10.1", 0},
    };
    gw_guard_proxies_t p;
    char err[128], out[GW_GUARD_ADDR_MAX];

    ck_assert_int_eq(gw_guard_proxies_parse("10.0.0.0/8", &p, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(gw_guard_client(&p, cases[i].peer, cases[i].xff, out), cases[i].rc);
        ck_assert_msg(strcmp(out, cases[i].want) == 0, "case %zu: got %s, want %s", i, out,
                      cases[i].want);
    }
    ck_assert_int_eq(gw_guard_client(&p, NULL, NULL, out), VC_ERR_INVALID);
    ck_assert_int_eq(gw_guard_client(&p, "", "1.2.3.4", out), VC_ERR_INVALID);
}
END_TEST

/*
 * Issue 42: at most GW_GUARD_MEMORY_IN_FLIGHT requests of a bucket pass from
 * memory at a time; a lease keeps a success's taken try for the next request
 * (a failure that uses it keeps it: paid), and goes back whole once idle.
 */
START_TEST(memory_in_flight_and_lease)
{
    static gw_guard_cache_t c; /* static: the leases make it large */
    const gw_guard_rate_t ip100 = {100, 3600000};
    const char *bucket = "guard:{ip:v:10.0.0.1}";
    uint64_t ip = gw_guard_cache_key(bucket, &ip100);
    uint64_t other = ip + GW_GUARD_CACHE_SLOTS; /* the same slot, another bucket */
    gw_guard_lease_t out[4];
    int64_t full_at;

    gw_guard_cache_init(&c);
    /* Memory: one at a time. */
    ck_assert_int_eq(gw_guard_flight_enter(&c, ip), 1);
    ck_assert_int_eq(gw_guard_flight_enter(&c, ip), GW_GUARD_MEMORY_IN_FLIGHT > 1);
    gw_guard_flight_leave(&c, ip);
    ck_assert_int_eq(gw_guard_flight_enter(&c, ip), 1);
    gw_guard_flight_leave(&c, ip);

    /* No lease yet: two requests take in Redis; another bucket of the slot gets none. */
    ck_assert_int_eq(gw_guard_lease_enter(&c, ip, bucket, &ip100), GW_GUARD_LEASE_TAKEN);
    ck_assert_int_eq(gw_guard_lease_enter(&c, ip, bucket, &ip100), GW_GUARD_LEASE_TAKEN);
    ck_assert_int_eq(gw_guard_lease_enter(&c, other, "guard:{cu:v:1}", &hourly5),
                     GW_GUARD_LEASE_NONE);
    gw_guard_lease_taken(&c, ip, 5000);
    /* The first succeeds: its try stays here, and the next request uses it. */
    ck_assert_int_eq(gw_guard_lease_settle(&c, ip, GW_GUARD_LEASE_TAKEN, 1, 0, 10, &full_at), 0);
    ck_assert_int_eq(full_at, 5000);
    ck_assert_int_eq(gw_guard_lease_enter(&c, ip, bucket, &ip100), GW_GUARD_LEASE_USED);
    /* The second failed: its try is spent, nothing kept. */
    ck_assert_int_eq(gw_guard_lease_settle(&c, ip, GW_GUARD_LEASE_TAKEN, 1, 1, 10, &full_at), 0);
    /* The lease's user failed: the try is gone (paid when taken); idle and empty: free. */
    ck_assert_int_eq(gw_guard_lease_settle(&c, ip, GW_GUARD_LEASE_USED, 1, 1, 10, &full_at), 0);
    ck_assert_int_eq(gw_guard_lease_sweep(&c, 1000, out, 4), 0);
    ck_assert_int_eq(gw_guard_lease_enter(&c, other, "guard:{cu:v:1}", &hourly5),
                     GW_GUARD_LEASE_TAKEN);
    /* A take that found the bucket empty (got 0) keeps nothing. */
    ck_assert_int_eq(gw_guard_lease_settle(&c, other, GW_GUARD_LEASE_TAKEN, 0, 0, 20, &full_at),
                     0);

    /* Two successes kept; swept only once idle for GW_GUARD_LEASE_IDLE_MS, whole. */
    ck_assert_int_eq(gw_guard_lease_enter(&c, ip, bucket, &ip100), GW_GUARD_LEASE_TAKEN);
    ck_assert_int_eq(gw_guard_lease_enter(&c, ip, bucket, &ip100), GW_GUARD_LEASE_TAKEN);
    ck_assert_int_eq(gw_guard_lease_settle(&c, ip, GW_GUARD_LEASE_TAKEN, 1, 0, 100, &full_at), 0);
    ck_assert_int_eq(gw_guard_lease_sweep(&c, 100 + GW_GUARD_LEASE_IDLE_MS, out, 4), 0);
    ck_assert_int_eq(gw_guard_lease_settle(&c, ip, GW_GUARD_LEASE_TAKEN, 1, 0, 200, &full_at), 0);
    ck_assert_int_eq(gw_guard_lease_sweep(&c, 200 + GW_GUARD_LEASE_IDLE_MS - 1, out, 4), 0);
    ck_assert_int_eq(gw_guard_lease_sweep(&c, 200 + GW_GUARD_LEASE_IDLE_MS, out, 4), 1);
    ck_assert_int_eq(out[0].held, 2);
    ck_assert_str_eq(out[0].bucket, bucket);
    ck_assert_int_eq(out[0].rate.tries, 100);
    /* Given back: the slot is free for any bucket. */
    ck_assert_int_eq(gw_guard_lease_enter(&c, other, "guard:{cu:v:1}", &hourly5),
                     GW_GUARD_LEASE_TAKEN);
}
END_TEST

/*
 * The admin logins' bucket (gw_login.h): 5 tries per 60 s. Five failures at
 * once leave none (a wait of one refill, 12 s), a try comes back 12 s later,
 * and a bucket left alone for the window is full again.
 */
/* The local limiter: the same bucket as Redis's, a give up to full, a slot taken over. */
START_TEST(local_limiter_counts_gives_and_replaces)
{
    static gw_guard_local_t l;
    gw_guard_rate_t r = {5, 3600000};
    int64_t retry = 0, t0 = 1000;
    uint64_t key = 42, other = 42 + GW_GUARD_CACHE_SLOTS; /* the same slot */

    gw_guard_local_init(&l);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 1);
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 0);
    ck_assert_int_eq(retry, 3600000 / 5);
    /* A success gives its try back: one more take, then empty again. */
    gw_guard_local_give(&l, key, &r, t0);
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 1);
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 0);
    /* One try's refill later, one try. */
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0 + 720000, &retry), 1);
    /* Another bucket of the slot starts full and pushes it out; a give to the gone one is lost. */
    ck_assert_int_eq(gw_guard_local_take(&l, other, &r, t0, &retry), 1);
    gw_guard_local_give(&l, key, &r, t0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(gw_guard_local_take(&l, other, &r, t0, &retry), 1);
    ck_assert_int_eq(gw_guard_local_take(&l, other, &r, t0, &retry), 0);
    /* Gives never fill past full. */
    gw_guard_local_init(&l);
    for (int i = 0; i < 3; i++)
        gw_guard_local_give(&l, key, &r, t0);
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 1);
    for (int i = 0; i < 10; i++)
        gw_guard_local_give(&l, key, &r, t0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 1);
    ck_assert_int_eq(gw_guard_local_take(&l, key, &r, t0, &retry), 0);
}
END_TEST

START_TEST(login_bucket_five_then_wait_one_refill)
{
    int64_t debt = 0, t = 1000000;

    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t), 0);
        debt = gw_login_bucket_spend(debt, 5, 60000, t);
    }
    ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t), 12000);
    ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t + 11999), 1);
    ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t + 12000), 0);
    debt = gw_login_bucket_spend(debt, 5, 60000, t + 12000); /* the refilled try, failed */
    ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t + 12000), 12000);
    /* A debt in the past counts from now: a full bucket, not a saved-up one. */
    debt = gw_login_bucket_spend(debt, 5, 60000, t + 600000);
    ck_assert_int_eq(debt, t + 600000 + 12000);
    ck_assert_int_eq(gw_login_bucket_wait_ms(debt, 5, 60000, t + 600000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("guard");
    TCase *tc = tcase_create("guard");

    tcase_add_test(tc, bucket_five_then_empty_with_retry);
    tcase_add_test(tc, bucket_check_takes_nothing);
    tcase_add_test(tc, bucket_refills_continuously_and_caps);
    tcase_add_test(tc, bucket_retry_rounds_up);
    tcase_add_test(tc, login_bucket_five_then_wait_one_refill);
    tcase_add_test(tc, bucket_check_and_spend_with_debt);
    tcase_add_test(tc, cache_remembers_a_try_until_a_failure);
    tcase_add_test(tc, spent_set_add_expire_overflow_sync);
    tcase_add_test(tc, memory_in_flight_and_lease);
    tcase_add_test(tc, local_limiter_counts_gives_and_replaces);
    tcase_add_test(tc, proxies_parse_and_contain);
    tcase_add_test(tc, client_address);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
