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
 * in pairs_outliers.h, the one place it is decided), calls a pair whose mean latency is
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
 * --pair-rounds FILE measures the rounds the file lists instead (a switch
 * tree's, which keep each leaf's uplinks within capacity: pairs_tree.h).
 * Rank 0 prints the schedule as "# " lines before the first round (rounds,
 * pairs, order, and with --pair-seconds the expected time), and after the
 * first round what it took and the time it predicts for the whole first pass.
 *
 * Output: "hpcnet kernel output format 1" (README.md), rows at the end,
 * followed by latency and bandwidth matrices as "# " comment lines.
 */
#include "hpcnet_kernel_options.h"
#include "hpcnet_kernel_sampling.h"
#include "pairs_measure.h"
#include "pairs_outliers.h"
#include "pairs_tree.h"

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
           "  --pair-rounds FILE  the first pass's rounds, one a line of hostA:hostB pairs (a switch tree's)\n"
           "  --pair-seconds S  stated time of one pair, for the expected time printed first\n"
           "  --outlier-rule R  none (default), mad or clusterkit: measure the outlier pairs again\n"
           "  --mad-k K         mad: outlier beyond median + K x scaled MAD (required with mad)\n"
           "  --outlier-floor F mad: ... and beyond median x (1 +- F) (required with mad)\n"
           "  --bw-of-best F    clusterkit: outlier below F x the best pair's bandwidth (default 0.93)\n"
           "  --help            this text\n");
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

/* The options: the measurement, the schedule (--rounds, kept as given
 * until the rank count is known) and the outlier rule with its own. */
static void parse_args(int argc, char **argv, pair_options *opt, outlier_options *rule, const char **rounds_wanted,
                       double *pair_seconds, const char **pair_rounds)
{
    int bw_of_best_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_flag(argv[i], "--one-pair-at-a-time")) {
            opt->one_at_a_time = 1;
        } else if (hk_opt(argc, argv, &i, "--lat-size", &v)) {
            opt->lat_size = hk_parse_size("--lat-size", v);
        } else if (hk_opt(argc, argv, &i, "--bw-size", &v)) {
            opt->bw_size = hk_parse_size("--bw-size", v);
            if (opt->bw_size == 0)
                hk_usage_error("--bw-size must be at least 1 byte");
        } else if (hk_opt(argc, argv, &i, "--samples", &v)) {
            opt->samples = hc_parse_long("--samples", v, 1, HK_MAX_ITERS);
        } else if (hk_opt(argc, argv, &i, "--bw-samples", &v)) {
            opt->bw_samples = hc_parse_long("--bw-samples", v, 1, HK_MAX_ITERS);
        } else if (hk_opt(argc, argv, &i, "--rounds", &v)) {
            *rounds_wanted = v;
        } else if (hk_opt(argc, argv, &i, "--pair-rounds", &v)) {
            *pair_rounds = v;
        } else if (hk_opt(argc, argv, &i, "--pair-seconds", &v)) {
            *pair_seconds = hk_parse_positive("--pair-seconds", v, 1e6);
        } else if (hk_opt(argc, argv, &i, "--outlier-rule", &v)) {
            rule->rule = parse_rule(v);
        } else if (hk_opt(argc, argv, &i, "--mad-k", &v)) {
            rule->mad_k = hk_parse_positive("--mad-k", v, 1000.0);
        } else if (hk_opt(argc, argv, &i, "--outlier-floor", &v)) {
            rule->floor = hk_parse_nonnegative("--outlier-floor", v, 1.0);
            if (rule->floor >= 1.0)
                hk_usage_error("--outlier-floor: '%s' is not below 1 (a fraction of the median)", v);
        } else if (hk_opt(argc, argv, &i, "--bw-of-best", &v)) {
            rule->bw_of_best = hk_parse_positive("--bw-of-best", v, 1.0);
            bw_of_best_given = 1;
        } else {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
    const int mad_options = rule->mad_k >= 0.0 || rule->floor >= 0.0;
    if (rule->rule == RULE_MAD && (rule->mad_k < 0.0 || rule->floor < 0.0))
        hk_usage_error("--outlier-rule mad needs --mad-k and --outlier-floor");
    if (rule->rule != RULE_MAD && mad_options)
        hk_usage_error("--mad-k and --outlier-floor go with --outlier-rule mad only");
    if (rule->rule != RULE_CLUSTERKIT && bw_of_best_given)
        hk_usage_error("--bw-of-best goes with --outlier-rule clusterkit only");
    if (*rounds_wanted && *pair_rounds)
        hk_usage_error("--rounds samples the circle method's rounds; --pair-rounds gives rounds of its own");
}

/* What a run holds: the measurement buffers, the results of each pass
 * (res, res2 on the lower rank of a pair; all, all2, all3 their sums on
 * rank 0) and which pairs were measured and why they are retested. */
typedef struct {
    int n;
    long npairs;
    pair_buffers buf; /* first pass; the second pass writes res2 */
    double *res2;
    unsigned char *why, *measured;
    int *round_lo, *round_hi;
    double *all, *all2, *all3, *scratch; /* rank 0 only */
    unsigned long long sent;             /* payload bytes this rank sent */
} pairs_run;

static void alloc_run(pairs_run *run, const pair_options *opt)
{
    const int n = hk_nranks, me = hk_rank;
    const long npairs = (long)n * (n - 1) / 2;
    size_t maxsize = opt->lat_size > opt->bw_size ? opt->lat_size : opt->bw_size;
    run->n = n;
    run->npairs = npairs;
    run->buf.sbuf = (unsigned char *)hk_alloc(maxsize, 0x11);
    run->buf.rbuf = (unsigned char *)hk_alloc(maxsize, HK_POISON);
    long nsamp = opt->samples > opt->bw_samples ? opt->samples : opt->bw_samples;
    run->buf.samples = (double *)calloc((size_t)nsamp, sizeof *run->buf.samples);
    run->buf.res = (double *)calloc((size_t)npairs * NRES, sizeof *run->buf.res);
    run->res2 = (double *)calloc((size_t)npairs * NRES, sizeof *run->res2);
    run->why = (unsigned char *)calloc((size_t)npairs, 1);
    run->measured = (unsigned char *)calloc((size_t)npairs, 1);
    run->round_lo = (int *)calloc((size_t)n, sizeof *run->round_lo);
    run->round_hi = (int *)calloc((size_t)n, sizeof *run->round_hi);
    run->all = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *run->all) : NULL;
    run->all2 = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *run->all2) : NULL;
    run->all3 = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *run->all3) : NULL;
    run->scratch = me == 0 ? (double *)calloc((size_t)npairs, sizeof *run->scratch) : NULL;
    if (!run->buf.samples || !run->buf.res || !run->res2 || !run->why || !run->measured || !run->round_lo ||
        !run->round_hi || (me == 0 && (!run->all || !run->all2 || !run->all3 || !run->scratch)))
        hk_fatal("out of memory (%ld pairs)", npairs);
    run->sent = 0;
}

static void free_run(pairs_run *run)
{
    free(run->scratch);
    free(run->all3);
    free(run->all2);
    free(run->all);
    free(run->round_hi);
    free(run->round_lo);
    free(run->measured);
    free(run->why);
    free(run->res2);
    free(run->buf.res);
    free(run->buf.samples);
    free(run->buf.rbuf);
    free(run->buf.sbuf);
}

/* The rounds of the first pass (in_sample[round]): the --rounds given, or
 * all.  Returns how many. */
static int choose_rounds(const char *rounds_wanted, int rounds, unsigned char *in_sample)
{
    if (!rounds_wanted) {
        memset(in_sample, 1, (size_t)rounds);
        return rounds;
    }
    int rounds_run = 0;
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
    return rounds_run;
}

/* What the first pass measures, and how long it should take. */
typedef struct {
    int slots, rounds, rounds_run, per_round;
    long pairs_run;
    unsigned char *in_sample; /* per round */
    const file_rounds *fr;    /* the rounds of --pair-rounds, or NULL: the circle method's */
} schedule;

static void print_schedule(const schedule *sc, const pair_options *opt, double pair_seconds)
{
    if (hk_rank != 0)
        return;
    printf("# schedule: %d ranks, %d of %d rounds of %d disjoint pairs, %ld pairs, %s\n", hk_nranks, sc->rounds_run,
           sc->rounds, sc->per_round, sc->pairs_run,
           opt->one_at_a_time ? "one pair at a time" : "the pairs of a round at once");
    if (pair_seconds > 0.0)
        printf("# expected first pass: %.0f s at %g s per pair\n",
               pair_seconds * (opt->one_at_a_time ? (double)sc->pairs_run : (double)sc->rounds_run), pair_seconds);
    fflush(stdout);
}

/* The rounds of the schedule, a barrier between them; rank 0 says after the
 * first what it took.  Returns the pass's wall time. */
static double first_pass(pairs_run *run, const pair_options *opt, const schedule *sc)
{
    const int n = run->n;
    const double started = MPI_Wtime();
    int round_count = 0;
    for (int round = 0; round < sc->rounds; round++) {
        if (!sc->in_sample[round])
            continue;
        if (round_count++ > 0) /* the first round starts without any prior communication */
            MPI_Barrier(MPI_COMM_WORLD);
        if (round_count == 2 && hk_rank == 0) {
            const double took = MPI_Wtime() - started;
            /* A round costs one pair's time when its pairs run at once. */
            printf("# first round: %.2f s, %.3f s per pair: expected first pass %.0f s\n", took,
                   took / (opt->one_at_a_time ? sc->per_round : 1),
                   took * sc->rounds_run);
            fflush(stdout);
        }
        int count = 0; /* this round's pairs, in the order of their lower rank */
        for (long p = sc->fr ? sc->fr->start[round] : 0; sc->fr && p < sc->fr->start[round + 1]; p++) {
            run->measured[pair_index(sc->fr->lo[p], sc->fr->hi[p], n)] = 1;
            run->round_lo[count] = sc->fr->lo[p];
            run->round_hi[count++] = sc->fr->hi[p];
        }
        for (int lo = 0; !sc->fr && lo < n; lo++) {
            int hi = round_partner(lo, round, sc->slots);
            if (hi > lo && hi < n) { /* else the pair is listed by hi, or lo sits this round out */
                run->measured[pair_index(lo, hi, n)] = 1;
                run->round_lo[count] = lo;
                run->round_hi[count++] = hi;
            }
        }
        run->sent += measure_round(&run->buf, opt, run->round_lo, run->round_hi, count, round);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double seconds = MPI_Wtime() - started;
    /* every pair's results live on its rank_a only (zeros elsewhere) */
    MPI_Reduce(run->buf.res, run->all, (int)(run->npairs * NRES), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return seconds;
}

/* What the rule found: its thresholds and the second pass. */
typedef struct {
    thresholds limit;
    long retested;
    int retest_rounds;
} judgement;

/* The rule's thresholds from the first pass (rank 0), and the second pass
 * over the pairs it selects; without a rule nothing is an outlier. */
static judgement second_pass(pairs_run *run, const pair_options *opt, const outlier_options *rule,
                             const unsigned char *reference)
{
    judgement j = {{INFINITY, 0.0, 0}, 0, 0};
    const long npairs = run->npairs;
    if (rule->rule == RULE_NONE)
        return j;
    if (hk_rank == 0) {
        j.limit = outlier_thresholds(run->all, run->measured, reference, npairs, rule, run->scratch);
        j.retested = retest_selection(run->all, run->measured, &j.limit, run->n, run->why);
    }
    MPI_Bcast(run->why, (int)npairs, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    /* Twice, at two moments: a pair slowed by a passing load (another
     * job's burst, a host's busy core) is rarely slowed again at both. */
    for (int again = 0; again < RETESTS; again++) {
        pair_buffers buf2 = {run->buf.sbuf, run->buf.rbuf, run->buf.samples, run->res2};
        memset(run->res2, 0, (size_t)npairs * NRES * sizeof *run->res2);
        j.retest_rounds += retest_pass(&buf2, opt, run->why, &run->sent);
        MPI_Reduce(run->res2, again ? run->all3 : run->all2, (int)(npairs * NRES), MPI_DOUBLE, MPI_SUM, 0,
                   MPI_COMM_WORLD);
    }
    if (hk_rank == 0) /* each retested pair at its better measurement */
        for (long p = 0; p < npairs; p++) {
            run->all2[p * NRES + R_LMEAN] = fmin(run->all2[p * NRES + R_LMEAN], run->all3[p * NRES + R_LMEAN]);
            run->all2[p * NRES + R_BMED] = fmax(run->all2[p * NRES + R_BMED], run->all3[p * NRES + R_BMED]);
        }
    return j;
}

/* The header lines after the preamble (rank 0). */
static void print_header(const schedule *sc, double first_pass_seconds, const pair_options *opt,
                         const outlier_options *rule, const judgement *j)
{
    printf("pairs: %ld\n", sc->pairs_run);
    printf("rounds: %d\n", sc->rounds_run);
    printf("rounds-of-all-pairs: %d\n", sc->rounds);
    printf("first-pass-seconds: %.3f\n", first_pass_seconds);
    printf("schedule: %s\n", opt->one_at_a_time ? "one-pair-at-a-time" : "concurrent");
    printf("lat-size: %zu\n", opt->lat_size);
    printf("bw-size: %zu\n", opt->bw_size);
    printf("samples: %ld\n", opt->samples);
    printf("bw-samples: %ld\n", opt->bw_samples);
    printf("outlier-rule: %s\n", RULE_NAMES[rule->rule]);
    if (rule->rule == RULE_MAD) {
        printf("mad-k: %g\n", rule->mad_k);
        printf("outlier-floor: %g\n", rule->floor);
        printf("reference-pairs: %ld\n", j->limit.reference_pairs);
    }
    if (rule->rule == RULE_CLUSTERKIT)
        printf("bw-of-best: %g\n", rule->bw_of_best);
    if (rule->rule != RULE_NONE) {
        printf("lat-threshold-us: %.4f\n", j->limit.lat_us);
        printf("bw-threshold-mbps: %.6g\n", j->limit.bw_MBps);
        printf("retested: %ld\n", j->retested);
        printf("retest-rounds: %d\n", j->retest_rounds);
    }
}

/* A row per measured pair, then the two matrices (rank 0). */
static void print_rows(const pairs_run *run, const char *hosts, const thresholds *limit)
{
    const int n = run->n;
    printf("columns: rank_a rank_b host_a host_b lat_first_us lat_mean_us lat_stddev_us lat_min_us lat_max_us "
           "bw_mean_MBps bw_median_MBps bw_stddev_MBps bw_min_MBps bw_max_MBps round lat_outlier bw_outlier retest "
           "lat_retest_us bw_retest_MBps lat_retest_outlier bw_retest_outlier\n");
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const long p = pair_index(a, b, n);
            if (!run->measured[p])
                continue;
            const double *r = run->all + p * NRES, *r2 = run->all2 + p * NRES;
            const int again = run->why[p] != RETEST_NO;
            printf("row: %d %d %s %s %.4f %.4f %.4f %.4f %.4f %.6g %.6g %.6g %.6g %.6g %d %d %d %d %.4f %.6g %d %d\n",
                   a, b, hk_host_of(hosts, a), hk_host_of(hosts, b), r[R_FIRST], r[R_LMEAN], r[R_LSD], r[R_LMIN],
                   r[R_LMAX], r[R_BMEAN], r[R_BMED], r[R_BSD], r[R_BMIN], r[R_BMAX], (int)r[R_ROUND],
                   latency_outlier(r, limit), bandwidth_outlier(r, limit), run->why[p], r2[R_LMEAN], r2[R_BMED],
                   again && latency_outlier(r2, limit), again && bandwidth_outlier(r2, limit));
        }
    print_matrix("latency matrix: lat_mean_us (one-way, microseconds)", run->all, R_LMEAN, 4);
    print_matrix("bandwidth matrix: bw_median_MBps (MB/s = 10^6 bytes/s)", run->all, R_BMED, 2);
}

int main(int argc, char **argv)
{
    hk_init(&argc, &argv, "pairs", usage);

    pair_options opt = {8, 1u << 20, 50, 10, 0};
    outlier_options rule = {RULE_NONE, -1.0, -1.0, CLUSTERKIT_BANDWIDTH_OF_MAX};
    const char *rounds_wanted = NULL, *pair_rounds = NULL;
    double pair_seconds = 0.0;
    parse_args(argc, argv, &opt, &rule, &rounds_wanted, &pair_seconds, &pair_rounds);
    if (hk_nranks < 2)
        hk_usage_error("pairs needs at least 2 ranks, got %d", hk_nranks);

    pairs_run run;
    alloc_run(&run, &opt);
    schedule sc;
    file_rounds fr;
    sc.slots = run.n + run.n % 2;
    sc.rounds = sc.slots - 1;
    sc.fr = NULL;
    if (pair_rounds) {
        char *every_host = allgather_hosts();
        read_pair_rounds(pair_rounds, every_host, run.n, &fr);
        free(every_host);
        sc.fr = &fr;
        sc.rounds = fr.rounds;
    }
    sc.in_sample = (unsigned char *)calloc((size_t)sc.rounds, 1);
    if (!sc.in_sample)
        hk_fatal("out of memory (%d rounds)", sc.rounds);
    sc.rounds_run = choose_rounds(rounds_wanted, sc.rounds, sc.in_sample);
    sc.per_round = sc.fr ? fr.widest : run.n / 2;
    sc.pairs_run = sc.fr ? fr.pairs : (long)sc.rounds_run * sc.per_round;
    print_schedule(&sc, &opt, pair_seconds);

    const double first_pass_seconds = first_pass(&run, &opt, &sc);
    const judgement j = second_pass(&run, &opt, &rule, sc.fr ? fr.reference : NULL);

    char *hosts = hk_gather_hosts();
    hk_print_preamble(hosts);
    if (hk_rank == 0) {
        print_header(&sc, first_pass_seconds, &opt, &rule, &j);
        print_rows(&run, hosts, &j.limit);
    }
    hk_print_bytes_sent(run.sent);
    hk_print_done();

    free(sc.in_sample);
    if (sc.fr)
        free_pair_rounds(&fr);
    free_run(&run);
    free(hosts);
    hk_finalize();
    return 0;
}
