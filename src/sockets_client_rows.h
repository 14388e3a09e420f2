/*
 * sockets_client_rows.h - the sockets kernel client's results
 * (sockets_client_rows.c): the rows of the table, the best size, round-trip
 * samples.
 */
#ifndef HPCNET_SOCKETS_CLIENT_ROWS_H
#define HPCNET_SOCKETS_CLIENT_ROWS_H
#include "sockets_options.h"

struct rowbuf {
    int n;
    char rows[MAX_ROWS][512];
    char windows[MAX_SIZES][512]; /* --windows > 1: every window's rate, per size */
    double best;      /* summary: best value and its size */
    uint64_t best_size;
    double first_rtt; /* rr: first transaction of the first size, us */
    int validated;
};
struct samples {
    double *v;
    long n, cap;
};

double mbps(uint64_t bytes, double secs);
void stream_best(struct rowbuf *rb, size_t size, double rate);
void samples_push(struct samples *s, double x);
void rr_done(struct rowbuf *rb, const struct opts *o, size_t size, double first_us, double median_us);

#endif
