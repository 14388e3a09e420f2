/*
 * collectives.c - collective operations over MPI_COMM_WORLD (2 or more ranks).
 *
 * Per operation and size: warm-up, then timed iterations; before every
 * iteration an MPI_Barrier (not timed) lines the ranks up.  Each rank keeps
 * its per-iteration samples; the row reports, over the ranks, the min / avg /
 * max of the per-rank mean (like IMB's t_min/t_avg/t_max) and of the per-rank
 * median.
 *
 * What "size" means (IMB conventions; see README.md):
 *   barrier         no payload, size 0 only
 *   bcast           bytes broadcast from root 0 (MPI_BYTE)
 *   reduce          bytes of the MPI_FLOAT vector each rank contributes
 *   allreduce       bytes of the MPI_FLOAT vector each rank contributes
 *   gather          bytes each rank sends to root 0 (root gets size*ranks)
 *   allgather       bytes each rank contributes (each gets size*ranks)
 *   alltoall        bytes each rank sends to each rank (size*ranks in total)
 *   reduce_scatter  bytes of the whole MPI_FLOAT vector on each rank
 *                   (MPI_Reduce_scatter_block); each rank receives
 *                   floor(size/4/ranks) floats
 * Reductions use MPI_FLOAT and MPI_SUM; their sizes must be multiples of 4
 * bytes (at least one float per block), others are skipped with a comment.
 */
#include "hpcnet_kernel_options.h"
#include "hpcnet_kernel_sampling.h"

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, ALLGATHER, ALLTOALL, REDUCE_SCATTER, NOPS };
static const char *const op_names[NOPS] = {"barrier", "bcast",     "reduce",   "allreduce",
                                           "gather",  "allgather", "alltoall", "reduce_scatter"};

#define VALID_OPS "barrier, bcast, reduce, allreduce, gather, allgather, alltoall, reduce_scatter"
#define ROOT 0

typedef struct {
    unsigned char *sbuf;
    unsigned char *rbuf;
} bufs_t;

static void usage(void)
{
    printf("usage: collectives [options]   (run with 2 or more MPI ranks)\n"
           "Collective operations over all ranks; output is hpcnet kernel output\n"
           "format 1 on stdout (see src/README.md).\n"
           "  --op A,B,...         operations (default all): " VALID_OPS "\n" HK_COMMON_USAGE);
}

static int is_reduction(int op)
{
    return op == REDUCE || op == ALLREDUCE || op == REDUCE_SCATTER;
}

/* Count argument of the MPI call for 'size' (-1: size not usable). */
static long op_count(int op, size_t size)
{
    switch (op) {
    case BARRIER:
        return size == 0 ? 0 : -1;
    case REDUCE:
    case ALLREDUCE:
        return (size >= 4 && size % 4 == 0) ? (long)(size / 4) : -1;
    case REDUCE_SCATTER: {
        long per_rank = (long)(size / 4) / hk_nranks;
        return (size % 4 == 0 && per_rank > 0) ? per_rank : -1;
    }
    default:
        return (long)size;
    }
}

/* Bytes needed in the send / receive buffer of 'op' at 'size'. */
static void op_bytes(int op, size_t size, size_t *sneed, size_t *rneed)
{
    size_t p = (size_t)hk_nranks;
    long cnt = op_count(op, size);
    *sneed = *rneed = 0;
    if (cnt < 0)
        return;
    switch (op) {
    case BCAST:
        *rneed = size;
        break;
    case REDUCE:
    case ALLREDUCE:
        *sneed = *rneed = size;
        break;
    case GATHER:
    case ALLGATHER:
        *sneed = size;
        *rneed = size * p;
        break;
    case ALLTOALL:
        *sneed = *rneed = size * p;
        break;
    case REDUCE_SCATTER:
        *sneed = (size_t)cnt * 4u * p;
        *rneed = (size_t)cnt * 4u;
        break;
    default:
        break;
    }
}

static void call_op(int op, const bufs_t *b, long cnt)
{
    int c = (int)cnt;
    switch (op) {
    case BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(b->rbuf, c, MPI_BYTE, ROOT, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(b->sbuf, b->rbuf, c, MPI_FLOAT, MPI_SUM, ROOT, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(b->sbuf, b->rbuf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case GATHER:
        MPI_Gather(b->sbuf, c, MPI_BYTE, b->rbuf, c, MPI_BYTE, ROOT, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(b->sbuf, c, MPI_BYTE, b->rbuf, c, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        MPI_Alltoall(b->sbuf, c, MPI_BYTE, b->rbuf, c, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(b->sbuf, b->rbuf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
}

/* n iterations of barrier + op; samples[k] = op time in microseconds.
 * With 'with_barrier' the sample includes the preceding barrier (used for
 * the warm-up, to estimate the wall time of one iteration). */
static void run(int op, const bufs_t *b, long cnt, long n, double *samples, int with_barrier)
{
    for (long k = 0; k < n; k++) {
        double tb = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call_op(op, b, cnt);
        double t1 = MPI_Wtime();
        samples[k] = (t1 - (with_barrier ? tb : t0)) * 1e6;
    }
}

/* ---- validation --------------------------------------------------------- */

static uint64_t tag_of(int op, int src, int dst)
{
    return ((uint64_t)(op + 1) << 48) ^ ((uint64_t)(unsigned)src << 24) ^ (uint64_t)(unsigned)dst;
}

/* value rank r contributes at vector index j (small integers: sums exact) */
static float red_value(int r, long j)
{
    return (float)((r % 5) + 1 + (int)(j % 7));
}

static double red_expected(long j)
{
    long s = 0;
    for (int r = 0; r < hk_nranks; r++)
        s += (r % 5) + 1 + (int)(j % 7);
    return (double)s;
}

static int report_bytes(int op, size_t size, int block, size_t off, unsigned char want, unsigned char got)
{
    fprintf(stderr,
            "error: validation failed: op=%s size=%zu rank=%d block=%d offset=%zu expected=0x%02x got=0x%02x\n",
            op_names[op], size, hk_rank, block, off, want, got);
    return 1;
}

/* v[k] holds the sum at vector index first_index + k */
static int check_floats(int op, size_t size, const float *v, long n, long first_index)
{
    for (long k = 0; k < n; k++) {
        double want = red_expected(first_index + k);
        if ((double)v[k] != want) {
            fprintf(stderr,
                    "error: validation failed: op=%s size=%zu rank=%d element=%ld expected=%.1f got=%.9g\n",
                    op_names[op], size, hk_rank, first_index + k, want, (double)v[k]);
            return 1;
        }
    }
    return 0;
}

/* One untimed call with known data; returns 1 (after printing) on error. */
static int validate(int op, const bufs_t *b, size_t size, long cnt)
{
    const int p = hk_nranks, me = hk_rank;
    size_t sneed, rneed;
    op_bytes(op, size, &sneed, &rneed);
    memset(b->rbuf, HK_POISON, rneed);
    float *sf = (float *)(void *)b->sbuf;
    const float *rf = (const float *)(void *)b->rbuf;
    size_t bad;

    switch (op) {
    case BCAST:
        if (me == ROOT)
            hk_fill_pattern(b->rbuf, size, tag_of(op, ROOT, 0));
        call_op(op, b, cnt);
        bad = hk_check_pattern(b->rbuf, size, tag_of(op, ROOT, 0));
        if (bad != (size_t)-1)
            return report_bytes(op, size, ROOT, bad, hk_pattern(size, tag_of(op, ROOT, 0), bad), b->rbuf[bad]);
        return 0;
    case REDUCE:
    case ALLREDUCE:
        for (long j = 0; j < cnt; j++)
            sf[j] = red_value(me, j);
        call_op(op, b, cnt);
        if (op == REDUCE && me != ROOT)
            return 0;
        return check_floats(op, size, rf, cnt, 0);
    case REDUCE_SCATTER:
        for (long j = 0; j < cnt * p; j++)
            sf[j] = red_value(me, j);
        call_op(op, b, cnt);
        return check_floats(op, size, rf, cnt, cnt * me);
    case GATHER:
    case ALLGATHER:
        hk_fill_pattern(b->sbuf, size, tag_of(op, me, 0));
        call_op(op, b, cnt);
        if (op == GATHER && me != ROOT)
            return 0;
        for (int r = 0; r < p; r++) {
            const unsigned char *blk = b->rbuf + (size_t)r * size;
            bad = hk_check_pattern(blk, size, tag_of(op, r, 0));
            if (bad != (size_t)-1)
                return report_bytes(op, size, r, bad, hk_pattern(size, tag_of(op, r, 0), bad), blk[bad]);
        }
        return 0;
    case ALLTOALL:
        for (int d = 0; d < p; d++)
            hk_fill_pattern(b->sbuf + (size_t)d * size, size, tag_of(op, me, d));
        call_op(op, b, cnt);
        for (int s = 0; s < p; s++) {
            const unsigned char *blk = b->rbuf + (size_t)s * size;
            bad = hk_check_pattern(blk, size, tag_of(op, s, me));
            if (bad != (size_t)-1)
                return report_bytes(op, size, s, bad, hk_pattern(size, tag_of(op, s, me), bad), blk[bad]);
        }
        return 0;
    default:
        return 0;
    }
}

/* ---- main --------------------------------------------------------------- */

static int parse_ops(const char *list, int *ops)
{
    int n = 0;
    const char *p = list;
    char tok[64];
    if (*p == '\0')
        hk_usage_error("--op: empty list");
    while (1) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= sizeof tok)
            len = sizeof tok - 1;
        memcpy(tok, p, len);
        tok[len] = '\0';
        int op;
        for (op = 0; op < NOPS; op++)
            if (strcmp(tok, op_names[op]) == 0)
                break;
        if (op == NOPS)
            hk_usage_error("unknown operation '%s' (valid: " VALID_OPS ")", tok);
        int dup = 0;
        for (int k = 0; k < n; k++)
            dup |= ops[k] == op;
        if (!dup)
            ops[n++] = op;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

/* The options: the operations (all without --op) and the common ones. */
static void parse_args(int argc, char **argv, hk_common *opt, int *ops, int *nops)
{
    const char *oplist = NULL;
    *nops = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (hk_opt(argc, argv, &i, "--op", &v) || hk_opt(argc, argv, &i, "--ops", &v)) {
            oplist = v;
        } else if (!hk_common_option(opt, argc, argv, &i)) {
            hk_usage_error("unknown option '%s'", argv[i]);
        }
    }
    if (oplist) {
        *nops = parse_ops(oplist, ops);
    } else {
        for (int op = 0; op < NOPS; op++)
            ops[(*nops)++] = op;
    }
}

/* Send and receive buffers for the largest need of any operation and size. */
static bufs_t alloc_buffers(const int *ops, int nops, const hk_sizes *sizes)
{
    size_t smax = 0, rmax = 0;
    for (int o = 0; o < nops; o++)
        for (int k = 0; k < sizes->n; k++) {
            size_t sn, rn;
            op_bytes(ops[o], sizes->v[k], &sn, &rn);
            smax = sn > smax ? sn : smax;
            rmax = rn > rmax ? rn : rmax;
        }
    bufs_t b;
    b.sbuf = (unsigned char *)hk_alloc(smax, 0x11);
    b.rbuf = (unsigned char *)hk_alloc(rmax, HK_POISON);
    return b;
}

/* The header lines (rank 0 prints them). */
static void print_header(const hk_common *opt, const int *ops, int nops, const char *hosts)
{
    hk_print_preamble(hosts);
    if (hk_rank == 0) {
        printf("ops: ");
        for (int o = 0; o < nops; o++)
            printf("%s%s", o ? "," : "", op_names[ops[o]]);
        printf("\n");
        printf("root: %d\n", ROOT);
        printf("reduction: MPI_FLOAT MPI_SUM\n");
    }
    hk_print_common(opt);
    if (hk_rank == 0)
        printf("columns: op size_bytes count iterations t_min_us t_avg_us t_max_us med_min_us med_avg_us "
               "med_max_us median_ci_pct\n");
}

/* The count of op at size, or -1 when op cannot run it (a comment says so);
 * the send buffer of a reduction filled with ordinary float values (no
 * denormals/NaN). */
static long prepare_size(int op, size_t size, const bufs_t *b)
{
    long cnt = op_count(op, size);
    if (cnt < 0) {
        if (hk_rank == 0)
            printf("# %s %zu: skipped, %s\n", op_names[op], size,
                   op == REDUCE_SCATTER ? "needs a multiple of 4 bytes and >= 1 float per rank"
                                        : "needs a multiple of 4 bytes (MPI_FLOAT), at least 4");
        return -1;
    }
    if (op == REDUCE_SCATTER && (size_t)cnt * 4u * (size_t)hk_nranks != size && hk_rank == 0)
        printf("# reduce_scatter %zu: count %ld floats per rank, so %zu bytes are reduced\n", size, cnt,
               (size_t)cnt * 4u * (size_t)hk_nranks);
    if (is_reduction(op)) {
        size_t sn, rn;
        op_bytes(op, size, &sn, &rn);
        float *sf = (float *)(void *)b->sbuf;
        for (size_t j = 0; j < sn / 4; j++)
            sf[j] = 1.0f;
    }
    return cnt;
}

/* One row: op at size warmed up, sampled, its times reduced over the ranks
 * and, with --validate, its result checked.  Returns 1 when validated. */
static int measure_size(const hk_common *opt, int op, size_t size, long cnt, const bufs_t *b, double *samples)
{
    long nwarm = hk_warmup_count(opt);
    run(op, b, cnt, nwarm, samples, 1);
    hk_sampling sampling;
    hk_sampling_start(&sampling, opt, hk_median(samples, nwarm) * 1e-6, 0.0);
    while (sampling.next > 0) {
        run(op, b, cnt, sampling.next, samples + sampling.n, 0);
        hk_sampling_more(&sampling, opt, samples, 1);
    }
    long iters = sampling.n;

    hc_stats st = hc_compute_stats(samples, iters);
    double in[2] = {st.mean, st.median}, mn[2], mx[2], sm[2];
    MPI_Reduce(in, mn, 2, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(in, mx, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(in, sm, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    int validated = 0;
    if (opt->validate && op != BARRIER) {
        hk_check_all(validate(op, b, size, cnt));
        validated = 1;
    }
    if (hk_rank == 0) {
        double avg[2];
        for (int q = 0; q < 2; q++) { /* keep min <= avg <= max despite rounding */
            avg[q] = sm[q] / hk_nranks;
            avg[q] = avg[q] < mn[q] ? mn[q] : (avg[q] > mx[q] ? mx[q] : avg[q]);
        }
        printf("row: %s %zu %ld %ld %.4f %.4f %.4f %.4f %.4f %.4f %.3f\n", op_names[op], size, cnt, iters, mn[0],
               avg[0], mx[0], mn[1], avg[1], mx[1], sampling.ci_pct);
    }
    return validated;
}

/* Every size of op (barrier: one row, size 0, whatever the sizes).
 * Returns the number of rows validated. */
static int measure_op(const hk_common *opt, int op, const hk_sizes *sizes, const bufs_t *b, double *samples)
{
    if (op == BARRIER)
        return sizes->n > 0 ? measure_size(opt, op, 0, 0, b, samples) : 0;
    int validated = 0;
    for (int k = 0; k < sizes->n; k++) {
        long cnt = prepare_size(op, sizes->v[k], b);
        if (cnt >= 0)
            validated += measure_size(opt, op, sizes->v[k], cnt, b, samples);
    }
    return validated;
}

int main(int argc, char **argv)
{
    hk_init(&argc, &argv, "collectives", usage);

    hk_common opt;
    hk_common_defaults(&opt);
    int ops[NOPS], nops = 0;
    parse_args(argc, argv, &opt, ops, &nops);
    hk_common_check(&opt);
    hk_sizes sizes = hk_make_sizes(&opt);
    if (hk_nranks < 2)
        hk_usage_error("collectives needs at least 2 ranks, got %d", hk_nranks);

    bufs_t b = alloc_buffers(ops, nops, &sizes);
    double *samples = hk_alloc_samples(&opt);
    char *hosts = hk_gather_hosts();
    print_header(&opt, ops, nops, hosts);

    int validated = 0;
    for (int o = 0; o < nops; o++)
        validated += measure_op(&opt, ops[o], &sizes, &b, samples);
    if (opt.validate && hk_rank == 0)
        printf("validation: passed %d\n", validated);
    hk_print_done();

    free(samples);
    free(b.rbuf);
    free(b.sbuf);
    free(hosts);
    free(sizes.v);
    hk_finalize();
    return 0;
}
