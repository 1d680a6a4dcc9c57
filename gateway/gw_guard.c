/*
 * Guessing limits: see gw_guard.h for the flow and proto/openapi.yaml
 * ("Guessing limits") for what counts as a failed try.
 */
#include "gw_guard.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_hash.h"
#include "vc_num.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_time.h"

/* ---- pure: bucket arithmetic ---- */

void gw_guard_bucket_full(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms)
{
    b->level = r->tries * r->window_ms;
    b->at_ms = now_ms;
}

void gw_guard_bucket_refill(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms)
{
    int64_t full = r->tries * r->window_ms;

    if (now_ms > b->at_ms) {
        /*
         * Capped before multiplying (a bucket idle for years must not
         * overflow) at the time the bucket takes to be full.
         */
        int64_t elapsed = now_ms - b->at_ms, to_full = (full - b->level) / r->tries + 1;
        if (elapsed > to_full)
            elapsed = to_full;
        b->level += elapsed * r->tries;
        b->at_ms = now_ms;
    }
    if (b->level > full)
        b->level = full;
}

int gw_guard_bucket_take(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms,
                         int64_t *retry_ms)
{
    gw_guard_bucket_refill(b, r, now_ms);
    if (b->level >= r->window_ms) {
        b->level -= r->window_ms;
        *retry_ms = 0;
        return 1;
    }
    /* The missing units arrive at tries a millisecond: round up to whole ms. */
    *retry_ms = (r->window_ms - b->level + r->tries - 1) / r->tries;
    if (*retry_ms < 1)
        *retry_ms = 1;
    return 0;
}

int gw_guard_bucket_check(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms,
                          int64_t *retry_ms)
{
    gw_guard_bucket_t copy = *b;
    return gw_guard_bucket_take(&copy, r, now_ms, retry_ms);
}

void gw_guard_bucket_spend(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms)
{
    int64_t floor = -GW_GUARD_MAX_DEBT * r->window_ms;

    gw_guard_bucket_refill(b, r, now_ms);
    b->level -= r->window_ms;
    if (b->level < floor)
        b->level = floor;
}

void gw_guard_bucket_give(gw_guard_bucket_t *b, const gw_guard_rate_t *r, int64_t now_ms)
{
    int64_t full = r->tries * r->window_ms;

    gw_guard_bucket_refill(b, r, now_ms);
    b->level += r->window_ms;
    if (b->level > full)
        b->level = full;
}

/* ---- pure: the local limiter ---- */

void gw_guard_local_init(gw_guard_local_t *l)
{
    memset(l, 0, sizeof(*l));
}

int gw_guard_local_take(gw_guard_local_t *l, uint64_t key, const gw_guard_rate_t *r, int64_t now_ms,
                        int64_t *retry_ms)
{
    gw_guard_local_slot_t *s = &l->slot[key & (GW_GUARD_CACHE_SLOTS - 1)];

    if (s->key != key) {
        s->key = key; /* free, or another bucket's: this one starts full */
        gw_guard_bucket_full(&s->bucket, r, now_ms);
    }
    return gw_guard_bucket_take(&s->bucket, r, now_ms, retry_ms);
}

void gw_guard_local_give(gw_guard_local_t *l, uint64_t key, const gw_guard_rate_t *r,
                         int64_t now_ms)
{
    gw_guard_local_slot_t *s = &l->slot[key & (GW_GUARD_CACHE_SLOTS - 1)];

    if (s->key == key)
        gw_guard_bucket_give(&s->bucket, r, now_ms);
}

int64_t gw_guard_bucket_ttl_ms(const gw_guard_bucket_t *b, const gw_guard_rate_t *r)
{
    int64_t missing = r->tries * r->window_ms - b->level;
    return missing <= 0 ? 0 : (missing + r->tries - 1) / r->tries;
}

int64_t gw_guard_retry_after_s(int64_t retry_ms)
{
    int64_t s = (retry_ms + 999) / 1000;
    return s < 1 ? 1 : s;
}

/* ---- pure: the check cache ---- */

#define CACHE_MASK (GW_GUARD_CACHE_SLOTS - 1)

void gw_guard_cache_init(gw_guard_cache_t *c)
{
    memset(c, 0, sizeof(*c));
}

int gw_guard_cache_has(const gw_guard_cache_t *c, uint64_t key, int64_t now_ms)
{
    return c->slot[key & CACHE_MASK].key == key && now_ms < c->slot[key & CACHE_MASK].until_ms;
}

uint64_t gw_guard_cache_epoch(const gw_guard_cache_t *c)
{
    return c->epoch;
}

void gw_guard_cache_put(gw_guard_cache_t *c, uint64_t key, uint64_t sent_epoch, int64_t now_ms)
{
    if (c->epoch != sent_epoch)
        return; /* a failure's spend may have landed after Redis ran this check */
    c->slot[key & CACHE_MASK].key = key;
    c->slot[key & CACHE_MASK].until_ms = now_ms + GW_GUARD_CACHE_TTL_MS;
}

int gw_guard_flight_enter(gw_guard_cache_t *c, uint64_t key)
{
    if (c->in_flight[key & CACHE_MASK] >= GW_GUARD_MEMORY_IN_FLIGHT)
        return 0;
    c->in_flight[key & CACHE_MASK]++;
    return 1;
}

void gw_guard_flight_leave(gw_guard_cache_t *c, uint64_t key)
{
    if (c->in_flight[key & CACHE_MASK] > 0)
        c->in_flight[key & CACHE_MASK]--;
}

int gw_guard_lease_enter(gw_guard_cache_t *c, uint64_t key, const char *bucket,
                         const gw_guard_rate_t *rate)
{
    gw_guard_lease_t *l = &c->lease[key & CACHE_MASK];

    if (l->key != key) {
        if (l->busy > 0 || l->held > 0)
            return GW_GUARD_LEASE_NONE; /* another bucket's, until its tries go back */
        memset(l, 0, sizeof(*l));
        l->key = key;
        l->rate = *rate;
        snprintf(l->bucket, sizeof(l->bucket), "%s", bucket);
    }
    l->busy++;
    if (l->held > l->in_use) {
        l->in_use++;
        return GW_GUARD_LEASE_USED;
    }
    return GW_GUARD_LEASE_TAKEN;
}

void gw_guard_lease_taken(gw_guard_cache_t *c, uint64_t key, int64_t full_at)
{
    gw_guard_lease_t *l = &c->lease[key & CACHE_MASK];

    if (l->key == key && full_at > l->full_at)
        l->full_at = full_at;
}

int gw_guard_lease_settle(gw_guard_cache_t *c, uint64_t key, int how, int got, int failed,
                          int64_t now_ms, int64_t *full_at)
{
    gw_guard_lease_t *l = &c->lease[key & CACHE_MASK];
    int give = 0;

    VC_ASSERT(l->key == key && l->busy > 0);
    l->busy--;
    if (how == GW_GUARD_LEASE_USED) {
        l->in_use--;
        if (failed)
            l->held--; /* paid for when it was taken */
    } else if (how == GW_GUARD_LEASE_TAKEN && got && !failed) {
        if (l->held < GW_GUARD_LEASE_MAX)
            l->held++;
        else
            give = 1;
    }
    *full_at = l->full_at;
    if (l->busy == 0) {
        l->idle_ms = now_ms;
        if (l->held == 0)
            memset(l, 0, sizeof(*l)); /* nothing to give back: free at once */
    }
    return give;
}

int gw_guard_lease_sweep(gw_guard_cache_t *c, int64_t now_ms, gw_guard_lease_t *out, int max)
{
    int n = 0;

    for (int i = 0; i < GW_GUARD_CACHE_SLOTS && n < max; i++) {
        gw_guard_lease_t *l = &c->lease[i];
        if (l->key && l->busy == 0 && l->held > 0 &&
            now_ms - l->idle_ms >= GW_GUARD_LEASE_IDLE_MS) {
            out[n++] = *l;
            memset(l, 0, sizeof(*l));
        }
    }
    return n;
}

void gw_guard_cache_fail(gw_guard_cache_t *c, uint64_t key)
{
    c->epoch++;
    c->slot[key & CACHE_MASK].key = 0;
}

uint64_t gw_guard_cache_key_of(uint64_t spent_key, const gw_guard_rate_t *rate)
{
    /*
     * The rate folded into the bucket's keyed hash: one hash a bucket, not
     * two. Two buckets share an entry only if their hashes differ by exactly
     * what their rates fold in, which nobody without the key can arrange.
     */
    uint64_t h = spent_key ^ ((uint64_t)rate->tries * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)rate->window_ms * 0xc2b2ae3d27d4eb4fULL);

    return h ? h : 1;
}

uint64_t gw_guard_cache_key(const char *bucket_key, const gw_guard_rate_t *rate)
{
    return gw_guard_cache_key_of(gw_guard_spent_key(bucket_key, strlen(bucket_key)), rate);
}

/* ---- pure: the spent set ---- */

#define SPENT_MASK (GW_GUARD_SPENT_SLOTS - 1)

void gw_guard_spent_init(gw_guard_spent_t *s)
{
    memset(s, 0, sizeof(*s));
}

void gw_guard_spent_add(gw_guard_spent_t *s, uint64_t key, int64_t full_at, int64_t now)
{
    int free_slot = -1;

    if (full_at + GW_GUARD_SPENT_MARGIN_MS <= now)
        return; /* full again already */
    /*
     * A slot is never emptied, only reused once its time passed, so a key is
     * always found before the first never-used slot of its probe.
     */
    for (int i = 0; i < GW_GUARD_SPENT_PROBE; i++) {
        int k = (int)((key + (uint64_t)i) & SPENT_MASK);
        if (s->slot[k].key == key) {
            if (full_at > s->slot[k].full_at)
                s->slot[k].full_at = full_at;
            return;
        }
        if (free_slot < 0 && s->slot[k].key != 0 &&
            s->slot[k].full_at + GW_GUARD_SPENT_MARGIN_MS <= now)
            free_slot = k;
        if (s->slot[k].key == 0) {
            if (free_slot < 0)
                free_slot = k;
            break;
        }
    }
    if (free_slot < 0) {
        /* No room: the set no longer knows every spent bucket until this one is full. */
        if (full_at > s->dropped_until)
            s->dropped_until = full_at;
        return;
    }
    s->slot[free_slot].key = key;
    s->slot[free_slot].full_at = full_at;
}

int gw_guard_spent_has(const gw_guard_spent_t *s, uint64_t key, int64_t now)
{
    for (int i = 0; i < GW_GUARD_SPENT_PROBE; i++) {
        int k = (int)((key + (uint64_t)i) & SPENT_MASK);
        if (s->slot[k].key == key)
            return now < s->slot[k].full_at + GW_GUARD_SPENT_MARGIN_MS;
        if (s->slot[k].key == 0)
            return 0;
    }
    return 0;
}

void gw_guard_spent_sync(gw_guard_spent_t *s, int synced)
{
    s->synced = synced;
}

int gw_guard_spent_trusted(const gw_guard_spent_t *s, int64_t now)
{
    return s->synced && now >= s->dropped_until + GW_GUARD_SPENT_MARGIN_MS;
}

uint64_t gw_guard_spent_key(const char *bucket_key, size_t len)
{
    char text[GW_GUARD_KEY_MAX];
    uint64_t h;

    if (len >= sizeof(text))
        len = sizeof(text) - 1;
    memcpy(text, bucket_key, len);
    text[len] = '\0';
    h = vc_hash_str(text);
    return h ? h : 1;
}

/* ---- pure: addresses ---- */

/* Parses text (len bytes, spaces around ignored) as IPv4 or IPv6; returns 4, 6, or 0. */
static int parse_addr(const char *text, size_t len, unsigned char addr[16])
{
    char buf[64];

    while (len && (*text == ' ' || *text == '\t')) {
        text++;
        len--;
    }
    while (len && (text[len - 1] == ' ' || text[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= sizeof(buf))
        return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1)
        return 4;
    if (inet_pton(AF_INET6, buf, addr) == 1) {
        /* An IPv4-mapped address (::ffff:a.b.c.d, a dual-stack socket's peer) is IPv4. */
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(addr, mapped, 12) == 0) {
            memmove(addr, addr + 12, 4);
            return 4;
        }
        return 6;
    }
    return 0;
}

int gw_guard_proxies_parse(const char *list, gw_guard_proxies_t *out, char *err, size_t errlen)
{
    const char *p = list ? list : "";

    memset(out, 0, sizeof(*out));
    while (*p) {
        const char *end = strchr(p, ','), *slash;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char entry[80];
        unsigned char addr[16];
        int family, prefix, max;

        snprintf(entry, sizeof(entry), "%.*s", (int)(len < 79 ? len : 79), p);
        slash = memchr(p, '/', len);
        family = parse_addr(p, slash ? (size_t)(slash - p) : len, addr);
        max = family == 4 ? 32 : 128;
        prefix = max;
        if (slash) {
            char *stop;
            long v = strtol(slash + 1, &stop, 10);
            while (*stop == ' ')
                stop++;
            if (stop == slash + 1 || stop != p + len || v < 0 || v > max)
                family = 0;
            prefix = (int)v;
        }
        if (len > 0 && strspn(entry, " \t") < strlen(entry)) {
            if (!family) {
                snprintf(err, errlen, "VOUCHER_TRUSTED_PROXIES: \"%s\" is not an address or CIDR",
                         entry);
                return VC_ERR_INVALID;
            }
            if (out->n == GW_GUARD_MAX_PROXIES) {
                snprintf(err, errlen, "VOUCHER_TRUSTED_PROXIES: more than %d entries",
                         GW_GUARD_MAX_PROXIES);
                return VC_ERR_INVALID;
            }
            memcpy(out->net[out->n].addr, addr, sizeof(addr));
            out->net[out->n].family = family;
            out->net[out->n].prefix = prefix;
            out->n++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int in_net(const unsigned char *a, const unsigned char *net, int prefix)
{
    int bytes = prefix / 8, bits = prefix % 8;

    if (memcmp(a, net, (size_t)bytes) != 0)
        return 0;
    if (bits == 0)
        return 1;
    return ((a[bytes] ^ net[bytes]) & (0xff << (8 - bits))) == 0;
}

static int contains(const gw_guard_proxies_t *p, int family, const unsigned char *addr)
{
    for (int i = 0; i < p->n; i++)
        if (p->net[i].family == family && in_net(addr, p->net[i].addr, p->net[i].prefix))
            return 1;
    return 0;
}

int gw_guard_proxies_contain(const gw_guard_proxies_t *p, const char *addr)
{
    unsigned char a[16];
    int family = parse_addr(addr, strlen(addr), a);
    return family && contains(p, family, a);
}

/* Writes the bucket name of an address: IPv4 as is, IPv6 as its /64. */
static void bucket_name(int family, unsigned char *a, char out[GW_GUARD_ADDR_MAX])
{
    char text[INET6_ADDRSTRLEN];

    if (family == 4) {
        /* As inet_ntop() writes it, without its sprintf (on every guarded request). */
        size_t n = 0;
        for (int i = 0; i < 4; i++) {
            if (i)
                out[n++] = '.';
            n += vc_i64_text(out + n, a[i]);
        }
        return;
    }
    memset(a + 8, 0, 8);
    inet_ntop(AF_INET6, a, text, sizeof(text));
    snprintf(out, GW_GUARD_ADDR_MAX, "%.44s/64", text);
}

int gw_guard_client(const gw_guard_proxies_t *p, const char *peer, const char *forwarded_for,
                    char out[GW_GUARD_ADDR_MAX])
{
    unsigned char a[16];
    int family = peer ? parse_addr(peer, strlen(peer), a) : 0;
    const char *end;

    if (!family)
        return VC_ERR_INVALID;
    if (!contains(p, family, a)) {
        bucket_name(family, a, out);
        return 0;
    }
    if (!forwarded_for) {
        bucket_name(family, a, out);
        return GW_GUARD_UNNAMED;
    }
    /*
     * From the right: each hop was appended by the proxy in front of it, so
     * only hops behind trusted proxies are believed, and the first one that
     * is not a trusted proxy is the client. Anything left of it may be forged.
     */
    end = forwarded_for + strlen(forwarded_for);
    while (end > forwarded_for) {
        const char *start = end;
        unsigned char hop[16];
        int hop_family;

        while (start > forwarded_for && start[-1] != ',')
            start--;
        hop_family = parse_addr(start, (size_t)(end - start), hop);
        if (hop_family == 0) {
            if (strspn(start, " \t,") >= (size_t)(end - start)) {
                end = start > forwarded_for ? start - 1 : start; /* an empty entry */
                continue;
            }
            break; /* garbage: the client is the last hop believed (the peer or a proxy) */
        }
        memcpy(a, hop, 16);
        family = hop_family;
        if (!contains(p, family, a))
            break;
        end = start > forwarded_for ? start - 1 : start;
    }
    bucket_name(family, a, out);
    return contains(p, family, a) ? GW_GUARD_UNNAMED : 0;
}

/* ---- the gateway's side ---- */

static gw_guard_limits_t defaults;
static gw_guard_proxies_t proxies;
static _Atomic unsigned configured; /* gw_guard_configure() calls: what a thread keeps is of one */
static int guard_confirm_cancel; /* confirm and cancel are guarded (no VOUCHER_API_TOKEN) */
static vc_metric_t *refused_customer, *refused_ip, *spent, *errors, *from_memory, *from_redis;
/* The check cache of this gateway, shared by its workers (gw_guard.h). */
static gw_guard_cache_t cache;
static uv_mutex_t cache_lock;
static int cache_ready;
/*
 * The spent set (gw_guard.h), under cache_lock too: filled by the listener
 * thread and by this gateway's own spends, read by every check.
 */
static gw_guard_spent_t spent_set;
static _Atomic int64_t redis_offset_ms; /* Redis's clock minus the monotonic one */
static vc_metric_t *index_errors, *in_sync, *heard;
static vc_metric_t *unnamed; /* requests from a trusted proxy that named no client */
/* Bucket writes Redis refused or did not answer, by op (take, spend, give). */
static vc_metric_t *write_errors[3];
/* A bucket write failed and no take succeeded since: nothing is let through from memory. */
static _Atomic int writes_refused;
/*
 * The local limiter (gw_guard.h), under cache_lock: the buckets counted here
 * while Redis cannot take a try. local_active says it decided a request since
 * Redis last took one, for the log lines of the take-over and the hand-back.
 */
static gw_guard_local_t local_buckets;
static _Atomic int local_active;
/* Requests the local limiter decided, by decision: let on, refused 429, a failed try kept. */
enum { LOCAL_GO, LOCAL_REFUSED, LOCAL_FAILED, LOCAL_COUNT };
static vc_metric_t *local_decided[LOCAL_COUNT];

/* Redis's clock as this gateway reads it (gw_guard.h, the spent set). */
static int64_t redis_now(void)
{
    return vc_time_mono_ms() + atomic_load(&redis_offset_ms);
}

int gw_guard_configure(const gw_config_t *cfg, char *err, size_t errlen)
{
    static const char help[] = "Guarded tries refused with 429 because a bucket was empty, by "
                               "bucket kind.";
    int rc;

    defaults.customer.tries = cfg->guard_customer_tries;
    defaults.customer.window_ms = cfg->guard_customer_window_ms;
    defaults.ip.tries = cfg->guard_ip_tries;
    defaults.ip.window_ms = cfg->guard_ip_window_ms;
    /*
     * With an API token only the order service reaches confirm and cancel, and
     * it knows its orderIds; without one they are open, and a 404 there is a
     * guess at an orderId.
     */
    guard_confirm_cancel = !cfg->api_token || !cfg->api_token[0];
    refused_customer = vc_counter("voucher_gateway_guard_refused_total", help,
                                  "bucket=\"customer\"");
    refused_ip = vc_counter("voucher_gateway_guard_refused_total", help, "bucket=\"ip\"");
    unnamed = vc_counter("voucher_gateway_guard_unnamed_total",
                         "Guarded requests from a trusted proxy that named no client (no "
                         "X-Forwarded-For): limited per customer only, not per address.",
                         NULL);
    spent = vc_counter("voucher_gateway_guard_failed_tries_total",
                       "Failed tries (unknown codes and the like) that spent a token.", NULL);
    errors = vc_counter("voucher_gateway_guard_errors_total",
                        "Guarded requests let through because a bucket could not be run in Redis.",
                        NULL);
    from_memory = vc_counter("voucher_gateway_guard_checks_total",
                             "Bucket checks, by where the answer came from: remembered (a try was "
                             "there and no failure since, gw_guard.h) or asked of Redis.",
                             "source=\"memory\"");
    from_redis = vc_counter("voucher_gateway_guard_checks_total",
                            "Bucket checks, by where the answer came from: remembered (a try was "
                            "there and no failure since, gw_guard.h) or asked of Redis.",
                            "source=\"redis\"");
    index_errors = vc_counter("voucher_gateway_guard_index_errors_total",
                              "Spends that could not be indexed and published (guard_index.lua): "
                              "other gateways learn them only from their own failures.",
                              NULL);
    in_sync = vc_gauge(
        "voucher_gateway_guard_spent_synced",
        "1 while the spent set is trusted: subscribed to voucher-guard and " VC_KEY_GUARD_INDEX
        " loaded since (gw_guard.h); 0: every check asks Redis.",
        NULL);
    heard = vc_counter("voucher_gateway_guard_spends_heard_total",
                       "Spends of other gateways (and this one's) heard on voucher-guard.", NULL);
    for (int op = 0; op < 3; op++) {
        static const char *const label[] = {"op=\"take\"", "op=\"spend\"", "op=\"give\""};
        write_errors[op] = vc_counter("voucher_gateway_guard_write_errors_total",
                                      "Guessing-limit bucket writes that Redis refused (full at "
                                      "maxmemory) or did not answer, by op: a take's request got "
                                      "503; a spend's failure was answered unpaid.",
                                      label[op]);
    }
    for (int d = 0; d < LOCAL_COUNT; d++) {
        static const char *const label[] = {"decision=\"go\"", "decision=\"refused\"",
                                            "decision=\"failed\""};
        local_decided[d] = vc_counter("voucher_gateway_guard_local_total",
                                      "Guarded requests whose tries this gateway's own memory "
                                      "took while redis could not (the local limiter, "
                                      "gw_guard.h), by decision: go (let on), refused (429), "
                                      "failed (a failed try, kept).",
                                      label[d]);
    }
    if (!cache_ready) {
        if (uv_mutex_init(&cache_lock) != 0) {
            snprintf(err, errlen, "cannot create the guard's lock");
            return VC_ERR_NOMEM;
        }
        gw_guard_cache_init(&cache);
        gw_guard_spent_init(&spent_set);
        gw_guard_local_init(&local_buckets);
        cache_ready = 1;
    }
    rc = gw_guard_proxies_parse(cfg->trusted_proxies, &proxies, err, errlen);
    atomic_fetch_add(&configured, 1); /* after: a client kept under this count saw these proxies */
    return rc;
}

enum { B_CUSTOMER, B_IP, B_COUNT };

/*
 * Per bucket: not used, waiting, let through from memory (nothing taken:
 * a failure spends), taken in Redis (given back unless the answer is a
 * failure), taken from this gateway's lease (gw_guard.h), empty, Redis refused the script (an ACL,
 * an error reply), Redis unreachable, late or full (a take is a write).
 */
enum { T_NONE, T_WAIT, T_MEMORY, T_TAKEN, T_LEASED, T_EMPTY, T_ERROR, T_DOWN, T_LOCAL };

/* A guarded request's state, in its arena (req->guard). */
typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    gw_guard_cb cb;
    void *arg;
    int waiting;
    int state[B_COUNT];
    int64_t retry_ms;
    int mark;  /* -1 not marked, 0 not a failure, 1 a failure */
    int error; /* the rc of a failed bucket script, or 0 (a reply of the wrong shape) */
    int settled;
    int local;                /* the tries were taken by the local limiter (gw_guard_local()) */
    uint64_t epoch;           /* the check cache's epoch when the takes were sent */
    uint64_t ckey[B_COUNT];   /* each bucket's key in the check cache */
    int64_t full_at[B_COUNT]; /* a take's answer: when the bucket is full again */
    int lease[B_COUNT];       /* GW_GUARD_LEASE_*: how the bucket's try goes with its lease */
    gw_guard_rate_t rate[B_COUNT];
    char key[B_COUNT][GW_GUARD_KEY_MAX];
} guard_t;

/* Runs guard_bucket.lua's op on bucket b of g; a give gives n tries back. */
static int run_bucket_n(guard_t *g, int b, const char *op, int n, gw_redis_cb cb, void *arg)
{
    char tries[VC_I64_TEXT], window[VC_I64_TEXT], count[VC_I64_TEXT];
    const char *keys[] = {g->key[b]};
    const char *args[] = {op, tries, window, count};

    vc_i64_text(tries, g->rate[b].tries);
    vc_i64_text(window, g->rate[b].window_ms);
    vc_i64_text(count, n);
    return gw_redis_eval(g->app->redis, GW_SCRIPT_GUARD, cb, arg, 1, keys, n > 1 ? 4 : 3, args);
}

static int run_bucket(guard_t *g, int b, const char *op, gw_redis_cb cb, void *arg)
{
    return run_bucket_n(g, b, op, 1, cb, arg);
}

/* Counts a bucket that could not be run, and says so at most every 10 s. */
static void guard_error(guard_t *g)
{
    static _Atomic int64_t last_log_ms;
    int64_t now = vc_time_mono_ms(), last = atomic_load(&last_log_ms);

    vc_metric_add(errors, 1);
    if (now - last >= 10000 && atomic_compare_exchange_strong(&last_log_ms, &last, now))
        vc_warn("guessing limits not applied: a bucket could not be run in redis (%s); "
                "an ACL user needs ~guard:* (deploy/README.md, \"Guessing limits\")",
                g->error ? vc_strerror(g->error) : "unexpected reply");
}

enum { OP_TAKE, OP_SPEND, OP_GIVE, OP_COUNT };

/*
 * A bucket write (op) that Redis refused or did not answer: counted, said at
 * most every 10 s an op, and until a take succeeds no bucket is let through from
 * memory, so that the failed tries that follow are refused (503) rather
 * than answered unpaid (issue 42: a full Redis took no spend, silently).
 */
static void write_failed(int op, int rc)
{
    static const char *const what[OP_COUNT] = {
        "a try could not be taken: the request was answered 503",
        "a failed try could not be spent (its 404 was answered from memory)",
        "a try could not be given back (the bucket stays one try short)",
    };
    static _Atomic int64_t last_log_ms[OP_COUNT];
    int64_t now = vc_time_mono_ms(), last = atomic_load(&last_log_ms[op]);

    if (rc == VC_ERR_SHUTDOWN)
        return; /* a spend or a give cut short by the gateway's own stop */
    atomic_store(&writes_refused, 1);
    vc_metric_add(write_errors[op], 1);
    /* Each op said at most every 10 s: a take's 503s must not hide a spend's 404s. */
    if (now - last >= 10000 && atomic_compare_exchange_strong(&last_log_ms[op], &last, now))
        vc_warn("guessing limits: %s (%s; redis full at maxmemory, unreachable or late): "
                "guarded requests get 503 until redis takes writes again "
                "(deploy/README.md, \"Redis memory\")",
                what[op], vc_strerror(rc));
}

/* A give's answer: only a failure matters. */
static void given_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    (void)arg;
    (void)reply;
    if (rc != 0)
        write_failed(OP_GIVE, rc);
}

static void settle_spends(guard_t *g);

/*
 * Ends req's hold on its buckets, once (the answer is settled, or the guard
 * answered 429 or 503 itself): a try let through from memory leaves the
 * in-flight count; a failed try spends what memory let through and keeps
 * what it took; anything else gives each taken try back. A try given back is
 * one the take found there, so the bucket is remembered to hold one (the
 * check cache, unless a failure was settled here since the take was sent).
 */
static void release(guard_t *g, int failed)
{
    int64_t now_ms = (int64_t)uv_now(g->app->loop);
    int give[B_COUNT] = {0, 0};

    g->settled = 1;
    uv_mutex_lock(&cache_lock);
    for (int b = 0; b < B_COUNT; b++) {
        int paid = g->state[b] == T_TAKEN || g->state[b] == T_LEASED;
        int64_t lease_full_at;

        if (g->state[b] == T_MEMORY)
            gw_guard_flight_leave(&cache, g->ckey[b]);
        if (g->state[b] == T_LOCAL && !failed)
            gw_guard_local_give(&local_buckets, g->ckey[b], &g->rate[b], vc_time_mono_ms());
        if (g->lease[b] != GW_GUARD_LEASE_NONE) {
            give[b] = gw_guard_lease_settle(&cache, g->ckey[b], g->lease[b], paid, failed,
                                            vc_time_mono_ms(), &lease_full_at);
            if (g->state[b] == T_LEASED)
                g->full_at[b] = lease_full_at;
        } else if (g->state[b] == T_TAKEN && !failed) {
            give[b] = 1;
        }
        if (paid && !failed)
            gw_guard_cache_put(&cache, g->ckey[b], g->epoch, now_ms);
    }
    uv_mutex_unlock(&cache_lock);
    for (int b = 0; b < B_COUNT; b++) {
        int rc;
        if (give[b] > 0 && (rc = run_bucket_n(g, b, "give", give[b], given_cb, NULL)) != 0)
            write_failed(OP_GIVE, rc);
    }
    if (failed && g->local)
        vc_metric_add(local_decided[LOCAL_FAILED], 1);
    if (failed)
        settle_spends(g);
}

/*
 * Says, at most every 10 s each, that the local limiter took over (Redis could
 * not take a try: rc) or handed back (Redis took one again).
 */
static void local_said(int took_over, int rc)
{
    static _Atomic int64_t last_log_ms[2];
    int64_t now = vc_time_mono_ms(), last = atomic_load(&last_log_ms[took_over]);

    if (now - last < 10000 || !atomic_compare_exchange_strong(&last_log_ms[took_over], &last, now))
        return;
    if (took_over)
        vc_warn("guessing limits: redis cannot take a try (%s): this gateway counts the same "
                "buckets in its own memory until it can, and only direct vouchers answer "
                "meanwhile (deploy/README.md, \"Guessing limits while Redis is away\")",
                vc_strerror(rc));
    else
        vc_info("guessing limits: redis takes tries again: the local limiter's counts are "
                "dropped and every bucket is redis's again");
}

/* Redis took a try: the local limiter, if it decided since, hands back and forgets. */
static void local_hand_back(void)
{
    if (!atomic_load(&local_active) || !atomic_exchange(&local_active, 0))
        return;
    uv_mutex_lock(&cache_lock);
    gw_guard_local_init(&local_buckets);
    uv_mutex_unlock(&cache_lock);
    local_said(0, 0);
}

/*
 * Redis could not take g's tries (a bucket T_DOWN, g->error): what Redis or
 * memory did take for g is given back as for any answer that is no failure,
 * and each bucket that applies takes its try in local_buckets instead. An
 * empty one answers 429 before the lookup, as Redis's would; otherwise the
 * request goes on, marked local (gw_guard_local()): the route lets only a
 * direct voucher's go further.
 */
static void decide_locally(guard_t *g)
{
    char body[256], headers[64];
    size_t len;
    int took[B_COUNT] = {0, 0}, empty = 0;
    int64_t now_ms, retry_ms = 0, wait_ms;

    write_failed(OP_TAKE, g->error); /* counted as before, and memory stops answering */
    release(g, 0);
    g->settled = 0;
    now_ms = vc_time_mono_ms();
    uv_mutex_lock(&cache_lock);
    for (int b = 0; b < B_COUNT; b++) {
        g->lease[b] = GW_GUARD_LEASE_NONE;
        g->state[b] = T_NONE;
        if (g->rate[b].tries <= 0)
            continue;
        if (gw_guard_local_take(&local_buckets, g->ckey[b], &g->rate[b], now_ms, &wait_ms)) {
            took[b] = 1;
        } else {
            empty = 1;
            if (wait_ms > retry_ms)
                retry_ms = wait_ms;
        }
    }
    for (int b = 0; b < B_COUNT; b++) {
        if (took[b] && empty)
            gw_guard_local_give(&local_buckets, g->ckey[b], &g->rate[b], now_ms);
        else if (took[b])
            g->state[b] = T_LOCAL;
    }
    uv_mutex_unlock(&cache_lock);
    if (!atomic_exchange(&local_active, 1))
        local_said(1, g->error);
    g->local = 1;
    if (empty) {
        g->settled = 1;
        vc_metric_add(local_decided[LOCAL_REFUSED], 1);
        len = gw_body_error(body, sizeof(body), "TOO_MANY_ATTEMPTS",
                            "too many failed tries: retry after the time in Retry-After", NULL);
        snprintf(headers, sizeof(headers), "Retry-After: %lld\r\n",
                 (long long)gw_guard_retry_after_s(retry_ms));
        gw_http_respond(g->req, 429, headers, body, len);
        return;
    }
    vc_metric_add(local_decided[LOCAL_GO], 1);
    g->cb(g->arg);
}

static void decide(guard_t *g)
{
    char body[256], headers[64];
    size_t len;
    gw_request_t *req = g->req;

    if (g->state[B_CUSTOMER] == T_DOWN || g->state[B_IP] == T_DOWN) {
        /*
         * Redis unreachable, late, fenced or full (a take that cannot be
         * written): never a try unpaid, and no 503 for a direct voucher, which
         * needs no Redis. The local limiter takes the tries (gw_guard.h).
         */
        decide_locally(g);
        return;
    }
    /*
     * A bucket Redis refused to run (an ACL without ~guard:*, a script error)
     * does not apply: the limits are a second line, and refusing every request
     * for a configuration mistake would stop the shop.
     */
    for (int b = 0; b < B_COUNT; b++)
        if (g->state[b] == T_ERROR) {
            g->state[b] = T_NONE;
            guard_error(g);
        }
    if (g->state[B_CUSTOMER] == T_EMPTY || g->state[B_IP] == T_EMPTY) {
        if (g->state[B_CUSTOMER] == T_EMPTY)
            vc_metric_add(refused_customer, 1);
        if (g->state[B_IP] == T_EMPTY)
            vc_metric_add(refused_ip, 1);
        release(g, 0); /* the other bucket's try, taken or from memory, is not used */
        len = gw_body_error(body, sizeof(body), "TOO_MANY_ATTEMPTS",
                            "too many failed tries: retry after the time in Retry-After", NULL);
        snprintf(headers, sizeof(headers), "Retry-After: %lld\r\n",
                 (long long)gw_guard_retry_after_s(g->retry_ms));
        gw_http_respond(req, 429, headers, body, len);
        return;
    }
    g->cb(g->arg);
}

static void taken_cb(void *arg, int rc, const gw_redis_reply_t *reply, int b)
{
    guard_t *g = arg;

    if (rc != 0)
        g->error = rc;
    if (rc != 0 && rc != VC_ERR_PROTOCOL) {
        g->state[b] = T_DOWN;
    } else if (rc != 0 || reply->n < 2 || reply->item[0].type != GW_REDIS_INT ||
               reply->item[1].type != GW_REDIS_INT) {
        g->state[b] = T_ERROR;
    } else if (reply->item[0].integer == 1) {
        g->state[b] = T_TAKEN;
        g->full_at[b] = reply->item[1].integer;
        atomic_store(&writes_refused, 0); /* Redis takes writes again */
        local_hand_back();
        if (g->lease[b] != GW_GUARD_LEASE_NONE) {
            uv_mutex_lock(&cache_lock);
            gw_guard_lease_taken(&cache, g->ckey[b], g->full_at[b]);
            uv_mutex_unlock(&cache_lock);
        }
    } else {
        g->state[b] = T_EMPTY;
        if (reply->item[1].integer > g->retry_ms)
            g->retry_ms = reply->item[1].integer;
    }
    if (--g->waiting == 0)
        decide(g);
}

static void customer_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    taken_cb(arg, rc, reply, B_CUSTOMER);
}

static void ip_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    taken_cb(arg, rc, reply, B_IP);
}

/*
 * The address bucket of the last guarded request on this thread, and what it
 * came from. One client sends many requests in a row (on one connection, or
 * an order service on a few), and parsing its address and hashing its
 * bucket's key anew were 1,400 of a sold-out answer's 16,000 instructions.
 */
static _Thread_local struct {
    char peer[GW_GUARD_ADDR_MAX];
    char forwarded_for[128];
    gw_guard_rate_t rate;
    unsigned configured; /* the configuration (trusted proxies) it was made under */
    int valid;
    int unnamed; /* a trusted proxy that named no client: no address bucket */
    char key[GW_GUARD_KEY_MAX];
    uint64_t ckey, skey;
} last_address;

int gw_guard_address(const gw_request_t *req, char out[GW_GUARD_ADDR_MAX])
{
    int rc = gw_guard_client(&proxies, req->peer, req->forwarded_for, out);
    return rc == GW_GUARD_UNNAMED ? 0 : rc; /* the proxy's own address, then */
}

/* Copies s into out (cap bytes) when it fits whole; returns whether it did. */
static int keep_text(char *out, size_t cap, const char *s)
{
    size_t len = strnlen(s, cap);

    if (len == cap)
        return 0;
    memcpy(out, s, len + 1);
    return 1;
}

/*
 * A request from a trusted proxy that named no client (gw_guard_client()'s
 * GW_GUARD_UNNAMED): the order service calling for its shoppers without
 * X-Forwarded-For, most likely. Its address is every shopper's, so it gets
 * no address bucket (the customer's still applies): counted, and said once
 * per process, since a proxy that should name clients and does not lets a
 * guesser behind it off the address limit.
 */
static void unnamed_client(const gw_request_t *req)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;

    vc_metric_add(unnamed, 1);
    if (!atomic_flag_test_and_set(&warned))
        vc_warn("guessing limits: %s, a trusted proxy (VOUCHER_TRUSTED_PROXIES), sent a guarded "
                "request that names no client (no X-Forwarded-For): such requests are limited "
                "per customer, not per address (voucher_gateway_guard_unnamed_total counts "
                "them; said once). Fine for the order service calling for its shoppers; a "
                "proxy in front of shoppers must send X-Forwarded-For",
                req->peer);
}

/*
 * Makes last_address req's client's bucket (of rate *rate). Returns 0 when
 * req has no address bucket: not from a TCP socket, or from a trusted proxy
 * that named no client (unnamed_client()); else 1.
 */
static int address_bucket(const gw_request_t *req, const gw_guard_rate_t *rate)
{
    const char *forwarded = req->forwarded_for ? req->forwarded_for : "";
    char client[GW_GUARD_ADDR_MAX];
    unsigned now_configured = atomic_load(&configured);
    int rc;

    if (last_address.valid && last_address.configured == now_configured && req->peer &&
        strcmp(last_address.peer, req->peer) == 0 &&
        strcmp(last_address.forwarded_for, forwarded) == 0 &&
        last_address.rate.tries == rate->tries && last_address.rate.window_ms == rate->window_ms) {
        if (last_address.unnamed)
            unnamed_client(req);
        return !last_address.unnamed;
    }
    last_address.valid = 0;
    if ((rc = gw_guard_client(&proxies, req->peer, req->forwarded_for, client)) < 0)
        return 0;
    last_address.unnamed = rc == GW_GUARD_UNNAMED;
    /* Cut to GW_GUARD_KEY_MAX - 1 bytes as snprintf would (never: the parts are bounded). */
    (void)vc_key_guard_address(last_address.key, GW_GUARD_KEY_MAX, GW_GUARD_SCOPE, client);
    last_address.skey = gw_guard_spent_key(last_address.key, strlen(last_address.key));
    last_address.ckey = gw_guard_cache_key_of(last_address.skey, rate);
    last_address.rate = *rate;
    last_address.configured = now_configured;
    /* Kept for the next request only if what it came from fits to be compared. */
    last_address.valid = keep_text(last_address.peer, sizeof(last_address.peer), req->peer) &&
                         keep_text(last_address.forwarded_for,
                                   sizeof(last_address.forwarded_for), forwarded);
    if (last_address.unnamed)
        unnamed_client(req);
    return !last_address.unnamed;
}

int gw_guard_enter(gw_app_t *app, gw_request_t *req, int64_t customer_id, gw_guard_cb cb,
                   void *arg)
{
    gw_guard_limits_t limits = defaults;
    char customer[VC_I64_TEXT];
    guard_t *g;
    int rc, ask = 0, trusted, refused;
    int64_t now_ms, rnow;
    uint64_t skey[B_COUNT] = {0, 0};

    if (customer_id == 0 && !guard_confirm_cancel)
        return GW_GUARD_GO;
    if (customer_id == 0)
        limits.customer.tries = 0;
    if (limits.ip.tries > 0 && !address_bucket(req, &limits.ip))
        limits.ip.tries = 0; /* no address: a unix socket (tests), or a proxy that named none */
    if (limits.customer.tries <= 0 && limits.ip.tries <= 0)
        return GW_GUARD_GO;
    if (!(g = gw_request_alloc(req, sizeof(*g)))) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return GW_GUARD_PENDING;
    }
    g->app = app;
    g->req = req;
    g->cb = cb;
    g->arg = arg;
    g->mark = -1;
    g->rate[B_CUSTOMER] = limits.customer;
    g->rate[B_IP] = limits.ip;
    vc_i64_text(customer, customer_id);
    (void)vc_key_guard_customer(g->key[B_CUSTOMER], GW_GUARD_KEY_MAX, GW_GUARD_SCOPE, customer);
    if (g->rate[B_IP].tries > 0) {
        memcpy(g->key[B_IP], last_address.key, sizeof(g->key[B_IP]));
        g->ckey[B_IP] = last_address.ckey;
        skey[B_IP] = last_address.skey;
    }
    req->guard = g;
    /*
     * What this gateway knows needs no round trip (gw_guard.h, the check
     * cache and the spent set), for GW_GUARD_MEMORY_IN_FLIGHT requests of a
     * bucket at a time. The loop's time, not a clock read: every loop of the
     * process reads the same monotonic clock, at most one loop turn late, and
     * the ttl is no part of the argument, only of how much is remembered.
     */
    now_ms = (int64_t)uv_now(app->loop);
    rnow = redis_now();
    if (g->rate[B_CUSTOMER].tries > 0) {
        skey[B_CUSTOMER] =
            gw_guard_spent_key(g->key[B_CUSTOMER], strlen(g->key[B_CUSTOMER]));
        g->ckey[B_CUSTOMER] = gw_guard_cache_key_of(skey[B_CUSTOMER], &g->rate[B_CUSTOMER]);
    }
    refused = atomic_load(&writes_refused);
    uv_mutex_lock(&cache_lock);
    g->epoch = gw_guard_cache_epoch(&cache);
    trusted = gw_guard_spent_trusted(&spent_set, rnow);
    for (int b = 0; b < B_COUNT; b++) {
        if (g->rate[b].tries <= 0)
            continue;
        /*
         * A try of this gateway's lease; else remembered to hold a try, or
         * (the spent set) spent by nobody since this gateway's subscription
         * and index load: full, and not already in flight from memory (not
         * while Redis refuses writes: a failure let through now could not be
         * spent); else a take in Redis.
         */
        /*
         * Not the lease either while Redis refuses writes: a request that
         * goes on with a try of the lease is no local decision, and its route
         * would answer a code nobody has 503 instead of a failed try (the
         * local limiter's rule, gw_guard_local()). The lease's tries wait for
         * the listener's give.
         */
        g->lease[b] = refused ? GW_GUARD_LEASE_NONE
                              : gw_guard_lease_enter(&cache, g->ckey[b], g->key[b], &g->rate[b]);
        if (g->lease[b] == GW_GUARD_LEASE_USED)
            g->state[b] = T_LEASED; /* a try this gateway holds, paid: first choice */
        else if (!refused &&
                 (gw_guard_cache_has(&cache, g->ckey[b], now_ms) ||
                  (trusted && !gw_guard_spent_has(&spent_set, skey[b], rnow))) &&
                 gw_guard_flight_enter(&cache, g->ckey[b]))
            g->state[b] = T_MEMORY;
        else
            ask++;
    }
    uv_mutex_unlock(&cache_lock);
    vc_metric_add(from_memory, (g->rate[B_CUSTOMER].tries > 0) + (g->rate[B_IP].tries > 0) - ask);
    if (ask == 0)
        return GW_GUARD_GO; /* guarded all the same: settle() spends on a failure */
    vc_metric_add(from_redis, ask);
    /* Both sent before either answers: one round trip, pipelined on the worker's connection. */
    g->waiting = 1; /* held until both are sent, so a synchronous answer cannot decide early */
    for (int b = 0; b < B_COUNT; b++) {
        static const gw_redis_cb cb_of[B_COUNT] = {customer_cb, ip_cb};

        if (g->rate[b].tries <= 0 || g->state[b] == T_MEMORY || g->state[b] == T_LEASED)
            continue;
        g->waiting++;
        g->state[b] = T_WAIT;
        if ((rc = run_bucket(g, b, "take", cb_of[b], g)) != 0) {
            g->waiting--;
            g->error = rc;
            g->state[b] = rc == VC_ERR_PROTOCOL ? T_ERROR : T_DOWN;
        }
    }
    if (--g->waiting == 0)
        decide(g);
    return GW_GUARD_PENDING;
}

/*
 * The buckets of one failure (one per bucket that applied) on their way to
 * guard:index: the spends of what memory let through in flight, and the
 * takes already answered. One index script for all of them once the last
 * spend answered (malloc'd, freed then). The answers come on the worker's
 * loop.
 */
typedef struct settle settle_t;
typedef struct {
    settle_t *settle;
    uint64_t ckey, skey;
    int64_t full_at; /* the spend's or the take's answer: when the bucket is full again */
    char key[GW_GUARD_KEY_MAX];
} spend_t;
struct settle {
    gw_redis_t *redis;
    int pending; /* spends not answered yet */
    int n;
    spend_t spend[B_COUNT];
};

/* A spend whose answer is not used (no memory for what the index needs). */
static void unindexed_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    (void)arg;
    (void)reply;
    if (rc != 0)
        write_failed(OP_SPEND, rc);
}

/* guard_index.lua answered: a failure is counted and said at most every 10 s. */
static void indexed_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    static _Atomic int64_t last_log_ms;
    int64_t now = vc_time_mono_ms(), last = atomic_load(&last_log_ms);

    (void)arg;
    (void)reply;
    if (rc == 0)
        return;
    vc_metric_add(index_errors, 1);
    if (now - last >= 10000 && atomic_compare_exchange_strong(&last_log_ms, &last, now))
        vc_warn("guessing limits: a spend could not be indexed and published (%s); an ACL user "
                "needs ~guard:* and &" GW_GUARD_CHANNEL " (deploy/README.md)",
                vc_strerror(rc));
}

/*
 * Indexes and publishes the buckets of a failure whose spends answered
 * (guard_index.lua: ZADD, then PUBLISH, on guard:index's node), in one
 * script for both: a failure costs its two spends and one index call.
 */
static void index_spends(settle_t *st)
{
    char at[B_COUNT][VC_I64_TEXT];
    const char *keys[] = {VC_KEY_GUARD_INDEX};
    const char *args[2 * B_COUNT];
    int nargs = 0, irc;

    for (int i = 0; i < st->n; i++) {
        if (st->spend[i].full_at <= 0)
            continue;
        vc_i64_text(at[i], st->spend[i].full_at);
        args[nargs++] = st->spend[i].key;
        args[nargs++] = at[i];
    }
    if (nargs > 0 && (irc = gw_redis_eval(st->redis, GW_SCRIPT_GUARD_INDEX, indexed_cb, NULL, 1,
                                          keys, nargs, args)) != 0)
        indexed_cb(NULL, irc, NULL);
    free(st);
}

/*
 * A failure's spend was answered (or failed): forgets the bucket again, for
 * a take another worker sent on its own connection after this failure was
 * settled, which Redis may have run before the spend (gw_guard.h); then puts
 * the bucket in this gateway's spent set with the time the script gave. The
 * last of the failure's spends indexes and publishes them for the others.
 */
static void spent_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    spend_t *sp = arg;

    if (rc != 0)
        write_failed(OP_SPEND, rc);
    if (rc == 0 && reply && reply->n >= 2 && reply->item[1].type == GW_REDIS_INT)
        sp->full_at = reply->item[1].integer;
    uv_mutex_lock(&cache_lock);
    gw_guard_cache_fail(&cache, sp->ckey);
    if (sp->full_at > 0)
        gw_guard_spent_add(&spent_set, sp->skey, sp->full_at, redis_now());
    uv_mutex_unlock(&cache_lock);
    if (--sp->settle->pending == 0)
        index_spends(sp->settle);
}

int gw_guard_local(const gw_request_t *req)
{
    const guard_t *g = req->guard;
    return g && g->local;
}

void gw_guard_mark(gw_request_t *req, int failed)
{
    guard_t *g = req->guard;
    if (g)
        g->mark = failed != 0;
}

/*
 * The failed try of g: each bucket let through from memory is spent now
 * (into debt if failures were in flight together, gw_guard.h), each taken
 * one keeps its try; all of them go in this gateway's spent set at once and
 * then, in one index script, in guard:index and on voucher-guard.
 */
static void settle_spends(guard_t *g)
{
    settle_t *st;
    int counted = 0;

    for (int b = 0; b < B_COUNT; b++)
        counted += g->state[b] == T_MEMORY || g->state[b] == T_TAKEN || g->state[b] == T_LEASED;
    if (counted == 0)
        return;
    vc_metric_add(spent, 1);
    /* All counted before the first is sent: a spend that fails at once answers at once. */
    if ((st = calloc(1, sizeof(*st))) != NULL) {
        st->redis = g->app->redis;
        st->pending = 1; /* held until every spend is sent */
    }
    for (int b = 0; b < B_COUNT; b++) {
        spend_t *sp;
        uint64_t skey;
        int64_t one_try, rnow;

        int paid = g->state[b] == T_TAKEN || g->state[b] == T_LEASED;

        if (g->state[b] != T_MEMORY && !paid)
            continue;
        sp = st ? &st->spend[st->n++] : NULL;
        skey = gw_guard_spent_key(g->key[b], strlen(g->key[b]));
        /*
         * In this gateway's spent set at once, until the earliest the bucket
         * can be full again (one try's refill; the answer gives the real
         * time): its next requests take in Redis.
         */
        one_try = (g->rate[b].window_ms + g->rate[b].tries - 1) / g->rate[b].tries + 1;
        rnow = redis_now();
        uv_mutex_lock(&cache_lock);
        gw_guard_cache_fail(&cache, g->ckey[b]);
        /* A lease's try was taken earlier: full again no sooner than one try from now. */
        if (paid && g->full_at[b] < rnow + one_try)
            g->full_at[b] = rnow + one_try;
        gw_guard_spent_add(&spent_set, skey, paid ? g->full_at[b] : rnow + one_try, rnow);
        uv_mutex_unlock(&cache_lock);
        if (paid) {
            /* Paid for before the lookup: only indexed and published. */
            if (sp) {
                sp->settle = st;
                sp->skey = skey;
                sp->ckey = g->ckey[b];
                sp->full_at = g->full_at[b];
                memcpy(sp->key, g->key[b], sizeof(sp->key));
            }
            continue;
        }
        if (!sp) {
            /* Spent all the same, only not indexed: the crash case of gw_guard.h. */
            int rc = run_bucket(g, b, "spend", unindexed_cb, NULL);
            if (rc != 0)
                write_failed(OP_SPEND, rc);
            continue;
        }
        sp->settle = st;
        sp->ckey = g->ckey[b];
        sp->skey = skey;
        memcpy(sp->key, g->key[b], sizeof(sp->key));
        st->pending++;
        if (run_bucket(g, b, "spend", spent_cb, sp) != 0)
            spent_cb(sp, VC_ERR_UNAVAILABLE, NULL);
    }
    if (st && --st->pending == 0)
        index_spends(st);
}

void gw_guard_settle(gw_request_t *req, int status)
{
    guard_t *g = req ? req->guard : NULL;

    if (!g || g->settled)
        return;
    release(g, g->mark >= 0 ? g->mark : status == 404);
}

/* ---- the spent set's feed, and the leases' return ---- */

int gw_guard_leases_idle(gw_guard_lease_t *out, int max, int all)
{
    int n;

    if (!cache_ready)
        return 0;
    uv_mutex_lock(&cache_lock);
    /* Every lease idle "since long ago" when all: the same sweep, no other rule. */
    n = gw_guard_lease_sweep(&cache, all ? INT64_MAX / 2 : vc_time_mono_ms(), out, max);
    uv_mutex_unlock(&cache_lock);
    return n;
}

void gw_guard_lease_given(int rc)
{
    if (rc != 0)
        write_failed(OP_GIVE, rc);
}

int gw_guard_spent_wanted(void)
{
    return defaults.customer.tries > 0 || defaults.ip.tries > 0;
}

void gw_guard_sync_lost(void)
{
    if (!cache_ready)
        return; /* never configured: nothing to trust */
    uv_mutex_lock(&cache_lock);
    gw_guard_spent_sync(&spent_set, 0);
    uv_mutex_unlock(&cache_lock);
    vc_metric_set(in_sync, 0);
}

void gw_guard_sync_clock(int64_t offset_ms)
{
    atomic_store(&redis_offset_ms, offset_ms);
}

void gw_guard_sync_add(const char *bucket_key, size_t len, int64_t full_at)
{
    uint64_t skey = gw_guard_spent_key(bucket_key, len);
    int64_t now = redis_now();

    if (!cache_ready)
        return;
    uv_mutex_lock(&cache_lock);
    gw_guard_spent_add(&spent_set, skey, full_at, now);
    uv_mutex_unlock(&cache_lock);
}

void gw_guard_sync_loaded(int64_t dropped_until)
{
    if (!cache_ready)
        return; /* never configured: nothing to trust */
    uv_mutex_lock(&cache_lock);
    if (dropped_until > spent_set.dropped_until)
        spent_set.dropped_until = dropped_until;
    gw_guard_spent_sync(&spent_set, 1);
    uv_mutex_unlock(&cache_lock);
    vc_metric_set(in_sync, 1);
}

void gw_guard_heard(const char *msg, size_t len)
{
    int64_t full_at = 0;
    size_t i = 0;

    while (i < len && msg[i] >= '0' && msg[i] <= '9' && i < 18)
        full_at = full_at * 10 + (msg[i++] - '0');
    if (i == 0 || i >= len || msg[i] != ' ' || i + 1 == len)
        return;
    gw_guard_sync_add(msg + i + 1, len - i - 1, full_at);
    vc_metric_add(heard, 1);
}
