#include "simnet.h"

#include <stdlib.h>
#include <string.h>

int net_init(sim_net *n, int64_t p, size_t item_size)
{
    memset(n, 0, sizeof *n);
    n->p = (size_t)p;
    n->item_size = item_size;
    n->ready = malloc(n->p * sizeof *n->ready);
    n->queued = calloc(n->p, sizeof *n->queued);
    n->ch = chan_create(item_size);
    return n->ready && n->queued && n->ch ? 0 : -1;
}

static void drop_item(void *ctx, uint32_t src, uint32_t dst, int side, void *item)
{
    (void)src, (void)dst, (void)side;
    (*(void (**)(void *))ctx)(item);
}

void net_free(sim_net *n, void (*drop)(void *item))
{
    if (drop && n->ch) chan_each(n->ch, drop_item, &drop);
    chan_destroy(n->ch);
    free(n->ready);
    free(n->queued);
    memset(n, 0, sizeof *n);
}

void net_ready(sim_net *n, uint32_t rank)
{
    if (n->queued[rank]) return;
    n->queued[rank] = 1;
    n->ready[(n->head + n->count++) % n->p] = rank;
}

int net_next(sim_net *n, uint32_t *rank)
{
    if (n->count == 0) return 0;
    *rank = n->ready[n->head];
    n->head = (n->head + 1) % n->p;
    n->count--;
    n->queued[*rank] = 0;
    return 1;
}

int net_post(sim_net *n, uint32_t src, uint32_t dst, int side, const void *item)
{
    if (chan_push(n->ch, src, dst, side, item)) return -1;
    if (++n->waiting > n->max_waiting) n->max_waiting = n->waiting;
    return 0;
}

int net_take(sim_net *n, uint32_t src, uint32_t dst, int side, void *item)
{
    void *w = chan_front(n->ch, src, dst, side);
    if (!w) return 0;
    memcpy(item, w, n->item_size);
    chan_pop(n->ch, src, dst);
    n->waiting--;
    return 1;
}

void net_each(const sim_net *n, void (*f)(void *ctx, uint32_t src, uint32_t dst, int side, void *item), void *ctx)
{
    chan_each(n->ch, f, ctx);
}
