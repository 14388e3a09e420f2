/*
 * pairs.c - latency and bandwidth of every pair of ranks (2 or more ranks).
 *
 * For every unordered pair (a < b), one pair after the other (the other
 * ranks wait in an MPI_Barrier, so pairs do not disturb each other):
 *   - latency: ping-pong of --lat-size bytes (default 8); the FIRST
 *     exchange of the pair is reported on its own (lat_first_us) and kept out
 *     of the statistics, followed by --samples (default 50) ping-pongs;
 *   - bandwidth: one untimed ping-pong of --bw-size bytes (default 1 MiB),
 *     then --bw-samples (default 10) timed ping-pongs; bw = size / one-way time.
 * Every sample is one ping-pong; one-way time = round trip / 2.
 *
 * The first pair (0,1) starts right after MPI_Init, with no communication
 * before it.  Later pairs run after barriers and so may find connections
 * already set up by them (depends on the MPI library).
 *
 * Output: "hpcnet kernel output format 1" (README.md), rows at the end,
 * followed by latency and bandwidth matrices as "# " comment lines.
 */
#include "hpcnet_kernel.h"

#define TAG_LAT 21
#define TAG_BW 22
#define NRES 9 /* results per pair, in the order of the row columns */
enum { R_FIRST, R_LMEAN, R_LSD, R_LMIN, R_LMAX, R_BMEAN, R_BSD, R_BMIN, R_BMAX };

static void usage(void)
{
    if (hk_rank != 0)
        return;
    printf("usage: pairs [options]   (run with 2 or more MPI ranks)\n"
           "Ping-pong latency and bandwidth of every pair of ranks, one pair at a time;\n"
           "output is hpcnet kernel output format 1 on stdout (see src/README.md).\n"
           "  --lat-size S      latency message size (default 8; K/M/G suffixes)\n"
           "  --bw-size S       bandwidth message size (default 1M; at least 1)\n"
           "  --samples N       latency samples per pair after the first (default 50)\n"
           "  --bw-samples N    bandwidth samples per pair (default 10)\n"
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
            int lo = a < b ? a : b, hi = a < b ? b : a;
            /* index of pair (lo, hi) in the order of the loop in main() */
            long p = (long)lo * (2L * n - lo - 1) / 2 + (hi - lo - 1);
            printf(" %10.*f", decimals, res[p * NRES + col]);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    hk_init("pairs");

    size_t lat_size = 8, bw_size = 1u << 20;
    long samples = 50, bw_samples = 10;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_flag(argv[i], "--help") || hk_flag(argv[i], "-h")) {
            usage();
            MPI_Finalize();
            return 0;
        } else if (hk_opt(argc, argv, &i, "--lat-size", &v)) {
            lat_size = hk_parse_size("--lat-size", v);
        } else if (hk_opt(argc, argv, &i, "--bw-size", &v)) {
            bw_size = hk_parse_size("--bw-size", v);
            if (bw_size == 0)
                hk_usage_error("--bw-size must be at least 1 byte");
        } else if (hk_opt(argc, argv, &i, "--samples", &v)) {
            samples = hk_parse_long("--samples", v, 1, HK_MAX_ITERS);
        } else if (hk_opt(argc, argv, &i, "--bw-samples", &v)) {
            bw_samples = hk_parse_long("--bw-samples", v, 1, HK_MAX_ITERS);
        } else {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
    if (hk_nranks < 2)
        hk_usage_error("pairs needs at least 2 ranks, got %d", hk_nranks);

    const int n = hk_nranks, me = hk_rank;
    const long npairs = (long)n * (n - 1) / 2;
    size_t maxsize = lat_size > bw_size ? lat_size : bw_size;
    unsigned char *sbuf = (unsigned char *)hk_alloc(maxsize, 0x11);
    unsigned char *rbuf = (unsigned char *)hk_alloc(maxsize, HK_POISON);
    long nsamp = samples > bw_samples ? samples : bw_samples;
    double *lat = (double *)calloc((size_t)nsamp, sizeof *lat);
    double *res = (double *)calloc((size_t)npairs * NRES, sizeof *res);
    double *all = me == 0 ? (double *)calloc((size_t)npairs * NRES, sizeof *all) : NULL;
    if (!lat || !res || (me == 0 && !all))
        hk_fatal("out of memory (%ld pairs)", npairs);

    unsigned long long sent = 0; /* payload bytes this rank sent */
    long p = 0;
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++, p++) {
            if (p > 0) /* the first pair starts without any prior communication */
                MPI_Barrier(MPI_COMM_WORLD);
            if (me != a && me != b)
                continue;
            int peer = me == a ? b : a, init = me == a;
            double first = 0.0;
            pingpong(sbuf, rbuf, (int)lat_size, peer, TAG_LAT, init, 1, &first);
            pingpong(sbuf, rbuf, (int)lat_size, peer, TAG_LAT, init, samples, lat);
            if (init) {
                hk_stats st = hk_compute_stats(lat, samples);
                double *r = res + p * NRES;
                r[R_FIRST] = first;
                r[R_LMEAN] = st.mean;
                r[R_LSD] = st.stddev;
                r[R_LMIN] = st.min;
                r[R_LMAX] = st.max;
            }
            double warm = 0.0;
            pingpong(sbuf, rbuf, (int)bw_size, peer, TAG_BW, init, 1, &warm);
            pingpong(sbuf, rbuf, (int)bw_size, peer, TAG_BW, init, bw_samples, lat);
            sent += (unsigned long long)(1 + samples) * lat_size + (unsigned long long)(1 + bw_samples) * bw_size;
            if (init) {
                for (long k = 0; k < bw_samples; k++)
                    lat[k] = hk_mbps((double)bw_size, lat[k]);
                hk_stats st = hk_compute_stats(lat, bw_samples);
                double *r = res + p * NRES;
                r[R_BMEAN] = st.mean;
                r[R_BSD] = st.stddev;
                r[R_BMIN] = st.min;
                r[R_BMAX] = st.max;
            }
        }
    }
    /* every pair's results live on its rank_a only (zeros elsewhere) */
    MPI_Reduce(res, all, (int)(npairs * NRES), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    char *hosts = hk_gather_hosts();
    hk_print_preamble(hosts);
    if (me == 0) {
        printf("pairs: %ld\n", npairs);
        printf("lat-size: %zu\n", lat_size);
        printf("bw-size: %zu\n", bw_size);
        printf("samples: %ld\n", samples);
        printf("bw-samples: %ld\n", bw_samples);
        printf("columns: rank_a rank_b host_a host_b lat_first_us lat_mean_us lat_stddev_us lat_min_us lat_max_us "
               "bw_mean_MBps bw_stddev_MBps bw_min_MBps bw_max_MBps\n");
        p = 0;
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++, p++) {
                const double *r = all + p * NRES;
                printf("row: %d %d %s %s %.4f %.4f %.4f %.4f %.4f %.6g %.6g %.6g %.6g\n", a, b, hk_host_of(hosts, a),
                       hk_host_of(hosts, b), r[R_FIRST], r[R_LMEAN], r[R_LSD], r[R_LMIN], r[R_LMAX], r[R_BMEAN],
                       r[R_BSD], r[R_BMIN], r[R_BMAX]);
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
