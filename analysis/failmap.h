/* The failure analysis as a heat map (rank × round at which the rank stops), in the style of
 * nbcc draw's SVG: red where a contribution is lost, amber where the survivors can finish but
 * must still exchange data (the lower bound written in the cell), green where every survivor
 * holds its result or can compute it from what it holds. */
#ifndef NBC_FAILMAP_H
#define NBC_FAILMAP_H

#include <stdio.h>
#include "failures.h"

/* cases: one per (f, k) in the order fail_summarize produces them. */
void fail_map_svg(const fail_model *m, const fail_summary *sum, const fail_case *cases, size_t ncases, FILE *out);

#endif
