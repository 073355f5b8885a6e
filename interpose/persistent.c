/* Persistent collectives (MPI-4's MPI_Allreduce_init and siblings) on nbc's own persistent
 * requests. MPI orders only the inits: ranks may start the same requests in different orders
 * (MPICH's test p_order does), so each init makes an nbc request that may be started in any
 * order (nbc_start_order = any), whose k-th start on one rank meets the k-th start of the same
 * request on the others. Its layout (packed scratch, the stand-in type of a reduction, as
 * collectives.c makes them) is made once at init and packed again at each start.
 *
 * An MPICH generalized request is freed when it completes, but a persistent request must stay,
 * inactive, for its next start: so the application's handle here is a real, inactive MPICH
 * persistent request that does nothing (a receive from MPI_PROC_NULL), and the library keeps
 * a table from it to the call. MPI_Start starts nbc's request behind a generalized request of
 * its own; while any is running, the completion calls swap each started handle for the
 * running request, call through, and swap back: where the running one completed, the handle
 * is left inactive instead of MPI_REQUEST_NULL. With none running, a completion call costs one
 * atomic load more. What nbc does not run (collectives.c's nm_route) is MPICH's own
 * persistent call. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbcmpi.h"

typedef struct pers {
    MPI_Request handle, running; /* running: MPI_REQUEST_NULL while inactive */
    nm_call call;         /* as the application made it */
    nbc_request nbc;      /* nbc's persistent request, any-order */
    nm_req *prep;         /* its layout */
    nm_req *current;      /* the running start's generalized request */
    struct pers *next;
} pers;

enum { BUCKETS = 256 };
static pers *table[BUCKETS];
static int npers, running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket(MPI_Request h) { return (unsigned)(uintptr_t)h % BUCKETS; }

static pers *find(MPI_Request h)
{
    if (h == MPI_REQUEST_NULL || !__atomic_load_n(&npers, __ATOMIC_RELAXED)) return NULL;
    pthread_mutex_lock(&lock);
    pers *x = table[bucket(h)];
    while (x && x->handle != h) x = x->next;
    pthread_mutex_unlock(&lock);
    return x;
}

int nm_pers_active(void) { return __atomic_load_n(&running, __ATOMIC_RELAXED); }

static pthread_once_t info_once = PTHREAD_ONCE_INIT;
static MPI_Info any_order = MPI_INFO_NULL;
static void make_info(void)
{
    PMPI_Info_create(&any_order);
    PMPI_Info_set(any_order, "nbc_start_order", "any");
}

/* MPICH's own persistent call, for what nbc does not run. */
static int mpich_init(const nm_call *c, MPI_Info info, MPI_Request *request)
{
    switch (c->kind) {
    case K_IALLREDUCE:
        return PMPI_Allreduce_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, request);
    case K_IREDUCE:
        return PMPI_Reduce_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->root, c->comm, info, request);
    case K_IREDUCE_SCATTER_BLOCK:
        return PMPI_Reduce_scatter_block_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info,
                                              request);
    case K_IBCAST: return PMPI_Bcast_init(c->recvbuf, c->count, c->type, c->root, c->comm, info, request);
    case K_IBARRIER: return PMPI_Barrier_init(c->comm, info, request);
    case K_IALLGATHER:
        return PMPI_Allgather_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm,
                                   info, request);
    case K_IALLTOALL:
        return PMPI_Alltoall_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->comm, info,
                                  request);
    case K_IALLTOALLV:
        return PMPI_Alltoallv_init(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcounts, c->rdispls,
                                   c->recvtype, c->comm, info, request);
    case K_IALLTOALLW:
        return PMPI_Alltoallw_init(c->sendbuf, c->counts, c->displs, c->types, c->recvbuf, c->recvcounts, c->rdispls,
                                   c->recvtypes, c->comm, info, request);
    case K_IGATHER:
        return PMPI_Gather_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root, c->comm,
                                info, request);
    case K_IGATHERV:
        return PMPI_Gatherv_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                                 c->root, c->comm, info, request);
    case K_ISCATTER:
        return PMPI_Scatter_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcount, c->recvtype, c->root,
                                 c->comm, info, request);
    case K_ISCATTERV:
        return PMPI_Scatterv_init(c->sendbuf, c->counts, c->displs, c->type, c->recvbuf, c->recvcount, c->recvtype,
                                  c->root, c->comm, info, request);
    case K_IALLGATHERV:
        return PMPI_Allgatherv_init(c->sendbuf, c->count, c->type, c->recvbuf, c->recvcounts, c->rdispls, c->recvtype,
                                    c->comm, info, request);
    case K_IREDUCE_SCATTER:
        return PMPI_Reduce_scatter_init(c->sendbuf, c->recvbuf, c->recvcounts, c->type, c->op, c->comm, info, request);
    case K_ISCAN: return PMPI_Scan_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, request);
    case K_IEXSCAN: return PMPI_Exscan_init(c->sendbuf, c->recvbuf, c->count, c->type, c->op, c->comm, info, request);
    default: return MPI_ERR_INTERN;
    }
}

static int make(nm_call given, MPI_Info info, MPI_Request *request)
{
    const nm_call *call = &given;
    int why = nm_route(call), rc;
    if (why >= 0) {
        nm_passed(K_PERSISTENT, why);
        return mpich_init(call, info, request);
    }
    if ((rc = nm_refused(call, request)) != MPI_SUCCESS) return nm_error(call->comm, rc);
    pers *x = calloc(1, sizeof *x);
    nm_req *prep = nm_req_new(call->comm);
    if (!x || !prep) {
        free(x);
        if (prep) nm_req_discard(prep);
        return nm_error(call->comm, MPI_ERR_NO_MEM);
    }
    pthread_once(&info_once, make_info);
    nm_call c = *call;
    x->call = *call;
    x->prep = prep;
    x->running = MPI_REQUEST_NULL;
    x->nbc = NBC_REQUEST_NULL;
    rc = nm_prepare(prep, &c);
    if (rc == MPI_SUCCESS) rc = nm_nbc_init(&c, any_order, &x->nbc);
    if (rc == MPI_SUCCESS) rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &x->handle);
    if (rc != MPI_SUCCESS) {
        if (x->nbc != NBC_REQUEST_NULL) nbc_request_free(&x->nbc);
        nm_req_discard(prep);
        free(x);
        return nm_error(call->comm, rc);
    }
    pthread_mutex_lock(&lock);
    x->next = table[bucket(x->handle)];
    table[bucket(x->handle)] = x;
    npers++;
    pthread_mutex_unlock(&lock);
    *request = x->handle;
    nm_ran(K_PERSISTENT);
    return MPI_SUCCESS;
}

int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLREDUCE(sendbuf, recvbuf, count, datatype, op, comm), info, request);
}

int MPI_Reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IREDUCE(sendbuf, recvbuf, count, datatype, op, root, comm), info, request);
}

int MPI_Bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                   MPI_Request *request)
{
    return make(NM_IBCAST(buffer, count, datatype, root, comm), info, request);
}

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IBARRIER(comm), info, request);
}

int MPI_Reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IREDUCE_SCATTER_BLOCK(sendbuf, recvbuf, recvcount, datatype, op, comm), info, request);
}

int MPI_Allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), info, request);
}

int MPI_Alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLTOALL(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), info, request);
}

int MPI_Alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                       void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLTOALLV(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm),
                info, request);
}

int MPI_Alltoallw_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                       const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
                       const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLTOALLW(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm),
                info, request);
}

int MPI_Gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IGATHER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), info, request);
}

int MPI_Gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                     MPI_Info info, MPI_Request *request)
{
    return make(NM_IGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm), info,
                request);
}

int MPI_Scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_ISCATTER(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), info, request);
}

int MPI_Scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request *request)
{
    return make(NM_ISCATTERV(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm), info,
                request);
}

int MPI_Allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Info info, MPI_Request *request)
{
    return make(NM_IALLGATHERV(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm), info,
                request);
}

int MPI_Reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return make(NM_IREDUCE_SCATTER(sendbuf, recvbuf, recvcounts, datatype, op, comm), info, request);
}

int MPI_Scan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, MPI_Request *request)
{
    return make(NM_ISCAN(sendbuf, recvbuf, count, datatype, op, comm), info, request);
}

int MPI_Exscan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, MPI_Request *request)
{
    return make(NM_IEXSCAN(sendbuf, recvbuf, count, datatype, op, comm), info, request);
}

static int start(pers *x)
{
    if (x->running != MPI_REQUEST_NULL) return nm_error(x->call.comm, MPI_ERR_REQUEST); /* already active */
    nm_req *r = nm_req_new(x->call.comm);
    if (!r) return nm_error(x->call.comm, MPI_ERR_NO_MEM);
    nm_repack(x->prep);
    r->nbc = x->nbc;
    r->prep = x->prep;
    int rc = nbc_start(&r->nbc);
    if (rc != MPI_SUCCESS) {
        r->nbc = NBC_REQUEST_NULL;
        nm_req_discard(r);
        return nm_error(x->call.comm, rc);
    }
    if ((rc = nm_req_publish(r, &x->running)) != MPI_SUCCESS) return nm_error(x->call.comm, rc);
    x->current = r;
    nm_ran(x->call.kind);
    __atomic_fetch_add(&running, 1, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

int MPI_Start(MPI_Request *request)
{
    pers *x = find(*request);
    return x ? start(x) : PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[])
{
    for (int i = 0; i < count; i++) {
        int rc = MPI_Start(&requests[i]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* A started one's running request completed: it is inactive again. */
static void stopped(pers *x)
{
    x->running = MPI_REQUEST_NULL;
    __atomic_fetch_sub(&running, 1, __ATOMIC_RELAXED);
}

int nm_pers_wait(MPI_Request *request, MPI_Status *status)
{
    pers *x = find(*request);
    if (!x || x->running == MPI_REQUEST_NULL) return nm_wait_any_kind(request, status);
    int rc = nm_wait_any_kind(&x->running, status);
    if (x->running == MPI_REQUEST_NULL) stopped(x);
    return rc;
}

int nm_pers_test(MPI_Request *request, int *flag, MPI_Status *status)
{
    pers *x = find(*request);
    if (!x || x->running == MPI_REQUEST_NULL) return nm_test(request, flag, status);
    int rc = nm_test(&x->running, flag, status);
    if (x->running == MPI_REQUEST_NULL) stopped(x);
    return rc;
}

int nm_pers_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    pers *x = find(request);
    return nm_get_status(x && x->running != MPI_REQUEST_NULL ? x->running : request, flag, status);
}

int nm_pers_array(enum nm_array_call call, int count, MPI_Request requests[], int *flag, int *index, int indices[],
                  MPI_Status *status)
{
    enum { SMALL = 32 };
    MPI_Request small_copy[SMALL];
    pers *small_who[SMALL];
    MPI_Request *copy = count <= SMALL ? small_copy : malloc(count * sizeof *copy);
    pers **who = count <= SMALL ? small_who : malloc(count * sizeof *who);
    if (count > 0 && (!copy || !who)) {
        if (copy != small_copy) free(copy);
        if (who != small_who) free(who);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < count; i++) {
        pers *x = find(requests[i]);
        who[i] = x && x->running != MPI_REQUEST_NULL ? x : NULL;
        copy[i] = who[i] ? x->running : requests[i];
    }
    int rc = MPI_ERR_INTERN;
    switch (call) {
    case NM_WAITALL: rc = nm_waitall(count, copy, status); break;
    case NM_TESTALL: rc = nm_testall(count, copy, flag, status); break;
    case NM_WAITANY: rc = nm_waitany(count, copy, index, status); break;
    case NM_TESTANY: rc = nm_testany(count, copy, index, flag, status); break;
    case NM_WAITSOME: rc = nm_waitsome(count, copy, index, indices, status); break;
    case NM_TESTSOME: rc = nm_testsome(count, copy, index, indices, status); break;
    }
    for (int i = 0; i < count; i++) {
        if (!who[i]) {
            requests[i] = copy[i];
            continue;
        }
        who[i]->running = copy[i];
        if (copy[i] == MPI_REQUEST_NULL) stopped(who[i]);
        /* the handle stays: inactive once its collective completed */
    }
    if (copy != small_copy) free(copy);
    if (who != small_who) free(who);
    return rc;
}

/* Freeing a persistent one: a running collective is let finish on its own (as MPI allows). */
int MPI_Request_free(MPI_Request *request)
{
    pers *x = find(*request);
    if (!x) return PMPI_Request_free(request);
    pthread_mutex_lock(&lock);
    pers **p = &table[bucket(x->handle)];
    while (*p != x) p = &(*p)->next;
    *p = x->next;
    npers--;
    pthread_mutex_unlock(&lock);
    if (x->running != MPI_REQUEST_NULL) { /* its layout and nbc's request go when it ends */
        if (!x->current->done) x->current->free_prep = 1;
        else nbc_request_free(&x->nbc), nm_req_discard(x->prep);
        PMPI_Request_free(&x->running);
        __atomic_fetch_sub(&running, 1, __ATOMIC_RELAXED);
    } else {
        nbc_request_free(&x->nbc);
        nm_req_discard(x->prep);
    }
    free(x);
    return PMPI_Request_free(request);
}
