/*
 * p2p.c - point-to-point benchmark between ranks 0 and 1 (exactly 2 ranks).
 *
 * Modes (one per run, --mode):
 *   pingpong  rank 0 Send+Recv, rank 1 Recv+Send; sample = round trip / 2
 *   pingping  both ranks Isend+Recv+Wait at once; sample = one exchange
 *   bw        rank 0 streams a window of W Isend, rank 1 W Irecv, Waitall,
 *             then a 4-byte ack from rank 1; sample = window time / W
 *   bibw      both ranks post W Irecv + W Isend, Waitall;
 *             sample = window time / W; bandwidth counts both directions
 *
 * Output: "hpcnet kernel output format 1", see README.md.
 */
#include "hpcnet_kernel_options.h"
#include "hpcnet_kernel_sampling.h"

enum { PINGPONG, PINGPING, BW, BIBW, NMODES };
static const char *const mode_names[NMODES] = {"pingpong", "pingping", "bw", "bibw"};

#define TAG_DATA 11
#define TAG_ACK 12
#define TAG_FIRST 13
/* bw/bibw: every message of a window gets its own receive slot (no two
 * pending receives share memory) as long as the window fits in this many
 * bytes; beyond, slots are reused round-robin.  --recv-slots N caps the
 * slots: 1 is what osu_bw does (every receive of a window into one buffer,
 * which then stays in the cache; the MPI standard forbids pending receives
 * that share memory, so only for comparisons). */
#define RECV_REGION_CAP ((size_t)64 << 20)
#define MAX_WINDOW 65536L

typedef struct {
    int mode;
    int window;        /* --window: messages in flight per iteration (at most) */
    size_t window_bytes; /* --window-bytes: bytes in flight per iteration (0: no cap) */
    int recv_slots;    /* --recv-slots: at most this many receive slots (0: no cap) */
    double batch_us;   /* --batch-us: a sample lasts at least this long (0: one iteration) */
    int cur_window;    /* window used at the current size */
    int peer;
    unsigned char *sbuf;
    unsigned char *rbuf;
    size_t stride; /* distance between receive slots for the current size */
    int slots;     /* number of receive slots for the current size */
    MPI_Request *reqs;
    MPI_Status *stats;
    MPI_Status last; /* status of the last data message received */
    int last_slot;   /* receive slot that holds the last data message */
    unsigned char ack[4];
    unsigned long long bytes_sent; /* payload this rank sent so far */
} ctx_t;

static void usage(void)
{
    printf("usage: p2p [options]   (run with exactly 2 MPI ranks)\n"
           "Point-to-point benchmark between ranks 0 and 1; output is hpcnet kernel\n"
           "output format 1 on stdout (see src/README.md).\n"
           "  --mode M             pingpong (default), pingping, bw, bibw\n"
           "  --window W           messages in flight per window for bw/bibw (default 64)\n"
           "  --window-bytes B     at most B bytes in flight per window (0: no cap; default 0)\n"
           "  --recv-slots N       at most N receive buffers per window for bw/bibw (0: one per\n"
           "                       message, up to 64 MiB; 1: one buffer, as osu_bw; default 0)\n"
           "  --batch-us US        a sample times as many iterations as last US microseconds\n"
           "                       (the clock is read once per sample; default 10; 0: one)\n"
           HK_COMMON_USAGE);
}

static size_t slot_stride(size_t size)
{
    size_t s = size < 1 ? 1 : size;
    return (s + 63) / 64 * 64;
}

static int window_for(const ctx_t *c, size_t size);

static int slot_count(const ctx_t *c, size_t size)
{
    if (c->mode != BW && c->mode != BIBW)
        return 1;
    size_t fit = RECV_REGION_CAP / slot_stride(size);
    if (fit < 1)
        fit = 1;
    int w = window_for(c, size);
    if (c->recv_slots > 0 && c->recv_slots < w)
        w = c->recv_slots;
    return fit < (size_t)w ? (int)fit : w;
}

/* Messages in flight per bw/bibw iteration at 'size': --window, but at most
 * --window-bytes of payload (at least one message).  Large messages fill the
 * pipe with a few in flight; a 64 x 4 MiB window only makes samples long. */
static int window_for(const ctx_t *c, size_t size)
{
    if (c->window_bytes == 0 || size == 0)
        return c->window;
    size_t fit = c->window_bytes / size;
    if (fit < 1)
        fit = 1;
    return fit < (size_t)c->window ? (int)fit : c->window;
}

/* The timed loops of each mode: n samples of 'batch' iterations each at
 * 'size'; rank 0 records every sample, rank 1 only where it measures too. */
static void run_pingpong(ctx_t *c, int size, long n, long batch, double *samples)
{
    const int peer = c->peer;
    if (hk_rank == 0) {
        for (long k = 0; k < n; k++) {
            double t0 = MPI_Wtime();
            for (long b = 0; b < batch; b++) {
                MPI_Send(c->sbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
                MPI_Recv(c->rbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->last);
            }
            samples[k] = (MPI_Wtime() - t0) * 0.5e6 / (double)batch;
        }
    } else {
        for (long k = 0; k < n * batch; k++) {
            MPI_Recv(c->rbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->last);
            MPI_Send(c->sbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
        }
    }
    c->last_slot = 0;
}

static void run_pingping(ctx_t *c, int size, long n, long batch, double *samples)
{
    const int peer = c->peer;
    for (long k = 0; k < n; k++) {
        double t0 = MPI_Wtime();
        for (long b = 0; b < batch; b++) {
            MPI_Isend(c->sbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[0]);
            MPI_Recv(c->rbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->last);
            MPI_Wait(&c->reqs[0], MPI_STATUS_IGNORE);
        }
        samples[k] = (MPI_Wtime() - t0) * 1e6 / (double)batch;
    }
    c->last_slot = 0;
}

static void run_bw(ctx_t *c, int size, long n, long batch, double *samples)
{
    const int W = c->cur_window, peer = c->peer;
    if (hk_rank == 0) {
        for (long k = 0; k < n; k++) {
            double t0 = MPI_Wtime();
            for (long b = 0; b < batch; b++) {
                for (int w = 0; w < W; w++)
                    MPI_Isend(c->sbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[w]);
                /* c->stats, not MPI_STATUSES_IGNORE: with MPICH's mpi.h, gcc >= 11
                 * warns (-Wstringop-overflow) about the latter */
                MPI_Waitall(W, c->reqs, c->stats);
                MPI_Recv(c->ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            samples[k] = (MPI_Wtime() - t0) * 1e6 / ((double)W * (double)batch);
        }
    } else {
        const long iters = n * batch;
        for (long k = 0; k < iters; k++) {
            for (int w = 0; w < W; w++)
                MPI_Irecv(c->rbuf + (size_t)(w % c->slots) * c->stride, size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &c->reqs[w]);
            MPI_Waitall(W, c->reqs, c->stats);
            MPI_Send(c->ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
        if (iters > 0)
            c->last = c->stats[W - 1];
    }
    c->last_slot = (W - 1) % c->slots;
}

static void run_bibw(ctx_t *c, int size, long n, long batch, double *samples)
{
    const int W = c->cur_window, peer = c->peer;
    for (long k = 0; k < n; k++) {
        double t0 = MPI_Wtime();
        for (long b = 0; b < batch; b++) {
            for (int w = 0; w < W; w++)
                MPI_Irecv(c->rbuf + (size_t)(w % c->slots) * c->stride, size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &c->reqs[w]);
            for (int w = 0; w < W; w++)
                MPI_Isend(c->sbuf, size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &c->reqs[W + w]);
            MPI_Waitall(2 * W, c->reqs, c->stats);
        }
        samples[k] = (MPI_Wtime() - t0) * 1e6 / ((double)W * (double)batch);
    }
    if (n * batch > 0)
        c->last = c->stats[W - 1];
    c->last_slot = (W - 1) % c->slots;
}

/* n samples of 'batch' iterations each at 'size'; samples[k] receives the
 * mean time of one iteration of sample k in microseconds (per message for
 * bw/bibw, half the round trip for pingpong; rank 0 for every mode, rank 1
 * only for pingping/bibw, unused).  Returns this rank's wall time. */
static double run(ctx_t *c, int size, long n, long batch, double *samples)
{
    const int W = c->cur_window;
    const long iters = n * batch;
    double start = MPI_Wtime();
    switch (c->mode) {
    case PINGPONG:
        run_pingpong(c, size, n, batch, samples);
        break;
    case PINGPING:
        run_pingping(c, size, n, batch, samples);
        break;
    case BW:
        run_bw(c, size, n, batch, samples);
        break;
    case BIBW:
        run_bibw(c, size, n, batch, samples);
        break;
    }
    double elapsed = MPI_Wtime() - start;
    /* payload this rank sent per iteration */
    unsigned long long per_iter = (unsigned long long)size;
    if (c->mode == BW)
        per_iter = hk_rank == 0 ? (unsigned long long)W * (unsigned long long)size : sizeof c->ack;
    else if (c->mode == BIBW)
        per_iter = (unsigned long long)W * (unsigned long long)size;
    c->bytes_sent += (unsigned long long)iters * per_iter;
    return elapsed;
}

/* wall time of one iteration / sample value */
static double iter_factor(const ctx_t *c)
{
    switch (c->mode) {
    case PINGPONG:
        return 2.0; /* sample is half the round trip */
    case BW:
    case BIBW:
        return (double)c->cur_window; /* sample is per message */
    default:
        return 1.0;
    }
}

/* Does this rank receive payload in the current mode? */
static int receives_payload(const ctx_t *c)
{
    return c->mode != BW || hk_rank == 1;
}

/* Checks the last message received in the timed loop.  Returns 0 if good
 * (or nothing to check on this rank), 1 after printing an error. */
static int validate(ctx_t *c, size_t size)
{
    if (!receives_payload(c))
        return 0;
    int count = -1;
    MPI_Get_count(&c->last, MPI_BYTE, &count);
    if (count != (int)size) {
        fprintf(stderr,
                "error: validation failed: mode=%s size=%zu offset=count expected=%zu got=%d "
                "(received byte count, rank %d)\n",
                mode_names[c->mode], size, size, count, hk_rank);
        return 1;
    }
    const unsigned char *msg = c->rbuf + (size_t)c->last_slot * c->stride;
    size_t bad = hk_check_pattern(msg, size, (uint64_t)c->peer);
    if (bad != (size_t)-1) {
        fprintf(stderr,
                "error: validation failed: mode=%s size=%zu offset=%zu expected=0x%02x got=0x%02x "
                "(direction %d->%d, rank %d)\n",
                mode_names[c->mode], size, bad, hk_pattern(size, (uint64_t)c->peer, bad), msg[bad], c->peer,
                hk_rank, hk_rank);
        return 1;
    }
    return 0;
}

/* Untimed-by-the-statistics ping-pong used for the first exchanges;
 * returns the round trip in microseconds on rank 0. */
static double one_pingpong(ctx_t *c, int size)
{
    double t = 0.0;
    if (hk_rank == 0) {
        double t0 = MPI_Wtime();
        MPI_Send(c->sbuf, size, MPI_BYTE, 1, TAG_FIRST, MPI_COMM_WORLD);
        MPI_Recv(c->rbuf, size, MPI_BYTE, 1, TAG_FIRST, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t = (MPI_Wtime() - t0) * 1e6;
    } else {
        MPI_Recv(c->rbuf, size, MPI_BYTE, 0, TAG_FIRST, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(c->sbuf, size, MPI_BYTE, 0, TAG_FIRST, MPI_COMM_WORLD);
    }
    c->bytes_sent += (unsigned long long)size;
    return t;
}

/* The options: the mode and its own, and the common ones. */
static void parse_args(int argc, char **argv, hk_common *opt, ctx_t *c)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_opt(argc, argv, &i, "--mode", &v)) {
            int m;
            for (m = 0; m < NMODES; m++)
                if (strcmp(v, mode_names[m]) == 0)
                    break;
            if (m == NMODES)
                hk_usage_error("unknown mode '%s' (valid: pingpong, pingping, bw, bibw)", v);
            c->mode = m;
        } else if (hk_opt(argc, argv, &i, "--window", &v)) {
            c->window = (int)hc_parse_long("--window", v, 1, MAX_WINDOW);
        } else if (hk_opt(argc, argv, &i, "--window-bytes", &v)) {
            c->window_bytes = hk_parse_size("--window-bytes", v);
        } else if (hk_opt(argc, argv, &i, "--recv-slots", &v)) {
            c->recv_slots = (int)hc_parse_long("--recv-slots", v, 0, MAX_WINDOW);
        } else if (hk_opt(argc, argv, &i, "--batch-us", &v)) {
            c->batch_us = hk_parse_nonnegative("--batch-us", v, 1e6);
        } else if (!hk_common_option(opt, argc, argv, &i)) {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
}

/* Buffers: same amounts on both ranks, allocated and touched before the
 * first exchange so that neither rank is late because of page faults. */
static void alloc_buffers(ctx_t *c, const hk_sizes *sizes)
{
    size_t region = 0;
    for (int k = 0; k < sizes->n; k++) {
        size_t need = (size_t)slot_count(c, sizes->v[k]) * slot_stride(sizes->v[k]);
        if (need > region)
            region = need;
    }
    c->sbuf = (unsigned char *)hk_alloc(hk_sizes_max(sizes), 0x11);
    c->rbuf = (unsigned char *)hk_alloc(region, HK_POISON);
    c->cur_window = c->window;
    c->reqs = (MPI_Request *)calloc(2 * (size_t)c->window, sizeof *c->reqs);
    c->stats = (MPI_Status *)calloc(2 * (size_t)c->window, sizeof *c->stats);
    if (!c->reqs || !c->stats)
        hk_fatal("out of memory");
}

/* The header lines (rank 0 prints them), with the first two exchanges. */
static void print_header(const ctx_t *c, const hk_common *opt, const char *hosts, double first_us, double second_us)
{
    hk_print_preamble(hosts);
    if (hk_rank == 0) {
        printf("mode: %s\n", mode_names[c->mode]);
        if (c->mode == BW || c->mode == BIBW) {
            printf("window: %d\n", c->window);
            printf("window-bytes: %zu\n", c->window_bytes);
            printf("recv-slots: %d\n", c->recv_slots);
        }
        printf("bw-formula: %s\n", c->mode == BIBW ? "2*size_bytes/median_us" : "size_bytes/median_us");
        printf("batch-us: %g\n", c->batch_us);
    }
    hk_print_common(opt);
    if (hk_rank == 0) {
        printf("first-exchange-us: %.4f\n", first_us);
        printf("second-exchange-us: %.4f\n", second_us);
        printf("columns: size_bytes iterations min_us median_us mean_us max_us stddev_us p99_us "
               "bw_MBps bw_peak_MBps batch median_ci_pct\n");
    }
}

/* One row: size warmed up, sampled and, with --validate, checked.
 * Returns 1 when validated. */
static int measure_size(ctx_t *c, const hk_common *opt, size_t size, double *samples)
{
    c->cur_window = window_for(c, size);
    c->stride = slot_stride(size);
    c->slots = slot_count(c, size);
    if (opt->validate) {
        hk_fill_pattern(c->sbuf, size, (uint64_t)hk_rank);
        memset(c->rbuf, HK_POISON, (size_t)c->slots * c->stride);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long nwarm = hk_warmup_count(opt);
    run(c, (int)size, nwarm, 1, samples);
    /* wall time of one iteration from rank 0's warm-up samples */
    double per_iter = 0.0;
    if (hk_rank == 0)
        per_iter = hk_median(samples, nwarm) * 1e-6 * iter_factor(c);
    hk_sampling sm;
    hk_sampling_start(&sm, opt, per_iter, c->batch_us);
    MPI_Barrier(MPI_COMM_WORLD);
    while (sm.next > 0) {
        run(c, (int)size, sm.next, sm.batch, samples + sm.n);
        hk_sampling_more(&sm, opt, samples, hk_rank == 0);
    }
    int validated = 0;
    if (opt->validate) {
        hk_check_all(validate(c, size));
        validated = 1;
    }
    if (hk_rank == 0) {
        hc_stats st = hc_compute_stats(samples, sm.n);
        double bytes = (double)size * (c->mode == BIBW ? 2.0 : 1.0);
        printf("row: %zu %ld %.4f %.4f %.4f %.4f %.4f %.4f %.6g %.6g %ld %.3f\n", size, sm.n, st.min, st.median,
               st.mean, st.max, st.stddev, st.p99, hk_mbps(bytes, st.median), hk_mbps(bytes, st.min), sm.batch,
               sm.ci_pct);
    }
    return validated;
}

int main(int argc, char **argv)
{
    hk_init(&argc, &argv, "p2p", usage);

    hk_common opt;
    hk_common_defaults(&opt);
    ctx_t c;
    memset(&c, 0, sizeof c);
    c.mode = PINGPONG;
    c.window = 64;
    c.window_bytes = 0;
    c.batch_us = 10.0;
    parse_args(argc, argv, &opt, &c);
    hk_common_check(&opt);
    hk_sizes sizes = hk_make_sizes(&opt);
    if (hk_nranks != 2)
        hk_usage_error("p2p needs exactly 2 ranks, got %d", hk_nranks);
    c.peer = 1 - hk_rank;
    alloc_buffers(&c, &sizes);
    double *samples = hk_alloc_samples(&opt);

    /* The very first communication between the two ranks: nothing (no
     * barrier, no gather) precedes it, so it pays any lazy connection
     * set-up.  The second one is printed for comparison. */
    double first_us = one_pingpong(&c, (int)sizes.v[0]);
    double second_us = one_pingpong(&c, (int)sizes.v[0]);

    char *hosts = hk_gather_hosts();
    print_header(&c, &opt, hosts, first_us, second_us);
    int validated = 0;
    for (int k = 0; k < sizes.n; k++)
        validated += measure_size(&c, &opt, sizes.v[k], samples);
    hk_print_bytes_sent(c.bytes_sent);
    if (opt.validate && hk_rank == 0)
        printf("validation: passed %d\n", validated);
    hk_print_done();

    free(samples);
    free(c.stats);
    free(c.reqs);
    free(c.rbuf);
    free(c.sbuf);
    free(hosts);
    free(sizes.v);
    hk_finalize();
    return 0;
}
