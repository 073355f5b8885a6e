/* One call of any collective, as the public functions pass it on (calls.c, persistent.c). */
#ifndef NBC_CALLS_H
#define NBC_CALLS_H

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
} call;

int call_prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out);
void call_launch(struct nbc_req *r);
int call_allgather_check(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                         MPI_Datatype recvtype);

#endif
