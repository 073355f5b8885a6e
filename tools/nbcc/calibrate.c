/* nbcc calibrate: alpha and beta measured by a ping-pong between ranks 0 and 1, gamma by the
 * library's SUM kernel; one line for NBC_MODEL_FILE and --model. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbcc.h"
#include "reduce.h"

static const char *const usage_calibrate =
    "usage: mpiexec -n 2 nbcc calibrate [-o FILE]\n"
    "\n"
    "Measures α (latency) and β (time per byte) by a ping-pong between ranks 0 and 1 at sizes\n"
    "from 8 B to 4 MiB (a least-squares fit of the one-way times), and γ (time per byte\n"
    "reduced) by the library's SUM kernel on doubles. Writes one line\n"
    "alpha=..,beta=..,gamma=.. to FILE (default: standard output), which NBC_MODEL_FILE and\n"
    "nbcc explain/simulate --model read.\n";



/* One-way time of a message of n bytes between ranks 0 and 1 (half the best of reps round trips). */
static double pingpong(int rank, char *buf, int n, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        t = (MPI_Wtime() - t) / 2;
        if (t < best) best = t;
    }
    return best;
}

int nbcc_calibrate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_calibrate, stdout);
        return 0;
    }
    nbcc_opts o = {0};
    int status = nbcc_options(argc, argv, "o", &o);
    if (status >= 0) return status;
    if (o.rest != argc) return nbcc_usage_error("unexpected argument '%s'", argv[o.rest]);
    const char *out = o.output;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0) nbcc_error("run it under mpiexec -n 2 (or more)");
        MPI_Finalize();
        return 2;
    }
    enum { MAX = 4 << 20 };
    char *buf = calloc(MAX, 1);
    /* least squares of t = α + nβ over sizes 8 B .. 4 MiB */
    double sn = 0, st = 0, snn = 0, snt = 0;
    int k = 0;
    for (int n = 8; n <= MAX; n *= 4, k++) {
        double t = pingpong(rank, buf, n, n < 65536 ? 200 : 20);
        sn += n, st += t, snn += (double)n * n, snt += n * t;
    }
    double beta = (k * snt - sn * st) / (k * snn - sn * sn);
    double alpha = (st - beta * sn) / k;
    if (alpha < 0) alpha = pingpong(rank, buf, 8, 200); /* a fit dominated by large sizes */
    /* γ: the SUM kernel on doubles, 8 MiB at a time */
    enum { N = 1 << 20 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) x[i] = i, y[i] = 1;
    reduce_fn sum = reduce_kernel(MPI_DOUBLE, MPI_SUM)->reduce;
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        double t = MPI_Wtime();
        sum(y, x, N);
        t = MPI_Wtime() - t;
        if (t < best) best = t;
    }
    double gamma = best / (N * sizeof(double));
    if (rank == 0) {
        FILE *f = out ? fopen(out, "w") : stdout;
        if (!f) {
            nbcc_error("cannot write %s", out ? out : "-");
        } else {
            fprintf(f, "# measured by nbcc calibrate between ranks 0 and 1 (p = %d); y[i] += x[i] on doubles\n", size);
            fprintf(f, "alpha=%.3e,beta=%.3e,gamma=%.3e\n", alpha, beta, gamma);
            if (out) fclose(f);
        }
        if (out) fprintf(stderr, "alpha=%.3e s, beta=%.3e s/B (%.2f GB/s), gamma=%.3e s/B (%.2f GB/s) -> %s\n", alpha, beta,
                         1e-9 / beta, gamma, 1e-9 / gamma, out);
    }
    free(x);
    free(y);
    free(buf);
    MPI_Finalize();
    return 0;
}
