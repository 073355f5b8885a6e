/* Reduction kernels for MPI's predefined ops on its predefined integer and floating types, as
 * plain loops the compiler vectorizes: inout[i] = in[i] ⊕ inout[i] (REDUCE), and
 * out[i] = in[i] ⊕ right[i] (COMBINE: a copy and a reduction in one pass, no buffer overlapping
 * another). Any other (datatype, op) pair has no kernel and goes through MPI_Reduce_local. */
#ifndef NBC_REDUCE_H
#define NBC_REDUCE_H

#include <mpi.h>
#include <stddef.h>

typedef void (*reduce_fn)(void *inout, const void *in, size_t n);
typedef void (*combine_fn)(void *out, const void *in, const void *right, size_t n);
typedef struct {
    reduce_fn reduce;
    combine_fn combine;
} reduce_kernels;

/* The kernels for (datatype, op), or NULL when there are none. Cheap enough to call once per
 * request, not meant for once per instruction. */
const reduce_kernels *reduce_kernel(MPI_Datatype datatype, MPI_Op op);

/* 1 when MPI defines the predefined op on the predefined type but there is no kernel for it
 * (complex SUM and PROD; the arithmetic and bitwise ops on MPI_AINT, MPI_OFFSET, MPI_COUNT):
 * those pairs go through MPI_Reduce_local. */
int reduce_defined_without_kernel(MPI_Datatype datatype, MPI_Op op);

#endif
