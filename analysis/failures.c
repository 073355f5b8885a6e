/* Reading a failure run (failures.h): every piece any survivor holds becomes one record
 * (element, set of contributions, holder); sorted by element, the records of one element
 * answer every question about it. */
#include "failures.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t e, mask;
    uint32_t s;
    uint32_t result; /* the piece sits where s's result for e belongs */
} rec;

typedef struct {
    rec *v;
    size_t n, cap;
} recs;

static int push(recs *r, rec x)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        rec *v = realloc(r->v, cap * sizeof *v);
        if (!v) return -1;
        r->v = v, r->cap = cap;
    }
    r->v[r->n++] = x;
    return 0;
}

static int by_elem(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->e != y->e) return x->e < y->e ? -1 : 1;
    if (x->mask != y->mask) return x->mask < y->mask ? -1 : 1;
    return (x->s > y->s) - (x->s < y->s);
}

/* Every element of every piece of survivor s's buffers, as records. */
static int collect(const fail_state *st, uint32_t s, recs *out)
{
    for (int slot = 0; slot < SLOT_COUNT_; slot++) {
        const sym_buf *b = &st->buf[s][slot];
        for (uint32_t c = 0; c < b->ncells; c++) {
            const sym_piece *v = sym_cell_pieces(&b->cell[c]);
            uint64_t pos = b->cut[c];
            for (uint32_t i = 0; i < b->cell[c].n; pos += v[i].len, i++) {
                if (v[i].cnt == 0) continue;
                for (uint64_t j = 0; j < v[i].len; j++) {
                    uint64_t e = v[i].orig + j;
                    rec x = {e, v[i].sum, s, slot == SLOT_RECV && pos + j == e};
                    if (push(out, x)) return -1;
                }
            }
        }
    }
    return 0;
}

/* Whether disjoint masks of v[0..n) add up to exactly `target`. Branches on bit `first` while
 * it is wanted (f's: the rarest), then on the lowest bit wanted, whose candidates come in
 * ascending order (v is sorted), singletons first; gives up optimistically after a budget. */
static int cover(const uint64_t *v, size_t n, uint64_t target, int first, long *budget)
{
    if (target == 0) return 1;
    if (--*budget < 0) return 1;
    int b = target >> first & 1 ? first : __builtin_ctzll(target);
    for (size_t i = 0; i < n; i++)
        if ((v[i] >> b & 1) && !(v[i] & ~target) && cover(v, n, target & ~v[i], first, budget)) return 1;
    return 0;
}

/* "0..3, 7" for the elements whose bit `who` is set in m[0..n). */
static void ranges(FILE *out, const uint64_t *m, uint64_t n, uint64_t who)
{
    const char *sep = "";
    for (uint64_t e = 0; e < n;) {
        if (!(m[e] & who)) {
            e++;
            continue;
        }
        uint64_t end = e;
        while (end + 1 < n && (m[end + 1] & who)) end++;
        if (end == e) fprintf(out, "%s%" PRIu64, sep, e);
        else fprintf(out, "%s%" PRIu64 "..%" PRIu64, sep, e, end);
        sep = ", ";
        e = end + 1;
    }
}

typedef struct {
    uint64_t *lost, *done, *tainted, *need; /* per element: bit per contribution or survivor */
} marks;

static void print_detail(FILE *out, const fail_model *m, const fail_case *c, const marks *mk)
{
    uint64_t n = (uint64_t)m->base.count;
    uint32_t p = (uint32_t)m->base.p;
    fprintf(out, "rank %u stops at round %u:\n", c->f, c->k);
    if (!c->lost) fprintf(out, "  lost: nothing\n");
    for (uint32_t r = 0; r < p; r++)
        if (c->lost >> r & 1) {
            fprintf(out, "  lost: rank %u's contribution to elements ", r);
            ranges(out, mk->lost, n, 1ull << r);
            fprintf(out, "\n");
        }
    for (uint32_t s = 0; s < p; s++) {
        if (s == c->f) continue;
        int any = 0;
        for (uint64_t e = 0; e < n && !any; e++) any = (mk->done[e] | mk->tainted[e] | mk->need[e]) >> s & 1;
        if (!any) continue;
        fprintf(out, "  rank %u:", s);
        const char *sep = " ";
        struct { const uint64_t *m; const char *what; } parts[] = {
            {mk->done, "final"}, {mk->tainted, "partial"}, {mk->need, "must receive"}};
        for (int i = 0; i < 3; i++) {
            int has = 0;
            for (uint64_t e = 0; e < n && !has; e++) has = parts[i].m[e] >> s & 1;
            if (!has) continue;
            if (i == 1) fprintf(out, "%spartial with rank %u's data ", sep, c->f);
            else fprintf(out, "%s%s ", sep, parts[i].what);
            ranges(out, parts[i].m, n, 1ull << s);
            sep = "; ";
        }
        fprintf(out, "\n");
    }
    if (c->tainted_elems)
        fprintf(out, "  rank %u's raw input is %s\n", c->f,
                c->f_known ? "on a survivor too"
                           : "on no survivor (for some elements): its data lives on only inside partial results, which a "
                             "result of the survivors alone cannot use unless the op can be inverted");
    fprintf(out, "  %s; lower bound to finish: %" PRIu64 " elements received, %u message(s)\n",
            c->finishable ? "the survivors can finish without it" : "the survivors cannot finish: a contribution is lost",
            c->need_elems, c->need_ranks);
}

typedef struct {
    uint32_t p, f;
    uint64_t full, survivors, needers;
    uint64_t *masks;     /* scratch: an element's distinct masks, then the same by holder */
    size_t cap;
    marks mk;
    fail_case *out;
} reading;

/* Reads the records v[0..n) of element e. Returns 0, or -1 when out of memory. */
static int read_element(reading *g, uint64_t e, const rec *v, size_t n)
{
    if (2 * n + 1 > g->cap) {
        uint64_t *t = realloc(g->masks, (2 * n + 1) * sizeof *t);
        if (!t) return -1;
        g->masks = t, g->cap = 2 * n + 1;
    }
    uint64_t have = 0, finals = 0, known = 0, full = g->full, *masks = g->masks;
    size_t nm = 0;
    for (size_t q = 0; q < n; q++) { /* sorted by mask: equal masks are neighbours */
        uint64_t x = v[q].mask, who = 1ull << v[q].s;
        have |= x;
        if (x == full) finals |= who;
        if (x == full && v[q].result) g->mk.done[e] |= who;
        if (x != full && (x >> g->f & 1)) g->mk.tainted[e] |= who;
        if (x == 1ull << g->f) known = 1;
        if (nm == 0 || masks[nm - 1] != x) masks[nm++] = x;
    }
    fail_case *out = g->out;
    g->mk.lost[e] = full & ~have;
    out->lost |= g->mk.lost[e];
    out->lost_elems += g->mk.lost[e] != 0;
    out->final_elems += finals != 0;
    out->f_known &= (int)known;
    long budget = 100000;
    if (g->mk.lost[e] || !cover(masks, nm, full, (int)g->f, &budget)) out->finishable = 0;
    /* each survivor without the final value: can it form it from its own pieces? */
    size_t at[FAIL_MAX_P + 1] = {0};
    for (size_t q = 0; q < n; q++) at[v[q].s + 1]++;
    for (uint32_t s = 0; s < g->p; s++) at[s + 1] += at[s];
    for (size_t q = 0; q < n; q++) masks[nm + at[v[q].s]++] = v[q].mask; /* by holder, still sorted */
    for (uint32_t s = 0, lo = 0; s < g->p; lo = (uint32_t)at[s], s++) {
        if (!(g->survivors >> s & 1) || (g->mk.done[e] >> s & 1)) continue;
        budget = 100000;
        if (!cover(masks + nm + lo, at[s] - lo, full, (int)g->f, &budget)) g->mk.need[e] |= 1ull << s;
    }
    out->need_elems += (uint64_t)__builtin_popcountll(g->mk.need[e]);
    g->needers |= g->mk.need[e];
    return 0;
}

int fail_case_run(const fail_model *m, uint32_t f, uint32_t k, fail_case *out, FILE *detail)
{
    uint32_t p = (uint32_t)m->base.p, limit[FAIL_MAX_P] = {0};
    uint64_t n = (uint64_t)m->base.count;
    for (uint32_t r = 0; r < p; r++) limit[r] = r == f ? k : UINT32_MAX;
    memset(out, 0, sizeof *out);
    out->f = f, out->k = k, out->f_known = n > 0, out->finishable = 1;
    reading g = {.p = p, .f = f, .full = p == 64 ? ~0ull : (1ull << p) - 1, .out = out};
    g.survivors = g.full & ~(1ull << f);
    g.mk = (marks){calloc(n + 1, 8), calloc(n + 1, 8), calloc(n + 1, 8), calloc(n + 1, 8)};
    fail_state *st = calloc(1, sizeof *st);
    recs rs = {0};
    int rc = st && g.mk.lost && g.mk.done && g.mk.tainted && g.mk.need ? fail_run(m, limit, f, st) : -1;
    for (uint32_t s = 0; s < p && !rc; s++)
        if (s != f) rc = collect(st, s, &rs);
    if (!rc && rs.n) qsort(rs.v, rs.n, sizeof *rs.v, by_elem);
    for (size_t e = 0, i = 0, j; e < n && !rc; e++, i = j) { /* each element's records (maybe none) */
        for (j = i; j < rs.n && rs.v[j].e == e;) j++;
        rc = read_element(&g, e, rs.n ? rs.v + i : NULL, j - i);
    }
    for (uint64_t e = 0; e < n && !rc; e++) {
        out->done_elems += (uint64_t)__builtin_popcountll(g.mk.done[e]);
        out->tainted_elems += (uint64_t)__builtin_popcountll(g.mk.tainted[e]);
    }
    out->need_ranks = (uint32_t)__builtin_popcountll(g.needers);
    for (uint32_t s = 0; s < p && !rc; s++) {
        int all = s != f;
        for (uint64_t e = 0; e < n && all; e++) all = g.mk.done[e] >> s & 1;
        if (all) out->done_ranks |= 1ull << s;
    }
    if (!rc && detail) print_detail(detail, m, out, &g.mk);
    if (st) fail_state_free(m, st);
    free(st);
    free(rs.v);
    free(g.masks);
    free(g.mk.lost), free(g.mk.done), free(g.mk.tainted), free(g.mk.need);
    return rc;
}

int fail_holders_min(const fail_model *m, uint32_t k, uint32_t *min_holders)
{
    uint32_t p = (uint32_t)m->base.p, limit[FAIL_MAX_P] = {0};
    uint64_t n = (uint64_t)m->base.count, full = p == 64 ? ~0ull : (1ull << p) - 1;
    for (uint32_t r = 0; r < p; r++) limit[r] = k;
    fail_state *st = calloc(1, sizeof *st);
    uint64_t *holders = calloc(n + 1, sizeof *holders);
    recs rs = {0};
    int rc = st && holders ? fail_run(m, limit, UINT32_MAX, st) : -1;
    for (uint32_t s = 0; s < p && !rc; s++) rc = collect(st, s, &rs);
    for (size_t i = 0; i < rs.n && !rc; i++)
        if (rs.v[i].mask == full) holders[rs.v[i].e] |= 1ull << rs.v[i].s;
    *min_holders = p;
    for (uint64_t e = 0; e < n && !rc; e++) {
        uint32_t h = (uint32_t)__builtin_popcountll(holders[e]);
        if (h < *min_holders) *min_holders = h;
    }
    if (st) fail_state_free(m, st);
    free(st);
    free(holders);
    free(rs.v);
    return rc;
}

int fail_summarize(const fail_model *m, fail_summary *sum, void (*each)(void *ctx, const fail_case *c), void *ctx)
{
    uint32_t p = (uint32_t)m->base.p;
    memset(sum, 0, sizeof *sum);
    sum->rounds = m->maxrounds;
    sum->redundant_from = -1;
    for (uint32_t k = 0; k <= m->maxrounds && p > 1; k++) {
        uint32_t h;
        if (fail_holders_min(m, k, &h)) return -1;
        if (h >= 2) {
            sum->redundant_from = k;
            break;
        }
    }
    int64_t safe = 0;
    double need = 0;
    for (uint32_t f = 0; f < p; f++)
        for (uint32_t k = 0; k < m->prog[f]->nrounds; k++) {
            fail_case c;
            if (fail_case_run(m, f, k, &c, NULL)) return -1;
            sum->cases++;
            if (c.finishable) sum->finishable++, need += (double)c.need_elems;
            else if ((int64_t)k + 1 > safe) safe = k + 1;
            sum->lost_cases += c.lost != 0;
            if (each) each(ctx, &c);
        }
    sum->safe_from = p > 1 ? safe : -1;
    sum->mean_need = sum->finishable ? need / sum->finishable : 0;
    return 0;
}
