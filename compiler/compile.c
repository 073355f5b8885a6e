/* Evaluation of a schedule's tree for concrete parameters, emitting instructions as it goes.
 *
 * Values are integers, ranges [lo, hi) and views (a buffer slot, an element offset and a
 * length). Errors are reported into the diag and unwind with longjmp to compile_program, which
 * owns every allocation, so no error path leaks. */
#include "compile.h"
#include "collectives.h"

#include <setjmp.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_STEPS (1u << 26)
#define MAX_CALL_DEPTH 32
#define SLOT_RTMP 255 /* marks the temporary of an ordered reduce, placed after scratch at the end */

typedef enum { V_INT, V_RANGE, V_VIEW, V_VEC } vkind;
static const char *const vkind_name[] = {"an integer", "a range", "a buffer", "a vector"};

typedef struct {
    vkind k;
    int64_t a, b;        /* int: a; range: [a, b); view: offset a, length b (elements) */
    int slot;
    int writable;
    const char *buf;     /* the view's buffer name, for messages */
    int peer;            /* view: the rank whose buffer it is (sendbuf@r), -1 for this rank's */
    int insend;          /* view: lies in the in-place sendbuf (sendbuf@r moves with r's place) */
    int rankdep;         /* a variable's: its definition named rank (see ranked()) */
    const int64_t *vec;  /* vector: its p values (NULL: the call has it on other ranks only); buf its name */
} value;

typedef struct {
    const char *name;
    value v;
    int fixed;           /* rank, p, ...: cannot be assigned */
} var;

typedef struct {
    const sched_lib *lib;
    const compile_args *args;
    diag *d;
    const source *src;   /* file of the schedule being evaluated */
    jmp_buf fail;
    int status;

    var *vars;
    size_t nvars, vcap, frame; /* variables of the current schedule are [frame, nvars) */

    nbc_insn *insns;
    nbc_srcloc *locs;
    size_t n, cap, lcap;
    uint32_t *rounds;
    size_t nrounds, rcap;
    int in_round, pending;     /* pending: a local-only round waits to join the next one */
    size_t group_start;
    uint32_t group_comms, max_comms;
    uint32_t group_flags;      /* SIGNAL/WAIT in the round: like messages, they make it a round */
    int shared;                /* emitted a peer operand or a flag: PROG_SHARED */
    int agree;                 /* emitted an operand in a peer's send or receive buffer: PROG_AGREE */
    int rank_ctl;              /* inside an if, a loop or a call that depends on rank */
    int track_rank;            /* a `shared` may be reached: follow what depends on rank */
    int coll;                  /* the collective of the top schedule: its buffers' shapes */

    int64_t nodes;             /* of the topology (compile_args.node_of) */
    int64_t *derived;          /* reduce_scatterv's displs, from its counts, when not given */
    int64_t scratch, rtmp;     /* elements */
    int64_t shared_elems;      /* the shared scratch (SLOT_SHARED), elements */
    uint64_t steps, max_steps;
    uint64_t max_insns;
    int depth;
} ev;

static _Noreturn void fail_status(ev *e, int status)
{
    e->status = status;
    longjmp(e->fail, 1);
}

static _Noreturn __attribute__((format(printf, 3, 4))) void fail(ev *e, loc at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(e->d, e->src, at, "%s", msg);
    fail_status(e, COMPILE_ERROR);
}

static void *grow(ev *e, void *arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return arr;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *t = realloc(arr, c * elem);
    if (!t) fail_status(e, COMPILE_NOMEM);
    *cap = c;
    return t;
}

static void step(ev *e, loc at)
{
    if (++e->steps > e->max_steps)
        fail(e, at, "schedule runs away: more than %llu steps (a loop that never ends?)",
             (unsigned long long)e->max_steps);
}

/* ---- variables ---- */

/* Names are compared very often (every variable use is a lookup): most differ at once. */
static inline int same(const char *a, const char *b)
{
    return a == b || (a[0] == b[0] && strcmp(a, b) == 0);
}

static var *lookup(ev *e, const char *name)
{
    for (size_t i = e->nvars; i > e->frame; i--)
        if (same(e->vars[i - 1].name, name)) return &e->vars[i - 1];
    return NULL;
}

/* A name stands for one variable at a time within a schedule (no shadowing), which keeps
 * schedules readable and lets each use of a name remember where it found it. */
static void define(ev *e, const char *name, value v, int fixed, loc at)
{
    var *old = lookup(e, name);
    if (old && old->fixed) fail(e, at, "'%s' cannot be redefined here", name);
    if (old) fail(e, at, "'%s' is already defined here", name);
    e->vars = grow(e, e->vars, &e->vcap, e->nvars + 1, sizeof *e->vars);
    e->vars[e->nvars++] = (var){name, v, fixed};
}

static value vint(int64_t x) { return (value){.k = V_INT, .a = x}; }

static value view(int slot, int64_t len, int writable, const char *buf)
{
    return (value){.k = V_VIEW, .a = 0, .b = len, .slot = slot, .writable = writable, .buf = buf, .peer = -1};
}

/* ---- expressions ---- */

static value eval(ev *e, const node *n);

static int64_t eval_int(ev *e, const node *n)
{
    value v = eval(e, n);
    if (v.k != V_INT) fail(e, n->at, "expected an integer here, not %s", vkind_name[v.k]);
    return v.a;
}

static int64_t checked(ev *e, loc at, int overflow, int64_t r)
{
    if (overflow) fail(e, at, "integer overflow");
    return r;
}

/* Every sum, difference and product of values a schedule computes goes through these: an
 * overflow is an error at `at`, never a wrapped offset. */
static int64_t add(ev *e, loc at, int64_t x, int64_t y)
{
    int64_t r;
    if (__builtin_add_overflow(x, y, &r)) fail(e, at, "integer overflow");
    return r;
}

static int64_t sub(ev *e, loc at, int64_t x, int64_t y)
{
    int64_t r;
    if (__builtin_sub_overflow(x, y, &r)) fail(e, at, "integer overflow");
    return r;
}

static int64_t mul(ev *e, loc at, int64_t x, int64_t y)
{
    int64_t r;
    if (__builtin_mul_overflow(x, y, &r)) fail(e, at, "integer overflow");
    return r;
}

static int64_t binary(ev *e, const node *n, int64_t x, int64_t y)
{
    int64_t r;
    switch (n->op) {
    case '+': return add(e, n->at, x, y);
    case '-': return sub(e, n->at, x, y);
    case '*': return mul(e, n->at, x, y);
    case '/':
    case '%':
        if (y == 0) fail(e, n->at, "division by zero");
        if (y == -1 && x == INT64_MIN) fail(e, n->at, "integer overflow");
        if (n->op == '/') return x / y;
        r = x % y; /* the result of % is never negative: (-1) % p is p - 1 */
        /* r is in (-|y|, 0): r - y and r + y cannot overflow, where -y could (y = INT64_MIN) */
        return r >= 0 ? r : y < 0 ? r - y : r + y;
    case '&': return x & y;
    case '|': return x | y;
    case '^': return x ^ y;
    case OPR_SHL:
    case OPR_SHR:
        if (y < 0 || y > 62) fail(e, n->at, "shift by %lld is out of range 0..62", (long long)y);
        if (n->op == OPR_SHR) return x >> y;
        if (x < 0 || x > (INT64_MAX >> y)) fail(e, n->at, "integer overflow");
        return x << y;
    case '<': return x < y;
    case '>': return x > y;
    case OPR_LE: return x <= y;
    case OPR_GE: return x >= y;
    case OPR_EQ: return x == y;
    case OPR_NE: return x != y;
    }
    fail(e, n->at, "unknown operator '%s'", ast_op_name(n->op));
}

static int nargs(const node *a)
{
    int k = 0;
    for (; a; a = a->next) k++;
    return k;
}

static void want_args(ev *e, const node *n, int k)
{
    if (nargs(n->a) != k)
        fail(e, n->at, "%s() takes %d argument%s, not %d", n->name, k, k == 1 ? "" : "s", nargs(n->a));
}

static int64_t floor_log2(int64_t x) { return 63 - __builtin_clzll((unsigned long long)x); }

/* ---- the topology: which ranks share a node ---- */

static int64_t node_of(const ev *e, int64_t r)
{
    const compile_args *a = e->args;
    return a->node_of ? a->node_of[r] : a->shared_memory ? 0 : r;
}

static int64_t rank_arg(ev *e, const node *n)
{
    int64_t r = eval_int(e, n);
    if (r < 0 || r >= e->args->p) fail(e, n->at, "rank %lld is outside 0..%lld", (long long)r, (long long)(e->args->p - 1));
    return r;
}

static int64_t node_arg(ev *e, const node *n)
{
    int64_t j = eval_int(e, n);
    if (j < 0 || j >= e->nodes) fail(e, n->at, "node %lld is outside 0..%lld", (long long)j, (long long)(e->nodes - 1));
    return j;
}

/* node(r), local(r), node_size(j), node_rank(j, i) into *out: 1, or 0 for another function.
 * Each walks the p ranks: topologies are small, and a schedule asks a few times per node. */
static int topology(ev *e, const node *n, value *out)
{
    const char *f = n->name;
    int64_t p = e->args->p, k = 0;
    if (same(f, "node") || same(f, "local")) {
        want_args(e, n, 1);
        int64_t r = rank_arg(e, n->a), j = node_of(e, r);
        if (f[0] == 'l')
            for (int64_t q = 0; q < r; q++) k += node_of(e, q) == j;
        *out = vint(f[0] == 'n' ? j : k);
        return 1;
    }
    if (same(f, "node_size")) {
        want_args(e, n, 1);
        int64_t j = node_arg(e, n->a);
        for (int64_t q = 0; q < p; q++) k += node_of(e, q) == j;
        *out = vint(k);
        return 1;
    }
    if (same(f, "node_rank")) { /* the rank of member i of node j, members in rank order */
        want_args(e, n, 2);
        int64_t j = node_arg(e, n->a), i = eval_int(e, n->a->next);
        for (int64_t q = 0; q < p; q++)
            if (node_of(e, q) == j && k++ == i) {
                *out = vint(q);
                return 1;
            }
        fail(e, n->a->next->at, "node %lld has %lld rank%s: no member %lld", (long long)j, (long long)k, k == 1 ? "" : "s",
             (long long)i);
    }
    return 0;
}

/* The builtin functions. */
/* Value r of a vector; at: where it is read, for errors. */
static int64_t vector_at(ev *e, const node *at, const value *v, int64_t r)
{
    if (!v->vec)
        fail(e, at->at, "'%s' is not known on rank %lld: %s", v->buf, (long long)e->args->rank,
             collective_rooted(e->coll) && e->args->rank != e->args->root ? "the collective has it at the root only" : "the call gives no such vector");
    if (r < 0 || r >= e->args->p)
        fail(e, at->at, "index %lld is outside '%s', which has p = %lld values (0..%lld)", (long long)r, v->buf,
             (long long)e->args->p, (long long)(e->args->p - 1));
    return v->vec[r];
}

static value func(ev *e, const node *n)
{
    const char *f = n->name;
    const node *a = n->a;
    value t;
    if (topology(e, n, &t)) return t;
    if (same(f, "min") || same(f, "max")) {
        if (!a) fail(e, n->at, "%s() needs at least one argument", f);
        int64_t r = eval_int(e, a);
        for (a = a->next; a; a = a->next) {
            int64_t x = eval_int(e, a);
            r = (f[1] == 'i') == (x < r) ? x : r;
        }
        return vint(r);
    }
    if (same(f, "log2") || same(f, "pow2floor") || same(f, "is_pow2") || same(f, "abs")) {
        want_args(e, n, 1);
        int64_t x = eval_int(e, a);
        if (same(f, "abs")) return vint(checked(e, n->at, x == INT64_MIN, x < 0 ? -x : x));
        if (same(f, "is_pow2")) return vint(x > 0 && (x & (x - 1)) == 0);
        if (x < 1) fail(e, a->at, "%s() needs a positive argument, not %lld", f, (long long)x);
        return vint(f[0] == 'l' ? floor_log2(x) : (int64_t)1 << floor_log2(x));
    }
    if (same(f, "ceil_div")) {
        want_args(e, n, 2);
        int64_t x = eval_int(e, a), y = eval_int(e, a->next);
        if (x < 0 || y <= 0) fail(e, n->at, "ceil_div() needs a >= 0 and b > 0, not %lld and %lld", (long long)x, (long long)y);
        return vint(x / y + (x % y != 0));
    }
    if (same(f, "block")) { /* block i of n elements cut into k near-equal blocks */
        want_args(e, n, 3);
        int64_t cnt = eval_int(e, a), k = eval_int(e, a->next), i = eval_int(e, a->next->next);
        if (cnt < 0 || k < 1) fail(e, n->at, "block(n, k, i) needs n >= 0 and k >= 1, not n = %lld, k = %lld", (long long)cnt, (long long)k);
        if (i < 0 || i >= k) fail(e, a->next->next->at, "block index %lld is outside 0..%lld", (long long)i, (long long)(k - 1));
        int64_t base = cnt / k, rem = cnt % k;
        int64_t lo = add(e, n->at, mul(e, n->at, i, base), i < rem ? i : rem);
        return (value){.k = V_RANGE, .a = lo, .b = add(e, n->at, lo, base + (i < rem))};
    }
    if (same(f, "bufs")) { /* buffer i of a multi-buffer call; bufs(0) is recvbuf */
        want_args(e, n, 1);
        int64_t i = eval_int(e, a);
        if (i < 0 || i >= e->args->nbufs)
            fail(e, a->at, "bufs(%lld): there are %lld buffers", (long long)i, (long long)e->args->nbufs);
        if (i == 0) return lookup(e, "recvbuf")->v;
        return view(SLOT_EXTRA + (int)i - 1, e->args->count, 1, "bufs(i)");
    }
    if (same(f, "chunk")) { /* piece j of `size` elements of range r, clipped to r */
        want_args(e, n, 3);
        value r = eval(e, a);
        if (r.k != V_RANGE) fail(e, a->at, "chunk() takes a range first, not %s", vkind_name[r.k]);
        int64_t size = eval_int(e, a->next), j = eval_int(e, a->next->next);
        if (size < 1 || j < 0) fail(e, n->at, "chunk(r, size, j) needs size >= 1 and j >= 0, not %lld and %lld", (long long)size, (long long)j);
        int64_t len = sub(e, n->at, r.b, r.a);
        /* j * size <= len, and r.b - lo <= len: neither can overflow */
        int64_t lo = j > len / size ? r.b : r.a + j * size;
        int64_t hi = r.b - lo > size ? lo + size : r.b;
        return (value){.k = V_RANGE, .a = lo, .b = hi};
    }
    if (same(f, "span")) { /* span(counts, displs, r): block r of a vector collective's buffer */
        want_args(e, n, 3);
        value c = eval(e, a), d = eval(e, a->next);
        if (c.k != V_VEC || d.k != V_VEC) fail(e, (c.k != V_VEC ? a : a->next)->at, "span() takes two vectors first, not %s", vkind_name[c.k != V_VEC ? c.k : d.k]);
        int64_t r = eval_int(e, a->next->next);
        int64_t len = vector_at(e, a->next->next, &c, r), at = vector_at(e, a->next->next, &d, r);
        if (len == 0) return (value){.k = V_RANGE, .a = 0, .b = 0}; /* a zero count's displacement may be anything */
        return (value){.k = V_RANGE, .a = at, .b = add(e, n->at, at, len)};
    }
    if (same(f, "range")) {
        want_args(e, n, 2);
        int64_t lo = eval_int(e, a), hi = eval_int(e, a->next);
        if (lo > hi) fail(e, n->at, "range(%lld, %lld) ends before it starts", (long long)lo, (long long)hi);
        return (value){.k = V_RANGE, .a = lo, .b = hi};
    }
    if (same(f, "len") || same(f, "lo") || same(f, "hi")) {
        want_args(e, n, 1);
        value v = eval(e, a);
        if (v.k == V_INT || v.k == V_VEC || (v.k == V_VIEW && f[0] != 'l'))
            fail(e, a->at, "%s() takes %s, not %s", f, f[0] == 'l' && f[1] == 'e' ? "a range or a buffer" : "a range", vkind_name[v.k]);
        if (v.k == V_VIEW) return vint(v.b);
        return vint(f[0] == 'h' ? v.b : f[1] == 'o' ? v.a : sub(e, n->at, v.b, v.a));
    }
    fail(e, n->at, "unknown function '%s'", f);
}

/* vector[r]: one of the call's per-rank values, r in 0..p-1. */
static value index_vector(ev *e, const node *n, const value *base)
{
    if (n->c) fail(e, n->at, "'%s' is a vector: it takes one index, not a slice", base->buf);
    value i = eval(e, n->b);
    if (i.k != V_INT) fail(e, n->b->at, "a vector's index is an integer, not %s", vkind_name[i.k]);
    return vint(vector_at(e, n, base, i.a));
}

static value index_view(ev *e, const node *n)
{
    value base = eval(e, n->a);
    if (base.k == V_VEC) return index_vector(e, n, &base);
    if (base.k != V_VIEW) fail(e, n->at, "only a buffer can be sliced, not %s", vkind_name[base.k]);
    int64_t lo, hi;
    if (n->c) {
        lo = eval_int(e, n->b);
        hi = eval_int(e, n->c);
    } else {
        value i = eval(e, n->b);
        if (i.k == V_VIEW) fail(e, n->b->at, "a buffer cannot be an index");
        if (i.k == V_INT && (i.a < 0 || i.a >= base.b))
            fail(e, n->at, "index %lld is outside '%s' of length %lld", (long long)i.a, base.buf, (long long)base.b);
        lo = i.a;
        hi = i.k == V_RANGE ? i.b : i.a + 1;
    }
    if (lo < 0 || hi < lo || hi > base.b)
        fail(e, n->at, "slice [%lld:%lld] is outside '%s' of length %lld", (long long)lo, (long long)hi, base.buf, (long long)base.b);
    base.a = add(e, n->at, base.a, lo);
    base.b = hi - lo; /* 0 <= lo <= hi: no overflow */
    return base;
}

static value peer_view(ev *e, const node *n);

static value eval(ev *e, const node *n)
{
    switch (n->kind) {
    case N_NUM: return vint(n->num);
    case N_VAR: {
        /* n->op caches where the name was found last time, relative to the frame: names are
         * unique within a frame, so a match there is the variable */
        size_t guess = e->frame + (size_t)n->op - 1;
        if (n->op > 0 && guess < e->nvars && same(e->vars[guess].name, n->name)) return e->vars[guess].v;
        var *v = lookup(e, n->name);
        if (!v) fail(e, n->at, "unknown name '%s'", n->name);
        ((node *)n)->op = (int)(v - e->vars - (ptrdiff_t)e->frame) + 1;
        return v->v;
    }
    case N_UNARY: {
        int64_t x = eval_int(e, n->a);
        if (n->op == '-') return vint(checked(e, n->at, x == INT64_MIN, -x));
        return vint(n->op == '!' ? !x : ~x);
    }
    case N_BINARY:
        if (n->op == OPR_AND) return vint(eval_int(e, n->a) && eval_int(e, n->b));
        if (n->op == OPR_OR) return vint(eval_int(e, n->a) || eval_int(e, n->b));
        {
            int64_t x = eval_int(e, n->a);
            return vint(binary(e, n, x, eval_int(e, n->b)));
        }
    case N_COND: return eval_int(e, n->a) ? eval(e, n->b) : eval(e, n->c);
    case N_FUNC: return func(e, n);
    case N_INDEX: return index_view(e, n);
    case N_PEER: return peer_view(e, n);
    default: fail(e, n->at, "not an expression");
    }
}

/* sendbuf@r, recvbuf@r, NAME@r of a shared buffer: what the name means here, but in rank r's
 * memory (sizes and places as this rank's: every rank declares the same shared buffers). Rank
 * r's own is simply the buffer, so loops over all ranks read naturally. */
static value peer_view(ev *e, const node *n)
{
    const var *named = lookup(e, n->name);
    int shared = named && named->v.k == V_VIEW && named->v.slot == SLOT_SHARED;
    if (!same(n->name, "sendbuf") && !same(n->name, "recvbuf") && !shared)
        fail(e, n->at, "only sendbuf, recvbuf and shared buffers of another rank can be named ('%s@...')", n->name);
    value v = named->v;
    int64_t r = eval_int(e, n->a);
    if (r < 0 || r >= e->args->p)
        fail(e, n->a->at, "rank %lld is outside 0..%lld", (long long)r, (long long)(e->args->p - 1));
    if (r == e->args->rank) return v;
    if (v.slot != SLOT_SEND && v.slot != SLOT_RECV && v.slot != SLOT_SHARED)
        fail(e, n->at, "'%s' is %s here, not the call's buffer: only the call's buffers of another rank can be named", n->name, v.buf);
    if (v.insend) { /* in place, sendbuf lies in recvbuf where the collective puts rank r's part */
        const compile_args *a = e->args;
        coll_shape mine = collective_shape_vec((nbc_collective)e->coll, a->p, a->rank, a->root, a->count, 1, a->vec);
        coll_shape theirs = collective_shape_vec((nbc_collective)e->coll, a->p, r, a->root, a->count, 1, a->vec);
        v.a = v.a - mine.inplace_send_off + theirs.inplace_send_off;
    }
    v.peer = (int)r;
    return v;
}

/* ---- instructions ---- */

/* A REDUCE of exactly what the instruction before it in the same round copied becomes one
 * COMBINE, a := b ⊕ c: one pass over the data instead of two. Schedules write a first
 * reduction into recvbuf as `copy sendbuf[s] to recvbuf[s]; reduce recvbuf[s] += in[...]`. */
static int fused(ev *e, const nbc_insn *r, const node *at)
{
    if (e->n == 0 || e->n - 1 < e->group_start) return 0;
    nbc_insn *c = &e->insns[e->n - 1];
    if (c->op != OP_COPY || c->a_slot != r->a_slot || c->a_off != r->a_off || c->len != r->len) return 0;
    /* one instruction names the buffers of at most one other rank (and a must be the same one) */
    if (c->peer >= 0 && r->peer >= 0 && c->peer != r->peer) return 0;
    int32_t peer = c->peer >= 0 ? c->peer : r->peer;
    /* instruction() keeps each one's operands disjoint, so the three are: no aliasing */
    *c = (nbc_insn){.op = OP_COMBINE, .a_slot = r->a_slot, .b_slot = r->b_slot, .c_slot = c->b_slot, .peer = peer,
                    .a_off = r->a_off, .b_off = r->b_off, .c_off = c->b_off, .len = r->len};
    e->locs[e->n - 1] = (nbc_srcloc){(uint32_t)at->at.line, (uint32_t)at->at.col}; /* the reduction's place */
    return 1;
}

static void needs_shared_memory(ev *e, const node *at)
{
    if (!e->args->shared_memory) fail(e, at->at, "needs ranks that share memory: requires shared_memory");
}

/* Memory is shared inside a node only: a flag or a buffer of a rank on another node is an error. */
static void same_node(ev *e, loc at, int64_t peer)
{
    int64_t mine = node_of(e, e->args->rank), theirs = node_of(e, peer);
    if (mine != theirs)
        fail(e, at, "rank %lld is on node %lld and rank %lld on node %lld: memory is shared inside a node only",
             (long long)peer, (long long)theirs, (long long)e->args->rank, (long long)mine);
}

/* PROG_SHARED: a flag or any peer operand; PROG_AGREE: a peer's send or receive buffer, which
 * exists only once the runtime's agreement has published it (a peer's shared scratch does not
 * need that). */
static void note_peers(ev *e, const nbc_insn *in)
{
    const nbc_opinfo *info = prog_opinfo(in->op);
    e->shared |= info->flag;
    for (int k = 0; k < 3; k++) {
        unsigned slot = prog_operand_slot(in, k);
        /* SLOT_RTMP, placed in scratch only by assemble(), has the SLOT_PEER bit */
        if (!(prog_operands(in->op) >> k & 1) || slot == SLOT_RTMP || !(slot & SLOT_PEER)) continue;
        e->shared = 1;
        e->agree |= SLOT_INDEX(slot) != SLOT_SHARED;
    }
}

static void push(ev *e, const node *at, const nbc_insn *in);

static void emit(ev *e, const node *at, int op, int32_t peer, const value *a, const value *b)
{
    step(e, at->at);
    int64_t es = e->args->esize;
    /* operands in another rank's buffers: that rank is the instruction's peer (errors first,
     * so that they do not depend on the count) */
    uint8_t aslot = (uint8_t)a->slot, bslot = (uint8_t)(b ? b->slot : 0);
    if (a->peer >= 0 || (b && b->peer >= 0)) {
        if (prog_opinfo((unsigned)op)->message)
            fail(e, at->at, "a message moves this rank's own buffers: send and recv cannot name another rank's");
        if (a->peer >= 0 && b && b->peer >= 0 && a->peer != b->peer)
            fail(e, at->at, "one instruction can name the buffers of one other rank");
        needs_shared_memory(e, at);
        peer = a->peer >= 0 ? a->peer : b->peer;
        same_node(e, at->at, peer);
        if (a->peer >= 0) aslot |= SLOT_PEER;
        if (b && b->peer >= 0) bslot |= SLOT_PEER;
    }
    if (a->b == 0) return; /* zero-length: both sides of a message skip it alike */
    if (op == OP_COPY && a->slot == b->slot && a->peer == b->peer && a->a == b->a) return; /* in place: nothing to do */
    nbc_insn in = {.op = (uint8_t)op, .a_slot = aslot, .b_slot = bslot, .peer = peer,
                   .a_off = (uint64_t)mul(e, at->at, a->a, es), .b_off = b ? (uint64_t)mul(e, at->at, b->a, es) : 0,
                   .len = (uint64_t)mul(e, at->at, a->b, es)};
    if (op == OP_REDUCE && fused(e, &in, at)) {
        note_peers(e, &e->insns[e->n - 1]);
        return;
    }
    push(e, at, &in);
}

static void push(ev *e, const node *at, const nbc_insn *in)
{
    const nbc_opinfo *info = prog_opinfo(in->op);
    if (e->n >= e->max_insns)
        fail(e, at->at, "the program would hold more than %llu instructions (the limit: NBC_MAX_INSNS raises it)",
             (unsigned long long)e->max_insns);
    e->insns = grow(e, e->insns, &e->cap, e->n + 1, sizeof *e->insns);
    e->locs = grow(e, e->locs, &e->lcap, e->n + 1, sizeof *e->locs);
    e->insns[e->n] = *in;
    e->locs[e->n] = (nbc_srcloc){(uint32_t)at->at.line, (uint32_t)at->at.col};
    e->n++;
    e->group_comms += info->message;
    e->group_flags += info->flag;
    note_peers(e, in);
}

static value eval_view(ev *e, const node *n, int write)
{
    value v = eval(e, n);
    if (v.k != V_VIEW) fail(e, n->at, "expected a buffer here, not %s", vkind_name[v.k]);
    if (write && !v.writable) fail(e, n->at, "'%s' is read-only", v.buf);
    return v;
}

/* Views lie within buffers of at most COMPILE_MAX_BYTES: these sums cannot overflow. */
static int overlap(const value *x, const value *y)
{
    return x->slot == y->slot && x->peer == y->peer && x->a < y->a + y->b && y->a < x->a + x->b;
}

static void instruction(ev *e, const node *n)
{
    static const char *const what[] = {[N_SEND] = "send", [N_RECV] = "recv", [N_COPY] = "copy", [N_REDUCE] = "reduce",
                                       [N_SIGNAL] = "signal", [N_WAIT] = "wait"};
    if (!e->in_round) fail(e, n->at, "'%s' must be inside a round", what[n->kind]);
    if (n->kind == N_SIGNAL || n->kind == N_WAIT) { /* no data: no length, no operands */
        step(e, n->at);
        int64_t peer = eval_int(e, n->a);
        if (peer < 0 || peer >= e->args->p || peer == e->args->rank)
            fail(e, n->a->at, "%s to rank %lld: it must be another rank, in 0..%lld", what[n->kind], (long long)peer,
                 (long long)(e->args->p - 1));
        needs_shared_memory(e, n);
        same_node(e, n->a->at, peer);
        nbc_insn in = {.op = n->kind == N_SIGNAL ? OP_SIGNAL : OP_WAIT, .peer = (int32_t)peer};
        push(e, n, &in);
        return;
    }
    if (n->kind == N_SEND || n->kind == N_RECV) {
        value v = eval_view(e, n->a, n->kind == N_RECV);
        int64_t peer = eval_int(e, n->b);
        if (peer < 0 || peer >= e->args->p)
            fail(e, n->b->at, "peer %lld is outside 0..%lld", (long long)peer, (long long)(e->args->p - 1));
        emit(e, n, n->kind == N_SEND ? OP_SEND : OP_RECV, (int32_t)peer, &v, NULL);
        return;
    }
    /* copy SRC to DST; reduce DST += SRC; reduce DST =+ SRC */
    int is_copy = n->kind == N_COPY;
    value dst = eval_view(e, is_copy ? n->b : n->a, 1);
    value src = eval_view(e, is_copy ? n->a : n->b, 0);
    if (dst.b != src.b)
        fail(e, n->at, "%s of %lld elements into %lld", what[n->kind], (long long)src.b, (long long)dst.b);
    if (overlap(&dst, &src) && !(is_copy && dst.a == src.a))
        fail(e, n->at, "source and destination of this %s overlap", what[n->kind]);
    if (is_copy) {
        emit(e, n, OP_COPY, -1, &dst, &src);
    } else if (n->op == '=' || e->args->commutative) {
        emit(e, n, OP_REDUCE, -1, &dst, &src);   /* dst = src ⊕ dst */
    } else {
        /* dst = dst ⊕ src with an order-sensitive op: t = src; t = dst ⊕ t; dst = t */
        value t = {.k = V_VIEW, .a = 0, .b = src.b, .slot = SLOT_RTMP, .peer = -1};
        if (src.b > e->rtmp) e->rtmp = src.b;
        emit(e, n, OP_COPY, -1, &t, &src);
        emit(e, n, OP_REDUCE, -1, &t, &dst);
        emit(e, n, OP_COPY, -1, &dst, &t);
    }
}

/* ---- statements ---- */

static void run(ev *e, const node *list);

static void close_round(ev *e)
{
    if (e->n == e->group_start) return;
    if (e->group_comms == 0 && e->group_flags == 0) { /* local work only: it runs at the start of the next round */
        e->pending = 1;
        return;
    }
    e->rounds = grow(e, e->rounds, &e->rcap, e->nrounds + 2, sizeof *e->rounds);
    e->rounds[e->nrounds++] = (uint32_t)e->group_start;
    if (e->group_comms > e->max_comms) e->max_comms = e->group_comms;
    e->pending = 0;
    e->group_comms = 0;
    e->group_flags = 0;
}

static void call(ev *e, const node *n);

/* Whether an expression may differ between ranks: it names rank, or a variable whose
 * definition did (data only; control is rank_ctl). What a caller passes is not followed: a
 * call whose arguments name rank counts as control (call()). */
static int ranked(ev *e, const node *n)
{
    if (!e->track_rank) return 0; /* it costs a walk per if and let: only where it matters */
    for (; n; n = n->next) { /* n->next: a function's further arguments */
        if (n->kind == N_VAR) {
            if (same(n->name, "rank")) return 1;
            const var *v = lookup(e, n->name);
            if (v && v->v.rankdep) return 1;
        }
        if (ranked(e, n->a) || ranked(e, n->b) || ranked(e, n->c) || ranked(e, n->d)) return 1;
    }
    return 0;
}

/* scratch or shared NAME[len]: len elements more of that space, *total so far. */
static void declare_space(ev *e, const node *n, nbc_slot slot, int64_t *total, const char *what)
{
    int64_t len = eval_int(e, n->a);
    if (len < 0) fail(e, n->a->at, "%s size %lld is negative", what, (long long)len);
    value v = view(slot, len, 1, n->name);
    v.a = *total;
    if (__builtin_add_overflow(*total, len, total) || *total > (INT64_MAX / 2) / e->args->esize)
        fail(e, n->at, "%s space overflows", what);
    define(e, n->name, v, 0, n->at);
}

/* shared NAME[len]: like scratch, in the shared scratch. A peer names it by this rank's place
 * and size, so every rank must declare the same shared buffers in the same order: a size or a
 * declaration that depends on rank is refused (as far as the compiler can tell; see ranked()). */
static void shared_decl(ev *e, const node *n)
{
    needs_shared_memory(e, n);
    if (ranked(e, n->a)) fail(e, n->a->at, "the size of shared '%s' depends on rank: it must be the same on every rank", n->name);
    if (e->rank_ctl)
        fail(e, n->at, "shared '%s' is declared under a condition, loop or call that depends on rank: every rank must declare it alike",
             n->name);
    declare_space(e, n, SLOT_SHARED, &e->shared_elems, "shared");
}

static void statement(ev *e, const node *n)
{
    switch (n->kind) {
    case N_LET: {
        value v = eval(e, n->a);
        v.rankdep = ranked(e, n->a);
        define(e, n->name, v, 0, n->at);
        return;
    }
    case N_ASSIGN: {
        var *v = lookup(e, n->name);
        if (!v) fail(e, n->at, "unknown name '%s' (use 'let' to define it)", n->name);
        if (v->fixed) fail(e, n->at, "'%s' cannot be assigned", n->name);
        value x = eval(e, n->a);
        x.rankdep = ranked(e, n->a) || e->rank_ctl;
        v = lookup(e, n->name); /* eval may have grown the array */
        v->v = x;
        return;
    }
    case N_SCRATCH: declare_space(e, n, SLOT_SCRATCH, &e->scratch, "scratch"); return;
    case N_SHARED: shared_decl(e, n); return;
    case N_IF: {
        int dep = ranked(e, n->a);
        e->rank_ctl += dep;
        if (eval_int(e, n->a)) run(e, n->b);
        else if (n->c) run(e, n->c); /* a block, or the single N_IF of `else if` */
        e->rank_ctl -= dep;
        return;
    }
    case N_FOR_IN: {
        int64_t lo = eval_int(e, n->a), hi = eval_int(e, n->b);
        int dep = ranked(e, n->a) || ranked(e, n->b);
        e->rank_ctl += dep;
        for (int64_t i = lo; i < hi; i++) {
            step(e, n->at);
            size_t mark = e->nvars;
            value x = vint(i);
            x.rankdep = dep;
            define(e, n->name, x, 1, n->at);
            run(e, n->c);
            e->nvars = mark;
        }
        e->rank_ctl -= dep;
        return;
    }
    case N_FOR_WHILE: {
        size_t mark = e->nvars;
        value x = vint(eval_int(e, n->a));
        x.rankdep = ranked(e, n->a);
        define(e, n->name, x, 0, n->at);
        size_t slot = e->nvars - 1;
        /* the condition and the step may name the variable itself: taint it first */
        int dep = x.rankdep || ranked(e, n->b) || ranked(e, n->c);
        e->vars[slot].v.rankdep = dep;
        e->rank_ctl += dep;
        while (eval_int(e, n->b)) {
            step(e, n->at);
            run(e, n->d);
            int64_t next = eval_int(e, n->c);
            e->vars[slot].v = vint(next);
            e->vars[slot].v.rankdep = dep;
        }
        e->rank_ctl -= dep;
        e->nvars = mark;
        return;
    }
    case N_ROUND:
        if (e->in_round) fail(e, n->at, "a round cannot be inside another round");
        if (!e->pending) e->group_start = e->n;
        e->in_round = 1;
        run(e, n->a);
        e->in_round = 0;
        close_round(e);
        return;
    case N_SEND: case N_RECV: case N_COPY: case N_REDUCE: case N_SIGNAL: case N_WAIT: instruction(e, n); return;
    case N_CALL: call(e, n); return;
    default: fail(e, n->at, "not a statement");
    }
}

static void run(ev *e, const node *list)
{
    size_t mark = e->nvars;
    for (const node *n = list; n; n = n->next) statement(e, n);
    e->nvars = mark;
}

/* ---- schedules and calls ---- */

/* The names every schedule sees; `rank` is left out while preconditions are checked, since
 * those must hold alike on every rank. */
static void define_builtins(ev *e, int64_t count, value sendbuf, value recvbuf, int with_rank)
{
    const compile_args *a = e->args;
    loc none = {0, 0};
    if (with_rank) define(e, "rank", vint(a->rank), 1, none);
    define(e, "p", vint(a->p), 1, none);
    define(e, "count", vint(count), 1, none);
    define(e, "esize", vint(a->esize), 1, none);
    define(e, "inplace", vint(a->inplace), 1, none);
    define(e, "commutative", vint(a->commutative), 1, none);
    define(e, "root", vint(a->root), 1, none);
    define(e, "nbufs", vint(a->nbufs), 1, none);
    define(e, "shared_memory", vint(a->shared_memory != 0), 1, none);
    define(e, "nodes", vint(e->nodes), 1, none);
    define(e, "sendbuf", sendbuf, 1, none);
    define(e, "recvbuf", recvbuf, 1, none);
    for (int k = 0; k < COLL_NVEC; k++) {
        const char *name = collective_vector_name(e->coll, k);
        const int64_t *vec = k == VEC_RDISPLS && e->derived ? e->derived : a->vec[k];
        if (name) define(e, name, (value){.k = V_VEC, .vec = vec, .buf = name, .peer = -1}, 1, none);
    }
}

/* Parameters take the values given (by name, in `given`) or their defaults; then every
 * `requires` must hold. Returns the failed requirement, or NULL. */
static const node *enter(ev *e, const sched_def *s, const char *const *names, const value *given, int ngiven)
{
    for (const node *p = s->params; p; p = p->next) {
        int k = -1;
        for (int i = 0; i < ngiven; i++)
            if (!strcmp(names[i], p->name)) k = i;
        define(e, p->name, k >= 0 ? given[k] : eval(e, p->a), 0, p->at);
    }
    for (const node *r = s->requires; r; r = r->next)
        if (!eval_int(e, r)) return r;
    return NULL;
}

/* The top-level schedule takes its parameters from the call. */
static const node *enter_top(ev *e, const sched_def *s)
{
    const compile_args *a = e->args;
    const char *names[COMPILE_MAX_PARAMS];
    value given[COMPILE_MAX_PARAMS];
    for (int i = 0; i < a->nparams; i++) {
        int known = 0;
        for (const node *p = s->params; p; p = p->next) known |= !strcmp(p->name, a->params[i].name);
        if (!known) fail(e, s->at, "'%s' has no parameter '%s'", s->name, a->params[i].name);
        names[i] = a->params[i].name;
        given[i] = vint(a->params[i].value);
    }
    return enter(e, s, names, given, a->nparams);
}

static void unmet(ev *e, const sched_def *s, const node *req)
{
    diag_error(e->d, s->src, req->text_at, "'%s' requires %s: not met for p = %lld, count = %lld%s", s->name,
               req->text, (long long)e->args->p, (long long)e->args->count, e->args->commutative ? "" : ", non-commutative op");
}

static void call(ev *e, const node *n)
{
    if (e->in_round) fail(e, n->at, "a call cannot be inside a round");
    const sched_def *s = lib_find(e->lib, n->name);
    if (!s) fail(e, n->at, "unknown schedule '%s'", n->name);
    if (e->depth >= MAX_CALL_DEPTH) fail(e, n->at, "calls nested more than %d deep (recursion?)", MAX_CALL_DEPTH);

    int dep = 0; /* the callee's count, buffers and params may then differ between ranks */
    for (const node *g = n->a; g; g = g->next) dep |= ranked(e, g->a);
    /* Arguments are evaluated in the caller; each names a builtin or a parameter. */
    static const char *const bindable[] = {"sendbuf", "recvbuf", "count", "root"};
    value given[4];
    int has[4] = {0};
    for (const node *g = n->a; g; g = g->next) {
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(g->name, bindable[i])) k = i;
        int is_param = 0;
        for (const node *p = s->params; p; p = p->next) is_param |= !strcmp(p->name, g->name);
        if (k < 0 && !is_param)
            fail(e, g->at, "'%s' is not something schedule '%s' takes (sendbuf, recvbuf, count, root or one of its params)", g->name, s->name);
        if (k >= 0) {
            given[k] = eval(e, g->a);
            has[k] = 1;
            if ((k < 2) != (given[k].k == V_VIEW))
                fail(e, g->a->at, "'%s' must be %s", g->name, k < 2 ? "a buffer" : "an integer");
        }
    }
    value sendbuf = has[0] ? given[0] : lookup(e, "sendbuf")->v;
    value recvbuf = has[1] ? given[1] : lookup(e, "recvbuf")->v;
    int64_t count = has[2] ? given[2].a : lookup(e, "count")->v.a;

    /* The callee's parameters are evaluated in its own frame, which sees only builtins. */
    size_t old_frame = e->frame, old_n = e->nvars;
    const source *old_src = e->src;
    e->frame = e->nvars;
    define_builtins(e, count, sendbuf, recvbuf, 1);
    if (has[3]) lookup(e, "root")->v = given[3];
    /* params given by the caller were evaluated in the caller's frame: do that first */
    size_t callee_frame = e->frame;
    e->frame = old_frame;
    value pv[64];
    const char *pn[64];
    int np = 0;
    for (const node *g = n->a; g && np < 64; g = g->next) {
        int builtin = 0;
        for (int i = 0; i < 4; i++) builtin |= !strcmp(g->name, bindable[i]);
        if (!builtin) {
            pv[np] = eval(e, g->a);
            pn[np++] = g->name;
        }
    }
    e->frame = callee_frame;
    e->src = s->src;
    const node *bad = enter(e, s, pn, pv, np);
    if (bad) {
        unmet(e, s, bad);
        diag_append(e->d, "%s:%d:%d: note: called from here\n", old_src->name, n->at.line, n->at.col);
        fail_status(e, COMPILE_ERROR);
    }
    e->depth++;
    e->rank_ctl += dep;
    run(e, s->body);
    e->rank_ctl -= dep;
    e->depth--;
    e->src = old_src;
    e->nvars = old_n;
    e->frame = old_frame;
}

static int declares_shared(const node *n) { return n->kind == N_SHARED; }
static int names_peer_buffer(const node *n)
{
    return n->kind == N_PEER && (same(n->name, "sendbuf") || same(n->name, "recvbuf"));
}

/* Whether statements n (or a schedule they call) hold a node `is` accepts. seen: the
 * schedules already walked, so that calls cost one walk each; past its room the answer is yes. */
static int reaches(const sched_lib *lib, const node *n, int (*is)(const node *), const sched_def **seen, int *nseen)
{
    for (; n; n = n->next) {
        if (is(n)) return 1;
        if (n->kind == N_CALL) {
            const sched_def *s = lib_find(lib, n->name);
            int known = 0;
            for (int i = 0; i < *nseen; i++) known |= seen[i] == s;
            if (s && !known) {
                if (*nseen == MAX_CALL_DEPTH) return 1;
                seen[(*nseen)++] = s;
                if (reaches(lib, s->body, is, seen, nseen)) return 1;
            }
        }
        /* the blocks of if, for and round, and the operands of statements */
        if (reaches(lib, n->a, is, seen, nseen) || reaches(lib, n->b, is, seen, nseen) || reaches(lib, n->c, is, seen, nseen) ||
            reaches(lib, n->d, is, seen, nseen))
            return 1;
    }
    return 0;
}

static void start(ev *e, const sched_lib *lib, const compile_args *a, diag *d, const sched_def *s)
{
    memset(e, 0, sizeof *e);
    e->lib = lib;
    e->args = a;
    e->d = d;
    e->src = s->src;
    e->max_steps = a->max_steps ? a->max_steps : DEFAULT_MAX_STEPS;
    e->max_insns = a->max_insns ? a->max_insns : COMPILE_DEFAULT_MAX_INSNS;
    const sched_def *seen[MAX_CALL_DEPTH] = {s};
    int nseen = 1;
    e->track_rank = reaches(lib, s->body, declares_shared, seen, &nseen);
    /* The agreement is for every rank or none: a rank that names no peer's buffer itself (an
     * empty block) must still publish its own for the ranks that do. */
    nseen = 1;
    e->agree = reaches(lib, s->body, names_peer_buffer, seen, &nseen);
    for (int64_t r = 0; r < a->p; r++) /* check_args saw the numbering */
        if (node_of(e, r) + 1 > e->nodes) e->nodes = node_of(e, r) + 1;
}

static void finish(ev *e)
{
    free(e->vars);
    free(e->insns);
    free(e->locs);
    free(e->rounds);
    free(e->derived);
}

static int check_args(const compile_args *a, const sched_def *s, diag *d)
{
    /* The largest buffer of any collective is p * count elements; keeping its bytes within
     * COMPILE_MAX_BYTES lets an offset plus a length within buffers never overflow. */
    int64_t elems, bytes;
    int huge = __builtin_mul_overflow(a->p, a->count, &elems) || __builtin_mul_overflow(elems, a->esize, &bytes) ||
               bytes > COMPILE_MAX_BYTES;
    if (a->p < 1 || a->rank < 0 || a->rank >= a->p || a->count < 0 || a->esize < 1 || a->esize > INT32_MAX ||
        a->p > INT32_MAX || a->root < 0 || a->root >= a->p || a->nbufs < 1 || a->nbufs > NBC_MAX_BUFFERS || huge) {
        diag_error(d, s->src, s->at, "cannot compile '%s' for p = %lld, rank = %lld, count = %lld, element size %lld (root and buffers must fit)",
                   s->name, (long long)a->p, (long long)a->rank, (long long)a->count, (long long)a->esize);
        return COMPILE_ERROR;
    }
    for (int64_t r = 0, next = 0; a->node_of && r < a->p; r++) { /* numbered by first appearance */
        if (a->node_of[r] < 0 || a->node_of[r] > next) {
            diag_error(d, s->src, s->at, "cannot compile '%s': rank %lld's node %lld is not numbered by first appearance (0..%lld)",
                       s->name, (long long)r, (long long)a->node_of[r], (long long)next);
            return COMPILE_ERROR;
        }
        if (a->node_of[r] == next) next++;
    }
    int c = s->collective ? collective_from_name(s->collective) : -1;
    for (int k = 0; k < COLL_NVEC && collective_has_vectors(c); k++) {
        const int64_t *v = a->vec[k];
        int64_t sum = 0, bytes;
        for (int64_t r = 0; v && r < a->p; r++) {
            if (v[r] < 0 || __builtin_add_overflow(sum, v[r], &sum) || __builtin_mul_overflow(v[r], a->esize, &bytes) ||
                bytes > COMPILE_MAX_BYTES / 2 || (k == VEC_RCOUNTS && __builtin_mul_overflow(sum, a->esize, &bytes)) ||
                (k == VEC_RCOUNTS && bytes > COMPILE_MAX_BYTES / 2)) {
                diag_error(d, s->src, s->at, "cannot compile '%s': %s[%lld] = %lld is negative or too large", s->name,
                           collective_vector_name(c, k) ? collective_vector_name(c, k) : "vector", (long long)r, (long long)v[r]);
                return COMPILE_ERROR;
            }
        }
    }
    return COMPILE_OK;
}

/* The user's buffers as the collective that s implements shapes them (a building block
 * compiled on its own gets allreduce's). In place, sendbuf is a read-only view of recvbuf. */
static void define_top(ev *e, const sched_def *s, int with_rank)
{
    const compile_args *a = e->args;
    int c = s->collective ? collective_from_name(s->collective) : COLL_ALLREDUCE;
    e->coll = c;
    if (c == COLL_REDUCE_SCATTERV && !a->vec[VEC_RDISPLS] && a->vec[VEC_RCOUNTS] && !e->derived) {
        if (!(e->derived = malloc((size_t)a->p * sizeof *e->derived))) fail_status(e, COMPILE_NOMEM);
        for (int64_t r = 0, at = 0; r < a->p; at += a->vec[VEC_RCOUNTS][r++]) e->derived[r] = at;
    }
    const int64_t *vec[COLL_NVEC];
    memcpy(vec, a->vec, sizeof vec);
    if (e->derived) vec[VEC_RDISPLS] = e->derived;
    coll_shape sh = collective_shape_vec((nbc_collective)c, a->p, a->rank, a->root, a->count, a->inplace, vec);
    int insend = a->inplace && !collective_inplace_is_recv(c); /* sendbuf lies in recvbuf */
    value sb = view(insend ? SLOT_RECV : SLOT_SEND, sh.send_len, 0, "sendbuf");
    if (insend) sb.a = sh.inplace_send_off, sb.insend = 1;
    e->coll = c;
    value rb = view(SLOT_RECV, sh.recv_len, 1, "recvbuf");
    define_builtins(e, a->count, sb, rb, with_rank);
}

/* Reports the first failed precondition of s (evaluated without rank). */
static int preconditions(ev *e, const sched_def *s)
{
    define_top(e, s, 0);
    int c = s->collective ? collective_from_name(s->collective) : -1;
    if (collective_reduces(c) && !s->ordered && !e->args->commutative) {
        diag_error(e->d, s->src, s->at, "'%s' does not keep rank order (it is not marked 'ordered'), so it needs a commutative op", s->name);
        return COMPILE_UNMET;
    }
    const node *bad = enter_top(e, s);
    if (bad) {
        unmet(e, s, bad);
        return COMPILE_UNMET;
    }
    return COMPILE_OK;
}

/* Callers may leave nbufs at 0: one buffer. */
static compile_args normalized(const compile_args *a)
{
    compile_args n = *a;
    if (n.nbufs == 0) n.nbufs = 1;
    return n;
}

int compile_check(const sched_lib *lib, const sched_def *s, const compile_args *given, diag *d)
{
    compile_args args = normalized(given);
    const compile_args *a = &args;
    if (check_args(a, s, d)) return COMPILE_ERROR;
    ev e;
    start(&e, lib, a, d, s);
    int rc = setjmp(e.fail) ? e.status : preconditions(&e, s);
    finish(&e);
    return rc;
}

/* Whether any instruction names this rank's own shared scratch. */
static int uses_own_shared(const ev *e)
{
    for (size_t i = 0; i < e->n; i++)
        for (int k = 0; k < 3; k++)
            if ((prog_operands(e->insns[i].op) >> k & 1) && prog_operand_slot(&e->insns[i], k) == SLOT_SHARED) return 1;
    return 0;
}

static nbc_program *assemble(ev *e, const sched_def *s)
{
    int64_t es = e->args->esize;
    /* a rank alone on its node declares its node's shared scratch like the others, and no one
     * names it: it has none */
    if (!e->shared && e->shared_elems && !uses_own_shared(e)) e->shared_elems = 0;
    /* scratch is below INT64_MAX / 2 bytes and rtmp within a buffer: checked all the same */
    int64_t scratch = mul(e, s->at, add(e, s->at, e->scratch, e->rtmp), es);
    size_t bytes = prog_size((uint32_t)e->n, (uint32_t)e->nrounds);
    nbc_program *p = malloc(bytes);
    if (!p) fail_status(e, COMPILE_NOMEM);
    *p = (nbc_program){.bytes = bytes, .scratch = (uint64_t)scratch,
                       .ninsns = (uint32_t)e->n, .nrounds = (uint32_t)e->nrounds,
                       .max_round_comms = e->max_comms, .esize = (uint32_t)es,
                       .shared_bytes = (uint64_t)mul(e, s->at, e->shared_elems, es),
                       .flags = (e->shared ? PROG_SHARED : 0) | (e->agree ? PROG_AGREE : 0)};
    snprintf(p->name, sizeof p->name, "%s", s->name);
    nbc_insn *in = prog_insns(p);
    if (e->n == 0) { /* nothing to do, as with count 0 */
        prog_rounds(p)[0] = 0;
        return p;
    }
    memcpy(in, e->insns, e->n * sizeof *in);
    for (size_t i = 0; i < e->n; i++) { /* the ordered-reduce temporary lives after scratch */
        if (in[i].a_slot == SLOT_RTMP) in[i].a_slot = SLOT_SCRATCH, in[i].a_off += (uint64_t)(e->scratch * es);
        if (in[i].b_slot == SLOT_RTMP) in[i].b_slot = SLOT_SCRATCH, in[i].b_off += (uint64_t)(e->scratch * es);
        if ((prog_operands(in[i].op) & OPND_C) && in[i].c_slot == SLOT_RTMP)
            in[i].c_slot = SLOT_SCRATCH, in[i].c_off += (uint64_t)(e->scratch * es);
    }
    memcpy(prog_rounds(p), e->rounds, e->nrounds * sizeof(uint32_t));
    prog_rounds(p)[e->nrounds] = (uint32_t)e->n;
    memcpy(prog_locs(p), e->locs, e->n * sizeof(nbc_srcloc));
    return p;
}

int compile_program(const sched_lib *lib, const sched_def *s, const compile_args *given, nbc_program **out, diag *d)
{
    compile_args args = normalized(given);
    const compile_args *a = &args;
    *out = NULL;
    if (check_args(a, s, d)) return COMPILE_ERROR;
    ev e;
    start(&e, lib, a, d, s);
    if (setjmp(e.fail)) {
        if (e.status == COMPILE_NOMEM) diag_error(d, s->src, s->at, "out of memory compiling '%s'", s->name);
        finish(&e);
        return e.status;
    }
    int rc = preconditions(&e, s);
    if (rc == COMPILE_OK) {
        e.nvars = 0;
        define_top(&e, s, 1);
        enter_top(&e, s);
        run(&e, s->body);
        if (e.pending) { /* trailing local work is a round of its own */
            e.rounds = grow(&e, e.rounds, &e.rcap, e.nrounds + 2, sizeof *e.rounds);
            e.rounds[e.nrounds++] = (uint32_t)e.group_start;
        }
        *out = assemble(&e, s);
    }
    finish(&e);
    return rc;
}
