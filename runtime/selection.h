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

/* A schedule and values for its parameters, as "name" or "name:param=value,param=value"
 * (the form of rules, of nbc_set_schedule and of NBC_ALLREDUCE and its siblings). */
typedef struct {
    const sched_def *s;
    int nparams;
    char names[COMPILE_MAX_PARAMS][32];
    int64_t values[COMPILE_MAX_PARAMS];
} sched_choice;

/* Parses spec for collective c into *out (zeroed first, so equal choices are equal bytes).
 * Returns 0, or -1 with the reason in err. */
int select_parse_choice(const sched_lib *lib, nbc_collective c, const char *spec, sched_choice *out, char *err,
                        size_t errsize);
/* Gives a the choice's parameter values. */
void select_apply_choice(const sched_choice *ch, compile_args *a);

typedef struct rule_table rule_table;

rule_table *rules_create(void);
void rules_destroy(rule_table *t);
/* Adds the rules in text (errors as "name:line: message" in d; on any error nothing is added).
 * Schedules are checked against lib. With replace, the rules so far are dropped, except the
 * fallbacks, which go on serving after the new rules. Returns 0 or -1. */
int rules_add(rule_table *t, const sched_lib *lib, const char *name, const char *text, size_t len, int replace,
              diag *d);
/* A rule file (read with lib_read_file); a line holding only "replace" makes it replace. */
int rules_load_file(rule_table *t, const sched_lib *lib, const char *path, diag *d);
size_t rules_count(const rule_table *t);

typedef enum { SELECT_RULES, SELECT_MODEL } select_mode;

/* The schedule for collective c and call a, or NULL when none is eligible. Parameters the
 * rule gives are stored into a->params. With why, the reasons are appended to it. */
const sched_def *select_choose(const sched_lib *lib, const rule_table *t, select_mode mode, const sim_model *m,
                               nbc_collective c, compile_args *a, diag *why);

/* "ring" names "allreduce_ring" too. */
const sched_def *select_find(const sched_lib *lib, nbc_collective c, const char *name);

#endif
