#include "gw_metrics.h"

#include <stdatomic.h>
#include <stdio.h>

#include "vc_error.h"
#include "vc_metrics.h"

/* The statuses the gateway answers; anything else is counted as "other". */
static const int statuses[] = {200, 201, 400, 401, 404, 405, 409, 413, 422, 429, 431, 500, 503};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)

#define REQUESTS "voucher_gateway_requests_total"
#define REQUESTS_HELP "HTTP answers by route and status."
#define DURATION "voucher_gateway_request_duration_seconds"
#define DURATION_HELP "Time from a complete request to its answer, by route."

#define DIRECT "voucher_gateway_direct_total"
#define DIRECT_HELP                                                                                \
    "Requests of a direct voucher decided by PostgreSQL, by route and the function's answer "      \
    "(failed: no answer)."
#define DIRECT_PG "voucher_gateway_direct_pg_seconds"
#define DIRECT_PG_HELP "A direct voucher's call of PostgreSQL (one transaction), by route."

static _Atomic(vc_metric_t *) requests[GW_ROUTE_COUNT][NSTATUS];
static _Atomic(vc_metric_t *) directs[GW_ROUTE_COUNT][GW_DIRECT_ANSWERS];
static _Atomic(vc_metric_t *) direct_pg[GW_ROUTE_COUNT];
static _Atomic(vc_metric_t *) durations[GW_ROUTE_COUNT];
static vc_metric_t *redis_roundtrip, *kafka_ack, *kafka_report;
static vc_metric_t *redis_error, *redis_timeout, *redis_fenced, *kafka_failed, *kafka_unknown, *soldout,
    *connections;

static size_t status_slot(int status)
{
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (statuses[i] == status)
            return i;
    return NSTATUS - 1;
}

/* The series for route and status, created on first use (vc_counter is idempotent). */
static vc_metric_t *request_series(gw_route_kind_t route, size_t slot)
{
    vc_metric_t *m = atomic_load_explicit(&requests[route][slot], memory_order_acquire);
    char labels[96];

    if (m)
        return m;
    if (slot == NSTATUS - 1)
        snprintf(labels, sizeof(labels), "route=\"%s\",status=\"other\"", gw_route_name(route));
    else
        snprintf(labels, sizeof(labels), "route=\"%s\",status=\"%d\"", gw_route_name(route),
                 statuses[slot]);
    m = vc_counter(REQUESTS, REQUESTS_HELP, labels);
    atomic_store_explicit(&requests[route][slot], m, memory_order_release);
    return m;
}

static vc_metric_t *duration_series(gw_route_kind_t route)
{
    vc_metric_t *m = atomic_load_explicit(&durations[route], memory_order_acquire);
    char labels[64];

    if (m)
        return m;
    snprintf(labels, sizeof(labels), "route=\"%s\"", gw_route_name(route));
    m = vc_histogram(DURATION, DURATION_HELP, labels);
    atomic_store_explicit(&durations[route], m, memory_order_release);
    return m;
}

/* A direct voucher's series for route and answer, created on first use. */
static vc_metric_t *direct_series(gw_route_kind_t route, gw_direct_answer_t answer)
{
    vc_metric_t *m = atomic_load_explicit(&directs[route][answer], memory_order_acquire);
    char labels[96];

    if (m)
        return m;
    snprintf(labels, sizeof(labels), "route=\"%s\",answer=\"%s\"", gw_route_name(route),
             gw_direct_answer_word(answer));
    m = vc_counter(DIRECT, DIRECT_HELP, labels);
    atomic_store_explicit(&directs[route][answer], m, memory_order_release);
    return m;
}

static vc_metric_t *direct_pg_series(gw_route_kind_t route)
{
    vc_metric_t *m = atomic_load_explicit(&direct_pg[route], memory_order_acquire);
    char labels[64];

    if (m)
        return m;
    snprintf(labels, sizeof(labels), "route=\"%s\"", gw_route_name(route));
    m = vc_histogram(DIRECT_PG, DIRECT_PG_HELP, labels);
    atomic_store_explicit(&direct_pg[route], m, memory_order_release);
    return m;
}

void gw_metrics_init(void)
{
    static const char *const redis_help =
        "Redis commands that failed, by kind (fenced: refused unsent while the restart fence "
        "is up, proto/redis-keys.md).";
    static const char *const kafka_help =
        "Event deliveries that failed: not persisted (failed) or possibly persisted (unknown).";

    if (connections)
        return;
    redis_error = vc_counter("voucher_gateway_redis_errors_total", redis_help, "kind=\"error\"");
    redis_timeout =
        vc_counter("voucher_gateway_redis_errors_total", redis_help, "kind=\"timeout\"");
    redis_fenced =
        vc_counter("voucher_gateway_redis_errors_total", redis_help, "kind=\"fenced\"");
    kafka_failed = vc_counter("voucher_gateway_kafka_errors_total", kafka_help, "kind=\"failed\"");
    kafka_unknown =
        vc_counter("voucher_gateway_kafka_errors_total", kafka_help, "kind=\"unknown\"");
    soldout = vc_counter("voucher_gateway_soldout_total",
                         "OUT_OF_STOCK answers given from the sold-out mark, without Redis.", NULL);
    redis_roundtrip = vc_histogram("voucher_gateway_redis_roundtrip_seconds",
                                   "Redis commands, from being queued to their reply.", NULL);
    kafka_ack = vc_histogram("voucher_gateway_kafka_ack_seconds",
                             "Events, from being produced to their delivery report (acks=all) "
                             "on librdkafka's thread.",
                             NULL);
    kafka_report = vc_histogram("voucher_gateway_kafka_report_seconds",
                                "Events, from being produced to their delivery report's "
                                "callback on the worker loop that produced them.",
                                NULL);
    connections = vc_gauge("voucher_gateway_connections", "Open client connections.", NULL);
    (void)request_series(GW_ROUTE_RESERVE, status_slot(201));
    (void)duration_series(GW_ROUTE_RESERVE);
    (void)direct_series(GW_ROUTE_RESERVE, GW_DIRECT_RESERVED);
    (void)direct_pg_series(GW_ROUTE_RESERVE);
}

void gw_metrics_request(gw_route_kind_t route, int status, int64_t duration_us)
{
    if ((unsigned)route >= GW_ROUTE_COUNT)
        route = GW_ROUTE_NOT_FOUND;
    vc_metric_add(request_series(route, status_slot(status)), 1);
    vc_metric_observe_us(duration_series(route), duration_us);
}

void gw_metrics_redis_error(int rc)
{
    if (!redis_error || rc == VC_ERR_SHUTDOWN)
        return;
    vc_metric_add(rc == VC_ERR_TIMEOUT  ? redis_timeout
                  : rc == VC_ERR_FENCED ? redis_fenced
                                        : redis_error,
                  1);
}

void gw_metrics_kafka_error(int unknown)
{
    if (kafka_failed)
        vc_metric_add(unknown ? kafka_unknown : kafka_failed, 1);
}

void gw_metrics_redis_roundtrip(int64_t duration_us)
{
    if (redis_roundtrip)
        vc_metric_observe_us(redis_roundtrip, duration_us);
}

void gw_metrics_kafka_ack(int64_t duration_us)
{
    if (kafka_ack)
        vc_metric_observe_us(kafka_ack, duration_us);
}

void gw_metrics_kafka_report(int64_t duration_us)
{
    if (kafka_report)
        vc_metric_observe_us(kafka_report, duration_us);
}

void gw_metrics_soldout(void)
{
    if (soldout)
        vc_metric_add(soldout, 1);
}

void gw_metrics_direct(gw_route_kind_t route, gw_direct_answer_t answer, int64_t pg_us)
{
    if ((unsigned)route >= GW_ROUTE_COUNT)
        route = GW_ROUTE_NOT_FOUND;
    if ((unsigned)answer >= GW_DIRECT_ANSWERS)
        answer = GW_DIRECT_FAILED;
    vc_metric_add(direct_series(route, answer), 1);
    if (pg_us > 0)
        vc_metric_observe_us(direct_pg_series(route), pg_us);
}

vc_metric_t *gw_metrics_connections_gauge(void)
{
    return connections;
}
