/*
 * hpcnet_kernel.h - shared, header-only helpers of the hpcnet MPI kernels
 * (p2p.c, collectives.c, pairs.c): option parsing, size lists, timing,
 * statistics, payload patterns and the "hpcnet kernel output format 1".
 *
 * The output format is documented in src/README.md and parsed by
 * hpcnet/parsers/kernel.py.  Keep the three in sync.
 *
 * Include this header FIRST in every kernel (it sets _POSIX_C_SOURCE for
 * posix_memalign/sysconf under -std=c11).
 *
 * Conventions:
 *   - only rank 0 writes to stdout; stdout is line buffered, so every line
 *     reaches the launcher in one write() and is not split by MPI noise;
 *   - errors: "error: <message>" on stderr;
 *     exit code 2 = bad usage (bad option, wrong number of ranks),
 *     exit code 1 = run-time failure (validation, allocation, MPI error).
 */
#ifndef HPCNET_KERNEL_H
#define HPCNET_KERNEL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <mpi.h>

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void hk_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define HC_USAGE_ERROR hk_usage_error
#include "hpcnet_common.h"

#define HK_FORMAT_VERSION 1
#define HK_EXIT_USAGE 2
#define HK_EXIT_FAILURE 1
#define HK_MAX_ITERS 10000000L        /* bounds the per-size sample array (80 MB) */
#define HK_POISON 0xEEu               /* receive buffers are filled with this byte */

/* ------------------------------------------------------------------------ */
/* process-wide state                                                        */

static int hk_rank = 0;   /* rank in MPI_COMM_WORLD */
static int hk_nranks = 1; /* size of MPI_COMM_WORLD */
static const char *hk_kernel_name = "kernel";
/* seconds MPI_Finalize may take (see hk_finalize) */
#define HK_FINALIZE_TIMEOUT_ENV "HPCNET_FINALIZE_TIMEOUT_S"
static unsigned hk_finalize_timeout_s = 20;

static inline void hk_library_version(char *out, size_t outlen);

/* Call right after MPI_Init. */
/* MPI_Init, the kernel's identity lines, and --help / -h (an argument of
 * its own anywhere on the line): usage() on rank 0, then exit 0. */
static inline void hk_init(int *argc, char ***argv, const char *kernel_name, void (*usage)(void))
{
    MPI_Init(argc, argv);
    hk_kernel_name = kernel_name;
    MPI_Comm_rank(MPI_COMM_WORLD, &hk_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &hk_nranks);
    /* one write() per line: the launcher forwards whole lines */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Identify the kernel and the MPI library it really loaded before
     * anything can fail: a binary run by another MPI's launcher (e.g. as
     * two 1-rank jobs) is then reported as such, not by its symptom. */
    if (hk_rank == 0) {
        char lib[4 * MPI_MAX_LIBRARY_VERSION_STRING];
        hk_library_version(lib, sizeof lib);
        printf("hpcnet-kernel: %s %d\n", hk_kernel_name, HK_FORMAT_VERSION);
        printf("mpi-library: %s\n", lib);
    }
    const char *finalize_timeout = getenv(HK_FINALIZE_TIMEOUT_ENV);
    if (finalize_timeout && *finalize_timeout)
        hk_finalize_timeout_s = (unsigned)hc_parse_long(HK_FINALIZE_TIMEOUT_ENV, finalize_timeout, 1, 3600);
    for (int i = 1; i < *argc; i++)
        if (strcmp((*argv)[i], "--help") == 0 || strcmp((*argv)[i], "-h") == 0) {
            if (hk_rank == 0)
                usage();
            MPI_Finalize();
            exit(0);
        }
}

/* ------------------------------------------------------------------------ */
/* errors                                                                    */

/* Bad usage detected identically by every rank (argument parsing is
 * deterministic): rank 0 reports it, everybody finalizes and exits 2. */
/* "error: <message> (see <kernel> --help)" for bad usage, or
 * "error: <message> (rank N)" for a failure, on stderr, flushed. */
static inline void hk_report(const char *fmt, va_list ap, int usage)
{
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (usage)
        fprintf(stderr, " (see %s --help)\n", hk_kernel_name);
    else
        fprintf(stderr, " (rank %d)\n", hk_rank);
    fflush(stderr);
}

static inline void hk_usage_error(const char *fmt, ...)
{
    if (hk_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        hk_report(fmt, ap, 1);
        va_end(ap);
    }
    MPI_Finalize();
    exit(HK_EXIT_USAGE);
}

/* Failure on one rank that the others may not know about: abort the job. */
static inline void hk_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hk_report(fmt, ap, 0);
    va_end(ap);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, HK_EXIT_FAILURE);
    exit(HK_EXIT_FAILURE); /* not reached */
}

/* Collective error check: every rank passes its own 'failed' flag (the
 * failing rank has already printed its "error: ..." line).  If any rank
 * failed, everyone finalizes and exits 1. */
static inline void hk_check_all(int failed)
{
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        fflush(stdout);
        fflush(stderr);
        MPI_Finalize();
        exit(HK_EXIT_FAILURE);
    }
}

/* ------------------------------------------------------------------------ */
/* memory                                                                    */

/* Page-aligned allocation of at least one page, touched (filled with
 * 'fill') so that page faults do not land in the timed loops. */
static inline void *hk_alloc(size_t bytes, unsigned char fill)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096u;
    size_t n = bytes < align ? align : (bytes + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0 || p == NULL)
        hk_fatal("cannot allocate %zu bytes (reduce --max-size?)", n);
    memset(p, fill, n);
    return p;
}

/* ------------------------------------------------------------------------ */
/* argument parsing                                                          */

/* Matches argv[*i] against "--name value" or "--name=value".  Returns 1 and
 * sets *val (advancing *i past a separate value) on a match, else 0. */
static inline int hk_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        hk_usage_error("option %s needs a value", name);
    *i += 1;
    *val = argv[*i];
    return 1;
}

/* Matches a flag without value ("--validate"). */
static inline int hk_flag(const char *arg, const char *name)
{
    return strcmp(arg, name) == 0;
}

/* Decimal number (e.g. milliseconds) in [0, hi], or (0, hi] unless
 * 'zero_ok'. */
static inline double hk_parse_number(const char *opt, const char *s, double hi, int zero_ok)
{
    const char *what = zero_ok ? "a number >= 0" : "a positive number";
    char *end = NULL;
    if (*s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
        hk_usage_error("%s: '%s' is not %s", opt, s, what);
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end != '\0' || !(zero_ok ? v >= 0.0 : v > 0.0) || !(v <= hi))
        hk_usage_error("%s: '%s' is not %s <= %g", opt, s, what, hi);
    return v;
}

static inline double hk_parse_positive(const char *opt, const char *s, double hi)
{
    return hk_parse_number(opt, s, hi, 0);
}

static inline double hk_parse_nonnegative(const char *opt, const char *s, double hi)
{
    return hk_parse_number(opt, s, hi, 1);
}

/* Message size in bytes, at most 1 GiB (hpcnet_common.h says the form). */
static inline size_t hk_parse_size(const char *opt, const char *s)
{
    return (size_t)hc_parse_size(opt, s, 0, HC_MAX_SIZE);
}

/* ------------------------------------------------------------------------ */
/* options shared by p2p and collectives                                     */

typedef struct {
    long warmup;          /* --warmup N (default 10) */
    long iters;           /* --iters N; 0 = adaptive */
    double time_per_size; /* --time-per-size MS (default 40) */
    long min_iters;       /* --min-iters (default 20) */
    long max_iters;       /* --max-iters (default 10000) */
    size_t min_size;      /* --min-size (default 0) */
    size_t max_size;      /* --max-size (default 4 MiB) */
    int have_range;       /* --min-size or --max-size given */
    const char *sizes;    /* --sizes a,b,c (NULL = range) */
    int validate;         /* --validate */
    double precision;     /* --precision PCT (default 1; 0 = fill --time-per-size) */
} hk_common;

static inline void hk_common_defaults(hk_common *c)
{
    c->warmup = 10;
    c->iters = 0;
    c->time_per_size = 40.0;
    c->min_iters = 20;
    c->max_iters = 10000;
    c->min_size = 0;
    c->max_size = 4u << 20;
    c->have_range = 0;
    c->sizes = NULL;
    c->validate = 0;
    c->precision = 1.0;
}

#define HK_COMMON_USAGE                                                              \
    "  --min-size S         smallest message size (default 0)\n"                      \
    "  --max-size S         largest message size (default 4M)\n"                      \
    "                       sizes run: 0 (if min is 0), every power of two in\n"     \
    "                       [min,max], and min and max themselves\n"               \
    "  --sizes A,B,...      explicit list of sizes instead (sorted, duplicates\n"    \
    "                       removed); sizes are bytes with optional K/M/G suffix\n"  \
    "                       (binary: 1K = 1024), at most 1G\n"                       \
    "  --warmup N           untimed warm-up iterations per size (default 10)\n"     \
    "  --iters N            fixed number of timed samples per size\n"               \
    "                       (default: adaptive, see --precision)\n"                 \
    "  --precision PCT      adaptive: sample until the 95%% confidence interval of\n" \
    "                       the median is within +-PCT %% (default 1), at least\n"   \
    "                       --min-iters samples, at most --time-per-size; 0: fill\n" \
    "                       --time-per-size\n"                                     \
    "  --time-per-size MS   adaptive: at most about MS milliseconds of timed\n"      \
    "                       samples per size (default 40)\n"                       \
    "  --min-iters N        fewest adaptive samples (default 20)\n"                \
    "  --max-iters N        most adaptive samples (default 10000)\n"               \
    "  --validate           check the received payloads (outside the timed loops)\n" \
    "  --help               this text\n"

/* Returns 1 if argv[*i] was a common option (consumed), else 0. */
static inline int hk_common_option(hk_common *c, int argc, char **argv, int *i)
{
    const char *v = NULL;
    if (hk_opt(argc, argv, i, "--warmup", &v))
        c->warmup = hc_parse_long("--warmup", v, 0, 1000000L);
    else if (hk_opt(argc, argv, i, "--iters", &v))
        c->iters = hc_parse_long("--iters", v, 1, HK_MAX_ITERS);
    else if (hk_opt(argc, argv, i, "--time-per-size", &v))
        c->time_per_size = hk_parse_positive("--time-per-size", v, 3600e3);
    else if (hk_opt(argc, argv, i, "--min-iters", &v))
        c->min_iters = hc_parse_long("--min-iters", v, 1, HK_MAX_ITERS);
    else if (hk_opt(argc, argv, i, "--max-iters", &v))
        c->max_iters = hc_parse_long("--max-iters", v, 1, HK_MAX_ITERS);
    else if (hk_opt(argc, argv, i, "--min-size", &v)) {
        c->min_size = hk_parse_size("--min-size", v);
        c->have_range = 1;
    } else if (hk_opt(argc, argv, i, "--max-size", &v)) {
        c->max_size = hk_parse_size("--max-size", v);
        c->have_range = 1;
    } else if (hk_opt(argc, argv, i, "--sizes", &v))
        c->sizes = v;
    else if (hk_opt(argc, argv, i, "--precision", &v))
        c->precision = hk_parse_nonnegative("--precision", v, 100.0);
    else if (hk_flag(argv[*i], "--validate"))
        c->validate = 1;
    else
        return 0;
    return 1;
}

static inline void hk_common_check(const hk_common *c)
{
    if (c->sizes && c->have_range)
        hk_usage_error("--sizes cannot be combined with --min-size/--max-size");
    if (c->min_size > c->max_size)
        hk_usage_error("--min-size (%zu) is larger than --max-size (%zu)", c->min_size, c->max_size);
    if (c->min_iters > c->max_iters)
        hk_usage_error("--min-iters (%ld) is larger than --max-iters (%ld)", c->min_iters, c->max_iters);
}

/* ------------------------------------------------------------------------ */
/* size lists                                                                */

typedef struct {
    size_t *v;
    int n;
} hk_sizes;

static inline int hk_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static inline void hk_sizes_push(hk_sizes *s, int *cap, size_t v)
{
    if (s->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        size_t *nv = (size_t *)realloc(s->v, (size_t)*cap * sizeof *nv);
        if (!nv)
            hk_fatal("out of memory");
        s->v = nv;
    }
    s->v[s->n++] = v;
}

/* Sorted, duplicate-free list of sizes from --sizes or [min,max]. */
static inline hk_sizes hk_make_sizes(const hk_common *c)
{
    hk_sizes s = {NULL, 0};
    int cap = 0;
    if (c->sizes) {
        const char *p = c->sizes;
        char tok[64];
        if (*p == '\0')
            hk_usage_error("--sizes: empty list");
        while (1) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == 0 || len >= sizeof tok)
                hk_usage_error("--sizes: bad element in '%s'", c->sizes);
            memcpy(tok, p, len);
            tok[len] = '\0';
            hk_sizes_push(&s, &cap, hk_parse_size("--sizes", tok));
            if (!e)
                break;
            p = e + 1;
        }
    } else {
        hk_sizes_push(&s, &cap, c->min_size);
        for (size_t p2 = 1; p2 <= c->max_size; p2 *= 2)
            if (p2 > c->min_size)
                hk_sizes_push(&s, &cap, p2);
        hk_sizes_push(&s, &cap, c->max_size);
    }
    qsort(s.v, (size_t)s.n, sizeof *s.v, hk_cmp_size);
    int m = 0;
    for (int k = 0; k < s.n; k++)
        if (m == 0 || s.v[k] != s.v[m - 1])
            s.v[m++] = s.v[k];
    s.n = m;
    return s;
}

static inline size_t hk_sizes_max(const hk_sizes *s)
{
    return s->n ? s->v[s->n - 1] : 0;
}

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

/* ------------------------------------------------------------------------ */
/* payload patterns                                                          */

/* Byte expected at 'off' of a message of 'size' bytes sent under 'tag'
 * (the kernels encode direction / origin / destination in 'tag').  Never
 * equal to HK_POISON, so an unwritten receive byte is always detected. */
static inline unsigned char hk_pattern(size_t size, uint64_t tag, size_t off)
{
    uint64_t x = (uint64_t)off * 0x9E3779B97F4A7C15ull;
    x ^= ((uint64_t)size << 21) ^ (tag * 0xBF58476D1CE4E5B9ull) ^ 0x2545F4914F6CDD1Dull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    unsigned char b = (unsigned char)(x >> 56);
    return b == HK_POISON ? (unsigned char)(b ^ 0x5Au) : b;
}

static inline void hk_fill_pattern(unsigned char *buf, size_t size, uint64_t tag)
{
    for (size_t k = 0; k < size; k++)
        buf[k] = hk_pattern(size, tag, k);
}

/* Returns the first offset that differs from the pattern, or (size_t)-1. */
static inline size_t hk_check_pattern(const unsigned char *buf, size_t size, uint64_t tag)
{
    for (size_t k = 0; k < size; k++)
        if (buf[k] != hk_pattern(size, tag, k))
            return k;
    return (size_t)-1;
}

/* ------------------------------------------------------------------------ */
/* output                                                                    */

/* Host name usable as one whitespace-free token. */
static inline void hk_sanitize_token(char *s)
{
    for (char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            *p = '_';
    if (*s == '\0')
        strcpy(s, "?");
}

/* MPI_Get_library_version on one line: lines joined with " ; ", runs of
 * blanks (spaces, tabs, CR) collapsed to one space, pieces trimmed. */
static inline void hk_library_version(char *out, size_t outlen)
{
    char raw[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    memset(raw, 0, sizeof raw);
    MPI_Get_library_version(raw, &len);
    if (len < 0)
        len = 0;
    if (len > MPI_MAX_LIBRARY_VERSION_STRING)
        len = MPI_MAX_LIBRARY_VERSION_STRING;
    raw[len] = '\0';
    size_t o = 0;
    int pending_space = 0, pending_sep = 0;
    for (const char *p = raw; *p && o + 4 < outlen; p++) {
        char c = *p;
        if (c == '\n') {
            pending_space = 0;
            if (o > 0)
                pending_sep = 1;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            if (o > 0)
                pending_space = 1;
        } else {
            if (pending_sep) {
                memcpy(out + o, " ; ", 3);
                o += 3;
            } else if (pending_space) {
                out[o++] = ' ';
            }
            pending_sep = pending_space = 0;
            out[o++] = (unsigned char)c < 0x20 ? ' ' : c;
        }
    }
    out[o] = '\0';
    if (o == 0)
        snprintf(out, outlen, "unknown");
}

/* Gathers MPI_Get_processor_name of every rank to rank 0.  Collective.
 * Returns (on rank 0) an array of hk_nranks strings of
 * MPI_MAX_PROCESSOR_NAME+1 chars each; NULL on other ranks. */
static inline char *hk_gather_hosts(void)
{
    const int w = MPI_MAX_PROCESSOR_NAME + 1;
    char mine[MPI_MAX_PROCESSOR_NAME + 1];
    int len = 0;
    memset(mine, 0, sizeof mine);
    MPI_Get_processor_name(mine, &len);
    mine[len < 0 ? 0 : (len > MPI_MAX_PROCESSOR_NAME ? MPI_MAX_PROCESSOR_NAME : len)] = '\0';
    hk_sanitize_token(mine);
    char *all = NULL;
    if (hk_rank == 0) {
        all = (char *)calloc((size_t)hk_nranks, (size_t)w);
        if (!all)
            hk_fatal("out of memory");
    }
    MPI_Gather(mine, w, MPI_CHAR, all, w, MPI_CHAR, 0, MPI_COMM_WORLD);
    return all;
}

static inline const char *hk_host_of(const char *hosts, int r)
{
    return hosts + (size_t)r * (MPI_MAX_PROCESSOR_NAME + 1);
}

/* Prints (rank 0) the first lines of every kernel output:
 *   hpcnet-kernel: <name> 1 / mpi-library: / ranks: / host: <r> <name>
 * 'hosts' comes from hk_gather_hosts(). */
static inline void hk_print_preamble(const char *hosts)
{
    if (hk_rank != 0)
        return;
    printf("ranks: %d\n", hk_nranks);
    for (int r = 0; r < hk_nranks; r++)
        printf("host: %d %s\n", r, hk_host_of(hosts, r));
}

/* Header lines describing the common options (rank 0). */
static inline void hk_print_common(const hk_common *c)
{
    if (hk_rank != 0)
        return;
    printf("warmup: %ld\n", c->warmup);
    if (c->iters > 0) {
        printf("iters: %ld\n", c->iters);
    } else {
        printf("iters: adaptive\n");
        printf("precision-pct: %g\n", c->precision);
        printf("time-per-size-ms: %g\n", c->time_per_size);
        printf("min-iters: %ld\n", c->min_iters);
        printf("max-iters: %ld\n", c->max_iters);
    }
    printf("validate: %s\n", c->validate ? "on" : "off");
}

/* Prints (rank 0) "bytes-sent: <rank 0> <rank 1> ...": the payload bytes
 * each rank sent in the kernel's own point-to-point messages.  Collective. */
static inline void hk_print_bytes_sent(unsigned long long mine)
{
    unsigned long long *all = NULL;
    if (hk_rank == 0) {
        all = (unsigned long long *)calloc((size_t)hk_nranks, sizeof *all);
        if (!all)
            hk_fatal("out of memory");
    }
    MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (hk_rank == 0) {
        printf("bytes-sent:");
        for (int r = 0; r < hk_nranks; r++)
            printf(" %llu", all[r]);
        printf("\n");
        free(all);
    }
}

static inline void hk_print_done(void)
{
    if (hk_rank == 0) {
        printf("done: ok\n");
        fflush(stdout);
    }
}

/* Seconds MPI_Finalize may take once the results are printed.  Some MPI
 * builds hang there (docs/known-issues.md): the process then reports it on
 * stderr and exits 3 at once, instead of the job waiting for its time limit
 * with the cause unnamed.  Environment HPCNET_FINALIZE_TIMEOUT_S (read by
 * hk_init), default 20; the checks set their own (hpcnet.constants). */
static char hk_finalize_msg[160];
static size_t hk_finalize_msg_len;

static void hk_finalize_hung(int sig)
{
    ssize_t w = write(STDERR_FILENO, hk_finalize_msg, hk_finalize_msg_len);
    (void)sig;
    (void)w;
    _exit(3);
}

static inline void hk_finalize(void)
{
    /* the message is formatted here: the handler may only write() */
    int n = snprintf(hk_finalize_msg, sizeof hk_finalize_msg,
                     "error: MPI_Finalize did not return within %u s (the results above are complete: "
                     "the MPI library hangs in finalize)\n",
                     hk_finalize_timeout_s);
    hk_finalize_msg_len = n < 0 ? 0 : ((size_t)n < sizeof hk_finalize_msg ? (size_t)n : sizeof hk_finalize_msg - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hk_finalize_hung;
    sigaction(SIGALRM, &sa, NULL);
    /* Every rank enters MPI_Finalize together: a finalize that waits in a
     * PMI barrier without progress (MPICH 4.0.2 over UCX) otherwise leaves
     * the flush of a rank still finishing unanswered, and hangs
     * (docs/known-issues.md). */
    MPI_Barrier(MPI_COMM_WORLD);
    alarm(hk_finalize_timeout_s);
    MPI_Finalize();
    alarm(0);
}

#endif /* HPCNET_KERNEL_H */
