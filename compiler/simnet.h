/* The simulated network that runs every rank of a schedule together, in one process: the cost
 * simulator's (simulate.h), the verifier's and the failure analysis's (analysis/verify.h,
 * analysis/failrun.h). Each keeps what a rank is and what a message carries; the network
 * holds the messages and says which rank moves next.
 *
 * Messages: per ordered pair of ranks (source, destination), the operations posted on one
 * side and not yet met by the other, oldest first (chan.h). Messages of one collective call
 * share one tag, so MPI's non-overtaking rule makes the k-th send from s to d meet the k-th
 * receive d posts from s: a FIFO per pair is the whole matching rule. A run posts one side
 * (net_post) after trying to meet the other (net_take); a run with eager sends posts only
 * sends and takes them when its receives are due.
 *
 * Flags (SIGNAL and WAIT, between ranks on one node) match the same way, the k-th SIGNAL from a
 * to b with b's k-th WAIT on a, in a FIFO of their own per pair: a run posts and takes them with
 * net_flags(dst) as the destination, so they never meet a message.
 *
 * Ranks: a FIFO of the ranks ready to move, each in it at most once. A run queues a rank when
 * something it waits for happens, and moves the ranks net_next gives until none is ready. */
#ifndef NBC_SIMNET_H
#define NBC_SIMNET_H

#include <stddef.h>
#include <stdint.h>
#include "chan.h"

#define NET_FLAGS 0x80000000u /* on a destination: the pair's flags (ranks are below 2^31) */
static inline uint32_t net_flags(uint32_t dst) { return dst | NET_FLAGS; }

typedef struct {
    chan_table *ch;
    size_t item_size;
    uint32_t *ready;          /* the FIFO of ranks ready to move: a ring of p */
    uint8_t *queued;          /* per rank: in the ring now */
    size_t p, head, count;
    uint64_t waiting;         /* operations posted and not yet taken */
    uint64_t max_waiting;     /* the most there ever were */
} sim_net;

/* p ranks; item_size: the bytes of one posted operation. Returns 0, or -1 when out of memory
 * (net_free then frees what was made). */
int net_init(sim_net *n, int64_t p, size_t item_size);
/* Calls drop (when not NULL) on every operation still posted, then frees the network. */
void net_free(sim_net *n, void (*drop)(void *item));

/* Queues a rank to move, unless it is queued already. */
void net_ready(sim_net *n, uint32_t rank);
/* The oldest queued rank, taken out of the queue: 1, or 0 when no rank is ready. */
int net_next(sim_net *n, uint32_t *rank);

/* Posts a copy of item as side `side` of the pair (src, dst), behind what waits there; the
 * pair must hold nothing or that side. Returns 0, or -1 when out of memory. */
int net_post(sim_net *n, uint32_t src, uint32_t dst, int side, const void *item);
/* When the oldest operation waiting on (src, dst) is of side `side`: copies it to *item,
 * removes it and returns 1; else returns 0. */
int net_take(sim_net *n, uint32_t src, uint32_t dst, int side, void *item);
/* Calls f on the oldest operation of every pair that holds some (in no particular order). */
void net_each(const sim_net *n, void (*f)(void *ctx, uint32_t src, uint32_t dst, int side, void *item), void *ctx);

#endif
