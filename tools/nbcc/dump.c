/* nbcc dump: the compiled program of a schedule, one instruction a line, as the library's
 * disassembler prints it (and NBC_TRACE at run time). */
#include <stdio.h>
#include <stdlib.h>

#include "collectives.h"
#include "disasm.h"
#include "verify.h"
#include "nbcc.h"

static const char *const usage_dump =
    "usage: nbcc dump NAME|FILE --p P [--rank R] [--count N] [--type T] [--inplace]\n"
    "                 [--noncommutative] [--root R] [--schedule NAME] [--no-shared-memory]\n"
    "                 [--nodes N --ppn K | --node-sizes LIST] [--placement block|cyclic]\n"
    "\n"
    "Compiles a schedule (a built-in name, or the first schedule implementing a collective in\n"
    "FILE, or --schedule NAME from it) for P processes and prints the program of rank R, or of\n"
    "every rank when --rank is left out: one instruction a line with its round, opcode, peer,\n"
    "buffer, byte offset, length, source buffer and offset, and the schedule line it came from.\n"
    "Another rank's buffer reads recv@1 (its peer is the instruction's), its shared scratch\n"
    "shared@1; SIGNAL -> 1 tells rank 1, WAIT <- 1 waits for rank 1's signal. The header says\n"
    "how many bytes of shared scratch the program needs, and \"agreement\" when it names\n"
    "another rank's send or receive buffer (it runs only after every rank has published them).\n"
    "  --count N          elements (default 8)\n"
    "  --type T           int8 char int16 short int int32 float int64 long double long_double\n"
    "                     (default int)\n"
    "  --inplace          sendbuf is MPI_IN_PLACE\n"
    "  --noncommutative   the op is not commutative\n"
    "  --root R           the root of a rooted collective (default 0)\n"
    "  --no-shared-memory the ranks cannot map each other's memory (default: they can)\n"
    "  --nodes N --ppn K  instead of --p: N nodes of K ranks (memory is shared inside each)\n"
    "  --node-sizes LIST  uneven nodes: 3,2,1 is 3 + 2 + 1 ranks\n"
    "  --placement P      block (a node's ranks consecutive, the default) or cyclic (round-robin)\n";

int nbcc_dump(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_dump, stdout);
        return 0;
    }
    nbcc_opts o = {.rank = -1, .count = 8, .root = -1, .esize = 4, .tname = "int"};
    int status = nbcc_options(argc, argv, "p rank count type inplace noncommutative schedule root nodes ppn node-sizes placement", &o);
    if (status >= 0) return status;
    nbcc_topology *topo;
    size_t ntopo;
    if ((status = nbcc_one_topology(&o, &topo, &ntopo))) return status;
    long long p = ntopo ? topo->p : o.p ? number("--p", o.p) : 0, rank = o.rank, count = o.count, root = o.root;
    int esize = o.esize, inplace = o.inplace, commutative = !o.noncommutative, rest = o.rest;
    const char *tname = o.tname, *sname = o.schedule;
    if (rest != argc - 1 || p < 1 || rank >= p || count < 0 || root >= p) {
        nbcc_topologies_free(topo, ntopo);
        return nbcc_usage_error("%s", rest != argc - 1 ? "name one schedule or file"
                                      : p < 1       ? "--p P (P >= 1) is required"
                                      : rank >= p   ? "--rank must be below --p"
                                      : root >= p   ? "--root must be below --p"
                                                    : "--count must be >= 0");
    }
    const char *what = argv[rest];
    sched_lib *lib = load_builtins();
    const sched_def *s = NULL;
    int found = find_schedules(lib, what, sname, &s, 1);
    if (found <= 0) {
        if (found == 0) complain_missing(what, sname);
        lib_destroy(lib);
        nbcc_topologies_free(topo, ntopo);
        return 1;
    }
    int rc = 0;
    diag d;
    diag_init(&d);
    int64_t *space = malloc(4 * (size_t)p * sizeof *space); /* a vector collective's: every count --count */
    if (!space) rc = 1;
    for (long long r = rank < 0 ? 0 : rank; r < (rank < 0 ? p : rank + 1) && !rc; r++) {
        compile_args a = {.p = p, .rank = r, .count = count, .esize = esize, .inplace = inplace, .commutative = commutative,
                          .max_insns = nbcc_max_insns, .shared_memory = nbcc_shared_memory,
                          .root = root < 0 ? 0 : root};
        if (ntopo) nbcc_topology_args(&a, topo);
        verify_vectors(collective_from_name(s->collective ? s->collective : "allreduce"), VERIFY_UNIFORM, 1, &a, r, space);
        nbc_program *prog;
        if (compile_program(lib, s, &a, &prog, &d) != COMPILE_OK) {
            fprintf(stderr, "%s", d.text ? d.text : "");
            rc = 1;
            break;
        }
        if (verify_program(s, prog, &a)) {
            free(prog);
            rc = 1;
            break;
        }
        char rooted[32] = "";
        if (root >= 0) snprintf(rooted, sizeof rooted, " root=%lld", root);
        printf("%sschedule %s (%s) p=%lld rank=%lld count=%lld type=%s%s%s%s%s%s\n", r > (rank < 0 ? 0 : rank) ? "\n" : "",
               s->name, s->src->name, p, r, count, tname, inplace ? " inplace" : "",
               commutative ? "" : " noncommutative", rooted, ntopo ? "; " : "", ntopo ? topo->label : "");
        prog_disasm(prog, stdout);
        free(prog);
    }
    free(space);
    diag_free(&d);
    lib_destroy(lib);
    nbcc_topologies_free(topo, ntopo);
    return rc;
}
