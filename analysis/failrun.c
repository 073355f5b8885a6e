/* The failure run: verify.c's use of the simulated network (simnet.h) without its checks,
 * and with ranks that stop. See failrun.h. */
#include "failrun.h"

#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "simnet.h"

enum { SIDE_SEND, SIDE_RECV };

typedef struct {         /* a posted, unmatched operation */
    uint32_t rank, pc;
    sym_piece *data;     /* a send's contents, snapshot at posting */
    size_t n;
} post;

typedef struct {
    const fail_model *m;
    fail_state *st;
    const uint32_t *limit;
    sim_net net;         /* the posted operations (post), the ranks ready to advance */
    uint32_t round[FAIL_MAX_P], pending[FAIL_MAX_P];
    uint8_t issued[FAIL_MAX_P];
    int nomem;
    sym_list t1, t2, t3;
} run;

int fail_model_init(fail_model *m, const sched_lib *lib, const sched_def *s, const compile_args *a, diag *d)
{
    memset(m, 0, sizeof *m);
    m->lib = lib, m->s = s, m->base = *a;
    if (!s->collective || collective_from_name(s->collective) != COLL_ALLREDUCE) {
        diag_error(d, s->src, s->at, "'%s' is not an allreduce: the failure analysis handles allreduce schedules only", s->name);
        return COMPILE_ERROR;
    }
    if (a->p < 1 || a->p > FAIL_MAX_P) {
        diag_error(d, s->src, s->at, "the failure analysis takes p = 1..%d, not %lld", FAIL_MAX_P, (long long)a->p);
        return COMPILE_ERROR;
    }
    compile_args ca = *a;
    int rc = compile_check(lib, s, &ca, d);
    for (int64_t r = 0; r < a->p && rc == COMPILE_OK; r++) {
        ca.rank = r;
        rc = compile_program(lib, s, &ca, &m->prog[r], d);
        if (rc == COMPILE_OK && m->prog[r]->nrounds > m->maxrounds) m->maxrounds = m->prog[r]->nrounds;
    }
    if (rc != COMPILE_OK) fail_model_free(m);
    return rc;
}

void fail_model_free(fail_model *m)
{
    for (int r = 0; r < FAIL_MAX_P; r++) free(m->prog[r]);
    memset(m->prog, 0, sizeof m->prog);
}

static void add_cut(uint64_t *c, size_t *n, uint64_t off, uint64_t len, uint64_t es)
{
    c[(*n)++] = off / es;
    c[(*n)++] = (off + len) / es;
}

/* Cuts each slot at every offset its program touches, then writes the rank's input. */
static int setup(run *v, uint32_t r)
{
    const fail_model *m = v->m;
    const nbc_program *prog = m->prog[r];
    uint64_t es = prog->esize;
    coll_shape sh = collective_shape(COLL_ALLREDUCE, m->base.p, r, 0, m->base.count, m->base.inplace);
    uint64_t len[SLOT_COUNT_] = {m->base.inplace ? 0 : (uint64_t)sh.send_len, (uint64_t)sh.recv_len, prog->scratch / es};
    uint64_t *cut[SLOT_COUNT_];
    size_t n[SLOT_COUNT_] = {0};
    int rc = 0;
    for (int s = 0; s < SLOT_COUNT_; s++) {
        cut[s] = malloc((4 + 6 * (size_t)prog->ninsns) * sizeof **cut);
        if (!cut[s]) rc = -1;
    }
    if (rc) {
        for (int s = 0; s < SLOT_COUNT_; s++) free(cut[s]);
        return -1;
    }
    const nbc_insn *in = prog_insns(prog);
    for (uint32_t i = 0; i < prog->ninsns; i++)
        for (int o = 0; o < 3; o++)
            if (prog_operands(in[i].op) >> o & 1) {
                unsigned s = prog_operand_slot(&in[i], o);
                add_cut(cut[s], &n[s], prog_operand_off(&in[i], o), in[i].len, es);
            }
    for (int s = 0; s < SLOT_COUNT_; s++)
        if (sym_buf_init(&v->st->buf[r][s], len[s], cut[s], n[s])) rc = -1;
    sym_piece x = {.len = (uint64_t)m->base.count, .sum = 1ull << r, .cnt = 1, .lo = r, .hi = r + 1};
    int slot = m->base.inplace ? SLOT_RECV : SLOT_SEND;
    if (!rc && x.len) rc = sym_write(&v->st->buf[r][slot], 0, x.len, &x, 1, SYM_INITIAL);
    return rc;
}

/* A rank moves on when its round's last message completes. */
static void matched(run *v, uint32_t r)
{
    if (--v->pending[r] == 0 && v->issued[r]) net_ready(&v->net, r);
}

/* A send meets a receive: the data lands in the receiver's buffer. */
static void deliver(run *v, const post *snd, uint32_t dst, const nbc_insn *rin)
{
    uint64_t es = v->m->prog[dst]->esize;
    uint64_t lo = rin->a_off / es, hi = (rin->a_off + rin->len) / es;
    if (sym_write(&v->st->buf[dst][rin->a_slot], lo, hi, snd->data, snd->n, 0)) v->nomem = 1;
    matched(v, snd->rank);
    matched(v, dst);
}

static void post_send(run *v, uint32_t r, uint32_t pc, const nbc_insn *in, const sym_list *data)
{
    post me = {r, pc, malloc((data->n ? data->n : 1) * sizeof(sym_piece)), data->n};
    if (!me.data) {
        v->nomem = 1;
        return;
    }
    memcpy(me.data, data->v, data->n * sizeof *data->v);
    v->pending[r]++;
    uint32_t peer = (uint32_t)in->peer;
    post rcv;
    if (net_take(&v->net, r, peer, SIDE_RECV, &rcv)) {
        deliver(v, &me, peer, &prog_insns(v->m->prog[peer])[rcv.pc]);
        free(me.data);
        return;
    }
    if (net_post(&v->net, r, peer, SIDE_SEND, &me)) v->nomem = 1, free(me.data);
}

static void post_recv(run *v, uint32_t r, uint32_t pc, const nbc_insn *in)
{
    post me = {r, pc, NULL, 0};
    v->pending[r]++;
    uint32_t peer = (uint32_t)in->peer;
    post snd;
    if (net_take(&v->net, peer, r, SIDE_SEND, &snd)) {
        deliver(v, &snd, r, in);
        free(snd.data);
        return;
    }
    if (net_post(&v->net, peer, r, SIDE_RECV, &me)) v->nomem = 1;
}

/* a := b ⊕ a over the two lists: the sets of contributions add up. */
static int combine(const sym_list *B, const sym_list *A, sym_list *out)
{
    size_t i = 0, j = 0;
    sym_piece x = B->n ? B->v[0] : (sym_piece){0}, y = A->n ? A->v[0] : (sym_piece){0};
    while (i < B->n && j < A->n) {
        uint64_t l = x.len < y.len ? x.len : y.len;
        sym_piece a = sym_take(&x, l), b = sym_take(&y, l);
        sym_piece c = {.len = l, .orig = b.orig, .sum = a.sum | b.sum, .cnt = a.cnt + b.cnt};
        if (a.cnt == 0 || b.cnt == 0) c = (sym_piece){.len = l}; /* a wrong schedule: no value */
        if (sym_list_add(out, c)) return -1;
        if (x.len == 0 && ++i < B->n) x = B->v[i];
        if (y.len == 0 && ++j < A->n) y = A->v[j];
    }
    return 0;
}

static void issue(run *v, uint32_t r)
{
    const nbc_program *prog = v->m->prog[r];
    sym_buf *buf = v->st->buf[r];
    uint64_t es = prog->esize;
    for (uint32_t pc = prog_rounds(prog)[v->round[r]]; pc < prog_rounds(prog)[v->round[r] + 1] && !v->nomem; pc++) {
        const nbc_insn *in = &prog_insns(prog)[pc];
        uint64_t a_lo = in->a_off / es, a_hi = (in->a_off + in->len) / es, b_lo = in->b_off / es;
        v->t1.n = v->t2.n = v->t3.n = 0;
        int rc = 0;
        switch (in->op) {
        case OP_COPY:
            rc = sym_read(&buf[in->b_slot], b_lo, b_lo + (a_hi - a_lo), &v->t1) ||
                 sym_write(&buf[in->a_slot], a_lo, a_hi, v->t1.v, v->t1.n, pc);
            break;
        case OP_REDUCE:
        case OP_COMBINE: {
            int c_slot = in->op == OP_COMBINE ? in->c_slot : in->a_slot;
            uint64_t c_lo = in->op == OP_COMBINE ? in->c_off / es : a_lo;
            rc = sym_read(&buf[in->b_slot], b_lo, b_lo + (a_hi - a_lo), &v->t1) ||
                 sym_read(&buf[c_slot], c_lo, c_lo + (a_hi - a_lo), &v->t2) || combine(&v->t1, &v->t2, &v->t3) ||
                 sym_write(&buf[in->a_slot], a_lo, a_hi, v->t3.v, v->t3.n, pc);
            break;
        }
        case OP_SEND:
            rc = sym_read(&buf[in->a_slot], a_lo, a_hi, &v->t1);
            if (!rc) post_send(v, r, pc, in, &v->t1);
            break;
        case OP_RECV: post_recv(v, r, pc, in); break;
        }
        if (rc) v->nomem = 1;
    }
}

/* Runs rank r's rounds while their messages complete and its limit allows. */
static void advance(run *v, uint32_t r)
{
    const nbc_program *prog = v->m->prog[r];
    for (;;) {
        if (v->issued[r]) {
            if (v->pending[r]) return;
            v->issued[r] = 0;
            v->round[r]++;
            v->st->reached[r] = v->round[r];
        }
        if (v->round[r] >= prog->nrounds || v->round[r] >= v->limit[r] || v->nomem) return;
        issue(v, r);
        v->issued[r] = 1;
    }
}

static void drop(void *item)
{
    free(((post *)item)->data);
}

int fail_run(const fail_model *m, const uint32_t *limit, fail_state *st)
{
    memset(st, 0, sizeof *st);
    run v = {.m = m, .st = st, .limit = limit};
    uint32_t p = (uint32_t)m->base.p;
    if (net_init(&v.net, p, sizeof(post))) {
        net_free(&v.net, NULL);
        return -1;
    }
    for (uint32_t r = 0; r < p && !v.nomem; r++)
        if (setup(&v, r)) v.nomem = 1;
    for (uint32_t r = 0; r < p; r++) net_ready(&v.net, r);
    for (uint32_t next; !v.nomem && net_next(&v.net, &next);) advance(&v, next);
    net_free(&v.net, drop);
    sym_list_free(&v.t1);
    sym_list_free(&v.t2);
    sym_list_free(&v.t3);
    return v.nomem ? -1 : 0;
}

void fail_state_free(const fail_model *m, fail_state *st)
{
    for (int64_t r = 0; r < m->base.p; r++)
        for (int s = 0; s < SLOT_COUNT_; s++) sym_buf_free(&st->buf[r][s]);
}
