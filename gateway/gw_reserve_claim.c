/*
 * The orderId's claim (voucher-order:{orderId} = CODE:TOKEN, proto/redis-keys.md):
 * a new order that passed the rules claims its orderId for the code with SET
 * NX GET, so that one orderId takes a use of one code only. The claim is
 * pipelined just before reserve.lua, on the same connection, so the success
 * path stays one round trip; on a Redis Cluster the two keys' slots may be
 * on two masters, and the script waits for the claim's answer instead.
 *
 * The claim's answer is read before the script's: the steps say so
 * (GW_RESERVE_CLAIM, then GW_RESERVE_SCRIPT once it came), and
 * gw_reserve_script.c asserts it.
 */
#include <stdatomic.h>
#include <string.h>

#include "gw_reserve_int.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_time.h"

void gw_reserve_retention_at(const gw_reserve_t *x, char buf[VC_I64_TEXT])
{
    vc_i64_text(buf, x->v.ends_at_ms + x->app->cfg->redis_retention_ms);
}

/*
 * Runs claim.lua on the orderId's claim: op "release" or "keep". Nobody waits
 * for the answer: a release that finds the claim taken over leaves it, which
 * is the point, and a keep that finds another code cannot be helped here.
 */
static void claim_script(gw_reserve_t *x, const char *op)
{
    char expire_at[VC_I64_TEXT];
    const char *keys[] = {x->claim_key};
    const char *args[] = {op, x->claim_value, x->code, expire_at};

    gw_reserve_retention_at(x, expire_at);
    (void)gw_redis_eval(x->app->redis, GW_SCRIPT_CLAIM, gw_app_ignore_cb, NULL, 1, keys, 4, args);
}

/*
 * Only while the claim still holds this request's token: a request of the
 * same orderId that took a use since made the claim its own ("keep"), and
 * deleting it would let the orderId be reserved with another voucher.
 */
void gw_reserve_unclaim(gw_reserve_t *x)
{
    if (x->claim != GW_CLAIM_NEW)
        return;
    x->claim = GW_CLAIM_NONE;
    /* A test holds the release here while another request of the orderId takes a use. */
    VC_PAUSE("reserve-before-unclaim");
    claim_script(x, "release");
}

/* The other request may be rejected and release the claim: its release then finds our token. */
void gw_reserve_keep_claim(gw_reserve_t *x)
{
    claim_script(x, "keep");
}

/* What SET ... NX GET answered, for this request's code. */
static gw_claim_t claim_outcome(const gw_reserve_t *x, int rc, const gw_redis_reply_t *reply)
{
    if (rc != 0 || reply->n != 1)
        return GW_CLAIM_FAILED;
    if (reply->item[0].type == GW_REDIS_NIL)
        return GW_CLAIM_NEW;
    if (reply->item[0].type == GW_REDIS_STR &&
        vc_claim_is_code(reply->item[0].str, reply->item[0].len, x->code))
        return GW_CLAIM_OURS;
    if (reply->item[0].type == GW_REDIS_STR)
        return GW_CLAIM_OTHER;
    return GW_CLAIM_FAILED;
}

static void claim_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_CLAIM || x->step == GW_RESERVE_CLAIM_FIRST ||
              x->step == GW_RESERVE_CLAIM_UNSENT);
    x->claim = claim_outcome(x, rc, reply);
    if (x->step == GW_RESERVE_CLAIM) {
        /* reserve.lua is next on this connection, and its answer reads the claim's. */
        gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_CLAIM), GW_RESERVE_SCRIPT);
    } else if (x->step == GW_RESERVE_CLAIM_UNSENT) {
        gw_reserve_unclaim(x);
        gw_reserve_fail(x, VC_ERR_UNAVAILABLE, "redis reserve");
    } else if (x->claim == GW_CLAIM_FAILED) {
        /* Nothing taken yet: a claim whose outcome is unknown ends here (proto/redis-keys.md). */
        gw_reserve_fail(x, VC_ERR_UNAVAILABLE, "claiming the orderId");
    } else {
        gw_reserve_run_script(x); /* a Redis Cluster's: the script only now */
    }
}

/*
 * A direct voucher's claim: nothing behind it on the connection, and any
 * failure (Redis down, slow, fenced) goes on without it, PostgreSQL's unique
 * order_id deciding alone (proto/direct-mode.md, "The orderId across modes").
 */
static void direct_claim_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    gw_reserve_t *x = arg;

    VC_ASSERT(x->step == GW_RESERVE_DIRECT_CLAIM);
    x->claim = claim_outcome(x, rc, reply);
    gw_reserve_direct_claimed(x);
}

/* A token part unique to this process (random), and one to each claim in it. */
static uv_once_t claim_once = UV_ONCE_INIT;
static uint64_t claim_process;
static atomic_uint_fast64_t claim_seq;

static void claim_process_init(void)
{
    if (uv_random(NULL, NULL, &claim_process, sizeof(claim_process), 0, NULL) != 0)
        claim_process = ((uint64_t)uv_os_getpid() << 32) ^ (uint64_t)vc_time_now_ms();
}

/* This request's claim value (CODE:TOKEN) and the claim's SET ... NX GET PXAT arguments. */
static void claim_args(gw_reserve_t *x, char expire_at[VC_I64_TEXT], const char *argv[7],
                       size_t argvlen[7])
{
    uv_once(&claim_once, claim_process_init);
    vc_claim_value(x->claim_value, x->code, claim_process,
                   atomic_fetch_add_explicit(&claim_seq, 1, memory_order_relaxed));
    gw_reserve_retention_at(x, expire_at);
    argv[0] = "SET";
    argv[1] = x->claim_key;
    argv[2] = x->claim_value;
    argv[3] = "NX";
    argv[4] = "GET";
    argv[5] = "PXAT";
    argv[6] = expire_at;
    for (int i = 0; i < 7; i++)
        argvlen[i] = strlen(argv[i]);
}

void gw_reserve_claim_direct(gw_reserve_t *x)
{
    char expire_at[VC_I64_TEXT];
    const char *argv[7];
    size_t argvlen[7];

    claim_args(x, expire_at, argv, argvlen);
    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_RULES), GW_RESERVE_DIRECT_CLAIM);
    if (gw_redis_command(x->app->redis, direct_claim_cb, x, 7, argv, argvlen) != 0) {
        /* Redis cannot take it now (down, fenced, full queue): PostgreSQL decides alone. */
        x->claim = GW_CLAIM_FAILED;
        gw_reserve_direct_claimed(x);
    }
}

/*
 * On one node the script goes right behind the claim, on the same
 * connection. On a Redis Cluster the claim's slot is not the voucher's: two
 * connections answer in no set order, so the script waits for the claim's
 * answer (one round trip more; proto/redis-keys.md, "Redis Cluster").
 */
void gw_reserve_claim_and_run(gw_reserve_t *x)
{
    char expire_at[VC_I64_TEXT];
    const char *argv[7];
    size_t argvlen[7];
    int ordered = gw_redis_ordered(x->app->redis);
    int rc;

    claim_args(x, expire_at, argv, argvlen);

    gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_RULES),
                  ordered ? GW_RESERVE_CLAIM : GW_RESERVE_CLAIM_FIRST);
    if ((rc = gw_redis_command(x->app->redis, claim_cb, x, 7, argv, argvlen)) != 0) {
        gw_reserve_fail(x, rc, "redis reserve");
        return;
    }
    /* claim_cb answers, once the claim's outcome is known. */
    if (ordered && gw_reserve_send_script(x) != 0)
        gw_reserve_go(x, GW_RESERVE_FROM(GW_RESERVE_CLAIM), GW_RESERVE_CLAIM_UNSENT);
}
