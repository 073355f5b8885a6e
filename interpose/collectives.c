/* MPI_Iallreduce and siblings on nbc. What nbc cannot run goes to MPICH (PMPI_), decided only
 * from what MPI makes equal on every rank (the communicator's kind, the op, the count and the
 * type signature), never from a datatype's layout: ranks may pass different datatypes of equal
 * signature, and some ranks in nbc with the others in MPICH would deadlock. Layouts nbc does
 * not take are packed instead (layout.c).
 *
 * The buffers nbc sees: a reduction runs on count items of the datatype's size (its own
 * datatype when that is a dense predefined one, else the stand-in); a broadcast and the
 * fixed-count data movers (allgather, alltoall, gather, scatter) on bytes, count * size of
 * them; a vector form (alltoallv, alltoallw, gatherv, scatterv, allgatherv) on its own arrays
 * and datatypes when they are dense, else on its blocks packed back to back, in bytes. */
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
    r->unpack_type = nm_hold(r, type);
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
        r->unpack_type = nm_hold(r, type);
        r->unpack_count = count;
    }
    return rc;
}

/* The fixed-count data movers on bytes: nsend blocks of count items of type in sendbuf, nrecv
 * blocks of recvcount items of recvtype in recvbuf (0 where the buffer is not significant on
 * this rank, or is MPI_IN_PLACE); inplace: recvbuf is the input too. A rank that both sends and
 * receives a block moves the same bytes both ways (its own block), or MPI_ERR_TRUNCATE. */
static int blocks_as_bytes(nm_req *r, nm_call *c, int nsend, int nrecv, int inplace)
{
    void *sbuf = (void *)(uintptr_t)c->sendbuf, *rbuf = c->recvbuf;
    int sbytes = 0, rbytes = 0, rc;
    if ((nsend && c->count < 0) || (nrecv && c->recvcount < 0)) return MPI_ERR_COUNT;
    if (nrecv && (rc = as_bytes(r, 0, c->recvbuf, nrecv * c->recvcount, c->recvtype, inplace, 1, &rbuf, &rbytes)))
        return rc;
    if (nsend && (rc = as_bytes(r, 1, c->sendbuf, nsend * c->count, c->type, 1, 0, &sbuf, &sbytes))) return rc;
    int sblock = nsend ? sbytes / nsend : 0, rblock = nrecv ? rbytes / nrecv : sblock;
    if (!nsend) sblock = rblock;
    if (nsend && nrecv && sblock != rblock) return MPI_ERR_TRUNCATE;
    c->sendbuf = sbuf, c->recvbuf = rbuf, c->count = sblock, c->recvcount = rblock;
    c->type = c->recvtype = MPI_BYTE;
    return MPI_SUCCESS;
}

/* One side of a vector form: counts[i] items of type (or of types[i], at byte displacements:
 * alltoallw) at displs[i], i < p. */
typedef struct {
    void *buf;
    const int *counts, *displs;
    MPI_Datatype type;
    const MPI_Datatype *types;
} side;

/* Whether the blocks cannot go to nbc as they are even when dense: a negative displacement, or
 * receive blocks that overlap (which MPI makes erroneous and MPICH runs: unpacked in rank order,
 * the last one written stays). */
typedef struct {
    long long lo, hi;
} span;

static int by_lo(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int awkward(const side *s, int p, int w, int output)
{
    for (int i = 0; i < p; i++)
        if (s->displs[i] < 0) return 1;
    if (!output) return 0;
    span *b = malloc((size_t)(p > 0 ? p : 1) * sizeof *b);
    if (!b) return 1; /* (packing reports the shortage) */
    int n = 0, overlap = 0;
    for (int i = 0; i < p; i++) {
        MPI_Aint lb, extent;
        PMPI_Type_get_extent(w ? s->types[i] : s->type, &lb, &extent);
        long long at = w ? s->displs[i] : (long long)s->displs[i] * extent;
        if (s->counts[i] > 0) b[n++] = (span){at, at + (long long)s->counts[i] * extent};
    }
    qsort(b, (size_t)n, sizeof *b, by_lo);
    for (int i = 1; i < n && !overlap; i++) overlap = b[i].lo < b[i - 1].hi;
    free(b);
    return overlap;
}

/* Whether nbc takes the side as it is (*dense: its datatypes all dense, its blocks not awkward),
 * or MPI's class for bad arguments. */
static int side_check(const side *s, int p, int w, int output, int *dense)
{
    if (!s->counts || !s->displs || (w && !s->types)) return MPI_ERR_ARG;
    *dense = 1;
    for (int i = 0; i < p; i++) {
        MPI_Aint size;
        if (s->counts[i] < 0) return MPI_ERR_COUNT;
        if (i > 0 && !w) continue;
        *dense &= nm_dense(w ? s->types[i] : s->type, &size) != 0;
        if (size < 0) return MPI_ERR_TYPE;
    }
    if (*dense) *dense = !awkward(s, p, w, output);
    return MPI_SUCCESS;
}

/* The side as nbc takes it. Dense datatypes go to nbc as they are. Any other layout is packed
 * into scratch[slot] as one item of a datatype of those blocks, back to back, which nbc takes as
 * bytes: s's counts and displs then point at byte counts and displacements (kept in r), its type
 * is MPI_BYTE (for alltoallw: its types NULL). force: packed even when dense (alltoallw packs
 * both sides or neither). input: packed from buf; output: unpacked into it when done. */
static int vector_side(nm_req *r, int slot, int p, int w, int force, int input, int output, side *s)
{
    int dense, rc = side_check(s, p, w, output, &dense);
    if (rc) return rc;
    if (dense && !force) return MPI_SUCCESS;
    int *bytes = malloc(2 * (size_t)(p > 0 ? p : 1) * sizeof *bytes);
    if (!bytes) return MPI_ERR_NO_MEM;
    r->bytes[slot] = bytes;
    long long at = 0;
    for (int i = 0; i < p; i++) {
        int tsize;
        PMPI_Type_size(w ? s->types[i] : s->type, &tsize);
        long long n = (long long)s->counts[i] * tsize;
        if (at + n > INT_MAX) return MPI_ERR_COUNT; /* packed, the blocks would pass an int of bytes */
        bytes[i] = (int)n, bytes[p + i] = (int)at;
        at += n;
    }
    if (w) {
        MPI_Aint *d = malloc((size_t)(p > 0 ? p : 1) * sizeof *d);
        if (!d) return MPI_ERR_NO_MEM;
        for (int i = 0; i < p; i++) d[i] = s->displs[i];
        rc = PMPI_Type_create_struct(p, s->counts, d, s->types, &r->blocks[slot]);
        free(d);
    } else {
        rc = PMPI_Type_indexed(p, s->counts, s->displs, s->type, &r->blocks[slot]);
    }
    if (rc || (rc = PMPI_Type_commit(&r->blocks[slot]))) return rc;
    void *packed;
    if ((rc = nm_pack(r, slot, input ? s->buf : NULL, 1, r->blocks[slot], (MPI_Aint)at, &packed))) return rc;
    if (output) r->unpack_to = s->buf, r->unpack_type = r->blocks[slot], r->unpack_count = 1;
    *s = (side){packed, bytes, bytes + p, MPI_BYTE, NULL};
    return MPI_SUCCESS;
}

/* A vector form's fixed side (count items of type) as bytes, packed when not dense. */
static int fixed_side(nm_req *r, int slot, int input, int output, const void **buf, int *count, MPI_Datatype *type)
{
    void *out;
    int bytes, rc = as_bytes(r, slot, *buf, *count, *type, input, output, &out, &bytes);
    if (rc == MPI_SUCCESS) *buf = out, *count = bytes, *type = MPI_BYTE;
    return rc;
}

/* The sum of n counts, or -1 when one is negative or the array is NULL. */
static long long total(const int *counts, int n)
{
    long long t = 0;
    if (!counts) return -1;
    for (int i = 0; i < n; i++) {
        if (counts[i] < 0) return -1;
        t += counts[i];
    }
    return t;
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
    case K_IREDUCE_SCATTER_BLOCK: return too_large(c->count, c->type, comm_size(c->comm)) ? R_TOO_LARGE : -1;
    case K_IALLGATHER:
    case K_IALLTOALL: return too_large(c->recvcount, c->recvtype, comm_size(c->comm)) ? R_TOO_LARGE : -1;
    case K_IGATHER:
    case K_ISCATTER: { /* the root's whole buffer: equal on every rank, by the signatures */
        int root = comm_rank(c->comm) == c->root, gather = c->kind == K_IGATHER;
        int n = root == gather ? c->recvcount : c->count;
        MPI_Datatype t = root == gather ? c->recvtype : c->type;
        if (root && gather && c->sendbuf == MPI_IN_PLACE) n = c->recvcount, t = c->recvtype;
        if (root && !gather && c->recvbuf == MPI_IN_PLACE) n = c->count, t = c->type;
        if (!root && gather) n = c->count, t = c->type;
        if (!root && !gather) n = c->recvcount, t = c->recvtype;
        return too_large(n, t, comm_size(c->comm)) ? R_TOO_LARGE : -1;
    }
    case K_ISCAN:
    case K_IEXSCAN: return too_large(c->count, c->type, 1) ? R_TOO_LARGE : -1;
    case K_IREDUCE_SCATTER:
    case K_IALLGATHERV: { /* recvcounts: equal on every rank */
        long long n = total(c->recvcounts, comm_size(c->comm));
        return n > INT_MAX || too_large((int)n, c->kind == K_IALLGATHERV ? c->recvtype : c->type, 1) ? R_TOO_LARGE : -1;
    }
    /* alltoallv, alltoallw, gatherv, scatterv: no total is the same on every rank; blocks that
     * packed would pass an int of bytes fail with MPI_ERR_COUNT (vector_side) */
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
    case K_IALLGATHER:
    case K_IALLTOALL: return nm_bad_args(c->sendbuf, c->recvbuf, 1, c->recvcount, request);
    case K_IALLTOALLV:
    case K_IALLTOALLW:
    case K_IALLGATHERV:
    case K_IREDUCE_SCATTER: return nm_bad_args(c->sendbuf, c->recvbuf, 1, 1, request);
    case K_IGATHER:
    case K_IGATHERV: {
        int root = comm_rank(c->comm) == c->root;
        return nm_bad_args(root ? c->sendbuf : NULL, c->recvbuf, root, c->kind == K_IGATHER ? c->recvcount : 1, request);
    }
    case K_ISCATTER:
    case K_ISCATTERV: /* the root's MPI_IN_PLACE is its receive buffer */
        if (comm_rank(c->comm) != c->root) return nm_bad_args(NULL, c->recvbuf, 1, c->recvcount, request);
        return nm_bad_args(c->recvbuf == MPI_IN_PLACE ? MPI_IN_PLACE : c->sendbuf, c->recvbuf == MPI_IN_PLACE ? NULL : c->recvbuf,
                           c->recvbuf != MPI_IN_PLACE, c->recvcount, request);
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
    case K_IALLTOALL: {
        int inplace = c->sendbuf == MPI_IN_PLACE;
        return blocks_as_bytes(r, c, inplace ? 0 : p, p, inplace);
    }
    case K_IGATHER:
    case K_ISCATTER: {
        int root = comm_rank(c->comm) == c->root, gather = c->kind == K_IGATHER;
        int inplace = root && (gather ? c->sendbuf == MPI_IN_PLACE : c->recvbuf == MPI_IN_PLACE);
        int nsend = gather ? !inplace : root ? p : 0, nrecv = gather ? (root ? p : 0) : !inplace;
        return blocks_as_bytes(r, c, nsend, nrecv, gather && inplace);
    }
    case K_ISCAN:
    case K_IEXSCAN:
        rc = reduction(r, c->sendbuf, c->recvbuf, c->count, c->count, 1, c->type, c->op, &a);
        /* exscan leaves rank 0's receive buffer as it was */
        if (c->kind == K_IEXSCAN && comm_rank(c->comm) == 0) r->unpack_to = NULL;
        break;
    case K_IREDUCE_SCATTER: {
        long long n = total(c->recvcounts, p);
        if (n < 0) return c->recvcounts ? MPI_ERR_COUNT : MPI_ERR_ARG;
        rc = reduction(r, c->sendbuf, c->recvbuf, (int)n, c->recvcounts[comm_rank(c->comm)], 1, c->type, c->op, &a);
        break;
    }
    case K_IALLTOALLV:
    case K_IALLTOALLW: {
        int inplace = c->sendbuf == MPI_IN_PLACE, w = c->kind == K_IALLTOALLW, force = 0;
        side send = {(void *)(uintptr_t)c->sendbuf, c->counts, c->displs, c->type, c->types};
        side recv = {c->recvbuf, c->recvcounts, c->rdispls, c->recvtype, c->recvtypes};
        if (w) { /* one side not dense: both packed, and the call an alltoallv of bytes */
            int dense_recv, dense_send = 1;
            if ((rc = side_check(&recv, p, 1, 1, &dense_recv)) ||
                (!inplace && (rc = side_check(&send, p, 1, 0, &dense_send))))
                return rc;
            force = !dense_recv || !dense_send;
        }
        if ((rc = vector_side(r, 0, p, w, force, inplace, 1, &recv))) return rc;
        if (!inplace && (rc = vector_side(r, 1, p, w, force, 1, 0, &send))) return rc;
        c->sendbuf = inplace ? MPI_IN_PLACE : send.buf, c->counts = send.counts, c->displs = send.displs;
        c->type = send.type, c->types = send.types;
        c->recvbuf = recv.buf, c->recvcounts = recv.counts, c->rdispls = recv.displs;
        c->recvtype = recv.type, c->recvtypes = recv.types;
        if (force) c->kind = K_IALLTOALLV;
        return MPI_SUCCESS;
    }
    case K_IGATHERV:
    case K_IALLGATHERV: { /* the vector is the receive side: the root's for gatherv */
        int inplace = c->sendbuf == MPI_IN_PLACE, has_recv = c->kind == K_IALLGATHERV || comm_rank(c->comm) == c->root;
        side recv = {c->recvbuf, c->recvcounts, c->rdispls, c->recvtype, NULL};
        if (has_recv && (rc = vector_side(r, 0, p, 0, 0, inplace, 1, &recv))) return rc;
        if (!inplace && (rc = fixed_side(r, 1, 1, 0, &c->sendbuf, &c->count, &c->type))) return rc;
        c->recvbuf = recv.buf, c->recvcounts = recv.counts, c->rdispls = recv.displs, c->recvtype = recv.type;
        return MPI_SUCCESS;
    }
    case K_ISCATTERV: { /* the vector is the root's send side */
        int root = comm_rank(c->comm) == c->root, inplace = root && c->recvbuf == MPI_IN_PLACE;
        side send = {(void *)(uintptr_t)c->sendbuf, c->counts, c->displs, c->type, NULL};
        if (root && (rc = vector_side(r, 1, p, 0, 0, 1, 0, &send))) return rc;
        if (!inplace && (rc = fixed_side(r, 0, 0, 1, (const void **)&c->recvbuf, &c->recvcount, &c->recvtype)))
            return rc;
        c->sendbuf = send.buf, c->counts = send.counts, c->displs = send.displs, c->type = send.type;
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
    case K_IALLTOALL:
        return nbc_ialltoall(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm, q);
    case K_IALLTOALLV:
        return nbc_ialltoallv(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcounts, c->rdispls,
                              c->recvtype, c->comm, q);
    case K_IALLTOALLW:
        return nbc_ialltoallw(c->sendbuf, c->counts, c->displs, c->types, c->recvbuf, c->recvcounts, c->rdispls,
                              c->recvtypes, c->comm, q);
    case K_IGATHER:
        return nbc_igather(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm, q);
    case K_IGATHERV:
        return nbc_igatherv(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype, c->root,
                            c->comm, q);
    case K_ISCATTER:
        return nbc_iscatter(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm, q);
    case K_ISCATTERV:
        return nbc_iscatterv(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root,
                             c->comm, q);
    case K_IALLGATHERV:
        return nbc_iallgatherv(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                               c->comm, q);
    case K_IREDUCE_SCATTER:
        return nbc_ireduce_scatter(c->sendbuf, c->recvbuf, c->recvcounts, c->type, c->op, c->comm, q);
    case K_ISCAN: return nbc_iscan(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, q);
    case K_IEXSCAN: return nbc_iexscan(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, q);
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
    case K_IALLTOALL:
        return nbc_alltoall_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm, info,
                                 q);
    case K_IALLTOALLV:
        return nbc_alltoallv_init(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcounts, c->rdispls,
                                  c->recvtype, c->comm, info, q);
    case K_IALLTOALLW:
        return nbc_alltoallw_init(c->sendbuf, c->counts, c->displs, c->types, c->recvbuf, c->recvcounts, c->rdispls,
                                  c->recvtypes, c->comm, info, q);
    case K_IGATHER:
        return nbc_gather_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm,
                               info, q);
    case K_IGATHERV:
        return nbc_gatherv_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                                c->root, c->comm, info, q);
    case K_ISCATTER:
        return nbc_scatter_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm,
                                info, q);
    case K_ISCATTERV:
        return nbc_scatterv_init(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcount, c->recvtype,
                                 c->root, c->comm, info, q);
    case K_IALLGATHERV:
        return nbc_allgatherv_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                                   c->comm, info, q);
    case K_IREDUCE_SCATTER:
        return nbc_reduce_scatter_init(c->sendbuf, c->recvbuf, c->recvcounts, c->type, c->op, c->comm, info, q);
    case K_ISCAN: return nbc_scan_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, q);
    case K_IEXSCAN: return nbc_exscan_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, q);
    default: return MPI_ERR_INTERN;
    }
}

int nm_mpi_start(const nm_call *c, MPI_Request *request)
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
    case K_IALLTOALL:
        return PMPI_Ialltoall(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm, request);
    case K_IALLTOALLV:
        return PMPI_Ialltoallv(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcounts, c->rdispls,
                               c->recvtype, c->comm, request);
    case K_IALLTOALLW:
        return PMPI_Ialltoallw(c->sendbuf, c->counts, c->displs, c->types, c->recvbuf, c->recvcounts, c->rdispls,
                               c->recvtypes, c->comm, request);
    case K_IGATHER:
        return PMPI_Igather(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm,
                            request);
    case K_IGATHERV:
        return PMPI_Igatherv(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                             c->root, c->comm, request);
    case K_ISCATTER:
        return PMPI_Iscatter(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm,
                             request);
    case K_ISCATTERV:
        return PMPI_Iscatterv(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcount, c->recvtype,
                              c->root, c->comm, request);
    case K_IALLGATHERV:
        return PMPI_Iallgatherv(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                                c->comm, request);
    case K_IREDUCE_SCATTER:
        return PMPI_Ireduce_scatter(c->sendbuf, c->recvbuf, c->recvcounts, c->type, c->op, c->comm, request);
    case K_ISCAN: return PMPI_Iscan(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, request);
    case K_IEXSCAN: return PMPI_Iexscan(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, request);
    default: return MPI_ERR_INTERN;
    }
}

int nm_start(nm_call c, MPI_Request *request)
{
    int why = comm_reason(c.comm), rc;
    if (why < 0 && (rc = nm_refused(&c, request)) != MPI_SUCCESS) return nm_error(c.comm, rc);
    if (why < 0) why = nm_route(&c);
    if (why >= 0) {
        nm_passed(c.kind, why);
        return nm_mpi_start(&c, request);
    }
    nm_req *r = nm_req_new(c.comm);
    if (!r) return nm_error(c.comm, MPI_ERR_NO_MEM);
    enum nm_kind kind = c.kind; /* (an alltoallw that packs runs as an alltoallv) */
    rc = nm_prepare(r, &c);
    if (!rc) rc = nm_nbc_start(&c, &r->nbc);
    return nm_error(c.comm, finish_start(r, rc, kind, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    return nm_start(NM_IALLREDUCE(sendbuf, recvbuf, count, datatype, op, comm), request);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IREDUCE(sendbuf, recvbuf, count, datatype, op, root, comm), request);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IREDUCE_SCATTER_BLOCK(sendbuf, recvbuf, recvcount, datatype, op, comm), request);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IBCAST(buffer, count, datatype, root, comm), request);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) { return nm_start(NM_IBARRIER(comm), request); }

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IALLGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), request);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IALLTOALL(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), request);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request)
{
    return nm_start(
        NM_IALLTOALLV(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm), request);
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, MPI_Request *request)
{
    return nm_start(
        NM_IALLTOALLW(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm), request);
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), request);
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm),
                    request);
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_ISCATTER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), request);
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_ISCATTERV(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm),
                    request);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IALLGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm), request);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return nm_start(NM_IREDUCE_SCATTER(sendbuf, recvbuf, recvcounts, datatype, op, comm), request);
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request *request)
{
    return nm_start(NM_ISCAN(sendbuf, recvbuf, count, datatype, op, comm), request);
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request *request)
{
    return nm_start(NM_IEXSCAN(sendbuf, recvbuf, count, datatype, op, comm), request);
}
