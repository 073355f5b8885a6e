/* nbcc calibrate: alpha and beta measured by a ping-pong between two ranks, gamma by the
 * library's SUM kernel; one line for NBC_MODEL_FILE and --model. When the job spans nodes and
 * some node holds two ranks, a second ping-pong inside a node gives alpha_node and beta_node. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nbcc.h"
#include "reduce.h"

static const char *const usage_calibrate =
    "usage: mpiexec -n P nbcc calibrate [-o FILE]     (P >= 2)\n"
    "\n"
    "Measures α (latency) and β (time per byte) by a ping-pong between two ranks at sizes from\n"
    "8 B to 4 MiB (a least-squares fit of the one-way times), and γ (time per byte reduced) by\n"
    "the library's SUM kernel on doubles. Writes one line alpha=..,beta=..,gamma=.. to FILE\n"
    "(default: standard output), which NBC_MODEL_FILE and nbcc explain/simulate --model read.\n"
    "\n"
    "The ranks' nodes come from their host names (MPI_Get_processor_name), or from NBC_NODE_MAP\n"
    "as the library reads it (one label a rank of MPI_COMM_WORLD, comma-separated). On one node,\n"
    "or with one rank a node, ranks 0 and 1 ping-pong. When the job spans nodes and a node holds\n"
    "two ranks or more, α and β come from a pair on different nodes and alpha_node, beta_node\n"
    "from a pair on one node: the two-level model of nbcc simulate --nodes ... --ppn ...\n"
    "(run it with 2 ranks a node on 2 nodes, e.g. mpiexec -n 4 -ppn 2).\n";

enum { LABEL = 256 };

/* This rank's node label: entry `rank` of NBC_NODE_MAP, else the processor name. 0, or -1
 * with a message (alike on every rank: the map is the same everywhere). */
static int node_label(int rank, int size, char *label)
{
    const char *map = getenv("NBC_NODE_MAP");
    if (!map || !*map) {
        int len = 0;
        MPI_Get_processor_name(label, &len);
        label[len < LABEL ? len : LABEL - 1] = '\0';
        return 0;
    }
    int n = 0;
    for (const char *at = map;; n++) {
        const char *comma = strchr(at, ',');
        size_t l = comma ? (size_t)(comma - at) : strlen(at);
        if (l == 0) {
            if (rank == 0) nbcc_error("NBC_NODE_MAP: entry %d is empty (want one node name a rank, comma-separated)", n);
            return -1;
        }
        if (n == rank) snprintf(label, LABEL, "%.*s", (int)(l < LABEL - 1 ? l : LABEL - 1), at);
        if (!comma) break;
        at = comma + 1;
    }
    if (n + 1 != size) {
        if (rank == 0) nbcc_error("NBC_NODE_MAP: names %d ranks, MPI_COMM_WORLD has %d", n + 1, size);
        return -1;
    }
    return 0;
}

/* One-way time of a message of n bytes between ranks a and b (half the best of reps round
 * trips); pair is a communicator of the two. */
static double pingpong(int rank, int a, int b, MPI_Comm pair, char *buf, int n, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(pair);
        double t = MPI_Wtime();
        if (rank == a) {
            MPI_Send(buf, n, MPI_BYTE, b, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_BYTE, b, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == b) {
            MPI_Recv(buf, n, MPI_BYTE, a, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_BYTE, a, 0, MPI_COMM_WORLD);
        }
        t = (MPI_Wtime() - t) / 2;
        if (t < best) best = t;
    }
    return best;
}

enum { MAX = 4 << 20 };

/* α and β between ranks a and b: least squares of t = α + nβ over sizes 8 B .. 4 MiB, as rank
 * a measured them (sent to every rank). The other ranks sleep meanwhile rather than poll, so
 * that ranks sharing cores leave the pair alone. */
static void fit(int rank, int a, int b, char *buf, double *alpha, double *beta)
{
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank == a || rank == b ? 0 : MPI_UNDEFINED, rank == a ? 0 : 1, &pair);
    double ab[2] = {0, 0};
    if (pair != MPI_COMM_NULL) {
        double sn = 0, st = 0, snn = 0, snt = 0, t = 0;
        int k = 0;
        for (int n = 8; n <= MAX; n *= 4, k++) {
            t = pingpong(rank, a, b, pair, buf, n, n < 65536 ? 200 : 20);
            sn += n, st += t, snn += (double)n * n, snt += n * t;
        }
        ab[1] = (k * snt - sn * st) / (k * snn - sn * sn);
        ab[0] = (st - ab[1] * sn) / k;
        if (ab[1] < 0) ab[1] = t / MAX; /* one slow small size tilted the line: the largest size alone */
        /* a's fit counts; both agree on whether to measure again */
        int again = ab[0] < 0;
        MPI_Bcast(&again, 1, MPI_INT, 0, pair);
        if (again) ab[0] = pingpong(rank, a, b, pair, buf, 8, 200); /* a fit dominated by large sizes */
        MPI_Comm_free(&pair);
    }
    MPI_Request req;
    MPI_Ibcast(ab, 2, MPI_DOUBLE, a, MPI_COMM_WORLD, &req);
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    *alpha = ab[0];
    *beta = ab[1];
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
    /* every rank's node label, to find a pair across nodes and a pair inside one */
    char *labels = calloc((size_t)size, LABEL), mine[LABEL] = "";
    if (!labels) {
        nbcc_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (node_label(rank, size, mine)) { /* alike on every rank */
        free(labels);
        MPI_Finalize();
        return 2;
    }
    MPI_Allgather(mine, LABEL, MPI_CHAR, labels, LABEL, MPI_CHAR, MPI_COMM_WORLD);
    int far_a = -1, far_b = -1, near_a = -1, near_b = -1, nodes = 0;
    for (int i = 0; i < size; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++) first = strcmp(labels + (size_t)j * LABEL, labels + (size_t)i * LABEL) != 0;
        nodes += first;
        for (int j = i + 1; j < size; j++) {
            int same = !strcmp(labels + (size_t)i * LABEL, labels + (size_t)j * LABEL);
            if (same && near_a < 0) near_a = i, near_b = j;
            if (!same && far_a < 0) far_a = i, far_b = j;
        }
    }
    /* one node, or one rank a node: one ping-pong, between ranks 0 and 1 */
    int two_level = far_a >= 0 && near_a >= 0;
    if (!two_level) far_a = 0, far_b = 1;
    char *buf = calloc(MAX, 1);
    double alpha, beta, alpha_node = 0, beta_node = 0;
    fit(rank, far_a, far_b, buf, &alpha, &beta);
    if (two_level) fit(rank, near_a, near_b, buf, &alpha_node, &beta_node);
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
            if (two_level)
                fprintf(f, "# measured by nbcc calibrate (p = %d on %d nodes): between nodes ranks %d and %d, inside a node ranks %d and %d; "
                           "y[i] += x[i] on doubles\n",
                        size, nodes, far_a, far_b, near_a, near_b);
            else
                fprintf(f, "# measured by nbcc calibrate between ranks 0 and 1 (p = %d on %d node%s); y[i] += x[i] on doubles\n", size, nodes,
                        nodes == 1 ? "" : "s");
            fprintf(f, "alpha=%.3e,beta=%.3e,gamma=%.3e", alpha, beta, gamma);
            if (two_level) fprintf(f, ",alpha_node=%.3e,beta_node=%.3e", alpha_node, beta_node);
            fprintf(f, "\n");
            if (out) fclose(f);
        }
        if (out) {
            fprintf(stderr, "alpha=%.3e s, beta=%.3e s/B (%.2f GB/s), gamma=%.3e s/B (%.2f GB/s)", alpha, beta, 1e-9 / beta, gamma, 1e-9 / gamma);
            if (two_level) fprintf(stderr, "; inside a node alpha_node=%.3e s, beta_node=%.3e s/B (%.2f GB/s)", alpha_node, beta_node, 1e-9 / beta_node);
            fprintf(stderr, " -> %s\n", out);
        }
    }
    free(labels);
    free(x);
    free(y);
    free(buf);
    MPI_Finalize();
    return 0;
}
