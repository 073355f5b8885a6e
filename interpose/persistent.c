/* Persistent collectives (MPI-4's MPI_Allreduce_init and siblings) on nbc. An MPICH
 * generalized request is freed when it completes, but a persistent request must stay, inactive,
 * for its next start: so the application's handle here is a real, inactive MPICH persistent
 * request that does nothing (a receive from MPI_PROC_NULL), and the library keeps a table from
 * it to the call's arguments. MPI_Start runs the call as its non-blocking form (on nbc, through
 * the wrappers of collectives.c, with their fallbacks and packing); while any is running, the
 * completion calls swap each started handle for the running request, call through, and swap
 * back: where the running one completed, the handle is left inactive instead of
 * MPI_REQUEST_NULL. With none running, a completion call costs one atomic load more. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbcmpi.h"

typedef struct pers {
    MPI_Request handle, running; /* running: MPI_REQUEST_NULL while inactive */
    enum nm_kind kind;
    const void *sendbuf;
    void *recvbuf;
    int count, recvcount, root;
    MPI_Datatype type, recvtype;
    MPI_Op op;
    MPI_Comm comm;
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

static int make(pers *tmpl, MPI_Request *request)
{
    int rank = 0;
    if (tmpl->kind == K_IREDUCE) PMPI_Comm_rank(tmpl->comm, &rank);
    int uses_recv =
        tmpl->kind != K_IBCAST && tmpl->kind != K_IBARRIER && (tmpl->kind != K_IREDUCE || rank == tmpl->root);
    int bad = nm_bad_args(tmpl->sendbuf, tmpl->recvbuf, uses_recv, tmpl->count, request);
    if (bad != MPI_SUCCESS) return nm_error(tmpl->comm, bad);
    pers *x = malloc(sizeof *x);
    if (!x) return nm_error(tmpl->comm, MPI_ERR_NO_MEM);
    *x = *tmpl;
    x->running = MPI_REQUEST_NULL;
    int rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &x->handle);
    if (rc != MPI_SUCCESS) {
        free(x);
        return nm_error(tmpl->comm, rc);
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

/* What nbc would not run goes to MPICH's own persistent call, decided as collectives.c does. */
static int inter(MPI_Comm comm)
{
    int is = 0;
    return comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &is) != MPI_SUCCESS || is;
}

int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
    }
    pers t = {.kind = K_IALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .type = datatype,
              .op = op, .comm = comm};
    return make(&t, request);
}

int MPI_Reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Reduce_init(sendbuf, recvbuf, count, datatype, op, root, comm, info, request);
    }
    pers t = {.kind = K_IREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .type = datatype,
              .op = op, .root = root, .comm = comm};
    return make(&t, request);
}

int MPI_Bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                   MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Bcast_init(buffer, count, datatype, root, comm, info, request);
    }
    pers t = {.kind = K_IBCAST, .recvbuf = buffer, .count = count, .type = datatype, .root = root, .comm = comm};
    return make(&t, request);
}

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Barrier_init(comm, info, request);
    }
    pers t = {.kind = K_IBARRIER, .comm = comm};
    return make(&t, request);
}

int MPI_Reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, datatype, op, comm, info, request);
    }
    pers t = {.kind = K_IREDUCE_SCATTER_BLOCK, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount,
              .type = datatype, .op = op, .comm = comm};
    return make(&t, request);
}

int MPI_Allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (inter(comm)) {
        nm_passed(K_PERSISTENT, R_INTERCOMM);
        return PMPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
    }
    pers t = {.kind = K_IALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount, .type = sendtype,
              .recvcount = recvcount, .recvtype = recvtype, .comm = comm};
    return make(&t, request);
}

static int start(pers *x)
{
    if (x->running != MPI_REQUEST_NULL) return nm_error(x->comm, MPI_ERR_REQUEST); /* already active */
    int rc = MPI_ERR_INTERN;
    switch (x->kind) {
    case K_IALLREDUCE:
        rc = MPI_Iallreduce(x->sendbuf, x->recvbuf, x->count, x->type, x->op, x->comm, &x->running);
        break;
    case K_IREDUCE:
        rc = MPI_Ireduce(x->sendbuf, x->recvbuf, x->count, x->type, x->op, x->root, x->comm, &x->running);
        break;
    case K_IBCAST: rc = MPI_Ibcast(x->recvbuf, x->count, x->type, x->root, x->comm, &x->running); break;
    case K_IBARRIER: rc = MPI_Ibarrier(x->comm, &x->running); break;
    case K_IREDUCE_SCATTER_BLOCK:
        rc = MPI_Ireduce_scatter_block(x->sendbuf, x->recvbuf, x->count, x->type, x->op, x->comm, &x->running);
        break;
    case K_IALLGATHER:
        rc = MPI_Iallgather(x->sendbuf, x->count, x->type, x->recvbuf, x->recvcount, x->recvtype, x->comm,
                            &x->running);
        break;
    default: break;
    }
    if (rc == MPI_SUCCESS) __atomic_fetch_add(&running, 1, __ATOMIC_RELAXED);
    else x->running = MPI_REQUEST_NULL;
    return rc;
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
    if (x->running != MPI_REQUEST_NULL) {
        PMPI_Request_free(&x->running);
        __atomic_fetch_sub(&running, 1, __ATOMIC_RELAXED);
    }
    free(x);
    return PMPI_Request_free(request);
}
