/* Communicator state: each communicator the library is used with is duplicated once, so our
 * messages never match the application's. The duplication is itself non-blocking
 * (MPI_Comm_idup): the first collectives on a communicator wait in the active list until it
 * completes, so no call of the library ever blocks, whatever order ranks touch their
 * communicators in. The state hangs on the user's communicator as an attribute. Each
 * collective takes the next sequence number, and its messages use a tag derived from it, so
 * many collectives can be in flight on one communicator. Any-order requests get a second
 * duplicate at the first of them, where each request's tag is its identity.
 *
 * MPI lets an application free a communicator while collectives on it are still in flight
 * (they complete normally): the state counts the requests using it and outlives the
 * communicator until the last of them is released. */
#include <stdlib.h>
#include <string.h>

#include "state.h"


static void unlink_state(comm_state *cs)
{
    if (cs->prev) cs->prev->next = cs->next;
    else nbc_rt.comms.all = cs->next;
    if (cs->next) cs->next->prev = cs->prev;
}

/* Tests (or waits for) a pending duplication; 1 once it is complete. A duplication holds the
 * application's communicator, so MPICH keeps it, and runs our delete_state, only when the
 * duplication completes: from inside this very call, if the application freed it meanwhile.
 * The request is taken out first and cs marked busy, so that delete_state neither completes it
 * a second time nor frees cs under us: it leaves that to the caller (settled). */
static int settle(comm_state *cs, MPI_Request *pending, MPI_Comm *dup, int wait)
{
    if (*pending == MPI_REQUEST_NULL) return 1;
    MPI_Request q = *pending;
    int done = 1;
    *pending = MPI_REQUEST_NULL;
    cs->busy++;
    if (wait) MPI_Wait(&q, MPI_STATUS_IGNORE);
    else MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    cs->busy--;
    if (!done) *pending = q;
    else MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
    return done;
}

static void destroy_state(comm_state *cs)
{
    unlink_state(cs);
    /* a duplication still pending is completed: the other ranks started it too (init and the
     * first call are collective), and complete it when they make progress in MPI */
    settle(cs, &cs->pending, &cs->dup, 1);
    settle(cs, &cs->any_pending, &cs->any, 1);
    shm_comm_free(cs);
    while (cs->blocks) {
        any_block *b = cs->blocks;
        cs->blocks = b->next;
        settle(cs, &b->pending, &b->comm, 1);
        MPI_Comm_free(&b->comm);
        free(b);
    }
    MPI_Comm_free(&cs->dup);
    if (cs->any != MPI_COMM_NULL) MPI_Comm_free(&cs->any);
    free(cs);
}

/* The application freed its communicator (or MPI_Finalize or nbc_finalize let it go). */
static int delete_state(MPI_Comm comm, int key, void *attr, void *extra)
{
    (void)comm, (void)key, (void)extra;
    comm_state *cs = attr;
    /* From the application's MPI_Comm_free the lock is not held, and the progress thread may be
     * testing this state's pending duplications at this very moment. */
    int took = thread_enter_callback();
    if (cs == nbc_rt.comms.last_state) nbc_rt.comms.last_comm = MPI_COMM_NULL, nbc_rt.comms.last_state = NULL;
    req_drop_spare(cs); /* while the communicator is still the application's: it only drops a reference */
    cs->user = MPI_COMM_NULL;
#ifdef OPEN_MPI
    /* Open MPI 4.1's MPI_Comm_idup still reads its parent after MPI_Comm_free has released it
     * (a crash in MPI_Test), so a duplication in progress is completed now. It can only wait
     * for ranks that have not yet made this communicator's first nbc call, which they must
     * make before they free it too. */
    settle(cs, &cs->pending, &cs->dup, 1);
    settle(cs, &cs->any_pending, &cs->any, 1);
#endif
    if (cs->refs == 0 && !cs->busy) destroy_state(cs); /* busy: settle's caller does it */
    thread_leave_callback(took);
    return MPI_SUCCESS;
}

void comm_hold(comm_state *cs) { cs->refs++; }
comm_state *comm_first(void) { return nbc_rt.comms.all; }

void comm_add_any(comm_state *cs, struct nbc_req *r)
{
    r->cs_next = cs->persistent;
    cs->persistent = r;
}

static void reap_blocks(comm_state *cs);

/* r is freed: its identity's block may be over. */
void comm_remove_any(comm_state *cs, struct nbc_req *r)
{
    for (struct nbc_req **at = &cs->persistent; *at; at = &(*at)->cs_next)
        if (*at == r) {
            *at = r->cs_next;
            break;
        }
    if (r->block) {
        r->block->live--;
        r->block = NULL;
        reap_blocks(cs);
    }
}

void comm_drop(comm_state *cs)
{
    if (--cs->refs == 0 && cs->user == MPI_COMM_NULL) destroy_state(cs);
}

int comm_init(void)
{
    if (nbc_rt.comms.keyval != MPI_KEYVAL_INVALID) return MPI_SUCCESS; /* kept across nbc_finalize */
    return MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &nbc_rt.comms.keyval, NULL);
}

/* Every request is released or orphaned by now (refs are 0).
 *
 * nbc_finalize keeps each communicator's state (keep): its duplicates, its count of calls and
 * of any-order identities are what its peers agree with, and a rank that finalizes and starts
 * again between two collectives must go on where they do. Only what pointed into the program
 * cache goes. MPI_Finalize (keep = 0) destroys them, first completing duplications still
 * pending: the application may have freed their communicator, which MPICH then releases,
 * with our attribute, only as they complete. */
void comm_finalize(int keep)
{
    nbc_rt.comms.last_comm = MPI_COMM_NULL, nbc_rt.comms.last_state = NULL;
    if (keep) {
        for (comm_state *cs = nbc_rt.comms.all; cs; cs = cs->next) memset(&cs->last, 0, sizeof cs->last);
        return;
    }
    while (nbc_rt.comms.all) {
        comm_state *cs = nbc_rt.comms.all;
        cs->refs = 0;
        settle(cs, &cs->pending, &cs->dup, 1);
        settle(cs, &cs->any_pending, &cs->any, 1);
        for (any_block *b = cs->blocks; b; b = b->next) settle(cs, &b->pending, &b->comm, 1);
        if (cs->user == MPI_COMM_NULL || MPI_Comm_delete_attr(cs->user, nbc_rt.comms.keyval) != MPI_SUCCESS)
            destroy_state(cs);
    }
    if (nbc_rt.comms.keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&nbc_rt.comms.keyval);
}

comm_state *comm_state_find(MPI_Comm comm)
{
    if (comm == nbc_rt.comms.last_comm) return nbc_rt.comms.last_state;
    void *attr;
    int found = 0;
    if (MPI_Comm_get_attr(comm, nbc_rt.comms.keyval, &attr, &found) != MPI_SUCCESS || !found) return NULL;
    nbc_rt.comms.last_comm = comm;
    return nbc_rt.comms.last_state = attr;
}

int comm_state_of(MPI_Comm comm, comm_state **out)
{
    void *attr;
    int found;
    int rc = MPI_Comm_get_attr(comm, nbc_rt.comms.keyval, &attr, &found);
    if (rc != MPI_SUCCESS) return nbc_fail(rc, "cannot read the communicator's attributes");
    if (found) {
        *out = attr;
        return MPI_SUCCESS;
    }
    comm_state *cs = calloc(1, sizeof *cs);
    if (!cs) return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    cs->user = comm;
    cs->any = MPI_COMM_NULL;
    cs->any_pending = MPI_REQUEST_NULL;
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
    if (nbc_rt.env.tag_ub && nbc_rt.env.tag_ub + 1 < cs->tag_space) cs->tag_space = nbc_rt.env.tag_ub + 1;
    rc = MPI_Comm_set_attr(comm, nbc_rt.comms.keyval, cs);
    if (rc != MPI_SUCCESS) {
        MPI_Wait(&cs->pending, MPI_STATUS_IGNORE);
        MPI_Comm_free(&cs->dup);
        free(cs);
        return nbc_fail(rc, "cannot attach state to the communicator");
    }
    cs->next = nbc_rt.comms.all;
    if (nbc_rt.comms.all) nbc_rt.comms.all->prev = cs;
    nbc_rt.comms.all = cs;
    *out = cs;
    return MPI_SUCCESS;
}

/* The top tag is kept for attaching shared memory (shm.c). */
int comm_next_tag(comm_state *cs) { return (int)(cs->seq++ % (cs->tag_space - 1)); }

/* ---- any-order identities ----
 *
 * Any-order requests are made by _init calls, which every rank makes in the same order, so the
 * n-th of a communicator is the n-th everywhere: n is its identity, and n modulo the tag space
 * (less the stall reports' tags) its tag. Identities are not handed out again as requests are
 * freed: a free is local, ranks free in their own order, so which identity is free at the next
 * init could differ between ranks. Instead each block of tag-space identities has a duplicate
 * of its own, made (by every rank at the same init) when the block begins, and freed here once
 * the block is over and every request of it is freed: two live requests never share a
 * communicator and a tag, however many inits and frees, and a block lives only as long as one
 * of its requests does. */
static uint64_t block_size(const comm_state *cs) { return cs->tag_space - STALL_TAGS; }

/* Blocks over and empty go, once their duplication is complete (MPI_Comm_free needs it). */
static void reap_blocks(comm_state *cs)
{
    for (any_block **at = &cs->blocks, *b; (b = *at);) {
        if (b->live == 0 && cs->any_ids >= b->first + block_size(cs) && settle(cs, &b->pending, &b->comm, 0)) {
            *at = b->next;
            MPI_Comm_free(&b->comm);
            free(b);
        } else {
            at = &b->next;
        }
    }
}

int comm_take_identity(comm_state *cs, struct nbc_req *r)
{
    uint64_t id = cs->any_ids, w = block_size(cs);
    any_block *b = NULL;
    int rc = MPI_SUCCESS;
    if (id < w) { /* the first block: cs->any, made at the first any-order init */
        if (cs->any == MPI_COMM_NULL && cs->any_pending == MPI_REQUEST_NULL)
            rc = MPI_Comm_idup(cs->user, &cs->any, &cs->any_pending);
    } else if (cs->blocks && cs->blocks->first + w > id) { /* the newest block goes on */
        b = cs->blocks;
    } else if (!(b = calloc(1, sizeof *b))) {
        return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    } else {
        *b = (any_block){.first = id - id % w, .comm = MPI_COMM_NULL, .pending = MPI_REQUEST_NULL, .next = cs->blocks};
        rc = MPI_Comm_idup(cs->user, &b->comm, &b->pending);
        if (rc == MPI_SUCCESS) cs->blocks = b;
        else free(b);
    }
    if (rc != MPI_SUCCESS)
        return nbc_fail(rc, "MPI_Comm_idup failed: no duplicate for any-order identities %llu ..",
                        (unsigned long long)(id - id % w));
    if (b) b->live++;
    r->id = id;
    r->block = b;
    cs->any_ids++;
    reap_blocks(cs);
    return MPI_SUCCESS;
}

int comm_any_ready(struct nbc_req *r, MPI_Comm *comm)
{
    any_block *b = r->block;
    if (!b) {
        *comm = r->cs->any;
        return comm_ready(r->cs, 1);
    }
    *comm = b->comm;
    return settle(r->cs, &b->pending, &b->comm, 0);
}

/* (A request that asks holds cs: if the application's communicator goes during the test, cs
 * stays until that request is released.) */
int comm_ready(comm_state *cs, int any)
{
    return any ? settle(cs, &cs->any_pending, &cs->any, 0) : settle(cs, &cs->pending, &cs->dup, 0);
}
