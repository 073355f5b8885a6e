/* Between the process's segment and heap (shm_heap.c), the communicators' blocks, channels
 * and agreements cut from it (shm.c), and the any-order requests' lanes (shm_lane.c). Private
 * to those files: the rest of the library reaches shared memory through shm.h. */
#ifndef NBC_SHM_HEAP_H
#define NBC_SHM_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* interp/remote.c's pieces: each call into the kernel costs microseconds, so not small; three
 * bounce pieces fit in L2 */
#define SHM_KERNEL_PIECE (256u << 10)

#define SEG_MAGIC 0x6e62632d73686d31ull /* "nbc-shm1" */

/* The segment's first bytes: a peer that maps it (shm.c) checks that it mapped the right
 * process's. */
typedef struct {
    uint64_t magic, nonce;
    int64_t pid;
} seg_header;

/* Makes the segment on first use: 1 when there is one, 0 when it cannot be made. */
int shm_segment(void);
/* A block of the heap: its offset in the segment, 0 when nothing fits. */
uint64_t shm_heap_alloc(uint64_t size);
/* 0 when off starts no block in use. */
int shm_heap_free(uint64_t off);
/* Where len bytes at p are in this process's segment, or -1 when they are not. */
int64_t shm_segment_offset(const void *p, uint64_t len);
/* Frees the retired blocks of freed communicators that every rank has let go of (shm.c). */
void shm_sweep_retired(void);

/* r runs program `which` from now on: on shared memory with sh (a channel's or a lane's), or
 * with messages (sh NULL); the counters the tests read follow. */
void shm_run(struct nbc_req *r, int which, interp_shared *sh);

/* A communicator's attachment as an any-order request sees it (shm_lane.c). */
typedef struct {
    char *const *seg;         /* [p]: every rank's segment, mapped here */
    const uint64_t *bytes;    /* [p]: their sizes */
    shm_map *const *map;      /* [p]: the peers' processes (NULL for this rank) */
    int by_kernel;            /* every rank reaches every other's private memory through the kernel */
    int taking_part;          /* this rank has not failed on shared memory (its flags can be trusted) */
    int32_t pid[NBC_SHM_MAX_RANKS];
} shm_view;
/* Attaches cs as shm_agree does: < 0 an MPI error, 0 not yet, 1 done; then *why_not is a
 * reason that holds on every rank not to share (messages), or NULL and *v is filled in. */
int shm_comm_view(struct comm_state *cs, shm_view *v, const char **why_not);
/* This rank failed in a shared program: it declines from now on (its peers see it). */
void shm_comm_distrust(struct comm_state *cs);
int shm_comm_peer_exited(const struct comm_state *cs); /* polled at most every 100 ms */
int shm_process_exited(const shm_map *m);
/* What a rank's line says of why it leaves r's call, and that in words (shm.c's reasons). */
uint64_t shm_why_leaving(const struct nbc_req *r);
void shm_left_text(uint64_t why, char *out, size_t size);
/* The lanes of freed any-order requests that every peer has finished with go back to the
 * heap (shm_lane.c). */
void shm_sweep_lanes(void);
/* The interpreter found that a peer left a start in r's lane: r's message names it (shm_explain). */
void shm_lane_explain(struct nbc_req *r);

#endif
