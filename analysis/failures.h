/* What a single failure costs an allreduce schedule: rank f stops at round k (issues nothing of
 * its rounds k, k+1, ...), the others run as far as they can (failrun.h), and their buffers
 * are read element by element:
 *   - lost: contributions that no survivor holds any more, raw or inside a partial result;
 *   - final: which survivors hold the final value (every contribution) in their result;
 *   - tainted: partial results on survivors that contain f's data: they serve the full
 *     result, but a result of the survivors alone cannot use them unless the op can be
 *     inverted (or f's raw input is known, to redo them without it);
 *   - finishable: the survivors can still produce the full result without f, that is, the
 *     pieces they hold include, for every element, a set of disjoint partial results that
 *     together contain every contribution once;
 *   - a lower bound on what the survivors must still send: each survivor that cannot form an
 *     element's final value from its own pieces must receive at least that element, in at
 *     least one message.
 * Elements are counted in the input's numbering (0 .. count-1). */
#ifndef NBC_FAILURES_H
#define NBC_FAILURES_H

#include <stdio.h>
#include "failrun.h"

typedef struct {
    uint32_t f, k;
    uint64_t lost;           /* contributions lost for some element (bit per rank) */
    uint64_t lost_elems;     /* elements that miss a contribution on every survivor */
    uint64_t final_elems;    /* elements whose final value some survivor holds (any buffer) */
    uint64_t done_ranks;     /* survivors whose whole result is final already (bit per rank) */
    uint64_t done_elems;     /* Σ over survivors of result elements already final */
    uint64_t tainted_elems;  /* Σ over survivors of elements held as a partial result with f's data */
    int f_known;             /* f's raw input is on a survivor for every element */
    int finishable;
    uint64_t need_elems;     /* lower bound: elements the survivors must receive */
    uint32_t need_ranks;     /* lower bound: messages (survivors that must receive something) */
} fail_case;

/* Runs and reads one case. detail, when not NULL, gets the element ranges in words. Returns
 * 0, or -1 when out of memory. */
int fail_case_run(const fail_model *m, uint32_t f, uint32_t k, fail_case *out, FILE *detail);

typedef struct {
    uint32_t rounds;         /* the most rounds of any rank */
    int64_t redundant_from;  /* first round k such that, when every rank has issued its rounds
                                before k, each element's final value is on >= 2 ranks; -1: never */
    uint32_t cases, finishable, lost_cases;
    int64_t safe_from;       /* first k from which every later stop (of any rank) is finishable;
                                -1: never */
    double mean_need;        /* mean lower bound of elements to receive, over finishable cases */
} fail_summary;

/* Every case (f, k), k < f's rounds; each case's record is passed to each (may be NULL). */
int fail_summarize(const fail_model *m, fail_summary *sum, void (*each)(void *ctx, const fail_case *c), void *ctx);

/* The holders of each element's final value after every rank issued rounds [0, k). */
int fail_holders_min(const fail_model *m, uint32_t k, uint32_t *min_holders);

#endif
