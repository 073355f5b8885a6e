/* Comparing schedules by their predicted time: every schedule that implements a collective and
 * applies, simulated over a grid of process counts and message sizes, with the winner of each
 * cell. */
#ifndef NBC_COMPARE_H
#define NBC_COMPARE_H

#include <stdio.h>
#include "diag.h"
#include "library.h"
#include "simulate.h"

typedef struct {
    const char *collective;      /* "allreduce", ... */
    const int64_t *ps;
    size_t nps;
    const int64_t *bytes;        /* message sizes: count = bytes / esize */
    size_t nbytes;
    int64_t esize;
    const char *type_name;
    int inplace, commutative;
    int64_t nbufs;               /* for multi-buffer collectives */
} compare_grid;

/* Prints the winners' table, then each schedule's times. Returns 0, or -1 when a schedule
 * fails to simulate (the reasons in d) or none applies. */
int compare_schedules(const sched_lib *lib, const compare_grid *g, const sim_model *m, FILE *out, diag *d);

#endif
