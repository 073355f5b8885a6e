/* NBC_TIMEOUT=seconds (off by default): a request whose round has not moved for that long
 * fails with an error naming the ranks that did not answer, the schedule, the round and the
 * instructions, instead of waiting forever on a peer that is slow, stuck or dead.
 *
 * Free on the fast path: the clock is read only from progress passes that moved nothing (as
 * stall.c does), and a request's position (its start, round and whether the round is posted)
 * is compared with the one seen then; the time counts from the first pass that saw it.
 *
 * What is left in flight when a request times out: its receives are cancelled (MPI_Cancel,
 * then one MPI_Test so that a cancelled receive is complete before the buffer goes back to the
 * application; one that cannot be cancelled at once is freed and may still land in recvbuf or
 * scratch). Sends cannot be recalled (cancelling sends is deprecated in MPI 4): they are freed
 * and MPI finishes them on its own; the application's buffers are only read by them, and the
 * request's scratch, which a send may still read, is then left to it (never freed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"


/* Still waiting for its communicator's duplicate (MPI_Comm_idup, collective): it cannot be
 * recalled; the request fails, and later ones on the communicator wait for it in turn. */
static void expire_setup(struct nbc_req *r, long waited_ns)
{
    char where[200];
    failure_where(r, 0, where, sizeof where);
    r->timed_out = 1;
    req_fail(r, MPI_ERR_OTHER, "%s timed out after %.1f s (NBC_TIMEOUT=%.1f) before it started: the duplication of the "
             "communicator (every rank's first collective on it) has not completed; some rank has not called it",
             where, waited_ns * 1e-9, nbc_rt.env.timeout_ns * 1e-9);
}

static void expire(struct nbc_req *r, long waited_ns)
{
    interp_state *st = &r->st;
    char where[200], missing[600] = "", rest[400] = "";
    size_t lm = 0, lr = 0;
    int sends_left = 0, nmissing = 0;
    failure_where(r, st->round, where, sizeof where);
    for (int i = 0; i < st->nreqs; i++) {
        if (st->reqs[i] == MPI_REQUEST_NULL) continue;
        int done = 0, pc = interp_comm_pc(st->prog, st->round, i);
        MPI_Request_get_status(st->reqs[i], &done, MPI_STATUS_IGNORE);
        const nbc_insn *in = pc >= 0 ? &prog_insns(st->prog)[pc] : NULL;
        if (!done && in) {
            char what[120];
            failure_insn(st->prog, pc, what, sizeof what);
            if (in->op == OP_RECV && lm < sizeof missing) {
                lm += (size_t)snprintf(missing + lm, sizeof missing - lm, "%srank %d (%s)", nmissing++ ? ", " : "", in->peer, what);
            } else if (lr < sizeof rest) {
                lr += (size_t)snprintf(rest + lr, sizeof rest - lr, "%s%s", lr ? ", " : "", what);
            }
        }
        if (in && in->op == OP_RECV) {
            MPI_Cancel(&st->reqs[i]);
            MPI_Test(&st->reqs[i], &done, MPI_STATUS_IGNORE);
        } else if (!done) {
            sends_left = 1;
        }
        if (st->reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&st->reqs[i]);
    }
    if (sends_left && r->scratch) { /* an unfinished send may still read scratch: leave it to MPI */
        r->scratch = NULL;
        r->scratch_cap = 0;
        if (r->persistent && st->prog->scratch) { /* its next start needs one of its own */
            r->scratch = malloc(st->prog->scratch);
            r->scratch_cap = r->scratch ? st->prog->scratch : 0;
            if (r->scratch) st->base[SLOT_SCRATCH] = r->scratch;
        }
    }
    st->nreqs = 0;
    for (int i = 0; st->shared && i < st->shared->nwaiting && lm < sizeof missing; i++) /* WAITs of a shared program */
        lm += (size_t)snprintf(missing + lm, sizeof missing - lm, "%srank %d (its signal)", nmissing++ ? ", " : "", st->shared->waiting[i]);
    if (st->shared) st->shared->nwaiting = 0;
    if (r->progs[RUN_SHARED] && !r->shm_chosen && lr < sizeof rest)
        lr += (size_t)snprintf(rest + lr, sizeof rest - lr, "%sthe ranks' agreement on shared memory (some rank has not started this call)", lr ? ", " : "");
    uint32_t round = st->round;
    st->round = st->prog->nrounds; /* the next step reports it done */
    st->err_round = round, st->err_req = -1;
    r->timed_out = 1;
    req_fail(r, MPI_ERR_OTHER, "%s timed out after %.1f s (NBC_TIMEOUT=%.1f): %s%s%s%s%s", where, waited_ns * 1e-9, nbc_rt.env.timeout_ns * 1e-9,
             nmissing ? "no answer from " : "", missing, nmissing && lr ? "; " : "", lr ? "not completed: " : "", rest);
}

void timeout_poll(struct nbc_req *active)
{
    long limit_ns = nbc_rt.env.timeout_ns;
    if (limit_ns == 0 || !active) return;
    long now = now_ns();
    for (struct nbc_req *r = active; r; r = r->next) {
        /* not the NBC_CHECK agreement, which has MPI requests of its own */
        if (r->check || r->st.err != MPI_SUCCESS || r->st.round >= r->st.prog->nrounds) continue;
        uint64_t mark = r->starts << 33 ^ (uint64_t)r->st.round << 1 ^ (uint64_t)r->st.posted;
        if (mark != r->timeout_mark || r->timeout_since_ns == 0) {
            r->timeout_mark = mark;
            r->timeout_since_ns = now;
        } else if (now - r->timeout_since_ns > limit_ns && r->st.comm == MPI_COMM_NULL) {
            expire_setup(r, now - r->timeout_since_ns);
        } else if (now - r->timeout_since_ns > limit_ns) {
            expire(r, now - r->timeout_since_ns);
        }
    }
}
