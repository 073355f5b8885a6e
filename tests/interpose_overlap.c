/* examples/overlap.c's MPI-only twin: the same overlap of an allreduce with computation, with
 * MPI's own calls (MPI_Iallreduce, MPI_Test between chunks, MPI_Wait) and no nbc in sight. It
 * prints only what does not depend on timing (each rank's check and checksum), so that its
 * output run plainly and through LD_PRELOAD=libnbcmpi.so can be compared byte for byte.
 *
 *     mpiexec -n 4 ./interpose_overlap [doubles]        (default 1048576 per rank) */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { CHUNKS = 50, WORK = 1 << 16, PASSES = 8 };

static double value(int rank, size_t i) { return (double)((rank + 1) * (int)(i % 1000)); }

static double compute_chunk(double *work, int c)
{
    size_t lo = (size_t)WORK * c / CHUNKS, hi = (size_t)WORK * (c + 1) / CHUNKS;
    double sum = 0;
    for (int pass = 0; pass < PASSES; pass++)
        for (size_t i = lo; i < hi; i++) {
            work[i] = 0.5 * work[i] + 0.25 * sqrt(work[i] * work[i] + 1.0);
            sum += work[i];
        }
    return sum;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20;
    double *data = malloc(n * sizeof *data), *sum = malloc(n * sizeof *sum), *work = malloc(WORK * sizeof *work);
    for (size_t i = 0; i < n; i++) data[i] = value(rank, i);
    for (size_t i = 0; i < WORK; i++) work[i] = (double)(i % 7);
    MPI_Request req;
    MPI_Iallreduce(data, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    double checksum = 0;
    int done = 0;
    for (int c = 0; c < CHUNKS; c++) {
        checksum += compute_chunk(work, c);
        if (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (sum[i] != (double)(p * (p + 1) / 2) * (double)(i % 1000)) bad = i;
    char line[160];
    if (bad == n) snprintf(line, sizeof line, "rank %d: %zu doubles verified, checksum %.6f", rank, n, checksum);
    else snprintf(line, sizeof line, "rank %d: WRONG at index %zu, checksum %.6f", rank, bad, checksum);
    /* rank 0 prints every line in rank order */
    char *all = rank == 0 ? malloc((size_t)p * sizeof line) : NULL;
    MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    int ok = bad == n, all_ok = 0;
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < p; r++) printf("%s\n", all + (size_t)r * sizeof line);
        printf("summary: %d ranks, %s\n", p, all_ok ? "all verified OK" : "SOME WRONG");
    }
    free(all), free(data), free(sum), free(work);
    MPI_Finalize();
    return rank == 0 && !all_ok;
}
