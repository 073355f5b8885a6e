/* nbcc: the schedule compiler on the command line. Checks schedules, dumps their compiled
 * programs for review, lists what the library knows, verifies schedules against a simulated
 * network, predicts their time under a cost model and draws them. Runs without MPI. */
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../compiler/compare.h"
#include "../compiler/compile.h"
#include "../compiler/disasm.h"
#include "../compiler/draw.h"
#include "../compiler/library.h"
#include "../compiler/simulate.h"
#include "../compiler/verify.h"
#include "../dsl/collectives.h"

extern const struct builtin_schedule {
    const char *name, *text;
    size_t len;
} nbc_builtin_schedules[];
extern const size_t nbc_builtin_count;

static const struct { const char *name; int size; } types[] = {
    {"int8", 1}, {"char", 1}, {"int16", 2}, {"short", 2}, {"int", 4}, {"int32", 4}, {"float", 4},
    {"int64", 8}, {"long", 8}, {"double", 8}, {"long_double", 16},
};

static int type_by_name(const char *name, int *esize, const char **tname)
{
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
        if (!strcmp(types[k].name, name)) {
            *esize = types[k].size;
            *tname = types[k].name;
            return 0;
        }
    fprintf(stderr, "nbcc: unknown type '%s' (known:", name);
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) fprintf(stderr, " %s", types[k].name);
    fprintf(stderr, ")\n");
    return -1;
}

static const char *const usage_main =
    "usage: nbcc COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check FILE...     parse schedule files and compile them for p = 1..8; report mistakes\n"
    "  dump SCHEDULE     print the compiled program of a schedule (a name or a file)\n"
    "  list [FILE...]    list the schedules known (built-in, plus the files given)\n"
    "  verify SCHEDULE   run every rank's program together on a simulated network and check\n"
    "                    messages, deadlock, bounds, races and the result\n"
    "  simulate SCHEDULE predict the time under an alpha-beta-gamma or LogGP cost model;\n"
    "                    --compare ranks every eligible schedule over a grid of p and sizes\n"
    "  draw SCHEDULE     write a space-time diagram (SVG, dot) or the bytes moved per step\n"
    "\n"
    "nbcc COMMAND --help tells more about each.\n";

static const char *const usage_check =
    "usage: nbcc check FILE...\n"
    "\n"
    "Parses each file and compiles every schedule in it that implements a collective, for\n"
    "p = 1..8, every rank, several counts, in place and not, commutative op or not. Prints\n"
    "errors as file:line:column: message. Exit status 1 when there is any error.\n";

static const char *const usage_dump =
    "usage: nbcc dump NAME|FILE --p P [--rank R] [--count N] [--type T] [--inplace]\n"
    "                 [--noncommutative] [--root R] [--schedule NAME]\n"
    "\n"
    "Compiles a schedule (a built-in name, or the first schedule implementing a collective in\n"
    "FILE, or --schedule NAME from it) for P processes and prints the program of rank R, or of\n"
    "every rank when --rank is left out: one instruction a line with its round, opcode, peer,\n"
    "buffer, byte offset, length, source buffer and offset, and the schedule line it came from.\n"
    "  --count N          elements (default 8)\n"
    "  --type T           int8 char int16 short int int32 float int64 long double long_double\n"
    "                     (default int)\n"
    "  --inplace          sendbuf is MPI_IN_PLACE\n"
    "  --noncommutative   the op is not commutative\n"
    "  --root R           the root of a rooted collective (default 0)\n";

static const char *const usage_list =
    "usage: nbcc list [FILE...]\n"
    "\n"
    "Lists every schedule known (the built-in ones and those in the files given) with the\n"
    "collective it implements and its preconditions.\n";

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

static sched_lib *load_builtins(void)
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
        fprintf(stderr, "nbcc: out of memory\n");
        exit(1);
    }
    return lib;
}

/* Loads a file into lib; returns its parsed schedules through the library's file list. */
static int load(sched_lib *lib, const char *path)
{
    diag d;
    diag_init(&d);
    int rc = lib_add_path(lib, path, &d);
    if (rc) fprintf(stderr, "%s", d.text ? d.text : "");
    diag_free(&d);
    return rc;
}

/* The schedules that came from file `path` (matched by their source's name). */
static const sched_def *next_from(const sched_lib *lib, const char *path, size_t *i)
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

/* Compiles s for many parameters; prints the first error. */
static int check_schedule(const sched_lib *lib, const sched_def *s)
{
    diag d;
    diag_init(&d);
    int bad = 0;
    for (int64_t p = 1; p <= 8 && !bad; p++) {
        const int64_t counts[] = {0, 1, p - 1, p, p + 1, 100, 1001};
        for (size_t c = 0; c < sizeof counts / sizeof *counts && !bad; c++)
            for (int flags = 0; flags < 4 && !bad; flags++)
                for (int64_t r = 0; r < p && !bad; r++) {
                    compile_args a = {.p = p, .rank = r, .count = counts[c], .esize = 8,
                                      .inplace = flags & 1, .commutative = !(flags & 2)};
                    nbc_program *prog = NULL;
                    int rc = compile_program(lib, s, &a, &prog, &d);
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

static int cmd_check(int argc, char **argv)
{
    if (argc < 2 || wants_help(argc, argv)) {
        fputs(usage_check, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int errors = 0;
    for (int i = 1; i < argc; i++) {
        sched_lib *lib = load_builtins();
        if (load(lib, argv[i]) != 0) {
            errors++;
        } else {
            int n = 0, bad = 0;
            size_t at = 0;
            for (const sched_def *s; (s = next_from(lib, argv[i], &at));) {
                n++;
                if (s->collective) bad |= check_schedule(lib, s);
            }
            if (bad) errors++;
            else printf("%s: ok (%d schedule%s)\n", argv[i], n, n == 1 ? "" : "s");
        }
        lib_destroy(lib);
    }
    return errors ? 1 : 0;
}

static long long number(const char *opt, const char *v)
{
    char *end;
    long long x = strtoll(v, &end, 0);
    if (!*v || *end) {
        fprintf(stderr, "nbcc: %s wants a number, not '%s'\n", opt, v);
        exit(2);
    }
    return x;
}

/* The schedules NAME|FILE stands for: a known name, or the schedules of a file that implement
 * a collective; --schedule NAME picks one by name. Returns how many were found (at most max),
 * or -1 when the file does not load. */
static int find_schedules(sched_lib *lib, const char *what, const char *sname, const sched_def **out, int max)
{
    struct stat st;
    int n = 0;
    if (stat(what, &st) == 0) {
        if (load(lib, what) != 0) return -1;
        size_t at = 0;
        for (const sched_def *t; n < max && (t = next_from(lib, what, &at));)
            if (sname ? !strcmp(t->name, sname) : t->collective != NULL) out[n++] = t;
    } else {
        const sched_def *t = lib_find(lib, sname ? sname : what);
        if (t) out[n++] = t;
    }
    return n;
}

static void complain_missing(const char *cmd, const char *what, const char *sname)
{
    fprintf(stderr, "nbcc %s: no schedule '%s'%s (nbcc list shows them)\n", cmd, sname ? sname : what, sname ? " in that file" : "");
}

static int cmd_dump(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_dump, stdout);
        return 0;
    }
    static const struct option opts[] = {
        {"p", required_argument, 0, 'p'},           {"rank", required_argument, 0, 'r'},
        {"count", required_argument, 0, 'c'},       {"type", required_argument, 0, 't'},
        {"inplace", no_argument, 0, 'i'},           {"noncommutative", no_argument, 0, 'n'},
        {"schedule", required_argument, 0, 's'},    {"root", required_argument, 0, 'R'},
        {0, 0, 0, 0},
    };
    long long p = 0, rank = -1, count = 8, root = -1;
    int esize = 4, inplace = 0, commutative = 1;
    const char *tname = "int", *sname = NULL;
    optind = 1;
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'p': p = number("--p", optarg); break;
        case 'r': rank = number("--rank", optarg); break;
        case 'c': count = number("--count", optarg); break;
        case 'i': inplace = 1; break;
        case 'n': commutative = 0; break;
        case 's': sname = optarg; break;
        case 'R': root = number("--root", optarg); break;
        case 't':
            if (type_by_name(optarg, &esize, &tname)) return 2;
            break;
        default: fputs(usage_dump, stderr); return 2;
        }
    }
    if (optind != argc - 1 || p < 1 || rank >= p || count < 0 || root >= p) {
        fprintf(stderr, "nbcc dump: %s\n", optind != argc - 1 ? "name one schedule or file"
                                           : p < 1 ? "--p P (P >= 1) is required"
                                           : rank >= p ? "--rank must be below --p"
                                           : root >= p ? "--root must be below --p" : "--count must be >= 0");
        fputs(usage_dump, stderr);
        return 2;
    }
    const char *what = argv[optind];
    sched_lib *lib = load_builtins();
    const sched_def *s = NULL;
    int found = find_schedules(lib, what, sname, &s, 1);
    if (found <= 0) {
        if (found == 0) complain_missing("dump", what, sname);
        lib_destroy(lib);
        return 1;
    }
    int rc = 0;
    diag d;
    diag_init(&d);
    for (long long r = rank < 0 ? 0 : rank; r < (rank < 0 ? p : rank + 1) && !rc; r++) {
        compile_args a = {.p = p, .rank = r, .count = count, .esize = esize, .inplace = inplace, .commutative = commutative,
                          .root = root < 0 ? 0 : root};
        nbc_program *prog;
        if (compile_program(lib, s, &a, &prog, &d) != COMPILE_OK) {
            fprintf(stderr, "%s", d.text ? d.text : "");
            rc = 1;
            break;
        }
        char rooted[32] = "";
        if (root >= 0) snprintf(rooted, sizeof rooted, " root=%lld", root);
        printf("%sschedule %s (%s) p=%lld rank=%lld count=%lld type=%s%s%s%s\n", r > (rank < 0 ? 0 : rank) ? "\n" : "",
               s->name, s->src->name, p, r, count, tname, inplace ? " inplace" : "",
               commutative ? "" : " noncommutative", rooted);
        prog_disasm(prog, stdout);
        free(prog);
    }
    diag_free(&d);
    lib_destroy(lib);
    return rc;
}

static int cmd_list(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_list, stdout);
        return 0;
    }
    sched_lib *lib = load_builtins();
    for (int i = 1; i < argc; i++)
        if (load(lib, argv[i]) != 0) {
            lib_destroy(lib);
            return 1;
        }
    printf("%-32s %-12s %s\n", "schedule", "collective", "requires");
    for (size_t i = 0; i < lib_count(lib); i++) {
        const sched_def *s = lib_at(lib, i);
        printf("%-32s %-12s ", s->name, s->collective ? s->collective : "-");
        if (!s->requires) printf("-");
        for (const node *r = s->requires; r; r = r->next) printf("%s%s", r->text, r->next ? ", " : "");
        printf("\n");
    }
    lib_destroy(lib);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "check")) return cmd_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump")) return cmd_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return 0;
    }
    fprintf(stderr, "nbcc: unknown command '%s'\n\n%s", cmd, usage_main);
    return 2;
}
