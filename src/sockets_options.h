/*
 * sockets_options.h - the sockets kernel's command line (sockets_options.c):
 * the options, their parsing and the list of sizes they give.
 */
#ifndef HPCNET_SOCKETS_OPTIONS_H
#define HPCNET_SOCKETS_OPTIONS_H
#include "sockets_common.h"

extern const char *const test_names[T_COUNT];

struct opts {
    int role;
    int test;
    const char *sizes_arg; /* --sizes list, NULL = range */
    uint64_t min_size, max_size;
    int have_min, have_max;
    long duration_ms;
    long windows; /* tcp streams: windows per size, the median one reported */
    long iters; /* 0 = adaptive */
    long warmup;
    long sndbuf, rcvbuf; /* 0 = system default (autotuning) */
    long recv_size;      /* 0 = max(size, 128K) */
    long port;
    const char *bind_addr;
    const char *server_addr;
    const char *rendezvous;
    double connect_timeout; /* s */
    double timeout;         /* s */
    double rates[MAX_RATES]; /* udp_stream: Mbit/s per run, ascending, 0 (unpaced) last */
    int nrates;
    const char *paced_sizes_arg; /* udp_stream: sizes run at the paced rates, NULL = all */
    long udp_timeout_ms;
    int nodelay;
    int validate;
    int verbose;
    /* which test-specific options were given (validated against --test) */
    int have_iters, have_warmup, have_rate, have_paced_sizes, have_udp_timeout, have_windows;
};

double opt_double(const char *opt, const char *s, double lo, double hi, int allow_zero);
void usage(void);
void parse_args(int argc, char **argv, struct opts *o);
int cmp_u64(const void *a, const void *b);
int make_sizes(const struct opts *o, uint64_t *v);
int parse_size_list(const char *opt, const char *arg, uint64_t *v);

#endif
