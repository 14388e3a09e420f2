/*
 * hpcnet_common.h - what every hpcnet kernel shares, with MPI (hpcnet_kernel.h)
 * or without (sockets): parsing of counts and message sizes, and the
 * statistics of a set of samples.  One definition of each, so that a size
 * means the same and a median is computed the same way in every kernel.
 *
 * The including program reports bad usage its own way (rank 0 only, or a
 * plain process): it defines HC_USAGE_ERROR as the name of a printf-like
 * function that does not return, declared before this header is included.
 */
#ifndef HPCNET_COMMON_H
#define HPCNET_COMMON_H

#ifndef HC_USAGE_ERROR
#error "define HC_USAGE_ERROR (the includer's usage-error function) before including hpcnet_common.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HC_MAX_SIZE ((uint64_t)1 << 30) /* 1 GiB: the largest message any kernel takes */

/* The compiler that built the kernel, as its predefined macros say: the
 * header's "compiler:" line, so that a run shows which compiler the MPI
 * wrapper really called (the environment's, or the one the wrapper was built
 * with).  NVHPC and clang define __GNUC__ too, so they are tested first. */
#define HC_STR_(x) #x
#define HC_STR(x) HC_STR_(x)
#if defined(__NVCOMPILER)
#define HC_COMPILER "nvhpc " HC_STR(__NVCOMPILER_MAJOR__) "." HC_STR(__NVCOMPILER_MINOR__) "." HC_STR(__NVCOMPILER_PATCHLEVEL__)
#elif defined(__clang__)
#define HC_COMPILER "clang " HC_STR(__clang_major__) "." HC_STR(__clang_minor__) "." HC_STR(__clang_patchlevel__)
#elif defined(__GNUC__)
#define HC_COMPILER "gcc " HC_STR(__GNUC__) "." HC_STR(__GNUC_MINOR__) "." HC_STR(__GNUC_PATCHLEVEL__)
#else
#define HC_COMPILER "unknown 0"
#endif

/* ------------------------------------------------------------------------ */
/* parsing                                                                   */

/* Non-negative integer in [lo, hi]; decimal digits only. */
static inline long hc_parse_long(const char *opt, const char *s, long lo, long hi)
{
    if (*s == '\0')
        HC_USAGE_ERROR("%s: empty value", opt);
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            HC_USAGE_ERROR("%s: '%s' is not a non-negative integer", opt, s);
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        HC_USAGE_ERROR("%s: %s is out of range [%ld, %ld]", opt, s, lo, hi);
    return v;
}

/* Message size in bytes, in [lo, hi] (hi at most HC_MAX_SIZE): decimal
 * digits with an optional binary suffix K, M or G (1024, 1024^2, 1024^3; any
 * case), optionally followed by "iB" or "B" ("4M", "64KiB", "1GB"). */
static inline uint64_t hc_parse_size(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
    static const char form[] = "%s: '%s' is not a size (bytes, optional K/M/G suffix)";
    const char *p = s;
    uint64_t v = 0, mult = 1;
    if (!isdigit((unsigned char)*p))
        HC_USAGE_ERROR(form, opt, s);
    for (; isdigit((unsigned char)*p); p++) {
        v = v * 10u + (uint64_t)(*p - '0');
        if (v > HC_MAX_SIZE)
            HC_USAGE_ERROR("%s: %s is larger than 1 GiB", opt, s);
    }
    if (*p) {
        switch (toupper((unsigned char)*p)) {
        case 'K': mult = (uint64_t)1 << 10; break;
        case 'M': mult = (uint64_t)1 << 20; break;
        case 'G': mult = (uint64_t)1 << 30; break;
        default: HC_USAGE_ERROR(form, opt, s);
        }
        p++;
        if (*p && strcmp(p, "iB") != 0 && strcmp(p, "ib") != 0 && strcmp(p, "B") != 0 &&
            strcmp(p, "b") != 0)
            HC_USAGE_ERROR(form, opt, s);
    }
    v *= mult;
    if (v > HC_MAX_SIZE)
        HC_USAGE_ERROR("%s: %s is larger than 1 GiB", opt, s);
    if (v < lo || v > hi)
        HC_USAGE_ERROR("%s: %s is out of range [%" PRIu64 ", %" PRIu64 "]", opt, s, lo, hi);
    return v;
}

/* ------------------------------------------------------------------------ */
/* statistics                                                                */

typedef struct {
    long n;
    double min, median, mean, max, stddev, p99;
} hc_stats;

static inline int hc_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of sorted s[0..n), n >= 1: the mean of the two middle samples for
 * even n. */
static inline double hc_median_sorted(const double *s, long n)
{
    return (n % 2) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Sorts s[0..n) in place.  median: mean of the two middle samples for even
 * n; stddev: sample standard deviation (n-1), 0 for n == 1; p99:
 * nearest-rank percentile, the ceil(0.99*n)-th smallest sample. */
static inline hc_stats hc_compute_stats(double *s, long n)
{
    hc_stats st = {0, 0, 0, 0, 0, 0, 0};
    if (n <= 0)
        return st;
    qsort(s, (size_t)n, sizeof *s, hc_cmp_double);
    st.n = n;
    st.min = s[0];
    st.max = s[n - 1];
    st.median = hc_median_sorted(s, n);
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += s[k];
    st.mean = sum / (double)n;
    /* rounding of the sum must not put the mean outside [min, max]: samples
     * are often identical multiples of 0.5 ns, right at a %.4f boundary */
    st.mean = st.mean < st.min ? st.min : (st.mean > st.max ? st.max : st.mean);
    double ss = 0.0;
    for (long k = 0; k < n; k++)
        ss += (s[k] - st.mean) * (s[k] - st.mean);
    st.stddev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
    long rank = (99 * n + 99) / 100; /* ceil(0.99 n), 1-based */
    st.p99 = s[rank - 1];
    return st;
}

#endif /* HPCNET_COMMON_H */
