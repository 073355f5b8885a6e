/* The schedules nbcc works on: the built-in ones, files, and a schedule named as the library
 * names it; the program verifier run as the library runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builtin.h"
#include "collectives.h"
#include "env.h"
#include "nbcc.h"
#include "progverify.h"
#include "selection.h"


uint64_t nbcc_max_insns;

/* NBC_MAX_INSNS, through the library's own reader: the same values pass and fail. */
int nbcc_read_env(void)
{
    char err[256];
    if (env_uint("NBC_MAX_INSNS", 0, UINT32_MAX - 1, &nbcc_max_insns, err, sizeof err) == 0) return 0;
    nbcc_error("%s", err);
    return 2;
}

sched_lib *load_builtins(void)
{
    sched_lib *lib = lib_create();
    diag d;
    diag_init(&d);
    for (size_t i = 0; lib && i < nbc_builtin_count; i++)
        if (lib_add_source(lib, nbc_builtin_schedules[i].name, nbc_builtin_schedules[i].text,
                           nbc_builtin_schedules[i].len, &d) != 0) {
            fprintf(stderr, "%s", d.text ? d.text : "");
            exit(1);
        }
    diag_free(&d);
    if (!lib) {
        nbcc_error("out of memory");
        exit(1);
    }
    return lib;
}

/* Loads a file into lib; returns its parsed schedules through the library's file list. */
int load_file(sched_lib *lib, const char *path)
{
    diag d;
    diag_init(&d);
    int rc = lib_add_path(lib, path, &d);
    if (rc) fprintf(stderr, "%s", d.text ? d.text : "");
    diag_free(&d);
    return rc;
}

/* The schedules that came from file `path` (matched by their source's name). */
const sched_def *next_from(const sched_lib *lib, const char *path, size_t *i)
{
    for (; *i < lib_count(lib); (*i)++) {
        const sched_def *s = lib_at(lib, *i);
        if (!strcmp(s->src->name, path)) {
            (*i)++;
            return s;
        }
    }
    return NULL;
}

/* Runs the verifier on a compiled program, as the library does before it caches one; prints
 * why it fails. Returns 0 when it passes. */
int verify_program(const sched_def *s, const nbc_program *prog, const compile_args *a)
{
    prog_fault f;
    nbc_collective c = s->collective ? (nbc_collective)collective_from_name(s->collective) : COLL_ALLREDUCE;
    int rc = prog_verify(prog, c, a, &f);
    if (rc < 0) nbcc_error("out of memory");
    if (rc > 0) fprintf(stderr, "%s: error: the program of '%s' fails verification at instruction %u: %s\n", s->src->name,
                        s->name, f.pc, f.msg);
    return rc;
}

/* Whether name names s as the runtime takes it: in full, or without its collective's prefix. */
static int names(const sched_def *s, const char *name)
{
    size_t n = s->collective ? strlen(s->collective) : 0;
    return !strcmp(s->name, name) ||
           (n && !strncmp(s->name, s->collective, n) && s->name[n] == '_' && !strcmp(s->name + n + 1, name));
}

/* A schedule by name, resolved as NBC_ALLREDUCE and rule files resolve it (select_find): a
 * short name is an allreduce's first ("ring" is allreduce_ring, as in the README), else that
 * of the one collective that has it ("dissemination"); one that several others have is refused,
 * naming them. */
static const sched_def *find_by_name(const sched_lib *lib, const char *name, int *ambiguous)
{
    const sched_def *s = lib_find(lib, name), *t;
    *ambiguous = 0;
    if (!s) s = select_find(lib, COLL_ALLREDUCE, name);
    if (s) return s;
    char all[512] = "";
    int n = 0;
    for (int c = 0; c < COLL_COUNT_; c++)
        if ((t = select_find(lib, (nbc_collective)c, name))) {
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", n ? " or " : "", t->name);
            if (!n++) s = t;
        }
    if (n > 1) {
        nbcc_error("'%s' is ambiguous: %s (give the full name)", name, all);
        *ambiguous = 1;
        return NULL;
    }
    return s;
}

/* The schedules NAME|FILE stands for: a known name, or the schedules of a file that implement
 * a collective; --schedule NAME picks one by name. Returns how many were found (at most max),
 * or -1 when the file does not load or the name is ambiguous (after a message). */
int find_schedules(sched_lib *lib, const char *what, const char *sname, const sched_def **out, int max)
{
    struct stat st;
    int n = 0;
    if (stat(what, &st) == 0) {
        if (load_file(lib, what) != 0) return -1;
        size_t at = 0;
        for (const sched_def *t; n < max && (t = next_from(lib, what, &at));)
            if (sname ? names(t, sname) : t->collective != NULL) out[n++] = t;
    } else {
        int ambiguous;
        const sched_def *t = find_by_name(lib, sname ? sname : what, &ambiguous);
        if (ambiguous) return -1;
        if (t) out[n++] = t;
    }
    return n;
}

void complain_missing(const char *what, const char *sname)
{
    nbcc_error("no schedule '%s'%s (nbcc list shows them)", sname ? sname : what, sname ? " in that file" : "");
}

int is_multi(const sched_def *s)
{
    return s->collective && collective_from_name(s->collective) == COLL_ALLREDUCE_MULTI;
}
