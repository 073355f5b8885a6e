/* cgcall: the call path callgrind counts (bench/callgrind.sh): an 8-byte allreduce (one double,
 * MPI_SUM, automatic selection) on a warm cache, `calls` times; with `persistent`, the start and
 * wait of one persistent request made by nbc_allreduce_init instead. Only cg_start and cg_finish are
 * counted. Between them every rank exchanges a message with its neighbours: the peers' data,
 * sent before, has then arrived too (MPICH's barrier would not do: within a node it goes
 * through shared memory, past the network layer), so nbc_wait finds it there and the count
 * does not depend on how long the peer took. With `shared`, in and out come from nbc_alloc_mem
 * (the shared-memory path; its final wait for the peer's flag may spin a few passes). With `mpi`,
 * the MPI library's own blocking MPI_Allreduce instead, for comparison (it waits for the peer
 * inside, so its count includes some polling).
 *     mpiexec -n 2 valgrind --tool=callgrind --collect-atstart=no --toggle-collect=cg_start
 *         --toggle-collect=cg_finish ./cgcall [calls] [persistent|shared|mpi] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbc.h"

static double in_, out_, *in = &in_, *out = &out_;
static int persistent, mpi;

__attribute__((noinline)) int cg_start(nbc_request *r)
{
    if (persistent) return nbc_start(r);
    if (mpi) return MPI_Allreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return nbc_iallreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, r);
}

__attribute__((noinline)) int cg_finish(nbc_request *r) { return mpi ? MPI_SUCCESS : nbc_wait(r); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int calls = argc > 1 ? atoi(argv[1]) : 1000, rank, p, bad = 0;
    persistent = argc > 2 && !strcmp(argv[2], "persistent");
    mpi = argc > 2 && !strcmp(argv[2], "mpi");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (argc > 2 && !strcmp(argv[2], "shared")) {
        nbc_alloc_mem(sizeof *in, &in);
        nbc_alloc_mem(sizeof *out, &out);
    }
    *in = rank + 1;
    nbc_request r;
    for (int i = 0; i < 100; i++) { /* compiles the program and fills the request pool */
        nbc_iallreduce(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        nbc_wait(&r);
    }
    if (persistent) nbc_allreduce_init(in, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    for (int i = 0; i < calls; i++) {
        int rc = cg_start(&r);
        int token = i;
        MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % p, 1, (rank + p - 1) % p, 1, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
        rc |= cg_finish(&r);
        bad |= rc != MPI_SUCCESS || *out != p * (p + 1) / 2.0;
    }
    if (persistent) nbc_request_free(&r);
    if (rank == 0) printf("cgcall: %d %s, p = %d: %s\n", calls, persistent ? "persistent starts" : "calls", p, bad ? "WRONG" : "ok");
    nbc_finalize();
    MPI_Finalize();
    return bad;
}
