/* Communicator state: each communicator the library is used with is duplicated once, so our
 * messages never match the application's. The duplication is itself non-blocking
 * (MPI_Comm_idup): the first collectives on a communicator wait in the active list until it
 * completes, so no call of the library ever blocks, whatever order ranks touch their
 * communicators in. The state hangs on the user's communicator as an attribute and goes away
 * with it. Each collective takes the next sequence number, and its
 * messages use a tag derived from it, so many collectives can be in flight on one
 * communicator. */
#include <stdlib.h>

#include "internal.h"

static int keyval = MPI_KEYVAL_INVALID;
static comm_state *all;
static MPI_Comm last_comm = MPI_COMM_NULL; /* most calls use the communicator of the last one */
static comm_state *last_state;

static void unlink_state(comm_state *cs)
{
    if (cs->prev) cs->prev->next = cs->next;
    else all = cs->next;
    if (cs->next) cs->next->prev = cs->prev;
}

static int delete_state(MPI_Comm comm, int key, void *attr, void *extra)
{
    (void)comm, (void)key, (void)extra;
    comm_state *cs = attr;
    if (cs == last_state) last_comm = MPI_COMM_NULL, last_state = NULL;
    unlink_state(cs);
    if (cs->pending != MPI_REQUEST_NULL) MPI_Wait(&cs->pending, MPI_STATUS_IGNORE); /* at shutdown only */
    MPI_Comm_free(&cs->dup);
    free(cs);
    return MPI_SUCCESS;
}

int comm_init(void)
{
    return MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, NULL);
}

void comm_finalize(void)
{
    while (all) {
        comm_state *cs = all;
        if (MPI_Comm_delete_attr(cs->user, keyval) != MPI_SUCCESS) delete_state(cs->user, keyval, cs, NULL);
    }
    if (keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&keyval);
}

comm_state *comm_state_find(MPI_Comm comm)
{
    if (comm == last_comm) return last_state;
    void *attr;
    int found = 0;
    if (MPI_Comm_get_attr(comm, keyval, &attr, &found) != MPI_SUCCESS || !found) return NULL;
    last_comm = comm;
    return last_state = attr;
}

int comm_state_of(MPI_Comm comm, comm_state **out)
{
    void *attr;
    int found;
    int rc = MPI_Comm_get_attr(comm, keyval, &attr, &found);
    if (rc != MPI_SUCCESS) return nbc_fail(rc, "cannot read the communicator's attributes");
    if (found) {
        *out = attr;
        return MPI_SUCCESS;
    }
    comm_state *cs = calloc(1, sizeof *cs);
    if (!cs) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    cs->user = comm;
    rc = MPI_Comm_idup(comm, &cs->dup, &cs->pending);
    if (rc != MPI_SUCCESS) {
        free(cs);
        return nbc_fail(rc, "MPI_Comm_idup failed");
    }
    MPI_Comm_rank(comm, &cs->rank);
    MPI_Comm_size(comm, &cs->size);
    int *ub;
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &found);
    cs->tag_space = found ? (uint64_t)*ub + 1 : 32768; /* the standard guarantees 32767 */
    rc = MPI_Comm_set_attr(comm, keyval, cs);
    if (rc != MPI_SUCCESS) {
        MPI_Wait(&cs->pending, MPI_STATUS_IGNORE);
        MPI_Comm_free(&cs->dup);
        free(cs);
        return nbc_fail(rc, "cannot attach state to the communicator");
    }
    cs->next = all;
    if (all) all->prev = cs;
    all = cs;
    *out = cs;
    return MPI_SUCCESS;
}

int comm_next_tag(comm_state *cs) { return (int)(cs->seq++ % cs->tag_space); }

int comm_ready(comm_state *cs)
{
    if (cs->pending == MPI_REQUEST_NULL) return 1;
    int done = 0;
    MPI_Test(&cs->pending, &done, MPI_STATUS_IGNORE);
    if (done) MPI_Comm_set_errhandler(cs->dup, MPI_ERRORS_RETURN);
    return done;
}
