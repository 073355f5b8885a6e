/* loop: the time of one small nbc_iallreduce + nbc_wait when calls follow each other at once
 * (doubles, MPI_SUM, automatic selection): for each size, the best of 20 batches of 5,000 calls,
 * three times. Where bench times batches separated by barriers and checks results, this shows
 * what each call costs back to back, to a few nanoseconds, which is what A/B runs of a change to
 * the small calls' path compare (docs/performance.md). With --mpi, the MPI library's own
 * MPI_Allreduce instead, timed the same way, for the ratio to it.
 *     mpiexec -n 2 ./loop [--mpi] [bytes ...]     (default: 8 32 40 64 128 256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

#define MAX_BYTES 4096
#define BATCH 5000

static int mpi; /* --mpi: the MPI's own MPI_Allreduce instead of nbc */

/* k calls of n doubles back to back; nonzero when one failed. */
static int calls(const double *in, double *out, int n, int k)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < k; i++) {
        if (mpi) {
            rc |= MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            continue;
        }
        nbc_request r;
        int e = nbc_iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        rc |= e != MPI_SUCCESS ? e : nbc_wait(&r);
    }
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    nbc_init();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static double in[MAX_BYTES / 8], out[MAX_BYTES / 8];
    for (int i = 0; i < MAX_BYTES / 8; i++) in[i] = rank + 1;
    mpi = argc > 1 && !strcmp(argv[1], "--mpi");
    argc -= mpi, argv += mpi;
    int defaults[] = {8, 32, 40, 64, 128, 256}, nsizes = argc > 1 ? argc - 1 : 6;
    for (int s = 0; s < nsizes; s++) {
        int bytes = argc > 1 ? atoi(argv[s + 1]) : defaults[s];
        if (bytes < 8 || bytes > MAX_BYTES) {
            if (rank == 0) fprintf(stderr, "loop: sizes are 8 .. %d bytes\n", MAX_BYTES);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int n = bytes / 8;
        for (int i = 0; i < n; i++) out[i] = 0;
        int rc = calls(in, out, n, BATCH); /* warm up: programs compiled, lines in cache */
        if (rank == 0) printf("%5d B:", bytes);
        for (int rep = 0; rep < 3; rep++) {
            double best = 1e30;
            for (int b = 0; b < 20; b++) {
                double t0 = MPI_Wtime();
                rc |= calls(in, out, n, BATCH);
                double t = (MPI_Wtime() - t0) / BATCH * 1e6;
                if (t < best) best = t;
            }
            if (rank == 0) printf(" %.3f", best);
        }
        if (rank == 0) printf(" µs\n");
        int wrong = 0;
        for (int i = 0; i < n; i++) wrong += out[i] != size * (size + 1) / 2.0;
        if (rc != MPI_SUCCESS || wrong) {
            fprintf(stderr, "loop: rank %d: %s\n", rank, rc != MPI_SUCCESS ? "a call failed" : "wrong sum");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
