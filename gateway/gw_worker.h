/*
 * A worker: one thread, its own uv loop, its own SO_REUSEPORT listener, Redis
 * connection and rules cache, sharing the Kafka producer and the PostgreSQL
 * pool with the other workers.
 */
#ifndef GW_WORKER_H
#define GW_WORKER_H

#include <stdatomic.h>
#include <stddef.h>
#include <uv.h>

#include "gw_app.h"
#include "vc_admin.h"

/* What all workers share; borrowed by each for its whole life. */
typedef struct {
    const gw_config_t *cfg;
    gw_kafka_t *kafka;
    gw_pg_pool_t *pg;
    atomic_long connections;
    gw_http_ip_table_t *per_ip; /* connections per client address; NULL: no cap */
    atomic_int *redis_up; /* one flag per worker, the admin worker's last */
    int nworkers;
    atomic_int draining; /* set when shutdown begins: /readyz answers 503 */
    char http_host[256];
    int http_port;
    char admin_host[256]; /* the admin address (VOUCHER_GATEWAY_ADMIN_ADDR) */
    int admin_port;
    vc_admin_ready_cb ready; /* /readyz on the admin address: main.c's; arg: this struct */
    vc_redis_url_t redis; /* VOUCHER_REDIS_URL parsed, credentials included */
} gw_shared_t;

typedef struct {
    int id;
    int admin; /* the admin worker: it serves the admin address alone */
    gw_shared_t *shared;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t stop_async;
    uv_sem_t ready;
    int start_rc;
    char err[256];
    gw_http_server_t http;
    atomic_long admin_connections; /* the admin worker's connections */
    gw_kafka_inbox_t inbox;
    gw_app_t app;
} gw_worker_t;

/*
 * Starts worker id on its own thread and waits until it listens. Returns 0,
 * or a negative VC_ERR_* with err set (the thread has then ended and
 * gw_worker_join() must still be called).
 *
 * An API worker (admin 0) shares the API address with the others
 * (SO_REUSEPORT) and serves the order service's routes. The admin worker
 * (admin 1, one per process) listens alone on the admin address and serves
 * /healthz, /readyz, /metrics and the admin routes (gw_app_handle_admin), on
 * a loop and a Redis connection of its own: the admin side never reaches the
 * API port's routes, nor the order service the admin routes.
 */
int gw_worker_start(gw_worker_t *w, int id, int admin, gw_shared_t *shared, char *err,
                    size_t errlen);

/*
 * Asks the worker to stop (any thread): it stops accepting, answers the
 * requests in flight, closes its connections and ends its loop.
 */
void gw_worker_stop(gw_worker_t *w);

/* Waits for the worker's thread to end. */
void gw_worker_join(gw_worker_t *w);

#endif
