/*
 * A log-linear latency histogram in the manner of HdrHistogram: values below
 * 256 get one bucket each; above that, every power of two is split into 128
 * equal buckets, so a reported value is within 1/128 (0.8%) of the truth
 * across the whole range of a uint64_t. Recording is O(1) and the histogram is
 * a fixed-size struct with no allocation, so it can live on the stack or in
 * another struct and two of them merge by adding counts.
 *
 * The unit is the caller's; vc-load records microseconds.
 */
#ifndef VC_HIST_H
#define VC_HIST_H

#include <stddef.h>
#include <stdint.h>

#define VC_HIST_LINEAR 256 /* values 0..255 are exact */
#define VC_HIST_SUB 128    /* buckets per power of two above that */
/* 256 exact buckets, then one group of 128 for each of the powers 2^8..2^63. */
#define VC_HIST_BUCKETS (VC_HIST_LINEAR + (64 - 8) * VC_HIST_SUB)

typedef struct {
    uint64_t counts[VC_HIST_BUCKETS];
    uint64_t total;
    uint64_t min, max; /* exact; min is UINT64_MAX while empty */
    long double sum;   /* for the mean; long double so large counts do not lose it */
} vc_hist_t;

/* Empties h. */
void vc_hist_reset(vc_hist_t *h);

/* Records one value. */
void vc_hist_record(vc_hist_t *h, uint64_t value);

/* Records n occurrences of value. */
void vc_hist_record_n(vc_hist_t *h, uint64_t value, uint64_t n);

/* Adds every count of src into dst. */
void vc_hist_merge(vc_hist_t *dst, const vc_hist_t *src);

/*
 * The value at percentile p (0 < p <= 100): the smallest recorded value v such
 * that at least p% of the values are <= v, rounded up to the top of its bucket
 * and then clamped to [min, max], so p100 is the exact maximum. Returns 0 for
 * an empty histogram; p <= 0 gives the exact minimum.
 */
uint64_t vc_hist_percentile(const vc_hist_t *h, double p);

/* The mean of the recorded values, or 0 when empty. */
double vc_hist_mean(const vc_hist_t *h);

/* The bucket a value falls in, and the lowest and highest value of a bucket. */
size_t vc_hist_bucket_of(uint64_t value);
uint64_t vc_hist_bucket_low(size_t bucket);
uint64_t vc_hist_bucket_high(size_t bucket);

#endif
