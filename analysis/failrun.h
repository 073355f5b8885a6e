/* A symbolic run of all ranks' programs of an allreduce in which some ranks stop early: rank r
 * issues only its rounds [0, limit[r]) and then sends and receives nothing more. The others run
 * until they finish or wait forever (on a message from a stopped rank, or on a send a stopped
 * rank never receives: a send is taken to complete only when received, as a rendezvous send;
 * over shared memory, on its SIGNAL, or at an operand naming its buffers).
 * What each rank then holds is read from its buffers (symbuf.h).
 *
 * For p <= 64 a contribution's key is 1 << rank, so a piece's `sum` is the set of ranks whose
 * data it combines, as a bit mask (a correct schedule never adds one twice). The verifier
 * (nbcc verify) is what shows that a schedule is correct; this run assumes it is. */
#ifndef NBC_FAILRUN_H
#define NBC_FAILRUN_H

#include <stdint.h>
#include "diag.h"
#include "compile.h"
#include "library.h"
#include "symbuf.h"

#define FAIL_MAX_P 64

typedef struct {
    const sched_lib *lib;
    const sched_def *s;
    compile_args base;       /* p, count, element size, in place ...; rank is ignored */
    nbc_program *prog[FAIL_MAX_P];
    uint32_t maxrounds;      /* the most rounds of any rank */
} fail_model;

typedef struct {
    sym_buf buf[FAIL_MAX_P][SLOT_COUNT_];
    uint32_t reached[FAIL_MAX_P]; /* rounds each rank completed */
} fail_state;

/* Compiles every rank's program once. COMPILE_OK, COMPILE_UNMET when the schedule does not
 * apply, or an error with the reasons in d (also: not an allreduce, p > 64). */
int fail_model_init(fail_model *m, const sched_lib *lib, const sched_def *s, const compile_args *a, diag *d);
void fail_model_free(fail_model *m);

/* Runs with the given per-rank round limits. Shared memory: an operand naming the buffers of
 * rank `dead` (UINT32_MAX: none) blocks its rank from that instruction on, as a receive from a
 * stopped rank would; its flags it raises or not as its limit says. Returns 0, or -1 when out of
 * memory. The state must be freed with fail_state_free even then. */
int fail_run(const fail_model *m, const uint32_t *limit, uint32_t dead, fail_state *st);
void fail_state_free(const fail_model *m, fail_state *st);

#endif
