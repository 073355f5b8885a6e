/* A failure is an error, never a silent hang. Run with 2 or more ranks, in one of three modes:
 *   timeout   rank 1 sleeps past NBC_TIMEOUT=1 before it joins an allreduce: rank 0 gets an
 *             error naming rank 1, the schedule, the round and the instruction; rank 1, late,
 *             times out in turn naming rank 0; then both run another allreduce correctly.
 *   truncate  rank 1 passes a larger count: rank 0's receive is truncated and its error names
 *             rank 1 and the collective (rank 1 then times out, as above).
 *   kill      rank p-1 is killed while the others run an allreduce (run under mpiexec
 *             -disable-auto-cleanup). The survivors catch SIGUSR1, hydra's notice of the
 *             death, on which MPICH 4.0.2 (ch4:ucx) would abort them (docs/failures.md),
 *             and get the NBC_TIMEOUT error naming the rank that does not answer. They leave
 *             with _exit: MPI_Finalize would wait for the dead rank.
 * Every rank prints its own ok/FAIL lines; everything runs under an alarm. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nbc.h"

static int rank, size, failures;

static void check(int ok, const char *what, const char *detail)
{
    if (ok) printf("ok failures %s (rank %d)\n", what, rank);
    else printf("FAIL failures %s (rank %d): %s\n", what, rank, detail);
    failures += !ok;
    fflush(stdout);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL failures: hung (alarm)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

static void on_usr1(int sig) { (void)sig; } /* hydra's notice that a rank died */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int has(const char *text, const char *a, const char *b, const char *c)
{
    return strstr(text, a) && strstr(text, b) && strstr(text, c);
}

/* An allreduce of n ints that must fail; checks the error and that sendbuf is untouched. */
static void expect_failure(int n, const char *what, const char *want1, const char *want2)
{
    int in[64], out[64], copy[64];
    for (int i = 0; i < 64; i++) in[i] = copy[i] = rank * 100 + i;
    nbc_request r;
    double t0 = now();
    int rc = nbc_iallreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    for (int flag = 0; rc == MPI_SUCCESS && !flag;) { /* odd ranks wait, even ones test */
        if (rank % 2) rc = nbc_wait(&r), flag = 1;
        else rc = nbc_test(&r, &flag);
    }
    fprintf(stderr, "rank %d: %s\n", rank, nbc_error_message()); /* for the record */
    char detail[1200];
    snprintf(detail, sizeof detail, "rc %d after %.1f s: %s", rc, now() - t0, nbc_error_message());
    check(rc != MPI_SUCCESS && has(nbc_error_message(), want1, want2, "allreduce_ring") && strstr(nbc_error_message(), "round"),
          what, detail);
    check(r == NBC_REQUEST_NULL && !memcmp(in, copy, sizeof in), "the request is released and sendbuf untouched", detail);
}

/* Afterwards the library still works. */
static void expect_success(void)
{
    int in[8], out[8], ok = 1;
    for (int i = 0; i < 8; i++) in[i] = rank + i;
    nbc_request r;
    int rc = nbc_iallreduce(in, out, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    for (int i = 0; i < 8; i++) ok &= out[i] == size * (size - 1) / 2 + size * i;
    check(rc == MPI_SUCCESS && ok, "a later allreduce succeeds", nbc_error_message());
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "timeout";
    /* short for kill: hydra tears the job down within about a second of the death */
    setenv("NBC_TIMEOUT", strcmp(mode, "kill") ? "1" : "0.2", 1);
    int provided; /* NBC_PROGRESS_THREAD=1 runs it with the progress thread, which needs this */
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* MPICH 4.0.2 raises a failed MPI_Testall on MPI_COMM_WORLD, not on the requests'
     * communicator: the error must return from there to be reported (docs/failures.md) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    signal(SIGALRM, on_alarm);
    alarm(25);
    nbc_set_schedule("allreduce", "ring");
    expect_success(); /* the communicator's duplicate exists: later failures are in rounds */
    if (!strcmp(mode, "timeout")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) sleep(2);
        /* the ring: rank r receives from r - 1 */
        if (rank == 2 % size) expect_failure(4, "a peer that sleeps past NBC_TIMEOUT is named", "timed out", "no answer from rank 1");
        else if (rank == 1) expect_failure(4, "the late rank times out in turn", "timed out", "no answer from rank 0");
        else expect_failure(4, "a rank waiting on others times out", "timed out", "no answer from rank");
        MPI_Barrier(MPI_COMM_WORLD);
        expect_success();
    } else if (!strcmp(mode, "truncate")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 2 % size) expect_failure(2 * size, "a truncated message names the peer", "failed with rank 1", "truncated");
        else expect_failure(rank == 1 ? 4 * size : 2 * size, "the others fail too", "allreduce", "rank");
        MPI_Barrier(MPI_COMM_WORLD);
        expect_success();
    } else if (!strcmp(mode, "kill")) {
        signal(SIGUSR1, on_usr1); /* a handler: with SIG_IGN hydra still kills us (docs/failures.md) */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == size - 1) raise(SIGKILL); /* while the others run the allreduce */
        char want[32];
        snprintf(want, sizeof want, "rank %d", size - 1);
        if (rank == 0) expect_failure(64, "a killed peer is named (ring: rank 0 receives from rank p-1)", "no answer from", want);
        else expect_failure(64, "a rank waiting on others times out", "timed out", "no answer from rank");
        _exit(failures ? 1 : 0);
    } else {
        fprintf(stderr, "usage: mpi_failures timeout|truncate|kill\n");
        return 2;
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
