/* Order statistics of a benchmark's repeated timings, shared by the benchmarks. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdlib.h>
#include <string.h>

typedef struct {
    double min, p25, median, p75, max;
} stats;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Of n > 0 timings, left in their order (callers pair them by index). */
static stats summarize(const double *t0, int n)
{
    double *t = (double *)malloc(sizeof *t * (size_t)n); /* the cast: C++ (bench/gloo.cc) includes this too */
    if (!t) abort();
    memcpy(t, t0, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    stats s = {t[0], t[n / 4], n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2, t[(3 * n) / 4], t[n - 1]};
    free(t);
    return s;
}

#endif
