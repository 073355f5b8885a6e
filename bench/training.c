/* training: a synthetic data-parallel training step on p ranks, with the gradient tensors of a
 * real model, reduced by each of these variants in turn:
 *   nbc_prio      nbc, one persistent any-order request per tensor, priorities: front layers first
 *   nbc_equal     the same with equal priorities
 *   mpi_tensor    one MPI_Iallreduce per tensor, in one order agreed by every rank (MPI's rule)
 *   ddp_buckets   PyTorch DDP's way: 25 MiB buckets (the first 1 MiB) in a fixed order
 *   horovod       Horovod's way: each cycle ranks tell rank 0 what is ready, rank 0 answers with
 *                 an order, then fused allreduces (64 MiB fusion buffer)
 *   allreduce     one MPI_Allreduce of every gradient after the backward pass
 *   compute_only  no communication: the floor
 * and with --thread also nbc_prio_thread and nbc_equal_thread (nbc's progress thread instead of
 * nbc_progress calls; needs MPI_THREAD_MULTIPLE for the whole run). Each nbc variant also runs
 * as NAME_shm: the same requests on gradients from nbc_alloc_mem instead of malloc, which the
 * ranks of one node may reduce through shared memory (docs/shared-memory.md; the runtime sends
 * messages where it cannot). The MPI variants keep private memory: MPICH shares its own. The
 * _shm gradients are one more copy of the model (418 MiB for BERT-base), within the shared
 * segment's default 1 GiB (NBC_SHM_BYTES); a block that does not fit there is malloc's.
 *
 *   mpiexec -n P training [options] MODEL.sizes ...
 *     --iters N (10) --warmup N (2) --scale X (1) --backward-ms MS --forward X (0.5) --jitter X (0.1)
 *     --window K (4) --poll-us US (50) --seed S (1) --bucket-mib M (25) --first-bucket-mib M (1)
 *     --fusion-mib M (64) --cycle-ms MS (1) --thread --variants NAME,NAME,... --csv FILE --dat FILE
 *
 * A .sizes file (bench/training/sizes.py) has one tensor's element count a line, layer order.
 * Backward: gradients are produced last layer first, each by a pass that writes its values and
 * then a calibrated busy loop, together taking time proportional to its size; the backward pass
 * takes --scale times MPICH's MPI_Allreduce of all gradients at once (the fastest of 7 at start), or
 * --backward-ms. Each
 * tensor's time is multiplied by 1 ± jitter (uniform, per rank), and each window of K
 * consecutive layers is produced in an order shuffled differently on each rank. Communication is
 * driven every --poll-us of computation (nbc_progress, MPI_Test, Horovod's next step). Forward:
 * layers first to last, each waiting for its reduced gradient, then reading it (checking every
 * element: the values are small integers, so sums are exact) and computing --forward times as
 * long as backward did for it. Exposed communication = time spent waiting, in the forward pass
 * and after the backward pass. A round runs every variant once, in a shuffled order, each after a
 * barrier; an iteration's figures are its slowest rank's. Rank 0 prints medians over the rounds
 * and the ratio of each round's time to the best MPI variant's (mpi_tensor, ddp_buckets,
 * horovod, allreduce: the one whose ratio to the others is smallest) in the same round, which
 * cancels load that comes and goes. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "nbc.h"
#include "stats.h"

static struct {
    int iters, warmup, window, thread;
    double backward_ms, scale, forward, jitter, poll_us, bucket_mib, first_bucket_mib, fusion_mib, cycle_ms;
    unsigned long seed;
    const char *csv, *dat, *variants;
} opt = {10, 2, 4, 0, 0, 1.0, 0.5, 0.1, 50, 25, 1, 64, 1, 1, NULL, NULL, NULL};

static int rank, nprocs;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "training: rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static uint64_t rng_state;
static double uniform(void) /* xorshift64*, in [0, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* ---- the model: tensors in layer order, back to back in one array reduced in place ---- */

static char model_name[64];
static int n;
static int64_t *count, *off, total;
static float *grad, *grad_shm; /* the gradients: private (malloc), and from nbc_alloc_mem for _shm */

static void load_model(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s", path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(model_name, sizeof model_name, "%.*s", (int)strcspn(base, "."), base);
    char line[256];
    int cap = 0;
    n = 0, total = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        long long c = atoll(line);
        if (c <= 0 || c > 1 << 30) die("%s: bad size %s", path, line);
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            count = realloc(count, sizeof *count * (size_t)cap);
            off = realloc(off, sizeof *off * (size_t)cap);
        }
        off[n] = total;
        count[n++] = c;
        total += c;
    }
    fclose(f);
    if (!n) die("%s: no sizes", path);
    size_t bytes = ((size_t)total * 4 + 63) / 64 * 64;
    grad = aligned_alloc(64, bytes);
    if (!grad || nbc_alloc_mem((MPI_Aint)bytes, &grad_shm)) die("out of memory for 2 x %lld floats", (long long)total);
    memset(grad_shm, 0, bytes); /* touches the pages, as calibrate() does grad's */
}

/* Gradient values: small integers, exact in float after summing over p ranks; `stamp` changes
 * every iteration so a result left from an earlier one is caught. */
static inline float value(int64_t j, int64_t stamp) { return (float)(((j + stamp) & 15) + 1); }

/* ---- computation: a memory pass plus a calibrated busy loop, polling the communication ---- */

static volatile double sink;
static double spin_per_us, write_ns, read_ns; /* calibrated */
static int64_t poll_elems, poll_units;

static __attribute__((noinline)) void spin(int64_t units)
{
    double x = sink;
    for (int64_t i = 0; i < units; i++) x = x * 0.999999 + 1e-7;
    sink = x;
}

static int64_t write_pass(float *g, int64_t j0, int64_t len, float mult, int64_t stamp)
{
    for (int64_t j = 0; j < len; j++) g[j] = mult * value(j0 + j, stamp);
    return 0;
}

static int64_t check_pass(const float *g, int64_t j0, int64_t len, float mult, int64_t stamp)
{
    int64_t bad = 0;
    for (int64_t j = 0; j < len; j++) bad += g[j] != mult * value(j0 + j, stamp);
    return bad;
}

/* The speeds of the undisturbed machine: the fastest of several tries, on any rank (a try that
 * another process interrupted would make every later computation shorter). */
static void calibrate(void)
{
    double t[3] = {0, 1e30, 1e30}; /* spin units per us, ns per element written, read */
    write_pass(grad, 0, total, 1, 0); /* touches the pages */
    for (int k = 0; k < 9; k++) {
        double t0 = now_us();
        spin(1 << 20);
        double rate = (1 << 20) / (now_us() - t0);
        if (rate > t[0]) t[0] = rate;
    }
    for (int k = 0; k < 3; k++) {
        double t0 = now_us();
        write_pass(grad, 0, total, 1, 0);
        double w = 1e3 * (now_us() - t0) / (double)total;
        t0 = now_us();
        if (check_pass(grad, 0, total, 1, 0)) die("calibration pass misread");
        double r = 1e3 * (now_us() - t0) / (double)total;
        if (w < t[1]) t[1] = w;
        if (r < t[2]) t[2] = r;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, t + 1, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    spin_per_us = t[0], write_ns = t[1], read_ns = t[2];
    poll_units = (int64_t)(opt.poll_us * spin_per_us) + 1;
    poll_elems = (int64_t)(opt.poll_us * 1e3 / write_ns) + 1;
}

/* ---- the variants ---- */

enum kind { NBC, MPI_TENSOR, MPI_BUCKETS, HOROVOD, ALLREDUCE, COMPUTE };
typedef struct {
    const char *name;
    enum kind kind;
    int priorities, thread, mpi, shm; /* shm: on grad_shm */
    double iter[1000], exposed[1000]; /* per timed iteration, the slowest rank's, ms */
    int64_t bad;                      /* elements found wrong, every iteration and rank */
} variant;

static variant vars[] = {
    {"nbc_prio", NBC, 1, 0, 0, 0, {0}, {0}, 0},
    {"nbc_prio_shm", NBC, 1, 0, 0, 1, {0}, {0}, 0},
    {"nbc_equal", NBC, 0, 0, 0, 0, {0}, {0}, 0},
    {"nbc_equal_shm", NBC, 0, 0, 0, 1, {0}, {0}, 0},
    {"mpi_tensor", MPI_TENSOR, 0, 0, 1, 0, {0}, {0}, 0},
    {"ddp_buckets", MPI_BUCKETS, 0, 0, 1, 0, {0}, {0}, 0},
    {"horovod", HOROVOD, 0, 0, 1, 0, {0}, {0}, 0},
    {"allreduce", ALLREDUCE, 0, 0, 1, 0, {0}, {0}, 0},
    {"compute_only", COMPUTE, 0, 0, 0, 0, {0}, {0}, 0},
    {"nbc_prio_thread", NBC, 1, 1, 0, 0, {0}, {0}, 0},
    {"nbc_prio_thread_shm", NBC, 1, 1, 0, 1, {0}, {0}, 0},
    {"nbc_equal_thread", NBC, 0, 1, 0, 0, {0}, {0}, 0},
    {"nbc_equal_thread_shm", NBC, 0, 1, 0, 1, {0}, {0}, 0},
};
#define ALL_VARS (sizeof vars / sizeof *vars)
static int nvars; /* those of this run: vars[0 .. nvars) */

/* nbc: one persistent request per tensor, made in layer order on every rank; one set on grad,
 * one on grad_shm */
static nbc_request *nreq, *nreq_shm;

static float *grads(const variant *v) { return v->shm ? grad_shm : grad; }
static nbc_request *requests(const variant *v) { return v->shm ? nreq_shm : nreq; }

/* MPI_TENSOR and MPI_BUCKETS: operations launched in agreed order (tensor n-1 first, or
 * bucket 0 first); op_of[i] is tensor i's. An operation is launched once all its tensors are
 * ready here and every earlier one is launched. */
static MPI_Request *mreq;
static int *op_of, *op_pending, *op_lo, *op_hi; /* per op: tensors not ready yet, layers lo..hi */
static int *bucket_lo, *bucket_hi, nbuckets, nops, launched, tested;

/* Horovod: negotiation cycles driven as a state machine from the polls. */
static struct {
    enum { IDLE, GATHER, BCAST, REDUCE } state;
    double next_cycle;
    uint8_t *mine, *sent, *all, *scheduled, *done; /* ready here; its copy in flight; rank 0: everyone's */
    int *seq, nseq;                                /* rank 0: the order tensors became ready here */
    int *resp;                                     /* [0]: how many, then tensor ids in order */
    int next, lo, hi, fused, ndone;                /* resp[1 + lo .. hi) in flight */
    float *fusion;
    int64_t fusion_elems;
    MPI_Request req;
} hv;

static void make_ops(void)
{
    op_of = malloc(sizeof *op_of * (size_t)n);
    op_pending = malloc(sizeof *op_pending * (size_t)n);
    op_lo = malloc(sizeof *op_lo * (size_t)n), op_hi = malloc(sizeof *op_hi * (size_t)n);
    bucket_lo = malloc(sizeof *bucket_lo * (size_t)n), bucket_hi = malloc(sizeof *bucket_hi * (size_t)n);
    mreq = malloc(sizeof *mreq * (size_t)n);
    /* DDP: parameters in reverse order, a bucket closes once it holds its cap (it may exceed it
     * by its last tensor); the layers of a bucket are contiguous, so it is reduced in place */
    int b = 0;
    int64_t bytes = 0, cap = (int64_t)(opt.first_bucket_mib * 1048576);
    for (int i = n - 1; i >= 0; i--) {
        if (bytes == 0) bucket_hi[b] = i;
        bytes += 4 * count[i];
        bucket_lo[b] = i;
        if (bytes >= cap || i == 0) {
            b++, bytes = 0;
            cap = (int64_t)(opt.bucket_mib * 1048576);
        }
    }
    nbuckets = b;
}

static void launch(int op)
{
    int lo = op_lo[op];
    int64_t len = off[op_hi[op]] + count[op_hi[op]] - off[lo];
    if (MPI_Iallreduce(MPI_IN_PLACE, grad + off[lo], (int)len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &mreq[op]))
        die("MPI_Iallreduce failed");
}

static void horovod_init(void)
{
    hv.mine = calloc((size_t)n, 1), hv.sent = calloc((size_t)n, 1), hv.done = calloc((size_t)n, 1);
    hv.scheduled = calloc((size_t)n, 1), hv.all = calloc((size_t)n * (size_t)nprocs, 1);
    hv.seq = calloc((size_t)n, sizeof *hv.seq), hv.resp = calloc((size_t)n + 1, sizeof *hv.resp);
    hv.fusion_elems = (int64_t)(opt.fusion_mib * 1048576 / 4);
    hv.fusion = malloc(4 * (size_t)hv.fusion_elems);
}

static int cmp_seq(const void *a, const void *b) { return hv.seq[*(const int *)a] - hv.seq[*(const int *)b]; }

/* Starts the next fused group of the answer, or ends the cycle. */
static void horovod_launch(void)
{
    if (hv.next == hv.resp[0]) {
        hv.state = IDLE;
        return;
    }
    hv.lo = hv.next;
    int64_t elems = count[hv.resp[1 + hv.lo]];
    hv.hi = hv.lo + 1;
    while (hv.hi < hv.resp[0] && elems + count[hv.resp[1 + hv.hi]] <= hv.fusion_elems) elems += count[hv.resp[1 + hv.hi++]];
    hv.fused = hv.hi - hv.lo > 1;
    float *buf = grad + off[hv.resp[1 + hv.lo]];
    if (hv.fused) { /* Horovod copies into its fusion buffer and back */
        buf = hv.fusion;
        for (int k = hv.lo, at = 0; k < hv.hi; at += (int)count[hv.resp[1 + k]], k++)
            memcpy(hv.fusion + at, grad + off[hv.resp[1 + k]], 4 * (size_t)count[hv.resp[1 + k]]);
    }
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)elems, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &hv.req))
        die("MPI_Iallreduce failed");
    hv.state = REDUCE;
}

/* One step of the cycle if it can be taken now; returns whether it was. */
static int horovod_step(void)
{
    int flag = 0;
    switch (hv.state) {
    case IDLE:
        if (hv.ndone == n || now_us() < hv.next_cycle) return 0;
        hv.next_cycle = now_us() + 1e3 * opt.cycle_ms;
        memcpy(hv.sent, hv.mine, (size_t)n);
        MPI_Igather(hv.sent, n, MPI_BYTE, hv.all, n, MPI_BYTE, 0, MPI_COMM_WORLD, &hv.req);
        hv.state = GATHER;
        return 1;
    case GATHER:
        MPI_Test(&hv.req, &flag, MPI_STATUS_IGNORE);
        if (!flag) return 0;
        if (rank == 0) { /* what every rank has ready and nobody reduced, in the order rank 0 saw it */
            int k = 0;
            for (int i = 0; i < n; i++) {
                int everywhere = !hv.scheduled[i];
                for (int r = 0; r < nprocs && everywhere; r++) everywhere = hv.all[(size_t)r * (size_t)n + (size_t)i];
                if (everywhere) hv.resp[1 + k++] = i, hv.scheduled[i] = 1;
            }
            hv.resp[0] = k;
            qsort(hv.resp + 1, (size_t)k, sizeof *hv.resp, cmp_seq);
        }
        MPI_Ibcast(hv.resp, n + 1, MPI_INT, 0, MPI_COMM_WORLD, &hv.req);
        hv.state = BCAST;
        return 1;
    case BCAST:
        MPI_Test(&hv.req, &flag, MPI_STATUS_IGNORE);
        if (!flag) return 0;
        hv.next = 0;
        horovod_launch();
        return 1;
    case REDUCE:
        MPI_Test(&hv.req, &flag, MPI_STATUS_IGNORE);
        if (!flag) return 0;
        for (int k = hv.lo, at = 0; k < hv.hi; at += (int)count[hv.resp[1 + k]], k++) {
            int i = hv.resp[1 + k];
            if (hv.fused) memcpy(grad + off[i], hv.fusion + at, 4 * (size_t)count[i]);
            hv.done[i] = 1, hv.ndone++;
        }
        hv.next = hv.hi;
        horovod_launch();
        return 1;
    }
    return 0;
}

static void poll(const variant *v)
{
    int flag = 1;
    switch (v->kind) {
    case NBC:
        if (!v->thread) nbc_progress();
        break;
    case MPI_TENSOR:
    case MPI_BUCKETS: /* testing the oldest drives MPICH's progress for all */
        while (flag && tested < launched) {
            MPI_Test(&mreq[tested], &flag, MPI_STATUS_IGNORE);
            tested += flag;
        }
        break;
    case HOROVOD:
        while (horovod_step()) {}
        break;
    default:
        break;
    }
}

static void begin(const variant *v)
{
    if (v->kind == NBC) {
        for (int i = 0; i < n; i++)
            if (nbc_set_priority(requests(v)[i], v->priorities ? n - i : 0))
                die("nbc_set_priority: %s", nbc_error_message());
        if (v->thread && nbc_progress_thread(1)) die("nbc_progress_thread: %s", nbc_error_message());
    } else if (v->kind == MPI_TENSOR || v->kind == MPI_BUCKETS) {
        int buckets = v->kind == MPI_BUCKETS;
        nops = buckets ? nbuckets : n;
        for (int op = 0; op < nops; op++) {
            op_lo[op] = buckets ? bucket_lo[op] : n - 1 - op;
            op_hi[op] = buckets ? bucket_hi[op] : n - 1 - op;
            op_pending[op] = op_hi[op] - op_lo[op] + 1;
            for (int i = op_lo[op]; i <= op_hi[op]; i++) op_of[i] = op;
        }
        launched = tested = 0;
    } else if (v->kind == HOROVOD) {
        memset(hv.mine, 0, (size_t)n), memset(hv.scheduled, 0, (size_t)n), memset(hv.done, 0, (size_t)n);
        hv.state = IDLE, hv.next_cycle = 0, hv.nseq = 0, hv.ndone = 0;
    }
}

/* Tensor i's gradient is written here. */
static void ready(const variant *v, int i)
{
    if (v->kind == NBC) {
        if (nbc_start(&requests(v)[i])) die("nbc_start: %s", nbc_error_message());
    } else if (v->kind == MPI_TENSOR || v->kind == MPI_BUCKETS) {
        op_pending[op_of[i]]--;
        while (launched < nops && op_pending[launched] == 0) launch(launched++);
    } else if (v->kind == HOROVOD) {
        hv.mine[i] = 1, hv.seq[i] = hv.nseq++;
    }
}

static void after_backward(const variant *v)
{
    if (v->kind == ALLREDUCE && MPI_Allreduce(MPI_IN_PLACE, grad, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD))
        die("MPI_Allreduce failed");
}

/* Before the forward pass reads tensor i. */
static void wait_for(const variant *v, int i)
{
    if (v->kind == NBC) {
        if (nbc_wait(&requests(v)[i])) die("nbc_wait: %s", nbc_error_message());
    } else if (v->kind == MPI_TENSOR || v->kind == MPI_BUCKETS) {
        if (MPI_Wait(&mreq[op_of[i]], MPI_STATUS_IGNORE)) die("MPI_Wait failed");
    } else if (v->kind == HOROVOD) {
        while (!hv.done[i]) poll(v);
    }
}

/* ---- one iteration ---- */

static double us_per_elem; /* of the backward pass */
static int *order;
static double *tmul;

static void work(variant *v, int i, int backward, int64_t stamp)
{
    float *g = grads(v) + off[i];
    float mult = (float)(!backward && v->kind != COMPUTE ? nprocs * (nprocs + 1) / 2 : rank + 1);
    for (int64_t a = 0; a < count[i]; a += poll_elems) {
        int64_t len = count[i] - a < poll_elems ? count[i] - a : poll_elems;
        if (backward) write_pass(g + a, off[i] + a, len, mult, stamp);
        else v->bad += check_pass(g + a, off[i] + a, len, mult, stamp);
        poll(v);
    }
    double us = tmul[i] * us_per_elem * (double)count[i] * (backward ? 1 : opt.forward);
    us -= (double)count[i] * (backward ? write_ns : read_ns) * 1e-3;
    for (int64_t u = (int64_t)(us * spin_per_us); u > 0; u -= poll_units) {
        spin(u < poll_units ? u : poll_units);
        poll(v);
    }
}

/* Returns the iteration's time and exposed communication on this rank, in ms. */
static void iteration(variant *v, int it, int64_t stamp, double *t_iter, double *t_exposed)
{
    /* this rank's jitter and order, alike for every variant of iteration it */
    rng_state = (opt.seed * 1000003u + (uint64_t)rank * 7919u + (uint64_t)it) * 0x9e3779b97f4a7c15ull | 1;
    for (int s = 0; s < n; s++) order[s] = n - 1 - s;
    for (int w = 0; w < n; w += opt.window)
        for (int s = (w + opt.window < n ? w + opt.window : n) - 1; s > w; s--) {
            int t = w + (int)(uniform() * (s - w + 1)), x = order[s];
            order[s] = order[t], order[t] = x;
        }
    for (int i = 0; i < n; i++) tmul[i] = 1 + opt.jitter * (2 * uniform() - 1);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_us(), exposed = 0;
    begin(v);
    for (int s = 0; s < n; s++) {
        work(v, order[s], 1, stamp);
        ready(v, order[s]);
    }
    double t = now_us();
    after_backward(v);
    exposed += now_us() - t;
    for (int i = 0; i < n; i++) {
        t = now_us();
        wait_for(v, i);
        exposed += now_us() - t;
        work(v, i, 0, stamp);
    }
    *t_iter = (now_us() - t0) * 1e-3, *t_exposed = exposed * 1e-3;
    if (v->thread && nbc_progress_thread(0)) die("nbc_progress_thread: %s", nbc_error_message());
}

/* ---- statistics and output ---- */

/* One any-order request per tensor of the gradients at base, in layer order (init is ordered). */
static nbc_request *make_requests(float *base, const char *suffix)
{
    nbc_request *req = malloc(sizeof *req * (size_t)n);
    for (int i = 0; i < n; i++) {
        MPI_Info info;
        char name[96];
        MPI_Info_create(&info);
        MPI_Info_set(info, "nbc_start_order", "any");
        snprintf(name, sizeof name, "%s%s.%d", model_name, suffix, i);
        MPI_Info_set(info, "nbc_name", name);
        if (nbc_allreduce_init(MPI_IN_PLACE, base + off[i], (int)count[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info,
                               &req[i]))
            die("nbc_allreduce_init: %s", nbc_error_message());
        MPI_Info_free(&info);
    }
    return req;
}

static void free_requests(nbc_request *req)
{
    for (int i = 0; i < n; i++) nbc_request_free(&req[i]);
    free(req);
}

static void run_model(const char *path, FILE *csv, FILE *dat)
{
    load_model(path);
    order = malloc(sizeof *order * (size_t)n);
    tmul = malloc(sizeof *tmul * (size_t)n);
    calibrate();

    /* the yardstick: MPICH's allreduce of all gradients at once, the slowest rank's, fastest of
     * 7 (the least disturbed by other work on the machine) */
    double t_all[7];
    MPI_Allreduce(MPI_IN_PLACE, grad, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 7; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        MPI_Allreduce(MPI_IN_PLACE, grad, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t_all[k] = now_us() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, t_all, 7, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double allreduce_us = summarize(t_all, 7).min;
    double backward_us = opt.backward_ms > 0 ? 1e3 * opt.backward_ms : opt.scale * allreduce_us;
    us_per_elem = backward_us / (double)total;

    nreq = make_requests(grad, "");
    nreq_shm = make_requests(grad_shm, ".shm");
    make_ops();
    horovod_init();

    if (rank == 0) {
        printf("# %s: %d tensors, %lld parameters (%.1f MiB), p = %d; %d buckets for DDP\n", model_name, n,
               (long long)total, (double)total * 4 / 1048576, nprocs, nbuckets);
        printf("# MPI_Allreduce of everything %.1f ms; backward %.1f ms (%s), forward %.1f ms; jitter %g, window %d, "
               "poll every %g us; %d timed rounds after %d warm-up\n",
               allreduce_us * 1e-3, backward_us * 1e-3, opt.backward_ms > 0 ? "--backward-ms" : "that times --scale",
               opt.forward * backward_us * 1e-3, opt.jitter, opt.window, opt.poll_us, opt.iters, opt.warmup);
        fflush(stdout);
    }
    int64_t stamp = 0;
    for (int it = 0; it < opt.warmup + opt.iters; it++) {
        /* a round: every variant once, in an order shuffled alike on every rank, so that a
         * load that comes and goes on the machine does not always hit the same one */
        int perm[ALL_VARS];
        rng_state = (opt.seed + (uint64_t)it) * 0x9e3779b97f4a7c15ull | 1;
        for (int k = 0; k < nvars; k++) perm[k] = k;
        for (int k = nvars - 1; k > 0; k--) {
            int j = (int)(uniform() * (k + 1)), x = perm[k];
            perm[k] = perm[j], perm[j] = x;
        }
        for (int q = 0; q < nvars; q++) {
            int k = perm[q];
            double t[2];
            iteration(&vars[k], it, ++stamp, &t[0], &t[1]);
            MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (it >= opt.warmup) vars[k].iter[it - opt.warmup] = t[0], vars[k].exposed[it - opt.warmup] = t[1];
        }
    }

    /* the best MPI variant: the smallest median of per-round ratios to the first MPI variant
     * (on a loaded machine medians of times taken in different rounds are not comparable) */
    int best = -1, ref = 0;
    double best_ratio = 0;
    while (!vars[ref].mpi) ref++;
    stats si[ALL_VARS], se[ALL_VARS];
    for (int k = 0; k < nvars; k++) {
        MPI_Allreduce(MPI_IN_PLACE, &vars[k].bad, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        si[k] = summarize(vars[k].iter, opt.iters), se[k] = summarize(vars[k].exposed, opt.iters);
        double r[1000];
        for (int it = 0; it < opt.iters; it++) r[it] = vars[k].iter[it] / vars[ref].iter[it];
        double m = summarize(r, opt.iters).median;
        if (vars[k].mpi && (best < 0 || m < best_ratio)) best = k, best_ratio = m;
    }
    if (rank == 0) {
        printf("%-20s %25s %7s %25s %25s  %s\n", "variant", "iteration ms (p25..p75)", "min", "exposed ms (p25..p75)",
               "ratio (p25..p75)", "result");
        if (dat)
            fprintf(dat, "# %s, p = %d: variant iteration_ms exposed_ms (medians) ratio ratio_p25 ratio_p75\n",
                    model_name, nprocs);
        for (int k = 0; k < nvars; k++) {
            /* paired: each round's time over the best MPI variant's in the same round */
            double r[1000];
            for (int it = 0; it < opt.iters; it++) r[it] = vars[k].iter[it] / vars[best].iter[it];
            stats sr = summarize(r, opt.iters);
            printf("%-20s %9.1f (%6.1f..%6.1f) %7.1f %9.1f (%6.1f..%6.1f) %9.3f (%5.3f..%5.3f)  %s\n", vars[k].name,
                   si[k].median, si[k].p25, si[k].p75, si[k].min, se[k].median, se[k].p25, se[k].p75, sr.median, sr.p25, sr.p75,
                   vars[k].bad ? "WRONG" : "ok");
            if (csv)
                fprintf(csv, "%d,%s,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%d,%d\n", nprocs, model_name,
                        vars[k].name, si[k].median, si[k].p25, si[k].p75, si[k].min, si[k].max, se[k].median, se[k].p25,
                        se[k].p75, sr.median, sr.p25, sr.p75, opt.iters, !vars[k].bad);
            if (dat)
                fprintf(dat, "%s %.3f %.3f %.4f %.4f %.4f\n", vars[k].name, si[k].median, se[k].median, sr.median,
                        sr.p25, sr.p75);
        }
        printf("(ratio: a round's iteration time over %s's in the same round, the best MPI variant; median and "
               "quartiles over rounds)\n\n",
               vars[best].name);
        if (dat) fprintf(dat, "\n\n");
        fflush(stdout);
    }

    /* the requests first: nbc_free_mem refuses a block that a persistent request is bound to */
    free_requests(nreq), free_requests(nreq_shm);
    if (nbc_free_mem(grad_shm)) die("nbc_free_mem: %s", nbc_error_message());
    free(order), free(tmul), free(grad), free(count), free(off);
    free(op_of), free(op_pending), free(op_lo), free(op_hi), free(bucket_lo), free(bucket_hi), free(mreq);
    free(hv.mine), free(hv.sent), free(hv.done), free(hv.scheduled), free(hv.all), free(hv.seq), free(hv.resp);
    free(hv.fusion);
    count = off = NULL;
    for (int k = 0; k < nvars; k++) vars[k].bad = 0;
}

int main(int argc, char **argv)
{
    int first_model = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--thread")) opt.thread = 1;
        else if (strncmp(a, "--", 2)) { first_model = i; break; }
        else if (!strcmp(a, "--iters")) opt.iters = atoi(val), i++;
        else if (!strcmp(a, "--warmup")) opt.warmup = atoi(val), i++;
        else if (!strcmp(a, "--window")) opt.window = atoi(val), i++;
        else if (!strcmp(a, "--scale")) opt.scale = atof(val), i++;
        else if (!strcmp(a, "--backward-ms")) opt.backward_ms = atof(val), i++;
        else if (!strcmp(a, "--forward")) opt.forward = atof(val), i++;
        else if (!strcmp(a, "--jitter")) opt.jitter = atof(val), i++;
        else if (!strcmp(a, "--poll-us")) opt.poll_us = atof(val), i++;
        else if (!strcmp(a, "--seed")) opt.seed = strtoul(val, NULL, 10), i++;
        else if (!strcmp(a, "--bucket-mib")) opt.bucket_mib = atof(val), i++;
        else if (!strcmp(a, "--first-bucket-mib")) opt.first_bucket_mib = atof(val), i++;
        else if (!strcmp(a, "--fusion-mib")) opt.fusion_mib = atof(val), i++;
        else if (!strcmp(a, "--cycle-ms")) opt.cycle_ms = atof(val), i++;
        else if (!strcmp(a, "--csv")) opt.csv = val, i++;
        else if (!strcmp(a, "--dat")) opt.dat = val, i++;
        else if (!strcmp(a, "--variants")) opt.variants = val, i++;
        else { fprintf(stderr, "training: unknown option %s\n", a); return 2; }
    }
    int provided;
    MPI_Init_thread(&argc, &argv, opt.thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (opt.thread && provided < MPI_THREAD_MULTIPLE) die("MPI_THREAD_MULTIPLE is not provided");
    if (first_model == argc || opt.iters < 1 || opt.iters > 1000 || opt.warmup < 0 || opt.window < 1 || opt.poll_us <= 0)
        die("usage: training [--iters N] [--warmup N] [--scale X] [--backward-ms MS] [--forward X] [--jitter X] [--window K] "
            "[--poll-us US] [--seed S] [--bucket-mib M] [--first-bucket-mib M] [--fusion-mib M] [--cycle-ms MS] "
            "[--thread] [--variants NAME,...] [--csv FILE] [--dat FILE] MODEL.sizes ...");
    /* the thread variants only with --thread; with --variants only those named; in their usual order */
    char list[256];
    snprintf(list, sizeof list, ",%s,", opt.variants ? opt.variants : "");
    for (size_t k = 0; k < ALL_VARS; k++) {
        char name[40];
        snprintf(name, sizeof name, ",%s,", vars[k].name);
        if ((opt.thread || !vars[k].thread) && (!opt.variants || strstr(list, name))) vars[nvars++] = vars[k];
    }
    int mpi_variants = 0;
    for (int k = 0; k < nvars; k++) mpi_variants += vars[k].mpi;
    if (!mpi_variants) die("--variants must name at least one MPI variant (mpi_tensor, ddp_buckets, horovod, allreduce)");

    FILE *csv = NULL, *dat = NULL;
    if (rank == 0 && opt.csv) {
        if (!(csv = fopen(opt.csv, "w"))) die("cannot write %s", opt.csv);
        fprintf(csv, "p,model,variant,iter_ms,iter_p25,iter_p75,iter_min,iter_max,exposed_ms,exposed_p25,exposed_p75,"
                     "ratio,ratio_p25,ratio_p75,iters,correct\n");
    }
    if (rank == 0 && opt.dat && !(dat = fopen(opt.dat, "w"))) die("cannot write %s", opt.dat);
    for (int i = first_model; i < argc; i++) run_model(argv[i], csv, dat);
    if (csv) fclose(csv);
    if (dat) fclose(dat);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss / 1024;
    MPI_Allreduce(MPI_IN_PLACE, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("# peak resident memory of a rank: %.0f MiB\n", rss);
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
