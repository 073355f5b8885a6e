/* NBC_MPI_BLOCKING=1: the blocking collectives too, each as its non-blocking form on nbc and a
 * wait. Unset, they are MPICH's (and counted as passed on). */
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

/* The non-blocking call has already reported a failed start through the error handler. */
static int wait_for(int rc, MPI_Request *r, MPI_Comm comm)
{
    if (rc != MPI_SUCCESS) return rc;
    return nm_error(comm, nm_wait(r, MPI_STATUS_IGNORE));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_ALLREDUCE, R_BLOCKING_OFF);
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    MPI_Request r;
    nm_count_as(K_ALLREDUCE);
    int rc = MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_REDUCE, R_BLOCKING_OFF);
        return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    }
    MPI_Request r;
    nm_count_as(K_REDUCE);
    int rc = MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_BCAST, R_BLOCKING_OFF);
        return PMPI_Bcast(buffer, count, datatype, root, comm);
    }
    MPI_Request r;
    nm_count_as(K_BCAST);
    int rc = MPI_Ibcast(buffer, count, datatype, root, comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_BARRIER, R_BLOCKING_OFF);
        return PMPI_Barrier(comm);
    }
    MPI_Request r;
    nm_count_as(K_BARRIER);
    int rc = MPI_Ibarrier(comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_REDUCE_SCATTER_BLOCK, R_BLOCKING_OFF);
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    }
    MPI_Request r;
    nm_count_as(K_REDUCE_SCATTER_BLOCK);
    int rc = MPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!blocking_on()) {
        nm_passed(K_ALLGATHER, R_BLOCKING_OFF);
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    MPI_Request r;
    nm_count_as(K_ALLGATHER);
    int rc = MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &r);
    nm_count_as(-1);
    return wait_for(rc, &r, comm);
}
