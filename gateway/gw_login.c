/* Failed admin logins per client address: see gw_login.h. */
#include "gw_login.h"

#include <pthread.h>
#include <string.h>

#include "gw_guard.h"
#include "vc_hash.h"
#include "vc_metrics.h"

typedef struct {
    uint64_t address;      /* the keyed hash of the address; 0: free */
    int64_t debt_until_ms; /* gw_login_bucket_spend()'s */
} login_slot_t;

static int login_tries;
static int64_t login_window_ms;
static vc_metric_t *refused;
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
                         "requests to admin routes refused (429) before their token was looked "
                         "at: their address had used up its failed logins (VOUCHER_ADMIN_LOGIN_"
                         "TRIES per VOUCHER_ADMIN_LOGIN_WINDOW)",
                         NULL);
}

/* The slot of req's client, and its hash; NULL when req has no address (not from TCP). */
static login_slot_t *slot_of(const gw_request_t *req, uint64_t *address)
{
    char client[GW_GUARD_ADDR_MAX];

    if (gw_guard_address(req, client) != 0)
        return NULL;
    *address = vc_hash_str(client) | 1; /* never 0, which marks a free slot */
    return &slots[*address % GW_LOGIN_SLOTS];
}

int64_t gw_login_wait_ms(const gw_request_t *req, int64_t now_ms)
{
    login_slot_t *s;
    uint64_t address;
    int64_t wait = 0;

    if (login_tries <= 0 || !(s = slot_of(req, &address)))
        return 0;
    pthread_mutex_lock(&lock);
    if (s->address == address)
        wait = gw_login_bucket_wait_ms(s->debt_until_ms, login_tries, login_window_ms, now_ms);
    pthread_mutex_unlock(&lock);
    if (wait > 0)
        vc_metric_add(refused, 1);
    return wait;
}

void gw_login_failed(const gw_request_t *req, int64_t now_ms)
{
    login_slot_t *s;
    uint64_t address;

    if (login_tries <= 0 || !(s = slot_of(req, &address)))
        return;
    pthread_mutex_lock(&lock);
    if (s->address != address) {
        s->address = address; /* another address's, or free: this one starts full */
        s->debt_until_ms = 0;
    }
    s->debt_until_ms =
        gw_login_bucket_spend(s->debt_until_ms, login_tries, login_window_ms, now_ms);
    pthread_mutex_unlock(&lock);
}
