/* nbcc check: parses schedule files and compiles each schedule that implements a collective
 * for p = 1..8, every rank, several counts, in place and not, commutative op or not. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collectives.h"
#include "nbcc.h"
#include "verify.h"

static const char *const usage_check =
    "usage: nbcc check [--no-shared-memory] FILE|DIR...\n"
    "\n"
    "Parses each file (a directory stands for its *.nbs files) and compiles every schedule in\n"
    "it that implements a collective, for p = 1..8, every rank, several counts, in place and\n"
    "not, commutative op or not. Prints errors as file:line:column: message. Exit status 1\n"
    "when there is any error.\n";

/* Compiles s for many parameters; prints the first error. */
static int check_schedule(const sched_lib *lib, const sched_def *s)
{
    diag d;
    diag_init(&d);
    int bad = 0;
    int coll = s->collective ? collective_from_name(s->collective) : -1;
    for (int64_t p = 1; p <= 8 && !bad; p++) {
        const int64_t counts[] = {0, 1, p - 1, p, p + 1, 100, 1001};
        for (size_t c = 0; c < sizeof counts / sizeof *counts && !bad; c++)
            for (int flags = 0; flags < 4 && !bad; flags++)
                for (int64_t r = 0; r < p && !bad; r++) {
                    compile_args a = {.p = p, .rank = r, .count = counts[c], .esize = 8, .max_insns = nbcc_max_insns,
                                      .shared_memory = nbcc_shared_memory, .inplace = collective_inplace_at(coll, r, 0, flags & 1), .commutative = !(flags & 2)};
                    int64_t space[4 * 8];
                    /* a vector collective: the verifier's vector cases, then equal counts */
                    int vcase = c < VERIFY_VECTOR_CASES ? (int)c : VERIFY_UNIFORM;
                    verify_vectors(collective_from_name(s->collective), vcase, 1, &a, r, space);
                    nbc_program *prog = NULL;
                    int rc = compile_program(lib, s, &a, &prog, &d);
                    if (rc == COMPILE_OK && verify_program(s, prog, &a)) rc = COMPILE_ERROR;
                    free(prog);
                    if (rc == COMPILE_UNMET) {
                        diag_clear(&d);
                        break; /* not for these parameters: fine */
                    }
                    if (rc != COMPILE_OK) {
                        fprintf(stderr, "%s", d.text ? d.text : "");
                        fprintf(stderr, "  (while compiling '%s' for p = %lld, rank = %lld, count = %lld%s%s)\n", s->name,
                                (long long)p, (long long)r, (long long)counts[c], a.inplace ? ", in place" : "",
                                a.commutative ? "" : ", non-commutative op");
                        bad = 1;
                    }
                }
    }
    diag_free(&d);
    return bad;
}

/* Checks one file on top of the built-in schedules; 0 when it is fine. */
static int check_file(const char *path)
{
    sched_lib *lib = load_builtins();
    int loaded = load_file(lib, path) == 0, bad = !loaded, n = 0;
    size_t at = 0;
    for (const sched_def *s; loaded && (s = next_from(lib, path, &at));) {
        n++;
        if (s->collective) bad |= check_schedule(lib, s);
    }
    if (!bad) printf("%s: ok (%d schedule%s)\n", path, n, n == 1 ? "" : "s");
    lib_destroy(lib);
    return bad;
}

static int is_nbs(const struct dirent *e)
{
    size_t l = strlen(e->d_name);
    return l > 4 && !strcmp(e->d_name + l - 4, ".nbs");
}

/* A directory stands for its *.nbs files, each checked and reported on its own. */
static int check_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, is_nbs, alphasort), bad = 0;
    if (n < 0) {
        nbcc_error("%s: cannot read the directory", dir);
        return 1;
    }
    if (n == 0) {
        nbcc_error("%s: no *.nbs file in it", dir);
        bad = 1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]->d_name);
        bad |= check_file(path);
        free(names[i]);
    }
    free(names);
    return bad;
}

int nbcc_check(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_check, stdout);
        return 0;
    }
    nbcc_opts o = {0};
    int status = nbcc_options(argc, argv, "", &o); /* --no-shared-memory only */
    if (status >= 0) return status;
    if (o.rest >= argc) return nbcc_usage_error("name at least one file or directory");
    int errors = 0;
    for (int i = o.rest; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) errors += check_dir(argv[i]);
        else errors += check_file(argv[i]);
    }
    return errors ? 1 : 0;
}
