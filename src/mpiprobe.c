/*
 * libhpcnet_mpiprobe.so: which MPI library a prebuilt benchmark (IMB, OSU)
 * really loaded, measured inside each of its ranks.
 *
 * Preloaded into the benchmark only (`env LD_PRELOAD=... IMB-MPI1 ...`), its
 * constructor asks the MPI library the process loaded for its version string
 * (MPI_Get_library_version may be called before MPI_Init, MPI-3 §8.1.1) and
 * prints one line on stderr:
 *
 *   hpcnet-mpi-library: <rank> <host> <first line of the library version>
 *
 * It is built without mpi.h and without linking any MPI: the symbol is a weak
 * reference resolved against whatever libmpi the benchmark itself loaded, so
 * the probe can neither choose nor add a library.  A process without MPI
 * prints "hpcnet-mpi-library: <rank> <host> none".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern int MPI_Get_library_version(char *version, int *resultlen) __attribute__((weak));

/* MPICH's MPI_MAX_LIBRARY_VERSION_STRING (the largest of the MPIs we know). */
#define LIBRARY_VERSION_MAX 8192

static const char *rank_from_environment(void)
{
    /* Open MPI, PMIx, MPICH/Intel MPI (PMI), Slurm: whichever launched us. */
    static const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                  "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return "?";
}

__attribute__((constructor)) static void hpcnet_mpi_probe(void)
{
    static char version[LIBRARY_VERSION_MAX];
    char host[256] = "?";
    int len = 0;

    gethostname(host, sizeof host - 1);
    if (MPI_Get_library_version == NULL || MPI_Get_library_version(version, &len) != 0) {
        fprintf(stderr, "hpcnet-mpi-library: %s %s none\n", rank_from_environment(), host);
        return;
    }
    version[LIBRARY_VERSION_MAX - 1] = '\0';
    char *newline = strchr(version, '\n');
    if (newline)
        *newline = '\0';
    fprintf(stderr, "hpcnet-mpi-library: %s %s %s\n", rank_from_environment(), host, version);
}
