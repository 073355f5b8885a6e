/* Total Reduce: persistent requests started in any order on different ranks, with priorities.
 * Run as `mpiexec -n P ./mpi_total_reduce [--sleep] [--requests N] [--iterations I]`, or
 * `NBC_CHECK=1 mpiexec -n P ./mpi_total_reduce --check` for mismatched programs under the
 * debug mode, or `NBC_STALL_WARNING=0.3 ... --withhold` where the last rank starts a request
 * late (the others print stall reports on stderr). Prints ok/FAIL lines from rank 0; each rank's verdicts are combined once, at the
 * end. Every result is checked exactly: contributions are integers (in int64 or double, both
 * exact here) that cannot cancel. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nbc.h"
#include "state.h" /* nbc_rt.shm: which path each start took */

enum { MAX_CHECKS = 64 };
static const char *names[MAX_CHECKS];
static int failed[MAX_CHECKS], nchecks;
static char why[MAX_CHECKS][240];
static int rank, size;

static void check(int ok, const char *name, const char *fmt, ...)
{
    names[nchecks] = name;
    failed[nchecks] = !ok;
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why[nchecks], sizeof why[nchecks], fmt, ap);
        va_end(ap);
    }
    nchecks++;
}

static uint64_t rng_state;
static uint64_t rnd(void) /* xorshift64*: each rank its own sequence */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int rnd_below(int n) { return n > 0 ? (int)(rnd() % (uint64_t)n) : 0; }

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --shared: the requests' buffers come from nbc_alloc_mem, which the ranks of a node reach in
 * each other's memory (each start then runs in the request's lane, docs/total-reduce.md) */
static int shared_buffers;
static void *buf_alloc(size_t bytes)
{
    void *p = NULL;
    if (!shared_buffers) return malloc(bytes);
    return nbc_alloc_mem((MPI_Aint)bytes, &p) == MPI_SUCCESS ? p : NULL;
}
static void buf_free(void *p)
{
    if (!shared_buffers) free(p);
    else if (p && nbc_free_mem(p) != MPI_SUCCESS) fprintf(stderr, "nbc_free_mem: %s\n", nbc_error_message());
}

static MPI_Info any_order_info(int priority, const char *name)
{
    MPI_Info info;
    char v[32];
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    snprintf(v, sizeof v, "%d", priority);
    MPI_Info_set(info, "nbc_priority", v);
    if (name) MPI_Info_set(info, "nbc_name", name);
    return info;
}

/* rank r's contribution to element i of request id at iteration it */
static int64_t input(int r, int id, int it, int64_t i) { return (int64_t)(r + 1) * 1000003 + id * 31 + it * 7 + i % 1009; }
static int64_t expected(int id, int it, int64_t i)
{
    return (int64_t)size * (size + 1) / 2 * 1000003 + (int64_t)size * (id * 31 + it * 7 + i % 1009);
}

/* ---- two requests started in opposite orders ---- */
static void opposite_orders(void)
{
    int counts[2] = {3, 1000};
    int64_t *in[2], *out[2];
    nbc_request req[2];
    int rc = MPI_SUCCESS;
    for (int k = 0; k < 2; k++) {
        in[k] = buf_alloc(sizeof(int64_t) * (size_t)counts[k]);
        out[k] = buf_alloc(sizeof(int64_t) * (size_t)counts[k]);
        MPI_Info info = any_order_info(0, NULL);
        int e = nbc_allreduce_init(in[k], out[k], counts[k], MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &req[k]);
        if (e != MPI_SUCCESS) rc = e;
        MPI_Info_free(&info);
    }
    int ok = rc == MPI_SUCCESS;
    for (int it = 0; ok && it < 5; it++) {
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < counts[k]; i++) in[k][i] = input(rank, k, it, i), out[k][i] = -1;
        int first = (rank + it) % 2; /* neighbours start in opposite orders, and swap each time */
        if ((rc = nbc_start(&req[first])) != MPI_SUCCESS || (rc = nbc_start(&req[1 - first])) != MPI_SUCCESS) break;
        /* and wait in opposite orders too */
        if ((rc = nbc_wait(&req[1 - first])) != MPI_SUCCESS || (rc = nbc_wait(&req[first])) != MPI_SUCCESS) break;
        for (int k = 0; k < 2; k++)
            for (int i = 0; ok && i < counts[k]; i++) ok = out[k][i] == expected(k, it, i);
    }
    check(ok && rc == MPI_SUCCESS && req[0] != NBC_REQUEST_NULL, "opposite start orders give the right sums (any-order requests)",
          "rc %d: %s", rc, nbc_error_message());
    for (int k = 0; k < 2; k++) {
        nbc_request_free(&req[k]);
        buf_free(in[k]);
        buf_free(out[k]);
    }
}

/* ---- many requests, random orders, priorities and completion patterns ---- */
typedef struct {
    int count, is_double, inplace;
    void *in, *out;
    nbc_request req;
} tensor;

static int64_t pick_count(void)
{
    int c = rnd_below(1000);
    if (c < 5) return (int64_t)rnd_below(3) * 262144 + 524288; /* 4 .. 8 MiB of int64 */
    if (c < 40) return rnd_below(65536);
    if (c < 300) return rnd_below(4096);
    if (c < 320) return 0;
    return rnd_below(64);
}

static void fill(tensor *t, int id, int it)
{
    for (int64_t i = 0; i < t->count; i++) {
        int64_t v = input(rank, id, it, i);
        if (t->is_double) {
            ((double *)t->in)[i] = (double)v;
            ((double *)t->out)[i] = t->inplace ? (double)v : -1.0;
        } else {
            ((int64_t *)t->in)[i] = v;
            ((int64_t *)t->out)[i] = t->inplace ? v : -1;
        }
    }
}

static int verify(const tensor *t, int id, int it)
{
    for (int64_t i = 0; i < t->count; i++) {
        int64_t want = expected(id, it, i);
        int64_t got = t->is_double ? (int64_t)((double *)t->out)[i] : ((int64_t *)t->out)[i];
        if (got != want) return 0;
    }
    return 1;
}

static void many_requests(int n, int iterations, int sleepy)
{
    /* every rank draws the same tensors (shared seed), then its own orders (seed by rank) */
    rng_state = 0x9e3779b97f4a7c15ull;
    tensor *ts = calloc((size_t)n, sizeof *ts);
    int rc = MPI_SUCCESS, bad = -1, bad_it = -1;
    for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
        tensor *t = &ts[k];
        t->count = (int)pick_count();
        t->is_double = rnd_below(4) == 0;
        t->inplace = rnd_below(5) == 0;
        size_t bytes = (size_t)t->count * 8 + 8;
        t->out = buf_alloc(bytes);
        t->in = t->inplace ? t->out : buf_alloc(bytes);
        char name[32];
        snprintf(name, sizeof name, "tensor%d", k);
        MPI_Info info = any_order_info(0, name);
        rc = nbc_allreduce_init(t->inplace ? MPI_IN_PLACE : t->in, t->out, t->count, t->is_double ? MPI_DOUBLE : MPI_INT64_T,
                                MPI_SUM, MPI_COMM_WORLD, info, &t->req);
        MPI_Info_free(&info);
    }
    rng_state = 0x2545f4914f6cdd1dull * (uint64_t)(rank + 1);
    int *order = malloc(sizeof(int) * (size_t)n);
    nbc_request *all = malloc(sizeof *all * (size_t)n);
    /* plain collectives mixed in, started in the same order everywhere (every 64th start) */
    enum { PLAIN_EVERY = 64, PLAIN_COUNT = 97 };
    int nplain = (n + PLAIN_EVERY - 1) / PLAIN_EVERY;
    int64_t *plain_in = malloc(sizeof(int64_t) * PLAIN_COUNT * (size_t)(nplain + 1));
    int64_t *plain_out = malloc(sizeof(int64_t) * PLAIN_COUNT * (size_t)(nplain + 1));
    nbc_request *plain = malloc(sizeof *plain * (size_t)(nplain + 1));
    uint64_t shared_before = nbc_rt.shm.shared_calls, shared_want = 0;
    for (int it = 0; it < iterations && rc == MPI_SUCCESS && bad < 0; it++) {
        for (int k = 0; k < n; k++) fill(&ts[k], k, it), order[k] = k, shared_want += ts[k].count > 0;
        shared_want += (uint64_t)nplain; /* (the plain ones are small: the stage, on any buffers) */
        for (int k = n - 1; k > 0; k--) { /* this rank's own start order */
            int j = rnd_below(k + 1), x = order[k];
            order[k] = order[j], order[j] = x;
        }
        for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
            if (k % PLAIN_EVERY == 0) {
                int64_t *in = plain_in + PLAIN_COUNT * (k / PLAIN_EVERY), *out = plain_out + PLAIN_COUNT * (k / PLAIN_EVERY);
                for (int i = 0; i < PLAIN_COUNT; i++) in[i] = input(rank, n + k, it, i);
                rc = nbc_iallreduce(in, out, PLAIN_COUNT, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &plain[k / PLAIN_EVERY]);
                if (rc != MPI_SUCCESS) break;
            }
            tensor *t = &ts[order[k]];
            if ((rc = nbc_set_priority(t->req, rnd_below(4))) != MPI_SUCCESS) break;
            rc = nbc_start(&t->req);
            if (sleepy && rnd_below(8) == 0) usleep((useconds_t)rnd_below(300));
            int flag;
            if (rnd_below(4) == 0 && rc == MPI_SUCCESS) rc = nbc_test(&ts[order[rnd_below(k + 1)]].req, &flag);
            else if (rnd_below(3) == 0) nbc_progress();
        }
        switch (rnd_below(3)) { /* how this rank completes them */
        case 0:
            for (int k = 0; k < n; k++) all[k] = ts[k].req;
            if (rc == MPI_SUCCESS) rc = nbc_waitall(n, all);
            break;
        case 1:
            for (int k = n - 1; k >= 0 && rc == MPI_SUCCESS; k--) rc = nbc_wait(&ts[order[k]].req);
            break;
        default:
            for (int left = n; left > 0 && rc == MPI_SUCCESS;) {
                left = 0;
                for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
                    int flag;
                    rc = nbc_test(&ts[order[k]].req, &flag);
                    left += !flag;
                }
                if (sleepy && left) usleep(50);
            }
        }
        if (rc == MPI_SUCCESS) rc = nbc_waitall(nplain, plain);
        for (int k = 0; k < n && bad < 0 && rc == MPI_SUCCESS; k++)
            if (!verify(&ts[k], k, it)) bad = k, bad_it = it;
        for (int j = 0; j < nplain && bad < 0 && rc == MPI_SUCCESS; j++)
            for (int i = 0; i < PLAIN_COUNT; i++)
                if (plain_out[PLAIN_COUNT * j + i] != expected(n + j * PLAIN_EVERY, it, i)) bad = n + j, bad_it = it;
    }
    char name[200];
    snprintf(name, sizeof name,
             "%d any-order requests (0 .. 8 MiB) and plain allreduces mixed, %d iterations, random orders, priorities and waits%s",
             n, iterations, sleepy ? ", ranks sleeping between starts" : "");
    check(rc == MPI_SUCCESS && bad < 0, strdup(name), "rc %d (%s); tensor %d (count %d) wrong at iteration %d", rc,
          nbc_error_message(), bad, bad >= 0 && bad < n ? ts[bad].count : PLAIN_COUNT, bad_it);
    if (shared_buffers && size > 1 && !getenv("NBC_NODE_MAP")) { /* (several nodes: messages) */
        uint64_t got = nbc_rt.shm.shared_calls - shared_before;
        check(got == shared_want, "every start with elements ran through shared memory (buffers from nbc_alloc_mem)",
              "%llu of %llu starts did", (unsigned long long)got, (unsigned long long)shared_want);
    }
    for (int k = 0; k < n; k++) {
        nbc_request_free(&ts[k].req);
        if (!ts[k].inplace) buf_free(ts[k].in);
        buf_free(ts[k].out);
    }
    free(ts);
    free(order);
    free(all);
    free(plain_in);
    free(plain_out);
    free(plain);
}

/* ---- the deadlock rule: patterns it admits finish ---- */
static void waits_in_different_orders(void)
{
    const int count = 1 << 20; /* 8 MiB: several chunks */
    int64_t *x = buf_alloc(8 * (size_t)count), *y = buf_alloc(8 * (size_t)count);
    int64_t *xo = buf_alloc(8 * (size_t)count), *yo = buf_alloc(8 * (size_t)count);
    nbc_request rx, ry;
    MPI_Info lo = any_order_info(0, "low"), hi = any_order_info(5, "high");
    int rc = nbc_allreduce_init(x, xo, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, lo, &rx);
    if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(y, yo, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, hi, &ry);
    MPI_Info_free(&lo);
    MPI_Info_free(&hi);
    int ok = rc == MPI_SUCCESS;
    for (int pattern = 0; ok && pattern < 3; pattern++) {
        for (int64_t i = 0; i < count; i++) x[i] = input(rank, 0, pattern, i), y[i] = input(rank, 1, pattern, i);
        if (rank % 2 == 0) { /* start X (low), start Y (high), wait Y, wait X */
            rc = nbc_start(&rx);
            if (rc == MPI_SUCCESS) rc = nbc_start(&ry);
            if (rc == MPI_SUCCESS) rc = nbc_wait(pattern == 2 ? &rx : &ry);
            if (rc == MPI_SUCCESS) rc = nbc_wait(pattern == 2 ? &ry : &rx);
        } else if (pattern == 0) { /* start X, wait X, start Y, wait Y */
            rc = nbc_start(&rx);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&rx);
            if (rc == MPI_SUCCESS) rc = nbc_start(&ry);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&ry);
        } else { /* start Y, wait Y, start X, wait X */
            rc = nbc_start(&ry);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&ry);
            if (rc == MPI_SUCCESS) rc = nbc_start(&rx);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&rx);
        }
        ok = rc == MPI_SUCCESS;
        for (int64_t i = 0; ok && i < count; i++) ok = xo[i] == expected(0, pattern, i) && yo[i] == expected(1, pattern, i);
    }
    check(ok, "priorities never deadlock ranks that start and wait in different orders", "rc %d: %s", rc, nbc_error_message());
    nbc_request_free(&rx);
    nbc_request_free(&ry);
    buf_free(x), buf_free(y), buf_free(xo), buf_free(yo);
}

/* ---- a high-priority request behind bulk low-priority traffic ---- */
static void preemption(int64_t low_bytes)
{
    enum { NLOW = 4 };
    int64_t count = low_bytes / 8 / NLOW;
    int64_t *low_in[NLOW], *low_out[NLOW], hin = rank + 1, hout = 0;
    nbc_request low[NLOW], high;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < NLOW && rc == MPI_SUCCESS; k++) {
        low_in[k] = buf_alloc(8 * (size_t)count);
        low_out[k] = buf_alloc(8 * (size_t)count);
        for (int64_t i = 0; i < count; i++) low_in[k][i] = input(rank, k, 0, i);
        MPI_Info info = any_order_info(0, "bulk");
        rc = nbc_allreduce_init(low_in[k], low_out[k], (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &low[k]);
        MPI_Info_free(&info);
    }
    MPI_Info info = any_order_info(100, "urgent");
    if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(&hin, &hout, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &high);
    MPI_Info_free(&info);
    /* once to touch the memory (and, on shared memory, agree on the lanes: a first start
     * exchanges messages), then alone, to measure the bulk traffic by itself */
    if (rc == MPI_SUCCESS) rc = nbc_startall(NLOW, low);
    if (rc == MPI_SUCCESS) rc = nbc_start(&high);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&high);
    if (rc == MPI_SUCCESS) rc = nbc_waitall(NLOW, low);
    double t0 = seconds();
    if (rc == MPI_SUCCESS) rc = nbc_startall(NLOW, low);
    if (rc == MPI_SUCCESS) rc = nbc_waitall(NLOW, low);
    double alone = seconds() - t0;
    /* then with the urgent one started a little after the bulk */
    t0 = seconds();
    if (rc == MPI_SUCCESS) rc = nbc_startall(NLOW, low);
    while (rc == MPI_SUCCESS && seconds() - t0 < alone / 10) nbc_progress();
    double t1 = seconds();
    if (rc == MPI_SUCCESS) rc = nbc_start(&high);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&high);
    double urgent = seconds() - t1;
    if (rc == MPI_SUCCESS) rc = nbc_waitall(NLOW, low);
    int ok = rc == MPI_SUCCESS && hout == (int64_t)size * (size + 1) / 2;
    for (int k = 0; ok && k < NLOW; k++)
        for (int64_t i = 0; ok && i < count; i++) ok = low_out[k][i] == expected(k, 0, i);
    /* every rank must see it: the slowest rank's figures decide */
    double mine[2] = {urgent, alone}, worst[2];
    MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("# preemption: an 8-byte allreduce of priority 100 behind %lld MiB of priority 0 took %.2f ms; the bulk "
               "alone takes %.2f ms (ratio %.3f)\n",
               (long long)(low_bytes >> 20), worst[0] * 1e3, worst[1] * 1e3, worst[0] / worst[1]);
    check(ok && worst[0] < 0.5 * worst[1], "a high-priority 8-byte allreduce overtakes bulk low-priority traffic",
          "rc %d (%s); results %s; urgent %.3f ms vs bulk %.3f ms", rc, nbc_error_message(), ok ? "right" : "wrong",
          worst[0] * 1e3, worst[1] * 1e3);
    for (int k = 0; k < NLOW; k++) {
        nbc_request_free(&low[k]);
        buf_free(low_in[k]);
        buf_free(low_out[k]);
    }
    nbc_request_free(&high);
}

/* ---- persistent requests as MPI defines them ---- */
static void persistent_semantics(void)
{
    int64_t in[5], out[5];
    nbc_request r, plain;
    int rc = nbc_allreduce_init(in, out, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    int flag = 0;
    int rc2 = nbc_test(&r, &flag);
    check(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && flag && r != NBC_REQUEST_NULL,
          "testing a persistent request never started completes at once and keeps it", "rc %d %d flag %d", rc, rc2, flag);
    int ok = 1;
    for (int it = 0; ok && it < 4; it++) {
        for (int i = 0; i < 5; i++) in[i] = input(rank, 9, it, i), out[i] = 0;
        rc = nbc_start(&r);
        rc2 = nbc_start(&r);
        ok = rc == MPI_SUCCESS && rc2 == MPI_ERR_REQUEST;
        int rc3 = nbc_request_free(&r);
        ok = ok && rc3 == MPI_ERR_REQUEST && r != NBC_REQUEST_NULL;
        ok = ok && nbc_wait(&r) == MPI_SUCCESS && r != NBC_REQUEST_NULL;
        for (int i = 0; ok && i < 5; i++) ok = out[i] == expected(9, it, i);
    }
    check(ok, "a persistent request restarts; starting or freeing it while active is refused (MPI_ERR_REQUEST)", "%s",
          nbc_error_message());
    nbc_request twice[2] = {r, r};
    rc = nbc_startall(2, twice);
    flag = 0;
    rc2 = nbc_test(&r, &flag);
    check(rc == MPI_ERR_REQUEST && rc2 == MPI_SUCCESS && flag, "nbc_startall refuses a request listed twice and starts none",
          "rc %d, then test %d flag %d", rc, rc2, flag);
    rc = nbc_iallreduce(in, out, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &plain);
    rc2 = nbc_start(&plain);
    int rc3 = nbc_set_priority(plain, 3);
    nbc_wait(&plain);
    check(rc == MPI_SUCCESS && rc2 == MPI_ERR_REQUEST && rc3 == MPI_ERR_REQUEST,
          "nbc_start and nbc_set_priority refuse a request that is not persistent", "rc %d %d %d", rc, rc2, rc3);
    rc = nbc_request_free(&r);
    check(rc == MPI_SUCCESS && r == NBC_REQUEST_NULL, "nbc_request_free releases an inactive request", "rc %d", rc);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "sometimes");
    rc = nbc_allreduce_init(in, out, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &r);
    MPI_Info_set(info, "nbc_start_order", "any");
    MPI_Info_set(info, "nbc_priority", "high");
    rc2 = nbc_allreduce_init(in, out, 5, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &r);
    MPI_Info_free(&info);
    check(rc == MPI_ERR_INFO_VALUE && rc2 == MPI_ERR_INFO_VALUE && r == NBC_REQUEST_NULL &&
              strstr(nbc_error_message(), "nbc_priority"),
          "bad info values are refused with MPI_ERR_INFO_VALUE, naming the key", "rc %d %d: %s", rc, rc2, nbc_error_message());
}

/* ---- every collective has a persistent form ---- */
static void every_collective(void)
{
    enum { N = 7 };
    int64_t in[N * 16], out[N * 16], *bufs_mem = malloc(sizeof(int64_t) * N * 3);
    void *bufs[3] = {bufs_mem, bufs_mem + N, bufs_mem + 2 * N};
    nbc_request rq[7];
    int root = size - 1, rc = MPI_SUCCESS;
    MPI_Info any = any_order_info(0, NULL);
    int e[7];
    e[0] = nbc_reduce_init(in, out, N, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]);
    e[1] = nbc_bcast_init(out + N, N, MPI_INT64_T, root, MPI_COMM_WORLD, any, &rq[1]);
    e[2] = nbc_barrier_init(MPI_COMM_WORLD, any, &rq[2]);
    e[3] = nbc_reduce_scatter_block_init(in, out + 2 * N, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[3]);
    e[4] = nbc_allgather_init(in, 1, MPI_INT64_T, out + 3 * N, 1, MPI_INT64_T, MPI_COMM_WORLD, any, &rq[4]);
    e[5] = nbc_allreduce_multi_init(bufs, 3, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[5]);
    e[6] = nbc_allreduce_init(MPI_IN_PLACE, out + 6 * N, N, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, any, &rq[6]);
    MPI_Info_free(&any);
    for (int k = 0; k < 7; k++)
        if (e[k] != MPI_SUCCESS) rc = e[k];
    int ok = rc == MPI_SUCCESS, bad = -1;
    for (int it = 0; ok && it < 3; it++) {
        memset(out, 0, sizeof out);
        for (int i = 0; i < N * 16; i++) in[i] = input(rank, 0, it, i);
        for (int i = 0; i < N; i++) out[N + i] = rank == root ? input(root, 1, it, i) : -1;
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < N; i++) ((int64_t *)bufs[j])[i] = input(rank, j, it, i);
        for (int i = 0; i < N; i++) out[6 * N + i] = input(rank, 4, it, i);
        rc = nbc_startall(7, rq);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(7, rq);
        ok = rc == MPI_SUCCESS;
        for (int i = 0; ok && i < N; i++) {
            if (rank == root && out[i] != expected(0, it, i)) bad = 0;
            if (out[N + i] != input(root, 1, it, i)) bad = 1;
            int64_t multi = expected(0, it, i) + expected(1, it, i) + expected(2, it, i);
            for (int j = 0; j < 3; j++)
                if (((int64_t *)bufs[j])[i] != multi) bad = 5;
            if (out[6 * N + i] != input(size - 1, 4, it, i)) bad = 6;
        }
        if (ok && out[2 * N] != expected(0, it, rank)) bad = 3;
        for (int r = 0; ok && r < size; r++)
            if (out[3 * N + r] != input(r, 0, it, 0)) bad = 4;
        ok = ok && bad < 0;
    }
    check(ok, "reduce, bcast, barrier, reduce_scatter_block, allgather, allreduce_multi and in-place allreduce persistent, restarted",
          "rc %d (%s), collective %d wrong", rc, nbc_error_message(), bad);
    for (int k = 0; k < 7; k++) nbc_request_free(&rq[k]);
    free(bufs_mem);
}

/* NBC_CHECK=1 on any-order requests: each start is checked; a mismatch fails with MPI_ERR_ARG
 * on every rank, naming the ranks and what differs, and a matching request still runs. */
static int any_order_start(int64_t *a, int64_t *b, int count, MPI_Datatype type, char *msg, size_t size)
{
    nbc_request r;
    MPI_Info info = any_order_info(0, "checked");
    int rc = nbc_allreduce_init(a, b, count, type, MPI_SUM, MPI_COMM_WORLD, info, &r);
    MPI_Info_free(&info);
    if (rc == MPI_SUCCESS) rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    snprintf(msg, size, "%s", nbc_error_message());
    nbc_request_free(&r);
    return rc;
}

static void any_order_mismatches(void)
{
    int64_t a[8], b[8];
    char msg[512];
    int want = size > 1 ? MPI_ERR_ARG : MPI_SUCCESS;
    for (int i = 0; i < 8; i++) a[i] = rank;
    int rc = any_order_start(a, b, rank == 0 ? 3 : 8, MPI_INT64_T, msg, sizeof msg);
    check(rc == want && (size == 1 || (strstr(msg, "any-order request id") && strstr(msg, "rank 0") && strstr(msg, "differ in count"))),
          "NBC_CHECK: an any-order request with counts that differ by rank fails everywhere with MPI_ERR_ARG, naming them",
          "rc %d: %s", rc, msg);
    rc = any_order_start(a, b, 8, rank == 0 ? MPI_DOUBLE : MPI_INT64_T, msg, sizeof msg);
    check(rc == want && (size == 1 || (strstr(msg, "MPI_DOUBLE") && strstr(msg, "differ in datatype"))),
          "NBC_CHECK: an any-order request with datatypes of one size that differ by rank fails everywhere, naming both",
          "rc %d: %s", rc, msg);
    for (int i = 0; i < 8; i++) a[i] = input(rank, 0, 0, i);
    rc = any_order_start(a, b, 8, MPI_INT64_T, msg, sizeof msg);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; ok && i < 8; i++) ok = b[i] == expected(0, 0, i);
    check(ok, "NBC_CHECK: a matching any-order request still gives the right result", "rc %d: %s", rc, msg);
}

/* ---- NBC_CHECK=1: mismatched programs fail on every rank instead of returning garbage ---- */
static void mismatches(void)
{
    int64_t a[40], b[40];
    for (int i = 0; i < 40; i++) a[i] = b[i] = rank;
    nbc_request r1, r2;
    /* ranks start two allreduces of different counts in opposite orders */
    int c1 = rank % 2 ? 3 : 40, c2 = rank % 2 ? 40 : 3;
    int rc1 = nbc_iallreduce(a, b, c1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r1);
    if (rc1 == MPI_SUCCESS) rc1 = nbc_wait(&r1);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nbc_error_message());
    int rc2 = nbc_iallreduce(a, b, c2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r2);
    if (rc2 == MPI_SUCCESS) rc2 = nbc_wait(&r2);
    int want = size > 1 ? MPI_ERR_OTHER : MPI_SUCCESS;
    check(rc1 == want && rc2 == want && (size == 1 || strstr(msg, "disagree")),
          "NBC_CHECK: plain allreduces started in opposite orders fail on every rank, naming the mismatch", "rc %d %d: %s",
          rc1, rc2, msg);
    /* one rank calls bcast while the others call allreduce */
    int rc;
    if (rank == 0) rc = nbc_ibcast(a, 4, MPI_INT64_T, 0, MPI_COMM_WORLD, &r1);
    else rc = nbc_iallreduce(a, b, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r1);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r1);
    snprintf(msg, sizeof msg, "%s", nbc_error_message());
    check(rc == want && (size == 1 || (strstr(msg, "bcast") && strstr(msg, "allreduce"))),
          "NBC_CHECK: bcast on one rank and allreduce on the others fail everywhere, naming both", "rc %d: %s", rc, msg);
    /* and agreeing programs still run */
    for (int i = 0; i < 40; i++) a[i] = input(rank, 0, 0, i);
    rc = nbc_iallreduce(a, b, 40, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r1);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r1);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; ok && i < 40; i++) ok = b[i] == expected(0, 0, i);
    check(ok, "NBC_CHECK: agreeing collectives still give right results", "rc %d: %s", rc, nbc_error_message());
    any_order_mismatches();
}

/* ---- the last rank withholds a start for a while: the others report the stall ---- */
static void withheld(void)
{
    int64_t in = rank + 1, out = 0;
    nbc_request r;
    MPI_Info info = any_order_info(0, "withheld.tensor");
    int rc = nbc_allreduce_init(&in, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, &r);
    MPI_Info_free(&info);
    if (rank == size - 1) { /* busy elsewhere, but inside the library now and then */
        double t0 = seconds();
        while (seconds() - t0 < 1.5) {
            nbc_progress();
            usleep(1000);
        }
    }
    if (rc == MPI_SUCCESS) rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    check(rc == MPI_SUCCESS && out == (int64_t)size * (size + 1) / 2, "a withheld start completes once it comes", "rc %d", rc);
    nbc_request_free(&r);
}

/* A request of 1 MiB in place on nbc_alloc_mem memory (its starts read the peers' buffers
 * where they are, in its lane), started once: MPI_SUCCESS when the sum came right. */
enum { LANE_COUNT = 1 << 17 };
static int lane_request(const char *name, int64_t **buf, nbc_request *r)
{
    *buf = buf_alloc(8 * LANE_COUNT);
    MPI_Info info = any_order_info(0, name);
    int rc = *buf ? nbc_allreduce_init(MPI_IN_PLACE, *buf, LANE_COUNT, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, info, r) : MPI_ERR_NO_MEM;
    MPI_Info_free(&info);
    for (int i = 0; *buf && i < LANE_COUNT; i++) (*buf)[i] = rank;
    if (rc == MPI_SUCCESS) rc = nbc_start(r); /* the first start: the lanes are agreed on */
    if (rc == MPI_SUCCESS) rc = nbc_wait(r);
    return rc == MPI_SUCCESS && (*buf)[LANE_COUNT - 1] != (int64_t)size * (size - 1) / 2 ? MPI_ERR_OTHER : rc;
}

/* --kill (with NBC_TIMEOUT, under mpiexec -disable-auto-cleanup): the last rank is killed
 * between two starts of a request in its lane on shared memory; the survivors' start ends in
 * NBC_TIMEOUT's error, never a hang, and leaves the lane (the dead rank's process counts as
 * gone). They leave with _exit: MPI_Finalize would wait for the dead rank. */
static void on_usr1(int sig) { (void)sig; } /* hydra's notice that a rank died */
static void killed(void)
{
    alarm(25);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* (as mpi_failures: MPICH raises there) */
    int64_t *buf;
    nbc_request r;
    uint64_t shared = nbc_rt.shm.shared_calls;
    int rc = lane_request("killed.tensor", &buf, &r);
    check(rc == MPI_SUCCESS && nbc_rt.shm.shared_calls == shared + 1, "a start in the lane completes", "rc %d", rc);
    signal(SIGUSR1, on_usr1);
    if (rank == size - 1) {
        fflush(stdout);
        raise(SIGKILL);
    }
    if (rc == MPI_SUCCESS) rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    const char *err = nbc_request_error(r);
    check(rc != MPI_SUCCESS && strstr(err, "timed out"), "a start whose peer was killed fails (NBC_TIMEOUT), no hang",
          "rc %d: %s", rc, err);
    if (rc != MPI_SUCCESS && (rc = nbc_start(&r)) == MPI_SUCCESS) rc = nbc_wait(&r);
    check(rc != MPI_SUCCESS, "the request's next start fails at once", "rc %d", rc);
    for (int i = 0; i < nchecks; i++)
        printf("%s %s p=%d: rank %d%s%s\n", failed[i] ? "FAIL" : "ok", names[i], size, rank, failed[i] ? ": " : "", failed[i] ? why[i] : "");
    fflush(stdout);
    _exit(0);
}

/* --leave (p = 2 or more): rank 0 runs with NBC_TIMEOUT=0.5 (set in main, before the library
 * reads it), the others with 60 s. Start 2 of a request in its lane comes late on rank 1:
 * rank 0 times out and leaves; rank 1's start then fails naming rank 0, without touching its
 * buffer (which rank 0 has filled with a sentinel); start 3 fails at once everywhere. */
static void leaving(void)
{
    int64_t *buf;
    nbc_request r;
    int rc = lane_request("leaving.tensor", &buf, &r);
    check(rc == MPI_SUCCESS, "leave: a start in the lane completes", "rc %d", rc);
    if (rank == 1) usleep(1500000);
    rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    const char *err = nbc_request_error(r);
    if (rank == 0) {
        check(rc != MPI_SUCCESS && strstr(err, "timed out"), "leave: the rank that waits times out", "rc %d: %s", rc, err);
        for (int i = 0; i < LANE_COUNT; i++) buf[i] = -7;
    } else {
        check(rc != MPI_SUCCESS && strstr(err, "rank 0 left"), "leave: the others fail, naming the rank that left",
              "rc %d: %s", rc, err);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* (every rank is past its start) */
    int untouched = 1;
    for (int i = 0; rank == 0 && i < LANE_COUNT; i++) untouched &= buf[i] == -7;
    check(untouched, "leave: no peer writes the buffers of a rank that left", "changed");
    rc = nbc_start(&r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    check(rc != MPI_SUCCESS, "leave: the request's next start fails at once", "rc %d", rc);
    nbc_request_free(&r);
    buf_free(buf);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_total_reduce: timed out (a hang)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

int main(int argc, char **argv)
{
    /* NBC_PROGRESS_THREAD=1 runs the suite with the progress thread, which needs this */
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGALRM, on_alarm);
    alarm(600);
    int sleepy = 0, check_mode = 0, withhold = 0, kill_mode = 0, leave_mode = 0, n = 1000, iterations = 20;
    int64_t bulk = 256 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sleep")) sleepy = 1;
        else if (!strcmp(argv[i], "--check")) check_mode = 1;
        else if (!strcmp(argv[i], "--withhold")) withhold = 1;
        else if (!strcmp(argv[i], "--shared")) shared_buffers = 1;
        else if (!strcmp(argv[i], "--kill")) kill_mode = shared_buffers = 1;
        else if (!strcmp(argv[i], "--leave")) leave_mode = shared_buffers = 1;
        else if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bulk-mib") && i + 1 < argc) bulk = (int64_t)atoi(argv[++i]) << 20;
    }
    if (leave_mode) {
        setenv("NBC_TIMEOUT", rank == 0 ? "0.5" : "60", 1); /* before the library's first call reads it */
        leaving();
    } else if (kill_mode) {
        killed();
    } else if (check_mode) {
        mismatches();
    } else if (withhold) {
        withheld();
    } else {
        opposite_orders();
        persistent_semantics();
        every_collective();
        waits_in_different_orders();
        many_requests(n, iterations, sleepy);
        if (size == 2 && bulk > 0) preemption(bulk); /* timing needs a core per rank */
    }
    int mine[MAX_CHECKS], any[MAX_CHECKS];
    for (int i = 0; i < nchecks; i++) mine[i] = failed[i];
    MPI_Allreduce(mine, any, nchecks, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < nchecks; i++) {
        if (failed[i]) printf("FAIL %s p=%d: rank %d: %s\n", names[i], size, rank, why[i]);
        else if (rank == 0 && !any[i]) printf("ok %s p=%d\n", names[i], size);
    }
    fflush(stdout);
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
