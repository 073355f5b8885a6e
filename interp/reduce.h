/* Reduction kernels: inout[i] = in[i] ⊕ inout[i] for MPI's predefined ops on its predefined
 * integer and floating types, as plain loops the compiler vectorizes. Any other (datatype, op)
 * pair has no kernel and goes through MPI_Reduce_local. */
#ifndef NBC_REDUCE_H
#define NBC_REDUCE_H

#include <mpi.h>
#include <stddef.h>

typedef void (*reduce_fn)(void *inout, const void *in, size_t n);

/* The kernel for (datatype, op), or NULL when there is none. Cheap enough to call once per
 * request, not meant for once per instruction. */
reduce_fn reduce_kernel(MPI_Datatype datatype, MPI_Op op);

#endif
