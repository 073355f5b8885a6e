/* NBC_MPI_VERBOSE=1: at MPI_Finalize, rank 0 prints how many calls of each kind nbc ran and
 * how many went to MPICH, and why (NBC_MPI_VERBOSE=2: every rank). */
#include <stdio.h>
#include <stdlib.h>

#include "nbcmpi.h"

#define NONBLOCKING_NAME(name, nonblocking, blocking) nonblocking,
#define BLOCKING_NAME(name, nonblocking, blocking) blocking,
static const char *const kind_name[NKINDS] = {
    NM_COLLECTIVES(NONBLOCKING_NAME) NM_COLLECTIVES(BLOCKING_NAME)
    "persistent (MPI_*_init; each start also counts as its non-blocking call)", "MPI_Alloc_mem (nbc_alloc_mem)",
};
static const char *const reason_name[NREASONS] = {
    "intercommunicator", "MPI_COMM_NULL or invalid communicator", "more than INT_MAX bytes",
    "blocking (NBC_MPI_BLOCKING unset)",
    "NBC_MPI_ALLOC_MEM=0", "nbc_alloc_mem failed",
};
static unsigned long ran[NKINDS], passed[NKINDS][NREASONS];

/* A blocking call runs as its non-blocking form: that call is counted as the blocking one. */
static __thread int counted_as = -1;
void nm_count_as(int k) { counted_as = k; }

void nm_ran(enum nm_kind k)
{
    if (counted_as >= 0) k = (enum nm_kind)counted_as;
    __atomic_fetch_add(&ran[k], 1, __ATOMIC_RELAXED);
}

void nm_passed(enum nm_kind k, enum nm_reason why)
{
    if (counted_as >= 0) k = (enum nm_kind)counted_as;
    __atomic_fetch_add(&passed[k][why], 1, __ATOMIC_RELAXED);
}

static void report(void)
{
    const char *v = getenv("NBC_MPI_VERBOSE");
    int level = v ? atoi(v) : 0, rank = 0;
    if (level <= 0) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0 && level < 2) return;
    for (int k = 0; k < NKINDS; k++) {
        unsigned long total = 0;
        for (int w = 0; w < NREASONS; w++) total += passed[k][w];
        if (!ran[k] && !total) continue;
        fprintf(stderr, "nbcmpi: rank %d: %s: %lu on nbc, %lu passed to MPI", rank, kind_name[k], ran[k], total);
        for (int w = 0; w < NREASONS; w++)
            if (passed[k][w]) fprintf(stderr, " (%s: %lu)", reason_name[w], passed[k][w]);
        fputc('\n', stderr);
    }
}

/* Collectives the application freed before they completed are finished first: they may hold
 * buffers to unpack into, and nbc must not be shut down under them. */
int MPI_Finalize(void)
{
    nm_drain();
    report();
    return PMPI_Finalize();
}
