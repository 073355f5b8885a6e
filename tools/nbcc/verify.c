/* nbcc verify: every rank's program of a schedule run together against a simulated network,
 * for each p and count given (docs/verify.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "collectives.h"
#include "nbcc.h"
#include "verify.h"

static const char *const usage_verify =
    "usage: nbcc verify NAME|FILE --p LIST [--count N | --counts LIST] [--type T] [--inplace]\n"
    "                   [--commutative | --noncommutative] [--root R] [--seed S] [--param NAME=V]\n"
    "                   [--nbufs LIST] [--schedule NAME]\n"
    "                   [--nodes LIST --ppn LIST | --node-sizes LIST] [--placement block|cyclic|both]\n"
    "\n"
    "Compiles every rank's program of a schedule (a built-in name, every schedule implementing a\n"
    "collective in FILE, or --schedule NAME) and runs them together against a simulated network,\n"
    "for each p and count given. Checks that every send meets a receive of the same length from\n"
    "the right peer, in posting order, and nothing is left unmatched; that nothing deadlocks (the\n"
    "cycle of waiting ranks is shown); that no instruction reaches outside its buffer; that no\n"
    "round writes bytes it also sends or receives; and that every rank ends with exactly the\n"
    "collective's result: each rank's contribution once in each element, and for an 'ordered'\n"
    "schedule in rank order 0, 1, ..., p-1 with the same grouping on every rank. A failure names\n"
    "the schedule's file:line:column, the rank, the round and the instruction.\n"
    "  --p LIST         process counts: 8, 1..64, 2,4,8 or 2..1024*2 (default 1..16)\n"
    "  --count N        elements (default: --counts 1,p+1,1001)\n"
    "  --counts LIST    several counts; items may use p, as in 0,p-1,2p+1\n"
    "  --type T         element type, as for nbcc dump (default int)\n"
    "  --inplace        sendbuf is MPI_IN_PLACE\n"
    "  --commutative    only a commutative op\n"
    "  --noncommutative only a non-commutative op (default: a commutative one, and also a\n"
    "                   non-commutative one for 'ordered' schedules, where the order is checked)\n"
    "  --root R         the root of a rooted collective (default 0)\n"
    "  --seed S         seed of the random contributions (default 1)\n"
    "  --param NAME=V   a value for one of the schedule's params (up to 4 times)\n"
    "  --nbufs LIST     buffers per rank of a multi-buffer collective (default 1,3; always in place)\n"
    "  --nodes LIST, --ppn LIST\n"
    "                   instead of --p: every topology of N nodes with K ranks each (lists as for\n"
    "                   --p); memory is shared inside each node\n"
    "  --node-sizes LIST  one topology of uneven nodes: 3,2,1 is 3 + 2 + 1 ranks\n"
    "  --placement P    ranks onto nodes: block (a node's ranks consecutive, the default), cyclic\n"
    "                   (round-robin over the nodes) or both\n"
    "Exit status 1 when a check fails, or when the schedule applies to none of the cases.\n";


typedef struct {
    const char *p_text, *counts_text, *nbufs_text;
    const nbcc_topology *topo; /* instead of p_text when ntopo > 0 */
    size_t ntopo;
    char where[160];           /* "p = 1..16", or the topologies */
    int only_commutative, only_noncommutative;
    long long seed;
    compile_args base;   /* element size, in place, root, params */
} verify_opts;

static int verify_one(const sched_lib *lib, const sched_def *s, const verify_opts *o)
{
    int64_t *ps;
    size_t nps = o->ntopo;
    if (nps) {
        if (!(ps = malloc(nps * sizeof *ps))) return 2;
        for (size_t i = 0; i < nps; i++) ps[i] = o->topo[i].p;
    } else if (expand_list("--p", o->p_text, 0, 0, &ps, &nps)) {
        return 2;
    }
    int c = collective_from_name(s->collective);
    int reduces = collective_reduces(c);
    int64_t *nbufs, one = 1;
    size_t nnbufs = 1;
    if (!is_multi(s)) nbufs = &one;
    else if (expand_list("--nbufs", o->nbufs_text, 0, 0, &nbufs, &nnbufs)) {
        free(ps);
        return 2;
    }
    int variants[2], nv = 0;
    if (!o->only_noncommutative) variants[nv++] = 1;
    if (o->only_noncommutative || (!o->only_commutative && s->ordered && reduces)) variants[nv++] = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    verify_stats st = {0};
    long runs = 0, skipped = 0;
    int bad = 0;
    diag d;
    diag_init(&d);
    for (size_t i = 0; i < nps && !bad; i++) {
        if (ps[i] < 1 || o->base.root >= ps[i]) {
            nbcc_usage_error("p = %" PRId64 " is not a process count%s", ps[i], ps[i] >= 1 ? " with that --root" : "");
            bad = 2;
            break;
        }
        int64_t *counts;
        size_t ncounts;
        if (collective_has_vectors(c)) { /* the verifier's vector cases, the random ones with two seeds */
            ncounts = 2 * VERIFY_VECTOR_CASES - 2;
            counts = calloc(ncounts, sizeof *counts);
            bad = counts ? 0 : 2;
            for (size_t j = 0; counts && j < ncounts; j++) counts[j] = (int64_t)j;
            if (bad) break;
        } else if (c == COLL_BARRIER) { /* no data: the runtime compiles barriers for count 0 alone */
            counts = calloc(1, sizeof *counts);
            ncounts = 1;
        } else if (expand_list("--counts", o->counts_text, ps[i], 1, &counts, &ncounts)) {
            bad = 2;
            break;
        }
        for (size_t j = 0; j < ncounts && !bad; j++) {
            if (counts[j] < 0) continue; /* 0 or p-1 at p = 1, say: nothing to do */
            for (size_t b = 0; b < nnbufs * (size_t)nv && !bad; b++) {
                verify_args a = {.base = o->base, .seed = (uint64_t)o->seed};
                a.base.p = ps[i];
                if (o->ntopo) nbcc_topology_args(&a.base, &o->topo[i]);
                a.base.count = counts[j];
                if (collective_has_vectors(c)) { /* cases 0, 1, 2, 3, 4, then 2, 3, 4 with the next seed */
                    a.vcase = counts[j] < VERIFY_VECTOR_CASES ? (int)counts[j] : (int)counts[j] - VERIFY_VECTOR_CASES + 2;
                    a.seed += counts[j] >= VERIFY_VECTOR_CASES;
                    a.base.count = 0;
                }
                a.base.commutative = variants[b % (size_t)nv];
                a.base.nbufs = nbufs[b / (size_t)nv];
                int rc = verify_schedule(lib, s, &a, &d, &st);
                if (rc == VERIFY_SKIP) skipped++;
                if (rc == VERIFY_OK) runs++;
                if (rc == VERIFY_FAIL) {
                    fprintf(stderr, "%s", d.text ? d.text : "");
                    bad = 1;
                }
            }
        }
        free(counts);
    }
    diag_free(&d);
    free(ps);
    if (nbufs != &one) free(nbufs);
    if (bad) return bad;
    if (runs == 0) {
        nbcc_error("%s (%s): nothing verified: its requirements fail for every p and count given", s->name, s->src->name);
        return 1;
    }
    printf("%s (%s): ok, %ld runs (%s; counts %s;%s%s%s %s)", s->name, s->src->name, runs, o->where,
           c == COLL_BARRIER ? "0 (a barrier)" : collective_has_vectors(c) ? "from the vector cases of docs/verify.md" : o->counts_text,
           is_multi(s) ? " buffers " : "", is_multi(s) ? o->nbufs_text : "", is_multi(s) ? ";" : o->base.inplace ? " in place;" : "", nv == 2 ? "commutative and non-commutative op" : variants[0] ? "commutative op" : "non-commutative op");
    if (skipped) printf(", %ld skipped by its requirements", skipped);
    printf("; %" PRIu64 " programs, %" PRIu64 " instructions, %" PRIu64 " messages; %.2f s\n", st.programs, st.insns, st.messages,
           seconds_since(&t0));
    return 0;
}

int nbcc_verify(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_verify, stdout);
        return 0;
    }
    nbcc_opts opt = {.seed = 1, .esize = 4, .tname = "int"};
    int status = nbcc_options(argc, argv, "p count counts type inplace commutative noncommutative root seed schedule param nbufs "
                                          "nodes ppn node-sizes placement", &opt);
    if (status >= 0) return status;
    nbcc_topology *topo;
    size_t ntopo;
    if ((status = nbcc_topologies(&opt, &topo, &ntopo))) return status;
    verify_opts o = {.p_text = opt.p ? opt.p : "1..16", .counts_text = opt.counts ? opt.counts : "1,p+1,1001",
                     .nbufs_text = opt.nbufs ? opt.nbufs : "1,3", .seed = opt.seed,
                     .only_commutative = opt.only_commutative, .only_noncommutative = opt.noncommutative,
                     .base = opt.params};
    o.base.esize = opt.esize;
    o.base.max_insns = nbcc_max_insns;
    o.base.inplace = opt.inplace;
    o.base.root = opt.root;
    o.topo = topo;
    o.ntopo = ntopo;
    const char *placed = !opt.placement || !strcmp(opt.placement, "block") ? "block placement"
                         : !strcmp(opt.placement, "cyclic")                ? "cyclic placement"
                                                                           : "block and cyclic placements";
    if (!ntopo) snprintf(o.where, sizeof o.where, "p = %s", o.p_text);
    else if (opt.node_sizes) snprintf(o.where, sizeof o.where, "nodes of %s ranks, %s", opt.node_sizes, placed);
    else snprintf(o.where, sizeof o.where, "%s nodes x %s ranks, %s", opt.nodes, opt.ppn, placed);
    const char *sname = opt.schedule;
    int rest = opt.rest;
    if (rest != argc - 1 || o.base.root < 0 || (o.only_commutative && o.only_noncommutative)) {
        nbcc_topologies_free(topo, ntopo);
        return nbcc_usage_error("%s", rest != argc - 1 ? "name one schedule or file"
                                      : o.base.root < 0 ? "--root must be >= 0" : "--commutative or --noncommutative, not both");
    }
    sched_lib *lib = load_builtins();
    const sched_def *found[64];
    int n = find_schedules(lib, argv[rest], sname, found, 64), rc = n > 0 ? 0 : 1;
    struct stat st;
    if (n == 0 && !sname && stat(argv[rest], &st) == 0) {
        printf("%s: no schedule in it implements a collective (building blocks only): nothing to verify\n", argv[rest]);
        rc = 0;
    } else if (n == 0) {
        complain_missing(argv[rest], sname);
    }
    for (int i = 0; i < n && rc != 2; i++) {
        int r = verify_one(lib, found[i], &o);
        if (r > rc) rc = r;
    }
    lib_destroy(lib);
    nbcc_topologies_free(topo, ntopo);
    return rc;
}
