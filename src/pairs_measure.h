/*
 * pairs_measure.h - how pairs.c measures its pairs, header-only: the rounds
 * of a round-robin, the ping-pongs of one pair, a round of disjoint pairs,
 * and the second pass over the pairs selected for a retest.
 */
#ifndef HPCNET_PAIRS_MEASURE_H
#define HPCNET_PAIRS_MEASURE_H

#include "pairs_outliers.h"

#include <time.h>

#define TAG_LAT 21
#define TAG_BW 22

/* Partner of rank i in round r of a round-robin over m (even) slots, by the
 * circle method: slot m-1 stays, the others rotate.  A partner >= the number
 * of ranks is the idle slot of an odd count. */
static inline int round_partner(int i, int r, int m)
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

/* n ping-pongs between me and peer; 'initiator' sends first and records
 * one-way times (round trip / 2, microseconds) into out[]. */
static inline void pingpong(unsigned char *sbuf, unsigned char *rbuf, int size, int peer, int tag, int initiator,
                            long n, double *out)
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
static inline void sleeping_barrier(void)
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

/* Latency then bandwidth of the pair (me, peer) in round 'round'; the lower
 * rank records the results.  Returns the payload bytes this rank sent. */
static inline unsigned long long measure_pair(const pair_buffers *b, const pair_options *o, int me, int peer, int round)
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
static inline unsigned long long measure_round(const pair_buffers *b, const pair_options *o, const int *lo,
                                               const int *hi, int count, int round)
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

/* Measures the pairs 'why' selects in greedy rounds of disjoint pairs (in
 * pair order), a barrier before each.  Returns the rounds run. */
static inline int retest_pass(const pair_buffers *b, const pair_options *o, const unsigned char *why,
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

#endif /* HPCNET_PAIRS_MEASURE_H */
