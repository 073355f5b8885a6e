/* Reduction kernels for MPI's predefined ops on its predefined integer, floating and logical
 * types. Each kernel is one restrict-qualified loop so the compiler can vectorize it. */
#include "reduce.h"

#include <stdbool.h>
#include <stdint.h>

/* x86-64's baseline is SSE2; each kernel is also built for AVX2 and AVX-512, and the loader
 * picks the best the CPU has (an ifunc), so the library needs no -march. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

enum { SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR, NOPS };

/* a is in[i], b is inout[i] (or right[i]). Each op gets two kernels: the two-operand one for
 * REDUCE and the three-operand one for COMBINE, so that neither has to allow for aliasing. The
 * parameters themselves are restrict: with restrict only on the typed locals, gcc 12 adds a
 * run-time aliasing check before every vector loop. */
#define KERNEL(name, T, expr)                                                                  \
    CLONES static void name(void *__restrict inout_, const void *__restrict in_, size_t n)     \
    {                                                                                          \
        T *const __restrict io = inout_;                                                       \
        const T *const __restrict in = in_;                                                    \
        _Pragma("GCC unroll 4")                                                                \
        for (size_t i = 0; i < n; i++) {                                                       \
            const T a = in[i], b = io[i];                                                      \
            io[i] = (T)(expr);                                                                 \
        }                                                                                      \
    }                                                                                          \
    CLONES static void name##3(void *__restrict out_, const void *__restrict in_,              \
                               const void *__restrict right_, size_t n)                        \
    {                                                                                          \
        T *const __restrict out = out_;                                                        \
        const T *const __restrict in = in_, *const __restrict right = right_;                  \
        _Pragma("GCC unroll 4")                                                                \
        for (size_t i = 0; i < n; i++) {                                                       \
            const T a = in[i], b = right[i];                                                   \
            out[i] = (T)(expr);                                                                \
        }                                                                                      \
    }                                                                                          \
    static const reduce_kernels name##_k = {name, name##3};

/* MIN/MAX keep `in` on ties and NaNs, as MPICH does (visible with -0.0 and NaN). */
#define ARITH_KERNELS(tag, T, U)                                                               \
    KERNEL(tag##_sum, T, (U)a + (U)b)                                                          \
    KERNEL(tag##_prod, T, (U)a * (U)b)                                                         \
    KERNEL(tag##_min, T, b < a ? b : a)                                                        \
    KERNEL(tag##_max, T, b > a ? b : a)

/* U is an unsigned type of T's width but at least int's: signed overflow is undefined and
 * narrow unsigned types would promote to signed int, so SUM/PROD wrap in U and convert back. */
#define INT_KERNELS(tag, T, U)                                                                 \
    ARITH_KERNELS(tag, T, U)                                                                   \
    KERNEL(tag##_land, T, (a != 0) & (b != 0))                                                 \
    KERNEL(tag##_lor, T, (a != 0) | (b != 0))                                                  \
    KERNEL(tag##_lxor, T, (a != 0) ^ (b != 0))                                                 \
    KERNEL(tag##_band, T, a & b)                                                               \
    KERNEL(tag##_bor, T, a | b)                                                                \
    KERNEL(tag##_bxor, T, a ^ b)                                                               \
    static const reduce_kernels *const tag##_ops[NOPS] = {                                     \
        [SUM] = &tag##_sum_k,   [PROD] = &tag##_prod_k, [MIN] = &tag##_min_k,                  \
        [MAX] = &tag##_max_k,   [LAND] = &tag##_land_k, [LOR] = &tag##_lor_k,                  \
        [LXOR] = &tag##_lxor_k, [BAND] = &tag##_band_k, [BOR] = &tag##_bor_k,                  \
        [BXOR] = &tag##_bxor_k,                                                                \
    };

#define FLOAT_KERNELS(tag, T)                                                                  \
    ARITH_KERNELS(tag, T, T)                                                                   \
    static const reduce_kernels *const tag##_ops[NOPS] = {                                     \
        [SUM] = &tag##_sum_k, [PROD] = &tag##_prod_k,                                          \
        [MIN] = &tag##_min_k, [MAX] = &tag##_max_k,                                            \
    };

INT_KERNELS(schar, signed char, unsigned)
INT_KERNELS(uchar, unsigned char, unsigned)
INT_KERNELS(short, short, unsigned)
INT_KERNELS(ushort, unsigned short, unsigned)
INT_KERNELS(int, int, unsigned)
INT_KERNELS(uint, unsigned, unsigned)
INT_KERNELS(long, long, unsigned long)
INT_KERNELS(ulong, unsigned long, unsigned long)
INT_KERNELS(llong, long long, unsigned long long)
INT_KERNELS(ullong, unsigned long long, unsigned long long)
/* The fixed-width types get their own kernels rather than borrowing a same-sized standard
 * type's, so no buffer is read through an lvalue of a different type. */
INT_KERNELS(i8, int8_t, unsigned)
INT_KERNELS(u8, uint8_t, unsigned)
INT_KERNELS(i16, int16_t, unsigned)
INT_KERNELS(u16, uint16_t, unsigned)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)
FLOAT_KERNELS(flt, float)
FLOAT_KERNELS(dbl, double)
FLOAT_KERNELS(ldbl, long double)

/* C_BOOL is read as unsigned char (always a valid lvalue for any object), so a byte other
 * than 0 or 1 is still just "true" instead of undefined behaviour; results are 0 or 1. */
_Static_assert(sizeof(bool) == 1, "MPI_C_BOOL kernels assume a one-byte bool");
static const reduce_kernels *const bool_ops[NOPS] = {
    [LAND] = &uchar_land_k, [LOR] = &uchar_lor_k, [LXOR] = &uchar_lxor_k,
};

/* MPI_BYTE takes only the bitwise ops. */
static const reduce_kernels *const byte_ops[NOPS] = {
    [BAND] = &uchar_band_k, [BOR] = &uchar_bor_k, [BXOR] = &uchar_bxor_k,
};

/* Handles are compared at run time rather than switched on, because not every MPI defines
 * them as integer constants. MPI_CHAR is deliberately absent: the standard allows no
 * reduction on it, so it is left to MPI_Reduce_local (MPICH accepts it, others refuse). */
static const reduce_kernels *const *type_ops(MPI_Datatype t)
{
    /* An MPI lacking an optional type may define its handle as MPI_DATATYPE_NULL. */
    if (t == MPI_DATATYPE_NULL) return NULL;
    if (t == MPI_SIGNED_CHAR) return schar_ops;
    if (t == MPI_UNSIGNED_CHAR) return uchar_ops;
    if (t == MPI_SHORT) return short_ops;
    if (t == MPI_UNSIGNED_SHORT) return ushort_ops;
    if (t == MPI_INT) return int_ops;
    if (t == MPI_UNSIGNED) return uint_ops;
    if (t == MPI_LONG) return long_ops;
    if (t == MPI_UNSIGNED_LONG) return ulong_ops;
    if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT) return llong_ops;
    if (t == MPI_UNSIGNED_LONG_LONG) return ullong_ops;
    if (t == MPI_INT8_T) return i8_ops;
    if (t == MPI_UINT8_T) return u8_ops;
    if (t == MPI_INT16_T) return i16_ops;
    if (t == MPI_UINT16_T) return u16_ops;
    if (t == MPI_INT32_T) return i32_ops;
    if (t == MPI_UINT32_T) return u32_ops;
    if (t == MPI_INT64_T) return i64_ops;
    if (t == MPI_UINT64_T) return u64_ops;
    if (t == MPI_FLOAT) return flt_ops;
    if (t == MPI_DOUBLE) return dbl_ops;
    if (t == MPI_LONG_DOUBLE) return ldbl_ops;
    if (t == MPI_C_BOOL) return bool_ops;
    if (t == MPI_BYTE) return byte_ops;
    return NULL;
}

static int op_index(MPI_Op op)
{
    if (op == MPI_SUM) return SUM;
    if (op == MPI_PROD) return PROD;
    if (op == MPI_MIN) return MIN;
    if (op == MPI_MAX) return MAX;
    if (op == MPI_LAND) return LAND;
    if (op == MPI_LOR) return LOR;
    if (op == MPI_LXOR) return LXOR;
    if (op == MPI_BAND) return BAND;
    if (op == MPI_BOR) return BOR;
    if (op == MPI_BXOR) return BXOR;
    return -1;
}

const reduce_kernels *reduce_kernel(MPI_Datatype datatype, MPI_Op op)
{
    /* Every call looks its pair up, and most programs use one pair throughout: the last pair
     * found is remembered. Only pairs with a kernel are, as only predefined handles (which are
     * never freed and reused) have one. */
    static MPI_Datatype last_type = MPI_DATATYPE_NULL;
    static MPI_Op last_op = MPI_OP_NULL;
    static const reduce_kernels *last;
    if (datatype == last_type && op == last_op) return last;
    const reduce_kernels *const *fns = type_ops(datatype);
    int i = op_index(op);
    const reduce_kernels *fn = fns && i >= 0 ? fns[i] : NULL;
    if (fn) last_type = datatype, last_op = op, last = fn;
    return fn;
}

int reduce_defined_without_kernel(MPI_Datatype t, MPI_Op op)
{
    if (t == MPI_DATATYPE_NULL) return 0;
    int i = op_index(op);
    if (i == SUM || i == PROD) {
        static const MPI_Datatype complex[] = {MPI_C_COMPLEX, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
                                               MPI_C_LONG_DOUBLE_COMPLEX};
        for (size_t k = 0; k < sizeof complex / sizeof *complex; k++)
            if (t == complex[k]) return 1;
    }
    /* the address-sized integers: every integer op but the logical ones */
    if (t == MPI_AINT || t == MPI_OFFSET || t == MPI_COUNT)
        return i == SUM || i == PROD || i == MIN || i == MAX || i == BAND || i == BOR || i == BXOR;
    return 0;
}
