/* collectives: nbc's all-to-all, gather and scan beside the MPI's own non-blocking and blocking
 * calls (MPI_Ialltoall + MPI_Wait, MPI_Alltoall, ...), on doubles.
 *
 *   mpiexec -n P collectives [--min BYTES] [--max BYTES] [--reps N] [--batch SECONDS] [--csv FILE]
 *                            [--schedules COLLECTIVE=NAME,COLLECTIVE=NAME,...]
 *
 * BYTES is one block: what a rank sends each peer (alltoall), what each rank contributes
 * (gather, to root 0), the vector scanned (scan, MPI_SUM). Sizes go from --min to --max by
 * factors of 8. For each collective and size, every variant (nbc with automatic selection, nbc
 * with each schedule of --schedules for that collective forced, the MPI's non-blocking call and a wait, its
 * blocking call) is checked once against the expected result, warmed up, then timed in --reps
 * batches, interleaved: a batch is a barrier and as many back-to-back calls as fill about
 * --batch seconds; its time per call is the slowest rank's. Rank 0 prints the median and the
 * quartiles of each, and its ratio to the faster of the MPI's two calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"
#include "stats.h"

enum { ALLTOALL, GATHER, SCAN, NCOLL };
static const char *const coll_name[NCOLL] = {"alltoall", "gather", "scan"};
enum { NBC, MPI_NB, MPI_BLOCKING };
enum { MAX_VARIANTS = 12, MAX_REPS = 101 };

typedef struct {
    int kind;
    char spec[64]; /* nbc: the forced schedule, "" for automatic selection */
    char name[80];
} variant;

static int rank, nprocs;
static double *sendbuf, *recvbuf;

static void die(const char *what)
{
    fprintf(stderr, "collectives: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One call of the collective on n doubles a block, started and completed. */
static void run(int coll, const variant *v, int n)
{
    nbc_request q;
    MPI_Request r;
    int rc = MPI_SUCCESS;
    switch (coll) {
    case ALLTOALL:
        if (v->kind == NBC) rc = nbc_ialltoall(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, MPI_COMM_WORLD, &q);
        else if (v->kind == MPI_NB) rc = MPI_Ialltoall(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, MPI_COMM_WORLD, &r);
        else rc = MPI_Alltoall(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, MPI_COMM_WORLD);
        break;
    case GATHER:
        if (v->kind == NBC) rc = nbc_igather(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q);
        else if (v->kind == MPI_NB) rc = MPI_Igather(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r);
        else rc = MPI_Gather(sendbuf, n, MPI_DOUBLE, recvbuf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case SCAN:
        if (v->kind == NBC) rc = nbc_iscan(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
        else if (v->kind == MPI_NB) rc = MPI_Iscan(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        else rc = MPI_Scan(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
    if (rc != MPI_SUCCESS) die(v->kind == NBC ? nbc_error_message() : "an MPI call failed");
    if (v->kind == NBC && nbc_wait(&q) != MPI_SUCCESS) die(nbc_error_message());
    if (v->kind == MPI_NB) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* Rank s's element i of its block for rank d (alltoall), or of its contribution. */
static double value(int s, int d, int i) { return (double)((s * 31 + d * 7 + i) % 1000); }

static void fill(int coll, int n)
{
    for (int d = 0; d < (coll == ALLTOALL ? nprocs : 1); d++)
        for (int i = 0; i < n; i++) sendbuf[(size_t)d * n + i] = value(rank, coll == ALLTOALL ? d : 0, i);
}

static int correct(int coll, int n)
{
    for (int i = 0; i < n; i++) {
        if (coll == ALLTOALL)
            for (int s = 0; s < nprocs; s++)
                if (recvbuf[(size_t)s * n + i] != value(s, rank, i)) return 0;
        if (coll == GATHER && rank == 0)
            for (int s = 0; s < nprocs; s++)
                if (recvbuf[(size_t)s * n + i] != value(s, 0, i)) return 0;
        if (coll == SCAN) {
            double want = 0;
            for (int s = 0; s <= rank; s++) want += value(s, 0, i);
            if (recvbuf[i] != want) return 0;
        }
    }
    return 1;
}

/* Seconds a call of v takes, over a batch of about `batch` seconds; the slowest rank's. */
static double batch_time(int coll, const variant *v, int n, int calls)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < calls; k++) run(coll, v, n);
    double t = (MPI_Wtime() - t0) / calls, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* The variants of a collective: nbc's automatic choice, each of its schedules in the list
 * ("collective=name,..."), the MPI's two calls. */
static int variants(int coll, const char *list, variant *vs)
{
    int n = 0;
    vs[n++] = (variant){NBC, "", "nbc_auto"};
    size_t len = strlen(coll_name[coll]);
    for (const char *at = list; at && *at && n < MAX_VARIANTS - 2;) {
        const char *end = strchr(at, ',');
        size_t k = end ? (size_t)(end - at) : strlen(at);
        if (k > len + 1 && !strncmp(at, coll_name[coll], len) && at[len] == '=' && k - len - 1 < sizeof vs[n].spec) {
            vs[n] = (variant){NBC, "", ""};
            memcpy(vs[n].spec, at + len + 1, k - len - 1);
            snprintf(vs[n].name, sizeof vs[n].name, "nbc %s", vs[n].spec);
            n++;
        }
        at = end ? end + 1 : NULL;
    }
    vs[n++] = (variant){MPI_NB, "", "MPI_I + MPI_Wait"};
    vs[n++] = (variant){MPI_BLOCKING, "", "MPI blocking"};
    return n;
}

int main(int argc, char **argv)
{
    long min = 8, max = 1 << 21;
    int reps = 11;
    double batch = 0.05;
    const char *csv = NULL, *schedules = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--min")) min = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--max")) max = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--csv")) csv = argv[i + 1];
        else if (!strcmp(argv[i], "--schedules")) schedules = argv[i + 1];
        else {
            fprintf(stderr, "collectives: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) reps = reps < 1 ? 1 : MAX_REPS;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    size_t most = (size_t)(max / 8 > 0 ? max / 8 : 1) * (size_t)nprocs;
    sendbuf = malloc(most * sizeof *sendbuf);
    recvbuf = malloc(most * sizeof *recvbuf);
    if (!sendbuf || !recvbuf) die("out of memory");
    FILE *out = rank == 0 && csv ? fopen(csv, "w") : NULL;
    if (out) fprintf(out, "collective,bytes,variant,median_us,p25_us,p75_us,ratio_to_best_mpi\n");
    if (rank == 0)
        printf("%-10s %9s  %-36s %11s %11s %11s %9s\n", "collective", "bytes", "variant", "median us", "p25 us",
               "p75 us", "/ best MPI");
    for (int coll = 0; coll < NCOLL; coll++) {
        variant vs[MAX_VARIANTS];
        int nv = variants(coll, schedules, vs);
        for (long bytes = min; bytes <= max; bytes *= 8) {
            int n = (int)(bytes / 8);
            double t[MAX_VARIANTS][MAX_REPS];
            int calls[MAX_VARIANTS];
            for (int v = 0; v < nv; v++) { /* checked once, warmed up, and how many calls fill a batch */
                nbc_set_schedule(coll_name[coll], vs[v].spec[0] ? vs[v].spec : NULL);
                fill(coll, n);
                memset(recvbuf, 0, (size_t)n * (size_t)nprocs * sizeof *recvbuf);
                run(coll, &vs[v], n);
                int ok = correct(coll, n), all;
                MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
                if (!all) die("a wrong result");
                double one = batch_time(coll, &vs[v], n, 3);
                calls[v] = one > 0 ? (int)(batch / one) + 1 : 1000;
                if (calls[v] > 100000) calls[v] = 100000;
                MPI_Bcast(&calls[v], 1, MPI_INT, 0, MPI_COMM_WORLD);
            }
            for (int k = 0; k < reps; k++)
                for (int v = 0; v < nv; v++) {
                    nbc_set_schedule(coll_name[coll], vs[v].spec[0] ? vs[v].spec : NULL);
                    t[v][k] = batch_time(coll, &vs[v], n, calls[v]);
                }
            nbc_set_schedule(coll_name[coll], NULL);
            stats s[MAX_VARIANTS];
            for (int v = 0; v < nv; v++) s[v] = summarize(t[v], reps);
            double best = s[nv - 1].median < s[nv - 2].median ? s[nv - 1].median : s[nv - 2].median;
            for (int v = 0; rank == 0 && v < nv; v++) {
                printf("%-10s %9ld  %-36s %11.2f %11.2f %11.2f %9.2f\n", coll_name[coll], bytes, vs[v].name,
                       s[v].median * 1e6, s[v].p25 * 1e6, s[v].p75 * 1e6, s[v].median / best);
                if (out)
                    fprintf(out, "%s,%ld,%s,%.3f,%.3f,%.3f,%.3f\n", coll_name[coll], bytes, vs[v].name,
                            s[v].median * 1e6, s[v].p25 * 1e6, s[v].p75 * 1e6, s[v].median / best);
            }
            fflush(stdout);
        }
    }
    if (out) fclose(out);
    free(sendbuf);
    free(recvbuf);
    MPI_Finalize();
    return 0;
}
