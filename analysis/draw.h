/* Pictures of a schedule: a space-time diagram (SVG or Graphviz dot) with one row per rank and
 * one column per step, or a text form with, per step, the rank×rank matrix of bytes moved.
 *
 * Steps come from the simulator with unit latency and free bandwidth and computation, every
 * round lasting at least one step and every message leaving as soon as its round starts: a
 * round is a box from its start to its end, a message an arrow from where it leaves to the
 * round that receives it (labelled with its size), and reductions and copies are marked in their round. */
#ifndef NBC_DRAW_H
#define NBC_DRAW_H

#include <stdio.h>
#include "diag.h"
#include "library.h"
#include "simulate.h"

typedef enum { DRAW_SVG, DRAW_DOT, DRAW_TEXT } draw_format;

/* Returns 0, or -1 with the reasons in d (a schedule that cannot run, or a file error). */
int draw_schedule(const sched_lib *lib, const sched_def *s, const sim_args *a, const char *type_name,
                  draw_format format, FILE *out, diag *d);

#endif
