#include "progcheck.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *prog_buffer_name(int slot, char *space, size_t size)
{
    static const char *const names[SLOT_COUNT_] = {"sendbuf", "recvbuf", "scratch"};
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

static int check_insn(const nbc_program *prog, uint32_t pc, int64_t p, const uint64_t *slot_bytes, int nslots, prog_fault *f)
{
    char name[3][24];
    const nbc_insn *in = &prog_insns(prog)[pc];
    const nbc_opinfo *info = prog_opinfo(in->op);
    const char *op = info->name;
    uint64_t es = prog->esize;
    if (in->op >= OP_COUNT_) return prog_fault_at(f, pc, UINT32_MAX, "unknown opcode %u", in->op);
    if (in->len == 0) return prog_fault_at(f, pc, UINT32_MAX, "%s of zero length (programs never hold those)", op);
    unsigned uses = prog_operands(in->op);
    const uint8_t slots[3] = {in->a_slot, in->b_slot, in->c_slot};
    const uint64_t offs[3] = {in->a_off, in->b_off, in->c_off};
    for (int k = 0; k < 3; k++) {
        if (!(uses >> k & 1)) continue;
        if (slots[k] >= nslots) return prog_fault_at(f, pc, UINT32_MAX, "%s names buffer slot %u, which does not exist", op, slots[k]);
        if (offs[k] % es || in->len % es)
            return prog_fault_at(f, pc, UINT32_MAX, "%s at byte %" PRIu64 ", %" PRIu64 " bytes long, is not aligned to the %" PRIu64 "-byte elements",
                         op, offs[k], in->len, es);
        if (offs[k] > slot_bytes[slots[k]] || in->len > slot_bytes[slots[k]] - offs[k])
            return prog_fault_at(f, pc, UINT32_MAX, "%s %s bytes [%" PRIu64 ", %" PRIu64 ") of %s, which is %" PRIu64 " bytes long", op,
                         info->writes >> k & 1 ? "writes" : "reads", offs[k], offs[k] + in->len,
                         prog_buffer_name(slots[k], name[k], sizeof name[k]), slot_bytes[slots[k]]);
    }
    if (info->message && (in->peer < 0 || in->peer >= p))
        return prog_fault_at(f, pc, UINT32_MAX, "%s names peer %d, outside 0..%" PRId64, op, in->peer, p - 1);
    /* memcpy and the kernels need disjoint operands: the written one, a, against b and c; a
     * copy onto itself is merely useless */
    int same = 0;
    for (int k = 1; k < 3; k++)
        same |= (uses >> k & 1) && slots[k] == in->a_slot && in->a_off < offs[k] + in->len && offs[k] < in->a_off + in->len;
    if (same && !(in->op == OP_COPY && in->a_off == in->b_off))
        return prog_fault_at(f, pc, UINT32_MAX, "%s reads and writes overlapping bytes of %s", op, prog_buffer_name(in->a_slot, name[0], sizeof name[0]));
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

int prog_check(const nbc_program *prog, int64_t p, const uint64_t *slot_bytes, int nslots, prog_fault *f)
{
    const uint32_t *rounds = prog_rounds(prog);
    if (rounds[0] != 0 || rounds[prog->nrounds] != prog->ninsns)
        return prog_fault_at(f, 0, UINT32_MAX, "round table does not cover the %u instructions", prog->ninsns);
    for (uint32_t pc = 0; pc < prog->ninsns; pc++)
        if (check_insn(prog, pc, p, slot_bytes, nslots, f)) return 1;

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
