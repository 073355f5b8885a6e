/* Selection without MPI: every branch of Open MPI's decision tree (transcribed here from
 * ompi_coll_tuned_allreduce_intra_dec_fixed, Open MPI 4.1+, independently of default.rules),
 * at a point inside it and at both of its edges; the stated fallbacks; tuning files (errors
 * with file:line, extending, replacing); and the model mode. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/selection.h"

#include "builtin.h"

static int failures;

static void result(int ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("ok select %s\n", name);
        return;
    }
    failures++;
    printf("FAIL select %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* The reference tree, verbatim in structure: p = communicator_size, b = total_dsize. */
static const char *reference(long p, long b)
{
    if (p < 4) {
        if (b < 8) return "ring";
        if (b < 4096) return "recursive_doubling";
        if (b < 8192) return "ring";
        if (b < 16384) return "recursive_doubling";
        if (b < 65536) return "ring";
        if (b < 262144) return "segmented_ring";
        return "rabenseifner";
    } else if (p < 8) {
        if (b < 16) return "ring";
        if (b < 8192) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 16) {
        if (b < 8192) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 32) {
        if (b < 64) return "segmented_ring";
        if (b < 4096) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 64) {
        if (b < 128) return "segmented_ring";
        return "rabenseifner";
    } else if (p < 128) {
        if (b < 262144) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 256) {
        if (b < 131072) return "nonoverlapping";
        if (b < 262144) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 512) {
        if (b < 4096) return "nonoverlapping";
        return "rabenseifner";
    } else if (p < 2048) {
        if (b < 2048) return "nonoverlapping";
        if (b < 16384) return "recursive_doubling";
        return "rabenseifner";
    } else if (p < 4096) {
        if (b < 2048) return "nonoverlapping";
        if (b < 4096) return "segmented_ring";
        if (b < 16384) return "recursive_doubling";
        return "rabenseifner";
    } else {
        if (b < 2048) return "nonoverlapping";
        if (b < 16384) return "segmented_ring";
        if (b < 32768) return "recursive_doubling";
        return "rabenseifner";
    }
}

static long pof2(long p)
{
    long q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}

/* What the stated fallback gives when the tree's schedule cannot serve the call. */
static const char *expected(long p, long count, long esize)
{
    const char *ref = reference(p, count * esize);
    int ok = 1;
    if (!strcmp(ref, "ring") || !strcmp(ref, "segmented_ring")) ok = count >= p;
    if (!strcmp(ref, "rabenseifner")) ok = count >= pof2(p);
    if (ok) return ref;
    return count * esize >= 65536 && count >= pof2(p) ? "binary_blocks" : "recursive_doubling";
}

static sched_lib *lib;
static rule_table *rules;

static const char *choose(nbc_collective c, long p, long count, long esize, int commutative, diag *why)
{
    compile_args a = {.p = p, .rank = 0, .count = count, .esize = esize, .commutative = commutative};
    const sched_def *s = select_choose(lib, rules, SELECT_RULES, NULL, c, &a, why);
    if (!s) return "(none)";
    size_t skip = strlen(collective_names[c]) + 1;
    return strncmp(s->name, collective_names[c], skip - 1) == 0 ? s->name + skip : s->name;
}

static void decision_tree(void)
{
    static const long p_edges[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                   255, 256, 257, 511, 512, 513, 2047, 2048, 2049, 4095, 4096, 4097, 10000};
    static const long b_edges[] = {8, 16, 64, 128, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144};
    int checked = 0, bad = 0;
    char why_first[512] = "";
    for (size_t i = 0; i < sizeof p_edges / sizeof *p_edges; i++)
        for (size_t j = 0; j < sizeof b_edges / sizeof *b_edges; j++)
            for (long delta = -1; delta <= 1; delta++) { /* below, at and past each threshold */
                long bytes = b_edges[j] + delta * (b_edges[j] / 4 > 0 ? (delta < 0 ? 1 : b_edges[j] / 4) : 1);
                for (long esize = 1; esize <= 8; esize *= 8) {
                    long count = bytes / esize, p = p_edges[i];
                    const char *want = expected(p, count, esize);
                    const char *got = choose(COLL_ALLREDUCE, p, count, esize, 1, NULL);
                    checked++;
                    if (strcmp(want, got) && !bad++)
                        snprintf(why_first, sizeof why_first, "p=%ld bytes=%ld (count %ld of %ld bytes): reference %s, got %s",
                                 p, count * esize, count, esize, want, got);
                }
            }
    char name[96];
    snprintf(name, sizeof name, "every branch of the reference tree, inside and at both edges (%d calls)", checked);
    result(!bad, name, "%d wrong, first: %s", bad, why_first);
}

/* The collectives on bytes (bytes: one block) after Open MPI's coll/tuned decision functions up
 * to 4.0 (ompi_coll_tuned_alltoall_intra_dec_fixed, _gather_, _scatter_), transcribed here
 * independently of default.rules; scan and exscan: recursive doubling, any op (the chain at p = 2). */
static const char *reference_bytes(nbc_collective c, long p, long b)
{
    if (c == COLL_ALLTOALL) {
        if (p == 2) return "pairwise";
        if (b < 200 && p > 12) return "bruck";
        if (b < 3000) return "linear";
        return "pairwise";
    }
    if (c == COLL_GATHER) {
        if (b > 6000) return "linear"; /* Open MPI's linear_sync */
        if (p > 60 || (p > 10 && b < 1024)) return "binomial";
        return "linear";
    }
    if (p > 10 && b < 300) return "binomial";
    return "linear";
}

static void fixed_count_rules(void)
{
    static const long p_edges[] = {1, 2, 3, 9, 10, 11, 12, 13, 33, 60, 61, 64, 1000};
    static const long b_edges[] = {0, 1, 199, 200, 299, 300, 1023, 1024, 2999, 3000, 6000, 6001, 65536};
    static const nbc_collective colls[] = {COLL_ALLTOALL, COLL_GATHER, COLL_SCATTER};
    int checked = 0, bad = 0;
    char why_first[256] = "";
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof p_edges / sizeof *p_edges; i++)
            for (size_t j = 0; j < sizeof b_edges / sizeof *b_edges; j++) {
                const char *want = reference_bytes(colls[k], p_edges[i], b_edges[j]);
                const char *got = choose(colls[k], p_edges[i], b_edges[j], 1, 1, NULL);
                checked++;
                if (strcmp(want, got) && !bad++)
                    snprintf(why_first, sizeof why_first, "%s p=%ld bytes=%ld: reference %s, got %s", collective_names[colls[k]],
                             p_edges[i], b_edges[j], want, got);
            }
    char name[128];
    snprintf(name, sizeof name, "alltoall, gather and scatter follow Open MPI's decision functions (%d calls)", checked);
    result(!bad, name, "%d wrong, first: %s", bad, why_first);
    for (int commutative = 0; commutative < 2; commutative++) {
        const char *got = choose(COLL_SCAN, 7, 100, 8, commutative, NULL);
        result(!strcmp(got, "recursive_doubling"), commutative ? "scan, commutative op: recursive doubling" : "scan, non-commutative op: recursive doubling",
               "got %s", got);
        got = choose(COLL_EXSCAN, 33, 1 << 20, 4, commutative, NULL);
        result(!strcmp(got, "recursive_doubling"), commutative ? "exscan, commutative op: recursive doubling" : "exscan, non-commutative op: recursive doubling",
               "got %s", got);
        got = choose(COLL_SCAN, 2, 1 << 20, 8, commutative, NULL);
        result(!strcmp(got, "linear"), "scan at p = 2: the chain", "got %s", got);
    }
}

static void fallbacks(void)
{
    diag why;
    diag_init(&why);
    const char *got = choose(COLL_ALLREDUCE, 3, 2, 1, 1, &why); /* p < 4, 2 bytes: ring, but count < p */
    result(!strcmp(got, "recursive_doubling") && strstr(why.text, "not eligible") && strstr(why.text, "fallback"),
           "the ring with count < p falls back to recursive doubling, and says so", "got %s:\n%s", got, why.text);
    diag_clear(&why);
    got = choose(COLL_ALLREDUCE, 3, 100, 8, 0, &why);
    result(!strcmp(got, "recursive_doubling"), "a non-commutative op under 16 KiB gets recursive doubling", "got %s", got);
    got = choose(COLL_ALLREDUCE, 5, 1 << 20, 8, 0, &why);
    result(!strcmp(got, "nonoverlapping"), "a non-commutative op over 16 KiB gets the ordered binomial pipeline", "got %s", got);
    got = choose(COLL_REDUCE_SCATTER, 6, 10, 8, 1, NULL);
    result(!strcmp(got, "pairwise"), "reduce-scatter at p = 6 is pairwise", "got %s", got);
    got = choose(COLL_REDUCE_SCATTER, 8, 10, 8, 1, NULL);
    result(!strcmp(got, "halving"), "reduce-scatter at p = 8 is recursive halving", "got %s", got);
    got = choose(COLL_REDUCE_SCATTER, 8, 10, 8, 0, NULL);
    result(!strcmp(got, "linear"), "reduce-scatter with a non-commutative op is the ordered linear one", "got %s", got);
    got = choose(COLL_ALLGATHER, 6, 10, 8, 1, NULL);
    result(!strcmp(got, "ring"), "allgather at p = 6 is the ring", "got %s", got);
    diag_free(&why);
}

static void tuning_files(void)
{
    diag d;
    diag_init(&d);
    const char *broken = "# a tuning file\nallreduce p < 4 -> ring\nallreduce p << 4 -> ring\nallreduce -> no_such\n"
                         "allreduce bytes < 9 -> segmented_ring:segsz=4\nneighbor_alltoall -> ring\nallreduce p < 4 ring\n";
    size_t before = rules_count(rules);
    int rc = rules_add(rules, lib, "my.rules", broken, strlen(broken), 0, &d);
    const char *want = "my.rules:3: error: bad condition near 'p' (write p < 4, bytes >= 8192, nodes >= 2, ...)\n"
                       "my.rules:4: error: no allreduce schedule is named 'no_such'\n"
                       "my.rules:5: error: the schedule has no parameter 'segsz'\n"
                       "my.rules:6: error: unknown collective 'neighbor_alltoall'\n"
                       "my.rules:7: error: unknown condition 'ring'\n";
    result(rc != 0 && d.text && !strcmp(d.text, want) && rules_count(rules) == before,
           "errors in a tuning file are file:line: message, and the table stays as it was", "rc %d:\n%s", rc,
           d.text ? d.text : "");
    diag_clear(&d);

    const char *extend = "allreduce p == 2 bytes >= 1024 bytes < 4096 -> gloo_ring\n";
    rc = rules_add(rules, lib, "tuned.rules", extend, strlen(extend), 0, &d);
    const char *got = choose(COLL_ALLREDUCE, 2, 2048, 1, 1, NULL);
    const char *other = choose(COLL_ALLREDUCE, 3, 2048, 1, 1, NULL);
    result(rc == 0 && !strcmp(got, "gloo_ring") && !strcmp(other, "recursive_doubling"),
           "a tuning file's rules come first and change only what they say", "rc %d, got %s and %s", rc, got, other);

    const char *replace = "allreduce -> ring\n";
    rc = rules_add(rules, lib, "only.rules", replace, strlen(replace), 1, &d);
    got = choose(COLL_ALLREDUCE, 4, 100, 8, 1, NULL);
    other = choose(COLL_ALLREDUCE, 4, 2, 8, 1, NULL);
    result(rc == 0 && !strcmp(got, "ring") && !strcmp(other, "recursive_doubling"),
           "a replacing tuning file keeps the built-in fallbacks", "rc %d, got %s and %s", rc, got, other);
    diag_free(&d);
}

/* `nodes` and `ppn` read the call's node map; without one, one node a rank (or one node when
 * the ranks share memory). */
static void topology_rules(void)
{
    diag d;
    diag_init(&d);
    rule_table *t = rules_create();
    const char *text = "allreduce nodes >= 2 ppn >= 2 -> ring\nallreduce -> recursive_doubling\n";
    int rc = rules_add(t, lib, "nodes.rules", text, strlen(text), 0, &d);
    static const int64_t two_by_two[] = {0, 0, 1, 1}, cyclic[] = {0, 1, 0, 1}, apart[] = {0, 1, 2, 3}, uneven[] = {0, 0, 0, 1};
    const int64_t *maps[] = {two_by_two, cyclic, apart, uneven, NULL, NULL};
    const char *want[] = {"allreduce_ring", "allreduce_ring", "allreduce_recursive_doubling", "allreduce_ring",
                          "allreduce_recursive_doubling", "allreduce_recursive_doubling"};
    int ok = rc == 0;
    char got[256] = "";
    for (int i = 0; i < 6; i++) {
        compile_args a = {.p = 4, .count = 1000, .esize = 8, .commutative = 1, .node_of = maps[i], .shared_memory = i == 5};
        const sched_def *s = select_choose(lib, t, SELECT_RULES, NULL, COLL_ALLREDUCE, &a, NULL);
        ok &= s && !strcmp(s->name, want[i]);
        snprintf(got + strlen(got), sizeof got - strlen(got), " %s", s ? s->name : "(none)");
    }
    result(ok, "rules' nodes and ppn conditions read the node map", "rc %d, got%s", rc, got);
    const char *bad = "allreduce nodes << 2 -> ring\nallreduce ppn >= x -> ring\n";
    diag_clear(&d);
    rc = rules_add(t, lib, "bad.rules", bad, strlen(bad), 0, &d);
    const char *msgs = "bad.rules:1: error: bad condition near 'nodes' (write p < 4, bytes >= 8192, nodes >= 2, ...)\n"
                       "bad.rules:2: error: bad condition near 'ppn' (write p < 4, bytes >= 8192, nodes >= 2, ...)\n";
    result(rc != 0 && d.text && !strcmp(d.text, msgs), "a bad nodes or ppn condition is file:line: message", "%s",
           d.text ? d.text : "");
    rules_destroy(t);
    diag_free(&d);
}

static void model_mode(void)
{
    sim_model m;
    sim_model_default(&m);
    char err[128];
    diag why;
    diag_init(&why);
    sim_model_parse("alpha=1e-3,beta=1e-12,gamma=1e-12", &m, err, sizeof err); /* latency is all */
    compile_args a = {.p = 8, .count = 1024, .esize = 8, .commutative = 1};
    const sched_def *s = select_choose(lib, rules, SELECT_MODEL, &m, COLL_ALLREDUCE, &a, &why);
    /* (without a node map every rank is its own node: allreduce_nodes_small is then a
     * dissemination allreduce, as fast as recursive doubling here and first in name order) */
    result(s && (!strcmp(s->name, "allreduce_recursive_doubling") || !strcmp(s->name, "allreduce_linear") ||
                 !strcmp(s->name, "allreduce_nodes_small")) &&
               strstr(why.text, "allreduce_ring"),
           "model mode with a huge α picks a few-round schedule, and lists every candidate's time", "got %s:\n%s",
           s ? s->name : "(none)", why.text ? why.text : "");
    diag_clear(&why);
    sim_model_parse("alpha=1e-9,beta=1e-6,gamma=1e-9", &m, err, sizeof err); /* bandwidth is all */
    a = (compile_args){.p = 8, .count = 1 << 16, .esize = 8, .commutative = 1};
    s = select_choose(lib, rules, SELECT_MODEL, &m, COLL_ALLREDUCE, &a, &why);
    int bandwidth_optimal = s && (strstr(s->name, "ring") || strstr(s->name, "rabenseifner") || strstr(s->name, "binary"));
    result(bandwidth_optimal, "model mode with a huge β picks a bandwidth-optimal schedule",
           "got %s:\n%s", s ? s->name : "(none)", why.text ? why.text : "");
    diag_free(&why);
}

/* The vector collectives: alltoallv as Open MPI's ompi_coll_tuned_alltoallv_intra_dec_fixed
 * (on p alone), the others by the op only; the same choice for every count. */
static void vector_rules(void)
{
    static const long ps[] = {1, 2, 3, 4, 5, 63, 64, 65, 127, 128, 129, 255, 256, 1023, 1024, 5000};
    int ok = 1;
    char first[120] = "";
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        long p = ps[i];
        const char *want = p < 4 ? "pairwise" : p < 64 ? "linear" : p < 128 ? "pairwise" : p < 256 ? "linear" : p < 1024 ? "pairwise" : "linear";
        for (long count = 0; count <= 1 << 20; count += 1 << 19) {
            const char *got[5] = {choose(COLL_ALLTOALLV, p, count, 1, 1, NULL), choose(COLL_GATHERV, p, count, 1, 1, NULL),
                                  choose(COLL_ALLGATHERV, p, count, 1, 1, NULL), choose(COLL_REDUCE_SCATTERV, p, count, 4, 1, NULL),
                                  choose(COLL_REDUCE_SCATTERV, p, count, 4, 0, NULL)};
            const char *exp[5] = {want, "linear", "ring", "ring", "linear"};
            for (int k = 0; k < 5; k++)
                if (strcmp(got[k], exp[k]) && ok) {
                    ok = 0;
                    snprintf(first, sizeof first, "p = %ld, count %ld, case %d: %s, expected %s", p, count, k, got[k], exp[k]);
                }
        }
    }
    result(ok, "the vector collectives' rules (alltoallv by p as Open MPI; reduce_scatterv by the op)", "%s", first);
}

int main(void)
{
    lib = lib_create();
    rules = rules_create();
    diag d;
    diag_init(&d);
    lib_add_builtins(lib, &d);
    int rc = rules_add(rules, lib, nbc_default_rules[0].name, nbc_default_rules[0].text, nbc_default_rules[0].len, 0, &d);
    result(rc == 0 && d.errors == 0, "the built-in rules parse", "%s", d.text ? d.text : "");
    diag_free(&d);
    decision_tree();
    vector_rules();
    fallbacks();
    fixed_count_rules();
    model_mode();
    topology_rules();
    tuning_files();
    rules_destroy(rules);
    lib_destroy(lib);
    return failures ? 1 : 0;
}
