/* The vector collectives (alltoallv, alltoallw, gatherv, scatterv, allgatherv, reduce_scatter)
 * with every schedule and automatic selection, run as `mpiexec -n P ./mpi_vectors`. Vectors:
 * every count 0, one non-zero column, random counts 0..3 packed, with gaps between blocks, and
 * blocks in reverse order with one block of 64 KiB or more per rank; int and double; in place
 * and not; every root at p <= 4 (first and last beyond). Results are checked against values
 * computed locally, and the bytes between blocks must stay untouched. Also: alltoallw with a
 * different contiguous type on each side of each pair, reduce_scatter with a non-commutative
 * op (ordered schedules only; the others must refuse it), persistent _init requests whose
 * caller's arrays are overwritten after init and started several times, and the program cache:
 * a call with the same vectors reuses its program, one with other vectors compiles its own.
 * Verdicts are combined once at the end; rank 0 prints ok/FAIL lines. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

enum { ALLTOALLV, ALLTOALLW, GATHERV, SCATTERV, ALLGATHERV, REDUCE_SCATTER, NCOLL };
static const char *const coll_names[NCOLL] = {"alltoallv", "alltoallw", "gatherv", "scatterv", "allgatherv", "reduce_scatter"};
/* the names the library's selection knows them by */
static const char *const sel_names[NCOLL] = {"alltoallv", "alltoallv", "gatherv", "scatterv", "allgatherv", "reduce_scatterv"};

static const struct { int coll; const char *name; int pow2, ordered; } schedules[] = {
    {ALLTOALLV, NULL, 0, 0},     {ALLTOALLV, "alltoallv_pairwise", 0, 0}, {ALLTOALLV, "alltoallv_linear", 0, 0},
    {ALLTOALLW, NULL, 0, 0},     {ALLTOALLW, "alltoallv_pairwise", 0, 0}, {ALLTOALLW, "alltoallv_linear", 0, 0},
    {GATHERV, NULL, 0, 0},       {GATHERV, "gatherv_linear", 0, 0},
    {SCATTERV, NULL, 0, 0},      {SCATTERV, "scatterv_linear", 0, 0},
    {ALLGATHERV, NULL, 0, 0},    {ALLGATHERV, "allgatherv_ring", 0, 0},   {ALLGATHERV, "allgatherv_linear", 0, 0},
    {ALLGATHERV, "allgatherv_recursive_doubling", 1, 0},
    {REDUCE_SCATTER, NULL, 0, 1}, {REDUCE_SCATTER, "reduce_scatterv_ring", 0, 0},
    {REDUCE_SCATTER, "reduce_scatterv_linear", 0, 1},
};
enum { NSCHED = sizeof schedules / sizeof *schedules };

static int rank, size;

/* ---- verdicts, combined once at the end ---- */
enum { MAX_CASES = 4096 };
static char names[MAX_CASES][110];
static char why[MAX_CASES][160];
static int failed[MAX_CASES];
static int ncases;

static int new_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int new_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(names[ncases], sizeof names[0], fmt, ap);
    va_end(ap);
    return ncases < MAX_CASES - 1 ? ncases++ : ncases;
}

static void fail(int c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int c, const char *fmt, ...)
{
    if (failed[c]) return;
    failed[c] = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why[c], sizeof why[0], fmt, ap);
    va_end(ap);
}

/* ---- vectors ---- */
enum { NVCASES = 5, LARGE = 16411 /* ints: 65644 bytes */ };
static const char *const vcase_names[NVCASES] = {"zeros", "one-column", "packed", "gaps", "reversed+large"};

static unsigned mix(unsigned x)
{
    x ^= x >> 16;
    x *= 0x45d9f3bu;
    x ^= x >> 16;
    return x;
}

/* Elements rank i sends to rank j (alltoallv), or row 0 for the one-vector collectives. */
static int mcount(int vc, int i, int j)
{
    switch (vc) {
    case 0: return 0;
    case 1: return j == size / 2 ? 3 : 0;
    case 4: if (i == (j + 1) % size) return LARGE; /* fall through */
    default: return (int)(mix((unsigned)(vc * 7919 + i * 131 + j)) % 4);
    }
}

/* Displacements: packed, with gaps, or in reverse rank order with gaps; returns the extent. */
static int layout(int vc, const int *c, int *d)
{
    int at = 0, end = 0;
    for (int k = 0; k < size; k++) {
        int r = vc == 4 ? size - 1 - k : k;
        if (vc >= 3) at += 1 + r % 2;
        d[r] = at;
        at += c[r];
        if (c[r] && at > end) end = at;
    }
    return at > end ? at : end;
}

/* ---- data ---- */
static int dbl; /* the element type of the current case: double, else int */
static size_t es(void) { return dbl ? sizeof(double) : sizeof(int); }
static MPI_Datatype dt(void) { return dbl ? MPI_DOUBLE : MPI_INT; }
static long value(int r, long i) { return (r * 1009L + i * 7) % 100003; }
static void put(void *b, long i, long v)
{
    if (dbl) ((double *)b)[i] = (double)v;
    else ((int *)b)[i] = (int)v;
}
static long get(const void *b, long i) { return dbl ? (long)((const double *)b)[i] : ((const int *)b)[i]; }
enum { SENTINEL = -77 };

typedef struct {
    int *sc, *sd, *rc, *rd; /* this rank's vectors */
    long slen, rlen;        /* buffer lengths in elements */
} vecs;

static void vecs_free(vecs *v)
{
    free(v->sc), free(v->sd), free(v->rc), free(v->rd);
}

/* The vectors of this rank for collective coll, case vc. */
static vecs make_vecs(int coll, int vc, int inplace)
{
    vecs v = {malloc(sizeof(int) * size), malloc(sizeof(int) * size), malloc(sizeof(int) * size), malloc(sizeof(int) * size), 0, 0};
    int a2a = coll == ALLTOALLV || coll == ALLTOALLW, sym = a2a && inplace;
    for (int j = 0; j < size; j++) {
        int lo = rank < j ? rank : j, hi = rank < j ? j : rank;
        v.sc[j] = a2a ? mcount(vc, sym ? lo : rank, sym ? hi : j) : mcount(vc, 0, j);
        v.rc[j] = a2a ? mcount(vc, sym ? lo : j, sym ? hi : rank) : mcount(vc, 0, j);
    }
    if (coll == REDUCE_SCATTER) vc = 0; /* packed, as MPI lays the input out */
    v.slen = layout(vc, v.sc, v.sd);
    v.rlen = layout(vc, v.rc, v.rd);
    return v;
}

/* ---- the calls ---- */
static MPI_Datatype int2;

/* alltoallw's types: for each pair a different contiguous type on each side (int2 or int). */
static MPI_Datatype wtype(int me, int peer, int send) { return (me + peer + send) % 2 ? int2 : MPI_INT; }

static int start(int coll, int persistent, const void *sb, void *rb, vecs *v, int root, MPI_Op op, nbc_request *r)
{
    MPI_Datatype t = dt();
    int n = v->sc[rank]; /* this rank's own count (gatherv, allgatherv send; scatterv receive) */
    switch (coll) {
    case ALLTOALLV:
        return persistent ? nbc_alltoallv_init(sb, v->sc, v->sd, t, rb, v->rc, v->rd, t, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                          : nbc_ialltoallv(sb, v->sc, v->sd, t, rb, v->rc, v->rd, t, MPI_COMM_WORLD, r);
    case ALLTOALLW: { /* ints only: counts in the chosen type, displacements in bytes */
        int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
            *rd = malloc(sizeof(int) * size);
        MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * size), *rt = malloc(sizeof(MPI_Datatype) * size);
        for (int j = 0; j < size; j++) {
            st[j] = wtype(rank, j, 1), rt[j] = wtype(j, rank, 0); /* rank's receive type from j */
            /* counts are in ints; int2 halves an even count, an odd one stays in ints */
            if (st[j] == int2 && v->sc[j] % 2) st[j] = MPI_INT;
            if (rt[j] == int2 && v->rc[j] % 2) rt[j] = MPI_INT;
            sc[j] = st[j] == int2 ? v->sc[j] / 2 : v->sc[j];
            rc[j] = rt[j] == int2 ? v->rc[j] / 2 : v->rc[j];
            sd[j] = v->sd[j] * (int)sizeof(int), rd[j] = v->rd[j] * (int)sizeof(int);
        }
        int rcode = persistent ? nbc_alltoallw_init(sb, sc, sd, st, rb, rc, rd, rt, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                               : nbc_ialltoallw(sb, sc, sd, st, rb, rc, rd, rt, MPI_COMM_WORLD, r);
        for (int j = 0; j < size; j++) sc[j] = rc[j] = -1, st[j] = rt[j] = MPI_DATATYPE_NULL; /* copied, not kept */
        free(sc), free(sd), free(rc), free(rd), free(st), free(rt);
        return rcode;
    }
    case GATHERV:
        return persistent ? nbc_gatherv_init(sb, n, t, rb, v->rc, v->rd, t, root, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                          : nbc_igatherv(sb, n, t, rb, v->rc, v->rd, t, root, MPI_COMM_WORLD, r);
    case SCATTERV:
        return persistent ? nbc_scatterv_init(sb, v->sc, v->sd, t, rb, n, t, root, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                          : nbc_iscatterv(sb, v->sc, v->sd, t, rb, n, t, root, MPI_COMM_WORLD, r);
    case ALLGATHERV:
        return persistent ? nbc_allgatherv_init(sb, n, t, rb, v->rc, v->rd, t, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                          : nbc_iallgatherv(sb, n, t, rb, v->rc, v->rd, t, MPI_COMM_WORLD, r);
    default:
        return persistent ? nbc_reduce_scatter_init(sb, rb, v->rc, t, op, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                          : nbc_ireduce_scatter(sb, rb, v->rc, t, op, MPI_COMM_WORLD, r);
    }
}

/* What element i of the receive buffer must hold afterwards, given `was` before the call. */
static long expected(int coll, const vecs *v, int vc, int inplace, int root, long i, long was, int salt)
{
    if (coll == REDUCE_SCATTER) {
        if (i >= v->rc[rank]) return was;
        long acc = 0;
        for (int q = 0; q < size; q++) acc += value(q + salt, v->rd[rank] + i);
        return acc;
    }
    if (coll == SCATTERV) { /* the root's block for this rank, at its displacement there */
        int *d = malloc(sizeof(int) * size), *c = malloc(sizeof(int) * size);
        for (int j = 0; j < size; j++) c[j] = mcount(vc, 0, j);
        layout(vc, c, d);
        long want = value(root + salt, d[rank] + i);
        free(d), free(c);
        return want;
    }
    if (coll == GATHERV && rank != root) return was;
    for (int j = 0; j < size; j++) {
        if (!v->rc[j] || i < v->rd[j] || i >= v->rd[j] + v->rc[j]) continue;
        long off = i - v->rd[j];
        if (coll == ALLTOALLV || coll == ALLTOALLW) { /* rank j's block for this rank lies at j's sdispls[rank] */
            int *c = malloc(sizeof(int) * size), *d = malloc(sizeof(int) * size);
            for (int k = 0; k < size; k++) {
                int lo = j < k ? j : k, hi = j < k ? k : j;
                c[k] = inplace ? mcount(vc, lo, hi) : mcount(vc, j, k);
            }
            layout(vc, c, d);
            off += d[rank];
            free(c), free(d);
        }
        return value(j + salt, off);
    }
    return was; /* a gap: untouched */
}

/* One call (or a persistent request started `starts` times), checked. */
static void run(int s, int vc, int inplace, int root, int persistent)
{
    int coll = schedules[s].coll;
    if (coll == ALLTOALLW && dbl) return;
    if (inplace && coll == ALLTOALLW) return; /* covered by alltoallv's */
    const char *sname = schedules[s].name ? schedules[s].name : "auto";
    int c = new_case("%s p=%d %s %s %s%s%s root=%d", coll_names[coll], size, sname, vcase_names[vc], dbl ? "double" : "int",
                     inplace ? " inplace" : "", persistent ? " persistent x3" : "", root);
    vecs v = make_vecs(coll, vc, inplace);
    int rooted = coll == GATHERV || coll == SCATTERV;
    int me_root = rank == root;
    /* lengths: send side and receive side, in elements */
    long slen = coll == GATHERV || coll == ALLGATHERV ? v.sc[rank] : coll == REDUCE_SCATTER ? v.slen : v.slen;
    long rlen = coll == SCATTERV ? v.sc[rank] : coll == REDUCE_SCATTER ? (inplace ? v.slen : v.rc[rank]) : v.rlen;
    if (coll == SCATTERV && !me_root) slen = 0;
    if (coll == GATHERV && !me_root) rlen = 0;
    char *in = malloc(es() * (size_t)(slen + 1)), *out = malloc(es() * (size_t)(rlen + 1)), *was = malloc(es() * (size_t)(rlen + 1));
    int use_inplace = inplace && (!rooted || me_root);
    int starts = persistent ? 3 : 1;
    nbc_request r = NBC_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    vecs keep = v; /* persistent: the caller's arrays are overwritten after init */
    for (int k = 0; k < starts && !failed[c]; k++) {
        int salt = k * 11;
        for (long i = 0; i < slen; i++) put(in, i, coll == SCATTERV ? value(rank + salt, i) : value(rank + salt, i));
        for (long i = 0; i < rlen; i++) put(out, i, SENTINEL - (long)(i % 5));
        if (use_inplace) { /* the input where MPI puts it in place */
            if (coll == ALLTOALLV || coll == REDUCE_SCATTER) memcpy(out, in, es() * (size_t)(slen < rlen ? slen : rlen));
            if (coll == ALLTOALLV)
                for (long i = 0; i < rlen; i++) put(out, i, value(rank + salt, i));
            if (coll == GATHERV || coll == ALLGATHERV)
                for (long i = 0; i < keep.rc[rank]; i++) put(out, keep.rd[rank] + i, value(rank + salt, i));
        }
        memcpy(was, out, es() * (size_t)rlen);
        const void *sb = use_inplace && coll != SCATTERV ? MPI_IN_PLACE : in;
        void *rb = use_inplace && coll == SCATTERV ? MPI_IN_PLACE : out;
        if (k == 0) {
            rc = start(coll, persistent, sb, rb, &v, root, MPI_SUM, &r);
            if (persistent && rc == MPI_SUCCESS) { /* the request must not read these again */
                vecs junk = make_vecs(coll, vc, inplace);
                for (int j = 0; j < size; j++) v.sc[j] = v.rc[j] = 1 << 20, v.sd[j] = v.rd[j] = -5;
                keep = junk;
            }
        }
        if (schedules[s].pow2 && (size & (size - 1))) {
            if (rc != MPI_ERR_ARG) fail(c, "expected MPI_ERR_ARG (p is not a power of two), got %d", rc);
            if (rc == MPI_SUCCESS) nbc_wait(&r);
            break;
        }
        if (rc == MPI_SUCCESS && persistent) rc = nbc_start(&r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
        if (rc != MPI_SUCCESS) {
            fail(c, "error %d: %.100s", rc, nbc_error_message());
            break;
        }
        for (long i = 0; i < rlen && !failed[c]; i++) {
            if (coll == SCATTERV && use_inplace) break;
            long want = expected(coll, &keep, vc, inplace, root, i, get(was, i), salt);
            if (get(out, i) != want) fail(c, "start %d: element %ld is %ld, expected %ld", k, i, get(out, i), want);
        }
        if (!use_inplace)
            for (long i = 0; i < slen && !failed[c]; i++)
                if (get(in, i) != value(rank + salt, i)) fail(c, "sendbuf element %ld was changed", i);
    }
    if (persistent && r != NBC_REQUEST_NULL) nbc_request_free(&r);
    if (keep.sc != v.sc) vecs_free(&keep);
    vecs_free(&v);
    free(in), free(out), free(was);
}

/* ---- reduce_scatter with a non-commutative op: affine maps x -> a·x + b (mod 1009) composed
 * in rank order; an element is a pair of ints ---- */
static void compose(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    int *u = in, *w = inout;
    for (int k = 0; k < *len; k++, u += 2, w += 2) { /* inout = in ∘ inout: u applied after w */
        int a = u[0] * w[0] % 1009, b = (u[0] * w[1] + u[1]) % 1009;
        w[0] = a, w[1] = b;
    }
}

static void map_of(int r, long i, int m[2])
{
    m[0] = (int)(2 + (r * 5 + i) % 7);
    m[1] = (int)((r * 3 + i * 11) % 1009);
}

static void noncommutative(MPI_Op op)
{
    for (int s = 0; s < NSCHED; s++) {
        if (schedules[s].coll != REDUCE_SCATTER) continue;
        nbc_set_schedule("reduce_scatterv", schedules[s].name);
        for (int vc = 2; vc < NVCASES; vc++) {
            int c = new_case("reduce_scatter p=%d %s %s non-commutative affine maps", size,
                             schedules[s].name ? schedules[s].name : "auto", vcase_names[vc]);
            vecs v = make_vecs(REDUCE_SCATTER, vc, 0);
            int *in = malloc(sizeof(int) * 2 * (size_t)(v.slen + 1)), *out = malloc(sizeof(int) * 2 * (size_t)(v.rc[rank] + 1));
            for (long i = 0; i < v.slen; i++) map_of(rank, i, in + 2 * i);
            nbc_request r;
            int rc = nbc_ireduce_scatter(in, out, v.rc, int2, op, MPI_COMM_WORLD, &r);
            if (!schedules[s].ordered) {
                if (rc != MPI_ERR_ARG) fail(c, "expected MPI_ERR_ARG for a schedule that does not keep order, got %d", rc);
                if (rc == MPI_SUCCESS) nbc_wait(&r);
            } else if (rc != MPI_SUCCESS || (rc = nbc_wait(&r)) != MPI_SUCCESS) {
                fail(c, "error %d: %.100s", rc, nbc_error_message());
            } else {
                for (long i = 0; i < v.rc[rank] && !failed[c]; i++) {
                    int want[2] = {1, 0}, m[2];
                    for (int q = size - 1; q >= 0; q--) { /* x0 ∘ (x1 ∘ (.. ∘ x(p-1))) */
                        map_of(q, v.rd[rank] + i, m);
                        int a = m[0] * want[0] % 1009, b = (m[0] * want[1] + m[1]) % 1009;
                        want[0] = a, want[1] = b;
                    }
                    if (memcmp(want, out + 2 * i, sizeof want))
                        fail(c, "element %ld is (%d, %d), expected (%d, %d)", i, out[2 * i], out[2 * i + 1], want[0], want[1]);
                }
            }
            free(in), free(out);
            vecs_free(&v);
        }
    }
    nbc_set_schedule("reduce_scatterv", NULL);
}

/* ---- alltoallv with types of equal signature but unlike: pairs of ints sent, ints received ---- */
static void mixed_types(void)
{
    for (int forced = 0; forced < 3; forced++) {
        const char *name = forced == 0 ? NULL : forced == 1 ? "alltoallv_pairwise" : "alltoallv_linear";
        nbc_set_schedule("alltoallv", name);
        int c = new_case("alltoallv p=%d %s sendtype 2 ints, recvtype int (counts doubled)", size, name ? name : "auto");
        int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
            *rd = malloc(sizeof(int) * size), *row = malloc(sizeof(int) * size), *rowd = malloc(sizeof(int) * size);
        for (int j = 0; j < size; j++) sc[j] = mcount(3, rank, j), rc[j] = 2 * mcount(3, j, rank);
        int slen = 2 * layout(3, sc, sd), rlen = layout(3, rc, rd);
        int *in = malloc(sizeof(int) * (size_t)(slen + 1)), *out = malloc(sizeof(int) * (size_t)(rlen + 1));
        for (int i = 0; i < slen; i++) in[i] = (int)value(rank, i);
        for (int i = 0; i < rlen; i++) out[i] = SENTINEL;
        nbc_request r;
        int code = nbc_ialltoallv(in, sc, sd, int2, out, rc, rd, MPI_INT, MPI_COMM_WORLD, &r);
        if (code == MPI_SUCCESS) code = nbc_wait(&r);
        if (code != MPI_SUCCESS) fail(c, "error %d: %.100s", code, nbc_error_message());
        for (int j = 0; j < size && !failed[c]; j++) {
            for (int k = 0; k < size; k++) row[k] = mcount(3, j, k); /* rank j's send side, in pairs */
            layout(3, row, rowd);
            for (int t = 0; t < rc[j]; t++)
                if (out[rd[j] + t] != value(j, 2L * rowd[rank] + t))
                    fail(c, "element %d of rank %d's block is %d, expected %ld", t, j, out[rd[j] + t], value(j, 2L * rowd[rank] + t));
        }
        free(sc), free(sd), free(rc), free(rd), free(row), free(rowd), free(in), free(out);
    }
    nbc_set_schedule("alltoallv", NULL);
}

/* ---- the program cache: same vectors reuse the program, other vectors do not ---- */
static void cache_reuse(void)
{
    nbc_set_schedule("alltoallv", "alltoallv_linear");
    dbl = 0;
    vecs a = make_vecs(ALLTOALLV, 2, 0), b = make_vecs(ALLTOALLV, 3, 0);
    for (int j = 0; j < size; j++) b.sc[j] += 5, b.rc[j] += 5; /* vectors no earlier call had */
    b.slen = layout(3, b.sc, b.sd);
    b.rlen = layout(3, b.rc, b.rd);
    char *in = malloc(4 * (size_t)(a.slen + b.slen + 1)), *out = malloc(4 * (size_t)(a.rlen + b.rlen + 1));
    nbc_cache_stats s0, s1, s2, s3;
    nbc_request r;
    int c = new_case("alltoallv p=%d same vectors reuse the program, other vectors compile their own", size);
    nbc_ialltoallv(in, a.sc, a.sd, MPI_INT, out, a.rc, a.rd, MPI_INT, MPI_COMM_WORLD, &r);
    nbc_wait(&r);
    nbc_get_cache_stats(&s0);
    int *copy = malloc(sizeof(int) * size); /* equal vectors in another array */
    memcpy(copy, a.sc, sizeof(int) * size);
    nbc_ialltoallv(in, copy, a.sd, MPI_INT, out, a.rc, a.rd, MPI_INT, MPI_COMM_WORLD, &r);
    nbc_wait(&r);
    nbc_get_cache_stats(&s1);
    int rc = nbc_ialltoallv(in, b.sc, b.sd, MPI_INT, out, b.rc, b.rd, MPI_INT, MPI_COMM_WORLD, &r);
    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
    nbc_wait(&r);
    nbc_get_cache_stats(&s2);
    /* the same counts with other displacements: another program too */
    for (int j = 0; j < size; j++) b.rd[j] += 1;
    char *o2 = realloc(out, 4 * (size_t)(b.rlen + 2));
    if (o2) out = o2;
    nbc_ialltoallv(in, b.sc, b.sd, MPI_INT, out, b.rc, b.rd, MPI_INT, MPI_COMM_WORLD, &r);
    nbc_wait(&r);
    nbc_get_cache_stats(&s3);
    if (s1.misses != s0.misses || s1.hits != s0.hits + 1)
        fail(c, "the same vectors again: %llu misses, %llu hits more (expected 0 and 1)",
             (unsigned long long)(s1.misses - s0.misses), (unsigned long long)(s1.hits - s0.hits));
    else if (s2.misses != s1.misses + 1)
        fail(c, "other counts: %llu misses more (expected 1)", (unsigned long long)(s2.misses - s1.misses));
    else if (s3.misses != s2.misses + 1)
        fail(c, "other displacements: %llu misses more (expected 1)", (unsigned long long)(s3.misses - s2.misses));
    free(copy), free(in), free(out);
    vecs_free(&a), vecs_free(&b);
    nbc_set_schedule("alltoallv", NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Type_contiguous(2, MPI_INT, &int2);
    MPI_Type_commit(&int2);
    MPI_Op op;
    MPI_Op_create(compose, 0, &op);
    for (int s = 0; s < NSCHED; s++) {
        int coll = schedules[s].coll;
        if (nbc_set_schedule(sel_names[coll], schedules[s].name) != MPI_SUCCESS) {
            int c = new_case("%s p=%d %s exists", coll_names[coll], size, schedules[s].name);
            fail(c, "nbc_set_schedule: %s", nbc_error_message());
            continue;
        }
        int rooted = coll == GATHERV || coll == SCATTERV;
        for (int vc = 0; vc < NVCASES; vc++)
            for (dbl = 0; dbl < 2; dbl++)
                for (int inplace = 0; inplace < 2; inplace++)
                    for (int root = 0; root < (rooted ? size : 1); root++) {
                        if (rooted && size > 4 && root != 0 && root != size - 1) continue;
                        if (dbl && inplace && vc < 3) continue; /* in place is covered by int */
                        run(s, vc, inplace, root, 0);
                    }
        dbl = 0;
        for (int vc = 2; vc < 4; vc++) run(s, vc, 0, rooted ? size - 1 : 0, 1); /* persistent, several starts */
        if (coll != ALLTOALLW) run(s, 3, 1, 0, 1);
        nbc_set_schedule(sel_names[coll], NULL);
    }
    noncommutative(op);
    mixed_types();
    cache_reuse();
    nbc_finalize();

    int *any = malloc(sizeof(int) * MAX_CASES);
    MPI_Reduce(failed, any, ncases, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0)
        for (int c = 0; c < ncases; c++) {
            if (any[c]) printf("FAIL %s: %s\n", names[c], failed[c] ? why[c] : "on another rank");
            else printf("ok %s\n", names[c]);
            status |= any[c];
        }
    free(any);
    MPI_Op_free(&op);
    MPI_Type_free(&int2);
    MPI_Finalize();
    return status;
}
