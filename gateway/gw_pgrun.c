#include "gw_pgrun.h"

#include <stdlib.h>

#include "vc_error.h"
#include "vc_pg.h"

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

/* ---- jobs (the threadpool, then the loop) ---- */

static void job_work_cb(uv_work_t *w)
{
    job_t *j = w->data;
    PGconn *conn;

    if (!j->pool) {
        j->rc = j->fn(j->arg, NULL, j->err, sizeof(j->err));
        return;
    }
    if (!(conn = gw_pg_pool_take(j->pool, j->err, sizeof(j->err)))) {
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
