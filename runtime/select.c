/* Which program serves a call: the schedule library (built-in schedules, files from
 * NBC_SCHEDULE_PATH and nbc_load_schedules), the choice among its schedules (forced by name,
 * or by selection.c under the rules or the model), compilation, and the program cache.
 *
 * A call under automatic selection is cached under a key naming "auto" rather than the chosen
 * schedule, so that a cache hit does not even run the selection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "internal.h"
#include "../compiler/progverify.h"
#include "nbc.h"
#include "selection.h"

#include "builtin.h"

static sched_lib *lib;
static cache *programs;
/* A forced schedule, with what its calls' cache keys need computed once, off the call path. */
typedef struct {
    sched_choice ch;
    uint64_t identity;  /* lib_identity of ch.s */
    int64_t param_hash; /* of the parameter values; 0 without any */
} forcing;
static forcing forced[COLL_COUNT_];
static uint64_t generation; /* bumped whenever the library or the selection changes */
static uint64_t auto_key[COLL_COUNT_]; /* the cache key's schedule under automatic selection */
static uint64_t auto_generation = UINT64_MAX;
static rule_table *rules;
static select_mode mode;
static sim_model model;

static int select_mode_set(const char *text);
static int parse_forcing(nbc_collective coll, const char *spec, forcing *f);
static int load_model_file(const char *path);
static int load_tuning(const char *path, const char *what);

sched_lib *select_library(void) { return lib; }
cache *select_cache(void) { return programs; }

static uint64_t max_insns; /* NBC_MAX_INSNS, or 0: the compiler's default */

/* A whole number 0 .. max from the environment, or dflt when unset; anything else fails
 * nbc_init, as a bad NBC_SELECT or NBC_TUNING does (strtoull alone would take -1 as 2^64-1). */
static int env_number(const char *name, uint64_t dflt, uint64_t max, uint64_t *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return MPI_SUCCESS;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (strspn(v, "0123456789") != strlen(v) || errno == ERANGE || x > max)
        return nbc_fail(MPI_ERR_ARG, "%s: '%.40s' is not a whole number in 0 .. %llu", name, v, (unsigned long long)max);
    *out = x;
    return MPI_SUCCESS;
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
    uint64_t entries, bytes;
    if ((rc = env_number("NBC_CACHE_ENTRIES", 1024, SIZE_MAX, &entries)) ||
        (rc = env_number("NBC_CACHE_BYTES", 64u << 20, SIZE_MAX, &bytes)) ||
        (rc = env_number("NBC_MAX_INSNS", 0, UINT32_MAX - 1, &max_insns)))
        return rc;
    lib = lib_create();
    programs = cache_create((size_t)entries, (size_t)bytes);
    rules = rules_create();
    if (!lib || !programs || !rules) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    sim_model_default(&model);
    if (lib_add_builtins(lib, &d) != 0) return report(MPI_ERR_INTERN, &d, "a built-in schedule does not parse:\n");
    const char *path = getenv("NBC_SCHEDULE_PATH");
    if (path && *path) {
        char *copy = strdup(path);
        if (!copy) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
        rc = 0;
        struct stat st;
        /* as PATH: a directory that does not exist is skipped (a broken file is still an error) */
        for (char *save, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
            if (stat(dir, &st) == 0 && lib_add_path(lib, dir, &d) != 0) rc = -1;
        free(copy);
        if (rc) return report(MPI_ERR_ARG, &d, "NBC_SCHEDULE_PATH: ");
    }
    const struct builtin_schedule *dr = &nbc_default_rules[0];
    if (rules_add(rules, lib, dr->name, dr->text, dr->len, 0, &d) != 0)
        return report(MPI_ERR_INTERN, &d, "the built-in rules do not parse:\n");
    diag_free(&d);
    const char *v;
    if ((v = getenv("NBC_TUNING")) && *v && (rc = load_tuning(v, "NBC_TUNING: ")) != MPI_SUCCESS) return rc;
    if ((v = getenv("NBC_MODEL_FILE")) && *v && (rc = load_model_file(v)) != MPI_SUCCESS) return rc;
    if ((v = getenv("NBC_SELECT")) && *v && (rc = select_mode_set(v)) != MPI_SUCCESS) return rc;
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
    rules_destroy(rules);
    rules = NULL;
    mode = SELECT_RULES;
    cache_destroy(programs);
    lib_destroy(lib);
    programs = NULL;
    lib = NULL;
    memset(forced, 0, sizeof forced);
}

static int load_schedules(const char *path)
{
    int rc;
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
        if (forced[c].ch.s) {
            forced[c].ch.s = lib_find(lib, forced[c].ch.s->name);
            forced[c].identity = lib_identity(lib, forced[c].ch.s);
        }
    generation++;
    cache_clear(programs);
    return MPI_SUCCESS;
}

/* "name" or "name:param=value,param=value" */
int select_force(nbc_collective coll, const char *spec)
{
    forcing f;
    int rc = parse_forcing(coll, spec, &f);
    if (rc == MPI_SUCCESS) forced[coll] = f;
    return rc;
}

static int set_schedule(const char *collective, const char *name)
{
    if (!collective) return nbc_fail(MPI_ERR_ARG, "nbc_set_schedule: no collective named (collective is NULL)");
    int c = collective_from_name(collective);
    if (c < 0) return nbc_fail(MPI_ERR_ARG, "nbc_set_schedule: unknown collective '%s'", collective);
    return select_force((nbc_collective)c, name);
}

/* What select_force records, for one call's spec ("name:param=value"). */
static int parse_forcing(nbc_collective coll, const char *spec, forcing *f)
{
    char err[300];
    memset(f, 0, sizeof *f);
    if (spec && *spec) {
        if (select_parse_choice(lib, coll, spec, &f->ch, err, sizeof err) != 0) return nbc_fail(MPI_ERR_ARG, "%s", err);
        f->identity = lib_identity(lib, f->ch.s);
        f->param_hash = f->ch.nparams ? (int64_t)XXH3_64bits(&f->ch, sizeof f->ch) : 0;
    }
    return MPI_SUCCESS;
}

/* No program is cached or run before the verifier has passed it: a compiler bug must not
 * become a write outside the user's buffers. A race within a round is the schedule's mistake
 * (MPI_ERR_ARG); anything else would be the compiler's (MPI_ERR_INTERN). Frees a program it
 * rejects. */
static int verified(nbc_program *prog, nbc_collective coll, const compile_args *a)
{
    prog_fault f;
    int rc = prog_verify(prog, coll, a, &f);
    if (rc == 0) return MPI_SUCCESS;
    char name[sizeof prog->name];
    snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, prog->name); /* its NUL may be what is wrong */
    free(prog);
    if (rc < 0) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    return nbc_fail(f.race ? MPI_ERR_ARG : MPI_ERR_INTERN, "the program compiled from '%s' fails verification at instruction %u: %s",
                    name, f.pc, f.msg);
}

int select_program(nbc_collective coll, const compile_args *call, const char *spec, cache_entry **out)
{
    forcing own;
    if (spec) {
        int rc = parse_forcing(coll, spec, &own);
        if (rc != MPI_SUCCESS) return rc;
    }
    const forcing *f = spec ? &own : &forced[coll];
    const sched_def *s = f->ch.s;
    compile_args with_params = *call;
    with_params.max_insns = max_insns;
    const compile_args *a = &with_params;
    select_apply_choice(&f->ch, &with_params);
    if (auto_generation != generation) {
        for (int c = 0; c < COLL_COUNT_; c++) auto_key[c] = XXH3_64bits_withSeed("auto", 4, generation * 64 + (uint64_t)c);
        auto_generation = generation;
    }
    cache_key key = {.schedule = s ? f->identity : auto_key[coll],
                     .p = a->p, .rank = a->rank, .count = a->count, .esize = a->esize,
                     .flags = (a->inplace ? 1 : 0) | (a->commutative ? 2 : 0) | a->nbufs << 8, .root = a->root,
                     .param = f->param_hash};
    *out = cache_acquire(programs, &key);
    if (*out) return MPI_SUCCESS;

    diag d;
    diag_init(&d);
    if (!s && !(s = select_choose(lib, rules, mode, &model, coll, &with_params, &d)))
        return report(MPI_ERR_ARG, &d, "no schedule is eligible for this call:\n");
    diag_clear(&d);
    nbc_program *prog;
    int rc = compile_program(lib, s, a, &prog, &d);
    if (rc == COMPILE_UNMET) return report(MPI_ERR_ARG, &d, "");
    if (rc == COMPILE_NOMEM) return report(MPI_ERR_NO_MEM, &d, "");
    if (rc != COMPILE_OK) return report(MPI_ERR_OTHER, &d, "the schedule failed to compile:\n");
    diag_free(&d);
    if ((rc = verified(prog, coll, a)) != MPI_SUCCESS) return rc;
    *out = cache_insert(programs, &key, prog);
    return *out ? MPI_SUCCESS : nbc_fail(MPI_ERR_NO_MEM, "out of memory");
}

/* "rules", "model" or "model:alpha=..,beta=..,gamma=.." */
static int select_mode_set(const char *text)
{
    if (!strcmp(text, "rules")) {
        mode = SELECT_RULES;
    } else if (!strncmp(text, "model", 5) && (text[5] == '\0' || text[5] == ':')) {
        char err[256];
        sim_model m = model;
        if (text[5] && sim_model_parse(text + 6, &m, err, sizeof err) != 0)
            return nbc_fail(MPI_ERR_ARG, "selection '%s': %s", text, err);
        model = m;
        mode = SELECT_MODEL;
    } else {
        return nbc_fail(MPI_ERR_ARG, "unknown selection '%s' (rules, model or model:alpha=..,beta=..,gamma=..)", text);
    }
    generation++;
    cache_clear(programs);
    return MPI_SUCCESS;
}

/* A file of one line "alpha=..,beta=..,gamma=.." (comments with #), read as every file is. */
static int load_model_file(const char *path)
{
    diag d;
    diag_init(&d);
    size_t len;
    char *text = lib_read_file(path, &len, &d);
    if (!text) return report(MPI_ERR_ARG, &d, "NBC_MODEL_FILE: ");
    diag_free(&d);
    char err[256];
    int rc = MPI_ERR_ARG;
    snprintf(err, sizeof err, "no model line");
    for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line[strcspn(line, "#\r")] = '\0';
        if (!line[strspn(line, " \t")]) continue;
        rc = sim_model_parse(line, &model, err, sizeof err) == 0 ? MPI_SUCCESS : MPI_ERR_ARG;
        break;
    }
    free(text);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : nbc_fail(rc, "NBC_MODEL_FILE %s: %s", path, err);
}

static int set_selection(const char *text)
{
    return text ? select_mode_set(text) : nbc_fail(MPI_ERR_ARG, "nbc_set_selection: NULL mode");
}

/* what: how messages start ("NBC_TUNING: " when the environment named the file) */
static int load_tuning(const char *path, const char *what)
{
    int rc;
    if (!path) return nbc_fail(MPI_ERR_ARG, "nbc_load_tuning: path is NULL");
    diag d;
    diag_init(&d);
    rc = rules_load_file(rules, lib, path, &d);
    if (rc != 0) return report(MPI_ERR_ARG, &d, what);
    diag_free(&d);
    generation++;
    cache_clear(programs);
    return MPI_SUCCESS;
}

static int get_cache_stats(nbc_cache_stats *stats)
{
    if (!stats) return nbc_fail(MPI_ERR_ARG, "stats is NULL");
    cache_stats s;
    cache_get_stats(programs, &s);
    *stats = (nbc_cache_stats){s.hits, s.misses, s.evictions, s.entries, s.bytes, s.max_entries, s.max_bytes};
    return MPI_SUCCESS;
}

/* ---- the public calls: under the process lock, the library initialized ---- */

int nbc_load_schedules(const char *path) { NBC_PUBLIC(load_schedules(path)); }
int nbc_set_schedule(const char *collective, const char *name) { NBC_PUBLIC(set_schedule(collective, name)); }
int nbc_set_selection(const char *text) { NBC_PUBLIC(set_selection(text)); }
int nbc_load_tuning(const char *path) { NBC_PUBLIC(load_tuning(path, "")); }
int nbc_get_cache_stats(nbc_cache_stats *stats) { NBC_PUBLIC(get_cache_stats(stats)); }
