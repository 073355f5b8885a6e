/* Datatypes nbc does not take as they are. nbc moves dense arrays of elements; any other
 * layout (vector, indexed, struct, resized, and the predefined pair types with padding such as
 * MPI_DOUBLE_INT) is packed into scratch before the collective and unpacked after it. A
 * reduction on a datatype that is not a plain predefined one runs on a stand-in: a contiguous
 * type of the datatype's size, reduced by a wrapping op that hands each piece to
 * MPI_Reduce_local with the real datatype and op. What nbc compiles (count, element size)
 * then depends only on the type signature, which MPI makes equal on every rank, never on the
 * layout, which it does not. */
#include <stdlib.h>
#include <string.h>

#include "nbcmpi.h"

int nm_predefined(MPI_Datatype type)
{
    int ni, na, nd, combiner;
    return PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED;
}

int nm_dense(MPI_Datatype type, MPI_Aint *size)
{
    /* the common predefined types first: no MPI query on the usual call */
    static const struct {
        MPI_Datatype t;
        MPI_Aint size;
    } known[] = {{MPI_DOUBLE, sizeof(double)}, {MPI_FLOAT, sizeof(float)}, {MPI_INT, sizeof(int)},
                 {MPI_LONG, sizeof(long)},     {MPI_BYTE, 1},               {MPI_CHAR, 1}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (type == known[i].t) {
            *size = known[i].size;
            return 2; /* and predefined */
        }
    MPI_Count sz, lb, extent, tlb, textent;
    if (PMPI_Type_size_x(type, &sz) != MPI_SUCCESS || PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS) {
        *size = -1;
        return 0;
    }
    *size = (MPI_Aint)sz;
    return lb == 0 && extent == sz && tlb == 0 && textent == sz;
}

MPI_Datatype nm_hold(nm_req *r, MPI_Datatype type)
{
    MPI_Datatype dup;
    if (nm_predefined(type) || r->nheld == (int)(sizeof r->held / sizeof *r->held) ||
        PMPI_Type_dup(type, &dup) != MPI_SUCCESS)
        return type;
    return r->held[r->nheld++] = dup;
}

int nm_pack(nm_req *r, int slot, const void *buf, int count, MPI_Datatype type, MPI_Aint bytes, void **out)
{
    r->scratch[slot] = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!r->scratch[slot]) return MPI_ERR_NO_MEM;
    *out = r->scratch[slot];
    if (!buf) return MPI_SUCCESS; /* an output only */
    r->packed[slot].from = buf, r->packed[slot].count = count, r->packed[slot].type = nm_hold(r, type);
    int pos = 0;
    return PMPI_Pack(buf, count, type, r->scratch[slot], (int)bytes, &pos, r->comm);
}

void nm_repack(nm_req *r)
{
    for (int slot = 0; slot < 2; slot++) {
        if (!r->packed[slot].from) continue;
        int size, pos = 0;
        PMPI_Type_size(r->packed[slot].type, &size);
        PMPI_Pack(r->packed[slot].from, r->packed[slot].count, r->packed[slot].type, r->scratch[slot],
                  r->packed[slot].count * size, &pos, r->comm);
    }
}

/* ---- reductions on a stand-in type ---- */

static int keyval = MPI_KEYVAL_INVALID;
static MPI_Op wrap_op[2] = {MPI_OP_NULL, MPI_OP_NULL}; /* non-commutative, commutative */

/* Reduces len packed items: straight through MPI_Reduce_local when the real datatype is dense,
 * else unpacked into the real layout, reduced there, and packed back. */
static void wrap(void *in, void *inout, int *len, MPI_Datatype *standin)
{
    nm_req *r;
    int found = 0;
    if (PMPI_Type_get_attr(*standin, keyval, &r, &found) != MPI_SUCCESS || !found) return;
    if (r->real_contiguous) {
        PMPI_Reduce_local(in, inout, *len, r->real_type, r->real_op);
        return;
    }
    MPI_Aint lb, extent, tlb, textent;
    PMPI_Type_get_extent(r->real_type, &lb, &extent);
    PMPI_Type_get_true_extent(r->real_type, &tlb, &textent);
    int size;
    PMPI_Type_size(r->real_type, &size);
    size_t span = (size_t)((*len - 1) * extent + textent);
    char *a = malloc(span), *b = malloc(span);
    if (a && b) {
        int pos = 0, bytes = *len * size;
        PMPI_Unpack(in, bytes, &pos, a - tlb, *len, r->real_type, MPI_COMM_SELF);
        pos = 0;
        PMPI_Unpack(inout, bytes, &pos, b - tlb, *len, r->real_type, MPI_COMM_SELF);
        PMPI_Reduce_local(a - tlb, b - tlb, *len, r->real_type, r->real_op);
        pos = 0;
        PMPI_Pack(b - tlb, *len, r->real_type, inout, bytes, &pos, MPI_COMM_SELF);
    }
    free(a);
    free(b);
}

int nm_standin(nm_req *r, MPI_Datatype type, MPI_Op op, MPI_Aint size, MPI_Datatype *standin, MPI_Op *wrapper)
{
    int rc, commute = 1;
    if (keyval == MPI_KEYVAL_INVALID &&
        (rc = PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &keyval, NULL)))
        return rc;
    if ((rc = PMPI_Op_commutative(op, &commute))) return rc;
    commute = !!commute;
    if (wrap_op[commute] == MPI_OP_NULL && (rc = PMPI_Op_create(wrap, commute, &wrap_op[commute]))) return rc;
    if ((rc = PMPI_Type_contiguous((int)size, MPI_BYTE, &r->standin)) || (rc = PMPI_Type_commit(&r->standin)) ||
        (rc = PMPI_Type_set_attr(r->standin, keyval, r)))
        return rc;
    MPI_Aint s;
    r->real_contiguous = nm_dense(type, &s);
    r->real_type = nm_hold(r, type);
    r->real_op = op;
    *standin = r->standin;
    *wrapper = wrap_op[commute];
    return MPI_SUCCESS;
}

/* A start of a persistent call unpacks what its init's layout (r->prep) says, and keeps that
 * layout for the next start; when the application freed the call while this start ran, the
 * layout and nbc's request go now. */
void nm_layout_finish(nm_req *r)
{
    nm_req *from = r->prep ? r->prep : r;
    if (from->unpack_to && r->err == MPI_SUCCESS) {
        int size, pos = 0;
        PMPI_Type_size(from->unpack_type, &size);
        PMPI_Unpack(from->scratch[0], from->unpack_count * size, &pos, from->unpack_to, from->unpack_count,
                    from->unpack_type, r->comm);
    }
    r->unpack_to = NULL;
    if (r->prep) {
        if (r->free_prep) {
            nbc_request_free(&r->nbc);
            nm_req_discard(r->prep);
        }
        r->prep = NULL;
        return;
    }
    for (int i = 0; i < 2; i++) {
        free(r->scratch[i]);
        r->scratch[i] = NULL;
    }
    if (r->standin != MPI_DATATYPE_NULL) PMPI_Type_free(&r->standin);
    while (r->nheld > 0) PMPI_Type_free(&r->held[--r->nheld]);
    for (int i = 0; i < 2; i++) {
        if (r->blocks[i] != MPI_DATATYPE_NULL) PMPI_Type_free(&r->blocks[i]);
        free(r->bytes[i]);
        r->bytes[i] = NULL;
    }
}
