/* The verifier's run, on the simulated network (simnet.h): all ranks' programs advance round
 * by round as the network queues them; every SEND and RECV meets the other side waiting in
 * the channel of its pair of ranks, or is posted there to wait, so they match in posting
 * order. A send carries a snapshot of its bytes (symbolic pieces), taken when it is
 * posted: the race check guarantees nothing writes them while it is in flight. A round ends
 * when all its messages are matched (as with MPI, a send may need its receive to complete), and
 * a rank that ends its last round has its result checked and its memory freed.
 *
 * Shared memory (PROG_SHARED): SIGNAL and WAIT meet the same way in the pair's flag channel;
 * peer operands read and write the peer's symbolic buffers, and every access to a send or
 * receive buffer or a shared scratch is checked against the others by happens-before (hb.h). A shared run keeps
 * every rank until all have ended, since peers may still name a finished rank's buffers (an
 * error, which needs its program to be reported), and checks the results then. */
#include "verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "compile.h"
#include "disasm.h"
#include "hb.h"
#include "origin.h"
#include "progcheck.h"
#include "simnet.h"
#include "symbuf.h"

enum { SIDE_SEND, SIDE_RECV };

typedef struct {
    uint64_t *v;
    size_t n, cap;
} cut_list;

typedef struct {
    nbc_program *prog;
    sym_buf buf[NBC_MAX_SLOTS];
    uint32_t round;      /* the round being run (or next to run when not issued) */
    uint32_t pending;    /* its messages (and WAITs) of that round not yet matched */
    uint8_t issued, done;
    uint64_t *heard;     /* barrier: the ranks it has heard from, directly or through others */
    uint64_t own_lo;     /* where sendbuf lies in recvbuf when in place (elements) */
    /* shared memory (hb.h) */
    cut_list pcut[SLOT_COUNT_]; /* offsets of its buffers that peers' operands use */
    hb_cell *cells[SLOT_COUNT_]; /* per cell of the buffers peers can name: the accesses */
    uint32_t *clk;       /* per round k: the clock at its start (p entries), then at the end */
    uint32_t *inc;       /* what the current round's matched WAITs and RECVs bring */
} vrank;

typedef struct {         /* a posted, unmatched operation waiting in a channel */
    uint32_t rank, round, pc;
    uint64_t len;        /* bytes */
    sym_piece *data;     /* a send's contents */
    size_t n;
    uint64_t *heard;     /* barrier: what its sender had heard of when it sent */
    const uint32_t *clk; /* shared memory: its sender's clock when its round started ... */
    uint32_t own;        /* ... and its own epoch when posted */
} vpost;

typedef struct {
    const sched_lib *lib;
    const sched_def *s;
    const verify_args *a;
    diag *d;
    nbc_collective coll;
    int check_order;     /* ordered schedule, non-commutative op: ranges must meet left to right */
    int check_tree;      /* ordered allreduce: the same expression tree on every rank */
    size_t heard_words;  /* barrier: words of each rank's heard-from bit set (0: no check) */
    int64_t p;
    int64_t nbufs;       /* a multi-buffer call's buffers per rank, else 1 */
    int nslots;          /* slots in use: sendbuf, recvbuf, scratch, other buffers */
    int shared;          /* a program is PROG_SHARED: clocks and access checks (hb.h) */
    uint64_t ncontrib;   /* contributions: p · nbufs, numbered rank-major */
    vrank *rk;
    sim_net net;         /* the posted operations (vpost), the ranks ready to advance */
    int failed;
    uint64_t total;      /* Σ key over all contributions */
    sym_list t1, t2, t3; /* scratch lists */
    sym_list ref;        /* the first finished rank's result, for the tree check */
    compile_args *ra;    /* a vector collective's: each rank's arguments, vectors and count */
    int64_t *vecs;       /* ... whose vectors these are, 4·p values a rank */
    int64_t ref_rank;
    verify_stats st;
} vctx;

/* ---- contributions ---- */

static uint64_t mix64(uint64_t x) /* splitmix64's finalizer: a bijection that scrambles bits */
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t key(const vctx *v, uint64_t r) { return mix64(v->a->seed + 0x9E3779B97F4A7C15ull * (r + 1)); }

/* Contribution id (rank r's buffer j is r · nbufs + j), filling len elements. */
static sym_piece contribution(const vctx *v, uint32_t r, uint64_t len)
{
    return (sym_piece){.len = len, .orig = 0, .sum = key(v, r), .tree = mix64(key(v, r) ^ 0x5851F42D4C957F2Dull),
                       .cnt = 1, .lo = r, .hi = r + 1};
}

/* ---- the vectors of a vector collective ---- */

static const char *const case_names[VERIFY_VECTOR_CASES] = {
    "every count 0", "one non-zero column", "counts 0..3, packed", "counts 0..3 with gaps", "counts 0..3, gaps, blocks in reverse order"};

const char *verify_vector_case_name(int vcase) { return vcase >= 0 && vcase < VERIFY_VECTOR_CASES ? case_names[vcase] : "?"; }

int64_t verify_vector_count(int vcase, uint64_t seed, int64_t p, int64_t i, int64_t j)
{
    switch (vcase) {
    case 0: return 0;
    case 1: return j == (int64_t)(mix64(seed) % (uint64_t)p) ? 3 : 0;
    default: return (int64_t)(mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)vcase * 1000003u + (uint64_t)(i * p + j)) % 4);
    }
}

/* Displacements of blocks c[r] long: packed in rank order, with gaps, or in reverse order. */
static void layout(int vcase, const int64_t *c, int64_t p, int64_t *d)
{
    int gaps = vcase >= 3, reverse = vcase == 4;
    int64_t at = 0;
    for (int64_t k = 0; k < p; k++) {
        int64_t r = reverse ? p - 1 - k : k;
        if (gaps) at += (r * 7 + 1) % 3;
        d[r] = at;
        at += c[r];
    }
}

void verify_vectors(int coll, int vcase, uint64_t seed, compile_args *a, int64_t rank, int64_t *space)
{
    int64_t p = a->p;
    memset(a->vec, 0, sizeof a->vec);
    if (!collective_has_vectors(coll)) return;
    int64_t *sc = space, *sd = space + p, *rc = space + 2 * p, *rd = space + 3 * p, uniform = a->count;
    for (int64_t j = 0; j < p; j++) {
        /* alltoallv in place sends by recvcounts: rank i's recvcounts[j] must be rank j's
         * recvcounts[i], so the matrix is symmetric */
        int sym = coll == COLL_ALLTOALLV && a->inplace;
        int64_t lo = rank < j ? rank : j, hi = rank < j ? j : rank;
        sc[j] = vcase < 0 ? uniform : verify_vector_count(vcase, seed, p, coll == COLL_ALLTOALLV ? (sym ? lo : rank) : 0, sym ? hi : j);
        rc[j] = vcase < 0 ? uniform : coll == COLL_ALLTOALLV ? verify_vector_count(vcase, seed, p, sym ? lo : j, sym ? hi : rank) : sc[j];
    }
    layout(coll == COLL_REDUCE_SCATTERV ? 0 : vcase, sc, p, sd);
    layout(coll == COLL_REDUCE_SCATTERV ? 0 : vcase, rc, p, rd);
    a->count = coll == COLL_ALLTOALLV ? 0 : rc[rank];
    int root = rank == a->root;
    switch (coll) {
    case COLL_ALLTOALLV: /* in place, what is sent is recvbuf's */
        a->vec[VEC_SCOUNTS] = a->inplace ? rc : sc;
        a->vec[VEC_SDISPLS] = a->inplace ? rd : sd;
        a->vec[VEC_RCOUNTS] = rc;
        a->vec[VEC_RDISPLS] = rd;
        break;
    case COLL_GATHERV: a->vec[VEC_RCOUNTS] = root ? rc : NULL, a->vec[VEC_RDISPLS] = root ? rd : NULL; break;
    case COLL_SCATTERV: a->vec[VEC_SCOUNTS] = root ? sc : NULL, a->vec[VEC_SDISPLS] = root ? sd : NULL; break;
    case COLL_ALLGATHERV: a->vec[VEC_RCOUNTS] = rc, a->vec[VEC_RDISPLS] = rd; break;
    case COLL_REDUCE_SCATTERV: a->vec[VEC_RCOUNTS] = rc; break; /* displs: the compiler's */
    default: break;
    }
}

/* ---- reporting ---- */

static uint32_t round_of(const nbc_program *prog, uint32_t pc)
{
    uint32_t lo = 0, hi = prog->nrounds;
    while (hi - lo > 1) {
        uint32_t m = lo + (hi - lo) / 2;
        if (prog_rounds(prog)[m] <= pc) lo = m;
        else hi = m;
    }
    return lo;
}

/* An operand's buffer: "recvbuf", or "sendbuf@3" for rank 3's. */
static const char *opnd_name(const nbc_insn *in, int k, char *out, size_t size)
{
    unsigned slot = prog_operand_slot(in, k);
    if (!(slot & SLOT_PEER)) return prog_slot_name((int)slot);
    snprintf(out, size, "%s@%d", prog_slot_name((int)SLOT_INDEX(slot)), in->peer);
    return out;
}

static void describe(const nbc_insn *in, char *out, size_t size)
{
    const nbc_opinfo *op = prog_opinfo(in->op);
    char a[32], b[32], c[32];
    if (op->flag)
        snprintf(out, size, "%s %s rank %d", op->name, in->op == OP_SIGNAL ? "to" : "on", in->peer);
    else if (op->message)
        snprintf(out, size, "%s %" PRIu64 " bytes at %s+%" PRIu64 " %s rank %d", op->name, in->len, opnd_name(in, 0, a, sizeof a),
                 in->a_off, op->writes ? "from" : "to", in->peer);
    else if (prog_operands(in->op) & OPND_C) /* COMBINE: a from c, with b */
        snprintf(out, size, "%s %" PRIu64 " bytes at %s+%" PRIu64 " from %s+%" PRIu64 " with %s+%" PRIu64, op->name, in->len,
                 opnd_name(in, 0, a, sizeof a), in->a_off, opnd_name(in, 2, c, sizeof c), in->c_off, opnd_name(in, 1, b, sizeof b),
                 in->b_off);
    else /* COPY from b, REDUCE with b */
        snprintf(out, size, "%s %" PRIu64 " bytes at %s+%" PRIu64 " %s %s+%" PRIu64, op->name, in->len, opnd_name(in, 0, a, sizeof a),
                 in->a_off, op->reduces ? "with" : "from", opnd_name(in, 1, b, sizeof b), in->b_off);
}

static loc where(const vctx *v, uint32_t rank, uint32_t pc)
{
    const nbc_program *prog = v->rk[rank].prog;
    if (!prog || pc >= prog->ninsns) return v->s->at;
    nbc_srcloc l = prog_locs(prog)[pc];
    return (loc){(int)l.line, (int)l.col};
}

/* "rank R, round K, pc N (SEND ...): message", at the instruction's place in the schedule. */
static __attribute__((format(printf, 4, 5))) void fail_at(vctx *v, uint32_t rank, uint32_t pc, const char *fmt, ...)
{
    char msg[1024], what[160] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const nbc_program *prog = v->rk[rank].prog;
    if (prog && pc < prog->ninsns) {
        describe(&prog_insns(prog)[pc], what, sizeof what);
        loc at = where(v, rank, pc);
        diag_error(v->d, origin_of(v->lib, v->s, at), at, "rank %u, round %u, pc %u (%s): %s", rank, round_of(prog, pc), pc, what,
                   msg);
    } else {
        diag_error(v->d, v->s->src, v->s->at, "rank %u: %s", rank, msg);
    }
    v->failed = 1;
}

/* A second place involved in the failure, as a note. */
static void note_at(vctx *v, uint32_t rank, uint32_t pc, const char *what)
{
    const nbc_program *prog = v->rk[rank].prog;
    if (!prog || pc >= prog->ninsns) return;
    char ins[160];
    describe(&prog_insns(prog)[pc], ins, sizeof ins);
    loc at = where(v, rank, pc);
    diag_append(v->d, "%s:%d:%d: note: %s: rank %u, round %u, pc %u (%s)\n", origin_of(v->lib, v->s, at)->name, at.line, at.col, what, rank,
                round_of(prog, pc), pc, ins);
}

static void nomem(vctx *v)
{
    if (!v->failed) diag_error(v->d, v->s->src, v->s->at, "out of memory verifying '%s'", v->s->name);
    v->failed = 1;
}

/* Contributions [lo, hi) in words: "rank 3", "ranks 0..3", "rank 2's buffer 1". */
static void contrib_text(const vctx *v, char *out, size_t size, uint32_t lo, uint32_t hi)
{
    uint64_t n = (uint64_t)v->nbufs;
    if (n == 1 && hi - lo == 1) snprintf(out, size, "rank %u", lo);
    else if (n == 1) snprintf(out, size, "ranks %u..%u", lo, hi - 1);
    else if (hi - lo == 1) snprintf(out, size, "rank %" PRIu64 "'s buffer %" PRIu64, lo / n, lo % n);
    else snprintf(out, size, "rank %" PRIu64 "'s buffer %" PRIu64 " .. rank %" PRIu64 "'s buffer %" PRIu64, lo / n, lo % n,
                  (hi - 1) / n, (hi - 1) % n);
}

/* ---- setting up a rank ---- */

typedef struct {
    uint64_t send, recv, extra;   /* elements; extra: each other buffer of a multi-buffer call */
    uint64_t own_lo, own_hi;      /* where the rank's own input lies in recvbuf (in place, bcast) */
    uint64_t out;                 /* elements of recvbuf that hold the result */
} vshape;

/* MPI_IN_PLACE of a reduce, gather or scatter is the root's alone: the other ranks pass their
 * data as usual. */
static int inplace_at(const vctx *v, int64_t rank)
{
    if (v->coll == COLL_ALLREDUCE_MULTI) return 1; /* always in place: the buffers are the input */
    return collective_inplace_at(v->coll, rank, v->a->base.root, v->a->base.inplace);
}

static vshape shape_of(const vctx *v, int64_t rank)
{
    const verify_args *a = v->a;
    int inplace = inplace_at(v, rank);
    const compile_args *ca = v->ra ? &v->ra[rank] : &a->base;
    coll_shape sh = collective_shape_vec(v->coll, a->base.p, rank, a->base.root, ca->count, inplace, ca->vec);
    vshape s = {.send = inplace ? 0 : (uint64_t)sh.send_len, .recv = (uint64_t)sh.recv_len, .out = (uint64_t)sh.recv_len};
    if (v->coll == COLL_SCATTERV && inplace) s.send = (uint64_t)sh.send_len; /* its recvbuf is the one not there */
    if (inplace) {
        s.own_lo = (uint64_t)sh.inplace_send_off;
        s.own_hi = s.own_lo + (uint64_t)sh.send_len;
        if (s.own_hi > s.recv) s.recv = s.own_hi; /* sendbuf of an in-place call lies in the recv slot */
    }
    if (v->coll == COLL_BCAST && rank == a->base.root) s.own_lo = 0, s.own_hi = (uint64_t)a->base.count;
    if (v->coll == COLL_SCATTERV && inplace) s.own_lo = s.own_hi = 0, s.recv = 0;
    if ((v->coll == COLL_REDUCE_SCATTER || v->coll == COLL_REDUCE_SCATTERV) && inplace) s.out = (uint64_t)ca->count;
    if (v->coll == COLL_ALLREDUCE_MULTI) s.extra = (uint64_t)a->base.count;
    if (v->coll == COLL_EXSCAN && rank == 0 && !inplace) s.out = 0; /* untouched: nothing to expect */
    return s;
}

/* The buffers peers can name, whose accesses are checked: send, receive, shared scratch. */
static int nameable(int slot) { return slot == SLOT_SEND || slot == SLOT_RECV || slot == SLOT_SHARED; }

static const char *buffer_name(int slot, char *space, size_t size)
{
    return slot == SLOT_SHARED ? "shared scratch" : prog_buffer_name(slot, space, size);
}

/* Where an operand lies: its owner (the rank, or the peer for SLOT_PEER), slot and first
 * element. An in-place rank's sendbuf lies in its receive buffer, for peers as for itself. */
typedef struct {
    uint32_t rank;
    int slot;
    uint64_t lo;
} vref;

static vref resolve(const vctx *v, uint32_t r, const nbc_insn *in, int k)
{
    unsigned slot = prog_operand_slot(in, k);
    vref x = {r, (int)slot, prog_operand_off(in, k) / (uint64_t)v->a->base.esize};
    if (slot & SLOT_PEER) {
        x.rank = (uint32_t)in->peer;
        x.slot = (int)SLOT_INDEX(slot);
        if (x.slot == SLOT_SEND && inplace_at(v, x.rank)) x.slot = SLOT_RECV, x.lo += v->rk[x.rank].own_lo;
    }
    return x;
}

static int cut_add(cut_list *l, uint64_t x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        uint64_t *t = realloc(l->v, cap * sizeof *t);
        if (!t) return -1;
        l->v = t;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

/* Cuts every slot at each offset the program, and peers' operands naming it, touch, and fills
 * in the initial contents. */
static int setup_buffers(vctx *v, uint32_t rank, const vshape *sh)
{
    vrank *k = &v->rk[rank];
    const nbc_program *prog = k->prog;
    uint64_t es = prog->esize, len[NBC_MAX_SLOTS] = {sh->send, sh->recv, prog->scratch / es, prog->shared_bytes / es};
    size_t n[NBC_MAX_SLOTS] = {0};
    for (int s = SLOT_EXTRA; s < v->nslots; s++) len[s] = sh->extra;
    const nbc_insn *in = prog_insns(prog);
    for (uint32_t i = 0; i < prog->ninsns; i++)
        for (int o = 0; o < 3; o++)
            if (prog_operands(in[i].op) >> o & 1 && !(prog_operand_slot(&in[i], o) & SLOT_PEER)) n[prog_operand_slot(&in[i], o)] += 2;
    for (int s = 0; s < SLOT_COUNT_; s++) n[s] += k->pcut[s].n;
    uint64_t *cuts[NBC_MAX_SLOTS] = {0};
    int nomem = 0;
    for (int s = 0; s < v->nslots; s++) {
        cuts[s] = malloc((n[s] + 4) * sizeof(uint64_t));
        nomem |= !cuts[s];
        n[s] = 0;
    }
    if (nomem) {
        for (int s = 0; s < v->nslots; s++) free(cuts[s]);
        return -1;
    }
    for (uint32_t i = 0; i < prog->ninsns; i++)
        for (int o = 0; o < 3; o++) {
            unsigned s = prog_operand_slot(&in[i], o);
            if (!(prog_operands(in[i].op) >> o & 1) || (s & SLOT_PEER)) continue;
            uint64_t off = prog_operand_off(&in[i], o);
            cuts[s][n[s]++] = off / es;
            cuts[s][n[s]++] = (off + in[i].len) / es;
        }
    for (int s = 0; s < SLOT_COUNT_; s++)
        for (size_t i = 0; i < k->pcut[s].n; i++) cuts[s][n[s]++] = k->pcut[s].v[i];
    cuts[SLOT_RECV][n[SLOT_RECV]++] = sh->own_lo;
    cuts[SLOT_RECV][n[SLOT_RECV]++] = sh->own_hi;
    int rc = 0;
    for (int s = 0; s < v->nslots; s++)
        if (sym_buf_init(&k->buf[s], len[s], cuts[s], n[s])) rc = -1;
    for (int s = 0; s < SLOT_COUNT_ && v->shared && !rc; s++)
        if (nameable(s) && !(k->cells[s] = calloc(k->buf[s].ncells + 1, sizeof *k->cells[s]))) rc = -1;
    if (rc) return rc;
    uint32_t me = (uint32_t)(rank * v->nbufs); /* the rank's first contribution */
    if (sh->send) {
        sym_piece x = contribution(v, me, sh->send);
        rc |= sym_write(&k->buf[SLOT_SEND], 0, sh->send, &x, 1, SYM_INITIAL);
    }
    if (sh->own_hi > sh->own_lo) {
        sym_piece x = contribution(v, me, sh->own_hi - sh->own_lo);
        rc |= sym_write(&k->buf[SLOT_RECV], sh->own_lo, sh->own_hi, &x, 1, SYM_INITIAL);
    }
    for (int s = SLOT_EXTRA; s < v->nslots && sh->extra; s++) {
        sym_piece x = contribution(v, me + (uint32_t)(s - SLOT_EXTRA + 1), sh->extra);
        rc |= sym_write(&k->buf[s], 0, sh->extra, &x, 1, SYM_INITIAL);
    }
    return rc;
}

static void release(vrank *k)
{
    for (int s = 0; s < SLOT_COUNT_; s++) {
        hb_cells_free(k->cells[s], k->buf[s].ncells + 1);
        free(k->pcut[s].v);
        k->cells[s] = NULL;
        k->pcut[s] = (cut_list){0};
    }
    for (int s = 0; s < NBC_MAX_SLOTS; s++) sym_buf_free(&k->buf[s]);
    free(k->prog);
    free(k->heard);
    free(k->clk);
    free(k->inc);
    k->prog = NULL;
    k->heard = NULL;
    k->clk = k->inc = NULL;
}

/* Compiles and checks one rank's program on its own. */
static int load_rank(vctx *v, const sched_lib *lib, uint32_t rank)
{
    const verify_args *a = v->a;
    compile_args ca = v->ra ? v->ra[rank] : a->base;
    ca.rank = rank;
    ca.inplace = inplace_at(v, rank);
    vrank *k = &v->rk[rank];
    int rc = compile_program(lib, v->s, &ca, &k->prog, v->d);
    if (rc != COMPILE_OK) {
        if (rc == COMPILE_NOMEM) nomem(v);
        v->failed = 1;
        return -1;
    }
    vshape sh = shape_of(v, rank);
    k->own_lo = sh.own_lo;
    uint64_t es = (uint64_t)a->base.esize,
             bytes[NBC_MAX_SLOTS] = {sh.send * es, sh.recv * es, k->prog->scratch, k->prog->shared_bytes};
    for (int s = SLOT_EXTRA; s < v->nslots; s++) bytes[s] = sh.extra * es;
    prog_fault f;
    rc = prog_check_rank(k->prog, a->base.p, rank, bytes, v->nslots, &f);
    if (rc < 0) {
        nomem(v);
        return -1;
    }
    if (rc > 0) {
        fail_at(v, rank, f.pc, "%s", f.msg);
        if (f.other != UINT32_MAX) note_at(v, rank, f.other, "the other instruction");
        return -1;
    }
    if (k->prog->scratch % es) {
        fail_at(v, rank, UINT32_MAX, "scratch of %" PRIu64 " bytes is not a whole number of elements", k->prog->scratch);
        return -1;
    }
    v->shared |= (k->prog->flags & PROG_SHARED) != 0;
    v->st.programs++;
    v->st.insns += k->prog->ninsns;
    return 0;
}

/* A shared-memory program's peer operands (prog_check_rank has checked the rest): within the
 * peer's own buffers; their offsets become cuts of the peer's buffers. */
static int check_peers(vctx *v, uint32_t r)
{
    const nbc_program *prog = v->rk[r].prog;
    uint64_t es = prog->esize;
    for (uint32_t pc = 0; pc < prog->ninsns; pc++) {
        const nbc_insn *in = &prog_insns(prog)[pc];
        for (int o = 0; o < 3; o++) {
            if (!(prog_operands(in->op) >> o & 1) || !(prog_operand_slot(in, o) & SLOT_PEER)) continue;
            vref x = resolve(v, r, in, o);
            vshape sh = shape_of(v, x.rank);
            uint64_t len = x.slot == SLOT_SEND   ? sh.send
                           : x.slot == SLOT_RECV ? sh.recv
                                                 : v->rk[x.rank].prog->shared_bytes / es,
                     hi = x.lo + in->len / es;
            if (hi > len) {
                char name[24];
                fail_at(v, r, pc, "%s elements [%" PRIu64 ", %" PRIu64 ") of rank %u's %s, which holds %" PRIu64 " elements",
                        prog_opinfo(in->op)->writes >> o & 1 ? "writes" : "reads", x.lo, hi, x.rank,
                        buffer_name(x.slot, name, sizeof name), len);
                return -1;
            }
            if (cut_add(&v->rk[x.rank].pcut[x.slot], x.lo) || cut_add(&v->rk[x.rank].pcut[x.slot], hi)) {
                nomem(v);
                return -1;
            }
        }
    }
    return 0;
}

/* Buffers, barrier sets and clocks, once every program is loaded. */
static int ready_rank(vctx *v, uint32_t rank)
{
    vrank *k = &v->rk[rank];
    vshape sh = shape_of(v, rank);
    if (setup_buffers(v, rank, &sh)) return -1;
    if (v->heard_words) {
        k->heard = calloc(v->heard_words, sizeof *k->heard);
        if (!k->heard) return -1;
        k->heard[rank / 64] |= 1ull << (rank % 64);
        if (k->prog->flags & PROG_AGREE) /* the runtime's agreement: every rank has arrived */
            for (int64_t q = 0; q < v->p; q++) k->heard[q / 64] |= 1ull << (q % 64);
    }
    if (v->shared) {
        size_t p = (size_t)v->p;
        k->clk = calloc((k->prog->nrounds + 1) * p, sizeof *k->clk);
        k->inc = calloc(p, sizeof *k->inc);
        if (!k->clk || !k->inc) return -1;
        /* the runtime's agreement: a PROG_AGREE program starts after every rank has */
        for (size_t q = 0; q < p && (k->prog->flags & PROG_AGREE); q++) k->clk[q] = 1;
    }
    return 0;
}

/* ---- running ---- */

static void matched(vctx *v, uint32_t r)
{
    vrank *k = &v->rk[r];
    k->pending--;
    if (k->issued && k->pending == 0 && !k->done) net_ready(&v->net, r);
}

/* REDUCE a := b ⊕ a over lists B (left operand) and A (right), into out. */
static void combine(vctx *v, uint32_t rank, uint32_t pc, const sym_list *B, const sym_list *A, sym_list *out)
{
    size_t i = 0, j = 0;
    sym_piece x = B->n ? B->v[0] : (sym_piece){0}, y = A->n ? A->v[0] : (sym_piece){0};
    uint64_t pos = 0;
    while (i < B->n && j < A->n) {
        uint64_t l = x.len < y.len ? x.len : y.len;
        sym_piece l_op = sym_take(&x, l), r_op = sym_take(&y, l);
        if (l_op.cnt == 0 || r_op.cnt == 0) {
            fail_at(v, rank, pc, "elements [%" PRIu64 ", %" PRIu64 ") of its %s operand hold no value yet (never written)", pos,
                    pos + l, l_op.cnt == 0 ? "source" : "destination");
            return;
        }
        if (l_op.orig != r_op.orig) {
            fail_at(v, rank, pc, "combines element %" PRIu64 " of the input with element %" PRIu64 " (at offset %" PRIu64 " of the operands): not the same elements",
                    l_op.orig, r_op.orig, pos);
            return;
        }
        if (v->check_order && l_op.hi != r_op.lo) {
            char left[96], right[96], gap[96], what[128];
            contrib_text(v, left, sizeof left, l_op.lo, l_op.hi);
            contrib_text(v, right, sizeof right, r_op.lo, r_op.hi);
            if (l_op.lo >= r_op.hi) {
                snprintf(what, sizeof what, "the higher ranks are on the left");
            } else if (l_op.hi > r_op.lo) {
                snprintf(what, sizeof what, "they overlap: a contribution would count twice");
            } else {
                contrib_text(v, gap, sizeof gap, l_op.hi, r_op.lo);
                snprintf(what, sizeof what, "%s %s missing between them", gap, r_op.lo - l_op.hi > 1 ? "are" : "is");
            }
            fail_at(v, rank, pc, "wrong reduction order for an 'ordered' schedule: combines %s (left) with %s (right), but %s; it must be rank 0 ⊕ 1 ⊕ ... ⊕ %" PRId64 " left to right%s",
                    left, right, what, v->p - 1, v->nbufs > 1 ? ", each rank's buffers in order" : "");
            return;
        }
        uint64_t cnt = (uint64_t)l_op.cnt + r_op.cnt;
        sym_piece z = {.len = l, .orig = l_op.orig, .sum = l_op.sum + r_op.sum, .cnt = cnt > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)cnt,
                       .lo = l_op.lo < r_op.lo ? l_op.lo : r_op.lo, .hi = l_op.hi > r_op.hi ? l_op.hi : r_op.hi};
        /* the grouping of operands: with a commutative op only the unordered pair matters */
        z.tree = v->a->base.commutative ? mix64(l_op.tree + r_op.tree + 0x2545F4914F6CDD1Dull)
                                   : mix64(l_op.tree * 0x9E3779B97F4A7C15ull + r_op.tree);
        if (sym_list_add(out, z)) {
            nomem(v);
            return;
        }
        pos += l;
        if (x.len == 0 && ++i < B->n) x = B->v[i];
        if (y.len == 0 && ++j < A->n) y = A->v[j];
    }
}

/* ---- shared memory: clocks, accesses, flags (hb.h) ---- */

/* The clock of rank r's current round, as it started (NULL unless shared). */
static const uint32_t *clock_of(const vctx *v, uint32_t r)
{
    const vrank *k = &v->rk[r];
    return k->clk ? k->clk + (size_t)k->round * (size_t)v->p : NULL;
}

/* What a matched SIGNAL or message brings to rank r by the end of its round. */
static void join(vctx *v, uint32_t r, const vpost *from)
{
    if (from->clk && v->rk[r].inc) hb_join(v->rk[r].inc, from->clk, (uint32_t)v->p, from->rank, from->own);
}

/* "rank 1's recvbuf elements [0, 4)" */
static void range_text(uint32_t owner, int slot, uint64_t lo, uint64_t hi, char *out, size_t size)
{
    char name[24];
    snprintf(out, size, "rank %u's %s elements [%" PRIu64 ", %" PRIu64 ")", owner, buffer_name(slot, name, sizeof name), lo, hi);
}

static void after_return(vctx *v, uint32_t who, uint32_t pc, int writes, uint32_t owner, const char *what)
{
    fail_at(v, who, pc, "%s %s after rank %u may have returned: nothing orders the access before the end of rank %u's program, when its buffers are its application's again",
            writes ? "writes" : "reads", what, owner, owner);
}

/* Rank who's access (pc; epoch to record) to elements [x.lo, hi) of a send or receive buffer:
 * it must be ordered with every other rank's access to them unless both read, and come before
 * the owner's program ends. */
static void track(vctx *v, uint32_t who, uint32_t pc, vref x, uint64_t hi, int writes, uint32_t epoch)
{
    if (!v->shared || !nameable(x.slot) || v->failed || x.lo == hi) return;
    vrank *o = &v->rk[x.rank];
    sym_buf *b = &o->buf[x.slot];
    char what[96];
    if (o->done && x.slot != SLOT_SHARED) { /* it ended before this access in this run, so the access cannot come first */
        range_text(x.rank, x.slot, x.lo, hi, what, sizeof what);
        after_return(v, who, pc, writes, x.rank, what);
        return;
    }
    for (int64_t c = sym_cell_at(b, x.lo); c >= 0 && c < (int64_t)b->ncells && b->cut[c] < hi; c++) {
        hb_access other;
        int rc = hb_access_cell(&o->cells[x.slot][c], who, pc, epoch, writes, clock_of(v, who), &other);
        if (rc < 0) {
            nomem(v);
            return;
        }
        if (rc > 0) {
            range_text(x.rank, x.slot, b->cut[c], b->cut[c + 1], what, sizeof what);
            fail_at(v, who, pc, "race: %s %s, and rank %u (round %u, pc %u) %s them; neither happens before the other (no chain of SIGNAL and WAIT or messages orders them)",
                    writes ? "writes" : "reads", what, other.rank, round_of(v->rk[other.rank].prog, other.pc), other.pc,
                    rc == HB_WRITE ? "writes" : "reads");
            note_at(v, other.rank, other.pc, "the other access");
            return;
        }
    }
}

/* At the end of owner's program: every access of another rank to its send and receive buffers
 * came before (its shared scratch outlives the program: the runtime keeps it until every rank
 * has ended the call). */
static void check_returned(vctx *v, uint32_t owner)
{
    vrank *o = &v->rk[owner];
    const uint32_t *clk = o->clk + (size_t)o->prog->nrounds * (size_t)v->p;
    for (int s = 0; s < 2 && !v->failed; s++)
        for (uint32_t c = 0; c < o->buf[s].ncells && !v->failed; c++) {
            hb_access bad;
            int rc = hb_unknown(&o->cells[s][c], owner, clk, &bad);
            if (!rc) continue;
            char what[96];
            range_text(owner, s, o->buf[s].cut[c], o->buf[s].cut[c + 1], what, sizeof what);
            after_return(v, bad.rank, bad.pc, rc == HB_WRITE, owner, what);
        }
}

/* The last writer of a cell of rank's buffer: rank and pc (SYM_INITIAL: its initial contents). */
static void last_writer(const vctx *v, uint32_t rank, int slot, uint32_t c, uint32_t *wrank, uint32_t *wpc)
{
    const vrank *k = &v->rk[rank];
    *wrank = rank;
    *wpc = k->buf[slot].cell[c].writer;
    if (slot < SLOT_COUNT_ && k->cells[slot]) { /* shared: maybe a peer */
        const hb_cell *h = &k->cells[slot][c];
        *wrank = h->has_w ? h->w.rank : rank;
        *wpc = h->has_w ? h->w.pc : SYM_INITIAL;
    }
}

static void raise_signal(vctx *v, uint32_t r, uint32_t pc, const nbc_insn *in)
{
    uint32_t peer = (uint32_t)in->peer;
    vpost me = {r, v->rk[r].round, pc, 0, NULL, 0, NULL, clock_of(v, r), hb_signal(pc)}, w;
    if (net_take(&v->net, r, net_flags(peer), SIDE_RECV, &w)) {
        join(v, peer, &me);
        matched(v, peer);
    } else if (net_post(&v->net, r, net_flags(peer), SIDE_SEND, &me)) {
        nomem(v);
    }
}

static void arm_wait(vctx *v, uint32_t r, uint32_t pc, const nbc_insn *in)
{
    uint32_t peer = (uint32_t)in->peer;
    vpost me = {r, v->rk[r].round, pc, 0, NULL, 0, NULL, NULL, 0}, sig;
    v->rk[r].pending++;
    if (net_take(&v->net, peer, net_flags(r), SIDE_SEND, &sig)) {
        join(v, r, &sig);
        matched(v, r);
    } else if (net_post(&v->net, peer, net_flags(r), SIDE_RECV, &me)) {
        nomem(v);
    }
}

/* A matched pair: the send's contents land in the receiver's buffer (and, for a barrier, what
 * the sender had heard of when it sent). */
static void deliver(vctx *v, const vpost *snd, const sym_piece *data, size_t n, const uint64_t *heard, const vpost *rcv)
{
    if (snd->len != rcv->len) {
        fail_at(v, rcv->rank, rcv->pc, "size mismatch: receives %" PRIu64 " bytes, but the matching message from rank %u is %" PRIu64 " bytes",
                rcv->len, snd->rank, snd->len);
        note_at(v, snd->rank, snd->pc, "the matching send");
        return;
    }
    const nbc_insn *in = &prog_insns(v->rk[rcv->rank].prog)[rcv->pc];
    uint64_t es = (uint64_t)v->a->base.esize;
    if (sym_write(&v->rk[rcv->rank].buf[in->a_slot], in->a_off / es, (in->a_off + in->len) / es, data, n, rcv->pc)) nomem(v);
    for (size_t i = 0; heard && i < v->heard_words; i++) v->rk[rcv->rank].heard[i] |= heard[i];
    join(v, rcv->rank, snd);
    v->st.messages++;
    v->st.bytes += snd->len;
    matched(v, snd->rank);
    matched(v, rcv->rank);
}

static void post_send(vctx *v, uint32_t r, uint32_t pc, const nbc_insn *in, const sym_list *data)
{
    vpost me = {r, v->rk[r].round, pc, in->len, NULL, 0, NULL, clock_of(v, r), hb_signal(pc)};
    uint32_t peer = (uint32_t)in->peer;
    v->rk[r].pending++;
    vpost rcv;
    if (net_take(&v->net, r, peer, SIDE_RECV, &rcv)) {
        deliver(v, &me, data->v, data->n, v->rk[r].heard, &rcv);
        return;
    }
    me.n = data->n;
    me.data = malloc((data->n ? data->n : 1) * sizeof *me.data);
    if (v->heard_words) me.heard = malloc(v->heard_words * sizeof *me.heard);
    if (!me.data || (v->heard_words && !me.heard)) {
        free(me.data);
        free(me.heard);
        nomem(v);
        return;
    }
    memcpy(me.data, data->v, data->n * sizeof *me.data);
    if (me.heard) memcpy(me.heard, v->rk[r].heard, v->heard_words * sizeof *me.heard);
    if (net_post(&v->net, r, peer, SIDE_SEND, &me)) {
        free(me.data);
        free(me.heard);
        nomem(v);
    }
}

static void post_recv(vctx *v, uint32_t r, uint32_t pc, const nbc_insn *in)
{
    vpost me = {r, v->rk[r].round, pc, in->len, NULL, 0, NULL, NULL, 0};
    uint32_t peer = (uint32_t)in->peer;
    v->rk[r].pending++;
    vpost snd;
    if (net_take(&v->net, peer, r, SIDE_SEND, &snd)) {
        deliver(v, &snd, snd.data, snd.n, snd.heard, &me);
        free(snd.data);
        free(snd.heard);
        return;
    }
    if (net_post(&v->net, peer, r, SIDE_RECV, &me)) nomem(v);
}

static void issue(vctx *v, uint32_t r)
{
    vrank *k = &v->rk[r];
    const nbc_program *prog = k->prog;
    uint64_t es = prog->esize;
    uint32_t end = hb_round_end(prog_rounds(prog), k->round); /* when its messages are done with */
    for (uint32_t pc = prog_rounds(prog)[k->round]; pc < prog_rounds(prog)[k->round + 1] && !v->failed; pc++) {
        const nbc_insn *in = &prog_insns(prog)[pc];
        uint64_t n = in->len / es;
        vref a = resolve(v, r, in, 0), b = resolve(v, r, in, 1);
        v->t1.n = v->t2.n = v->t3.n = 0;
        int rc = 0;
        switch (in->op) {
        case OP_COPY:
            track(v, r, pc, b, b.lo + n, 0, hb_insn(pc));
            track(v, r, pc, a, a.lo + n, 1, hb_insn(pc));
            if (v->failed) break;
            rc = sym_read(&v->rk[b.rank].buf[b.slot], b.lo, b.lo + n, &v->t1) ||
                 sym_write(&v->rk[a.rank].buf[a.slot], a.lo, a.lo + n, v->t1.v, v->t1.n, pc);
            break;
        case OP_REDUCE:
        case OP_COMBINE: {
            /* the right operand: a itself, or c for COMBINE */
            vref c = in->op == OP_COMBINE ? resolve(v, r, in, 2) : a;
            track(v, r, pc, b, b.lo + n, 0, hb_insn(pc));
            if (in->op == OP_COMBINE) track(v, r, pc, c, c.lo + n, 0, hb_insn(pc));
            track(v, r, pc, a, a.lo + n, 1, hb_insn(pc));
            if (v->failed) break;
            rc = sym_read(&v->rk[b.rank].buf[b.slot], b.lo, b.lo + n, &v->t1) ||
                 sym_read(&v->rk[c.rank].buf[c.slot], c.lo, c.lo + n, &v->t2);
            if (rc) break;
            combine(v, r, pc, &v->t1, &v->t2, &v->t3);
            if (!v->failed) rc = sym_write(&v->rk[a.rank].buf[a.slot], a.lo, a.lo + n, v->t3.v, v->t3.n, pc);
            break;
        }
        case OP_SEND:
            track(v, r, pc, a, a.lo + n, 0, end);
            rc = sym_read(&k->buf[a.slot], a.lo, a.lo + n, &v->t1);
            if (!rc) post_send(v, r, pc, in, &v->t1);
            break;
        case OP_RECV:
            track(v, r, pc, a, a.lo + n, 1, end);
            post_recv(v, r, pc, in);
            break;
        case OP_SIGNAL: raise_signal(v, r, pc, in); break;
        case OP_WAIT: arm_wait(v, r, pc, in); break;
        }
        if (rc) nomem(v);
    }
}

/* ---- the result ---- */

/* What recvbuf[pos] must hold at the end on `rank`, and for how many elements on. */
static sym_piece expected(const vctx *v, uint32_t rank, uint64_t pos, uint64_t out)
{
    const verify_args *a = v->a;
    sym_piece all = {.len = out - pos, .orig = pos, .sum = v->total, .cnt = (uint32_t)v->ncontrib, .lo = 0, .hi = (uint32_t)v->ncontrib};
    switch (v->coll) {
    case COLL_REDUCE_SCATTER: all.orig = (uint64_t)rank * (uint64_t)a->base.count + pos; return all;
    case COLL_BCAST: {
        sym_piece x = contribution(v, (uint32_t)a->base.root, out - pos);
        x.orig = pos;
        return x;
    }
    case COLL_ALLGATHER:
    case COLL_GATHER: {
        uint64_t c = (uint64_t)a->base.count, blk = pos / c;
        sym_piece x = contribution(v, (uint32_t)blk, c - pos % c);
        x.orig = pos % c;
        return x;
    }
    case COLL_ALLTOALL: { /* block b is rank b's block `rank` */
        uint64_t c = (uint64_t)a->base.count, blk = pos / c;
        sym_piece x = contribution(v, (uint32_t)blk, c - pos % c);
        x.orig = rank * c + pos % c;
        return x;
    }
    case COLL_SCATTER: { /* the root's block `rank`; in place, the root's whole input, untouched */
        sym_piece x = contribution(v, (uint32_t)a->base.root, out - pos);
        x.orig = (inplace_at(v, rank) ? 0 : rank * (uint64_t)a->base.count) + pos;
        return x;
    }
    case COLL_SCAN:
    case COLL_EXSCAN: { /* ranks 0 .. rank (or rank - 1), in rank order; exscan's rank 0 keeps its input */
        uint32_t hi = v->coll == COLL_SCAN ? rank + 1 : rank;
        if (hi == 0) {
            sym_piece x = contribution(v, 0, out - pos);
            x.orig = pos;
            return x;
        }
        sym_piece x = {.len = out - pos, .orig = pos, .sum = 0, .cnt = hi, .lo = 0, .hi = hi};
        for (uint32_t q = 0; q < hi; q++) x.sum += key(v, q);
        return x;
    }
    case COLL_SCATTERV: {
        const compile_args *r = &v->ra[a->base.root];
        sym_piece x = contribution(v, (uint32_t)a->base.root, out - pos);
        x.orig = (uint64_t)r->vec[VEC_SDISPLS][rank] + pos;
        return x;
    }
    case COLL_REDUCE_SCATTERV:
        all.orig = pos;
        for (uint32_t j = 0; j < rank; j++) all.orig += (uint64_t)v->ra[rank].vec[VEC_RCOUNTS][j];
        return all;
    case COLL_ALLTOALLV:
    case COLL_GATHERV:
    case COLL_ALLGATHERV: { /* the block that holds pos, else a gap, which keeps what it held */
        const compile_args *me = &v->ra[rank];
        const int64_t *rc = me->vec[VEC_RCOUNTS], *rd = me->vec[VEC_RDISPLS];
        uint64_t next = out;
        for (int64_t j = 0; rc && j < v->p; j++) {
            if (rc[j] == 0) continue;
            uint64_t lo = (uint64_t)rd[j], hi = lo + (uint64_t)rc[j];
            if (pos >= lo && pos < hi) {
                sym_piece x = contribution(v, (uint32_t)j, hi - pos);
                x.orig = (v->coll == COLL_ALLTOALLV ? (uint64_t)v->ra[j].vec[VEC_SDISPLS][rank] : 0) + pos - lo;
                return x;
            }
            if (lo > pos && lo < next) next = lo;
        }
        vshape sh = shape_of(v, rank);
        if (pos >= sh.own_lo && pos < sh.own_hi) {
            sym_piece x = contribution(v, rank, (sh.own_hi < next ? sh.own_hi : next) - pos);
            x.orig = pos - sh.own_lo;
            return x;
        }
        if (sh.own_lo > pos && sh.own_lo < next) next = sh.own_lo;
        return (sym_piece){.len = next - pos, .cnt = 0};
    }
    default: return all;
    }
}

/* Why a run's set of contributions differs from the one expected. */
static void explain(const vctx *v, const sym_piece *got, const sym_piece *want, char *out, size_t size)
{
    char who[96], whom[96];
    uint32_t found = UINT32_MAX;
    for (uint64_t q = 0; q < v->ncontrib && found == UINT32_MAX; q++) {
        uint64_t k = key(v, q);
        if ((want->cnt == 1 && got->cnt == 1 && got->sum == k) || (got->cnt + 1 == want->cnt && want->sum - got->sum == k) ||
            (got->cnt == want->cnt + 1 && got->sum - want->sum == k))
            found = (uint32_t)q;
    }
    if (found != UINT32_MAX) contrib_text(v, who, sizeof who, found, found + 1);
    if (found != UINT32_MAX && want->cnt == 1 && got->cnt == 1) {
        contrib_text(v, whom, sizeof whom, want->lo, want->hi);
        snprintf(out, size, "hold %s's data instead of %s's", who, whom);
    } else if (found != UINT32_MAX && got->cnt < want->cnt) {
        snprintf(out, size, "miss %s's contribution", who);
    } else if (found != UINT32_MAX) {
        snprintf(out, size, "count %s's contribution twice", who);
    } else {
        snprintf(out, size, "combine %u contributions where %u are expected, each once (some are missing or repeated)", got->cnt,
                 want->cnt);
    }
}

/* For an ordered allreduce: the same expression tree as the reference rank, run by run. */
static void compare_tree(vctx *v, uint32_t rank, const sym_list *mine)
{
    if (v->ref_rank < 0) {
        v->ref_rank = rank;
        for (size_t i = 0; i < mine->n; i++)
            if (sym_list_add(&v->ref, mine->v[i])) nomem(v);
        return;
    }
    size_t i = 0, j = 0;
    sym_piece x = mine->n ? mine->v[0] : (sym_piece){0}, y = v->ref.n ? v->ref.v[0] : (sym_piece){0};
    uint64_t pos = 0;
    while (i < mine->n && j < v->ref.n) {
        uint64_t l = x.len < y.len ? x.len : y.len;
        if (x.tree != y.tree) {
            const sym_buf *b = &v->rk[rank].buf[SLOT_RECV];
            int64_t c = 0;
            while ((uint64_t)c + 1 < b->ncells && b->cut[c + 1] <= pos) c++;
            uint32_t wrank = rank, wpc = UINT32_MAX;
            char whose[32] = "";
            if (b->ncells) last_writer(v, rank, SLOT_RECV, (uint32_t)c, &wrank, &wpc);
            if (wrank != rank) snprintf(whose, sizeof whose, "rank %u's ", rank);
            fail_at(v, wrank, wpc,
                    "%srecvbuf elements [%" PRIu64 ", %" PRIu64 ") group the operands differently than on rank %" PRId64 ": an 'ordered' schedule must give bit-identical results on every rank",
                    whose, pos, pos + l, v->ref_rank);
            return;
        }
        sym_take(&x, l);
        sym_take(&y, l);
        pos += l;
        if (x.len == 0 && ++i < mine->n) x = mine->v[i];
        if (y.len == 0 && ++j < v->ref.n) y = v->ref.v[j];
    }
}

/* Compares elements [0, out) of one buffer with the collective's result. */
static void check_buffer(vctx *v, uint32_t rank, int slot, uint64_t out)
{
    const sym_buf *b = &v->rk[rank].buf[slot];
    char name[24];
    for (uint32_t c = 0; c < b->ncells && b->cut[c] < out && !v->failed; c++) {
        const sym_cell *cell = &b->cell[c];
        const sym_piece *pieces = sym_cell_pieces(cell);
        uint64_t pos = b->cut[c];
        for (uint32_t k = 0; k < cell->n && pos < out && !v->failed; k++) {
            sym_piece got = pieces[k];
            while (got.len > 0 && pos < out) {
                sym_piece want = expected(v, rank, pos, out);
                uint64_t l = got.len < want.len ? got.len : want.len;
                char why[300] = "";
                if (want.cnt == 0) {
                    if (got.cnt != 0) snprintf(why, sizeof why, "are written, though they lie outside every block");
                } else if (got.cnt == 0)
                    snprintf(why, sizeof why, "are never written");
                else if (got.orig != want.orig)
                    snprintf(why, sizeof why, "hold input elements from %" PRIu64 " on instead of from %" PRIu64, got.orig, want.orig);
                else if (got.sum != want.sum || got.cnt != want.cnt)
                    explain(v, &got, &want, why, sizeof why);
                if (why[0]) {
                    uint32_t wrank, wpc;
                    char whose[32] = "";
                    last_writer(v, rank, slot, c, &wrank, &wpc);
                    if (wrank != rank) snprintf(whose, sizeof whose, "rank %u's ", rank);
                    fail_at(v, wrank, wpc, "%s%s elements [%" PRIu64 ", %" PRIu64 ") end wrong: they %s%s", whose,
                            prog_buffer_name(slot, name, sizeof name), pos, pos + l, why,
                            wpc == SYM_INITIAL ? "" : " (this instruction wrote them last)");
                    return;
                }
                sym_take(&got, l);
                pos += l;
            }
        }
    }
}

/* A barrier may let a rank go only once every rank has arrived: it must have heard from each,
 * directly or through others. */
static void check_heard(vctx *v, uint32_t rank)
{
    const uint64_t *h = v->rk[rank].heard;
    for (int64_t q = 0; q < v->p; q++)
        if (!(h[q / 64] >> (q % 64) & 1)) {
            const nbc_program *prog = v->rk[rank].prog;
            fail_at(v, rank, prog->ninsns ? prog->ninsns - 1 : UINT32_MAX,
                    "leaves the barrier without having heard from rank %" PRId64 ", even through others: it may leave before rank %" PRId64 " arrives",
                    q, q);
            return;
        }
}

static void check_result(vctx *v, uint32_t rank)
{
    if (v->heard_words) check_heard(v, rank);
    vshape sh = shape_of(v, rank);
    uint64_t out = v->coll == COLL_BARRIER ? 0 : sh.out;
    check_buffer(v, rank, SLOT_RECV, out);
    for (int s = SLOT_EXTRA; s < v->nslots; s++) check_buffer(v, rank, s, sh.extra);
    if (v->check_tree && !v->failed && out > 0) {
        v->t1.n = 0;
        if (sym_read(&v->rk[rank].buf[SLOT_RECV], 0, out, &v->t1)) nomem(v);
        else compare_tree(v, rank, &v->t1);
    }
}

static void advance(vctx *v, uint32_t r)
{
    vrank *k = &v->rk[r];
    while (!k->done && !v->failed) {
        if (k->issued) {
            if (k->pending) return;
            if (k->clk) { /* the next round knows what this one's WAITs and RECVs brought */
                size_t p = (size_t)v->p;
                uint32_t *now = k->clk + k->round * p, *next = now + p;
                for (size_t q = 0; q < p; q++) next[q] = now[q] > k->inc[q] ? now[q] : k->inc[q];
            }
            k->round++;
            k->issued = 0;
        }
        if (k->round == k->prog->nrounds) {
            if (v->shared) check_returned(v, r);
            else check_result(v, r); /* shared: once all are done, when peers' late writes are reported */
            k->done = 1;
            if (!v->shared) release(k); /* shared: peers' accesses may still name it */
            return;
        }
        issue(v, r);
        k->issued = 1;
    }
}

/* ---- when nothing can move ---- */

typedef struct {
    vctx *v;
    uint32_t *pc, *peer; /* per rank: its oldest unmatched operation and the rank it waits for */
} stuck_scan;

static void oldest(void *ctx, uint32_t src, uint32_t dst, int side, void *item)
{
    stuck_scan *s = ctx;
    const vpost *w = item;
    if ((dst & NET_FLAGS) && side == SIDE_SEND) return; /* a SIGNAL raised waits for nothing */
    uint32_t peer = side == SIDE_SEND ? dst : src;
    if (w->pc < s->pc[w->rank]) {
        s->pc[w->rank] = w->pc;
        s->peer[w->rank] = peer;
    }
}

static void report_stuck(vctx *v)
{
    uint32_t *pc = malloc((size_t)v->p * sizeof *pc), *peer = malloc((size_t)v->p * sizeof *peer);
    uint32_t *seen = calloc((size_t)v->p, sizeof *seen);
    if (!pc || !peer || !seen) {
        free(pc), free(peer), free(seen);
        nomem(v);
        return;
    }
    for (int64_t r = 0; r < v->p; r++) pc[r] = UINT32_MAX;
    stuck_scan s = {v, pc, peer};
    net_each(&v->net, oldest, &s);
    uint32_t r = 0;
    while ((int64_t)r < v->p && v->rk[r].done) r++;
    /* follow "waits for" edges until a finished rank or a rank already on the path */
    uint32_t step = 1;
    while (pc[r] != UINT32_MAX && !seen[r] && !v->rk[peer[r]].done) {
        seen[r] = step++;
        r = peer[r];
    }
    if (pc[r] == UINT32_MAX) {
        fail_at(v, r, UINT32_MAX, "stopped in round %u with nothing to wait for (internal error)", v->rk[r].round);
    } else if (!seen[r]) {
        const nbc_insn *in = &prog_insns(v->rk[r].prog)[pc[r]];
        fail_at(v, r, pc[r],
                in->op == OP_SEND   ? "unmatched send: rank %u finished without receiving it"
                : in->op == OP_WAIT ? "unmatched wait: rank %u finished without raising the matching signal, so this rank never completes"
                                    : "unmatched receive: rank %u finished without sending it",
                peer[r]);
    } else {
        /* r is on a cycle: list it from r */
        char text[900] = "";
        size_t len = 0, n = 0;
        uint32_t q = r;
        do {
            if (n < 8) {
                const nbc_insn *in = &prog_insns(v->rk[q].prog)[pc[q]];
                len += (size_t)snprintf(text + len, sizeof text - len, "rank %u (round %u, pc %u: %s %s %d) waits for ", q,
                                        v->rk[q].round, pc[q], prog_opcode_name(in->op),
                                        in->op == OP_SEND ? "to" : in->op == OP_WAIT ? "on" : "from", in->peer);
            }
            n++;
            q = peer[q];
        } while (q != r && len < sizeof text);
        if (n > 8) snprintf(text + len, sizeof text - len, "... (%zu ranks in the cycle) ", n);
        fail_at(v, r, pc[r], "deadlock: %srank %u", text, r);
        q = peer[r];
        for (size_t i = 1; i < n && i < 8; i++, q = peer[q]) note_at(v, q, pc[q], "waiting");
    }
    free(pc);
    free(peer);
    free(seen);
}

/* A SIGNAL left when every rank has finished: its flag would still be set in the next call. */
static void unwaited(void *ctx, uint32_t src, uint32_t dst, int side, void *item)
{
    vctx *v = ctx;
    if (v->failed || !(dst & NET_FLAGS) || side != SIDE_SEND) return;
    const vpost *w = item;
    fail_at(v, src, w->pc, "signal never waited for: rank %u finished without waiting for it, and a flag left set would corrupt the next call on this pair of ranks",
            dst & ~NET_FLAGS);
}

static void drop_post(void *item)
{
    free(((vpost *)item)->data);
    free(((vpost *)item)->heard);
}

static void run(vctx *v, const sched_lib *lib)
{
    for (int64_t r = 0; r < v->p && !v->failed; r++) load_rank(v, lib, (uint32_t)r);
    for (int64_t r = 0; r < v->p && !v->failed && v->shared; r++) check_peers(v, (uint32_t)r);
    for (int64_t r = 0; r < v->p && !v->failed; r++)
        if (ready_rank(v, (uint32_t)r)) nomem(v);
    for (int64_t r = 0; r < v->p && !v->failed; r++) net_ready(&v->net, (uint32_t)r);
    for (uint32_t next; !v->failed && net_next(&v->net, &next);) advance(v, next);
    if (v->failed) return;
    for (int64_t r = 0; r < v->p; r++)
        if (!v->rk[r].done) {
            report_stuck(v);
            return;
        }
    if (v->shared) net_each(&v->net, unwaited, v);
    for (int64_t r = 0; r < v->p && v->shared && !v->failed; r++) check_result(v, (uint32_t)r);
}

int verify_schedule(const sched_lib *lib, const sched_def *s, const verify_args *a, diag *d, verify_stats *st)
{
    compile_args ca = a->base;
    ca.rank = 0;
    diag quiet;
    diag_init(&quiet);
    int rc = compile_check(lib, s, &ca, &quiet);
    if (rc == COMPILE_UNMET) {
        diag_free(&quiet);
        return VERIFY_SKIP;
    }
    if (rc != COMPILE_OK) {
        diag_append(d, "%s", quiet.text ? quiet.text : "");
        d->errors++;
        diag_free(&quiet);
        return VERIFY_FAIL;
    }
    diag_free(&quiet);
    if (a->base.p > INT32_MAX / NBC_MAX_BUFFERS || a->base.root < 0 || a->base.root >= a->base.p) {
        diag_error(d, s->src, s->at, "cannot verify '%s' for p = %" PRId64 ", root = %" PRId64, s->name, a->base.p, a->base.root);
        return VERIFY_FAIL;
    }

    vctx v = {.lib = lib, .s = s, .a = a, .d = d, .p = a->base.p, .ref_rank = -1};
    v.coll = (nbc_collective)(s->collective ? collective_from_name(s->collective) : COLL_ALLREDUCE);
    if (collective_has_vectors(v.coll)) {
        size_t p = (size_t)a->base.p;
        v.ra = calloc(p, sizeof *v.ra);
        v.vecs = malloc(4 * p * p * sizeof *v.vecs);
        if (!v.ra || !v.vecs) {
            free(v.ra);
            free(v.vecs);
            diag_error(d, s->src, s->at, "out of memory verifying '%s'", s->name);
            return VERIFY_FAIL;
        }
        for (size_t r = 0; r < p; r++) {
            v.ra[r] = a->base;
            v.ra[r].rank = (int64_t)r;
            v.ra[r].inplace = inplace_at(&v, (int64_t)r);
            verify_vectors(v.coll, a->vcase, a->seed, &v.ra[r], (int64_t)r, v.vecs + 4 * p * r);
        }
    }
    v.nbufs = v.coll == COLL_ALLREDUCE_MULTI && a->base.nbufs > 1 ? a->base.nbufs : 1;
    v.nslots = SLOT_COUNT_ + (int)v.nbufs - 1;
    v.ncontrib = (uint64_t)v.p * (uint64_t)v.nbufs;
    v.check_order = s->ordered && collective_reduces(v.coll) && !a->base.commutative;
    v.check_tree = s->ordered && (v.coll == COLL_ALLREDUCE || v.coll == COLL_ALLREDUCE_MULTI);
    for (uint64_t q = 0; q < v.ncontrib; q++) v.total += key(&v, q);
    if (v.coll == COLL_BARRIER && v.p <= 16384) v.heard_words = ((size_t)v.p + 63) / 64; /* p²/8 bytes in all */
    v.rk = calloc((size_t)a->base.p, sizeof *v.rk);
    if (net_init(&v.net, a->base.p, sizeof(vpost)) || !v.rk) nomem(&v);
    else run(&v, lib);

    if (v.failed) {
        char root[40] = "";
        if (collective_rooted(v.coll)) snprintf(root, sizeof root, ", root %" PRId64, a->base.root);
        if (v.coll == COLL_ALLREDUCE_MULTI) snprintf(root, sizeof root, ", %" PRId64 " buffers", v.nbufs);
        char count[80];
        if (collective_has_vectors(v.coll)) snprintf(count, sizeof count, "vectors of %s (seed %" PRIu64 ")", verify_vector_case_name(a->vcase), a->seed);
        else snprintf(count, sizeof count, "count = %" PRId64, a->base.count);
        diag_append(d, "  (verifying '%s' for p = %" PRId64 ", %s, element %" PRId64 " bytes%s%s%s)\n", s->name, a->base.p,
                    count, a->base.esize, root, a->base.inplace ? ", in place" : "", a->base.commutative ? ", commutative op" : ", non-commutative op");
    }
    free(v.ra);
    free(v.vecs);
    net_free(&v.net, drop_post);
    for (int64_t r = 0; v.rk && r < a->base.p; r++) release(&v.rk[r]);
    free(v.rk);
    sym_list_free(&v.t1);
    sym_list_free(&v.t2);
    sym_list_free(&v.t3);
    sym_list_free(&v.ref);
    if (st) {
        st->programs += v.st.programs;
        st->insns += v.st.insns;
        st->messages += v.st.messages;
        st->bytes += v.st.bytes;
    }
    return v.failed ? VERIFY_FAIL : VERIFY_OK;
}
