/* One call of any collective, as the public functions pass it on (calls.c, persistent.c). */
#ifndef NBC_CALLS_H
#define NBC_CALLS_H

#include "nbc.h"
#include "internal.h"

typedef struct {
    nbc_collective coll;
    const char *fn;          /* the public function, for messages */
    void *const *bufs;       /* nbc_iallreduce_multi's buffers, nbufs of them */
    int nbufs;
    const void *sendbuf;
    void *recvbuf;
    int count, root;
    MPI_Datatype datatype;
    MPI_Op op;
    MPI_Comm comm;
    /* the data-movement collectives (alltoall, gather, scatter): each side's count and type,
     * as MPI passes them; they run on bytes (call_bytes), count and datatype unused */
    int sendcount, recvcount;
    MPI_Datatype sendtype, recvtype;
} call;

/* A vector collective's call (alltoallv, gatherv, ...): a call (its coll says it is one, and
 * call_prepare then reads the rest) and the caller's arrays, NULL where the call has none;
 * counts and displacements in elements of sendtype (send side) and of the call's datatype
 * (receive side: recvtype); alltoallw's a type per rank, displacements in bytes. The call's
 * count and datatype are the receive side's (scatterv's recvcount, recvtype), its sendcount and
 * sendtype the send side's (gatherv, allgatherv). Read only while the call is made. */
typedef struct {
    call c;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    const MPI_Datatype *stypes, *rtypes;
    int w; /* alltoallw: stypes and rtypes, not sendtype and datatype */
} vcall;

/* count elements of type in bytes (an MPI error class through nbc_fail, or MPI_SUCCESS):
 * the data-movement collectives run on bytes, so that types of equal signature on different
 * ranks match. The type must be contiguous. */
int call_bytes(const char *fn, int count, MPI_Datatype type, int64_t *bytes);

/* A request for the call, not started (chunk_bytes > 0: cut into segments of that size).
 * checked (may be NULL): the communicator's state once the arguments passed their checks,
 * else NULL. */
int call_prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out, comm_state **checked);
/* Prepares and starts the call: nbc_iallreduce and its siblings. */
int call_start(const call *c, nbc_request *request);
void call_launch(struct nbc_req *r);
/* r was prepared before its communicator's node map was known here (r->topo_stale): its
 * messages' program is chosen again with the map, before it runs. MPI_SUCCESS or an error. */
int call_reselect(struct nbc_req *r);
int call_allgather_check(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                         MPI_Datatype recvtype);

/* ---- persistent requests (persistent.c): the bodies of nbc_*_init, nbc_start, ... ---- */
int persistent_init(const call *c, MPI_Info info, nbc_request *request);
int persistent_start(nbc_request *request);
int persistent_startall(int count, nbc_request requests[]);
int persistent_free(nbc_request *request);
int persistent_set_priority(nbc_request request, int priority);

#endif
