/* nbcc tune: times every allreduce schedule under mpiexec and writes a tuning file that
 * chooses the fastest at each size (docs/selection.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nbc.h"
#include "nbcc.h"
#include "selection.h"

#include "builtin.h"

static const char *const usage_tune =
    "usage: mpiexec -n P nbcc tune [-o FILE] [--append] [--sizes B,B,..] [--reps R]\n"
    "\n"
    "Times every eligible allreduce schedule (doubles, sum) at each message size under\n"
    "mpiexec, with a progress bar, and writes rules for this p that choose the fastest at each\n"
    "size: a tuning file for NBC_TUNING or nbc_load_tuning. Run it once per p, with --append\n"
    "after the first, to cover several. Sizes default to 8 B .. 4 MiB by factors of 4. A\n"
    "schedule with a segsize parameter is also tried with 256 KiB and 1 MiB segments.\n"
    "Timings are noisy, so each schedule is timed R times (--reps, default 5), the repetitions\n"
    "alternating the schedules, and compared by medians: the built-in rules' choice stays\n"
    "unless another schedule beats it by more than 5% and beyond both interquartile ranges.\n"
    "A warning says when the machine looks busy (load average above the cores, or the built-in\n"
    "choice's timings spread by more than 20%).\n";


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One allreduce of n doubles with whatever schedule is forced; 0 when it is refused. */
static int one_call(double *in, double *out, int n)
{
    nbc_request q;
    return nbc_iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS && nbc_wait(&q) == MPI_SUCCESS;
}

enum { BATCHES = 3 };

/* Time per call of allreduces of n doubles with the schedule forced, measured as bench/ does:
 * the median of BATCHES batches, each a barrier and then back-to-back calls filling about 1 ms
 * (at least one), timed on the slowest rank. Every rank gets the same answer; negative when
 * the schedule refuses the call. */
static double time_schedule(const char *name, double *in, double *out, int n)
{
    if (nbc_set_schedule("allreduce", name) != MPI_SUCCESS) return -1;
    int ok = one_call(in, out, n); /* compiles the program (or finds it cached) */
    double once = MPI_Wtime();
    ok = ok && one_call(in, out, n);
    once = MPI_Wtime() - once;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* all go on, or none */
    MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (!ok) return -1;
    int iters = once >= 1e-3 ? 1 : once > 1e-8 ? (int)(1e-3 / once) : 100000;
    double t[BATCHES];
    for (int r = 0; r < BATCHES; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) ok &= one_call(in, out, n);
        t[r] = (MPI_Wtime() - t0) / iters;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, BATCHES, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    qsort(t, BATCHES, sizeof *t, cmp_double);
    return ok ? t[BATCHES / 2] : -1;
}

/* What tune times: every allreduce schedule as it is, and one with a segment size also at
 * 256 KiB and 1 MiB segments (the default suits the decision tree's mid sizes; large
 * messages on one node want segments that fill the L2). Returns how many, at most max. */
enum { MAX_CANDIDATES = 64, MAX_REPS = 64 };
static int tune_candidates(const sched_lib *lib, char names[][96], int max)
{
    static const long segs[] = {262144, 1048576};
    int n = 0;
    for (size_t i = 0; i < lib_count(lib); i++) {
        const sched_def *s = lib_at(lib, i);
        if (!s->collective || strcmp(s->collective, "allreduce")) continue;
        if (n < max) snprintf(names[n++], 96, "%s", s->name);
        for (const node *prm = s->params; prm; prm = prm->next)
            if (!strcmp(prm->name, "segsize"))
                for (size_t j = 0; j < sizeof segs / sizeof *segs && n < max; j++)
                    snprintf(names[n++], 96, "%s:segsize=%ld", s->name, segs[j]);
    }
    return n;
}

/* The built-in rules' choice for an allreduce of n doubles on p ranks, as a spec for
 * nbc_set_schedule ("name" or "name:param=value,..."); "" when none is eligible. */
static void builtin_choice(const sched_lib *lib, const rule_table *rules, int p, int n, char *spec, size_t size)
{
    compile_args a = {.p = p, .count = n, .esize = 8, .commutative = 1, .shared_memory = nbcc_shared_memory};
    sim_model m;
    sim_model_default(&m);
    const sched_def *s = select_choose(lib, rules, SELECT_RULES, &m, COLL_ALLREDUCE, &a, NULL);
    snprintf(spec, size, "%s", s ? s->name : "");
    for (int k = 0; s && k < a.nparams; k++)
        snprintf(spec + strlen(spec), size - strlen(spec), "%c%s=%lld", k ? ',' : ':', a.params[k].name,
                 (long long)a.params[k].value);
}

/* Median and quartiles of a candidate's repetitions (sorted in place); 0 when it was refused. */
typedef struct {
    double med, q1, q3;
    int ok;
} summary;

static summary summarize(double *t, int reps)
{
    summary s = {0};
    for (int r = 0; r < reps; r++)
        if (t[r] < 0) return s;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    s.med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    s.q1 = t[reps / 4];
    s.q3 = t[(3 * reps) / 4 < reps ? (3 * reps) / 4 : reps - 1];
    s.ok = 1;
    return s;
}

int nbcc_tune(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_tune, stdout);
        return 0;
    }
    nbcc_opts o = {.reps = 5};
    int status = nbcc_options(argc, argv, "o append sizes reps", &o);
    if (status >= 0) return status;
    if (o.rest != argc) return nbcc_usage_error("unexpected argument '%s'", argv[o.rest]);
    const char *out = o.output, *sizes_text = o.sizes;
    int append = o.append, reps = o.reps < 0 || o.reps > MAX_REPS ? 0 : (int)o.reps;
    long sizes[64];
    int nsizes = 0;
    if (sizes_text) {
        char *copy = strdup(sizes_text);
        for (char *save, *tok = strtok_r(copy, ",", &save); tok && nsizes < 64; tok = strtok_r(NULL, ",", &save))
            sizes[nsizes++] = (long)number("--sizes", tok);
        free(copy);
    } else {
        for (long b = 8; b <= (4 << 20); b *= 4) sizes[nsizes++] = b;
    }
    if (reps < 1 || reps > MAX_REPS || nsizes == 0)
        return nbcc_usage_error("%s", nsizes == 0 ? "--sizes is empty" : "--reps must be 1 .. 64");
    /* the load before we add ours: more runnable tasks than cores makes every timing suspect */
    double load = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (getloadavg(&load, 1) != 1) load = 0;
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    sched_lib *lib = lib_create();
    rule_table *rules = rules_create();
    diag d;
    diag_init(&d);
    lib_add_builtins(lib, &d);
    rules_add(rules, lib, nbc_default_rules[0].name, nbc_default_rules[0].text, nbc_default_rules[0].len, 0, &d);
    diag_free(&d);

    long maxn = sizes[nsizes - 1] / 8 + 1;
    double *in = calloc((size_t)maxn, sizeof(double)), *res = calloc((size_t)maxn, sizeof(double));
    if (!in || !res) {
        nbcc_error("out of memory for two buffers of %ld bytes", maxn * 8);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Real data in real pages: pages calloc never wrote all map the kernel's one zero page,
     * which reads from cache and made large inputs look several times cheaper than they are. */
    for (long i = 0; i < maxn; i++) in[i] = (double)(i % 7), res[i] = 1;
    static char names[MAX_CANDIDATES + 1][96];
    static double t[MAX_CANDIDATES + 1][MAX_REPS];
    static char line[64][320];
    int ncand = tune_candidates(lib, names, MAX_CANDIDATES), done = 0, total = ncand * nsizes * reps;
    double worst_spread = 0; /* of the built-in choice, relative to its median */
    for (int k = 0; k < nsizes; k++) {
        int n = (int)(sizes[k] / 8), nsched = ncand, dflt = -1;
        char spec[96];
        builtin_choice(lib, rules, p, n, spec, sizeof spec);
        for (int i = 0; i < nsched; i++)
            if (!strcmp(names[i], spec)) dflt = i;
        if (dflt < 0 && spec[0]) { /* a rule's parameters that are not among the candidates */
            snprintf(names[nsched], sizeof names[nsched], "%s", spec);
            dflt = nsched++;
        }
        /* Repetitions alternate the schedules, each starting one further along, so that a
         * burst of load hits them all alike rather than one schedule's every sample. */
        for (int r = 0; r < reps; r++)
            for (int j = 0; j < nsched; j++) {
                int i = (j + r) % nsched;
                t[i][r] = time_schedule(names[i], in, res, n);
                if (rank == 0) { /* the progress bar */
                    done += done < total; /* a rule's extra candidate is not counted */
                    int bar = 40 * done / total;
                    fprintf(stderr, "\r[%.*s%*s] %3d%%  %8ld B  %-40s", bar, "========================================", 40 - bar,
                            "", 100 * done / total, sizes[k], names[i]);
                    fflush(stderr);
                }
            }
        /* The fastest median wins only if it beats the built-in choice by more than 5% and
         * beyond both interquartile ranges; otherwise the built-in choice stays. */
        summary sum[MAX_CANDIDATES + 1] = {{0}}, def = {0};
        int best = -1;
        for (int i = 0; i < nsched; i++) {
            sum[i] = summarize(t[i], reps);
            if (sum[i].ok && (best < 0 || sum[i].med < sum[best].med)) best = i;
        }
        if (dflt >= 0) def = sum[dflt];
        int win = best;
        if (def.ok && best != dflt && !(sum[best].med < 0.95 * def.med && sum[best].q3 < def.q1)) win = dflt;
        if (def.ok && def.med > 0 && (def.q3 - def.q1) / def.med > worst_spread) worst_spread = (def.q3 - def.q1) / def.med;
        line[k][0] = '\0';
        if (win < 0) continue;
        long lo = k == 0 ? 0 : (sizes[k - 1] + sizes[k]) / 2;
        char hi[48] = "";
        if (k + 1 < nsizes) snprintf(hi, sizeof hi, " bytes < %ld", (sizes[k] + sizes[k + 1]) / 2);
        char why[160] = " (the built-in choice)";
        if (win != dflt && def.ok)
            snprintf(why, sizeof why, " (built-in %s: %.2f us)", names[dflt], def.med * 1e6);
        else if (win == dflt && best != dflt)
            snprintf(why, sizeof why, " (the built-in choice; %s's %.2f us is within the noise)", names[best],
                     sum[best].med * 1e6);
        snprintf(line[k], sizeof line[k], "allreduce p == %d bytes >= %ld%s -> %s   # %.2f us at %ld B%s\n", p, lo, hi,
                 names[win], sum[win].med * 1e6, sizes[k], why);
    }
    nbc_set_schedule("allreduce", NULL);
    if (rank == 0) {
        fprintf(stderr, "\n");
        if (load > cores || worst_spread > 0.2)
            nbcc_error("warning: the machine looks busy (load average %.1f on %ld cores; the built-in choice's timings "
                       "spread by up to %.0f%%): these rules are unreliable, rerun on a quiet machine",
                       load, cores, 100 * worst_spread);
        FILE *f = out ? fopen(out, append ? "a" : "w") : stdout;
        if (!f) {
            nbcc_error("cannot write %s", out ? out : "-");
        } else {
            fprintf(f, "# nbcc tune, p = %d, doubles, sum: medians of %d repetitions alternating the schedules (each the median\n"
                       "# of %d batches of about 1 ms); the built-in choice stays unless beaten by 5%% and beyond the quartiles\n",
                    p, reps, BATCHES);
            for (int k = 0; k < nsizes; k++) fputs(line[k], f); /* sizes between two measured go to the nearer */
            if (out) fclose(f);
        }
    }
    free(in);
    free(res);
    rules_destroy(rules);
    lib_destroy(lib);
    nbc_finalize();
    MPI_Finalize();
    return 0;
}
