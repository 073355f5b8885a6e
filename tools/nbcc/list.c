/* nbcc list: every schedule known, its collective, order and preconditions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "nbcc.h"

static const char *const usage_list =
    "usage: nbcc list [FILE...]\n"
    "\n"
    "Lists every schedule known (the built-in ones and those in the files given) with the\n"
    "collective it implements and its preconditions.\n";


static int rank_of(const sched_def *s)
{
    int c = s->collective ? collective_from_name(s->collective) : -1;
    return c < 0 ? COLL_COUNT_ : c;
}

static int by_collective(const void *a, const void *b)
{
    const sched_def *x = *(const sched_def *const *)a, *y = *(const sched_def *const *)b;
    int cx = rank_of(x), cy = rank_of(y);
    return cx != cy ? cx - cy : strcmp(x->name, y->name);
}

int nbcc_list(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_list, stdout);
        return 0;
    }
    sched_lib *lib = load_builtins();
    for (int i = 1; i < argc; i++)
        if (load_file(lib, argv[i]) != 0) {
            lib_destroy(lib);
            return 1;
        }
    /* by collective, in the order of the README's table, then by name; building blocks last */
    size_t n = lib_count(lib);
    const sched_def **all = malloc((n + 1) * sizeof *all);
    if (!all) {
        lib_destroy(lib);
        nbcc_error("out of memory");
        return 1;
    }
    for (size_t i = 0; i < n; i++) all[i] = lib_at(lib, i);
    qsort(all, n, sizeof *all, by_collective);
    /* order: "ordered" reduces in rank order (any associative op); "-" does not reduce */
    printf("%-34s %-15s %-12s %s\n", "schedule", "collective", "order", "requires");
    for (size_t i = 0; i < n; i++) {
        const sched_def *s = all[i];
        const char *c = s->collective ? s->collective : "(block)";
        int reduces = strstr(c, "reduce") != NULL;
        printf("%-34s %-15s %-12s ", s->name, c, s->ordered ? "ordered" : reduces ? "commutative" : "-");
        if (!s->requires) printf("-");
        for (const node *r = s->requires; r; r = r->next) printf("%s%s", r->text, r->next ? ", " : "");
        printf("\n");
    }
    free(all);
    lib_destroy(lib);
    return 0;
}
