/* Every collective with every schedule (and automatic selection), run as
 * `mpiexec -n P ./mpi_collectives`: counts 0, 1, p-1, p, p+1 and a large odd count; sum on
 * int64 and double, max on int; in place and not; roots 0 and p-1. Alltoall, gather and
 * scatter move ints, doubles, and ints sent as MPI_INT and received as pairs of ints (a
 * contiguous type) or the other way round, with blocks of 0, 1, p-1, 7 and over 64 KiB elements,
 * every root at p <= 9 (roots 0, p/2 and p-1 otherwise); scan and exscan also with a
 * non-commutative op; each one's persistent form runs several starts on new data. These run at
 * p <= 9 and p = 17 only. Results are checked against
 * values computed locally. A forced schedule whose stated preconditions fail must refuse the
 * call with MPI_ERR_ARG. Order-preserving schedules must give the left-to-right product of a
 * non-commutative op and bit-identical doubles on every rank; the others must refuse the
 * non-commutative op. Verdicts are combined once at the end; rank 0 prints ok/FAIL lines. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

enum { ALLREDUCE, REDUCE, BCAST, BARRIER, REDUCE_SCATTER, ALLGATHER, NCOLL };
static const char *const coll_names[NCOLL] = {"allreduce", "reduce", "bcast", "barrier", "reduce_scatter", "allgather"};

/* Each schedule with the preconditions it states (checked here independently of the library). */
enum { ANY = 0, COMM = 1, COUNT_GE_P = 2, COUNT_GE_POF2 = 4, POW2 = 8, ORDERED = 16 };
static const struct { int coll; const char *name; int needs; } schedules[] = {
    {ALLREDUCE, NULL, ORDERED}, /* automatic: must always work, and keep order for a non-commutative op */
    {ALLREDUCE, "allreduce_linear", ORDERED},
    {ALLREDUCE, "allreduce_binomial", ORDERED},
    {ALLREDUCE, "allreduce_nonoverlapping", ORDERED},
    {ALLREDUCE, "allreduce_recursive_doubling", ORDERED},
    {ALLREDUCE, "allreduce_ring", COMM | COUNT_GE_P},
    {ALLREDUCE, "allreduce_segmented_ring", COMM | COUNT_GE_P},
    {ALLREDUCE, "allreduce_rabenseifner", COMM | COUNT_GE_POF2},
    {ALLREDUCE, "allreduce_rabenseifner:segsize=64", COMM | COUNT_GE_POF2}, /* pipelined halving */
    {ALLREDUCE, "allreduce_segmented_ring:segsize=64", COMM | COUNT_GE_P},
    {ALLREDUCE, "allreduce_binary_blocks", COMM | COUNT_GE_POF2},
    {ALLREDUCE, "allreduce_gloo_ring", COMM},
    {ALLREDUCE, "allreduce_gloo_ring_chunked", COMM},
    {ALLREDUCE, "allreduce_nodes", COMM}, /* node-aware: the library compiles them for one node or one a rank */
    {ALLREDUCE, "allreduce_nodes_small", COMM},
    {REDUCE, NULL, ORDERED},
    {REDUCE, "reduce_binomial", ORDERED},
    {REDUCE, "reduce_linear", ORDERED},
    {REDUCE, "reduce_nodes", COMM},
    {BCAST, NULL, ANY},
    {BCAST, "bcast_binomial", ANY},
    {BCAST, "bcast_linear", ANY},
    {BCAST, "bcast_nodes", ANY},
    {BARRIER, NULL, ANY},
    {BARRIER, "barrier_all_to_all", ANY},
    {BARRIER, "barrier_all_to_one", ANY},
    {BARRIER, "barrier_dissemination", ANY},
    {BARRIER, "barrier_nodes", ANY},
    {REDUCE_SCATTER, NULL, ORDERED}, /* automatic: the ordered linear one for a non-commutative op */
    {REDUCE_SCATTER, "reduce_scatter_halving", COMM | POW2},
    {REDUCE_SCATTER, "reduce_scatter_pairwise", COMM},
    {REDUCE_SCATTER, "reduce_scatter_linear", ORDERED},
    {ALLGATHER, NULL, ANY},
    {ALLGATHER, "allgather_ring", ANY},
    {ALLGATHER, "allgather_recursive_doubling", POW2},
};
enum { NSCHED = sizeof schedules / sizeof *schedules };

static int rank, size;

/* ---- verdicts, combined once at the end ---- */
enum { MAX_CASES = 8192 };
static char names[MAX_CASES][96];
static char why[MAX_CASES][160];
static int failed[MAX_CASES];
static uint64_t digest[MAX_CASES]; /* result fingerprints that must agree across ranks */
static int ncases;

static int new_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int new_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(names[ncases], sizeof names[0], fmt, ap);
    va_end(ap);
    return ncases++;
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

/* ---- data ---- */
enum { T_I64, T_DOUBLE, T_INT, NTYPES };
static const char *const type_names[NTYPES] = {"int64 sum", "double sum", "int max"};

static int64_t value(int r, long i, int t)
{
    return t == T_INT ? (r * 13 + i * 7) % 101 : (r * 7 + i * 3) % 11 - 5;
}

static void put(void *buf, long i, int t, int64_t v)
{
    if (t == T_I64) ((int64_t *)buf)[i] = v;
    else if (t == T_DOUBLE) ((double *)buf)[i] = (double)v;
    else ((int *)buf)[i] = (int)v;
}

static int64_t get(const void *buf, long i, int t)
{
    return t == T_I64 ? ((const int64_t *)buf)[i] : t == T_DOUBLE ? (int64_t)((const double *)buf)[i] : ((const int *)buf)[i];
}

static int64_t combine(int64_t a, int64_t b, int t) { return t == T_INT ? (a > b ? a : b) : a + b; }

static int64_t reduced(long i, int t)
{
    int64_t acc = value(0, i, t);
    for (int r = 1; r < size; r++) acc = combine(acc, value(r, i, t), t);
    return acc;
}

static int pof2(int p)
{
    int q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}

static int eligible(int needs, int count, int commutative)
{
    if ((needs & COMM) && !commutative && !(needs & ORDERED)) return 0;
    if (!(needs & ORDERED) && !commutative) return 0;
    if ((needs & COUNT_GE_P) && count < size) return 0;
    if ((needs & COUNT_GE_POF2) && count < pof2(size)) return 0;
    if ((needs & POW2) && (size & (size - 1))) return 0;
    return 1;
}

static int start(int coll, const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, nbc_request *r)
{
    switch (coll) {
    case ALLREDUCE: return nbc_iallreduce(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, r);
    case REDUCE: return nbc_ireduce(sbuf, rbuf, count, dt, op, root, MPI_COMM_WORLD, r);
    case BCAST: return nbc_ibcast(rbuf, count, dt, root, MPI_COMM_WORLD, r);
    case BARRIER: return nbc_ibarrier(MPI_COMM_WORLD, r);
    case REDUCE_SCATTER: return nbc_ireduce_scatter_block(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, r);
    default: return nbc_iallgather(sbuf, count, dt, rbuf, count, dt, MPI_COMM_WORLD, r);
    }
}

/* One call, checked. */
static void run(int s, int t, int count, int inplace, int root)
{
    int coll = schedules[s].coll;
    const char *sname = schedules[s].name ? schedules[s].name : "auto";
    if (inplace && (coll == BCAST || coll == BARRIER)) return;
    int c = new_case("%s p=%d %s %s count=%d%s%s", coll_names[coll], size, sname, coll == BARRIER ? "" : type_names[t], count,
                     inplace ? " inplace" : "", coll == REDUCE || coll == BCAST ? (root ? " root=last" : " root=0") : "");
    MPI_Datatype dt = t == T_I64 ? MPI_INT64_T : t == T_DOUBLE ? MPI_DOUBLE : MPI_INT;
    MPI_Op op = t == T_INT ? MPI_MAX : MPI_SUM;
    size_t es = t == T_INT ? sizeof(int) : 8;
    long in_len = coll == REDUCE_SCATTER ? (long)size * count : count;
    long out_len = coll == REDUCE_SCATTER && !inplace ? count : coll == REDUCE_SCATTER || coll == ALLGATHER ? (long)size * count : count;
    char *in = malloc(es * (size_t)(in_len + 1)), *out = malloc(es * (size_t)(out_len + 1));
    for (long i = 0; i < in_len; i++) put(in, i, t, value(rank, i, t));
    for (long i = 0; i < out_len; i++) put(out, i, t, -77);
    if (inplace) {
        if (coll == ALLGATHER) memcpy(out + es * (size_t)rank * count, in, es * (size_t)count);
        else if (coll == REDUCE && rank != root) inplace = 0; /* MPI_IN_PLACE is the root's only */
        else memcpy(out, in, es * (size_t)in_len);
    }
    if (coll == BCAST && rank == root) memcpy(out, in, es * (size_t)count);

    nbc_request r;
    int rc = start(coll, inplace ? MPI_IN_PLACE : in, out, count, dt, op, root, &r);
    if (schedules[s].name && !eligible(schedules[s].needs, count, 1)) {
        if (rc != MPI_ERR_ARG) fail(c, "expected MPI_ERR_ARG (preconditions fail), got %d", rc);
        if (rc == MPI_SUCCESS) nbc_wait(&r);
        goto done;
    }
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    if (rc != MPI_SUCCESS) {
        fail(c, "error %d: %.100s", rc, nbc_error_message());
        goto done;
    }
    for (long i = 0; i < out_len && !failed[c]; i++) {
        int64_t want;
        if (coll == ALLREDUCE) want = reduced(i, t);
        else if (coll == REDUCE) want = rank == root ? reduced(i, t) : -77;
        else if (coll == BCAST) want = value(root, i, t);
        else if (coll == REDUCE_SCATTER) want = i < count ? reduced((long)rank * count + i, t) : get(out, i, t);
        else want = value((int)(i / count), i % count, t);
        if (get(out, i, t) != want) fail(c, "element %ld is %lld, expected %lld", i, (long long)get(out, i, t), (long long)want);
    }
    if (!inplace)
        for (long i = 0; i < in_len && !failed[c]; i++)
            if (get(in, i, t) != value(rank, i, t)) fail(c, "sendbuf element %ld was changed", i);
done:
    free(in);
    free(out);
}

/* ---- a non-commutative op: 2x2 integer matrix product ---- */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int m[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, m, sizeof m);
    }
}

static void matrix_of(int r, long i, int m[4])
{
    int x = (int)((r + i) % 3) - 1; /* small entries keep products small */
    if ((r + i) % 2) m[0] = 1, m[1] = x, m[2] = 0, m[3] = 1;
    else m[0] = 1, m[1] = 0, m[2] = x, m[3] = 1;
}

static void noncommutative(MPI_Datatype mat, MPI_Op op)
{
    enum { COUNT = 5 };
    for (int s = 0; s < NSCHED; s++) {
        int coll = schedules[s].coll;
        if (coll != ALLREDUCE && coll != REDUCE && coll != REDUCE_SCATTER) continue;
        if (schedules[s].name && nbc_set_schedule(coll_names[coll], schedules[s].name) != MPI_SUCCESS) continue;
        if (!schedules[s].name) nbc_set_schedule(coll_names[coll], NULL);
        int c = new_case("%s p=%d %s non-commutative matrix product", coll_names[coll], size,
                         schedules[s].name ? schedules[s].name : "auto");
        int n = coll == REDUCE_SCATTER ? COUNT * size : COUNT;
        int *in = malloc(sizeof(int) * 4 * (size_t)n), *out = calloc(4 * (size_t)n, sizeof(int));
        for (int i = 0; i < n; i++) matrix_of(rank, i, in + 4 * i);
        nbc_request r;
        int rc = start(coll, in, out, COUNT, mat, op, 0, &r);
        int ordered = (schedules[s].needs & ORDERED) != 0;
        if (!ordered) {
            if (rc != MPI_ERR_ARG) fail(c, "expected MPI_ERR_ARG for a schedule that does not keep order, got %d", rc);
            if (rc == MPI_SUCCESS) nbc_wait(&r);
        } else if (rc != MPI_SUCCESS || (rc = nbc_wait(&r)) != MPI_SUCCESS) {
            fail(c, "error %d: %.100s", rc, nbc_error_message());
        } else if (coll != REDUCE || rank == 0) {
            for (int i = 0; i < COUNT && !failed[c]; i++) {
                int want[4] = {1, 0, 0, 1}, m[4];
                int at = coll == REDUCE_SCATTER ? rank * COUNT + i : i; /* (this rank's block) */
                for (int q = 0; q < size; q++) { /* want = want · M_q, left to right */
                    matrix_of(q, at, m);
                    int w[4] = {want[0] * m[0] + want[1] * m[2], want[0] * m[1] + want[1] * m[3],
                                want[2] * m[0] + want[3] * m[2], want[2] * m[1] + want[3] * m[3]};
                    memcpy(want, w, sizeof w);
                }
                if (memcmp(want, out + 4 * i, sizeof want)) fail(c, "matrix %d differs from the ordered product", i);
            }
        }
        free(in);
        free(out);
    }
}

/* nbc_iallreduce_multi: every buffer of every rank ends with the sum over all of them. */
static void multi(MPI_Datatype mat, MPI_Op matop)
{
    static const char *const names[] = {NULL, "allreduce_multi_gloo_ring_chunked", "allreduce_multi_local"};
    const int counts[] = {0, 1, size - 1, size + 1, 10007};
    for (int s = 0; s < 3; s++) {
        nbc_set_schedule("allreduce_multi", names[s]);
        for (int nbufs = 1; nbufs <= 3; nbufs++)
            for (int k = 0; k < 5; k++)
                for (int t = 0; t < NTYPES; t++) {
                    int count = counts[k];
                    int c = new_case("allreduce_multi p=%d %s nbufs=%d %s count=%d", size, names[s] ? names[s] : "auto",
                                     nbufs, type_names[t], count);
                    MPI_Datatype dt = t == T_I64 ? MPI_INT64_T : t == T_DOUBLE ? MPI_DOUBLE : MPI_INT;
                    size_t es = t == T_INT ? sizeof(int) : 8;
                    void *bufs[3];
                    for (int b = 0; b < nbufs; b++) {
                        bufs[b] = malloc(es * (size_t)(count + 1));
                        for (long i = 0; i < count; i++) put(bufs[b], i, t, value(rank * 3 + b, i, t));
                    }
                    nbc_request r;
                    int rc = nbc_iallreduce_multi(bufs, nbufs, count, dt, t == T_INT ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD, &r);
                    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
                    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
                    for (int b = 0; b < nbufs && !failed[c]; b++)
                        for (long i = 0; i < count && !failed[c]; i++) {
                            int64_t want = value(0, i, t);
                            for (int q = 0; q < size; q++)
                                for (int j = 0; j < nbufs; j++)
                                    if (q || j) want = combine(want, value(q * 3 + j, i, t), t);
                            if (get(bufs[b], i, t) != want)
                                fail(c, "buffer %d element %ld is %lld, expected %lld", b, i, (long long)get(bufs[b], i, t), (long long)want);
                        }
                    for (int b = 0; b < nbufs; b++) free(bufs[b]);
                }
    }
    /* the ordered schedule with a non-commutative op: process-major, then buffer order */
    nbc_set_schedule("allreduce_multi", "allreduce_multi_local");
    int c = new_case("allreduce_multi p=%d allreduce_multi_local non-commutative matrix product, 2 buffers", size);
    int m0[4 * 3], m1[4 * 3];
    for (int i = 0; i < 3; i++) matrix_of(2 * rank, i, m0 + 4 * i), matrix_of(2 * rank + 1, i, m1 + 4 * i);
    void *bufs[2] = {m0, m1};
    nbc_request r;
    int rc = nbc_iallreduce_multi(bufs, 2, 3, mat, matop, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
    for (int i = 0; i < 3 && !failed[c]; i++) {
        int want[4] = {1, 0, 0, 1}, m[4];
        for (int q = 0; q < 2 * size; q++) {
            matrix_of(q, i, m);
            int w[4] = {want[0] * m[0] + want[1] * m[2], want[0] * m[1] + want[1] * m[3],
                        want[2] * m[0] + want[3] * m[2], want[2] * m[1] + want[3] * m[3]};
            memcpy(want, w, sizeof w);
        }
        if (memcmp(want, m0 + 4 * i, sizeof want) || memcmp(want, m1 + 4 * i, sizeof want))
            fail(c, "matrix %d differs from the ordered product", i);
    }
    nbc_set_schedule("allreduce_multi", "allreduce_multi_gloo_ring_chunked");
    c = new_case("allreduce_multi p=%d allreduce_multi_gloo_ring_chunked refuses a non-commutative op", size);
    rc = nbc_iallreduce_multi(bufs, 2, 3, mat, matop, MPI_COMM_WORLD, &r);
    if (rc != MPI_ERR_ARG) fail(c, "expected MPI_ERR_ARG, got %d", rc);
    if (rc == MPI_SUCCESS) nbc_wait(&r);
    nbc_set_schedule("allreduce_multi", NULL);
}

/* Ordered allreduce schedules give bit-identical doubles everywhere, whatever the rounding. */
static void bit_identical(void)
{
    enum { COUNT = 1001 };
    for (int s = 0; s < NSCHED; s++) {
        if (schedules[s].coll != ALLREDUCE || !(schedules[s].needs & ORDERED)) continue;
        nbc_set_schedule("allreduce", schedules[s].name);
        int c = new_case("allreduce p=%d %s doubles bit-identical on every rank", size, schedules[s].name ? schedules[s].name : "auto");
        double in[COUNT], out[COUNT];
        for (int i = 0; i < COUNT; i++) in[i] = sin(rank * 1000.0 + i) * pow(10.0, (rank + i) % 7 - 3);
        nbc_request r;
        int rc = nbc_iallreduce(in, out, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
        if (rc != MPI_SUCCESS) fail(c, "error %d", rc);
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < COUNT; i++) {
            uint64_t bits;
            memcpy(&bits, &out[i], 8);
            h = (h ^ bits) * 1099511628211ull;
        }
        digest[c] = h;
    }
    nbc_set_schedule("allreduce", NULL);
}

/* ---- alltoall, gather, scatter (on bytes) and scan, exscan ---- */
enum { F_ALLTOALL, F_GATHER, F_SCATTER, F_SCAN, F_EXSCAN, NFIXED };
static const char *const fixed_names[NFIXED] = {"alltoall", "gather", "scatter", "scan", "exscan"};
static const struct { int coll; const char *name; } fixed_schedules[] = {
    {F_ALLTOALL, NULL}, {F_ALLTOALL, "alltoall_pairwise"}, {F_ALLTOALL, "alltoall_linear"}, {F_ALLTOALL, "alltoall_bruck"},
    {F_GATHER, NULL},   {F_GATHER, "gather_binomial"},     {F_GATHER, "gather_linear"},
    {F_SCATTER, NULL},  {F_SCATTER, "scatter_binomial"},   {F_SCATTER, "scatter_linear"},
    {F_SCAN, NULL},     {F_SCAN, "scan_recursive_doubling"}, {F_SCAN, "scan_linear"},
    {F_EXSCAN, NULL},   {F_EXSCAN, "exscan_recursive_doubling"}, {F_EXSCAN, "exscan_linear"},
};
enum { NFIXED_SCHED = sizeof fixed_schedules / sizeof *fixed_schedules };

/* Element i of the block that rank r sends to rank j (gather: j = 0), changed by `start`. */
static int64_t moved(int r, int j, long i, int start) { return (int64_t)r * 1000003 + j * 1009 + i + start * 7; }

/* Data-movement modes: ints, doubles, or ints sent as 2·count MPI_INTs and received as count
 * pairs (a contiguous type of 2 ints), the other way round on odd ranks. */
enum { M_INT, M_DOUBLE, M_PAIRS, NMODES };
static const char *const mode_names[NMODES] = {"int", "double", "int vs int pairs"};

/* Starts one alltoall, gather or scatter; count is in ints or doubles. */
static int start_move(int coll, int mode, MPI_Datatype pair, const void *sbuf, void *rbuf, int count, int root,
                      nbc_request *r, int persistent)
{
    MPI_Datatype st = mode == M_DOUBLE ? MPI_DOUBLE : MPI_INT, rt = st;
    int sc = count, rcount = count;
    if (mode == M_PAIRS) {
        if (rank % 2) st = pair, sc = count / 2;
        else rt = pair, rcount = count / 2;
    }
    if (persistent) {
        if (coll == F_ALLTOALL) return nbc_alltoall_init(sbuf, sc, st, rbuf, rcount, rt, MPI_COMM_WORLD, MPI_INFO_NULL, r);
        if (coll == F_GATHER) return nbc_gather_init(sbuf, sc, st, rbuf, rcount, rt, root, MPI_COMM_WORLD, MPI_INFO_NULL, r);
        return nbc_scatter_init(sbuf, sc, st, rbuf, rcount, rt, root, MPI_COMM_WORLD, MPI_INFO_NULL, r);
    }
    if (coll == F_ALLTOALL) return nbc_ialltoall(sbuf, sc, st, rbuf, rcount, rt, MPI_COMM_WORLD, r);
    if (coll == F_GATHER) return nbc_igather(sbuf, sc, st, rbuf, rcount, rt, root, MPI_COMM_WORLD, r);
    return nbc_iscatter(sbuf, sc, st, rbuf, rcount, rt, root, MPI_COMM_WORLD, r);
}

/* Buffers of one data-movement call: lengths in elements, filled for start `k`. */
typedef struct {
    long in_len, out_len;
    char *in, *out;
} move_bufs;

static void fill_move(int coll, int t, int count, int inplace, int root, int k, move_bufs *b)
{
    int p = size;
    for (long i = 0; i < b->in_len; i++) put(b->in, i, t, coll == F_GATHER ? moved(rank, 0, i, k) : moved(rank, (int)(i / count), i % count, k));
    for (long i = 0; i < b->out_len; i++) put(b->out, i, t, -77);
    size_t es = t == T_INT ? sizeof(int) : 8;
    if (inplace && coll == F_ALLTOALL) memcpy(b->out, b->in, es * (size_t)p * count);
    if (inplace && coll == F_GATHER && rank == root) memcpy(b->out + es * (size_t)root * count, b->in, es * (size_t)count);
}

static void alloc_move(int coll, int t, int count, int root, move_bufs *b)
{
    long pc = (long)size * count;
    b->in_len = coll == F_GATHER ? count : coll == F_SCATTER && rank != root ? 0 : pc;
    b->out_len = coll == F_SCATTER ? (rank == root ? pc : count) : coll == F_GATHER && rank != root ? count : pc;
    size_t es = t == T_INT ? sizeof(int) : 8;
    b->in = malloc(es * (size_t)(b->in_len + 1));
    b->out = malloc(es * (size_t)(b->out_len + 1));
}

/* The result of start k: recvbuf (or, for a scatter in place at the root, sendbuf) checked. */
static void check_move(int c, int coll, int t, int count, int inplace, int root, int k, const move_bufs *b)
{
    for (long i = 0; i < b->out_len && !failed[c]; i++) {
        int64_t want;
        if (coll == F_ALLTOALL) want = moved((int)(i / count), rank, i % count, k);
        else if (coll == F_GATHER) want = rank == root ? moved((int)(i / count), 0, i % count, k) : -77;
        else if (rank == root && inplace) want = -77; /* recvbuf is MPI_IN_PLACE: the buffer is not used */
        else want = i < count ? moved(root, rank, i, k) : -77;
        if (get(b->out, i, t) != want) fail(c, "element %ld is %lld, expected %lld", i, (long long)get(b->out, i, t), (long long)want);
    }
    int sent_inplace = inplace && coll == F_ALLTOALL; /* the input was replaced */
    for (long i = 0; i < b->in_len && !failed[c] && !sent_inplace; i++) {
        int64_t want = coll == F_GATHER ? moved(rank, 0, i, k) : moved(rank, (int)(i / count), i % count, k);
        if (get(b->in, i, t) != want) fail(c, "sendbuf element %ld was changed", i);
    }
}

static void run_move(int s, int mode, int count, int inplace, int root, MPI_Datatype pair)
{
    int coll = fixed_schedules[s].coll;
    const char *sname = fixed_schedules[s].name ? fixed_schedules[s].name : "auto";
    int c = new_case("%s p=%d %s %s count=%d%s root=%d", fixed_names[coll], size, sname, mode_names[mode], count,
                     inplace ? " inplace" : "", root);
    int t = mode == M_DOUBLE ? T_DOUBLE : T_INT;
    move_bufs b;
    alloc_move(coll, t, count, root, &b);
    fill_move(coll, t, count, inplace, root, 0, &b);
    int here = inplace && (coll == F_ALLTOALL || rank == root); /* MPI_IN_PLACE is the root's only */
    const void *sbuf = here && coll != F_SCATTER ? MPI_IN_PLACE : b.in;
    void *rbuf = here && coll == F_SCATTER ? MPI_IN_PLACE : b.out;
    nbc_request r;
    int rc = start_move(coll, mode, pair, sbuf, rbuf, count, root, &r, 0);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
    else check_move(c, coll, t, count, here, root, 0, &b);
    free(b.in);
    free(b.out);
}

static int64_t scanned(int upto, long i, int t, int k)
{
    int64_t acc = value(0, i + k, t);
    for (int r = 1; r < upto; r++) acc = combine(acc, value(r, i + k, t), t);
    return acc;
}

static int start_scan(int coll, const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, nbc_request *r, int persistent)
{
    if (persistent)
        return coll == F_SCAN ? nbc_scan_init(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, MPI_INFO_NULL, r)
                              : nbc_exscan_init(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, MPI_INFO_NULL, r);
    return coll == F_SCAN ? nbc_iscan(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, r)
                          : nbc_iexscan(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD, r);
}

static void check_scan(int c, int coll, int t, int count, int inplace, int k, const char *in, const char *out)
{
    int upto = coll == F_SCAN ? rank + 1 : rank;
    for (long i = 0; i < count && !failed[c]; i++) {
        int64_t want = upto ? scanned(upto, i, t, k) : inplace ? value(rank, i + k, t) : -77; /* exscan: rank 0 untouched */
        if (get(out, i, t) != want) fail(c, "element %ld is %lld, expected %lld", i, (long long)get(out, i, t), (long long)want);
    }
    for (long i = 0; i < count && !failed[c] && !inplace; i++)
        if (get(in, i, t) != value(rank, i + k, t)) fail(c, "sendbuf element %ld was changed", i);
}

static void run_scan(int s, int t, int count, int inplace)
{
    int coll = fixed_schedules[s].coll;
    const char *sname = fixed_schedules[s].name ? fixed_schedules[s].name : "auto";
    int c = new_case("%s p=%d %s %s count=%d%s", fixed_names[coll], size, sname, type_names[t], count, inplace ? " inplace" : "");
    MPI_Datatype dt = t == T_I64 ? MPI_INT64_T : t == T_DOUBLE ? MPI_DOUBLE : MPI_INT;
    size_t es = t == T_INT ? sizeof(int) : 8;
    char *in = malloc(es * (size_t)(count + 1)), *out = malloc(es * (size_t)(count + 1));
    for (long i = 0; i < count; i++) put(in, i, t, value(rank, i, t)), put(out, i, t, inplace ? value(rank, i, t) : -77);
    nbc_request r;
    int rc = start_scan(coll, inplace ? MPI_IN_PLACE : in, out, count, dt, t == T_INT ? MPI_MAX : MPI_SUM, &r, 0);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
    else check_scan(c, coll, t, count, inplace, 0, in, out);
    free(in);
    free(out);
}

/* scan and exscan with the 2x2 matrix product: rank r gets M_0 · M_1 · .. in rank order */
static void scan_noncommutative(int s, MPI_Datatype mat, MPI_Op op)
{
    enum { COUNT = 5 };
    int coll = fixed_schedules[s].coll;
    int c = new_case("%s p=%d %s non-commutative matrix product", fixed_names[coll], size,
                     fixed_schedules[s].name ? fixed_schedules[s].name : "auto");
    int in[4 * COUNT], out[4 * COUNT];
    for (int i = 0; i < COUNT; i++) matrix_of(rank, i, in + 4 * i);
    for (int i = 0; i < 4 * COUNT; i++) out[i] = -77;
    nbc_request r;
    int rc = start_scan(coll, in, out, COUNT, mat, op, &r, 0);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
    int upto = coll == F_SCAN ? rank + 1 : rank;
    for (int i = 0; i < COUNT && !failed[c]; i++) {
        int want[4] = {-77, -77, -77, -77}, m[4];
        if (upto) want[0] = 1, want[1] = 0, want[2] = 0, want[3] = 1;
        for (int q = 0; q < upto; q++) {
            matrix_of(q, i, m);
            int w[4] = {want[0] * m[0] + want[1] * m[2], want[0] * m[1] + want[1] * m[3],
                        want[2] * m[0] + want[3] * m[2], want[2] * m[1] + want[3] * m[3]};
            memcpy(want, w, sizeof w);
        }
        if (memcmp(want, out + 4 * i, sizeof want)) fail(c, "matrix %d differs from the ordered product", i);
    }
}

/* Persistent requests under automatic selection: several starts, new data each time. */
static void fixed_persistent(MPI_Datatype pair)
{
    enum { STARTS = 3 };
    const int count = size + 1;
    for (int coll = 0; coll < NFIXED; coll++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int root = coll == F_GATHER || coll == F_SCATTER ? size / 2 : 0;
            int c = new_case("%s_init p=%d count=%d%s, %d starts with new data", fixed_names[coll], size, count,
                             inplace ? " inplace" : "", STARTS);
            nbc_request r = NBC_REQUEST_NULL;
            int rc;
            if (coll == F_SCAN || coll == F_EXSCAN) {
                int64_t in[64], out[64];
                rc = start_scan(coll, inplace ? MPI_IN_PLACE : (void *)in, out, count, MPI_INT64_T, MPI_SUM, &r, 1);
                for (int k = 0; k < STARTS && rc == MPI_SUCCESS && !failed[c]; k++) {
                    for (long i = 0; i < count; i++) in[i] = value(rank, i + k, T_I64), out[i] = inplace ? in[i] : -77;
                    rc = nbc_start(&r);
                    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
                    if (rc == MPI_SUCCESS) check_scan(c, coll, T_I64, count, inplace, k, (char *)in, (char *)out);
                }
            } else {
                move_bufs b;
                alloc_move(coll, T_INT, count, root, &b);
                int here = inplace && (coll == F_ALLTOALL || rank == root);
                const void *sbuf = here && coll != F_SCATTER ? MPI_IN_PLACE : b.in;
                void *rbuf = here && coll == F_SCATTER ? MPI_IN_PLACE : b.out;
                rc = start_move(coll, M_INT, pair, sbuf, rbuf, count, root, &r, 1);
                for (int k = 0; k < STARTS && rc == MPI_SUCCESS && !failed[c]; k++) {
                    fill_move(coll, T_INT, count, here, root, k, &b);
                    rc = nbc_start(&r);
                    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
                    if (rc == MPI_SUCCESS) check_move(c, coll, T_INT, count, here, root, k, &b);
                }
                free(b.in);
                free(b.out);
            }
            if (rc != MPI_SUCCESS) fail(c, "error %d: %.100s", rc, nbc_error_message());
            if (r != NBC_REQUEST_NULL) nbc_request_free(&r);
        }
}

static void fixed_count(MPI_Datatype mat, MPI_Op matop)
{
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    /* a block of 64 KiB and more; alltoall's p blocks per rank only up to p = 9 (time) */
    const int large = 16411, odd = 7;
    for (int s = 0; s < NFIXED_SCHED; s++) {
        int coll = fixed_schedules[s].coll;
        int rc = nbc_set_schedule(fixed_names[coll], fixed_schedules[s].name);
        if (rc != MPI_SUCCESS) {
            int c = new_case("%s p=%d %s exists", fixed_names[coll], size, fixed_schedules[s].name);
            fail(c, "nbc_set_schedule: %s", nbc_error_message());
            continue;
        }
        const int counts[] = {0, 1, size - 1, odd, coll == F_ALLTOALL && size > 9 ? 1001 : large};
        for (int k = 0; k < 5; k++) {
            int count = counts[k];
            if (k > 0 && count == counts[k - 1]) continue;
            /* every type and mode at counts 1 and large; each of them in place and not */
            int other_types = k == 1 || k == 4;
            for (int inplace = 0; inplace < 2; inplace++) {
                if (coll == F_SCAN || coll == F_EXSCAN) {
                    for (int t = 0; t < NTYPES; t++)
                        if (t == T_I64 || other_types) run_scan(s, t, count, inplace);
                    continue;
                }
                int rooted = coll != F_ALLTOALL;
                /* ints: every root at p <= 9 (count 1), else the first, the middle and the last */
                for (int root = 0; root < (rooted ? size : 1); root++)
                    if ((k == 1 && size <= 9) || root == 0 || root == size - 1 || root == size / 2)
                        run_move(s, M_INT, count, inplace, root, pair);
                if (other_types) {
                    run_move(s, M_DOUBLE, count, inplace, rooted ? size - 1 : 0, pair);
                    run_move(s, M_PAIRS, count + 1, inplace, rooted ? size / 2 : 0, pair); /* an even count */
                }
            }
        }
        if (coll == F_SCAN || coll == F_EXSCAN) scan_noncommutative(s, mat, matop);
        nbc_set_schedule(fixed_names[coll], NULL);
    }
    fixed_persistent(pair);
    MPI_Type_free(&pair);
}

int main(int argc, char **argv)
{
    /* NBC_PROGRESS_THREAD=1 runs the suite with the progress thread, which needs this */
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* MPICH reports a failed message through MPI_COMM_WORLD's handler: return, not abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int counts[] = {0, 1, size - 1, size, size + 1, 10007};
    for (int s = 0; s < NSCHED; s++) {
        int coll = schedules[s].coll;
        int rc = nbc_set_schedule(coll_names[coll], schedules[s].name);
        if (rc != MPI_SUCCESS) {
            int c = new_case("%s p=%d %s exists", coll_names[coll], size, schedules[s].name);
            fail(c, "nbc_set_schedule: %s", nbc_error_message());
            continue;
        }
        for (int k = 0; k < 6; k++) {
            if (k > 0 && counts[k] == counts[k - 1]) continue;
            int count = coll == REDUCE_SCATTER || coll == ALLGATHER ? (k == 5 ? 1001 : counts[k]) : counts[k];
            for (int t = 0; t < NTYPES; t++)
                for (int inplace = 0; inplace < 2; inplace++)
                    for (int root = 0; root < (coll == REDUCE || coll == BCAST ? 2 : 1); root++) {
                        if (coll == BARRIER && (t || k || inplace)) continue;
                        run(s, t, count, inplace, root ? size - 1 : 0);
                    }
        }
        nbc_set_schedule(coll_names[coll], NULL);
    }
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    MPI_Op op;
    MPI_Op_create(matmul, 0, &op);
    noncommutative(mat, op);
    multi(mat, op);
    bit_identical();
    /* alltoall .. exscan at p <= 9 and at one larger p (17: Bruck's rule, trees that wrap), for
     * the time of the oversubscribed runs of tests/run.sh */
    if (size <= 9 || size == 17) fixed_count(mat, op);
    nbc_finalize();

    /* combine the verdicts: failures by MAX, digests must be equal everywhere */
    int *any = malloc(sizeof(int) * MAX_CASES);
    uint64_t *dmin = malloc(8 * MAX_CASES), *dmax = malloc(8 * MAX_CASES);
    MPI_Reduce(failed, any, ncases, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(digest, dmin, ncases, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(digest, dmax, ncases, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0)
        for (int c = 0; c < ncases; c++) {
            if (!any[c] && dmin[c] != dmax[c]) any[c] = 1, snprintf(why[c], sizeof why[0], "results differ between ranks");
            if (any[c]) printf("FAIL %s: %s\n", names[c], failed[c] || why[c][0] ? why[c] : "on another rank");
            else printf("ok %s\n", names[c]);
            status |= any[c];
        }
    MPI_Op_free(&op);
    MPI_Type_free(&mat);
    free(any);
    free(dmin);
    free(dmax);
    MPI_Finalize();
    return status;
}
