/* Preloaded (LD_PRELOAD) into the ranks of the network runs by tests/tcp.sh: a way round a hang
 * of MPICH 4.0.2's MPI_Finalize over UCX's TCP transport, which has nothing to do with nbc.
 *
 * Its UCX netmod closes every endpoint with ucp_disconnect_nb (a close after a flush), waits
 * for those, then waits in a PMI barrier, where it makes no UCX progress. Over TCP a rank still
 * closing may need progress from a peer that is already in that barrier, and waits for ever
 * (here in most runs of mpi_allreduce at p = 4 or 5: one rank in ucp_worker_progress, the others
 * in a PMI read, all under MPI_Finalize). MPICH removed that barrier in 2023
 * (pmodels/mpich#6596). Here MPI_Finalize starts with an MPI barrier, after which every rank has
 * received all it will ever receive (MPI wants all communication complete at MPI_Finalize), so
 * nothing is left to flush; the close then returns at once, and the endpoints go with the UCX
 * worker, which MPICH destroys right after. */
#include <mpi.h>
#include <ucp/api/ucp.h>

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep);

int MPI_Finalize(void)
{
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) PMPI_Barrier(MPI_COMM_WORLD);
    return PMPI_Finalize();
}

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep)
{
    (void)ep;
    return UCS_STATUS_PTR(UCS_OK);
}
