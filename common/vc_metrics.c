#include "vc_metrics.h"
#include "vc_error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM } metric_kind_t;

/* Upper bounds of the histogram buckets, in microseconds; +Inf is implicit. */
static const int64_t bucket_us[] = {100,    250,    500,     1000,    2500,    5000,   10000,
                                    25000,  50000,  100000,  250000,  500000,  1000000,
                                    2500000, 5000000, 10000000};
#define NBUCKETS (sizeof(bucket_us) / sizeof(bucket_us[0]))

struct vc_metric {
    struct vc_metric *next;
    char *name;
    char *help;
    char *labels; /* NULL or "k=\"v\",..." */
    metric_kind_t kind;
    _Atomic int64_t value; /* counter, gauge; histogram: count */
    _Atomic int64_t sum_us;
    _Atomic int64_t buckets[NBUCKETS];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vc_metric_t *registry;

static char *dup_or_null(const char *s)
{
    char *d;
    if (!s)
        return NULL;
    d = strdup(s);
    VC_ASSERT(d != NULL);
    return d;
}

static int same_labels(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static vc_metric_t *lookup_or_create(metric_kind_t kind, const char *name, const char *help,
                                     const char *labels)
{
    vc_metric_t *m, *last = NULL;

    if (labels && !*labels)
        labels = NULL;
    pthread_mutex_lock(&registry_lock);
    for (m = registry; m; m = m->next) {
        if (strcmp(m->name, name) == 0 && same_labels(m->labels, labels))
            goto out;
        last = m;
    }
    m = calloc(1, sizeof(*m));
    VC_ASSERT(m != NULL);
    m->name = dup_or_null(name);
    m->help = dup_or_null(help);
    m->labels = dup_or_null(labels);
    m->kind = kind;
    /* Append, so a family's series stay in creation order. */
    if (last)
        last->next = m;
    else
        registry = m;
out:
    pthread_mutex_unlock(&registry_lock);
    return m;
}

vc_metric_t *vc_counter(const char *name, const char *help, const char *labels)
{
    return lookup_or_create(KIND_COUNTER, name, help, labels);
}

vc_metric_t *vc_gauge(const char *name, const char *help, const char *labels)
{
    return lookup_or_create(KIND_GAUGE, name, help, labels);
}

vc_metric_t *vc_histogram(const char *name, const char *help, const char *labels)
{
    return lookup_or_create(KIND_HISTOGRAM, name, help, labels);
}

void vc_metric_add(vc_metric_t *m, int64_t delta)
{
    atomic_fetch_add_explicit(&m->value, delta, memory_order_relaxed);
}

void vc_metric_set(vc_metric_t *m, int64_t value)
{
    atomic_store_explicit(&m->value, value, memory_order_relaxed);
}

void vc_metric_observe_us(vc_metric_t *m, int64_t micros)
{
    size_t i;
    if (micros < 0)
        micros = 0;
    for (i = 0; i < NBUCKETS && micros > bucket_us[i]; i++)
        ;
    if (i < NBUCKETS)
        atomic_fetch_add_explicit(&m->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_us, micros, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->value, 1, memory_order_relaxed);
}

/* A growing output buffer; errors are sticky. */
typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} out_t;

__attribute__((format(printf, 2, 3))) static void outf(out_t *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->failed = 1;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *nb = realloc(o->buf, cap);
        if (!nb) {
            o->failed = 1;
            return;
        }
        o->buf = nb;
        o->cap = cap;
    }
}

static const char *kind_name(metric_kind_t k)
{
    return k == KIND_COUNTER ? "counter" : k == KIND_GAUGE ? "gauge" : "histogram";
}

static void render_histogram(out_t *o, const vc_metric_t *m)
{
    const char *l = m->labels ? m->labels : "";
    const char *sep = m->labels ? "," : "";
    int64_t cumulative = 0, count = atomic_load_explicit(&m->value, memory_order_relaxed);

    for (size_t i = 0; i < NBUCKETS; i++) {
        cumulative += atomic_load_explicit(&m->buckets[i], memory_order_relaxed);
        outf(o, "%s_bucket{%s%sle=\"%g\"} %lld\n", m->name, l, sep, (double)bucket_us[i] / 1e6,
             (long long)cumulative);
    }
    /* Updates race with the scrape: keep +Inf ≥ every bucket, as Prometheus expects. */
    if (count < cumulative)
        count = cumulative;
    outf(o, "%s_bucket{%s%sle=\"+Inf\"} %lld\n", m->name, l, sep, (long long)count);
    outf(o, "%s_sum%s%s%s %.6f\n", m->name, m->labels ? "{" : "", l, m->labels ? "}" : "",
         (double)atomic_load_explicit(&m->sum_us, memory_order_relaxed) / 1e6);
    outf(o, "%s_count%s%s%s %lld\n", m->name, m->labels ? "{" : "", l, m->labels ? "}" : "",
         (long long)count);
}

char *vc_metrics_render(size_t *len)
{
    out_t o = {malloc(4096), 0, 4096, 0};
    const vc_metric_t *m, *f;

    if (!o.buf)
        return NULL;
    o.buf[0] = '\0';
    pthread_mutex_lock(&registry_lock);
    for (m = registry; m; m = m->next) {
        /* Each family once, at its first series, with all its series after it. */
        for (f = registry; f != m && strcmp(f->name, m->name) != 0; f = f->next)
            ;
        if (f != m)
            continue;
        outf(&o, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help ? m->help : "", m->name,
             kind_name(m->kind));
        for (f = m; f; f = f->next) {
            if (strcmp(f->name, m->name) != 0)
                continue;
            if (f->kind == KIND_HISTOGRAM)
                render_histogram(&o, f);
            else
                outf(&o, "%s%s%s%s %lld\n", f->name, f->labels ? "{" : "",
                     f->labels ? f->labels : "", f->labels ? "}" : "",
                     (long long)atomic_load_explicit(&f->value, memory_order_relaxed));
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    *len = o.len;
    return o.buf;
}
