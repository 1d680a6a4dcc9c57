#include "gw_pgpool.h"

#include <stdlib.h>

#include "vc_error.h"
#include "vc_pg.h"

struct gw_pg_pool {
    uv_mutex_t lock;
    const char *dsn;
    PGconn **idle;
    int nidle, size;
};

/* A gw_pg_run() job. */
typedef struct {
    uv_work_t work;
    gw_pg_pool_t *pool;
    gw_pg_work_fn fn;
    gw_pg_done_cb done;
    void *arg;
    int rc;
    char err[256];
} job_t;

/* ---- the pool (any thread) ---- */

gw_pg_pool_t *gw_pg_pool_new(const char *dsn, int size)
{
    gw_pg_pool_t *p = calloc(1, sizeof(*p));

    if (!p || !(p->idle = calloc((size_t)size, sizeof(PGconn *))) || uv_mutex_init(&p->lock) != 0) {
        if (p)
            free(p->idle);
        free(p);
        return NULL;
    }
    p->dsn = dsn;
    p->size = size;
    return p;
}

void gw_pg_pool_free(gw_pg_pool_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nidle; i++)
        PQfinish(p->idle[i]);
    uv_mutex_destroy(&p->lock);
    free(p->idle);
    free(p);
}

PGconn *gw_pg_pool_take(gw_pg_pool_t *p, char *err, size_t errlen)
{
    PGconn *conn = NULL;

    uv_mutex_lock(&p->lock);
    if (p->nidle > 0)
        conn = p->idle[--p->nidle];
    uv_mutex_unlock(&p->lock);
    if (!conn)
        conn = vc_pg_connect(p->dsn, "voucher-gateway", err, errlen);
    return conn;
}

void gw_pg_pool_put(gw_pg_pool_t *p, PGconn *conn)
{
    if (PQstatus(conn) == CONNECTION_OK) {
        uv_mutex_lock(&p->lock);
        if (p->nidle < p->size) {
            p->idle[p->nidle++] = conn;
            conn = NULL;
        }
        uv_mutex_unlock(&p->lock);
    }
    if (conn)
        PQfinish(conn);
}

/* ---- jobs (the threadpool, then the loop) ---- */

static void job_work_cb(uv_work_t *w)
{
    job_t *j = w->data;
    PGconn *conn = gw_pg_pool_take(j->pool, j->err, sizeof(j->err));

    if (!conn) {
        j->rc = VC_ERR_UNAVAILABLE;
        return;
    }
    j->rc = j->fn(j->arg, conn, j->err, sizeof(j->err));
    gw_pg_pool_put(j->pool, conn);
}

static void job_done_cb(uv_work_t *w, int status)
{
    job_t *j = w->data;

    j->done(j->arg, status == UV_ECANCELED ? VC_ERR_SHUTDOWN : j->rc, j->err);
    free(j);
}

int gw_pg_run(uv_loop_t *loop, gw_pg_pool_t *pool, gw_pg_work_fn work, gw_pg_done_cb done,
              void *arg)
{
    job_t *j = calloc(1, sizeof(*j));

    if (!j)
        return VC_ERR_NOMEM;
    j->pool = pool;
    j->fn = work;
    j->done = done;
    j->arg = arg;
    j->work.data = j;
    if (uv_queue_work(loop, &j->work, job_work_cb, job_done_cb) != 0) {
        free(j);
        return VC_ERR_UNAVAILABLE;
    }
    return 0;
}
