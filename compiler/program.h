/* The bytecode: a compiled schedule for one (schedule, p, rank, count, element size, ...).
 *
 * A program is one contiguous block: a header, then `ninsns` fixed-size instructions, then
 * `nrounds + 1` round boundaries, then one source location per instruction (like Lua's
 * lineinfo).
 * Buffers are named by slot plus byte offset, never by address, so one program serves every
 * call with the same key.
 *
 * Round semantics: when a round starts, its instructions run in order: COPY, REDUCE and
 * COMBINE execute at once, SEND and RECV are posted. The round ends when all its communication
 * has completed.
 */
#ifndef NBC_PROGRAM_H
#define NBC_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    OP_SEND,   /* post a send of a.len bytes at (a.slot, a.off) to peer          */
    OP_RECV,   /* post a receive of len bytes into (a.slot, a.off) from peer     */
    OP_COPY,   /* a := b, len bytes                                              */
    OP_REDUCE, /* a := b ⊕ a, len bytes (MPI_Reduce_local order: b is the left operand) */
    OP_COMBINE, /* a := b ⊕ c, len bytes: a COPY a := c and the REDUCE after it, in one pass */
    OP_COUNT_
} nbc_opcode;

typedef enum { SLOT_SEND, SLOT_RECV, SLOT_SCRATCH, SLOT_COUNT_ } nbc_slot;
/* Multi-buffer calls (nbc_iallreduce_multi) name their buffers 1 .. nbufs-1 by the slots
 * SLOT_EXTRA + 0 .. (buffer 0 is the receive buffer). */
#define SLOT_EXTRA SLOT_COUNT_
#define NBC_MAX_BUFFERS 16
#define NBC_MAX_SLOTS (SLOT_EXTRA + NBC_MAX_BUFFERS - 1)

typedef struct {
    uint8_t op;       /* nbc_opcode */
    uint8_t a_slot;   /* destination (COPY/REDUCE/COMBINE/RECV) or source (SEND) */
    uint8_t b_slot;   /* source of COPY/REDUCE/COMBINE */
    uint8_t c_slot;   /* right operand of COMBINE */
    int32_t peer;     /* SEND/RECV only, else -1 */
    uint64_t a_off;   /* byte offsets */
    uint64_t b_off;
    uint64_t c_off;
    uint64_t len;     /* bytes */
} nbc_insn;

typedef struct {
    uint64_t bytes;        /* size of the whole block, header included */
    uint64_t scratch;      /* scratch bytes a request must provide */
    uint32_t ninsns;
    uint32_t nrounds;
    uint32_t max_round_comms; /* most SEND+RECV in one round: the request array size */
    uint32_t esize;        /* element size the offsets were computed with */
    char name[48];         /* schedule name, for dumps and errors */
    /* the arrays follow; use the accessors below */
} nbc_program;

static inline nbc_insn *prog_insns(const nbc_program *p)
{
    return (nbc_insn *)(void *)((char *)(uintptr_t)p + sizeof(nbc_program));
}
/* round r is instructions [prog_rounds(p)[r], prog_rounds(p)[r + 1]) */
static inline uint32_t *prog_rounds(const nbc_program *p)
{
    return (uint32_t *)(void *)(prog_insns(p) + p->ninsns);
}
/* where each instruction came from, in the file of the schedule that emitted it */
typedef struct {
    uint32_t line, col;
} nbc_srcloc;
static inline nbc_srcloc *prog_locs(const nbc_program *p)
{
    return (nbc_srcloc *)(void *)(prog_rounds(p) + p->nrounds + 1);
}
static inline size_t prog_size(uint32_t ninsns, uint32_t nrounds)
{
    return sizeof(nbc_program) + ninsns * sizeof(nbc_insn) + (nrounds + 1) * sizeof(uint32_t) +
           ninsns * sizeof(nbc_srcloc);
}

const char *prog_opcode_name(int op);
const char *prog_slot_name(int slot);

#endif
