/*
 * The admin routes (the token is checked by gw_app_handle):
 * POST /vouchers         creates a voucher in PostgreSQL (the truth), with
 *                        redis_loaded_at set in the same statement, then sets
 *                        its Redis counter with NX after the commit;
 * GET  /vouchers/{code}  its rules, PostgreSQL's used_count, Redis's remaining
 *                        (null when absent) and the holds outstanding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_store.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_pg.h"

#define GW_VOUCHER_BODY_MAX 1024

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    vc_voucher_t v;
    char keys[GW_KEY_COUNT][GW_KEY_MAX];
    int answers, failed, has_remaining;
    int64_t remaining, holds;
} admin_t;

static void reply_voucher(admin_t *a, int status, int has_remaining)
{
    char body[GW_VOUCHER_BODY_MAX];
    size_t len = gw_body_voucher(body, sizeof(body), &a->v, 1, a->v.used_count, has_remaining,
                                 a->remaining, a->holds);
    gw_app_reply(a->req, status, body, len);
}

/* ---- POST /vouchers ---- */

static int create_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    admin_t *a = arg;
    return gw_store_create(conn, &a->v, err, errlen);
}

static void counter_set_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;
    (void)reply;

    if (rc != 0) {
        /* Committed already: the reconciler sets the counter (redis_loaded_at is set). */
        vc_log_field_t f[] = {{"code", a->v.code}};
        VC_LOG_F(VC_LOG_WARN, f, "voucher created, but setting its redis counter failed: %s",
                 vc_strerror(rc));
        reply_voucher(a, 201, 0);
        return;
    }
    a->remaining = a->v.total_limit;
    reply_voucher(a, 201, 1);
}

static void created_cb(void *arg, int rc, const char *err)
{
    admin_t *a = arg;
    char total[24];
    const char *argv[] = {"SET", a->keys[GW_KEY_REMAINING], total, "NX"};
    size_t argvlen[4];

    if (rc != 0) {
        if (rc < 0) {
            vc_log_field_t f[] = {{"code", a->v.code}};
            VC_LOG_F(VC_LOG_WARN, f, "creating the voucher failed: %s", err);
        }
        gw_app_reply_error(a->req, rc,
                           rc == GW_E_EXISTS ? "a voucher with this code exists"
                           : rc < 0          ? "PostgreSQL unavailable"
                                             : NULL);
        return;
    }
    gw_rules_forget(a->app->rules, a->v.code);
    snprintf(total, sizeof(total), "%lld", (long long)a->v.total_limit);
    for (int i = 0; i < 4; i++)
        argvlen[i] = strlen(argv[i]);
    if ((rc = gw_redis_command(a->app->redis, counter_set_cb, a, 4, argv, argvlen)) != 0)
        counter_set_cb(a, rc, NULL);
}

void gw_create_start(gw_app_t *app, gw_request_t *req)
{
    char err[256];
    admin_t *a = gw_request_alloc(req, sizeof(*a));
    int rc;

    if (!a) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    if ((rc = gw_voucher_req_parse(req->body, req->body_len, &a->v, err, sizeof(err))) != 0) {
        gw_app_reply_error(req, rc, err);
        return;
    }
    gw_app_keys(a->v.code, a->keys);
    if ((rc = gw_pg_run(app->loop, app->pg, create_work, created_cb, a)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}

/* ---- GET /vouchers/{code} ---- */

static int show_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    admin_t *a = arg;
    return vc_pg_load_voucher(conn, a->v.code, &a->v, err, errlen);
}

static void counted(admin_t *a)
{
    if (--a->answers > 0)
        return;
    if (a->failed) {
        gw_app_reply_error(a->req, a->failed, "redis read");
        return;
    }
    reply_voucher(a, 200, a->has_remaining);
}

static void remaining_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;

    if (rc != 0)
        a->failed = rc;
    else if (reply->n == 1 && reply->item[0].type == GW_REDIS_STR) {
        char buf[24];
        size_t n = reply->item[0].len < sizeof(buf) - 1 ? reply->item[0].len : sizeof(buf) - 1;
        memcpy(buf, reply->item[0].str, n);
        buf[n] = '\0';
        a->remaining = strtoll(buf, NULL, 10);
        a->has_remaining = 1;
    }
    counted(a);
}

static void holds_cb(void *arg, int rc, const gw_redis_reply_t *reply)
{
    admin_t *a = arg;

    if (rc != 0)
        a->failed = rc;
    else if (reply->n == 1 && reply->item[0].type == GW_REDIS_INT)
        a->holds = reply->item[0].integer;
    counted(a);
}

static void loaded_cb(void *arg, int rc, const char *err)
{
    admin_t *a = arg;
    const char *get[] = {"GET", a->keys[GW_KEY_REMAINING]};
    size_t get_len[] = {3, strlen(get[1])};
    const char *zcard[] = {"ZCARD", a->keys[GW_KEY_HOLDS]};
    size_t zcard_len[] = {5, strlen(zcard[1])};

    if (rc != 0) {
        if (rc < 0) {
            vc_log_field_t f[] = {{"code", a->v.code}};
            VC_LOG_F(VC_LOG_WARN, f, "reading the voucher failed: %s", err);
        }
        gw_app_reply_error(a->req, rc, rc < 0 ? "PostgreSQL unavailable" : NULL);
        return;
    }
    a->answers = 1; /* held until both are sent */
    if ((rc = gw_redis_command(a->app->redis, remaining_cb, a, 2, get, get_len)) == 0)
        a->answers++;
    else
        a->failed = rc;
    if (rc == 0 && (rc = gw_redis_command(a->app->redis, holds_cb, a, 2, zcard, zcard_len)) == 0)
        a->answers++;
    else if (rc != 0)
        a->failed = rc;
    counted(a);
}

void gw_show_start(gw_app_t *app, gw_request_t *req, const char *code)
{
    admin_t *a = gw_request_alloc(req, sizeof(*a));
    int rc;

    if (!a) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    snprintf(a->v.code, sizeof(a->v.code), "%s", code);
    gw_app_keys(code, a->keys);
    if ((rc = gw_pg_run(app->loop, app->pg, show_work, loaded_cb, a)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}
