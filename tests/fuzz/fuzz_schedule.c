/* libFuzzer driver: a schedule file, parsed, then each of its schedules compiled for a few
 * calls, and every program the compiler accepts run through the verifier. The compiler
 * checks each instruction as it emits it, so a program it accepts may fail the verifier only
 * for a race within a round (the schedule's mistake); any other rejection is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/compile.h"
#include "../../compiler/library.h"
#include "../../compiler/progverify.h"
#include "../../dsl/collectives.h"

static void compile_one(const sched_lib *lib, const sched_def *s, compile_args a)
{
    diag d;
    diag_init(&d);
    nbc_program *prog = NULL;
    if (compile_program(lib, s, &a, &prog, &d) == COMPILE_OK) {
        nbc_collective c = s->collective ? (nbc_collective)collective_from_name(s->collective) : COLL_ALLREDUCE;
        prog_fault f;
        int rc = prog_verify(prog, c, &a, &f);
        if (rc > 0 && !f.race) {
            fprintf(stderr, "verifier rejects a compiled program of '%s' (p %lld rank %lld count %lld): pc %u: %s\n",
                    s->name, (long long)a.p, (long long)a.rank, (long long)a.count, f.pc, f.msg);
            abort();
        }
    }
    free(prog);
    diag_free(&d);
}

#include "builtin.h"

/* Adds the built-in files that define a name the input mentions, so that its calls find
 * their building blocks: parsing all of them would be most of the time of a run. */
static int add_mentioned(sched_lib *lib, const uint8_t *data, size_t size, diag *d)
{
    static sched_lib *all; /* every built-in file, parsed once, to know what each defines */
    if (!all && (!(all = lib_create()) || lib_add_builtins(all, d) != 0)) abort();
    for (size_t f = 0; f < nbc_builtin_count; f++) {
        int mentioned = 0;
        for (size_t i = 0; i < lib_count(all) && !mentioned; i++) {
            const sched_def *s = lib_at(all, i);
            mentioned = !strcmp(s->src->name, nbc_builtin_schedules[f].name) && memmem(data, size, s->name, strlen(s->name));
        }
        if (mentioned && lib_add_source(lib, nbc_builtin_schedules[f].name, nbc_builtin_schedules[f].text,
                                        nbc_builtin_schedules[f].len, d) != 0)
            return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sched_lib *lib = lib_create();
    diag d;
    diag_init(&d);
    if (lib && add_mentioned(lib, data, size, &d) == 0 && lib_add_source(lib, "fuzz.nbs", (const char *)data, size, &d) == 0) {
        static const int64_t calls[][3] = {{1, 0, 1}, {2, 1, 3}, {3, 2, 0}, {5, 3, 100}};
        for (size_t i = 0; i < lib_count(lib); i++) {
            const sched_def *s = lib_at(lib, i);
            if (strcmp(s->src->name, "fuzz.nbs")) continue; /* only the fuzzed file's schedules */
            for (size_t k = 0; k < sizeof calls / sizeof *calls; k++)
                for (int flags = 0; flags < 4; flags++)
                    compile_one(lib, s, (compile_args){.p = calls[k][0], .rank = calls[k][1], .count = calls[k][2],
                                                       .esize = 4 << (flags & 1), .inplace = flags >> 1,
                                                       .commutative = !(k & 1), .nbufs = 1 + (int64_t)(k & 2),
                                                       .max_steps = 1 << 12, .max_insns = 1 << 12});
        }
    }
    diag_free(&d);
    lib_destroy(lib);
    return 0;
}
