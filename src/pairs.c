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
 * Output: "hpcnet kernel output format 1" (README.md), rows at the end,
 * followed by latency and bandwidth matrices as "# " comment lines.
 */
#include "hpcnet_kernel.h"

#include <time.h>

#define TAG_LAT 21
#define TAG_BW 22
#define NRES 10 /* results per pair, in the order of the row columns */
enum { R_FIRST, R_LMEAN, R_LSD, R_LMIN, R_LMAX, R_BMEAN, R_BSD, R_BMIN, R_BMAX, R_ROUND };

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
} pair_options;

typedef struct {
    unsigned char *sbuf, *rbuf;
    double *samples; /* scratch, max(samples, bw_samples) */
    double *res;     /* NRES per pair */
} pair_buffers;

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
        r[R_BSD] = st.stddev;
        r[R_BMIN] = st.min;
        r[R_BMAX] = st.max;
        r[R_ROUND] = round;
    }
    return (unsigned long long)(1 + o->samples) * o->lat_size + (unsigned long long)(1 + o->bw_samples) * o->bw_size;
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
            printf(" %10.*f", decimals, res[p * NRES + col]);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    hk_init(&argc, &argv, "pairs", usage);

    pair_options opt = {8, 1u << 20, 50, 10};
    int one_at_a_time = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_flag(argv[i], "--one-pair-at-a-time")) {
            one_at_a_time = 1;
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
        } else {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
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
    double *all = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *all) : NULL;
    if (!lat || !res || (me == 0 && !all))
        hk_fatal("out of memory (%ld pairs)", npairs);

    unsigned long long sent = 0; /* payload bytes this rank sent */
    const int slots = n + n % 2, rounds = slots - 1;
    pair_buffers buf = {sbuf, rbuf, lat, res};
    for (int round = 0; round < rounds; round++) {
        if (round > 0) /* the first round starts without any prior communication */
            MPI_Barrier(MPI_COMM_WORLD);
        int peer = round_partner(me, round, slots);
        if (!one_at_a_time) {
            if (peer < n) /* else this rank sits this round out */
                sent += measure_pair(&buf, &opt, me, peer, round);
            continue;
        }
        /* turns in the order of each pair's lower rank */
        for (int lo = 0; lo < n; lo++) {
            int hi = round_partner(lo, round, slots);
            if (hi <= lo || hi >= n)
                continue;
            if (me == lo || me == hi)
                sent += measure_pair(&buf, &opt, me, peer, round);
            sleeping_barrier();
        }
    }
    /* every pair's results live on its rank_a only (zeros elsewhere) */
    MPI_Reduce(res, all, (int)(npairs * NRES), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    char *hosts = hk_gather_hosts();
    hk_print_preamble(hosts);
    if (me == 0) {
        printf("pairs: %ld\n", npairs);
        printf("rounds: %d\n", rounds);
        printf("schedule: %s\n", one_at_a_time ? "one-pair-at-a-time" : "concurrent");
        printf("lat-size: %zu\n", opt.lat_size);
        printf("bw-size: %zu\n", opt.bw_size);
        printf("samples: %ld\n", opt.samples);
        printf("bw-samples: %ld\n", opt.bw_samples);
        printf("columns: rank_a rank_b host_a host_b lat_first_us lat_mean_us lat_stddev_us lat_min_us lat_max_us "
               "bw_mean_MBps bw_stddev_MBps bw_min_MBps bw_max_MBps round\n");
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++) {
                const double *r = all + pair_index(a, b, n) * NRES;
                printf("row: %d %d %s %s %.4f %.4f %.4f %.4f %.4f %.6g %.6g %.6g %.6g %d\n", a, b,
                       hk_host_of(hosts, a), hk_host_of(hosts, b), r[R_FIRST], r[R_LMEAN], r[R_LSD], r[R_LMIN],
                       r[R_LMAX], r[R_BMEAN], r[R_BSD], r[R_BMIN], r[R_BMAX], (int)r[R_ROUND]);
            }
        print_matrix("latency matrix: lat_mean_us (one-way, microseconds)", all, R_LMEAN, 4);
        print_matrix("bandwidth matrix: bw_mean_MBps (MB/s = 10^6 bytes/s)", all, R_BMEAN, 2);
    }
    hk_print_bytes_sent(sent);
    hk_print_done();

    free(all);
    free(res);
    free(lat);
    free(rbuf);
    free(sbuf);
    free(hosts);
    hk_finalize();
    return 0;
}
