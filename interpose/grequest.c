/* Each collective nbc runs is handed to the application as a generalized request.
 *
 * MPICH: an extended generalized request with a poll function (MPIX_Grequest_class_allocate):
 * MPICH calls poll_fn from every test on an array holding the request, and wait_fn from every
 * wait, so mixed arrays of collectives and point-to-point requests need no handle table and no
 * wrapped completion call. Both advance nbc and, once the collective is done, complete the
 * generalized request; query_fn then fills the status.
 *
 * Open MPI (and any MPI without the extension): a standard one (MPI_Grequest_start), which the
 * MPI never polls. The completion calls are all intercepted (progress.c): while collectives
 * run, each one first drives nbc and completes those done (nm_progress, nm_poll_all), and a
 * wait is a loop of tests, never the MPI's own wait on a collective not yet complete.
 *
 * Either way the collectives not yet done are on a list, for what MPICH does not poll
 * (MPI_Request_get_status, requests the application freed, MPI_Finalize) and for the polling
 * Open MPI needs. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbcmpi.h"

#ifdef NM_POLLED
static MPIX_Grequest_class greq_class;
static pthread_once_t class_once = PTHREAD_ONCE_INIT;
#endif
static int active; /* on the list (atomic, read without the lock) */
static nm_req *list;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;

/* Released requests are kept for the next call, per thread (no lock, no malloc, no clearing
 * of a fresh allocation on the usual path); a request freed by another thread than the one
 * that made it just changes pools. */
static __thread nm_req *pool;
static __thread int pooled;
enum { POOL_MAX = 64 };

static void release(nm_req *r)
{
    if (pooled >= POOL_MAX) {
        free(r);
        return;
    }
    r->next = pool;
    pool = r;
    pooled++;
}

/* The handles of the collectives not yet done, direct-mapped: MPI_Wait on one of them can
 * leave the waiting to wait_fn (nbc_wait, with nbc's spin-then-yield policy). A collision only
 * hides a handle, which then takes the general path. */
enum { HANDLES = 1024 };
static MPI_Request handles[HANDLES];
/* MPICH's handles are ints, Open MPI's pointers (aligned: their low bits are zero): the bits
 * are mixed (Fibonacci hashing) so that both spread over the table. */
static unsigned slot_of(MPI_Request h)
{
    return (unsigned)(((uint64_t)(uintptr_t)h * UINT64_C(0x9E3779B97F4A7C15)) >> 54); /* 2^10 slots */
}

int nm_is_running(MPI_Request h)
{
    return h != MPI_REQUEST_NULL && __atomic_load_n(&handles[slot_of(h)], __ATOMIC_RELAXED) == h;
}

static void unlink_req(nm_req *r)
{
    if (handles[slot_of(r->handle)] == r->handle) __atomic_store_n(&handles[slot_of(r->handle)], MPI_REQUEST_NULL, __ATOMIC_RELAXED);
    if (r->prev) r->prev->next = r->next;
    else list = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    __atomic_fetch_sub(&active, 1, __ATOMIC_RELAXED);
}

/* Takes the request off the list, unpacks, completes the generalized request. Called once
 * (claimed), without the list lock held. */
static void finish(nm_req *r, int rc)
{
    int orphan = r->freed;
    r->err = rc;
    nm_layout_finish(r);
    r->done = 1;
    MPI_Grequest_complete(r->handle);
    if (orphan) release(r);
}

/* nbc_test on the collective; 1 when this caller is the one to finish it. */
static int claim(nm_req *r, int *rc)
{
    int flag = 0;
    *rc = nbc_test(&r->nbc, &flag);
    return flag && !__atomic_exchange_n(&r->claimed, 1, __ATOMIC_ACQ_REL);
}

#ifdef NM_POLLED
static int poll_fn(void *state, MPI_Status *status)
{
    (void)status;
    nm_req *r = state;
    int rc;
    if (r->done || r->claimed || !claim(r, &rc)) return MPI_SUCCESS;
    pthread_mutex_lock(&list_lock);
    unlink_req(r);
    pthread_mutex_unlock(&list_lock);
    finish(r, rc);
    return MPI_SUCCESS;
}

/* MPICH's wait and waitall hand the generalized requests of an array to wait_fn (it must be
 * given): it drives them all until each is done, yielding when nothing moved. */
static int wait_fn(int count, void **states, double timeout, MPI_Status *status)
{
    (void)timeout;
    if (count == 1) { /* the usual MPI_Wait: nbc's own wait, then as poll_fn does */
        nm_req *r = states[0];
        if (!r->done && !r->claimed) {
            int rc = r->nbc != NBC_REQUEST_NULL ? nbc_wait(&r->nbc) : MPI_SUCCESS;
            if (!__atomic_exchange_n(&r->claimed, 1, __ATOMIC_ACQ_REL)) {
                pthread_mutex_lock(&list_lock);
                unlink_req(r);
                pthread_mutex_unlock(&list_lock);
                finish(r, rc);
            }
        }
    }
    for (;;) {
        int pending = 0;
        for (int i = 0; i < count; i++) {
            poll_fn(states[i], status);
            pending += !((nm_req *)states[i])->done;
        }
        if (!pending) return MPI_SUCCESS;
        if (!nm_progress()) sched_yield();
    }
}
#endif

/* A collective's status: no source, tag or elements (MPI leaves them undefined), not
 * cancelled; the return value is the collective's error code. */
static int query_fn(void *state, MPI_Status *status)
{
    nm_req *r = state;
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
#ifdef MPICH_VERSION
    /* MPICH's fields for MPI_Status_set_elements(0) and MPI_Status_set_cancelled(0), without
     * two calls on every completion */
    status->count_lo = 0;
    status->count_hi_and_cancelled = 0;
#else
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
#endif
    return r->err;
}

/* Called when the application's handle goes (completed, or MPI_Request_free). Freed while the
 * collective still runs (MPI calls that erroneous, but it must not lose the operation): the
 * request stays on the list, is driven to the end, and released there. (Open MPI calls it for
 * a freed request only inside MPI_Grequest_complete, once done is set: released here.) */
static int free_fn(void *state)
{
    nm_req *r = state;
    if (r->freed) return MPI_SUCCESS;
    if (r->done) release(r);
    else r->freed = 1;
    return MPI_SUCCESS;
}

/* MPI: "It is erroneous to call MPI_CANCEL for a request associated with a nonblocking
 * collective operation": refused, the collective runs on. */
static int cancel_fn(void *state, int complete)
{
    (void)state, (void)complete;
    return MPI_ERR_REQUEST;
}

#ifdef NM_POLLED
static void make_class(void)
{
    MPIX_Grequest_class_create(query_fn, free_fn, cancel_fn, poll_fn, wait_fn, &greq_class);
}
#endif

nm_req *nm_req_new(MPI_Comm comm)
{
    nm_req *r = pool;
    if (r) {
        pool = r->next;
        pooled--;
        memset(r, 0, sizeof *r);
    } else if (!(r = calloc(1, sizeof *r))) {
        return NULL;
    }
    r->comm = comm;
    r->nbc = NBC_REQUEST_NULL;
    r->standin = r->blocks[0] = r->blocks[1] = MPI_DATATYPE_NULL;
    return r;
}

void nm_req_discard(nm_req *r)
{
    r->unpack_to = NULL;
    nm_layout_finish(r);
    release(r);
}

int nm_req_publish(nm_req *r, MPI_Request *request)
{
#ifdef NM_POLLED
    pthread_once(&class_once, make_class);
    int rc = MPIX_Grequest_class_allocate(greq_class, r, &r->handle);
#else
    int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->handle);
#endif
    if (rc != MPI_SUCCESS) { /* cannot hand it out: finish it here */
        nbc_wait(&r->nbc);
        nm_req_discard(r);
        return rc;
    }
    pthread_mutex_lock(&list_lock);
    r->next = list;
    if (list) list->prev = r;
    list = r;
    __atomic_store_n(&handles[slot_of(r->handle)], r->handle, __ATOMIC_RELAXED);
    __atomic_fetch_add(&active, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&list_lock);
    *request = r->handle;
    return MPI_SUCCESS;
}

int nm_active(void) { return __atomic_load_n(&active, __ATOMIC_RELAXED); }

/* Finishes (completes the generalized request of) every collective that is done, so that it
 * completes in any MPI call, polled or not. Returns how many. */
int nm_poll_all(void)
{
    if (!nm_active()) return 0;
    nm_req *done = NULL;
    int n = 0;
    /* Busy: another thread polls, or this one from inside nbc (an op calling MPI); either way
     * waiting here could deadlock (nbc's lock is taken under this one). */
    if (pthread_mutex_trylock(&list_lock) != 0) return 0;
    for (nm_req *r = list, *next; r; r = next) {
        next = r->next;
        int rc;
        if (r->claimed || r->nbc == NBC_REQUEST_NULL || !claim(r, &rc)) continue;
        unlink_req(r);
        r->err = rc;
        r->next = done;
        done = r;
        n++;
    }
    pthread_mutex_unlock(&list_lock);
    while (done) {
        nm_req *r = done;
        done = r->next;
        finish(r, r->err);
    }
    return n;
}

/* Drives every collective; when some completed, finishes them. Without poll_fn nothing else
 * would complete a collective nbc finished elsewhere (at its start, in nbc_test, in its
 * progress thread): the list is always looked at. */
int nm_progress(void)
{
    int moved = nbc_progress() > 0;
#ifdef NM_POLLED
    if (moved) nm_poll_all();
    return moved;
#else
    return nm_poll_all() > 0 || moved;
#endif
}

void nm_drain(void)
{
    while (nm_active())
        if (!nm_poll_all() && !nm_progress()) sched_yield();
}
