/*
 * The campaign admin flows (gw_campaign.h). Every PostgreSQL call is
 * vc_campaign_pg's, run on libuv's threadpool through gw_pg_run(); the
 * answers are built on the worker's loop.
 *
 * A large campaign is generated in the background: the 202 is sent once its
 * row is committed, and the generation then runs as a job that owns its own
 * copy of what it needs (the request is gone by then). One such job runs per
 * process at a time: it holds a threadpool thread and a pooled connection
 * for about 10 s per million codes.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"
#include "gw_campaign.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_log.h"
#include "vc_random.h"

#define BODY_MAX 2048
#define PAGE_ROWS 5000
#define CSV_HEADER "code,customerId\n"

/* Whether a background generation runs in this process (all workers). */
static atomic_int generating;

typedef struct {
    gw_app_t *app;
    gw_request_t *req;
    gw_campaign_req_t creq;
    int64_t customers[GW_CAMPAIGN_CUSTOMERS_MAX];
    int sync; /* generate within the request (count <= GW_CAMPAIGN_SYNC_MAX) */
    int64_t id;
    vc_campaign_row_t row;
    /* GET /campaigns: the page (list_rows of them, list_more when another follows) */
    vc_campaign_row_t *list;
    int list_rows, list_more, list_state;
    int64_t list_after;
    int list_limit;
    /* GET .../codes */
    int64_t after;
    char *page;
    size_t page_len;
    int rows;
} campaign_t;

/* A background generation: owns everything it uses. */
typedef struct {
    gw_app_t *app;
    int64_t id;
    int64_t *customers;
    size_t ncustomers;
} job_t;

static void reply_campaign(campaign_t *a, int status, const char *extra)
{
    char body[BODY_MAX];
    size_t len = gw_body_campaign(body, sizeof(body), &a->row);

    if (len == 0) {
        gw_app_reply_error(a->req, VC_ERR_TOO_LARGE, "campaign does not fit the answer");
        return;
    }
    gw_http_respond(a->req, status, extra, body, len);
}

static void reply_plain(gw_request_t *req, int status, const char *error, const char *detail)
{
    char body[1024];
    size_t len = gw_body_error(body, sizeof(body), error, detail, NULL);

    gw_app_reply(req, status, body, len);
}

/* Answers a failed lookup: 404 for no such campaign, 503 for ours. */
static void reply_failed(campaign_t *a, int rc, const char *err)
{
    if (rc == VC_CAMPAIGN_E_NOT_FOUND) {
        reply_plain(a->req, 404, "NOT_FOUND", "no campaign with this id");
        return;
    }
    if (rc < 0) {
        vc_log_field_t f[] = {{"route", "campaign"}};
        VC_LOG_F(VC_LOG_WARN, f, "campaign %lld: %s", (long long)a->id, err);
    }
    gw_app_reply_error(a->req, rc < 0 ? rc : VC_ERR_UNAVAILABLE, "PostgreSQL unavailable");
}

/* ---- background generation ---- */

static int job_progress_cb(void *arg, int64_t generated, int64_t total)
{
    job_t *j = arg;
    (void)generated;
    (void)total;
    VC_PAUSE("campaign-after-batch");
    /* Stop between batches on shutdown: the campaign stays GENERATING, resumable. */
    return atomic_load(j->app->draining);
}

static int job_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    job_t *j = arg;
    return vc_campaign_generate(conn, j->id, j->customers, j->ncustomers, vc_random_fill,
                                job_progress_cb, j, err, errlen);
}

static void job_done_cb(void *arg, int rc, const char *err)
{
    job_t *j = arg;
    char id[24];
    vc_log_field_t f[] = {{"campaign", id}};

    snprintf(id, sizeof(id), "%lld", (long long)j->id);
    if (rc != 0)
        VC_LOG_F(VC_LOG_WARN, f, "generating the campaign's codes failed: %s", err);
    else
        VC_LOG_F(VC_LOG_INFO, f, "campaign's codes generated");
    free(j->customers);
    free(j);
    atomic_store(&generating, 0);
}

/* Starts the background generation of a->id; on failure the campaign stays resumable. */
static void job_start(campaign_t *a)
{
    job_t *j = calloc(1, sizeof(*j));
    int rc = VC_ERR_NOMEM;

    if (j && (a->creq.ncustomers == 0 ||
              (j->customers = malloc(a->creq.ncustomers * sizeof(int64_t))) != NULL)) {
        j->app = a->app;
        j->id = a->id;
        j->ncustomers = a->creq.ncustomers;
        if (j->ncustomers)
            memcpy(j->customers, a->customers, j->ncustomers * sizeof(int64_t));
        if ((rc = gw_pg_run(a->app->loop, a->app->pg, job_work, job_done_cb, j)) == 0)
            return;
    }
    vc_error("campaign %lld: the generation could not start (%s); resume it with voucher-admin",
             (long long)a->id, vc_strerror(rc));
    if (j)
        free(j->customers);
    free(j);
    atomic_store(&generating, 0);
}

/* ---- POST /campaigns ---- */

static int create_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    vc_audit_who_t who;
    int rc;

    gw_app_who(a->req, &who);
    if ((rc = vc_campaign_create(conn, &a->creq.spec, &who, &a->id, err, errlen)) != 0)
        return rc;
    if (a->sync &&
        (rc = vc_campaign_generate(conn, a->id, a->customers, a->creq.ncustomers, vc_random_fill,
                                   NULL, NULL, err, errlen)) != 0)
        return rc;
    return vc_campaign_load(conn, a->id, &a->row, err, errlen);
}

static void created_cb(void *arg, int rc, const char *err)
{
    campaign_t *a = arg;
    char location[64];

    if (rc == VC_CAMPAIGN_E_PREFIX) {
        if (!a->sync)
            atomic_store(&generating, 0);
        reply_plain(a->req, 422, "UNPROCESSABLE", err);
        return;
    }
    if (rc != 0) {
        if (!a->sync && a->id == 0)
            atomic_store(&generating, 0);
        else if (!a->sync)
            job_start(a); /* created: generate what can be, or leave it resumable */
        reply_failed(a, rc, err);
        return;
    }
    snprintf(location, sizeof(location), "Location: /campaigns/%lld\r\n", (long long)a->id);
    if (a->sync) {
        reply_campaign(a, 201, location);
        return;
    }
    /* The job copies what it needs first: the answer frees a with the request's arena. */
    job_start(a);
    reply_campaign(a, 202, location);
}

static void create_start(campaign_t *a)
{
    char err[512];
    int rc = gw_campaign_req_parse(a->req->body, a->req->body_len, &a->creq, a->customers, err,
                                   sizeof(err));

    if (rc == GW_CAMPAIGN_E_UNPROCESSABLE) {
        reply_plain(a->req, 422, "UNPROCESSABLE", err);
        return;
    }
    if (rc != 0) {
        gw_app_reply_error(a->req, rc, err);
        return;
    }
    a->sync = a->creq.spec.count <= GW_CAMPAIGN_SYNC_MAX;
    if (!a->sync && atomic_exchange(&generating, 1)) {
        gw_app_reply_error(a->req, VC_ERR_UNAVAILABLE,
                           "this gateway is generating another campaign; try again later");
        return;
    }
    if ((rc = gw_pg_run(a->app->loop, a->app->pg, create_work, created_cb, a)) != 0) {
        if (!a->sync)
            atomic_store(&generating, 0);
        gw_app_reply_error(a->req, rc, "PostgreSQL unavailable");
    }
}

/* ---- GET /campaigns/{id}, POST /campaigns/{id}/deactivate ---- */

static int show_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    int rc = vc_campaign_load(conn, a->id, &a->row, err, errlen);

    return rc != 0 ? rc : vc_campaign_load_usage(conn, a->id, &a->row, err, errlen);
}

static int deactivate_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    vc_audit_who_t who;

    gw_app_who(a->req, &who);
    return vc_campaign_deactivate(conn, a->id, &who, &a->row, err, errlen);
}

/* Whether the campaign's codes may be exported: all of them are generated. */
static int export_ready(const vc_campaign_row_t *row)
{
    return strcmp(row->state, "GENERATING") != 0 && strcmp(row->state, "FAILED") != 0;
}

/*
 * GET .../codes: the campaign, and the export's admin_audit row with its
 * count of codes, written before the first code is read: an export that
 * cannot be recorded does not start (503).
 */
static int codes_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    char target[24], detail[48], *before = NULL;
    vc_audit_action_t audit = {"campaign.export", target, VC_AUDIT_CAMPAIGN, 0, NULL, detail};
    vc_audit_who_t who;
    int rc;

    if ((rc = vc_campaign_load(conn, a->id, &a->row, err, errlen)) != 0 || !export_ready(&a->row))
        return rc;
    gw_app_who(a->req, &who);
    snprintf(target, sizeof(target), "%lld", (long long)a->id);
    snprintf(detail, sizeof(detail), "%lld codes", (long long)a->row.generated);
    if ((rc = vc_audit_snapshot(conn, VC_AUDIT_CAMPAIGN, target, &before, err, errlen)) != 0)
        return rc;
    audit.before = before;
    rc = vc_audit_record(conn, &who, &audit, err, errlen);
    free(before);
    return rc;
}

static void shown_cb(void *arg, int rc, const char *err)
{
    campaign_t *a = arg;

    if (rc != 0) {
        reply_failed(a, rc, err);
        return;
    }
    reply_campaign(a, 200, NULL);
}

/* ---- GET /campaigns ---- */

/* One more row than the page: whether another page follows. */
static int list_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    int n = vc_campaign_list(conn, a->list_after, a->list_state, a->list, a->list_limit + 1, err,
                             errlen);

    if (n < 0)
        return n;
    a->list_more = n > a->list_limit;
    a->list_rows = a->list_more ? a->list_limit : n;
    return 0;
}

static void listed_cb(void *arg, int rc, const char *err)
{
    campaign_t *a = arg;
    char *body = NULL;
    size_t len = 0;
    vc_jgen_t g;

    if (rc != 0) {
        reply_failed(a, rc, err);
        return;
    }
    if (vc_jgen_init(&g) != 0) {
        gw_app_reply_error(a->req, VC_ERR_NOMEM, NULL);
        return;
    }
    vc_jgen_map_open(&g);
    vc_jgen_key(&g, "campaigns");
    vc_jgen_array_open(&g);
    for (int i = 0; i < a->list_rows; i++)
        if (gw_jgen_campaign(&g, &a->list[i]) != 0)
            rc = VC_ERR_INVALID;
    vc_jgen_array_close(&g);
    if (a->list_more)
        vc_jgen_kv_int(&g, "next", a->list[a->list_rows - 1].id);
    vc_jgen_map_close(&g);
    if (rc != 0) {
        vc_jgen_free(&g);
        gw_app_reply_error(a->req, VC_ERR_PROTOCOL, "a campaign could not be written");
        return;
    }
    if (vc_jgen_finish_alloc(&g, &body, &len) != 0) {
        gw_app_reply_error(a->req, VC_ERR_NOMEM, NULL);
        return;
    }
    gw_app_reply(a->req, 200, body, len);
    free(body);
}

/*
 * GET /campaigns?active=&after=&limit=: the query of GET /vouchers
 * (gw_list_query_parse()), after being a campaign's id; newest first.
 */
static void list_start(campaign_t *a)
{
    const char *q = memchr(a->req->path, '?', a->req->path_len);
    size_t qlen = q ? (size_t)(a->req->path + a->req->path_len - q - 1) : 0;
    gw_list_query_t lq;
    char err[256], *end;
    int rc;

    if ((rc = gw_list_query_parse(q ? q + 1 : "", qlen, &lq, err, sizeof(err))) != 0) {
        gw_app_reply_error(a->req, rc, err);
        return;
    }
    errno = 0;
    a->list_after = lq.after[0] ? strtoll(lq.after, &end, 10) : 0;
    if (lq.after[0] && (*end || errno == ERANGE || a->list_after < 1)) {
        gw_app_reply_error(a->req, VC_ERR_INVALID,
                           "after: a campaign's id (the next of the previous page)");
        return;
    }
    a->list_state = lq.has_active ? lq.active : -1;
    a->list_limit = lq.limit;
    if (!(a->list = gw_request_alloc(a->req, sizeof(*a->list) * (size_t)(lq.limit + 1)))) {
        gw_app_reply_error(a->req, VC_ERR_NOMEM, NULL);
        return;
    }
    if ((rc = gw_pg_run(a->app->loop, a->app->pg, list_work, listed_cb, a)) != 0)
        gw_app_reply_error(a->req, rc, "PostgreSQL unavailable");
}

/* ---- GET /campaigns/{id}/codes ---- */

static int page_work(void *arg, struct pg_conn *conn, char *err, size_t errlen)
{
    campaign_t *a = arg;
    size_t off = a->after == 0 ? strlen(CSV_HEADER) : 0, len = 0;
    int rows;

    memcpy(a->page, CSV_HEADER, off);
    rows = vc_campaign_codes_page(conn, a->id, strlen(a->row.spec.prefix), &a->after, PAGE_ROWS,
                                  a->page + off, (size_t)PAGE_ROWS * VC_CAMPAIGN_CSV_LINE_MAX, &len,
                                  err, errlen);
    if (rows < 0)
        return rows;
    a->rows = rows;
    a->page_len = off + len;
    return 0;
}

static void page_done_cb(void *arg, int rc, const char *err);

static void page_sent_cb(void *arg, int rc)
{
    campaign_t *a = arg;

    if (rc != 0) {
        gw_http_stream_end(a->req, 0); /* the client went away */
        return;
    }
    if (a->rows < PAGE_ROWS) {
        gw_http_stream_end(a->req, 1);
        return;
    }
    if ((rc = gw_pg_run(a->app->loop, a->app->pg, page_work, page_done_cb, a)) != 0)
        gw_http_stream_end(a->req, 0);
}

static void page_done_cb(void *arg, int rc, const char *err)
{
    campaign_t *a = arg;

    if (rc != 0) {
        vc_error("campaign %lld: reading its codes failed: %s", (long long)a->id, err);
        gw_http_stream_end(a->req, 0);
        return;
    }
    if (a->page_len == 0) {
        gw_http_stream_end(a->req, 1);
        return;
    }
    /* One page in flight at a time: the next is read once this one is written. */
    if (gw_http_stream_chunk(a->req, a->page, a->page_len, page_sent_cb, a) != 0)
        gw_http_stream_end(a->req, 0);
}

static void codes_loaded_cb(void *arg, int rc, const char *err)
{
    campaign_t *a = arg;

    if (rc != 0) {
        reply_failed(a, rc, err);
        return;
    }
    if (!export_ready(&a->row)) {
        reply_plain(a->req, 409, "NOT_READY",
                    "the campaign's codes are not all generated yet: see GET /campaigns/{id}");
        return;
    }
    a->page = gw_request_alloc(a->req, strlen(CSV_HEADER) +
                                           (size_t)PAGE_ROWS * VC_CAMPAIGN_CSV_LINE_MAX);
    if (!a->page) {
        gw_app_reply_error(a->req, VC_ERR_NOMEM, NULL);
        return;
    }
    /* From here the status is sent: a failure can only cut the answer short. */
    gw_http_stream_begin(a->req, 200, "Content-Type: text/csv; charset=utf-8\r\n");
    if ((rc = gw_pg_run(a->app->loop, a->app->pg, page_work, page_done_cb, a)) != 0)
        gw_http_stream_end(a->req, 0);
}

void gw_campaign_start(gw_app_t *app, gw_request_t *req, const gw_route_t *route)
{
    campaign_t *a = gw_request_alloc(req, sizeof(*a));
    gw_pg_done_cb done = shown_cb;
    gw_pg_work_fn work = show_work;
    int rc;

    if (!a) {
        gw_app_reply_error(req, VC_ERR_NOMEM, NULL);
        return;
    }
    a->app = app;
    a->req = req;
    a->id = route->campaign_id;
    switch (route->campaign_op) {
    case GW_CAMPAIGN_CREATE:
        create_start(a);
        return;
    case GW_CAMPAIGN_LIST:
        list_start(a);
        return;
    case GW_CAMPAIGN_DEACTIVATE:
        work = deactivate_work;
        break;
    case GW_CAMPAIGN_CODES:
        work = codes_work;
        done = codes_loaded_cb;
        break;
    default:
        break;
    }
    if ((rc = gw_pg_run(app->loop, app->pg, work, done, a)) != 0)
        gw_app_reply_error(req, rc, "PostgreSQL unavailable");
}
