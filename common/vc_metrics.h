/*
 * Prometheus metrics: counters, gauges and histograms in one process-wide
 * registry, rendered in the text exposition format for /metrics.
 *
 * Creating a metric takes a lock; updating one is a relaxed atomic operation,
 * so hot paths create their metrics once and keep the pointers.
 */
#ifndef VC_METRICS_H
#define VC_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct vc_metric vc_metric_t;

/*
 * Returns the series of family name with these labels (the label text as it
 * goes between the braces, e.g. "route=\"reserve\",status=\"201\"", or NULL),
 * creating it on first use. help is the family's description; the first
 * caller's help and kind win. Never returns NULL (aborts when out of memory:
 * metrics are created at start-up or on a request's first occurrence).
 */
vc_metric_t *vc_counter(const char *name, const char *help, const char *labels);
vc_metric_t *vc_gauge(const char *name, const char *help, const char *labels);
/* Latency histogram in seconds, with buckets from 100 µs to 10 s. */
vc_metric_t *vc_histogram(const char *name, const char *help, const char *labels);

void vc_metric_add(vc_metric_t *m, int64_t delta); /* counter or gauge */
void vc_metric_set(vc_metric_t *m, int64_t value); /* gauge */
void vc_metric_observe_us(vc_metric_t *m, int64_t micros); /* histogram */

/*
 * Renders every series. Returns a malloc'd NUL-terminated string the caller
 * frees, with *len set, or NULL when out of memory.
 */
char *vc_metrics_render(size_t *len);

#endif
