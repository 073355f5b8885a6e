/* Checks of one rank's program on its own, before any message moves: that it is well formed,
 * that no instruction touches bytes outside its buffers, and that no round races with itself.
 *
 * The race rule follows the round semantics: a round's instructions run in order, COPY and
 * REDUCE at once, SEND and RECV posted and in flight until the round ends. So an instruction
 * conflicts with an EARLIER SEND or RECV of its round when one writes bytes the other reads or
 * writes (a SEND reads its bytes, a RECV writes them at an unknown time). A COPY or REDUCE
 * before a SEND or RECV has finished when it is posted: the ring reduces a block and sends it
 * on in one round, and reads `incoming` before receiving the next block into it. */
#ifndef NBC_PROGCHECK_H
#define NBC_PROGCHECK_H

#include <stddef.h>
#include <stdint.h>
#include "program.h"

typedef struct {
    uint32_t pc, other;  /* the offending instruction, and the one it conflicts with (or UINT32_MAX) */
    int race;            /* the fault is a race within a round: the schedule's mistake, not a bad program */
    char msg[320];
} prog_fault;

/* slot_bytes: the size of each of the nslots slots for this rank (sendbuf, recvbuf, scratch,
 * then a multi-buffer call's other buffers). Returns 0, or 1 with *f filled in, or -1 when out
 * of memory. */
int prog_check(const nbc_program *prog, int64_t p, const uint64_t *slot_bytes, int nslots, prog_fault *f);
/* The same for the program of `rank`, which also rejects a flag or a peer operand naming the
 * rank itself (prog_check, not knowing it, cannot). */
int prog_check_rank(const nbc_program *prog, int64_t p, int64_t rank, const uint64_t *slot_bytes, int nslots,
                    prog_fault *f);
/* Fills in *f (not a race) and returns 1: `return prog_fault_at(f, pc, other, "...", ...)`. */
int prog_fault_at(prog_fault *f, uint32_t pc, uint32_t other, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "recvbuf", "scratch", "bufs(2)", ... */
const char *prog_buffer_name(int slot, char *space, size_t size);

#endif
