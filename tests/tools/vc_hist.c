#include "vc_hist.h"

#include <string.h>

void vc_hist_reset(vc_hist_t *h)
{
    memset(h->counts, 0, sizeof(h->counts));
    h->total = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = 0;
}

size_t vc_hist_bucket_of(uint64_t value)
{
    int msb, shift;

    if (value < VC_HIST_LINEAR)
        return (size_t)value;
    /* value is in [2^msb, 2^(msb+1)) with msb >= 8; keep its top 8 bits. */
    msb = 63 - __builtin_clzll(value);
    shift = msb - 7;
    return VC_HIST_LINEAR + (size_t)(shift - 1) * VC_HIST_SUB +
           (size_t)((value >> shift) - VC_HIST_SUB);
}

uint64_t vc_hist_bucket_low(size_t bucket)
{
    size_t group, sub;

    if (bucket < VC_HIST_LINEAR)
        return bucket;
    group = (bucket - VC_HIST_LINEAR) / VC_HIST_SUB + 1; /* the shift */
    sub = (bucket - VC_HIST_LINEAR) % VC_HIST_SUB + VC_HIST_SUB;
    return (uint64_t)sub << group;
}

uint64_t vc_hist_bucket_high(size_t bucket)
{
    if (bucket < VC_HIST_LINEAR)
        return bucket;
    if (bucket + 1 == VC_HIST_BUCKETS)
        return UINT64_MAX;
    return vc_hist_bucket_low(bucket + 1) - 1;
}

void vc_hist_record_n(vc_hist_t *h, uint64_t value, uint64_t n)
{
    if (n == 0)
        return;
    h->counts[vc_hist_bucket_of(value)] += n;
    h->total += n;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
    h->sum += (long double)value * (long double)n;
}

void vc_hist_record(vc_hist_t *h, uint64_t value)
{
    vc_hist_record_n(h, value, 1);
}

void vc_hist_merge(vc_hist_t *dst, const vc_hist_t *src)
{
    for (size_t i = 0; i < VC_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->sum += src->sum;
}

uint64_t vc_hist_percentile(const vc_hist_t *h, double p)
{
    uint64_t rank, seen = 0, v;
    long double want;

    if (h->total == 0)
        return 0;
    if (p <= 0)
        return h->min;
    if (p >= 100)
        return h->max;
    /* The rank of the value, 1-based: ceil(p% of total), at least 1. */
    want = (long double)p / 100.0L * (long double)h->total;
    rank = (uint64_t)want;
    if ((long double)rank < want)
        rank++;
    if (rank == 0)
        rank = 1;
    for (size_t i = 0; i < VC_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            v = vc_hist_bucket_high(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max; /* not reached: the counts add up to total */
}

double vc_hist_mean(const vc_hist_t *h)
{
    return h->total ? (double)(h->sum / (long double)h->total) : 0.0;
}
