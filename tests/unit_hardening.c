/* Hostile input without MPI: the program verifier against corrupted programs (each corruption
 * one way a program could write outside its buffers or break the interpreter), the compiler at
 * the 64-bit limits, the parser's limits (nesting, source size) and rule numbers at the
 * limits of the matcher. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/compile.h"
#include "../compiler/library.h"
#include "../compiler/progverify.h"
#include "../runtime/selection.h"

static int failures;

static void result(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("ok hardening %s\n", name);
        return;
    }
    failures++;
    printf("FAIL hardening %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static sched_lib *builtins(void)
{
    sched_lib *lib = lib_create();
    diag d;
    diag_init(&d);
    if (!lib || lib_add_builtins(lib, &d) != 0) {
        printf("FAIL hardening: the built-in schedules do not load\n");
        exit(1);
    }
    diag_free(&d);
    return lib;
}

/* ---- the verifier ---- */

static const compile_args ring_call = {.p = 4, .rank = 1, .count = 8, .esize = 4, .commutative = 1};

typedef void (*corruption)(nbc_program *p);
typedef struct {
    const char *name;
    corruption corrupt;
    const char *says; /* in the verifier's message */
} corruption_case;

/* Each corruption of a copy of a good program is refused, saying why (and not as a race). */
static void refuses_each(const nbc_program *good, const compile_args *a, const corruption_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nbc_program *p = malloc(good->bytes);
        memcpy(p, good, good->bytes);
        cases[i].corrupt(p);
        char name[160];
        snprintf(name, sizeof name, "the verifier refuses %s", cases[i].name);
        prog_fault f;
        memset(&f, 0, sizeof f);
        int rc = prog_verify(p, COLL_ALLREDUCE, a, &f);
        result(rc == 1 && strstr(f.msg, cases[i].says) && !f.race, name, "rc %d: %s", rc, f.msg);
        free(p);
    }
}
static nbc_insn *first(nbc_program *p, int op)
{
    for (uint32_t i = 0; i < p->ninsns; i++)
        if (prog_insns(p)[i].op == op) return &prog_insns(p)[i];
    return NULL;
}
static void offset_wraps(nbc_program *p) { first(p, OP_RECV)->a_off = UINT64_MAX - 3; }
static void offset_past_end(nbc_program *p) { first(p, OP_RECV)->a_off = 32; }
static void length_huge(nbc_program *p) { first(p, OP_SEND)->len = UINT64_MAX - 3; }
static void source_past_end(nbc_program *p) { first(p, OP_REDUCE) ? (void)(first(p, OP_REDUCE)->b_off = 1 << 20) : (void)(first(p, OP_COMBINE)->c_off = 1 << 20); }
static void peer_outside(nbc_program *p) { first(p, OP_SEND)->peer = 4; }
static void peer_negative(nbc_program *p) { first(p, OP_RECV)->peer = -1; }
static void slot_unknown(nbc_program *p) { first(p, OP_SEND)->a_slot = 9; }
static void opcode_unknown(nbc_program *p) { prog_insns(p)[0].op = 77; }
static void misaligned(nbc_program *p) { first(p, OP_SEND)->a_off += 1; }
static void rounds_backwards(nbc_program *p) { prog_rounds(p)[1] = prog_rounds(p)[2] + 1; }
static void rounds_short(nbc_program *p) { prog_rounds(p)[p->nrounds] -= 1; }
static void round_empty(nbc_program *p) { prog_rounds(p)[1] = prog_rounds(p)[0]; }
static void too_few_requests(nbc_program *p) { p->max_round_comms = 1; }
static void header_bytes(nbc_program *p) { p->bytes += 8; }
static void element_size(nbc_program *p) { p->esize = 8; }
static void name_unterminated(nbc_program *p) { memset(p->name, 'x', sizeof p->name); }
static void count_past_int(nbc_program *p) { p->scratch = (uint64_t)1 << 40, first(p, OP_SEND)->a_slot = SLOT_SCRATCH, first(p, OP_SEND)->len = (uint64_t)1 << 36; }

static void verifier(const sched_lib *lib)
{
    const sched_def *ring = lib_find(lib, "allreduce_ring");
    diag d;
    diag_init(&d);
    nbc_program *good = NULL;
    compile_args a = ring_call;
    int rc = compile_program(lib, ring, &a, &good, &d);
    prog_fault f;
    result(rc == COMPILE_OK && prog_verify(good, COLL_ALLREDUCE, &a, &f) == 0, "the verifier passes a compiled ring",
           "%s", rc ? (d.text ? d.text : "") : f.msg);
    if (rc != COMPILE_OK) return;

    static const corruption_case cases[] = {
        {"an offset whose end wraps past 2^64", offset_wraps, "writes bytes"},
        {"an offset past the buffer's end", offset_past_end, "writes bytes"},
        {"a length near 2^64", length_huge, "bytes"},
        {"a source past its buffer", source_past_end, "reads bytes"},
        {"a peer equal to p", peer_outside, "peer 4"},
        {"a negative peer", peer_negative, "peer -1"},
        {"an unknown slot", slot_unknown, "slot 9"},
        {"an unknown opcode", opcode_unknown, "opcode"},
        {"a misaligned offset", misaligned, "aligned"},
        {"rounds out of order", rounds_backwards, "round"},
        {"rounds not covering the instructions", rounds_short, "round table"},
        {"an empty round", round_empty, "empty"},
        {"more messages in a round than requests", too_few_requests, "provides for 1"},
        {"a header size that does not match", header_bytes, "header"},
        {"an element size other than the call's", element_size, "8-byte"},
        {"a name without its NUL", name_unterminated, "name"},
        {"a message of more elements than an int counts", count_past_int, "int"},
    };
    refuses_each(good, &a, cases, sizeof cases / sizeof *cases);
    /* the same program is too big for a smaller call */
    compile_args fewer = a;
    fewer.count = 4;
    result(prog_verify(good, COLL_ALLREDUCE, &fewer, &f) == 1 && strstr(f.msg, "bytes long"),
           "the verifier refuses a program for a call with smaller buffers", "%s", f.msg);
    free(good);
    diag_free(&d);
}

/* allreduce_shm at p = 3, rank 1, count 10: COMBINE (peer 2), REDUCE (peer 0), COPY to recv@0,
 * COPY to recv@2, SIGNAL 0, SIGNAL 2, WAIT 0, WAIT 2. */
static const compile_args shm_call = {.p = 3, .rank = 1, .count = 10, .esize = 4, .commutative = 1, .shared_memory = 1};
static nbc_insn *peer_copy(nbc_program *p) { return first(p, OP_COPY); }
static void peer_slot_unknown(nbc_program *p) { peer_copy(p)->a_slot = SLOT_PEER | 9; }
static void peer_scratch(nbc_program *p) { peer_copy(p)->a_slot = SLOT_PEER | SLOT_SCRATCH; p->scratch = 64; }
static void peer_message(nbc_program *p) { peer_copy(p)->op = OP_SEND; p->max_round_comms = 1; }
static void peer_outside_p(nbc_program *p) { peer_copy(p)->peer = 3; }
static void peer_self(nbc_program *p) { peer_copy(p)->peer = 1; }
static void peer_without_operand(nbc_program *p) { first(p, OP_COMBINE)->c_slot = SLOT_SEND; }
static void peer_past_end(nbc_program *p) { peer_copy(p)->a_off = 32; }
static void flag_with_length(nbc_program *p) { first(p, OP_SIGNAL)->len = 4; }
static void flag_to_self(nbc_program *p) { first(p, OP_WAIT)->peer = 1; }
static void flag_outside_p(nbc_program *p) { first(p, OP_SIGNAL)->peer = -1; }
static void not_marked_shared(nbc_program *p) { p->flags = 0; }
static void not_marked_agree(nbc_program *p) { p->flags = PROG_SHARED; }
static void ring_marked_shared(nbc_program *p) { p->flags |= PROG_SHARED; }
static void ring_shared_scratch(nbc_program *p) { p->shared_bytes = 16; } /* which no other rank names */

/* The corruption of allreduce_ring's program at ring_call (no peer, no flag) is refused. */
static void refuses_on_ring(const sched_lib *lib, const corruption_case *c)
{
    diag d;
    diag_init(&d);
    nbc_program *ring = NULL;
    compile_args a = ring_call;
    int rc = compile_program(lib, lib_find(lib, "allreduce_ring"), &a, &ring, &d);
    result(rc == COMPILE_OK, "allreduce_ring compiles", "%s", d.text ? d.text : "");
    if (rc == COMPILE_OK) refuses_each(ring, &a, c, 1);
    free(ring);
    diag_free(&d);
}

static void verifier_shared(const sched_lib *lib)
{
    diag d;
    diag_init(&d);
    nbc_program *good = NULL;
    compile_args a = shm_call;
    int rc = compile_program(lib, lib_find(lib, "allreduce_shm"), &a, &good, &d);
    prog_fault f;
    result(rc == COMPILE_OK && prog_verify(good, COLL_ALLREDUCE, &a, &f) == 0, "the verifier passes a compiled allreduce_shm",
           "%s", rc ? (d.text ? d.text : "") : f.msg);
    diag_free(&d);
    if (rc != COMPILE_OK) return;
    static const corruption_case cases[] = {
        {"a peer operand of an unknown slot", peer_slot_unknown, "slot 9"},
        {"a peer's scratch", peer_scratch, "only its send and receive buffers"},
        {"a message of a peer's buffer", peer_message, "a message moves this rank's own"},
        {"a peer operand of rank p", peer_outside_p, "peer 3, not another rank"},
        {"a peer operand of the rank itself", peer_self, "peer 1, not another rank"},
        {"a peer and no peer operand", peer_without_operand, "but no buffer of it"},
        {"a peer operand past the buffer's end", peer_past_end, "bytes long"},
        {"a flag with a length", flag_with_length, "a flag carries none"},
        {"a flag to the rank itself", flag_to_self, "WAIT names peer 1"},
        {"a flag to rank -1", flag_outside_p, "SIGNAL names peer -1"},
        {"peer operands and flags without PROG_SHARED", not_marked_shared, "not marked PROG_SHARED"},
        {"a peer's send buffer without PROG_AGREE", not_marked_agree, "not marked PROG_AGREE"},
    };
    refuses_each(good, &a, cases, sizeof cases / sizeof *cases);
    free(good);
    static const corruption_case on_ring = {"PROG_SHARED on a program without peers", ring_marked_shared, "marked PROG_SHARED but"};
    refuses_on_ring(lib, &on_ring);
}

/* allreduce_shm_small at shm_call (a shared scratch of 40 bytes): COPY to shared, SIGNAL 0,
 * SIGNAL 2, WAIT 0, WAIT 2, COMBINE (shared and shared@2), REDUCE (shared@0). */
static void shared_peer_past_end(nbc_program *p) { first(p, OP_REDUCE)->b_off = 40; }
static void shared_own_past_end(nbc_program *p) { first(p, OP_COPY)->a_off = 8; }
static void shared_bytes_short(nbc_program *p) { p->shared_bytes = 20; }
static void shared_bytes_misaligned(nbc_program *p) { p->shared_bytes = 41; }
static void shared_not_marked(nbc_program *p) { p->flags = 0; }
static void flags_unknown(nbc_program *p) { p->flags |= 4; }

static void verifier_shared_scratch(const sched_lib *lib)
{
    diag d;
    diag_init(&d);
    nbc_program *good = NULL;
    compile_args a = shm_call;
    int rc = compile_program(lib, lib_find(lib, "allreduce_shm_small"), &a, &good, &d);
    prog_fault f;
    result(rc == COMPILE_OK && good->flags == PROG_SHARED && good->shared_bytes == 40 && prog_verify(good, COLL_ALLREDUCE, &a, &f) == 0,
           "the verifier passes a compiled allreduce_shm_small", "%s", rc ? (d.text ? d.text : "") : f.msg);
    diag_free(&d);
    if (rc != COMPILE_OK) return;
    static const corruption_case cases[] = {
        {"a peer's shared operand past the shared scratch", shared_peer_past_end, "[40, 80) of shared, which is 40 bytes long"},
        {"an own shared operand past the shared scratch", shared_own_past_end, "[8, 48) of shared, which is 40 bytes long"},
        {"a shared scratch shorter than its operands", shared_bytes_short, "of shared, which is 20 bytes long"},
        {"a shared scratch of part of an element", shared_bytes_misaligned, "shared scratch of 41 bytes"},
        {"peers' shared scratch without PROG_SHARED", shared_not_marked, "not marked PROG_SHARED"},
        {"an unknown program flag", flags_unknown, "unknown program flags"},
    };
    refuses_each(good, &a, cases, sizeof cases / sizeof *cases);
    free(good);
    static const corruption_case on_ring = {"a shared scratch without PROG_SHARED", ring_shared_scratch, "it would be a plain scratch"};
    refuses_on_ring(lib, &on_ring);
}

/* ---- the compiler at the limits ---- */

static void compiler_limits(void)
{
    static const struct {
        const char *what, *text, *says;
    } cases[] = {
        {"x[INT64_MAX]", "let big = 9223372036854775807; round { recv recvbuf[big] from rank; }", "is outside 'recvbuf'"},
        {"len(range(INT64_MIN, INT64_MAX))", "let m = -9223372036854775807 - 1; let n = len(range(m, 9223372036854775807));",
         "integer overflow"},
        {"chunk of a range wider than INT64_MAX", "let m = -9223372036854775807 - 1; let c = chunk(range(m, 1), 2, 0);",
         "integer overflow"},
        {"hi - lo in chunk at INT64_MAX", "let c = chunk(range(0, 9223372036854775807), 9223372036854775807, 1); "
                                          "round { send recvbuf[c] to rank; }", "is outside"},
        {"block() with huge counts", "let b = block(9223372036854775807, 3, 2); round { send recvbuf[b] to rank; }",
         "is outside"},
        {"a slice end of INT64_MAX + 1", "let big = 9223372036854775807; round { send recvbuf[0 : big + 1] to rank; }",
         "integer overflow"},
    };
    sched_lib *lib = lib_create();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[600];
        snprintf(text, sizeof text, "schedule limit implements allreduce\n{\n    %s\n}\n", cases[i].text);
        diag d;
        diag_init(&d);
        int rc = lib_add_source(lib, "limit.nbs", text, strlen(text), &d);
        nbc_program *prog = NULL;
        compile_args a = {.p = 2, .rank = 1, .count = 8, .esize = 8, .commutative = 1};
        if (rc == 0) rc = compile_program(lib, lib_find(lib, "limit"), &a, &prog, &d);
        char name[160];
        snprintf(name, sizeof name, "the compiler refuses %s", cases[i].what);
        result(rc == COMPILE_ERROR && d.text && strstr(d.text, cases[i].says), name, "rc %d: %s", rc, d.text ? d.text : "");
        free(prog);
        diag_free(&d);
    }
    /* % by the most negative value: no overflow, and the result is in 0 .. |y| - 1 */
    const char *mod = "schedule m implements allreduce\n{\n    let m = -9223372036854775807 - 1;\n"
                      "    if (-5) % m != 9223372036854775803 { round { send recvbuf[count] to rank; } }\n}\n";
    diag d;
    diag_init(&d);
    nbc_program *prog = NULL;
    compile_args a = {.p = 2, .rank = 1, .count = 8, .esize = 8, .commutative = 1};
    int rc = lib_add_source(lib, "mod.nbs", mod, strlen(mod), &d);
    if (rc == 0) rc = compile_program(lib, lib_find(lib, "m"), &a, &prog, &d);
    result(rc == COMPILE_OK, "(-5) % INT64_MIN is INT64_MAX - 4", "rc %d: %s", rc, d.text ? d.text : "");
    free(prog);
    diag_free(&d);
    /* buffers whose bytes overflow: refused before anything is evaluated */
    diag_init(&d);
    a = (compile_args){.p = 1 << 30, .rank = 0, .count = (int64_t)1 << 40, .esize = 8, .commutative = 1};
    rc = compile_program(lib, lib_find(lib, "m"), &a, &prog, &d);
    result(rc == COMPILE_ERROR && prog == NULL, "a call whose buffers overflow 64 bits is refused", "rc %d", rc);
    diag_free(&d);
    lib_destroy(lib);
}

/* ---- the parser's limits ---- */

static void parser_limits(void)
{
    size_t depth = 1000000;
    char *text = malloc(2 * depth + 100);
    size_t n = (size_t)sprintf(text, "schedule x implements allreduce { let a = ");
    memset(text + n, '(', depth);
    n += depth;
    text[n++] = '1';
    memset(text + n, ')', depth);
    n += depth;
    n += (size_t)sprintf(text + n, "; }\n");
    diag d;
    diag_init(&d);
    sched_lib *lib = lib_create();
    int rc = lib_add_source(lib, "deep.nbs", text, n, &d);
    result(rc != 0 && d.text && strstr(d.text, "nesting too deep") && !strstr(d.text, "out of memory"),
           "a million nested parentheses: nesting too deep, not out of memory", "%.300s", d.text ? d.text : "");
    diag_free(&d);
    free(text);

    size_t big = LIB_MAX_FILE_BYTES + 1;
    text = malloc(big);
    memset(text, ' ', big);
    diag_init(&d);
    rc = lib_add_source(lib, "big.nbs", text, big, &d);
    result(rc != 0 && d.text && strstr(d.text, "larger than"), "a source over 16 MiB is refused before flex", "%s",
           d.text ? d.text : "");
    diag_free(&d);
    free(text);
    lib_destroy(lib);
}

/* ---- rule numbers ---- */

static void rule_limits(const sched_lib *lib)
{
    rule_table *t = rules_create();
    diag d;
    diag_init(&d);
    const char *rules = "allreduce bytes > 1000 -> linear\nallreduce -> ring\n";
    int rc = rules_add(t, lib, "huge.rules", rules, strlen(rules), 1, &d);
    /* count * esize overflows int64 (as `nbcc explain --count` may ask): above every bound, so
     * the first rule matches (the compiler then refuses such buffers, whichever rule it is) */
    compile_args a = {.p = 4, .count = INT64_MAX / 2, .esize = 8, .commutative = 1, .nbufs = 1};
    diag why;
    diag_init(&why);
    if (rc == 0) select_choose(lib, t, SELECT_RULES, NULL, COLL_ALLREDUCE, &a, &why);
    result(rc == 0 && why.text && strstr(why.text, "rule huge.rules:1:"), "a call whose bytes overflow matches 'bytes > 1000'",
           "%s%s", d.text ? d.text : "", why.text ? why.text : "");
    diag_free(&why);
    diag_free(&d);
    rules_destroy(t);

    /* out of range: an error at the line; at the edges of the range: accepted */
    static const struct {
        const char *text;
        int accepted;
    } cases[] = {{"allreduce p <= 9223372036854775807 -> ring", 0},   {"allreduce bytes > 9223372036854775807 -> ring", 0},
                 {"allreduce p < -1 -> ring", 0},                     {"allreduce bytes >= 99999999999999999999 -> ring", 0},
                 {"allreduce p == 2147483648 -> ring", 0},            {"allreduce p <= 2147483647 -> ring", 1},
                 {"allreduce bytes <= 2305843009213693951 -> ring", 1}, {"allreduce p > 2147483647 -> ring", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        t = rules_create();
        diag_init(&d);
        rc = rules_add(t, lib, "x.rules", cases[i].text, strlen(cases[i].text), 0, &d);
        char name[160];
        if (cases[i].accepted) {
            snprintf(name, sizeof name, "'%s' is accepted", cases[i].text);
            result(rc == 0, name, "%s", d.text ? d.text : "");
        } else {
            snprintf(name, sizeof name, "'%s' is an out-of-range error at x.rules:1", cases[i].text);
            result(rc != 0 && d.text && strstr(d.text, "x.rules:1: error:") && strstr(d.text, "outside"), name, "%s",
                   d.text ? d.text : "accepted");
        }
        diag_free(&d);
        rules_destroy(t);
    }
}

int main(void)
{
    sched_lib *lib = builtins();
    verifier(lib);
    verifier_shared(lib);
    verifier_shared_scratch(lib);
    compiler_limits();
    parser_limits();
    rule_limits(lib);
    lib_destroy(lib);
    return failures != 0;
}
