/* The collectives a schedule can implement, and the shape of their buffers. Their names and
 * shapes are one table, in collectives.c; this enum gives their numbers. */
#ifndef NBC_COLLECTIVES_H
#define NBC_COLLECTIVES_H

#include <stdint.h>

typedef enum {
    COLL_ALLREDUCE,      /* recv[k] = ⊕_r send_r[k]                          send count, recv count */
    COLL_REDUCE,         /* at root: recv[k] = ⊕_r send_r[k]                 send count, recv count at root, 0 elsewhere */
    COLL_BCAST,          /* recv[k] = root's recv[k] (one buffer: recvbuf)   send 0, recv count */
    COLL_BARRIER,        /* no data: schedules exchange 1-byte tokens in scratch */
    COLL_REDUCE_SCATTER, /* block form: recv[k] = ⊕_r send_r[rank·count + k]  send p·count, recv count */
    COLL_ALLGATHER,      /* recv[r·count + k] = send_r[k]                    send count, recv p·count */
    COLL_ALLREDUCE_MULTI,/* every bufs(i)[k] = ⊕_r ⊕_j bufs_r(j)[k], in place; recvbuf is bufs(0) */
    COLL_ALLTOALL,       /* recv[r·count + k] = send_r[rank·count + k]       send p·count, recv p·count */
    COLL_GATHER,         /* at root: recv[r·count + k] = send_r[k]           send count, recv p·count at root, 0 elsewhere */
    COLL_SCATTER,        /* recv[k] = root's send[rank·count + k]            send p·count at root, 0 elsewhere, recv count */
    COLL_SCAN,           /* recv[k] = send_0[k] ⊕ .. ⊕ send_rank[k]          send count, recv count */
    COLL_EXSCAN,         /* recv[k] = send_0[k] ⊕ .. ⊕ send_(rank-1)[k]; rank 0's recvbuf untouched */
    /* The vector collectives: their blocks' lengths and places are per-rank vectors (below) */
    COLL_ALLTOALLV,      /* recv[rdispls[r] + k] = send_r[sdispls_r[rank] + k], k < recvcounts[r] */
    COLL_GATHERV,        /* at root: recv[displs[r] + k] = send_r[k], k < recvcounts[r] */
    COLL_SCATTERV,       /* recv[k] = root's send[displs[rank] + k], k < count */
    COLL_ALLGATHERV,     /* recv[displs[r] + k] = send_r[k], k < recvcounts[r] */
    COLL_REDUCE_SCATTERV,/* recv[k] = ⊕_r send_r[displs[rank] + k], k < recvcounts[rank],
                            displs the prefix sums of recvcounts */
    COLL_COUNT_
} nbc_collective;

extern const char *const collective_names[COLL_COUNT_];
int collective_from_name(const char *name); /* -1 when unknown */
/* Whether a collective applies the call's operator (and so checks it, and needs a commutative
 * one unless its schedule is 'ordered'); whether it has a root. 0 for -1. */
int collective_reduces(int c);
int collective_rooted(int c);
/* Whether MPI_IN_PLACE on `rank` makes that rank's call in place: for a rooted collective with
 * data (reduce, gather, scatter) only the root's is; elsewhere every rank's. */
int collective_inplace_at(int c, int64_t rank, int64_t root, int inplace);

/* Element counts of sendbuf and recvbuf on `rank`, and where sendbuf lies inside recvbuf when
 * the call is in place (MPI_IN_PLACE): for allgather and gather it is the rank's own block; for
 * reduce_scatter and alltoall in place the input is the whole recvbuf, p·count long. A scatter
 * in place (the root's recvbuf is MPI_IN_PLACE) runs with the root's p·count sendbuf as its
 * recvbuf: the input is all of it, and the root's block stays where it is. */
typedef struct {
    int64_t send_len, recv_len, inplace_send_off;
} coll_shape;
coll_shape collective_shape(nbc_collective c, int64_t p, int64_t rank, int64_t root, int64_t count, int inplace);

/* The per-rank vectors of a vector collective: p-long, in elements, NULL where the call has
 * none on this rank (gatherv's recvcounts off the root). Four places: the send counts and
 * displacements, the receive counts and displacements. collective_vector_name gives the
 * name a schedule reads each by (MPI's argument name: "displs" for gatherv's receive
 * displacements, ...), NULL when the collective has no such vector. */
enum { VEC_SCOUNTS, VEC_SDISPLS, VEC_RCOUNTS, VEC_RDISPLS, COLL_NVEC };
const char *collective_vector_name(int c, int which);
int collective_has_vectors(int c); /* whether c is a vector collective */
/* Whether MPI_IN_PLACE stands for the root's recvbuf rather than sendbuf (scatterv's): the
 * root keeps its block in sendbuf and receives nothing; sendbuf is still its own buffer. */
int collective_inplace_is_recv(int c);
/* Equal vectors, for tools that know a count but no vectors (nbcc simulate, draw): every count
 * `count`, blocks packed in rank order, given where the collective has them on `rank` (space:
 * 4·p values the vectors point into; all NULL for other collectives). */
void collective_uniform_vectors(int c, int64_t p, int64_t rank, int64_t root, int64_t count, int64_t *space,
                                const int64_t *vec[COLL_NVEC]);
/* collective_shape for a vector collective, from this rank's vectors (vec[VEC_...], each p
 * long or NULL); the others ignore vec. Lengths are the blocks' furthest ends: alltoallv's
 * sendbuf is max over r of sdispls[r] + sendcounts[r] (0 where every count is 0). */
coll_shape collective_shape_vec(nbc_collective c, int64_t p, int64_t rank, int64_t root, int64_t count, int inplace,
                                const int64_t *const *vec);

#endif
