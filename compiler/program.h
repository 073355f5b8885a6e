/* The bytecode: a compiled schedule for one (schedule, p, rank, count, element size, ...).
 *
 * A program is one contiguous block: a header, then `ninsns` fixed-size instructions, then
 * `nrounds + 1` round boundaries, then one source location per instruction (like Lua's
 * lineinfo).
 * Buffers are named by slot plus byte offset, never by address, so one program serves every
 * call with the same key.
 *
 * Round semantics: when a round starts, its instructions run in order: COPY, REDUCE and
 * COMBINE execute at once, SEND and RECV are posted, SIGNAL is raised, WAIT is armed. The round
 * ends when all its communication has completed and every WAIT has seen its SIGNAL.
 *
 * Shared memory (ranks on one node, docs/shared-memory.md): an operand may name a buffer of
 * another rank (SLOT_PEER set on its slot; the instruction's `peer` says whose): its send or
 * receive buffer, or its shared scratch (SLOT_SHARED: memory of the runtime's that the peers
 * can map). A program that names another rank's send or receive buffer has PROG_AGREE in its
 * flags and runs only after every rank of the communicator has entered the call and published
 * its buffers (the runtime's agreement, runtime/shm.c): that orders every rank's start before
 * every rank's round 0. Any program with a flag or a peer operand has PROG_SHARED. Otherwise
 * order comes from SIGNAL and WAIT only: the k-th SIGNAL from rank a to rank b matches the
 * k-th WAIT of b on a; what a did before raising it (earlier rounds, and earlier
 * COPY/REDUCE/COMBINE of the same round) happens before what b does after the round of that
 * WAIT. A rank's send and receive buffers are its application's again when its program ends,
 * so every access of a peer to them must happen before that. Its shared scratch is not: the
 * runtime gives each call a shared scratch that no later call reuses before every rank has
 * ended this one, so peers may still read it after its owner has ended (which is what lets a
 * small allreduce get by with one exchange of flags). nbcc verify checks all of it, and that
 * no two accesses to the same bytes race unless both read.
 */
#ifndef NBC_PROGRAM_H
#define NBC_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

/* The opcodes, one row each: X(NAME, operands read, operands written, message, reduces, flag).
 *
 * An instruction has up to three operands, a, b and c: each a slot and a byte offset
 * (a_slot/a_off, ...), all len bytes long. A row says which operands the opcode reads and
 * writes (OPND_A | OPND_B | OPND_C), whether it is a message (posted when its round starts, in
 * flight until the round ends, `peer` naming the other rank; the others run at once, in
 * order), whether it applies the call's operator ⊕ (its cost is γ per byte), and whether it is
 * a flag between ranks on one node (SIGNAL, WAIT: between ranks like a message, with no MPI
 * request and no data; `peer` names the other rank).
 * Tools, checks and the compiler ask these properties (prog_opinfo), never the opcode's
 * number; only what an opcode does is a switch, in the interpreter (interp/interp.c) and the
 * symbolic runs (analysis/verify.c, analysis/failrun.c). Adding an opcode: docs/architecture.md. */
#define OPND_A 1
#define OPND_B 2
#define OPND_C 4
#define NBC_OPCODES(X)                                                                             \
    /* SEND: post a send of len bytes at a to peer; a must not change until the round ends */      \
    X(SEND, OPND_A, 0, 1, 0, 0)                                                                    \
    /* RECV: post a receive of len bytes from peer into a, written by the end of the round */      \
    X(RECV, 0, OPND_A, 1, 0, 0)                                                                    \
    /* COPY: a := b, a memcpy (the compiler emits no copy onto itself) */                          \
    X(COPY, OPND_B, OPND_A, 0, 0, 0)                                                               \
    /* REDUCE: a := b ⊕ a, in MPI_Reduce_local's order: b is the left operand */                   \
    X(REDUCE, OPND_A | OPND_B, OPND_A, 0, 1, 0)                                                    \
    /* COMBINE: a := b ⊕ c in one pass: a COPY a := c and the REDUCE after it, fused */            \
    X(COMBINE, OPND_B | OPND_C, OPND_A, 0, 1, 0)                                                   \
    /* SIGNAL: tell peer (on this node) that everything issued before it here has happened */     \
    X(SIGNAL, 0, 0, 0, 0, 1)                                                                       \
    /* WAIT: the round does not end before peer's matching SIGNAL (the k-th to this rank) */        \
    X(WAIT, 0, 0, 0, 0, 1)

typedef enum {
#define NBC_OPCODE_ENUM(name, reads, writes, message, reduces, flag) OP_##name,
    NBC_OPCODES(NBC_OPCODE_ENUM)
#undef NBC_OPCODE_ENUM
    OP_COUNT_
} nbc_opcode;

typedef struct {
    const char *name;     /* "SEND", ...; "?" for a number that is no opcode */
    uint8_t reads, writes; /* operands: OPND_A | OPND_B | OPND_C */
    uint8_t message;      /* SEND or RECV: posted, completes when its round ends */
    uint8_t reduces;      /* applies the operator */
    uint8_t flag;         /* SIGNAL or WAIT: between ranks through shared memory, no data */
} nbc_opinfo;

/* The rows of NBC_OPCODES, then one of no operands for numbers past them (compiler/program.c). */
extern const nbc_opinfo nbc_opinfo_table[OP_COUNT_ + 1];
static inline const nbc_opinfo *prog_opinfo(unsigned op)
{
    return &nbc_opinfo_table[op < OP_COUNT_ ? op : OP_COUNT_];
}
/* The operands an instruction reads or writes. */
static inline unsigned prog_operands(unsigned op)
{
    return prog_opinfo(op)->reads | prog_opinfo(op)->writes;
}

/* Whether an instruction involves another rank: a message or a flag (its `peer`). */
static inline int prog_between_ranks(unsigned op)
{
    return prog_opinfo(op)->message || prog_opinfo(op)->flag;
}

/* SLOT_SHARED: the call's shared scratch, `shared_bytes` long, which peers can name. */
typedef enum { SLOT_SEND, SLOT_RECV, SLOT_SCRATCH, SLOT_SHARED, SLOT_COUNT_ } nbc_slot;
/* On an operand's slot: the buffer is the instruction's `peer`'s, not this rank's (only
 * SLOT_SEND, SLOT_RECV and SLOT_SHARED may carry it). */
#define SLOT_PEER 0x80u
#define SLOT_INDEX(slot) ((unsigned)(slot) & ~SLOT_PEER)
/* Multi-buffer calls (nbc_iallreduce_multi) name their buffers 1 .. nbufs-1 by the slots
 * SLOT_EXTRA + 0 .. (buffer 0 is the receive buffer). */
#define SLOT_EXTRA SLOT_COUNT_
#define NBC_MAX_BUFFERS 16
#define NBC_MAX_SLOTS (SLOT_EXTRA + NBC_MAX_BUFFERS - 1)

typedef struct {
    uint8_t op;       /* nbc_opcode */
    uint8_t a_slot;   /* the operands, as the opcode's row says which it uses */
    uint8_t b_slot;
    uint8_t c_slot;
    int32_t peer;     /* messages and flags: the other rank; COPY/REDUCE/COMBINE: the rank whose
                         buffers the operands with SLOT_PEER name, or -1 when none does */
    uint64_t a_off;   /* byte offsets */
    uint64_t b_off;
    uint64_t c_off;
    uint64_t len;     /* bytes */
} nbc_insn;

typedef struct {
    uint64_t bytes;        /* size of the whole block, header included */
    uint64_t scratch;      /* scratch bytes a request must provide */
    uint64_t shared_bytes; /* shared scratch bytes the runtime must provide (SLOT_SHARED) */
    uint32_t ninsns;
    uint32_t nrounds;
    uint32_t max_round_comms; /* most SEND+RECV in one round: the request array size */
    uint32_t esize;        /* element size the offsets were computed with */
    uint32_t flags;        /* PROG_* */
    char name[48];         /* schedule name, for dumps and errors */
    /* the arrays follow; use the accessors below */
} nbc_program;

/* program flags */
#define PROG_SHARED 1u /* has a flag or names a peer's memory: needs the node's shared memory */
#define PROG_AGREE 2u  /* names a peer's send or receive buffer: runs only after the runtime's agreement */

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

/* Operand k (0: a, 1: b, 2: c) of an instruction. */
static inline unsigned prog_operand_slot(const nbc_insn *in, int k)
{
    return k == 0 ? in->a_slot : k == 1 ? in->b_slot : in->c_slot;
}
static inline uint64_t prog_operand_off(const nbc_insn *in, int k)
{
    return k == 0 ? in->a_off : k == 1 ? in->b_off : in->c_off;
}

const char *prog_opcode_name(int op);  /* "?" for a number that is no opcode */
const char *prog_slot_name(int slot); /* without SLOT_PEER; "?" for no slot */

#endif
