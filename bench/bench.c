/* bench: nbc_iallreduce side by side with MPICH's MPI_Iallreduce and MPI_Allreduce (doubles,
 * MPI_SUM), and the overlap of each non-blocking allreduce with computation.
 *
 *   mpiexec -n P bench [--min BYTES] [--max BYTES] [--reps N] [--batch SECONDS]
 *                      [--schedules SPEC,SPEC,...] [--shared-schedules SPEC,...] [--csv FILE] [--dat FILE]
 *                      [--overlap FILE] [--overlap-sizes BYTES,BYTES,...]
 *                      [--load FILE_OR_DIR] [--spin US] [--spin-variant US] [--shm 0|1]
 *                      [--shared 0|1] [--thread-multiple 0|1]
 *
 * Sizes go from --min to --max by doubling. For each size every variant (nbc with automatic
 * selection, nbc with each schedule of --schedules forced, as nbc_set_schedule takes them,
 * MPI_Iallreduce + MPI_Wait, MPI_Allreduce) is checked once against the exact sum, warmed up,
 * then timed in --reps batches. A batch is a barrier and then as many back-to-back calls as
 * fill about --batch seconds; its time per call is the slowest rank's. Batches of all variants
 * are interleaved, so that drift in the machine hits every variant alike. Rank 0 prints the
 * median, the quartiles and the ratios to both MPICH calls, and writes them to the CSV file;
 * --dat writes the medians one size a line, for gnuplot. --load loads more schedules (to measure
 * a schedule file of one's own, forced with --schedules); --spin and --spin-variant: see finish().
 * nbc_auto_shared (--shared 1, the default) is nbc_auto on buffers from nbc_alloc_mem, which
 * ranks on one node reduce out of each other's memory (docs/shared-memory.md); each schedule of
 * --shared-schedules is forced on those buffers too. nbc_anyorder_shared (with --shared 1) is a
 * persistent any-order request (nbc_allreduce_init, nbc_start_order=any: docs/total-reduce.md)
 * on those buffers, one per size, timed as nbc_start + nbc_wait.
 * With two ranks on one node (and --shm 1, the default) two more rows: shm_prototype, an
 * allreduce that reduces straight out of the peer's memory (bench/shm.h, on buffers of its own
 * in a shared window), and bound, the least time an allreduce can take there (shm.h says how
 * it is measured; its row is that one figure, not batches).
 *
 * Overlap, as the OSU micro-benchmarks define it: pure = the collective alone; compute = the
 * same length of computation alone (chunks of a few microseconds); overall = start the
 * collective, compute with a test call after every chunk, wait. overlap % =
 * 100 · (1 − (overall − compute) / pure), clamped to 0 .. 100. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"
#include "shm.h"
#include "stats.h"

/* NBC_SHARED: nbc_auto on buffers from nbc_alloc_mem, which ranks on one node reduce out of
 * each other's memory (docs/shared-memory.md); NBC_ANYORDER: a persistent any-order request on
 * those buffers (what training codes start out of order); SHM: the prototype of shm.h (at p = 2
 * on one node), on buffers in a shared window; BOUND: not a call but shm.h's lower bound,
 * measured per size and printed as a row. */
enum { NBC, NBC_SHARED, NBC_ANYORDER, MPI_NB, MPI_BLOCKING, SHM, BOUND };
typedef struct {
    int kind;
    const char *spec; /* nbc: the forced schedule, NULL for automatic selection */
    double spin_us;   /* nbc: see finish() */
    char name[96];    /* in the table and the CSV */
} variant;

enum { MAX_VARIANTS = 40, MAX_REPS = 201 };
static variant vars[MAX_VARIANTS];
static int nvars;
static int rank, nprocs;
static double *sendbuf, *recvbuf;
static double *shared_send, *shared_recv; /* from nbc_alloc_mem */
static shm_pair pair;

static void die(const char *what)
{
    fprintf(stderr, "bench: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Small integers, so the sum is exact whatever order the ranks are added in. */
static double value(int r, size_t i) { return (double)((r + 1) * (int)(i % 97)); }

static int is_nbc(const variant *v) { return v->kind == NBC || v->kind == NBC_SHARED || v->kind == NBC_ANYORDER; }

/* NBC_ANYORDER's request for the size being measured: made at its first call (an init is
 * collective, and every rank makes its first call of a variant at the same point), freed by
 * anyorder_free once the size is done, so that it costs nothing in any other size's batches. */
static nbc_request anyorder = NBC_REQUEST_NULL;

static int anyorder_start(int n, nbc_request *nr)
{
    if (anyorder == NBC_REQUEST_NULL) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "nbc_start_order", "any");
        int rc = nbc_allreduce_init(shared_send, shared_recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, info, &anyorder);
        MPI_Info_free(&info);
        if (rc != MPI_SUCCESS) {
            anyorder = NBC_REQUEST_NULL;
            return rc;
        }
    }
    *nr = anyorder; /* the handle: waiting leaves a persistent request inactive, not freed */
    return nbc_start(nr);
}

static void anyorder_free(void)
{
    if (anyorder != NBC_REQUEST_NULL && nbc_request_free(&anyorder) != MPI_SUCCESS)
        die(nbc_error_message());
    anyorder = NBC_REQUEST_NULL;
}

static int start(const variant *v, int n, nbc_request *nr, MPI_Request *mr)
{
    if (v->kind == NBC) return nbc_iallreduce(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, nr);
    if (v->kind == NBC_SHARED) return nbc_iallreduce(shared_send, shared_recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, nr);
    if (v->kind == NBC_ANYORDER) return anyorder_start(n, nr);
    if (v->kind == MPI_NB) return MPI_Iallreduce(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, mr);
    if (v->kind == SHM) {
        shm_allreduce(&pair, (size_t)n);
        return MPI_SUCCESS;
    }
    return MPI_Allreduce(sendbuf, recvbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static int test(const variant *v, nbc_request *nr, MPI_Request *mr, int *done)
{
    if (is_nbc(v)) return nbc_test(nr, done);
    return MPI_Test(mr, done, MPI_STATUS_IGNORE);
}

/* --spin US (every nbc variant) or --spin-variant US (one more variant, nbc_auto_spinUS):
 * call nbc_test for up to US microseconds before nbc_wait, which yields the CPU whenever a pass
 * moved nothing. This is what a spin-then-yield nbc_wait would do. */
static int finish(const variant *v, nbc_request *nr, MPI_Request *mr)
{
    if (v->kind == NBC && v->spin_us > 0) {
        int done = 0, rc = MPI_SUCCESS;
        double until = MPI_Wtime() + v->spin_us * 1e-6;
        while (!done && rc == MPI_SUCCESS && MPI_Wtime() < until) rc = nbc_test(nr, &done);
        if (done || rc != MPI_SUCCESS) return rc;
    }
    if (is_nbc(v)) return nbc_wait(nr);
    if (v->kind == MPI_NB) return MPI_Wait(mr, MPI_STATUS_IGNORE);
    return MPI_SUCCESS;
}

static void force(const variant *v)
{
    if (is_nbc(v) && nbc_set_schedule("allreduce", v->spec) != MPI_SUCCESS)
        die(nbc_error_message());
}

static int one_call(const variant *v, int n)
{
    nbc_request nr;
    MPI_Request mr;
    int rc = start(v, n, &nr, &mr);
    return rc == MPI_SUCCESS ? finish(v, &nr, &mr) : rc;
}

/* -1: the schedule refuses this call (its preconditions fail, alike on every rank); 0: wrong
 * result; 1: right. */
static int check(const variant *v, int n)
{
    force(v);
    double *out = v->kind == SHM ? pair.recv[pair.me] : recvbuf;
    if (v->kind == NBC_SHARED || v->kind == NBC_ANYORDER) out = shared_recv;
    for (int i = 0; i < n; i++) out[i] = -1;
    int refused = one_call(v, n) != MPI_SUCCESS, any;
    MPI_Allreduce(&refused, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) return -1;
    int ok = 1;
    double want = (double)nprocs * (nprocs + 1) / 2;
    for (int i = 0; i < n; i++) ok &= out[i] == want * (double)(i % 97);
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* The mean time of one call over a batch of `iters`, on this rank. WARM_CALLS calls first,
 * untimed, so that every batch finds its variant's buffers in cache whichever variant ran
 * before: from about 1 MiB a batch holds only a few calls, and the first calls after another
 * variant's (on other buffers) take up to twice as long, at 4 MiB for three calls. Without them
 * the variants that follow one on other buffers (nbc_auto_shared, shm_prototype,
 * MPI_Iallreduce) paid for it and the others did not. */
#define WARM_CALLS 3
static double batch(const variant *v, int n, int iters)
{
    force(v);
    for (int i = 0; i < WARM_CALLS; i++)
        if (one_call(v, n) != MPI_SUCCESS) die("a call failed");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        if (one_call(v, n) != MPI_SUCCESS) die("a timed call failed");
    return (MPI_Wtime() - t0) / iters;
}

/* ---- computation for the overlap test: dependent arithmetic, no memory traffic ---- */

static volatile double sink, factor = 0.999999;
static __attribute__((noinline)) void compute(long iters)
{
    double x = sink, f = factor;
    for (long i = 0; i < iters; i++) x = x * f + 1e-6;
    sink = x;
}

/* Iterations of compute() that take about `us` microseconds, alike on every rank (rank 0's). */
static long calibrate(double us)
{
    long n = 1 << 20;
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        double t0 = MPI_Wtime();
        compute(n);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }
    long chunk = (long)(us * 1e-6 / best * (double)n);
    if (chunk < 1) chunk = 1;
    MPI_Bcast(&chunk, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return chunk;
}

/* Max over ranks of each of the n values, everywhere. */
static void max_all(double *t, int n) { MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); }

static void overlap(FILE *out, const variant *v, int n, int reps, long chunk, double chunk_us)
{
    double pure[MAX_REPS], comp[MAX_REPS], all[MAX_REPS], tests[MAX_REPS];
    nbc_request nr;
    MPI_Request mr;
    force(v);
    for (int i = 0; i < 3; i++) one_call(v, n);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        one_call(v, n);
        pure[r] = MPI_Wtime() - t0;
    }
    max_all(pure, reps);
    double t_pure = summarize(pure, reps).median;
    long chunks = (long)ceil(t_pure * 1e6 / chunk_us);
    if (chunks < 1) chunks = 1;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long c = 0; c < chunks; c++) compute(chunk);
        comp[r] = MPI_Wtime() - t0;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        if (start(v, n, &nr, &mr) != MPI_SUCCESS) die("overlap: start failed");
        int done = 0, ntests = 0;
        for (long c = 0; c < chunks; c++) {
            compute(chunk);
            if (!done) {
                test(v, &nr, &mr, &done);
                ntests++;
            }
        }
        if (!done) finish(v, &nr, &mr);
        all[r] = MPI_Wtime() - t0;
        tests[r] = ntests;
    }
    max_all(comp, reps);
    max_all(all, reps);
    max_all(tests, reps);
    double t_comp = summarize(comp, reps).median, t_all = summarize(all, reps).median;
    double pct = 100.0 * (1.0 - (t_all - t_comp) / t_pure);
    pct = pct < 0 ? 0 : pct > 100 ? 100 : pct;
    if (rank == 0) {
        printf("%2d %10d  %-34s %11.2f %11.2f %11.2f %8.1f %6.0f\n", nprocs, n * 8, v->name, t_pure * 1e6,
               t_comp * 1e6, t_all * 1e6, pct, summarize(tests, reps).median);
        if (out)
            fprintf(out, "%d,%d,%s,%.3f,%.3f,%.3f,%.1f,%.0f,%.2f\n", nprocs, n * 8, v->name, t_pure * 1e6,
                    t_comp * 1e6, t_all * 1e6, pct, summarize(tests, reps).median, chunk_us);
    }
}

/* ---- the comparison ---- */

static void add(int kind, const char *spec, double spin_us, const char *name)
{
    if (nvars == MAX_VARIANTS) die("too many variants");
    variant *v = &vars[nvars++];
    v->kind = kind;
    v->spec = spec;
    v->spin_us = spin_us;
    snprintf(v->name, sizeof v->name, "%s", name);
}

static void row_header(void)
{
    printf("%2s %10s  %-34s %11s %11s %11s %8s %8s %9s\n", "p", "bytes", "variant", "median_us", "p25_us",
           "p75_us", "/Iallred", "/Allred", "MB/s");
}

static void compare(FILE *csv, FILE *dat, int n, int reps, double batch_s)
{
    int ok[MAX_VARIANTS];
    int mpi_nb = -1, mpi_b = -1, anyorder_row = -1;
    double bound = 0;
    for (int v = 0; v < nvars; v++) {
        if (vars[v].kind == BOUND) {
            static double sync; /* measured once: it does not depend on the size */
            if (sync == 0) sync = shm_sync_time(&pair);
            bound = 2 * sync + shm_kernel_time(&pair, (size_t)n);
            ok[v] = 1;
            continue;
        }
        ok[v] = check(&vars[v], n);
        if (vars[v].kind == MPI_NB) mpi_nb = v;
        if (vars[v].kind == MPI_BLOCKING) mpi_b = v;
        if (vars[v].kind == NBC_ANYORDER && ok[v] >= 0) anyorder_row = v;
    }
    /* warm-up, and a probe of how many calls fill a batch (alike on every rank) */
    double probe = 0;
    for (int v = 0; v < nvars; v++)
        if (ok[v] >= 0 && vars[v].kind != BOUND) {
            batch(&vars[v], n, 2);
            if (v == mpi_nb) probe = batch(&vars[v], n, 3);
        }
    MPI_Allreduce(MPI_IN_PLACE, &probe, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int iters = probe > 0 ? (int)(batch_s / probe) : 1;
    iters = iters < 1 ? 1 : iters > 20000 ? 20000 : iters;

    static double t[MAX_VARIANTS][MAX_REPS];
    for (int r = 0; r < reps; r++)
        for (int v = 0; v < nvars; v++)
            t[v][r] = ok[v] < 0 ? 0 : vars[v].kind == BOUND ? bound : batch(&vars[v], n, iters);
    anyorder_free();
    for (int v = 0; v < nvars; v++) max_all(t[v], reps);
    if (rank != 0) return;

    stats s[MAX_VARIANTS];
    for (int v = 0; v < nvars; v++)
        if (ok[v] >= 0) s[v] = summarize(t[v], reps);
    size_t bytes = (size_t)n * sizeof(double);
    if (dat) fprintf(dat, "%zu", bytes);
    for (int v = 0; v < nvars; v++) {
        if (ok[v] < 0) {
            if (dat) fprintf(dat, " NaN");
            continue;
        }
        double ri = s[v].median / s[mpi_nb].median, ra = s[v].median / s[mpi_b].median;
        double mbs = (double)bytes / s[v].median / 1e6;
        char note[128] = "";
        if (vars[v].kind == BOUND) {
            int at = snprintf(note, sizeof note, "  nbc_auto / bound = %.2f", s[0].median / s[v].median);
            if (anyorder_row >= 0)
                snprintf(note + at, sizeof note - (size_t)at, ", nbc_anyorder_shared / bound = %.2f",
                         s[anyorder_row].median / s[v].median);
        }
        printf("%2d %10zu  %-34s %11.2f %11.2f %11.2f %8.2f %8.2f %9.1f%s%s\n", nprocs, bytes, vars[v].name,
               s[v].median * 1e6, s[v].p25 * 1e6, s[v].p75 * 1e6, ri, ra, mbs, ok[v] ? "" : "  WRONG RESULT", note);
        if (csv)
            fprintf(csv, "%d,%zu,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.4f,%.4f,%.3f,%d\n", nprocs, bytes, vars[v].name,
                    s[v].median * 1e6, s[v].p25 * 1e6, s[v].p75 * 1e6, s[v].min * 1e6, s[v].max * 1e6, reps, iters,
                    ri, ra, mbs, ok[v]);
        if (dat) fprintf(dat, " %.4f", s[v].median * 1e6);
    }
    if (dat) fprintf(dat, "\n");
    printf("\n");
    fflush(stdout);
}

static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10;
    else if (*end == 'M' || *end == 'm') v <<= 20;
    return v;
}

static FILE *open_out(const char *path)
{
    if (!path || rank != 0) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write an output file");
    return f;
}

int main(int argc, char **argv)
{
    /* --thread-multiple 1: what nbc's progress thread (NBC_PROGRESS_THREAD=1) and MPICH's
     * (MPIR_CVAR_ASYNC_PROGRESS=1) need; read before MPI_Init, which it changes. */
    int multiple = 0;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--thread-multiple")) multiple = atoi(argv[i + 1]);
    if (multiple) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) die("MPI_THREAD_MULTIPLE is not provided");
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    long min = 8, max = 64L << 20;
    int reps = 15;
    double spin_us = 0, spin_variant = 0;
    double batch_s = 0.002;
    int use_shm = 1, use_shared = 1;
    const char *schedules = "", *shared_schedules = "", *csv_path = NULL, *dat_path = NULL, *ovl_path = NULL;
    const char *ovl_sizes = "8,1024,65536,1048576,16777216", *load = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--min")) min = parse_size(v);
        else if (!strcmp(k, "--max")) max = parse_size(v);
        else if (!strcmp(k, "--reps")) reps = atoi(v);
        else if (!strcmp(k, "--batch")) batch_s = atof(v);
        else if (!strcmp(k, "--schedules")) schedules = v;
        else if (!strcmp(k, "--shared-schedules")) shared_schedules = v;
        else if (!strcmp(k, "--csv")) csv_path = v;
        else if (!strcmp(k, "--dat")) dat_path = v;
        else if (!strcmp(k, "--overlap")) ovl_path = v;
        else if (!strcmp(k, "--overlap-sizes")) ovl_sizes = v;
        else if (!strcmp(k, "--spin")) spin_us = atof(v);
        else if (!strcmp(k, "--spin-variant")) spin_variant = atof(v);
        else if (!strcmp(k, "--load")) load = v;
        else if (!strcmp(k, "--shm")) use_shm = atoi(v);
        else if (!strcmp(k, "--shared")) use_shared = atoi(v);
        else if (!strcmp(k, "--thread-multiple")) continue; /* read above */
        else die("unknown option (see the comment at the top of bench/bench.c)");
    }
    if (argc % 2 == 0) die("options take one value each");
    if (min < 8 || max < min || reps < 1 || reps > MAX_REPS) die("bad --min, --max or --reps");

    add(NBC, NULL, spin_us, "nbc_auto");
    if (use_shared) {
        add(NBC_SHARED, NULL, spin_us, "nbc_auto_shared");
        add(NBC_ANYORDER, NULL, 0, "nbc_anyorder_shared");
    }
    char spin_name[96];
    snprintf(spin_name, sizeof spin_name, "nbc_auto_spin%.0fus", spin_variant);
    if (spin_variant > 0) add(NBC, NULL, spin_variant, spin_name);
    char *list = strdup(schedules);
    for (char *save, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        char name[96];
        snprintf(name, sizeof name, "nbc_%s", strncmp(s, "allreduce_", 10) ? s : s + 10);
        add(NBC, s, spin_us, name);
    }
    char *shared_list = strdup(shared_schedules);
    for (char *save, *s = strtok_r(shared_list, ",", &save); s && use_shared; s = strtok_r(NULL, ",", &save)) {
        char name[96];
        snprintf(name, sizeof name, "nbc_%s_shared", strncmp(s, "allreduce_", 10) ? s : s + 10);
        add(NBC_SHARED, s, spin_us, name);
    }
    if (use_shm && shm_open(&pair, MPI_COMM_WORLD, (size_t)max)) {
        add(SHM, NULL, 0, "shm_prototype");
        add(BOUND, NULL, 0, "bound");
    }
    add(MPI_NB, NULL, 0, "MPI_Iallreduce");
    add(MPI_BLOCKING, NULL, 0, "MPI_Allreduce");

    size_t maxn = (size_t)max / sizeof(double);
    sendbuf = malloc(maxn * sizeof *sendbuf);
    recvbuf = malloc(maxn * sizeof *recvbuf);
    if (!sendbuf || !recvbuf) die("out of memory");
    for (size_t i = 0; i < maxn; i++) sendbuf[i] = value(rank, i), recvbuf[i] = 0;
    if (pair.open)
        for (size_t i = 0; i < maxn; i++) pair.send[pair.me][i] = value(rank, i), pair.recv[pair.me][i] = 0;
    if (nbc_init() != MPI_SUCCESS || (load && nbc_load_schedules(load) != MPI_SUCCESS)) die(nbc_error_message());
    if (use_shared) {
        if (nbc_alloc_mem((MPI_Aint)(maxn * sizeof(double)), &shared_send) != MPI_SUCCESS ||
            nbc_alloc_mem((MPI_Aint)(maxn * sizeof(double)), &shared_recv) != MPI_SUCCESS)
            die(nbc_error_message());
        for (size_t i = 0; i < maxn; i++) shared_send[i] = value(rank, i), shared_recv[i] = 0;
    }

    FILE *csv = open_out(csv_path), *dat = open_out(dat_path);
    if (csv) fprintf(csv, "p,bytes,variant,median_us,p25_us,p75_us,min_us,max_us,reps,iters,ratio_iallreduce,ratio_allreduce,MBps,correct\n");
    if (dat) {
        fprintf(dat, "bytes");
        for (int v = 0; v < nvars; v++) fprintf(dat, " %s", vars[v].name);
        fprintf(dat, "\n");
    }
    if (rank == 0) {
        printf("# allreduce of doubles, MPI_SUM, p = %d; times per call: median and quartiles of %d batches\n"
               "# (slowest rank of each); /Iallred and /Allred = median / MPICH's median (< 1: nbc faster)\n",
               nprocs, reps);
        row_header();
    }
    for (long b = min; b <= max; b *= 2) compare(csv, dat, (int)(b / 8), reps, batch_s);
    if (csv) fclose(csv);
    if (dat) fclose(dat);

    if (ovl_path) {
        FILE *out = open_out(ovl_path);
        const double chunk_us = 5;
        long chunk = calibrate(chunk_us);
        if (out) fprintf(out, "p,bytes,variant,pure_us,compute_us,overall_us,overlap_pct,tests,chunk_us\n");
        if (rank == 0)
            printf("# overlap: computation in chunks of %.0f us, a test call after each; overlap = 1 - (overall - compute) / pure\n"
                   "%2s %10s  %-34s %11s %11s %11s %8s %6s\n",
                   chunk_us, "p", "bytes", "variant", "pure_us", "compute_us", "overall_us", "overlap%", "tests");
        char *sz = strdup(ovl_sizes);
        for (char *save, *s = strtok_r(sz, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            long b = parse_size(s);
            if (b < 8 || b > max) continue;
            for (int v = 0; v < nvars; v++)
                if ((vars[v].kind == NBC && !vars[v].spec) || vars[v].kind == MPI_NB)
                    overlap(out, &vars[v], (int)(b / 8), reps, chunk, chunk_us);
        }
        free(sz);
        if (out) fclose(out);
    }
    free(list);
    free(shared_list);
    free(sendbuf);
    free(recvbuf);
    shm_close(&pair);
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
