/* nbcc's selection commands: explain (no MPI), calibrate and tune (under mpiexec). */
#ifndef NBCC_SELECT_H
#define NBCC_SELECT_H

int nbcc_explain(int argc, char **argv);
int nbcc_calibrate(int argc, char **argv);
int nbcc_tune(int argc, char **argv);

#endif
