/* Runtime behaviour beyond single results: loading schedules at run time, a thousand
 * collectives in flight on one communicator, and a cache hit that allocates nothing.
 * Run as `mpiexec -n P ./mpi_runtime` from the repository's top directory. Prints ok/FAIL
 * lines from rank 0 (each rank's verdicts are combined once, at the end). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "nbc.h"
#include "state.h"

/* Allocations made by the statically linked library are counted: the linker sends its calls
 * to malloc, calloc and realloc here (-Wl,--wrap=...); MPI's own calls are not affected. */
static long allocations;
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) { allocations++; return __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { allocations++; return __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { allocations++; return __real_realloc(p, n); }

enum { MAX_CHECKS = 32 };
static const char *names[MAX_CHECKS];
static int failed[MAX_CHECKS], nchecks;
static char why[MAX_CHECKS][200];
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

/* One allreduce of count ints (value rank * 10 + i), waited for and verified. */
static int allreduce_ok(int count, int inplace)
{
    int *in = malloc(sizeof(int) * (size_t)(count + 1)), *out = malloc(sizeof(int) * (size_t)(count + 1));
    for (int i = 0; i < count; i++) in[i] = out[i] = rank * 10 + i;
    nbc_request r;
    int rc = nbc_iallreduce(inplace ? MPI_IN_PLACE : in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; ok && i < count; i++) ok = out[i] == 10 * size * (size - 1) / 2 + size * i;
    free(in);
    free(out);
    return ok;
}

static void loading(void)
{
    int rc = nbc_load_schedules("examples/allreduce_star.nbs");
    check(rc == MPI_SUCCESS, "nbc_load_schedules loads a schedule file", "rc %d: %s", rc, nbc_error_message());
    rc = nbc_set_schedule("allreduce", "star");
    int ok = rc == MPI_SUCCESS;
    const int counts[] = {0, 1, 7, 1000};
    for (int k = 0; ok && k < 4; k++) ok = allreduce_ok(counts[k], 0) && allreduce_ok(counts[k], 1);
    check(ok, "a loaded schedule, forced, gives right results", "rc %d: %s", rc, nbc_error_message());

    /* a broken file is refused with its diagnostic, and what was loaded stays */
    char path[64];
    snprintf(path, sizeof path, "broken-%d.nbs", rank);
    FILE *f = fopen(path, "w");
    fputs("schedule allreduce_star implements allreduce\n{\n    round { send recvbuf to p; }\n    let = 1;\n}\n", f);
    fclose(f);
    rc = nbc_load_schedules(path);
    char expect[96];
    snprintf(expect, sizeof expect, "%s:4:9: syntax error", path);
    check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), expect), "a broken schedule file is refused with file:line:column",
          "rc %d: %s", rc, nbc_error_message());
    check(!strchr(nbc_error_message(), '\n') && !strstr(nbc_error_message(), "error: "),
          "nbc_error_message is one plain line (no caret diagram, no 'error: ')", "%s", nbc_error_message());
    unlink(path);
    check(allreduce_ok(5, 0), "after a refused load the loaded schedule still works", "%s", nbc_error_message());
    rc = nbc_load_schedules("no/such/file.nbs");
    check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), "no/such/file.nbs"), "a missing file is refused", "rc %d", rc);
    rc = nbc_load_schedules(NULL);
    check(rc == MPI_ERR_ARG, "a NULL path is refused", "rc %d", rc);
    rc = nbc_set_schedule("allreduce", "ring");
    check(rc == MPI_SUCCESS && allreduce_ok(size, 0), "short names of built-in schedules", "rc %d", rc);
    int one = 1;
    nbc_request r;
    rc = nbc_iallreduce(MPI_IN_PLACE, &one, size > 1 ? 1 : 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    check(size == 1 || (rc == MPI_ERR_ARG && strstr(nbc_error_message(), "count >= p") && !strchr(nbc_error_message(), '\n')),
          "a forced schedule whose precondition fails names it", "rc %d: %s", rc, nbc_error_message());
    nbc_set_schedule("allreduce", NULL);
}

/* Tuning files and selection modes through the API; every call after them still right. */
static void selection(void)
{
    char path[64], expect[96];
    snprintf(path, sizeof path, "tuning-%d.rules", rank);
    FILE *f = fopen(path, "w");
    fputs("allreduce p >= 1 -> linear\nallreduce bytes < -> ring\n", f);
    fclose(f);
    int rc = nbc_load_tuning(path);
    snprintf(expect, sizeof expect, "%s:2: ", path);
    check(rc == MPI_ERR_ARG && strstr(nbc_error_message(), expect), "a broken tuning file is refused with file:line",
          "rc %d: %s", rc, nbc_error_message());
    f = fopen(path, "w");
    fputs("# everything linear\nallreduce -> linear\n", f);
    fclose(f);
    rc = nbc_load_tuning(path);
    check(rc == MPI_SUCCESS && allreduce_ok(77, 0) && allreduce_ok(1000, 1), "a tuning file loads and calls stay right",
          "rc %d: %s", rc, nbc_error_message());
    unlink(path);
    rc = nbc_set_selection("fastest");
    check(rc == MPI_ERR_ARG, "an unknown selection mode is refused", "rc %d", rc);
    rc = nbc_set_selection("model:alpha=2e-6,beta=1e-9,gamma=1e-9");
    check(rc == MPI_SUCCESS && allreduce_ok(5, 0) && allreduce_ok(3000, 0), "model selection gives right results",
          "rc %d: %s", rc, nbc_error_message());
    rc = nbc_set_selection("rules");
    check(rc == MPI_SUCCESS && allreduce_ok(9, 1), "back to the rules", "rc %d", rc);
}

static void thousand_in_flight(void)
{
    enum { N = 1000, COUNT = 3 };
    static int buf[N][COUNT];
    static nbc_request reqs[N];
    int rc = MPI_SUCCESS;
    for (int k = 0; k < N && rc == MPI_SUCCESS; k++) {
        for (int i = 0; i < COUNT; i++) buf[k][i] = rank + k + i;
        rc = nbc_iallreduce(MPI_IN_PLACE, buf[k], COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[k]);
    }
    if (rc == MPI_SUCCESS) rc = nbc_waitall(N, reqs);
    int bad = -1;
    for (int k = 0; k < N && bad < 0 && rc == MPI_SUCCESS; k++)
        for (int i = 0; i < COUNT; i++)
            if (buf[k][i] != size * (size - 1) / 2 + size * (k + i)) bad = k;
    check(rc == MPI_SUCCESS && bad < 0, "1000 collectives in flight on one communicator", "rc %d, first bad %d", rc, bad);
}

/* The first call on a communicator duplicates it without blocking: ranks may touch fresh
 * communicators in different orders. A blocking duplication would deadlock here. */
static void hung(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL runtime first use of communicators in opposite orders: hung\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static void first_use_does_not_block(void)
{
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    signal(SIGALRM, hung);
    alarm(60);
    int x[2] = {rank, rank}, y[2];
    nbc_request r[2];
    MPI_Comm first = rank % 2 ? b : a, second = rank % 2 ? a : b;
    int rc = nbc_iallreduce(&x[0], &y[0], 1, MPI_INT, MPI_SUM, first, &r[0]);
    if (rc == MPI_SUCCESS) rc = nbc_iallreduce(&x[1], &y[1], 1, MPI_INT, MPI_SUM, second, &r[1]);
    if (rc == MPI_SUCCESS) rc = nbc_waitall(2, r);
    alarm(0);
    int want = size * (size - 1) / 2;
    check(rc == MPI_SUCCESS && y[0] == want && y[1] == want, "first use of two communicators in opposite orders does not block",
          "rc %d, %d and %d", rc, y[0], y[1]);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
}

static void hit_allocates_nothing(void)
{
    double in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = rank + i;
    nbc_request r;
    long first = allocations;
    nbc_iallreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r); /* compiles and caches */
    nbc_wait(&r);
    check(allocations > first, "the allocation counter sees the library's allocations", "none counted");
    nbc_cache_stats before, after;
    nbc_get_cache_stats(&before);
    long start = allocations;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < 100 && rc == MPI_SUCCESS; k++) {
        rc = nbc_iallreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    }
    long used = allocations - start;
    nbc_get_cache_stats(&after);
    /* on one node a call looks up two programs: the shared one and the messages' */
    unsigned long long per = nbc_rt.shm.enabled && size > 1 ? 2 : 1;
    check(rc == MPI_SUCCESS && used == 0 && after.hits - before.hits == 100 * per && after.misses == before.misses,
          "100 calls that hit the cache allocate nothing", "rc %d, %ld allocations, %llu hits", rc, used,
          (unsigned long long)(after.hits - before.hits));
}

/* The schedule of an allreduce's request (its messages' program). */
static const char *schedule_of(nbc_request r) { return cache_entry_program(r->progs[RUN_MESSAGES])->name; }

/* A communicator remembers its last call's programs; forcing a schedule, or going back to
 * automatic selection, must still reach the very next call. */
static void memo_follows_forcing(void)
{
    double in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = rank + i;
    nbc_request r;
    char first[64] = "", forced[64] = "", back[64] = "";
    int rc = MPI_SUCCESS;
    for (int k = 0; k < 3 && rc == MPI_SUCCESS; k++) { /* the same call three times: remembered */
        rc = nbc_iallreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc == MPI_SUCCESS) snprintf(first, sizeof first, "%s", schedule_of(r)), rc = nbc_wait(&r);
    }
    const char *other = strcmp(first, "allreduce_linear") ? "allreduce_linear" : "allreduce_ring";
    if (rc == MPI_SUCCESS) rc = nbc_set_schedule("allreduce", other);
    if (rc == MPI_SUCCESS) rc = nbc_iallreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) snprintf(forced, sizeof forced, "%s", schedule_of(r)), rc = nbc_wait(&r);
    if (rc == MPI_SUCCESS) rc = nbc_set_schedule("allreduce", "");
    if (rc == MPI_SUCCESS) rc = nbc_iallreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) snprintf(back, sizeof back, "%s", schedule_of(r)), rc = nbc_wait(&r);
    check(rc == MPI_SUCCESS && !strcmp(forced, other) && !strcmp(back, first),
          "a forced schedule reaches the next call, and automatic selection the one after",
          "rc %d: %s, then %s, then %s", rc, first, forced, back);
}

/* A persistent start allocates nothing and looks nothing up: the cache is not even asked. */
static void start_allocates_nothing(void)
{
    double in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = rank + i;
    MPI_Info any;
    MPI_Info_create(&any);
    MPI_Info_set(any, "nbc_start_order", "any");
    MPI_Info_set(any, "nbc_priority", "3");
    nbc_request r[2];
    int rc = nbc_allreduce_init(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]);
    if (rc == MPI_SUCCESS) rc = nbc_allreduce_init(in, out + 32, 32, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, any, &r[1]);
    MPI_Info_free(&any);
    for (int k = 0; k < 2 && rc == MPI_SUCCESS; k++) { /* the first starts may set up the communicators */
        rc = nbc_startall(2, r);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(2, r);
    }
    nbc_cache_stats before, after;
    nbc_get_cache_stats(&before);
    long start = allocations;
    for (int k = 0; k < 100 && rc == MPI_SUCCESS; k++) {
        rc = nbc_start(&r[k % 2]);
        if (rc == MPI_SUCCESS) rc = nbc_start(&r[1 - k % 2]);
        if (rc == MPI_SUCCESS) rc = nbc_waitall(2, r);
    }
    long used = allocations - start;
    nbc_get_cache_stats(&after);
    check(rc == MPI_SUCCESS && used == 0 && after.hits == before.hits && after.misses == before.misses,
          "200 persistent starts (ordered and any-order) allocate nothing and never ask the cache",
          "rc %d, %ld allocations, %llu lookups", rc, used,
          (unsigned long long)(after.hits + after.misses - before.hits - before.misses));
    nbc_request_free(&r[0]);
    nbc_request_free(&r[1]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    loading();
    selection();
    thousand_in_flight();
    first_use_does_not_block();
    hit_allocates_nothing();
    start_allocates_nothing();
    memo_follows_forcing();
    check(nbc_finalize() == MPI_SUCCESS, "nbc_finalize", "");

    int any[MAX_CHECKS];
    MPI_Reduce(failed, any, nchecks, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0)
        for (int i = 0; i < nchecks; i++) {
            if (any[i]) printf("FAIL runtime p=%d %s: %s\n", size, names[i], failed[i] ? why[i] : "on another rank");
            else printf("ok runtime p=%d %s\n", size, names[i]);
            status |= any[i];
        }
    MPI_Finalize();
    return status;
}
