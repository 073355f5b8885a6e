/* nbcc: the schedule compiler on the command line. Checks schedules, dumps their compiled
 * programs for review, lists what the library knows, verifies schedules against a simulated
 * network, predicts their time under a cost model and draws them. Runs without MPI. */
#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "compare.h"
#include "../compiler/compile.h"
#include "../compiler/disasm.h"
#include "draw.h"
#include "../compiler/library.h"
#include "../compiler/progverify.h"
#include "nbcc_failures.h"
#include "nbcc_select.h"
#include "../compiler/simulate.h"
#include "verify.h"
#include "../dsl/collectives.h"
#include "../runtime/nbc.h"
#include "../runtime/selection.h"

#include "builtin.h"

static const struct { const char *name; int size; } types[] = {
    {"int8", 1}, {"char", 1}, {"int16", 2}, {"short", 2}, {"int", 4}, {"int32", 4}, {"float", 4},
    {"int64", 8}, {"long", 8}, {"double", 8}, {"long_double", 16},
};

/* Every message starts with the command, "nbcc dump: ...", so it says who complains. */
const char *nbcc_cmd = "nbcc";

void nbcc_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", nbcc_cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A mistake on the command line: one line, not the whole usage again. Returns 2. */
int nbcc_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", nbcc_cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see '%s --help')\n", nbcc_cmd);
    va_end(ap);
    return 2;
}

/* getopt_long's '?' or ':' (the option strings start with ':'), told in our own words. */
int nbcc_bad_option(char **argv, int c)
{
    const char *opt = argv[optind - 1];
    return c == ':' ? nbcc_usage_error("%s wants a value", opt) : nbcc_usage_error("unknown option '%s'", opt);
}

int nbcc_bad_collective(const char *name)
{
    char known[256] = "";
    for (int c = 0; c < COLL_COUNT_; c++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", c ? ", " : "", collective_names[c]);
    return nbcc_usage_error("unknown collective '%s' (known: %s)", name, known);
}

int nbcc_type(const char *name, int *esize, const char **tname)
{
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
        if (!strcmp(types[k].name, name)) {
            *esize = types[k].size;
            *tname = types[k].name;
            return 0;
        }
    char known[256] = "";
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", types[k].name);
    nbcc_usage_error("unknown type '%s' (known: %s)", name, known);
    return -1;
}

static const char *const usage_main =
    "usage: nbcc COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check FILE...     parse schedule files and compile them for p = 1..8; report mistakes\n"
    "  dump SCHEDULE     print the compiled program of a schedule (a name or a file)\n"
    "  list [FILE...]    list the schedules known (built-in, plus the files given)\n"
    "  explain           which schedule a call would get, and why, under each selection mode\n"
    "  calibrate         measure alpha, beta, gamma on this machine (under mpiexec -n 2)\n"
    "  tune              time every schedule and write a tuning file (under mpiexec)\n"
    "  verify SCHEDULE   run every rank's program together on a simulated network and check\n"
    "                    messages, deadlock, bounds, races and the result\n"
    "  simulate SCHEDULE predict the time under an alpha-beta-gamma or LogGP cost model;\n"
    "                    --compare ranks every eligible schedule over a grid of p and sizes\n"
    "  draw SCHEDULE     write a space-time diagram (SVG, dot) or the bytes moved per step\n"
    "  failures SCHEDULE what each rank's failure at each round costs an allreduce: what is\n"
    "                    lost, what survives, whether the others can finish\n"
    "\n"
    "A SCHEDULE is a file or a name: the full one, or without its collective's prefix as\n"
    "NBC_ALLREDUCE and rule files take it (ring: allreduce_ring; an allreduce's first, else\n"
    "the one collective's that has it: dissemination is barrier_dissemination).\n"
    "nbcc help COMMAND, or nbcc COMMAND --help, tells more about each; nbcc --version prints\n"
    "the version.\n";

static const char *const usage_check =
    "usage: nbcc check FILE|DIR...\n"
    "\n"
    "Parses each file (a directory stands for its *.nbs files) and compiles every schedule in\n"
    "it that implements a collective, for p = 1..8, every rank, several counts, in place and\n"
    "not, commutative op or not. Prints errors as file:line:column: message. Exit status 1\n"
    "when there is any error.\n";

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

static const char *const usage_verify =
    "usage: nbcc verify NAME|FILE --p LIST [--count N | --counts LIST] [--type T] [--inplace]\n"
    "                   [--commutative | --noncommutative] [--root R] [--seed S] [--param NAME=V]\n"
    "                   [--nbufs LIST] [--schedule NAME]\n"
    "\n"
    "Compiles every rank's program of a schedule (a built-in name, every schedule implementing a\n"
    "collective in FILE, or --schedule NAME) and runs them together against a simulated network,\n"
    "for each p and count given. Checks that every send meets a receive of the same length from\n"
    "the right peer, in posting order, and nothing is left unmatched; that nothing deadlocks (the\n"
    "cycle of waiting ranks is shown); that no instruction reaches outside its buffer; that no\n"
    "round writes bytes it also sends or receives; and that every rank ends with exactly the\n"
    "collective's result: each rank's contribution once in each element, and for an 'ordered'\n"
    "schedule in rank order 0, 1, ..., p-1 with the same grouping on every rank. A failure names\n"
    "the schedule's file:line:column, the rank, the round and the instruction.\n"
    "  --p LIST         process counts: 8, 1..64, 2,4,8 or 2..1024*2 (default 1..16)\n"
    "  --count N        elements (default: --counts 1,p+1,1001)\n"
    "  --counts LIST    several counts; items may use p, as in 0,p-1,2p+1\n"
    "  --type T         element type, as for nbcc dump (default int)\n"
    "  --inplace        sendbuf is MPI_IN_PLACE\n"
    "  --commutative    only a commutative op\n"
    "  --noncommutative only a non-commutative op (default: a commutative one, and also a\n"
    "                   non-commutative one for 'ordered' schedules, where the order is checked)\n"
    "  --root R         the root of a rooted collective (default 0)\n"
    "  --seed S         seed of the random contributions (default 1)\n"
    "  --param NAME=V   a value for one of the schedule's params (up to 4 times)\n"
    "  --nbufs LIST     buffers per rank of a multi-buffer collective (default 1,3; always in place)\n"
    "Exit status 1 when a check fails, or when the schedule applies to none of the cases.\n";

static const char *const usage_simulate =
    "usage: nbcc simulate NAME|FILE --p P (--bytes N | --count N) [--type T] [--model SPEC]\n"
    "                     [--inplace] [--noncommutative] [--root R] [--rounds N] [--param NAME=V]\n"
    "                     [--nbufs N] [--schedule NAME]\n"
    "       nbcc simulate --compare [NAME|FILE...] [--collective C] [--p LIST] [--bytes LIST]\n"
    "                     [--type T] [--model SPEC] [--inplace] [--noncommutative] [--nbufs N]\n"
    "\n"
    "Predicts when each rank of a schedule finishes under a cost model, running all the ranks'\n"
    "programs against a timed network, and prints the time, the critical path (as the model\n"
    "terms it adds up to, and for p <= 4096 the ranks and rounds it goes through) and a table of\n"
    "the rounds. A message of n bytes takes alpha + n*beta and leaves through its sender's one\n"
    "port; reducing n bytes takes n*gamma; copies are free. With LogGP, a message costs o at\n"
    "each end, (n-1)*G on the wire plus L, and the port is busy g more after each message.\n"
    "With --compare, every schedule implementing the collective (of the schedules named, else\n"
    "--collective, default allreduce) that applies is simulated over a grid of p and sizes, and\n"
    "the winner of each cell is shown.\n"
    "  --p P            processes (a LIST for --compare; default 2,3,4,8,16,32,64,128,256)\n"
    "  --bytes N        message size in bytes (a LIST for --compare; k, m, g suffixes;\n"
    "                   default 8,64,512,4k,32k,256k,2m); --count N gives elements instead\n"
    "  --type T         element type, as for nbcc dump (default int)\n"
    "  --model SPEC     alpha=S,beta=S,gamma=S (seconds, seconds per byte; default\n"
    "                   alpha=1e-6,beta=1e-10,gamma=1e-10), or LogGP L=S,o=S,g=S,G=S[,gamma=S]\n"
    "  --inplace        sendbuf is MPI_IN_PLACE\n"
    "  --noncommutative the op is not commutative\n"
    "  --root R         the root of a rooted collective (default 0)\n"
    "  --rounds N       rows of the round table (default 64)\n"
    "  --param NAME=V   a value for one of the schedule's params (up to 4 times)\n"
    "  --nbufs N        buffers per rank of a multi-buffer collective (default 1)\n";

static const char *const usage_draw =
    "usage: nbcc draw NAME|FILE --p P --count N [-o FILE] [--format svg|dot|text] [--type T]\n"
    "                 [--inplace] [--noncommutative] [--root R] [--param NAME=V] [--nbufs N]\n"
    "                 [--schedule NAME]\n"
    "\n"
    "Draws a space-time diagram of a schedule: one row per rank, one column per step (unit\n"
    "latency), a box per round with its reductions and copies marked, an arrow per message\n"
    "labelled with its size. --format dot writes the same for Graphviz; --format text prints,\n"
    "per step, the rank-by-rank matrix of bytes moved. The format defaults to the extension of\n"
    "-o FILE (.svg, .dot, .txt), else svg; without -o the drawing goes to standard output.\n";

int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
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

/* NBC_MAX_INSNS, as the library reads it (0: the compiler's default). */
static uint64_t max_insns;

static void read_max_insns(void)
{
    const char *v = getenv("NBC_MAX_INSNS");
    if (!v || !*v) return;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (strspn(v, "0123456789") != strlen(v) || x > UINT32_MAX - 1) {
        nbcc_error("NBC_MAX_INSNS: '%s' is not a whole number in 0 .. %u", v, UINT32_MAX - 1);
        exit(2);
    }
    max_insns = x;
}

/* Runs the verifier on a compiled program, as the library does before it caches one; prints
 * why it fails. Returns 0 when it passes. */
static int verify_program(const sched_def *s, const nbc_program *prog, const compile_args *a)
{
    prog_fault f;
    nbc_collective c = s->collective ? (nbc_collective)collective_from_name(s->collective) : COLL_ALLREDUCE;
    int rc = prog_verify(prog, c, a, &f);
    if (rc < 0) nbcc_error("out of memory");
    if (rc > 0) fprintf(stderr, "%s: error: the program of '%s' fails verification at instruction %u: %s\n", s->src->name,
                        s->name, f.pc, f.msg);
    return rc;
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
                    compile_args a = {.p = p, .rank = r, .count = counts[c], .esize = 8, .max_insns = max_insns,
                                      .inplace = flags & 1, .commutative = !(flags & 2)};
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
    int loaded = load(lib, path) == 0, bad = !loaded, n = 0;
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

static int cmd_check(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_check, stdout);
        return 0;
    }
    if (argc < 2) return nbcc_usage_error("name at least one file or directory");
    int errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) errors += check_dir(argv[i]);
        else errors += check_file(argv[i]);
    }
    return errors ? 1 : 0;
}

long long number(const char *opt, const char *v)
{
    char *end;
    long long x = strtoll(v, &end, 0);
    if (!*v || *end) exit(nbcc_usage_error("%s wants a number, not '%s'", opt, v));
    return x;
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
        if (load(lib, what) != 0) return -1;
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

/* --param NAME=VALUE sets a schedule parameter (the name stays in argv, cut at the '='). */
static void add_param(compile_args *a, char *text)
{
    char *eq = strchr(text, '=');
    if (!eq || eq == text || a->nparams == COMPILE_MAX_PARAMS)
        exit(nbcc_usage_error("--param wants NAME=VALUE, at most %d times", COMPILE_MAX_PARAMS));
    *eq = '\0';
    a->params[a->nparams].name = text;
    a->params[a->nparams++].value = number("--param", eq + 1);
}

static int is_multi(const sched_def *s)
{
    return s->collective && collective_from_name(s->collective) == COLL_ALLREDUCE_MULTI;
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
    for (int o; (o = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        switch (o) {
        case 'p': p = number("--p", optarg); break;
        case 'r': rank = number("--rank", optarg); break;
        case 'c': count = number("--count", optarg); break;
        case 'i': inplace = 1; break;
        case 'n': commutative = 0; break;
        case 's': sname = optarg; break;
        case 'R': root = number("--root", optarg); break;
        case 't':
            if (nbcc_type(optarg, &esize, &tname)) return 2;
            break;
        default: return nbcc_bad_option(argv, o);
        }
    }
    if (optind != argc - 1 || p < 1 || rank >= p || count < 0 || root >= p) {
        return nbcc_usage_error("%s", optind != argc - 1 ? "name one schedule or file"
                                      : p < 1       ? "--p P (P >= 1) is required"
                                      : rank >= p   ? "--rank must be below --p"
                                      : root >= p   ? "--root must be below --p"
                                                    : "--count must be >= 0");
    }
    const char *what = argv[optind];
    sched_lib *lib = load_builtins();
    const sched_def *s = NULL;
    int found = find_schedules(lib, what, sname, &s, 1);
    if (found <= 0) {
        if (found == 0) complain_missing(what, sname);
        lib_destroy(lib);
        return 1;
    }
    int rc = 0;
    diag d;
    diag_init(&d);
    for (long long r = rank < 0 ? 0 : rank; r < (rank < 0 ? p : rank + 1) && !rc; r++) {
        compile_args a = {.p = p, .rank = r, .count = count, .esize = esize, .inplace = inplace, .commutative = commutative,
                          .max_insns = max_insns,
                          .root = root < 0 ? 0 : root};
        nbc_program *prog;
        if (compile_program(lib, s, &a, &prog, &d) != COMPILE_OK) {
            fprintf(stderr, "%s", d.text ? d.text : "");
            rc = 1;
            break;
        }
        if (verify_program(s, prog, &a)) {
            free(prog);
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

/* ---- lists of numbers: "1..33", "2,4,8", "2..1024*2", "0..100+10"; items may use p ("p+1",
 * "2p-1") when a p is given, and k, m, g suffixes (powers of 1024) ---- */

static int parse_term(const char **s, int64_t p, int has_p, int64_t *out)
{
    int64_t x = 1;
    int digits = 0;
    if (isdigit((unsigned char)**s)) {
        char *end;
        x = strtoll(*s, &end, 10);
        *s = end;
        digits = 1;
        const char *u = strchr("kmg", tolower((unsigned char)**s));
        if (**s && u) {
            x <<= 10 * (u - "kmg" + 1);
            (*s)++;
        }
        if (**s == '*' && (*s)[1] == 'p') (*s)++;
    }
    if (**s == 'p') {
        if (!has_p) return -1;
        x *= p;
        (*s)++;
    } else if (!digits) {
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_expr(const char **s, int64_t p, int has_p, int64_t *out)
{
    int64_t sum = 0, sign = 1;
    if (**s == '-') sign = -1, (*s)++;
    for (;;) {
        int64_t t;
        if (parse_term(s, p, has_p, &t)) return -1;
        sum += sign * t;
        if (**s != '+' && **s != '-') break;
        if (**s == '+' && !isdigit((unsigned char)(*s)[1]) && (*s)[1] != 'p') break;
        sign = **s == '-' ? -1 : 1;
        (*s)++;
    }
    *out = sum;
    return 0;
}

/* Expands text into *out (malloc'ed, *n items). Returns 0, or -1 after a message. */
static int expand_list(const char *opt, const char *text, int64_t p, int has_p, int64_t **out, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *out = malloc(cap * sizeof **out);
    const char *s = text;
    while (*out) {
        int64_t lo, hi, step = 1;
        char how = '+';
        if (parse_expr(&s, p, has_p, &lo)) break;
        hi = lo;
        if (s[0] == '.' && s[1] == '.') {
            s += 2;
            if (parse_expr(&s, p, has_p, &hi)) break;
            if (*s == '*' || *s == '+') {
                how = *s++;
                if (parse_term(&s, p, 0, &step)) break;
            }
            if (step < (how == '*' ? 2 : 1)) break;
        }
        for (int64_t x = lo; x <= hi; x = how == '*' ? x * step : x + step) {
            if (*n == cap) {
                int64_t *v = cap < (1u << 24) ? realloc(*out, 2 * cap * sizeof *v) : NULL;
                if (!v) goto bad;
                *out = v;
                cap *= 2;
            }
            (*out)[(*n)++] = x;
            if (how == '*' && x <= 0) break;
        }
        if (!*s) return 0;
        if (*s++ != ',') break;
    }
bad:
    nbcc_usage_error("%s wants a list such as 1..33, 2,4,8, 2..1024*2%s, not '%s'", opt,
            has_p ? " or 1,p+1,2p-1" : " or 8,4k,1m", text);
    free(*out);
    *out = NULL;
    return -1;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* ---- verify ---- */

typedef struct {
    const char *p_text, *counts_text, *nbufs_text;
    int only_commutative, only_noncommutative;
    long long seed;
    compile_args base;   /* element size, in place, root, params */
} verify_opts;

static int verify_one(const sched_lib *lib, const sched_def *s, const verify_opts *o)
{
    int64_t *ps;
    size_t nps;
    if (expand_list("--p", o->p_text, 0, 0, &ps, &nps)) return 2;
    int c = collective_from_name(s->collective);
    int reduces = c == COLL_ALLREDUCE || c == COLL_REDUCE || c == COLL_REDUCE_SCATTER || c == COLL_ALLREDUCE_MULTI;
    int64_t *nbufs, one = 1;
    size_t nnbufs = 1;
    if (!is_multi(s)) nbufs = &one;
    else if (expand_list("--nbufs", o->nbufs_text, 0, 0, &nbufs, &nnbufs)) {
        free(ps);
        return 2;
    }
    int variants[2], nv = 0;
    if (!o->only_noncommutative) variants[nv++] = 1;
    if (o->only_noncommutative || (!o->only_commutative && s->ordered && reduces)) variants[nv++] = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    verify_stats st = {0};
    long runs = 0, skipped = 0;
    int bad = 0;
    diag d;
    diag_init(&d);
    for (size_t i = 0; i < nps && !bad; i++) {
        if (ps[i] < 1 || o->base.root >= ps[i]) {
            nbcc_usage_error("p = %" PRId64 " is not a process count%s", ps[i], ps[i] >= 1 ? " with that --root" : "");
            bad = 2;
            break;
        }
        int64_t *counts;
        size_t ncounts;
        if (c == COLL_BARRIER) { /* no data: the runtime compiles barriers for count 0 alone */
            counts = calloc(1, sizeof *counts);
            ncounts = 1;
        } else if (expand_list("--counts", o->counts_text, ps[i], 1, &counts, &ncounts)) {
            bad = 2;
            break;
        }
        for (size_t j = 0; j < ncounts && !bad; j++) {
            if (counts[j] < 0) continue; /* 0 or p-1 at p = 1, say: nothing to do */
            for (size_t b = 0; b < nnbufs * (size_t)nv && !bad; b++) {
                verify_args a = {.base = o->base, .seed = (uint64_t)o->seed};
                a.base.p = ps[i];
                a.base.count = counts[j];
                a.base.commutative = variants[b % (size_t)nv];
                a.base.nbufs = nbufs[b / (size_t)nv];
                int rc = verify_schedule(lib, s, &a, &d, &st);
                if (rc == VERIFY_SKIP) skipped++;
                if (rc == VERIFY_OK) runs++;
                if (rc == VERIFY_FAIL) {
                    fprintf(stderr, "%s", d.text ? d.text : "");
                    bad = 1;
                }
            }
        }
        free(counts);
    }
    diag_free(&d);
    free(ps);
    if (nbufs != &one) free(nbufs);
    if (bad) return bad;
    if (runs == 0) {
        fprintf(stderr, "%s (%s): nothing verified: its requirements fail for every p and count given\n", s->name, s->src->name);
        return 1;
    }
    printf("%s (%s): ok, %ld runs (p = %s; counts %s;%s%s%s %s)", s->name, s->src->name, runs, o->p_text,
           c == COLL_BARRIER ? "0 (a barrier)" : o->counts_text,
           is_multi(s) ? " buffers " : "", is_multi(s) ? o->nbufs_text : "", is_multi(s) ? ";" : o->base.inplace ? " in place;" : "", nv == 2 ? "commutative and non-commutative op" : variants[0] ? "commutative op" : "non-commutative op");
    if (skipped) printf(", %ld skipped by its requirements", skipped);
    printf("; %" PRIu64 " programs, %" PRIu64 " instructions, %" PRIu64 " messages; %.2f s\n", st.programs, st.insns, st.messages,
           seconds_since(&t0));
    return 0;
}

static int cmd_verify(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_verify, stdout);
        return 0;
    }
    static const struct option opts[] = {
        {"p", required_argument, 0, 'p'},         {"count", required_argument, 0, 'c'},
        {"counts", required_argument, 0, 'C'},    {"type", required_argument, 0, 't'},
        {"inplace", no_argument, 0, 'i'},         {"commutative", no_argument, 0, 'm'},
        {"noncommutative", no_argument, 0, 'n'},  {"root", required_argument, 0, 'R'},
        {"seed", required_argument, 0, 'S'},      {"schedule", required_argument, 0, 's'},
        {"param", required_argument, 0, 'P'},     {"nbufs", required_argument, 0, 'B'},
        {0, 0, 0, 0},
    };
    verify_opts o = {.p_text = "1..16", .counts_text = "1,p+1,1001", .nbufs_text = "1,3", .seed = 1,
                     .base = {.esize = 4, .max_insns = max_insns}};
    int esize = 4;
    const char *tname = "int", *sname = NULL;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': o.p_text = optarg; break;
        case 'c': number("--count", optarg); o.counts_text = optarg; break;
        case 'C': o.counts_text = optarg; break;
        case 'i': o.base.inplace = 1; break;
        case 'm': o.only_commutative = 1; break;
        case 'n': o.only_noncommutative = 1; break;
        case 'R': o.base.root = number("--root", optarg); break;
        case 'S': o.seed = number("--seed", optarg); break;
        case 's': sname = optarg; break;
        case 'P': add_param(&o.base, optarg); break;
        case 'B': o.nbufs_text = optarg; break;
        case 't':
            if (nbcc_type(optarg, &esize, &tname)) return 2;
            o.base.esize = esize;
            break;
        default: return nbcc_bad_option(argv, c);
        }
    }
    if (optind != argc - 1 || o.base.root < 0 || (o.only_commutative && o.only_noncommutative)) {
        return nbcc_usage_error("%s", optind != argc - 1 ? "name one schedule or file"
                                      : o.base.root < 0 ? "--root must be >= 0" : "--commutative or --noncommutative, not both");
    }
    sched_lib *lib = load_builtins();
    const sched_def *found[64];
    int n = find_schedules(lib, argv[optind], sname, found, 64), rc = n > 0 ? 0 : 1;
    struct stat st;
    if (n == 0 && !sname && stat(argv[optind], &st) == 0) {
        printf("%s: no schedule in it implements a collective (building blocks only): nothing to verify\n", argv[optind]);
        rc = 0;
    } else if (n == 0) {
        complain_missing(argv[optind], sname);
    }
    for (int i = 0; i < n && rc != 2; i++) {
        int r = verify_one(lib, found[i], &o);
        if (r > rc) rc = r;
    }
    lib_destroy(lib);
    return rc;
}

/* ---- simulate ---- */

static int simulate_compare(sched_lib *lib, int argc, char **argv, const char *collective, const char *p_text,
                            const char *bytes_text, int esize, const char *tname, int inplace, int commutative,
                            int64_t nbufs, const sim_model *m)
{
    for (int i = 0; i < argc; i++) { /* the schedules named set the collective, files add theirs */
        const sched_def *s;
        int n = find_schedules(lib, argv[i], NULL, &s, 1);
        if (n < 0) return 1;
        if (n == 0) {
            complain_missing(argv[i], NULL);
            return 1;
        }
        if (!collective) collective = s->collective;
    }
    if (!collective) collective = "allreduce";
    if (collective_from_name(collective) < 0) {
        return nbcc_bad_collective(collective);
    }
    int64_t *ps, *bytes;
    size_t nps, nbytes;
    if (expand_list("--p", p_text, 0, 0, &ps, &nps)) return 2;
    if (expand_list("--bytes", bytes_text, 0, 0, &bytes, &nbytes)) {
        free(ps);
        return 2;
    }
    for (size_t i = 0; i < nps; i++)
        if (ps[i] < 1) {
            nbcc_usage_error("p = %" PRId64 " is not a process count", ps[i]);
            free(ps), free(bytes);
            return 2;
        }
    compare_grid g = {collective, ps, nps, bytes, nbytes, esize, tname, inplace, commutative, nbufs};
    diag d;
    diag_init(&d);
    int rc = compare_schedules(lib, &g, m, stdout, &d);
    if (rc) fprintf(stderr, "%s", d.text ? d.text : "");
    diag_free(&d);
    free(ps);
    free(bytes);
    return rc ? 1 : 0;
}

static int cmd_simulate(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_simulate, stdout);
        return 0;
    }
    static const struct option opts[] = {
        {"p", required_argument, 0, 'p'},          {"bytes", required_argument, 0, 'b'},
        {"count", required_argument, 0, 'c'},      {"type", required_argument, 0, 't'},
        {"model", required_argument, 0, 'M'},      {"inplace", no_argument, 0, 'i'},
        {"noncommutative", no_argument, 0, 'n'},   {"root", required_argument, 0, 'R'},
        {"rounds", required_argument, 0, 'r'},     {"schedule", required_argument, 0, 's'},
        {"compare", no_argument, 0, 'X'},          {"collective", required_argument, 0, 'L'},
        {"param", required_argument, 0, 'P'},      {"nbufs", required_argument, 0, 'B'},
        {0, 0, 0, 0},
    };
    compile_args base = {.max_insns = max_insns};
    const char *p_text = NULL, *bytes_text = NULL, *tname = "int", *sname = NULL, *collective = NULL;
    long long count = -1, root = 0, rounds = 64;
    int esize = 4, inplace = 0, commutative = 1, compare = 0;
    sim_model m;
    sim_model_default(&m);
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        char err[200];
        switch (c) {
        case 'p': p_text = optarg; break;
        case 'b': bytes_text = optarg; break;
        case 'c': count = number("--count", optarg); break;
        case 'i': inplace = 1; break;
        case 'n': commutative = 0; break;
        case 'R': root = number("--root", optarg); break;
        case 'r': rounds = number("--rounds", optarg); break;
        case 's': sname = optarg; break;
        case 'X': compare = 1; break;
        case 'L': collective = optarg; break;
        case 'P': add_param(&base, optarg); break;
        case 'B': base.nbufs = number("--nbufs", optarg); break;
        case 'M':
            if (sim_model_parse(optarg, &m, err, sizeof err)) {
                return nbcc_usage_error("--model: %s", err);
            }
            break;
        case 't':
            if (nbcc_type(optarg, &esize, &tname)) return 2;
            break;
        default: return nbcc_bad_option(argv, c);
        }
    }
    sched_lib *lib = load_builtins();
    int rc;
    if (compare) {
        rc = simulate_compare(lib, argc - optind, argv + optind, collective, p_text ? p_text : "2,3,4,8,16,32,64,128,256",
                              bytes_text ? bytes_text : "8,64,512,4k,32k,256k,2m", esize, tname, inplace, commutative, base.nbufs,
                              &m);
        lib_destroy(lib);
        return rc;
    }
    int64_t *ps = NULL, *bs = NULL;
    size_t nps = 0, nbs = 0;
    /* "": expand_list has said what is wrong already */
    const char *why = optind != argc - 1 ? "name one schedule or file (or give --compare)"
                      : !p_text ? "--p P is required"
                      : expand_list("--p", p_text, 0, 0, &ps, &nps) ? ""
                      : nps != 1 || ps[0] < 1 ? "--p wants one process count"
                      : (!bytes_text) == (count < 0) ? "give --bytes N or --count N"
                      : bytes_text && expand_list("--bytes", bytes_text, 0, 0, &bs, &nbs) ? ""
                      : bs && (nbs != 1 || bs[0] < 0 || bs[0] % esize) ? "--bytes wants one size, a whole number of elements"
                      : root < 0 || root >= ps[0] ? "--root must be in 0..p-1" : rounds < 0 ? "--rounds must be >= 0" : NULL;
    if (why) {
        if (*why) nbcc_usage_error("%s", why);
        free(ps), free(bs), lib_destroy(lib);
        return 2;
    }
    if (bs) count = bs[0] / esize;
    const sched_def *s;
    int n = find_schedules(lib, argv[optind], sname, &s, 1);
    if (n <= 0) {
        if (n == 0) complain_missing(argv[optind], sname);
        free(ps), free(bs), lib_destroy(lib);
        return 1;
    }
    base.p = ps[0];
    base.count = count;
    base.esize = esize;
    base.root = root;
    base.inplace = inplace;
    base.commutative = commutative;
    sim_args a = sim_args_of(&base);
    a.record_hops = ps[0] <= 4096;
    sim_result res;
    diag d;
    diag_init(&d);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = simulate_schedule(lib, s, &a, &m, NULL, &res, &d);
    if (rc == SIM_OK) {
        printf("%s (%s) p=%" PRId64 " count=%lld type=%s (%lld bytes)%s%s, ", s->name, s->src->name, a.p, count, tname,
               count * esize, inplace ? " inplace" : "", commutative ? "" : " noncommutative");
        sim_model_print(&m, stdout);
        printf("\n");
        sim_report(&res, &m, (uint32_t)(rounds > UINT32_MAX ? UINT32_MAX : rounds), stdout);
        printf("simulated in %.2f s\n", seconds_since(&t0));
        sim_result_free(&res);
    } else if (rc == SIM_SKIP) {
        nbcc_error("'%s' does not apply for p = %" PRId64 ", count = %lld (its requirements fail; nbcc list shows them)",
                s->name, a.p, count);
    } else {
        fprintf(stderr, "%s", d.text ? d.text : "");
    }
    diag_free(&d);
    free(ps), free(bs), lib_destroy(lib);
    return rc == SIM_OK ? 0 : 1;
}

/* ---- draw ---- */

static int cmd_draw(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(usage_draw, stdout);
        return 0;
    }
    static const struct option opts[] = {
        {"p", required_argument, 0, 'p'},          {"count", required_argument, 0, 'c'},
        {"type", required_argument, 0, 't'},       {"format", required_argument, 0, 'f'},
        {"inplace", no_argument, 0, 'i'},          {"noncommutative", no_argument, 0, 'n'},
        {"root", required_argument, 0, 'R'},       {"schedule", required_argument, 0, 's'},
        {"param", required_argument, 0, 'P'},      {"nbufs", required_argument, 0, 'B'},
        {0, 0, 0, 0},
    };
    compile_args base = {.max_insns = max_insns};
    long long p = 0, count = -1, root = 0;
    int esize = 4, inplace = 0, commutative = 1;
    const char *tname = "int", *sname = NULL, *path = NULL, *format = NULL;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': p = number("--p", optarg); break;
        case 'c': count = number("--count", optarg); break;
        case 'o': path = optarg; break;
        case 'f': format = optarg; break;
        case 'P': add_param(&base, optarg); break;
        case 'B': base.nbufs = number("--nbufs", optarg); break;
        case 'i': inplace = 1; break;
        case 'n': commutative = 0; break;
        case 'R': root = number("--root", optarg); break;
        case 's': sname = optarg; break;
        case 't':
            if (nbcc_type(optarg, &esize, &tname)) return 2;
            break;
        default: return nbcc_bad_option(argv, c);
        }
    }
    if (!format && path) {
        const char *dot = strrchr(path, '.');
        format = dot && !strcmp(dot, ".dot") ? "dot" : dot && !strcmp(dot, ".txt") ? "text" : "svg";
    }
    if (!format) format = "svg";
    draw_format f = !strcmp(format, "svg") ? DRAW_SVG : !strcmp(format, "dot") ? DRAW_DOT : DRAW_TEXT;
    const char *why = optind != argc - 1 ? "name one schedule or file"
                      : p < 1 ? "--p P (P >= 1) is required"
                      : count < 0 ? "--count N (N >= 0) is required"
                      : root < 0 || root >= p ? "--root must be in 0..p-1"
                      : strcmp(format, "svg") && strcmp(format, "dot") && strcmp(format, "text") ? "--format is svg, dot or text" : NULL;
    if (why) {
        return nbcc_usage_error("%s", why);
    }
    sched_lib *lib = load_builtins();
    const sched_def *s;
    int n = find_schedules(lib, argv[optind], sname, &s, 1);
    if (n <= 0) {
        if (n == 0) complain_missing(argv[optind], sname);
        lib_destroy(lib);
        return 1;
    }
    /* draw into memory first: a failed drawing leaves no half-written file */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    diag d;
    diag_init(&d);
    base.p = p;
    base.count = count;
    base.esize = esize;
    base.root = root;
    base.inplace = inplace;
    base.commutative = commutative;
    sim_args a = sim_args_of(&base);
    int rc = mem ? draw_schedule(lib, s, &a, tname, f, mem, &d) : -1;
    if (mem) fclose(mem);
    if (rc) {
        fprintf(stderr, "%s", d.text && d.text[0] ? d.text : "nbcc draw: out of memory\n");
    } else {
        FILE *out = path ? fopen(path, "w") : stdout;
        if (!out || fwrite(buf, 1, len, out) != len || (path && fclose(out) != 0)) {
            nbcc_error("cannot write %s", path ? path : "standard output");
            rc = -1;
        }
    }
    free(buf);
    diag_free(&d);
    lib_destroy(lib);
    return rc ? 1 : 0;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"check", cmd_check},           {"dump", cmd_dump},   {"list", cmd_list},
    {"explain", nbcc_explain},      {"calibrate", nbcc_calibrate}, {"tune", nbcc_tune},
    {"verify", cmd_verify},         {"simulate", cmd_simulate},    {"draw", cmd_draw},
    {"failures", nbcc_failures},
};

int main(int argc, char **argv)
{
    opterr = 0; /* getopt's own messages would not follow ours */
    if (argc < 2) return nbcc_usage_error("name a command");
    const char *cmd = argv[1];
    read_max_insns();
    if (!strcmp(cmd, "--version")) {
        printf("nbcc %s\n", nbc_version());
        return 0;
    }
    char *help[] = {argv[0], argc > 2 ? argv[2] : NULL, "--help", NULL};
    if (!strcmp(cmd, "help") && argc > 2) { /* nbcc help dump is nbcc dump --help */
        cmd = argv[2];
        argc = 3;
        argv = help;
    } else if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i].name)) {
            static char prefix[32];
            snprintf(prefix, sizeof prefix, "nbcc %s", cmd);
            nbcc_cmd = prefix;
            return commands[i].run(argc - 1, argv + 1);
        }
    return nbcc_usage_error("unknown command '%s'", cmd);
}
