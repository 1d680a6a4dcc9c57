/*
 * What happens to a hold after the reservation:
 * POST   /vouchers/{code}/reservations/{orderId}/confirm  (confirm.lua, VoucherConfirmed)
 * DELETE /vouchers/{code}/reservations/{orderId}          (VoucherReleased CANCELLED; a held
 *                                                          or a confirmed use)
 *
 * A confirm changes Redis first (H -> C), then publishes; confirming again
 * publishes again (the writer applies it once), so a retry after a 503
 * repairs a lost event.
 *
 * A confirm may carry the order's final total, {"orderAmount": N}
 * (proto/openapi.yaml, "Confirm against the final order"). The gateway then
 * prices it with the voucher's rules, without the clock (vc_voucher_price():
 * the minimum, the percent with its cap), and confirm.lua judges that verdict
 * against the stored reservation and confirms in the same script: no check
 * and act across round trips. A refusal changes nothing (422 with the
 * reservation's quote, the hold stays); a confirm of a confirmed order
 * replays its answer for the same total and is 409 ALREADY_CONFIRMED for
 * another. VoucherConfirmed then carries the final figures.
 *
 * A cancel has two steps (proto/redis-keys.md): release_begin.lua (H|C -> X:
 * no longer confirmable, the use still taken), VoucherReleased published, and
 * only after Kafka's acknowledgement release_finish.lua (X -> R: the use is
 * back). If the publish fails the order stays X, counted in Redis as in
 * PostgreSQL; a retry of the DELETE (status 2: already begun) publishes again
 * and finishes.
 *
 * With VOUCHER_REDIS_WAIT_REPLICAS, the confirm's C and the cancel's X must
 * reach the replicas (WAIT) before the event is published: too few in time
 * answers 503 with the outcome unknown and publishes nothing, as a
 * reservation does (proto/redis-keys.md, "Redis Cluster").
 *
 * Once the guessing limits let the request on, the code's rules (the cache)
 * say who decides: a direct voucher's order goes to gw_holds_direct.c
 * (PostgreSQL alone). Every other code, and any code whose rules cannot be
 * read now, is served here as before: Redis answers a flash voucher's
 * confirm without PostgreSQL, and a direct voucher's order, unknown to Redis,
 * never gets a 404 from it (loaded_work() reads the mode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_campaign_redeem.h"
#include "gw_guard.h"
#include "gw_holds.h"
#include "gw_pgrun.h"
#include "gw_soldout.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_model.h"
#include "vc_order_value.h"
#include "vc_pg.h"
#include "vc_time.h"

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    vc_event_type_t type; /* VC_EV_CONFIRMED or VC_EV_RELEASED */
    char code[VC_CODE_MAX + 1];
    char order_id[VC_ORDER_ID_MAX + 1];
    char keys[VC_VOUCHER_KEY_COUNT][GW_KEY_MAX];
    int replayed;
    /* A confirm given the final total (in.has_total) only: */
    gw_confirm_req_t in;
    vc_voucher_t v;   /* the voucher's rules as the cache has them */
    int verdict;      /* vc_voucher_price() for the total: 0, or VC_E_ORDER_TOO_SMALL */
    int64_t price;    /* the discount for the total, when verdict is 0 */
    gw_figures_t fig; /* what the order is confirmed at, for the event and the answer */
    char total_arg[24], price_arg[24];
    gw_campaign_ref_t camp; /* a campaign's code (id > 0): its keys and scripts */
    int voucher; /* the rules found a voucher with the code: logged as it is (vc_log_code()) */
    int camp_looked;        /* the campaign lookup ran (once per request) */
    int rules_rc;           /* what the rules lookup answered: 0 (h->v), VC_E_NOT_FOUND, < 0 */
    int counter_missing;    /* the script found no order and no counter (-8) */
    int was_loaded;         /* PostgreSQL: the voucher's keys were in Redis, not retired */
    int direct;             /* PostgreSQL: the voucher is a direct one (its rules were unread) */
    vc_order_value_t order; /* as the script left it: the event's, published after the WAIT */
} hold_t;

/* The answer of a campaign script that found the campaign's keys lost (-7). */
#define LOST_KEYS                                                                                  \
    "the campaign's taken codes or customers' counts in Redis were lost; the reconciler "          \
    "rebuilds them"
/* A voucher script's -7: the orders hash is lost (orders_lost.lua). */
#define LOST_ORDERS "the voucher's orders in Redis were lost; the reconciler rebuilds them"
/* A voucher script's -8 while PostgreSQL says Redis had the voucher's keys. */
#define LOST_VOUCHER "the voucher's keys in Redis were lost; the reconciler restores them"

static void finish_release(hold_t *h);
static void campaign_cb(void *arg, int rc);
static void flash(hold_t *h);

/* A voucher script, or its campaign form when the code is a campaign's. */
static int eval(hold_t *h, size_t script, gw_redis_cb cb, int nkeys, const char *const *keys,
                int nargs, const char *const *args)
{
    if (h->camp.id)
        return gw_campaign_eval(h->app, &h->camp, script, cb, h, nkeys, keys, nargs, args);
    return gw_redis_eval(h->app->redis, script, cb, h, nkeys, keys, nargs, args);
}

/*
 * How many of a script's keys to pass: for a voucher also those that tell a
 * lost orders hash or counter from an unknown order (users, remaining: the
 * last two of its list, orders_lost.lua); a campaign's guard judges its own
 * loss (campaign_lost.lua) and takes its keys off the end, so the voucher
 * script sees only its first ones.
 */
static int lost_keys(const hold_t *h, int campaign_nkeys, int nkeys)
{
    return h->camp.id ? campaign_nkeys : nkeys;
}

static const char *verb(const hold_t *h)
{
    return h->type == VC_EV_CONFIRMED ? "confirm" : "cancel";
}

static void fail(hold_t *h, int rc, const char *what)
{
    char detail[160], code[VC_LOG_CODE_MAX];
    vc_log_field_t f[] = {{"code", vc_log_code(h->code, !h->voucher || h->camp.id, code)},
                          {"orderId", h->order_id}};

    VC_LOG_F(VC_LOG_WARN, f, "%s failed: %s: %s", verb(h), what, vc_strerror(rc));
    snprintf(detail, sizeof(detail), "%s: %s", what, vc_strerror(rc));
    gw_app_reply_error(h->req, rc, detail);
}

static void delivered_cb(void *arg, int rc)
{
    hold_t *h = arg;
    char body[512];
    size_t len;

    if (rc != 0) {
        /* Redis already changed (C, or X: the use still taken); asking again publishes again. */
        fail(h, rc, "event delivery");
        return;
    }
    if (h->type == VC_EV_RELEASED) {
        finish_release(h);
        return;
    }
    if (h->in.has_total) {
        len = gw_body_confirmed(body, sizeof(body), h->order_id, h->code, &h->fig, h->replayed);
        gw_app_reply(h->req, 200, body, len);
        return;
    }
    len = gw_body_status(body, sizeof(body), h->order_id, h->code,
                         h->type == VC_EV_CONFIRMED ? "CONFIRMED" : "RELEASED", h->replayed);
    gw_app_reply(h->req, 200, body, len);
}

static void publish(hold_t *h, const vc_order_value_t *o)
{
    vc_event_t ev;
    int rc;

    memset(&ev, 0, sizeof(ev));
    ev.type = h->type;
    ev.version = VC_EVENT_VERSION;
    memcpy(ev.code, h->code, sizeof(ev.code));
    memcpy(ev.order_id, h->order_id, sizeof(ev.order_id));
    ev.customer_id = o->customer_id;
    ev.at_ms = vc_time_now_ms();
    ev.campaign_id = h->camp.id;
    if (h->type == VC_EV_RELEASED)
        snprintf(ev.reason, sizeof(ev.reason), "CANCELLED");
    if (h->in.has_total && h->fig.has_amount) {
        /* The final figures; a confirmed order whose total Redis lost is published without. */
        ev.has_amounts = 1;
        ev.order_amount = h->fig.order_amount;
        ev.discount_amount = h->fig.discount;
    }
    if ((rc = gw_app_publish(h->app, &ev, delivered_cb, h)) != 0)
        fail(h, rc, "publishing the event");
}

static void waited_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    hold_t *h = arg;

    if (rc == 0 && reply->n == 1 && reply->item[0].type == GW_REDIS_INT &&
        reply->item[0].integer >= h->app->cfg->redis_wait_replicas) {
        publish(h, &h->order);
        return;
    }
    /*
     * The change (C, or X) is on the voucher's master but not known to be on
     * a replica: a failover could undo it after the event went, leaving the
     * order held for a downstream that confirmed or released it. No event:
     * 503 with the outcome unknown; the retry writes again (confirm.lua marks
     * resent, release_begin.lua its status 2) and waits again.
     */
    fail(h, rc != 0 ? rc : VC_ERR_UNKNOWN_OUTCOME, "redis WAIT for a replica");
}

/*
 * Publishes the confirm's or the cancel's event once VOUCHER_REDIS_WAIT_REPLICAS
 * replicas have the script's writes (WAIT on the connection it ran on, the
 * voucher's master), so that no 200 stands on a change a failover can undo
 * (proto/redis-keys.md, "Redis Cluster"). o is copied.
 */
static void publish_waited(hold_t *h, const vc_order_value_t *o)
{
    int rc;

    h->order = *o;
    if (h->app->cfg->redis_wait_replicas <= 0) {
        publish(h, &h->order);
        return;
    }
    rc = gw_redis_wait(h->app->redis, h->keys[VC_VOUCHER_KEY_ORDERS],
                       h->app->cfg->redis_wait_replicas, h->app->cfg->redis_wait_timeout_ms,
                       waited_cb, h);
    if (rc != 0)
        fail(h, rc, "redis WAIT for a replica");
}

static void reply_released(hold_t *h)
{
    char body[512];
    size_t len = gw_body_status(body, sizeof(body), h->order_id, h->code, "RELEASED", h->replayed);
    gw_app_reply(h->req, 200, body, len);
}

static void finished_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    hold_t *h = arg;
    int64_t status;

    if (rc != 0) {
        /* The event is stored; the order stays X until a retry or the reconciler finishes. */
        fail(h, rc, "redis release finish");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(h, VC_ERR_PROTOCOL, "redis release finish");
        return;
    }
    status = reply->item[0].integer;
    if (status == VC_RELEASE_FINISH_GIVEN_BACK) {
        /* A use is back: every worker may offer it again. */
        gw_soldout_clear(h->code);
    } else if (status == VC_RELEASE_FINISH_ALREADY_RELEASED) {
        h->replayed = 1; /* a racing request finished it first */
    } else if (status == VC_LOOKUP_KEYS_LOST) {
        /* (A campaign's: campaign_guard.lua answers for release_finish.lua.) */
        /* Lost since the release began: the order stays X, the reconciler resumes it. */
        fail(h, VC_ERR_UNAVAILABLE, LOST_KEYS);
        return;
    } else {
        fail(h, VC_ERR_PROTOCOL, "redis release finish: order not releasing");
        return;
    }
    reply_released(h);
}

/*
 * VoucherReleased is acknowledged: X -> R, the use goes back. The 200 does
 * not wait for the replicas to have the R: the X they have since the WAIT
 * before the publish already answers every later request as released (a
 * confirm 409, a retry 409, a cancel 200 that finishes again), and a
 * failover that loses the R leaves that X, which the reconciler resumes
 * after its grace (proto/redis-keys.md, "Redis Cluster").
 */
static void finish_release(hold_t *h)
{
    const char *keys[VC_RELEASE_FINISH_NKEYS];
    const char *args[] = {h->order_id};
    int rc;

    vc_script_keys(vc_release_finish_keys, VC_RELEASE_FINISH_NKEYS, h->keys[0], GW_KEY_MAX, keys);
    if ((rc = eval(h, GW_SCRIPT_RELEASE_FINISH, finished_cb, VC_RELEASE_FINISH_NKEYS, keys, 1,
                   args)) != 0)
        fail(h, rc, "redis release finish");
}

/*
 * Reads reply item i, an integer sent as a string, into *out: 1 read, 0 nil
 * (Redis does not know it), -1 neither.
 */
static int item_int(const gw_redis_reply_t *reply, size_t i, int64_t *out)
{
    char buf[24], *end;

    if (reply->n <= i || reply->item[i].type == GW_REDIS_NIL)
        return 0;
    if (reply->item[i].type != GW_REDIS_STR || reply->item[i].len == 0 ||
        reply->item[i].len >= sizeof(buf))
        return -1;
    memcpy(buf, reply->item[i].str, reply->item[i].len);
    buf[reply->item[i].len] = '\0';
    *out = strtoll(buf, &end, 10);
    return *end == '\0' && *out >= 0 ? 1 : -1;
}

void gw_holds_reply_refused(gw_request_t *req, int rc, const char *detail, const char *key,
                            const gw_figures_t *fig)
{
    const char *error, *reason;
    char body[768];
    int status = gw_status_for(rc, &error, &reason);
    size_t len = gw_body_confirm_refused(body, sizeof(body), error, detail, reason, key, fig);

    gw_app_reply(req, status, body, len);
}

/* Answers a refused confirm (422 or 409) with the figures under key. */
static void reply_refused(hold_t *h, int rc, const char *detail, const char *key)
{
    gw_holds_reply_refused(h->req, rc, detail, key, &h->fig);
}

/*
 * confirm.lua's answer to a confirm given the total (status 1, 0, -3, -4;
 * the others are answered as without one), order parsed into o.
 */
static void confirmed_total(hold_t *h, int64_t status, const gw_redis_reply_t *reply,
                            const vc_order_value_t *o)
{
    char detail[160];
    int64_t amount = 0, paid = 0;
    int has_amount = item_int(reply, 2, &amount), has_paid = item_int(reply, 3, &paid);

    if (has_amount < 0 || has_paid < 0) {
        fail(h, VC_ERR_PROTOCOL, "stored amounts unreadable");
        return;
    }
    h->fig.discount = o->discount;
    switch (status) {
    case VC_CONFIRM_CONFIRMED:         /* at the total */
    case VC_CONFIRM_ALREADY_CONFIRMED: /* at this total, or at one Redis no longer knows */
        h->fig.has_amount = has_paid;
        h->fig.order_amount = paid;
        h->replayed = status == VC_CONFIRM_ALREADY_CONFIRMED;
        publish_waited(h, o);
        return;
    case VC_CONFIRM_OTHER_TOTAL:
        h->fig.has_amount = 1;
        h->fig.order_amount = paid;
        snprintf(detail, sizeof(detail), "the order was confirmed at orderAmount %lld",
                 (long long)paid);
        reply_refused(h, GW_E_CONFIRMED_OTHER, detail, "confirmed");
        return;
    case VC_CONFIRM_TOTAL_REFUSED:
        /* Nothing changed: the hold and its quote stand, for a confirm with the right total. */
        h->fig.has_amount = has_amount;
        h->fig.order_amount = amount;
        reply_refused(h, h->verdict, NULL, "quote");
        return;
    default:
        fail(h, VC_ERR_PROTOCOL, "redis confirm");
        return;
    }
}

static void script_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    hold_t *h = arg;
    vc_order_value_t o;
    int64_t status;

    if (rc != 0) {
        /*
         * A test holds a confirm whose script got no answer in time here,
         * before its 503, and lets Redis run the script meanwhile: the
         * order is C and no VoucherConfirmed is ever published (the
         * reconciler publishes it: test_confirm_lost.sh).
         */
        if (h->type == VC_EV_CONFIRMED)
            VC_PAUSE("confirm-after-redis-error");
        fail(h, rc, "redis");
        return;
    }
    if (reply->n < 1 || reply->item[0].type != GW_REDIS_INT) {
        fail(h, VC_ERR_PROTOCOL, "redis");
        return;
    }
    status = reply->item[0].integer;
    if ((status == VC_LOOKUP_NO_ORDER || status == VC_LOOKUP_COUNTER_LOST) && !h->camp_looked) {
        /* No such order of a voucher (nor its counter): the code may be a campaign's. */
        h->counter_missing = status == VC_LOOKUP_COUNTER_LOST;
        h->camp_looked = 1;
        gw_campaign_find(h->app, h->code, 0, &h->camp, &h->v, campaign_cb, h);
        return;
    }
    if (status == VC_LOOKUP_NO_ORDER || status == VC_LOOKUP_COUNTER_LOST) {
        gw_app_reply_error(h->req, VC_E_NOT_FOUND, "no such reservation");
        return;
    }
    if (status == VC_LOOKUP_KEYS_LOST) {
        /*
         * The campaign's keys (campaign_guard.lua) or the voucher's orders
         * (orders_lost.lua) are lost: the order may exist in PostgreSQL, so a
         * 404 could make the order service drop a paid order. Unknown for
         * now: retry after the reconciler's rebuild.
         */
        fail(h, VC_ERR_UNAVAILABLE, h->camp.id ? LOST_KEYS : LOST_ORDERS);
        return;
    }
    if (reply->n < 2 || reply->item[1].type != GW_REDIS_STR ||
        vc_order_value_parse(reply->item[1].str, reply->item[1].len, &o) != 0) {
        fail(h, VC_ERR_PROTOCOL, "stored order value unreadable");
        return;
    }
    if (h->type == VC_EV_CONFIRMED) {
        if (status == VC_CONFIRM_TOO_LATE) {
            gw_app_reply_error(h->req, VC_E_HOLD_EXPIRED,
                               o.state == VC_STATE_HELD ? "the hold expired before the confirmation"
                                                        : "the reservation was released");
            return;
        }
        if (h->in.has_total) {
            confirmed_total(h, status, reply, &o);
            return;
        }
        h->replayed = status == VC_CONFIRM_ALREADY_CONFIRMED;
        publish_waited(h, &o);
        return;
    }
    switch (status) {
    case VC_RELEASE_BEGIN_ALREADY_RELEASED: /* its event was acknowledged before the use came back
                                             */
        h->replayed = 1;
        reply_released(h);
        return;
    case VC_RELEASE_BEGIN_BEGUN:
    case VC_RELEASE_BEGIN_ALREADY_BEGUN: /* a retry after a failed publish: publish, finish */
        publish_waited(h, &o);
        return;
    default:
        fail(h, VC_ERR_PROTOCOL, "redis release begin");
        return;
    }
}

/* Runs confirm.lua; with a total, h->verdict and h->price are set. */
static void run_confirm(hold_t *h)
{
    char now[24];
    const char *keys[VC_CONFIRM_NKEYS];
    const char *args[] = {h->order_id, now, h->total_arg, h->price_arg};
    int rc;

    vc_script_keys(vc_confirm_keys, VC_CONFIRM_NKEYS, h->keys[0], GW_KEY_MAX, keys);
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    /*
     * confirm.lua marks a confirm of a confirmed order in resent (it publishes
     * again), and records the total every confirm is made at (paid), so that a
     * later confirm with a total is compared with it.
     */
    rc = eval(h, GW_SCRIPT_CONFIRM, script_cb,
              lost_keys(h, VC_CONFIRM_KEY_PAID + 1, VC_CONFIRM_NKEYS), keys,
              h->in.has_total ? 4 : 2, args);
    if (rc != 0)
        fail(h, rc, "redis");
}

/*
 * The voucher's rules are known: price the final total (no clock: a hold
 * taken inside the window is confirmable until its heldUntil), then let
 * confirm.lua judge the verdict against the stored reservation.
 */
static void with_rules(hold_t *h)
{
    h->verdict = vc_voucher_price(&h->v, h->in.order_amount, &h->price);
    snprintf(h->total_arg, sizeof(h->total_arg), "%lld", (long long)h->in.order_amount);
    if (h->verdict == 0)
        snprintf(h->price_arg, sizeof(h->price_arg), "%lld", (long long)h->price);
    else
        h->price_arg[0] = '\0'; /* refused: confirm.lua confirms only the reservation's total */
    run_confirm(h);
}

static void rules_cb(void *arg, int rc, const vc_voucher_t *v)
{
    hold_t *h = arg;

    if (rc == VC_E_NOT_FOUND && !h->camp_looked) {
        /* No such voucher: the code may be a campaign's, whose rules the lookup reads. */
        h->camp_looked = 1;
        gw_campaign_find(h->app, h->code, 0, &h->camp, &h->v, campaign_cb, h);
        return;
    }
    if (rc != 0) {
        if (rc < 0)
            fail(h, rc, "reading voucher rules");
        else if (rc == VC_E_NOT_FOUND)
            /* The answer of a real code's unknown order: which codes exist is not told here. */
            gw_app_reply_error(h->req, rc, "no such reservation");
        else
            gw_app_reply_error(h->req, rc, NULL);
        return;
    }
    if (v != &h->v)
        h->v = *v;
    h->voucher = !h->camp.id;
    with_rules(h);
}

void gw_holds_not_found(gw_request_t *req, vc_event_type_t type, int has_total)
{
    gw_app_reply_error(req, VC_E_NOT_FOUND,
                       type == VC_EV_RELEASED || !has_total ? "no such reservation" : NULL);
}

/* No such order: the answer of a real code's unknown order (which codes exist is not told). */
static void not_found(hold_t *h)
{
    gw_holds_not_found(h->req, h->type, h->in.has_total);
}

/*
 * On the threadpool: whether Redis had the voucher's keys (its first load set
 * redis_loaded_at) and they have not expired a retention after its end.
 */
static int loaded_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    hold_t *h = arg;
    char retention[24];
    const char *params[] = {h->code, retention};
    PGresult *res;
    int rc = 0;

    snprintf(retention, sizeof(retention), "%lld", (long long)h->app->cfg->redis_retention_ms);
    if (!(res = vc_pg_exec(conn,
                           "SELECT redis_loaded_at IS NOT NULL"
                           " AND now() < ends_at + $2::bigint * interval '1 millisecond',"
                           " mode = 'direct'"
                           " FROM voucher WHERE code = $1",
                           2, params, &rc, err, errlen)))
        return rc;
    h->was_loaded = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
    h->direct = PQntuples(res) == 1 && PQgetvalue(res, 0, 1)[0] == 't';
    PQclear(res);
    return 0;
}

static void loaded_done(void *arg, int rc, const char *err)
{
    hold_t *h = arg;

    (void)err; /* fail() logs the outcome with the ids */
    if (rc != 0) {
        fail(h, rc, "reading whether the voucher was loaded");
        return;
    }
    if (h->direct) {
        /* Its rules could not be read a moment ago: its orders are in PostgreSQL, not Redis. */
        fail(h, VC_ERR_UNAVAILABLE, "reading voucher rules");
        return;
    }
    if (h->was_loaded) {
        /* Its keys are gone while it sells: the reconciler restores them; the order may exist. */
        fail(h, VC_ERR_UNAVAILABLE, LOST_VOUCHER);
        return;
    }
    not_found(h);
}

/* The campaign lookup's answer: run the step again on the campaign's keys, or say not found. */
static void campaign_cb(void *arg, int rc)
{
    hold_t *h = arg;

    if (rc < 0) {
        fail(h, rc, "reading the campaign code");
        return;
    }
    if (rc > 0 && h->counter_missing) {
        /* Not a campaign's code either: was the voucher in Redis? PostgreSQL says. */
        if ((rc = gw_pg_run(h->app->loop, h->app->pg, loaded_work, loaded_done, h)) != 0)
            fail(h, rc, "reading whether the voucher was loaded");
        return;
    }
    if (rc > 0) {
        not_found(h);
        return;
    }
    gw_campaign_take(&h->camp, h->code, h->keys);
    flash(h);
}

/*
 * The confirm or the release begin in Redis, on the voucher's keys or
 * (h->camp) the campaign's; h->rules_rc says what the rules lookup found.
 */
static void flash(hold_t *h)
{
    char now[24];
    const char *keys[VC_RELEASE_BEGIN_NKEYS], *args[3];
    int rc;

    if (h->type == VC_EV_CONFIRMED) {
        if (!h->in.has_total) {
            run_confirm(h); /* as before the total existed: no rule is read */
            return;
        }
        if (h->camp.id) {
            with_rules(h); /* the lookup read the campaign's rules */
            return;
        }
        /* The lookup of proceed() answered: the rules, a miss, or a failure. */
        rules_cb(h, h->rules_rc, h->rules_rc == 0 ? &h->v : NULL);
        return;
    }
    snprintf(now, sizeof(now), "%lld", (long long)vc_time_now_ms());
    vc_script_keys(vc_release_begin_keys, VC_RELEASE_BEGIN_NKEYS, h->keys[0], GW_KEY_MAX, keys);
    args[0] = h->order_id;
    args[1] = "cancel";
    args[2] = now;
    /* resent too: release_begin.lua marks a release begun before (status 2) there. */
    rc = eval(h, GW_SCRIPT_RELEASE_BEGIN, script_cb,
              lost_keys(h, VC_RELEASE_BEGIN_KEY_RESENT + 1, VC_RELEASE_BEGIN_NKEYS), keys, 3, args);
    if (rc != 0)
        fail(h, rc, "redis");
}

/* No voucher has the code, the local limiter decided: a campaign's code is 503, none 404. */
static void local_campaign_cb(void *arg, int rc)
{
    hold_t *h = arg;

    if (rc == VC_E_NOT_FOUND)
        not_found(h);
    else
        fail(h, rc < 0 ? rc : VC_ERR_UNAVAILABLE, "redis: guessing limits");
}

/* The code's rules (the cache, or PostgreSQL), or why there are none: who decides. */
static void mode_cb(void *arg, int rc, const vc_voucher_t *v)
{
    hold_t *h = arg;

    if (rc == 0 && v->mode == VC_MODE_DIRECT) {
        gw_holds_direct(h->app, h->req, h->type, h->code, h->order_id, &h->in, v);
        return;
    }
    if (gw_guard_local(h->req)) {
        /*
         * Redis could not take the guard's try (gw_guard.h, the local
         * limiter): a flash voucher's or a campaign's order answers 503 as
         * before. A code nobody has answers 404, a failed try kept locally, as
         * a reservation's (gw_reserve_rules.c): a 503 for it would let a
         * guesser tell the direct vouchers' codes for nothing.
         */
        if (rc == VC_E_NOT_FOUND)
            gw_campaign_find(h->app, h->code, 0, &h->camp, &h->v, local_campaign_cb, h);
        else
            fail(h, rc < 0 ? rc : VC_ERR_UNAVAILABLE, "redis: guessing limits");
        return;
    }
    if (rc == 0 && v != &h->v)
        h->v = *v;
    h->rules_rc = rc;
    flash(h);
}

/*
 * Where the guessing limits let the request on: the code's rules say who
 * decides, answered now (cached, or a remembered miss) or later: one path.
 */
static void proceed(void *arg)
{
    hold_t *h = arg;
    int rc = gw_rules_get(h->app->rules, h->code, 0, &h->v, mode_cb, h);

    if (rc != GW_RULES_PENDING)
        mode_cb(h, rc, rc == 0 ? &h->v : NULL);
}

static void start(gw_app_t *app, gw_request_t *req, vc_event_type_t type, const char *code,
                  const char *order_id)
{
    char err[256];
    hold_t *h = gw_request_alloc(req, sizeof(*h));
    int rc;

    if (!h) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    memset(h, 0, sizeof(*h));
    h->app = app;
    h->req = req;
    h->type = type;
    snprintf(h->code, sizeof(h->code), "%s", code);
    snprintf(h->order_id, sizeof(h->order_id), "%s", order_id);
    gw_app_keys(code, h->keys);
    if (type == VC_EV_CONFIRMED) {
        if ((rc = gw_confirm_req_parse(req->body, req->body_len, &h->in, err, sizeof(err))) !=
            0) {
            gw_app_reply_error(req, rc, err);
            return;
        }
    }
    /*
     * No customer here: only the IP bucket, and only while the route is open
     * (no VOUCHER_API_TOKEN), where a 404 is a guess at someone's orderId.
     */
    if (gw_guard_enter(app, req, 0, proceed, h) == GW_GUARD_GO)
        proceed(h);
}

void gw_confirm_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id)
{
    start(app, req, VC_EV_CONFIRMED, code, order_id);
}

void gw_cancel_start(gw_app_t *app, gw_request_t *req, const char *code, const char *order_id)
{
    start(app, req, VC_EV_RELEASED, code, order_id);
}
