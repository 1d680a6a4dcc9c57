#include "rc_campaign.h"
#include "rc_agg.h"
#include "rc_grow.h"
#include "rc_kafka.h"
#include "rc_pg.h"
#include "rc_redis.h"
#include "rc_repair.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_lua.h"
#include "vc_metrics.h"
#include "vc_model.h"
#include "vc_order_value.h"
#include "vc_pg.h"
#include "vc_retention.h"
#include "vc_time.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RC_CAMPAIGN_DUE_MAX 100 /* due holds listed per campaign and pass (the numbers) */
#define RC_CAMPAIGN_DUE_BUF (RC_CAMPAIGN_DUE_MAX * (VC_ORDER_ID_MAX + 32) + 128)

/*
 * What earlier passes saw of one campaign: when each hold unknown downstream
 * was first seen (as rc_memory_entry_t's seen, for the voucher), when the
 * campaign was last read in full, and the aggregates that read found it
 * consistent with (as the voucher's agg_base). Kept in this file: the
 * campaigns are not among the vouchers the planner's memory lines up.
 */
typedef struct {
    int64_t id;
    int64_t last_full_ms;     /* monotonic */
    int64_t missing_since_ms; /* when taken was first seen lost, for the restore delay */
    rc_orders_t seen;
    rc_agg_base_t agg_base;
} memory_t;

static memory_t *memory;
static size_t nmemory, memory_cap;

static memory_t *memory_of(int64_t id)
{
    for (size_t i = 0; i < nmemory; i++)
        if (memory[i].id == id)
            return &memory[i];
    if (rc_grow((void **)&memory, &memory_cap, nmemory, sizeof(*memory), 8) != 0)
        return NULL;
    memset(&memory[nmemory], 0, sizeof(*memory));
    memory[nmemory].id = id;
    return &memory[nmemory++];
}

int rc_campaign_needs_full(int lost, int64_t taken, int64_t live, int64_t releasing,
                           int64_t due, size_t flying)
{
    /*
     * Settled by the numbers (as rc_model_quiet() for a voucher): every code
     * Redis holds is a live row, nothing on its way, no hold due, no release
     * under way. A hold PostgreSQL confirmed while Redis lost the confirm
     * looks like any hold by the numbers: the periodic full read finds it.
     */
    return lost || taken != live || releasing > 0 || due > 0 || flying > 0;
}

/* One campaign, read in full: its orders as both sides see them, and each order's code. */
typedef struct {
    int64_t id;
    int lost;   /* taken or users missing beside another key */
    int loaded; /* campaign.redis_loaded_at is set (campaign_guard.lua's loaded) */
    int flags; /* rc_redis_campaign()'s keys: 1 taken, 2 users, 4 orders exist */
    rc_orders_t orders;
    char (*codes)[VC_CODE_MAX + 1]; /* by slot of orders, once no order is added */
    /* While orders may still grow: (orderId, code) pairs, in the order learnt. */
    struct pair {
        char order_id[VC_ORDER_ID_MAX + 1];
        char code[VC_CODE_MAX + 1];
    } *pairs;
    size_t npairs, pairs_cap;
    char (*releasing)[VC_ORDER_ID_MAX + 1]; /* releases begun more than a grace ago */
    size_t nreleasing, releasing_cap;
    rc_orders_t in_taken; /* the orders Redis's taken hash maps a code to */
    /* Dead letters of the campaign's codes, parked or discarded, per (orderId, code). */
    struct letter {
        char order_id[VC_ORDER_ID_MAX + 1];
        char code[VC_CODE_MAX + 1];
        int parked, discarded;
    } *letters;
    size_t nletters, letters_cap;
    int64_t parked; /* dead letters parked, waiting for an operator */
} campaign_t;

static void campaign_free(campaign_t *c)
{
    rc_orders_free(&c->orders);
    rc_orders_free(&c->in_taken);
    free(c->codes);
    free(c->pairs);
    free(c->releasing);
    free(c->letters);
}

static int learn_code(campaign_t *c, const char *order_id, const char *code)
{
    if (!code[0])
        return 0;
    if (rc_grow((void **)&c->pairs, &c->pairs_cap, c->npairs, sizeof(*c->pairs), 64) != 0)
        return VC_ERR_NOMEM;
    snprintf(c->pairs[c->npairs].order_id, sizeof(c->pairs->order_id), "%s", order_id);
    snprintf(c->pairs[c->npairs].code, sizeof(c->pairs->code), "%s", code);
    c->npairs++;
    return 0;
}

static const char *code_of(const campaign_t *c, const rc_order_t *o)
{
    return c->codes[o - c->orders.slots];
}

static vc_rd_status_t pg_status(const char *s)
{
    return strcmp(s, "RESERVED") == 0    ? VC_RD_RESERVED
           : strcmp(s, "CONFIRMED") == 0 ? VC_RD_CONFIRMED
           : strcmp(s, "RELEASED") == 0  ? VC_RD_RELEASED
                                         : VC_RD_NONE;
}

/* A dead letter of the campaign's (the 'l' rows of read_rows()), for apply_letters(). */
static int learn_letter(campaign_t *c, const PGresult *res, int i)
{
    struct letter *l;

    if (rc_grow((void **)&c->letters, &c->letters_cap, c->nletters, sizeof(*c->letters), 8) != 0)
        return VC_ERR_NOMEM;
    l = &c->letters[c->nletters++];
    snprintf(l->order_id, sizeof(l->order_id), "%s", PQgetvalue(res, i, 1));
    snprintf(l->code, sizeof(l->code), "%s", PQgetvalue(res, i, 2));
    l->parked = PQgetvalue(res, i, 7)[0] == 't';
    l->discarded = PQgetvalue(res, i, 8)[0] == 't';
    c->parked += strtoll(PQgetvalue(res, i, 9), NULL, 10);
    return 0;
}

/*
 * PostgreSQL's rows of the campaign (bounded by its redemptions, never by its
 * codes) and the dead letters of its codes parked or discarded (bounded by the
 * open letters: ix_dead_letter_open, then campaign_code by its key), in one
 * statement so in one snapshot, as the voucher pass reads rows and letters
 * (rc_pg.c): the writer applies a replayed event and marks its letter
 * replayed in one transaction, so an order is seen either parked or with its
 * row, never neither. Then the campaign's events in flight replayed on the
 * rows as the writer will apply them. Read before Redis, as the voucher pass
 * reads rows before orders.
 */
static int read_rows(rc_ctx_t *ctx, const rc_vouchers_t *vs, campaign_t *c, char *err,
                     size_t errlen)
{
    PGconn *conn = rc_pg_conn(ctx->pg);
    char id[24];
    const char *params[] = {id};
    PGresult *res;
    int rc = 0;

    snprintf(id, sizeof(id), "%lld", (long long)c->id);
    if (!(res = vc_pg_exec(conn,
                           "SELECT 'r', order_id, code, status, customer_id, discount_amount,"
                           " coalesce((extract(epoch FROM held_until) * 1000)::bigint, 0),"
                           " false, false, 0::bigint"
                           " FROM campaign_redemption WHERE campaign_id = $1::bigint"
                           " UNION ALL"
                           " SELECT 'l', d.order_id, d.voucher_code, '', 0, 0, 0,"
                           " bool_or(d.state = 'parked'), bool_or(d.state = 'discarded'),"
                           " count(*) FILTER (WHERE d.state = 'parked')"
                           " FROM dead_letter d JOIN campaign_code cc ON cc.code = d.voucher_code"
                           " WHERE cc.campaign_id = $1::bigint AND d.order_id IS NOT NULL"
                           " AND d.state IN ('parked', 'discarded')"
                           " GROUP BY d.order_id, d.voucher_code",
                           1, params, &rc, err, errlen)))
        return rc;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        rc_order_t *o;
        if (PQgetvalue(res, i, 0)[0] == 'l') {
            rc = learn_letter(c, res, i);
            continue;
        }
        if (!(o = rc_orders_get(&c->orders, PQgetvalue(res, i, 1)))) {
            rc = VC_ERR_NOMEM;
            break;
        }
        o->pg = o->pg_after = pg_status(PQgetvalue(res, i, 3));
        o->customer_id = strtoll(PQgetvalue(res, i, 4), NULL, 10);
        o->discount = strtoll(PQgetvalue(res, i, 5), NULL, 10);
        o->held_until_ms = strtoll(PQgetvalue(res, i, 6), NULL, 10);
        rc = learn_code(c, o->order_id, PQgetvalue(res, i, 2));
    }
    PQclear(res);
    for (size_t i = 0; rc == 0 && i < vs->ncampaign_events; i++) {
        const vc_event_t *ev = &vs->campaign_events[i];
        rc_order_t *o;
        if (ev->campaign_id != c->id)
            continue;
        if (!(o = rc_orders_get(&c->orders, ev->order_id)))
            return VC_ERR_NOMEM;
        rc_order_apply(o, ev);
        if (!o->customer_id)
            o->customer_id = ev->customer_id;
        if (ev->type == VC_EV_RESERVED && !o->held_until_ms) {
            o->discount = ev->discount_amount;
            o->held_until_ms = ev->held_until_ms;
        }
        rc = learn_code(c, ev->order_id, ev->code);
    }
    return rc;
}

/* rc_redis_campaign()'s sink: Redis's orders, taken codes and due releases into a campaign_t. */
static int redis_order_cb(void *arg, const char *order_id, const vc_order_value_t *v)
{
    campaign_t *c = arg;
    rc_order_t *o = rc_orders_get(&c->orders, order_id);

    if (!o)
        return VC_ERR_NOMEM;
    rc_order_merge_redis(o, v);
    return 0;
}

static int redis_taken_cb(void *arg, const char *code, const char *order_id)
{
    campaign_t *c = arg;
    int rc = learn_code(c, order_id, code);

    if (rc == 0 && !rc_orders_get(&c->in_taken, order_id))
        rc = VC_ERR_NOMEM;
    return rc;
}

static int redis_releasing_cb(void *arg, const char *order_id)
{
    campaign_t *c = arg;

    if (rc_grow((void **)&c->releasing, &c->releasing_cap, c->nreleasing, sizeof(*c->releasing),
                16) != 0)
        return VC_ERR_NOMEM;
    snprintf(c->releasing[c->nreleasing++], sizeof(*c->releasing), "%s", order_id);
    return 0;
}

/* Redis's side, at one moment (rc_redis_campaign()): orders, taken codes, due releases. */
static int read_redis(rc_ctx_t *ctx, campaign_t *c, char *err, size_t errlen)
{
    rc_campaign_sink_t sink = {c, redis_order_cb, redis_taken_cb, redis_releasing_cb};
    int rc = rc_redis_campaign(ctx->redis, c->id, ctx->cfg->orders_scan_above,
                               vc_time_now_ms() - ctx->cfg->grace_ms, ctx->cfg->batch, &sink,
                               &c->flags, err, errlen);

    if (rc == VC_ERR_NOMEM)
        snprintf(err, errlen, "campaign %lld: out of memory reading Redis", (long long)c->id);
    return rc;
}

/*
 * Every order is in c->orders now: each gets its code, PostgreSQL's or an
 * event's first, else the one Redis's taken hash maps to it.
 */
static int settle_codes(campaign_t *c)
{
    if (!(c->codes = calloc(c->orders.cap ? c->orders.cap : 1, sizeof(*c->codes))))
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < c->npairs; i++) {
        rc_order_t *o = rc_orders_find(&c->orders, c->pairs[i].order_id);
        if (o && !c->codes[o - c->orders.slots][0])
            memcpy(c->codes[o - c->orders.slots], c->pairs[i].code, VC_CODE_MAX + 1);
    }
    return 0;
}

/*
 * An order holding a use in Redis whose code neither PostgreSQL, an event in
 * flight nor taken names: taken was lost beside a hold whose event Kafka never
 * stored (the explorer's campaign-keys-not-rebuilt). Without its code the
 * rebuild refuses on every pass (the campaign answers 503 for good) and the
 * hold can never be released. Its orderId's claim names it: the gateway
 * claims the orderId for the code before campaign_reserve.lua takes it, and
 * keeps the claim while the use is held. The claim's code is taken only when
 * it is one of this campaign's codes. A use taken under another code's claim
 * is forgotten by the gateway at once, with no event; should that forget
 * fail too, the claim's code names the hold, the code it took has no event
 * nor row (so nothing downstream counts it twice), and PostgreSQL's one live
 * row per code (uq_campaign_redemption_live_code) stays the last line.
 */
static int claimed_codes(rc_ctx_t *ctx, campaign_t *c, char *err, size_t errlen)
{
    PGconn *conn = rc_pg_conn(ctx->pg);
    char id[24], code[VC_CODE_MAX + 1];
    const char *params[] = {code, id};
    rc_order_t *o;
    int rc = 0;

    snprintf(id, sizeof(id), "%lld", (long long)c->id);
    for (size_t i = 0; i < c->orders.cap && rc == 0; i++) {
        PGresult *res;
        if (!(o = rc_orders_at(&c->orders, i)) || !vc_state_taken(o->redis_state) ||
            code_of(c, o)[0])
            continue;
        if ((rc = rc_redis_claim_code(ctx->redis, o->order_id, code, err, errlen)) != 0 ||
            !code[0])
            continue;
        if (!(res = vc_pg_exec(conn,
                               "SELECT 1 FROM campaign_code WHERE code = $1"
                               " AND campaign_id = $2::bigint",
                               2, params, &rc, err, errlen)))
            break;
        if (PQntuples(res) == 1) {
            memcpy(c->codes[o - c->orders.slots], code, sizeof(code));
            vc_info("campaign %lld: order %s holds a use no row, event or taken entry names: "
                    "its claim names code %s",
                    (long long)c->id, o->order_id, code);
        }
        PQclear(res);
    }
    return rc;
}

/*
 * Once every order has its code: an order whose code has a dead letter of
 * it parked is never expired nor released as undelivered (its event was
 * acknowledged, and its 201 or 200 may have been given; an operator decides:
 * voucher-writer dlt replay or discard), and one whose letter an operator
 * discarded is released with reason DISCARDED when nothing downstream counts
 * it (rc_model_release(), as for a voucher). A letter of the same orderId on
 * another code is not this order's.
 */
static void apply_letters(campaign_t *c)
{
    for (size_t i = 0; i < c->nletters; i++) {
        rc_order_t *o = rc_orders_find(&c->orders, c->letters[i].order_id);
        if (!o || strcmp(code_of(c, o), c->letters[i].code) != 0)
            continue;
        o->parked |= c->letters[i].parked;
        o->discarded |= c->letters[i].discarded;
    }
}

/*
 * Whether Redis lost part of the campaign: taken or users missing beside the
 * other keys, an order PostgreSQL (after the events in flight) counts or has
 * released that Redis lacks, or an order holding a use whose code taken does
 * not map.
 */
static int needs_rebuild(const campaign_t *c)
{
    rc_order_t *o;

    if (c->lost || ((c->flags & 4) && (c->flags & 3) != 3))
        return 1;
    for (size_t i = 0; i < c->orders.cap; i++) {
        if (!(o = rc_orders_at(&c->orders, i)))
            continue;
        /* Lost from Redis: counted, or released (a retry would take the code anew). */
        if ((vc_rd_counts(o->pg_after) || o->pg_after == VC_RD_RELEASED) && !o->redis_state)
            return 1;
        if (vc_state_taken(o->redis_state) && !rc_orders_find(&c->in_taken, o->order_id))
            return 1;
    }
    return 0;
}

/* Every key of campaign id, by the model's names (k[VC_CAMPAIGN_KEY_ORDERS]...; vc_model.h). */
static void campaign_keys(int64_t id, char k[VC_CAMPAIGN_KEY_COUNT][64])
{
    for (int i = 0; i < VC_CAMPAIGN_KEY_COUNT; i++)
        (void)vc_campaign_key(k[i], sizeof(k[i]), id, (vc_campaign_key_t)i);
}

/*
 * Appends what campaign_guard.lua takes off the end of a voucher script's
 * keys: the campaign's users, orders and taken, to keys[n..n+3). Returns n + 3.
 */
static int guard_keys(char k[VC_CAMPAIGN_KEY_COUNT][64], const char **keys, int n)
{
    keys[n++] = k[VC_CAMPAIGN_KEY_USERS];
    keys[n++] = k[VC_CAMPAIGN_KEY_ORDERS];
    keys[n++] = k[VC_CAMPAIGN_KEY_TAKEN];
    return n;
}

/*
 * Whether a full read found the campaign consistent: nothing to rebuild, no
 * release under way, no dead letter parked, and every order in the same state
 * on both sides once the events in flight are applied (H and RESERVED, C and
 * CONFIRMED, R and RELEASED). Then the difference of its aggregates read in
 * the same pass is one the rows explain, and later passes accept it
 * (rc_agg_remember()).
 */
static int consistent(const campaign_t *c)
{
    rc_order_t *o;

    if (needs_rebuild(c) || c->nreleasing > 0 || c->parked > 0)
        return 0;
    for (size_t i = 0; i < c->orders.cap; i++) {
        vc_rd_status_t same;
        if (!(o = rc_orders_at(&c->orders, i)))
            continue;
        switch (o->redis_state) {
        case VC_STATE_HELD:
            same = VC_RD_RESERVED;
            break;
        case VC_STATE_CONFIRMED:
            same = VC_RD_CONFIRMED;
            break;
        case VC_STATE_RELEASED:
            same = VC_RD_RELEASED;
            break;
        default:
            return 0; /* a release begun, or no order in Redis */
        }
        if (o->pg_after != same)
            return 0;
    }
    return 1;
}

/*
 * Orders per campaign_rebuild_slice.lua of a rebuild in slices: about 5 ms of
 * Redis a call (tests/bench/repairs.py: a step's median 5.2 ms for 100,000
 * orders on a loaded machine), whatever the campaign's size.
 */
#define RC_CAMPAIGN_SLICE 500
/* How long a rebuild's staged keys, and its notes, outlive a reconciler that stops midway (ms). */
#define RC_CAMPAIGN_STAGED_MS "600000"

/*
 * Whether a rebuild goes in slices (rebuild_in_slices()): more orders than
 * --orders-scan-above, the orders hash there, and taken or users missing, so
 * that campaign_reserve.lua takes no new order while the slices run. An
 * orders hash lost, or nothing missing but an order, is rebuilt in one script.
 */
static int in_slices(const rc_ctx_t *ctx, const campaign_t *c)
{
    return ctx->cfg->orders_scan_above >= 0 &&
           c->orders.len > (size_t)ctx->cfg->orders_scan_above && (c->flags & 4) &&
           (c->flags & 3) != 3;
}

/*
 * A rebuild in slices (proto/campaigns.md, "A rebuild in slices"):
 * scan_begin.lua puts this repair's token in the campaign's scan key, so that
 * every order and code a script writes from then on is noted (touched,
 * touched_codes); campaign_rebuild_slice.lua, a call at a time, takes
 * RC_CAMPAIGN_SLICE of args' fours (from 1 on: orderId, code, the snapshot's
 * value or "", heldUntilMs; borrowed), writes the snapshot's orders Redis
 * lacks and counts each order's use, code and customer into staged keys;
 * campaign_rebuild_finish.lua counts again what was written since and puts
 * taken and users in place at one moment, or gives up (the next pass judges
 * again). mode is "1" when taken was lost, "0" when users was lost alone;
 * expire is the campaign's expireAt. *status and answer are the finish's (as
 * campaign_rebuild.lua's, or a slice's refusal), *steps the scripts it took.
 */
static int rebuild_in_slices(rc_ctx_t *ctx, const campaign_t *c, const char **args, int nargs,
                             const char *mode, const char *expire, int64_t *status, char *answer,
                             size_t answercap, size_t *steps, char *err, size_t errlen)
{
    char k[VC_CAMPAIGN_KEY_COUNT][64], staged[VC_REBUILDING_KEY_COUNT][96], token[33];
    char name[24], got[64], held[24], written[24];
    const char **slice_args = calloc(3 + 4 * RC_CAMPAIGN_SLICE, sizeof(*slice_args));
    size_t norders = (size_t)(nargs - 1) / 4, slices = 0;
    int64_t st = 0, nheld = 0, nwritten = 0;
    int rc;

    if (!slice_args)
        return VC_ERR_NOMEM;
    snprintf(name, sizeof(name), "%lld", (long long)c->id);
    campaign_keys(c->id, k);
    rc_redis_token(token);
    for (int i = 0; i < VC_REBUILDING_KEY_COUNT; i++)
        (void)vc_rebuilding_key(staged[i], sizeof(staged[i]), c->id, token, (vc_rebuilding_key_t)i);
    /* The notes begin before the first slice: every write after it is noted. */
    const char *begin_keys[] = {k[VC_CAMPAIGN_KEY_ORDERS], k[VC_CAMPAIGN_KEY_SCAN],
                                k[VC_CAMPAIGN_KEY_TOUCHED], k[VC_CAMPAIGN_KEY_TOUCHED_CODES]};
    const char *begin_args[] = {token, "-1", RC_CAMPAIGN_STAGED_MS};
    if ((rc = rc_repair_eval(ctx, "rebuild", "campaign", name, 0, vc_lua_scan_begin, 4, begin_keys,
                             3, begin_args, &st, got, sizeof(got), err, errlen)) != 0)
        goto out;
    st = VC_CAMPAIGN_REBUILD_SLICE_READ;
    const char *slice_keys[] = {k[VC_CAMPAIGN_KEY_TAKEN],         k[VC_CAMPAIGN_KEY_USERS],
                                k[VC_CAMPAIGN_KEY_ORDERS],        k[VC_CAMPAIGN_KEY_HOLDS],
                                k[VC_CAMPAIGN_KEY_RELEASING],     k[VC_CAMPAIGN_KEY_SCAN],
                                staged[VC_REBUILDING_KEY_ORDERS], staged[VC_REBUILDING_KEY_TAKEN],
                                staged[VC_REBUILDING_KEY_USERS]};
    for (size_t o = 0; o < norders; o += RC_CAMPAIGN_SLICE, slices++) {
        size_t no = norders - o < RC_CAMPAIGN_SLICE ? norders - o : RC_CAMPAIGN_SLICE;
        long long h, w;
        int n = 0;
        slice_args[n++] = token;
        slice_args[n++] = mode;
        slice_args[n++] = RC_CAMPAIGN_STAGED_MS;
        for (size_t i = 0; i < 4 * no; i++)
            slice_args[n++] = args[1 + 4 * o + i];
        if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
            (rc = rc_repair_eval(ctx, "rebuild", "campaign", name, no,
                                 vc_lua_rc_campaign_rebuild_slice, 9, slice_keys, n, slice_args,
                                 &st, got, sizeof(got), err, errlen)) != 0)
            goto out;
        if (st != VC_CAMPAIGN_REBUILD_SLICE_READ)
            break; /* refused: the finish drops what was staged and ends the notes */
        if (sscanf(got, "%lld:%lld", &h, &w) != 2) {
            snprintf(err, errlen, "campaign_rebuild_slice.lua of campaign %lld: unexpected answer",
                     (long long)c->id);
            rc = VC_ERR_PROTOCOL;
            goto out;
        }
        nheld += h;
        nwritten += w;
    }
    *steps = slices + 2;
    /* "-1": a slice refused, and the finish only ends the read and drops what was staged. */
    snprintf(held, sizeof(held), "%lld",
             (long long)(st == VC_CAMPAIGN_REBUILD_SLICE_READ ? nheld : -1));
    snprintf(written, sizeof(written), "%lld", (long long)nwritten);
    const char *finish_keys[] = {k[VC_CAMPAIGN_KEY_TAKEN],         k[VC_CAMPAIGN_KEY_USERS],
                                 k[VC_CAMPAIGN_KEY_ORDERS],        k[VC_CAMPAIGN_KEY_HOLDS],
                                 k[VC_CAMPAIGN_KEY_SCAN],          k[VC_CAMPAIGN_KEY_TOUCHED],
                                 k[VC_CAMPAIGN_KEY_TOUCHED_CODES], staged[VC_REBUILDING_KEY_ORDERS],
                                 staged[VC_REBUILDING_KEY_TAKEN],  staged[VC_REBUILDING_KEY_USERS]};
    const char *finish_args[] = {token, mode, expire, held, written};
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0)
        goto out;
    if (st != VC_CAMPAIGN_REBUILD_SLICE_READ) {
        /* A slice refused: its answer is the rebuild's, the finish only cleans up. */
        int64_t ignored;
        char slice_answer[64];
        snprintf(slice_answer, sizeof(slice_answer), "%s", got);
        rc = rc_repair_eval(ctx, "rebuild", "campaign", name, 0, vc_lua_rc_campaign_rebuild_finish,
                            10, finish_keys, 5, finish_args, &ignored, got, sizeof(got), err,
                            errlen);
        *status = st;
        snprintf(answer, answercap, "%s", slice_answer);
        goto out;
    }
    rc = rc_repair_eval(ctx, "rebuild", "campaign", name, c->orders.len,
                        vc_lua_rc_campaign_rebuild_finish, 10, finish_keys, 5, finish_args, status,
                        answer, answercap, err, errlen);
out:
    free(slice_args);
    return rc;
}

/*
 * Rebuilds what Redis lost (campaign_rebuild.lua): the orders PostgreSQL and
 * the events in flight count, the taken codes, the customers' counts. Until
 * it has run, campaign_reserve.lua refuses new orders of the campaign. Above
 * --orders-scan-above orders, with the orders hash there, in slices
 * (rebuild_in_slices()).
 */
static int rebuild(rc_ctx_t *ctx, campaign_t *c, int64_t ends_at_ms, rc_summary_t *sum,
                   char *err, size_t errlen)
{
    char k[VC_CAMPAIGN_KEY_COUNT][64], expire[24], answer[128], name[24], how[48] = "";
    const char *keys[VC_CAMPAIGN_REBUILD_NKEYS];
    int sliced = in_slices(ctx, c);
    size_t steps = 1;
    const char **args = calloc(1 + 4 * c->orders.len, sizeof(*args));
    char (*values)[128] = calloc(c->orders.len + 1, sizeof(*values));
    char (*held)[24] = calloc(c->orders.len + 1, sizeof(*held));
    int64_t status = 0;
    int n = 1, rc;

    if (!args || !values || !held) {
        rc = VC_ERR_NOMEM;
        goto out;
    }
    campaign_keys(c->id, k);
    vc_script_keys(vc_campaign_rebuild_keys, VC_CAMPAIGN_REBUILD_NKEYS, k[0], sizeof(k[0]), keys);
    snprintf(expire, sizeof(expire), "%lld",
             (long long)(ctx->cfg->redis_retention_ms > 0
                             ? vc_redis_expire_at(ends_at_ms, ctx->cfg->redis_retention_ms)
                             : 0));
    args[0] = expire;
    for (size_t i = 0, j = 0; i < c->orders.cap; i++) {
        rc_order_t *o = rc_orders_at(&c->orders, i);
        if (!o || (!sliced && !code_of(c, o)[0]))
            continue;
        if (rc_plan_merges(o, 1)) {
            /* What the snapshot knows of, with its code (the voucher's restore merges the same). */
            rc_plan_order_value(o, values[j], sizeof(values[j]));
            snprintf(held[j], sizeof(held[j]), "%lld", (long long)o->held_until_ms);
        } else if (vc_state_taken(o->redis_state) || (sliced && o->redis_state)) {
            /*
             * Only Redis holds it: its code alone (claimed_codes()), a value
             * that writes nothing. In slices every order Redis holds is
             * counted, so that the last step can check the hash's size.
             */
            snprintf(held[j], sizeof(held[j]), "0");
        } else {
            continue;
        }
        args[n++] = o->order_id;
        args[n++] = code_of(c, o);
        args[n++] = values[j];
        args[n++] = held[j];
        j++;
    }
    snprintf(name, sizeof(name), "%lld", (long long)c->id);
    if (sliced) {
        rc = rebuild_in_slices(ctx, c, args, n, (c->flags & 1) ? "0" : "1", expire, &status, answer,
                               sizeof(answer), &steps, err, errlen);
    } else if ((rc = rc_ctx_still_leading(ctx, err, errlen)) == 0) {
        rc = rc_repair_eval(ctx, "rebuild", "campaign", name, c->orders.len,
                            vc_lua_rc_campaign_rebuild, VC_CAMPAIGN_REBUILD_NKEYS, keys, n, args,
                            &status, answer, sizeof(answer), err, errlen);
    }
    if (rc != 0)
        goto out;
    if (sliced)
        snprintf(how, sizeof(how), ", in slices, in %zu steps", steps);
    if (status >= 0) {
        sum->restored++;
        vc_info("campaign %lld: rebuilt the keys Redis lost from PostgreSQL, the events in "
                "flight and the orders Redis still holds%s: %lld orders written again, "
                "codes taken:customers:freed %s",
                (long long)c->id, how, (long long)status, answer);
    } else if (status == VC_CAMPAIGN_REBUILD_NOTES_LOST || status == VC_CAMPAIGN_REBUILD_CHANGED) {
        vc_warn("campaign %lld: the rebuild in slices found its notes of what was written "
                "meanwhile lost, the keys no longer lost as it began, or the orders changed as no "
                "script changes them, after %zu steps: taken and users not written, the next "
                "pass judges the campaign again",
                (long long)c->id, steps);
    } else {
        vc_warn("campaign %lld: not rebuilt (%s %s)%s: new orders stay refused until a pass "
                "can rebuild it",
                (long long)c->id,
                status == VC_CAMPAIGN_REBUILD_CODE_UNKNOWN ? "no code known for order"
                                                           : "two orders hold code",
                answer, how);
    }
out:
    free(args);
    free(values);
    free(held);
    return rc;
}

/*
 * Releases one order through the two-phase release, as the voucher path does
 * (rc_repair.c): release_begin.lua (guarded: the order must hold this code;
 * why and the state the pass read checked again), its VoucherReleased with
 * the campaign, and only after Kafka acknowledged it release_finish.lua,
 * which frees the code. why "resume" publishes a release begun before. A
 * refusal or an event not acknowledged is left to the next pass (X or E
 * stays counted: never two uses).
 */
static int release(rc_ctx_t *ctx, const campaign_t *c, const rc_order_t *o, const char *why,
                   const char *reason, int64_t snapshot_ms, rc_summary_t *sum, char *err,
                   size_t errlen)
{
    char k[VC_CAMPAIGN_KEY_COUNT][64], now[24], read[48], since[24], order[128];
    char shown[VC_LOG_CODE_MAX]; /* the code as the log shows it: a keyed hash */
    /* The guard's keys (users, orders, taken) and arguments (loaded, code) come last. */
    const char *begin_keys[VC_RELEASE_BEGIN_KEY_RESENT + 1 + 3];
    const char *finish_keys[VC_RELEASE_FINISH_NKEYS + 3];
    int nbegin = VC_RELEASE_BEGIN_KEY_RESENT + 1, nfinish = VC_RELEASE_FINISH_NKEYS;
    const char *code = code_of(c, o), *loaded = c->loaded ? "1" : "0";
    const char *begin_args[7], *finish_args[] = {o->order_id, loaded, code};
    int nargs = 0, delivered = 0, rc;
    vc_order_value_t cur = {0};
    vc_event_t ev;
    int64_t status;

    /* Kafka took none of this pass's publishes: nothing begun, the next pass tries again. */
    if (!rc_ctx_publish_ok(ctx))
        return 0;
    campaign_keys(c->id, k);
    /* A voucher script's keys on a campaign: the campaign's of the same names (vc_model.h). */
    vc_script_keys(vc_release_begin_campaign_keys, nbegin, k[0], sizeof(k[0]), begin_keys);
    nbegin = guard_keys(k, begin_keys, nbegin);
    vc_script_keys(vc_release_finish_campaign_keys, nfinish, k[0], sizeof(k[0]), finish_keys);
    nfinish = guard_keys(k, finish_keys, nfinish);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    snprintf(read, sizeof(read), "%lld:%c", (long long)o->redis_held_until_ms,
             o->redis_state ? o->redis_state : '?');
    snprintf(since, sizeof(since), "%lld", (long long)(snapshot_ms - ctx->cfg->grace_ms));
    begin_args[nargs++] = o->order_id;
    begin_args[nargs++] = why;
    begin_args[nargs++] = now;
    if (strcmp(why, "resume") != 0)
        begin_args[nargs++] = read;
    if (strcmp(why, "undelivered") == 0)
        begin_args[nargs++] = since;
    begin_args[nargs++] = loaded;
    begin_args[nargs++] = code;
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
        (rc = rc_redis_eval(ctx->redis, vc_lua_rc_campaign_release_begin, nbegin, begin_keys, nargs,
                            begin_args, &status, order, sizeof(order), err, errlen)) != 0)
        return rc;
    if (status == VC_LOOKUP_NO_ORDER || status == VC_LOOKUP_KEYS_LOST) {
        /*
         * The guard refused (campaign_guard.lua): the order does not hold the
         * code the pass knows for it, or the campaign's keys are lost. Said every pass,
         * so that an operator sees a hold no repair can reach (the explorer's
         * campaign-hold-stuck: a hold taken on another code than its row's).
         */
        vc_warn("campaign %lld: order %s cannot be released (%s) as the holder of code %s: %s",
                (long long)c->id, o->order_id, why, vc_log_code(code, 1, shown),
                status == VC_LOOKUP_NO_ORDER
                    ? "Redis has another order on that code, or none"
                    : "the campaign's keys are lost; a rebuild comes first");
        return 0;
    }
    if (status == VC_RELEASE_BEGIN_ALREADY_RELEASED || status == VC_RELEASE_BEGIN_NOT_RELEASABLE ||
        status == VC_RELEASE_BEGIN_CHANGED)
        return 0; /* moved on since the read (confirmed, released, another hold): next pass */
    /*
     * Begun (1) or begun before (2), with the order as it is now: what the
     * event says comes from it. Any other answer, or a begun release without
     * an order value, is an answer this code does not know: an error, never
     * a release published with the pass's guesses. A release begun stays
     * begun (X or E, counted as taken) and the next pass resumes it.
     */
    if ((status != VC_RELEASE_BEGIN_BEGUN && status != VC_RELEASE_BEGIN_ALREADY_BEGUN) ||
        vc_order_value_parse(order, strlen(order), &cur) != 0) {
        snprintf(err, errlen,
                 "campaign %lld: release_begin.lua answered %lld, \"%.60s\" for order %s: not "
                 "one of its answers",
                 (long long)c->id, (long long)status, order, o->order_id);
        return VC_ERR_PROTOCOL;
    }
    memset(&ev, 0, sizeof(ev));
    ev.type = VC_EV_RELEASED;
    ev.version = VC_EVENT_VERSION;
    ev.campaign_id = c->id;
    ev.customer_id = cur.customer_id;
    /* Begun before by a cancel: published as the cancel it is (a discard's is a cancel too). */
    if (status == VC_RELEASE_BEGIN_ALREADY_BEGUN && cur.state == VC_STATE_CANCEL_BEGUN &&
        !o->discarded)
        reason = "CANCELLED";
    ev.at_ms = vc_time_now_ms();
    snprintf(ev.code, sizeof(ev.code), "%s", code);
    snprintf(ev.order_id, sizeof(ev.order_id), "%s", o->order_id);
    snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
    if ((rc = rc_kafka_publish(ctx->kafka, &ev, 1, &delivered, ctx->cfg->timeout_ms * 4, err,
                               errlen)) != 0)
        return rc;
    rc_ctx_published(ctx, &delivered, 1);
    if (delivered != 1) {
        vc_warn("campaign %lld: the release of order %s was not acknowledged: kept begun",
                (long long)c->id, o->order_id);
        return 0;
    }
    if ((rc = rc_redis_eval(ctx->redis, vc_lua_rc_campaign_release_finish, nfinish, finish_keys, 3,
                            finish_args, &status, NULL, 0, err, errlen)) != 0)
        return rc;
    if (status != VC_RELEASE_FINISH_GIVEN_BACK)
        return 0;
    sum->finished++;
    if (strcmp(why, "expire") == 0)
        sum->expired++;
    else if (strcmp(why, "undelivered") == 0)
        sum->stranded++;
    else if (strcmp(reason, "DISCARDED") == 0)
        sum->discarded++;
    vc_info("campaign %lld: order %s of code %s released (%s, %s): the code is free again",
            (long long)c->id, o->order_id, vc_log_code(code, 1, shown), why, reason);
    return 0;
}

/* PostgreSQL (or an event in flight) confirmed a hold Redis holds H: H -> C (repair_confirmed.lua). */
static int reconfirm(rc_ctx_t *ctx, const campaign_t *c, const rc_order_t *o, rc_summary_t *sum,
                     char *err, size_t errlen)
{
    char k[VC_CAMPAIGN_KEY_COUNT][64], held[24];
    const char *keys[VC_REPAIR_CONFIRMED_NKEYS];
    const char *args[] = {o->order_id, held};
    int64_t status;
    int rc;

    campaign_keys(c->id, k);
    vc_script_keys(vc_repair_confirmed_campaign_keys, VC_REPAIR_CONFIRMED_NKEYS, k[0],
                   sizeof(k[0]), keys);
    snprintf(held, sizeof(held), "%lld", (long long)o->redis_held_until_ms);
    if ((rc = rc_ctx_still_leading(ctx, err, errlen)) != 0 ||
        (rc = rc_redis_eval(ctx->redis, vc_lua_rc_repair_confirmed, VC_REPAIR_CONFIRMED_NKEYS, keys,
                            2, args, &status, NULL, 0, err, errlen)) != 0)
        return rc;
    if (status == VC_REPAIR_CONFIRMED_REPAIRED) {
        sum->reconfirmed++;
        vc_info("campaign %lld: order %s held in Redis, confirmed in PostgreSQL: confirmed in "
                "Redis (never expired)",
                (long long)c->id, o->order_id);
    }
    return 0;
}

/*
 * When each hold unknown downstream was first seen, carried over from the
 * last pass for the same hold (rc_order_same_hold()), then remembered for the
 * next: as rc_plan_judge_full() does for a voucher.
 */
static int remember(memory_t *m, campaign_t *c, int64_t now_ms)
{
    rc_orders_t seen;
    rc_order_t *o, *was, *keep;

    rc_orders_init(&seen);
    for (size_t i = 0; i < c->orders.cap; i++) {
        if (!(o = rc_orders_at(&c->orders, i)) || !rc_order_unsent(o))
            continue;
        was = rc_orders_find(&m->seen, o->order_id);
        o->first_unsent_ms = was && rc_order_same_hold(was, o) ? was->first_unsent_ms : now_ms;
        if (!(keep = rc_orders_get(&seen, o->order_id))) {
            rc_orders_free(&seen);
            return VC_ERR_NOMEM;
        }
        *keep = *o;
    }
    rc_orders_free(&m->seen);
    m->seen = seen;
    return 0;
}

/* The repairs of one campaign read in full, in the voucher's order (rc_plan_repairs()). */
static int repair_full(rc_ctx_t *ctx, memory_t *m, campaign_t *c, int64_t ends_at_ms,
                       int64_t snapshot_ms, rc_summary_t *sum, char *err, size_t errlen)
{
    int64_t expiring = 0, now = vc_time_now_ms();
    int rc = 0;

    if (!needs_rebuild(c) || ((c->flags & 1) && !c->lost)) {
        m->missing_since_ms = 0;
    } else {
        /*
         * taken or orders lost (c->lost, campaign_lost.lua): a code taken
         * just before the loss may be known only by
         * the reservation's event, on its way to Kafka (its order may be lost
         * too). As the voucher's restore (rc_plan_repairs()), wait until the
         * loss is restore_delay old, longer than a gateway takes to deliver
         * an event; new orders are refused meanwhile (-7). Counted to this
         * pass's snapshot, not its clock: the snapshot must hold every event
         * acknowledged up to the delay after the loss was seen (the voucher's
         * stale-snapshot fix). --once waits and passes again.
         */
        if (!m->missing_since_ms)
            m->missing_since_ms = now;
        if (snapshot_ms - m->missing_since_ms < ctx->cfg->restore_delay_ms) {
            sum->awaiting_restore++;
            return 0;
        }
    }
    if (needs_rebuild(c)) {
        if ((rc = rebuild(ctx, c, ends_at_ms, sum, err, errlen)) != 0)
            return rc;
        m->missing_since_ms = 0;
    }
    /* Releases begun more than a grace ago and never finished: published again, finished. */
    for (size_t i = 0; i < c->nreleasing && rc == 0; i++) {
        rc_order_t *o = rc_orders_find(&c->orders, c->releasing[i]);
        if (!o ||
            (o->redis_state != VC_STATE_CANCEL_BEGUN && o->redis_state != VC_STATE_EXPIRY_BEGUN) ||
            !code_of(c, o)[0])
            continue;
        rc = release(ctx, c, o, "resume",
                     o->discarded                              ? "DISCARDED"
                     : o->redis_state == VC_STATE_CANCEL_BEGUN ? "CANCELLED"
                                                               : "EXPIRED",
                     snapshot_ms, sum, err, errlen);
    }
    for (size_t i = 0; i < c->orders.cap && rc == 0; i++) {
        rc_order_t *o = rc_orders_at(&c->orders, i);
        rc_release_t what;
        if (!o || (what = rc_model_release(o, snapshot_ms, ctx->cfg->grace_ms)) == RC_RELEASE_NONE)
            continue;
        if (!code_of(c, o)[0]) {
            vc_warn("campaign %lld: order %s holds a code nobody knows: left as it is",
                    (long long)c->id, o->order_id);
            continue;
        }
        switch (what) {
        case RC_RELEASE_EXPIRE:
            if (expiring++ < ctx->cfg->batch)
                rc = release(ctx, c, o, "expire", "EXPIRED", snapshot_ms, sum, err, errlen);
            break;
        case RC_RELEASE_UNDELIVERED:
            rc = release(ctx, c, o, "undelivered", "UNDELIVERED", snapshot_ms, sum, err, errlen);
            break;
        case RC_RELEASE_CANCEL:
            rc = release(ctx, c, o, "cancel", "REPAIR", snapshot_ms, sum, err, errlen);
            break;
        case RC_RELEASE_TO_CONFIRMED:
            rc = reconfirm(ctx, c, o, sum, err, errlen);
            break;
        case RC_RELEASE_DISCARD:
            /* An operator discarded its dead letter: the use comes back, as for a voucher. */
            rc = release(ctx, c, o, "cancel", "DISCARDED", snapshot_ms, sum, err, errlen);
            break;
        case RC_RELEASE_CONFIRM_LOST:
            /* A confirm answered 503 after Redis took it: published, as a voucher's. */
            rc = rc_repair_publish_confirm(ctx, code_of(c, o), c->id, o, sum, err, errlen);
            break;
        default:
            break;
        }
    }
    return rc;
}

/*
 * Splits s[0..len) at single spaces into exactly n counts, each of digits only
 * (no sign, no other space; at most 18 digits, so no overflow). 0, or
 * VC_ERR_PROTOCOL for fewer or more fields, or a field that is not a count.
 */
static int parse_counts(const char *s, size_t len, long long *out, int n)
{
    const char *p = s, *end = s + len;

    for (int i = 0; i < n; i++) {
        const char *space = memchr(p, ' ', (size_t)(end - p));
        const char *stop = i == n - 1 ? end : space;
        if (!stop || (i == n - 1 && space) || stop == p || stop - p > 18)
            return VC_ERR_PROTOCOL;
        out[i] = 0;
        for (const char *c = p; c < stop; c++) {
            if (*c < '0' || *c > '9')
                return VC_ERR_PROTOCOL;
            out[i] = out[i] * 10 + (*c - '0');
        }
        p = stop + 1;
    }
    return 0;
}

/* The numbers line of s[0..len) (rc_campaign_numbers_parse()). */
static int parse_numbers(const char *s, size_t len, rc_campaign_numbers_t *n)
{
    long long v[5];

    if (parse_counts(s, len, v, 5) != 0 || v[3] > 1 || v[4] > 7)
        return VC_ERR_PROTOCOL;
    *n = (rc_campaign_numbers_t){
        .holds = v[0], .releasing = v[1], .orders = v[2], .lost = (int)v[3], .present = (int)v[4]};
    return 0;
}

/*
 * One due hold's line of s[0..len), "orderId heldUntilMs:state": the orderId
 * (1 to VC_ORDER_ID_MAX bytes) up to the last space, then what the one
 * order-value parser reads as a value's last two fields, given a customer and
 * a discount of 0 before them. A value that parser refuses (a state no script
 * writes, a heldUntil that is not a number) is not read as a due hold.
 */
static int parse_due_line(const char *s, size_t len)
{
    char value[48] = "0:0:";
    size_t idlen = len, rest;
    vc_order_value_t v;

    while (idlen > 0 && s[idlen - 1] != ' ')
        idlen--;
    if (idlen < 2 || idlen - 1 > VC_ORDER_ID_MAX)
        return VC_ERR_PROTOCOL;
    rest = len - idlen;
    if (rest + 4 > sizeof(value))
        return VC_ERR_PROTOCOL;
    memcpy(value + 4, s + idlen, rest);
    if (vc_order_value_parse(value, rest + 4, &v) != 0 || v.held_until_ms < 0)
        return VC_ERR_PROTOCOL;
    return 0;
}

/* rc_campaign.h */
int rc_campaign_numbers_parse(const char *line, rc_campaign_numbers_t *n)
{
    return parse_numbers(line, strlen(line), n);
}

/* rc_campaign.h */
int rc_campaign_due_parse(const char *text, int max, rc_campaign_due_t *d)
{
    const char *end = text + strlen(text), *p = text;
    int line = 0;

    d->due = 0;
    for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        int rc = line == 0 ? parse_numbers(p, (size_t)(stop - p), &d->numbers)
                           : parse_due_line(p, (size_t)(stop - p));
        if (rc != 0)
            return VC_ERR_PROTOCOL;
        if (line++ > 0 && ++d->due > max)
            return VC_ERR_PROTOCOL;
        if (!nl)
            return 0;
        p = nl + 1;
    }
}

/* How the pass read a campaign: 0 by its numbers alone, 2 in full (as voucher_reconciler_read). */
static void record_read(int64_t id, int kind)
{
    char labels[48];

    snprintf(labels, sizeof(labels), "campaign=\"%lld\"", (long long)id);
    vc_metric_set(vc_gauge("voucher_reconciler_campaign_read",
                           "How the last pass read each campaign: 0 by its numbers and "
                           "aggregates alone, 2 in full",
                           labels),
                  kind);
}

/* What a pass read of a campaign's aggregates (judge_aggregates()). */
typedef struct {
    int read;     /* Redis's was read this pass */
    int compared; /* both kept and comparable: diff is PostgreSQL's less Redis's */
    rc_agg_t redis;
    rc_agg_diff_t diff;
} campaign_agg_t;

/*
 * A campaign quiet by its numbers (proto/campaigns.md, "Aggregates"): Redis's
 * aggregate read now, with HLEN orders (one round trip, O(1)), and judged
 * against PostgreSQL's, pg, read with the pass's numbers, and what the last
 * full read remembered (rc_agg_judge()). *verdict RC_AGG_SETTLED: its full
 * read can wait for the slow audit; RC_AGG_READ_NOW: read in full now;
 * RC_AGG_OLD_RULE: either side keeps none, or the audit is off
 * (audit_every_ms 0), and the campaign is read every full_every_ms as before.
 */
static int judge_aggregates(rc_ctx_t *ctx, const memory_t *m, const rc_agg_t *pg,
                            campaign_agg_t *a, rc_agg_verdict_t *verdict, char *err, size_t errlen)
{
    int rc;

    *verdict = RC_AGG_OLD_RULE;
    if (!pg->present || ctx->cfg->audit_every_ms <= 0)
        return 0;
    if ((rc = rc_redis_campaign_aggregate(ctx->redis, m->id, &a->redis, err, errlen)) != 0)
        return rc;
    a->read = 1;
    *verdict = rc_agg_judge(&a->redis, pg, &m->agg_base, &a->diff, &a->compared);
    if (*verdict == RC_AGG_READ_NOW)
        vc_info("campaign %lld: its aggregates in Redis and PostgreSQL %s: read in full",
                (long long)m->id,
                a->compared ? "disagree" : "do not describe its orders hash");
    return 0;
}

/*
 * One campaign: its numbers, then (when they do not settle it) a full read and
 * its repairs. pg is PostgreSQL's aggregate of it (present 0: none kept).
 */
static int one(rc_ctx_t *ctx, const rc_vouchers_t *vs, int64_t id, int64_t live, int64_t ends_at_ms,
               int loaded, const rc_agg_t *pg, int repair, int64_t snapshot_ms, rc_summary_t *sum,
               char *err, size_t errlen)
{
    char k[VC_CAMPAIGN_KEY_COUNT][64], max[24], limit[24], *due;
    const char *keys[VC_CAMPAIGN_DUE_NKEYS];
    const char *args[] = {max, limit};
    rc_campaign_due_t answer;
    int lost, rc;
    size_t flying = 0;
    campaign_t c = {.id = id};
    campaign_agg_t agg = {0};
    rc_agg_verdict_t verdict = RC_AGG_OLD_RULE;
    memory_t *m = memory_of(id);
    int64_t taken, mono = vc_time_mono_ms();

    if (!m || !(due = malloc(RC_CAMPAIGN_DUE_BUF)))
        return VC_ERR_NOMEM;
    for (size_t i = 0; i < vs->ncampaign_events; i++)
        flying += vs->campaign_events[i].campaign_id == id;
    campaign_keys(id, k);
    vc_script_keys(vc_campaign_due_keys, VC_CAMPAIGN_DUE_NKEYS, k[0], sizeof(k[0]), keys);
    snprintf(max, sizeof(max), "%lld", (long long)(snapshot_ms - ctx->cfg->grace_ms));
    snprintf(limit, sizeof(limit), "%d", RC_CAMPAIGN_DUE_MAX);
    /* The acting reconciler marks the campaign before anything of the pass writes to it. */
    if ((rc = rc_redis_mark(ctx->redis, k[VC_CAMPAIGN_KEY_LEADER],
                            rc_ctx_expire_at(ctx, ends_at_ms), err, errlen)) != 0 ||
        (rc = rc_redis_eval(ctx->redis, vc_lua_campaign_due, VC_CAMPAIGN_DUE_NKEYS, keys, 2, args,
                            &taken, due, RC_CAMPAIGN_DUE_BUF, err, errlen)) != 0)
        goto out;
    if (taken < 0 || rc_campaign_due_parse(due, RC_CAMPAIGN_DUE_MAX, &answer) != 0) {
        snprintf(err, errlen,
                 "campaign %lld: campaign_due.lua answered %lld, \"%.80s\": not its codes taken, "
                 "numbers and due holds",
                 (long long)id, (long long)taken, due);
        rc = VC_ERR_PROTOCOL;
        goto out;
    }
    lost = answer.numbers.lost;
    /*
     * Loaded once (campaign.redis_loaded_at): all its keys missing is a loss
     * too, unless the retention after endsAt took them (they expire together).
     */
    if (loaded && (answer.numbers.present & 3) != 3 &&
        !(ctx->cfg->redis_retention_ms > 0 &&
          vc_time_now_ms() >= vc_redis_expire_at(ends_at_ms, ctx->cfg->redis_retention_ms)))
        lost = 1;
    if (lost)
        vc_warn("campaign %lld: Redis lost its taken codes or its customers' counts: new "
                "orders are refused until they are rebuilt",
                (long long)id);
    else if (taken != live && flying == 0 && answer.numbers.releasing == 0)
        vc_warn("campaign %lld: %lld codes taken in Redis, %lld live rows in PostgreSQL, "
                "%lld holds",
                (long long)id, (long long)taken, (long long)live, answer.numbers.holds);
    /*
     * The campaign's numbers are read (as the vouchers' counters at
     * reconciler-after-remaining); its rows and orders are not yet: a test
     * (tests/model) lands a gateway step here.
     */
    VC_PAUSE("reconciler-campaign-after-numbers");
    if (!repair)
        goto out;
    /*
     * Quiet by the numbers: read in full every full_every_ms, or with its
     * aggregates agreeing every audit_every_ms, or now when they disagree
     * (always with --once).
     */
    if (!ctx->force_full &&
        !rc_campaign_needs_full(lost, taken, live, answer.numbers.releasing, answer.due, flying) &&
        ctx->cfg->full_every_ms > 0 && m->last_full_ms) {
        if ((rc = judge_aggregates(ctx, m, pg, &agg, &verdict, err, errlen)) != 0)
            goto out;
        if (verdict != RC_AGG_READ_NOW &&
            mono - m->last_full_ms < (verdict == RC_AGG_SETTLED ? ctx->cfg->audit_every_ms
                                                                 : ctx->cfg->full_every_ms)) {
            record_read(id, 0);
            goto out;
        }
    }
    record_read(id, 2);
    m->last_full_ms = mono;
    c.lost = lost;
    c.loaded = loaded;
    if ((rc = read_rows(ctx, vs, &c, err, errlen)) != 0 ||
        (rc = read_redis(ctx, &c, err, errlen)) != 0 || (rc = settle_codes(&c)) != 0 ||
        (rc = claimed_codes(ctx, &c, err, errlen)) != 0 ||
        (rc = remember(m, &c, vc_time_now_ms())) != 0)
        goto out;
    apply_letters(&c);
    /* What this read found is what later passes' aggregates are judged against. */
    rc_agg_remember(&m->agg_base, agg.read, consistent(&c), &agg.redis, pg, &agg.diff);
    if (c.parked > 0) {
        sum->parked += c.parked;
        vc_info("campaign %lld: %lld dead letters parked, waiting for an operator "
                "(voucher-writer dlt replay or discard): their codes stay taken",
                (long long)id, (long long)c.parked);
    }
    VC_PAUSE("reconciler-campaign-before-repair");
    rc = repair_full(ctx, m, &c, ends_at_ms, snapshot_ms, sum, err, errlen);
out:
    campaign_free(&c);
    free(due);
    return rc;
}

/*
 * PostgreSQL's aggregate of a campaign from columns col..col+5 of row i
 * (reserved, confirmed, released, then their customers' sums), into *pg:
 * present only when all six are kept (not NULL; no aggregate row reads NULL).
 */
static void pg_aggregate(const PGresult *res, int i, int col, rc_agg_t *pg)
{
    static const int states[] = {RC_AGG_HELD, RC_AGG_CONFIRMED, RC_AGG_RELEASED};

    memset(pg, 0, sizeof(*pg));
    for (int j = 0; j < 6; j++)
        if (PQgetisnull(res, i, col + j))
            return;
    pg->present = 1;
    for (int j = 0; j < 3; j++) {
        pg->count[states[j]] = strtoll(PQgetvalue(res, i, col + j), NULL, 10);
        pg->customers[states[j]] = strtoll(PQgetvalue(res, i, col + 3 + j), NULL, 10);
    }
}

int rc_campaign_pass(rc_ctx_t *ctx, const rc_vouchers_t *vs, int repair, int64_t snapshot_ms,
                     rc_summary_t *sum, char *err, size_t errlen)
{
    PGconn *conn = rc_pg_conn(ctx->pg);
    PGresult *res;
    char first[256] = "";
    int rc = 0, failed = 0;

    /*
     * Numbers only, and PostgreSQL's aggregates (031, kept by the rows'
     * triggers) in the same statement: the live rows are the aggregates' count,
     * O(1) a campaign; counted on the (campaign_id, status) index only where
     * none is kept (no row yet, or a NULL column).
     */
    if (!(res = vc_pg_exec(conn,
                           "SELECT c.id,"
                           " CASE WHEN a.agg_reserved IS NOT NULL AND a.agg_confirmed IS NOT NULL"
                           "  THEN a.agg_reserved + a.agg_confirmed"
                           "  ELSE (SELECT count(*) FROM campaign_redemption r"
                           "   WHERE r.campaign_id = c.id AND r.status <> 'RELEASED')"
                           " END,"
                           " (extract(epoch FROM c.ends_at) * 1000)::bigint,"
                           " c.redis_loaded_at IS NOT NULL,"
                           " a.agg_reserved, a.agg_confirmed, a.agg_released,"
                           " a.agg_reserved_customers, a.agg_confirmed_customers,"
                           " a.agg_released_customers"
                           " FROM campaign c LEFT JOIN campaign_aggregate a ON a.campaign_id = c.id"
                           " WHERE c.state IN ('ACTIVE', 'INACTIVE') ORDER BY c.id",
                           0, NULL, &rc, err, errlen)))
        return rc;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        rc_agg_t pg = {0};
        pg_aggregate(res, i, 4, &pg);
        rc = one(ctx, vs, strtoll(PQgetvalue(res, i, 0), NULL, 10),
                 strtoll(PQgetvalue(res, i, 1), NULL, 10), strtoll(PQgetvalue(res, i, 2), NULL, 10),
                 PQgetvalue(res, i, 3)[0] == 't', &pg, repair, snapshot_ms, sum, err, errlen);
        /*
         * An answer of Redis about one campaign that does not parse fails that
         * campaign's part of the pass, said and counted here, and the pass
         * (its result "failed"); the other campaigns are still judged and
         * repaired: their keys are others. Any other error (Redis or
         * PostgreSQL unreachable, the lock lost) stops the pass at once.
         */
        if (rc == VC_ERR_PROTOCOL) {
            vc_warn("%s: that campaign waits for the next pass", err);
            vc_metric_add(vc_counter("voucher_reconciler_campaign_reply_errors_total",
                                     "Campaigns whose pass failed on a Redis answer that did not "
                                     "parse",
                                     NULL),
                          1);
            if (!failed++)
                snprintf(first, sizeof(first), "%s", err);
            rc = 0;
        }
    }
    PQclear(res);
    if (rc == 0 && failed) {
        snprintf(err, errlen,
                 "campaigns failed on an answer that did not parse: %d (the first: %s)", failed,
                 first);
        rc = VC_ERR_PROTOCOL;
    }
    return rc;
}
