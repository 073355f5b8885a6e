/* Requests: a pool of released requests keeps its scratch and MPI request arrays, so that in
 * steady state starting a collective allocates nothing; a one-shot request that ran its
 * communicator's last programs stays on the communicator instead (the spare, below), for the
 * next call like it. Started requests sit in the active list, highest priority first, until
 * they complete; nbc_progress walks that list. Every request the application holds is also in
 * the live list, so that finalize can find them.
 *
 * Priorities. A request may issue its next round only while no request of higher priority
 * has moved (issued or finished a round) within the last NBC_PREEMPT_US microseconds. So a
 * lower-priority request stops taking the network while a higher one is moving, and resumes
 * as soon as every higher one is finished or stuck waiting for its peers. The rule is
 * work-conserving up to that window: a request is held back only by another that is getting
 * somewhere, never by one that waits, so priorities cannot add a cycle of waiting ranks to a
 * program that completes without them (docs/total-reduce.md). With equal priorities
 * (the default) no clock is read. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "state.h"

#define POOL_MAX 64


static void push(struct nbc_req **list, struct nbc_req *r)
{
    r->prev = NULL;
    r->next = *list;
    if (*list) (*list)->prev = r;
    *list = r;
}

static void unlink_from(struct nbc_req **list, struct nbc_req *r)
{
    if (r->prev) r->prev->next = r->next;
    else *list = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void unlink_active(struct nbc_req *r)
{
    if (r == nbc_rt.reqs.active_tail) nbc_rt.reqs.active_tail = r->prev;
    unlink_from(&nbc_rt.reqs.active, r);
    nbc_rt.reqs.nactive--;
}

/* After every request of higher or equal priority: FIFO among equals. Most starts are either
 * of the lowest priority present (appended) or of the highest (found at once from the head). */
static void insert_active(struct nbc_req *r)
{
    nbc_rt.reqs.nactive++;
    if (!nbc_rt.reqs.active_tail || nbc_rt.reqs.active_tail->priority >= r->priority) {
        r->next = NULL;
        r->prev = nbc_rt.reqs.active_tail;
        if (nbc_rt.reqs.active_tail) nbc_rt.reqs.active_tail->next = r;
        else nbc_rt.reqs.active = r;
        nbc_rt.reqs.active_tail = r;
        return;
    }
    struct nbc_req *at = nbc_rt.reqs.active;
    while (at->priority >= r->priority) at = at->next; /* stops before the tail: see above */
    r->next = at;
    r->prev = at->prev;
    if (at->prev) at->prev->next = r;
    else nbc_rt.reqs.active = r;
    at->prev = r;
}

static void live_add(struct nbc_req *r)
{
    r->live_prev = NULL;
    r->live_next = nbc_rt.reqs.live;
    if (nbc_rt.reqs.live) nbc_rt.reqs.live->live_prev = r;
    nbc_rt.reqs.live = r;
}

static void live_remove(struct nbc_req *r)
{
    if (r->live_prev) r->live_prev->live_next = r->live_next;
    else nbc_rt.reqs.live = r->live_next;
    if (r->live_next) r->live_next->live_prev = r->live_prev;
    r->live_prev = r->live_next = NULL;
}

static void destroy(struct nbc_req *r)
{
    free(r->scratch);
    free(r->reqs);
    free(r->statuses);
    free(r);
}

int req_fit(struct nbc_req *r, size_t scratch, int nreqs)
{
    if (scratch > r->scratch_cap) {
        char *s = realloc(r->scratch, scratch);
        if (!s) return MPI_ERR_NO_MEM;
        r->scratch = s;
        r->scratch_cap = scratch;
    }
    if (nreqs > r->reqs_cap) {
        MPI_Request *q = realloc(r->reqs, (size_t)nreqs * sizeof *q);
        if (q) r->reqs = q;
        MPI_Status *s = q ? realloc(r->statuses, (size_t)nreqs * sizeof *s) : NULL;
        if (!s) return MPI_ERR_NO_MEM;
        r->statuses = s;
        r->reqs_cap = nreqs;
    }
    r->st.base[SLOT_SCRATCH] = r->scratch;
    r->st.reqs = r->reqs;
    r->st.statuses = r->statuses;
    return MPI_SUCCESS;
}

struct nbc_req *req_get(size_t scratch, int nreqs)
{
    struct nbc_req *r = nbc_rt.reqs.pool;
    if (r) {
        unlink_from(&nbc_rt.reqs.pool, r);
        nbc_rt.reqs.pooled--;
    } else if (!(r = calloc(1, sizeof *r))) {
        return NULL;
    }
    if (req_fit(r, scratch, nreqs) != MPI_SUCCESS) goto oom;
    r->state = REQ_INACTIVE;
    memset(r->progs, 0, sizeof r->progs);
    r->cs = NULL;
    r->persistent = r->any_order = r->orphan = 0;
    r->priority = r->next_priority = 0;
    r->starts = 0;
    r->stall_since_ns = 0; /* (starts begins again: a position of its last life must not count) */
    r->timeout_mark = 0, r->timeout_since_ns = 0;
    r->name[0] = r->error[0] = '\0';
    r->check = NULL;
    r->block = NULL;
    r->id = 0;
    r->shm_chan = -1;
    r->shm_in_call = 0;
    r->lane = NULL;
    r->pieces = 0;
    live_add(r);
    return r;
oom:
    destroy(r);
    return NULL;
}

static void release_programs(struct nbc_req *r) { cache_release_each(nbc_rt.sel.programs, r->progs, RUN_CHOICES); }

/* What a request lets go once the application is done with it, whether it goes back to the
 * pool or stays as its communicator's spare (which is not in the live list). */
static void let_go(struct nbc_req *r)
{
    if (r->state == REQ_ACTIVE) unlink_active(r);
    if (r->live_prev || nbc_rt.reqs.live == r) live_remove(r);
    check_free(r);
    stall_forget(r);
    shm_end(r);
}

static void release_now(struct nbc_req *r)
{
    let_go(r);
    shm_lane_release(r);
    release_programs(r);
    if (r->cs && r->any_order) comm_remove_any(r->cs, r);
    if (r->cs) comm_drop(r->cs);
    r->cs = NULL;
    if (nbc_rt.reqs.pooled >= POOL_MAX) {
        destroy(r);
        return;
    }
    push(&nbc_rt.reqs.pool, r);
    nbc_rt.reqs.pooled++;
}

/* The spare. A one-shot request that ran its communicator's last programs (calls.c's memo)
 * and succeeded is kept on the communicator, still holding those programs and the
 * communicator, with its duplicate set: a call like the last one takes it back and only sets
 * its buffers (req_unpark), instead of a request from the pool, references taken and let go
 * again, and the interpreter's state built anew. One per communicator; the application does
 * not hold it, so it is not in the live list. */
static int parkable(const struct nbc_req *r)
{
    return !r->persistent && !r->any_order && r->state == REQ_DONE && r->st.err == MPI_SUCCESS &&
           r->cs && r->cs->user != MPI_COMM_NULL && r->st.comm != MPI_COMM_NULL &&
           !memcmp(r->progs, r->cs->last.progs, sizeof r->progs);
}

void req_release(struct nbc_req *r)
{
    if (r->orphan) {
        destroy(r);
        return;
    }
    if (!parkable(r)) {
        release_now(r);
        return;
    }
    let_go(r);
    r->state = REQ_INACTIVE;
    req_drop_spare(r->cs);
    r->cs->last.spare = r;
}

struct nbc_req *req_unpark(comm_state *cs)
{
    struct nbc_req *r = cs->last.spare;
    cs->last.spare = NULL;
    live_add(r);
    return r;
}

/* Its programs were in use until now: they become the cache's most recent. */
void req_drop_spare(comm_state *cs)
{
    struct nbc_req *r = cs->last.spare;
    if (!r) return;
    cs->last.spare = NULL;
    cache_touch_each(nbc_rt.sel.programs, r->progs, RUN_CHOICES);
    release_now(r);
}

void req_fail(struct nbc_req *r, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->st.err = err;
}

/* Its failure in words, kept in the request for nbc_request_error: the message given when it
 * failed, else MPI's for its error code; "" when it has not failed. */
const char *req_error(struct nbc_req *r)
{
    if (r->st.err == MPI_SUCCESS) return "";
    if (!r->error[0]) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(r->st.err, text, &len);
        snprintf(r->error, sizeof r->error, "an MPI call of the collective failed: %.200s", text);
    }
    return r->error;
}

/* Every way a start ends, well or not, goes through here: a failure is described, and shared
 * memory is left (withdrawn from, when the program did not run to its end) before the
 * application can get its buffers back. */
static int ended(struct nbc_req *r)
{
    if (r->st.err != MPI_SUCCESS) {
        if (r->st.shared) shm_explain(r);
        failure_describe(r);
    }
    shm_end(r);
    nbc_rt.reqs.last_ran = r->st.prog;
    return INTERP_DONE;
}

/* A request runs once its communicator's private duplicate exists, (NBC_CHECK) once the
 * ranks agreed that they run the same collective, and (shared memory) once they agreed on
 * which of its programs they run. */
static int step(struct nbc_req *r, int may_issue)
{
    int rc;
    if (r->st.err != MPI_SUCCESS && r->st.comm == MPI_COMM_NULL) return ended(r); /* timed out in setup */
    if (r->st.comm == MPI_COMM_NULL) {
        MPI_Comm c;
        if (!comm_request_ready(r, &c)) return INTERP_WAITING;
        if (c == MPI_COMM_NULL) {
            req_fail(r, MPI_ERR_INTERN, "MPI_Comm_idup failed: the communicator's private duplicate could not be made");
            return ended(r);
        }
        r->st.comm = c;
        if (r->topo_stale && (rc = call_reselect(r)) != MPI_SUCCESS) {
            req_fail(r, rc, "%s", error_text());
            return ended(r);
        }
    }
    if (r->check) {
        if (!check_step(r)) return INTERP_WAITING;
        check_free(r);
        if (r->st.err != MPI_SUCCESS) return ended(r);
    }
    if (r->progs[RUN_SHARED] && !r->shm_chosen) {
        if (r->st.err != MPI_SUCCESS) return ended(r); /* timed out while agreeing */
        rc = r->any_order ? shm_lane_agree(r) : shm_agree(r);
        if (rc < 0) return ended(r);
        if (rc == 0) return INTERP_WAITING;
    }
    int s = interp_step(&r->st, may_issue);
    return s == INTERP_DONE ? ended(r) : s;
}

long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

void req_start(struct nbc_req *r)
{
    r->state = REQ_ACTIVE;
    r->starts++; /* a new position for stall reports (stall.c) */
    r->last_moved_ns = nbc_rt.reqs.active && nbc_rt.reqs.active->priority != r->priority ? now_ns() : 0;
    insert_active(r);
    int s = step(r, !nbc_rt.reqs.active || r == nbc_rt.reqs.active || nbc_rt.reqs.active->priority == r->priority);
    if (s == INTERP_DONE) {
        unlink_active(r);
        r->state = REQ_DONE;
        return;
    }
    thread_wake();
}

/* A request with a buffer that starts in [lo, lo + bytes), or NULL: an active one (peers may
 * still read or write such memory, through the segment or the kernel, until it ends here) or a
 * persistent one (its buffers are bound to it until it is freed: its next start would use the
 * memory). */
struct nbc_req *req_using(const void *lo, size_t bytes)
{
    uintptr_t a = (uintptr_t)lo;
    for (struct nbc_req *r = nbc_rt.reqs.live; r; r = r->live_next)
        for (int s = 0; s < NBC_MAX_SLOTS && (r->state == REQ_ACTIVE || r->persistent); s++)
            if (s != SLOT_SCRATCH && s != SLOT_SHARED && r->st.base[s] && (uintptr_t)r->st.base[s] - a < bytes) return r;
    return NULL;
}

void req_describe(const struct nbc_req *r, char *out, size_t size)
{
    int named = r->name[0] != '\0';
    snprintf(out, size, "%s%s%s request%s%s%s of %lld elements", r->persistent ? "persistent " : "",
             r->any_order ? "any-order " : "", collective_names[r->sig.coll], named ? " '" : "", r->name,
             named ? "'" : "", (long long)r->sig.count);
}

int req_active_count(void) { return nbc_rt.reqs.nactive; }
struct nbc_req *req_first_active(void) { return nbc_rt.reqs.active; }

int req_progress_all(int *moved)
{
    int completed = 0;
    *moved = 0;
    comm_advance_duplicates();
    /* Priorities only matter when the list mixes them (it is sorted: compare its ends). */
    int mixed = nbc_rt.reqs.active && nbc_rt.reqs.active->priority != nbc_rt.reqs.active_tail->priority;
    long now = mixed ? now_ns() : 0;
    int moving_above = 0, moving_priority = 0; /* the highest priority seen moving */
    int pieced = 0; /* a piece of shared-memory work ran in this pass: with priorities mixed,
                       one a pass, so that the highest goes first and a request started
                       meanwhile waits for one piece at most; with one priority, one of each */
    for (struct nbc_req *r = nbc_rt.reqs.active, *next; r; r = next) {
        next = r->next;
        int may_issue = !(moving_above && moving_priority > r->priority) && !(mixed && pieced && r->st.one_round);
        int s = step(r, may_issue);
        pieced |= r->st.one_round && s == INTERP_MOVED;
        if (s != INTERP_WAITING) {
            *moved = 1;
            r->last_moved_ns = now;
        }
        if (s == INTERP_DONE) {
            unlink_active(r);
            r->state = REQ_DONE;
            completed++;
        } else if (mixed && !moving_above && now - r->last_moved_ns < nbc_rt.env.preempt_ns) {
            moving_above = 1;
            moving_priority = r->priority;
        }
    }
    if (!*moved) timeout_poll(nbc_rt.reqs.active);
    return completed;
}

/* Requests the application still holds become orphans: what they computed stays readable
 * (nbc_test reports it and frees them), but they can never run again. Active ones (only at
 * MPI_Finalize, which the application reached without completing them) fail. */
void req_finalize(void)
{
    for (comm_state *cs = comm_first(); cs; cs = cs->next) req_drop_spare(cs);
    while (nbc_rt.reqs.pool) {
        struct nbc_req *r = nbc_rt.reqs.pool;
        unlink_from(&nbc_rt.reqs.pool, r);
        destroy(r);
    }
    nbc_rt.reqs.pooled = 0;
    for (struct nbc_req *r = nbc_rt.reqs.live, *next; r; r = next) {
        next = r->live_next;
        r->live_prev = r->live_next = NULL;
        r->orphan = 1;
        if (r->state == REQ_ACTIVE) {
            r->state = REQ_DONE;
            req_fail(r, MPI_ERR_PENDING, "the request was still active at MPI_Finalize");
        }
        check_free(r);
        stall_forget(r);
        shm_end(r);
        shm_lane_release(r);
        release_programs(r);
        if (r->cs && r->any_order) comm_remove_any(r->cs, r);
        if (r->cs) comm_drop(r->cs);
        r->cs = NULL;
        r->st.prog = NULL;
    }
    nbc_rt.reqs.active = nbc_rt.reqs.active_tail = NULL;
    nbc_rt.reqs.nactive = 0;
    nbc_rt.reqs.live = NULL; /* they are freed one by one as the application reports or frees them */
}
