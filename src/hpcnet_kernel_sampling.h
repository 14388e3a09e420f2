/*
 * hpcnet_kernel_sampling.h - how the MPI kernels sample a size, header-only:
 * the adaptive number of iterations (batches, the median's precision) and
 * the statistics of the samples.
 */
#ifndef HPCNET_KERNEL_SAMPLING_H
#define HPCNET_KERNEL_SAMPLING_H

#include "hpcnet_kernel_options.h"

/* ------------------------------------------------------------------------ */
/* iterations                                                                */

/* Samples of one size, taken in chunks (collective over MPI_COMM_WORLD):
 *
 *     hk_sampling sm;
 *     hk_sampling_start(&sm, &opt, per_iter_seconds, batch_us);
 *     while (sm.next > 0) {
 *         take sm.next samples of sm.batch iterations each into samples + sm.n;
 *         hk_sampling_more(&sm, &opt, samples, has_samples);
 *     }
 *     sm.n samples, sorted; sm.ci_pct their median's precision
 *
 * 'per_iter_seconds' is this rank's estimate of one iteration's wall time,
 * from the median of the warm-up (0 on ranks that measure nothing).
 * Batching ('batch_us' > 0, the point-to-point kernel's --batch-us): a
 * sample times sm.batch iterations, enough to last batch_us, because reading
 * the clock costs tens of ns, a tenth of a shared-memory round trip.  Adaptive (no
 * --iters): --min-iters samples, then twice as many each chunk until the 95 %
 * confidence interval of the median is within +-(--precision) % on every
 * rank that has samples (from HK_PRECISE_MIN_SAMPLES on), or
 * --time-per-size has passed, or --max-iters.  The
 * interval is distribution-free (order statistics), so a noisy size takes
 * longer and a steady one stops early.  Rank 0 decides, everyone agrees. */
typedef struct {
    long batch;    /* iterations per sample */
    long n;        /* samples taken */
    long next;     /* samples of the next chunk; 0: done */
    double start;  /* MPI_Wtime (rank 0) when the timed samples began */
    double ci_pct; /* rank 0: largest half-width of the median's 95 % CI, % of the median */
} hk_sampling;

#define HK_MAX_BATCH 4096L
/* The precision rule ends a size only from this many samples on: a median
 * that is precise over a few ms is not yet repeatable from run to run (host
 * noise comes in phases of ms; docs/measurements.md, "How long a size is
 * measured").  Large sizes, whose 200 samples exceed the budget, fill it;
 * small ones still stop in ms. */
#define HK_PRECISE_MIN_SAMPLES 200L

static inline void hk_sampling_start(hk_sampling *sm, const hk_common *c, double per_iter_seconds, double batch_us)
{
    double slowest = 0.0;
    long plan[2] = {1, c->iters};
    MPI_Reduce(&per_iter_seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (hk_rank == 0) {
        if (batch_us > 0.0 && slowest > 0.0) {
            double b = ceil(batch_us * 1e-6 / slowest);
            plan[0] = b > (double)HK_MAX_BATCH ? HK_MAX_BATCH : (long)b;
        }
        if (c->iters == 0) {
            /* adaptive: the first chunk is --min-iters, or (no --precision)
             * the estimate filling --time-per-size */
            double per_sample = slowest * (double)plan[0];
            double est = per_sample > 0.0 ? ceil(c->time_per_size * 1e-3 / per_sample) : (double)c->max_iters;
            if (c->precision > 0.0 && est > (double)c->min_iters)
                est = (double)c->min_iters;
            est = est < (double)c->min_iters ? (double)c->min_iters : est;
            plan[1] = est > (double)c->max_iters ? c->max_iters : (long)est;
        }
    }
    MPI_Bcast(plan, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    sm->batch = plan[0];
    sm->next = plan[1];
    sm->n = 0;
    sm->ci_pct = 0.0;
    sm->start = MPI_Wtime();
}

/* Half-width of the distribution-free 95 % confidence interval of the
 * median of the sorted s[0..n), in % of the median (order statistics
 * n/2 -+ 0.98 sqrt(n)). */
static inline double hk_median_ci_pct(const double *s, long n)
{
    if (n < 2)
        return 100.0;
    double half = 0.98 * sqrt((double)n);
    long lo = (long)floor(0.5 * (double)n - half) - 1;
    long hi = (long)ceil(0.5 * (double)n + half);
    lo = lo < 0 ? 0 : lo;
    hi = hi > n - 1 ? n - 1 : hi;
    double median = hc_median_sorted(s, n);
    if (!(median > 0.0))
        return 0.0;
    return 100.0 * 0.5 * (s[hi] - s[lo]) / median;
}

/* After a chunk: counts it, sorts this rank's samples and decides the next
 * chunk (sm->next, 0: done).  Collective. */
static inline void hk_sampling_more(hk_sampling *sm, const hk_common *c, double *samples, int has_samples)
{
    sm->n += sm->next;
    double mine = 0.0, widest = 0.0;
    if (has_samples) {
        qsort(samples, (size_t)sm->n, sizeof *samples, hc_cmp_double);
        mine = hk_median_ci_pct(samples, sm->n);
    }
    MPI_Reduce(&mine, &widest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long next = 0;
    if (hk_rank == 0) {
        sm->ci_pct = widest;
        double elapsed = MPI_Wtime() - sm->start;
        double budget = c->time_per_size * 1e-3;
        int precise = c->precision > 0.0 && widest <= c->precision && sm->n >= HK_PRECISE_MIN_SAMPLES;
        if (c->iters == 0 && sm->n < c->max_iters && !(sm->n >= c->min_iters && (precise || elapsed >= budget))) {
            next = sm->n < c->min_iters ? c->min_iters - sm->n : sm->n;
            /* the rest of the time budget at the rate seen so far */
            double rate = elapsed / (double)sm->n;
            double fit = rate > 0.0 ? ceil((budget - elapsed) / rate) : (double)next;
            if (sm->n >= c->min_iters && fit < (double)next)
                next = fit < 1.0 ? 1 : (long)fit;
            if (next > c->max_iters - sm->n)
                next = c->max_iters - sm->n;
        }
    }
    MPI_Bcast(&next, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    sm->next = next;
}

/* Median of s[0..n) (sorts s); 0 for n <= 0. */
static inline double hk_median(double *s, long n);

/* Warm-up iterations actually run: adaptive mode needs at least one
 * iteration to estimate the time per iteration. */
static inline long hk_warmup_count(const hk_common *c)
{
    return (c->iters == 0 && c->warmup == 0) ? 1 : c->warmup;
}

/* The per-size sample array: room for the fixed --iters or --max-iters
 * samples, and for the warm-up's. */
static inline double *hk_alloc_samples(const hk_common *c)
{
    long nsamples = c->iters > 0 ? c->iters : c->max_iters;
    if (hk_warmup_count(c) > nsamples)
        nsamples = hk_warmup_count(c);
    double *samples = (double *)calloc((size_t)nsamples, sizeof *samples);
    if (!samples)
        hk_fatal("out of memory");
    return samples;
}

/* ------------------------------------------------------------------------ */
/* statistics                                                                */

static inline double hk_median(double *s, long n)
{
    return n > 0 ? hc_compute_stats(s, n).median : 0.0;
}

/* bytes per microsecond == 10^6 bytes per second == MB/s */
static inline double hk_mbps(double bytes, double usec)
{
    return usec > 0.0 ? bytes / usec : 0.0;
}


#endif /* HPCNET_KERNEL_SAMPLING_H */
