/* Threads. All of the library's state (state.h) sits behind one lock, taken by every public call.
 *
 * Under MPI_THREAD_MULTIPLE any thread may call at any time: calls wait for the lock. Under a
 * lower level the application promised MPI not to call concurrently, so a flag does instead of
 * the lock (one atomic exchange on entry, a plain store on leaving): a call that finds it set
 * (two threads inside at once) or, under MPI_THREAD_SINGLE or FUNNELED, comes from another
 * thread than the one that initialized the library is refused with an error instead of
 * corrupting state.
 *
 * The progress thread (nbc_progress_thread, NBC_PROGRESS_THREAD=1) drives every active
 * request so the application need not poll. It sleeps on a condition variable while nothing
 * is active, and yields between passes that moved nothing. */
#include "nbc.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "state.h"


void thread_init(void)
{
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    nbc_rt.threads.level = provided;
    nbc_rt.threads.owner = pthread_self();
}

int thread_is_multiple(void) { return nbc_rt.threads.level == MPI_THREAD_MULTIPLE; }

/* Whether this thread holds the lock: MPI calls the library back (a communicator's attribute
 * being deleted) both from inside the library and from the application's own MPI calls. */
static __thread int held;

static void lock(void)
{
    pthread_mutex_lock(&nbc_rt.threads.lock);
    held = 1;
}

static void unlock(void)
{
    held = 0;
    pthread_mutex_unlock(&nbc_rt.threads.lock);
}

int thread_enter_callback(void)
{
    if (held || !nbc_rt.life.initialized) return 0;
    lock();
    return 1;
}

void thread_leave_callback(int took)
{
    if (took) unlock();
}

/* A thread already inside the library calling in again (an operator run by a collective's step
 * calls MPI_Test, which the interposition library turns into nbc's progress): taking the lock
 * again would deadlock, and the state is in the middle of that step. Refused; the outer call
 * goes on. */
int thread_enter(void)
{
    if (held) return nbc_fail(MPI_ERR_OTHER, "nbc was called again from inside one of its calls (an operator or "
                              "callback calling MPI): refused, the outer call goes on");
    if (nbc_rt.threads.level == MPI_THREAD_MULTIPLE) {
        lock();
        return MPI_SUCCESS;
    }
    if (nbc_rt.threads.level < MPI_THREAD_SERIALIZED && !pthread_equal(pthread_self(), nbc_rt.threads.owner))
        return nbc_fail(MPI_ERR_OTHER, "nbc was called from a second thread, but MPI provides only %s: "
                        "initialize MPI with MPI_THREAD_MULTIPLE (MPI_Init_thread) to call it from several threads",
                        nbc_rt.threads.level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED");
    if (__atomic_exchange_n(&nbc_rt.threads.entered, 1, __ATOMIC_ACQUIRE))
        return nbc_fail(MPI_ERR_OTHER, "nbc was called from two threads at once under MPI_THREAD_SERIALIZED: "
                        "initialize MPI with MPI_THREAD_MULTIPLE to do that");
    held = 1;
    return MPI_SUCCESS;
}

/* As the call entered: the level may have changed inside it (nbc_init learns it). */
void thread_leave(void)
{
    if (!__atomic_load_n(&nbc_rt.threads.entered, __ATOMIC_RELAXED)) {
        unlock();
        return;
    }
    held = 0;
    __atomic_store_n(&nbc_rt.threads.entered, 0, __ATOMIC_RELEASE);
}

void thread_wake(void)
{
    if (nbc_rt.threads.progress_running) pthread_cond_signal(&nbc_rt.threads.work);
}

/* Open MPI 4.1 crosses two duplications of one communicator when one thread drives an
 * MPI_Comm_idup's progress while another runs MPI_Comm_dup (or any constructor) on the same
 * parent: the ranks agree on different context ids, and the new communicators' messages never
 * match. A single thread doing both is safe, and MPICH is not affected. The application may
 * make communicators from its own at any time, so while one of them is being duplicated the
 * progress thread stays out of MPI: the duplication advances in the application's own calls,
 * as it does without the thread. */
static int progress_may_enter_mpi(void)
{
#ifdef OPEN_MPI
    return nbc_rt.comms.duplicating_app == 0;
#else
    return 1;
#endif
}

static void *progress_main(void *arg)
{
    (void)arg;
    int idle = 0;
    lock();
    while (!nbc_rt.threads.progress_stop) {
        int may_enter = progress_may_enter_mpi();
        if (req_active_count() == 0 || !may_enter) {
            /* wakes at a start, or after a while to answer stall queries */
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 10000000;
            if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&nbc_rt.threads.work, &nbc_rt.threads.lock, &t);
            if (progress_may_enter_mpi()) stall_poll(); /* the lock was let go meanwhile */
            continue;
        }
        int moved = 0;
        req_progress_all(&moved);
        if (!moved) stall_poll();
        unlock();
        /* Between passes that found nothing to do, give the core away: on a node with more
         * ranks than cores the peers this thread waits for need it. */
        if (moved) {
            idle = 0;
        } else if (++idle > 64) {
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        } else {
            sched_yield();
        }
        lock();
    }
    unlock();
    return NULL;
}

/* Called with the lock held (nbc_init or nbc_progress_thread). */
int thread_progress_start(void)
{
    if (nbc_rt.threads.progress_running) return MPI_SUCCESS;
    if (nbc_rt.threads.level != MPI_THREAD_MULTIPLE)
        return nbc_fail(MPI_ERR_OTHER, "the progress thread needs MPI_THREAD_MULTIPLE (initialize MPI with "
                        "MPI_Init_thread)");
    nbc_rt.threads.progress_stop = 0;
    if (pthread_create(&nbc_rt.threads.progress, NULL, progress_main, NULL) != 0)
        return nbc_fail(MPI_ERR_OTHER, "cannot start the progress thread");
    nbc_rt.threads.progress_running = 1;
    return MPI_SUCCESS;
}

/* Called without the lock, which the thread needs to notice it should end. */
void thread_progress_stop(void)
{
    if (!nbc_rt.threads.progress_running) return;
    pthread_mutex_lock(&nbc_rt.threads.lock);
    nbc_rt.threads.progress_stop = 1;
    pthread_cond_signal(&nbc_rt.threads.work);
    pthread_mutex_unlock(&nbc_rt.threads.lock);
    pthread_join(nbc_rt.threads.progress, NULL);
    pthread_mutex_lock(&nbc_rt.threads.lock);
    nbc_rt.threads.progress_running = 0;
    pthread_mutex_unlock(&nbc_rt.threads.lock);
}
