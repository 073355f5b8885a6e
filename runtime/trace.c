/* NBC_TRACE (trace.h): what a call ran, in the words of `nbcc dump`. */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>

#include "../compiler/disasm.h"

void trace_program(const sched_def *s, nbc_collective coll, const compile_args *a, const nbc_program *prog)
{
    /* into memory first, so that the ranks' programs do not interleave line by line */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    char rooted[32] = "";
    if (collective_rooted(coll)) snprintf(rooted, sizeof rooted, " root=%lld", (long long)a->root);
    fprintf(f, "nbc: trace: %s on rank %lld of %lld runs this program for the first time:\n", collective_names[coll],
            (long long)a->rank, (long long)a->p);
    fprintf(f, "schedule %s (%s) p=%lld rank=%lld count=%lld esize=%lld%s%s%s\n", s->name, s->src->name, (long long)a->p,
            (long long)a->rank, (long long)a->count, (long long)a->esize, a->inplace ? " inplace" : "",
            a->commutative ? "" : " noncommutative", rooted);
    prog_disasm(prog, f);
    if (fclose(f) == 0) fwrite(text, 1, len, stderr);
    free(text);
}

void trace_call(const char *fn, const compile_args *a, const nbc_program *prog)
{
    fprintf(stderr, "nbc: trace: rank %d of %d: %s count %lld, %lld-byte elements%s: %s, %u rounds, %u instructions\n",
            (int)a->rank, (int)a->p, fn, (long long)a->count, (long long)a->esize, a->inplace ? ", in place" : "",
            prog->name, prog->nrounds, prog->ninsns);
}
