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
    uint32_t dead;       /* the rank whose memory peers cannot reach, or UINT32_MAX */
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

/* The rank and slot an operand names: a peer's (SLOT_PEER) or the rank's own. An in-place
 * rank's sendbuf is its receive buffer, for peers as for itself. */
static uint32_t owner_of(const fail_model *m, uint32_t r, const nbc_insn *in, int k, int *slot)
{
    unsigned raw = prog_operand_slot(in, k);
    *slot = (int)SLOT_INDEX(raw);
    if (!(raw & SLOT_PEER)) return r;
    if (*slot == SLOT_SEND && m->base.inplace) *slot = SLOT_RECV;
    return (uint32_t)in->peer;
}

/* Cuts each slot at every offset a program (its own, or a peer's operands naming it) touches,
 * then writes the rank's input. */
static int setup(run *v, uint32_t r)
{
    const fail_model *m = v->m;
    const nbc_program *prog = m->prog[r];
    uint64_t es = prog->esize, all = 0;
    for (int64_t q = 0; q < m->base.p; q++) all += m->prog[q]->ninsns;
    coll_shape sh = collective_shape(COLL_ALLREDUCE, m->base.p, r, 0, m->base.count, m->base.inplace);
    uint64_t len[SLOT_COUNT_] = {m->base.inplace ? 0 : (uint64_t)sh.send_len, (uint64_t)sh.recv_len, prog->scratch / es,
                                 prog->shared_bytes / es};
    uint64_t *cut[SLOT_COUNT_];
    size_t n[SLOT_COUNT_] = {0};
    int rc = 0;
    for (int s = 0; s < SLOT_COUNT_; s++) {
        cut[s] = malloc((4 + 6 * (size_t)all) * sizeof **cut);
        if (!cut[s]) rc = -1;
    }
    if (rc) {
        for (int s = 0; s < SLOT_COUNT_; s++) free(cut[s]);
        return -1;
    }
    for (int64_t q = 0; q < m->base.p; q++) {
        const nbc_insn *in = prog_insns(m->prog[q]);
        for (uint32_t i = 0; i < m->prog[q]->ninsns; i++)
            for (int o = 0; o < 3; o++) {
                int s;
                if (prog_operands(in[i].op) >> o & 1 && owner_of(m, (uint32_t)q, &in[i], o, &s) == r)
                    add_cut(cut[s], &n[s], prog_operand_off(&in[i], o), in[i].len, es);
            }
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

/* Flags: the k-th SIGNAL from r to peer meets peer's k-th WAIT on r, in their own channel. */
static void raise_signal(run *v, uint32_t r, uint32_t peer, uint32_t pc)
{
    post me = {r, pc, NULL, 0}, w;
    if (net_take(&v->net, r, net_flags(peer), SIDE_RECV, &w)) matched(v, peer);
    else if (net_post(&v->net, r, net_flags(peer), SIDE_SEND, &me)) v->nomem = 1;
}

static void arm_wait(run *v, uint32_t r, uint32_t peer, uint32_t pc)
{
    post me = {r, pc, NULL, 0}, sig;
    v->pending[r]++;
    if (net_take(&v->net, peer, net_flags(r), SIDE_SEND, &sig)) matched(v, r);
    else if (net_post(&v->net, peer, net_flags(r), SIDE_RECV, &me)) v->nomem = 1;
}

static void issue(run *v, uint32_t r)
{
    const nbc_program *prog = v->m->prog[r];
    uint64_t es = prog->esize;
    for (uint32_t pc = prog_rounds(prog)[v->round[r]]; pc < prog_rounds(prog)[v->round[r] + 1] && !v->nomem; pc++) {
        const nbc_insn *in = &prog_insns(prog)[pc];
        uint64_t n = in->len / es, lo[3];
        sym_buf *buf[3];
        int dead = 0;
        for (int o = 0; o < 3; o++) {
            int s;
            uint32_t q = owner_of(v->m, r, in, o, &s);
            buf[o] = &v->st->buf[q][s];
            lo[o] = prog_operand_off(in, o) / es;
            dead |= (prog_operands(in->op) >> o & 1) && q != r && q == v->dead;
        }
        if (dead) { /* a dead rank's memory: blocked for good, like a receive from it */
            v->pending[r]++;
            return;
        }
        v->t1.n = v->t2.n = v->t3.n = 0;
        int rc = 0;
        switch (in->op) {
        case OP_COPY: rc = sym_read(buf[1], lo[1], lo[1] + n, &v->t1) || sym_write(buf[0], lo[0], lo[0] + n, v->t1.v, v->t1.n, pc); break;
        case OP_REDUCE:
        case OP_COMBINE: {
            int c = in->op == OP_COMBINE ? 2 : 0; /* the right operand: a itself, or c */
            rc = sym_read(buf[1], lo[1], lo[1] + n, &v->t1) || sym_read(buf[c], lo[c], lo[c] + n, &v->t2) ||
                 combine(&v->t1, &v->t2, &v->t3) || sym_write(buf[0], lo[0], lo[0] + n, v->t3.v, v->t3.n, pc);
            break;
        }
        case OP_SEND:
            rc = sym_read(buf[0], lo[0], lo[0] + n, &v->t1);
            if (!rc) post_send(v, r, pc, in, &v->t1);
            break;
        case OP_RECV: post_recv(v, r, pc, in); break;
        case OP_SIGNAL: raise_signal(v, r, (uint32_t)in->peer, pc); break;
        case OP_WAIT: arm_wait(v, r, (uint32_t)in->peer, pc); break;
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

int fail_run(const fail_model *m, const uint32_t *limit, uint32_t dead, fail_state *st)
{
    memset(st, 0, sizeof *st);
    run v = {.m = m, .st = st, .limit = limit, .dead = dead};
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
