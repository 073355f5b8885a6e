#include "interp.h"
#include "remote.h"

#include <string.h>

/* Where an operand is: in this rank's buffer, or (SLOT_PEER) in the instruction's peer's. */
static inline char *operand(const interp_state *st, unsigned slot, uint64_t off, int32_t peer)
{
    return (slot & SLOT_PEER ? st->shared->peer_base[peer][SLOT_INDEX(slot)] : st->base[slot]) + off;
}

/* SIGNAL: a release store, so that everything this rank wrote before it is visible to the
 * peer that sees the flag. The first also stores the channel's `ended` word, a release store
 * too: a peer that reads it may then rewrite its stage, which this rank's earlier calls read. */
static void raise_flag(interp_shared *sh, int peer)
{
    if (sh->ended) {
        __atomic_store_n(sh->bytes_word, sh->bytes, __ATOMIC_RELAXED); /* the flag's release publishes it */
        __atomic_store_n(sh->ended, sh->ended_value, __ATOMIC_RELEASE);
        sh->ended = NULL;
    }
    __atomic_store_n(sh->raise[peer], sh->stamp + ++sh->raised[peer], __ATOMIC_RELEASE);
}

static void arm_wait(interp_shared *sh, int peer)
{
    sh->awaited[peer]++;
    for (int i = 0; i < sh->nwaiting; i++)
        if (sh->waiting[i] == peer) return;
    sh->waiting[sh->nwaiting++] = peer;
}

/* The number + 1 of the call a shared program belongs to: what a peer's `left` says when it
 * left this very call. */
static inline uint64_t call_mark(const interp_shared *sh) { return sh->stamp >> 20; }

/* Whether peer q has left this call (an acquire load: it is read rarely, and its line is
 * written only when a rank leaves, so it stays in this core's cache). */
static inline int peer_left(interp_shared *sh, int q)
{
    if (__atomic_load_n(sh->left[q], __ATOMIC_ACQUIRE) != call_mark(sh)) return 0;
    sh->left_peer = q;
    return 1;
}

/* Whether every WAIT of the round has seen its SIGNAL (an acquire load: what the peer wrote
 * before raising it is visible after): 1, 0 while not, -1 when a peer whose signal has not
 * come has left the call (it never will), or one whose has came with another length. */
static int waits_done(interp_shared *sh)
{
    for (int i = 0; i < sh->nwaiting;) {
        int peer = sh->waiting[i];
        if (__atomic_load_n(sh->seen[peer], __ATOMIC_ACQUIRE) >= sh->stamp + sh->awaited[peer]) {
            if (__atomic_load_n(sh->peer_bytes[peer], __ATOMIC_RELAXED) != sh->bytes) {
                sh->other_bytes_peer = peer;
                return -1;
            }
            sh->waiting[i] = sh->waiting[--sh->nwaiting];
        } else if (peer_left(sh, peer))
            return -1;
        else
            i++;
    }
    return sh->nwaiting == 0;
}

/* Before a round that may touch the peers' buffers: announces it, then looks for a peer that
 * has left (the store, the fence and the loads are the half of the withdrawal that runs here;
 * runtime/shm.c's withdraw() runs the other). MPI_SUCCESS, or an error once a peer has left. */
static int guard_enter(interp_shared *sh)
{
    __atomic_store_n(sh->using, call_mark(sh), __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int q = 0; q < sh->guard; q++)
        if (sh->left[q] && peer_left(sh, q)) return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

/* After it: every access of the round is done (a release store: a leaving peer that reads
 * the word clear may hand its buffers back). */
static void guard_leave(interp_shared *sh) { __atomic_store_n(sh->using, 0, __ATOMIC_RELEASE); }

/* An instruction's length in elements, for MPI. */
static inline int elements(const nbc_insn *in, const nbc_program *p) { return (int)(in->len / p->esize); }

/* COPY, REDUCE or COMBINE on memory of this process; inlined in the interpreter's loop. */
static inline int compute(const interp_state *st, unsigned op, char *a, char *b, char *c, uint64_t len)
{
    if (op == OP_COPY) {
        memcpy(a, b, len);
        return MPI_SUCCESS;
    }
    int n = (int)(len / st->prog->esize); /* elements, for MPI and the kernels */
    switch (op) {
    case OP_REDUCE:
        if (!st->kernel) return MPI_Reduce_local(b, a, n, st->datatype, st->op);
        st->kernel->reduce(a, b, (size_t)n);
        return MPI_SUCCESS;
    default: /* OP_COMBINE */
        if (st->kernel) {
            st->kernel->combine(a, b, c, (size_t)n);
            return MPI_SUCCESS;
        }
        memcpy(a, c, len);
        return MPI_Reduce_local(b, a, n, st->datatype, st->op);
    }
}

int interp_compute(const interp_state *st, unsigned op, char *a, char *b, char *c, uint64_t len)
{
    return compute(st, op, a, b, c, len);
}

/* Whether [x, x + len) and [y, y + len) overlap anywhere but at the same positions. */
static int shifted_overlap(const char *x, const char *y, uint64_t len)
{
    return x != y && x < y + len && y < x + len;
}

/* Whether an instruction names a peer's buffer that only the kernel reaches (interp/remote.c). */
static inline int through_kernel(const interp_state *st, const nbc_insn *in)
{
    return st->shared && st->shared->by_kernel && remote_names(st->shared, in);
}

/* Whether in[j], the j-th instruction after the REDUCE or COMBINE `in` (result a, inputs b and
 * c), is a COPY that only copies out what `in` computed: it reads exactly a, and writes neither
 * a nor b, c or the COPYs' destinations before it other than at the same positions (a peer's
 * input in place), which each piece reads or writes before the next piece's turn. */
static int copies_result(const interp_state *st, const nbc_insn *in, int j, const char *a, const char *b, const char *c)
{
    const nbc_insn *cp = in + j;
    if (cp->op != OP_COPY || cp->len != in->len || through_kernel(st, cp)) return 0;
    const char *to = operand(st, cp->a_slot, cp->a_off, cp->peer);
    if (operand(st, cp->b_slot, cp->b_off, cp->peer) != a || to == a || shifted_overlap(to, a, in->len) ||
        shifted_overlap(to, b, in->len) || (c && shifted_overlap(to, c, in->len)))
        return 0;
    for (int i = 1; i < j; i++)
        if (shifted_overlap(to, operand(st, in[i].a_slot, in[i].a_off, in[i].peer), in->len)) return 0;
    return 1;
}

/* A REDUCE or COMBINE followed by COPYs of its result (a shared-memory schedule writing each
 * finished segment into the other ranks' buffers) runs piece by piece, each piece copied out
 * while it is still in L1 instead of read back from L2 after the whole segment: the same
 * writes in an order no other rank can tell from the program's (they only look after a flag).
 * Returns how many of the COPYs after `in` it ran. */
enum { STRIP_BYTES = 8192 };
static int compute_and_copy(const interp_state *st, const nbc_insn *in, const nbc_insn *end, int *rc)
{
    char *a = operand(st, in->a_slot, in->a_off, in->peer), *b = operand(st, in->b_slot, in->b_off, in->peer);
    char *c = in->op == OP_COMBINE ? operand(st, in->c_slot, in->c_off, in->peer) : NULL;
    int ncopies = 0;
    while (in + 1 + ncopies < end && copies_result(st, in, 1 + ncopies, a, b, c)) ncopies++;
    uint64_t esize = st->prog->esize, piece = STRIP_BYTES / esize * esize;
    if (ncopies == 0 || piece == 0 || in->len <= piece) {
        *rc = compute(st, in->op, a, b, c, in->len);
        for (int j = 1; j <= ncopies && *rc == MPI_SUCCESS; j++)
            memcpy(operand(st, in[j].a_slot, in[j].a_off, in[j].peer), a, in->len);
        return ncopies;
    }
    for (uint64_t done = 0; done < in->len; done += piece) {
        uint64_t n = in->len - done < piece ? in->len - done : piece;
        if ((*rc = compute(st, in->op, a + done, b + done, c ? c + done : NULL, n)) != MPI_SUCCESS) return ncopies;
        for (int j = 1; j <= ncopies; j++) memcpy(operand(st, in[j].a_slot, in[j].a_off, in[j].peer) + done, a + done, n);
    }
    return ncopies;
}

/* Issues the instructions of the current round. Each computes only the operands it has (a
 * SIGNAL or a WAIT has none) and counts elements only where MPI or a kernel wants them. */
static int issue_round(interp_state *st)
{
    const nbc_program *p = st->prog;
    const nbc_insn *in = prog_insns(p) + prog_rounds(p)[st->round];
    const nbc_insn *end = prog_insns(p) + prog_rounds(p)[st->round + 1];
    st->nreqs = 0;
    for (; in < end; in++) {
        int rc = MPI_SUCCESS;
        switch (in->op) {
        case OP_SEND:
            rc = MPI_Isend(operand(st, in->a_slot, in->a_off, in->peer), elements(in, p), st->datatype, in->peer,
                           st->tag, st->comm, &st->reqs[st->nreqs++]);
            break;
        case OP_RECV:
            rc = MPI_Irecv(operand(st, in->a_slot, in->a_off, in->peer), elements(in, p), st->datatype, in->peer,
                           st->tag, st->comm, &st->reqs[st->nreqs++]);
            break;
        case OP_COPY:
        case OP_REDUCE:
        case OP_COMBINE:
            if (through_kernel(st, in)) rc = remote_run(st, in);
            else if (in->op != OP_COPY) in += compute_and_copy(st, in, end, &rc);
            else memcpy(operand(st, in->a_slot, in->a_off, in->peer), operand(st, in->b_slot, in->b_off, in->peer), in->len);
            break;
        case OP_SIGNAL:
            raise_flag(st->shared, in->peer);
            break;
        case OP_WAIT:
            arm_wait(st->shared, in->peer);
            break;
        }
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* On failure nothing more is issued; what is in flight is cancelled and let go. */
static void abandon(interp_state *st, int rc)
{
    st->err = rc;
    for (int i = 0; i < st->nreqs; i++)
        if (st->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&st->reqs[i]);
            MPI_Request_free(&st->reqs[i]);
        }
    st->nreqs = 0;
    st->round = st->prog->nrounds;
}

int interp_step(interp_state *st, int may_issue)
{
    int moved = 0;
    while (st->round < st->prog->nrounds) {
        if (!st->posted) {
            if (!may_issue) return moved ? INTERP_MOVED : INTERP_WAITING;
            interp_shared *guard = st->shared && st->shared->guard ? st->shared : NULL;
            int rc = guard ? guard_enter(guard) : MPI_SUCCESS;
            if (rc == MPI_SUCCESS) rc = issue_round(st);
            if (guard) guard_leave(guard);
            st->posted = 1;
            moved = 1;
            if (rc != MPI_SUCCESS) {
                st->err_round = st->round, st->err_req = -1;
                abandon(st, rc);
                break;
            }
        }
        if (st->nreqs > 0) {
            int done = 0;
            int rc = MPI_Testall(st->nreqs, st->reqs, &done, st->statuses), failed = -1;
            if (rc == MPI_ERR_IN_STATUS) /* the message's own error says more */
                for (int i = 0; i < st->nreqs; i++)
                    if (st->statuses[i].MPI_ERROR != MPI_SUCCESS && st->statuses[i].MPI_ERROR != MPI_ERR_PENDING) {
                        rc = st->statuses[i].MPI_ERROR;
                        failed = i;
                        break;
                    }
            if (rc != MPI_SUCCESS) {
                st->err_round = st->round, st->err_req = failed;
                abandon(st, rc);
                break;
            }
            if (!done) return moved ? INTERP_MOVED : INTERP_WAITING;
            st->nreqs = 0; /* completed: nothing of this round is left to cancel */
        }
        if (st->shared && st->shared->nwaiting) {
            int w = waits_done(st->shared);
            if (w < 0) {
                st->err_round = st->round, st->err_req = -1;
                abandon(st, MPI_ERR_OTHER);
                break;
            }
            if (w == 0) return moved ? INTERP_MOVED : INTERP_WAITING;
        }
        st->round++;
        st->posted = 0;
        moved = 1;
        if (st->one_round && st->round < st->prog->nrounds) return INTERP_MOVED;
    }
    return INTERP_DONE;
}

int interp_comm_pc(const nbc_program *p, uint32_t round, int i)
{
    if (round >= p->nrounds) return -1;
    for (uint32_t pc = prog_rounds(p)[round]; pc < prog_rounds(p)[round + 1]; pc++) {
        if (prog_opinfo(prog_insns(p)[pc].op)->message && i-- == 0) return (int)pc;
    }
    return -1;
}
