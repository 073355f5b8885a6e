/* The channels of the simulated network (simnet.h, which uses them): for each ordered pair of
 * ranks (source, destination), the operations posted on one side and not yet matched by the
 * other, oldest first.
 *
 * A queue holds items of one side at a time (sends waiting for receives, or the reverse);
 * items are fixed-size records copied in and out. Only non-empty queues take memory, so the
 * table stays proportional to what is in flight, not to p². */
#ifndef NBC_CHAN_H
#define NBC_CHAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct chan_table chan_table;

chan_table *chan_create(size_t item_size);
void chan_destroy(chan_table *t);

/* Appends a copy of item to queue (src, dst) as side `side`. The queue must be empty or hold
 * that side already. Returns 0, or -1 when out of memory. */
int chan_push(chan_table *t, uint32_t src, uint32_t dst, int side, const void *item);
/* The oldest item of queue (src, dst) when it holds side `side`, else NULL. Valid until the
 * next push or pop. */
void *chan_front(const chan_table *t, uint32_t src, uint32_t dst, int side);
/* Removes the oldest item of a non-empty queue. */
void chan_pop(chan_table *t, uint32_t src, uint32_t dst);
/* Calls f on the oldest item of every non-empty queue (in no particular order). */
void chan_each(const chan_table *t, void (*f)(void *ctx, uint32_t src, uint32_t dst, int side, void *item), void *ctx);

#endif
