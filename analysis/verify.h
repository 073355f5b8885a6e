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
    compile_args base;           /* p, count, element size, ...; rank is ignored; for a vector
                                    collective count and the vectors are each rank's from vcase */
    uint64_t seed;               /* of the random contribution keys (and vcase's counts) */
    int vcase;                   /* a vector collective's vectors: case 0 .. VERIFY_VECTOR_CASES-1 */
} verify_args;

/* The vectors a vector collective is verified with, consistent across ranks as MPI requires
 * (rank i's sendcounts[j] is rank j's recvcounts[i]): from a p×p matrix of counts, M[i][j]
 * the elements rank i sends to rank j (alltoallv), and its row 0 as the one vector of the
 * others (gatherv's, scatterv's and allgatherv's counts of each rank, reduce_scatterv's
 * recvcounts). The cases: 0 every count 0; 1 one non-zero column (every rank sends 3
 * elements to one rank, picked by the seed); 2 random counts in 0..3, blocks packed; 3 the
 * same with gaps of 0..2 elements between blocks; 4 gaps and blocks laid out in reverse rank
 * order. reduce_scatterv's blocks are always packed (MPI's layout). */
#define VERIFY_VECTOR_CASES 5
#define VERIFY_UNIFORM (-1)
int64_t verify_vector_count(int vcase, uint64_t seed, int64_t p, int64_t i, int64_t j);
/* Rank `rank`'s vectors and count for case vcase into a (a->p, a->root and a->inplace set;
 * vcase VERIFY_UNIFORM: every count a->count, packed, as the fixed-count collective's;
 * space: 4·p values that a->vec then points into); a->vec is all NULL for other collectives. */
void verify_vectors(int coll, int vcase, uint64_t seed, compile_args *a, int64_t rank, int64_t *space);
/* "all zero", "one non-zero", ... */
const char *verify_vector_case_name(int vcase);

typedef struct {
    uint64_t programs, insns, messages, bytes;
} verify_stats;

enum { VERIFY_OK = 0, VERIFY_FAIL, VERIFY_SKIP };

/* VERIFY_SKIP when the schedule's preconditions do not hold for these arguments (nothing to
 * verify); VERIFY_FAIL with the reasons in d. Stats are added to *st when st is not NULL. */
int verify_schedule(const sched_lib *lib, const sched_def *s, const verify_args *a, diag *d, verify_stats *st);

#endif
