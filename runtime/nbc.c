/* The library's life and the completion calls: start-up and shutdown, errors, progress, test
 * and wait. Every public call holds the process lock (thread.c) while it touches state. */
#include "nbc.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int initialized;
static long spin_ns; /* how long a wait spins without progress before it yields */
static int finalize_keyval = MPI_KEYVAL_INVALID;
static __thread char message[4096]; /* per thread, like errno */

/* A source line or caret under it, as the compiler draws them ("   14 | ..." or "      | ^"). */
static int is_diagram(const char *line)
{
    while (*line == ' ' || (*line >= '0' && *line <= '9')) line++;
    return *line == '|';
}

/* The compiler's diagnostics are for a terminal; the library's message is one plain line:
 * "file:line:col: message", the diagrams dropped, "error: " dropped, lines joined by "; ". */
static void one_line(char *m, size_t size)
{
    char text[sizeof message];
    snprintf(text, sizeof text, "%s", m);
    size_t n = 0;
    for (char *line = text, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (nl) *nl = '\0';
        while (*line == ' ') line++;
        if (!*line || is_diagram(line)) continue;
        if (n && n + 2 < size) { /* "failed:" and the reason on the next line read as one */
            if (m[n - 1] != ':') m[n++] = ';';
            m[n++] = ' ';
        }
        for (char *p = line; *p && n + 1 < size;) {
            if (!strncmp(p, "error: ", 7) && (p == line || (p >= line + 2 && !strncmp(p - 2, ": ", 2)))) p += 7;
            else m[n++] = *p++;
        }
    }
    m[n] = '\0';
}

int nbc_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    one_line(message, sizeof message);
    return code;
}

const char *nbc_version(void) { return NBC_VERSION; }

void nbc_clear_error(void) { message[0] = '\0'; }
const char *nbc_error_message(void) { return message; }

static void shutdown_all(void)
{
    req_finalize();
    select_finalize();
    comm_finalize();
    initialized = 0;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: an application that forgot
 * nbc_finalize is cleaned up there, while MPI still works. Requests still active then are
 * abandoned (they fail with MPI_ERR_PENDING). */
static int on_mpi_finalize(MPI_Comm comm, int key, void *attr, void *extra)
{
    (void)comm, (void)key, (void)attr, (void)extra;
    if (!initialized) return MPI_SUCCESS;
    thread_progress_stop();
    if (thread_enter() != MPI_SUCCESS) return MPI_SUCCESS;
    if (initialized) shutdown_all();
    thread_leave();
    return MPI_SUCCESS;
}

/* How many ranks share this node, from whichever launcher started us: MPICH's Hydra, Open
 * MPI's, or a PMI that sets MPI_LOCAL_NRANKS (0: unknown, and then nbc does not spin). An
 * environment variable, not MPI_Comm_split_type: that would be a blocking collective. */
static long local_ranks(void)
{
    static const char *vars[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCAL_NRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 0) return atol(v);
    }
    return 0;
}

/* Called with the lock held. */
static int init_locked(void)
{
    if (initialized) return MPI_SUCCESS;
    int mpi_up = 0, mpi_down = 0;
    MPI_Initialized(&mpi_up);
    MPI_Finalized(&mpi_down);
    if (!mpi_up || mpi_down) return nbc_fail(MPI_ERR_OTHER, "nbc is used outside MPI_Init .. MPI_Finalize");
    initialized = 1;
    thread_init();
    /* Spinning a little saves a trip through the scheduler when each rank has a core of its
     * own; with more ranks than cores it only steals time from the peers we wait for.
     * NBC_SPIN_US overrides. */
    const char *spin = getenv("NBC_SPIN_US");
    long local = local_ranks(), cores = sysconf(_SC_NPROCESSORS_ONLN);
    spin_ns = local > 0 && local <= cores ? 20000 : 0;
    if (spin && *spin) spin_ns = atol(spin) * 1000;
    int rc = comm_init();
    if (rc == MPI_SUCCESS) rc = select_init();
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_mpi_finalize, &finalize_keyval, NULL);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval, NULL);
    if (rc == MPI_SUCCESS) stall_init();
    const char *thread = getenv("NBC_PROGRESS_THREAD");
    if (rc == MPI_SUCCESS && thread && !strcmp(thread, "1")) rc = thread_progress_start();
    if (rc != MPI_SUCCESS) {
        char why[sizeof message];
        snprintf(why, sizeof why, "%s", message);
        shutdown_all();
        return nbc_fail(rc, "nbc_init failed: %s", why);
    }
    return MPI_SUCCESS;
}

int nbc_ensure_init(void) { return init_locked(); }

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
    int active = initialized ? req_active_count() : 0;
    thread_leave();
    if (!initialized) return MPI_SUCCESS;
    if (active)
        return nbc_fail(MPI_ERR_PENDING, "nbc_finalize: %d request%s still active: complete %s first", active,
                        active == 1 ? " is" : "s are", active == 1 ? "it" : "them");
    thread_progress_stop();
    if ((rc = thread_enter()) != MPI_SUCCESS) return rc;
    if (initialized) {
        shutdown_all(); /* first, so that no attribute is deleted from another's callback */
        MPI_Comm_delete_attr(MPI_COMM_SELF, finalize_keyval);
        MPI_Comm_free_keyval(&finalize_keyval);
    }
    thread_leave();
    return MPI_SUCCESS;
}

/* ---- progress ---- */

int nbc_progress(void)
{
    int rc = thread_enter();
    if (rc != MPI_SUCCESS) return -rc;
    int moved = 0, completed = initialized ? req_progress_all(&moved) : 0;
    if (initialized && !moved) stall_poll();
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
    if (rc != MPI_SUCCESS) {
        if (r->error[0]) {
            nbc_fail(rc, "%s", r->error);
        } else {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, text, &len);
            nbc_fail(rc, "an MPI call of the collective failed: %s", text);
        }
    }
    if (r->persistent) {
        r->state = REQ_INACTIVE;
    } else {
        req_release(r);
        *request = NBC_REQUEST_NULL;
    }
    return rc;
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
    }
    rc = finish_if_done(request, flag);
    thread_leave();
    return rc;
}

int nbc_wait(nbc_request *request) { return request ? nbc_waitall(1, request) : nbc_fail(MPI_ERR_ARG, "nbc_wait: request is NULL"); }

/* Spins on progress, yielding the CPU once passes have made no progress for spin_ns: with more
 * ranks than cores, busy-waiting would starve the very peers we wait for. The lock is let go
 * between passes, so other threads (and the progress thread) get their turn. */
int nbc_waitall(int count, nbc_request requests[])
{
    if (count < 0 || (count > 0 && !requests)) return nbc_fail(MPI_ERR_ARG, "nbc_waitall: bad arguments");
    int first_error = MPI_SUCCESS;
    long idle_since = -1;
    for (;;) {
        int rc = thread_enter();
        if (rc != MPI_SUCCESS) return rc;
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
        if (!moved) stall_poll();
        thread_leave();
        if (moved) {
            idle_since = -1;
        } else if (spin_ns == 0) {
            sched_yield();
        } else {
            long t = now_ns();
            if (idle_since < 0) idle_since = t;
            else if (t - idle_since > spin_ns) sched_yield();
        }
    }
}
