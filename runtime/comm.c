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

/* ---- duplicates, one at a time ----
 *
 * Every rank asks for a communicator's duplicates in the same order (its first collective, its
 * first any-order init, the init that begins each later block of identities), and each is
 * started only once the one before it has completed. The first duplicates the application's
 * communicator; the later ones duplicate the first, which is ours, so they can still be made
 * after the application has freed its communicator. */
static duplicate *of_turn(comm_state *cs, uint64_t turn)
{
    if (cs->dup.turn == turn) return &cs->dup;
    if (cs->any.turn == turn) return &cs->any;
    for (any_block *b = cs->blocks; b; b = b->next)
        if (b->dup.turn == turn) return &b->dup;
    return NULL;
}

static void start_next(comm_state *cs)
{
    while (!cs->in_flight && cs->turns_started < cs->turns_asked) {
        duplicate *d = of_turn(cs, ++cs->turns_started);
        MPI_Comm parent = d == &cs->dup ? cs->user : cs->dup.comm;
        if (parent != MPI_COMM_NULL && MPI_Comm_idup(parent, &d->comm, &d->pending) == MPI_SUCCESS)
            cs->in_flight = d, nbc_rt.comms.duplicating++, nbc_rt.comms.duplicating_app += d == &cs->dup;
        else d->comm = MPI_COMM_NULL, d->pending = MPI_REQUEST_NULL; /* its requests fail (comm_request_ready) */
    }
}

/* Asks for d; it starts now if no other duplication is under way. */
static void ask(comm_state *cs, duplicate *d)
{
    *d = (duplicate){.comm = MPI_COMM_NULL, .pending = MPI_REQUEST_NULL, .turn = ++cs->turns_asked};
    if (!cs->in_flight) start_next(cs);
}

/* ---- the node map ----
 *
 * Every rank sends its node key (settings.c) to all the others once, by an allgather on `dup`
 * started as soon as `dup` is made, before any later duplication of it: so in the same order
 * on every rank as the collectives MPI runs on `dup` for those. Nothing waits for it but the
 * communicator's requests, each of which runs only once it is known (comm_request_ready). */
static void topology_known(comm_state *cs)
{
    cs->topo = TOPO_KNOWN;
    uint64_t *keys = cs->node_keys;
    cs->node_keys = NULL;
    if (!keys) { /* one rank, or the exchange could not be made: one node a rank, as without a map */
        cs->nodes = cs->size;
        return;
    }
    int64_t *of = malloc((size_t)cs->size * sizeof *of);
    uint64_t *seen = malloc((size_t)cs->size * sizeof *seen); /* each node's key, by number */
    int n = 0, largest = 0;
    for (int r = 0; of && seen && r < cs->size; r++) {
        int j = 0;
        while (j < n && seen[j] != keys[r]) j++;
        if (j == n) seen[n++] = keys[r];
        of[r] = j;
    }
    for (int j = 0; of && seen && j < n; j++) { /* the largest node's size */
        int k = 0;
        for (int r = 0; r < cs->size; r++) k += of[r] == j;
        if (k > largest) largest = k;
    }
    free(seen);
    free(keys);
    cs->nodes = of && n ? n : cs->size; /* out of memory: as without a map */
    if (of && n > 1 && largest > 1) {
        cs->node_of = of;
        /* the memo's programs were chosen without the map */
        memset(cs->last.progs, 0, sizeof cs->last.progs);
    } else {
        free(of);
    }
}

static void ask_topology(comm_state *cs)
{
    if (cs->size == 1 || cs->dup.comm == MPI_COMM_NULL || !(cs->node_keys = malloc((size_t)cs->size * sizeof *cs->node_keys))) {
        topology_known(cs);
        return;
    }
    cs->node_key = nbc_rt.env.node_key;
    if (MPI_Iallgather(&cs->node_key, 1, MPI_UINT64_T, cs->node_keys, 1, MPI_UINT64_T, cs->dup.comm, &cs->topo_req) != MPI_SUCCESS) {
        free(cs->node_keys);
        cs->node_keys = NULL;
        topology_known(cs);
        return;
    }
    cs->topo = TOPO_ASKED;
    nbc_rt.comms.learning++;
}

int comm_topology_settle(comm_state *cs, int wait)
{
    if (cs->topo != TOPO_ASKED) return cs->topo == TOPO_KNOWN;
    int done = 1;
    if (wait) MPI_Wait(&cs->topo_req, MPI_STATUS_IGNORE);
    else MPI_Test(&cs->topo_req, &done, MPI_STATUS_IGNORE);
    if (!done) return 0;
    nbc_rt.comms.learning--;
    topology_known(cs);
    return 1;
}

/* Tests (or waits for) the duplication under way; 1 once it is complete (the next one asked for
 * then starts). A duplication holds the application's communicator, so MPICH keeps it, and
 * runs our delete_state, only when the duplication completes: from inside this very call, if
 * the application freed it meanwhile. The request is taken out first and cs marked busy, so
 * that delete_state neither completes it a second time nor frees cs under us: it leaves that
 * to the caller. */
static int advance(comm_state *cs, int wait)
{
    duplicate *d = cs->in_flight;
    MPI_Request q = d->pending;
    int done = 1;
    d->pending = MPI_REQUEST_NULL;
    cs->busy++;
    if (wait) MPI_Wait(&q, MPI_STATUS_IGNORE);
    else MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    cs->busy--;
    if (!done) {
        d->pending = q;
        return 0;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    cs->in_flight = NULL;
    nbc_rt.comms.duplicating--;
    nbc_rt.comms.duplicating_app -= d == &cs->dup;
    if (d == &cs->dup) {
        ask_topology(cs); /* before the next duplication of `dup` starts: the same order everywhere */
        thread_wake(); /* the progress thread may enter MPI again (thread.c) */
    }
    start_next(cs);
    return 1;
}

/* Duplications are collective: every pass of progress advances this rank's, whether or not one
 * of its own requests waits for them (a peer's may), so that a rank busy elsewhere that calls
 * nbc_progress now and then does not hold them back. */
void comm_advance_duplicates(void)
{
    if (!nbc_rt.comms.duplicating && !nbc_rt.comms.learning) return;
    for (comm_state *cs = nbc_rt.comms.all; cs; cs = cs->next) {
        if (cs->in_flight && !cs->busy) advance(cs, 0);
        comm_topology_settle(cs, 0);
    }
}

/* 1 once d is complete (or was never asked for); wait: until it is. */
static int settle(comm_state *cs, duplicate *d, int wait)
{
    while (d->turn && cs->in_flight && (d->turn > cs->turns_started || d->pending != MPI_REQUEST_NULL))
        if (!advance(cs, wait)) return 0;
    return 1;
}

/* Every duplicate asked for, complete: the other ranks asked for them too, and complete them
 * as they make progress in MPI. */
static void settle_all(comm_state *cs)
{
    while (cs->in_flight) advance(cs, 1);
    comm_topology_settle(cs, 1);
}

static void destroy_state(comm_state *cs)
{
    unlink_state(cs);
    settle_all(cs);
    shm_comm_free(cs);
    while (cs->blocks) {
        any_block *b = cs->blocks;
        cs->blocks = b->next;
        if (b->dup.comm != MPI_COMM_NULL) MPI_Comm_free(&b->dup.comm);
        free(b);
    }
    if (cs->any.comm != MPI_COMM_NULL) MPI_Comm_free(&cs->any.comm);
    if (cs->dup.comm != MPI_COMM_NULL) MPI_Comm_free(&cs->dup.comm);
    free(cs->node_of);
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
     * (a crash in MPI_Test), so the duplication of the application's communicator is completed
     * now. It can only wait for ranks that have not yet made this communicator's first nbc
     * call, which they must make before they free it too. */
    settle(cs, &cs->dup, 1);
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
        settle_all(cs);
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
    cs->any = (duplicate){.comm = MPI_COMM_NULL, .pending = MPI_REQUEST_NULL};
    ask(cs, &cs->dup); /* the first: it starts now */
    if (cs->dup.comm == MPI_COMM_NULL) {
        free(cs);
        return nbc_fail(MPI_ERR_INTERN, "MPI_Comm_idup failed");
    }
    MPI_Comm_rank(comm, &cs->rank);
    MPI_Comm_size(comm, &cs->size);
    int *ub;
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &found);
    cs->tag_space = found ? (uint64_t)*ub + 1 : 32768; /* the standard guarantees 32767 */
    if (nbc_rt.env.tag_ub && nbc_rt.env.tag_ub + 1 < cs->tag_space) cs->tag_space = nbc_rt.env.tag_ub + 1;
    rc = MPI_Comm_set_attr(comm, nbc_rt.comms.keyval, cs);
    if (rc != MPI_SUCCESS) {
        settle_all(cs);
        MPI_Comm_free(&cs->dup.comm);
        free(cs);
        return nbc_fail(rc, "cannot attach state to the communicator");
    }
    cs->next = nbc_rt.comms.all;
    if (nbc_rt.comms.all) nbc_rt.comms.all->prev = cs;
    nbc_rt.comms.all = cs;
    *out = cs;
    return MPI_SUCCESS;
}

/* For the interposition library (interpose/blocked.c): 1 while the duplication of the
 * application's communicator (the first, made at nbc's first collective on it) is under way,
 * after one test of it. Open MPI's MPI_Comm_idup runs collectives of its own on the parent,
 * each started as the one before completes: one of Open MPI's own non-blocking collectives
 * started on that communicator meanwhile can then be matched, on another rank, against one of
 * them. 0 as well from inside one of nbc's calls (an operator calling MPI), which must not wait. */
int comm_dup_under_way(MPI_Comm comm)
{
    if (!nbc_rt.life.initialized || comm == MPI_COMM_NULL) return 0;
    int took = thread_enter_callback();
    if (!took) return 0;
    comm_state *cs = comm_state_find(comm);
    int under_way = cs && cs->user == comm && !settle(cs, &cs->dup, 0);
    thread_leave_callback(took);
    return under_way;
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
        if (b->live == 0 && cs->any_ids >= b->first + block_size(cs) && settle(cs, &b->dup, 0)) {
            *at = b->next;
            if (b->dup.comm != MPI_COMM_NULL) MPI_Comm_free(&b->dup.comm);
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
    if (id < w) { /* the first block: cs->any, asked for at the first any-order init */
        if (!cs->any.turn) ask(cs, &cs->any);
    } else if (cs->blocks && cs->blocks->first + w > id) { /* the newest block goes on */
        b = cs->blocks;
    } else if (!(b = calloc(1, sizeof *b))) {
        return nbc_fail(MPI_ERR_NO_MEM, "out of memory");
    } else {
        b->first = id - id % w;
        b->next = cs->blocks;
        cs->blocks = b;
        ask(cs, &b->dup);
    }
    if (b) b->live++;
    r->id = id;
    r->block = b;
    cs->any_ids++;
    reap_blocks(cs);
    return MPI_SUCCESS;
}

int comm_request_ready(struct nbc_req *r, MPI_Comm *comm)
{
    duplicate *d = !r->any_order ? &r->cs->dup : r->block ? &r->block->dup : &r->cs->any;
    if (!settle(r->cs, d, 0)) return 0;
    /* the map is exchanged on `dup`, made before any other duplicate (or failed: then so does r) */
    if (d->comm != MPI_COMM_NULL && !comm_topology_settle(r->cs, 0)) return 0;
    *comm = d->comm;
    return 1;
}

/* (A request that asks holds cs: if the application's communicator goes during the test, cs
 * stays until that request is released.) */
int comm_any_ready(comm_state *cs) { return cs->any.turn && settle(cs, &cs->any, 0); }
