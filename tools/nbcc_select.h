/* nbcc's selection commands: explain (no MPI), calibrate and tune (under mpiexec). */
#ifndef NBCC_SELECT_H
#define NBCC_SELECT_H

int nbcc_explain(int argc, char **argv);
int nbcc_calibrate(int argc, char **argv);
int nbcc_tune(int argc, char **argv);

/* Shared by nbcc's commands (defined in nbcc.c). */
int wants_help(int argc, char **argv);        /* --help or -h among the arguments */
long long number(const char *opt, const char *v); /* exits with status 2 when v is not one */

#endif
