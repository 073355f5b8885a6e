/* The interpreter: runs one request's program without ever blocking. Each step posts the
 * current round (local COPY/REDUCE/COMBINE at once, SEND/RECV posted), tests its
 * communication, and moves on to the next round as soon as it has completed. */
#ifndef NBC_INTERP_H
#define NBC_INTERP_H

#include <mpi.h>
#include <stdint.h>
#include "program.h"
#include "reduce.h"

/* Ranks one shared program can involve (runtime/shm.c refuses larger communicators). */
#define NBC_SHM_MAX_RANKS 64

/* What a program with PROG_SHARED needs besides this rank's own buffers; runtime/shm.c fills
 * it in once the ranks have agreed to run it. Flags count up from `stamp` in each call, so a
 * flag of an earlier call on the same lines is never mistaken for this one's.
 * A peer's send and receive buffers are mapped here when they are in its segment; when they
 * are its private memory (bit q of `by_kernel`), peer_base holds their addresses in rank q's
 * process, and the kernel copies to and from them (interp/remote.c). */
typedef struct {
    char *peer_base[NBC_SHM_MAX_RANKS][SLOT_COUNT_]; /* each rank's send, receive and shared buffers */
    uint64_t by_kernel;                           /* bit q: rank q's send and receive buffers are reached through the kernel */
    int32_t pid[NBC_SHM_MAX_RANKS];               /* each rank's process (for by_kernel) */
    char *bounce;                                 /* 3 pieces of `piece` bytes: remote operands, here */
    uint64_t piece;                               /* a multiple of the element size */
    uint64_t *raise[NBC_SHM_MAX_RANKS];           /* the flag this rank raises for that one */
    const uint64_t *seen[NBC_SHM_MAX_RANKS];      /* the flag that rank raises for this one */
    uint64_t stamp;
    uint32_t raised[NBC_SHM_MAX_RANKS];           /* SIGNALs raised for each rank so far */
    uint32_t awaited[NBC_SHM_MAX_RANKS];          /* WAITs on each rank issued so far */
    int waiting[NBC_SHM_MAX_RANKS];               /* the ranks the current round still waits on */
    int nwaiting;
    /* This rank's `ended` word for the channel (runtime/shm.c) and what it is to say: stored
     * with the call's first SIGNAL, just before the flag in the same cache line, so that the
     * line goes to a waiting peer once (stored at the call's start, while the peer polled that
     * line, it made the line travel twice). NULL once stored. */
    uint64_t *ended, ended_value;
    /* Withdrawal (docs/hardening.md): `left[q]` holds the number + 1 of the last call rank q
     * left before it ended; `using` is this rank's word saying which call's peer buffers it is
     * touching right now. A round that names the peers' buffers (guard) sets `using`, then
     * reads every `left` (a store, a full fence, loads: the leaving rank does the mirror
     * image), so either it sees the peer gone, or the peer waits until `using` is clear again
     * before its call returns. A WAIT whose flag has not come reads `left` too. */
    uint64_t *using;
    const uint64_t *left[NBC_SHM_MAX_RANKS];
    int guard;                                    /* the program names the peers' send or receive buffers:
                                                     the number of ranks; else 0 */
    int left_peer;                                /* the rank found gone, or -1 */
    /* The call's length in bytes, stored with the first SIGNAL; a WAIT compares each peer's
     * with it once the peer's flag has come (the same cache line): different lengths fail. */
    uint64_t *bytes_word, bytes;
    const uint64_t *peer_bytes[NBC_SHM_MAX_RANKS];
    int other_bytes_peer;                         /* a rank that called with another length, or -1 */
} interp_shared;

typedef struct {
    const nbc_program *prog;
    char *base[NBC_MAX_SLOTS]; /* the buffers behind the slots */
    interp_shared *shared;     /* PROG_SHARED programs only, else NULL */
    MPI_Comm comm;
    int tag;
    MPI_Datatype datatype;
    MPI_Op op;
    const reduce_kernels *kernel; /* NULL: MPI_Reduce_local */
    MPI_Request *reqs;        /* room for prog->max_round_comms */
    MPI_Status *statuses;     /* as many: where a failed message tells why */
    int nreqs;
    uint32_t round;
    int posted;               /* the current round's instructions have been issued */
    int one_round;            /* return after each round (a piece of a request that a request of
                                 higher priority may overtake between two: runtime/request.c) */
    int err;                  /* MPI error code; MPI_SUCCESS while fine */
    uint32_t err_round;       /* on failure: the round, and which of its messages failed */
    int err_req;              /* (an index into reqs; -1: not one message) */
    int err_errno;            /* a copy through the kernel failed: its errno (else 0) */
    int err_pc;               /* and its instruction */
} interp_state;

enum { INTERP_WAITING, INTERP_MOVED, INTERP_DONE };

/* Advances as far as possible. INTERP_DONE when finished (successfully or not: see err),
 * INTERP_MOVED when it got further but waits on communication, INTERP_WAITING when nothing
 * could be done. Without may_issue it only completes the round in flight and issues no new
 * one (a request of higher priority is moving). */
int interp_step(interp_state *st, int may_issue);

/* The pc of the i-th SEND or RECV of a round (the instruction behind reqs[i]), or -1. */
int interp_comm_pc(const nbc_program *p, uint32_t round, int i);

#endif
