/* The withdrawal rule on shared memory (docs/hardening.md): once a call returns on a rank, for
 * any reason, no peer reads or writes that rank's buffers again, and every peer of a call
 * that one rank left learns it and fails too, naming the rank, without a timeout of its own.
 *
 *     mpiexec -n P ./mpi_leave        (P = 2 or 3)
 *
 * Rank 0 runs with NBC_TIMEOUT=1, the others with 60 s (set here, before nbc_init), so a
 * peer that only learned by timing out fails the check on the message. In each case rank 1
 * comes late; rank 0 times out, fills its receive buffer with a sentinel and keeps it until
 * rank 1 says it is done: no byte of it may change. Each case has a communicator of its own.
 * Every rank prints its own checks. --disagree: decisions that one rank makes alone; --counts:
 * counts that differ by rank. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"

static int rank, size, failures;

static void check(int ok, const char *name, const char *fmt, const char *detail)
{
    if (ok) printf("ok %s (rank %d)\n", name, rank);
    else printf("FAIL %s (rank %d): %s%s\n", name, rank, fmt, detail);
    failures += !ok;
    fflush(stdout);
}

/* Memory from nbc_alloc_mem (shared) or malloc. */
static double *buffer(size_t bytes, int shared)
{
    void *p = NULL;
    if (shared) nbc_alloc_mem((MPI_Aint)bytes, &p);
    else p = malloc(bytes ? bytes : 1);
    return p;
}

static void release(double *p, int shared)
{
    if (shared) nbc_free_mem(p);
    else free(p);
}

enum { SENTINEL = 0x5a, LATE_US = 2500000 };

/* One allreduce of `bytes` bytes on buffers from nbc_alloc_mem (shared) or malloc, that rank 1
 * joins late; `says`: what the other ranks' messages must contain. */
static void late_peer(const char *name, size_t bytes, int shared)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    size_t count = bytes / sizeof(double);
    double *send = buffer(bytes, shared), *recv = buffer(bytes, shared);
    for (size_t i = 0; i < count; i++) send[i] = rank + 1;
    nbc_request req;
    double one = 1, sum = 0; /* together first: the communicator is attached */
    int rc = nbc_iallreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    check(rc == MPI_SUCCESS && sum == size, name, "the call before failed: ", nbc_error_message());
    if (rank == 1) usleep(LATE_US);
    rc = nbc_iallreduce(send, recv, (int)count, MPI_DOUBLE, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    const char *msg = nbc_error_message();
    int token = 0;
    if (rank == 0) {
        check(rc != MPI_SUCCESS && strstr(msg, "timed out"), name, "rank 0 did not time out: ", msg);
        memset(recv, SENTINEL, bytes); /* its own again: nobody may write it now */
        MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        size_t changed = 0;
        for (size_t i = 0; i < bytes; i++) changed += ((unsigned char *)recv)[i] != SENTINEL;
        char detail[64];
        snprintf(detail, sizeof detail, "%zu bytes", changed);
        check(changed == 0, name, "a peer wrote rank 0's receive buffer after its call returned: ", detail);
    } else {
        /* on the stage rank 0 may have raised its flag before it left: then its input is in
         * the library's memory, and a peer may finish the call right */
        int right = rc == MPI_SUCCESS && !shared && bytes <= 65536;
        for (size_t i = 0; right && i < count; i++) right = recv[i] == size * (size + 1) / 2;
        check(right || (rc != MPI_SUCCESS && strstr(msg, "left it before it ended") && !strstr(msg, "timed out after")), name,
              "the peer did not learn that a rank left: ", msg);
        if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
    release(send, shared);
    release(recv, shared);
    MPI_Comm_free(&comm);
}

/* Rank 1's call cannot start (a forced schedule refuses its count); the others learn it at
 * once instead of waiting for its signal. */
static void not_started(void)
{
    const char *name = "a call that fails on one rank before it starts fails on its peers";
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    double one = 1, sum = 0;
    nbc_request req;
    int rc = nbc_iallreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    check(rc == MPI_SUCCESS, name, "the call before failed: ", nbc_error_message());
    nbc_set_schedule("allreduce", "allreduce_shm_small");
    int count = rank == 1 ? 20000 : 16; /* 160 kB: above allreduce_shm_small's limit */
    double *send = calloc(20000, sizeof(double)), *recv = calloc(20000, sizeof(double));
    if (rank != 1) usleep(300000); /* rank 1 fails first */
    rc = nbc_iallreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    const char *msg = nbc_error_message();
    if (rank == 1) check(rc == MPI_ERR_ARG, name, "rank 1's call did not fail: ", msg);
    else check(rc != MPI_SUCCESS && strstr(msg, "rank 1 left it") && strstr(msg, "before it started"), name, "", msg);
    nbc_set_schedule("allreduce", NULL);
    free(send);
    free(recv);
    MPI_Comm_free(&comm);
}

/* --disagree VAR=VALUE: rank 1 alone runs with VAR set (NBC_SHM=0, or a launcher that tells
 * it that it is alone on its node): the ranks still agree on one path, and every sum is exact,
 * on shared and private buffers, at the stage's, the direct program's and larger sizes. */
static void disagreeing(const char *setting)
{
    static const int counts[] = {1, 7, 200, 2048, 70000, 300000};
    for (int shared = 0; shared < 2; shared++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            int count = counts[k];
            double *send = buffer(count * sizeof(double), shared), *recv = buffer(count * sizeof(double), shared);
            for (int i = 0; i < count; i++) send[i] = rank + 1 + i % 5;
            nbc_request req;
            int rc = nbc_iallreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
            int right = rc == MPI_SUCCESS;
            for (int i = 0; right && i < count; i++) right = recv[i] == size * (size + 1) / 2 + size * (i % 5);
            char name[160];
            snprintf(name, sizeof name, "with %s on rank 1 only: %d doubles on %s buffers", setting, count, shared ? "shared" : "private");
            check(right, name, "wrong or failed: ", rc == MPI_SUCCESS ? "wrong sum" : nbc_error_message());
            release(send, shared);
            release(recv, shared);
        }
}

/* --counts: rank 1 calls with another count than the others (MPI: erroneous): every rank
 * whose call has elements fails, naming a rank, on every path: the stage against the stage,
 * the stage against the agreement, count 0, shared buffers read where they are, private ones
 * through the kernel. Never a hang, never a wrong sum reported as success. */
static void counts_differ(void)
{
    static const struct {
        const char *name;
        int mine, rank1, shared;
    } cases[] = {
        {"the stage against the stage", 16, 8, 0},
        {"the stage against the agreement", 20000, 100, 0},
        {"count 0 against the stage", 5, 0, 0},
        {"shared buffers read where they are", 1024, 512, 1},
        {"private buffers through the kernel", 20000, 16000, 0},
        {"shared buffers against the stage", 20000, 64, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        int count = rank == 1 ? cases[k].rank1 : cases[k].mine;
        size_t bytes = (size_t)(cases[k].mine > cases[k].rank1 ? cases[k].mine : cases[k].rank1) * sizeof(double);
        double *send = buffer(bytes, cases[k].shared), *recv = buffer(bytes, cases[k].shared);
        for (int i = 0; i < count; i++) send[i] = 1;
        nbc_request req;
        int rc = nbc_iallreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
        const char *msg = nbc_error_message();
        char name[160];
        snprintf(name, sizeof name, "counts that differ by rank fail: %s", cases[k].name);
        check(count == 0 || (rc != MPI_SUCCESS && strstr(msg, "rank ") && !strstr(msg, "timed out after")), name,
              rc == MPI_SUCCESS ? "succeeded" : "", msg);
        release(send, cases[k].shared);
        release(recv, cases[k].shared);
        MPI_Comm_free(&comm);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *disagree = argc > 2 && !strcmp(argv[1], "--disagree") ? argv[2] : NULL;
    if (disagree && rank == 1) putenv((char *)disagree);
    setenv("NBC_TIMEOUT", rank == 0 ? "1" : "60", 1);
    int counts = argc > 1 && !strcmp(argv[1], "--counts");
    if (disagree || counts) setenv("NBC_TIMEOUT", "60", 1); /* a hang fails, late */
    if (nbc_init() != MPI_SUCCESS) {
        printf("FAIL nbc_init (rank %d): %s\n", rank, nbc_error_message());
        return 1;
    }
    if (size < 2) {
        printf("skip mpi_leave: needs 2 ranks or more\n");
    } else if (disagree) {
        disagreeing(disagree);
    } else if (counts) {
        counts_differ();
    } else {
        late_peer("the stage: a late peer learns that rank 0 left", 256, 0);
        late_peer("shared buffers, direct: a late peer learns that rank 0 left and writes nothing", 8192, 1);
        late_peer("shared buffers: a late peer learns that rank 0 left and writes nothing", 1 << 20, 1);
        late_peer("private buffers through the kernel: a late peer learns that rank 0 left and writes nothing", 1 << 20, 0);
        not_started();
    }
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
