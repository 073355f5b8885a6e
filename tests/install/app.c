/* A program outside the source tree, built against an installed nbc (tests/install.sh). */
#include <stdio.h>
#include <string.h>
#include <nbc.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p, x, ok;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    x = rank + 1;
    nbc_request q;
    ok = nbc_iallreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS &&
         nbc_wait(&q) == MPI_SUCCESS && x == p * (p + 1) / 2 && !strcmp(nbc_version(), NBC_VERSION);
    if (rank == 0) printf("%s: nbc %s, sum %d\n", ok ? "ok" : "FAILED", nbc_version(), x);
    nbc_finalize();
    MPI_Finalize();
    return !ok;
}
