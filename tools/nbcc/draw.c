/* nbcc draw: a space-time diagram of a schedule (SVG, dot), or the bytes moved per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "nbcc.h"

static const char *const usage_draw =
    "usage: nbcc draw NAME|FILE --p P --count N [-o FILE] [--format svg|dot|text] [--type T]\n"
    "                 [--inplace] [--noncommutative] [--root R] [--param NAME=V] [--nbufs N]\n"
    "                 [--schedule NAME] [--nodes N --ppn K | --node-sizes LIST] [--placement P]\n"
    "\n"
    "Draws a space-time diagram of a schedule: one row per rank, one column per step (unit\n"
    "latency), a box per round with its reductions and copies marked, an arrow per message\n"
    "labelled with its size. --format dot writes the same for Graphviz; --format text prints,\n"
    "per step, the rank-by-rank matrix of bytes moved. The format defaults to the extension of\n"
    "-o FILE (.svg, .dot, .txt), else svg; without -o the drawing goes to standard output.\n"
    "A topology instead of --p (--nodes 2 --ppn 2, --node-sizes 3,2,1; --placement block or\n"
    "cyclic) compiles a schedule that reads it, as nbcc dump does.\n";

int nbcc_draw(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_draw, stdout);
        return 0;
    }
    nbcc_opts o = {.count = -1, .esize = 4, .tname = "int"};
    int status = nbcc_options(argc, argv, "p count type format inplace noncommutative root schedule param nbufs o "
                                          "nodes ppn node-sizes placement", &o);
    if (status >= 0) return status;
    nbcc_topology *topo;
    size_t ntopo;
    if ((status = nbcc_one_topology(&o, &topo, &ntopo))) return status;
    compile_args base = o.params;
    base.max_insns = nbcc_max_insns;
    base.nbufs = o.nbufs ? number("--nbufs", o.nbufs) : 0;
    long long p = ntopo ? topo->p : o.p ? number("--p", o.p) : 0, count = o.count, root = o.root;
    int esize = o.esize, inplace = o.inplace, commutative = !o.noncommutative, rest = o.rest;
    const char *tname = o.tname, *sname = o.schedule, *path = o.output, *format = o.format;
    if (!format && path) {
        const char *dot = strrchr(path, '.');
        format = dot && !strcmp(dot, ".dot") ? "dot" : dot && !strcmp(dot, ".txt") ? "text" : "svg";
    }
    if (!format) format = "svg";
    draw_format f = !strcmp(format, "svg") ? DRAW_SVG : !strcmp(format, "dot") ? DRAW_DOT : DRAW_TEXT;
    const char *why = rest != argc - 1 ? "name one schedule or file"
                      : p < 1 ? "--p P (P >= 1) is required"
                      : count < 0 ? "--count N (N >= 0) is required"
                      : root < 0 || root >= p ? "--root must be in 0..p-1"
                      : strcmp(format, "svg") && strcmp(format, "dot") && strcmp(format, "text") ? "--format is svg, dot or text" : NULL;
    if (why) {
        nbcc_topologies_free(topo, ntopo);
        return nbcc_usage_error("%s", why);
    }
    sched_lib *lib = load_builtins();
    const sched_def *s;
    int n = find_schedules(lib, argv[rest], sname, &s, 1);
    if (n <= 0) {
        if (n == 0) complain_missing(argv[rest], sname);
        lib_destroy(lib);
        nbcc_topologies_free(topo, ntopo);
        return 1;
    }
    /* draw into memory first: a failed drawing leaves no half-written file */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    diag d;
    diag_init(&d);
    nbcc_set_call(&base, p, count, esize, root, inplace, commutative);
    if (ntopo) nbcc_topology_args(&base, topo);
    sim_args a = sim_args_of(&base);
    int rc = mem ? draw_schedule(lib, s, &a, tname, f, mem, &d) : -1;
    if (mem) fclose(mem);
    if (rc) {
        if (d.text && d.text[0]) fputs(d.text, stderr);
        else nbcc_error("out of memory");
    } else {
        FILE *out = path ? fopen(path, "w") : stdout;
        if (!out || fwrite(buf, 1, len, out) != len || (path && fclose(out) != 0)) {
            nbcc_error("cannot write %s", path ? path : "standard output");
            rc = -1;
        }
    }
    free(buf);
    diag_free(&d);
    lib_destroy(lib);
    nbcc_topologies_free(topo, ntopo);
    return rc ? 1 : 0;
}
