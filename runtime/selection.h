/* Algorithm selection: which schedule serves a call. Free of MPI, so that `nbcc explain`
 * shows exactly what the library would do.
 *
 * Two modes. Rules: a table of rules, tried in order; the first whose conditions hold names
 * the schedule; if that schedule's preconditions fail for the call, the collective's
 * `fallback` rules are tried in order. The built-in table (runtime/default.rules) encodes
 * Open MPI's decision tree; a tuning file extends it (its rules come first) or replaces it
 * (the built-in fallbacks stay). Model: every eligible schedule of the collective is simulated
 * under α-β-γ, and the fastest wins. */
#ifndef NBC_SELECTION_H
#define NBC_SELECTION_H

#include "../compiler/compile.h"
#include "../compiler/library.h"
#include "../compiler/simulate.h"
#include "../dsl/collectives.h"

typedef struct rule_table rule_table;

rule_table *rules_create(void);
void rules_destroy(rule_table *t);
/* Adds the rules in text (errors as "name:line: message" in d; on any error nothing is added).
 * Schedules are checked against lib. With replace, the rules so far are dropped, except the
 * fallbacks, which go on serving after the new rules. Returns 0 or -1. */
int rules_add(rule_table *t, const sched_lib *lib, const char *name, const char *text, size_t len, int replace,
              diag *d);
size_t rules_count(const rule_table *t);

typedef enum { SELECT_RULES, SELECT_MODEL } select_mode;

/* The schedule for collective c and call a, or NULL when none is eligible. Parameters the
 * rule gives are stored into a->params. With why, the reasons are appended to it. */
const sched_def *select_choose(const sched_lib *lib, const rule_table *t, select_mode mode, const sim_model *m,
                               nbc_collective c, compile_args *a, diag *why);

/* "ring" names "allreduce_ring" too. */
const sched_def *select_find(const sched_lib *lib, nbc_collective c, const char *name);

#endif
