/* MPI_Iallreduce and siblings on nbc. What nbc cannot run goes to MPICH (PMPI_), decided only
 * from what MPI makes equal on every rank (the communicator's kind, the op, the count and the
 * type signature), never from a datatype's layout: ranks may pass different datatypes of equal
 * signature, and some ranks in nbc with the others in MPICH would deadlock. Layouts nbc does
 * not take are packed instead (layout.c).
 *
 * The buffers nbc sees: a reduction runs on count items of the datatype's size (its own
 * datatype when that is a dense predefined one, else the stand-in); a broadcast or an
 * allgather on bytes, count * size of them. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "nbcmpi.h"

int nm_error(MPI_Comm comm, int rc)
{
    if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

/* What MPICH refuses before it starts anything, with its error classes, where nbc would crash
 * or run on anyway: no request pointer; MPI_IN_PLACE, or the send buffer, as the receive
 * buffer (uses_recv: the call writes recvbuf on this rank). */
int nm_bad_args(const void *sendbuf, const void *recvbuf, int uses_recv, int count, const MPI_Request *request)
{
    if (!request) return MPI_ERR_ARG;
    if (uses_recv && recvbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER;
    if (uses_recv && count != 0 && sendbuf != MPI_IN_PLACE && sendbuf == recvbuf) return MPI_ERR_BUFFER;
    return MPI_SUCCESS;
}

/* Why a call on this communicator goes to MPICH, or -1 when it runs on nbc. */
static int comm_reason(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL) return R_COMM_NULL;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return R_COMM_NULL;
    return inter ? R_INTERCOMM : -1;
}

/* A reduction's buffers as nbc takes them. n_send and n_recv count items of the datatype in
 * sendbuf and recvbuf; with MPI_IN_PLACE recvbuf is the input (n_in items of it) and its
 * first n_recv items the output. */
typedef struct {
    const void *send;
    void *recv;
    MPI_Datatype type;
    MPI_Op op;
} red_args;

static int reduction(nm_req *r, const void *sendbuf, void *recvbuf, int n_send, int n_recv, int has_recv,
                     MPI_Datatype type, MPI_Op op, red_args *a)
{
    *a = (red_args){sendbuf, recvbuf, type, op};
    MPI_Aint size;
    int dense = nm_dense(type, &size), direct;
    if (size < 0) return MPI_ERR_TYPE;
    int rc = nm_pair_check(type, op, &direct);
    if (rc) return rc;
    if (direct && (dense == 2 || (dense && nm_predefined(type)))) return MPI_SUCCESS;
    rc = nm_standin(r, type, op, size, &a->type, &a->op);
    if (rc || dense) return rc;
    int inplace = sendbuf == MPI_IN_PLACE;
    if (!inplace && (rc = nm_pack(r, 1, sendbuf, n_send, type, n_send * size, (void **)&a->send))) return rc;
    if (!has_recv) return MPI_SUCCESS;
    /* the output (and, in place, the input) in packed form, unpacked when done */
    int n_in = inplace ? n_send : n_recv;
    if ((rc = nm_pack(r, 0, inplace ? recvbuf : NULL, n_in, type, n_in * size, &a->recv))) return rc;
    r->unpack_to = recvbuf;
    r->unpack_type = type;
    r->unpack_count = n_recv;
    return MPI_SUCCESS;
}

/* Bytes for a broadcast or allgather: count items of type as count * size bytes, packed when
 * not dense. slot 0 is the output, unpacked when done. */
static int as_bytes(nm_req *r, int slot, const void *buf, int count, MPI_Datatype type, int input, int output,
                    void **out, int *bytes)
{
    MPI_Aint size;
    int dense = nm_dense(type, &size);
    if (size < 0) return MPI_ERR_TYPE;
    if (count < 0) return MPI_ERR_COUNT;
    *bytes = (int)(count * size);
    *out = (void *)(uintptr_t)buf;
    if (dense) return MPI_SUCCESS;
    int rc = nm_pack(r, slot, input ? buf : NULL, count, type, count * size, out);
    if (rc == MPI_SUCCESS && output) {
        r->unpack_to = (void *)(uintptr_t)buf;
        r->unpack_type = type;
        r->unpack_count = count;
    }
    return rc;
}

/* count * size beyond an int of bytes: MPICH's (equal on every rank: the signature is). */
static int too_large(int count, MPI_Datatype type, int times)
{
    MPI_Aint size;
    if (count <= 0) return 0; /* (a negative one: nbc reports it) */
    if (nm_dense(type, &size) == 2) return (long long)count * size * times > INT_MAX; /* no MPI call */
    int s;
    if (PMPI_Type_size(type, &s) != MPI_SUCCESS) return 0;
    return (long long)count * s * times > INT_MAX;
}

/* The end of every call: a failed start is undone and reported, a good one published. */
static int finish_start(nm_req *r, int rc, enum nm_kind k, MPI_Request *request)
{
    if (rc != MPI_SUCCESS) {
        if (r->nbc != NBC_REQUEST_NULL) nbc_wait(&r->nbc);
        nm_req_discard(r);
        return rc;
    }
    rc = nm_req_publish(r, request);
    if (rc == MPI_SUCCESS) nm_ran(k);
    return rc;
}

static int comm_size(MPI_Comm comm)
{
    int p = 1;
    PMPI_Comm_size(comm, &p);
    return p;
}

static int comm_rank(MPI_Comm comm)
{
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

int nm_route(const nm_call *c)
{
    int why = comm_reason(c->comm);
    if (why >= 0) return why;
    switch (c->kind) {
    case K_IALLREDUCE:
    case K_IREDUCE:
    case K_IBCAST: return too_large(c->count, c->type, 1) ? R_TOO_LARGE : -1;
    case K_IREDUCE_SCATTER_BLOCK: {
        int commute = 1;
        if (too_large(c->count, c->type, comm_size(c->comm))) return R_TOO_LARGE;
        /* no reduce-scatter schedule keeps rank order */
        return PMPI_Op_commutative(c->op, &commute) == MPI_SUCCESS && !commute ? R_NONCOMMUTATIVE : -1;
    }
    case K_IALLGATHER: return too_large(c->recvcount, c->recvtype, comm_size(c->comm)) ? R_TOO_LARGE : -1;
    default: return -1;
    }
}

int nm_refused(const nm_call *c, const MPI_Request *request)
{
    switch (c->kind) {
    case K_IREDUCE:
        return nm_bad_args(c->sendbuf, c->recvbuf, comm_rank(c->comm) == c->root, c->count, request);
    case K_IBCAST:
    case K_IBARRIER: return nm_bad_args(NULL, NULL, 0, c->count, request);
    case K_IALLGATHER: return nm_bad_args(c->sendbuf, c->recvbuf, 1, c->recvcount, request);
    default: return nm_bad_args(c->sendbuf, c->recvbuf, 1, c->count, request);
    }
}

int nm_prepare(nm_req *r, nm_call *c)
{
    red_args a;
    int rc = MPI_SUCCESS, p = comm_size(c->comm);
    switch (c->kind) {
    case K_IALLREDUCE: rc = reduction(r, c->sendbuf, c->recvbuf, c->count, c->count, 1, c->type, c->op, &a); break;
    case K_IREDUCE:
        rc = reduction(r, c->sendbuf, c->recvbuf, c->count, c->count, comm_rank(c->comm) == c->root, c->type, c->op,
                       &a);
        break;
    case K_IREDUCE_SCATTER_BLOCK:
        rc = c->count < 0 ? MPI_ERR_COUNT
                          : reduction(r, c->sendbuf, c->recvbuf, p * c->count, c->count, 1, c->type, c->op, &a);
        break;
    case K_IBCAST: {
        int root = comm_rank(c->comm) == c->root, bytes;
        void *buf;
        if ((rc = as_bytes(r, 0, c->recvbuf, c->count, c->type, root, !root, &buf, &bytes))) return rc;
        c->recvbuf = buf, c->count = bytes, c->type = MPI_BYTE;
        return MPI_SUCCESS;
    }
    case K_IALLGATHER: {
        int inplace = c->sendbuf == MPI_IN_PLACE;
        if (c->recvcount < 0) return MPI_ERR_COUNT;
        if (!inplace && c->recvcount > 0) { /* sendbuf aliasing this rank's block: MPICH's MPI_ERR_BUFFER */
            MPI_Aint lb, extent;
            PMPI_Type_get_extent(c->recvtype, &lb, &extent);
            if (c->sendbuf == (const char *)c->recvbuf + (MPI_Aint)comm_rank(c->comm) * c->recvcount * extent)
                return MPI_ERR_BUFFER;
        }
        void *sbuf = MPI_IN_PLACE, *rbuf = NULL;
        int sbytes = 0, rbytes = 0;
        /* the output: all p blocks (with MPI_IN_PLACE, this rank's block is the input) */
        if ((rc = as_bytes(r, 0, c->recvbuf, p * c->recvcount, c->recvtype, inplace, 1, &rbuf, &rbytes))) return rc;
        if (!inplace && (rc = as_bytes(r, 1, c->sendbuf, c->count, c->type, 1, 0, &sbuf, &sbytes))) return rc;
        if (!inplace && sbytes * p != rbytes) return MPI_ERR_TRUNCATE;
        *c = (nm_call){.kind = c->kind, .sendbuf = sbuf, .recvbuf = rbuf, .count = rbytes / p, .recvcount = rbytes / p,
                       .type = MPI_BYTE, .recvtype = MPI_BYTE, .comm = c->comm};
        return MPI_SUCCESS;
    }
    default: return MPI_SUCCESS;
    }
    if (rc == MPI_SUCCESS) c->sendbuf = a.send, c->recvbuf = a.recv, c->type = a.type, c->op = a.op;
    return rc;
}

int nm_nbc_start(const nm_call *c, nbc_request *q)
{
    switch (c->kind) {
    case K_IALLREDUCE: return nbc_iallreduce(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, q);
    case K_IREDUCE: return nbc_ireduce(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->root, c->comm, q);
    case K_IREDUCE_SCATTER_BLOCK:
        return nbc_ireduce_scatter_block(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, q);
    case K_IBCAST: return nbc_ibcast(c->recvbuf, c->count, c->type, c->root, c->comm, q);
    case K_IBARRIER: return nbc_ibarrier(c->comm, q);
    case K_IALLGATHER:
        return nbc_iallgather(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm, q);
    default: return MPI_ERR_INTERN;
    }
}

int nm_nbc_init(const nm_call *c, MPI_Info info, nbc_request *q)
{
    switch (c->kind) {
    case K_IALLREDUCE: return nbc_allreduce_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, q);
    case K_IREDUCE:
        return nbc_reduce_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->root, c->comm, info, q);
    case K_IREDUCE_SCATTER_BLOCK:
        return nbc_reduce_scatter_block_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, q);
    case K_IBCAST: return nbc_bcast_init(c->recvbuf, c->count, c->type, c->root, c->comm, info, q);
    case K_IBARRIER: return nbc_barrier_init(c->comm, info, q);
    case K_IALLGATHER:
        return nbc_allgather_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm,
                                  info, q);
    default: return MPI_ERR_INTERN;
    }
}

/* MPICH's own non-blocking call, for what nbc does not run. */
static int mpich_start(const nm_call *c, MPI_Request *request)
{
    switch (c->kind) {
    case K_IALLREDUCE: return PMPI_Iallreduce(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, request);
    case K_IREDUCE:
        return PMPI_Ireduce(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->root, c->comm, request);
    case K_IREDUCE_SCATTER_BLOCK:
        return PMPI_Ireduce_scatter_block(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, request);
    case K_IBCAST: return PMPI_Ibcast(c->recvbuf, c->count, c->type, c->root, c->comm, request);
    case K_IBARRIER: return PMPI_Ibarrier(c->comm, request);
    case K_IALLGATHER:
        return PMPI_Iallgather(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm,
                               request);
    default: return MPI_ERR_INTERN;
    }
}

/* Every non-blocking call: to MPICH, refused, or checked, prepared and started on nbc. */
static int run(nm_call c, MPI_Request *request)
{
    int why = comm_reason(c.comm), rc;
    if (why < 0 && (rc = nm_refused(&c, request)) != MPI_SUCCESS) return nm_error(c.comm, rc);
    if (why < 0) why = nm_route(&c);
    if (why >= 0) {
        nm_passed(c.kind, why);
        return mpich_start(&c, request);
    }
    nm_req *r = nm_req_new(c.comm);
    if (!r) return nm_error(c.comm, MPI_ERR_NO_MEM);
    rc = nm_prepare(r, &c);
    if (!rc) rc = nm_nbc_start(&c, &r->nbc);
    return nm_error(c.comm, finish_start(r, rc, c.kind, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    return run((nm_call){.kind = K_IALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                         .type = datatype, .op = op, .comm = comm},
               request);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *request)
{
    return run((nm_call){.kind = K_IREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .type = datatype,
                         .op = op, .root = root, .comm = comm},
               request);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    return run((nm_call){.kind = K_IREDUCE_SCATTER_BLOCK, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .count = recvcount, .type = datatype, .op = op, .comm = comm},
               request);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    return run((nm_call){.kind = K_IBCAST, .recvbuf = buffer, .count = count, .type = datatype, .root = root,
                         .comm = comm},
               request);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    return run((nm_call){.kind = K_IBARRIER, .comm = comm}, request);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return run((nm_call){.kind = K_IALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount,
                         .type = sendtype, .recvcount = recvcount, .recvtype = recvtype, .comm = comm},
               request);
}

/* ---- what nbc does not run: counted, then MPICH's ---- */

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    nm_passed(K_VARIANT, R_VARIANT);
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    nm_passed(K_VARIANT, R_VARIANT);
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
}
