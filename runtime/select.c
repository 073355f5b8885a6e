/* Which program serves a call: the schedule library (built-in schedules, files from
 * NBC_SCHEDULE_PATH and nbc_load_schedules), the choice among its schedules (forced by name,
 * or the first eligible of a default order), compilation, and the program cache.
 *
 * A call under automatic selection is cached under a key naming "auto" rather than the chosen
 * schedule, so that a cache hit does not even run the selection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"
#include "nbc.h"

extern const struct builtin_schedule {
    const char *name, *text;
    size_t len;
} nbc_builtin_schedules[];
extern const size_t nbc_builtin_count;

static sched_lib *lib;
static cache *programs;
static const sched_def *forced[COLL_COUNT_];
static uint64_t generation; /* bumped whenever the library changes */

sched_lib *select_library(void) { return lib; }
cache *select_cache(void) { return programs; }

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return *end ? dflt : (size_t)x;
}

static int report(int code, diag *d, const char *what)
{
    int rc = nbc_fail(code, "%s%s", what, d->text ? d->text : "");
    diag_free(d);
    return rc;
}

int select_init(void)
{
    diag d;
    diag_init(&d);
    lib = lib_create();
    programs = cache_create(env_size("NBC_CACHE_ENTRIES", 1024), env_size("NBC_CACHE_BYTES", 64u << 20));
    if (!lib || !programs) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    for (size_t i = 0; i < nbc_builtin_count; i++) {
        const struct builtin_schedule *b = &nbc_builtin_schedules[i];
        if (lib_add_source(lib, b->name, b->text, b->len, &d) != 0)
            return report(MPI_ERR_INTERN, &d, "a built-in schedule does not parse:\n");
    }
    const char *path = getenv("NBC_SCHEDULE_PATH");
    if (path && *path) {
        char *copy = strdup(path);
        if (!copy) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
        int rc = 0;
        for (char *save, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
            if (lib_add_path(lib, dir, &d) != 0) rc = -1;
        free(copy);
        if (rc) return report(MPI_ERR_ARG, &d, "NBC_SCHEDULE_PATH: ");
    }
    diag_free(&d);
    const char *f = getenv("NBC_ALLREDUCE");
    if (f && *f) return select_force(COLL_ALLREDUCE, f);
    return MPI_SUCCESS;
}

void select_finalize(void)
{
    cache_destroy(programs);
    lib_destroy(lib);
    programs = NULL;
    lib = NULL;
    memset(forced, 0, sizeof forced);
}

int nbc_load_schedules(const char *path)
{
    int rc = nbc_init();
    if (rc != MPI_SUCCESS) return rc;
    if (!path) return nbc_fail(MPI_ERR_ARG, "nbc_load_schedules: path is NULL");
    diag d;
    diag_init(&d);
    /* A failed load adds nothing: check the file first, then add it for real. */
    sched_lib *trial = lib_create();
    if (!trial) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    rc = lib_add_path(trial, path, &d);
    lib_destroy(trial);
    if (rc != 0) return report(MPI_ERR_ARG, &d, "");
    lib_add_path(lib, path, &d);
    diag_free(&d);
    /* forced schedules are looked up again: a replaced one must not dangle */
    for (int c = 0; c < COLL_COUNT_; c++)
        if (forced[c]) forced[c] = lib_find(lib, forced[c]->name);
    generation++;
    cache_clear(programs);
    return MPI_SUCCESS;
}

/* "ring" is accepted for "allreduce_ring". */
static const sched_def *find(nbc_collective coll, const char *name)
{
    const sched_def *s = lib_find(lib, name);
    if (!s) {
        char full[256];
        snprintf(full, sizeof full, "%s_%s", collective_names[coll], name);
        s = lib_find(lib, full);
    }
    return s;
}

int select_force(nbc_collective coll, const char *name)
{
    if (!name || !*name) {
        forced[coll] = NULL;
        return MPI_SUCCESS;
    }
    const sched_def *s = find(coll, name);
    if (!s) return nbc_fail(MPI_ERR_ARG, "no schedule named '%s'", name);
    if (!s->collective || strcmp(s->collective, collective_names[coll]) != 0)
        return nbc_fail(MPI_ERR_ARG, "schedule '%s' does not implement %s", name, collective_names[coll]);
    forced[coll] = s;
    return MPI_SUCCESS;
}

int nbc_set_schedule(const char *collective, const char *name)
{
    int rc = nbc_init();
    if (rc != MPI_SUCCESS) return rc;
    int c = collective ? collective_from_name(collective) : -1;
    if (c < 0) return nbc_fail(MPI_ERR_ARG, "unknown collective '%s'", collective ? collective : "(null)");
    return select_force((nbc_collective)c, name);
}

/* The default order for allreduce until the selection table exists: recursive doubling for
 * short messages and order-sensitive ops, the ring for long ones. Preconditions decide in the
 * end: the first eligible schedule is taken. */
static const sched_def *choose(nbc_collective coll, const compile_args *a, diag *d)
{
    (void)coll;
    static const char *const short_first[] = {"allreduce_recursive_doubling", "allreduce_ring"};
    static const char *const long_first[] = {"allreduce_ring", "allreduce_recursive_doubling"};
    int is_long = a->commutative && a->count * a->esize >= 16384;
    const char *const *order = is_long ? long_first : short_first;
    for (int i = 0; i < 2; i++) {
        const sched_def *s = lib_find(lib, order[i]);
        if (s && compile_check(lib, s, a, d) == COMPILE_OK) return s;
    }
    return NULL;
}

int select_program(nbc_collective coll, const compile_args *a, cache_entry **out)
{
    const sched_def *s = forced[coll];
    cache_key key = {.schedule = s ? lib_identity(lib, s) : XXH3_64bits_withSeed("auto", 4, generation * 64 + coll),
                     .p = a->p, .rank = a->rank, .count = a->count, .esize = a->esize,
                     .flags = (a->inplace ? 1 : 0) | (a->commutative ? 2 : 0), .root = a->root};
    *out = cache_acquire(programs, &key);
    if (*out) return MPI_SUCCESS;

    diag d;
    diag_init(&d);
    if (!s && !(s = choose(coll, a, &d)))
        return report(MPI_ERR_ARG, &d, "no schedule is eligible for this call:\n");
    diag_clear(&d);
    nbc_program *prog;
    int rc = compile_program(lib, s, a, &prog, &d);
    if (rc == COMPILE_UNMET) return report(MPI_ERR_ARG, &d, "");
    if (rc == COMPILE_NOMEM) return report(MPI_ERR_NO_MEM, &d, "");
    if (rc != COMPILE_OK) return report(MPI_ERR_OTHER, &d, "the schedule failed to compile:\n");
    diag_free(&d);
    *out = cache_insert(programs, &key, prog);
    return *out ? MPI_SUCCESS : nbc_fail(MPI_ERR_NO_MEM, "out of memory");
}

int nbc_get_cache_stats(nbc_cache_stats *stats)
{
    int rc = nbc_init();
    if (rc != MPI_SUCCESS) return rc;
    if (!stats) return nbc_fail(MPI_ERR_ARG, "stats is NULL");
    cache_stats s;
    cache_get_stats(programs, &s);
    *stats = (nbc_cache_stats){s.hits, s.misses, s.evictions, s.entries, s.bytes, s.max_entries, s.max_bytes};
    return MPI_SUCCESS;
}
