/*
 * pairs.c - latency and bandwidth of every pair of ranks (2 or more ranks).
 *
 * Every unordered pair (a < b) once, in rounds of disjoint pairs (the circle
 * method of a round-robin tournament: N ranks take N-1 rounds, N+1 ... N
 * when N is odd and one rank sits each round out).  The pairs of a round run
 * at the same time, each on links of its own, as mpiGraph does to cover a
 * whole machine; a barrier separates the rounds.  With --one-pair-at-a-time
 * the pairs of a round take turns instead, and the ranks waiting for their
 * turn sleep rather than poll: where the "nodes" share the host's cores (an
 * emulated cluster), concurrent pairs measure the CPU contention, not the
 * links.  For each pair:
 *   - latency: ping-pong of --lat-size bytes (default 8); the FIRST
 *     exchange of the pair is reported on its own (lat_first_us) and kept out
 *     of the statistics, followed by --samples (default 50) ping-pongs;
 *   - bandwidth: one untimed ping-pong of --bw-size bytes (default 1 MiB),
 *     then --bw-samples (default 10) timed ping-pongs; bw = size / one-way time.
 * Every sample is one ping-pong; one-way time = round trip / 2.
 *
 * The pairs of the first round start right after MPI_Init, with no
 * communication before them.  Later rounds run after barriers and so may find
 * connections already set up by them (depends on the MPI library).
 *
 * Retest before blame (--outlier-rule mad|clusterkit): rank 0 sets a latency
 * and a bandwidth threshold from the first pass (the rule: outlier_thresholds
 * below, the one place it is decided), calls a pair whose mean latency is
 * above or whose median bandwidth is below its threshold an outlier, and
 * broadcasts the pairs to measure again: every outlier pair, and one control
 * pair for each of their endpoints (the endpoint with a rank that is the
 * endpoint of no outlier pair, where there is one).  The second pass runs
 * them in greedy rounds of disjoint pairs, scheduled as the first, twice
 * (RETESTS), and judges each pair at its better measurement (the lower
 * latency, the higher bandwidth) against the first pass's thresholds.  The rows say, per pair, what
 * each pass found; what the findings mean (a bad node, a bad link) is for the
 * reader of the output (hpcnet.checklib.analysis).
 *
 * Scale: --rounds R,R,... measures only those rounds of the first pass (a
 * sample, chosen by the caller; each round of an even count holds every rank,
 * so one round covers every node), and the rule judges the pairs measured.
 * Rank 0 prints the schedule as "# " lines before the first round (rounds,
 * pairs, order, and with --pair-seconds the expected time), and after the
 * first round what it took and the time it predicts for the whole first pass.
 *
 * Output: "hpcnet kernel output format 1" (README.md), rows at the end,
 * followed by latency and bandwidth matrices as "# " comment lines.
 */
#include "hpcnet_kernel_options.h"
#include "hpcnet_kernel_sampling.h"

#include <time.h>

#define TAG_LAT 21
#define TAG_BW 22
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
static long pair_index(int lo, int hi, int n)
{
    return (long)lo * (2L * n - lo - 1) / 2 + (hi - lo - 1);
}

/* Partner of rank i in round r of a round-robin over m (even) slots, by the
 * circle method: slot m-1 stays, the others rotate.  A partner >= the number
 * of ranks is the idle slot of an odd count. */
static int round_partner(int i, int r, int m)
{
    const int k = m - 1;
    if (i == k) {
        for (int j = 0; j < k; j++)
            if ((2 * r - j % k + 2 * k) % k == j)
                return j;
    }
    int j = ((2 * r - i) % k + k) % k;
    return j == i ? k : j;
}

static void usage(void)
{
    printf("usage: pairs [options]   (run with 2 or more MPI ranks)\n"
           "Ping-pong latency and bandwidth of every pair of ranks, in rounds of disjoint pairs;\n"
           "output is hpcnet kernel output format 1 on stdout (see src/README.md).\n"
           "  --lat-size S      latency message size (default 8; K/M/G suffixes)\n"
           "  --bw-size S       bandwidth message size (default 1M; at least 1)\n"
           "  --samples N       latency samples per pair after the first (default 50)\n"
           "  --bw-samples N    bandwidth samples per pair (default 10)\n"
           "  --one-pair-at-a-time  the pairs of a round take turns (nodes that share cores)\n"
           "  --rounds R,R,...  only these rounds of the first pass (0-based; default all)\n"
           "  --pair-seconds S  stated time of one pair, for the expected time printed first\n"
           "  --outlier-rule R  none (default), mad or clusterkit: measure the outlier pairs again\n"
           "  --mad-k K         mad: outlier beyond median + K x scaled MAD (required with mad)\n"
           "  --outlier-floor F mad: ... and beyond median x (1 +- F) (required with mad)\n"
           "  --bw-of-best F    clusterkit: outlier below F x the best pair's bandwidth (default 0.93)\n"
           "  --help            this text\n");
}

/* n ping-pongs between me and peer; 'initiator' sends first and records
 * one-way times (round trip / 2, microseconds) into out[]. */
static void pingpong(unsigned char *sbuf, unsigned char *rbuf, int size, int peer, int tag, int initiator, long n,
                     double *out)
{
    if (initiator) {
        for (long k = 0; k < n; k++) {
            double t0 = MPI_Wtime();
            MPI_Send(sbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
            MPI_Recv(rbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            out[k] = (MPI_Wtime() - t0) * 0.5e6;
        }
    } else {
        for (long k = 0; k < n; k++) {
            MPI_Recv(rbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        }
    }
}

/* A barrier whose waiters sleep between tests instead of polling, so that a
 * waiting rank leaves the cores to the pair being measured. */
static void sleeping_barrier(void)
{
    MPI_Request req;
    int done = 0;
    const struct timespec nap = {0, 50 * 1000};
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&req, &done, MPI_STATUS_IGNORE))
        nanosleep(&nap, NULL);
}

typedef struct {
    size_t lat_size, bw_size;
    long samples, bw_samples;
    int one_at_a_time;
} pair_options;

typedef struct {
    unsigned char *sbuf, *rbuf;
    double *samples; /* scratch, max(samples, bw_samples) */
    double *res;     /* NRES per pair */
} pair_buffers;

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
} thresholds;

/* Latency then bandwidth of the pair (me, peer) in round 'round'; the lower
 * rank records the results.  Returns the payload bytes this rank sent. */
static unsigned long long measure_pair(const pair_buffers *b, const pair_options *o, int me, int peer, int round)
{
    const int lo = me < peer ? me : peer, hi = me < peer ? peer : me, init = me == lo;
    double *r = b->res + pair_index(lo, hi, hk_nranks) * NRES;
    double first = 0.0, warm = 0.0;
    pingpong(b->sbuf, b->rbuf, (int)o->lat_size, peer, TAG_LAT, init, 1, &first);
    pingpong(b->sbuf, b->rbuf, (int)o->lat_size, peer, TAG_LAT, init, o->samples, b->samples);
    if (init) {
        hc_stats st = hc_compute_stats(b->samples, o->samples);
        r[R_FIRST] = first;
        r[R_LMEAN] = st.mean;
        r[R_LSD] = st.stddev;
        r[R_LMIN] = st.min;
        r[R_LMAX] = st.max;
    }
    pingpong(b->sbuf, b->rbuf, (int)o->bw_size, peer, TAG_BW, init, 1, &warm);
    pingpong(b->sbuf, b->rbuf, (int)o->bw_size, peer, TAG_BW, init, o->bw_samples, b->samples);
    if (init) {
        for (long k = 0; k < o->bw_samples; k++)
            b->samples[k] = hk_mbps((double)o->bw_size, b->samples[k]);
        hc_stats st = hc_compute_stats(b->samples, o->bw_samples);
        r[R_BMEAN] = st.mean;
        r[R_BMED] = st.median;
        r[R_BSD] = st.stddev;
        r[R_BMIN] = st.min;
        r[R_BMAX] = st.max;
        r[R_ROUND] = round;
    }
    return (unsigned long long)(1 + o->samples) * o->lat_size + (unsigned long long)(1 + o->bw_samples) * o->bw_size;
}

/* One round of disjoint pairs lo[k] < hi[k]: measured at the same time, or
 * with --one-pair-at-a-time one after the other in the order given (every
 * rank waits for each turn).  Returns the payload bytes this rank sent. */
static unsigned long long measure_round(const pair_buffers *b, const pair_options *o, const int *lo, const int *hi,
                                        int count, int round)
{
    unsigned long long sent = 0;
    for (int k = 0; k < count; k++) {
        if (hk_rank == lo[k] || hk_rank == hi[k])
            sent += measure_pair(b, o, hk_rank, hk_rank == lo[k] ? hi[k] : lo[k], round);
        if (o->one_at_a_time)
            sleeping_barrier();
    }
    return sent;
}

/* Median of v[0..n) and its median absolute deviation scaled to a standard
 * deviation; overwrites v. */
static void median_mad(double *v, long n, double *median, double *mad)
{
    *median = hk_median(v, n);
    for (long k = 0; k < n; k++)
        v[k] = fabs(v[k] - *median);
    *mad = MAD_NORMAL_SCALE * hk_median(v, n);
}

/* The outlier thresholds of the first pass's results (npairs x NRES).
 * mad: one-sided, since a pair faster than the rest is no fault: latency
 * above median + max(k x MAD, floor x median), bandwidth below median minus
 * the same; the floor keeps a uniform matrix (MAD near 0) from calling a
 * wobble an outlier.  clusterkit: its ratios to the best pair. */
static thresholds outlier_thresholds(const double *all, const unsigned char *measured, long npairs,
                                     const outlier_options *o, double *scratch)
{
    thresholds t;
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
    double median, mad;
    long m = 0;
    for (long p = 0; p < npairs; p++)
        if (measured[p])
            scratch[m++] = all[p * NRES + R_LMEAN];
    median_mad(scratch, m, &median, &mad);
    t.lat_us = median + fmax(o->mad_k * mad, o->floor * median);
    m = 0;
    for (long p = 0; p < npairs; p++)
        if (measured[p])
            scratch[m++] = all[p * NRES + R_BMED];
    median_mad(scratch, m, &median, &mad);
    t.bw_MBps = median - fmax(o->mad_k * mad, o->floor * median);
    return t;
}

static int latency_outlier(const double *r, const thresholds *t)
{
    return r[R_LMEAN] > t->lat_us;
}

static int bandwidth_outlier(const double *r, const thresholds *t)
{
    return r[R_BMED] < t->bw_MBps;
}

/* The second pass, as why[pair] (RETEST_*): every outlier pair of 'all'
 * (among the measured pairs), and for each of their endpoints a control pair
 * with the next rank (in rank order, wrapping) that is the endpoint of no
 * outlier pair, if any, and was measured in the first pass.  Returns the
 * number of pairs to retest. */
static long retest_selection(const double *all, const unsigned char *measured, const thresholds *t, int n,
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

/* Measures the pairs 'why' selects in greedy rounds of disjoint pairs (in
 * pair order), a barrier before each.  Returns the rounds run. */
static int retest_pass(const pair_buffers *b, const pair_options *o, const unsigned char *why,
                       unsigned long long *sent)
{
    const int n = hk_nranks;
    int *lo = (int *)calloc((size_t)n, sizeof *lo), *hi = (int *)calloc((size_t)n, sizeof *hi);
    unsigned char *busy = (unsigned char *)calloc((size_t)n, 1);
    unsigned char *done = (unsigned char *)calloc((size_t)n * (n - 1) / 2, 1);
    if (!lo || !hi || !busy || !done)
        hk_fatal("out of memory (%d ranks)", n);
    int rounds = 0;
    for (;;) {
        int count = 0;
        memset(busy, 0, (size_t)n);
        for (int a = 0; a < n; a++)
            for (int c = a + 1; c < n; c++) {
                const long p = pair_index(a, c, n);
                if (why[p] == RETEST_NO || done[p] || busy[a] || busy[c])
                    continue;
                done[p] = busy[a] = busy[c] = 1;
                lo[count] = a;
                hi[count++] = c;
            }
        if (count == 0)
            break;
        MPI_Barrier(MPI_COMM_WORLD);
        *sent += measure_round(b, o, lo, hi, count, rounds++);
    }
    free(done);
    free(busy);
    free(hi);
    free(lo);
    return rounds;
}

static void print_matrix(const char *title, const double *res, int col, int decimals)
{
    const int n = hk_nranks;
    printf("# %s, row = rank_a, column = rank_b\n", title);
    printf("# %6s", "");
    for (int b = 0; b < n; b++)
        printf(" %10d", b);
    printf("\n");
    for (int a = 0; a < n; a++) {
        printf("# %6d", a);
        for (int b = 0; b < n; b++) {
            if (a == b) {
                printf(" %10s", "-");
                continue;
            }
            long p = a < b ? pair_index(a, b, n) : pair_index(b, a, n);
            if (res[p * NRES + R_LMEAN] == 0.0) /* a pair of no round measured */
                printf(" %10s", ".");
            else
                printf(" %10.*f", decimals, res[p * NRES + col]);
        }
        printf("\n");
    }
}

static enum outlier_rule parse_rule(const char *v)
{
    for (int r = RULE_NONE; r <= RULE_CLUSTERKIT; r++)
        if (strcmp(v, RULE_NAMES[r]) == 0)
            return (enum outlier_rule)r;
    hk_usage_error("--outlier-rule: '%s' is not one of none, mad, clusterkit", v);
}

int main(int argc, char **argv)
{
    hk_init(&argc, &argv, "pairs", usage);

    pair_options opt = {8, 1u << 20, 50, 10, 0};
    outlier_options rule = {RULE_NONE, -1.0, -1.0, CLUSTERKIT_BANDWIDTH_OF_MAX};
    int bw_of_best_given = 0;
    const char *rounds_wanted = NULL; /* --rounds, parsed once the rank count is known */
    double pair_seconds = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_flag(argv[i], "--one-pair-at-a-time")) {
            opt.one_at_a_time = 1;
        } else if (hk_opt(argc, argv, &i, "--lat-size", &v)) {
            opt.lat_size = hk_parse_size("--lat-size", v);
        } else if (hk_opt(argc, argv, &i, "--bw-size", &v)) {
            opt.bw_size = hk_parse_size("--bw-size", v);
            if (opt.bw_size == 0)
                hk_usage_error("--bw-size must be at least 1 byte");
        } else if (hk_opt(argc, argv, &i, "--samples", &v)) {
            opt.samples = hc_parse_long("--samples", v, 1, HK_MAX_ITERS);
        } else if (hk_opt(argc, argv, &i, "--bw-samples", &v)) {
            opt.bw_samples = hc_parse_long("--bw-samples", v, 1, HK_MAX_ITERS);
        } else if (hk_opt(argc, argv, &i, "--rounds", &v)) {
            rounds_wanted = v;
        } else if (hk_opt(argc, argv, &i, "--pair-seconds", &v)) {
            pair_seconds = hk_parse_positive("--pair-seconds", v, 1e6);
        } else if (hk_opt(argc, argv, &i, "--outlier-rule", &v)) {
            rule.rule = parse_rule(v);
        } else if (hk_opt(argc, argv, &i, "--mad-k", &v)) {
            rule.mad_k = hk_parse_positive("--mad-k", v, 1000.0);
        } else if (hk_opt(argc, argv, &i, "--outlier-floor", &v)) {
            rule.floor = hk_parse_nonnegative("--outlier-floor", v, 1.0);
            if (rule.floor >= 1.0)
                hk_usage_error("--outlier-floor: '%s' is not below 1 (a fraction of the median)", v);
        } else if (hk_opt(argc, argv, &i, "--bw-of-best", &v)) {
            rule.bw_of_best = hk_parse_positive("--bw-of-best", v, 1.0);
            bw_of_best_given = 1;
        } else {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
    const int mad_options = rule.mad_k >= 0.0 || rule.floor >= 0.0;
    if (rule.rule == RULE_MAD && (rule.mad_k < 0.0 || rule.floor < 0.0))
        hk_usage_error("--outlier-rule mad needs --mad-k and --outlier-floor");
    if (rule.rule != RULE_MAD && mad_options)
        hk_usage_error("--mad-k and --outlier-floor go with --outlier-rule mad only");
    if (rule.rule != RULE_CLUSTERKIT && bw_of_best_given)
        hk_usage_error("--bw-of-best goes with --outlier-rule clusterkit only");
    if (hk_nranks < 2)
        hk_usage_error("pairs needs at least 2 ranks, got %d", hk_nranks);

    const int n = hk_nranks, me = hk_rank;
    const long npairs = (long)n * (n - 1) / 2;
    size_t maxsize = opt.lat_size > opt.bw_size ? opt.lat_size : opt.bw_size;
    unsigned char *sbuf = (unsigned char *)hk_alloc(maxsize, 0x11);
    unsigned char *rbuf = (unsigned char *)hk_alloc(maxsize, HK_POISON);
    long nsamp = opt.samples > opt.bw_samples ? opt.samples : opt.bw_samples;
    double *lat = (double *)calloc((size_t)nsamp, sizeof *lat);
    double *res = (double *)calloc((size_t)npairs * NRES, sizeof *res);
    double *res2 = (double *)calloc((size_t)npairs * NRES, sizeof *res2);
    unsigned char *why = (unsigned char *)calloc((size_t)npairs, 1);
    unsigned char *measured = (unsigned char *)calloc((size_t)npairs, 1);
    int *round_lo = (int *)calloc((size_t)n, sizeof *round_lo), *round_hi = (int *)calloc((size_t)n, sizeof *round_hi);
    double *all = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *all) : NULL;
    double *all2 = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *all2) : NULL;
    double *all3 = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *all3) : NULL;
    double *scratch = me == 0 ? (double *)calloc((size_t)npairs, sizeof *scratch) : NULL;
    if (!lat || !res || !res2 || !why || !measured || !round_lo || !round_hi || (me == 0 && (!all || !all2 || !all3 || !scratch)))
        hk_fatal("out of memory (%ld pairs)", npairs);

    unsigned long long sent = 0; /* payload bytes this rank sent */
    const int slots = n + n % 2, rounds = slots - 1;
    unsigned char *in_sample = (unsigned char *)calloc((size_t)rounds, 1);
    if (!in_sample)
        hk_fatal("out of memory (%d rounds)", rounds);
    int rounds_run = rounds;
    if (rounds_wanted) {
        rounds_run = 0;
        for (const char *c = rounds_wanted; *c;) {
            char *end;
            const long r = strtol(c, &end, 10);
            if (end == c || (*end && *end != ',') || r < 0 || r >= rounds)
                hk_usage_error("--rounds: '%s' is not a comma-separated list of rounds 0..%d", rounds_wanted,
                               rounds - 1);
            if (!in_sample[r])
                rounds_run++;
            in_sample[r] = 1;
            c = *end ? end + 1 : end;
        }
        if (rounds_run == 0)
            hk_usage_error("--rounds: no round given");
    } else {
        memset(in_sample, 1, (size_t)rounds);
    }
    const int per_round = n / 2;
    const long pairs_run = (long)rounds_run * per_round;
    if (me == 0) {
        printf("# schedule: %d ranks, %d of %d rounds of %d disjoint pairs, %ld pairs, %s\n", n, rounds_run, rounds,
               per_round, pairs_run, opt.one_at_a_time ? "one pair at a time" : "the pairs of a round at once");
        if (pair_seconds > 0.0)
            printf("# expected first pass: %.0f s at %g s per pair\n",
                   pair_seconds * (opt.one_at_a_time ? (double)pairs_run : (double)rounds_run), pair_seconds);
        fflush(stdout);
    }
    pair_buffers buf = {sbuf, rbuf, lat, res};
    const double started = MPI_Wtime();
    int round_count = 0;
    for (int round = 0; round < rounds; round++) {
        if (!in_sample[round])
            continue;
        if (round_count++ > 0) /* the first round starts without any prior communication */
            MPI_Barrier(MPI_COMM_WORLD);
        if (round_count == 2 && me == 0) {
            const double took = MPI_Wtime() - started;
            /* A round costs one pair's time when its pairs run at once. */
            printf("# first round: %.2f s, %.3f s per pair: expected first pass %.0f s\n", took,
                   took / (opt.one_at_a_time ? per_round : 1),
                   took * rounds_run);
            fflush(stdout);
        }
        int count = 0; /* this round's pairs, in the order of their lower rank */
        for (int lo = 0; lo < n; lo++) {
            int hi = round_partner(lo, round, slots);
            if (hi > lo && hi < n) { /* else the pair is listed by hi, or lo sits this round out */
                measured[pair_index(lo, hi, n)] = 1;
                round_lo[count] = lo;
                round_hi[count++] = hi;
            }
        }
        sent += measure_round(&buf, &opt, round_lo, round_hi, count, round);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double first_pass_seconds = MPI_Wtime() - started;
    /* every pair's results live on its rank_a only (zeros elsewhere) */
    MPI_Reduce(res, all, (int)(npairs * NRES), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    thresholds limit = {INFINITY, 0.0}; /* rule none: nothing is an outlier */
    long retested = 0;
    int retest_rounds = 0;
    if (rule.rule != RULE_NONE) {
        if (me == 0) {
            limit = outlier_thresholds(all, measured, npairs, &rule, scratch);
            retested = retest_selection(all, measured, &limit, n, why);
        }
        MPI_Bcast(why, (int)npairs, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
        /* Twice, at two moments: a pair slowed by a passing load (another
         * job's burst, a host's busy core) is rarely slowed again at both. */
        for (int again = 0; again < RETESTS; again++) {
            pair_buffers buf2 = {sbuf, rbuf, lat, res2};
            memset(res2, 0, (size_t)npairs * NRES * sizeof *res2);
            retest_rounds += retest_pass(&buf2, &opt, why, &sent);
            MPI_Reduce(res2, again ? all3 : all2, (int)(npairs * NRES), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        }
        if (me == 0) /* each retested pair at its better measurement */
            for (long p = 0; p < npairs; p++) {
                all2[p * NRES + R_LMEAN] = fmin(all2[p * NRES + R_LMEAN], all3[p * NRES + R_LMEAN]);
                all2[p * NRES + R_BMED] = fmax(all2[p * NRES + R_BMED], all3[p * NRES + R_BMED]);
            }
    }

    char *hosts = hk_gather_hosts();
    hk_print_preamble(hosts);
    if (me == 0) {
        printf("pairs: %ld\n", pairs_run);
        printf("rounds: %d\n", rounds_run);
        printf("rounds-of-all-pairs: %d\n", rounds);
        printf("first-pass-seconds: %.3f\n", first_pass_seconds);
        printf("schedule: %s\n", opt.one_at_a_time ? "one-pair-at-a-time" : "concurrent");
        printf("lat-size: %zu\n", opt.lat_size);
        printf("bw-size: %zu\n", opt.bw_size);
        printf("samples: %ld\n", opt.samples);
        printf("bw-samples: %ld\n", opt.bw_samples);
        printf("outlier-rule: %s\n", RULE_NAMES[rule.rule]);
        if (rule.rule == RULE_MAD) {
            printf("mad-k: %g\n", rule.mad_k);
            printf("outlier-floor: %g\n", rule.floor);
        }
        if (rule.rule == RULE_CLUSTERKIT)
            printf("bw-of-best: %g\n", rule.bw_of_best);
        if (rule.rule != RULE_NONE) {
            printf("lat-threshold-us: %.4f\n", limit.lat_us);
            printf("bw-threshold-mbps: %.6g\n", limit.bw_MBps);
            printf("retested: %ld\n", retested);
            printf("retest-rounds: %d\n", retest_rounds);
        }
        printf("columns: rank_a rank_b host_a host_b lat_first_us lat_mean_us lat_stddev_us lat_min_us lat_max_us "
               "bw_mean_MBps bw_median_MBps bw_stddev_MBps bw_min_MBps bw_max_MBps round lat_outlier bw_outlier retest "
               "lat_retest_us bw_retest_MBps lat_retest_outlier bw_retest_outlier\n");
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++) {
                const long p = pair_index(a, b, n);
                if (!measured[p])
                    continue;
                const double *r = all + p * NRES, *r2 = all2 + p * NRES;
                const int again = why[p] != RETEST_NO;
                printf("row: %d %d %s %s %.4f %.4f %.4f %.4f %.4f %.6g %.6g %.6g %.6g %.6g %d %d %d %d %.4f %.6g %d %d\n",
                       a, b, hk_host_of(hosts, a), hk_host_of(hosts, b), r[R_FIRST], r[R_LMEAN], r[R_LSD], r[R_LMIN],
                       r[R_LMAX], r[R_BMEAN], r[R_BMED], r[R_BSD], r[R_BMIN], r[R_BMAX], (int)r[R_ROUND],
                       latency_outlier(r, &limit), bandwidth_outlier(r, &limit), why[p], r2[R_LMEAN], r2[R_BMED],
                       again && latency_outlier(r2, &limit), again && bandwidth_outlier(r2, &limit));
            }
        print_matrix("latency matrix: lat_mean_us (one-way, microseconds)", all, R_LMEAN, 4);
        print_matrix("bandwidth matrix: bw_median_MBps (MB/s = 10^6 bytes/s)", all, R_BMED, 2);
    }
    hk_print_bytes_sent(sent);
    hk_print_done();

    free(scratch);
    free(all3);
    free(all2);
    free(all);
    free(round_hi);
    free(round_lo);
    free(in_sample);
    free(measured);
    free(why);
    free(res2);
    free(res);
    free(lat);
    free(rbuf);
    free(sbuf);
    free(hosts);
    hk_finalize();
    return 0;
}
