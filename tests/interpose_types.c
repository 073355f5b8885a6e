/* Reductions on every (datatype, op) pair, through the preload and on MPICH alone: what MPICH
 * accepts gives MPICH's answer, what it refuses fails with its error class. The expected result
 * is a serial fold of every rank's input in rank order with MPI_Reduce_local (MPICH's own
 * arithmetic, never interposed); inputs are bytes 0 .. 3 at every fourth byte and 0 between,
 * so floating values (float, double, their complex and pair forms) are subnormals whose sums
 * are exact in any order, and no input is a NaN. Padding (the pair types)
 * is left out of the comparison by packing. Also a non-commutative user op (2x2 integer
 * matrices) on allreduce, reduce and reduce_scatter_block, blocking and not.
 * Prints "ok NAME" or "FAIL NAME: why"; a plain MPI program, built without nbc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures, checks;

static void report(const char *name, int ok, const char *why)
{
    checks++;
    if (ok) return;
    failures++;
    printf("FAIL %s p=%d rank %d: %s\n", name, size, rank, why);
}

#define T(x) {x, #x}
static const struct {
    MPI_Datatype t;
    const char *name;
} types[] = {
    T(MPI_CHAR), T(MPI_SIGNED_CHAR), T(MPI_UNSIGNED_CHAR), T(MPI_BYTE), T(MPI_SHORT), T(MPI_UNSIGNED_SHORT),
    T(MPI_INT), T(MPI_UNSIGNED), T(MPI_LONG), T(MPI_UNSIGNED_LONG), T(MPI_LONG_LONG), T(MPI_UNSIGNED_LONG_LONG),
    T(MPI_FLOAT), T(MPI_DOUBLE), T(MPI_WCHAR), T(MPI_C_BOOL), T(MPI_INT8_T), T(MPI_UINT16_T), T(MPI_INT64_T),
    T(MPI_AINT), T(MPI_C_FLOAT_COMPLEX), T(MPI_C_DOUBLE_COMPLEX), T(MPI_INTEGER), T(MPI_REAL),
    T(MPI_DOUBLE_PRECISION), T(MPI_LOGICAL), T(MPI_COMPLEX), T(MPI_DOUBLE_COMPLEX), T(MPI_INTEGER4),
    T(MPI_REAL8), T(MPI_CXX_BOOL), T(MPI_CXX_FLOAT_COMPLEX), T(MPI_CXX_DOUBLE_COMPLEX), T(MPI_2INT),
    T(MPI_FLOAT_INT), T(MPI_DOUBLE_INT), T(MPI_LONG_INT), T(MPI_SHORT_INT), T(MPI_2INTEGER), T(MPI_2REAL),
    T(MPI_2DOUBLE_PRECISION),
};
static const struct {
    MPI_Op op;
    const char *name;
} ops[] = {T(MPI_SUM),  T(MPI_PROD), T(MPI_MIN),  T(MPI_MAX),    T(MPI_LAND),   T(MPI_LOR),
           T(MPI_LXOR), T(MPI_BAND), T(MPI_BOR), T(MPI_BXOR), T(MPI_MINLOC), T(MPI_MAXLOC)};

/* bytes 0 .. 3; 0 and 1 for the boolean types, whose other bytes are no value of theirs (Open
 * MPI's kernels, and nbc's, then differ from each other) */
static int byte_values = 4;

static void fill(unsigned char *b, size_t n, int r, int salt)
{
    for (size_t i = 0; i < n; i++) b[i] = i % 4 ? 0 : (unsigned char)((r * 7 + i * 3 + salt) % 4 % byte_values);
}

/* MPICH's verdict on a pair: its own error class for a count of 0 */
static int verdict(MPI_Datatype t, MPI_Op op)
{
    char a[1], b[1];
    int rc = MPI_Reduce_local(a, b, 0, t, op), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    return cls;
}

static int same_packed(const void *x, const void *y, int count, MPI_Datatype t)
{
    int bytes;
    MPI_Pack_size(count, t, MPI_COMM_WORLD, &bytes);
    char *px = malloc((size_t)bytes + 1), *py = malloc((size_t)bytes + 1);
    int a = 0, b = 0;
    MPI_Pack(x, count, t, px, bytes, &a, MPI_COMM_WORLD);
    MPI_Pack(y, count, t, py, bytes, &b, MPI_COMM_WORLD);
    int same = a == b && !memcmp(px, py, (size_t)a);
    free(px), free(py);
    return same;
}

/* MPICH 4.0's check takes the logical ops on floating types, and its kernel then aborts
 * (opland.c): MPICH does not run these, so neither does this test. */
static int mpich_aborts(MPI_Datatype t, MPI_Op op)
{
    static const MPI_Datatype floating[] = {MPI_FLOAT, MPI_DOUBLE, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_REAL8,
                                            MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_COMPLEX,
                                            MPI_DOUBLE_COMPLEX, MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX};
    if (op != MPI_LAND && op != MPI_LOR && op != MPI_LXOR) return 0;
    for (size_t i = 0; i < sizeof floating / sizeof *floating; i++)
        if (t == floating[i]) return 1;
    return 0;
}

static void one_pair(int ti, int oi, int count)
{
    MPI_Datatype t = types[ti].t;
    MPI_Op op = ops[oi].op;
    if (mpich_aborts(t, op)) return;
    MPI_Aint lb, extent;
    MPI_Type_get_extent(t, &lb, &extent);
    size_t n = (size_t)extent * (size_t)count + 1;
    unsigned char *in = malloc(n), *out = malloc(n), *want = malloc(n), *other = malloc(n);
    char name[160], why[200];
    snprintf(name, sizeof name, "%s %s count %d", types[ti].name, ops[oi].name, count);
    int v = verdict(t, op);
    byte_values = t == MPI_C_BOOL || t == MPI_CXX_BOOL ? 2 : 4;
    fill(in, n, rank, 0);
    memset(out, 0xee, n);
    MPI_Request q;
    int rc = MPI_Iallreduce(in, out, count, t, op, MPI_COMM_WORLD, &q);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (v != MPI_SUCCESS) {
        snprintf(why, sizeof why, "MPICH refuses the pair with class %d; the call returned class %d", v, cls);
        report(name, cls == v, why);
    } else if (cls != MPI_SUCCESS) {
        snprintf(why, sizeof why, "MPICH accepts the pair; the call failed with class %d", cls);
        report(name, 0, why);
    } else {
        /* rank order: want = in_0 op in_1 op ... (MPI_Reduce_local: inout = in op inout) */
        fill(want, n, size - 1, 0);
        for (int r = size - 2; r >= 0; r--) {
            fill(other, n, r, 0);
            MPI_Reduce_local(other, want, count, t, op);
        }
        report(name, same_packed(out, want, count, t), "the result differs from MPICH's serial fold");
        /* the blocking call, in place */
        memcpy(out, in, n);
        rc = MPI_Allreduce(MPI_IN_PLACE, out, count, t, op, MPI_COMM_WORLD);
#ifndef MPICH_VERSION
        /* Through the preload with NBC_MPI_BLOCKING unset that is Open MPI's own non-blocking
         * allreduce and a wait: Open MPI's answer, whose order of summation is not rank order
         * from p = 5 on (floating-point sums then differ in the last bits); MPI leaves the order
         * to the implementation. Compared with that answer. */
        const char *on = getenv("NBC_MPI_BLOCKING");
        if ((void *)MPI_Iallreduce != (void *)PMPI_Iallreduce && !(on && atoi(on) > 0)) {
            memcpy(want, in, n);
            int rc2 = PMPI_Iallreduce(MPI_IN_PLACE, want, count, t, op, MPI_COMM_WORLD, &q);
            if (rc2 == MPI_SUCCESS) PMPI_Wait(&q, MPI_STATUS_IGNORE);
        }
#endif
        report(name, rc == MPI_SUCCESS && same_packed(out, want, count, t), "blocking, in place: differs");
    }
    free(in), free(out), free(want), free(other);
}

/* 2x2 integer matrices, multiplied: associative, not commutative */
static void matmul(void *invec, void *inoutvec, int *len, MPI_Datatype *t)
{
    (void)t;
    int32_t *a = invec, *b = inoutvec;
    for (int i = 0; i < *len; i++, a += 4, b += 4) {
        int32_t c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                        a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

static void matrix(int32_t *m, int count, int r)
{
    for (int i = 0; i < count * 4; i++) m[i] = (r * 5 + i * 3) % 7 - 3;
}

static void noncommutative(MPI_Datatype mat, MPI_Op op, int count)
{
    size_t n = (size_t)count * (size_t)size * 4 + 4;
    int32_t *in = calloc(n, 4), *out = calloc(n, 4), *want = calloc(n, 4), *other = calloc(n, 4);
    int total = count * size;
    matrix(want, total, size - 1);
    for (int r = size - 2; r >= 0; r--) {
        matrix(other, total, r);
        MPI_Reduce_local(other, want, total, mat, op);
    }
    matrix(in, total, rank);
    char name[120];
    MPI_Request q;
    snprintf(name, sizeof name, "a non-commutative user op: allreduce, count %d", total);
    int rc = MPI_Iallreduce(in, out, total, mat, op, MPI_COMM_WORLD, &q);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    report(name, rc == MPI_SUCCESS && !memcmp(out, want, (size_t)total * 16), "differs from the rank-order fold");
    snprintf(name, sizeof name, "a non-commutative user op: reduce to the last rank, count %d", total);
    memset(out, 0, n * 4);
    rc = MPI_Reduce(in, out, total, mat, op, size - 1, MPI_COMM_WORLD);
    report(name, rc == MPI_SUCCESS && (rank != size - 1 || !memcmp(out, want, (size_t)total * 16)),
           "differs from the rank-order fold");
    snprintf(name, sizeof name, "a non-commutative user op: reduce_scatter_block, %d a rank", count);
    memset(out, 0, n * 4);
    rc = MPI_Ireduce_scatter_block(in, out, count, mat, op, MPI_COMM_WORLD, &q);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    report(name, rc == MPI_SUCCESS && !memcmp(out, want + (size_t)rank * count * 4, (size_t)count * 16),
           "differs from the rank-order fold");
    snprintf(name, sizeof name, "a non-commutative user op: blocking reduce_scatter_block, %d a rank", count);
    memset(out, 0, n * 4);
    rc = MPI_Reduce_scatter_block(in, out, count, mat, op, MPI_COMM_WORLD);
    report(name, rc == MPI_SUCCESS && !memcmp(out, want + (size_t)rank * count * 4, (size_t)count * 16),
           "differs from the rank-order fold");
    free(in), free(out), free(want), free(other);
}

#if MPI_VERSION >= 4 /* (Open MPI 4.1 has no MPI-4 persistent collectives) */
/* max on ints, as a user's op (MPICH 4.0 refuses predefined ops on derived datatypes); called
 * with MPI_INT or with the strided type below (every other int, STRIDED of them) */
enum { STRIDED = 1000 };
static void imax(void *invec, void *inoutvec, int *len, MPI_Datatype *t)
{
    int *a = invec, *b = inoutvec, step = *t == MPI_INT ? 1 : 2, n = *t == MPI_INT ? *len : *len * STRIDED;
    for (int i = 0; i < n * step; i += step) b[i] = a[i] > b[i] ? a[i] : b[i];
}

/* MPI-4 orders a persistent collective's init, not its starts: each rank starts three here in
 * its own order (MPICH's test p_order does the same), with new inputs each time, one of them
 * on a strided datatype (packed at every start). */
static void persistent_any_order(int iterations)
{
    enum { N = STRIDED };
    int a_in[5], a_out[5], b_in[2 * N], b_out[2 * N], c_buf[7];
    MPI_Datatype strided;
    MPI_Type_vector(N, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    MPI_Request q[3];
    MPI_Op max;
    MPI_Op_create(imax, 1, &max);
    MPI_Allreduce_init(a_in, a_out, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    MPI_Allreduce_init(b_in, b_out, 1, strided, max, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
    MPI_Bcast_init(c_buf, 7, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &q[2]);
    int ok = 1;
    char why[160] = "";
    for (int it = 0; it < iterations && ok; it++) {
        for (int i = 0; i < 5; i++) a_in[i] = rank * it + i;
        for (int i = 0; i < 2 * N; i++) b_in[i] = (rank * 31 + i * 7 + it) % 1000, b_out[i] = -1;
        for (int i = 0; i < 7; i++) c_buf[i] = rank == size - 1 ? it * 7 + i : -1;
        for (int k = 0; k < 3; k++) {
            int which = (rank + it) % 2 ? 2 - k : k;
            int rc = MPI_Start(&q[which]);
            if (rc != MPI_SUCCESS) ok = 0, snprintf(why, sizeof why, "MPI_Start failed: %d", rc);
        }
        MPI_Status st[3];
        MPI_Waitall(3, q, st);
        for (int i = 0; i < 5 && ok; i++)
            if (a_out[i] != it * size * (size - 1) / 2 + size * i) ok = 0, snprintf(why, sizeof why, "sum [%d] %d", i, a_out[i]);
        for (int i = 0; i < 2 * N && ok; i++) {
            int want = -1;
            if (i % 2 == 0)
                for (int r = 0; r < size; r++) want = want > (r * 31 + i * 7 + it) % 1000 ? want : (r * 31 + i * 7 + it) % 1000;
            if (b_out[i] != want) ok = 0, snprintf(why, sizeof why, "max [%d] %d, want %d", i, b_out[i], want);
        }
        for (int i = 0; i < 7 && ok; i++)
            if (c_buf[i] != it * 7 + i) ok = 0, snprintf(why, sizeof why, "bcast [%d] %d", i, c_buf[i]);
    }
    for (int k = 0; k < 3; k++) MPI_Request_free(&q[k]);
    MPI_Op_free(&max);
    MPI_Type_free(&strided);
    report("persistent collectives started in a different order on each rank", ok, why);
    if (rank == 0 && ok)
        printf("ok persistent collectives started in a different order on each rank, %d times p=%d\n", iterations, size);
}

#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    static const int counts[] = {0, 1, 7, 1000};
    int ntypes = (int)(sizeof types / sizeof *types), nops = (int)(sizeof ops / sizeof *ops);
    for (int c = 0; c < 4; c++) {
        int before = failures;
        for (int ti = 0; ti < ntypes; ti++)
            for (int oi = 0; oi < nops; oi++) one_pair(ti, oi, counts[c]);
        if (rank == 0 && failures == before)
            printf("ok every predefined (datatype, op) pair, count %d, as MPICH answers it p=%d\n", counts[c], size);
    }
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT32_T, &mat);
    MPI_Type_commit(&mat);
    MPI_Op op;
    MPI_Op_create(matmul, 0, &op);
    for (int count = 1; count <= 300; count *= 17) {
        int before = failures;
        noncommutative(mat, op, count);
        if (rank == 0 && failures == before)
            printf("ok a non-commutative user op on allreduce, reduce, reduce_scatter_block, %d a rank p=%d\n", count,
                   size);
    }
    MPI_Op_free(&op);
    MPI_Type_free(&mat);
#if MPI_VERSION >= 4
    persistent_any_order(50);
#endif
    MPI_Finalize();
    return failures != 0;
}
