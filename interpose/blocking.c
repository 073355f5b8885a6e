/* The blocking collectives. NBC_MPI_BLOCKING=1: each as its non-blocking form on nbc and a
 * wait. Unset, they are the MPI's own (counted as passed on), as its non-blocking form and a
 * wait that drives nbc while collectives run (blocked.c): MPICH does not match a blocking
 * collective with a non-blocking one, and whether collectives run differs from rank to rank. */
#include <stdlib.h>

#include "nbcmpi.h"

static int blocking_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("NBC_MPI_BLOCKING");
        on = v && atoi(v) > 0;
    }
    return on;
}

/* The blocking call, kind k, as the call c (a non-blocking kind) and a wait. A start on nbc
 * that fails has already been reported through the error handler; the MPI's own requests
 * report theirs in the wait. */
static int blocking(enum nm_kind k, nm_call c)
{
    MPI_Request r;
    if (!blocking_on()) {
        nm_passed(k, R_BLOCKING_OFF);
#ifndef MPICH_VERSION
        /* Open MPI reports aliased buffers and MPI_IN_PLACE as the receive buffer on
         * MPI_COMM_WORLD's handler (fatal), where the calls on nbc report them on the
         * communicator's, with MPICH's class: here too */
        int inter = 1, bad;
        PMPI_Comm_test_inter(c.comm, &inter);
        if (!inter && (bad = nm_refused(&c, &r)) != MPI_SUCCESS) return nm_error(c.comm, bad);
#endif
        nm_settle(c.comm);
        int rc = nm_mpi_start(&c, &r);
        return rc != MPI_SUCCESS ? rc : nm_wait(&r, MPI_STATUS_IGNORE);
    }
    nm_count_as(k);
    int rc = nm_start(c, &r);
    nm_count_as(-1);
    return rc != MPI_SUCCESS ? rc : nm_error(c.comm, nm_wait(&r, MPI_STATUS_IGNORE));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return blocking(K_ALLREDUCE, NM_IALLREDUCE(sendbuf, recvbuf, count, datatype, op, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    return blocking(K_REDUCE, NM_IREDUCE(sendbuf, recvbuf, count, datatype, op, root, comm));
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    return blocking(K_BCAST, NM_IBCAST(buffer, count, datatype, root, comm));
}

int MPI_Barrier(MPI_Comm comm) { return blocking(K_BARRIER, NM_IBARRIER(comm)); }

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    return blocking(K_REDUCE_SCATTER_BLOCK, NM_IREDUCE_SCATTER_BLOCK(sendbuf, recvbuf, recvcount, datatype, op, comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    return blocking(K_ALLGATHER, NM_IALLGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    return blocking(K_ALLTOALL, NM_IALLTOALL(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return blocking(K_ALLTOALLV, NM_IALLTOALLV(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                               recvtype, comm));
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm)
{
    return blocking(K_ALLTOALLW, NM_IALLTOALLW(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                               recvtypes, comm));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return blocking(K_GATHER, NM_IGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return blocking(K_GATHERV,
                    NM_IGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return blocking(K_SCATTER, NM_ISCATTER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return blocking(K_SCATTERV,
                    NM_ISCATTERV(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return blocking(K_ALLGATHERV,
                    NM_IALLGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm)
{
    return blocking(K_REDUCE_SCATTER, NM_IREDUCE_SCATTER(sendbuf, recvbuf, recvcounts, datatype, op, comm));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return blocking(K_SCAN, NM_ISCAN(sendbuf, recvbuf, count, datatype, op, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return blocking(K_EXSCAN, NM_IEXSCAN(sendbuf, recvbuf, count, datatype, op, comm));
}
