/* The verifier: compiles every rank's program of a schedule and runs them together against a
 * simulated network, with symbolic data (symbuf.h), checking that
 *   - every program is well formed, stays inside its buffers and has no race within a round
 *     (progcheck.h);
 *   - every send meets a receive of the same length from the right peer, in posting order,
 *     and nothing is left unmatched;
 *   - nothing deadlocks (else the cycle of waiting ranks is reported);
 *   - every REDUCE combines the same elements, with values that exist, and, for an `ordered`
 *     schedule with a non-commutative op, a lower range of ranks on the left of the next one;
 *   - every rank ends with exactly the collective's result: each contribution once in each
 *     element, and for `ordered` allreduce schedules the same grouping of operands on every
 *     rank (bit-identical results);
 *   - shared memory (PROG_SHARED): every WAIT meets a SIGNAL and every SIGNAL a WAIT; no two
 *     ranks' accesses to the same bytes of a send or receive buffer, one a write, are unordered
 *     by the happens-before of flags and messages; and every access to another rank's buffers
 *     happens before that rank's program ends (hb.h).
 * Failures are reported as file:line:column of the instruction, with its rank, round and pc. */
#ifndef NBC_VERIFY_H
#define NBC_VERIFY_H

#include <stdint.h>
#include "diag.h"
#include "compile.h"
#include "library.h"

typedef struct {
    compile_args base;           /* p, count, element size, ...; rank is ignored */
    uint64_t seed;               /* of the random contribution keys */
} verify_args;

typedef struct {
    uint64_t programs, insns, messages, bytes;
} verify_stats;

enum { VERIFY_OK = 0, VERIFY_FAIL, VERIFY_SKIP };

/* VERIFY_SKIP when the schedule's preconditions do not hold for these arguments (nothing to
 * verify); VERIFY_FAIL with the reasons in d. Stats are added to *st when st is not NULL. */
int verify_schedule(const sched_lib *lib, const sched_def *s, const verify_args *a, diag *d, verify_stats *st);

#endif
