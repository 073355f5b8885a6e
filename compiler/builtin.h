/* The files the library carries inside it: the shipped schedules (every .nbs file of
 * schedules/) and the default selection rules (runtime/default.rules). The build writes them
 * into generated C files as byte arrays (tools/embed-schedules.sh); each list ends with a
 * {NULL, NULL, 0} entry. This header declares them once for everything that reads them. */
#ifndef NBC_BUILTIN_H
#define NBC_BUILTIN_H

#include <stddef.h>

struct builtin_schedule {
    const char *name; /* the path it was embedded from, e.g. "schedules/allreduce_ring.nbs" */
    const char *text; /* its contents, NUL-terminated */
    size_t len;       /* bytes, without the NUL */
};

extern const struct builtin_schedule nbc_builtin_schedules[];
extern const size_t nbc_builtin_count;
extern const struct builtin_schedule nbc_default_rules[];
extern const size_t nbc_default_rules_count;

#endif
