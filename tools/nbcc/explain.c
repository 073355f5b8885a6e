/* nbcc explain: which schedule the library would choose for a call, and why, under each
 * selection mode (the library's own selection code, run without MPI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "collectives.h"
#include "nbcc.h"
#include "selection.h"


static const char *const usage_explain =
    "usage: nbcc explain --collective C --p P --count N [--type T] [--op O] [--inplace]\n"
    "                    [--tuning FILE] [--model alpha=..,beta=..,gamma=..] [--mode rules|model]\n"
    "       nbcc explain ... --nodes N --ppn K | --node-sizes LIST [--placement block|cyclic]\n"
    "\n"
    "Prints which schedule the library would choose for the call and why, under each mode:\n"
    "the built-in rules (the rule that matched, and any fallback), the rules extended by a\n"
    "tuning file (--tuning), and the cost model (every eligible schedule's predicted time).\n"
    "--mode shows just one of them.\n"
    "  --collective C  allreduce reduce bcast barrier reduce_scatter allgather alltoall gather\n"
    "                  scatter scan exscan allreduce_multi\n"
    "  --type T        int8 char int16 short int int32 float int64 long double long_double\n"
    "                  (default double)\n"
    "  --op O          sum prod min max band bor bxor land lor lxor (commutative), or\n"
    "                  noncommutative (a user-defined op that is not)\n"
    "  --nodes N --ppn K  instead of --p: N nodes of K ranks, the node map the library learns\n"
    "                  when a communicator spans nodes (rules' `nodes` and `ppn` conditions)\n"
    "  --node-sizes LIST  uneven nodes: 3,2,1 is 3 + 2 + 1 ranks\n"
    "  --placement P   block (a node's ranks consecutive, the default) or cyclic (round-robin)\n";


int nbcc_explain(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_explain, stdout);
        return 0;
    }
    nbcc_opts o = {.count = -1, .esize = 8, .tname = "double"};
    int status = nbcc_options(argc, argv, "collective p count type op inplace tuning model mode nodes ppn node-sizes placement", &o);
    if (status >= 0) return status;
    nbcc_topology *topo;
    size_t ntopo;
    if ((status = nbcc_one_topology(&o, &topo, &ntopo))) return status;
    const char *coll_name = o.collective ? o.collective : "allreduce", *type = o.tname, *op = o.op ? o.op : "sum",
               *tuning = o.tuning, *model_text = o.model, *only = o.mode;
    long long p = ntopo ? topo->p : o.p ? number("--p", o.p) : 0, count = o.count;
    int inplace = o.inplace, esize = o.esize, rest = o.rest;
    int coll = collective_from_name(coll_name);
    const char *bad = coll < 0 ? NULL
                      : only && strcmp(only, "rules") && strcmp(only, "model") ? "--mode is rules or model"
                      : p < 1       ? "--p P is required"
                      : count < 0   ? "--count N is required"
                      : rest != argc ? "unexpected arguments"
                                     : NULL;
    if (coll < 0 || bad) {
        nbcc_topologies_free(topo, ntopo);
        return coll < 0 ? nbcc_bad_collective(coll_name) : nbcc_usage_error("%s", bad);
    }
    int commutative = strcmp(op, "noncommutative") != 0;

    diag d, why;
    diag_init(&d);
    diag_init(&why);
    sched_lib *lib = lib_create();
    rule_table *rules = rules_create();
    int rc = lib_add_builtins(lib, &d) ||
             rules_add(rules, lib, nbc_default_rules[0].name, nbc_default_rules[0].text, nbc_default_rules[0].len, 0, &d);
    sim_model m;
    sim_model_default(&m);
    char err[256];
    if (!rc && model_text && sim_model_parse(model_text, &m, err, sizeof err) != 0) {
        diag_append(&d, "--model: %s\n", err);
        rc = -1;
    }
    if (!rc) {
        printf("%s of %lld %s (%lld bytes), p = %lld%s, op %s%s\n", coll_name, count, type, count * esize, p,
               ntopo ? " on several nodes" : "", op, inplace ? ", in place" : "");
        compile_args a = {.p = p, .count = count, .esize = esize, .inplace = inplace, .commutative = commutative,
                          .shared_memory = nbcc_shared_memory};
        if (ntopo) nbcc_topology_args(&a, topo);
        const compile_args base = a; /* each mode chooses from the call as it is (choosing sets parameters) */
        if (!only || !strcmp(only, "rules")) printf("\nmode rules (built-in):\n");
        if (!only || !strcmp(only, "rules")) select_choose(lib, rules, SELECT_RULES, &m, (nbc_collective)coll, &a, &why);
        fputs(why.text ? why.text : "", stdout);
        if (tuning && (!only || !strcmp(only, "rules"))) {
            diag_clear(&why);
            if (rules_load_file(rules, lib, tuning, &d) != 0) {
                rc = -1;
            } else {
                printf("\nmode rules (with %s):\n", tuning);
                compile_args b = base;
                select_choose(lib, rules, SELECT_RULES, &m, (nbc_collective)coll, &b, &why);
                fputs(why.text ? why.text : "", stdout);
            }
        }
        diag_clear(&why);
        if (only && strcmp(only, "model")) goto done;
        printf("\nmode model (");
        fflush(stdout);
        sim_model_print(&m, stdout);
        printf("):\n");
        compile_args c = base;
        select_choose(lib, rules, SELECT_MODEL, &m, (nbc_collective)coll, &c, &why);
        fputs(why.text ? why.text : "", stdout);
    }
done:
    if (rc && d.text) fputs(d.text, stderr);
    else if (rc) nbcc_error("failed");
    diag_free(&d);
    diag_free(&why);
    rules_destroy(rules);
    lib_destroy(lib);
    nbcc_topologies_free(topo, ntopo);
    return rc ? 1 : 0;
}
