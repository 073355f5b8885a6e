/* Errors of a collective in words: when an MPI call of a running program fails (a peer died,
 * a message was truncated, ...), or when NBC_TIMEOUT expires, the request's error names the
 * collective, its schedule and request name, this rank, the round and the instruction, and
 * the peer, so that a failure never reads as a bare MPI error code. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* "allreduce (schedule 'allreduce_ring', request 'w3') on rank 2, round 3 of 14" */
int failure_where(const struct nbc_req *r, uint32_t round, char *out, size_t size)
{
    const nbc_program *p = r->st.prog;
    return snprintf(out, size, "%s (schedule '%s'%s%s%s) on rank %d, round %u of %u", collective_names[r->sig.coll], p->name,
                    r->name[0] ? ", request '" : "", r->name, r->name[0] ? "'" : "", r->cs ? r->cs->rank : -1, round, p->nrounds);
}

/* "RECV of 32 bytes from rank 1 (pc 7)", "COPY of 32 bytes with rank 1 (pc 3)", "WAIT for the flag of rank 1
 * (pc 4)" */
int failure_insn(const nbc_program *p, int pc, char *out, size_t size)
{
    if (pc < 0) return snprintf(out, size, "(no single message)");
    const nbc_insn *in = &prog_insns(p)[pc];
    if (prog_opinfo(in->op)->flag) /* no data: a flag to or from the peer, in shared memory */
        return snprintf(out, size, "%s %s rank %d (pc %d)", prog_opcode_name(in->op), in->op == OP_WAIT ? "for the flag of" : "to",
                        in->peer, pc);
    return snprintf(out, size, "%s of %llu bytes %s rank %d (pc %d)", prog_opcode_name(in->op), (unsigned long long)in->len,
                    in->op == OP_SEND ? "to" : in->op == OP_RECV ? "from" : "with", in->peer, pc);
}

void failure_describe(struct nbc_req *r)
{
    const interp_state *st = &r->st;
    if (st->err == MPI_SUCCESS || r->error[0] || !st->prog) return;
    char where[200], what[120], text[MPI_MAX_ERROR_STRING] = "";
    int len = 0, cls = 0;
    MPI_Error_string(st->err, text, &len);
    MPI_Error_class(st->err, &cls);
    failure_where(r, st->err_round, where, sizeof where);
    int pc = st->err_errno ? st->err_pc : interp_comm_pc(st->prog, st->err_round, st->err_req);
    failure_insn(st->prog, pc, what, sizeof what);
    int peer = pc >= 0 ? prog_insns(st->prog)[pc].peer : -1;
    char who[48] = "";
    if (peer >= 0) snprintf(who, sizeof who, " with rank %d", peer);
    if (st->err_errno) /* a copy through the kernel (interp/remote.c): its reason says more */
        snprintf(text, sizeof text, "the kernel's copy to or from its memory failed: %s", strerror(st->err_errno));
    req_fail(r, st->err, "%s failed%s: %s: %s", where, who, what, text);
}
