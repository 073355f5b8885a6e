/* nbcc's one option parser and one type table: every subcommand reads its options through
 * nbcc_options, naming those it takes, so an option means the same everywhere and --type
 * accepts the same types everywhere. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbcc.h"

static const struct { const char *name; int size; } types[] = {
    {"int8", 1}, {"char", 1}, {"int16", 2}, {"short", 2}, {"int", 4}, {"int32", 4}, {"float", 4},
    {"int64", 8}, {"long", 8}, {"double", 8}, {"long_double", 16},
};

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

long long number(const char *opt, const char *v)
{
    char *end;
    long long x = strtoll(v, &end, 0);
    if (!*v || *end) exit(nbcc_usage_error("%s wants a number, not '%s'", opt, v));
    return x;
}

int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
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

int nbcc_shared_memory = 1; /* nbcc models one node */

/* Every option of every subcommand (and --no-shared-memory, which all take: see nbcc.h). */
static const struct option all[] = {
    {"no-shared-memory", no_argument, 0, 'H'},
    {"p", required_argument, 0, 'p'},          {"count", required_argument, 0, 'c'},
    {"counts", required_argument, 0, 'C'},     {"rank", required_argument, 0, 'r'},
    {"root", required_argument, 0, 'R'},       {"round", required_argument, 0, 'k'},
    {"type", required_argument, 0, 't'},       {"inplace", no_argument, 0, 'i'},
    {"commutative", no_argument, 0, 'm'},      {"noncommutative", no_argument, 0, 'n'},
    {"schedule", required_argument, 0, 's'},   {"param", required_argument, 0, 'P'},
    {"nbufs", required_argument, 0, 'B'},      {"seed", required_argument, 0, 'S'},
    {"bytes", required_argument, 0, 'b'},      {"model", required_argument, 0, 'M'},
    {"rounds", required_argument, 0, 'N'},     {"compare", no_argument, 0, 'X'},
    {"collective", required_argument, 0, 'L'}, {"format", required_argument, 0, 'f'},
    {"op", required_argument, 0, 'O'},         {"tuning", required_argument, 0, 'T'},
    {"mode", required_argument, 0, 'D'},       {"append", no_argument, 0, 'A'},
    {"sizes", required_argument, 0, 'Z'},      {"reps", required_argument, 0, 'E'},
    {"nodes", required_argument, 0, 'J'},      {"ppn", required_argument, 0, 'K'},
    {"node-sizes", required_argument, 0, 'G'}, {"placement", required_argument, 0, 'Y'},
};
enum { NALL = sizeof all / sizeof *all };

static int takes(const char *accepted, const char *name)
{
    size_t n = strlen(name);
    for (const char *a = accepted; (a = strstr(a, name)); a += n)
        if ((a == accepted || a[-1] == ' ') && (a[n] == ' ' || a[n] == '\0')) return 1;
    return 0;
}

int nbcc_options(int argc, char **argv, const char *accepted, nbcc_opts *o)
{
    /* the subcommand's own table, so that getopt_long's abbreviations are among its options */
    struct option opts[NALL + 1];
    int n = 0;
    for (int i = 0; i < NALL; i++)
        if (i == 0 || takes(accepted, all[i].name)) opts[n++] = all[i];
    opts[n] = (struct option){0, 0, 0, 0};
    const char *shorts = takes(accepted, "o") ? ":o:" : ":";
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, shorts, opts, NULL)) != -1;) {
        switch (c) {
        case 'p': o->p = optarg; break;
        case 'c': o->count = number("--count", optarg); o->counts = optarg; break;
        case 'C': o->counts = optarg; break;
        case 'r': o->rank = number("--rank", optarg); break;
        case 'R': o->root = number("--root", optarg); break;
        case 'k': o->round = number("--round", optarg); break;
        case 't':
            if (nbcc_type(optarg, &o->esize, &o->tname)) return 2;
            break;
        case 'i': o->inplace = 1; break;
        case 'm': o->only_commutative = 1; break;
        case 'n': o->noncommutative = 1; break;
        case 's': o->schedule = optarg; break;
        case 'P': add_param(&o->params, optarg); break;
        case 'B': o->nbufs = optarg; break;
        case 'S': o->seed = number("--seed", optarg); break;
        case 'b': o->bytes = optarg; break;
        case 'M': o->model = optarg; break;
        case 'N': o->rounds = number("--rounds", optarg); break;
        case 'X': o->compare = 1; break;
        case 'L': o->collective = optarg; break;
        case 'f': o->format = optarg; break;
        case 'O': o->op = optarg; break;
        case 'T': o->tuning = optarg; break;
        case 'D': o->mode = optarg; break;
        case 'A': o->append = 1; break;
        case 'Z': o->sizes = optarg; break;
        case 'E': o->reps = number("--reps", optarg); break;
        case 'o': o->output = optarg; break;
        case 'J': o->nodes = optarg; break;
        case 'K': o->ppn = optarg; break;
        case 'G': o->node_sizes = optarg; break;
        case 'Y': o->placement = optarg; break;
        case 'H': nbcc_shared_memory = 0; break;
        default: { /* '?' or ':' (shorts starts with ':'), told in our own words */
            const char *opt = argv[optind - 1];
            return c == ':' ? nbcc_usage_error("%s wants a value", opt) : nbcc_usage_error("unknown option '%s'", opt);
        }
        }
    }
    o->rest = optind;
    o->params.shared_memory = nbcc_shared_memory;
    return -1;
}

void nbcc_set_call(compile_args *a, int64_t p, int64_t count, int64_t esize, int64_t root, int inplace,
                   int commutative)
{
    a->p = p;
    a->count = count;
    a->esize = esize;
    a->root = root;
    a->inplace = inplace;
    a->commutative = commutative;
    a->shared_memory = nbcc_shared_memory;
}
