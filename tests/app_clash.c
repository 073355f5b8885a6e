/* An application whose own functions carry names the library uses inside (comm_init,
 * cache_create, select_init, interp_step): it must link with libnbc.a and libnbc.so alike and
 * its functions must be the ones called, by it and never by the library. */
#include <stdio.h>

#include "nbc.h"

static int mine;
int comm_init(void) { return ++mine; }
void *cache_create(void) { mine += 10; return NULL; }
int select_init(void) { return mine += 100; }
int interp_step(void) { return mine += 1000; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long in[3] = {rank, 1, 2 * rank}, out[3] = {0};
    nbc_request r;
    int rc = nbc_iallreduce(in, out, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &r);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&r);
    long s = (long)size * (size - 1) / 2;
    int right = rc == MPI_SUCCESS && out[0] == s && out[1] == size && out[2] == 2 * s && mine == 0;
    comm_init(), cache_create(), select_init(), interp_step();
    right = right && mine == 1111;
    if (rank == 0) printf("%s\n", right ? "right" : "wrong");
    nbc_finalize();
    MPI_Finalize();
    return !right;
}
