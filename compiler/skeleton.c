#include "skeleton.h"

#include <stdlib.h>

#define SAME_LEN 8 /* flag on a SEND/RECV header: the length repeats the previous message's */

typedef struct {
    uint8_t *v;
    size_t n, cap;
    int nomem;
} bytes;

static void put(bytes *b, uint8_t x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        uint8_t *v = realloc(b->v, cap);
        if (!v) {
            b->nomem = 1;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
}

static void put_varint(bytes *b, uint64_t x)
{
    while (x >= 0x80) {
        put(b, (uint8_t)(x | 0x80));
        x >>= 7;
    }
    put(b, (uint8_t)x);
}

static uint64_t get_varint(const uint8_t *code, uint32_t *pos)
{
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t c = code[(*pos)++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return x;
    }
}

static void flush_local(bytes *b, uint64_t *reduced, uint64_t *copied)
{
    if (!*reduced && !*copied) return;
    put(b, SK_LOCAL);
    put_varint(b, *reduced);
    put_varint(b, *copied);
    *reduced = *copied = 0;
}

uint8_t *skel_build(const nbc_program *prog, int64_t rank, size_t *len)
{
    bytes b = {0};
    uint64_t last = 0;
    for (uint32_t r = 0; r < prog->nrounds; r++) {
        uint64_t reduced = 0, copied = 0;
        for (uint32_t pc = prog_rounds(prog)[r]; pc < prog_rounds(prog)[r + 1]; pc++) {
            const nbc_insn *in = &prog_insns(prog)[pc];
            const nbc_opinfo *op = prog_opinfo(in->op);
            if (op->reduces) reduced += in->len;
            else if (!prog_between_ranks(in->op)) copied += in->len;
            if (!prog_between_ranks(in->op)) continue;
            flush_local(&b, &reduced, &copied);
            int64_t d = (int64_t)in->peer - rank;
            if (op->flag) {
                put(&b, in->op == OP_SIGNAL ? SK_SIGNAL : SK_WAIT);
                put_varint(&b, d < 0 ? ((uint64_t)(-(d + 1)) << 1) | 1 : (uint64_t)d << 1);
                continue;
            }
            put(&b, (uint8_t)((in->op == OP_SEND ? SK_SEND : SK_RECV) | (in->len == last ? SAME_LEN : 0)));
            put_varint(&b, d < 0 ? ((uint64_t)(-(d + 1)) << 1) | 1 : (uint64_t)d << 1); /* zigzag */
            if (in->len != last) put_varint(&b, in->len);
            last = in->len;
        }
        flush_local(&b, &reduced, &copied);
        put(&b, SK_END);
    }
    put(&b, SK_DONE);
    if (b.nomem) {
        free(b.v);
        return NULL;
    }
    *len = b.n;
    return b.v;
}

void skel_next(const uint8_t *code, uint32_t *pos, int64_t rank, uint64_t *last_len, skel_token *t)
{
    uint8_t h = code[(*pos)++];
    *t = (skel_token){.kind = h & 7};
    if (t->kind == SK_LOCAL) {
        t->reduced = get_varint(code, pos);
        t->copied = get_varint(code, pos);
    } else if (t->kind >= SK_SEND) {
        uint64_t z = get_varint(code, pos);
        t->peer = rank + ((z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1));
        if (t->kind == SK_SIGNAL || t->kind == SK_WAIT) return;
        t->len = (h & SAME_LEN) ? *last_len : get_varint(code, pos);
        *last_len = t->len;
    }
}
