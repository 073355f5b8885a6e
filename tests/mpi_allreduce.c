/* Tests for nbc_iallreduce: every schedule, type, op and count, in place or not; many requests
 * in flight at once; a non-commutative user op; a sub-communicator; the program cache.
 *
 *     mpiexec -n P ./mpi_allreduce        (P = 1..9)
 *
 * Inputs are pure functions of (rank, element index), so each rank computes every expected
 * result locally: no blocking collective runs per case (MPICH busy-polls, and with more ranks
 * than cores every blocking collective crawls). Each rank records its own failures; at the end
 * they are sent once to rank 0, which prints "ok <case>" or "FAIL <case>: <why>" for every case
 * in order and exits 1 if any case failed. NBC_TEST_TIMEOUT (seconds, default 900) bounds the
 * whole run, so that a hung collective fails instead of blocking forever. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nbc.h"

static int P, me; /* size of and rank in MPI_COMM_WORLD */

/* ---- cases: recorded locally, reported once at the end ---------------------------------- */

typedef struct {
    char name[128];
    int failed;
    char why[256]; /* the first failure seen on this rank */
} test_case;

static test_case *cases;
static int ncases, cases_cap;

static test_case *new_case(const char *fmt, ...)
{
    if (ncases == cases_cap) {
        cases_cap = cases_cap ? 2 * cases_cap : 256;
        cases = realloc(cases, (size_t)cases_cap * sizeof *cases);
        if (!cases) abort();
    }
    test_case *c = &cases[ncases++];
    memset(c, 0, sizeof *c);
    int n = snprintf(c->name, sizeof c->name, "allreduce p=%d ", P);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->name + n, sizeof c->name - (size_t)n, fmt, ap);
    va_end(ap);
    return c;
}

static void fail(test_case *c, const char *fmt, ...)
{
    if (c->failed) return; /* keep the first reason */
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    for (char *s = c->why; *s; s++)
        if (*s == '\n' || *s == '\t') *s = ' ';
}

/* Ranks > 0 send "index\twhy\n" lines for their failed cases to rank 0, which prints every case
 * with the reason from the lowest failing rank. Returns the exit status. */
static int report(void)
{
    enum { TAG = 4242 };
    size_t len = 0, cap = 1;
    char *blob = malloc(cap);
    for (int i = 0; i < ncases; i++) {
        if (!cases[i].failed) continue;
        size_t need = len + strlen(cases[i].why) + 16;
        if (need > cap) blob = realloc(blob, cap = 2 * need);
        len += (size_t)sprintf(blob + len, "%d\t%s\n", i, cases[i].why);
    }
    if (me != 0) {
        MPI_Send(blob, (int)len, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
        free(blob);
        return 0;
    }
    int *nfail = calloc((size_t)ncases + 1, sizeof *nfail);
    int *first = calloc((size_t)ncases + 1, sizeof *first);
    char **why = calloc((size_t)ncases + 1, sizeof *why);
    for (int r = 0; r < P; r++) {
        char *text = blob;
        if (r > 0) {
            MPI_Status st;
            int n;
            MPI_Probe(r, TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &n);
            text = malloc((size_t)n + 1);
            MPI_Recv(text, n, MPI_CHAR, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            len = (size_t)n;
        }
        text[len] = '\0';
        for (char *line = text; *line;) {
            char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');
            if (!tab || !nl) break;
            *nl = '\0';
            int i = atoi(line);
            if (i >= 0 && i < ncases && nfail[i]++ == 0) {
                first[i] = r;
                why[i] = strdup(tab + 1);
            }
            line = nl + 1;
        }
        free(text);
    }
    int status = 0;
    for (int i = 0; i < ncases; i++) {
        if (!nfail[i]) {
            printf("ok %s\n", cases[i].name);
            continue;
        }
        status = 1;
        printf("FAIL %s: rank %d: %s", cases[i].name, first[i], why[i]);
        if (nfail[i] > 1) printf(" (and %d more rank%s)", nfail[i] - 1, nfail[i] > 2 ? "s" : "");
        printf("\n");
        free(why[i]);
    }
    fflush(stdout);
    free(nfail);
    free(first);
    free(why);
    return status;
}

/* MPI error class of rc, or rc itself when it is not an MPI error code. */
static int err_class(int rc)
{
    int cls = rc;
    if (rc > 0 && MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return cls;
}

static const char *err_name(int rc)
{
    static char buf[32];
    switch (err_class(rc)) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    default: snprintf(buf, sizeof buf, "error %d", rc); return buf;
    }
}

static void on_timeout(int sig)
{
    static const char msg[] = "FAIL mpi_allreduce: timed out (NBC_TEST_TIMEOUT)\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

/* ---- what is reduced: types, ops, inputs and expected results ---------------------------- */

enum { T_INT, T_INT64, T_FLOAT, T_DOUBLE, T_MAT, NTYPES }; /* T_MAT: 2x2 int matrix */
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_MATMUL, NOPS };
enum { M_AUTO, M_RING, M_RD, NMODES };

static const char *type_names[NTYPES] = {"int", "int64", "float", "double", "mat2x2"};
static const size_t type_scalars[NTYPES] = {1, 1, 1, 1, 4}; /* scalars per element */
static const size_t scalar_size[NTYPES] = {sizeof(int), sizeof(int64_t), sizeof(float),
                                           sizeof(double), sizeof(int)};
static const char *op_names[NOPS] = {"sum", "prod", "max", "min", "matmul"};
static const char *mode_names[NMODES] = {"auto", "ring", "recursive_doubling"};
static const char *mode_schedules[NMODES] = {NULL, "allreduce_ring",
                                             "allreduce_recursive_doubling"};

static MPI_Datatype mat_type; /* MPI_Type_contiguous(4, MPI_INT) */
static MPI_Op matmul_op;      /* non-commutative */

static MPI_Datatype datatype(int t)
{
    switch (t) {
    case T_INT: return MPI_INT;
    case T_INT64: return MPI_INT64_T;
    case T_FLOAT: return MPI_FLOAT;
    case T_DOUBLE: return MPI_DOUBLE;
    default: return mat_type;
    }
}

static MPI_Op mpi_op(int op)
{
    switch (op) {
    case OP_SUM: return MPI_SUM;
    case OP_PROD: return MPI_PROD;
    case OP_MAX: return MPI_MAX;
    case OP_MIN: return MPI_MIN;
    default: return matmul_op;
    }
}

/* 2x2 row-major products, in the MPI order: inout := in * inout (in holds lower ranks). */
static void mat_mul(const int *a, const int *b, int *c)
{
    int c0 = a[0] * b[0] + a[1] * b[2], c1 = a[0] * b[1] + a[1] * b[3];
    int c2 = a[2] * b[0] + a[3] * b[2], c3 = a[2] * b[1] + a[3] * b[3];
    c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3;
}

static void matmul_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int k = 0; k < *len; k++) mat_mul((int *)in + 4 * k, (int *)inout + 4 * k, (int *)inout + 4 * k);
}

/* Rank r's matrix for element i: [[1,a],[0,1]] or [[1,0],[a,1]], a in {1,2}; these do not
 * commute, and a product of 9 of them stays below 3^9. */
static void mat_input(int r, size_t i, int m[4])
{
    int a = 1 + (int)(((size_t)r / 2 + i) % 2);
    int upper = ((size_t)r + i) % 2 == 0;
    m[0] = 1, m[1] = upper ? a : 0, m[2] = upper ? 0 : a, m[3] = 1;
}

/* Rank r's input for scalar s. Exact in every type whatever the reduction order: sums of
 * |v| < 100, products of values in {1, 2, -1}, min/max of small integers. */
static double input(int op, int r, size_t s)
{
    long long k = (long long)(s % 1000003), rr = r;
    switch (op) {
    case OP_SUM: return (double)((rr * 7 + k * 13) % 199 - 99);
    case OP_PROD: {
        int sel = (int)((rr + k + k / 5) % 3);
        return sel == 0 ? 1 : sel == 1 ? (r < 20 ? 2 : 1) : -1; /* 2^P stays exact */
    }
    case OP_MATMUL: {
        int m[4];
        mat_input(r, s / 4, m);
        return m[s % 4];
    }
    default: return (double)((rr * 37 + k * 11) % 201 - 100);
    }
}

/* Expected scalar s of the reduction over ranks first, first + step, ... (n of them), in order. */
static double expected(int op, size_t s, int first, int step, int n)
{
    if (op == OP_MATMUL) {
        int acc[4], m[4];
        mat_input(first, s / 4, acc);
        for (int j = 1; j < n; j++) {
            mat_input(first + j * step, s / 4, m);
            mat_mul(acc, m, acc);
        }
        return acc[s % 4];
    }
    double acc = input(op, first, s);
    for (int j = 1; j < n; j++) {
        double v = input(op, first + j * step, s);
        switch (op) {
        case OP_SUM: acc += v; break;
        case OP_PROD: acc *= v; break;
        case OP_MAX: acc = v > acc ? v : acc; break;
        default: acc = v < acc ? v : acc; break;
        }
    }
    return acc;
}

static void put(int t, void *buf, size_t s, double v)
{
    switch (t) {
    case T_INT64: ((int64_t *)buf)[s] = (int64_t)v; break;
    case T_FLOAT: ((float *)buf)[s] = (float)v; break;
    case T_DOUBLE: ((double *)buf)[s] = v; break;
    default: ((int *)buf)[s] = (int)v; break;
    }
}

static double get(int t, const void *buf, size_t s)
{
    switch (t) {
    case T_INT64: return (double)((const int64_t *)buf)[s];
    case T_FLOAT: return ((const float *)buf)[s];
    case T_DOUBLE: return ((const double *)buf)[s];
    default: return ((const int *)buf)[s];
    }
}

/* ---- a job: one nbc_iallreduce with its buffers --------------------------------------------- */

enum { SENTINEL = 0xA5 }; /* fills a receive buffer that must be overwritten or left alone */

typedef struct {
    int mode, t, op, count, inplace;
    int first, step, n; /* contributing world ranks: first, first + step, ... (n of them) */
    size_t nscal;       /* scalars in the buffers */
    unsigned char *send, *recv;
    nbc_request req;
    int rc;             /* first error code seen, and where */
    const char *stage;
} job;

static void job_init(job *j, int mode, int t, int op, int count, int inplace, int first,
                     int step, int n)
{
    *j = (job){mode, t, op, count, inplace, first, step, n, (size_t)count * type_scalars[t],
               NULL, NULL, NBC_REQUEST_NULL, MPI_SUCCESS, "start"};
    size_t bytes = (j->nscal ? j->nscal : 1) * scalar_size[t];
    j->send = malloc(bytes);
    j->recv = malloc(bytes);
    if (!j->send || !j->recv) abort();
    unsigned char *in = inplace ? j->recv : j->send;
    memset(j->send, SENTINEL, bytes);
    memset(j->recv, SENTINEL, bytes);
    for (size_t s = 0; s < j->nscal; s++) put(t, in, s, input(op, me, s));
}

static void job_start(job *j, MPI_Comm comm)
{
    j->rc = nbc_set_schedule("allreduce", mode_schedules[j->mode]);
    j->stage = "nbc_set_schedule";
    if (j->rc != MPI_SUCCESS) return;
    j->rc = nbc_iallreduce(j->inplace ? MPI_IN_PLACE : j->send, j->recv, j->count,
                           datatype(j->t), mpi_op(j->op), comm, &j->req);
    j->stage = "nbc_iallreduce";
}

static void job_finish(job *j, int rc, const char *stage)
{
    if (j->rc == MPI_SUCCESS) j->rc = rc, j->stage = stage;
}

static const char *job_label(const job *j)
{
    static char buf[96];
    snprintf(buf, sizeof buf, "%s %s %s count=%d%s", mode_names[j->mode], type_names[j->t],
             op_names[j->op], j->count, j->inplace ? " inplace" : "");
    return buf;
}

/* Checks a finished job: either the result (and an unchanged send buffer), or, when expect_err
 * is set, an MPI_ERR_ARG with both buffers untouched. prefix starts the failure message. */
static void job_check(const job *j, int expect_err, test_case *c, const char *prefix)
{
    const unsigned char *in = j->inplace ? j->recv : j->send;
    if (expect_err) {
        if (err_class(j->rc) != MPI_ERR_ARG) {
            fail(c, "%sexpected MPI_ERR_ARG, got %s", prefix, err_name(j->rc));
            return;
        }
        for (size_t b = 0; !j->inplace && b < j->nscal * scalar_size[j->t]; b++)
            if (j->recv[b] != SENTINEL) {
                fail(c, "%sreceive buffer modified at byte %zu on error", prefix, b);
                return;
            }
    } else {
        if (j->rc != MPI_SUCCESS) {
            fail(c, "%s%s returned %s: %s", prefix, j->stage, err_name(j->rc),
                 nbc_error_message());
            return;
        }
        for (size_t s = 0; s < j->nscal; s++) {
            double got = get(j->t, j->recv, s), want = expected(j->op, s, j->first, j->step, j->n);
            if (got != want) {
                fail(c, "%sscalar %zu: got %.17g, expected %.17g", prefix, s, got, want);
                return;
            }
        }
        if (j->inplace) return;
    }
    for (size_t s = 0; s < j->nscal; s++)
        if (get(j->t, in, s) != input(j->op, me, s)) {
            fail(c, "%s%s buffer modified at scalar %zu", prefix, j->inplace ? "receive" : "send", s);
            return;
        }
}

static void job_free(job *j)
{
    free(j->send);
    free(j->recv);
}

/* One blocking-style case on MPI_COMM_WORLD: start, wait, check. */
static void run_case(int mode, int t, int op, int count, int inplace)
{
    job j;
    job_init(&j, mode, t, op, count, inplace, 0, 1, P);
    test_case *c = new_case("%s", job_label(&j));
    /* the ring needs count >= p and a commutative op: forcing it otherwise is MPI_ERR_ARG */
    int expect_err = mode == M_RING && (count < P || op == OP_MATMUL);
    job_start(&j, MPI_COMM_WORLD);
    if (j.rc == MPI_SUCCESS) job_finish(&j, nbc_wait(&j.req), "nbc_wait");
    job_check(&j, expect_err, c, "");
    job_free(&j);
}

/* ---- the cases -------------------------------------------------------------------------- */

/* Distinct values of list[0..n), in order; returns how many. */
static int distinct(int *list, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int k = 0; k < m; k++) dup |= list[k] == list[i];
        if (!dup) list[m++] = list[i];
    }
    return m;
}

static void grid(void)
{
    int counts[] = {0, 1, P - 1, P, P + 1, 1000, 1 << 20};
    int ncounts = distinct(counts, 7);
    for (int m = 0; m < NMODES; m++)
        for (int k = 0; k < ncounts; k++)
            for (int t = 0; t < T_MAT; t++)
                for (int op = 0; op < OP_MATMUL; op++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        /* the big count only for sums of doubles and ints, to keep it short */
                        if (counts[k] == 1 << 20 &&
                            !(op == OP_SUM && (t == T_DOUBLE || t == T_INT)))
                            continue;
                        run_case(m, t, op, counts[k], inplace);
                    }
}

/* 2x2 matrix product: non-commutative, so the result must be M_0 * M_1 * ... * M_{P-1}. */
static void noncommutative(void)
{
    int counts[] = {1, P + 1, 1000};
    int ncounts = distinct(counts, 3);
    static const int modes[] = {M_AUTO, M_RD, M_RING};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < ncounts; k++)
            for (int inplace = 0; inplace < 2; inplace++)
                run_case(modes[m], T_MAT, OP_MATMUL, counts[k], inplace);
}

/* 64 requests in flight at once, completed by nbc_waitall, or by nbc_test loops in reverse. */
static void inflight(int by_test)
{
    enum { N = 64 };
    test_case *c = new_case("inflight %d %s", N, by_test ? "nbc_test reverse" : "nbc_waitall");
    static job jobs[N];
    nbc_request reqs[N];
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i], i % NMODES, (i / 3 + i) % T_MAT, (i / 3) % OP_MATMUL, 1000,
                 (i / 6) % 2, 0, 1, P);
        job_start(&jobs[i], MPI_COMM_WORLD);
        reqs[i] = jobs[i].rc == MPI_SUCCESS ? jobs[i].req : NBC_REQUEST_NULL;
    }
    nbc_set_schedule("allreduce", NULL);
    if (!by_test) {
        int rc = nbc_waitall(N, reqs);
        for (int i = 0; i < N; i++) job_finish(&jobs[i], rc, "nbc_waitall");
    } else {
        for (int i = N - 1; i >= 0; i--) {
            int flag = 0, rc;
            do rc = nbc_test(&reqs[i], &flag);
            while (rc == MPI_SUCCESS && !flag);
            job_finish(&jobs[i], rc, "nbc_test");
        }
    }
    char prefix[128];
    for (int i = 0; i < N; i++) {
        snprintf(prefix, sizeof prefix, "request %d (%s): ", i, job_label(&jobs[i]));
        if (reqs[i] != NBC_REQUEST_NULL && jobs[i].rc == MPI_SUCCESS)
            fail(c, "%scompleted but not set to NBC_REQUEST_NULL", prefix);
        job_check(&jobs[i], 0, c, prefix);
        job_free(&jobs[i]);
    }
}

/* One allreduce on a parity sub-communicator and one on MPI_COMM_WORLD, in flight together,
 * started in opposite orders on even and odd ranks. */
static void subcomm(MPI_Comm sub, int mode)
{
    test_case *c = new_case("subcomm parity + world concurrent %s", mode_names[mode]);
    int parity = me % 2;
    job js, jw;
    job_init(&js, mode, T_DOUBLE, OP_SUM, 1000, 0, parity, 2, (P - parity + 1) / 2);
    job_init(&jw, mode, T_INT, OP_MAX, P + 1, 1, 0, 1, P);
    job_start(parity ? &jw : &js, parity ? MPI_COMM_WORLD : sub);
    job_start(parity ? &js : &jw, parity ? sub : MPI_COMM_WORLD);
    if (jw.rc == MPI_SUCCESS) job_finish(&jw, nbc_wait(&jw.req), "nbc_wait");
    if (js.rc == MPI_SUCCESS) job_finish(&js, nbc_wait(&js.req), "nbc_wait");
    job_check(&js, 0, c, "subcomm: ");
    job_check(&jw, 0, c, "world: ");
    job_free(&js);
    job_free(&jw);
}

/* Repeating an identical call must hit the program cache (and miss nothing new), unless the
 * cache is too small to keep a call's programs (NBC_CACHE_ENTRIES below 2: then only the
 * results are checked). */
static void cache_hits(void)
{
    test_case *c = new_case("cache hit on an identical repeated call");
    nbc_cache_stats before, after;
    for (int round = 0; round < 2; round++) {
        if (round == 1 && nbc_get_cache_stats(&before) != MPI_SUCCESS) {
            fail(c, "nbc_get_cache_stats failed");
            return;
        }
        job j;
        job_init(&j, M_AUTO, T_DOUBLE, OP_SUM, 777, 0, 0, 1, P);
        job_start(&j, MPI_COMM_WORLD);
        if (j.rc == MPI_SUCCESS) job_finish(&j, nbc_wait(&j.req), "nbc_wait");
        job_check(&j, 0, c, round ? "second call: " : "first call: ");
        job_free(&j);
    }
    const char *entries = getenv("NBC_CACHE_ENTRIES");
    if (entries && atoi(entries) < 2) return;
    if (nbc_get_cache_stats(&after) != MPI_SUCCESS)
        fail(c, "nbc_get_cache_stats failed");
    else if (after.hits <= before.hits || after.misses != before.misses)
        fail(c, "repeat went from hits=%llu misses=%llu to hits=%llu misses=%llu",
             (unsigned long long)before.hits, (unsigned long long)before.misses,
             (unsigned long long)after.hits, (unsigned long long)after.misses);
}

int main(int argc, char **argv)
{
    /* NBC_PROGRESS_THREAD=1 runs the suite with the progress thread, which needs this */
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *limit = getenv("NBC_TEST_TIMEOUT");
    signal(SIGALRM, on_timeout);
    alarm(limit && atoi(limit) > 0 ? (unsigned)atoi(limit) : 900);

    MPI_Type_contiguous(4, MPI_INT, &mat_type);
    MPI_Type_commit(&mat_type);
    MPI_Op_create(matmul_fn, 0, &matmul_op);
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &sub);

    test_case *c = new_case("nbc_init");
    int rc = nbc_init();
    if (rc != MPI_SUCCESS) fail(c, "returned %s: %s", err_name(rc), nbc_error_message());
    grid();
    noncommutative();
    inflight(0);
    inflight(1);
    for (int m = 0; m < NMODES; m++) subcomm(sub, m);
    cache_hits();
    nbc_set_schedule("allreduce", NULL);
    c = new_case("nbc_finalize");
    rc = nbc_finalize();
    if (rc != MPI_SUCCESS) fail(c, "returned %s", err_name(rc));

    int status = report();
    MPI_Comm_free(&sub);
    MPI_Op_free(&matmul_op);
    MPI_Type_free(&mat_type);
    MPI_Finalize();
    free(cases);
    return status;
}
