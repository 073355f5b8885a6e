/* Unit tests of the lexer, parser and compiler (no MPI): exact diagnostics for the broken
 * schedules in tests/dsl/broken.txt, the shape of compiled programs, and robustness against
 * hostile input (every prefix and random mutations of the built-in schedules, deep nesting). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/compile.h"
#include "../compiler/library.h"

#include "builtin.h"

static int failures;

static void result(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("ok dsl %s\n", name);
        return;
    }
    failures++;
    printf("FAIL dsl %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static sched_lib *builtins(void)
{
    sched_lib *lib = lib_create();
    diag d;
    diag_init(&d);
    for (size_t i = 0; i < nbc_builtin_count; i++)
        lib_add_source(lib, nbc_builtin_schedules[i].name, nbc_builtin_schedules[i].text,
                       nbc_builtin_schedules[i].len, &d);
    diag_free(&d);
    return lib;
}

/* Parses and compiles one case the way broken.txt says; returns the diagnostics. */
static void diagnose(const char *name, const char *src, diag *d)
{
    sched_lib *lib = lib_create();
    if (lib_add_source(lib, name, src, strlen(src), d) == 0) {
        const sched_def *s = NULL;
        for (size_t i = 0; i < lib_count(lib) && !s; i++)
            if (lib_at(lib, i)->collective) s = lib_at(lib, i);
        compile_args a = {.p = 4, .rank = 1, .count = 8, .esize = 4, .commutative = 1, .max_steps = 100000};
        /* a vector collective's vectors, as rank 1 has them (none of the root's: root 0) */
        static const int64_t counts[4] = {1, 2, 0, 3}, displs[4] = {0, 1, 3, 3};
        int c = s ? collective_from_name(s->collective) : -1;
        for (int k = 0; k < COLL_NVEC && collective_has_vectors(c) && !collective_rooted(c); k++)
            a.vec[k] = k % 2 ? displs : counts;
        nbc_program *prog = NULL;
        if (s) compile_program(lib, s, &a, &prog, d);
        free(prog);
    }
    lib_destroy(lib);
}

static void broken_cases(const char *path)
{
    char *text = read_file(path);
    if (!text) {
        result(0, "broken.txt", "cannot read %s", path);
        return;
    }
    int cases = 0;
    for (char *p = strstr(text, "\n=== "); p;) {
        char *name = p + 5;
        char *nl = strchr(name, '\n');
        char *sep = nl ? strstr(nl, "\n--- expect\n") : NULL;
        if (!sep) break;
        char *expect = sep + strlen("\n--- expect\n");
        p = strstr(expect, "\n=== ");               /* the next case, found before cutting */
        size_t elen = p ? (size_t)(p - expect) : strlen(expect);
        while (elen > 1 && expect[elen - 1] == '\n' && expect[elen - 2] == '\n') elen--; /* blank lines */
        *nl = '\0';
        sep[1] = '\0'; /* the source keeps its final newline */
        expect[elen] = '\0';
        char file[256];
        snprintf(file, sizeof file, "%s.nbs", name);
        diag d;
        diag_init(&d);
        diagnose(file, nl + 1, &d);
        const char *got = d.text ? d.text : "";
        char label[300];
        snprintf(label, sizeof label, "diagnostic %s", name);
        result(strcmp(got, expect) == 0 && d.errors > 0, label, "expected:\n%s--- got:\n%s", expect, got);
        diag_free(&d);
        cases++;
    }
    result(cases >= 25, "broken.txt has its cases", "only %d cases found", cases);
    free(text);
}

static nbc_program *compile_builtin(sched_lib *lib, const char *name, compile_args a)
{
    diag d;
    diag_init(&d);
    nbc_program *prog = NULL;
    const sched_def *s = lib_find(lib, name);
    if (!s || compile_program(lib, s, &a, &prog, &d) != COMPILE_OK) {
        printf("# %s", d.text ? d.text : "no such schedule\n");
        prog = NULL;
    }
    diag_free(&d);
    return prog;
}

static int messages(const nbc_program *p)
{
    int n = 0;
    for (uint32_t i = 0; i < p->ninsns; i++) n += prog_opinfo(prog_insns(p)[i].op)->message;
    return n;
}

/* Every instruction stays inside its buffers. */
static int in_bounds(const nbc_program *p, uint64_t count_bytes)
{
    for (uint32_t i = 0; i < p->ninsns; i++) {
        const nbc_insn *in = &prog_insns(p)[i];
        uint64_t size[SLOT_COUNT_] = {count_bytes, count_bytes, p->scratch};
        for (int k = 0; k < 3; k++)
            if ((prog_operands(in->op) >> k & 1) && prog_operand_off(in, k) + in->len > size[prog_operand_slot(in, k)]) return 0;
    }
    return 1;
}

static void program_shapes(void)
{
    sched_lib *lib = builtins();
    int ok = 1;
    char why[256] = "";
    for (int64_t p = 2; p <= 9 && ok; p++) {
        const int64_t counts[] = {p, 3 * p + 1, 100};
        for (int c = 0; c < 3 && ok; c++)
            for (int64_t r = 0; r < p && ok; r++) {
                compile_args a = {.p = p, .rank = r, .count = counts[c], .esize = 4, .commutative = 1};
                nbc_program *prog = compile_builtin(lib, "allreduce_ring", a);
                if (!prog || prog->nrounds != 2 * (p - 1) || messages(prog) != 4 * (p - 1) ||
                    prog->scratch != (uint64_t)((counts[c] + p - 1) / p * 4) || !in_bounds(prog, (uint64_t)counts[c] * 4)) {
                    ok = 0;
                    snprintf(why, sizeof why, "p=%lld rank=%lld count=%lld: %u rounds, %d messages", (long long)p,
                             (long long)r, (long long)counts[c], prog ? prog->nrounds : 0, prog ? messages(prog) : 0);
                }
                free(prog);
            }
    }
    result(ok, "ring has 2(p-1) rounds and 4(p-1) messages, in bounds", "%s", why);

    ok = 1;
    for (int64_t p = 1; p <= 33 && ok; p++) {
        int64_t pof2 = 1;
        while (pof2 * 2 <= p) pof2 *= 2;
        int64_t lg = 0;
        while (((int64_t)1 << lg) < pof2) lg++;
        for (int64_t r = 0; r < p && ok; r++) {
            compile_args a = {.p = p, .rank = r, .count = 5, .esize = 8, .commutative = 1};
            nbc_program *prog = compile_builtin(lib, "allreduce_recursive_doubling", a);
            int64_t rem = p - pof2;
            int expect = r < 2 * rem && r % 2 == 0 ? 2 : (int)(2 * lg + (r < 2 * rem ? 2 : 0));
            if (!prog || messages(prog) != expect || !in_bounds(prog, 40)) {
                ok = 0;
                snprintf(why, sizeof why, "p=%lld rank=%lld: %d messages, expected %d", (long long)p, (long long)r,
                         prog ? messages(prog) : -1, expect);
            }
            free(prog);
        }
    }
    result(ok, "recursive doubling message counts for p = 1..33", "%s", why);

    compile_args a = {.p = 4, .rank = 1, .count = 8, .esize = 4, .inplace = 1, .commutative = 1};
    nbc_program *prog = compile_builtin(lib, "allreduce_ring", a);
    int copies = 0;
    for (uint32_t i = 0; prog && i < prog->ninsns; i++) copies += prog_insns(prog)[i].op == OP_COPY;
    result(prog && copies == 0, "in place drops the initial copy", "%d copies", copies);
    free(prog);

    a = (compile_args){.p = 4, .rank = 1, .count = 0, .esize = 4, .commutative = 1};
    prog = compile_builtin(lib, "allreduce_recursive_doubling", a);
    result(prog && prog->ninsns == 0 && prog->nrounds == 0, "count 0 compiles to nothing", "%u instructions",
           prog ? prog->ninsns : 0);
    free(prog);

    /* rank 2 of 4 meets a higher partner first: dst ⊕= src needs the ordered lowering */
    a = (compile_args){.p = 4, .rank = 0, .count = 6, .esize = 4, .commutative = 0};
    prog = compile_builtin(lib, "allreduce_recursive_doubling", a);
    int ordered = 0;
    for (uint32_t i = 0; prog && i + 1 < prog->ninsns; i++) {
        const nbc_insn *in = prog_insns(prog) + i;
        /* t = src; t = dst ⊕ t; dst = t, whose first two are fused: t = dst ⊕ src; dst = t */
        ordered += in[0].op == OP_COMBINE && in[1].op == OP_COPY && in[0].a_slot == SLOT_SCRATCH &&
                   in[0].b_slot == SLOT_RECV && in[0].c_slot == SLOT_SCRATCH && in[1].a_slot == SLOT_RECV;
    }
    result(prog && ordered == 2 && prog->scratch == 2 * 6 * 4 && in_bounds(prog, 24),
           "non-commutative dst ⊕= src is lowered through a temporary", "%d lowered reduces, scratch %llu",
           ordered, prog ? (unsigned long long)prog->scratch : 0ULL);
    free(prog);

    a = (compile_args){.p = 4, .rank = 1, .count = 2, .esize = 4, .commutative = 1};
    diag d;
    diag_init(&d);
    int rc = compile_check(lib, lib_find(lib, "allreduce_ring"), &a, &d);
    result(rc == COMPILE_UNMET && strstr(d.text, "count >= p"), "ring refuses count < p", "rc %d: %s", rc, d.text ? d.text : "");
    diag_clear(&d);
    a.commutative = 0;
    a.count = 8;
    rc = compile_check(lib, lib_find(lib, "allreduce_ring"), &a, &d);
    result(rc == COMPILE_UNMET && strstr(d.text, "commutative"), "ring refuses a non-commutative op", "rc %d", rc);
    diag_free(&d);
    lib_destroy(lib);
}

/* The language features that the built-in schedules do not all use. */
/* Compiles schedule `name` from a source text of its own (d holds the diagnostics; the caller
 * frees it and the program). Returns 0 or the error code. */
static int compile_text(const char *file, const char *text, const char *name, const compile_args *a,
                        nbc_program **prog, diag *d)
{
    sched_lib *lib = lib_create();
    diag_init(d);
    int rc = lib_add_source(lib, file, text, strlen(text), d);
    if (rc == 0) rc = compile_program(lib, lib_find(lib, name), a, prog, d);
    lib_destroy(lib);
    return rc;
}

static void features(void)
{
    const char *text =
        "schedule shift implements allreduce\n"
        "    param step = 1\n"
        "{\n"
        "    let half = count / 2;\n"
        "    let r = range(0, half);\n"
        "    round { copy sendbuf to recvbuf; }\n"
        "    call pass(recvbuf = recvbuf[r], dist = step);\n"
        "    let x = min(3, 1, 2) + max(1, 5) * 10 + (is_pow2(p) ? 100 : 0) + (-7 % 3) * 1000;\n"
        "    if x != 151 + 2000 { round { send recvbuf[0 : x] to 0; } }\n"
        "    else if lo(r) != 0 || hi(r) != half || len(recvbuf) != count { round { send recvbuf[0 : 99] to 0; } }\n"
        "}\n"
        "schedule pass\n"
        "    param dist = 7\n"
        "{\n"
        "    round {\n"
        "        send recvbuf to (rank + dist) % p;\n"
        "        recv recvbuf from (rank - dist) % p;\n"
        "    }\n"
        "}\n";
    diag d;
    nbc_program *prog = NULL;
    compile_args a = {.p = 4, .rank = 1, .count = 10, .esize = 8, .commutative = 1};
    int rc = compile_text("features.nbs", text, "shift", &a, &prog, &d);
    const nbc_insn *in = prog ? prog_insns(prog) : NULL;
    result(rc == 0 && prog && prog->ninsns == 3 && in[1].op == OP_SEND && in[1].peer == 2 && in[1].len == 40 &&
               in[2].op == OP_RECV && in[2].peer == 0 && prog->nrounds == 1,
           "let, range, call with arguments and params, builtins, if/else if",
           "rc %d, %s", rc, d.text ? d.text : "wrong program");
    free(prog);
    diag_free(&d);
}

/* The topology names: a map of 2 + 2 + 1 ranks placed round-robin, the maps assumed without
 * one, and a map not numbered by first appearance. A wrong value sends 99 elements. */
static void topology(void)
{
    const char *text =
        "schedule topo implements allreduce\n"
        "{\n"
        "    let ok = nodes == 3 && node(0) == 0 && node(3) == 0 && node(4) == 1 && local(2) == 0 && local(4) == 1\n"
        "             && node_size(0) == 2 && node_size(2) == 1 && node_rank(1, 1) == 4 && node_rank(2, 0) == 2;\n"
        "    if !ok { round { send recvbuf[0 : 99] to 0; } }\n"
        "    round { send recvbuf to node_rank(node(rank), (local(rank) + 1) % node_size(node(rank))); }\n"
        "}\n"
        "schedule count_nodes implements allreduce\n"
        "{\n"
        "    round { send recvbuf[0 : nodes] to 0; }\n"
        "}\n";
    const int64_t cyclic[5] = {0, 1, 2, 0, 1}, unnumbered[5] = {0, 2, 1, 0, 1};
    diag d;
    nbc_program *prog = NULL;
    compile_args a = {.p = 5, .rank = 1, .count = 100, .esize = 1, .commutative = 1, .node_of = cyclic};
    int rc = compile_text("topo.nbs", text, "topo", &a, &prog, &d);
    const nbc_insn *in = prog ? prog_insns(prog) : NULL;
    result(rc == 0 && prog && prog->ninsns == 1 && in[0].op == OP_SEND && in[0].peer == 4 && in[0].len == 100,
           "topology: node, nodes, local, node_size, node_rank on nodes of 2 + 2 + 1 ranks, round-robin", "rc %d, %s", rc,
           d.text ? d.text : "wrong program");
    free(prog);
    diag_free(&d);
    int64_t lens[2] = {0, 0};
    for (int shm = 0; shm < 2; shm++) {
        compile_args b = {.p = 5, .rank = 1, .count = 100, .esize = 1, .commutative = 1, .shared_memory = shm};
        prog = NULL;
        if (compile_text("topo.nbs", text, "count_nodes", &b, &prog, &d) == 0 && prog && prog->ninsns == 1)
            lens[shm] = (int64_t)prog_insns(prog)[0].len;
        free(prog);
        diag_free(&d);
    }
    result(lens[0] == 5 && lens[1] == 1, "topology: without a map, a node a rank, or one node when the ranks share memory",
           "nodes %lld and %lld", (long long)lens[0], (long long)lens[1]);
    a.node_of = unnumbered;
    prog = NULL;
    rc = compile_text("topo.nbs", text, "topo", &a, &prog, &d);
    result(rc == COMPILE_ERROR && !prog && d.text && strstr(d.text, "rank 1's node 2 is not numbered by first appearance (0..1)"),
           "topology: a map not numbered by first appearance is refused", "rc %d: %s", rc, d.text ? d.text : "");
    free(prog);
    diag_free(&d);
}

/* A copy followed in the same round by a reduction of exactly the bytes it wrote becomes one
 * COMBINE; anything else stays as written. */
static void fusion(void)
{
    const char *text =
        "schedule f implements allreduce\n"
        "{\n"
        "    let h = count / 2;\n"
        "    scratch inc[count];\n"
        "    round { recv inc from (rank + 1) % p; send sendbuf to (rank + 1) % p; }\n"
        "    round {\n"
        "        copy sendbuf[0 : h] to recvbuf[0 : h];\n"
        "        reduce recvbuf[0 : h] += inc[0 : h];\n"        /* fused */
        "        copy sendbuf[h : count] to recvbuf[h : count];\n"
        "        reduce recvbuf[h : count - 1] += inc[h : count - 1];\n" /* not the same bytes */
        "        send inc[0 : 1] to 0; recv inc[0 : 1] from 0;\n"
        "    }\n"
        "    round { copy sendbuf[0 : 1] to inc[0 : 1]; send recvbuf to 0; }\n"
        "    round { reduce inc[0 : 1] += recvbuf[0 : 1]; send recvbuf to 0; }\n" /* another round */
        "}\n";
    diag d;
    nbc_program *prog = NULL;
    compile_args a = {.p = 1, .rank = 0, .count = 10, .esize = 8, .commutative = 1};
    int rc = compile_text("fusion.nbs", text, "f", &a, &prog, &d);
    char ops[64] = "";
    for (uint32_t i = 0; prog && i < prog->ninsns && i < 16; i++)
        strcat(ops, (const char *[]){"S", "R", "C", "D", "X"}[prog_insns(prog)[i].op]);
    const nbc_insn *x = prog ? prog_insns(prog) + 2 : NULL;
    result(rc == 0 && !strcmp(ops, "RSXCDSRCSDS") && x->a_slot == SLOT_RECV && x->a_off == 0 && x->len == 40 &&
               x->b_slot == SLOT_SCRATCH && x->b_off == 0 && x->c_slot == SLOT_SEND && x->c_off == 0 &&
               prog_locs(prog)[2].line == 8,
           "copy + reduce of the same bytes in one round fuse into COMBINE, nothing else does",
           "rc %d, %s", rc, d.text ? d.text : ops);
    free(prog);
    diag_free(&d);
}

/* Shared memory: sendbuf@r and recvbuf@r name rank r's buffers (SLOT_PEER, the instruction's
 * peer), signal and wait emit flags, and either makes the program PROG_SHARED. */
static void shared_memory(void)
{
    const char *text =
        "schedule s implements allreduce\n"
        "    requires shared_memory\n"
        "{\n"
        "    round {\n"
        "        copy sendbuf@1[0 : 2] to recvbuf[0 : 2];\n"
        "        reduce recvbuf[0 : 2] =+ sendbuf@rank[0 : 2];\n" /* fused: one peer */
        "        copy sendbuf@2[2 : 4] to recvbuf[2 : 4];\n"
        "        reduce recvbuf[2 : 4] =+ sendbuf@1[2 : 4];\n"    /* two peers: not fused */
        "        copy recvbuf[0 : 4] to recvbuf@(p - 1)[0 : 4];\n"
        "        signal 1; wait 2;\n"
        "    }\n"
        "}\n";
    diag d;
    nbc_program *prog = NULL;
    compile_args a = {.p = 3, .rank = 0, .count = 4, .esize = 8, .commutative = 1, .shared_memory = 1};
    int rc = compile_text("shm.nbs", text, "s", &a, &prog, &d);
    const nbc_insn *in = prog ? prog_insns(prog) : NULL;
    result(rc == 0 && prog->ninsns == 6 && prog->nrounds == 1 && prog->flags == (PROG_SHARED | PROG_AGREE) &&
               prog->max_round_comms == 0 && prog->shared_bytes == 0 &&
               in[0].op == OP_COMBINE && in[0].peer == 1 && in[0].a_slot == SLOT_RECV && in[0].b_slot == SLOT_SEND &&
               in[0].c_slot == (SLOT_SEND | SLOT_PEER) &&
               in[1].op == OP_COPY && in[1].peer == 2 && in[1].b_slot == (SLOT_SEND | SLOT_PEER) &&
               in[2].op == OP_REDUCE && in[2].peer == 1 && in[2].b_slot == (SLOT_SEND | SLOT_PEER) &&
               in[3].op == OP_COPY && in[3].peer == 2 && in[3].a_slot == (SLOT_RECV | SLOT_PEER) && in[3].b_slot == SLOT_RECV &&
               in[4].op == OP_SIGNAL && in[4].peer == 1 && in[4].len == 0 && in[5].op == OP_WAIT && in[5].peer == 2,
           "peer operands, one peer per COMBINE, signal and wait, PROG_SHARED and PROG_AGREE", "rc %d, %s", rc, d.text ? d.text : "wrong program");
    free(prog);
    diag_free(&d);

    /* a rank's own buffer by number is simply its buffer; in place, sendbuf@r is where r's input
     * lies in r's recvbuf (allgather: block r) */
    const char *own =
        "schedule g implements allgather\n"
        "{\n"
        "    round { copy sendbuf@rank to recvbuf@rank[0 : count]; }\n"
        "    round { copy sendbuf@2 to recvbuf[count : 2 * count]; signal 2; }\n"
        "}\n";
    a = (compile_args){.p = 3, .rank = 1, .count = 4, .esize = 8, .commutative = 1, .shared_memory = 1, .inplace = 1};
    prog = NULL;
    rc = compile_text("own.nbs", own, "g", &a, &prog, &d);
    in = prog ? prog_insns(prog) : NULL;
    result(rc == 0 && prog->ninsns == 3 && in[0].peer == -1 && in[0].a_slot == SLOT_RECV && in[0].b_slot == SLOT_RECV &&
               in[0].b_off == 32 && in[1].peer == 2 && in[1].b_slot == (SLOT_RECV | SLOT_PEER) && in[1].b_off == 64,
           "sendbuf@rank is the own buffer; in place, sendbuf@r lies at r's place in r's recvbuf", "rc %d, %s", rc,
           d.text ? d.text : "wrong program");
    free(prog);
    diag_free(&d);

    static const struct {
        const char *what, *stmt, *says;
    } bad[] = {
        {"a signal to itself", "round { signal rank; }", "shm.nbs:3:20: error: signal to rank 1: it must be another rank, in 0..2"},
        {"a wait on no rank", "round { wait p; }", "shm.nbs:3:18: error: wait to rank 3"},
        {"a scratch buffer of another rank", "scratch t[count]; round { copy t@2 to recvbuf; }",
         "only sendbuf, recvbuf and shared buffers of another rank can be named ('t@...')"},
        {"a peer outside 0..p-1", "round { copy sendbuf@3 to recvbuf; }", "shm.nbs:3:26: error: rank 3 is outside 0..2"},
        {"two peers in one instruction", "round { copy sendbuf@0 to recvbuf@2; }",
         "one instruction can name the buffers of one other rank"},
        {"a message of a peer's buffer", "round { send sendbuf@0 to 0; }", "send and recv cannot name another rank's"},
        {"writing a peer's sendbuf", "round { copy recvbuf to sendbuf@0; }", "'sendbuf' is read-only"},
        {"a peer buffer without shared memory", "round { copy sendbuf@0 to recvbuf; }",
         "needs ranks that share memory: requires shared_memory"},
        {"a flag without shared memory", "round { signal 0; }", "needs ranks that share memory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char src[400];
        snprintf(src, sizeof src, "schedule b implements allreduce\n{\n    %s\n}\n", bad[i].stmt);
        a = (compile_args){.p = 3, .rank = 1, .count = 4, .esize = 8, .commutative = 1,
                           .shared_memory = strstr(bad[i].says, "share memory") == NULL};
        prog = NULL;
        rc = compile_text("shm.nbs", src, "b", &a, &prog, &d);
        char name[160];
        snprintf(name, sizeof name, "the compiler refuses %s", bad[i].what);
        result(rc == COMPILE_ERROR && d.text && strstr(d.text, bad[i].says), name, "rc %d: %s", rc, d.text ? d.text : "");
        free(prog);
        diag_free(&d);
    }
}

/* shared NAME[len]: buffers in the shared scratch (SLOT_SHARED, shared_bytes, offsets of their
 * own), NAME@r for rank r's; a program that names no peer's send or receive buffer is
 * PROG_SHARED without PROG_AGREE. */
static void shared_scratch(void)
{
    const char *text =
        "schedule s implements allreduce\n"
        "    requires shared_memory\n"
        "{\n"
        "    shared a[2];\n"
        "    scratch t[3];\n"
        "    shared b[count];\n"
        "    round { copy sendbuf to b; copy sendbuf[0 : 2] to a; signal 1; }\n"
        "    round {\n"
        "        copy b@1 to recvbuf;\n"
        "        reduce recvbuf =+ b@rank;\n" /* fused: b@rank is the own b */
        "        copy a@2 to t[0 : 2];\n"
        "    }\n"
        "}\n";
    diag d;
    nbc_program *prog = NULL;
    compile_args a = {.p = 3, .rank = 0, .count = 4, .esize = 8, .commutative = 1, .shared_memory = 1};
    int rc = compile_text("shared.nbs", text, "s", &a, &prog, &d);
    const nbc_insn *in = prog ? prog_insns(prog) : NULL;
    result(rc == 0 && prog->ninsns == 5 && prog->nrounds == 2 && prog->flags == PROG_SHARED && prog->shared_bytes == 48 &&
               prog->scratch == 24 &&
               in[0].op == OP_COPY && in[0].a_slot == SLOT_SHARED && in[0].a_off == 16 && in[0].len == 32 && in[0].peer == -1 &&
               in[1].op == OP_COPY && in[1].a_slot == SLOT_SHARED && in[1].a_off == 0 && in[1].len == 16 &&
               in[2].op == OP_SIGNAL &&
               in[3].op == OP_COMBINE && in[3].peer == 1 && in[3].a_slot == SLOT_RECV && in[3].b_slot == SLOT_SHARED &&
               in[3].b_off == 16 && in[3].c_slot == (SLOT_SHARED | SLOT_PEER) && in[3].c_off == 16 &&
               in[4].op == OP_COPY && in[4].peer == 2 && in[4].a_slot == SLOT_SCRATCH && in[4].b_slot == (SLOT_SHARED | SLOT_PEER) &&
               in[4].b_off == 0,
           "shared buffers: their own offsets, shared_bytes, NAME@r, NAME@rank, PROG_SHARED without PROG_AGREE", "rc %d, %s", rc,
           d.text ? d.text : "wrong program");
    free(prog);
    diag_free(&d);

    /* the schedule: p = 1 and count 0 have no flag, hence no shared scratch either */
    sched_lib *lib = builtins();
    const sched_def *small = lib_find(lib, "allreduce_shm_small");
    static const struct {
        int64_t p, count;
        uint32_t ninsns, flags;
        uint64_t shared;
    } want[] = {{1, 5, 1, 0, 0}, {3, 0, 0, 0, 0}, {3, 5, 8, PROG_SHARED, 20}, {4, 2048, 11, PROG_SHARED, 8192}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        a = (compile_args){.p = want[i].p, .rank = 0, .count = want[i].count, .esize = 4, .shared_memory = 1};
        diag_init(&d);
        prog = NULL;
        rc = small ? compile_program(lib, small, &a, &prog, &d) : -1;
        char name[160];
        snprintf(name, sizeof name, "allreduce_shm_small at p = %lld, count %lld: %u instructions, flags %u, %llu shared bytes",
                 (long long)want[i].p, (long long)want[i].count, want[i].ninsns, want[i].flags, (unsigned long long)want[i].shared);
        result(rc == 0 && prog->ninsns == want[i].ninsns && prog->flags == want[i].flags && prog->shared_bytes == want[i].shared,
               name, "rc %d, %s", rc, d.text ? d.text : "wrong program");
        free(prog);
        diag_free(&d);
    }
    lib_destroy(lib);

    /* a callee whose arguments depend on rank may get a different count on every rank */
    const char *callee =
        "schedule outer implements allreduce\n{\n    call inner(count = count - rank);\n}\n"
        "schedule inner implements allreduce\n{\n    shared t[count];\n    round { copy sendbuf to t; signal 0; }\n}\n";
    a = (compile_args){.p = 3, .rank = 1, .count = 4, .esize = 8, .commutative = 1, .shared_memory = 1};
    prog = NULL;
    rc = compile_text("callee.nbs", callee, "outer", &a, &prog, &d);
    result(rc == COMPILE_ERROR && d.text && strstr(d.text, "callee.nbs:7:12: error: shared 't' is declared under a condition, loop or call that depends on rank"),
           "the compiler refuses a shared buffer in a call whose arguments depend on rank", "rc %d: %s", rc, d.text ? d.text : "");
    free(prog);
    diag_free(&d);

    static const struct {
        const char *what, *stmt, *says;
    } bad[] = {
        {"a shared buffer without shared memory", "shared t[count];", "shm.nbs:3:12: error: needs ranks that share memory"},
        {"a shared size that names rank", "shared t[rank + 1];",
         "shm.nbs:3:19: error: the size of shared 't' depends on rank: it must be the same on every rank"},
        {"a shared size of a variable that depends on rank", "let n = block(count, p, rank); shared t[len(n)];",
         "the size of shared 't' depends on rank"},
        {"a shared buffer under a condition on rank", "if rank != 0 { shared t[count]; }",
         "shared 't' is declared under a condition, loop or call that depends on rank"},
        {"a shared buffer in a loop bounded by rank", "for i in 0 .. rank { shared t[count]; }",
         "declared under a condition, loop or call that depends on rank"},
        {"a negative shared size", "shared t[-1];", "shm.nbs:3:14: error: shared size -1 is negative"},
        {"a message of a peer's shared buffer", "shared t[count]; round { send t@0 to 0; }",
         "send and recv cannot name another rank's"},
        {"two peers' shared buffers in one instruction", "shared t[count]; round { copy t@0 to t@2; }",
         "one instruction can name the buffers of one other rank"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char src[400];
        snprintf(src, sizeof src, "schedule b implements allreduce\n{\n    %s\n}\n", bad[i].stmt);
        a = (compile_args){.p = 3, .rank = 1, .count = 4, .esize = 8, .commutative = 1,
                           .shared_memory = strstr(bad[i].says, "share memory") == NULL};
        prog = NULL;
        rc = compile_text("shm.nbs", src, "b", &a, &prog, &d);
        char name[160];
        snprintf(name, sizeof name, "the compiler refuses %s", bad[i].what);
        result(rc == COMPILE_ERROR && d.text && strstr(d.text, bad[i].says), name, "rc %d: %s", rc, d.text ? d.text : "");
        free(prog);
        diag_free(&d);
    }
}

/* Nothing crashes or leaks (the sanitizer build checks the leaks), whatever the input. */
static void hostile(void)
{
    unsigned seed = 12345;
    int parsed = 0, total = 0;
    for (size_t b = 0; b < nbc_builtin_count; b++) {
        const char *text = nbc_builtin_schedules[b].text;
        size_t len = nbc_builtin_schedules[b].len;
        for (size_t cut = 0; cut <= len; cut += 3) { /* prefixes */
            diag d;
            diag_init(&d);
            ast_file *f = dsl_parse("prefix.nbs", text, cut, &d);
            parsed += f != NULL;
            total++;
            ast_free(f);
            diag_free(&d);
        }
        char *copy = malloc(len + 1);
        for (int iter = 0; iter < 2000; iter++) { /* random mutations, compiled when they parse */
            memcpy(copy, text, len);
            for (int k = 0; k < 1 + iter % 4; k++) {
                seed = seed * 1103515245 + 12345;
                size_t at = (seed >> 8) % len;
                static const char pool[] = "{}();=+-*/%<>!&|^~[]:.,# \n0123456789abcxyzpr\0\x80";
                copy[at] = pool[(seed >> 20) % (sizeof pool - 1)];
            }
            sched_lib *lib = lib_create();
            diag d;
            diag_init(&d);
            if (lib_add_source(lib, "mutant.nbs", copy, len, &d) == 0)
                for (size_t i = 0; i < lib_count(lib); i++)
                    for (int64_t p = 1; p <= 5; p++) {
                        compile_args a = {.p = p, .rank = p - 1, .count = 7, .esize = 4, .commutative = iter & 1, .max_steps = 20000};
                        nbc_program *prog = NULL;
                        compile_program(lib, lib_at(lib, i), &a, &prog, &d);
                        free(prog);
                        diag_clear(&d);
                    }
            diag_free(&d);
            lib_destroy(lib);
            total++;
        }
        free(copy);
    }
    result(parsed > 0, "prefixes and mutations of the built-in schedules", "%d of %d parsed", parsed, total);

    /* deep nesting of every kind is an error, never a stack overflow */
    const char *const kinds[][3] = {
        {"schedule s { let x = ", "(", "1"}, {"schedule s { let x = ", "-", "1"},
        {"schedule s { let x = 1", "+1", ""}, {"schedule s { ", "if 1 { ", ""},
        {"schedule s { let x = ", "a[", "1"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t reps = 100000, ul = strlen(kinds[k][1]);
        size_t len = strlen(kinds[k][0]) + reps * ul + 16;
        char *buf = malloc(len);
        char *p = buf + sprintf(buf, "%s", kinds[k][0]);
        for (size_t i = 0; i < reps; i++, p += ul) memcpy(p, kinds[k][1], ul);
        sprintf(p, "%s;}", kinds[k][2]);
        diag d;
        diag_init(&d);
        ast_file *f = dsl_parse("deep.nbs", buf, strlen(buf), &d);
        char label[64];
        snprintf(label, sizeof label, "deep nesting '%s' is an error", kinds[k][1]);
        result(!f && d.errors > 0 && d.errors <= 21, label, "%d errors", d.errors);
        ast_free(f);
        diag_free(&d);
        free(buf);
    }

    /* a large valid file: 200000 statements */
    size_t n = 200000;
    char *big = malloc(n * 32 + 64);
    char *p = big + sprintf(big, "schedule big {\n");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "let v%zu = %zu;\n", i, i);
    sprintf(p, "}\n");
    diag d;
    diag_init(&d);
    ast_file *f = dsl_parse("big.nbs", big, strlen(big), &d);
    result(f && d.errors == 0, "a file of 200000 statements parses", "%s", d.text ? d.text : "");
    ast_free(f);
    diag_free(&d);
    free(big);

    diag_init(&d);
    const char nul[] = "schedule s {\0}";
    f = dsl_parse("nul.nbs", nul, sizeof nul - 1, &d);
    result(!f && d.text && strstr(d.text, "unexpected byte 0x00"), "a NUL byte is reported", "%s", d.text ? d.text : "");
    ast_free(f);
    diag_free(&d);
}

int main(int argc, char **argv)
{
    broken_cases(argc > 1 ? argv[1] : "tests/dsl/broken.txt");
    program_shapes();
    features();
    topology();
    fusion();
    shared_memory();
    shared_scratch();
    hostile();
    return failures ? 1 : 0;
}
