/* NBC_MPI_BLOCKING=1: the blocking collectives too, each as its non-blocking form on nbc and a
 * wait. Unset, they are MPICH's (and counted as passed on), made to drive nbc while collectives
 * run (blocked.c). */
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

/* The blocking call: MPICH's unless NBC_MPI_BLOCKING=1, else its non-blocking form on nbc
 * (counted as the blocking call) and a wait. A failed start has already been reported through
 * the error handler. */
#define RUN_BLOCKING(kind, passed_on, nonblocking_call)                                            \
    do {                                                                                         \
        if (!blocking_on()) {                                                                    \
            nm_passed(kind, R_BLOCKING_OFF);                                                     \
            return passed_on;                                                                    \
        }                                                                                        \
        MPI_Request r;                                                                           \
        nm_count_as(kind);                                                                       \
        int rc = nonblocking_call;                                                               \
        nm_count_as(-1);                                                                         \
        return rc != MPI_SUCCESS ? rc : nm_error(comm, nm_wait(&r, MPI_STATUS_IGNORE));          \
    } while (0)

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    RUN_BLOCKING(K_ALLREDUCE,
                 nm_blocked_allreduce(sendbuf, recvbuf, count, datatype, op, comm),
                 MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, &r));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    RUN_BLOCKING(K_REDUCE,
                 nm_blocked_reduce(sendbuf, recvbuf, count, datatype, op, root, comm),
                 MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, &r));
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    RUN_BLOCKING(K_BCAST,
                 nm_blocked_bcast(buffer, count, datatype, root, comm),
                 MPI_Ibcast(buffer, count, datatype, root, comm, &r));
}

int MPI_Barrier(MPI_Comm comm)
{
    RUN_BLOCKING(K_BARRIER,
                 nm_blocked_barrier(comm),
                 MPI_Ibarrier(comm, &r));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    RUN_BLOCKING(K_REDUCE_SCATTER_BLOCK,
                 nm_blocked_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm),
                 MPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, &r));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    RUN_BLOCKING(K_ALLGATHER,
                 nm_blocked_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
                 MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &r));
}
