/*
 * A stand-in for an OSU Micro-Benchmarks program (tests only): a real MPI
 * program that moves one message of the largest size (-m N) between ranks 0
 * and 1, so the MPI, its transport report and the link counters are real,
 * then prints a REAL recorded OMB output on rank 0 (tests/data/samples).
 *
 *   fake_osu SAMPLE MODE [OMB options...]
 *   MODE: full | stop-early (the last 3 lines missing) | cut-row (last 4 bytes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = 1;
    for (int i = 3; i + 1 < argc; i++)
        if (strcmp(argv[i], "-m") == 0)
            bytes = strtol(argv[i + 1], NULL, 10);
    if (size >= 2 && rank < 2) {
        char *buf = calloc((size_t)bytes, 1);
        if (rank == 0)
            MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        else
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        free(buf);
    }
    if (rank == 0 && argc >= 3) {
        FILE *fp = fopen(argv[1], "rb");
        if (!fp) { perror(argv[1]); MPI_Abort(MPI_COMM_WORLD, 1); }
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text, fp);
        fclose(fp);
        if (strcmp(argv[2], "cut-row") == 0 && n > 4)
            n -= 4;
        if (strcmp(argv[2], "stop-early") == 0)
            for (int drop = 0; drop < 4 && n > 0; n--)
                if (text[n - 1] == '\n' && ++drop == 4)
                    break;
        fwrite(text, 1, n, stdout);
    }
    MPI_Finalize();
    return 0;
}
