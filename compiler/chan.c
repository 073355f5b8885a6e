#include "chan.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define EMPTY UINT64_MAX

typedef struct {
    uint64_t key;      /* src << 32 | dst, or EMPTY */
    uint32_t head, tail;
    int side;
} queue;

struct chan_table {
    queue *q;          /* open addressing, linear probing, power-of-two size */
    size_t cap, used;
    char *items;       /* pool: each record is a uint32_t link followed by the item */
    size_t isize, rec, ncap, nused;
    uint32_t free_list;
};

static size_t slot_of(const chan_table *t, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (t->cap - 1);
}

static uint32_t *link_of(const chan_table *t, uint32_t i) { return (uint32_t *)(void *)(t->items + (size_t)i * t->rec); }
static void *item_of(const chan_table *t, uint32_t i) { return t->items + (size_t)i * t->rec + sizeof(uint64_t); }

chan_table *chan_create(size_t item_size)
{
    chan_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->isize = item_size;
    t->rec = sizeof(uint64_t) + ((item_size + 7) & ~(size_t)7); /* the link, padded for alignment */
    t->free_list = NONE;
    return t;
}

void chan_destroy(chan_table *t)
{
    if (!t) return;
    free(t->q);
    free(t->items);
    free(t);
}

static queue *find(const chan_table *t, uint64_t key)
{
    if (!t->cap) return NULL;
    for (size_t i = slot_of(t, key);; i = (i + 1) & (t->cap - 1)) {
        if (t->q[i].key == key) return &t->q[i];
        if (t->q[i].key == EMPTY) return NULL;
    }
}

static int grow_table(chan_table *t)
{
    size_t old = t->cap, cap = old ? old * 2 : 1024;
    queue *q = malloc(cap * sizeof *q), *oq = t->q;
    if (!q) return -1;
    for (size_t i = 0; i < cap; i++) q[i].key = EMPTY;
    t->q = q;
    t->cap = cap;
    for (size_t i = 0; i < old; i++) {
        if (oq[i].key == EMPTY) continue;
        size_t j = slot_of(t, oq[i].key);
        while (q[j].key != EMPTY) j = (j + 1) & (cap - 1);
        q[j] = oq[i];
    }
    free(oq);
    return 0;
}

static uint32_t new_item(chan_table *t)
{
    if (t->free_list != NONE) {
        uint32_t i = t->free_list;
        t->free_list = *link_of(t, i);
        return i;
    }
    if (t->nused == t->ncap) {
        size_t cap = t->ncap ? t->ncap * 2 : 1024;
        if (cap >= NONE) return NONE;
        char *items = realloc(t->items, cap * t->rec);
        if (!items) return NONE;
        t->items = items;
        t->ncap = cap;
    }
    return (uint32_t)t->nused++;
}

int chan_push(chan_table *t, uint32_t src, uint32_t dst, int side, const void *item)
{
    uint64_t key = (uint64_t)src << 32 | dst;
    queue *q = find(t, key);
    uint32_t i = new_item(t);
    if (i == NONE) return -1;
    memcpy(item_of(t, i), item, t->isize);
    *link_of(t, i) = NONE;
    if (q) { /* a queue exists only while it holds items */
        *link_of(t, q->tail) = i;
        q->tail = i;
        return 0;
    }
    if ((t->used + 1) * 2 > t->cap && grow_table(t)) {
        *link_of(t, i) = t->free_list;
        t->free_list = i;
        return -1;
    }
    size_t j = slot_of(t, key);
    while (t->q[j].key != EMPTY) j = (j + 1) & (t->cap - 1);
    t->q[j] = (queue){key, i, i, side};
    t->used++;
    return 0;
}

void *chan_front(const chan_table *t, uint32_t src, uint32_t dst, int side)
{
    const queue *q = find(t, (uint64_t)src << 32 | dst);
    return q && q->side == side ? item_of(t, q->head) : NULL;
}

/* Deletion without tombstones: later entries of the probe run move back into the hole. */
static void remove_slot(chan_table *t, size_t hole)
{
    size_t mask = t->cap - 1;
    for (size_t j = (hole + 1) & mask; t->q[j].key != EMPTY; j = (j + 1) & mask) {
        size_t home = slot_of(t, t->q[j].key);
        /* the entry at j may fill the hole when its home is not in (hole, j] cyclically */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            t->q[hole] = t->q[j];
            hole = j;
        }
    }
    t->q[hole].key = EMPTY;
    t->used--;
}

void chan_pop(chan_table *t, uint32_t src, uint32_t dst)
{
    queue *q = find(t, (uint64_t)src << 32 | dst);
    if (!q) return;
    uint32_t i = q->head;
    q->head = *link_of(t, i);
    *link_of(t, i) = t->free_list;
    t->free_list = i;
    if (q->head == NONE) remove_slot(t, (size_t)(q - t->q));
}

void chan_each(const chan_table *t, void (*f)(void *, uint32_t, uint32_t, int, void *), void *ctx)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->q[i].key != EMPTY)
            f(ctx, (uint32_t)(t->q[i].key >> 32), (uint32_t)t->q[i].key, t->q[i].side, item_of(t, t->q[i].head));
}
