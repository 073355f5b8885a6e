/* kernels: the library's SUM kernel on doubles (inout[i] += in[i]) against memcpy of the same
 * bytes, and against MPICH's MPI_Reduce_local, from sizes that sit in L1 to sizes that do not
 * fit any cache. Rates are vector bytes per second (n bytes reduced or copied per call), the
 * best of several trials of many calls each. Run it as a single process: ./kernels */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../interp/reduce.h"

/* Best of many short trials (about 1 ms each, or one call): a trial that ran undisturbed is
 * what the kernel can do, even on a machine that other work shares. */
static double rate(int what, reduce_fn sum, double *dst, const double *src, size_t bytes)
{
    size_t n = bytes / sizeof(double);
    long calls = (long)((4 << 20) / bytes) + 1;
    double best = 1e30, start = MPI_Wtime();
    for (int trial = 0; trial < 1000 && (trial < 20 || MPI_Wtime() - start < 0.3); trial++) {
        double t0 = MPI_Wtime();
        for (long c = 0; c < calls; c++) {
            if (what == 0) memcpy(dst, src, bytes);
            else if (what == 1) sum(dst, src, n);
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
    reduce_fn sum = reduce_kernel(MPI_DOUBLE, MPI_SUM);
    const size_t max = 64u << 20;
    double *a = aligned_alloc(64, max), *b = aligned_alloc(64, max);
    if (!sum || !a || !b) {
        fprintf(stderr, "kernels: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < max / sizeof(double); i++) a[i] = 0, b[i] = (double)(i % 7);
    printf("# SUM on doubles (inout += in) against memcpy of the same bytes; GB/s of vector bytes\n");
    printf("%10s %10s %10s %8s %12s\n", "bytes", "memcpy", "nbc_sum", "sum/cpy", "Reduce_local");
    static const size_t sizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t bytes = sizes[k];
        double c = rate(0, sum, a, b, bytes), s = rate(1, sum, a, b, bytes), m = rate(2, sum, a, b, bytes);
        printf("%10zu %10.1f %10.1f %7.0f%% %12.1f\n", bytes, c, s, 100 * s / c, m);
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
