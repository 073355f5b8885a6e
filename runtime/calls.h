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

/* A request for the call, not started (chunk_bytes > 0: cut into segments of that size).
 * checked (may be NULL): the communicator's state once the arguments passed their checks,
 * else NULL. */
int call_prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out, comm_state **checked);
/* Prepares and starts the call: nbc_iallreduce and its siblings. */
int call_start(const call *c, nbc_request *request);
void call_launch(struct nbc_req *r);
/* count elements of type in bytes (*bytes), after checking both: MPI_ERR_COUNT for a negative
 * count, MPI_ERR_TYPE for a type that is not contiguous (through nbc_fail, naming fn). */
int call_bytes(const char *fn, int count, MPI_Datatype type, int64_t *bytes);
int call_allgather_check(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                         MPI_Datatype recvtype);

/* ---- persistent requests (persistent.c): the bodies of nbc_*_init, nbc_start, ... ---- */
int persistent_init(const call *c, MPI_Info info, nbc_request *request);
int persistent_start(nbc_request *request);
int persistent_startall(int count, nbc_request requests[]);
int persistent_free(nbc_request *request);
int persistent_set_priority(nbc_request request, int priority);

#endif
