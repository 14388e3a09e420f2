/*
 * pairs_tree.h - the first pass's rounds from a file (--pair-rounds FILE),
 * header-only: the rounds of a switch tree, planned by the caller
 * (hpcnet.checklib.treeschedule) so that no leaf's uplinks carry more
 * concurrent pairs than they can.  One round a line, its pairs as
 * "hostA:hostB" separated by blanks; pairs of hosts outside this job are
 * left out (the file covers the partition), rounds left empty are skipped.
 * Every pair of the job's ranks must be in it exactly once.  A line whose
 * first word is "reference" holds reference pairs (leaf-local ones, which
 * cross no uplink): the outlier rule's median is theirs, so that a slow
 * uplink, whose pairs may be most of the matrix, cannot set it.
 *
 * Every rank reads the file and needs every rank's host: the host names are
 * all-gathered before the first round, so the first exchange of the pairs
 * that all-gather connected holds no connection setup.
 */
#ifndef HPCNET_PAIRS_TREE_H
#define HPCNET_PAIRS_TREE_H

#include "pairs_measure.h"

#include <stdio.h>
#include <string.h>

/* The rounds read: round r's pairs are lo[start[r]..start[r+1]) with hi
 * alongside, the lower rank first. */
typedef struct {
    int rounds, widest;
    long pairs;
    long *start;
    int *lo, *hi;
    unsigned char *reference; /* per pair (pair_index): on a "reference" line */
} file_rounds;

/* Every rank's host name, on every rank (hk_host_of reads it). */
static char *allgather_hosts(void)
{
    const int w = MPI_MAX_PROCESSOR_NAME + 1;
    char mine[MPI_MAX_PROCESSOR_NAME + 1];
    hk_own_host(mine);
    char *all = (char *)calloc((size_t)hk_nranks, (size_t)w);
    if (!all)
        hk_fatal("out of memory (%d host names)", hk_nranks);
    MPI_Allgather(mine, w, MPI_CHAR, all, w, MPI_CHAR, MPI_COMM_WORLD);
    return all;
}

static int rank_of_host(const char *hosts, int n, const char *name)
{
    for (int r = 0; r < n; r++)
        if (strcmp(hk_host_of(hosts, r), name) == 0)
            return r;
    return -1;
}

/* One "hostA:hostB" word of the file into ranks (-1: a host not in the job). */
static void pair_of_word(char *word, const char *path, int line, const char *hosts, int n, int *a, int *b)
{
    char *colon = strchr(word, ':');
    if (!colon)
        hk_usage_error("--pair-rounds %s:%d: '%s' is not hostA:hostB", path, line, word);
    *colon = '\0';
    *a = rank_of_host(hosts, n, word);
    *b = rank_of_host(hosts, n, colon + 1);
}

static void add_pair(file_rounds *fr, long *cap, int a, int b)
{
    if (fr->pairs == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        fr->lo = (int *)realloc(fr->lo, (size_t)*cap * sizeof *fr->lo);
        fr->hi = (int *)realloc(fr->hi, (size_t)*cap * sizeof *fr->hi);
        if (!fr->lo || !fr->hi)
            hk_fatal("out of memory (%ld pairs)", *cap);
    }
    fr->lo[fr->pairs] = a < b ? a : b;
    fr->hi[fr->pairs++] = a < b ? b : a;
}

/* The job's pairs of each round of 'path', checked: every pair once, no
 * rank twice in a round. */
static void read_pair_rounds(const char *path, const char *hosts, int n, file_rounds *fr)
{
    FILE *in = fopen(path, "r");
    if (!in)
        hk_usage_error("--pair-rounds %s: cannot open it", path);
    memset(fr, 0, sizeof *fr);
    long cap = 0, round_cap = 0;
    unsigned char *seen = (unsigned char *)calloc((size_t)n * (size_t)(n - 1) / 2, 1);
    int *busy = (int *)calloc((size_t)n, sizeof *busy);
    static char text[1 << 20];
    if (!seen || !busy)
        hk_fatal("out of memory (%d ranks)", n);
    fr->reference = (unsigned char *)calloc((size_t)n * (size_t)(n - 1) / 2, 1);
    if (!fr->reference)
        hk_fatal("out of memory (%d ranks)", n);
    for (int line = 1; fgets(text, sizeof text, in); line++) {
        const long first = fr->pairs;
        int reference_line = 0;
        for (char *word = strtok(text, " \t\r\n"); word; word = strtok(NULL, " \t\r\n")) {
            int a, b;
            if (fr->pairs == first && !reference_line && strcmp(word, "reference") == 0) {
                reference_line = 1;
                continue;
            }
            pair_of_word(word, path, line, hosts, n, &a, &b);
            if (a < 0 || b < 0)
                continue; /* a host of the partition this job does not run on */
            const long p = pair_index(a < b ? a : b, a < b ? b : a, n);
            if (a == b || seen[p] || busy[a] == line || busy[b] == line)
                hk_usage_error("--pair-rounds %s:%d: ranks %d and %d: a pair twice, or a rank twice in "
                               "one round", path, line, a, b);
            seen[p] = 1;
            fr->reference[p] = (unsigned char)reference_line;
            busy[a] = busy[b] = line;
            add_pair(fr, &cap, a, b);
        }
        if (fr->pairs == first)
            continue;
        if (fr->rounds + 1 >= round_cap) {
            round_cap = round_cap ? 2 * round_cap : 256;
            fr->start = (long *)realloc(fr->start, (size_t)round_cap * sizeof *fr->start);
            if (!fr->start)
                hk_fatal("out of memory (%ld rounds)", round_cap);
        }
        fr->start[fr->rounds++] = first;
        fr->start[fr->rounds] = fr->pairs;
        if (fr->pairs - first > fr->widest)
            fr->widest = (int)(fr->pairs - first);
    }
    fclose(in);
    if (fr->pairs != (long)n * (n - 1) / 2)
        hk_usage_error("--pair-rounds %s: %ld pairs of this job's %d ranks, not all %ld (a host of the "
                       "job in no round?)", path, fr->pairs, n, (long)n * (n - 1) / 2);
    free(busy);
    free(seen);
}

static void free_pair_rounds(file_rounds *fr)
{
    free(fr->start);
    free(fr->reference);
    free(fr->lo);
    free(fr->hi);
}

#endif
