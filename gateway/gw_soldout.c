#include "gw_soldout.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "vc_error.h"
#include "vc_event.h"
#include "vc_hash.h"
#include "vc_time.h"

#define GW_SOLDOUT_SLOTS 4096
#define GW_SOLDOUT_ASK_MS 5000 /* a question without an answer this long is asked again */

typedef struct {
    uv_mutex_t lock;
    char code[VC_CODE_MAX + 1]; /* the code marked, "" for none */
    int64_t until_ms;           /* monotonic */
    unsigned clears;            /* the slot's clear count when the snapshot was asked for */
    uint64_t *ids;              /* keyed hashes of the snapshot's orderIds, sorted; owned */
    size_t nids;
    char asking[VC_CODE_MAX + 1]; /* the code a snapshot is on its way for, "" for none */
    int64_t asked_ms;             /* monotonic */
} slot_t;

/*
 * How often a use came back (or was taken here) for the codes of each slot:
 * a mark asked for at another count is void. Two codes sharing a slot only
 * clear each other's marks early, which costs a script run, never a wrong
 * answer.
 */
static atomic_uint soldout_clears[GW_SOLDOUT_SLOTS];
static slot_t slots[GW_SOLDOUT_SLOTS];
static uv_once_t slots_once = UV_ONCE_INIT;
static char token[17];

static void slots_init(void)
{
    uint64_t t;

    for (size_t i = 0; i < GW_SOLDOUT_SLOTS; i++)
        if (uv_mutex_init(&slots[i].lock) != 0)
            abort();
    if (uv_random(NULL, NULL, &t, sizeof(t), 0, NULL) != 0)
        t = ((uint64_t)uv_os_getpid() << 32) ^ (uint64_t)vc_time_now_ms();
    snprintf(token, sizeof(token), "%016llx", (unsigned long long)t);
}

static unsigned slot_of(const char *code)
{
    return (unsigned)(vc_hash_str(code) >> 40) % GW_SOLDOUT_SLOTS;
}

static slot_t *lock_slot(const char *code, unsigned *index)
{
    unsigned i = slot_of(code);

    uv_once(&slots_once, slots_init);
    uv_mutex_lock(&slots[i].lock);
    if (index)
        *index = i;
    return &slots[i];
}

/* Whether the slot holds a live mark of code; the slot is locked. */
static int marked(const slot_t *s, unsigned i, const char *code, int64_t now_ms)
{
    return s->until_ms > now_ms && strcmp(s->code, code) == 0 &&
           s->clears == atomic_load_explicit(&soldout_clears[i], memory_order_relaxed);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The keyed hashes of ids, sorted, into *out (owned by the caller; NULL when
 * there are none). Two orderIds with one hash only send a new order to
 * reserve.lua "known", which answers it as sold out: never a wrong answer.
 */
static int hash_ids(const char *ids, size_t len, uint64_t **out, size_t *n)
{
    char id[VC_ORDER_ID_MAX + 1];
    size_t count = 0, cap = 0;
    uint64_t *h = NULL;

    for (size_t at = 0; at < len;) {
        const char *nl = memchr(ids + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - ids) : len, l = end - at;

        if (l > 0 && l <= VC_ORDER_ID_MAX) {
            if (count == cap) {
                uint64_t *more = realloc(h, (cap = cap ? cap * 2 : 64) * sizeof(*h));
                if (!more) {
                    free(h);
                    return VC_ERR_NOMEM;
                }
                h = more;
            }
            memcpy(id, ids + at, l);
            id[l] = '\0';
            h[count++] = vc_hash_str(id);
        }
        at = end + 1;
    }
    if (count > 1)
        qsort(h, count, sizeof(*h), cmp_u64);
    *out = h;
    *n = count;
    return 0;
}

static int install(slot_t *s, const char *code, unsigned clears, int64_t until_ms, uint64_t *ids,
                   size_t n)
{
    free(s->ids);
    snprintf(s->code, sizeof(s->code), "%s", code);
    s->until_ms = until_ms;
    s->clears = clears;
    s->ids = ids;
    s->nids = n;
    return 0;
}

int gw_soldout_order(const char *code, const char *order_id, int64_t mono_now_ms)
{
    unsigned i;
    slot_t *s = lock_slot(code, &i);
    int answer = GW_SOLDOUT_NO;

    if (marked(s, i, code, mono_now_ms)) {
        uint64_t h = vc_hash_str(order_id);
        answer = s->nids && bsearch(&h, s->ids, s->nids, sizeof(h), cmp_u64) ? GW_SOLDOUT_KNOWN
                                                                            : GW_SOLDOUT_NEW;
    }
    uv_mutex_unlock(&s->lock);
    return answer;
}

int gw_soldout_is(const char *code, int64_t mono_now_ms)
{
    unsigned i;
    slot_t *s = lock_slot(code, &i);
    int answer = marked(s, i, code, mono_now_ms);

    uv_mutex_unlock(&s->lock);
    return answer;
}

int gw_soldout_ask(const char *code, int64_t mono_now_ms, gw_soldout_ticket_t *t)
{
    unsigned i;
    slot_t *s = lock_slot(code, &i);
    int ask = 0;

    if (s->asking[0] == '\0' || s->asked_ms + GW_SOLDOUT_ASK_MS <= mono_now_ms) {
        snprintf(s->asking, sizeof(s->asking), "%s", code);
        s->asked_ms = mono_now_ms;
        /* Read before the script is sent: a clear after this voids what it brings back. */
        t->clears = atomic_load(&soldout_clears[i]);
        t->sent_ms = mono_now_ms;
        ask = 1;
    }
    uv_mutex_unlock(&s->lock);
    return ask;
}

int gw_soldout_answer(const char *code, const gw_soldout_ticket_t *t, int64_t recheck_ms,
                      const char *ids, size_t len)
{
    uint64_t *h = NULL;
    size_t n = 0;
    unsigned i;
    slot_t *s;
    int rc = 0;

    if (ids && (rc = hash_ids(ids, len, &h, &n)) != 0)
        ids = NULL;
    s = lock_slot(code, &i);
    if (strcmp(s->asking, code) == 0)
        s->asking[0] = '\0';
    if (ids && t->clears == atomic_load(&soldout_clears[i])) {
        install(s, code, t->clears, t->sent_ms + recheck_ms, h, n);
        h = NULL;
    }
    uv_mutex_unlock(&s->lock);
    free(h);
    return rc;
}

int gw_soldout_mark(const char *code, int64_t mono_until_ms, const char *ids, size_t len)
{
    uint64_t *h = NULL;
    size_t n = 0;
    unsigned i;
    slot_t *s;
    int rc;

    if ((rc = hash_ids(ids, len, &h, &n)) != 0)
        return rc;
    s = lock_slot(code, &i);
    install(s, code, atomic_load(&soldout_clears[i]), mono_until_ms, h, n);
    uv_mutex_unlock(&s->lock);
    return 0;
}

void gw_soldout_clear(const char *code)
{
    atomic_fetch_add(&soldout_clears[slot_of(code)], 1);
}

const char *gw_soldout_token(void)
{
    uv_once(&slots_once, slots_init);
    return token;
}
