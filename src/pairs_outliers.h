/*
 * pairs_outliers.h - how pairs.c judges its pairs, header-only: the results
 * of a pair (NRES values, R_*), the outlier rules and their thresholds, and
 * which pairs the second pass measures again (retest_selection).
 */
#ifndef HPCNET_PAIRS_OUTLIERS_H
#define HPCNET_PAIRS_OUTLIERS_H

#include "hpcnet_kernel_sampling.h"

#define NRES 11 /* results per pair, in the order of the row columns */
enum { R_FIRST, R_LMEAN, R_LSD, R_LMIN, R_LMAX, R_BMEAN, R_BMED, R_BSD, R_BMIN, R_BMAX, R_ROUND };

/* scipy.stats.median_abs_deviation(scale='normal'): 1 / Phi^-1(3/4), which
 * makes the MAD of normal samples estimate their standard deviation. */
#define MAD_NORMAL_SCALE 1.482602218505602
/* NVIDIA ClusterKit's rule: a pair is bad when its latency exceeds 2.1 x the
 * least pair latency or its bandwidth falls below 93 % of the greatest. */
#define CLUSTERKIT_LATENCY_OVER_MIN 2.1
#define CLUSTERKIT_BANDWIDTH_OF_MAX 0.93

enum outlier_rule { RULE_NONE, RULE_MAD, RULE_CLUSTERKIT };
static const char *const RULE_NAMES[] = {"none", "mad", "clusterkit"};
/* The second pass measures its pairs this many times; a pair is an outlier
 * in it when it is one even at its better measurement. */
#define RETESTS 2
/* Why a pair is in the second pass (the row's 'retest' column). */
enum { RETEST_NO, RETEST_OUTLIER, RETEST_CONTROL };

/* Index of pair (lo, hi), lo < hi, among the n(n-1)/2 pairs in (a, b) order. */
static inline long pair_index(int lo, int hi, int n)
{
    return (long)lo * (2L * n - lo - 1) / 2 + (hi - lo - 1);
}

typedef struct {
    enum outlier_rule rule;
    double mad_k, floor; /* mad only */
    double bw_of_best;   /* clusterkit only */
} outlier_options;

/* An outlier pair has a mean latency above lat_us or a median bandwidth
 * below bw_MBps: a stall of the host or the fabric slows a few samples of a
 * healthy pair, and the median holds against them where the mean does not. */
typedef struct {
    double lat_us, bw_MBps;
    long reference_pairs; /* mad: the reference pairs its median is of; 0: every measured pair */
} thresholds;

/* Median of v[0..n) and its median absolute deviation scaled to a standard
 * deviation; overwrites v. */
static inline void median_mad(double *v, long n, double *median, double *mad)
{
    *median = hk_median(v, n);
    for (long k = 0; k < n; k++)
        v[k] = fabs(v[k] - *median);
    *mad = MAD_NORMAL_SCALE * hk_median(v, n);
}

/* Reference pairs fewer than this leave the mad rule's median to all
 * measured pairs: a median and MAD of two pairs say little. */
#define MIN_REFERENCE_PAIRS 3

/* The outlier thresholds of the first pass's results (npairs x NRES).
 * mad: one-sided, since a pair faster than the rest is no fault: latency
 * above median + max(k x MAD, floor x median), bandwidth below median minus
 * the same; the floor keeps a uniform matrix (MAD near 0) from calling a
 * wobble an outlier.  The median and MAD are those of the measured
 * 'reference' pairs where at least MIN_REFERENCE_PAIRS were (NULL: every
 * measured pair).  clusterkit: its ratios to the best pair. */
static inline thresholds outlier_thresholds(const double *all, const unsigned char *measured,
                                            const unsigned char *reference, long npairs,
                                            const outlier_options *o, double *scratch)
{
    thresholds t = {0.0, 0.0, 0};
    if (o->rule == RULE_CLUSTERKIT) {
        double least_lat = INFINITY, most_bw = 0.0;
        for (long p = 0; p < npairs; p++) {
            if (!measured[p])
                continue;
            least_lat = fmin(least_lat, all[p * NRES + R_LMEAN]);
            most_bw = fmax(most_bw, all[p * NRES + R_BMED]);
        }
        t.lat_us = CLUSTERKIT_LATENCY_OVER_MIN * least_lat;
        t.bw_MBps = o->bw_of_best * most_bw;
        return t;
    }
    long references = 0;
    for (long p = 0; reference && p < npairs; p++)
        references += measured[p] && reference[p];
    if (references < MIN_REFERENCE_PAIRS) {
        reference = NULL;
        references = 0;
    }
    t.reference_pairs = references;
    double median, mad;
    long m = 0;
    for (long p = 0; p < npairs; p++)
        if (measured[p] && (!reference || reference[p]))
            scratch[m++] = all[p * NRES + R_LMEAN];
    median_mad(scratch, m, &median, &mad);
    t.lat_us = median + fmax(o->mad_k * mad, o->floor * median);
    m = 0;
    for (long p = 0; p < npairs; p++)
        if (measured[p] && (!reference || reference[p]))
            scratch[m++] = all[p * NRES + R_BMED];
    median_mad(scratch, m, &median, &mad);
    t.bw_MBps = median - fmax(o->mad_k * mad, o->floor * median);
    return t;
}

static inline int latency_outlier(const double *r, const thresholds *t)
{
    return r[R_LMEAN] > t->lat_us;
}

static inline int bandwidth_outlier(const double *r, const thresholds *t)
{
    return r[R_BMED] < t->bw_MBps;
}

/* The second pass, as why[pair] (RETEST_*): every outlier pair of 'all'
 * (among the measured pairs), and for each of their endpoints a control pair
 * with the next rank (in rank order, wrapping) that is the endpoint of no
 * outlier pair, if any, and was measured in the first pass.  Returns the
 * number of pairs to retest. */
static inline long retest_selection(const double *all, const unsigned char *measured, const thresholds *t, int n,
                                    unsigned char *why)
{
    unsigned char *suspect = (unsigned char *)calloc((size_t)n, 1);
    if (!suspect)
        hk_fatal("out of memory (%d ranks)", n);
    long count = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const long p = pair_index(a, b, n);
            why[p] = RETEST_NO;
            if (measured[p] && (latency_outlier(all + p * NRES, t) || bandwidth_outlier(all + p * NRES, t))) {
                why[p] = RETEST_OUTLIER;
                suspect[a] = suspect[b] = 1;
                count++;
            }
        }
    for (int e = 0; e < n; e++) {
        if (!suspect[e])
            continue;
        for (int step = 1; step < n; step++) {
            const int c = (e + step) % n;
            const long p = e < c ? pair_index(e, c, n) : pair_index(c, e, n);
            if (suspect[c] || !measured[p])
                continue;
            if (why[p] == RETEST_NO) {
                why[p] = RETEST_CONTROL;
                count++;
            }
            break;
        }
    }
    free(suspect);
    return count;
}

static inline enum outlier_rule parse_rule(const char *v)
{
    for (int r = RULE_NONE; r <= RULE_CLUSTERKIT; r++)
        if (strcmp(v, RULE_NAMES[r]) == 0)
            return (enum outlier_rule)r;
    hk_usage_error("--outlier-rule: '%s' is not one of none, mad, clusterkit", v);
}

#endif /* HPCNET_PAIRS_OUTLIERS_H */
