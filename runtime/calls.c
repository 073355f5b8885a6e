/* The collective calls: their arguments checked, the program chosen and compiled (or found
 * in the cache), and a request made from it: started at once (nbc_iallreduce and siblings) or
 * kept for nbc_start (nbc_allreduce_init and siblings, persistent.c). */
#include "nbc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "state.h"
#include "trace.h"

/* ---- arguments ---- */

static int check_comm(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL) return nbc_fail(MPI_ERR_COMM, "the communicator is MPI_COMM_NULL");
    int inter = 0;
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return nbc_fail(MPI_ERR_COMM, "only intra-communicators are supported");
    return MPI_SUCCESS;
}

/* The element size; only contiguous datatypes (size == extent, lower bound 0) are supported,
 * because local copies and reductions treat the buffers as arrays. empty_ok: a type of no data
 * (MPI_Type_contiguous(0, ...), whatever its extent) is fine too, with size 0: what moves bytes
 * moves none of it. */
static int check_type(MPI_Datatype dt, int empty_ok, MPI_Aint *esize)
{
    if (dt == MPI_DATATYPE_NULL) return nbc_fail(MPI_ERR_TYPE, "the datatype is MPI_DATATYPE_NULL");
    /* The common predefined types are contiguous with C's sizes: no MPI query on the call path
     * (a user's type could be freed and its handle reused, so only these are known). */
    static const struct {
        MPI_Datatype dt;
        MPI_Aint size;
    } known[] = {
        {MPI_DOUBLE, sizeof(double)}, {MPI_FLOAT, sizeof(float)},   {MPI_INT, sizeof(int)},
        {MPI_LONG, sizeof(long)},     {MPI_LONG_LONG, sizeof(long long)},
        {MPI_UNSIGNED, sizeof(unsigned)}, {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
        {MPI_INT64_T, 8}, {MPI_UINT64_T, 8}, {MPI_INT32_T, 4}, {MPI_UINT32_T, 4},
        {MPI_BYTE, 1},    {MPI_CHAR, 1},     {MPI_UNSIGNED_CHAR, 1},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (dt == known[i].dt) {
            *esize = known[i].size;
            return MPI_SUCCESS;
        }
    MPI_Aint lb, extent;
    int size;
    if (MPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS || MPI_Type_size(dt, &size) != MPI_SUCCESS)
        return nbc_fail(MPI_ERR_TYPE, "invalid datatype");
    if (empty_ok && size == 0) {
        *esize = 0;
        return MPI_SUCCESS;
    }
    if (lb != 0 || extent != size || size <= 0)
        return nbc_fail(MPI_ERR_TYPE, "only contiguous datatypes are supported (size %d, extent %ld, lower bound %ld)",
                        size, (long)extent, (long)lb);
    *esize = extent;
    return MPI_SUCCESS;
}

static int check_datatype(MPI_Datatype dt, MPI_Aint *esize) { return check_type(dt, 0, esize); }

/* Predefined ops that MPI defines only on some types: with no kernel for the type, the pair
 * is invalid (and MPICH would abort inside MPI_Reduce_local rather than return an error). */
static int kernel_required(MPI_Op op)
{
    static const MPI_Op typed[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND,
                                   MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++)
        if (op == typed[i]) return 1;
    return 0;
}

static int check_op(MPI_Op op, MPI_Datatype dt, const reduce_kernels **kernel, int *commutative)
{
    if (op == MPI_OP_NULL) return nbc_fail(MPI_ERR_OP, "the op is MPI_OP_NULL");
    *kernel = reduce_kernel(dt, op);
    if (!*kernel && kernel_required(op) && !reduce_defined_without_kernel(dt, op))
        return nbc_fail(MPI_ERR_OP, "this predefined op is not defined on this datatype");
    if (*kernel) *commutative = 1; /* every predefined op is */
    else if (MPI_Op_commutative(op, commutative) != MPI_SUCCESS) return nbc_fail(MPI_ERR_OP, "invalid op");
    return MPI_SUCCESS;
}

int call_bytes(const char *fn, int count, MPI_Datatype type, int64_t *bytes)
{
    *bytes = 0;
    if (count < 0) return nbc_fail(MPI_ERR_COUNT, "%s: count %d is negative", fn, count);
    MPI_Aint esize;
    int rc = check_type(type, 1, &esize);
    if (rc) return rc;
    *bytes = (int64_t)count * (int64_t)esize;
    return MPI_SUCCESS;
}

/* ---- collectives ---- */

/* The collectives that move data without reducing it run on bytes: each rank's counts and
 * types become a block's bytes, so that types of equal signature may differ between ranks. */
static int on_bytes(nbc_collective coll)
{
    return coll == COLL_ALLTOALL || coll == COLL_GATHER || coll == COLL_SCATTER ||
           (collective_has_vectors(coll) && !collective_reduces(coll));
}

/* Whether the call is in place: MPI_IN_PLACE as sendbuf, or as the root's recvbuf of a
 * scatter or scatterv (whose input then stays in sendbuf: a scatter's program takes it as its
 * recvbuf, a scatterv's has none). */
static int call_inplace(const call *c)
{
    int at_recv = c->coll == COLL_SCATTER || collective_inplace_is_recv(c->coll);
    return at_recv ? c->recvbuf == MPI_IN_PLACE : c->sendbuf == MPI_IN_PLACE;
}

/* Whether n bytes at a and m bytes at b share a byte. */
static int overlap(const void *a, int64_t n, const void *b, int64_t m)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return n > 0 && m > 0 && x < y + (uint64_t)m && y < x + (uint64_t)n;
}

/* MPI makes a send buffer that overlaps the receive buffer erroneous (MPI_IN_PLACE says it), and
 * the schedules would read inputs they already overwrote: refused, as MPICH refuses an aliased
 * one, with MPI_ERR_BUFFER. Lengths in bytes; a rank whose receive buffer is not significant
 * (reduce off the root) is not checked. */
static int check_aliasing(const call *c, int size, int rank, int64_t esize)
{
    int64_t n = (int64_t)c->count * esize, send = n, recv = n;
    if (c->coll == COLL_ALLREDUCE_MULTI) {
        for (int i = 0; i < c->nbufs; i++)
            for (int j = 0; j < i; j++)
                if (overlap(c->bufs[i], n, c->bufs[j], n))
                    return nbc_fail(MPI_ERR_BUFFER, "%s: bufs[%d] and bufs[%d] overlap", c->fn, j, i);
        return MPI_SUCCESS;
    }
    if (c->sendbuf == MPI_IN_PLACE || c->coll == COLL_BCAST || c->coll == COLL_BARRIER) return MPI_SUCCESS;
    if (c->coll == COLL_REDUCE && rank != c->root) return MPI_SUCCESS;
    if (c->coll == COLL_REDUCE_SCATTER) send = n * size;
    if (c->coll == COLL_ALLGATHER) recv = n * size;
    if (overlap(c->sendbuf, send, c->recvbuf, recv))
        return nbc_fail(MPI_ERR_BUFFER, "%s: sendbuf and recvbuf overlap (%s); pass MPI_IN_PLACE as sendbuf to "
                        "reduce in place", c->fn, c->sendbuf == c->recvbuf ? "they are the same buffer" : "in part");
    return MPI_SUCCESS;
}

/* A data-movement collective's arguments, as far as they are significant on this rank, and its
 * block's bytes (*count). MPI_IN_PLACE: alltoall's sendbuf, gather's sendbuf at the root,
 * scatter's recvbuf at the root. */
static int check_bytes_call(const call *c, int size, int rank, int64_t *count)
{
    int rc;
    int64_t sb = 0, rb = 0;
    int root = c->coll != COLL_ALLTOALL, at_root = root && rank == c->root;
    if (root && (c->root < 0 || c->root >= size))
        return nbc_fail(MPI_ERR_ROOT, "%s: root %d is outside 0..%d", c->fn, c->root, size - 1);
    /* which sides are significant here */
    int inplace = call_inplace(c);
    int uses_send = c->coll == COLL_ALLTOALL ? !inplace : c->coll == COLL_GATHER ? !(at_root && inplace) : at_root;
    int uses_recv = c->coll == COLL_ALLTOALL ? 1 : c->coll == COLL_GATHER ? at_root : !(at_root && inplace);
    if (inplace && root && !at_root)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is for the root only", c->fn);
    if (c->coll == COLL_SCATTER && at_root && c->sendbuf == MPI_IN_PLACE)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is not a send buffer of a scatter; pass it as the root's recvbuf", c->fn);
    if (uses_send && (rc = call_bytes(c->fn, c->sendcount, c->sendtype, &sb))) return rc;
    if (uses_recv && (rc = call_bytes(c->fn, c->recvcount, c->recvtype, &rb))) return rc;
    if (uses_send && uses_recv && sb != rb)
        return nbc_fail(MPI_ERR_COUNT, "%s: sendcount × the size of sendtype (%lld bytes) differs from recvcount × the size "
                        "of recvtype (%lld bytes)", c->fn, (long long)sb, (long long)rb);
    *count = uses_recv ? rb : sb;
    /* the bytes each buffer spans here */
    int64_t send = c->coll == COLL_GATHER ? sb : (int64_t)size * sb;
    int64_t recv = c->coll == COLL_SCATTER ? rb : (int64_t)size * rb;
    if (uses_send && send > 0 && !c->sendbuf) return nbc_fail(MPI_ERR_BUFFER, "%s: sendbuf is NULL", c->fn);
    if (uses_recv && recv > 0 && !c->recvbuf) return nbc_fail(MPI_ERR_BUFFER, "%s: recvbuf is NULL", c->fn);
    if (uses_recv && c->recvbuf == MPI_IN_PLACE)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is not a receive buffer", c->fn);
    if (uses_send && uses_recv && overlap(c->sendbuf, send, c->recvbuf, recv))
        return nbc_fail(MPI_ERR_BUFFER, "%s: sendbuf and recvbuf overlap (%s); pass MPI_IN_PLACE as %s to work in place",
                        c->fn, c->sendbuf == c->recvbuf ? "they are the same buffer" : "in part",
                        c->coll == COLL_SCATTER ? "the root's recvbuf" : "sendbuf");
    return MPI_SUCCESS;
}

/* Every argument is checked before anything is touched. *count: the count the program is
 * compiled for (a block's bytes for the collectives on bytes). */
static int check_call(const call *c, int size, int rank, MPI_Aint *esize, int64_t *count, const reduce_kernels **kernel,
                      int *commutative)
{
    int rc;
    *esize = 1;
    *count = c->coll == COLL_BARRIER ? 0 : c->count;
    *kernel = NULL;
    *commutative = 1;
    if (c->coll == COLL_BARRIER) return MPI_SUCCESS;
    if (on_bytes(c->coll)) return check_bytes_call(c, size, rank, count);
    if (c->count < 0) return nbc_fail(MPI_ERR_COUNT, "%s: count %d is negative", c->fn, c->count);
    if ((rc = check_datatype(c->datatype, esize))) return rc;
    if (collective_reduces(c->coll) && (rc = check_op(c->op, c->datatype, kernel, commutative))) return rc;
    int rooted = collective_rooted(c->coll);
    if (rooted && (c->root < 0 || c->root >= size))
        return nbc_fail(MPI_ERR_ROOT, "%s: root %d is outside 0..%d", c->fn, c->root, size - 1);
    int inplace = c->sendbuf == MPI_IN_PLACE;
    if (c->coll == COLL_REDUCE && inplace && rank != c->root)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is for the root only", c->fn);
    if (c->coll == COLL_ALLREDUCE_MULTI) {
        if (c->nbufs < 1 || c->nbufs > NBC_MAX_BUFFERS || !c->bufs)
            return nbc_fail(MPI_ERR_ARG, "%s: nbufs must be 1 .. %d and bufs not NULL", c->fn, NBC_MAX_BUFFERS);
        for (int i = 0; i < c->nbufs; i++)
            if (c->count > 0 && !c->bufs[i]) return nbc_fail(MPI_ERR_BUFFER, "%s: bufs[%d] is NULL", c->fn, i);
        return check_aliasing(c, size, rank, *esize);
    }
    int needs_send = c->coll != COLL_BCAST && !inplace;
    int needs_recv = c->coll != COLL_REDUCE || rank == c->root;
    if (c->count > 0 && ((needs_send && !c->sendbuf) || (needs_recv && !c->recvbuf)))
        return nbc_fail(MPI_ERR_BUFFER, "%s: %s is NULL", c->fn, needs_recv && !c->recvbuf ? "recvbuf" : "sendbuf");
    /* MPI_IN_PLACE is a send buffer only (as a receive buffer it is an address nbc would write
     * to): MPICH's class */
    if (needs_recv && c->recvbuf == MPI_IN_PLACE)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is not a receive buffer", c->fn);
    return check_aliasing(c, size, rank, *esize);
}

/* ---- the vector collectives ---- */

/* What the checks of a vector call make of it: this rank's vectors (bytes, or elements for
 * reduce_scatterv) in the call's space, its count, and the extents of its buffers. */
typedef struct {
    const int64_t *vec[COLL_NVEC];
    int64_t count, send_len, recv_len; /* in esize units */
} vector_call;

/* One side's vectors: counts[r] elements of type (types[r] for alltoallw) at displs[r]
 * elements (bytes for alltoallw), in bytes into cnt and dsp; returns the extent in *len. */
static int side_bytes(const vcall *c, int size, const int *counts, const int *displs, MPI_Datatype type,
                      const MPI_Datatype *types, int64_t *cnt, int64_t *dsp, int64_t *len)
{
    int rc;
    MPI_Aint tsize = 1;
    *len = 0;
    if (!types && (rc = check_type(type, 1, &tsize))) return rc;
    for (int r = 0; r < size; r++) {
        if ((rc = call_bytes(c->c.fn, counts[r], types ? types[r] : type, &cnt[r]))) return rc;
        if (displs[r] < 0)
            return nbc_fail(MPI_ERR_ARG, "%s: displacement %d of rank %d is negative (not supported)", c->c.fn, displs[r], r);
        dsp[r] = types ? displs[r] : (int64_t)displs[r] * tsize;
        if (cnt[r] > 0 && dsp[r] + cnt[r] > *len) *len = dsp[r] + cnt[r];
    }
    return MPI_SUCCESS;
}

/* MPI makes receive blocks that overlap erroneous, and the schedules would race on them:
 * refused, naming two of them. (The interposition library packs such blocks, as MPICH runs them.) */
typedef struct {
    int64_t lo, hi;
    int rank;
} block_at;

static int by_lo(const void *a, const void *b)
{
    const block_at *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int receive_blocks_apart(const call *c, int size, const int64_t *cnt, const int64_t *dsp)
{
    block_at *b = malloc((size_t)size * sizeof *b);
    int n = 0, rc = MPI_SUCCESS;
    if (!b) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    for (int r = 0; r < size; r++)
        if (cnt[r] > 0) b[n++] = (block_at){dsp[r], dsp[r] + cnt[r], r};
    qsort(b, (size_t)n, sizeof *b, by_lo);
    for (int i = 1; i < n && !rc; i++)
        if (b[i].lo < b[i - 1].hi)
            rc = nbc_fail(MPI_ERR_ARG, "%s: the receive blocks of ranks %d and %d overlap (MPI makes that erroneous)",
                          c->fn, b[i - 1].rank, b[i].rank);
    free(b);
    return rc;
}

static int null_array(const call *c, const char *what)
{
    return nbc_fail(MPI_ERR_ARG, "%s: %s is NULL", c->fn, what);
}

static int own_block(const call *c, int64_t sent, int64_t received)
{
    return nbc_fail(MPI_ERR_TRUNCATE, "%s: this rank's own block is %lld bytes to send but %lld to receive", c->fn,
                    (long long)sent, (long long)received);
}

/* Every argument of a vector call checked, before anything is touched; space: 4·size values. */
static int check_vector_call(const vcall *vcl, int size, int rank, int64_t *space, vector_call *v, MPI_Aint *esize,
                             const reduce_kernels **kernel, int *commutative)
{
    const call *c = &vcl->c;
    int rc, inplace = call_inplace(c), root = rank == c->root;
    int64_t *sc = space, *sd = space + size, *rcn = space + 2 * size, *rd = space + 3 * size;
    memset(v, 0, sizeof *v);
    *esize = 1;
    *kernel = NULL;
    *commutative = 1;
    if (collective_rooted(c->coll) && (c->root < 0 || c->root >= size))
        return nbc_fail(MPI_ERR_ROOT, "%s: root %d is outside 0..%d", c->fn, c->root, size - 1);
    if (inplace && collective_rooted(c->coll) && !root)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is for the root only", c->fn);
    int64_t own = 0;
    switch (c->coll) {
    case COLL_ALLTOALLV:
        if (!vcl->rcounts || !vcl->rdispls || (!inplace && (!vcl->scounts || !vcl->sdispls)))
            return null_array(c, "a count or displacement array");
        if (vcl->w && (!vcl->rtypes || (!inplace && !vcl->stypes))) return null_array(c, vcl->rtypes ? "sendtypes" : "recvtypes");
        if ((rc = side_bytes(vcl, size, vcl->rcounts, vcl->rdispls, c->datatype, vcl->rtypes, rcn, rd, &v->recv_len)) ||
            (rc = receive_blocks_apart(c, size, rcn, rd)))
            return rc;
        if (inplace) { /* MPI: the data sent is recvbuf's, by recvcounts and rdispls */
            memcpy(sc, rcn, (size_t)size * sizeof *sc);
            memcpy(sd, rd, (size_t)size * sizeof *sd);
            v->send_len = v->recv_len;
        } else {
            if ((rc = side_bytes(vcl, size, vcl->scounts, vcl->sdispls, c->sendtype, vcl->stypes, sc, sd, &v->send_len))) return rc;
            if (sc[rank] != rcn[rank]) return own_block(c, sc[rank], rcn[rank]);
        }
        v->vec[VEC_SCOUNTS] = sc, v->vec[VEC_SDISPLS] = sd, v->vec[VEC_RCOUNTS] = rcn, v->vec[VEC_RDISPLS] = rd;
        break;
    case COLL_GATHERV:
        if (!inplace && (rc = call_bytes(c->fn, c->sendcount, c->sendtype, &own))) return rc;
        if (root) {
            if (!vcl->rcounts || !vcl->rdispls) return null_array(c, "recvcounts or displs");
            if ((rc = side_bytes(vcl, size, vcl->rcounts, vcl->rdispls, c->datatype, NULL, rcn, rd, &v->recv_len)) ||
                (rc = receive_blocks_apart(c, size, rcn, rd)))
                return rc;
            if (inplace) own = rcn[rank];
            else if (own != rcn[rank]) return own_block(c, own, rcn[rank]);
            v->vec[VEC_RCOUNTS] = rcn, v->vec[VEC_RDISPLS] = rd;
        }
        v->count = v->send_len = own;
        break;
    case COLL_SCATTERV:
        if (!inplace && (rc = call_bytes(c->fn, c->count, c->datatype, &own))) return rc;
        if (root) {
            if (!vcl->scounts || !vcl->sdispls) return null_array(c, "sendcounts or displs");
            if (c->sendbuf == MPI_IN_PLACE) return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is the root's recvbuf here, not its sendbuf", c->fn);
            if ((rc = side_bytes(vcl, size, vcl->scounts, vcl->sdispls, c->sendtype, NULL, sc, sd, &v->send_len))) return rc;
            if (!inplace && own != sc[rank]) return own_block(c, sc[rank], own);
            v->vec[VEC_SCOUNTS] = sc, v->vec[VEC_SDISPLS] = sd;
        }
        v->count = v->recv_len = inplace ? 0 : own;
        break;
    case COLL_ALLGATHERV:
        if (!vcl->rcounts || !vcl->rdispls) return null_array(c, "recvcounts or displs");
        if ((rc = side_bytes(vcl, size, vcl->rcounts, vcl->rdispls, c->datatype, NULL, rcn, rd, &v->recv_len)) ||
            (rc = receive_blocks_apart(c, size, rcn, rd)))
            return rc;
        if (inplace) own = rcn[rank];
        else if ((rc = call_bytes(c->fn, c->sendcount, c->sendtype, &own))) return rc;
        else if (own != rcn[rank]) return own_block(c, own, rcn[rank]);
        v->count = v->send_len = own;
        v->vec[VEC_RCOUNTS] = rcn, v->vec[VEC_RDISPLS] = rd;
        break;
    case COLL_REDUCE_SCATTERV: {
        if (!vcl->rcounts) return null_array(c, "recvcounts");
        if ((rc = check_datatype(c->datatype, esize))) return rc;
        if ((rc = check_op(c->op, c->datatype, kernel, commutative))) return rc;
        int64_t all = 0;
        for (int r = 0; r < size; r++) {
            if (vcl->rcounts[r] < 0) return nbc_fail(MPI_ERR_COUNT, "%s: recvcounts[%d] = %d is negative", c->fn, r, vcl->rcounts[r]);
            all += rcn[r] = vcl->rcounts[r];
        }
        v->count = rcn[rank];
        v->send_len = all;
        v->recv_len = inplace ? all : v->count;
        v->vec[VEC_RCOUNTS] = rcn;
        break;
    }
    default: return nbc_fail(MPI_ERR_INTERN, "%s: not a vector collective", c->fn);
    }
    /* the buffers: NULL only where nothing is read or written */
    int needs_send = !inplace && v->send_len > 0 && (c->coll != COLL_SCATTERV || root);
    int needs_recv = v->recv_len > 0 && (c->coll != COLL_GATHERV || root);
    if (needs_recv && c->recvbuf == MPI_IN_PLACE)
        return nbc_fail(MPI_ERR_BUFFER, "%s: MPI_IN_PLACE is not a receive buffer", c->fn);
    if ((needs_send && !c->sendbuf) || (needs_recv && !c->recvbuf))
        return nbc_fail(MPI_ERR_BUFFER, "%s: %s is NULL", c->fn, needs_recv && !c->recvbuf ? "recvbuf" : "sendbuf");
    if (needs_send && needs_recv && overlap(c->sendbuf, v->send_len * *esize, c->recvbuf, v->recv_len * *esize))
        return nbc_fail(MPI_ERR_BUFFER, "%s: sendbuf and recvbuf overlap (%s); pass MPI_IN_PLACE for in place", c->fn,
                        c->sendbuf == c->recvbuf ? "they are the same buffer" : "in part");
    return MPI_SUCCESS;
}

/* The messages' program of a call that may run through shared memory: the forced schedule's
 * or the rules', and the rules' when the forced one cannot serve it (it needs shared memory). */
static int messages_program(nbc_collective coll, const compile_args *args, cache_entry **out)
{
    int rc = programs_for_call(coll, args, NULL, out);
    const forcing *f = &nbc_rt.sel.forced[coll];
    if (rc == MPI_SUCCESS || !f->ch.s) return rc;
    compile_args one_node = *args; /* is it a schedule of one node's shared memory (allreduce_shm)? */
    one_node.shared_memory = 1;
    one_node.node_of = NULL;
    select_apply_choice(&f->ch, &one_node);
    diag d;
    diag_init(&d);
    int shared = compile_check(nbc_rt.sel.lib, f->ch.s, &one_node, &d) == COMPILE_OK;
    diag_free(&d);
    if (!shared) return rc; /* the forced schedule cannot serve the call: its error stands */
    nbc_clear_error();
    return programs_for_call(coll, args, "", out); /* what the rules choose */
}

/* The programs of a call on ranks of several nodes, some with several ranks: the messages'
 * one (which the rules choose with the node map) and, where it serves the call, the
 * two-level one through each node's stage (allreduce_nodes_stage; no agreement on buffers,
 * which would have to span the nodes). A forced schedule is taken as on one node. */
static int node_programs(nbc_collective coll, const compile_args *args, cache_entry **progs)
{
    compile_args shared = *args;
    shared.shared_memory = 1;
    if (nbc_rt.sel.forced[coll].ch.s) { /* as on one node: the forced schedule alone, or, when it
                                           shares memory, with the rules' messages beside it */
        if (programs_for_call(coll, &shared, NULL, &progs[RUN_MESSAGES]) != MPI_SUCCESS) {
            nbc_clear_error(); /* (one that cannot: messages_program says why, or the rules) */
            return messages_program(coll, args, &progs[RUN_MESSAGES]);
        }
        if (!(cache_entry_program(progs[RUN_MESSAGES])->flags & PROG_SHARED)) return MPI_SUCCESS;
        progs[RUN_SHARED] = progs[RUN_MESSAGES];
        progs[RUN_MESSAGES] = NULL;
        int rc = programs_for_call(coll, args, "", &progs[RUN_MESSAGES]);
        if (rc != MPI_SUCCESS) cache_release_each(nbc_rt.sel.programs, progs, RUN_CHOICES); /* nothing held on error */
        return rc;
    }
    int rc = programs_for_call(coll, args, NULL, &progs[RUN_MESSAGES]);
    if (rc != MPI_SUCCESS) return rc;
    if (programs_for_call(coll, &shared, "allreduce_nodes_stage", &progs[RUN_SHARED]) != MPI_SUCCESS) {
        progs[RUN_SHARED] = NULL; /* its preconditions (a large vector, an op that does not commute) */
        nbc_clear_error();
    }
    return MPI_SUCCESS;
}

/* The programs (RUN_*) of a call that may run through shared memory: the shared one
 * (allreduce_shm or allreduce_shm_small, or a forced schedule that needs shared memory), with
 * allreduce_shm as the direct one where programs_for_shared says, and the messages' one, which
 * runs when the ranks' agreement declines (a buffer not from nbc_alloc_mem). Without a shared
 * program (a forced schedule of messages, or allreduce_shm refusing the call) only the
 * messages' one. */
static int shared_programs(nbc_collective coll, compile_args *args, cache_entry **progs)
{
    int rc;
    if (args->node_of) return node_programs(coll, args, progs);
    compile_args shared = *args;
    shared.shared_memory = 1;
    if (nbc_rt.sel.forced[coll].ch.s) {
        if ((rc = programs_for_call(coll, &shared, NULL, &progs[RUN_MESSAGES]))) return rc;
        if (!(cache_entry_program(progs[RUN_MESSAGES])->flags & PROG_SHARED)) return MPI_SUCCESS;
        progs[RUN_SHARED] = progs[RUN_MESSAGES];
        rc = programs_for_call(coll, args, "", &progs[RUN_MESSAGES]); /* what the rules choose */
    } else {
        if (programs_for_shared(&shared, &progs[RUN_SHARED], &progs[RUN_DIRECT]) != MPI_SUCCESS) /* the same on every rank */
            progs[RUN_SHARED] = NULL;
        nbc_clear_error();
        rc = programs_for_call(coll, args, NULL, &progs[RUN_MESSAGES]);
    }
    if (rc) cache_release_each(nbc_rt.sel.programs, progs + RUN_SHARED, RUN_CHOICES - RUN_SHARED);
    return rc;
}

/* ---- the last call's programs ---- */

/* A call like its communicator's last one (the same signature and buffers' shape, so the same
 * compile_args) takes that call's programs again, without building a key or searching the
 * cache, as long as the epoch says nothing changed; the memo holds no reference of its own, so
 * it only remembers programs that stay in the cache until the epoch moves. */
static int shape_of(const call *c, int commutative) { return call_inplace(c) | commutative << 1 | c->nbufs << 2; }

static int same_signature(const call_signature *x, const call_signature *y)
{
    return x->coll == y->coll && x->root == y->root && x->count == y->count && x->esize == y->esize && x->op == y->op;
}

static int memo_matches(const comm_state *cs, const call_signature *sig, int shape)
{
    return cs->last.progs[RUN_MESSAGES] && cs->last.epoch == programs_epoch() && cs->last.flags == shape &&
           same_signature(&cs->last.sig, sig);
}

/* The programs of the last call, with references of their own. */
static void memo_take(comm_state *cs, cache_entry **progs)
{
    memcpy(progs, cs->last.progs, sizeof cs->last.progs);
    cache_reacquire_each(nbc_rt.sel.programs, progs, RUN_CHOICES);
}

static void memo_keep(comm_state *cs, const call_signature *sig, int shape, cache_entry *const *progs)
{
    int kept = 1;
    for (int i = 0; i < RUN_CHOICES; i++) kept &= !progs[i] || cache_entry_cached(progs[i]);
    cs->last.sig = *sig;
    cs->last.flags = shape;
    cs->last.epoch = programs_epoch();
    if (kept) memcpy(cs->last.progs, progs, sizeof cs->last.progs);
    else memset(cs->last.progs, 0, sizeof cs->last.progs);
}

/* What the interpreter takes from the call itself: datatype, op, kernel and the buffers behind
 * the slots. */
static void set_call(struct nbc_req *r, const call *c, const reduce_kernels *kernel)
{
    r->st.datatype = c->coll == COLL_BARRIER || on_bytes(c->coll) ? MPI_BYTE : c->datatype;
    r->st.op = c->op;
    r->st.kernel = kernel;
    char *send = (char *)(uintptr_t)c->sendbuf;
    if (c->coll == COLL_SCATTER && call_inplace(c)) { /* the root's input is its recvbuf, and stays there */
        r->st.base[SLOT_SEND] = r->st.base[SLOT_RECV] = send;
    } else if (collective_inplace_is_recv(c->coll) && call_inplace(c)) { /* (scatterv's root: no recvbuf) */
        r->st.base[SLOT_SEND] = send;
        r->st.base[SLOT_RECV] = NULL;
    } else {
        r->st.base[SLOT_SEND] = c->sendbuf == MPI_IN_PLACE ? c->recvbuf : send;
        r->st.base[SLOT_RECV] = c->recvbuf;
    }
    for (int i = 1; i < c->nbufs; i++) r->st.base[SLOT_EXTRA + i - 1] = c->bufs[i];
}

/* The communicator's spare request (request.c), when the memo's programs are its own, taken
 * for this call: its duplicate, arrays and programs are this call's already. Its signature,
 * datatype, op and buffers are set, and what timeouts count starts again, as in a new request.
 * NULL when there is none or it holds other programs. */
static struct nbc_req *reuse_spare(comm_state *cs, const call *c, const call_signature *sig, const reduce_kernels *kernel)
{
    struct nbc_req *r = cs->last.spare;
    if (!r || memcmp(r->progs, cs->last.progs, sizeof r->progs)) return NULL;
    req_unpark(cs);
    cache_hit_each(nbc_rt.sel.programs, r->progs, RUN_CHOICES);
    /* its start count goes on (a spare is never any-order, whose starts the ranks compare), so
     * that the stall reports of stall.c see each call as a new position */
    r->timeout_mark = 0, r->timeout_since_ns = 0;
    r->st.prog = cache_entry_program(r->progs[RUN_MESSAGES]); /* a shared one after a shared run */
    set_call(r, c, kernel);
    r->sig = *sig;
    return r;
}

/* What the compiler is told of the call. */
static compile_args args_of(const call *c, const call_signature *sig, int size, int rank, int commutative)
{
    return (compile_args){.p = size, .rank = rank, .count = sig->count, .esize = sig->esize,
                          .inplace = call_inplace(c), .commutative = commutative, .root = c->root,
                          .nbufs = c->nbufs};
}

/* A request for the call, not started: everything but its tag. chunk_bytes > 0 cuts a
 * large commutative allreduce into rounds of that many bytes (the segmented ring), so that
 * a request of higher priority waits at most one such round. */
static int prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out, comm_state **checked, int64_t *space);

int call_prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out, comm_state **checked)
{
    if (!collective_has_vectors(c->coll)) return prepare(c, chunk_bytes, out, checked, NULL);
    /* a vector call's vectors in bytes (elements for reduce_scatterv), 4·p of them: compiled
     * into its program and copied into the cache's key, so the caller's arrays are not read
     * after the call returns (an _init request keeps none of them) */
    *out = NULL;
    if (checked) *checked = NULL;
    int size = 0, rc;
    comm_state *cs = c->comm == MPI_COMM_NULL ? NULL : comm_state_find(c->comm);
    if (cs) size = cs->size;
    else if ((rc = check_comm(c->comm))) return rc;
    else MPI_Comm_size(c->comm, &size);
    int64_t small[4 * 64], *space = 4 * (size_t)size <= sizeof small / sizeof *small ? small : malloc(4 * (size_t)size * sizeof *space);
    if (!space) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    rc = prepare(c, chunk_bytes, out, checked, space);
    if (space != small) free(space);
    return rc;
}

static int prepare(const call *c, int64_t chunk_bytes, struct nbc_req **out, comm_state **checked, int64_t *space)
{
    *out = NULL;
    if (checked) *checked = NULL;
    int rc;
    /* a communicator seen before was checked then; its state knows rank and size */
    comm_state *cs = c->comm == MPI_COMM_NULL ? NULL : comm_state_find(c->comm);
    int size, rank;
    if (cs) {
        size = cs->size;
        rank = cs->rank;
    } else {
        if ((rc = check_comm(c->comm))) return rc;
        MPI_Comm_size(c->comm, &size);
        MPI_Comm_rank(c->comm, &rank);
    }
    MPI_Aint esize;
    int64_t count = 0;
    const reduce_kernels *kernel;
    int commutative;
    vector_call vc;
    if (space) rc = check_vector_call((const vcall *)c, size, rank, space, &vc, &esize, &kernel, &commutative);
    else rc = check_call(c, size, rank, &esize, &count, &kernel, &commutative);
    if (rc) return rc;

    if (!cs && (rc = comm_state_of(c->comm, &cs))) return rc;
    if (checked) *checked = cs; /* the arguments are fine: a failure from here on is the call's own */
    int shape = shape_of(c, commutative);
    call_signature sig = {.coll = c->coll, .count = count, .esize = esize,
                          .root = c->root, .op = c->op};
    cache_entry *progs[RUN_CHOICES] = {NULL};
    struct nbc_req *r;
    int chunked = 0;
    if (space) { /* a vector call: its vectors are in the key; no memo (it compares no vectors) */
        sig.count = 0; /* the counts are per rank: NBC_CHECK compares the rest */
        compile_args args = args_of(c, &sig, size, rank, commutative);
        args.count = vc.count;
        memcpy(args.vec, vc.vec, sizeof args.vec);
        if ((rc = programs_for_call(c->coll, &args, NULL, &progs[RUN_MESSAGES]))) return rc;
    } else if ((chunked = chunk_bytes > 0 && c->coll == COLL_ALLREDUCE && commutative && c->count >= size && size > 1 &&
                          (int64_t)c->count * esize > chunk_bytes)) {
        char spec[64];
        snprintf(spec, sizeof spec, "allreduce_segmented_ring:segsize=%lld", (long long)chunk_bytes);
        compile_args args = args_of(c, &sig, size, rank, commutative);
        if ((rc = programs_for_call(c->coll, &args, spec, &progs[RUN_MESSAGES]))) return rc;
        if (shm_eligible(cs, c->coll)) { /* on one node: the same pieces, out of the peers' memory */
            args.shared_memory = 1;
            snprintf(spec, sizeof spec, "allreduce_shm_pieces:piece=%lld", (long long)(chunk_bytes < SHM_PIECE_BYTES ? chunk_bytes : SHM_PIECE_BYTES));
            if (programs_for_call(c->coll, &args, spec, &progs[RUN_SHARED]) != MPI_SUCCESS) progs[RUN_SHARED] = NULL;
            nbc_clear_error();
        }
    } else if (!memo_matches(cs, &sig, shape)) {
        compile_args args = args_of(c, &sig, size, rank, commutative);
        args.node_of = cs->node_of;
        if (shm_eligible(cs, c->coll)) rc = shared_programs(c->coll, &args, progs);
        else rc = programs_for_call(c->coll, &args, NULL, &progs[RUN_MESSAGES]);
        if (rc) return rc;
        memo_keep(cs, &sig, shape, progs);
    } else if (nbc_rt.env.trace <= 1 && (r = reuse_spare(cs, c, &sig, kernel))) {
        r->topo_stale = cs->topo != TOPO_KNOWN;
        r->shape = shape;
        *out = r;
        return MPI_SUCCESS;
    } else {
        memo_take(cs, progs);
    }
    const nbc_program *prog = cache_entry_program(progs[RUN_MESSAGES]);
    if (nbc_rt.env.trace > 1) {
        compile_args args = args_of(c, &sig, size, rank, commutative);
        if (space) args.count = vc.count;
        trace_call(c->fn, &args, progs[RUN_SHARED] ? cache_entry_program(progs[RUN_SHARED]) : prog);
    }

    /* room for whichever of its programs runs */
    size_t scratch = 0;
    uint32_t comms = 0;
    for (int i = 0; i < RUN_CHOICES; i++) {
        const nbc_program *p = progs[i] ? cache_entry_program(progs[i]) : NULL;
        if (p && p->scratch > scratch) scratch = p->scratch;
        if (p && p->max_round_comms > comms) comms = p->max_round_comms;
    }
    if (!(r = req_get(scratch, (int)comms))) {
        cache_release_each(nbc_rt.sel.programs, progs, RUN_CHOICES);
        return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    }
    memcpy(r->progs, progs, sizeof progs);
    r->cs = cs;
    comm_hold(cs);
    r->st = (interp_state){.prog = prog, .comm = MPI_COMM_NULL, .reqs = r->reqs, .statuses = r->statuses};
    r->st.base[SLOT_SCRATCH] = r->scratch;
    set_call(r, c, kernel);
    r->sig = sig;
    /* the node map can change the choice of the calls that go through the rules */
    r->topo_stale = !space && progs[RUN_MESSAGES] && !chunked && cs->topo != TOPO_KNOWN;
    r->pieces = chunked;
    r->shape = shape;
    *out = r;
    return MPI_SUCCESS;
}

int call_reselect(struct nbc_req *r)
{
    comm_state *cs = r->cs;
    r->topo_stale = 0;
    if (!cs->node_of) return MPI_SUCCESS; /* one node, or one rank a node: the choice stands */
    compile_args args = {.p = cs->size, .rank = cs->rank, .count = r->sig.count, .esize = r->sig.esize,
                         .inplace = r->shape & 1, .commutative = r->shape >> 1 & 1, .root = r->sig.root,
                         .nbufs = r->shape >> 2, .node_of = cs->node_of};
    /* a call that may share memory gets the node's programs (shared_programs); the others
     * what the rules choose */
    cache_entry *fresh[RUN_CHOICES] = {NULL};
    nbc_collective coll = (nbc_collective)r->sig.coll;
    int rc = r->progs[RUN_SHARED] ? node_programs(coll, &args, fresh) : programs_for_call(coll, &args, NULL, &fresh[RUN_MESSAGES]);
    if (rc != MPI_SUCCESS) return rc;
    size_t scratch = 0;
    int comms = 0;
    for (int i = 0; i < RUN_CHOICES; i++) {
        const nbc_program *p = fresh[i] ? cache_entry_program(fresh[i]) : NULL;
        if (p && p->scratch > scratch) scratch = p->scratch;
        if (p && (int)p->max_round_comms > comms) comms = (int)p->max_round_comms;
    }
    if (req_fit(r, scratch, comms) != MPI_SUCCESS) {
        cache_release_each(nbc_rt.sel.programs, fresh, RUN_CHOICES);
        return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    }
    cache_release_each(nbc_rt.sel.programs, r->progs, RUN_CHOICES);
    memcpy(r->progs, fresh, sizeof fresh);
    r->st.prog = cache_entry_program(r->progs[RUN_MESSAGES]); /* (shm_agree may choose another) */
    if (nbc_rt.env.trace > 1)
        fprintf(stderr, "nbc: trace: rank %d of %d: %s call chosen again with the node map (%d nodes): %s%s%s\n", cs->rank,
                cs->size, collective_names[coll], cs->nodes, r->st.prog->name, fresh[RUN_SHARED] ? ", or through shared memory " : "",
                fresh[RUN_SHARED] ? cache_entry_program(fresh[RUN_SHARED])->name : "");
    return MPI_SUCCESS;
}

/* Starts a prepared (or inactive persistent) request under the next tag of its communicator,
 * or under its own identity when it may start in any order. */
void call_launch(struct nbc_req *r)
{
    r->st.round = 0;
    r->st.posted = 0;
    r->st.nreqs = 0;
    r->st.err = MPI_SUCCESS;
    r->st.err_errno = 0; /* a restarted persistent request's last failure is not this start's */
    r->error[0] = '\0';
    r->timed_out = 0;
    if (r->progs[RUN_SHARED]) {
        r->st.prog = cache_entry_program(r->progs[RUN_MESSAGES]);
        r->st.shared = NULL;
        r->shm_chosen = r->shm_published = 0;
        r->shm_in_call = 1;
        r->shm_culprit = -1;
    }
    if (r->any_order) {
        r->st.tag = (int)(r->id % (r->cs->tag_space - STALL_TAGS));
    } else {
        r->seq = r->cs->seq;
        r->st.tag = comm_next_tag(r->cs);
    }
    if (check_enabled()) check_begin(r); /* any-order: at each start, on its own tag */
    req_start(r);
}

/* A call whose arguments were fine (cs: checked on it) but that failed here all the same (its
 * program does not compile for its count, memory ran out) still takes its number on the
 * communicator, as it does on the ranks where it started, so that the calls after it stay
 * matched; on shared memory its peers learn that it will not come. Bad arguments take none
 * (MPI: erroneous). */
static int not_started(comm_state *cs, int rc)
{
    if (!cs) return rc;
    uint64_t seq = cs->seq;
    comm_next_tag(cs);
    shm_not_started(cs, seq, rc);
    return rc;
}

int call_start(const call *c, nbc_request *request)
{
    if (!request) return nbc_fail(MPI_ERR_ARG, "%s: request is NULL", c->fn); /* MPICH's class */
    *request = NBC_REQUEST_NULL;
    struct nbc_req *r;
    comm_state *checked;
    int rc = call_prepare(c, 0, &r, &checked);
    if (rc != MPI_SUCCESS) return not_started(checked, rc);
    call_launch(r);
    *request = r;
    return MPI_SUCCESS;
}

int call_allgather_check(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype)
{
    if (sendbuf != MPI_IN_PLACE && (sendcount != recvcount || sendtype != recvtype))
        return nbc_fail(sendcount != recvcount ? MPI_ERR_COUNT : MPI_ERR_TYPE,
                        "nbc_iallgather: send and receive counts and types must be equal");
    return MPI_SUCCESS;
}
