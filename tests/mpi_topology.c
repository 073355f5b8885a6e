/* Tests for the node map (runtime/comm.c) and the schedules that read it (allreduce_nodes,
 * allreduce_nodes_small, barrier_nodes, bcast_nodes, reduce_nodes): every communicator learns
 * which of its ranks share a node; the map it learns is the one the environment gives; calls
 * prepared before it is known are chosen again with it; the hierarchical schedules, forced,
 * really run and give exact results; shared memory is used inside each node (one node, or
 * the stages of allreduce_nodes_stage on several).
 *
 *     NBC_NODE_MAP=a,a,b,b mpiexec -n 4 ./mpi_topology   (any map; without NBC_NODE_MAP the
 *                                                       hosts' names make the map;
 *                                                       NBC_PROGRESS_THREAD=1 too)
 *
 * The map the runtime should learn is worked out here: from NBC_NODE_MAP, parsed again, or from
 * the host names, gathered through nbc itself (nbc_iallgather). Expected results are computed
 * locally (no blocking MPI collective anywhere but the final vote on the verdicts). Communicators:
 * MPI_COMM_WORLD, a split by parity, a split in reverse order, a duplicate whose first calls
 * are any-order requests and one whose ranks learn its map at different calls. A schedule not
 * built in fails; automatic selection is checked by its results, and by one rule
 * this test loads (a tuning file whose rules match only one byte count, MAGIC ints), so that
 * the calls of that count show which schedule the node map made the rules choose. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nbc.h"
#include "state.h"

enum { MAX_CHECKS = 160, NAME_LEN = 120 };
static char names[MAX_CHECKS][NAME_LEN];
static int failed[MAX_CHECKS], nchecks;
static char why[MAX_CHECKS][300];
static int rank, size;

/* One verdict per name: a check made in a loop keeps its first failure. */
static int check(int ok, const char *name, const char *fmt, ...)
{
    int i = 0;
    while (i < nchecks && strcmp(names[i], name)) i++;
    if (i == nchecks) {
        if (nchecks == MAX_CHECKS) {
            fprintf(stderr, "mpi_topology: more than %d checks\n", MAX_CHECKS);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        snprintf(names[i], NAME_LEN, "%s", name);
        failed[i] = 0;
        nchecks++;
    }
    if (!ok && !failed[i]) {
        failed[i] = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why[i], sizeof why[i], fmt, ap);
        va_end(ap);
    }
    return ok;
}

static const char *name_of(const char *fmt, ...)
{
    static char buf[8][NAME_LEN]; /* a few alive at once */
    static int next;
    char *b = buf[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, NAME_LEN, fmt, ap);
    va_end(ap);
    return b;
}

/* ---- the node map, as the environment gives it ---- */

static char **label; /* [size]: each world rank's node */
static int have_map;  /* label is known (NBC_NODE_MAP, or the host names once gathered) */

static int from_env(void)
{
    const char *map = getenv("NBC_NODE_MAP");
    if (!map || !*map) return 0; /* empty: unset, as the library reads it */
    label = calloc((size_t)size, sizeof *label);
    const char *at = map;
    for (int r = 0; r < size; r++) {
        const char *comma = strchr(at, ',');
        size_t l = comma ? (size_t)(comma - at) : strlen(at);
        label[r] = strndup(at, l);
        at = comma ? comma + 1 : at + l;
    }
    return 1;
}

/* A communicator of the test: its world ranks in its own order, and what the map says of it. */
typedef struct {
    const char *name;
    MPI_Comm comm;
    int n, me;
    int *members;  /* [n]: world ranks */
    int64_t *of;   /* [n]: node numbers by first appearance, as the runtime numbers them */
    int nodes, largest;
    int spans;     /* several nodes and one of several ranks: node_of is passed to the compiler */
} commd;

static void work_out_map(commd *c)
{
    c->of = malloc((size_t)c->n * sizeof *c->of);
    c->nodes = 0;
    for (int i = 0; i < c->n; i++) {
        int j = 0;
        while (j < i && strcmp(label[c->members[j]], label[c->members[i]])) j++;
        c->of[i] = j < i ? c->of[j] : c->nodes++;
    }
    c->largest = 0;
    for (int j = 0; j < c->nodes; j++) {
        int k = 0;
        for (int i = 0; i < c->n; i++) k += c->of[i] == j;
        if (k > c->largest) c->largest = k;
    }
    c->spans = c->nodes > 1 && c->largest > 1;
}

/* The runtime's map of c against the expected one (the same partition of its ranks into
 * nodes; node_of only when the map spans nodes with sharing). */
static void check_map(const commd *c)
{
    const char *name = name_of("%s: the node map is the environment's", c->name);
    comm_state *cs = comm_state_find(c->comm);
    if (!check(cs && cs->topo == TOPO_KNOWN, name, "not known after a completed call (%s)", cs ? "topo not TOPO_KNOWN" : "no state"))
        return;
    check(cs->nodes == c->nodes, name, "%d nodes, expected %d", cs->nodes, c->nodes);
    check(!!cs->node_of == c->spans, name, "node_of is %s, expected %s (%d nodes, largest %d)", cs->node_of ? "set" : "NULL",
          c->spans ? "set" : "NULL", c->nodes, c->largest);
    if (!cs->node_of || !c->spans) return;
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < i; j++)
            if ((cs->node_of[i] == cs->node_of[j]) != (c->of[i] == c->of[j])) {
                check(0, name, "ranks %d and %d: node_of %lld and %lld, expected %s node", j, i, (long long)cs->node_of[j],
                      (long long)cs->node_of[i], c->of[i] == c->of[j] ? "the same" : "another");
                return;
            }
}

/* ---- values and references ---- */

typedef struct {
    const char *name;
    MPI_Datatype dt;
    MPI_Op op;
    size_t esize;
} kind;

static const kind kinds[] = {{"int sum", MPI_INT, MPI_SUM, sizeof(int)},
                             {"double sum", MPI_DOUBLE, MPI_SUM, sizeof(double)},
                             {"int64 max", MPI_INT64_T, MPI_MAX, sizeof(int64_t)},
                             {"float prod", MPI_FLOAT, MPI_PROD, sizeof(float)}};
enum { NKINDS = sizeof kinds / sizeof *kinds };

/* rank r's element i (of round `salt`): small, so that every result is exact in every type */
static long value(const kind *k, int r, int64_t i, int salt)
{
    if (k->op == MPI_PROD) return 1 + ((r + i + salt) % 3 == 0); /* at most 2^p */
    if (k->op == MPI_MAX) return (r * 13 + i * 7 + salt) % 1000;
    return (r * 7 + i + salt) % 50 + 1;
}

static long expected(const kind *k, int n, int64_t i, int salt)
{
    long v = value(k, 0, i, salt);
    for (int r = 1; r < n; r++) {
        long x = value(k, r, i, salt);
        if (k->op == MPI_SUM) v += x;
        else if (k->op == MPI_MAX) v = x > v ? x : v;
        else v *= x;
    }
    return v;
}

static void put(const kind *k, void *buf, int64_t i, long v)
{
    if (k->dt == MPI_DOUBLE) ((double *)buf)[i] = (double)v;
    else if (k->dt == MPI_INT) ((int *)buf)[i] = (int)v;
    else if (k->dt == MPI_FLOAT) ((float *)buf)[i] = (float)v;
    else ((int64_t *)buf)[i] = v;
}

static long get(const kind *k, const void *buf, int64_t i)
{
    if (k->dt == MPI_DOUBLE) return (long)((const double *)buf)[i];
    if (k->dt == MPI_INT) return ((const int *)buf)[i];
    if (k->dt == MPI_FLOAT) return (long)((const float *)buf)[i];
    return (long)((const int64_t *)buf)[i];
}

static void fill(const kind *k, void *buf, int r, int64_t n, int salt)
{
    for (int64_t i = 0; i < n; i++) put(k, buf, i, value(k, r, i, salt));
}

/* The first wrong element of a reduction over n ranks, or -1. */
static int64_t wrong(const kind *k, const void *buf, int n, int64_t count, int salt)
{
    for (int64_t i = 0; i < count; i++)
        if (get(k, buf, i) != expected(k, n, i, salt)) return i;
    return -1;
}

static void *buffer(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0x5a, bytes); /* not a result */
    return p;
}

static const char *ran(void) { return nbc_rt.reqs.last_ran ? nbc_rt.reqs.last_ran->name : "(none)"; }

/* A request's program, once it has ended (it stays until nbc_wait reports it). */
static const char *program_of(nbc_request req)
{
    while (req->state == REQ_ACTIVE) nbc_progress();
    return req->st.prog ? req->st.prog->name : "(none)";
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t); /* one clock for every rank: one machine, even across namespaces */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the hierarchical schedules ---- */

enum { S_ALLREDUCE, S_ALLREDUCE_SMALL, S_BARRIER, S_BCAST, S_REDUCE, NSCHED };
static const struct {
    const char *coll, *name;
} sched[NSCHED] = {{"allreduce", "allreduce_nodes"}, {"allreduce", "allreduce_nodes_small"}, {"barrier", "barrier_nodes"},
                   {"bcast", "bcast_nodes"}, {"reduce", "reduce_nodes"}};
static int loaded[NSCHED];

/* A call of MAGIC ints is the only one the test's rules choose for: the hierarchical schedule
 * when the map spans nodes with sharing (rules "nodes >= 2 ppn >= 2"). */
enum { MAGIC = 300007, LARGE = 300000 };

static int rules_file(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/nbc-topology-XXXXXX", P_tmpdir);
    int fd = mkstemp(path);
    if (fd < 0) return check(0, "the test's tuning file loads", "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    long b = (long)MAGIC * (long)sizeof(int);
    if (loaded[S_ALLREDUCE])
        fprintf(f, "allreduce nodes >= 2 ppn >= 2 commutative bytes >= %ld bytes < %ld -> allreduce_nodes\n", b, b + 1);
    if (loaded[S_REDUCE]) fprintf(f, "reduce nodes >= 2 ppn >= 2 commutative bytes >= %ld bytes < %ld -> reduce_nodes\n", b, b + 1);
    if (loaded[S_BCAST]) fprintf(f, "bcast nodes >= 2 ppn >= 2 bytes >= %ld bytes < %ld -> bcast_nodes\n", b, b + 1);
    fclose(f);
    int rc = nbc_load_tuning(path);
    unlink(path);
    return check(rc == MPI_SUCCESS, "the test's tuning file loads", "%s", nbc_error_message());
}

/* What the rules should choose for a MAGIC call of sched[s]'s collective on c, or NULL when
 * they may choose anything (no map passed, or the schedule is not loaded). */
static const char *magic_choice(const commd *c, int s) { return c->spans && loaded[s] ? sched[s].name : NULL; }

static const kind *int_sum = &kinds[0];

/* ---- allreduce ---- */

/* One allreduce on c; force: a schedule's index, or -1 for automatic selection. */
static void allreduce(const commd *c, const kind *k, int64_t count, int inplace, int force, int salt)
{
    char *send = buffer((size_t)count * k->esize), *recv = buffer((size_t)count * k->esize);
    fill(k, inplace ? recv : send, c->me, count, salt);
    const char *name = name_of("%s: allreduce, %s", c->name, force < 0 ? "automatic" : sched[force].name);
    nbc_request req;
    int rc = nbc_iallreduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, k->dt, k->op, c->comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    int64_t at = rc == MPI_SUCCESS ? wrong(k, recv, c->n, count, salt) : -1;
    check(rc == MPI_SUCCESS && at < 0, name, "%s count %lld%s: %s at %lld", k->name, (long long)count, inplace ? " in place" : "",
          rc != MPI_SUCCESS ? nbc_error_message() : "wrong result", (long long)at);
    if (force >= 0 && rc == MPI_SUCCESS)
        check(!strcmp(ran(), sched[force].name), name, "%s count %lld%s: ran %s", k->name, (long long)count,
              inplace ? " in place" : "", ran());
    free(send);
    free(recv);
}

static void allreduces(const commd *c, int full)
{
    const int64_t counts[] = {0, 1, c->n - 1, 1001, LARGE};
    int forced[] = {-1, S_ALLREDUCE, S_ALLREDUCE_SMALL};
    for (int f = 0; f < 3; f++) {
        if (forced[f] >= 0 && !loaded[forced[f]]) continue;
        if (forced[f] >= 0) nbc_set_schedule("allreduce", sched[forced[f]].name);
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
            for (int ki = 0; ki < (full ? NKINDS : 2); ki++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    /* the small variant on small counts only; the large count on world for int
                     * sum and in place for double sum, elsewhere for int sum in place only */
                    if (counts[ci] == LARGE && (forced[f] == S_ALLREDUCE_SMALL || (full ? ki > 1 || ki != inplace : ki || !inplace)))
                        continue;
                    allreduce(c, &kinds[ki], counts[ci], inplace, forced[f], (int)ci + ki);
                }
        if (forced[f] >= 0) nbc_set_schedule("allreduce", NULL);
    }
    /* the rules' choice with the map, at the one count they speak of */
    nbc_request req;
    int *send = buffer(MAGIC * sizeof(int)), *recv = buffer(MAGIC * sizeof(int));
    fill(int_sum, send, c->me, MAGIC, 5);
    int rc = nbc_iallreduce(send, recv, MAGIC, MPI_INT, MPI_SUM, c->comm, &req);
    const char *prog = rc == MPI_SUCCESS ? program_of(req) : "(none)";
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    const char *want = magic_choice(c, S_ALLREDUCE), *name = name_of("%s: the rules choose with the map", c->name);
    check(rc == MPI_SUCCESS && wrong(int_sum, recv, c->n, MAGIC, 5) < 0, name, "allreduce of %d ints: %s", MAGIC,
          rc ? nbc_error_message() : "wrong result");
    check(!want || !strcmp(prog, want), name, "allreduce of %d ints ran %s, not %s", MAGIC, prog, want);
    free(send);
    free(recv);
}

/* Shared memory inside each node (when it is on, and p <= 64): on one node the one-node
 * programs; on several, with several ranks on some node, a small commutative allreduce takes
 * the nodes' stages (allreduce_nodes_stage); with one rank a node, messages. */
static void shared_memory(const commd *c)
{
    const char *name = name_of("%s: shared memory inside each node", c->name);
    const kind *k = int_sum;
    enum { COUNT = 1001 };
    int *send = buffer(COUNT * sizeof(int)), *recv = buffer(COUNT * sizeof(int));
    fill(k, send, c->me, COUNT, 3);
    uint64_t before = nbc_rt.shm.shared_calls;
    nbc_request req;
    int rc = nbc_iallreduce(send, recv, COUNT, MPI_INT, MPI_SUM, c->comm, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    check(rc == MPI_SUCCESS && wrong(k, recv, c->n, COUNT, 3) < 0, name, "%s", rc ? nbc_error_message() : "wrong result");
    int shared = nbc_rt.shm.shared_calls > before;
    int want = c->n > 1 && c->n <= NBC_SHM_MAX_RANKS && nbc_rt.shm.enabled && c->nodes < c->n;
    check(shared == want, name, "%d ranks on %d nodes: the call %s (ran %s)", c->n, c->nodes,
          shared ? "took the shared path" : "took messages", ran());
    if (shared && c->nodes > 1)
        check(!strcmp(ran(), "allreduce_nodes_stage"), name, "on %d nodes it ran %s, not allreduce_nodes_stage", c->nodes, ran());
    free(send);
    free(recv);
}

/* ---- reduce, bcast, barrier ---- */

static void reduces(const commd *c)
{
    const int64_t counts[] = {0, 1, c->n - 1, 1001, LARGE};
    for (int f = -1; f < 1; f++) {
        if (f == 0 && !loaded[S_REDUCE]) continue;
        if (f == 0) nbc_set_schedule("reduce", sched[S_REDUCE].name);
        const char *name = name_of("%s: reduce every root, %s", c->name, f < 0 ? "automatic" : sched[S_REDUCE].name);
        for (int root = 0; root < c->n; root++)
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
                for (int ki = 0; ki < 3; ki++) {
                    /* a kind a call (in turn), the large count at the last root only (and the
                     * first on world) */
                    if (ki != (root + (int)ci) % 3 || (counts[ci] == LARGE && root != c->n - 1 && (root || c->comm != MPI_COMM_WORLD)))
                        continue;
                    const kind *k = &kinds[ki];
                    int64_t count = counts[ci];
                    int inplace = (root + (int)ci) % 2 && c->me == root; /* in place at the root, every other call */
                    int salt = root + (int)ci;
                    char *send = buffer((size_t)count * k->esize), *recv = buffer((size_t)count * k->esize);
                    fill(k, inplace ? recv : send, c->me, count, salt);
                    nbc_request req;
                    int rc = nbc_ireduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, k->dt, k->op, root, c->comm, &req);
                    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
                    int64_t at = rc == MPI_SUCCESS && c->me == root ? wrong(k, recv, c->n, count, salt) : -1;
                    check(rc == MPI_SUCCESS && at < 0, name, "root %d, %s count %lld%s: %s at %lld", root, k->name, (long long)count,
                          inplace ? " in place" : "", rc ? nbc_error_message() : "wrong result", (long long)at);
                    if (f == 0 && rc == MPI_SUCCESS)
                        check(!strcmp(ran(), sched[S_REDUCE].name), name, "root %d count %lld: ran %s", root, (long long)count, ran());
                    free(send);
                    free(recv);
                }
        if (f == 0) nbc_set_schedule("reduce", NULL);
    }
}

static void bcasts(const commd *c)
{
    const int64_t counts[] = {0, 1, c->n - 1, 1001, LARGE};
    const kind *k = &kinds[2]; /* int64 */
    for (int f = -1; f < 1; f++) {
        if (f == 0 && !loaded[S_BCAST]) continue;
        if (f == 0) nbc_set_schedule("bcast", sched[S_BCAST].name);
        const char *name = name_of("%s: bcast every root, %s", c->name, f < 0 ? "automatic" : sched[S_BCAST].name);
        for (int root = 0; root < c->n; root++)
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
                int64_t count = counts[ci];
                if (count == LARGE && root != c->n - 1 && (root || c->comm != MPI_COMM_WORLD)) continue; /* as reduces() */
                int64_t *buf = buffer((size_t)count * sizeof *buf);
                if (c->me == root) fill(k, buf, root, count, (int)ci);
                nbc_request req;
                int rc = nbc_ibcast(buf, (int)count, MPI_INT64_T, root, c->comm, &req);
                if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
                int64_t at = -1;
                for (int64_t i = 0; rc == MPI_SUCCESS && i < count && at < 0; i++)
                    if (buf[i] != value(k, root, i, (int)ci)) at = i;
                check(rc == MPI_SUCCESS && at < 0, name, "root %d count %lld: %s at %lld", root, (long long)count,
                      rc ? nbc_error_message() : "wrong result", (long long)at);
                if (f == 0 && rc == MPI_SUCCESS)
                    check(!strcmp(ran(), sched[S_BCAST].name), name, "root %d count %lld: ran %s", root, (long long)count, ran());
                free(buf);
            }
        if (f == 0) nbc_set_schedule("bcast", NULL);
    }
}

/* A barrier ends on no rank before the last has entered it: the last rank enters 20 ms late,
 * and each rank's exit time is compared with every entry time (gathered afterwards). */
static void barriers(const commd *c)
{
    for (int f = -1; f < 1; f++) {
        if (f == 0 && !loaded[S_BARRIER]) continue;
        if (f == 0) nbc_set_schedule("barrier", sched[S_BARRIER].name);
        const char *name = name_of("%s: barrier, %s", c->name, f < 0 ? "automatic" : sched[S_BARRIER].name);
        for (int late = 0; late < c->n; late += c->n > 2 ? c->n - 1 : 1) {
            if (c->me == late) usleep(20000);
            double times[2] = {now(), 0}, *all = malloc(2 * (size_t)c->n * sizeof *all);
            nbc_request req;
            int rc = nbc_ibarrier(c->comm, &req);
            if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
            times[1] = now();
            check(rc == MPI_SUCCESS, name, "%s", nbc_error_message());
            if (f == 0 && rc == MPI_SUCCESS) check(!strcmp(ran(), sched[S_BARRIER].name), name, "ran %s", ran());
            if (nbc_iallgather(times, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, c->comm, &req) == MPI_SUCCESS && nbc_wait(&req) == MPI_SUCCESS) {
                for (int r = 0; r < c->n; r++)
                    check(all[2 * r + 1] >= all[2 * late], name, "rank %d left at %.6f, before rank %d entered at %.6f", r,
                          all[2 * r + 1], late, all[2 * late]);
            } else {
                check(0, name, "gathering the times: %s", nbc_error_message());
            }
            free(all);
        }
        if (f == 0) nbc_set_schedule("barrier", NULL);
    }
}

/* ---- calls prepared before the map is known ---- */

/* The first calls on c, started back to back before any completes (so prepared before its map
 * is known), with a persistent request made before them all, started among them and twice again. */
static void first_calls(commd *c, int persistent)
{
    const kind *dbl = &kinds[1], *i64 = &kinds[2];
    nbc_request pers = NBC_REQUEST_NULL, req[6];
    int *psend = buffer(MAGIC * sizeof(int)), *precv = buffer(MAGIC * sizeof(int));
    int rc[7];
    if (persistent)
        check(nbc_allreduce_init(psend, precv, MAGIC, MPI_INT, MPI_SUM, c->comm, MPI_INFO_NULL, &pers) == MPI_SUCCESS,
              name_of("%s: a persistent request made before the map", c->name), "init: %s", nbc_error_message());
    int *a = buffer(MAGIC * sizeof(int)), *ar = buffer(MAGIC * sizeof(int)), *r = buffer(MAGIC * sizeof(int)),
        *rr = buffer(MAGIC * sizeof(int)), *m = buffer(sizeof(int)), *mr = buffer(sizeof(int));
    double *d = buffer(1001 * sizeof(double)), *dr = buffer(1001 * sizeof(double));
    int64_t *b = buffer(1001 * sizeof(int64_t));
    const kind imax = {"int max", MPI_INT, MPI_MAX, sizeof(int)};
    fill(int_sum, a, c->me, MAGIC, 1);
    fill(dbl, d, c->me, 1001, 2);
    fill(int_sum, r, c->me, MAGIC, 3);
    fill(&imax, m, c->me, 1, 4);
    if (c->me == c->n - 1) fill(i64, b, c->me, 1001, 6);
    fill(int_sum, psend, c->me, MAGIC, 0);
    rc[0] = nbc_iallreduce(a, ar, MAGIC, MPI_INT, MPI_SUM, c->comm, &req[0]);
    rc[1] = nbc_iallreduce(d, dr, 1001, MPI_DOUBLE, MPI_SUM, c->comm, &req[1]);
    rc[2] = nbc_ibarrier(c->comm, &req[2]);
    rc[3] = nbc_ibcast(b, 1001, MPI_INT64_T, c->n - 1, c->comm, &req[3]);
    rc[4] = nbc_ireduce(r, rr, MAGIC, MPI_INT, MPI_SUM, 0, c->comm, &req[4]);
    rc[5] = nbc_iallreduce(m, mr, 1, MPI_INT, MPI_MAX, c->comm, &req[5]);
    rc[6] = persistent ? nbc_start(&pers) : MPI_SUCCESS;
    const char *name = name_of("%s: calls started back to back before the map is known", c->name);
    const char *prog[7];
    for (int i = 0; i < 6; i++) {
        prog[i] = rc[i] == MPI_SUCCESS ? program_of(req[i]) : "(none)";
        if (rc[i] == MPI_SUCCESS) rc[i] = nbc_wait(&req[i]);
        check(rc[i] == MPI_SUCCESS, name, "call %d: %s", i, nbc_error_message());
    }
    if (persistent) {
        prog[6] = rc[6] == MPI_SUCCESS ? program_of(pers) : "(none)";
        if (rc[6] == MPI_SUCCESS) rc[6] = nbc_wait(&pers);
        check(rc[6] == MPI_SUCCESS, name, "the persistent request's first start: %s", nbc_error_message());
    }
    /* the expected map (the host names are gathered only now, through nbc, on world) */
    if (!have_map) {
        enum { HOST = 64 };
        char *mine = calloc(1, HOST), *all = calloc((size_t)size, HOST);
        gethostname(mine, HOST - 1);
        nbc_request g;
        int grc = nbc_iallgather(mine, HOST, MPI_CHAR, all, HOST, MPI_CHAR, MPI_COMM_WORLD, &g);
        if (grc == MPI_SUCCESS) grc = nbc_wait(&g);
        if (check(grc == MPI_SUCCESS, "the host names gathered through nbc", "%s", nbc_error_message())) {
            label = calloc((size_t)size, sizeof *label);
            for (int q = 0; q < size; q++) label[q] = strndup(all + (size_t)q * HOST, HOST);
            have_map = 1;
        }
        free(mine);
        free(all);
    }
    if (have_map) {
        work_out_map(c);
        check_map(c);
    }
    check(rc[0] != MPI_SUCCESS || wrong(int_sum, ar, c->n, MAGIC, 1) < 0, name, "allreduce of %d ints: wrong result", MAGIC);
    check(rc[1] != MPI_SUCCESS || wrong(dbl, dr, c->n, 1001, 2) < 0, name, "allreduce of 1001 doubles: wrong result");
    int64_t at = -1;
    for (int64_t i = 0; i < 1001 && at < 0; i++)
        if (b[i] != value(i64, c->n - 1, i, 6)) at = i;
    check(rc[3] != MPI_SUCCESS || at < 0, name, "bcast: wrong at %lld", (long long)at);
    check(rc[4] != MPI_SUCCESS || c->me != 0 || wrong(int_sum, rr, c->n, MAGIC, 3) < 0, name, "reduce: wrong result at the root");
    check(rc[5] != MPI_SUCCESS || wrong(&imax, mr, c->n, 1, 4) < 0, name, "allreduce max of 1 int: wrong result");
    if (have_map) {
        const char *w = magic_choice(c, S_ALLREDUCE), *wr = magic_choice(c, S_REDUCE);
        check(!w || rc[0] != MPI_SUCCESS || !strcmp(prog[0], w), name, "allreduce of %d ints ran %s, not %s", MAGIC, prog[0], w);
        check(!wr || rc[4] != MPI_SUCCESS || !strcmp(prog[4], wr), name, "reduce of %d ints ran %s, not %s", MAGIC, prog[4], wr);
        check(!w || !persistent || rc[6] != MPI_SUCCESS || !strcmp(prog[6], w), name, "persistent start ran %s, not %s", prog[6], w);
    }
    if (persistent) {
        const char *pname = name_of("%s: a persistent request made before the map", c->name);
        check(rc[6] != MPI_SUCCESS || wrong(int_sum, precv, c->n, MAGIC, 0) < 0, pname, "start 0: wrong result");
        for (int it = 1; it < 3 && rc[6] == MPI_SUCCESS; it++) {
            fill(int_sum, psend, c->me, MAGIC, it);
            memset(precv, 0x5a, MAGIC * sizeof(int));
            int prc = nbc_start(&pers);
            const char *p = prc == MPI_SUCCESS ? program_of(pers) : "(none)";
            if (prc == MPI_SUCCESS) prc = nbc_wait(&pers);
            int64_t pat = prc == MPI_SUCCESS ? wrong(int_sum, precv, c->n, MAGIC, it) : -1;
            check(prc == MPI_SUCCESS && pat < 0, pname, "start %d: %s at %lld", it, prc ? nbc_error_message() : "wrong", (long long)pat);
            const char *w = magic_choice(c, S_ALLREDUCE);
            check(!w || !strcmp(p, w), pname, "start %d ran %s, not %s", it, p, w);
        }
        nbc_request_free(&pers);
    }
    free(a), free(ar), free(r), free(rr), free(m), free(mr), free(d), free(dr), free(b), free(psend), free(precv);
}

/* Any-order requests (on world's duplicate the first calls, so made before its map is known):
 * one of MAGIC ints with free selection (nbc_chunk_bytes 0: the rules choose, with the map),
 * one of 1001 doubles, one of LARGE ints, over 1 MiB, cut into chunks (the default); started in
 * opposite orders on odd and even ranks, twice. */
static void any_order(commd *c)
{
    enum { N = 3 };
    const char *name = name_of("%s: any-order requests", c->name);
    const kind *ks[N] = {int_sum, &kinds[1], int_sum};
    const int64_t counts[N] = {MAGIC, 1001, LARGE};
    nbc_request req[N];
    void *send[N], *recv[N];
    for (int j = 0; j < N; j++) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "nbc_start_order", "any");
        if (j < 2) MPI_Info_set(info, "nbc_chunk_bytes", "0");
        send[j] = buffer((size_t)counts[j] * ks[j]->esize);
        recv[j] = buffer((size_t)counts[j] * ks[j]->esize);
        int rc = nbc_allreduce_init(send[j], recv[j], (int)counts[j], ks[j]->dt, MPI_SUM, c->comm, info, &req[j]);
        MPI_Info_free(&info);
        if (!check(rc == MPI_SUCCESS, name, "init %d: %s", j, nbc_error_message())) return;
    }
    for (int it = 0; it < 2; it++) {
        for (int j = 0; j < N; j++) fill(ks[j], send[j], c->me, counts[j], it + j);
        for (int j = 0; j < N; j++) {
            int jj = c->me % 2 ? N - 1 - j : j;
            check(nbc_start(&req[jj]) == MPI_SUCCESS, name, "start %d of request %d: %s", it, jj, nbc_error_message());
        }
        const char *prog = program_of(req[0]);
        check(nbc_waitall(N, req) == MPI_SUCCESS, name, "iteration %d: %s", it, nbc_error_message());
        for (int j = 0; j < N; j++) {
            int64_t at = wrong(ks[j], recv[j], c->n, counts[j], it + j);
            check(at < 0, name, "iteration %d, request %d (%lld): wrong at %lld", it, j, (long long)counts[j], (long long)at);
        }
        if (it == 0) {
            work_out_map(c);
            check_map(c);
        }
        const char *w = magic_choice(c, S_ALLREDUCE);
        check(!w || !strcmp(prog, w), name, "iteration %d: the request of %d ints ran %s, not %s", it, MAGIC, prog, w);
    }
    for (int j = 0; j < N; j++) {
        nbc_request_free(&req[j]);
        free(send[j]);
        free(recv[j]);
    }
}

/* Calls of one signature as the first on c, ranks learning its map at different moments: even
 * ranks wait for each before starting the next (so the later ones are prepared with the map
 * known, from the memo or the spare request), odd ranks start them all back to back (the later
 * ones prepared before it, from the memo); every rank must run the same program, the rules'.
 * Then a multi-buffer allreduce (nbc_iallreduce_multi: 3 buffers a rank), checked by its results. */
static void uneven_knowledge(commd *c)
{
    enum { N = 2, NB = 3, COUNT = 1001 };
    const char *name = name_of("%s: ranks that learn the map at different calls", c->name);
    int *send[N], *recv[N], rc[N];
    nbc_request req[N];
    const char *prog[N];
    for (int j = 0; j < N; j++) {
        send[j] = buffer(MAGIC * sizeof(int));
        recv[j] = buffer(MAGIC * sizeof(int));
        fill(int_sum, send[j], c->me, MAGIC, j);
    }
    for (int j = 0; j < N; j++) {
        rc[j] = nbc_iallreduce(send[j], recv[j], MAGIC, MPI_INT, MPI_SUM, c->comm, &req[j]);
        if (c->me % 2 == 0) {
            prog[j] = rc[j] == MPI_SUCCESS ? program_of(req[j]) : "(none)";
            if (rc[j] == MPI_SUCCESS) rc[j] = nbc_wait(&req[j]);
        }
    }
    for (int j = 0; j < N; j++) {
        if (c->me % 2) {
            prog[j] = rc[j] == MPI_SUCCESS ? program_of(req[j]) : "(none)";
            if (rc[j] == MPI_SUCCESS) rc[j] = nbc_wait(&req[j]);
        }
        int64_t at = rc[j] == MPI_SUCCESS ? wrong(int_sum, recv[j], c->n, MAGIC, j) : -1;
        check(rc[j] == MPI_SUCCESS && at < 0, name, "call %d: %s at %lld", j, rc[j] ? nbc_error_message() : "wrong", (long long)at);
        const char *w = magic_choice(c, S_ALLREDUCE);
        check(!w || rc[j] != MPI_SUCCESS || !strcmp(prog[j], w), name, "call %d ran %s, not %s", j, prog[j], w);
        free(send[j]);
        free(recv[j]);
    }
    work_out_map(c);
    check_map(c);
    void *bufs[NB];
    for (int b = 0; b < NB; b++) {
        bufs[b] = buffer(COUNT * sizeof(int));
        fill(int_sum, bufs[b], c->me * NB + b, COUNT, 7);
    }
    nbc_request mreq;
    int mrc = nbc_iallreduce_multi(bufs, NB, COUNT, MPI_INT, MPI_SUM, c->comm, &mreq);
    if (mrc == MPI_SUCCESS) mrc = nbc_wait(&mreq);
    const char *mname = name_of("%s: a multi-buffer allreduce", c->name);
    for (int b = 0; b < NB; b++) {
        int64_t at = mrc == MPI_SUCCESS ? wrong(int_sum, bufs[b], c->n * NB, COUNT, 7) : -1;
        check(mrc == MPI_SUCCESS && at < 0, mname, "buffer %d: %s at %lld", b, mrc ? nbc_error_message() : "wrong", (long long)at);
        free(bufs[b]);
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "FAIL mpi_topology: timed out (a hang)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(2);
}

static void subcomm(commd *c, const char *name, int color, int key, int full)
{
    c->name = name;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &c->comm);
    MPI_Comm_size(c->comm, &c->n);
    MPI_Comm_rank(c->comm, &c->me);
    c->members = malloc((size_t)c->n * sizeof *c->members);
    int i = 0; /* the split's order worked out here: by key, then by world rank */
    if (color == 0) /* the reversed one: every rank, key size - 1 - rank */
        for (int r = size - 1; r >= 0; r--) c->members[i++] = r;
    else
        for (int r = rank % 2; r < size; r += 2) c->members[i++] = r;
    check(i == c->n && c->members[c->me] == rank, name_of("%s: made", name), "%d ranks, expected %d", c->n, i);
    first_calls(c, 0);
    shared_memory(c);
    allreduces(c, full);
    reduces(c);
    bcasts(c);
    barriers(c);
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
    if (nbc_init() != MPI_SUCCESS) {
        printf("FAIL mpi_topology: nbc_init p=%d: %s\n", size, nbc_error_message());
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    have_map = from_env();
    char where[200];
    snprintf(where, sizeof where, "p=%d %s%s", size, have_map ? "map=" : "hosts", have_map ? getenv("NBC_NODE_MAP") : "");
    for (int s = 0; s < NSCHED; s++) {
        loaded[s] = nbc_set_schedule(sched[s].coll, sched[s].name) == MPI_SUCCESS;
        nbc_set_schedule(sched[s].coll, NULL);
    }
    rules_file();

    /* world: its first calls before anything else, so prepared before its map is known */
    commd world = {.name = "world", .comm = MPI_COMM_WORLD, .n = size, .me = rank};
    world.members = malloc((size_t)size * sizeof *world.members);
    for (int r = 0; r < size; r++) world.members[r] = r;
    first_calls(&world, 1);
    if (!have_map) goto out;
    shared_memory(&world);
    allreduces(&world, 1);
    reduces(&world);
    bcasts(&world);
    barriers(&world);

    /* any-order requests as the first calls of a duplicate of world */
    commd dup = world;
    dup.name = "world's duplicate";
    MPI_Comm_dup(MPI_COMM_WORLD, &dup.comm);
    any_order(&dup);
    MPI_Comm_free(&dup.comm);
    dup.name = "world's second duplicate";
    MPI_Comm_dup(MPI_COMM_WORLD, &dup.comm);
    uneven_knowledge(&dup);
    MPI_Comm_free(&dup.comm);

    commd parity, reversed;
    subcomm(&parity, "split by parity", 1 + rank % 2, rank, 0);
    subcomm(&reversed, "split in reverse", 0, size - 1 - rank, 0);
    MPI_Comm_free(&parity.comm);
    MPI_Comm_free(&reversed.comm);

out:;
    /* the verdicts, the same checks on every rank (one vote, the only blocking collective) */
    int counts[2] = {nchecks, -nchecks};
    MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int same = counts[0] == -counts[1];
    int mine[MAX_CHECKS], any[MAX_CHECKS];
    for (int i = 0; i < nchecks; i++) mine[i] = failed[i];
    if (same) MPI_Allreduce(mine, any, nchecks, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!same && rank == 0) printf("FAIL mpi_topology %s: the ranks made different checks\n", where);
    for (int i = 0; i < nchecks; i++) {
        if (failed[i]) printf("FAIL %s %s: rank %d: %s\n", names[i], where, rank, why[i]);
        else if ((rank == 0 || !same) && (!same || !any[i])) printf("ok %s %s\n", names[i], where);
    }
    if (rank == 0)
        for (int s = 0; s < NSCHED; s++)
            if (!loaded[s]) printf("FAIL %s %s: not built in (nbcc list)\n", sched[s].name, where);
    fflush(stdout);
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
