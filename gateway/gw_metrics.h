/*
 * The gateway's Prometheus metrics (vc_metrics.h), created once and updated
 * with relaxed atomics from any worker:
 *
 *   voucher_gateway_requests_total{route,status}          answers given
 *   voucher_gateway_request_duration_seconds{route}       time to answer
 *   voucher_gateway_redis_roundtrip_seconds                a Redis command, queued to reply
 *   voucher_gateway_kafka_ack_seconds                      an event, produced to its delivery
 *                                                          report on librdkafka's thread
 *   voucher_gateway_kafka_report_seconds                   an event, produced to its callback
 *                                                          on the worker loop that produced it
 *   voucher_gateway_redis_errors_total{kind=error|timeout} failed Redis commands
 *   voucher_gateway_kafka_errors_total{kind=failed|unknown} failed deliveries
 *   voucher_gateway_soldout_total                          OUT_OF_STOCK answered from memory
 *   voucher_gateway_direct_total{route,answer}             requests of a direct voucher decided
 *                                                          by PostgreSQL, by the function's answer
 *   voucher_gateway_direct_pg_seconds{route}               a direct-mode call of PostgreSQL, on
 *                                                          the threadpool (its queue not counted)
 *   voucher_gateway_connections                            open client connections
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdint.h>

#include "gw_direct.h"
#include "gw_router.h"
#include "vc_metrics.h"

/* Creates every series that exists from the start, so /metrics lists them at once. */
void gw_metrics_init(void);

/* Counts one answer of route with status that took duration_us. */
void gw_metrics_request(gw_route_kind_t route, int status, int64_t duration_us);

/* Counts a failed Redis command: rc is its VC_ERR_* (VC_ERR_TIMEOUT is kind="timeout"). */
void gw_metrics_redis_error(int rc);

/* Counts a failed delivery: unknown set when the event may have been persisted. */
void gw_metrics_kafka_error(int unknown);

/*
 * The stages of a reservation, for finding where its time goes (issue 17's
 * latency goal, tests/bench/README.md): a Redis command's round trip as its
 * caller sees it (from being queued, so the wait for the loop turn's write is
 * in it), the wait for Kafka's acknowledgement (acks=all) as librdkafka
 * reports it, and the same report as the worker loop receives it: the
 * difference between the last two is the hand-off from librdkafka's thread.
 * Durations in µs; callable from any thread.
 */
void gw_metrics_redis_roundtrip(int64_t duration_us);
void gw_metrics_kafka_ack(int64_t duration_us);
void gw_metrics_kafka_report(int64_t duration_us);

/* Counts an OUT_OF_STOCK answered from the sold-out mark. */
void gw_metrics_soldout(void);

/*
 * Counts a request of a direct voucher that PostgreSQL decided: route, the
 * function's answer (GW_DIRECT_FAILED: the call failed), and the call's time
 * in µs (0: no call was made). Any thread.
 */
void gw_metrics_direct(gw_route_kind_t route, gw_direct_answer_t answer, int64_t pg_us);

/*
 * The gauge of open client connections (NULL before gw_metrics_init()), for
 * the HTTP server to keep current: the admin endpoint (common/vc_admin.c)
 * renders the registry as it is.
 */
vc_metric_t *gw_metrics_connections_gauge(void);

#endif
