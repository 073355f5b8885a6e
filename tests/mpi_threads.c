/* Several threads using the library at once under MPI_THREAD_MULTIPLE, with and without the
 * progress thread: each thread starts and completes its own any-order persistent requests (made
 * in the same order on every rank, by the main thread), and one more thread runs plain
 * collectives on a communicator of its own. Every result is checked.
 * Run as `mpiexec -n P ./mpi_threads [--progress-thread]`. Built with ThreadSanitizer by
 * `make test` too. Prints ok/FAIL lines from rank 0. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"

enum { THREADS = 4, PER_THREAD = 6, ITERATIONS = 30, COUNT = 3000 };

static int rank, size;

typedef struct {
    int id;
    nbc_request req[PER_THREAD];
    int64_t *in[PER_THREAD], *out[PER_THREAD];
    MPI_Comm own;  /* for the thread of plain collectives */
    int bad;
    char why[200];
} worker;

static int64_t input(int r, int t, int k, int it, int i) { return (int64_t)(r + 1) * 100003 + t * 1009 + k * 101 + it * 7 + i; }
static int64_t expected(int t, int k, int it, int i)
{
    return (int64_t)size * (size + 1) / 2 * 100003 + (int64_t)size * (t * 1009 + k * 101 + it * 7 + i);
}

static int count_of(int k) { return k * (COUNT / PER_THREAD) + (k % 2); }

static void *persistent_worker(void *arg)
{
    worker *w = arg;
    for (int it = 0; it < ITERATIONS && !w->bad; it++) {
        for (int k = 0; k < PER_THREAD; k++)
            for (int i = 0; i < count_of(k); i++) w->in[k][i] = input(rank, w->id, k, it, i), w->out[k][i] = -1;
        /* each rank and thread its own order */
        int first = (rank + it + w->id) % PER_THREAD;
        for (int k = 0; k < PER_THREAD; k++) {
            int rc = nbc_start(&w->req[(first + k) % PER_THREAD]);
            if (rc != MPI_SUCCESS) {
                w->bad = 1;
                snprintf(w->why, sizeof w->why, "start: %d %s", rc, nbc_error_message());
            }
        }
        if (it % 2) {
            int rc = nbc_waitall(PER_THREAD, w->req);
            if (rc != MPI_SUCCESS) w->bad = 1, snprintf(w->why, sizeof w->why, "waitall: %s", nbc_error_message());
        } else {
            for (int k = PER_THREAD - 1; k >= 0; k--) {
                int flag = 0;
                while (!flag && !w->bad)
                    if (nbc_test(&w->req[k], &flag) != MPI_SUCCESS) w->bad = 1;
            }
        }
        for (int k = 0; k < PER_THREAD && !w->bad; k++)
            for (int i = 0; i < count_of(k); i++)
                if (w->out[k][i] != expected(w->id, k, it, i)) {
                    w->bad = 1;
                    snprintf(w->why, sizeof w->why, "thread %d request %d iteration %d element %d wrong", w->id, k, it, i);
                    break;
                }
    }
    return NULL;
}

static void *plain_worker(void *arg)
{
    worker *w = arg;
    int64_t *in = malloc(8 * COUNT), *out = malloc(8 * COUNT);
    for (int it = 0; it < ITERATIONS && !w->bad; it++) {
        for (int i = 0; i < COUNT; i++) in[i] = input(rank, w->id, 0, it, i);
        nbc_request r;
        int rc = nbc_iallreduce(in, out, COUNT, MPI_INT64_T, MPI_SUM, w->own, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
        for (int i = 0; i < COUNT && rc == MPI_SUCCESS; i++)
            if (out[i] != expected(w->id, 0, it, i)) rc = -1;
        if (rc != MPI_SUCCESS) w->bad = 1, snprintf(w->why, sizeof w->why, "plain allreduce: %d %s", rc, nbc_error_message());
    }
    free(in);
    free(out);
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_threads: timed out (a hang)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGALRM, on_alarm);
    alarm(600);
    int progress_thread = argc > 1 && !strcmp(argv[1], "--progress-thread");
    const char *mode = progress_thread ? " with the progress thread" : "";
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("FAIL mpi_threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Finalize();
        return 0;
    }
    int rc = progress_thread ? nbc_progress_thread(1) : MPI_SUCCESS;
    worker w[THREADS + 1];
    memset(w, 0, sizeof w);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    for (int t = 0; t < THREADS && rc == MPI_SUCCESS; t++) { /* inits in the same order everywhere */
        w[t].id = t;
        for (int k = 0; k < PER_THREAD && rc == MPI_SUCCESS; k++) {
            w[t].in[k] = malloc(8 * (size_t)count_of(k) + 8);
            w[t].out[k] = malloc(8 * (size_t)count_of(k) + 8);
            char prio[16];
            snprintf(prio, sizeof prio, "%d", (t + k) % 3);
            MPI_Info_set(info, "nbc_priority", prio);
            rc = nbc_allreduce_init(w[t].in[k], w[t].out[k], count_of(k), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info,
                                    &w[t].req[k]);
        }
    }
    MPI_Info_free(&info);
    w[THREADS].id = THREADS;
    MPI_Comm_dup(MPI_COMM_WORLD, &w[THREADS].own);
    pthread_t th[THREADS + 1];
    for (int t = 0; t <= THREADS && rc == MPI_SUCCESS; t++)
        pthread_create(&th[t], NULL, t < THREADS ? persistent_worker : plain_worker, &w[t]);
    int bad = rc != MPI_SUCCESS;
    char why[300] = "";
    if (bad) snprintf(why, sizeof why, "setup: %d %s", rc, nbc_error_message());
    for (int t = 0; t <= THREADS && rc == MPI_SUCCESS; t++) {
        pthread_join(th[t], NULL);
        if (w[t].bad && !bad) bad = 1, snprintf(why, sizeof why, "%s", w[t].why);
    }
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < PER_THREAD; k++) {
            nbc_request_free(&w[t].req[k]);
            free(w[t].in[k]);
            free(w[t].out[k]);
        }
    int any_bad;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) printf("FAIL %d threads start and complete requests at once%s p=%d: rank %d: %s\n", THREADS + 1, mode, size, rank, why);
    else if (rank == 0 && !any_bad) printf("ok %d threads start and complete requests at once%s p=%d\n", THREADS + 1, mode, size);
    rc = nbc_finalize();
    if (rc != MPI_SUCCESS) printf("FAIL nbc_finalize%s p=%d: %s\n", mode, size, nbc_error_message());
    else if (rank == 0) printf("ok nbc_finalize stops the library cleanly%s p=%d\n", mode, size);
    fflush(stdout);
    MPI_Comm_free(&w[THREADS].own);
    MPI_Finalize();
    return 0;
}
