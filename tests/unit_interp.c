/* Unit test for interp/interp.c's piecewise computation: a REDUCE or COMBINE followed by COPYs
 * of its result runs 8 KiB at a time (compute_and_copy), which must leave every buffer exactly
 * as running the instructions one after the other does, and must not be taken where a COPY
 * writes an operand at other positions (the pieces would then see each other's writes).
 * Each case is a one-round program on one buffer, run by interp_step against a serial
 * reference, with a reduction kernel and with MPI_Reduce_local (a non-commutative user op).
 * Run as: mpiexec -n 1 ./unit_interp */
#include "../interp/interp.h"
#include "../interp/reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 5000, BYTES = N * 8 }; /* doubles: 40,000 bytes, five pieces and a rest */
enum { MAXI = 4 };

static int failures;

/* a := b - a, not commutative: the operand order shows */
static void minus(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((double *)inout)[i] = ((double *)in)[i] - ((double *)inout)[i];
}

typedef struct {
    uint8_t op;
    uint64_t a, b, c; /* element offsets into the one buffer (slot 0) */
} step;

/* The serial meaning of one instruction, element by element, on doubles. */
static void serial(double *m, const step *s, int user)
{
    double *a = m + s->a, *b = m + s->b, *c = m + s->c;
    if (s->op == OP_COPY) {
        memmove(a, b, BYTES);
        return;
    }
    double *t = malloc(BYTES);
    for (int i = 0; i < N; i++) {
        double left = b[i], right = s->op == OP_COMBINE ? c[i] : a[i];
        t[i] = user ? left - right : left + right;
    }
    memcpy(a, t, BYTES);
    free(t);
}

static void run_case(const char *name, const step *steps, int n, int user, MPI_Op uop)
{
    char *raw = calloc(1, prog_size((uint32_t)n, 1));
    nbc_program *p = (nbc_program *)(void *)raw;
    p->bytes = prog_size((uint32_t)n, 1);
    p->ninsns = (uint32_t)n, p->nrounds = 1, p->esize = 8;
    for (int i = 0; i < n; i++)
        prog_insns(p)[i] = (nbc_insn){steps[i].op, 0, 0, 0, -1, steps[i].a * 8, steps[i].b * 8, steps[i].c * 8, BYTES};
    prog_rounds(p)[0] = 0, prog_rounds(p)[1] = (uint32_t)n;
    enum { SPACE = 8 * N };
    double *m = malloc(SPACE * sizeof *m), *want = malloc(SPACE * sizeof *want);
    for (int i = 0; i < SPACE; i++) m[i] = want[i] = (double)(i % 977) + 0.25 * (i % 7);
    for (int i = 0; i < n; i++) serial(want, &steps[i], user);
    interp_state st = {0};
    st.prog = p;
    st.base[0] = (char *)m;
    st.datatype = MPI_DOUBLE;
    st.op = user ? uop : MPI_SUM;
    st.kernel = user ? NULL : reduce_kernel(MPI_DOUBLE, MPI_SUM);
    int rc = interp_step(&st, 1);
    int wrong = -1;
    for (int i = 0; i < SPACE && wrong < 0; i++)
        if (m[i] != want[i]) wrong = i;
    int ok = rc == INTERP_DONE && st.err == MPI_SUCCESS && wrong < 0;
    failures += !ok;
    printf("%s interp: %s (%s)", ok ? "ok" : "FAIL", name, user ? "MPI_Reduce_local, non-commutative" : "kernel");
    if (!ok) printf(": rc %d, err %d, first wrong element %d", rc, st.err, wrong);
    printf("\n");
    free(m);
    free(want);
    free(raw);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Op uop;
    MPI_Op_create(minus, 0, &uop);
    /* buffers at element offsets: A, B, C, D, E of N elements each, apart */
    const uint64_t A = 0, B = N, C = 2 * N, D = 3 * N, E = 4 * N;
    const struct {
        const char *name;
        step s[MAXI];
        int n;
    } cases[] = {
        {"COMBINE then two COPYs of its result", {{OP_COMBINE, A, B, C}, {OP_COPY, D, A, 0}, {OP_COPY, E, A, 0}}, 3},
        {"REDUCE then a COPY over its input at the same positions", {{OP_REDUCE, A, B, 0}, {OP_COPY, B, A, 0}}, 2},
        {"COMBINE then a COPY over its input 8 elements on", {{OP_COMBINE, A, B, C}, {OP_COPY, B + 8, A, 0}}, 2},
        {"COMBINE then a COPY over its other input 2,000 elements back", {{OP_COMBINE, A, B, C}, {OP_COPY, C - 2000, A, 0}}, 2},
        {"COMBINE then two COPYs overlapping each other 8 elements apart", {{OP_COMBINE, A, B, C}, {OP_COPY, D, A, 0}, {OP_COPY, D + 8, A, 0}}, 3},
        {"COMBINE then a COPY of something else", {{OP_COMBINE, A, B, C}, {OP_COPY, D, B, 0}, {OP_COPY, E, A, 0}}, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int user = 0; user < 2; user++) run_case(cases[i].name, cases[i].s, cases[i].n, user, uop);
    MPI_Op_free(&uop);
    MPI_Finalize();
    return failures != 0;
}
