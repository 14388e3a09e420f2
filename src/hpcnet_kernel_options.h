/*
 * hpcnet_kernel_options.h - the MPI kernels' command line, header-only:
 * matching and parsing option values, the options p2p and collectives share
 * (hk_common) with their header lines, and the list of message sizes.
 * Builds on hpcnet_kernel.h (include it through this header or after it).
 */
#ifndef HPCNET_KERNEL_OPTIONS_H
#define HPCNET_KERNEL_OPTIONS_H

#include "hpcnet_kernel.h"

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

#endif /* HPCNET_KERNEL_OPTIONS_H */
