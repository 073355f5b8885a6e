/* What nbcc's subcommands share: one way to report a mistake, one option parser, one table of
 * element types, and the lookup of a schedule by name or file. Each subcommand is one file
 * (check.c, dump.c, ...) with one entry point, listed in main.c. */
#ifndef NBCC_H
#define NBCC_H

#include <stdint.h>
#include <time.h>

#include "compile.h"
#include "library.h"

/* ---- the subcommands: run(argc, argv) with argv[0] the subcommand's name ---- */
int nbcc_check(int argc, char **argv);
int nbcc_dump(int argc, char **argv);
int nbcc_list(int argc, char **argv);
int nbcc_explain(int argc, char **argv);
int nbcc_calibrate(int argc, char **argv);
int nbcc_tune(int argc, char **argv);
int nbcc_verify(int argc, char **argv);
int nbcc_simulate(int argc, char **argv);
int nbcc_draw(int argc, char **argv);
int nbcc_failures(int argc, char **argv);

/* ---- messages: every one a single line "nbcc SUBCOMMAND: message" ---- */
extern const char *nbcc_cmd; /* "nbcc dump": how messages start */
void nbcc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A command-line mistake: the message and "(see 'nbcc SUBCOMMAND --help')". Returns 2. */
int nbcc_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int nbcc_bad_collective(const char *name); /* names the valid ones; returns 2 */

/* ---- options: one table for every subcommand, each accepting the ones it names ---- */
/* Whether the ranks of the calls nbcc compiles share memory (compile_args.shared_memory): 1,
 * one node, unless --no-shared-memory, which every subcommand accepts. Every compile_args that
 * nbcc builds takes it from here (nbcc_options puts it in params too). */
extern int nbcc_shared_memory;
typedef struct {
    /* numbers, parsed as they are read (a bad one exits with status 2); the subcommand sets
     * their defaults before parsing */
    long long count, rank, root, seed, rounds, reps, round;
    /* texts, NULL when not given: lists and specs the subcommand reads itself */
    const char *p, *counts, *bytes, *nbufs, *format, *output, *model, *collective, *op, *tuning,
        *mode, *sizes, *schedule, *nodes, *ppn, *node_sizes, *placement;
    int esize;           /* --type, from the one type table */
    const char *tname;
    int inplace, only_commutative, noncommutative, compare, append;
    compile_args params; /* --param NAME=V, in params/nparams */
    int rest;            /* the index of the first argument that is not an option */
} nbcc_opts;

/* Parses argv[1..] into *o, taking only the options named in `accepted` (space-separated
 * long names without dashes; "o" for -o FILE). Returns -1 when the subcommand should go on,
 * else its exit status (2 after a message). --count also sets counts (the last one given wins). */
int nbcc_options(int argc, char **argv, const char *accepted, nbcc_opts *o);
/* The call a subcommand compiles or simulates, on top of the options' --param/--nbufs. */
void nbcc_set_call(compile_args *a, int64_t p, int64_t count, int64_t esize, int64_t root, int inplace,
                   int commutative);
int wants_help(int argc, char **argv);             /* --help or -h among the arguments */
long long number(const char *opt, const char *v);  /* exits with status 2 when v is not one */
/* The element size of a type named on the command line; -1 after a message naming them all. */
int nbcc_type(const char *name, int *esize, const char **tname);
/* Expands a list ("1..33", "2,4,8", "2..1024*2", "8,4k,1m"; with has_p, items may use p:
 * "p+1", "2p-1") into *out (malloc'ed, *n items). Returns 0, or -1 after a message. */
int expand_list(const char *opt, const char *text, int64_t p, int has_p, int64_t **out, size_t *n);
double seconds_since(const struct timespec *t0);

/* ---- topologies (topology.c): which ranks share a node ---- */
typedef struct {
    int64_t p, nodes;
    int64_t *node_of; /* p values, nodes numbered by first appearance */
    char label[96];   /* "2 nodes x 3, block", "nodes 3+2+1, cyclic" */
} nbcc_topology;
/* The topologies --nodes/--ppn (every pair of their lists) or --node-sizes name, in each
 * --placement (block, cyclic or both; default block), instead of --p: *n of them, 0 when none
 * is named.
 * Returns 0, or the exit status after a message. */
int nbcc_topologies(const nbcc_opts *o, nbcc_topology **out, size_t *n);
void nbcc_topologies_free(nbcc_topology *t, size_t n);
/* The same for a subcommand that compiles one call (dump, simulate, draw): at most one
 * topology, instead of --p. */
int nbcc_one_topology(const nbcc_opts *o, nbcc_topology **t, size_t *n);
/* p, the node map and shared memory (one node only) of a call on topology t. */
void nbcc_topology_args(compile_args *a, const nbcc_topology *t);

/* ---- schedules ---- */
extern uint64_t nbcc_max_insns; /* NBC_MAX_INSNS, read as the library reads it (0: default) */
int nbcc_read_env(void);        /* 0, or 2 after a message */
sched_lib *load_builtins(void);
int load_file(sched_lib *lib, const char *path); /* 0, or -1 after printing why */
/* The schedules that came from file `path`, one per call from *i = 0 on; NULL at the end. */
const sched_def *next_from(const sched_lib *lib, const char *path, size_t *i);
/* The schedules `what` names (a built-in name or a file; sname picks one of a file's): up to
 * max in out. Returns how many, or -1 after a message. */
int find_schedules(sched_lib *lib, const char *what, const char *sname, const sched_def **out, int max);
void complain_missing(const char *what, const char *sname);
/* Runs the library's program verifier, as the library does before it caches one; prints why
 * it fails. 0 when it passes. */
int verify_program(const sched_def *s, const nbc_program *prog, const compile_args *a);
int is_multi(const sched_def *s); /* an allreduce_multi schedule */

#endif
