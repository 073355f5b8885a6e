/* nbcc failures: what each single failure costs an allreduce schedule (analysis/failures.h). */
#ifndef NBCC_FAILURES_H
#define NBCC_FAILURES_H

#include "../compiler/library.h"

int nbcc_failures(int argc, char **argv);

/* Shared by nbcc's commands (defined in nbcc.c). */
sched_lib *load_builtins(void);
/* The schedules `what` names (a built-in name or a file; sname picks one of a file's): up to
 * max in out. Returns how many, or -1 after a message. */
int find_schedules(sched_lib *lib, const char *what, const char *sname, const sched_def **out, int max);
void complain_missing(const char *what, const char *sname);

#endif
