/* The library's life as MPI defines it for its own objects: nbc_finalize with requests still
 * active, requests held across nbc_finalize, a communicator freed while a collective on it is
 * in flight, a request kept for the next call like it, the library used on MPI_COMM_SELF,
 * initialized again after finalize, and calls from a second thread when MPI was not
 * initialized for threads.
 * Run as `mpiexec -n P ./mpi_lifecycle` (P >= 1). Prints ok/FAIL lines from rank 0. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"

enum { MAX_CHECKS = 32 };
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

static int sum_ok(const int64_t *out, int count, int base)
{
    for (int i = 0; i < count; i++)
        if (out[i] != (int64_t)size * (size - 1) / 2 + (int64_t)size * (base + i)) return 0;
    return 1;
}

static void fill(int64_t *in, int count, int base)
{
    for (int i = 0; i < count; i++) in[i] = rank + base + i;
}

/* Each rank's request must still be active when it calls nbc_finalize, whatever the timing (a
 * progress thread, or peers that started first): rank r starts its allreduce on a communicator
 * of its own, comms[r], which the others join only once every rank has asked (a barrier). At
 * p = 1 it may complete at once. */
static void finalize_with_active_requests(void)
{
    int64_t in[1000], (*out)[1000] = malloc(sizeof *out * (size_t)size);
    MPI_Comm *comms = malloc(sizeof *comms * (size_t)size);
    nbc_request *r = malloc(sizeof *r * (size_t)size);
    fill(in, 1000, 1);
    for (int q = 0; q < size; q++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[q]);
    int rc = nbc_iallreduce(in, out[rank], 1000, MPI_INT64_T, MPI_SUM, comms[rank], &r[rank]);
    int rc2 = nbc_finalize();
    int refused = rc2 == MPI_ERR_PENDING && strstr(nbc_error_message(), "still active");
    char message[256];
    snprintf(message, sizeof message, "%s", nbc_error_message());
    MPI_Barrier(MPI_COMM_WORLD);
    for (int q = 0; q < size && rc == MPI_SUCCESS; q++)
        if (q != rank) rc = nbc_iallreduce(in, out[q], 1000, MPI_INT64_T, MPI_SUM, comms[q], &r[q]);
    int rc3 = rc == MPI_SUCCESS ? nbc_waitall(size, r) : rc, sums = 1, freed = 1;
    for (int q = 0; q < size; q++) sums &= sum_ok(out[q], 1000, 1), freed &= r[q] == NBC_REQUEST_NULL;
    check(rc == MPI_SUCCESS && (refused || size == 1) && rc3 == MPI_SUCCESS && sums && freed,
          "nbc_finalize with an active request fails with MPI_ERR_PENDING and leaves it valid", "rc %d %d %d: %s", rc, rc2, rc3,
          message);
    for (int q = 0; q < size; q++) MPI_Comm_free(&comms[q]);
    free(out);
    free(comms);
    free(r);
    rc = nbc_finalize();
    check(rc == MPI_SUCCESS, "nbc_finalize succeeds once the requests are complete", "rc %d: %s", rc, nbc_error_message());
}

static void requests_across_finalize(void)
{
    int64_t in[8], out[8], pin[8], pout[8];
    fill(in, 8, 2);
    nbc_request done_untested, persistent;
    int rc = nbc_iallreduce(in, out, 8, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &done_untested);
    if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(pin, pout, 8, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &persistent);
    /* complete it without reporting it: progress until nothing is active */
    while (rc == MPI_SUCCESS && nbc_finalize() == MPI_ERR_PENDING) nbc_progress();
    int flag = 0;
    int rc2 = nbc_test(&done_untested, &flag);
    check(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && flag && done_untested == NBC_REQUEST_NULL && sum_ok(out, 8, 2),
          "a request completed before nbc_finalize and tested after it reports its result", "rc %d %d flag %d", rc, rc2, flag);
    rc = nbc_start(&persistent);
    rc2 = nbc_request_free(&persistent);
    check(rc == MPI_ERR_REQUEST && rc2 == MPI_SUCCESS && persistent == NBC_REQUEST_NULL,
          "a persistent request made before nbc_finalize cannot start after it, and is freed", "rc %d %d", rc, rc2);
}

static void initialized_again(void)
{
    int64_t in[33], out[33];
    fill(in, 33, 3);
    nbc_request r;
    int rc = nbc_iallreduce(in, out, 33, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    check(rc == MPI_SUCCESS && sum_ok(out, 33, 3), "the library initializes again after nbc_finalize", "rc %d: %s", rc,
          nbc_error_message());
}

static void comm_freed_in_flight(void)
{
    int ok = 1;
    for (int round = 0; round < 20 && ok; round++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        int64_t in[3000], out[3000];
        fill(in, 3000, round);
        nbc_request r;
        int rc = nbc_iallreduce(in, out, 3000, MPI_INT64_T, MPI_SUM, c, &r);
        MPI_Comm_free(&c); /* allowed: the collective completes normally */
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
        ok = rc == MPI_SUCCESS && sum_ok(out, 3000, round);
    }
    check(ok, "MPI_Comm_free with a collective in flight: it completes with the right result", "%s", nbc_error_message());
}

/* A one-shot request that completed stays on its communicator, still holding its programs, and
 * the next call like it takes it back (the spare, runtime/request.c). Each call must still get
 * its own buffers and result: the same call on other buffers, in place, on a communicator freed
 * and made again (MPI may hand out its handle again), and persistent requests made right after,
 * one of them with the spare, started in opposite orders on odd and even ranks. */
static void spare_request(void)
{
    enum { N = 40 };
    int64_t a[N], b[N], out[N], pout[2][N];
    int ok = 1;
    char what[200] = "";
    for (int round = 0; round < 6 && ok; round++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        for (int k = 0; k < 5 && ok; k++) {
            int64_t *in = k % 2 ? b : a;
            int base = round * 10 + k, inplace = k == 3;
            fill(in, N, base);
            memset(out, 0, sizeof out);
            if (inplace) memcpy(out, in, sizeof out);
            nbc_request r;
            int rc = nbc_iallreduce(inplace ? MPI_IN_PLACE : in, out, N, MPI_INT64_T, MPI_SUM, c, &r);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
            ok = rc == MPI_SUCCESS && sum_ok(out, N, base);
            if (!ok) snprintf(what, sizeof what, "round %d call %d: rc %d %s", round, k, rc, nbc_error_message());
        }
        if (ok && round % 2 == 1) {
            MPI_Info info;
            MPI_Info_create(&info);
            if (round == 3) MPI_Info_set(info, "nbc_start_order", "any");
            nbc_request p[2];
            fill(a, N, 7);
            fill(b, N, 8);
            int rc = nbc_allreduce_init(a, pout[0], N, MPI_INT64_T, MPI_SUM, c, info, &p[0]);
            if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(b, pout[1], N, MPI_INT64_T, MPI_SUM, c, info, &p[1]);
            MPI_Info_free(&info);
            for (int start = 0; start < 3 && rc == MPI_SUCCESS; start++) {
                memset(pout, 0, sizeof pout);
                int first = round == 3 ? rank % 2 : 0;
                rc = nbc_start(&p[first]);
                if (rc == MPI_SUCCESS) rc = nbc_start(&p[1 - first]);
                if (rc == MPI_SUCCESS) rc = nbc_waitall(2, p);
            }
            ok = rc == MPI_SUCCESS && sum_ok(pout[0], N, 7) && sum_ok(pout[1], N, 8);
            if (!ok) snprintf(what, sizeof what, "round %d, persistent: rc %d %s", round, rc, nbc_error_message());
            int rc0 = nbc_request_free(&p[0]), rc1 = nbc_request_free(&p[1]);
            if (ok && (rc0 != MPI_SUCCESS || rc1 != MPI_SUCCESS)) {
                ok = 0;
                snprintf(what, sizeof what, "round %d, nbc_request_free: rc %d %d", round, rc0, rc1);
            }
        }
        MPI_Comm_free(&c);
    }
    check(ok, "calls like the last one (the spare request): other buffers, in place, a communicator made again, "
          "persistent requests after", "%s", what);
}

static void on_comm_self(void)
{
    int64_t in[4] = {1, 2, 3, 4}, out[4];
    nbc_request r;
    int rc = nbc_iallreduce(in, out, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_SELF, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    int rc2 = nbc_finalize();
    check(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && out[3] == 4,
          "the library on MPI_COMM_SELF, then nbc_finalize (then MPI_Finalize, at the end)", "rc %d %d", rc, rc2);
    /* and once more, left for MPI_Finalize to clean up */
    rc = nbc_iallreduce(in, out, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_SELF, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
}

/* A communicator whose duplicates were started (an init, ordered or any-order) but never
 * completed by a start: MPI_Comm_free and nbc_finalize complete or release them (MPICH aborted
 * on a request's reference count); on MPICH rank 0 frees before its peers have even made the
 * request. */
#ifdef OPEN_MPI
#define PEERS_MAY_WAIT 1
#else
#define PEERS_MAY_WAIT 0
#endif
static void comm_freed_with_pending_duplicate(void)
{
    int ok = 1;
    char what[200] = "";
    for (int k = 0; k < 4 && ok; k++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Info info;
        MPI_Info_create(&info);
        if (k % 2) MPI_Info_set(info, "nbc_start_order", "any");
        int64_t x[4], y[4];
        fill(x, 4, k);
        nbc_request r;
        /* MPI_Comm_free is collective and may wait for the peers' (Open MPI's does, when a
         * duplication is pending: runtime/comm.c): holding them back is MPICH's case only */
        int hold = !PEERS_MAY_WAIT;
        if (hold && rank != 0) MPI_Barrier(MPI_COMM_WORLD);
        int rc = nbc_allreduce_init(x, y, 4, MPI_INT64_T, MPI_SUM, c, info, &r);
        if (rc == MPI_SUCCESS) rc = nbc_request_free(&r);
        MPI_Info_free(&info);
        MPI_Comm_free(&c);
        if (hold && rank == 0) MPI_Barrier(MPI_COMM_WORLD);
        int rc2 = k >= 2 ? nbc_finalize() : MPI_SUCCESS;
        /* the library still works afterwards */
        nbc_request q;
        int rc3 = nbc_iallreduce(x, y, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &q);
        if (rc3 == MPI_SUCCESS) rc3 = nbc_wait(&q);
        ok = rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && rc3 == MPI_SUCCESS && sum_ok(y, 4, k);
        if (!ok) snprintf(what, sizeof what, "case %d: rc %d %d %d: %s", k, rc, rc2, rc3, nbc_error_message());
    }
    check(ok, "MPI_Comm_free and nbc_finalize after an init that was never started (ordered, any-order)", "%s", what);
}

/* nbc_finalize on one rank between two collectives: the communicators' sequence numbers and
 * duplicates stay what the peers have, so the next collectives (ordered and any-order, on
 * MPI_COMM_WORLD and on a communicator of its own) match. */
static void finalize_on_one_rank(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    int ok = 1;
    char what[200] = "";
    for (int k = 0; k < 3 && ok; k++) {
        int64_t in[100], out[100], pin[10], pout[10];
        fill(in, 100, k);
        fill(pin, 10, k + 1);
        nbc_request r[3];
        int rc = nbc_iallreduce(in, out, 100, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r[0]);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r[0]);
        int rc2 = rank == k % size ? nbc_finalize() : MPI_SUCCESS;
        if (rc == MPI_SUCCESS) rc = nbc_iallreduce(in, out, 100, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r[0]);
        int ok1 = 1;
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r[0]), ok1 = sum_ok(out, 100, k);
        if (rc == MPI_SUCCESS) rc = nbc_iallreduce(in, out, 100, MPI_INT64_T, MPI_SUM, c, &r[1]);
        if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(pin, pout, 10, MPI_INT64_T, MPI_SUM, c, info, &r[2]);
        if (rc == MPI_SUCCESS) rc = nbc_start(&r[2]);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(2, &r[1]);
        ok = rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && ok1 && sum_ok(out, 100, k) && sum_ok(pout, 10, k + 1);
        if (rc == MPI_SUCCESS) nbc_request_free(&r[2]);
        if (!ok) snprintf(what, sizeof what, "round %d: rc %d %d: %s", k, rc, rc2, nbc_error_message());
        if (rank == k % size) nbc_finalize(); /* and the same rank again, on the any-order duplicate */
    }
    MPI_Info_free(&info);
    MPI_Comm_free(&c);
    check(ok, "nbc_finalize on one rank between two collectives: the next ones match (ordered, any-order)", "%s", what);
}

/* A communicator's first ordered call and its first any-order request started together, on many
 * new communicators: their two duplications of it must not cross (with the progress thread, on
 * Open MPI, they did one time in a hundred). */
static void first_calls_of_both_kinds(void)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    int ok = 1;
    char what[200] = "";
    for (int k = 0; k < 100 && ok; k++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        int64_t in[100], out[100], pin[10], pout[10];
        fill(in, 100, k);
        fill(pin, 10, k + 1);
        nbc_request r[2];
        int rc = nbc_iallreduce(in, out, 100, MPI_INT64_T, MPI_SUM, c, &r[0]);
        if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(pin, pout, 10, MPI_INT64_T, MPI_SUM, c, info, &r[1]);
        if (rc == MPI_SUCCESS) rc = nbc_start(&r[1]);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(2, r);
        ok = rc == MPI_SUCCESS && sum_ok(out, 100, k) && sum_ok(pout, 10, k + 1);
        if (rc == MPI_SUCCESS) nbc_request_free(&r[1]);
        if (!ok) snprintf(what, sizeof what, "communicator %d: rc %d: %s", k, rc, nbc_error_message());
        MPI_Comm_free(&c);
    }
    MPI_Info_free(&info);
    check(ok, "the first ordered call and any-order request on 100 new communicators, started together", "%s", what);
}

/* The application makes a communicator from its own while the library duplicates that one (its
 * first call): with the progress thread driving the library's MPI_Comm_idup and the application
 * running MPI_Comm_dup, Open MPI 4.1 gave the two duplicates crossed context ids (a hang). */
static void application_duplicates_alongside(void)
{
    int ok = 1;
    char what[200] = "";
    for (int k = 0; k < 50 && ok; k++) {
        MPI_Comm c, d;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        int64_t in[40], out[40], in2[40], out2[40];
        fill(in, 40, k);
        fill(in2, 40, k + 2);
        nbc_request r[2];
        int rc = nbc_iallreduce(in, out, 40, MPI_INT64_T, MPI_SUM, c, &r[0]);
        MPI_Comm_dup(c, &d);
        if (rc == MPI_SUCCESS) rc = nbc_iallreduce(in2, out2, 40, MPI_INT64_T, MPI_SUM, d, &r[1]);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(2, r);
        ok = rc == MPI_SUCCESS && sum_ok(out, 40, k) && sum_ok(out2, 40, k + 2);
        if (!ok) snprintf(what, sizeof what, "communicator %d: rc %d: %s", k, rc, nbc_error_message());
        MPI_Comm_free(&d);
        MPI_Comm_free(&c);
    }
    check(ok, "MPI_Comm_dup by the application while the library duplicates the same communicator", "%s", what);
}

static int thread_rc;
static char thread_msg[400];
static void *second_thread(void *arg)
{
    (void)arg;
    int64_t in = 1, out;
    nbc_request r = NBC_REQUEST_NULL;
    thread_rc = nbc_iallreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_SELF, &r);
    snprintf(thread_msg, sizeof thread_msg, "%s", nbc_error_message());
    if (thread_rc == MPI_SUCCESS) nbc_wait(&r);
    return NULL;
}

static void second_thread_refused(void)
{
    int provided;
    MPI_Query_thread(&provided);
    pthread_t t;
    pthread_create(&t, NULL, second_thread, NULL);
    pthread_join(t, NULL);
    check(provided == MPI_THREAD_MULTIPLE || (thread_rc == MPI_ERR_OTHER && strstr(thread_msg, "MPI_THREAD_MULTIPLE")),
          "a call from a second thread without MPI_THREAD_MULTIPLE is refused, saying why", "provided %d, rc %d: %s",
          provided, thread_rc, thread_msg);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_lifecycle: timed out (a hang)\n";
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
    alarm(300);
    finalize_with_active_requests();
    requests_across_finalize();
    initialized_again();
    comm_freed_in_flight();
    spare_request();
    comm_freed_with_pending_duplicate();
    finalize_on_one_rank();
    first_calls_of_both_kinds();
    application_duplicates_alongside();
    second_thread_refused();
    on_comm_self();
    int mine[MAX_CHECKS], any[MAX_CHECKS];
    for (int i = 0; i < nchecks; i++) mine[i] = failed[i];
    MPI_Allreduce(mine, any, nchecks, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < nchecks; i++) {
        if (failed[i]) printf("FAIL %s p=%d: rank %d: %s\n", names[i], size, rank, why[i]);
        else if (rank == 0 && !any[i]) printf("ok %s p=%d\n", names[i], size);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
