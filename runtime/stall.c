/* Stall reports: no request waits silently. When an active request (ordered one-shot, persistent
 * or any-order; messages or shared memory) has not moved for NBC_STALL_WARNING seconds (default
 * 60; 0 turns reports off), this rank prints where it waits, and again each time the wait
 * doubles (2, 4, 8 ... times the warning):
 *
 *   nbc: stall: allreduce (schedule 'allreduce_shm_small') on rank 0, round 0 of 2, call #2 of
 *   its communicator, has not moved for 1.0 s: waits on WAIT for the flag of rank 1 (pc 2) at
 *   line 33:46; rank 1's line: last ended call #1, no flag for rank 0 on channel 2 yet
 *
 * It names the collective, schedule, call, round, the instructions of the round that have not
 * finished and their peers, or the phase before the program (the communicator's duplication,
 * the NBC_CHECK agreement, the agreement on shared memory); on a communicator that shares
 * memory, what each such peer last did, read from its line (shm_describe_peer), without a
 * message.
 *
 * An any-order request also asks the other ranks which have started it (stall_ask.c).
 *
 * It costs nothing on the fast path: the clock is read here only, from progress passes that
 * moved nothing, at most every STALL_POLL_NS; a request's position (start, phase, round) is
 * compared with the one seen then, as timeout.c does. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "state.h"

#define STALL_POLL_NS 100000000L  /* 0.1 s */

/* Appends to out, which holds *n bytes so far (never past size). */
static void put(char *out, size_t size, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t size, size_t *n, const char *fmt, ...)
{
    if (*n >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + *n, size - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n = *n + (size_t)k < size ? *n + (size_t)k : size;
}

/* The instruction as failures name it, and where it is in its schedule. */
static void put_insn(char *out, size_t size, size_t *n, const nbc_program *p, int pc, int first)
{
    char what[120];
    failure_insn(p, pc, what, sizeof what);
    put(out, size, n, "%s%s", first ? "" : ", ", what);
    if (pc >= 0) put(out, size, n, " at line %u:%u", prog_locs(p)[pc].line, prog_locs(p)[pc].col);
}

/* The round's last WAIT on peer: the flag the round waits for. */
static int wait_pc(const nbc_program *p, uint32_t round, int peer)
{
    int pc = -1;
    for (uint32_t i = prog_rounds(p)[round]; i < prog_rounds(p)[round + 1]; i++)
        if (prog_insns(p)[i].op == OP_WAIT && prog_insns(p)[i].peer == peer) pc = (int)i;
    return pc;
}

/* Where r stands: its start, the phase before its program, its round. */
static uint64_t position(const struct nbc_req *r)
{
    const interp_state *st = &r->st;
    return r->starts << 40 ^ (uint64_t)st->round << 5 ^ (uint64_t)st->posted << 4 ^ (uint64_t)(st->comm != MPI_COMM_NULL) << 3 ^
           (uint64_t)(r->check != NULL) << 2 ^ (uint64_t)r->shm_published << 1 ^ (uint64_t)r->shm_chosen;
}

/* What r waits for, in words; *peers gets bit q for each rank q it waits on (q < 64). */
static void waits_for(struct nbc_req *r, char *out, size_t size, uint64_t *peers)
{
    interp_state *st = &r->st;
    size_t n = 0;
    int p = r->cs->size, me = r->cs->rank;
    uint64_t others = (p >= 64 ? ~0ull : (1ull << p) - 1) & ~(me < 64 ? 1ull << me : 0);
    if (st->comm == MPI_COMM_NULL) {
        put(out, size, &n, "waits for the duplication of its communicator (MPI_Comm_idup, with every rank's first %s on it): "
            "some rank has not made that call", r->any_order ? "any-order request" : "collective");
        return;
    }
    if (r->check) {
        put(out, size, &n, "waits in the NBC_CHECK agreement on the call's signature: some rank has not started this call");
        *peers = others;
        return;
    }
    if (r->progs[RUN_SHARED] && !r->shm_chosen && r->any_order) {
        put(out, size, &n, "waits in its lane on shared memory: a rank has not started this start yet, or has not ended the "
            "one before, or (the first start) has not told where its lane and buffers are");
        *peers = others;
        return;
    }
    if (r->progs[RUN_SHARED] && !r->shm_chosen) {
        put(out, size, &n, "waits to agree on shared memory for this call (channel %d): a rank has not reached it, or an "
            "earlier call on the channel has not ended everywhere", (int)(r->seq % SHM_CHANNELS));
        *peers = others;
        return;
    }
    if (st->round >= st->prog->nrounds) {
        put(out, size, &n, "has finished its rounds (not yet seen by a test or wait)");
        return;
    }
    if (!st->posted) {
        put(out, size, &n, "has not issued this round: requests of higher priority are moving");
        return;
    }
    put(out, size, &n, "waits on ");
    int first = 1;
    for (int i = 0; i < st->nreqs; i++) {
        int done = 0, pc = interp_comm_pc(st->prog, st->round, i);
        if (st->reqs[i] == MPI_REQUEST_NULL || pc < 0) continue;
        MPI_Request_get_status(st->reqs[i], &done, MPI_STATUS_IGNORE);
        if (done) continue;
        put_insn(out, size, &n, st->prog, pc, first);
        first = 0;
        int q = prog_insns(st->prog)[pc].peer;
        if (q >= 0 && q < 64) *peers |= 1ull << q;
    }
    for (int i = 0; st->shared && i < st->shared->nwaiting; i++) {
        int q = st->shared->waiting[i];
        put_insn(out, size, &n, st->prog, wait_pc(st->prog, st->round, q), first);
        first = 0;
        if (q >= 0 && q < 64) *peers |= 1ull << q;
    }
    if (first) put(out, size, &n, "nothing left in this round (it moves at the next pass)");
}

static void report(struct nbc_req *r, long waited)
{
    char at[200], call[80], what[1024] = "", state[1536] = "";
    uint64_t peers = 0;
    size_t n = 0;
    failure_where(r, r->st.round, at, sizeof at);
    if (r->any_order)
        snprintf(call, sizeof call, "any-order request id %llu at start %llu", (unsigned long long)r->id, (unsigned long long)r->starts);
    else
        snprintf(call, sizeof call, "call #%llu of its communicator", (unsigned long long)r->seq);
    waits_for(r, what, sizeof what, &peers);
    for (int q = 0; q < r->cs->size && q < 64; q++) {
        char one[400];
        if (peers >> q & 1 && shm_describe_peer(r, q, one, sizeof one) > 0) put(state, sizeof state, &n, "; %s", one);
    }
    fprintf(stderr, "nbc: stall: %s, %s, has not moved for %.1f s: %s%s\n", at, call, (double)waited * 1e-9, what, state);
}

/* Each active request: a new position starts its clock; a stall is reported when it has lasted
 * NBC_STALL_WARNING, then each time it has doubled. */
static void watch(long now)
{
    for (struct nbc_req *r = req_first_active(); r; r = r->next) {
        uint64_t mark = position(r);
        if (mark != r->stall_mark || r->stall_since_ns == 0) {
            r->stall_mark = mark;
            r->stall_since_ns = now;
            r->stall_reports = 0;
            continue;
        }
        long waited = now - r->stall_since_ns, due = nbc_rt.env.stall_ns;
        for (int i = 0; i < r->stall_reports && due < LONG_MAX / 2; i++) due *= 2; /* never overflows */
        if (waited <= due) continue;
        r->stall_reports++;
        report(r, waited);
        if (r->any_order && r->st.comm != MPI_COMM_NULL) stall_ask(r, now);
    }
}

void stall_poll(void)
{
    if (nbc_rt.env.stall_ns <= 0) return;
    long now = now_ns();
    if (now - nbc_rt.stall.last_poll_ns < STALL_POLL_NS) return;
    nbc_rt.stall.last_poll_ns = now;
    stall_answer_all();
    watch(now);
    stall_gather(now);
}
