/* interpose_cost: what the interposition library adds to a call. Times an 8-byte allreduce
 * (one double, MPI_SUM) started and completed `calls` times in a row, two ways in one process:
 *   direct   nbc_iallreduce + nbc_wait (this program's own, static, nbc)
 *   mpi      MPI_Iallreduce + MPI_Wait: MPICH's own, or, under LD_PRELOAD=libnbcmpi.so, nbc
 *            behind a generalized request (the library's own copy of nbc)
 * and prints the median over `reps` rounds of the time per call of each, and their difference.
 * At p = 1 the collective itself is a local copy, so the difference is the interposition's
 * cost per call (the generalized request, its poll and free, the wrappers).
 * With `callgrind`, runs only the marked functions cg_direct and cg_mpi, once each per call,
 * for bench/interpose.sh to count their instructions. With `layout N`, measures instead what
 * a non-contiguous datatype costs: MPI_Iallgather + MPI_Wait of N doubles per rank described
 * as a vector (every other double of a 2N array, packed and unpacked by the library) against
 * the same N doubles as a contiguous type.
 *     mpiexec -n 1 ./interpose_cost [calls] [reps] [callgrind | layout N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

static double in = 1, out;

static void direct(void)
{
    nbc_request r;
    nbc_iallreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    nbc_wait(&r);
}

static void mpi(void)
{
    MPI_Request r;
    MPI_Iallreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* what callgrind counts: the same calls, after the warm-up */
__attribute__((noinline)) void cg_direct(void) { direct(); }
__attribute__((noinline)) void cg_mpi(void) { mpi(); }

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int calls = argc > 1 ? atoi(argv[1]) : 20000, reps = argc > 2 ? atoi(argv[2]) : 11, rank, p;
    int callgrind = argc > 3 && !strcmp(argv[3], "callgrind");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (calls < 1 || reps < 1 || reps > 101) {
        fprintf(stderr, "usage: interpose_cost [calls] [reps 1..101] [callgrind]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < 100; i++) direct(), mpi(); /* warm: programs compiled, pools filled */
    if (callgrind) {
        for (int i = 0; i < calls; i++) cg_direct(), cg_mpi();
        MPI_Finalize();
        return 0;
    }
    if (argc > 4 && !strcmp(argv[3], "layout")) {
        int n = atoi(argv[4]);
        double *src = calloc(2 * (size_t)n, sizeof(double)), *dst = calloc(2 * (size_t)n * p, sizeof(double));
        MPI_Datatype vec, item, contig;
        MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        MPI_Type_create_resized(vec, 0, 2 * (MPI_Aint)n * sizeof(double), &item);
        MPI_Type_commit(&item);
        MPI_Type_contiguous(n, MPI_DOUBLE, &contig);
        MPI_Type_commit(&contig);
        double tl[2][101];
        for (int k = 0; k < reps; k++)
            for (int v = 0; v < 2; v++) {
                MPI_Datatype t = v ? item : contig;
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int i = 0; i < calls; i++) {
                    MPI_Request r;
                    MPI_Iallgather(src, 1, t, dst, 1, t, MPI_COMM_WORLD, &r);
                    MPI_Wait(&r, MPI_STATUS_IGNORE);
                }
                tl[v][k] = (MPI_Wtime() - t0) / calls * 1e9;
            }
        qsort(tl[0], reps, sizeof(double), cmp);
        qsort(tl[1], reps, sizeof(double), cmp);
        if (rank == 0)
            printf("p=%d: MPI_Iallgather+MPI_Wait of %d doubles: contiguous %.0f ns/call, vector %.0f ns/call, "
                   "difference %+.0f ns (%.2f ns per double; medians of %d rounds of %d calls)\n",
                   p, n, tl[0][reps / 2], tl[1][reps / 2], tl[1][reps / 2] - tl[0][reps / 2],
                   (tl[1][reps / 2] - tl[0][reps / 2]) / n / p, reps, calls);
        MPI_Type_free(&vec), MPI_Type_free(&item), MPI_Type_free(&contig);
        free(src), free(dst);
        MPI_Finalize();
        return 0;
    }
    double t[2][101];
    for (int k = 0; k < reps; k++)
        for (int v = 0; v < 2; v++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < calls; i++) v ? mpi() : direct();
            t[v][k] = (MPI_Wtime() - t0) / calls * 1e9;
        }
    qsort(t[0], reps, sizeof(double), cmp);
    qsort(t[1], reps, sizeof(double), cmp);
    double d = t[0][reps / 2], m = t[1][reps / 2];
    if (rank == 0)
        printf("p=%d: nbc_iallreduce+nbc_wait %.0f ns/call, MPI_Iallreduce+MPI_Wait %.0f ns/call, difference %+.0f ns "
               "(medians of %d rounds of %d calls)\n",
               p, d, m, m - d, reps, calls);
    MPI_Finalize();
    return 0;
}
