/* NBC_TRACE: the run-time EXPLAIN. At 1, the first time a call runs a program (a program the
 * cache did not hold: once per collective, schedule and call shape) its schedule and program go
 * to stderr as `nbcc dump` prints them; at 2, also one line for every call. */
#ifndef NBC_TRACE_H
#define NBC_TRACE_H

#include "internal.h"

void trace_program(const sched_def *s, nbc_collective coll, const compile_args *a, const nbc_program *prog);
/* fn: the public function; a: the call's shape. */
void trace_call(const char *fn, const compile_args *a, const nbc_program *prog);

#endif
