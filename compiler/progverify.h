/* The program verifier, like a bytecode verifier: whatever made a program, it is cached or run
 * only after this has checked it against the call it is for. Its header must describe its
 * own layout, its rounds must cover its instructions in order, no round may post more
 * messages than the program says, every peer must be a rank, every count must fit MPI's int,
 * and every offset plus length must lie inside its buffer as this call sizes it (then
 * prog_check's rules, races included). */
#ifndef NBC_PROGVERIFY_H
#define NBC_PROGVERIFY_H

#include "compile.h"
#include "progcheck.h"
#include "collectives.h"

/* The bytes of each slot for call a of collective c; returns how many slots there are. */
int prog_slot_bytes(const nbc_program *prog, nbc_collective c, const compile_args *a, uint64_t bytes[NBC_MAX_SLOTS]);

/* Returns 0 when prog may run for call a of collective c (a building block: COLL_ALLREDUCE),
 * 1 with *f filled in when it may not, or -1 when out of memory. */
int prog_verify(const nbc_program *prog, nbc_collective c, const compile_args *a, prog_fault *f);

#endif
