#include "progverify.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The same shapes the compiler gives the schedule's sendbuf and recvbuf (define_top): in place,
 * sendbuf is a part of the receive slot, and the send slot is not there at all. */
int prog_slot_bytes(const nbc_program *prog, nbc_collective c, const compile_args *a, uint64_t bytes[NBC_MAX_SLOTS])
{
    int64_t nbufs = a->nbufs ? a->nbufs : 1;
    coll_shape sh = collective_shape_vec(c, a->p, a->rank, a->root, a->count, a->inplace, a->vec);
    uint64_t es = (uint64_t)a->esize, send = (uint64_t)sh.send_len, recv = (uint64_t)sh.recv_len;
    if (a->inplace && !collective_inplace_is_recv(c)) {
        if ((uint64_t)sh.inplace_send_off + send > recv) recv = (uint64_t)sh.inplace_send_off + send;
        send = 0;
    }
    memset(bytes, 0, NBC_MAX_SLOTS * sizeof *bytes);
    bytes[SLOT_SEND] = send * es;
    bytes[SLOT_RECV] = recv * es;
    bytes[SLOT_SCRATCH] = prog->scratch;
    bytes[SLOT_SHARED] = prog->shared_bytes; /* a peer's is as long: every rank declares the same */
    for (int s = SLOT_EXTRA; s < SLOT_EXTRA + nbufs - 1; s++) bytes[s] = (uint64_t)a->count * es;
    return SLOT_EXTRA + (int)nbufs - 1;
}

/* A fault of the program as a whole or of one instruction, not a race. */
#define BAD(pc, ...) prog_fault_at(f, pc, UINT32_MAX, __VA_ARGS__)

/* What prog_check takes for granted: the header and the round table. */
static int well_formed(const nbc_program *prog, const compile_args *a, prog_fault *f)
{
    if (prog->bytes != prog_size(prog->ninsns, prog->nrounds))
        return BAD(0, "the header says %" PRIu64 " bytes, but %u instructions in %u rounds take %zu", prog->bytes,
                   prog->ninsns, prog->nrounds, prog_size(prog->ninsns, prog->nrounds));
    if (!memchr(prog->name, '\0', sizeof prog->name)) return BAD(0, "the name is not terminated");
    if (prog->esize == 0 || prog->esize != (uint64_t)a->esize)
        return BAD(0, "compiled for %u-byte elements, called with %lld", prog->esize, (long long)a->esize);
    if (prog->scratch % prog->esize || prog->scratch > COMPILE_MAX_BYTES * 2)
        return BAD(0, "scratch of %" PRIu64 " bytes", prog->scratch);
    if (prog->shared_bytes % prog->esize || prog->shared_bytes > COMPILE_MAX_BYTES * 2)
        return BAD(0, "shared scratch of %" PRIu64 " bytes", prog->shared_bytes);
    if (prog->max_round_comms > INT_MAX) return BAD(0, "%u messages in a round", prog->max_round_comms);
    const uint32_t *rounds = prog_rounds(prog);
    if (rounds[0] != 0 || rounds[prog->nrounds] != prog->ninsns)
        return BAD(0, "the round table does not cover the %u instructions", prog->ninsns);
    const nbc_insn *in = prog_insns(prog);
    for (uint32_t r = 0; r < prog->nrounds; r++) {
        if (rounds[r + 1] <= rounds[r]) return BAD(rounds[r], "round %u is empty or ends before it starts", r);
        uint32_t comms = 0;
        for (uint32_t pc = rounds[r]; pc < rounds[r + 1]; pc++) {
            comms += prog_opinfo(in[pc].op)->message;
            /* the interpreter passes len / esize to MPI as an int */
            if (in[pc].len / prog->esize > INT_MAX)
                return BAD(pc, "%" PRIu64 " bytes are more elements than an int counts", in[pc].len);
        }
        if (comms > prog->max_round_comms)
            return BAD(rounds[r], "round %u posts %u messages, but the program provides for %u", r, comms,
                       prog->max_round_comms);
    }
    return 0;
}

int prog_verify(const nbc_program *prog, nbc_collective c, const compile_args *a, prog_fault *f)
{
    if (well_formed(prog, a, f)) return 1;
    uint64_t bytes[NBC_MAX_SLOTS];
    int nslots = prog_slot_bytes(prog, c, a, bytes);
    return prog_check_rank(prog, a->p, a->rank, bytes, nslots, f);
}
