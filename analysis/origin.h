/* Which file an instruction came from. A program's locations (prog_locs) are line:column in
 * the file of the schedule that emitted the instruction, which is a called schedule's file when
 * the instruction came from a `call`. The instruction statements of the schedule and of every
 * schedule it calls, transitively, are searched for one at that line and column. */
#ifndef NBC_ORIGIN_H
#define NBC_ORIGIN_H

#include "diag.h"
#include "library.h"

/* The source holding an instruction at `at` among s and its callees; s's own when none does. */
const source *origin_of(const sched_lib *lib, const sched_def *s, loc at);

#endif
