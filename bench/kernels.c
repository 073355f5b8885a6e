/* kernels: the library's SUM kernels on doubles against memcpy of the same bytes, and against
 * MPICH's MPI_Reduce_local, from sizes that sit in L1 to sizes that do not fit any cache: the
 * two-operand one (REDUCE, inout[i] += in[i]) and the three-operand one (COMBINE,
 * out[i] = in[i] + right[i], which replaces a copy followed by a reduction: both are shown).
 * Rates are vector
 * bytes per second (n bytes reduced or copied per call), the best of several trials of many
 * calls each. Run it as a single process: ./kernels */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../interp/reduce.h"

enum { MEMCPY, REDUCE, COMBINE, COPY_REDUCE, REDUCE_LOCAL };

/* Best of many short trials (about 1 ms each, or one call): a trial that ran undisturbed is
 * what the kernel can do, even on a machine that other work shares. */
static double rate(int what, const reduce_kernels *k, double *dst, const double *src, const double *right,
                   size_t bytes)
{
    size_t n = bytes / sizeof(double);
    long calls = (long)((4 << 20) / bytes) + 1;
    double best = 1e30, start = MPI_Wtime();
    for (int trial = 0; trial < 1000 && (trial < 20 || MPI_Wtime() - start < 0.3); trial++) {
        double t0 = MPI_Wtime();
        for (long c = 0; c < calls; c++) {
            if (what == MEMCPY) memcpy(dst, src, bytes);
            else if (what == REDUCE) k->reduce(dst, src, n);
            else if (what == COMBINE) k->combine(dst, src, right, n);
            else if (what == COPY_REDUCE) memcpy(dst, right, bytes), k->reduce(dst, src, n);
            else MPI_Reduce_local(src, dst, (int)n, MPI_DOUBLE, MPI_SUM);
            __asm__ volatile("" ::: "memory"); /* each call is done for real */
        }
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }
    return (double)bytes * (double)calls / best / 1e9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const reduce_kernels *k = reduce_kernel(MPI_DOUBLE, MPI_SUM);
    const size_t max = 64u << 20;
    double *a = aligned_alloc(64, max), *b = aligned_alloc(64, max), *c = aligned_alloc(64, max);
    if (!k || !a || !b || !c) {
        fprintf(stderr, "kernels: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < max / sizeof(double); i++) a[i] = 0, b[i] = (double)(i % 7), c[i] = 1;
    printf("# SUM on doubles against memcpy of the same bytes; GB/s of vector bytes\n");
    printf("# reduce: inout += in; combine: out = in + right (a copy and a reduction in one pass)\n");
    printf("%10s %10s %10s %8s %10s %10s %12s\n", "bytes", "memcpy", "reduce", "red/cpy", "copy+reduce", "combine",
           "Reduce_local");
    static const size_t sizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t bytes = sizes[i];
        double m = rate(MEMCPY, k, a, b, c, bytes), r = rate(REDUCE, k, a, b, c, bytes);
        double cr = rate(COPY_REDUCE, k, a, b, c, bytes), x = rate(COMBINE, k, a, b, c, bytes);
        double l = rate(REDUCE_LOCAL, k, a, b, c, bytes);
        printf("%10zu %10.1f %10.1f %7.0f%% %10.1f %10.1f %12.1f\n", bytes, m, r, 100 * r / m, cr, x, l);
    }
    free(a);
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
