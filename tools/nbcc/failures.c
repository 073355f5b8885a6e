/* nbcc failures: for each rank f and round k at which f stops, what the survivors hold and
 * what they lack (analysis/failures.h); as text, CSV or an SVG heat map; --compare puts the
 * summaries of several allreduce schedules side by side. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failmap.h"
#include "failures.h"
#include "nbcc.h"

static const char *const usage =
    "usage: nbcc failures NAME|FILE --p P [--count N] [--rank R] [--round K] [--format text|csv|svg]\n"
    "                     [-o FILE] [--type T] [--inplace] [--schedule NAME]\n"
    "       nbcc failures NAME|FILE (--nodes N --ppn K | --node-sizes LIST) [--placement block|cyclic] ...\n"
    "       nbcc failures --compare [NAME|FILE...] [--p LIST | --nodes LIST --ppn LIST [--placement P]]\n"
    "                     [--count N] [--format text|csv]\n"
    "\n"
    "For each rank f and each round k at which f stops (it issues nothing of its rounds k, k+1,\n"
    "...), runs the other ranks' programs of an allreduce symbolically as far as they get, then\n"
    "reports: the contributions lost (no survivor holds them, raw or in a partial result); the\n"
    "survivors that hold the final result, and for which elements; the partial results on\n"
    "survivors that contain f's data (useless for an op that cannot be inverted, unless f's\n"
    "input is known); whether the survivors can still finish without f; and a lower bound on\n"
    "what they must still receive to do so. A send to f is taken never to complete. Then a\n"
    "summary: from which round every element's final value is on two ranks or more, the share\n"
    "of stops after which the survivors can finish, and from which round every stop is so.\n"
    "  --p P          processes, 1..64 (a LIST such as 8,13,64 for --compare; default 8,13,64)\n"
    "  --nodes N, --ppn K\n"
    "                 instead of --p: N nodes of K ranks (lists for --compare, every pair), p <= 64\n"
    "  --node-sizes LIST  instead of --p: uneven nodes, 3,2,1 is 3 + 2 + 1 ranks\n"
    "  --placement P  ranks onto nodes: block (a node's ranks consecutive, the default), cyclic\n"
    "                 (round-robin over the nodes), or both for --compare\n"
    "  --count N      elements (default P)\n"
    "  --rank R       the cases of rank R only, in detail\n"
    "  --round K      the cases of round K only, in detail\n"
    "  --format F     text (default: a map of the cases and the summary), csv (a line per\n"
    "                 case, or per schedule and p with --compare) or svg (a heat map)\n"
    "  -o FILE        write there instead of standard output\n"
    "  --type T       element type, as for nbcc dump (default int)\n"
    "  --inplace      sendbuf is MPI_IN_PLACE (a rank's raw input is then overwritten)\n"
    "  --compare      the summary of every allreduce schedule (or of those named) at each p\n";

typedef struct {
    fail_case *v;
    size_t n, cap;
    int nomem;
} case_list;

static void keep(void *ctx, const fail_case *c)
{
    case_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        fail_case *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->nomem = 1;
            return;
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = *c;
}

static void print_round(FILE *out, const char *what, int64_t k, uint32_t rounds)
{
    if (k < 0) fprintf(out, "%s: never\n", what);
    else if (k >= rounds) fprintf(out, "%s: only once it has finished (round %" PRId64 ")\n", what, k);
    else fprintf(out, "%s: round %" PRId64 "\n", what, k);
}

static void summary_text(FILE *out, const fail_summary *s)
{
    print_round(out, "every element's final value on >= 2 ranks from", s->redundant_from, s->rounds);
    fprintf(out, "the survivors can finish after %u of %u stops (%.1f%%); a contribution is lost after %u\n", s->finishable, s->cases,
            s->cases ? 100.0 * s->finishable / s->cases : 0.0, s->lost_cases);
    print_round(out, "a single failure at any later round is survivable from", s->safe_from, s->rounds);
    fprintf(out, "lower bound to finish, mean over the finishable stops: %.1f elements received\n", s->mean_need);
}

/* One character per case: X lost, + finishable with more to receive, = every survivor done. */
static void map_text(FILE *out, const fail_model *m, const case_list *l)
{
    uint32_t p = (uint32_t)m->base.p;
    fprintf(out, "rank\\round ");
    for (uint32_t k = 0; k < m->maxrounds; k++) fputc(k % 10 == 0 ? '0' + (int)(k / 10 % 10) : ' ', out);
    fprintf(out, "\n           ");
    for (uint32_t k = 0; k < m->maxrounds; k++) fputc('0' + (int)(k % 10), out);
    fprintf(out, "\n");
    for (uint32_t f = 0; f < p; f++) {
        fprintf(out, "%10u ", f);
        for (size_t i = 0; i < l->n; i++)
            if (l->v[i].f == f) fputc(!l->v[i].finishable ? 'X' : l->v[i].need_elems ? '+' : '=', out);
        fprintf(out, "\n");
    }
    fprintf(out, "X: a contribution is lost; +: the survivors can finish but must still exchange data; =: each survivor holds or can compute its result alone\n");
}

static void csv_head(FILE *out)
{
    fprintf(out, "schedule,p,count,rank,round,finishable,lost_ranks,lost_elems,final_elems,done_ranks,done_elems,tainted_elems,"
                 "input_known,need_elems,need_msgs\n");
}

static void csv_case(FILE *out, const fail_model *m, const fail_case *c)
{
    fprintf(out, "%s,%lld,%lld,%u,%u,%d,%d,%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 ",%u\n", m->s->name,
            (long long)m->base.p, (long long)m->base.count, c->f, c->k, c->finishable, __builtin_popcountll(c->lost), c->lost_elems,
            c->final_elems, __builtin_popcountll(c->done_ranks), c->done_elems, c->tainted_elems, c->f_known, c->need_elems,
            c->need_ranks);
}

static int load_model(fail_model *m, const sched_lib *lib, const sched_def *s, const compile_args *a, int quiet_unmet)
{
    diag d;
    diag_init(&d);
    int rc = fail_model_init(m, lib, s, a, &d);
    if (rc == COMPILE_UNMET && !quiet_unmet) nbcc_error("'%s' does not apply for p = %lld, count = %lld", s->name, (long long)a->p, (long long)a->count);
    else if (rc != COMPILE_OK && rc != COMPILE_UNMET) fprintf(stderr, "%s", d.text ? d.text : "");
    diag_free(&d);
    return rc;
}

static int one(const sched_lib *lib, const sched_def *s, const compile_args *a, const char *where, const char *format, long long rank,
               long long round, FILE *out)
{
    fail_model m;
    if (load_model(&m, lib, s, a, 0) != COMPILE_OK) return 1;
    int rc = 0;
    if (rank >= a->p) {
        rc = nbcc_usage_error("--rank must be in 0..p-1");
    } else if (rank >= 0 || round >= 0) { /* the cases asked for, in detail */
        if (!strcmp(format, "csv")) csv_head(out);
        int any = 0;
        for (uint32_t f = 0; f < (uint32_t)a->p && !rc; f++)
            for (uint32_t k = 0; k < m.prog[f]->nrounds && !rc; k++) {
                if ((rank >= 0 && f != rank) || (round >= 0 && k != round)) continue;
                fail_case c;
                any = 1;
                if (fail_case_run(&m, f, k, &c, strcmp(format, "csv") ? out : NULL)) rc = 1;
                else if (!strcmp(format, "csv")) csv_case(out, &m, &c);
            }
        if (!rc && !any) rc = nbcc_usage_error("no such stop: --round is beyond %s rounds", rank >= 0 ? "the rank's" : "every rank's");
    } else {
        fail_summary sum;
        case_list l = {0};
        if (fail_summarize(&m, &sum, keep, &l) || l.nomem) {
            nbcc_error("out of memory");
            rc = 1;
        } else if (!strcmp(format, "svg")) {
            fail_map_svg(&m, &sum, l.v, l.n, out);
        } else if (!strcmp(format, "csv")) {
            csv_head(out);
            for (size_t i = 0; i < l.n; i++) csv_case(out, &m, &l.v[i]);
        } else {
            fprintf(out, "%s (%s): p = %lld%s%s, count = %lld%s, %u rounds\n", s->name, s->src->name, (long long)a->p, where ? " on " : "",
                    where ? where : "", (long long)a->count, a->inplace ? ", in place" : "", m.maxrounds);
            map_text(out, &m, &l);
            summary_text(out, &sum);
        }
        free(l.v);
    }
    fail_model_free(&m);
    return rc;
}

/* One row of --compare: schedule s on base with p ranks (topo, when given, places them). */
static int compare_row(sched_lib *lib, const sched_def *s, long long p, const nbcc_topology *topo, long long count, const compile_args *base,
                       int csv, FILE *out)
{
    compile_args a = *base;
    a.p = p;
    if (topo) nbcc_topology_args(&a, topo);
    a.count = count >= 0 ? count : p;
    fail_model m;
    int rc = load_model(&m, lib, s, &a, 1);
    if (rc == COMPILE_UNMET) return 0;
    if (rc != COMPILE_OK) return 1;
    fail_summary sum;
    if (fail_summarize(&m, &sum, NULL, NULL)) {
        fail_model_free(&m);
        nbcc_error("out of memory");
        return 1;
    }
    char share[32];
    snprintf(share, sizeof share, "%u/%u", sum.finishable, sum.cases);
    if (csv)
        fprintf(out, "%s,%lld,%lld,%u,%" PRId64 ",%u,%u,%u,%" PRId64 ",%.1f%s%s%s\n", s->name, p, (long long)a.count, sum.rounds,
                sum.redundant_from, sum.cases, sum.finishable, sum.lost_cases, sum.safe_from, sum.mean_need, topo ? ",\"" : "",
                topo ? topo->label : "", topo ? "\"" : "");
    else
        fprintf(out, "%-34s %4lld %6lld %6u %10" PRId64 " %11s %9" PRId64 " %9.1f%s%s\n", s->name, p, (long long)a.count, sum.rounds,
                sum.redundant_from, share, sum.safe_from, sum.mean_need, topo ? "  " : "", topo ? topo->label : "");
    fail_model_free(&m);
    return 0;
}

static int compare(sched_lib *lib, char **names, int nnames, const char *p_text, const nbcc_topology *topo, size_t ntopo, long long count,
                   const compile_args *base, const char *format, FILE *out)
{
    const sched_def *list[64];
    int n = 0;
    for (int i = 0; i < nnames; i++) {
        int got = find_schedules(lib, names[i], NULL, list + n, 64 - n);
        if (got <= 0) {
            if (got == 0) complain_missing(names[i], NULL);
            return 1;
        }
        n += got;
    }
    for (size_t i = 0; nnames == 0 && i < lib_count(lib) && n < 64; i++) {
        const sched_def *s = lib_at(lib, i);
        if (s->collective && !strcmp(s->collective, "allreduce")) list[n++] = s;
    }
    int csv = !strcmp(format, "csv");
    if (csv) fprintf(out, "schedule,p,count,rounds,redundant_from,cases,finishable,lost_cases,safe_from,mean_need%s\n", ntopo ? ",topology" : "");
    else fprintf(out, "%-34s %4s %6s %6s %10s %11s %9s %9s%s\n", "schedule", "p", "count", "rounds", "2 copies", "finishable", "safe from",
                 "mean need", ntopo ? "  topology" : "");
    for (size_t j = 0; j < ntopo; j++)
        for (int i = 0; i < n; i++)
            if (compare_row(lib, list[i], topo[j].p, &topo[j], count, base, csv, out)) return 1;
    for (const char *t = ntopo ? "" : p_text; *t;) {
        char *end;
        long long p = strtoll(t, &end, 10);
        if (end == t || p < 1 || p > FAIL_MAX_P || (*end && *end != ',')) return nbcc_usage_error("--p wants a list of 1..64, not '%s'", p_text);
        t = *end ? end + 1 : end;
        for (int i = 0; i < n; i++)
            if (compare_row(lib, list[i], p, NULL, count, base, csv, out)) return 1;
    }
    if (!csv)
        fprintf(out, "2 copies: first round from which every element's final value is on >= 2 ranks (-1: never); finishable:\n"
                     "stops (rank, round) after which the survivors can finish; safe from: first round from which every stop is\n"
                     "finishable; mean need: lower bound of elements the survivors must still receive, mean over finishable stops\n");
    return 0;
}

static int failures_run(const nbcc_opts *op, int argc, const nbcc_topology *topo, size_t ntopo, char **argv);

int nbcc_failures(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    nbcc_opts o = {.count = -1, .rank = -1, .round = -1, .esize = 4, .tname = "int"};
    int status = nbcc_options(argc, argv, "p count rank round format type inplace schedule compare o nodes ppn node-sizes placement", &o);
    if (status >= 0) return status;
    nbcc_topology *topo = NULL;
    size_t ntopo = 0;
    if ((status = o.compare ? nbcc_topologies(&o, &topo, &ntopo) : nbcc_one_topology(&o, &topo, &ntopo))) return status;
    for (size_t i = 0; i < ntopo; i++)
        if (topo[i].p > FAIL_MAX_P) {
            status = nbcc_usage_error("%s is %lld ranks: at most 64", topo[i].label, (long long)topo[i].p);
            nbcc_topologies_free(topo, ntopo);
            return status;
        }
    status = failures_run(&o, argc, topo, ntopo, argv);
    nbcc_topologies_free(topo, ntopo);
    return status;
}

static int failures_run(const nbcc_opts *op, int argc, const nbcc_topology *topo, size_t ntopo, char **argv)
{
    const nbcc_opts o = *op;
    compile_args base = {.esize = o.esize, .commutative = 1, .inplace = o.inplace, .shared_memory = nbcc_shared_memory};
    const char *p_text = o.p, *format = o.format ? o.format : "text", *path = o.output, *sname = o.schedule;
    long long count = o.count, rank = o.rank, round = o.round;
    int cmp = o.compare, rest = o.rest;
    if (strcmp(format, "text") && strcmp(format, "csv") && strcmp(format, "svg")) return nbcc_usage_error("--format is text, csv or svg");
    if (count < -1 || (count >= 0 && count > 1 << 24)) return nbcc_usage_error("--count must be in 0..16777216");
    long long p = 0;
    if (!cmp) {
        char *end = NULL;
        if (p_text) p = strtoll(p_text, &end, 10);
        if (rest != argc - 1) return nbcc_usage_error("name one schedule or file (or give --compare)");
        if (ntopo) p = topo[0].p;
        else if (!p_text || *end || p < 1 || p > FAIL_MAX_P) return nbcc_usage_error("--p P (1..64), or a topology, is required");
        if (rank < -1 || round < -1) return nbcc_usage_error("--rank and --round must be >= 0");
        if (!strcmp(format, "svg") && (rank >= 0 || round >= 0)) return nbcc_usage_error("--format svg draws every case: no --rank or --round");
    } else if (!strcmp(format, "svg")) {
        return nbcc_usage_error("--compare writes text or csv");
    }
    FILE *out = path ? fopen(path, "w") : stdout;
    if (!out) {
        nbcc_error("cannot write %s", path);
        return 1;
    }
    sched_lib *lib = load_builtins();
    int rc;
    if (cmp) {
        rc = compare(lib, argv + rest, argc - rest, p_text ? p_text : "8,13,64", topo, ntopo, count, &base, format, out);
    } else {
        const sched_def *s;
        int n = find_schedules(lib, argv[rest], sname, &s, 1);
        if (n <= 0) {
            if (n == 0) complain_missing(argv[rest], sname);
            rc = 1;
        } else {
            base.p = p;
            if (ntopo) nbcc_topology_args(&base, topo);
            base.count = count >= 0 ? count : p;
            rc = one(lib, s, &base, ntopo ? topo->label : NULL, format, rank, round, out);
        }
    }
    lib_destroy(lib);
    if (path && fclose(out) != 0) {
        nbcc_error("cannot write %s", path);
        rc = 1;
    }
    return rc;
}
