#include "symbuf.h"

#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int sym_buf_init(sym_buf *b, uint64_t len, uint64_t *cuts, size_t ncuts)
{
    memset(b, 0, sizeof *b);
    cuts[ncuts++] = 0;
    cuts[ncuts++] = len;
    qsort(cuts, ncuts, sizeof *cuts, by_value);
    size_t n = 0;
    for (size_t i = 0; i < ncuts; i++)
        if (n == 0 || cuts[i] != cuts[n - 1]) cuts[n++] = cuts[i];
    b->len = len;
    b->cut = cuts;
    b->ncells = (uint32_t)(n - 1);
    b->cell = calloc(b->ncells ? b->ncells : 1, sizeof *b->cell);
    if (!b->cell) return -1;
    for (uint32_t i = 0; i < b->ncells; i++) {
        b->cell[i].n = 1;
        b->cell[i].writer = SYM_INITIAL;
        b->cell[i].one = (sym_piece){.len = cuts[i + 1] - cuts[i]};
    }
    return 0;
}

void sym_buf_free(sym_buf *b)
{
    for (uint32_t i = 0; b->cell && i < b->ncells; i++) free(b->cell[i].more);
    free(b->cell);
    free(b->cut);
    memset(b, 0, sizeof *b);
}

int64_t sym_cell_at(const sym_buf *b, uint64_t lo)
{
    uint32_t l = 0, h = b->ncells + 1; /* search cut[0 .. ncells] */
    while (l < h) {
        uint32_t m = l + (h - l) / 2;
        if (b->cut[m] < lo) l = m + 1;
        else h = m;
    }
    return l <= b->ncells && b->cut[l] == lo ? (int64_t)l : -1;
}

int sym_continues(const sym_piece *a, const sym_piece *b)
{
    if (a->cnt == 0 || b->cnt == 0) return a->cnt == 0 && b->cnt == 0;
    return a->sum == b->sum && a->cnt == b->cnt && a->tree == b->tree && a->lo == b->lo && a->hi == b->hi &&
           b->orig == a->orig + a->len;
}

int sym_list_add(sym_list *l, sym_piece x)
{
    if (l->n && sym_continues(&l->v[l->n - 1], &x)) {
        l->v[l->n - 1].len += x.len;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        sym_piece *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

void sym_list_free(sym_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

int sym_read(const sym_buf *b, uint64_t lo, uint64_t hi, sym_list *out)
{
    int64_t i = sym_cell_at(b, lo);
    if (i < 0) return -1;
    for (; (uint64_t)i < b->ncells && b->cut[i] < hi; i++) {
        const sym_cell *c = &b->cell[i];
        const sym_piece *v = sym_cell_pieces(c);
        for (uint32_t k = 0; k < c->n; k++)
            if (sym_list_add(out, v[k])) return -1;
    }
    return 0;
}

sym_piece sym_take(sym_piece *x, uint64_t len)
{
    sym_piece head = *x;
    head.len = len;
    x->len -= len;
    if (x->cnt) x->orig += len;
    return head;
}

static int set_cell(sym_cell *c, const sym_piece *v, uint32_t n)
{
    if (n > 1 && n > c->cap) {
        sym_piece *m = realloc(c->more, n * sizeof *m);
        if (!m) return -1;
        c->more = m;
        c->cap = n;
    }
    if (n == 1 && c->cap) { /* back to inline storage */
        free(c->more);
        c->more = NULL;
        c->cap = 0;
    }
    memcpy(c->cap ? c->more : &c->one, v, n * sizeof *v);
    c->n = n;
    return 0;
}

int sym_write(sym_buf *b, uint64_t lo, uint64_t hi, const sym_piece *v, size_t n, uint32_t writer)
{
    int64_t i = sym_cell_at(b, lo);
    if (i < 0) return -1;
    sym_piece cur = n ? v[0] : (sym_piece){0};
    size_t next = 1;
    sym_piece tmp[8], *part = tmp;
    size_t cap = 8;
    int rc = 0;
    for (; (uint64_t)i < b->ncells && b->cut[i] < hi && rc == 0; i++) {
        uint64_t need = b->cut[i + 1] - b->cut[i];
        uint32_t k = 0;
        while (need > 0) {
            if (cur.len == 0) {
                if (next >= n) return -1; /* the pieces are shorter than the range */
                cur = v[next++];
            }
            if (k == cap) {
                sym_piece *bigger = malloc(2 * cap * sizeof *bigger);
                if (!bigger) { rc = -1; break; }
                memcpy(bigger, part, cap * sizeof *part);
                if (part != tmp) free(part);
                part = bigger;
                cap *= 2;
            }
            uint64_t l = cur.len < need ? cur.len : need;
            part[k++] = sym_take(&cur, l);
            need -= l;
        }
        if (rc == 0) rc = set_cell(&b->cell[i], part, k);
        b->cell[i].writer = writer;
    }
    if (part != tmp) free(part);
    return rc;
}
