/* Operands in a peer's private memory, copied through the kernel (interp/remote.c). */
#ifndef NBC_REMOTE_H
#define NBC_REMOTE_H

#include "interp.h"

/* Whether a COPY, REDUCE or COMBINE names a peer's buffer that is not mapped here. */
int remote_names(const interp_shared *sh, const nbc_insn *in);

/* Runs such an instruction. A failed copy leaves the kernel's errno in st->err_errno and the
 * instruction in st->err_pc, and returns MPI_ERR_OTHER. */
int remote_run(interp_state *st, const nbc_insn *in);

/* COPY, REDUCE or COMBINE of len bytes on memory of this process (interp/interp.c). */
int interp_compute(const interp_state *st, unsigned op, char *a, char *b, char *c, uint64_t len);

#endif
