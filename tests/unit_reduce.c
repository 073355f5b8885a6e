/* Unit test for interp/reduce.c: every kernel must agree with MPI_Reduce_local, and every pair
 * MPI forbids (or that is not a predefined op on a predefined type) must have no kernel.
 * Run as: mpiexec -n 1 ./unit_reduce */
#include "../interp/reduce.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { SINT, UINT, FLT, BOOL_, BYTE_, CHAR_ };

static const struct type {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    size_t size;
} types[] = {
    {"MPI_CHAR", MPI_CHAR, CHAR_, 1},
    {"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, SINT, 1},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, UINT, 1},
    {"MPI_SHORT", MPI_SHORT, SINT, sizeof(short)},
    {"MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, UINT, sizeof(short)},
    {"MPI_INT", MPI_INT, SINT, sizeof(int)},
    {"MPI_UNSIGNED", MPI_UNSIGNED, UINT, sizeof(int)},
    {"MPI_LONG", MPI_LONG, SINT, sizeof(long)},
    {"MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, UINT, sizeof(long)},
    {"MPI_LONG_LONG", MPI_LONG_LONG, SINT, sizeof(long long)},
    {"MPI_LONG_LONG_INT", MPI_LONG_LONG_INT, SINT, sizeof(long long)},
    {"MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, UINT, sizeof(long long)},
    {"MPI_INT8_T", MPI_INT8_T, SINT, 1},
    {"MPI_INT16_T", MPI_INT16_T, SINT, 2},
    {"MPI_INT32_T", MPI_INT32_T, SINT, 4},
    {"MPI_INT64_T", MPI_INT64_T, SINT, 8},
    {"MPI_UINT8_T", MPI_UINT8_T, UINT, 1},
    {"MPI_UINT16_T", MPI_UINT16_T, UINT, 2},
    {"MPI_UINT32_T", MPI_UINT32_T, UINT, 4},
    {"MPI_UINT64_T", MPI_UINT64_T, UINT, 8},
    {"MPI_FLOAT", MPI_FLOAT, FLT, sizeof(float)},
    {"MPI_DOUBLE", MPI_DOUBLE, FLT, sizeof(double)},
    {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, FLT, sizeof(long double)},
    {"MPI_C_BOOL", MPI_C_BOOL, BOOL_, sizeof(bool)},
    {"MPI_BYTE", MPI_BYTE, BYTE_, 1},
};

enum { SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR, NOPS };

static const struct op {
    const char *name;
    MPI_Op op;
} ops[NOPS] = {
    [SUM] = {"MPI_SUM", MPI_SUM},     [PROD] = {"MPI_PROD", MPI_PROD},
    [MIN] = {"MPI_MIN", MPI_MIN},     [MAX] = {"MPI_MAX", MPI_MAX},
    [LAND] = {"MPI_LAND", MPI_LAND},  [LOR] = {"MPI_LOR", MPI_LOR},
    [LXOR] = {"MPI_LXOR", MPI_LXOR},  [BAND] = {"MPI_BAND", MPI_BAND},
    [BOR] = {"MPI_BOR", MPI_BOR},     [BXOR] = {"MPI_BXOR", MPI_BXOR},
};

static int failures;

static void report(const char *type, const char *op, const char *why)
{
    if (why) {
        printf("FAIL reduce %s %s: %s\n", type, op, why);
        failures++;
    } else {
        printf("ok reduce %s %s\n", type, op);
    }
}

/* Which ops MPI allows on each kind (MPI-4.0 section 6.9.2); MPI_CHAR is in no group. */
static bool allowed(enum kind k, int op)
{
    switch (k) {
    case SINT:
    case UINT: return true;
    case FLT: return op <= MAX;
    case BOOL_: return op == LAND || op == LOR || op == LXOR;
    case BYTE_: return op >= BAND;
    case CHAR_: return false;
    }
    return false;
}

/* Deterministic small values, negatives for signed types and plenty of zeros, with the
 * occasional extreme so SUM and PROD wrap (which must not be undefined behaviour). */
static long long value(size_t i, int seed, enum kind k)
{
    long long v = (long long)((i * 37 + (size_t)seed * 11) % 13);
    if (k == SINT || k == FLT) v -= 6;
    if (k == BOOL_) v = v % 3 != 0;
    return v;
}

static void store_int(unsigned char *p, size_t size, bool is_signed, long long v, size_t i)
{
    if (i % 97 == 3 || i % 89 == 5) { /* largest magnitude of the type, same sign as v */
        unsigned long long max = size >= 8 ? ~0ULL : (1ULL << (8 * size)) - 1;
        if (is_signed) max >>= 1;
        v = v < 0 ? -(long long)max - 1 : (long long)max;
    }
    switch (size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case 8: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    default: abort();
    }
}

/* Floating values are quarters (exact). Every 7th element is a zero in both buffers, with
 * signs varying, and a few NaNs sit in one buffer only: these pin down MIN/MAX tie rules. */
static void store_flt(unsigned char *p, size_t size, long long v, size_t i, int seed)
{
    long double x = (long double)v * 0.25L;
    if (i % 7 == 0) x = (i / 7 + (size_t)seed) % 3 ? 0.0L : -0.0L;
    if ((i + (size_t)seed) % 101 == 50) x = NAN;
    if (size == sizeof(float)) { float f = (float)x; memcpy(p, &f, size); }
    else if (size == sizeof(double)) { double d = (double)x; memcpy(p, &d, size); }
    else { memcpy(p, &x, size); }
}

static void fill(unsigned char *buf, size_t n, int seed, const struct type *t)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = buf + i * t->size;
        long long v = value(i, seed, t->kind);
        if (t->kind == FLT) store_flt(p, t->size, v, i, seed);
        else if (t->kind == BOOL_) { bool b = v != 0; memcpy(p, &b, sizeof b); }
        else store_int(p, t->size, t->kind == SINT, v, i);
    }
}

static long double load_flt(const unsigned char *p, size_t size)
{
    if (size == sizeof(float)) { float f; memcpy(&f, p, size); return f; }
    if (size == sizeof(double)) { double d; memcpy(&d, p, size); return d; }
    long double x;
    memcpy(&x, p, size);
    return x;
}

/* Floating results are compared by value and sign (long double has padding bytes that hold
 * garbage); everything else bytewise. */
static bool same(const unsigned char *a, const unsigned char *b, size_t n, const struct type *t)
{
    if (t->kind != FLT) return memcmp(a, b, n * t->size) == 0;
    for (size_t i = 0; i < n; i++) {
        long double x = load_flt(a + i * t->size, t->size);
        long double y = load_flt(b + i * t->size, t->size);
        if (isnan(x) != isnan(y) || (!isnan(x) && (x != y || signbit(x) != signbit(y))))
            return false;
    }
    return true;
}

/* One pair of kernels against MPI_Reduce_local for n elements, `in` shifted by `shift`
 * elements so the buffers differ in alignment: the two-operand kernel in place, the
 * three-operand one into a third buffer. Returns NULL or what went wrong. */
static const char *run(const reduce_kernels *k, const struct type *t, MPI_Op op, size_t n, size_t shift,
                       char *why, size_t whylen)
{
    const size_t bytes = (n + 2) * t->size;
    unsigned char *in_base = calloc(1, bytes), *in_copy = calloc(1, bytes);
    unsigned char *io_k = calloc(1, bytes), *io_m = calloc(1, bytes);
    unsigned char *right = calloc(1, bytes), *right_copy = calloc(1, bytes), *out = calloc(1, bytes);
    if (!in_base || !in_copy || !io_k || !io_m || !right || !right_copy || !out) abort();
    unsigned char *in = in_base + shift * t->size;

    fill(in, n, 1, t);
    fill(io_k, n + 1, 2, t); /* element n is a guard the kernel must not touch */
    memcpy(io_m, io_k, bytes);
    memcpy(right, io_k, bytes);
    memcpy(right_copy, io_k, bytes);
    memcpy(in_copy, in_base, bytes);
    fill(out, n + 1, 3, t);
    memcpy(out + n * t->size, io_k + n * t->size, t->size); /* the same guard */

    const char *res = NULL;
    k->reduce(io_k, in, n);
    k->combine(out, in, right, n);
    int rc = MPI_Reduce_local(in, io_m, (int)n, t->dt, op);
    if (rc != MPI_SUCCESS) {
        snprintf(why, whylen, "MPI_Reduce_local failed (n=%zu)", n);
        res = why;
    } else if (!same(io_k, io_m, n, t)) {
        snprintf(why, whylen, "result differs from MPI_Reduce_local (n=%zu, shift=%zu)", n, shift);
        res = why;
    } else if (!same(out, io_m, n, t)) {
        snprintf(why, whylen, "three-operand result differs from MPI_Reduce_local (n=%zu, shift=%zu)", n, shift);
        res = why;
    } else if (memcmp(in_base, in_copy, bytes) != 0 || memcmp(right, right_copy, bytes) != 0) {
        snprintf(why, whylen, "input modified (n=%zu)", n);
        res = why;
    } else if (memcmp(io_k + n * t->size, io_m + n * t->size, t->size) != 0 ||
               memcmp(out + n * t->size, io_m + n * t->size, t->size) != 0) {
        snprintf(why, whylen, "wrote past element n (n=%zu)", n);
        res = why;
    }
    free(right);
    free(right_copy);
    free(out);
    free(in_base);
    free(in_copy);
    free(io_k);
    free(io_m);
    return res;
}

static void check_pair(const struct type *t, int o)
{
    static const size_t counts[] = {0, 1, 7, 1000, 4099};
    char why[160];
    const reduce_kernels *fn = reduce_kernel(t->dt, ops[o].op);
    if (!allowed(t->kind, o)) {
        report(t->name, ops[o].name, fn ? "kernel returned for a pair MPI does not allow" : NULL);
        return;
    }
    if (!fn) {
        report(t->name, ops[o].name, "no kernel");
        return;
    }
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        for (size_t shift = 0; shift < 2; shift++) {
            const char *err = run(fn, t, ops[o].op, counts[c], shift, why, sizeof why);
            if (err) {
                report(t->name, ops[o].name, err);
                return;
            }
        }
    }
    report(t->name, ops[o].name, NULL);
}

static void user_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)in, (void)inout, (void)len, (void)dt;
}

/* Ops and types outside the predefined set must never get a kernel. */
static void check_others(void)
{
    MPI_Op user;
    MPI_Op_create(user_fn, 1, &user);
    report("MPI_INT", "user-op", reduce_kernel(MPI_INT, user) ? "kernel for a user op" : NULL);
    report("MPI_DOUBLE", "user-op",
           reduce_kernel(MPI_DOUBLE, user) ? "kernel for a user op" : NULL);
    MPI_Op_free(&user);

    const struct op others[] = {{"MPI_MAXLOC", MPI_MAXLOC}, {"MPI_MINLOC", MPI_MINLOC},
                                {"MPI_REPLACE", MPI_REPLACE}, {"MPI_NO_OP", MPI_NO_OP},
                                {"MPI_OP_NULL", MPI_OP_NULL}};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        report("MPI_INT", others[i].name,
               reduce_kernel(MPI_INT, others[i].op) ? "kernel for a non-arithmetic op" : NULL);
    report("MPI_2INT", "MPI_MAXLOC",
           reduce_kernel(MPI_2INT, MPI_MAXLOC) ? "kernel for a pair type" : NULL);

    MPI_Datatype contig;
    MPI_Type_contiguous(2, MPI_INT, &contig);
    MPI_Type_commit(&contig);
    report("contiguous(2,MPI_INT)", "MPI_SUM",
           reduce_kernel(contig, MPI_SUM) ? "kernel for a derived type" : NULL);
    MPI_Type_free(&contig);

    report("MPI_DATATYPE_NULL", "MPI_SUM",
           reduce_kernel(MPI_DATATYPE_NULL, MPI_SUM) ? "kernel for a null type" : NULL);
    report("MPI_C_DOUBLE_COMPLEX", "MPI_SUM",
           reduce_kernel(MPI_C_DOUBLE_COMPLEX, MPI_SUM) ? "unexpected complex kernel" : NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    /* A failing MPI_Reduce_local should be reported, not abort the run. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int o = 0; o < NOPS; o++) check_pair(&types[t], o);
    check_others();
    MPI_Finalize();
    return failures ? 1 : 0;
}
