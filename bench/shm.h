/* Two ranks on one node sharing memory through MPI (MPI_Win_allocate_shared): the lower bound
 * of an allreduce there, and a prototype allreduce that reduces straight out of the peer's
 * memory. Included by bench.c; p = 2 only (docs/performance.md, "The bound").
 *
 * The bound: the two inputs must be read once (2n bytes), the sum computed once, and both
 * outputs written (2n bytes), whichever CPU does it; split evenly over the two cores, each
 * reads its half of both inputs and writes its half of both outputs (shm_kernel below: n
 * bytes read and n written per core). Before a rank can compute it must learn that the peer's
 * input is there, and before it returns that the peer is done with its own input (MPI lets it
 * overwrite it then): at least one one-way flag latency each time, two in all. So
 * bound(n) = 2 one-way flag latencies + the kernel over n/2 bytes on both cores at once, both
 * measured here as the best of many trials, with the kernel's data local to each core (what
 * crosses cores is not charged: a lower bound, not a prediction). */
#ifndef BENCH_SHM_H
#define BENCH_SHM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHM_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))

/* y0[i] = y1[i] = a[i] + b[i]: one pass, two outputs (one per rank), as the library's kernels
 * a restrict-qualified loop the compiler vectorizes. */
SHM_CLONES static void shm_kernel(double *__restrict y0, double *__restrict y1, const double *__restrict a,
                                  const double *__restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double s = a[i] + b[i];
        y0[i] = s;
        y1[i] = s;
    }
}

typedef struct {
    int open;                      /* set up: two ranks on one node */
    MPI_Comm node;                 /* the two ranks */
    MPI_Win win;                   /* one segment per rank: a flag line, then send and recv */
    int me;                        /* 0 or 1 in node */
    volatile uint64_t *flag[2];    /* flag[r]: the generation rank r last reached */
    double *send[2], *recv[2];     /* both ranks' buffers, as this rank maps them */
    uint64_t gen;
} shm_pair;

/* Collective over comm. 0 when the comm is not two ranks of one node (then nothing is set up). */
static int shm_open(shm_pair *s, MPI_Comm comm, size_t max_bytes)
{
    memset(s, 0, sizeof *s);
    int size, nsize;
    MPI_Comm_size(comm, &size);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &s->node);
    MPI_Comm_size(s->node, &nsize);
    int ok = size == 2 && nsize == 2, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        MPI_Comm_free(&s->node);
        return 0;
    }
    MPI_Comm_rank(s->node, &s->me);
    size_t seg = 64 + 2 * ((max_bytes + 63) / 64 * 64);
    char *base;
    MPI_Win_allocate_shared((MPI_Aint)seg, 1, MPI_INFO_NULL, s->node, &base, &s->win);
    for (int r = 0; r < 2; r++) {
        MPI_Aint sz;
        int du;
        char *b;
        MPI_Win_shared_query(s->win, r, &sz, &du, &b);
        s->flag[r] = (volatile uint64_t *)b;
        s->send[r] = (double *)(b + 64);
        s->recv[r] = (double *)(b + 64 + (seg - 64) / 2);
    }
    *s->flag[s->me] = 0;
    MPI_Barrier(s->node);
    return s->open = 1;
}

static void shm_close(shm_pair *s)
{
    if (!s->open) return;
    MPI_Win_free(&s->win);
    MPI_Comm_free(&s->node);
}

/* Tell the peer this rank reached the next generation and wait until it has too. */
static void shm_sync(shm_pair *s)
{
    uint64_t g = ++s->gen;
    __atomic_store_n(s->flag[s->me], g, __ATOMIC_RELEASE);
    while (__atomic_load_n(s->flag[1 - s->me], __ATOMIC_ACQUIRE) < g) __builtin_ia32_pause();
}

/* The prototype: an allreduce of n doubles from both ranks' send to both ranks' recv, each rank
 * summing its half out of both inputs into both outputs. One sync says both inputs are
 * there, the other that both halves are written (and that the peer is done reading). */
static void shm_allreduce(shm_pair *s, size_t n)
{
    size_t h = (n + 1) / 2, lo = s->me ? h : 0, len = s->me ? n - h : h;
    shm_sync(s);
    shm_kernel(s->recv[0] + lo, s->recv[1] + lo, s->send[s->me] + lo, s->send[1 - s->me] + lo, len);
    shm_sync(s);
}

/* One sync, back to back: both ranks store their flag at once and each waits for the other's,
 * so it takes one one-way latency of a cache line between the cores. Best of a few runs of
 * many syncs, the slower rank's. */
static double shm_sync_time(shm_pair *s)
{
    double best = 1e30;
    for (int run = 0; run < 200; run++) { /* short runs: one that no other process interrupted */
        MPI_Barrier(s->node);
        shm_sync(s);
        double t0 = MPI_Wtime();
        for (int i = 0; i < 100; i++) shm_sync(s);
        double t = (MPI_Wtime() - t0) / 100;
        if (t < best) best = t;
    }
    MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, s->node);
    return best;
}

/* The kernel's part of the bound for n doubles: both ranks run shm_kernel over n/2 doubles on
 * buffers of their own at the same time; the slower rank's best trial. */
static double shm_kernel_time(shm_pair *s, size_t n)
{
    size_t h = (n + 1) / 2;
    size_t sb = (h * sizeof(double) + 127) / 64 * 64; /* a multiple of 64, as aligned_alloc wants */
    double *m = (double *)aligned_alloc(64, 4 * sb);
    if (!m) abort();
    size_t stride = sb / sizeof(double);
    double *a = m, *b = m + stride, *y0 = m + 2 * stride, *y1 = m + 3 * stride;
    for (size_t i = 0; i < h; i++) a[i] = (double)(i % 97), b[i] = 1, y0[i] = y1[i] = 0;
    long calls = (long)((1 << 20) / (h * sizeof(double) + 1)) + 1;
    double best = 1e30;
    MPI_Barrier(s->node);
    double start = MPI_Wtime();
    for (int trial = 0; trial < 200 && (trial < 10 || MPI_Wtime() - start < 0.05); trial++) {
        double t0 = MPI_Wtime();
        for (long c = 0; c < calls; c++) {
            shm_kernel(y0, y1, a, b, h);
            __asm__ volatile("" ::: "memory");
        }
        double t = (MPI_Wtime() - t0) / (double)calls;
        if (t < best) best = t;
    }
    free(m);
    MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, s->node);
    return best;
}

#endif
