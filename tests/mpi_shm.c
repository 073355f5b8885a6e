/* Tests for allreduce through shared memory (runtime/shm.c, schedules/allreduce_shm.nbs):
 * buffers from nbc_alloc_mem on every rank take the shared program, any rank with a buffer of
 * its own sends everyone back to messages, and either way the results are exact. Counts 0, 1,
 * fewer than p, odd and large; four types and ops and a non-commutative user op; in place;
 * more calls in flight than there are channels; persistent requests; the allocator's errors.
 *
 *     mpiexec -n P ./mpi_shm        (P = 1..9; NBC_PROGRESS_THREAD=1 drives every call from the
 *                                    library's progress thread too)
 *
 * Expected results are computed locally; the verdicts are combined once at the end. It reads
 * the runtime's counters of agreements (nbc_rt.shm) to know which path a call took. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nbc.h"
#include "state.h"

enum { MAX_CHECKS = 64 };
static const char *names[MAX_CHECKS];
static int failed[MAX_CHECKS], nchecks;
static char why[MAX_CHECKS][240];
static int rank, size;

static int check(int ok, const char *name, const char *fmt, ...)
{
    for (int i = 0; i < nchecks; i++) /* a check made in a loop keeps its first failure */
        if (names[i] == name) {
            if (!ok && !failed[i]) {
                failed[i] = 1;
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(why[i], sizeof why[i], fmt, ap);
                va_end(ap);
            }
            return ok;
        }
    names[nchecks] = name;
    failed[nchecks] = !ok;
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why[nchecks], sizeof why[nchecks], fmt, ap);
        va_end(ap);
    }
    nchecks++;
    return ok;
}

/* Small integers, so that every sum is exact in every type. */
static long input(int r, int64_t i) { return (r + 1) * 3 + i % 13; }

typedef struct {
    const char *name;
    MPI_Datatype dt;
    MPI_Op op;
    size_t esize;
} kind;

/* inout := in: x ⊕ y = x, associative and not commutative: the result is rank 0's input */
static void left(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

static long expected(const kind *k, int64_t i, MPI_Op noncomm)
{
    long v = input(0, i);
    if (k->op == noncomm) return v; /* the leftmost operand */
    for (int r = 1; r < size; r++) {
        long x = input(r, i);
        if (k->op == MPI_SUM) v += x;
        else if (k->op == MPI_MAX) v = x > v ? x : v;
        else v ^= x;
    }
    return v;
}

static void fill(const kind *k, void *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (k->dt == MPI_DOUBLE) ((double *)buf)[i] = (double)input(rank, i);
        else if (k->dt == MPI_INT) ((int *)buf)[i] = (int)input(rank, i);
        else if (k->dt == MPI_FLOAT) ((float *)buf)[i] = (float)input(rank, i);
        else ((long *)buf)[i] = input(rank, i);
    }
}

/* The first wrong element, or -1. */
static int64_t wrong(const kind *k, const void *buf, int64_t n, MPI_Op noncomm)
{
    for (int64_t i = 0; i < n; i++) {
        long e = expected(k, i, noncomm), got;
        if (k->dt == MPI_DOUBLE) got = (long)((const double *)buf)[i];
        else if (k->dt == MPI_INT) got = ((const int *)buf)[i];
        else if (k->dt == MPI_FLOAT) got = (long)((const float *)buf)[i];
        else got = ((const long *)buf)[i];
        if (got != e) return i;
    }
    return -1;
}

static void *alloc_buf(int shared, size_t bytes)
{
    void *p = NULL;
    if (shared) nbc_alloc_mem((MPI_Aint)bytes, &p);
    else p = malloc(bytes ? bytes : 1);
    return p;
}

static void free_buf(int shared, void *p)
{
    if (shared) nbc_free_mem(p);
    else free(p);
}

/* private_rank: every rank's buffers private (from malloc) */
#define ALL_PRIVATE (-2)

/* One allreduce per (count, kind, in place), with buffers shared on every rank (private_rank
 * -1), private on one (private_rank >= 0) or on all (ALL_PRIVATE); checks the result and that
 * the path taken is the one expected: shared when every rank's buffers are (count 0 too: a
 * synchronization), or small enough for the stages (allreduce_shm_small), or when the kernel
 * reaches the private ones (NBC_SHM_KERNEL, interp/remote.c). */
static void calls(const char *name, int private_rank, const kind *kinds, int nkinds, MPI_Op noncomm)
{
    const int64_t counts[] = {0, 1, size - 1, size + 1, 200, 1001, 65536 + 3, (1 << 20) + 5};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
        for (int ki = 0; ki < nkinds; ki++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const kind *k = &kinds[ki];
                int64_t n = counts[ci];
                int shared = rank != private_rank && private_rank != ALL_PRIVATE;
                char *send = alloc_buf(shared, (size_t)n * k->esize), *recv = alloc_buf(shared, (size_t)n * k->esize);
                fill(k, inplace ? recv : send, n);
                uint64_t before = nbc_rt.shm.shared_calls, kernel_before = nbc_rt.shm.kernel_calls,
                         direct_before = nbc_rt.shm.direct_calls;
                nbc_request req;
                int rc = nbc_iallreduce(inplace ? MPI_IN_PLACE : send, recv, (int)n, k->dt, k->op, MPI_COMM_WORLD, &req);
                if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
                int64_t at = rc == MPI_SUCCESS ? wrong(k, recv, n, noncomm) : -1;
                check(rc == MPI_SUCCESS && at < 0, name, "%s count %lld%s: %s at %lld", k->name, (long long)n,
                      inplace ? " in place" : "", rc != MPI_SUCCESS ? nbc_error_message() : "wrong result", (long long)at);
                int small = (size_t)n * k->esize <= 65536;
                int want = size > 1 && (private_rank == -1 || small || nbc_rt.shm.kernel);
                /* this rank reaches another's buffers through the kernel */
                int by_kernel = size > 1 && !small && nbc_rt.shm.kernel &&
                                (private_rank == ALL_PRIVATE || (private_rank >= 0 && private_rank != rank));
                check((nbc_rt.shm.shared_calls > before) == want, name, "%s count %lld%s: %s expected", k->name, (long long)n,
                      inplace ? " in place" : "", want ? "the shared path" : "messages");
                check((nbc_rt.shm.kernel_calls > kernel_before) == by_kernel, name, "%s count %lld%s: %s expected", k->name,
                      (long long)n, inplace ? " in place" : "", by_kernel ? "copies through the kernel" : "no copy through the kernel");
                /* a small call on every rank's shared buffers reads them where they are, not through the stage */
                int direct = size > 1 && small && private_rank == -1 && (size_t)n * k->esize >= SHM_DIRECT_MIN_BYTES;
                check((nbc_rt.shm.direct_calls > direct_before) == direct, name, "%s count %lld%s: %s expected", k->name,
                      (long long)n, inplace ? " in place" : "", direct ? "allreduce_shm on the shared buffers" : "no small call reading a peer's buffers");
                free_buf(shared, send);
                free_buf(shared, recv);
            }
}

/* More calls in flight than channels, waited for in reverse order. */
static void many_in_flight(void)
{
    enum { N = 40, COUNT = 777 };
    const kind k = {"double sum", MPI_DOUBLE, MPI_SUM, sizeof(double)};
    double *send[N], *recv[N];
    nbc_request req[N];
    for (int j = 0; j < N; j++) {
        nbc_alloc_mem(COUNT * sizeof(double), &send[j]);
        nbc_alloc_mem(COUNT * sizeof(double), &recv[j]);
        fill(&k, send[j], COUNT);
        send[j][0] += j; /* each call its own first element */
        check(nbc_iallreduce(send[j], recv[j], COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[j]) == MPI_SUCCESS,
              "many in flight", "start %d: %s", j, nbc_error_message());
    }
    for (int j = N - 1; j >= 0; j--) {
        check(nbc_wait(&req[j]) == MPI_SUCCESS, "many in flight", "wait %d: %s", j, nbc_error_message());
        recv[j][0] -= (double)j * size;
        int64_t at = wrong(&k, recv[j], COUNT, MPI_OP_NULL);
        check(at < 0, "many in flight", "call %d: wrong at %lld", j, (long long)at);
        nbc_free_mem(send[j]);
        nbc_free_mem(recv[j]);
    }
}

/* A persistent request started again and again, its buffers rewritten in between. */
static void persistent(void)
{
    enum { COUNT = 4099 };
    const kind k = {"long bxor", MPI_LONG, MPI_BXOR, sizeof(long)};
    long *send, *recv;
    nbc_alloc_mem(COUNT * sizeof(long), &send);
    nbc_alloc_mem(COUNT * sizeof(long), &recv);
    nbc_request req;
    int rc = nbc_allreduce_init(send, recv, COUNT, MPI_LONG, MPI_BXOR, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    check(rc == MPI_SUCCESS, "persistent", "init: %s", nbc_error_message());
    uint64_t before = nbc_rt.shm.shared_calls;
    for (int it = 0; it < 6 && rc == MPI_SUCCESS; it++) {
        fill(&k, send, COUNT);
        memset(recv, 0xff, COUNT * sizeof(long));
        rc = nbc_start(&req);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
        int64_t at = rc == MPI_SUCCESS ? wrong(&k, recv, COUNT, MPI_OP_NULL) : -1;
        check(rc == MPI_SUCCESS && at < 0, "persistent", "start %d: %s at %lld", it, rc ? nbc_error_message() : "wrong", (long long)at);
    }
    check(size == 1 || nbc_rt.shm.shared_calls - before == 6, "persistent", "%llu of 6 starts shared",
          (unsigned long long)(nbc_rt.shm.shared_calls - before));
    nbc_request_free(&req);
    nbc_free_mem(send);
    nbc_free_mem(recv);
}

static void allocator(void)
{
    void *p = NULL, *q = NULL;
    check(nbc_alloc_mem(-1, &p) == MPI_ERR_ARG, "nbc_alloc_mem errors", "a negative size is accepted");
    check(nbc_alloc_mem(16, NULL) == MPI_ERR_ARG, "nbc_alloc_mem errors", "a NULL baseptr is accepted");
    check(nbc_alloc_mem(0, &p) == MPI_SUCCESS && p, "nbc_alloc_mem errors", "size 0 fails");
    check(nbc_alloc_mem(1000, &q) == MPI_SUCCESS && q, "nbc_alloc_mem errors", "size 1000 fails");
    check(nbc_free_mem((char *)q + 64) == MPI_ERR_ARG, "nbc_alloc_mem errors", "freeing the middle of a block is accepted");
    check(nbc_free_mem(q) == MPI_SUCCESS && nbc_free_mem(p) == MPI_SUCCESS, "nbc_alloc_mem errors", "free fails");
    check(nbc_free_mem(q) == MPI_ERR_ARG, "nbc_alloc_mem errors", "a double free is accepted");
    check(nbc_free_mem(NULL) == MPI_SUCCESS, "nbc_alloc_mem errors", "freeing NULL fails");
    /* freed blocks are reused: a thousand rounds of allocation do not grow the heap */
    void *first = NULL;
    nbc_alloc_mem(1 << 20, &first);
    nbc_free_mem(first);
    for (int i = 0; i < 1000; i++) {
        void *a = NULL, *b = NULL;
        nbc_alloc_mem(1 << 20, &a);
        nbc_alloc_mem(100, &b);
        nbc_free_mem(a);
        nbc_free_mem(b);
        check(a == first, "nbc_alloc_mem reuses memory", "round %d: %p, not %p", i, a, first);
    }
}

/* --withhold (NBC_TIMEOUT set, p = 2): rank 1 never makes the calls; rank 0's fail with a
 * timeout that says what it waited for: the peer's signal (the small schedule), the ranks'
 * agreement (the large one). */
static void withheld(void)
{
    int token = 0;
    double one = 1, sum = 0; /* one call together first: the communicator is attached */
    nbc_request first;
    if (nbc_iallreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &first) != MPI_SUCCESS || nbc_wait(&first) != MPI_SUCCESS)
        check(0, "a call before the withheld ones", "%s", nbc_error_message());
    if (rank != 0) { /* waits (plain MPI, not nbc) until rank 0 is done */
        MPI_Recv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return;
    }
    enum { LARGE = 1 << 16 };
    double *send, *recv;
    nbc_alloc_mem(LARGE * sizeof(double), &send);
    nbc_alloc_mem(LARGE * sizeof(double), &recv);
    const struct {
        const char *name, *says;
        int count;
    } cases[] = {{"a withheld large call times out naming the agreement", "the ranks' agreement on shared memory", LARGE},
                 {"a withheld small call times out naming the missing signal", "no answer from rank 1 (its signal)", 4}};
    for (int i = 0; i < 2; i++) {
        nbc_request req;
        int rc = nbc_iallreduce(send, recv, cases[i].count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
        const char *msg = nbc_error_message();
        check(rc != MPI_SUCCESS && strstr(msg, cases[i].says), cases[i].name, "rc %d: %s", rc, msg);
    }
    MPI_Send(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
}

/* --withhold, after withheld(), on a communicator of their own: rank 0's receive buffer
 * refuses writes in rank 1's block (read-only pages), so rank 1's copy of its block through
 * the kernel fails, and says why; rank 0 learns that rank 1 left the call (docs/hardening.md). */
static void refused_by_kernel(void)
{
    enum { COUNT = 1 << 17 }; /* ints: 512 KiB, rank 1's block the second half */
    const size_t bytes = COUNT * sizeof(int);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int *send = malloc(bytes);
    int *recv = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < COUNT; i++) send[i] = 1;
    if (rank == 0) mprotect((char *)recv + bytes / 2, bytes / 2, PROT_READ);
    nbc_request req;
    int rc = nbc_iallreduce(send, recv, COUNT, MPI_INT, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    const char *msg = nbc_error_message();
    if (rank == 1)
        check(rc != MPI_SUCCESS && strstr(msg, "COPY of 262144 bytes with rank 0") && strstr(msg, "the kernel's copy") &&
                  strstr(msg, "Bad address"),
              "a copy the kernel refuses fails and says why", "rc %d: %s", rc, msg);
    else
        check(rc != MPI_SUCCESS && strstr(msg, "rank 1 left it before it ended: its call failed") && !strstr(msg, "timed out"),
              "the peer of a refused copy learns it without a timeout", "rc %d: %s", rc, msg);
    MPI_Barrier(MPI_COMM_WORLD);
    munmap(recv, bytes);
    free(send);
    MPI_Comm_free(&comm);
}

/* --withhold, last: to rank 0, rank 1's process looks exited (its pidfd swapped for that of
 * a child that has exited). A pid that exited may name another process, so rank 0 must not
 * copy through the kernel: it declines, and both ranks run the messages' program, correctly. */
static void exited_peer(void)
{
    enum { COUNT = 1 << 17 }; /* ints, 512 KiB: on malloc buffers, the kernel's path */
    int peer_pid = 0, me = getpid();
    MPI_Sendrecv(&me, 1, MPI_INT, 1 - rank, 98, &peer_pid, 1, MPI_INT, 1 - rank, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    shm_map *m = nbc_rt.shm.maps;
    while (m && m->pid != peer_pid) m = m->next;
    int known = m && m->pidfd >= 0, both = 0;
    check(known, "a peer's process is known by its pidfd", "no pidfd for pid %d", peer_pid);
    MPI_Allreduce(&known, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!both) return;
    int kept = m->pidfd, dead = -1;
    if (rank == 0) {
        pid_t child = fork();
        if (child == 0) _exit(0);
        dead = (int)syscall(SYS_pidfd_open, child, 0);
        waitpid(child, NULL, 0);
        m->pidfd = dead;
        nbc_rt.shm.polled_ns = 0; /* poll at the next call */
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int *send = malloc(COUNT * sizeof(int)), *recv = malloc(COUNT * sizeof(int));
    for (int i = 0; i < COUNT; i++) send[i] = i % 1000 + rank;
    uint64_t kernel = nbc_rt.shm.kernel_calls, messages = nbc_rt.shm.message_calls;
    nbc_request req;
    int rc = nbc_iallreduce(send, recv, COUNT, MPI_INT, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    int wrong = -1;
    for (int i = 0; i < COUNT && rc == MPI_SUCCESS && wrong < 0; i++)
        if (recv[i] != 2 * (i % 1000) + 1) wrong = i;
    check(rc == MPI_SUCCESS && wrong < 0 && nbc_rt.shm.message_calls == messages + 1 && nbc_rt.shm.kernel_calls == kernel,
          "a peer whose process exited: messages, not the kernel's copies", "rc %d (%s), element %d wrong, kernel calls %llu -> %llu",
          rc, rc == MPI_SUCCESS ? "" : nbc_error_message(), wrong, (unsigned long long)kernel, (unsigned long long)nbc_rt.shm.kernel_calls);
    if (rank == 0) {
        m->pidfd = kept;
        m->exited = 0;
        close(dead);
    }
    free(send);
    free(recv);
    MPI_Comm_free(&comm);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_shm: timed out (a hang)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

/* --communicators N (NBC_SHM_BYTES small): N communicators made, used once on shared memory and
 * freed, one after the other; each call still takes the shared path, since a freed
 * communicator's block goes back to the segment once every rank let go of it. */
static void communicators(int n)
{
    int shared = 0, right = 1;
    for (int i = 0; i < n; i++) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        double x = rank + 1, sum = 0;
        uint64_t before = nbc_rt.shm.shared_calls;
        nbc_request req;
        int rc = nbc_iallreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
        right &= rc == MPI_SUCCESS && sum == size * (size + 1) / 2;
        shared += nbc_rt.shm.shared_calls > before;
        MPI_Comm_free(&comm);
    }
    check(right, "every call on a new communicator is right", "a wrong sum or a failure");
    check(shared == n, "every freed communicator's block is reused: all calls shared", "%d of %d calls shared", shared, n);
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
    if (nbc_init() != MPI_SUCCESS) { /* nothing below could run */
        printf("FAIL mpi_shm: nbc_init p=%d: %s\n", size, nbc_error_message());
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Op noncomm;
    MPI_Op_create(left, 0, &noncomm);
    const kind kinds[] = {{"double sum", MPI_DOUBLE, MPI_SUM, sizeof(double)},
                          {"int max", MPI_INT, MPI_MAX, sizeof(int)},
                          {"long bxor", MPI_LONG, MPI_BXOR, sizeof(long)},
                          {"int noncommutative", MPI_INT, noncomm, sizeof(int)}};
    int nkinds = sizeof kinds / sizeof *kinds;
    check(nbc_rt.shm.enabled, "sharing is on", "NBC_SHM or the launcher turned it off");
    if (argc > 2 && !strcmp(argv[1], "--communicators")) {
        communicators(atoi(argv[2]));
        for (int i = 1; i < nchecks; i++)
            printf("%s %s p=%d%s%s\n", failed[i] ? "FAIL" : "ok", names[i], size, failed[i] ? ": " : "", why[i]);
        fflush(stdout);
        nbc_finalize();
        MPI_Finalize();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--withhold")) {
        withheld();
        if (nbc_rt.shm.kernel) refused_by_kernel();
        if (nbc_rt.shm.kernel) exited_peer();
        for (int i = 1; i < nchecks; i++) /* each rank its own */
            printf("%s %s p=%d%s%s\n", failed[i] ? "FAIL" : "ok", names[i], size, failed[i] ? ": " : "", why[i]);
        fflush(stdout);
        nbc_finalize();
        MPI_Finalize();
        return 0;
    }
    calls("shared buffers on every rank", -1, kinds, nkinds, noncomm);
    calls("rank 0's buffers private", 0, kinds, 2, noncomm);
    calls("the last rank's buffers private", size - 1, kinds, 2, noncomm);
    calls("private buffers on every rank", ALL_PRIVATE, kinds, nkinds, noncomm);
    many_in_flight();
    persistent();
    allocator();
    MPI_Op_free(&noncomm);
    /* the library again after nbc_finalize: a shared allreduce (its schedules looked up anew) */
    {
        enum { COUNT = 100000 };
        const kind k = {"double sum", MPI_DOUBLE, MPI_SUM, sizeof(double)};
        double *send, *recv;
        nbc_alloc_mem(COUNT * sizeof(double), &send);
        nbc_alloc_mem(COUNT * sizeof(double), &recv);
        fill(&k, send, COUNT);
        nbc_finalize();
        nbc_request req;
        int rc = nbc_iallreduce(send, recv, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
        int64_t at = rc == MPI_SUCCESS ? wrong(&k, recv, COUNT, MPI_OP_NULL) : -1;
        check(rc == MPI_SUCCESS && at < 0, "a shared allreduce after nbc_finalize", "%s at %lld", rc ? nbc_error_message() : "wrong", (long long)at);
        nbc_free_mem(send);
        nbc_free_mem(recv);
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
