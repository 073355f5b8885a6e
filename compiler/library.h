/* The schedule library: every schedule the process knows, by name, with the files they came
 * from. Built-in schedules are added at start-up; users add files and directories. */
#ifndef NBC_LIBRARY_H
#define NBC_LIBRARY_H

#include <stddef.h>
#include <stdint.h>
#include "ast.h"

typedef struct sched_lib sched_lib;

sched_lib *lib_create(void);
void lib_destroy(sched_lib *lib);

/* Parse a source and add its schedules; a schedule named like a known one replaces it. On a
 * parse error nothing is added. Returns 0, or -1 with the reasons in d. */
int lib_add_source(sched_lib *lib, const char *name, const char *text, size_t len, diag *d);
/* The schedules compiled into the library (the files of schedules/ at build time). */
int lib_add_builtins(sched_lib *lib, diag *d);

/* A whole file, malloc'ed and NUL-terminated (*len excludes the NUL); NULL with the reason
 * in d. Every file the library and nbcc read (schedules, rules, models) is read with it, and
 * none may be larger than LIB_MAX_FILE_BYTES: the shipped ones are a few KiB. */
#define LIB_MAX_FILE_BYTES ((size_t)16 << 20)
char *lib_read_file(const char *path, size_t *len, diag *d);

/* A file, or every *.nbs file of a directory (in name order). */
int lib_add_path(sched_lib *lib, const char *path, diag *d);

const sched_def *lib_find(const sched_lib *lib, const char *name);
size_t lib_count(const sched_lib *lib);
const sched_def *lib_at(const sched_lib *lib, size_t i);
/* A hash of the schedule's name and the text of its file: its identity in cache keys. */
uint64_t lib_identity(const sched_lib *lib, const sched_def *s);

#endif
