#include "progcheck.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *prog_buffer_name(int slot, char *space, size_t size)
{
    static const char *const names[SLOT_COUNT_] = {"sendbuf", "recvbuf", "scratch", "shared"};
    if (slot >= 0 && slot < SLOT_COUNT_) return names[slot];
    snprintf(space, size, "bufs(%d)", slot - SLOT_EXTRA + 1);
    return space;
}

/* Byte ranges of one slot that in-flight operations of the current round read or write, kept
 * sorted and merged, so each check is a binary search. */
typedef struct {
    uint64_t lo, hi;
} span;
typedef struct {
    span *v;
    size_t n, cap;
} span_set;

static size_t first_reaching(const span_set *s, uint64_t lo) /* first span with hi >= lo */
{
    size_t l = 0, h = s->n;
    while (l < h) {
        size_t m = l + (h - l) / 2;
        if (s->v[m].hi < lo) l = m + 1;
        else h = m;
    }
    return l;
}

static int overlaps(const span_set *s, uint64_t lo, uint64_t hi)
{
    size_t i = first_reaching(s, lo + 1); /* spans ending at lo only touch */
    return i < s->n && s->v[i].lo < hi;
}

static int add(span_set *s, uint64_t lo, uint64_t hi)
{
    size_t i = first_reaching(s, lo), j = i;
    while (j < s->n && s->v[j].lo <= hi) {
        if (s->v[j].lo < lo) lo = s->v[j].lo;
        if (s->v[j].hi > hi) hi = s->v[j].hi;
        j++;
    }
    if (j == i) { /* nothing to merge with: insert */
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            span *v = realloc(s->v, cap * sizeof *v);
            if (!v) return -1;
            s->v = v;
            s->cap = cap;
        }
        memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
        s->n++;
    } else {
        memmove(s->v + i + 1, s->v + j, (s->n - j) * sizeof *s->v);
        s->n -= j - i - 1;
    }
    s->v[i] = (span){lo, hi};
    return 0;
}

/* What an instruction touches, as its opcode's row says: up to two reads and one write. */
typedef struct {
    int slot;
    uint64_t lo, hi;
} access;
typedef struct {
    access rd[2], wr;
    int nrd, haswr;
} touches;

static touches touched(const nbc_insn *in)
{
    touches t = {0};
    const nbc_opinfo *op = prog_opinfo(in->op);
    for (int k = 0; k < 3; k++) {
        /* another rank's buffer is not one this rank's messages use: its order with the
         * peer's own work comes from SIGNAL and WAIT, which nbcc verify checks */
        if (prog_operand_slot(in, k) & SLOT_PEER) continue;
        uint64_t off = prog_operand_off(in, k);
        access x = {(int)prog_operand_slot(in, k), off, off + in->len};
        if (op->reads >> k & 1 && t.nrd < 2) t.rd[t.nrd++] = x;
        if (op->writes >> k & 1) t.wr = x, t.haswr = 1;
    }
    return t;
}

static int cross(const access *x, const access *y)
{
    return x->slot == y->slot && x->lo < y->hi && y->lo < x->hi;
}

int prog_fault_at(prog_fault *f, uint32_t pc, uint32_t other, const char *fmt, ...)
{
    f->pc = pc;
    f->other = other;
    f->race = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return 1;
}

/* The other rank an instruction names (a message's, a flag's or its peer operands' owner): in
 * 0..p-1 and, for a flag or a peer operand, not this rank (rank < 0: not known). */
static int bad_peer(const nbc_insn *in, int64_t p, int64_t rank, int self_ok)
{
    return in->peer < 0 || in->peer >= p || (!self_ok && in->peer == rank);
}

static int check_insn(const nbc_program *prog, uint32_t pc, int64_t p, int64_t rank, const uint64_t *slot_bytes, int nslots,
                      prog_fault *f)
{
    char name[3][24];
    const nbc_insn *in = &prog_insns(prog)[pc];
    const nbc_opinfo *info = prog_opinfo(in->op);
    const char *op = info->name;
    uint64_t es = prog->esize;
    if (in->op >= OP_COUNT_) return prog_fault_at(f, pc, UINT32_MAX, "unknown opcode %u", in->op);
    if (info->flag) { /* no data: a peer and nothing else */
        if (in->len != 0) return prog_fault_at(f, pc, UINT32_MAX, "%s of %" PRIu64 " bytes (a flag carries none)", op, in->len);
        if (bad_peer(in, p, rank, 0))
            return prog_fault_at(f, pc, UINT32_MAX, "%s names peer %d, not another rank in 0..%" PRId64, op, in->peer, p - 1);
        return 0;
    }
    if (in->len == 0) return prog_fault_at(f, pc, UINT32_MAX, "%s of zero length (programs never hold those)", op);
    unsigned uses = prog_operands(in->op);
    const uint8_t raw[3] = {in->a_slot, in->b_slot, in->c_slot};
    unsigned slots[3]; /* the slot indices, SLOT_PEER off: what arrays are indexed with */
    const uint64_t offs[3] = {in->a_off, in->b_off, in->c_off};
    int peers = 0;
    for (int k = 0; k < 3; k++) {
        if (!(uses >> k & 1)) continue;
        slots[k] = SLOT_INDEX(raw[k]);
        if (slots[k] >= (unsigned)nslots) return prog_fault_at(f, pc, UINT32_MAX, "%s names buffer slot %u, which does not exist", op, slots[k]);
        if (raw[k] & SLOT_PEER) {
            if (slots[k] != SLOT_SEND && slots[k] != SLOT_RECV && slots[k] != SLOT_SHARED)
                return prog_fault_at(f, pc, UINT32_MAX, "%s names another rank's %s: only its send and receive buffers and its shared scratch can be named", op,
                                     prog_buffer_name((int)slots[k], name[k], sizeof name[k]));
            if (info->message)
                return prog_fault_at(f, pc, UINT32_MAX, "%s of another rank's buffer (a message moves this rank's own)", op);
            peers++;
        }
        if (offs[k] % es || in->len % es)
            return prog_fault_at(f, pc, UINT32_MAX, "%s at byte %" PRIu64 ", %" PRIu64 " bytes long, is not aligned to the %" PRIu64 "-byte elements",
                         op, offs[k], in->len, es);
        if (offs[k] > slot_bytes[slots[k]] || in->len > slot_bytes[slots[k]] - offs[k])
            return prog_fault_at(f, pc, UINT32_MAX, "%s %s bytes [%" PRIu64 ", %" PRIu64 ") of %s, which is %" PRIu64 " bytes long", op,
                         info->writes >> k & 1 ? "writes" : "reads", offs[k], offs[k] + in->len,
                         prog_buffer_name(slots[k], name[k], sizeof name[k]), slot_bytes[slots[k]]);
    }
    if (info->message && bad_peer(in, p, rank, 1))
        return prog_fault_at(f, pc, UINT32_MAX, "%s names peer %d, outside 0..%" PRId64, op, in->peer, p - 1);
    if (!info->message && peers && bad_peer(in, p, rank, 0))
        return prog_fault_at(f, pc, UINT32_MAX, "%s names the buffers of peer %d, not another rank in 0..%" PRId64, op, in->peer, p - 1);
    if (!info->message && !peers && in->peer != -1)
        return prog_fault_at(f, pc, UINT32_MAX, "%s names peer %d but no buffer of it (-1 when none)", op, in->peer);
    /* memcpy and the kernels need disjoint operands: the written one, a, against b and c; a
     * copy onto itself is merely useless */
    int same = 0;
    for (int k = 1; k < 3; k++)
        same |= (uses >> k & 1) && raw[k] == raw[0] && in->a_off < offs[k] + in->len && offs[k] < in->a_off + in->len;
    if (same && !(in->op == OP_COPY && in->a_off == in->b_off))
        return prog_fault_at(f, pc, UINT32_MAX, "%s reads and writes overlapping bytes of %s", op, prog_buffer_name((int)slots[0], name[0], sizeof name[0]));
    return 0;
}

/* The earlier in-flight instruction of the round that conflicts with `now` (known to exist). */
static uint32_t culprit(const nbc_program *prog, uint32_t first, uint32_t pc, const access *now, int now_writes)
{
    for (uint32_t i = first; i < pc; i++) {
        const nbc_insn *in = &prog_insns(prog)[i];
        if (!prog_opinfo(in->op)->message) continue;
        access a = {in->a_slot, in->a_off, in->a_off + in->len};
        if (cross(&a, now) && (now_writes || prog_opinfo(in->op)->writes)) return i;
    }
    return UINT32_MAX;
}

static int race(const nbc_program *prog, uint32_t first, uint32_t pc, const access *a, int writes, prog_fault *f)
{
    uint32_t other = culprit(prog, first, pc, a, writes);
    const nbc_insn *o = &prog_insns(prog)[other < prog->ninsns ? other : pc];
    char name[24];
    prog_fault_at(f, pc, other,
          "race within the round: %s %s bytes [%" PRIu64 ", %" PRIu64 ") of %s while the %s at pc %u, posted earlier in the round, may still be %s them",
          prog_opcode_name(prog_insns(prog)[pc].op), writes ? "writes" : "reads", a->lo, a->hi,
          prog_buffer_name(a->slot, name, sizeof name), prog_opcode_name(o->op), other, prog_opinfo(o->op)->writes ? "writing" : "reading");
    f->race = 1;
    return 1;
}

/* PROG_SHARED says exactly that the program names a peer's memory or raises or waits for
 * flags (it needs the node's shared memory). PROG_AGREE must be there when it names a peer's
 * send or receive buffer (the runtime runs it only after its agreement); it may be there
 * without, since the agreement is for all ranks of a schedule or none, and another rank may
 * name this one's buffers. */
#define NEEDS_SHARED 1
#define NEEDS_AGREE 2
static unsigned needs(const nbc_insn *in)
{
    unsigned uses = prog_operands(in->op), r = prog_opinfo(in->op)->flag ? NEEDS_SHARED : 0;
    for (int k = 0; k < 3; k++) {
        unsigned slot = prog_operand_slot(in, k);
        if (!(uses >> k & 1) || !(slot & SLOT_PEER)) continue;
        r |= NEEDS_SHARED | (SLOT_INDEX(slot) != SLOT_SHARED ? NEEDS_AGREE : 0);
    }
    return r;
}

int prog_check(const nbc_program *prog, int64_t p, const uint64_t *slot_bytes, int nslots, prog_fault *f)
{
    return prog_check_rank(prog, p, -1, slot_bytes, nslots, f);
}

int prog_check_rank(const nbc_program *prog, int64_t p, int64_t rank, const uint64_t *slot_bytes, int nslots, prog_fault *f)
{
    const uint32_t *rounds = prog_rounds(prog);
    if (rounds[0] != 0 || rounds[prog->nrounds] != prog->ninsns)
        return prog_fault_at(f, 0, UINT32_MAX, "round table does not cover the %u instructions", prog->ninsns);
    if (prog->flags & ~(PROG_SHARED | PROG_AGREE)) return prog_fault_at(f, 0, UINT32_MAX, "unknown program flags %#x", prog->flags);
    uint32_t first_shared = UINT32_MAX, first_agree = UINT32_MAX;
    for (uint32_t pc = 0; pc < prog->ninsns; pc++) {
        if (check_insn(prog, pc, p, rank, slot_bytes, nslots, f)) return 1;
        unsigned need = needs(&prog_insns(prog)[pc]);
        if (first_shared == UINT32_MAX && need & NEEDS_SHARED) first_shared = pc;
        if (first_agree == UINT32_MAX && need & NEEDS_AGREE) first_agree = pc;
    }
    if (first_shared != UINT32_MAX && !(prog->flags & PROG_SHARED))
        return prog_fault_at(f, first_shared, UINT32_MAX, "%s names another rank on this node, but the program is not marked PROG_SHARED",
                             prog_opcode_name(prog_insns(prog)[first_shared].op));
    if (first_shared == UINT32_MAX && (prog->flags & PROG_SHARED))
        return prog_fault_at(f, 0, UINT32_MAX, "the program is marked PROG_SHARED but names no other rank's memory and no flag");
    if (first_agree != UINT32_MAX && !(prog->flags & PROG_AGREE))
        return prog_fault_at(f, first_agree, UINT32_MAX,
                             "%s names another rank's send or receive buffer, but the program is not marked PROG_AGREE",
                             prog_opcode_name(prog_insns(prog)[first_agree].op));
    /* a shared scratch no other rank names would be a plain scratch, and the runtime would
     * map memory for nothing */
    if (prog->shared_bytes && !(prog->flags & PROG_SHARED))
        return prog_fault_at(f, 0, UINT32_MAX, "a shared scratch of %" PRIu64 " bytes in a program that is not PROG_SHARED (no other rank names it: it would be a plain scratch)",
                             prog->shared_bytes);

    span_set reading[NBC_MAX_SLOTS] = {{0}}, writing[NBC_MAX_SLOTS] = {{0}};
    int rc = 0;
    for (uint32_t r = 0; r < prog->nrounds && rc == 0; r++) {
        if (rounds[r + 1] < rounds[r]) {
            rc = prog_fault_at(f, rounds[r], UINT32_MAX, "round %u ends before it starts", r);
            break;
        }
        for (int s = 0; s < nslots; s++) reading[s].n = writing[s].n = 0;
        for (uint32_t pc = rounds[r]; pc < rounds[r + 1] && rc == 0; pc++) {
            const nbc_insn *in = &prog_insns(prog)[pc];
            touches t = touched(in);
            if (t.haswr && (overlaps(&reading[t.wr.slot], t.wr.lo, t.wr.hi) || overlaps(&writing[t.wr.slot], t.wr.lo, t.wr.hi))) {
                rc = race(prog, rounds[r], pc, &t.wr, 1, f);
                break;
            }
            for (int k = 0; k < t.nrd && rc == 0; k++)
                if (overlaps(&writing[t.rd[k].slot], t.rd[k].lo, t.rd[k].hi)) rc = race(prog, rounds[r], pc, &t.rd[k], 0, f);
            if (rc) break;
            if (!prog_opinfo(in->op)->message) continue; /* done with when posted */
            for (int k = 0; k < t.nrd; k++)
                if (add(&reading[t.rd[k].slot], t.rd[k].lo, t.rd[k].hi)) rc = -1;
            if (t.haswr && add(&writing[t.wr.slot], t.wr.lo, t.wr.hi)) rc = -1;
        }
    }
    for (int s = 0; s < NBC_MAX_SLOTS; s++) {
        free(reading[s].v);
        free(writing[s].v);
    }
    return rc;
}
