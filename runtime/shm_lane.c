/* Any-order requests on shared memory (docs/total-reduce.md).
 *
 * Ordered calls share a communicator's channels in the calls' order (shm.c); an any-order
 * request has no such order, so each has a lane of its own in every rank's segment: the flags
 * it raises for each rank, a few words only its rank writes, and the stage of its shared
 * scratch. Its k-th start on one rank meets the k-th start on the others through the flags,
 * which count up from k << 20, whatever runs in between and in whatever order the requests
 * start.
 *
 * At its first start the ranks tell each other, by one message each on the request's own tag,
 * where their lanes are and where their buffers are (in their segment, or private memory the
 * kernel may reach). A persistent request's buffers never change, so that one agreement holds
 * for every start: all ranks choose alike, from the same messages, the program that reads the
 * peers' buffers where they are, the stage's, or the messages' program.
 *
 * Every later start needs no message:
 *  - a program with a stage waits until every rank has ended the start before (its `done`
 *    word): until then a peer may still read this rank's stage;
 *  - a program that reads the peers' buffers (PROG_AGREE) begins once every rank has entered
 *    this start (its `entered` word): until then a peer's application may still be writing
 *    its gradient;
 *  - a rank that leaves a start before it ended says so in its `left` word and waits until no
 *    peer is inside a round that touches its buffers (the withdrawal rule, as on the channels:
 *    docs/hardening.md); the request cannot run on shared memory again (later starts fail).
 * A freed request's lane goes back to the heap once every peer has ended its last start. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm_heap.h"

/* A lane: the flags raised for each rank (p words), the length word and one nothing reads
 * (interp.c's `ended`), then words only its rank writes, each group on a line of its own,
 * then the stage. */
enum { LANE_ENTERED, LANE_DONE, LANE_USING = 8, LANE_LEFT = 16, LANE_WHY, LANE_WORDS = 24 };
static size_t lane_header(int p) { return ((size_t)(p + 2) * sizeof(uint64_t) + 63) / 64 * 64; }
static uint64_t *lane_word(char *area, int p, int w) { return (uint64_t *)(void *)(area + lane_header(p)) + w; }
static size_t lane_stage_at(int p) { return lane_header(p) + LANE_WORDS * sizeof(uint64_t); }

/* `done` holds the request's mark (its identity) above the start: a lane whose memory went to
 * another use no longer shows the mark, and its rank had ended every start of it. */
#define DONE_SHIFT 40
static uint64_t done_word(uint64_t mark, uint64_t start) { return mark << DONE_SHIFT | start; }
static int ended_start(const uint64_t *done, uint64_t mark, uint64_t start)
{
    uint64_t w = __atomic_load_n(done, __ATOMIC_ACQUIRE);
    return w >> DONE_SHIFT != mark || (w & ((1ull << DONE_SHIFT) - 1)) >= start;
}

typedef struct {          /* what each rank tells the others at the first start */
    uint64_t lane;        /* its lane's offset in its segment; 0: it has none */
    uint64_t send, recv;  /* its buffers: offsets in its segment, or addresses in its process */
    uint64_t len;         /* the call's bytes */
    int32_t in_segment;   /* send and recv are offsets */
    int32_t pad;
} lane_hello;

enum { LANE_ASKING = 1, LANE_SHARED, LANE_MESSAGES };

struct shm_lane {
    int state;            /* LANE_* */
    int which;            /* the program every start runs: RUN_* */
    int agree;            /* it reads the peers' buffers: a start begins once every rank entered it */
    int stage;            /* it uses the stage: a start begins once every rank ended the one before */
    int dead;             /* a start was left before it ended: no later start may trust the flags */
    const char *why;      /* LANE_MESSAGES: why (NBC_TRACE=2) */
    uint64_t off, mark;   /* this rank's lane in its segment; the mark in the `done` words */
    uint64_t bytes;       /* a lane's size (the same on every rank: the same programs) */
    uint64_t start;       /* the current start's number, from 1 */
    uint64_t counted;     /* r->starts when `start` was counted */
    int nreqs;
    MPI_Request reqs[2 * NBC_SHM_MAX_RANKS];
    lane_hello mine, hellos[NBC_SHM_MAX_RANKS];
    char *area[NBC_SHM_MAX_RANKS]; /* every rank's lane, mapped here */
    shm_map *map[NBC_SHM_MAX_RANKS];
    interp_shared sh;
};

/* A freed request's lane, kept until every peer has ended its last start (they may still read
 * its flags and stage until then). */
typedef struct lane_retired {
    uint64_t off, mark, last;
    int p;
    const uint64_t *done[NBC_SHM_MAX_RANKS]; /* the peers' `done` words (NULL: none to wait for) */
    shm_map *map[NBC_SHM_MAX_RANKS];
    struct lane_retired *next;
} lane_retired;

void shm_sweep_lanes(void)
{
    for (lane_retired **at = &nbc_rt.shm.retired_lanes; *at;) {
        lane_retired *b = *at;
        int busy = 0;
        for (int q = 0; q < b->p && !busy; q++)
            busy = b->done[q] && !ended_start(b->done[q], b->mark, b->last) && !(b->map[q] && shm_process_exited(b->map[q]));
        if (busy) {
            at = &b->next;
            continue;
        }
        shm_heap_free(b->off);
        *at = b->next;
        free(b);
    }
}

static const nbc_program *program(const struct nbc_req *r, int which)
{
    return r->progs[which] ? cache_entry_program(r->progs[which]) : NULL;
}

/* Runs `which` from now on (this start): the messages' program, or a shared one in the lane. */
static int choose(struct nbc_req *r, struct shm_lane *l, int which, const char *why)
{
    int shared = which != RUN_MESSAGES;
    if (nbc_rt.env.trace > 1)
        fprintf(stderr, "nbc: trace: rank %d of %d: any-order request %llu start %llu runs %s%s\n", r->cs->rank, r->cs->size,
                (unsigned long long)r->id, (unsigned long long)r->starts, shared ? "through shared memory" : "with messages: ", why);
    shm_run(r, which, shared ? &l->sh : NULL);
    return 1;
}

static int fail(struct nbc_req *r, int err, const char *what)
{
    req_fail(r, err, "any-order request %llu (start %llu) on shared memory: %s", (unsigned long long)r->id,
             (unsigned long long)r->starts, what);
    return -err;
}

/* The first start: this rank makes its lane and tells every peer where it and its buffers are. */
static int ask(struct nbc_req *r, struct shm_lane *l, const shm_view *v)
{
    int p = r->cs->size, me = r->cs->rank;
    uint64_t len = (uint64_t)r->sig.count * (uint64_t)r->sig.esize;
    const nbc_program *a = program(r, RUN_SHARED), *b = program(r, RUN_DIRECT);
    uint64_t stage = b && b->shared_bytes > a->shared_bytes ? b->shared_bytes : a->shared_bytes;
    char *send = r->st.base[SLOT_SEND], *recv = r->st.base[SLOT_RECV];
    int64_t send_off = shm_segment_offset(send, len), recv_off = shm_segment_offset(recv, len);
    shm_sweep_lanes();
    l->bytes = lane_stage_at(p) + stage;
    l->off = v->taking_part ? shm_heap_alloc(l->bytes) : 0;
    l->mark = (r->id + 1) & ((1ull << (64 - DONE_SHIFT)) - 1);
    if (l->off) {
        char *area = nbc_rt.shm.base + l->off;
        memset(area, 0, lane_stage_at(p));
        *lane_word(area, p, LANE_DONE) = done_word(l->mark, 0);
    }
    int in_segment = send_off >= 0 && recv_off >= 0;
    l->mine = (lane_hello){l->off, in_segment ? (uint64_t)send_off : (uint64_t)(uintptr_t)send,
                           in_segment ? (uint64_t)recv_off : (uint64_t)(uintptr_t)recv, len, in_segment, 0};
    l->hellos[me] = l->mine;
    l->state = LANE_ASKING;
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        int rc = MPI_Irecv(&l->hellos[q], sizeof(lane_hello), MPI_BYTE, q, r->st.tag, r->st.comm, &l->reqs[l->nreqs++]);
        if (rc == MPI_SUCCESS) rc = MPI_Isend(&l->mine, sizeof(lane_hello), MPI_BYTE, q, r->st.tag, r->st.comm, &l->reqs[l->nreqs++]);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* Every rank's hello is here: all choose alike. Returns 1, or < 0 (r failed). */
static int decide(struct nbc_req *r, struct shm_lane *l, const shm_view *v)
{
    int p = r->cs->size, me = r->cs->rank, lanes = 1, in_segment = 1;
    uint64_t len = l->mine.len;
    for (int q = 0; q < p; q++) {
        const lane_hello *h = &l->hellos[q];
        if (h->len != len) {
            char what[160];
            snprintf(what, sizeof what, "rank %d made it with %llu bytes, this rank with %llu", q, (unsigned long long)h->len,
                     (unsigned long long)len);
            return fail(r, MPI_ERR_COUNT, what);
        }
        lanes &= h->lane != 0;
        in_segment &= h->in_segment;
        if (q != me && (h->lane + l->bytes > v->bytes[q] || (h->in_segment && (len > v->bytes[q] || h->send > v->bytes[q] - len ||
                                                                                          h->recv > v->bytes[q] - len))))
            return fail(r, MPI_ERR_INTERN, "a rank published a lane or buffers outside its segment");
    }
    const nbc_program *shared = program(r, RUN_SHARED);
    int by_kernel = 0;
    l->state = LANE_MESSAGES;
    if (!lanes || len == 0)
        l->why = len == 0 ? "it has no elements" : "a rank has failed on shared memory before, or its segment is full";
    else if (in_segment && r->progs[RUN_DIRECT])
        l->which = RUN_DIRECT, l->state = LANE_SHARED;
    else if (in_segment || !(shared->flags & PROG_AGREE))
        l->which = RUN_SHARED, l->state = LANE_SHARED;
    else if (v->by_kernel && (uint64_t)r->sig.esize <= SHM_KERNEL_PIECE)
        l->which = RUN_SHARED, l->state = LANE_SHARED, by_kernel = 1;
    else
        l->why = "a rank's buffers are not from nbc_alloc_mem, and the kernel cannot reach them";
    if (l->state != LANE_SHARED) return 1;
    const nbc_program *prog = program(r, l->which);
    l->agree = !!(prog->flags & PROG_AGREE);
    l->stage = prog->shared_bytes > 0;
    interp_shared *sh = &l->sh;
    for (int q = 0; q < p; q++) {
        const lane_hello *h = &l->hellos[q];
        char *area = l->area[q] = v->seg[q] + h->lane;
        l->map[q] = v->map[q];
        sh->peer_base[q][SLOT_SHARED] = area + lane_stage_at(p);
        sh->peer_base[q][SLOT_SEND] = !l->agree ? NULL : h->in_segment ? v->seg[q] + h->send : (char *)(uintptr_t)h->send;
        sh->peer_base[q][SLOT_RECV] = !l->agree ? NULL : h->in_segment ? v->seg[q] + h->recv : (char *)(uintptr_t)h->recv;
        if (l->agree && !h->in_segment && q != me) sh->by_kernel |= 1ull << q;
        sh->pid[q] = v->pid[q];
    }
    for (int q = 0; q < p; q++) { /* (every area is known now) */
        sh->raise[q] = (uint64_t *)(void *)l->area[me] + q;
        sh->seen[q] = (uint64_t *)(void *)l->area[q] + me;
        sh->left[q] = q == me ? NULL : lane_word(l->area[q], p, LANE_LEFT);
        sh->peer_bytes[q] = (uint64_t *)(void *)l->area[q] + p;
    }
    sh->peer_base[me][SLOT_SEND] = r->st.base[SLOT_SEND];
    sh->peer_base[me][SLOT_RECV] = r->st.base[SLOT_RECV];
    sh->bounce = nbc_rt.shm.bounce;
    sh->piece = by_kernel ? SHM_KERNEL_PIECE / (uint64_t)r->sig.esize * (uint64_t)r->sig.esize : 0;
    sh->bytes_word = (uint64_t *)(void *)l->area[me] + p;
    sh->using = lane_word(l->area[me], p, LANE_USING);
    sh->guard = l->agree ? p : 0;
    sh->bytes = len;
    if (by_kernel) nbc_rt.shm.kernel_calls++;
    return 1;
}

/* Fails r because rank q left this start, naming q and q's reason. */
static int fail_left(struct nbc_req *r, struct shm_lane *l, int q)
{
    int p = r->cs->size;
    char why[MPI_MAX_ERROR_STRING + 96], what[MPI_MAX_ERROR_STRING + 160];
    shm_left_text(__atomic_load_n(lane_word(l->area[q], p, LANE_WHY), __ATOMIC_RELAXED), why, sizeof why);
    snprintf(what, sizeof what, "rank %d left this start before it ended: %s", q, why);
    r->shm_culprit = q;
    return fail(r, MPI_ERR_OTHER, what);
}

/* Whether rank q left this start already: then r fails, naming it. */
static int left_already(struct nbc_req *r, struct shm_lane *l, int q)
{
    if (__atomic_load_n(lane_word(l->area[q], r->cs->size, LANE_LEFT), __ATOMIC_ACQUIRE) != l->start) return 0;
    return fail_left(r, l, q);
}

void shm_lane_explain(struct nbc_req *r)
{
    if (r->lane && r->st.shared && r->st.shared->left_peer >= 0) fail_left(r, r->lane, r->st.shared->left_peer);
}

/* A start in the lane: 0 while a peer is still inside the start before (the stage) or has not
 * entered this one (the peers' buffers), 1 once it runs. */
static int begin(struct nbc_req *r, struct shm_lane *l)
{
    int p = r->cs->size, me = r->cs->rank;
    if (l->dead) return fail(r, MPI_ERR_OTHER, "an earlier start of it was left before it ended, so its flags cannot be trusted");
    if (l->sh.by_kernel && shm_comm_peer_exited(r->cs)) return fail(r, MPI_ERR_OTHER, "a peer's process has exited");
    for (int q = 0; q < p && l->stage; q++)
        if (q != me && !ended_start(lane_word(l->area[q], p, LANE_DONE), l->mark, l->start - 1)) return 0;
    if (l->agree && !r->shm_published) {
        __atomic_store_n(lane_word(l->area[me], p, LANE_ENTERED), l->start, __ATOMIC_RELEASE);
        r->shm_published = 1;
    }
    int all = 1, rc;
    for (int q = 0; q < p && l->agree; q++) { /* (a peer that left fails the start at once) */
        if (q == me) continue;
        if ((rc = left_already(r, l, q)) < 0) return rc;
        all &= __atomic_load_n(lane_word(l->area[q], p, LANE_ENTERED), __ATOMIC_ACQUIRE) >= l->start;
    }
    if (!all) return 0;
    interp_shared *sh = &l->sh;
    sh->stamp = l->start << 20; /* above every flag of the starts before */
    memset(sh->raised, 0, sizeof sh->raised);
    memset(sh->awaited, 0, sizeof sh->awaited);
    sh->nwaiting = 0;
    sh->left_peer = sh->other_bytes_peer = -1;
    sh->ended = (uint64_t *)(void *)l->area[me] + p + 1;
    sh->ended_value = 0;
    return choose(r, l, l->which, l->sh.by_kernel ? ", the private buffers through the kernel" : "");
}

int shm_lane_agree(struct nbc_req *r)
{
    if (r->shm_chosen) return 1;
    struct shm_lane *l = r->lane;
    if (l && l->state == LANE_MESSAGES) return choose(r, l, RUN_MESSAGES, l->why);
    if (l && l->dead) return fail(r, MPI_ERR_OTHER, "an earlier start of it failed before the ranks agreed on its memory");
    if (l && l->counted != r->starts) {
        l->counted = r->starts;
        l->start++;
    }
    if (l && l->state == LANE_SHARED) return begin(r, l);
    shm_view v;
    const char *why_not = NULL;
    int rc = shm_comm_view(r->cs, &v, &why_not);
    if (rc < 0) return fail(r, -rc, "attaching the communicator's shared memory failed");
    if (rc == 0) return 0;
    if (!l) {
        if (!(l = r->lane = calloc(1, sizeof *l))) return fail(r, MPI_ERR_NO_MEM, "out of memory");
        l->counted = r->starts;
        l->start = 1;
        if (why_not) { /* the same on every rank: no message needed */
            l->state = LANE_MESSAGES;
            l->why = why_not;
            return choose(r, l, RUN_MESSAGES, why_not);
        }
        if ((rc = ask(r, l, &v)) != MPI_SUCCESS) return fail(r, rc, "its first message to the peers failed");
    }
    int done = 0;
    MPI_Status statuses[2 * NBC_SHM_MAX_RANKS];
    if ((rc = MPI_Testall(l->nreqs, l->reqs, &done, statuses)) != MPI_SUCCESS) return fail(r, rc, "its first messages failed");
    if (!done) return 0;
    l->nreqs = 0;
    if ((rc = decide(r, l, &v)) < 0) return rc;
    return l->state == LANE_SHARED ? begin(r, l) : choose(r, l, RUN_MESSAGES, l->why);
}

void shm_lane_end(struct nbc_req *r)
{
    struct shm_lane *l = r->lane;
    if (!l) return;
    if (l->counted != r->starts) { /* this start ended before it reached the lane: it is left all the same */
        if (l->state != LANE_SHARED || l->dead) return;
        l->counted = r->starts;
        l->start++;
    }
    if (l->state == LANE_ASKING) {
        l->dead = 1; /* the peers may run what the messages choose: this rank cannot follow */
        return;
    }
    if (l->state != LANE_SHARED || l->dead) return;
    int p = r->cs->size, me = r->cs->rank;
    char *mine = l->area[me];
    if (r->st.err != MPI_SUCCESS || !r->st.shared || r->st.round < r->st.prog->nrounds) {
        __atomic_store_n(lane_word(mine, p, LANE_WHY), shm_why_leaving(r), __ATOMIC_RELAXED);
        __atomic_store_n(lane_word(mine, p, LANE_LEFT), l->start, __ATOMIC_SEQ_CST);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        for (int q = 0; q < p && l->agree && r->shm_published; q++) /* interp.c's guard: bounded copying */
            while (q != me && __atomic_load_n(lane_word(l->area[q], p, LANE_USING), __ATOMIC_ACQUIRE) == l->start &&
                   !(l->map[q] && shm_process_exited(l->map[q])))
                sched_yield();
        l->dead = 1;
    }
    __atomic_store_n(lane_word(mine, p, LANE_DONE), done_word(l->mark, l->start), __ATOMIC_RELEASE);
    r->st.shared = NULL;
}

void shm_lane_release(struct nbc_req *r)
{
    struct shm_lane *l = r->lane;
    if (!l) return;
    r->lane = NULL;
    for (int i = 0; i < l->nreqs; i++) /* a first start the peers never answered */
        if (l->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&l->reqs[i]);
            MPI_Request_free(&l->reqs[i]);
        }
    lane_retired *b = NULL;
    if (l->off && l->state == LANE_MESSAGES) { /* no peer ever read it */
        shm_heap_free(l->off);
    } else if (l->off && (b = calloc(1, sizeof *b))) { /* (out of memory: the lane stays the peers') */
        int p = r->cs->size, me = r->cs->rank;
        *b = (lane_retired){.off = l->off, .mark = l->mark, .last = l->start, .p = p, .next = nbc_rt.shm.retired_lanes};
        for (int q = 0; q < p && l->state == LANE_SHARED; q++) {
            b->done[q] = q == me ? NULL : lane_word(l->area[q], p, LANE_DONE);
            b->map[q] = l->map[q];
        }
        nbc_rt.shm.retired_lanes = b;
        shm_sweep_lanes();
    }
    free(l);
}
