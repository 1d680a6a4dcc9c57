#include "gw_soldout.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "vc_event.h"
#include "vc_hash.h"

#define GW_SOLDOUT_SLOTS 4096

typedef struct {
    uv_mutex_t lock;
    char code[VC_CODE_MAX + 1]; /* the code marked, "" for none */
    int64_t until_ms;           /* monotonic */
    unsigned clears;            /* the slot's clear count when marked */
} slot_t;

/*
 * How often a use came back for the codes of each slot: a mark taken at
 * another count is void. Two codes sharing a slot only clear each other's
 * marks early, which costs a script run, never a wrong answer.
 */
static atomic_uint soldout_clears[GW_SOLDOUT_SLOTS];
static slot_t slots[GW_SOLDOUT_SLOTS];
static uv_once_t slots_once = UV_ONCE_INIT;

static void slots_init(void)
{
    for (size_t i = 0; i < GW_SOLDOUT_SLOTS; i++)
        if (uv_mutex_init(&slots[i].lock) != 0)
            abort();
}

static unsigned slot_of(const char *code)
{
    return (unsigned)(vc_hash_str(code) >> 40) % GW_SOLDOUT_SLOTS;
}

void gw_soldout_mark(const char *code, int64_t mono_until_ms)
{
    unsigned i = slot_of(code);
    slot_t *s = &slots[i];

    uv_once(&slots_once, slots_init);
    uv_mutex_lock(&s->lock);
    snprintf(s->code, sizeof(s->code), "%s", code);
    s->until_ms = mono_until_ms;
    s->clears = atomic_load(&soldout_clears[i]);
    uv_mutex_unlock(&s->lock);
}

void gw_soldout_clear(const char *code)
{
    atomic_fetch_add(&soldout_clears[slot_of(code)], 1);
}

int gw_soldout_is(const char *code, int64_t mono_now_ms)
{
    unsigned i = slot_of(code);
    slot_t *s = &slots[i];
    int marked;

    uv_once(&slots_once, slots_init);
    uv_mutex_lock(&s->lock);
    marked = s->until_ms > mono_now_ms && strcmp(s->code, code) == 0 &&
             s->clears == atomic_load_explicit(&soldout_clears[i], memory_order_relaxed);
    uv_mutex_unlock(&s->lock);
    return marked;
}
