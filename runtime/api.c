/* The public API: every function nbc.h declares is defined here, and nowhere else. Each takes
 * the process lock (thread.c) and, where it needs the library, initializes it on first use,
 * then calls the file that does the work; nothing in the runtime calls back into this file.
 * Also here: the library's life (start-up and shutdown) and the completion calls. */
#include "nbc.h"

#include <sched.h>
#include <stdio.h>

#include "calls.h"
#include "state.h"

const char *nbc_version(void) { return NBC_VERSION; }

const char *nbc_error_message(void) { return error_text(); }

/* keep: nbc_finalize's, which keeps the communicators' state (comm_finalize) and the
 * attribute on MPI_COMM_SELF that lets MPI_Finalize destroy it. */
static void shutdown_all(int keep)
{
    req_finalize();
    programs_finalize();
    comm_finalize(keep);
    nbc_rt.life.initialized = 0;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: an application that forgot
 * nbc_finalize is cleaned up there, while MPI still works, and one that called it loses the
 * communicators' state it kept. Requests still active then are abandoned (they fail with
 * MPI_ERR_PENDING). */
static int on_mpi_finalize(MPI_Comm comm, int key, void *attr, void *extra)
{
    (void)comm, (void)key, (void)attr, (void)extra;
    thread_progress_stop();
    if (thread_enter() != MPI_SUCCESS) return MPI_SUCCESS;
    if (nbc_rt.life.initialized) shutdown_all(0);
    else comm_finalize(0);
    nbc_rt.life.finalize_keyval = MPI_KEYVAL_INVALID; /* MPI frees it with MPI_COMM_SELF */
    thread_leave();
    return MPI_SUCCESS;
}

/* Called with the lock held. */
static int init_locked(void)
{
    if (nbc_rt.life.initialized) return MPI_SUCCESS;
    int mpi_up = 0, mpi_down = 0;
    MPI_Initialized(&mpi_up);
    MPI_Finalized(&mpi_down);
    if (!mpi_up || mpi_down) return nbc_fail(MPI_ERR_OTHER, "nbc is used outside MPI_Init .. MPI_Finalize");
    nbc_rt.life.initialized = 1;
    thread_init();
    int rc = settings_read();
    if (rc == MPI_SUCCESS) rc = shm_init();
    if (rc == MPI_SUCCESS) rc = comm_init();
    if (rc == MPI_SUCCESS) rc = programs_init();
    if (rc == MPI_SUCCESS && nbc_rt.life.finalize_keyval == MPI_KEYVAL_INVALID) { /* the first init */
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_mpi_finalize, &nbc_rt.life.finalize_keyval, NULL);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_set_attr(MPI_COMM_SELF, nbc_rt.life.finalize_keyval, NULL);
    }
    if (rc == MPI_SUCCESS && nbc_rt.env.progress_thread) rc = thread_progress_start();
    if (rc != MPI_SUCCESS) {
        char why[NBC_ERROR_MAX];
        snprintf(why, sizeof why, "%s", error_text());
        shutdown_all(1);
        return nbc_fail(rc, "nbc_init failed: %s", why);
    }
    return MPI_SUCCESS;
}

int nbc_init(void)
{
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return rc;
    rc = init_locked();
    thread_leave();
    return rc;
}

/* With requests still active, nothing is shut down: they stay valid and the call fails, so
 * the application can complete them and try again. Requests it still holds otherwise
 * (persistent ones, or completed ones it never tested) become orphans: see req_finalize. */
int nbc_finalize(void)
{
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return rc;
    int active = nbc_rt.life.initialized ? req_active_count() : 0;
    thread_leave();
    if (!nbc_rt.life.initialized) return MPI_SUCCESS;
    if (active)
        return nbc_fail(MPI_ERR_PENDING, "nbc_finalize: %d request%s still active: complete %s first", active,
                        active == 1 ? " is" : "s are", active == 1 ? "it" : "them");
    thread_progress_stop();
    if ((rc = thread_enter()) != MPI_SUCCESS) return rc;
    if (nbc_rt.life.initialized) shutdown_all(1);
    thread_leave();
    return MPI_SUCCESS;
}

/* ---- progress ---- */

int nbc_progress(void)
{
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return -rc;
    int moved = 0, completed = nbc_rt.life.initialized ? req_progress_all(&moved) : 0;
    if (nbc_rt.life.initialized && !moved) stall_poll();
    thread_leave();
    return completed;
}

/* Reports a completed request through *flag: a one-shot request is released and set to
 * NBC_REQUEST_NULL; a persistent one becomes inactive, ready for its next start. */
static int finish_if_done(nbc_request *request, int *flag)
{
    struct nbc_req *r = *request;
    *flag = r->state != REQ_ACTIVE;
    if (r->state == REQ_ACTIVE) return MPI_SUCCESS;
    if (r->state == REQ_INACTIVE) return MPI_SUCCESS; /* a persistent request not started */
    int rc = r->st.err;
    if (rc != MPI_SUCCESS) nbc_fail(rc, "%s", req_error(r));
    if (r->persistent) {
        r->state = REQ_INACTIVE;
    } else {
        req_release(r);
        *request = NBC_REQUEST_NULL;
    }
    return rc;
}

/* Now and then, in a wait or test that moved nothing: a turn of MPI's own progress engine. A
 * collective on shared memory makes no MPI call, and MPICH's MPI_Wait on a generalized request
 * only polls it, so the rank's own pending MPI operations (a rendezvous a peer sits in MPI_Recv
 * or MPI_Send for, before it joins the collective) would never move. MPI_Iprobe runs MPICH's
 * progress when it finds nothing (not on MPI_COMM_SELF; a request's own communicator may not
 * be set up yet), and takes nothing away. Every 16th idle pass: a wait that ends within a few
 * passes never pays for it. */
enum { POKE_EVERY = 16 };
static __thread unsigned idle_run; /* this thread's passes in a row that moved nothing */

static void after_pass(int moved)
{
    if (moved) {
        idle_run = 0;
    } else if (++idle_run % POKE_EVERY == 0) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

int nbc_test(nbc_request *request, int *flag)
{
    if (!request || !flag) return nbc_fail(MPI_ERR_ARG, "nbc_test: NULL argument");
    if (*request == NBC_REQUEST_NULL) {
        *flag = 1;
        return MPI_SUCCESS;
    }
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return rc;
    int moved = 0;
    if ((*request)->state == REQ_ACTIVE) {
        req_progress_all(&moved);
        if (!moved) stall_poll();
        after_pass(moved);
    }
    rc = finish_if_done(request, flag);
    thread_leave();
    return rc;
}

int nbc_wait(nbc_request *request) { return request ? nbc_waitall(1, request) : nbc_fail(MPI_ERR_ARG, "nbc_wait: request is NULL"); }

/* Spins on progress, yielding the CPU once passes have made no progress for spin_ns: with more
 * ranks than cores, busy-waiting would starve the very peers we wait for. Under
 * MPI_THREAD_MULTIPLE the lock is let go between passes, so other threads (and the progress
 * thread) get their turn; below it no other thread may come in, and it stays taken. */
int nbc_waitall(int count, nbc_request requests[])
{
    if (count < 0 || (count > 0 && !requests)) return nbc_fail(MPI_ERR_ARG, "nbc_waitall: bad arguments");
    int first_error = MPI_SUCCESS;
    long idle_since = -1;
    unsigned idle_passes = 0;
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return rc;
    int others = thread_is_multiple();
    for (;;) {
        int pending = 0;
        for (int i = 0; i < count; i++) {
            if (requests[i] == NBC_REQUEST_NULL) continue;
            int flag;
            rc = finish_if_done(&requests[i], &flag);
            if (flag && rc != MPI_SUCCESS && first_error == MPI_SUCCESS) first_error = rc;
            pending += !flag;
        }
        if (!pending) {
            thread_leave();
            return first_error;
        }
        int moved;
        req_progress_all(&moved);
        if (!moved && idle_passes % 16 == 0) stall_poll(); /* which reads the clock: now and then */
        after_pass(moved);
        if (others) thread_leave();
        if (moved) {
            idle_passes = 0;
            idle_since = -1;
        } else if (nbc_rt.env.spin_ns == 0) {
            sched_yield();
        } else if (idle_passes++ % 16 == 0) { /* the clock costs more than a pass: read it now and then */
            long t = now_ns();
            if (idle_since < 0) idle_since = t;
            else if (t - idle_since > nbc_rt.env.spin_ns) sched_yield();
        }
        if (others && (rc = thread_enter()) != MPI_SUCCESS) return rc;
    }
}

/* ---- the collectives: checked, compiled (or found in the cache) and started (calls.c) ---- */

/* The body of a public call: takes the lock, initializes on first use, returns what expr
 * does. */
#define NBC_PUBLIC(expr)                                                    \
    do {                                                                    \
        int rc_ = thread_enter();                                           \
        if (rc_ != MPI_SUCCESS) return rc_;                                 \
        if ((rc_ = init_locked()) == MPI_SUCCESS) rc_ = (expr);             \
        thread_leave();                                                     \
        return rc_;                                                         \
    } while (0)

int nbc_alloc_mem(MPI_Aint size, void *baseptr)
{
    if (size < 0) return nbc_fail(MPI_ERR_ARG, "nbc_alloc_mem: size %ld is negative", (long)size); /* the message is per thread */
    NBC_PUBLIC(shm_alloc((size_t)size, baseptr));
}

int nbc_free_mem(void *base) { NBC_PUBLIC(shm_free(base)); }

/* Under the lock; the request is NBC_REQUEST_NULL whenever the call fails. */
static int start_call(const call *c, nbc_request *request)
{
    if (request) *request = NBC_REQUEST_NULL;
    NBC_PUBLIC(call_start(c, request));
}

static int init_call(const call *c, MPI_Info info, nbc_request *request)
{
    if (request) *request = NBC_REQUEST_NULL;
    NBC_PUBLIC(persistent_init(c, info, request));
}

/* A call as the reductions, bcast and barrier pass it: one count and datatype. */
static call plain_call(nbc_collective coll, const char *fn, void *const *bufs, int nbufs, const void *sendbuf,
                       void *recvbuf, int count, int root, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return (call){.coll = coll, .fn = fn, .bufs = bufs, .nbufs = nbufs, .sendbuf = sendbuf, .recvbuf = recvbuf,
                  .count = count, .root = root, .datatype = datatype, .op = op, .comm = comm};
}

int nbc_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, nbc_request *request)
{
    call c = plain_call(COLL_ALLREDUCE, "nbc_iallreduce", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return start_call(&c, request);
}

int nbc_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, nbc_request *request)
{
    call c = plain_call(COLL_REDUCE, "nbc_ireduce", NULL, 1, sendbuf, recvbuf, count, root, datatype, op, comm);
    return start_call(&c, request);
}

int nbc_ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, nbc_request *request)
{
    call c = plain_call(COLL_BCAST, "nbc_ibcast", NULL, 1, NULL, buffer, count, root, datatype, MPI_OP_NULL, comm);
    return start_call(&c, request);
}

int nbc_ibarrier(MPI_Comm comm, nbc_request *request)
{
    call c = plain_call(COLL_BARRIER, "nbc_ibarrier", NULL, 1, NULL, NULL, 0, 0, MPI_BYTE, MPI_OP_NULL, comm);
    return start_call(&c, request);
}

int nbc_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, nbc_request *request)
{
    call c = plain_call(COLL_REDUCE_SCATTER, "nbc_ireduce_scatter_block", NULL, 1, sendbuf, recvbuf, recvcount, 0, datatype, op, comm);
    return start_call(&c, request);
}

int nbc_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request)
{
    int rc = call_allgather_check(sendbuf, sendcount, sendtype, recvcount, recvtype);
    if (rc != MPI_SUCCESS) return rc;
    call c = plain_call(COLL_ALLGATHER, "nbc_iallgather", NULL, 1, sendbuf, recvbuf, recvcount, 0, recvtype, MPI_OP_NULL, comm);
    return start_call(&c, request);
}

int nbc_iallreduce_multi(void *bufs[], int nbufs, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                         nbc_request *request)
{
    call c = plain_call(COLL_ALLREDUCE_MULTI, "nbc_iallreduce_multi", bufs, nbufs, MPI_IN_PLACE,
              bufs && nbufs > 0 ? bufs[0] : NULL, count, 0, datatype, op, comm);
    return start_call(&c, request);
}

/* The data-movement collectives, on bytes (calls.c): each side's count and type as MPI passes
 * them. */
static call bytes_call(nbc_collective coll, const char *fn, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return (call){.coll = coll, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf, .root = root,
                  .datatype = MPI_BYTE, .op = MPI_OP_NULL, .comm = comm, .sendcount = sendcount,
                  .recvcount = recvcount, .sendtype = sendtype, .recvtype = recvtype};
}

int nbc_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request)
{
    call c = bytes_call(COLL_ALLTOALL, "nbc_ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, comm);
    return start_call(&c, request);
}

int nbc_igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request)
{
    call c = bytes_call(COLL_GATHER, "nbc_igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return start_call(&c, request);
}

int nbc_iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request)
{
    call c = bytes_call(COLL_SCATTER, "nbc_iscatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return start_call(&c, request);
}

int nbc_iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              nbc_request *request)
{
    call c = plain_call(COLL_SCAN, "nbc_iscan", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return start_call(&c, request);
}

int nbc_iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                nbc_request *request)
{
    call c = plain_call(COLL_EXSCAN, "nbc_iexscan", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return start_call(&c, request);
}

/* ---- persistent requests (persistent.c) ---- */

int nbc_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_ALLREDUCE, "nbc_allreduce_init", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return init_call(&c, info, request);
}

int nbc_reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_REDUCE, "nbc_reduce_init", NULL, 1, sendbuf, recvbuf, count, root, datatype, op, comm);
    return init_call(&c, info, request);
}

int nbc_bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                   nbc_request *request)
{
    call c = plain_call(COLL_BCAST, "nbc_bcast_init", NULL, 1, NULL, buffer, count, root, datatype, MPI_OP_NULL, comm);
    return init_call(&c, info, request);
}

int nbc_barrier_init(MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_BARRIER, "nbc_barrier_init", NULL, 1, NULL, NULL, 0, 0, MPI_BYTE, MPI_OP_NULL, comm);
    return init_call(&c, info, request);
}

int nbc_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_REDUCE_SCATTER, "nbc_reduce_scatter_block_init", NULL, 1, sendbuf, recvbuf, recvcount, 0,
              datatype, op, comm);
    return init_call(&c, info, request);
}

int nbc_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    int rc = call_allgather_check(sendbuf, sendcount, sendtype, recvcount, recvtype);
    if (rc != MPI_SUCCESS) return rc;
    call c = plain_call(COLL_ALLGATHER, "nbc_allgather_init", NULL, 1, sendbuf, recvbuf, recvcount, 0, recvtype, MPI_OP_NULL, comm);
    return init_call(&c, info, request);
}

int nbc_allreduce_multi_init(void *bufs[], int nbufs, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                             MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_ALLREDUCE_MULTI, "nbc_allreduce_multi_init", bufs, nbufs, MPI_IN_PLACE,
              bufs && nbufs > 0 ? bufs[0] : NULL, count, 0, datatype, op, comm);
    return init_call(&c, info, request);
}

int nbc_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = bytes_call(COLL_ALLTOALL, "nbc_alltoall_init", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, comm);
    return init_call(&c, info, request);
}

int nbc_gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = bytes_call(COLL_GATHER, "nbc_gather_init", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return init_call(&c, info, request);
}

int nbc_scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    call c = bytes_call(COLL_SCATTER, "nbc_scatter_init", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return init_call(&c, info, request);
}

int nbc_scan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_SCAN, "nbc_scan_init", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return init_call(&c, info, request);
}

int nbc_exscan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, nbc_request *request)
{
    call c = plain_call(COLL_EXSCAN, "nbc_exscan_init", NULL, 1, sendbuf, recvbuf, count, 0, datatype, op, comm);
    return init_call(&c, info, request);
}

/* ---- the vector collectives: a vcall each (calls.h) ---- */

static vcall alltoallv_call(const char *fn, const void *sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    return (vcall){.c = {.coll = COLL_ALLTOALLV, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .datatype = recvtype, .op = MPI_OP_NULL, .comm = comm, .sendtype = sendtype},
                   .scounts = sendcounts, .sdispls = sdispls, .rcounts = recvcounts, .rdispls = rdispls,
                   .stypes = sendtypes, .rtypes = recvtypes};
}

int nbc_ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                   MPI_Comm comm, nbc_request *request)
{
    vcall v = alltoallv_call("nbc_ialltoallv", sendbuf, sendcounts, sdispls, sendtype, NULL, recvbuf, recvcounts,
                             rdispls, recvtype, NULL, comm);
    return start_call(&v.c, request);
}

int nbc_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                       void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    vcall v = alltoallv_call("nbc_alltoallv_init", sendbuf, sendcounts, sdispls, sendtype, NULL, recvbuf, recvcounts,
                             rdispls, recvtype, NULL, comm);
    return init_call(&v.c, info, request);
}

/* alltoallw is alltoallv on bytes, each rank's type its own (a NULL array of types is
 * refused with MPI_ERR_ARG by the checks; the types' arrays stand in for sendtype and recvtype) */
int nbc_ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, nbc_request *request)
{
    vcall v = alltoallv_call("nbc_ialltoallw", sendbuf, sendcounts, sdispls, MPI_BYTE, sendtypes, recvbuf, recvcounts,
                             rdispls, MPI_BYTE, recvtypes, comm);
    v.w = 1;
    return start_call(&v.c, request);
}

int nbc_alltoallw_init(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                       void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                       MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    vcall v = alltoallv_call("nbc_alltoallw_init", sendbuf, sendcounts, sdispls, MPI_BYTE, sendtypes, recvbuf,
                             recvcounts, rdispls, MPI_BYTE, recvtypes, comm);
    v.w = 1;
    return init_call(&v.c, info, request);
}

static vcall gatherv_call(const char *fn, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return (vcall){.c = {.coll = COLL_GATHERV, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf, .root = root,
                         .datatype = recvtype, .op = MPI_OP_NULL, .comm = comm, .sendcount = sendcount, .sendtype = sendtype},
                   .rcounts = recvcounts, .rdispls = displs};
}

int nbc_igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request)
{
    vcall v = gatherv_call("nbc_igatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    return start_call(&v.c, request);
}

int nbc_gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                     const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     nbc_request *request)
{
    vcall v = gatherv_call("nbc_gatherv_init", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    return init_call(&v.c, info, request);
}

static vcall scatterv_call(const char *fn, const void *sendbuf, const int sendcounts[], const int displs[],
                           MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return (vcall){.c = {.coll = COLL_SCATTERV, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .count = recvcount, .root = root, .datatype = recvtype, .op = MPI_OP_NULL, .comm = comm, .sendtype = sendtype},
                   .scounts = sendcounts, .sdispls = displs};
}

int nbc_iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request)
{
    vcall v = scatterv_call("nbc_iscatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return start_call(&v.c, request);
}

int nbc_scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      nbc_request *request)
{
    vcall v = scatterv_call("nbc_scatterv_init", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    return init_call(&v.c, info, request);
}

static vcall allgatherv_call(const char *fn, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return (vcall){.c = {.coll = COLL_ALLGATHERV, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .datatype = recvtype, .op = MPI_OP_NULL, .comm = comm, .sendcount = sendcount, .sendtype = sendtype},
                   .rcounts = recvcounts, .rdispls = displs};
}

int nbc_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request)
{
    vcall v = allgatherv_call("nbc_iallgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    return start_call(&v.c, request);
}

int nbc_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Info info, nbc_request *request)
{
    vcall v = allgatherv_call("nbc_allgatherv_init", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    return init_call(&v.c, info, request);
}

static vcall reduce_scatter_call(const char *fn, const void *sendbuf, void *recvbuf, const int recvcounts[],
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return (vcall){.c = {.coll = COLL_REDUCE_SCATTERV, .fn = fn, .nbufs = 1, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .datatype = datatype, .op = op, .comm = comm, .sendtype = datatype},
                   .rcounts = recvcounts};
}

int nbc_ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, nbc_request *request)
{
    vcall v = reduce_scatter_call("nbc_ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return start_call(&v.c, request);
}

int nbc_reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Info info, nbc_request *request)
{
    vcall v = reduce_scatter_call("nbc_reduce_scatter_init", sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return init_call(&v.c, info, request);
}

/* These need no initialized library: a request exists only once it is. */
#define NBC_LOCKED(expr)                                                    \
    do {                                                                    \
        int rc_ = thread_enter();                                           \
        if (rc_ != MPI_SUCCESS) return rc_;                                 \
        rc_ = (expr);                                                       \
        thread_leave();                                                     \
        return rc_;                                                         \
    } while (0)

int nbc_start(nbc_request *request) { NBC_LOCKED(persistent_start(request)); }
int nbc_startall(int count, nbc_request requests[]) { NBC_LOCKED(persistent_startall(count, requests)); }
int nbc_request_free(nbc_request *request) { NBC_LOCKED(persistent_free(request)); }
int nbc_set_priority(nbc_request request, int priority) { NBC_LOCKED(persistent_set_priority(request, priority)); }

/* Why the request's last run failed: its own message, kept until it starts again or is
 * released ("" when it has not failed). */
const char *nbc_request_error(nbc_request request)
{
    if (request == NBC_REQUEST_NULL || thread_enter() != MPI_SUCCESS) return "";
    const char *text = request->state != REQ_ACTIVE ? req_error(request) : "";
    thread_leave();
    return text;
}

/* ---- schedules and selection (programs.c) ---- */

int nbc_load_schedules(const char *path) { NBC_PUBLIC(programs_load_schedules(path)); }
int nbc_set_schedule(const char *collective, const char *name) { NBC_PUBLIC(programs_set_schedule(collective, name)); }
int nbc_set_selection(const char *text) { NBC_PUBLIC(programs_set_selection(text)); }
int nbc_load_tuning(const char *path) { NBC_PUBLIC(programs_load_tuning(path)); }
int nbc_get_cache_stats(nbc_cache_stats *stats) { NBC_PUBLIC(programs_cache_stats(stats)); }

/* ---- the progress thread (thread.c) ---- */

int nbc_progress_thread(int on)
{
    if (on) NBC_PUBLIC(thread_progress_start());
    thread_progress_stop();
    return MPI_SUCCESS;
}
