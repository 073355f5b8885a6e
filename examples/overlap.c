/* overlap: hide an allreduce behind computation with nbc.
 *
 *     mpiexec -n 4 ./overlap [doubles]        (default 4194304 = 4 Mi doubles per rank)
 *
 * Each rank sums a large array with every other rank (nbc_iallreduce, MPI_SUM) while it keeps
 * computing something unrelated. The collective is non-blocking: nbc_iallreduce only starts
 * it, and the library moves it forward whenever we call into it. So the computation is cut
 * into chunks, with an nbc_test between chunks to let the reduction progress, and nbc_wait
 * finishes whatever is left at the end.
 *
 * The program times three phases on every rank:
 *   compute     the chunked computation alone,
 *   allreduce   the allreduce alone (nbc_iallreduce + nbc_wait),
 *   overlapped  both at once.
 * With perfect overlap, "overlapped" approaches max(compute, allreduce) instead of their sum.
 * (On a machine with fewer cores than ranks, the ranks share cores and the gain is smaller.)
 *
 * Every rank checks the reduced array against values it computes locally; rank 0 prints every
 * rank's line, in rank order, then a summary. The exit status is 1 if any rank's check failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nbc.h"

enum { CHUNKS = 100 };         /* the computation is done in this many pieces */
enum { WORK = 1 << 18 };       /* doubles in the computation's own array */
enum { WORK_PASSES = 48 };     /* passes over that array: sets how long computing takes */

/* The data rank r contributes at index i. Small integers, so that the sum is exact in double
 * whatever order the ranks' values are added in, and each rank can predict the result. */
static double value(int rank, size_t i)
{
    return (double)((rank + 1) * (int)(i % 1000));
}

static void fill(double *data, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) data[i] = value(rank, i);
}

/* Compares data with the sum over all p ranks; returns the first wrong index, or n if none. */
static size_t first_error(const double *data, size_t n, int p)
{
    for (size_t i = 0; i < n; i++)
        if (data[i] != (double)(p * (p + 1) / 2) * (double)(i % 1000)) return i;
    return n;
}

/* Some floating-point work unrelated to the allreduce: chunk c of CHUNKS. Each element of
 * `work` is pushed through a few steps of a damped iteration; returns a checksum, so that the
 * compiler cannot drop the work and so that we can tell it gave the same answer both times. */
static double compute_chunk(double *work, int c)
{
    size_t lo = (size_t)WORK * (size_t)c / CHUNKS, hi = (size_t)WORK * (size_t)(c + 1) / CHUNKS;
    double sum = 0;
    for (int pass = 0; pass < WORK_PASSES; pass++)
        for (size_t i = lo; i < hi; i++) {
            work[i] = 0.5 * work[i] + 0.25 * sqrt(work[i] * work[i] + 1.0);
            sum += work[i];
        }
    return sum;
}

static void reset_work(double *work)
{
    for (size_t i = 0; i < WORK; i++) work[i] = (double)(i % 17);
}

/* Starts nothing, waits for nothing: just the computation, chunk by chunk. */
static double compute_alone(double *work)
{
    double checksum = 0;
    for (int c = 0; c < CHUNKS; c++) checksum += compute_chunk(work, c);
    return checksum;
}

/* The computation with an allreduce of data in flight. Between chunks, nbc_test lets the
 * library advance the collective; once it reports completion we stop testing. */
static int compute_overlapped(double *work, double *data, int n, double *checksum)
{
    nbc_request req;
    int rc = nbc_iallreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return rc;

    int done = 0;
    *checksum = 0;
    for (int c = 0; c < CHUNKS; c++) {
        *checksum += compute_chunk(work, c);
        if (!done && (rc = nbc_test(&req, &done)) != MPI_SUCCESS) return rc;
    }
    return nbc_wait(&req); /* returns at once if nbc_test already completed it */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int n = argc > 1 ? atoi(argv[1]) : 4 << 20;
    if (n < 1) n = 1;

    double *data = malloc((size_t)n * sizeof *data);
    double *work = malloc((size_t)WORK * sizeof *work);
    if (!data || !work) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    nbc_init();

    /* Warm-up: the first call for a given (schedule, size, count, ...) compiles the schedule
     * into a program and caches it; later identical calls reuse it. Do it once untimed. */
    nbc_request req;
    fill(data, (size_t)n, rank);
    int rc = nbc_iallreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);

    /* 1. The computation alone (purely local, no need to line the ranks up). */
    reset_work(work);
    double t0 = MPI_Wtime();
    double checksum_alone = compute_alone(work);
    double t_compute = MPI_Wtime() - t0;

    /* 2. The allreduce alone. The ranks start together, so that the time measures the
     * collective and not the wait for late ranks. */
    fill(data, (size_t)n, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (rc == MPI_SUCCESS)
        rc = nbc_iallreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    double t_allreduce = MPI_Wtime() - t0;
    size_t bad = rc == MPI_SUCCESS ? first_error(data, (size_t)n, p) : 0;

    /* 3. Both at once. The allreduce just finished on every rank, so they are still in step. */
    fill(data, (size_t)n, rank);
    reset_work(work);
    double checksum_overlapped = 0;
    t0 = MPI_Wtime();
    if (rc == MPI_SUCCESS) rc = compute_overlapped(work, data, n, &checksum_overlapped);
    double t_overlapped = MPI_Wtime() - t0;
    if (rc == MPI_SUCCESS && bad == (size_t)n) bad = first_error(data, (size_t)n, p);

    /* This rank's result, as one line. */
    int ok = rc == MPI_SUCCESS && bad == (size_t)n && checksum_overlapped == checksum_alone;
    enum { LINE = 512 };
    char line[LINE];
    if (ok)
        snprintf(line, LINE, "rank %d: allreduce of %d doubles verified OK | compute %.3f s, "
                 "allreduce %.3f s, overlapped %.3f s", rank, n, t_compute, t_allreduce, t_overlapped);
    else if (rc != MPI_SUCCESS)
        snprintf(line, LINE, "rank %d: allreduce FAILED: %s", rank, nbc_error_message());
    else if (bad != (size_t)n)
        snprintf(line, LINE, "rank %d: allreduce FAILED: element %zu is %g, expected %g", rank, bad,
                 data[bad], (double)(p * (p + 1) / 2) * (double)(bad % 1000));
    else
        snprintf(line, LINE, "rank %d: computation FAILED: checksum %.17g overlapped, %.17g alone",
                 rank, checksum_overlapped, checksum_alone);

    /* Rank 0 prints every line, then the summary: ranks printing on their own would interleave
     * at the launcher's whim. The report uses plain MPI, so it holds even when nbc fails. */
    char *lines = rank == 0 ? malloc((size_t)p * LINE) : NULL;
    MPI_Gather(line, LINE, MPI_CHAR, lines, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    double stats[4] = {ok ? 0.0 : 1.0, t_compute, t_allreduce, t_overlapped}; /* slowest rank's */
    MPI_Allreduce(MPI_IN_PLACE, stats, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int all_ok = stats[0] == 0.0;
    if (rank == 0) {
        for (int r = 0; r < p; r++) printf("%s\n", lines + (size_t)r * LINE);
        printf("summary: %d rank%s, ", p, p == 1 ? "" : "s");
        /* Perfect overlap saves the shorter of the two phases. Timings of a failed run mean
         * nothing, and a negative saving is reported as such, not as a percentage. */
        double saved = stats[1] + stats[2] - stats[3], ideal = fmin(stats[1], stats[2]);
        if (!all_ok)
            printf("SOME CHECKS FAILED (no timing reported)\n");
        else if (saved <= 0)
            printf("all verified OK | slowest: compute %.3f s + allreduce %.3f s, overlapped %.3f s: "
                   "no saving (overlapped took %.3f s longer than the two apart)\n",
                   stats[1], stats[2], stats[3], -saved);
        else
            printf("all verified OK | slowest: compute %.3f s + allreduce %.3f s, overlapped %.3f s: "
                   "saved %.3f s of an ideal %.3f s (%.0f%%%s)\n", stats[1], stats[2], stats[3], saved,
                   ideal, 100.0 * saved / ideal, saved > ideal ? ", beyond the ideal: timing noise" : "");
        free(lines);
    }

    nbc_finalize();
    MPI_Finalize();
    free(data);
    free(work);
    return all_ok ? 0 : 1;
}
