/* The MPI's own blocking calls (MPICH's or Open MPI's; "MPICH" below stands for either), made
 * to drive nbc. Inside MPICH's blocking collective,
 * communicator constructor or receive nothing drives nbc, so a peer waiting for a collective
 * this rank started before it blocked would wait for ever, and this rank with it (a valid
 * program: rank 0 calls MPI_Iallreduce, MPI_Barrier, MPI_Wait; rank 1 MPI_Iallreduce,
 * MPI_Wait, MPI_Barrier).
 *
 * - A blocking collective becomes MPICH's non-blocking form (PMPI_I...) and a wait that drives
 *   nbc while collectives run (nm_wait). Always, not only while collectives run: MPICH does not
 *   match a blocking collective with a non-blocking one, and whether collectives run differs
 *   from rank to rank.
 * - A communicator or window constructor, which has no non-blocking form (MPI_Comm_dup has:
 *   MPI_Comm_idup), first passes MPICH's barrier (PMPI_Ibarrier) on its communicator, waited
 *   for the same way, on every rank: once every member has reached the call, MPICH's blocking
 *   call needs nothing of this rank's collectives to end.
 * - Point-to-point calls have no such matching rule: their non-blocking form only while
 *   collectives run, as in progress.c. */
#include <stdlib.h>

#include "nbcmpi.h"

/* Open MPI's MPI_Comm_idup starts collectives of its own on the parent as it goes: one of Open
 * MPI's collectives is started on a communicator only once nbc's duplication of it (at nbc's
 * first collective there) is complete, driving nbc meanwhile (runtime/comm.c). Every rank
 * reaches that first collective before this call, and drives its duplication as it waits. */
void nm_settle(MPI_Comm comm)
{
#ifdef MPICH_VERSION
    (void)comm;
#else
    while (comm_dup_under_way(comm)) nm_idle();
#endif
}
#define SETTLE(comm) nm_settle(comm)

/* A collective: the MPI's non-blocking form and nm_wait */
#define AS_COLLECTIVE(comm, nonblocking)                                                           \
    do {                                                                                           \
        SETTLE(comm);                                                                              \
        AS_NONBLOCKING(nonblocking);                                                               \
    } while (0)

#define AS_NONBLOCKING(nonblocking)                                                                \
    do {                                                                                           \
        MPI_Request r_;                                                                            \
        int rc_ = nonblocking;                                                                     \
        return rc_ != MPI_SUCCESS ? rc_ : nm_wait(&r_, MPI_STATUS_IGNORE);                        \
    } while (0)

#define AS_NONBLOCKING_WHILE_ACTIVE(blocking, nonblocking)                                         \
    do {                                                                                           \
        if (!nm_active()) return blocking;                                                         \
        AS_NONBLOCKING(nonblocking);                                                               \
    } while (0)

#define AFTER_ALL_HERE(comm, call)                                                                 \
    do {                                                                                           \
        MPI_Request r_;                                                                            \
        SETTLE(comm);                                                                              \
        int rc_ = PMPI_Ibarrier(comm, &r_);                                                        \
        if (rc_ == MPI_SUCCESS) rc_ = nm_wait(&r_, MPI_STATUS_IGNORE);                             \
        return rc_ != MPI_SUCCESS ? rc_ : call;                                                    \
    } while (0)

/* ---- communicators and windows ---- */

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    AS_COLLECTIVE(comm, PMPI_Comm_idup(comm, newcomm, &r_));
}

#if MPI_VERSION >= 4
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    AS_COLLECTIVE(comm, PMPI_Comm_idup_with_info(comm, info, newcomm, &r_));
}
#else /* (MPI-3, Open MPI 4.1: no MPI_Comm_idup_with_info) */
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Comm_dup_with_info(comm, info, newcomm));
}
#endif

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Comm_split(comm, color, key, newcomm));
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Comm_create(comm, group, newcomm));
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm *newintercomm)
{
    AFTER_ALL_HERE(local_comm,
                   PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm));
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    AFTER_ALL_HERE(intercomm, PMPI_Intercomm_merge(intercomm, high, newintracomm));
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Cart_sub(comm, remain_dims, newcomm));
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm));
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                                         destinations, destweights, info, reorder, newcomm));
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm *newcomm)
{
    AFTER_ALL_HERE(comm, PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder,
                                                newcomm));
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    AFTER_ALL_HERE(comm, PMPI_Win_create(base, size, disp_unit, info, comm, win));
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win)
{
    AFTER_ALL_HERE(comm, PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win));
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win)
{
    AFTER_ALL_HERE(comm, PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win));
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    AFTER_ALL_HERE(comm, PMPI_Win_create_dynamic(info, comm, win));
}

/* ---- point-to-point calls progress.c does not cover ---- */

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    AS_NONBLOCKING_WHILE_ACTIVE(PMPI_Rsend(buf, count, type, dest, tag, comm),
                                PMPI_Irsend(buf, count, type, dest, tag, comm, &r_));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status)
{
    if (!nm_active()) return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
#if MPI_VERSION >= 4
    MPI_Request r;
    int rc = PMPI_Isendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, &r);
    return rc != MPI_SUCCESS ? rc : nm_wait(&r, status);
#else /* (MPI-3, Open MPI 4.1: no MPI_Isendrecv_replace) the send from a packed copy */
    int bytes = 0, pos = 0;
    int rc = PMPI_Pack_size(count, type, comm, &bytes);
    if (rc != MPI_SUCCESS) return rc;
    void *copy = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!copy) return nm_error(comm, MPI_ERR_NO_MEM);
    MPI_Request r[2];
    MPI_Status st[2];
    rc = PMPI_Pack(buf, count, type, copy, bytes, &pos, comm);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(copy, pos, MPI_PACKED, dest, sendtag, comm, &r[1]);
    if (rc == MPI_SUCCESS && (rc = PMPI_Irecv(buf, count, type, source, recvtag, comm, &r[0])) != MPI_SUCCESS)
        nm_wait(&r[1], MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) rc = nm_waitall(2, r, st);
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st[0];
    free(copy);
    return rc;
#endif
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    for (;;) {
        if (!nm_active()) return PMPI_Mprobe(source, tag, comm, message, status);
        int flag = 0, rc = PMPI_Improbe(source, tag, comm, &flag, message, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        nm_idle();
    }
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
    if (!nm_active()) return PMPI_Mrecv(buf, count, type, message, status);
    MPI_Request r;
    int rc = PMPI_Imrecv(buf, count, type, message, &r);
    return rc != MPI_SUCCESS ? rc : nm_wait(&r, status);
}
