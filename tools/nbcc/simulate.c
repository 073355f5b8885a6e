/* nbcc simulate: the predicted time of a schedule under an alpha-beta-gamma or LogGP cost
 * model, its critical path and rounds; --compare ranks every schedule over a grid. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collectives.h"
#include "compare.h"
#include "nbcc.h"
#include "simulate.h"

static const char *const usage_simulate =
    "usage: nbcc simulate NAME|FILE --p P (--bytes N | --count N) [--type T] [--model SPEC]\n"
    "                     [--inplace] [--noncommutative] [--root R] [--rounds N] [--param NAME=V]\n"
    "                     [--nbufs N] [--schedule NAME]\n"
    "                     [--nodes N --ppn K | --node-sizes LIST] [--placement block|cyclic]\n"
    "       nbcc simulate --compare [NAME|FILE...] [--collective C] [--p LIST] [--bytes LIST]\n"
    "                     [--type T] [--model SPEC] [--inplace] [--noncommutative] [--nbufs N]\n"
    "\n"
    "Predicts when each rank of a schedule finishes under a cost model, running all the ranks'\n"
    "programs against a timed network, and prints the time, the critical path (as the model\n"
    "terms it adds up to, and for p <= 4096 the ranks and rounds it goes through) and a table of\n"
    "the rounds. A message of n bytes takes alpha + n*beta and leaves through its sender's one\n"
    "port; reducing n bytes takes n*gamma; copies are free. With LogGP, a message costs o at\n"
    "each end, (n-1)*G on the wire plus L, and the port is busy g more after each message.\n"
    "With --compare, every schedule implementing the collective (of the schedules named, else\n"
    "--collective, default allreduce) that applies is simulated over a grid of p and sizes, and\n"
    "the winner of each cell is shown.\n"
    "  --p P            processes (a LIST for --compare; default 2,3,4,8,16,32,64,128,256)\n"
    "  --bytes N        message size in bytes (a LIST for --compare; k, m, g suffixes;\n"
    "                   default 8,64,512,4k,32k,256k,2m); --count N gives elements instead\n"
    "  --type T         element type, as for nbcc dump (default int)\n"
    "  --model SPEC     alpha=S,beta=S,gamma=S (seconds, seconds per byte; default\n"
    "                   alpha=1e-6,beta=1e-10,gamma=1e-10), or LogGP L=S,o=S,g=S,G=S[,gamma=S];\n"
    "                   alpha_node=S,beta_node=S price the messages between ranks of one node\n"
    "                   (with a topology; default alpha and beta)\n"
    "  --inplace        sendbuf is MPI_IN_PLACE\n"
    "  --noncommutative the op is not commutative\n"
    "  --root R         the root of a rooted collective (default 0)\n"
    "  --rounds N       rows of the round table (default 64)\n"
    "  --param NAME=V   a value for one of the schedule's params (up to 4 times)\n"
    "  --nbufs N        buffers per rank of a multi-buffer collective (default 1)\n"
    "  --nodes N --ppn K  instead of --p: N nodes of K ranks (memory is shared inside each)\n"
    "  --node-sizes LIST  uneven nodes: 3,2,1 is 3 + 2 + 1 ranks\n"
    "  --placement P    block (a node's ranks consecutive, the default) or cyclic (round-robin)\n";


static int simulate_compare(sched_lib *lib, int argc, char **argv, const char *collective, const char *p_text,
                            const char *bytes_text, int esize, const char *tname, int inplace, int commutative,
                            int64_t nbufs, const sim_model *m)
{
    for (int i = 0; i < argc; i++) { /* the schedules named set the collective, files add theirs */
        const sched_def *s;
        int n = find_schedules(lib, argv[i], NULL, &s, 1);
        if (n < 0) return 1;
        if (n == 0) {
            complain_missing(argv[i], NULL);
            return 1;
        }
        if (!collective) collective = s->collective;
    }
    if (!collective) collective = "allreduce";
    if (collective_from_name(collective) < 0) {
        return nbcc_bad_collective(collective);
    }
    int64_t *ps, *bytes;
    size_t nps, nbytes;
    if (expand_list("--p", p_text, 0, 0, &ps, &nps)) return 2;
    if (expand_list("--bytes", bytes_text, 0, 0, &bytes, &nbytes)) {
        free(ps);
        return 2;
    }
    for (size_t i = 0; i < nps; i++)
        if (ps[i] < 1) {
            nbcc_usage_error("p = %" PRId64 " is not a process count", ps[i]);
            free(ps), free(bytes);
            return 2;
        }
    compare_grid g = {collective, ps, nps, bytes, nbytes, esize, tname, inplace, commutative, nbufs};
    diag d;
    diag_init(&d);
    int rc = compare_schedules(lib, &g, m, stdout, &d);
    if (rc) fprintf(stderr, "%s", d.text ? d.text : "");
    diag_free(&d);
    free(ps);
    free(bytes);
    return rc ? 1 : 0;
}

int nbcc_simulate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_simulate, stdout);
        return 0;
    }
    nbcc_opts o = {.count = -1, .rounds = 64, .esize = 4, .tname = "int"};
    int status = nbcc_options(argc, argv,
                            "p bytes count type model inplace noncommutative root rounds schedule compare collective param nbufs "
                            "nodes ppn node-sizes placement", &o);
    if (status >= 0) return status;
    nbcc_topology *topo;
    size_t ntopo;
    if ((status = nbcc_one_topology(&o, &topo, &ntopo))) return status;
    if (ntopo && o.compare) {
        nbcc_topologies_free(topo, ntopo);
        return nbcc_usage_error("--compare takes --p, not a topology");
    }
    compile_args base = o.params;
    base.max_insns = nbcc_max_insns;
    base.nbufs = o.nbufs ? number("--nbufs", o.nbufs) : 0;
    const char *p_text = o.p, *bytes_text = o.bytes, *tname = o.tname, *sname = o.schedule, *collective = o.collective;
    long long count = o.count, root = o.root, rounds = o.rounds;
    int esize = o.esize, inplace = o.inplace, commutative = !o.noncommutative, compare = o.compare, rest = o.rest;
    sim_model m;
    sim_model_default(&m);
    char err[200];
    if (o.model && sim_model_parse(o.model, &m, err, sizeof err)) {
        nbcc_topologies_free(topo, ntopo);
        return nbcc_usage_error("--model: %s", err);
    }
    sched_lib *lib = load_builtins();
    int rc;
    if (compare) {
        rc = simulate_compare(lib, argc - rest, argv + rest, collective, p_text ? p_text : "2,3,4,8,16,32,64,128,256",
                              bytes_text ? bytes_text : "8,64,512,4k,32k,256k,2m", esize, tname, inplace, commutative, base.nbufs,
                              &m);
        lib_destroy(lib);
        return rc;
    }
    int64_t *ps = NULL, *bs = NULL, topo_p = ntopo ? topo->p : 0;
    size_t nps = ntopo, nbs = 0;
    if (ntopo) ps = &topo_p;
    /* "": expand_list has said what is wrong already */
    const char *why = rest != argc - 1 ? "name one schedule or file (or give --compare)"
                      : !p_text && !ntopo ? "--p P (or a topology) is required"
                      : !ntopo && expand_list("--p", p_text, 0, 0, &ps, &nps) ? ""
                      : nps != 1 || ps[0] < 1 ? "--p wants one process count"
                      : (!bytes_text) == (count < 0) ? "give --bytes N or --count N"
                      : bytes_text && expand_list("--bytes", bytes_text, 0, 0, &bs, &nbs) ? ""
                      : bs && (nbs != 1 || bs[0] < 0 || bs[0] % esize) ? "--bytes wants one size, a whole number of elements"
                      : root < 0 || root >= ps[0] ? "--root must be in 0..p-1" : rounds < 0 ? "--rounds must be >= 0" : NULL;
    if (ntopo) ps = NULL; /* topo_p: nothing to free */
    int64_t p = ntopo ? topo_p : ps ? ps[0] : 0;
    if (why) {
        if (*why) nbcc_usage_error("%s", why);
        free(ps), free(bs), lib_destroy(lib), nbcc_topologies_free(topo, ntopo);
        return 2;
    }
    if (bs) count = bs[0] / esize;
    const sched_def *s;
    int n = find_schedules(lib, argv[rest], sname, &s, 1);
    if (n <= 0) {
        if (n == 0) complain_missing(argv[rest], sname);
        free(ps), free(bs), lib_destroy(lib), nbcc_topologies_free(topo, ntopo);
        return 1;
    }
    nbcc_set_call(&base, p, count, esize, root, inplace, commutative);
    if (ntopo) nbcc_topology_args(&base, topo);
    sim_args a = sim_args_of(&base);
    a.record_hops = p <= 4096;
    sim_result res;
    diag d;
    diag_init(&d);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = simulate_schedule(lib, s, &a, &m, NULL, &res, &d);
    if (rc == SIM_OK) {
        printf("%s (%s) p=%" PRId64 "%s%s count=%lld type=%s (%lld bytes)%s%s, ", s->name, s->src->name, a.p, ntopo ? " on " : "",
               ntopo ? topo->label : "", count, tname, count * esize, inplace ? " inplace" : "", commutative ? "" : " noncommutative");
        sim_model_print(&m, stdout);
        printf("\n");
        sim_report(&res, &m, (uint32_t)(rounds > UINT32_MAX ? UINT32_MAX : rounds), stdout);
        printf("simulated in %.2f s\n", seconds_since(&t0));
        sim_result_free(&res);
    } else if (rc == SIM_SKIP) {
        nbcc_error("'%s' does not apply for p = %" PRId64 ", count = %lld (its requirements fail; nbcc list shows them)",
                s->name, a.p, count);
    } else {
        fprintf(stderr, "%s", d.text ? d.text : "");
    }
    diag_free(&d);
    free(ps), free(bs), lib_destroy(lib), nbcc_topologies_free(topo, ntopo);
    return rc == SIM_OK ? 0 : 1;
}
