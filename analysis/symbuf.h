/* Symbolic buffers for the verifier: what each element of a rank's buffer holds, not as a
 * number but as "the reduction of x_r[o] over a multiset S of ranks r", kept per run of
 * elements (a piece) so that the work is per run, not per element.
 *
 * S is represented by a sum mod 2^64 of a random 64-bit key per rank and a count: a missing or
 * doubled contribution changes the sum (and a swap of one for another does too), with a chance
 * of 2^-64 to go unnoticed. For order-keeping schedules a piece also carries the range of ranks
 * [lo, hi) it combines and a fingerprint of its expression tree (which operands were combined in
 * which grouping), so that every rank can be shown to compute bit-identical results.
 *
 * A buffer is cut, once, at every offset any instruction of its rank's program starts or ends
 * at (and where the initial contents change): each cell between two cuts is only ever read or
 * written whole, so finding the cells of an instruction is a binary search. A cell holds a list
 * of pieces, usually one. All offsets and lengths here are in elements. */
#ifndef NBC_SYMBUF_H
#define NBC_SYMBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t len;        /* elements in the run */
    uint64_t orig;       /* element i of the run is x[orig + i] */
    uint64_t sum;        /* Σ key(r) over S, mod 2^64 */
    uint64_t tree;       /* fingerprint of the expression tree */
    uint32_t cnt;        /* |S|; 0: the run holds no value yet (never written) */
    uint32_t lo, hi;     /* ranks combined, when they form a range [lo, hi) */
} sym_piece;

typedef struct {
    sym_piece *v;
    size_t n, cap;
} sym_list;

#define SYM_INITIAL UINT32_MAX /* writer of a cell that still holds its initial contents */

typedef struct {
    uint32_t n, cap;     /* pieces; cap 0: the one piece is stored inline */
    uint32_t writer;     /* pc of the instruction that wrote the cell last */
    sym_piece one;
    sym_piece *more;
} sym_cell;

typedef struct {
    uint64_t len;        /* elements */
    uint64_t *cut;       /* ncells + 1 sorted offsets: cut[0] = 0, cut[ncells] = len */
    sym_cell *cell;
    uint32_t ncells;
} sym_buf;

/* A buffer of len elements holding nothing, cut at the given offsets (any order, duplicates
 * and offsets 0 and len allowed; all must be <= len). Takes ownership of cuts (malloc'ed,
 * room for ncuts + 2). Returns 0, or -1 when out of memory. */
int sym_buf_init(sym_buf *b, uint64_t len, uint64_t *cuts, size_t ncuts);
void sym_buf_free(sym_buf *b);

/* Appends to out the pieces of [lo, hi), merging runs that continue each other. lo and hi
 * must be cuts. Returns 0, or -1 when out of memory. */
int sym_read(const sym_buf *b, uint64_t lo, uint64_t hi, sym_list *out);
/* Stores n pieces (of total length hi - lo) into [lo, hi), recording the writer. */
int sym_write(sym_buf *b, uint64_t lo, uint64_t hi, const sym_piece *v, size_t n, uint32_t writer);
/* The index of the cell starting at lo, or -1 when lo is not a cut. */
int64_t sym_cell_at(const sym_buf *b, uint64_t lo);
static inline const sym_piece *sym_cell_pieces(const sym_cell *c) { return c->cap ? c->more : &c->one; }

int sym_list_add(sym_list *l, sym_piece x); /* appends, merging with the last piece */
void sym_list_free(sym_list *l);
/* The first len elements of *x, leaving the rest in *x. */
sym_piece sym_take(sym_piece *x, uint64_t len);
/* Whether b continues a (same value, next elements). */
int sym_continues(const sym_piece *a, const sym_piece *b);

#endif
