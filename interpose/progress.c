/* Progress while the application sits in its own blocking point-to-point call. MPICH's
 * progress engine polls a generalized request only from a test or wait that names it, not from
 * MPI_Recv or a wait on other requests, and Open MPI's never: so, while collectives are
 * running, the blocking calls below become their non-blocking form plus a loop that tests it
 * and drives nbc (yielding the CPU when nothing moved: with more ranks than cores, spinning
 * starves the peers). With no collective running they are the MPI's own, at the cost of one
 * atomic load; the tests and MPI_Iprobe drive nbc too, as MPI says every test makes progress
 * (and, without MPICH's poll function, they are what completes a finished collective's
 * request: nm_progress). */
#include <sched.h>

#include "nbcmpi.h"

void nm_idle(void)
{
    if (!nm_progress()) sched_yield();
}

int nm_wait(MPI_Request *request, MPI_Status *status)
{
    for (;;) {
        int flag = 0, rc = PMPI_Test(request, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        if (!nm_active()) return PMPI_Wait(request, status);
        nm_idle();
    }
}

/* A wait on one of our collectives is MPICH's (its wait_fn runs nbc_wait); on anything else,
 * while collectives run, the loop. Without the poll function the loop on every request: the
 * MPI's own wait on a collective not yet complete would never return. */
int nm_wait_any_kind(MPI_Request *request, MPI_Status *status)
{
#ifdef NM_POLLED
    return nm_active() && !nm_is_running(*request) ? nm_wait(request, status) : PMPI_Wait(request, status);
#else
    return nm_active() ? nm_wait(request, status) : PMPI_Wait(request, status);
#endif
}

int nm_waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    for (;;) {
        if (!nm_active()) return PMPI_Waitall(count, requests, statuses);
        int flag = 0, rc = PMPI_Testall(count, requests, &flag, statuses);
        if (rc != MPI_SUCCESS || flag) return rc;
        nm_idle();
    }
}

int nm_waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    for (;;) {
        if (!nm_active()) return PMPI_Waitany(count, requests, index, status);
        int flag = 0, rc = PMPI_Testany(count, requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        nm_idle();
    }
}

int nm_waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    for (;;) {
        if (!nm_active()) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc;
        nm_idle();
    }
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!nm_active()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
    MPI_Request r;
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : nm_wait(&r, status);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (!nm_active()) return PMPI_Send(buf, count, type, dest, tag, comm);
    MPI_Request r;
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : nm_wait(&r, MPI_STATUS_IGNORE);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (!nm_active()) return PMPI_Ssend(buf, count, type, dest, tag, comm);
    MPI_Request r;
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : nm_wait(&r, MPI_STATUS_IGNORE);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!nm_active())
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                             recvtag, comm, status);
    MPI_Request r[2];
    MPI_Status st[2];
    int rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1]);
    if (rc == MPI_SUCCESS) rc = nm_waitall(2, r, st);
    if (status != MPI_STATUS_IGNORE) *status = st[0];
    return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    for (;;) {
        if (!nm_active()) return PMPI_Probe(source, tag, comm, status);
        int flag = 0, rc = PMPI_Iprobe(source, tag, comm, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        nm_idle();
    }
}

int nm_test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (nm_active()) nm_progress();
    return PMPI_Test(request, flag, status);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    if (nm_active()) nm_progress();
    return PMPI_Iprobe(source, tag, comm, flag, status);
}

/* MPICH's MPI_Request_get_status does not poll generalized requests (Open MPI's: none do). */
int nm_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    if (nm_active()) {
        nm_progress();
        nm_poll_all();
    }
    return PMPI_Request_get_status(request, flag, status);
}

int nm_testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    if (nm_active()) nm_progress();
    return PMPI_Testall(count, requests, flag, statuses);
}

int nm_testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    if (nm_active()) nm_progress();
    return PMPI_Testany(count, requests, index, flag, status);
}

int nm_testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (nm_active()) nm_progress();
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

/* ---- the completion calls: persistent requests translated first (persistent.c) ---- */

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    return nm_pers_active() ? nm_pers_wait(request, status) : nm_wait_any_kind(request, status);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    return nm_pers_active() ? nm_pers_test(request, flag, status) : nm_test(request, flag, status);
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return nm_pers_active() ? nm_pers_get_status(request, flag, status) : nm_get_status(request, flag, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    return nm_pers_active() ? nm_pers_array(NM_WAITALL, count, requests, NULL, NULL, NULL, statuses)
                            : nm_waitall(count, requests, statuses);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    return nm_pers_active() ? nm_pers_array(NM_TESTALL, count, requests, flag, NULL, NULL, statuses)
                            : nm_testall(count, requests, flag, statuses);
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    return nm_pers_active() ? nm_pers_array(NM_WAITANY, count, requests, NULL, index, NULL, status)
                            : nm_waitany(count, requests, index, status);
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    return nm_pers_active() ? nm_pers_array(NM_TESTANY, count, requests, flag, index, NULL, status)
                            : nm_testany(count, requests, index, flag, status);
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return nm_pers_active() ? nm_pers_array(NM_WAITSOME, incount, requests, NULL, outcount, indices, statuses)
                            : nm_waitsome(incount, requests, outcount, indices, statuses);
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    return nm_pers_active() ? nm_pers_array(NM_TESTSOME, incount, requests, NULL, outcount, indices, statuses)
                            : nm_testsome(incount, requests, outcount, indices, statuses);
}
