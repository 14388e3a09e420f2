/*
 * hpcnet_kernel.h - shared, header-only helpers of the hpcnet MPI kernels
 * (p2p.c, collectives.c, pairs.c): start-up, errors, memory, payload
 * patterns and the lines of the "hpcnet kernel output format 1" every kernel
 * prints.  The command line is in hpcnet_kernel_options.h, the sampling of a
 * size and its statistics in hpcnet_kernel_sampling.h; both build on this one.
 *
 * The output format is documented in src/README.md and parsed by
 * hpcnet/parsers/kernel.py.  Keep the three in sync.
 *
 * Include this header FIRST in every kernel (it sets _POSIX_C_SOURCE for
 * posix_memalign/sysconf under -std=c11).
 *
 * Conventions:
 *   - only rank 0 writes to stdout; stdout is line buffered, so every line
 *     reaches the launcher in one write() and is not split by MPI noise;
 *   - errors: "error: <message>" on stderr;
 *     exit code 2 = bad usage (bad option, wrong number of ranks),
 *     exit code 1 = run-time failure (validation, allocation, MPI error).
 */
#ifndef HPCNET_KERNEL_H
#define HPCNET_KERNEL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <mpi.h>

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void hk_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define HC_USAGE_ERROR hk_usage_error
#include "hpcnet_common.h"

#define HK_FORMAT_VERSION 1
#define HK_EXIT_USAGE 2
#define HK_EXIT_FAILURE 1
#define HK_MAX_ITERS 10000000L        /* bounds the per-size sample array (80 MB) */
#define HK_POISON 0xEEu               /* receive buffers are filled with this byte */

/* ------------------------------------------------------------------------ */
/* process-wide state                                                        */

static int hk_rank = 0;   /* rank in MPI_COMM_WORLD */
static int hk_nranks = 1; /* size of MPI_COMM_WORLD */
static const char *hk_kernel_name = "kernel";
/* seconds MPI_Finalize may take (see hk_finalize) */
#define HK_FINALIZE_TIMEOUT_ENV "HPCNET_FINALIZE_TIMEOUT_S"
static unsigned hk_finalize_timeout_s = 20;

static inline void hk_library_version(char *out, size_t outlen);

/* Call right after MPI_Init. */
/* MPI_Init, the kernel's identity lines, and --help / -h (an argument of
 * its own anywhere on the line): usage() on rank 0, then exit 0. */
static inline void hk_init(int *argc, char ***argv, const char *kernel_name, void (*usage)(void))
{
    MPI_Init(argc, argv);
    hk_kernel_name = kernel_name;
    MPI_Comm_rank(MPI_COMM_WORLD, &hk_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &hk_nranks);
    /* one write() per line: the launcher forwards whole lines */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Identify the kernel and the MPI library it really loaded before
     * anything can fail: a binary run by another MPI's launcher (e.g. as
     * two 1-rank jobs) is then reported as such, not by its symptom. */
    if (hk_rank == 0) {
        char lib[4 * MPI_MAX_LIBRARY_VERSION_STRING];
        hk_library_version(lib, sizeof lib);
        printf("hpcnet-kernel: %s %d\n", hk_kernel_name, HK_FORMAT_VERSION);
        printf("mpi-library: %s\n", lib);
        printf("compiler: %s\n", HC_COMPILER);
    }
    const char *finalize_timeout = getenv(HK_FINALIZE_TIMEOUT_ENV);
    if (finalize_timeout && *finalize_timeout)
        hk_finalize_timeout_s = (unsigned)hc_parse_long(HK_FINALIZE_TIMEOUT_ENV, finalize_timeout, 1, 3600);
    for (int i = 1; i < *argc; i++)
        if (strcmp((*argv)[i], "--help") == 0 || strcmp((*argv)[i], "-h") == 0) {
            if (hk_rank == 0)
                usage();
            MPI_Finalize();
            exit(0);
        }
}

/* ------------------------------------------------------------------------ */
/* errors                                                                    */

/* Bad usage detected identically by every rank (argument parsing is
 * deterministic): rank 0 reports it, everybody finalizes and exits 2. */
/* "error: <message> (see <kernel> --help)" for bad usage, or
 * "error: <message> (rank N)" for a failure, on stderr, flushed. */
static inline void hk_report(const char *fmt, va_list ap, int usage)
{
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (usage)
        fprintf(stderr, " (see %s --help)\n", hk_kernel_name);
    else
        fprintf(stderr, " (rank %d)\n", hk_rank);
    fflush(stderr);
}

static inline void hk_usage_error(const char *fmt, ...)
{
    if (hk_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        hk_report(fmt, ap, 1);
        va_end(ap);
    }
    MPI_Finalize();
    exit(HK_EXIT_USAGE);
}

/* Failure on one rank that the others may not know about: abort the job. */
static inline void hk_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hk_report(fmt, ap, 0);
    va_end(ap);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, HK_EXIT_FAILURE);
    exit(HK_EXIT_FAILURE); /* not reached */
}

/* Collective error check: every rank passes its own 'failed' flag (the
 * failing rank has already printed its "error: ..." line).  If any rank
 * failed, everyone finalizes and exits 1. */
static inline void hk_check_all(int failed)
{
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        fflush(stdout);
        fflush(stderr);
        MPI_Finalize();
        exit(HK_EXIT_FAILURE);
    }
}

/* ------------------------------------------------------------------------ */
/* memory                                                                    */

/* Page-aligned allocation of at least one page, touched (filled with
 * 'fill') so that page faults do not land in the timed loops. */
static inline void *hk_alloc(size_t bytes, unsigned char fill)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096u;
    size_t n = bytes < align ? align : (bytes + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0 || p == NULL)
        hk_fatal("cannot allocate %zu bytes (reduce --max-size?)", n);
    memset(p, fill, n);
    return p;
}

/* ------------------------------------------------------------------------ */
/* payload patterns                                                          */

/* Byte expected at 'off' of a message of 'size' bytes sent under 'tag'
 * (the kernels encode direction / origin / destination in 'tag').  Never
 * equal to HK_POISON, so an unwritten receive byte is always detected. */
static inline unsigned char hk_pattern(size_t size, uint64_t tag, size_t off)
{
    uint64_t x = (uint64_t)off * 0x9E3779B97F4A7C15ull;
    x ^= ((uint64_t)size << 21) ^ (tag * 0xBF58476D1CE4E5B9ull) ^ 0x2545F4914F6CDD1Dull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    unsigned char b = (unsigned char)(x >> 56);
    return b == HK_POISON ? (unsigned char)(b ^ 0x5Au) : b;
}

static inline void hk_fill_pattern(unsigned char *buf, size_t size, uint64_t tag)
{
    for (size_t k = 0; k < size; k++)
        buf[k] = hk_pattern(size, tag, k);
}

/* Returns the first offset that differs from the pattern, or (size_t)-1. */
static inline size_t hk_check_pattern(const unsigned char *buf, size_t size, uint64_t tag)
{
    for (size_t k = 0; k < size; k++)
        if (buf[k] != hk_pattern(size, tag, k))
            return k;
    return (size_t)-1;
}

/* ------------------------------------------------------------------------ */
/* output                                                                    */

/* Host name usable as one whitespace-free token. */
static inline void hk_sanitize_token(char *s)
{
    for (char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            *p = '_';
    if (*s == '\0')
        strcpy(s, "?");
}

/* MPI_Get_library_version on one line: lines joined with " ; ", runs of
 * blanks (spaces, tabs, CR) collapsed to one space, pieces trimmed. */
static inline void hk_library_version(char *out, size_t outlen)
{
    char raw[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    memset(raw, 0, sizeof raw);
    MPI_Get_library_version(raw, &len);
    if (len < 0)
        len = 0;
    if (len > MPI_MAX_LIBRARY_VERSION_STRING)
        len = MPI_MAX_LIBRARY_VERSION_STRING;
    raw[len] = '\0';
    size_t o = 0;
    int pending_space = 0, pending_sep = 0;
    for (const char *p = raw; *p && o + 4 < outlen; p++) {
        char c = *p;
        if (c == '\n') {
            pending_space = 0;
            if (o > 0)
                pending_sep = 1;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            if (o > 0)
                pending_space = 1;
        } else {
            if (pending_sep) {
                memcpy(out + o, " ; ", 3);
                o += 3;
            } else if (pending_space) {
                out[o++] = ' ';
            }
            pending_sep = pending_space = 0;
            out[o++] = (unsigned char)c < 0x20 ? ' ' : c;
        }
    }
    out[o] = '\0';
    if (o == 0)
        snprintf(out, outlen, "unknown");
}

/* This rank's MPI_Get_processor_name, terminated and made one token, into
 * ``mine`` (MPI_MAX_PROCESSOR_NAME+1 chars). */
static inline void hk_own_host(char *mine)
{
    int len = 0;
    memset(mine, 0, MPI_MAX_PROCESSOR_NAME + 1);
    MPI_Get_processor_name(mine, &len);
    mine[len < 0 ? 0 : (len > MPI_MAX_PROCESSOR_NAME ? MPI_MAX_PROCESSOR_NAME : len)] = '\0';
    hk_sanitize_token(mine);
}

/* Gathers MPI_Get_processor_name of every rank to rank 0.  Collective.
 * Returns (on rank 0) an array of hk_nranks strings of
 * MPI_MAX_PROCESSOR_NAME+1 chars each; NULL on other ranks. */
static inline char *hk_gather_hosts(void)
{
    const int w = MPI_MAX_PROCESSOR_NAME + 1;
    char mine[MPI_MAX_PROCESSOR_NAME + 1];
    hk_own_host(mine);
    char *all = NULL;
    if (hk_rank == 0) {
        all = (char *)calloc((size_t)hk_nranks, (size_t)w);
        if (!all)
            hk_fatal("out of memory");
    }
    MPI_Gather(mine, w, MPI_CHAR, all, w, MPI_CHAR, 0, MPI_COMM_WORLD);
    return all;
}

static inline const char *hk_host_of(const char *hosts, int r)
{
    return hosts + (size_t)r * (MPI_MAX_PROCESSOR_NAME + 1);
}

/* Prints (rank 0) the first lines of every kernel output:
 *   hpcnet-kernel: <name> 1 / mpi-library: / ranks: / host: <r> <name>
 * 'hosts' comes from hk_gather_hosts(). */
static inline void hk_print_preamble(const char *hosts)
{
    if (hk_rank != 0)
        return;
    printf("ranks: %d\n", hk_nranks);
    for (int r = 0; r < hk_nranks; r++)
        printf("host: %d %s\n", r, hk_host_of(hosts, r));
}

static inline void hk_print_bytes_sent(unsigned long long mine)
{
    unsigned long long *all = NULL;
    if (hk_rank == 0) {
        all = (unsigned long long *)calloc((size_t)hk_nranks, sizeof *all);
        if (!all)
            hk_fatal("out of memory");
    }
    MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (hk_rank == 0) {
        printf("bytes-sent:");
        for (int r = 0; r < hk_nranks; r++)
            printf(" %llu", all[r]);
        printf("\n");
        free(all);
    }
}

static inline void hk_print_done(void)
{
    if (hk_rank == 0) {
        printf("done: ok\n");
        fflush(stdout);
    }
}

/* Seconds MPI_Finalize may take once the results are printed.  Some MPI
 * builds hang there (docs/known-issues.md): the process then reports it on
 * stderr and exits 3 at once, instead of the job waiting for its time limit
 * with the cause unnamed.  Environment HPCNET_FINALIZE_TIMEOUT_S (read by
 * hk_init), default 20; the checks set their own (hpcnet.constants). */
static char hk_finalize_msg[160];
static size_t hk_finalize_msg_len;

static void hk_finalize_hung(int sig)
{
    ssize_t w = write(STDERR_FILENO, hk_finalize_msg, hk_finalize_msg_len);
    (void)sig;
    (void)w;
    _exit(3);
}

static inline void hk_finalize(void)
{
    /* the message is formatted here: the handler may only write() */
    int n = snprintf(hk_finalize_msg, sizeof hk_finalize_msg,
                     "error: MPI_Finalize did not return within %u s (the results above are complete: "
                     "the MPI library hangs in finalize)\n",
                     hk_finalize_timeout_s);
    hk_finalize_msg_len = n < 0 ? 0 : ((size_t)n < sizeof hk_finalize_msg ? (size_t)n : sizeof hk_finalize_msg - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hk_finalize_hung;
    sigaction(SIGALRM, &sa, NULL);
    /* Every rank enters MPI_Finalize together: a finalize that waits in a
     * PMI barrier without progress (MPICH 4.0.2 over UCX) otherwise leaves
     * the flush of a rank still finishing unanswered, and hangs
     * (docs/known-issues.md). */
    MPI_Barrier(MPI_COMM_WORLD);
    alarm(hk_finalize_timeout_s);
    MPI_Finalize();
    alarm(0);
}

#endif /* HPCNET_KERNEL_H */
