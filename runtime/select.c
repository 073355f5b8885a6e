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
/* A forced schedule and the parameter values given with it. */
typedef struct {
    const sched_def *s;
    int nparams;
    char names[COMPILE_MAX_PARAMS][32];
    int64_t values[COMPILE_MAX_PARAMS];
} forcing;
static forcing forced[COLL_COUNT_];
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
    int rc;
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
        rc = 0;
        for (char *save, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
            if (lib_add_path(lib, dir, &d) != 0) rc = -1;
        free(copy);
        if (rc) return report(MPI_ERR_ARG, &d, "NBC_SCHEDULE_PATH: ");
    }
    diag_free(&d);
    for (int c = 0; c < COLL_COUNT_; c++) {
        char var[64] = "NBC_";
        for (const char *n = collective_names[c]; *n; n++) {
            size_t l = strlen(var);
            var[l] = (char)(*n >= 'a' && *n <= 'z' ? *n - 32 : *n);
            var[l + 1] = '\0';
        }
        const char *f = getenv(var);
        if (f && *f && (rc = select_force((nbc_collective)c, f)) != MPI_SUCCESS) return rc;
    }
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
        if (forced[c].s) forced[c].s = lib_find(lib, forced[c].s->name);
    generation++;
    cache_clear(programs);
    return MPI_SUCCESS;
}

/* "ring" is accepted for "allreduce_ring". */
static const sched_def *find(nbc_collective coll, const char *name)
{
    const sched_def *s = lib_find(lib, name);
    if (!s) {
        char full[300];
        snprintf(full, sizeof full, "%s_%s", collective_names[coll], name);
        s = lib_find(lib, full);
    }
    return s;
}

/* "name" or "name:param=value,param=value" */
int select_force(nbc_collective coll, const char *spec)
{
    if (!spec || !*spec) {
        memset(&forced[coll], 0, sizeof forced[coll]);
        return MPI_SUCCESS;
    }
    char name[256];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) return nbc_fail(MPI_ERR_ARG, "schedule name too long");
    memcpy(name, spec, len);
    name[len] = '\0';
    const sched_def *s = find(coll, name);
    if (!s) return nbc_fail(MPI_ERR_ARG, "no schedule named '%s'", name);
    if (!s->collective || strcmp(s->collective, collective_names[coll]) != 0)
        return nbc_fail(MPI_ERR_ARG, "schedule '%s' does not implement %s", name, collective_names[coll]);
    forcing f = {.s = s};
    for (const char *p = colon; p && *p; p = strchr(p, ',')) {
        p++;
        const char *eq = strchr(p, '=');
        size_t nl = eq ? (size_t)(eq - p) : 0;
        char *end;
        long long v = eq ? strtoll(eq + 1, &end, 0) : 0;
        if (!eq || nl == 0 || nl >= sizeof f.names[0] || end == eq + 1 || (*end && *end != ','))
            return nbc_fail(MPI_ERR_ARG, "'%s': parameters are written name=value,name=value", spec);
        if (f.nparams == COMPILE_MAX_PARAMS) return nbc_fail(MPI_ERR_ARG, "'%s': too many parameters", spec);
        memcpy(f.names[f.nparams], p, nl);
        f.names[f.nparams][nl] = '\0';
        int known = 0;
        for (const node *q = s->params; q; q = q->next) known |= !strcmp(q->name, f.names[f.nparams]);
        if (!known) return nbc_fail(MPI_ERR_ARG, "schedule '%s' has no parameter '%s'", s->name, f.names[f.nparams]);
        f.values[f.nparams++] = v;
    }
    forced[coll] = f;
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

/* The default order of candidates, until the selection table exists; the first whose
 * preconditions hold is taken. Allreduce: recursive doubling for short messages and
 * order-sensitive ops, Rabenseifner (or the ring) for long ones. */
static const sched_def *choose(nbc_collective coll, const compile_args *a, diag *d)
{
    static const char *const order[COLL_COUNT_][6] = {
        [COLL_ALLREDUCE] = {"allreduce_recursive_doubling", "allreduce_rabenseifner", "allreduce_ring"},
        [COLL_REDUCE] = {"reduce_binomial", "reduce_linear"},
        [COLL_BCAST] = {"bcast_binomial", "bcast_linear"},
        [COLL_BARRIER] = {"barrier_dissemination", "barrier_all_to_one"},
        [COLL_REDUCE_SCATTER] = {"reduce_scatter_halving", "reduce_scatter_pairwise"},
        [COLL_ALLGATHER] = {"allgather_recursive_doubling", "allgather_ring"},
        [COLL_ALLREDUCE_MULTI] = {"allreduce_multi_gloo_ring_chunked", "allreduce_multi_local"},
    };
    static const char *const long_allreduce[] = {"allreduce_rabenseifner", "allreduce_ring", "allreduce_recursive_doubling"};
    const char *const *names = order[coll];
    if (coll == COLL_ALLREDUCE && a->commutative && a->count * a->esize >= 16384) names = long_allreduce;
    for (int i = 0; i < 6 && names[i]; i++) {
        const sched_def *s = lib_find(lib, names[i]);
        if (s && compile_check(lib, s, a, d) == COMPILE_OK) return s;
        diag_clear(d);
    }
    return NULL;
}

int select_program(nbc_collective coll, const compile_args *call, cache_entry **out)
{
    const forcing *f = &forced[coll];
    const sched_def *s = f->s;
    compile_args with_params = *call;
    const compile_args *a = &with_params;
    for (int i = 0; i < f->nparams; i++) {
        with_params.params[i].name = f->names[i];
        with_params.params[i].value = f->values[i];
    }
    with_params.nparams = f->nparams;
    cache_key key = {.schedule = s ? lib_identity(lib, s) : XXH3_64bits_withSeed("auto", 4, generation * 64 + coll),
                     .p = a->p, .rank = a->rank, .count = a->count, .esize = a->esize,
                     .flags = (a->inplace ? 1 : 0) | (a->commutative ? 2 : 0) | a->nbufs << 8, .root = a->root,
                     .param = f->nparams ? (int64_t)XXH3_64bits(f, sizeof *f) : 0};
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
