/* nbcc's selection commands: explain (no MPI), calibrate and tune (under mpiexec). */
#ifndef NBCC_SELECT_H
#define NBCC_SELECT_H

int nbcc_explain(int argc, char **argv);
int nbcc_calibrate(int argc, char **argv);
int nbcc_tune(int argc, char **argv);

/* Shared by nbcc's commands (defined in nbcc.c). Messages are "nbcc COMMAND: ..." on one line. */
extern const char *nbcc_cmd;                      /* "nbcc dump": how messages start */
void nbcc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A command-line mistake: the message and "(see 'nbcc COMMAND --help')". Returns 2. */
int nbcc_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int nbcc_bad_option(char **argv, int c);          /* getopt_long returned c ('?' or ':') */
int nbcc_bad_collective(const char *name);        /* names the valid ones; returns 2 */
/* The element size of a type named on the command line; -1 after a message naming them all. */
int nbcc_type(const char *name, int *esize, const char **tname);
int wants_help(int argc, char **argv);            /* --help or -h among the arguments */
long long number(const char *opt, const char *v); /* exits with status 2 when v is not one */

#endif
