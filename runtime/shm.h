/* Shared memory between the ranks of one node: the process's segment and its heap
 * (nbc_alloc_mem), each communicator's flags, and the agreement that lets a shared program
 * run (runtime/shm.c, docs/shared-memory.md). */
#ifndef NBC_SHM_H
#define NBC_SHM_H

#include <stddef.h>
#include <stdint.h>

/* Channels of a communicator's shared memory: call seq uses channel seq % SHM_CHANNELS. */
#define SHM_CHANNELS 16

/* From this many bytes up to allreduce_shm_small's limit, a call whose ranks all have shared
 * buffers (nbc_alloc_mem) runs allreduce_shm, which reads them where they are, instead of the
 * stage (docs/shared-memory.md); below, the stage's one exchange of flags is faster. */
#define SHM_DIRECT_MIN_BYTES 1024

/* A request cut into chunks for priorities runs on shared memory in pieces of at most this
 * many bytes of its result a step (allreduce_shm_pieces): about 0.1 ms of memory traffic, which
 * is how long a request of higher priority started meanwhile waits for the CPU. */
#define SHM_PIECE_BYTES (256 << 10)

/* The segment's size when NBC_SHM_BYTES does not say (a quarter of the machine's memory if
 * that is less, 64 MiB at least): nbc_alloc_mem beyond it is private memory. */
#define SHM_DEFAULT_BYTES (1ull << 30)

struct nbc_req;
struct comm_state;
struct call;

/* The process's part of nbc_rt (state.h); shm_heap.c and shm.c alone write it. */
typedef struct shm_span shm_span;
typedef struct shm_map shm_map;
typedef struct retired retired;
struct shm_map {          /* a peer's process and segment, mapped here once for all communicators */
    int32_t pid, fd;
    uint64_t nonce, bytes;
    char *base;
    int pidfd;            /* this very process (-1: the kernel gives none): readable once it exits */
    int exited;           /* its pidfd said so */
    shm_map *next;
};
typedef struct {
    int enabled;          /* NBC_SHM */
    int kernel;           /* NBC_SHM_KERNEL: peers' private buffers may be reached through the kernel */
    uint64_t bytes;       /* NBC_SHM_BYTES: the segment's size (address space; pages come when touched) */
    int fd;               /* the segment: a memfd, -1 until first needed */
    char *base;
    uint64_t nonce;       /* in its header, so that a peer knows it mapped the right process's */
    int failed;           /* could not be made: everything falls back to messages and malloc */
    shm_span *spans;      /* the heap, in address order */
    shm_map *maps;        /* peers' segments mapped here */
    retired *retired;     /* blocks of freed communicators that peers may still read */
    struct lane_retired *retired_lanes; /* lanes of freed any-order requests (shm_lane.c) */
    long polled_ns;       /* when their pidfds were last polled (now_ns) */
    char *bounce;         /* interp/remote.c's three pieces, for the process's life like the maps */
    uint64_t shared_calls, message_calls; /* how agreements ended (tests read them) */
    uint64_t kernel_calls; /* of the shared calls, those where this rank reached a peer's buffers through the kernel */
    uint64_t direct_calls; /* of the shared calls, small ones that read the peers' buffers instead of the stage */
} shm_process;

/* Reads NBC_SHM and NBC_SHM_BYTES and decides whether this process can share (nbc_init). */
int shm_init(void);

/* Whether a call may take the shared path: an allreduce on a communicator of 2 ..
 * NBC_SHM_MAX_RANKS ranks (attaching learns which of them share a node). The same answer on
 * every rank of the call. */
int shm_eligible(const struct comm_state *cs, int coll);

/* The agreement of a request that has a shared program (r->progs[RUN_SHARED]): 0 while it
 * waits for its channel, the communicator's attachment or its peers; 1 once r->st.prog is the
 * program to run (a shared one, or the messages'); < 0 (an MPI error, r failed) when it cannot
 * go on. */
int shm_agree(struct nbc_req *r);
/* The request is done or gone: its channel is free for the next call. One that did not run
 * its program to the end withdraws first: its peers stop touching its buffers and learn
 * that it left (docs/hardening.md). */
void shm_end(struct nbc_req *r);
/* The interpreter found that a peer left r's call: r's message names the peer and its reason. */
void shm_explain(struct nbc_req *r);
/* Call `seq` failed here before it became a request: its peers learn it (err: the reason). */
void shm_not_started(struct comm_state *cs, uint64_t seq, int err);
void shm_comm_free(struct comm_state *cs);

/* Any-order requests (shm_lane.c): each has a lane of its own in every rank's segment (its
 * flags and stage), agreed on at its first start. shm_lane_agree is shm_agree's counterpart,
 * shm_lane_end shm_end's; shm_lane_release lets the lane go when the request is freed. */
int shm_lane_agree(struct nbc_req *r);
void shm_lane_end(struct nbc_req *r);
void shm_lane_release(struct nbc_req *r);
/* What peer q of r's communicator last did, read from its line (stall reports): snprintf's
 * return, or 0 when the communicator shares no memory. */
int shm_describe_peer(const struct nbc_req *r, int q, char *buf, size_t size);

int shm_alloc(size_t size, void *baseptr);
int shm_free(void *base);

#endif
