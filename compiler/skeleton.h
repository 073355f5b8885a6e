/* The skeleton of a program: only what timing needs, packed small. Simulating a million ranks
 * of a butterfly schedule keeps every rank's unfinished program alive at once (each waits for a
 * partner that waits for another), so the simulator holds skeletons (a few bytes a message)
 * rather than programs (40 bytes an instruction plus a location).
 *
 * Per round, in program order: SEND and RECV (peer as a signed varint difference from the
 * rank, length as a varint or "same as the previous message"), SIGNAL and WAIT (the flags of
 * shared memory: a peer, no length), and LOCAL tokens summing the bytes reduced and copied
 * between them (peer operands too: a copy or reduction costs the same whose buffer it names);
 * END closes a round and DONE the program. */
#ifndef NBC_SKELETON_H
#define NBC_SKELETON_H

#include <stddef.h>
#include <stdint.h>
#include "program.h"

enum { SK_END, SK_DONE, SK_LOCAL, SK_SEND, SK_RECV, SK_SIGNAL, SK_WAIT };

typedef struct {
    int kind;
    int64_t peer;           /* SEND, RECV, SIGNAL, WAIT */
    uint64_t len;           /* SEND, RECV: bytes (0 for a flag) */
    uint64_t reduced, copied; /* LOCAL: bytes */
} skel_token;

/* The skeleton of prog, run by `rank` (malloc'ed; *len bytes), or NULL when out of memory. */
uint8_t *skel_build(const nbc_program *prog, int64_t rank, size_t *len);

/* Decodes the token at code + *pos and moves *pos past it. *last_len carries the length of the
 * previous message between calls (start it at 0). */
void skel_next(const uint8_t *code, uint32_t *pos, int64_t rank, uint64_t *last_len, skel_token *t);

#endif
