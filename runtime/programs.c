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

#include "state.h"
#include "../compiler/progverify.h"
#include "trace.h"
#include "nbc.h"
#include "selection.h"

#include "builtin.h"

static int select_mode_set(const char *text);
static int parse_forcing(nbc_collective coll, const char *spec, forcing *f);
static int load_model_file(const char *path);
static int load_tuning(const char *path, const char *what);

static int report(int code, diag *d, const char *what)
{
    int rc = nbc_fail(code, "%s%s", what, d->text ? d->text : "");
    diag_free(d);
    return rc;
}

int programs_init(void)
{
    diag d;
    int rc;
    diag_init(&d);
    const nbc_settings *env = &nbc_rt.env;
    nbc_rt.sel.lib = lib_create();
    nbc_rt.sel.programs = cache_create((size_t)env->cache_entries, (size_t)env->cache_bytes);
    nbc_rt.sel.rules = rules_create();
    if (!nbc_rt.sel.lib || !nbc_rt.sel.programs || !nbc_rt.sel.rules) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    sim_model_default(&nbc_rt.sel.model);
    if (lib_add_builtins(nbc_rt.sel.lib, &d) != 0) return report(MPI_ERR_INTERN, &d, "a built-in schedule does not parse:\n");
    const char *path = env->schedule_path;
    if (path) {
        char *copy = strdup(path);
        if (!copy) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
        rc = 0;
        struct stat st;
        /* as PATH: a directory that does not exist is skipped (a broken file is still an error) */
        for (char *save, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
            if (stat(dir, &st) == 0 && lib_add_path(nbc_rt.sel.lib, dir, &d) != 0) rc = -1;
        free(copy);
        if (rc) return report(MPI_ERR_ARG, &d, "NBC_SCHEDULE_PATH: ");
    }
    const struct builtin_schedule *dr = &nbc_default_rules[0];
    if (rules_add(nbc_rt.sel.rules, nbc_rt.sel.lib, dr->name, dr->text, dr->len, 0, &d) != 0)
        return report(MPI_ERR_INTERN, &d, "the built-in rules do not parse:\n");
    diag_free(&d);
    if (env->tuning && (rc = load_tuning(env->tuning, "NBC_TUNING: ")) != MPI_SUCCESS) return rc;
    if (env->model_file && (rc = load_model_file(env->model_file)) != MPI_SUCCESS) return rc;
    if (env->select && (rc = select_mode_set(env->select)) != MPI_SUCCESS) return rc;
    for (int c = 0; c < COLL_COUNT_; c++)
        if (env->forced[c] && (rc = programs_force((nbc_collective)c, env->forced[c])) != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
}

void programs_finalize(void)
{
    rules_destroy(nbc_rt.sel.rules);
    nbc_rt.sel.rules = NULL;
    nbc_rt.sel.mode = SELECT_RULES;
    cache_destroy(nbc_rt.sel.programs);
    lib_destroy(nbc_rt.sel.lib);
    nbc_rt.sel.programs = NULL;
    nbc_rt.sel.lib = NULL;
    memset(nbc_rt.sel.forced, 0, sizeof nbc_rt.sel.forced);
    nbc_rt.sel.shared_generation = 0; /* its schedules were the library's */
}

int programs_load_schedules(const char *path)
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
    lib_add_path(nbc_rt.sel.lib, path, &d);
    diag_free(&d);
    /* forced schedules are looked up again: a replaced one must not dangle */
    for (int c = 0; c < COLL_COUNT_; c++)
        if (nbc_rt.sel.forced[c].ch.s) {
            nbc_rt.sel.forced[c].ch.s = lib_find(nbc_rt.sel.lib, nbc_rt.sel.forced[c].ch.s->name);
            nbc_rt.sel.forced[c].identity = lib_identity(nbc_rt.sel.lib, nbc_rt.sel.forced[c].ch.s);
        }
    nbc_rt.sel.generation++;
    nbc_rt.sel.epoch++;
    cache_clear(nbc_rt.sel.programs);
    return MPI_SUCCESS;
}

/* "name" or "name:param=value,param=value" */
int programs_force(nbc_collective coll, const char *spec)
{
    forcing f;
    int rc = parse_forcing(coll, spec, &f);
    if (rc == MPI_SUCCESS) nbc_rt.sel.forced[coll] = f;
    nbc_rt.sel.epoch++;
    return rc;
}

int programs_set_schedule(const char *collective, const char *name)
{
    if (!collective) return nbc_fail(MPI_ERR_ARG, "nbc_set_schedule: no collective named (collective is NULL)");
    int c = collective_from_name(collective);
    if (c < 0) return nbc_fail(MPI_ERR_ARG, "nbc_set_schedule: unknown collective '%s'", collective);
    return programs_force((nbc_collective)c, name);
}

/* What programs_force records, for one call's spec ("name:param=value"). */
static int parse_forcing(nbc_collective coll, const char *spec, forcing *f)
{
    char err[300];
    memset(f, 0, sizeof *f);
    if (spec && *spec) {
        if (select_parse_choice(nbc_rt.sel.lib, coll, spec, &f->ch, err, sizeof err) != 0) return nbc_fail(MPI_ERR_ARG, "%s", err);
        f->identity = lib_identity(nbc_rt.sel.lib, f->ch.s);
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

static int program_with(nbc_collective coll, const compile_args *call, const forcing *f, const forcing *instead, cache_entry **out);
static int program_keyed(nbc_collective coll, const compile_args *call, const forcing *f, const forcing *instead,
                         const cache_key *key, cache_entry **out);

int programs_for_call(nbc_collective coll, const compile_args *call, const char *spec, cache_entry **out)
{
    forcing own;
    if (spec) {
        int rc = parse_forcing(coll, spec, &own);
        if (rc != MPI_SUCCESS) return rc;
    }
    return program_with(coll, call, spec ? &own : &nbc_rt.sel.forced[coll], NULL, out);
}

/* The shared program of an allreduce on one node: allreduce_shm_small where it applies (small
 * calls, any buffers), else allreduce_shm (built in, or loaded schedules of those names),
 * looked up again whenever the library or the selection changes. When it is the stage's
 * program (no PROG_AGREE) and the call has SHM_DIRECT_MIN_BYTES or more, *direct is
 * allreduce_shm's too, which the runtime takes when every rank's buffers are shared; else NULL. */
int programs_for_shared(const compile_args *call, cache_entry **out, cache_entry **direct)
{
    *direct = NULL;
    if (nbc_rt.sel.shared_generation != nbc_rt.sel.generation + 1) {
        int rc = parse_forcing(COLL_ALLREDUCE, "allreduce_shm_small", &nbc_rt.sel.shared_small);
        if (rc == MPI_SUCCESS) rc = parse_forcing(COLL_ALLREDUCE, "allreduce_shm", &nbc_rt.sel.shared);
        if (rc != MPI_SUCCESS) return rc;
        nbc_rt.sel.shared_generation = nbc_rt.sel.generation + 1;
    }
    int rc = program_with(COLL_ALLREDUCE, call, &nbc_rt.sel.shared_small, &nbc_rt.sel.shared, out);
    if (rc != MPI_SUCCESS || (cache_entry_program(*out)->flags & PROG_AGREE) ||
        (uint64_t)call->count * (uint64_t)call->esize < SHM_DIRECT_MIN_BYTES)
        return rc;
    /* the same on every rank, as the program is: without it, the stage on any buffers */
    if (program_with(COLL_ALLREDUCE, call, &nbc_rt.sel.shared, NULL, direct) != MPI_SUCCESS) {
        *direct = NULL;
    } else if (!(cache_entry_program(*direct)->flags & PROG_AGREE)) {
        cache_release(nbc_rt.sel.programs, *direct);
        *direct = NULL;
    }
    return MPI_SUCCESS;
}

/* The program of schedule f (automatic selection when it names none) for the call; with
 * `instead`, that schedule's when f's preconditions refuse the call (cached under a key of
 * both). */
static int program_with(nbc_collective coll, const compile_args *call, const forcing *f, const forcing *instead, cache_entry **out)
{
    const sched_def *s = f->ch.s;
    compile_args with_params = *call;
    with_params.max_insns = nbc_rt.env.max_insns;
    const compile_args *a = &with_params;
    select_apply_choice(&f->ch, &with_params);
    if (nbc_rt.sel.auto_generation != nbc_rt.sel.generation) {
        for (int c = 0; c < COLL_COUNT_; c++) nbc_rt.sel.auto_key[c] = XXH3_64bits_withSeed("auto", 4, nbc_rt.sel.generation * 64 + (uint64_t)c);
        nbc_rt.sel.auto_generation = nbc_rt.sel.generation;
    }
    cache_key key = {.schedule = (s ? f->identity : nbc_rt.sel.auto_key[coll]) ^ (instead ? instead->identity * 31 : 0),
                     .p = a->p, .rank = a->rank, .count = a->count, .esize = a->esize,
                     .flags = (a->inplace ? 1 : 0) | (a->commutative ? 2 : 0) | (a->shared_memory ? 4 : 0) | a->nbufs << 8, .root = a->root,
                     .param = f->param_hash};
    /* a vector collective's vectors are part of the key, those the call has on this rank in
     * turn; which ones it has goes in flags (bits 4 ..); then the node map, when the call has
     * one (bit 3) */
    int64_t small[5 * 64], *vec = small;
    if (collective_has_vectors(coll) || a->node_of) {
        size_t p = (size_t)a->p, n = 0;
        if (5 * p > sizeof small / sizeof *small && !(vec = malloc(5 * p * sizeof *vec))) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
        for (int k = 0; k < COLL_NVEC; k++)
            if (a->vec[k]) {
                memcpy(vec + n, a->vec[k], p * sizeof *vec);
                n += p;
                key.flags |= (int64_t)16 << k;
            }
        if (a->node_of) {
            memcpy(vec + n, a->node_of, p * sizeof *vec);
            n += p;
            key.flags |= 8;
        }
        key.vec = vec;
        key.nvec = (int64_t)n;
    }
    int rc = program_keyed(coll, call, f, instead, &key, out);
    if (vec != small) free(vec);
    return rc;
}

/* program_with's work once its key is made. */
static int program_keyed(nbc_collective coll, const compile_args *call, const forcing *f, const forcing *instead,
                         const cache_key *key_, cache_entry **out)
{
    const sched_def *s = f->ch.s;
    compile_args with_params = *call;
    with_params.max_insns = nbc_rt.env.max_insns;
    const compile_args *a = &with_params;
    select_apply_choice(&f->ch, &with_params);
    const cache_key key = *key_;
    *out = cache_acquire(nbc_rt.sel.programs, &key);
    if (*out) return MPI_SUCCESS;

    diag d;
    diag_init(&d);
    if (!s && !(s = select_choose(nbc_rt.sel.lib, nbc_rt.sel.rules, nbc_rt.sel.mode, &nbc_rt.sel.model, coll, &with_params, &d)))
        return report(MPI_ERR_ARG, &d, "no schedule is eligible for this call:\n");
    diag_clear(&d);
    nbc_program *prog;
    int rc = compile_program(nbc_rt.sel.lib, s, a, &prog, &d);
    if (rc == COMPILE_UNMET && instead) {
        diag_clear(&d);
        with_params = *call;
        with_params.max_insns = nbc_rt.env.max_insns;
        select_apply_choice(&instead->ch, &with_params);
        s = instead->ch.s;
        rc = compile_program(nbc_rt.sel.lib, s, a, &prog, &d);
    }
    if (rc == COMPILE_UNMET) return report(MPI_ERR_ARG, &d, "");
    if (rc == COMPILE_NOMEM) return report(MPI_ERR_NO_MEM, &d, "");
    if (rc != COMPILE_OK) return report(MPI_ERR_OTHER, &d, "the schedule failed to compile:\n");
    diag_free(&d);
    if ((rc = verified(prog, coll, a)) != MPI_SUCCESS) return rc;
    if (nbc_rt.env.trace > 0) trace_program(s, coll, a, prog);
    nbc_rt.sel.epoch++; /* the insertion may evict another program */
    *out = cache_insert(nbc_rt.sel.programs, &key, prog);
    return *out ? MPI_SUCCESS : nbc_fail(MPI_ERR_NO_MEM, "out of memory");
}

/* "rules", "model" or "model:alpha=..,beta=..,gamma=.." */
static int select_mode_set(const char *text)
{
    if (!strcmp(text, "rules")) {
        nbc_rt.sel.mode = SELECT_RULES;
    } else if (!strncmp(text, "model", 5) && (text[5] == '\0' || text[5] == ':')) {
        char err[256];
        sim_model m = nbc_rt.sel.model;
        if (text[5] && sim_model_parse(text + 6, &m, err, sizeof err) != 0)
            return nbc_fail(MPI_ERR_ARG, "selection '%s': %s", text, err);
        nbc_rt.sel.model = m;
        nbc_rt.sel.mode = SELECT_MODEL;
    } else {
        return nbc_fail(MPI_ERR_ARG, "unknown selection '%s' (rules, model or model:alpha=..,beta=..,gamma=..)", text);
    }
    nbc_rt.sel.generation++;
    nbc_rt.sel.epoch++;
    cache_clear(nbc_rt.sel.programs);
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
        rc = sim_model_parse(line, &nbc_rt.sel.model, err, sizeof err) == 0 ? MPI_SUCCESS : MPI_ERR_ARG;
        break;
    }
    free(text);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : nbc_fail(rc, "NBC_MODEL_FILE %s: %s", path, err);
}

int programs_set_selection(const char *text)
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
    rc = rules_load_file(nbc_rt.sel.rules, nbc_rt.sel.lib, path, &d);
    if (rc != 0) return report(MPI_ERR_ARG, &d, what);
    diag_free(&d);
    nbc_rt.sel.generation++;
    nbc_rt.sel.epoch++;
    cache_clear(nbc_rt.sel.programs);
    return MPI_SUCCESS;
}

uint64_t programs_epoch(void) { return nbc_rt.sel.epoch; }

int programs_cache_stats(nbc_cache_stats *stats)
{
    if (!stats) return nbc_fail(MPI_ERR_ARG, "stats is NULL");
    cache_stats s;
    cache_get_stats(nbc_rt.sel.programs, &s);
    *stats = (nbc_cache_stats){s.hits, s.misses, s.evictions, s.entries, s.bytes, s.max_entries, s.max_bytes};
    return MPI_SUCCESS;
}

int programs_load_tuning(const char *path) { return load_tuning(path, ""); }
