/* Built instead of persistent.c for an MPI without MPI-4's persistent collectives (Open MPI
 * 4.1: MPI_VERSION 3, its MPIX_Allreduce_init and siblings are its own). The application's
 * persistent requests are then all the MPI's: no translation in the completion calls. */
#include "nbcmpi.h"

int nm_pers_active(void) { return 0; }

int nm_pers_wait(MPI_Request *request, MPI_Status *status) { return nm_wait_any_kind(request, status); }

int nm_pers_test(MPI_Request *request, int *flag, MPI_Status *status) { return nm_test(request, flag, status); }

int nm_pers_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return nm_get_status(request, flag, status);
}

int nm_pers_array(enum nm_array_call call, int count, MPI_Request requests[], int *flag, int *index, int indices[],
                  MPI_Status *status)
{
    switch (call) {
    case NM_WAITALL: return nm_waitall(count, requests, status);
    case NM_TESTALL: return nm_testall(count, requests, flag, status);
    case NM_WAITANY: return nm_waitany(count, requests, index, status);
    case NM_TESTANY: return nm_testany(count, requests, index, flag, status);
    case NM_WAITSOME: return nm_waitsome(count, requests, index, indices, status);
    case NM_TESTSOME: return nm_testsome(count, requests, index, indices, status);
    }
    return MPI_ERR_INTERN;
}
