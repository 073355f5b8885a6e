/* loop: the time of one small nbc_iallreduce + nbc_wait when calls follow each other at once
 * (doubles, MPI_SUM, automatic selection): for each size, the best of 20 batches (5,000 calls
 * up to 4 KiB, fewer above), three times. Where bench times batches separated by barriers and
 * checks results, this shows what each call costs back to back, to a few nanoseconds, which is
 * what A/B runs of a change to the small calls' path compare (docs/performance.md). With --mpi,
 * the MPI library's own MPI_Allreduce instead, timed the same way, for the ratio to it. With
 * --shared, buffers from nbc_alloc_mem (MPI_Alloc_mem with --mpi); with --rewrite, the input is
 * written before each call, as an application computes a new one, so that a peer reading it
 * finds it in the writer's cache, not its own.
 *     mpiexec -n 2 ./loop [--mpi] [--shared] [--rewrite] [bytes ...]   (default: 8 32 40 64 128 256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

#define MAX_BYTES (64 << 10)
#define BATCH 5000

static int mpi, rewrite; /* --mpi: the MPI's own MPI_Allreduce instead of nbc; --rewrite */

/* k calls of n doubles back to back; nonzero when one failed. */
static int calls(double *in, double *out, int n, int k, double value)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < k; i++) {
        for (int j = 0; rewrite && j < n; j++) in[j] = value;
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
    int shared = 0;
    for (;; argc--, argv++) {
        if (argc > 1 && !strcmp(argv[1], "--mpi")) mpi = 1;
        else if (argc > 1 && !strcmp(argv[1], "--shared")) shared = 1;
        else if (argc > 1 && !strcmp(argv[1], "--rewrite")) rewrite = 1;
        else break;
    }
    double *in, *out;
    if (shared && mpi) {
        MPI_Alloc_mem(MAX_BYTES, MPI_INFO_NULL, &in);
        MPI_Alloc_mem(MAX_BYTES, MPI_INFO_NULL, &out);
    } else if (shared) {
        nbc_alloc_mem(MAX_BYTES, &in);
        nbc_alloc_mem(MAX_BYTES, &out);
    } else {
        in = malloc(MAX_BYTES);
        out = malloc(MAX_BYTES);
    }
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 3);
    for (int i = 0; i < MAX_BYTES / 8; i++) in[i] = rank + 1;
    int defaults[] = {8, 32, 40, 64, 128, 256}, nsizes = argc > 1 ? argc - 1 : 6;
    for (int s = 0; s < nsizes; s++) {
        int bytes = argc > 1 ? atoi(argv[s + 1]) : defaults[s];
        if (bytes < 8 || bytes > MAX_BYTES) {
            if (rank == 0) fprintf(stderr, "loop: sizes are 8 .. %d bytes\n", MAX_BYTES);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int n = bytes / 8, batch = bytes <= 4096 ? BATCH : BATCH * 4096 / bytes;
        for (int i = 0; i < n; i++) out[i] = 0;
        int rc = calls(in, out, n, batch, rank + 1); /* warm up: programs compiled, lines in cache */
        if (rank == 0) printf("%5d B:", bytes);
        for (int rep = 0; rep < 3; rep++) {
            double best = 1e30;
            for (int b = 0; b < 20; b++) {
                double t0 = MPI_Wtime();
                rc |= calls(in, out, n, batch, rank + 1);
                double t = (MPI_Wtime() - t0) / batch * 1e6;
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
    if (shared && mpi) {
        MPI_Free_mem(in);
        MPI_Free_mem(out);
    } else if (shared) {
        nbc_free_mem(in);
        nbc_free_mem(out);
    } else {
        free(in);
        free(out);
    }
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
