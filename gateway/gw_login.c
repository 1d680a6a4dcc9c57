/* Failed admin logins per client address: see gw_login.h. */
#include "gw_login.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "gw_guard.h"
#include "vc_error.h"
#include "vc_hash.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_model.h"
#include "vc_num.h"
#include "vc_time.h"

typedef struct {
    uint64_t address;      /* the keyed hash of the address; 0: free */
    int64_t debt_until_ms; /* gw_login_bucket_spend()'s */
} login_slot_t;

static int login_tries;
static int64_t login_window_ms;
static vc_metric_t *refused, *fallback;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static login_slot_t slots[GW_LOGIN_SLOTS];

int64_t gw_login_bucket_wait_ms(int64_t debt_until_ms, int tries, int64_t window_ms, int64_t now_ms)
{
    int64_t per_try = window_ms / tries;
    int64_t wait = debt_until_ms - now_ms - (window_ms - per_try);

    return wait > 0 ? wait : 0;
}

int64_t gw_login_bucket_spend(int64_t debt_until_ms, int tries, int64_t window_ms, int64_t now_ms)
{
    return (debt_until_ms > now_ms ? debt_until_ms : now_ms) + window_ms / tries;
}

void gw_login_configure(int tries, int64_t window_ms)
{
    login_tries = tries;
    login_window_ms = window_ms;
    refused = vc_counter("voucher_gateway_admin_logins_refused_total",
                         "requests to admin routes refused (429) whatever their token: their "
                         "address had used up its failed logins over every gateway "
                         "(VOUCHER_ADMIN_LOGIN_TRIES per VOUCHER_ADMIN_LOGIN_WINDOW)",
                         NULL);
    fallback = vc_counter("voucher_gateway_admin_login_fallback_total",
                          "requests to admin routes whose failed logins were counted in this "
                          "gateway's memory alone: redis refused the admin-login script or did "
                          "not answer in time (the limit is then per gateway)",
                          NULL);
}

/* One request's try, in its arena, while Redis decides. */
typedef struct {
    gw_login_cb cb;
    void *arg;
    int right;
    uint64_t address; /* the fallback's hash of the client's address */
} login_t;

/* The fallback's slot of address (a hash, never 0). */
static login_slot_t *slot_of(uint64_t address)
{
    return &slots[address % GW_LOGIN_SLOTS];
}

/* The fallback's wait for address at now_ms (0: a try is there). */
static int64_t local_wait_ms(uint64_t address, int64_t now_ms)
{
    login_slot_t *s = slot_of(address);
    int64_t wait = 0;

    pthread_mutex_lock(&lock);
    if (s->address == address)
        wait = gw_login_bucket_wait_ms(s->debt_until_ms, login_tries, login_window_ms, now_ms);
    pthread_mutex_unlock(&lock);
    return wait;
}

/* A wrong token from address was let try at now_ms: the fallback's bucket loses a try. */
static void local_failed(uint64_t address, int64_t now_ms)
{
    login_slot_t *s = slot_of(address);

    pthread_mutex_lock(&lock);
    if (s->address != address) {
        s->address = address; /* another address's, or free: this one starts full */
        s->debt_until_ms = 0;
    }
    s->debt_until_ms =
        gw_login_bucket_spend(s->debt_until_ms, login_tries, login_window_ms, now_ms);
    pthread_mutex_unlock(&lock);
}

/* Redis could not decide (rc): counted, and said at most every 10 s. */
static void fell_back(int rc)
{
    static _Atomic int64_t last_log_ms;
    int64_t now = vc_time_mono_ms(), last = atomic_load(&last_log_ms);

    if (rc == VC_ERR_SHUTDOWN)
        return; /* the gateway's own stop, not Redis's state */
    vc_metric_add(fallback, 1);
    if (now - last >= 10000 && atomic_compare_exchange_strong(&last_log_ms, &last, now))
        vc_warn("admin logins: redis did not run the admin-login script (%s; unreachable, late, "
                "full at maxmemory, or an ACL without ~guard:*): failed logins are counted in "
                "this gateway's memory alone, per gateway, until it does (deploy/README.md, "
                "\"Admin logins\")",
                vc_strerror(rc));
}

/*
 * The decision for a try whose Redis answer was wait_ms (or, from_redis 0,
 * that Redis could not give): the fallback decides then. Every wrong token
 * let try is also counted in the fallback, so that it knows this process's
 * failures when it has to decide.
 */
static int64_t decide(const login_t *l, int from_redis, int64_t wait_ms)
{
    int64_t now_ms = vc_time_now_ms();

    if (!from_redis)
        wait_ms = local_wait_ms(l->address, now_ms);
    if (wait_ms == 0 && !l->right)
        local_failed(l->address, now_ms);
    if (wait_ms > 0)
        vc_metric_add(refused, 1);
    return wait_ms;
}

/* admin_login.lua's answer: {TRIED, 0} or {EMPTY, retry_ms}. */
static void answered_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    login_t *l = arg;
    int64_t wait_ms = 0;
    int ok = rc == 0 && reply->n >= 2 && reply->item[0].type == GW_REDIS_INT &&
             reply->item[1].type == GW_REDIS_INT &&
             (reply->item[0].integer == VC_ADMIN_LOGIN_TRIED ||
              reply->item[0].integer == VC_ADMIN_LOGIN_EMPTY);

    if (!ok)
        fell_back(rc != 0 ? rc : VC_ERR_PROTOCOL);
    else if (reply->item[0].integer == VC_ADMIN_LOGIN_EMPTY)
        wait_ms = reply->item[1].integer > 0 ? reply->item[1].integer : 1;
    l->cb(l->arg, decide(l, ok, wait_ms));
}

int gw_login_try(gw_app_t *app, gw_request_t *req, int right, gw_login_cb cb, void *arg,
                 int64_t *wait_ms)
{
    char client[GW_GUARD_ADDR_MAX], key[GW_GUARD_KEY_MAX], tries[VC_I64_TEXT], window[VC_I64_TEXT];
    const char *keys[1] = {key};
    const char *args[3] = {right ? "check" : "take", tries, window};
    login_t *l, local;
    int rc;

    *wait_ms = 0;
    if (login_tries <= 0 || gw_guard_address(req, client) != 0)
        return GW_LOGIN_GO;
    local.cb = cb;
    local.arg = arg;
    local.right = right;
    local.address = vc_hash_str(client) | 1; /* never 0, which marks a free slot */
    /* An address is at most GW_GUARD_ADDR_MAX bytes: the key always fits. */
    (void)vc_key_admin_login(key, sizeof(key), client);
    vc_i64_text(tries, login_tries);
    vc_i64_text(window, login_window_ms);
    if (!(l = gw_request_alloc(req, sizeof(*l)))) {
        *wait_ms = decide(&local, 0, 0);
        return GW_LOGIN_GO;
    }
    *l = local;
    if ((rc = gw_redis_eval(app->redis, GW_SCRIPT_ADMIN_LOGIN, answered_cb, l, 1, keys, 3, args)) !=
        0) {
        fell_back(rc);
        *wait_ms = decide(l, 0, 0);
        return GW_LOGIN_GO;
    }
    return GW_LOGIN_PENDING;
}
