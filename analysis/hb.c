#include "hb.h"

#include <stdlib.h>

static int known(const uint32_t *clk, const hb_access *x) { return clk[x->rank] >= x->epoch; }

int hb_access_cell(hb_cell *c, uint32_t who, uint32_t pc, uint32_t epoch, int writes, const uint32_t *clk, hb_access *other)
{
    if (c->has_w && c->w.rank != who && !known(clk, &c->w)) return *other = c->w, HB_WRITE;
    for (uint32_t i = 0; writes && i < c->nr; i++)
        if (c->r[i].rank != who && !known(clk, &c->r[i])) return *other = c->r[i], HB_READ;
    hb_access me = {who, pc, epoch};
    if (writes) { /* every read is ordered before this write, so later accesses need only it */
        c->w = me;
        c->has_w = 1;
        c->nr = 0;
        return 0;
    }
    for (uint32_t i = 0; i < c->nr; i++)
        if (c->r[i].rank == who) return c->r[i] = me, 0;
    if (c->nr == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 2;
        hb_access *r = realloc(c->r, cap * sizeof *r);
        if (!r) return -1;
        c->r = r;
        c->cap = cap;
    }
    c->r[c->nr++] = me;
    return 0;
}

int hb_unknown(const hb_cell *c, uint32_t owner, const uint32_t *clk, hb_access *bad)
{
    if (c->has_w && c->w.rank != owner && !known(clk, &c->w)) return *bad = c->w, HB_WRITE;
    for (uint32_t i = 0; i < c->nr; i++)
        if (c->r[i].rank != owner && !known(clk, &c->r[i])) return *bad = c->r[i], HB_READ;
    return 0;
}

void hb_join(uint32_t *into, const uint32_t *snap, uint32_t p, uint32_t sender, uint32_t own)
{
    for (uint32_t q = 0; q < p; q++)
        if (snap[q] > into[q]) into[q] = snap[q];
    if (own > into[sender]) into[sender] = own;
}

void hb_cells_free(hb_cell *c, uint32_t n)
{
    for (uint32_t i = 0; c && i < n; i++) free(c[i].r);
    free(c);
}
