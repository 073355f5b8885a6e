/* The simulator's run, on the simulated network (simnet.h) with eager sends. A rank goes
 * through each round in two passes over its skeleton: the first does the local work and posts
 * the sends (with their arrival times), the second takes the round's messages in order, and
 * stops at the first that has not been sent yet; the sender wakes it when it posts. Ranks are
 * started (compiled) one at a time, only when no started rank can move, so memory follows
 * what the schedule keeps in flight. */
#include "simulate.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "compile.h"
#include "simnet.h"
#include "skeleton.h"

enum { S_IDLE, S_START, S_RECV, S_DONE };

typedef struct {
    uint8_t *code;       /* skeleton; NULL before the rank starts and after it ends */
    uint32_t pos;        /* next token */
    uint32_t round;
    int32_t waiting;     /* the rank whose message it waits for, or -1 */
    uint8_t state;
    uint64_t last_len;   /* skeleton decoding state at pos */
    uint64_t reduced, copied; /* this round's local work, for the hooks */
    double start;        /* of this round */
    sim_path cur;        /* α-β: when the next RECV is posted; LogGP: when the CPU is free */
    sim_path end;        /* the latest completion of the round so far */
    sim_hop *causes;     /* per round: the last hop of its end's path (when recorded) */
    uint32_t ncauses, capcauses;
} srank;

typedef struct {         /* a message in flight */
    sim_path at;         /* its arrival, with the path that led there */
    uint64_t len;
    double sent;
    uint32_t src_round;
} smsg;

typedef struct {
    const sched_lib *lib;
    const sched_def *s;
    const sim_args *a;
    const sim_model *m;
    const sim_hooks *h;
    diag *d;
    int64_t p;
    srank *rk;
    sim_net net;         /* the messages in flight (side 0: sends only), the ranks ready */
    int64_t next_new;
    int failed;
    sim_result *res;
    uint32_t capstats;
} sctx;

/* ---- the model ---- */

void sim_model_default(sim_model *m)
{
    *m = (sim_model){.alpha = 1e-6, .beta = 1e-10, .gamma = 1e-10, .L = 1e-6, .o = 2e-7, .g = 2e-7, .G = 1e-10};
}

int sim_model_parse(const char *text, sim_model *m, char *err, size_t errsize)
{
    static const char *const names[] = {"alpha", "beta", "gamma", "L", "o", "g", "G", "alpha_node", "beta_node"};
    double *fields[] = {&m->alpha, &m->beta, &m->gamma, &m->L, &m->o, &m->g, &m->G, &m->alpha_node, &m->beta_node};
    int abg = 0, loggp = 0, given[9] = {0};
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '=');
        size_t n = eq ? (size_t)(eq - p) : 0;
        int k = -1;
        for (int i = 0; i < 9 && eq; i++)
            if (strlen(names[i]) == n && !strncmp(p, names[i], n)) k = i;
        if (k < 0) {
            snprintf(err, errsize, "unknown model parameter in '%s' (alpha, beta, gamma, alpha_node, beta_node, or L, o, g, G)", p);
            return -1;
        }
        char *end;
        double x = strtod(eq + 1, &end);
        if (end == eq + 1 || (*end && *end != ',') || !(x >= 0) || isinf(x)) {
            snprintf(err, errsize, "model parameter %s wants a number >= 0 (seconds, or seconds per byte)", names[k]);
            return -1;
        }
        *fields[k] = x;
        given[k] = 1;
        if (k < 2 || k >= 7) abg = 1;
        if (k >= 3 && k < 7) loggp = 1;
        p = *end ? end + 1 : end;
    }
    if (abg && loggp) {
        snprintf(err, errsize, "give either alpha and beta or L, o, g and G, not both");
        return -1;
    }
    m->loggp = loggp;
    if (given[7] || given[8]) { /* inside a node, what is not given costs as between nodes */
        m->two_level = 1;
        if (!given[7]) m->alpha_node = m->alpha;
        if (!given[8]) m->beta_node = m->beta;
    }
    return 0;
}

void sim_model_print(const sim_model *m, FILE *out)
{
    if (m->loggp)
        fprintf(out, "LogGP: L=%g s, o=%g s, g=%g s, G=%g s/B, gamma=%g s/B", m->L, m->o, m->g, m->G, m->gamma);
    else
        fprintf(out, "alpha-beta-gamma: alpha=%g s, beta=%g s/B, gamma=%g s/B", m->alpha, m->beta, m->gamma);
    if (!m->loggp && m->two_level) fprintf(out, ", inside a node alpha=%g s, beta=%g s/B", m->alpha_node, m->beta_node);
}

void sim_format_time(double t, char *out, size_t size)
{
    static const char *const unit[] = {"s", "ms", "us", "ns"};
    int u = 0;
    while (u < 3 && t != 0 && fabs(t) < 1) t *= 1000, u++;
    snprintf(out, size, "%.4g %s", t, unit[u]);
}

static sim_path later(sim_path a, sim_path b) { return b.t > a.t ? b : a; }

compile_args sim_compile_args(const sim_args *a)
{
    compile_args c = {.p = a->p, .count = a->count, .esize = a->esize, .root = a->root, .inplace = a->inplace,
                      .commutative = a->commutative, .shared_memory = a->shared_memory, .nbufs = a->nbufs,
                      .node_of = a->node_of, .nparams = a->nparams};
    for (int i = 0; i < a->nparams && i < COMPILE_MAX_PARAMS; i++) {
        c.params[i].name = a->params[i].name;
        c.params[i].value = a->params[i].value;
    }
    return c;
}

sim_args sim_args_of(const compile_args *c)
{
    sim_args a = {.p = c->p, .count = c->count, .esize = c->esize, .root = c->root, .inplace = c->inplace,
                  .commutative = c->commutative, .shared_memory = c->shared_memory, .nbufs = c->nbufs,
                  .node_of = c->node_of, .nparams = c->nparams};
    for (int i = 0; i < c->nparams && i < COMPILE_MAX_PARAMS; i++) {
        a.params[i].name = c->params[i].name;
        a.params[i].value = c->params[i].value;
    }
    return a;
}

/* ---- bookkeeping ---- */

static __attribute__((format(printf, 2, 3))) void failf(sctx *c, const char *fmt, ...)
{
    if (c->failed) return;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(c->d, c->s->src, c->s->at, "%s", msg);
    c->failed = 1;
}

static void nomem(sctx *c) { failf(c, "out of memory simulating '%s'", c->s->name); }

static sim_round_stat *stat_of(sctx *c, uint32_t round)
{
    sim_result *r = c->res;
    if (round >= c->capstats) {
        uint32_t cap = c->capstats ? c->capstats * 2 : 64;
        while (cap <= round) cap *= 2;
        sim_round_stat *v = realloc(r->rounds, cap * sizeof *v);
        if (!v) {
            nomem(c);
            return NULL;
        }
        memset(v + c->capstats, 0, (cap - c->capstats) * sizeof *v);
        r->rounds = v;
        c->capstats = cap;
    }
    if (round >= r->nrounds) r->nrounds = round + 1;
    return &r->rounds[round];
}

static int start_rank(sctx *c, uint32_t r)
{
    compile_args ca = sim_compile_args(c->a);
    ca.rank = r;
    /* MPI_IN_PLACE of a reduce, gather or scatter is the root's alone */
    if (c->s->collective) ca.inplace = collective_inplace_at(collective_from_name(c->s->collective), r, c->a->root, ca.inplace);
    /* a vector collective's: every count the count simulated, packed */
    int coll = c->s->collective ? collective_from_name(c->s->collective) : -1;
    int64_t *space = collective_has_vectors(coll) ? malloc(4 * (size_t)ca.p * sizeof *space) : NULL;
    if (collective_has_vectors(coll) && !space) {
        nomem(c);
        return -1;
    }
    collective_uniform_vectors(coll, ca.p, r, ca.root, ca.count, space, ca.vec);
    nbc_program *prog;
    int rc = compile_program(c->lib, c->s, &ca, &prog, c->d);
    free(space);
    if (rc != COMPILE_OK) {
        c->failed = 1;
        return -1;
    }
    size_t len;
    srank *k = &c->rk[r];
    k->code = skel_build(prog, r, &len);
    free(prog);
    if (!k->code) {
        nomem(c);
        return -1;
    }
    k->state = S_START;
    k->end.hop_rank = -1;
    return 0;
}

/* ---- one round, in two passes ---- */

/* Local work and sends. */
static void post_round(sctx *c, uint32_t r)
{
    srank *k = &c->rk[r];
    const sim_model *m = c->m;
    sim_path cpu = k->end, port = k->end, end = k->end, first_cur = {0};
    uint32_t pos = k->pos, first_pos = UINT32_MAX;
    uint64_t last = k->last_len, first_last = 0, sent = 0, msgs = 0;
    k->start = k->end.t;
    k->reduced = k->copied = 0;
    for (;;) {
        uint32_t at = pos;
        uint64_t last_at = last;
        skel_token t;
        skel_next(k->code, &pos, r, &last, &t);
        if (t.kind == SK_END) {
            if (first_pos == UINT32_MAX) first_pos = at, first_last = last_at, first_cur = cpu;
            break;
        }
        if (t.kind == SK_LOCAL) {
            cpu.t += (double)t.reduced * m->gamma;
            cpu.red += t.reduced;
            k->reduced += t.reduced;
            k->copied += t.copied;
        } else if (t.kind == SK_RECV || t.kind == SK_WAIT) {
            if (first_pos == UINT32_MAX) first_pos = at, first_last = last_at, first_cur = cpu;
        } else { /* SEND, or SIGNAL: a message of no bytes on the flags' own channel */
            sim_path go, arrive;
            if (m->loggp) {
                cpu.t += m->o;
                cpu.ovh++;
                go = m->any_port ? cpu : later(cpu, port);
                sim_path injected = go;
                uint64_t gbytes = t.len ? t.len - 1 : 0;
                injected.t += (double)gbytes * m->G;
                injected.xfer += gbytes;
                port = injected;
                port.t += m->g;
                port.gaps++;
                arrive = injected;
                arrive.t += m->L;
                arrive.msgs++;
                end = later(end, injected);
            } else {
                go = m->any_port ? cpu : later(cpu, port);
                arrive = go;
                const int64_t *node = c->a->node_of; /* a message inside a node: its own alpha and beta */
                int near = node && t.kind == SK_SEND && node[r] == node[t.peer];
                double al = near && m->two_level ? m->alpha_node : m->alpha;
                double be = near && m->two_level ? m->beta_node : m->beta;
                arrive.t += al + (double)t.len * be;
                arrive.msgs++;
                arrive.xfer += t.len;
                arrive.msgs_node += (uint32_t)near;
                arrive.xfer_node += near ? t.len : 0;
                port = arrive;
                end = later(end, arrive);
            }
            arrive.hop_rank = (int32_t)r;
            arrive.hop_round = k->round;
            smsg msg = {arrive, t.len, go.t, k->round};
            int flag = t.kind == SK_SIGNAL;
            if (net_post(&c->net, r, flag ? net_flags((uint32_t)t.peer) : (uint32_t)t.peer, 0, &msg)) {
                nomem(c);
                return;
            }
            srank *dst = &c->rk[t.peer];
            if (dst->waiting == (int32_t)r) {
                dst->waiting = -1;
                net_ready(&c->net, (uint32_t)t.peer);
            }
            if (flag) {
                c->res->flags++;
                continue;
            }
            sent += t.len;
            msgs++;
        }
    }
    k->end = later(end, cpu);
    k->cur = m->loggp ? cpu : first_cur;
    k->pos = first_pos;
    k->last_len = first_last;
    k->state = S_RECV;
    sim_round_stat *st = stat_of(c, k->round);
    if (!st) return;
    st->ranks++;
    st->messages += (uint32_t)msgs;
    st->bytes += sent;
    if (sent > st->max_rank_bytes) st->max_rank_bytes = sent;
    if (k->reduced > st->max_rank_reduced) st->max_rank_reduced = k->reduced;
    c->res->messages += msgs;
    c->res->bytes += sent;
}

static void end_round(sctx *c, uint32_t r)
{
    srank *k = &c->rk[r];
    if (k->end.t < k->start + c->m->min_round) k->end.t = k->start + c->m->min_round;
    sim_round_stat *st = stat_of(c, k->round);
    if (!st) return;
    if (k->end.t > st->latest_end) st->latest_end = k->end.t;
    if (k->end.t - k->start > st->longest) st->longest = k->end.t - k->start;
    if (c->h && c->h->round) c->h->round(c->h->ctx, r, k->round, k->start, k->end.t, k->reduced, k->copied);
    if (c->a->record_hops) {
        if (k->ncauses == k->capcauses) {
            uint32_t cap = k->capcauses ? k->capcauses * 2 : 8;
            sim_hop *v = realloc(k->causes, cap * sizeof *v);
            if (!v) {
                nomem(c);
                return;
            }
            k->causes = v;
            k->capcauses = cap;
        }
        k->causes[k->ncauses++] = (sim_hop){(uint32_t)k->end.hop_rank, k->end.hop_round};
    }
    k->round++;
    k->state = S_START;
}

/* Receives, in order; returns 0 when blocked on a message not sent yet. */
static int receive(sctx *c, uint32_t r)
{
    srank *k = &c->rk[r];
    const sim_model *m = c->m;
    for (;;) {
        uint32_t at = k->pos;
        uint64_t last_at = k->last_len;
        skel_token t;
        skel_next(k->code, &k->pos, r, &k->last_len, &t);
        if (t.kind == SK_END) {
            end_round(c, r);
            return 1;
        }
        if (t.kind == SK_LOCAL && !m->loggp) {
            k->cur.t += (double)t.reduced * m->gamma;
            k->cur.red += t.reduced;
        }
        if (t.kind != SK_RECV && t.kind != SK_WAIT) continue;
        int flag = t.kind == SK_WAIT;
        smsg got;
        if (!net_take(&c->net, (uint32_t)t.peer, flag ? net_flags(r) : r, 0, &got)) {
            k->pos = at;
            k->last_len = last_at;
            k->waiting = (int32_t)t.peer;
            return 0;
        }
        if (got.len != t.len) {
            failf(c, "'%s' does not simulate: rank %u receives %" PRIu64 " bytes, but the matching message is %" PRIu64 " bytes (nbcc verify explains)",
                  c->s->name, r, t.len, got.len);
            return 0;
        }
        sim_path done = later(got.at, k->cur);
        if (m->loggp) {
            done.t += m->o;
            done.ovh++;
            k->cur = done;
        }
        k->end = later(done, k->end); /* on a tie the message makes the more telling path */
        if (c->h && flag && c->h->flag) c->h->flag(c->h->ctx, (uint32_t)t.peer, got.src_round, got.sent, r, k->round, done.t);
        if (c->h && !flag && c->h->message)
            c->h->message(c->h->ctx, (uint32_t)t.peer, got.src_round, got.sent, r, k->round, done.t, got.len);
    }
}

static void finish(sctx *c, uint32_t r)
{
    srank *k = &c->rk[r];
    k->state = S_DONE;
    free(k->code);
    k->code = NULL;
    sim_result *res = c->res;
    if (k->end.t > res->time || (k->end.t == res->time && r < res->last_rank) || res->last_rank == UINT32_MAX) {
        res->time = k->end.t;
        res->last_rank = r;
        res->path = k->end;
    }
}

static void advance(sctx *c, uint32_t r)
{
    srank *k = &c->rk[r];
    while (!c->failed && k->state != S_DONE) {
        if (k->state == S_IDLE && start_rank(c, r)) return;
        if (k->state == S_START) {
            uint32_t pos = k->pos;
            uint64_t last = k->last_len;
            skel_token t;
            skel_next(k->code, &pos, r, &last, &t);
            if (t.kind == SK_DONE) {
                finish(c, r);
                return;
            }
            post_round(c, r);
        }
        if (k->state == S_RECV && !receive(c, r)) return;
    }
}

/* ---- the critical path's hops ---- */

static void collect_hops(sctx *c)
{
    sim_result *res = c->res;
    size_t cap = 16;
    res->hops = malloc(cap * sizeof *res->hops);
    if (!res->hops) return;
    uint32_t r = res->last_rank;
    uint32_t round = c->rk[r].ncauses ? c->rk[r].ncauses - 1 : 0;
    res->hops[res->nhops++] = (sim_hop){r, round};
    for (sim_hop h = {(uint32_t)res->path.hop_rank, res->path.hop_round}; h.rank != UINT32_MAX;) {
        if (res->nhops == cap) {
            sim_hop *v = realloc(res->hops, 2 * cap * sizeof *v);
            if (!v) return;
            res->hops = v;
            cap *= 2;
        }
        res->hops[res->nhops++] = h;
        const srank *k = &c->rk[h.rank];
        if (h.round == 0 || h.round > k->ncauses) break;
        h = k->causes[h.round - 1]; /* the message left after its sender's previous round */
    }
}

/* ---- the run ---- */

int simulate_schedule(const sched_lib *lib, const sched_def *s, const sim_args *a, const sim_model *m,
                      const sim_hooks *hooks, sim_result *out, diag *d)
{
    memset(out, 0, sizeof *out);
    out->last_rank = UINT32_MAX;
    compile_args ca = sim_compile_args(a);
    diag quiet;
    diag_init(&quiet);
    int rc = compile_check(lib, s, &ca, &quiet);
    diag_free(&quiet);
    if (rc == COMPILE_UNMET) return SIM_SKIP;
    if (a->p < 1 || a->p > INT32_MAX) {
        diag_error(d, s->src, s->at, "cannot simulate '%s' for p = %" PRId64, s->name, a->p);
        return SIM_FAIL;
    }
    sctx c = {.lib = lib, .s = s, .a = a, .m = m, .h = hooks, .d = d, .p = a->p, .res = out};
    c.rk = calloc((size_t)a->p, sizeof *c.rk);
    if (net_init(&c.net, a->p, sizeof(smsg)) || !c.rk) nomem(&c);
    for (int64_t r = 0; r < c.p && !c.failed; r++) c.rk[r].waiting = -1;
    while (!c.failed) {
        uint32_t r;
        if (!net_next(&c.net, &r)) { /* nothing started can move: start the next rank */
            while (c.next_new < c.p && c.rk[c.next_new].state != S_IDLE) c.next_new++;
            if (c.next_new == c.p) break;
            r = (uint32_t)c.next_new++;
        }
        advance(&c, r);
    }
    out->max_live_messages = c.net.max_waiting;
    for (int64_t r = 0; r < c.p && !c.failed; r++)
        if (c.rk[r].state != S_DONE)
            failf(&c, "'%s' does not complete: rank %" PRId64 " waits in round %u for a message or signal from rank %d (nbcc verify explains)",
                  s->name, r, c.rk[r].round, c.rk[r].waiting);
    if (!c.failed && c.net.waiting)
        failf(&c, "'%s' leaves %" PRIu64 " messages or signals unreceived (nbcc verify explains)", s->name, c.net.waiting);
    if (!c.failed && a->record_hops) collect_hops(&c);
    for (int64_t r = 0; c.rk && r < c.p; r++) {
        free(c.rk[r].code);
        free(c.rk[r].causes);
    }
    free(c.rk);
    net_free(&c.net, NULL);
    if (c.failed) {
        diag_append(d, "  (simulating '%s' for p = %" PRId64 ", count = %" PRId64 ")\n", s->name, a->p, a->count);
        sim_result_free(out);
        return SIM_FAIL;
    }
    return SIM_OK;
}

void sim_result_free(sim_result *r)
{
    free(r->hops);
    free(r->rounds);
    r->hops = NULL;
    r->rounds = NULL;
    r->nhops = r->nrounds = 0;
}

/* ---- the report ---- */

void sim_report(const sim_result *r, const sim_model *m, uint32_t max_rounds, FILE *out)
{
    char t[32], a[32], b[32], g[32];
    sim_format_time(r->time, t, sizeof t);
    fprintf(out, "time: %.6e s (%s), rank %u finishes last\n", r->time, t, r->last_rank);
    const sim_path *p = &r->path;
    if (m->loggp) {
        sim_format_time(p->msgs * m->L + p->ovh * m->o + p->gaps * m->g, a, sizeof a);
        sim_format_time((double)p->xfer * m->G, b, sizeof b);
        sim_format_time((double)p->red * m->gamma, g, sizeof g);
        fprintf(out, "critical path: %u L + %u o + %u g = %s, %" PRIu64 " G-bytes = %s, %" PRIu64 " bytes reduced = %s\n",
                p->msgs, p->ovh, p->gaps, a, p->xfer, b, p->red, g);
    } else {
        double an = m->two_level ? m->alpha_node : m->alpha, bn = m->two_level ? m->beta_node : m->beta;
        sim_format_time((p->msgs - p->msgs_node) * m->alpha, a, sizeof a);
        sim_format_time((double)(p->xfer - p->xfer_node) * m->beta, b, sizeof b);
        sim_format_time((double)p->red * m->gamma, g, sizeof g);
        fprintf(out, "critical path: %u messages (alpha) = %s, %" PRIu64 " bytes moved (beta) = %s, %" PRIu64 " bytes reduced (gamma) = %s\n",
                p->msgs - p->msgs_node, a, p->xfer - p->xfer_node, b, p->red, g);
        if (p->msgs_node) {
            sim_format_time(p->msgs_node * an, a, sizeof a);
            sim_format_time((double)p->xfer_node * bn, b, sizeof b);
            fprintf(out, "  and inside a node: %u messages (alpha_node) = %s, %" PRIu64 " bytes moved (beta_node) = %s\n",
                    p->msgs_node, a, p->xfer_node, b);
        }
    }
    if (r->nhops) {
        fprintf(out, "  from the end back: rank %u round %u", r->hops[0].rank, r->hops[0].round);
        for (size_t i = 1; i < r->nhops; i++) {
            if (i == 12 && r->nhops > 16) {
                fprintf(out, " <- ... (%zu more)", r->nhops - 16);
                i = r->nhops - 4;
            }
            fprintf(out, " <- message from rank %u round %u", r->hops[i].rank, r->hops[i].round);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "%" PRIu64 " messages, %" PRIu64 " bytes in all; at most %" PRIu64 " messages in flight\n", r->messages, r->bytes,
            r->max_live_messages);
    if (r->flags) fprintf(out, "%" PRIu64 " signals through shared memory (no MPI request; each costs alpha, as a message of no bytes)\n", r->flags);
    fprintf(out, "round     ranks  messages          bytes  max bytes/rank  max reduced/rank    latest end       longest\n");
    for (uint32_t i = 0; i < r->nrounds && i < max_rounds; i++) {
        const sim_round_stat *s = &r->rounds[i];
        char e[32], l[32];
        sim_format_time(s->latest_end, e, sizeof e);
        sim_format_time(s->longest, l, sizeof l);
        fprintf(out, "%5u %9u %9u %14" PRIu64 " %15" PRIu64 " %17" PRIu64 " %13s %13s\n", i, s->ranks, s->messages, s->bytes,
                s->max_rank_bytes, s->max_rank_reduced, e, l);
    }
    if (r->nrounds > max_rounds) fprintf(out, "... %u more rounds (--rounds N shows more)\n", r->nrounds - max_rounds);
}
