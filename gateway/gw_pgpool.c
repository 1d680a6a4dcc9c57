#include "gw_pgpool.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "vc_error.h"
#include "vc_log.h"
#include "vc_metrics.h"
#include "vc_pg.h"

struct gw_pg_pool {
    uv_mutex_t lock;
    const char *dsn;
    PGconn **idle;
    int nidle, size;
    /*
     * Whether the last job reached PostgreSQL: 1 yes, 0 no (a vouchers not
     * cached yet then gets 503), -1 before the first job. Changes are
     * logged once each, and shown in voucher_gateway_pg_up.
     */
    atomic_int reachable;
    vc_metric_t *up;
};

/* ---- the pool (any thread) ---- */

/* Records whether PostgreSQL was reached; logs a change once (any thread). */
static void note_reachable(gw_pg_pool_t *p, int reached, const char *err)
{
    int was = atomic_exchange(&p->reachable, reached);

    vc_metric_set(p->up, reached);
    if (was == reached || (was == -1 && reached))
        return;
    if (reached)
        vc_info("PostgreSQL reachable again: voucher rules are read");
    else
        vc_warn("PostgreSQL unreachable: voucher rules cannot be read, and a voucher not cached "
                "yet gets 503 until it is back: %s",
                err);
}

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
    atomic_init(&p->reachable, -1);
    p->up = vc_gauge("voucher_gateway_pg_up",
                     "1 while PostgreSQL answers the gateway's reads of voucher rules, 0 since one "
                     "could not reach it (vouchers not cached get 503)",
                     NULL);
    vc_metric_set(p->up, 1); /* nothing has failed yet */
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
    if (!conn && !(conn = vc_pg_connect(p->dsn, "voucher-gateway", err, errlen)))
        note_reachable(p, 0, err);
    return conn;
}

void gw_pg_pool_put(gw_pg_pool_t *p, PGconn *conn)
{
    /* A query error on a live session is the query's; a dead session is the server's. */
    note_reachable(p, PQstatus(conn) == CONNECTION_OK, PQerrorMessage(conn));
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
