/* The compiler: evaluates a schedule for concrete (p, rank, count, element size, ...) and
 * lowers it to a program. Every error names the schedule's file, line and column. */
#ifndef NBC_COMPILE_H
#define NBC_COMPILE_H

#include <stdint.h>
#include "collectives.h"
#include "diag.h"
#include "library.h"
#include "program.h"

#define COMPILE_MAX_PARAMS 4
/* No real schedule comes near: a ring at p = 100000 holds about 600000 instructions. The bound
 * keeps a runaway schedule from taking gigabytes (48 bytes an instruction) before it fails. */
#define COMPILE_DEFAULT_MAX_INSNS (16u << 20)
/* The largest buffer a program may address, in bytes: offsets plus lengths stay far from
 * overflowing 64 bits. */
#define COMPILE_MAX_BYTES (INT64_MAX / 4)

typedef struct {
    int64_t p, rank, count;
    int64_t esize;       /* bytes per element (the datatype's extent) */
    int inplace;         /* sendbuf is the receive buffer */
    int commutative;     /* the op is commutative */
    int shared_memory;   /* the ranks of each node (node_of; without it, every rank) can map
                            each other's memory: a schedule may name their buffers (sendbuf@r)
                            and signal and wait, inside its node only */
    int64_t root;
    int64_t nbufs;       /* buffers of a multi-buffer call; 0 or 1 otherwise: see bufs() */
    uint64_t max_steps;  /* bound on loop iterations plus instructions; 0: the default */
    uint64_t max_insns;  /* bound on the program's instructions; 0: COMPILE_DEFAULT_MAX_INSNS */
    /* The per-rank vectors of a vector collective (alltoallv, ...), each p long, in elements
     * of esize; NULL where the call has none on this rank (collectives.h: VEC_SCOUNTS ...).
     * Schedules read them by MPI's names (sendcounts[r], displs[r], ...). reduce_scatterv's
     * VEC_RDISPLS may be NULL: the compiler derives it from its counts. */
    const int64_t *vec[COLL_NVEC];
    /* The node of each rank, p values numbered by first appearance (rank 0's node is 0, and
     * each new node takes the next number); schedules read it as `node(r)`, `nodes`,
     * `local(r)`, `node_size(j)`, `node_rank(j, i)`. NULL: one node when shared_memory, else
     * one node a rank. */
    const int64_t *node_of;
    int nparams;         /* values for the schedule's `param`s, overriding their defaults */
    struct {
        const char *name;
        int64_t value;
    } params[COMPILE_MAX_PARAMS];
} compile_args;

enum { COMPILE_OK = 0, COMPILE_ERROR, COMPILE_UNMET, COMPILE_NOMEM };

/* Just the preconditions (`requires`) and parameter defaults, which may not use `rank`:
 * COMPILE_OK when they all hold, COMPILE_UNMET naming the failed one in d, or COMPILE_ERROR. */
int compile_check(const sched_lib *lib, const sched_def *s, const compile_args *a, diag *d);

/* The program (malloc'ed, (*out)->bytes long) or an error status with the reasons in d. */
int compile_program(const sched_lib *lib, const sched_def *s, const compile_args *a,
                    nbc_program **out, diag *d);

#endif
