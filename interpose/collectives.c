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

#define REFUSE_BAD_ARGS(comm, sendbuf, recvbuf, uses_recv, count, request)                                        \
    do {                                                                                                       \
        int bad_ = nm_bad_args(sendbuf, recvbuf, uses_recv, count, request);                                   \
        if (bad_ != MPI_SUCCESS) return nm_error(comm, bad_);                                                  \
    } while (0)

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

#define PASS_IF_NEEDED(kind, comm, call)                                                                           \
    do {                                                                                                       \
        int why_ = comm_reason(comm);                                                                          \
        if (why_ >= 0) {                                                                                       \
            nm_passed(kind, why_);                                                                             \
            return call;                                                                                       \
        }                                                                                                      \
    } while (0)

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    PASS_IF_NEEDED(K_IALLREDUCE, comm, PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request));
    REFUSE_BAD_ARGS(comm, sendbuf, recvbuf, 1, count, request);
    if (too_large(count, datatype, 1)) {
        nm_passed(K_IALLREDUCE, R_TOO_LARGE);
        return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    }
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    red_args a;
    int rc = reduction(r, sendbuf, recvbuf, count, count, 1, datatype, op, &a);
    if (!rc) rc = nbc_iallreduce(a.send, a.recv, count, a.type, a.op, comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IALLREDUCE, request));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *request)
{
    PASS_IF_NEEDED(K_IREDUCE, comm, PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request));
    if (too_large(count, datatype, 1)) {
        nm_passed(K_IREDUCE, R_TOO_LARGE);
        return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    }
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    int bad = nm_bad_args(sendbuf, recvbuf, rank == root, count, request);
    if (bad != MPI_SUCCESS) {
        nm_req_discard(r);
        return nm_error(comm, bad);
    }
    red_args a;
    int rc = reduction(r, sendbuf, recvbuf, count, count, rank == root, datatype, op, &a);
    if (!rc) rc = nbc_ireduce(a.send, a.recv, count, a.type, a.op, root, comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IREDUCE, request));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    PASS_IF_NEEDED(K_IREDUCE_SCATTER_BLOCK, comm,
                   PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request));
    REFUSE_BAD_ARGS(comm, sendbuf, recvbuf, 1, recvcount, request);
    int p, commute = 1;
    PMPI_Comm_size(comm, &p);
    if (too_large(recvcount, datatype, p) || (PMPI_Op_commutative(op, &commute) == MPI_SUCCESS && !commute)) {
        nm_passed(K_IREDUCE_SCATTER_BLOCK, commute ? R_TOO_LARGE : R_NONCOMMUTATIVE);
        return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    }
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    red_args a;
    int rc = recvcount < 0 ? MPI_ERR_COUNT
                           : reduction(r, sendbuf, recvbuf, p * recvcount, recvcount, 1, datatype, op, &a);
    if (!rc) rc = nbc_ireduce_scatter_block(a.send, a.recv, recvcount, a.type, a.op, comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IREDUCE_SCATTER_BLOCK, request));
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    PASS_IF_NEEDED(K_IBCAST, comm, PMPI_Ibcast(buffer, count, datatype, root, comm, request));
    REFUSE_BAD_ARGS(comm, NULL, NULL, 0, count, request);
    if (too_large(count, datatype, 1)) {
        nm_passed(K_IBCAST, R_TOO_LARGE);
        return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    }
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    void *buf;
    int bytes;
    int rc = as_bytes(r, 0, buffer, count, datatype, rank == root, rank != root, &buf, &bytes);
    if (!rc) rc = nbc_ibcast(buf, bytes, MPI_BYTE, root, comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IBCAST, request));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    PASS_IF_NEEDED(K_IBARRIER, comm, PMPI_Ibarrier(comm, request));
    REFUSE_BAD_ARGS(comm, NULL, NULL, 0, 0, request);
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    int rc = nbc_ibarrier(comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IBARRIER, request));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    PASS_IF_NEEDED(K_IALLGATHER, comm,
                   PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
    REFUSE_BAD_ARGS(comm, sendbuf, recvbuf, 1, recvcount, request);
    int p;
    PMPI_Comm_size(comm, &p);
    if (too_large(recvcount, recvtype, p)) {
        nm_passed(K_IALLGATHER, R_TOO_LARGE);
        return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    }
    nm_req *r = nm_req_new(comm);
    if (!r) return nm_error(comm, MPI_ERR_NO_MEM);
    int inplace = sendbuf == MPI_IN_PLACE, rc = recvcount < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
    if (!rc && !inplace && recvcount > 0) { /* sendbuf aliasing this rank's block: MPICH's MPI_ERR_BUFFER */
        int rank;
        MPI_Aint lb, extent;
        PMPI_Comm_rank(comm, &rank);
        PMPI_Type_get_extent(recvtype, &lb, &extent);
        if (sendbuf == (const char *)recvbuf + (MPI_Aint)rank * recvcount * extent) rc = MPI_ERR_BUFFER;
    }
    void *sbuf = MPI_IN_PLACE, *rbuf = NULL;
    int sbytes = 0, rbytes = 0;
    /* the output: all p blocks (with MPI_IN_PLACE, this rank's block is the input) */
    if (!rc) rc = as_bytes(r, 0, recvbuf, p * recvcount, recvtype, inplace, 1, &rbuf, &rbytes);
    if (!rc && !inplace) rc = as_bytes(r, 1, sendbuf, sendcount, sendtype, 1, 0, &sbuf, &sbytes);
    if (!rc && !inplace && sbytes * p != rbytes) rc = MPI_ERR_TRUNCATE;
    if (!rc) rc = nbc_iallgather(sbuf, rbytes / (p ? p : 1), MPI_BYTE, rbuf, rbytes / (p ? p : 1), MPI_BYTE, comm, &r->nbc);
    return nm_error(comm, finish_start(r, rc, K_IALLGATHER, request));
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
