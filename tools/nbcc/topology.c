/* The node maps nbcc compiles for (compile_args.node_of): --nodes N --ppn K (lists, as for
 * --p: every pair), or --node-sizes 3,2,1 (one uneven topology), each placed --placement block
 * (a node's ranks consecutive, as a launcher fills host by host), cyclic (round-robin over the
 * nodes) or both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbcc.h"

/* Ranks onto nodes of the given sizes (each >= 1). Cyclic deals one rank to each node that
 * still has room, in node order, so nodes stay numbered by first appearance either way. */
static int place(nbcc_topology *t, const int64_t *sizes, int64_t nodes, int cyclic)
{
    int64_t p = 0, most = 0;
    for (int64_t j = 0; j < nodes; j++) {
        p += sizes[j];
        if (sizes[j] > most) most = sizes[j];
    }
    if (!(t->node_of = malloc((size_t)p * sizeof *t->node_of))) return -1;
    t->p = p;
    t->nodes = nodes;
    int64_t r = 0;
    if (cyclic) {
        for (int64_t k = 0; k < most; k++)
            for (int64_t j = 0; j < nodes; j++)
                if (sizes[j] > k) t->node_of[r++] = j;
    } else {
        for (int64_t j = 0; j < nodes; j++)
            for (int64_t k = 0; k < sizes[j]; k++) t->node_of[r++] = j;
    }
    return 0;
}

static int add(nbcc_topology **out, size_t *n, const int64_t *sizes, int64_t nodes, int cyclic, const char *label)
{
    nbcc_topology *grown = realloc(*out, (*n + 1) * sizeof **out);
    if (!grown) return -1;
    *out = grown;
    nbcc_topology *t = &grown[*n];
    memset(t, 0, sizeof *t);
    if (place(t, sizes, nodes, cyclic)) return -1;
    snprintf(t->label, sizeof t->label, "%s, %s", label, cyclic ? "cyclic" : "block");
    ++*n;
    return 0;
}

int nbcc_topologies(const nbcc_opts *o, nbcc_topology **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!o->nodes && !o->ppn && !o->node_sizes) {
        if (o->placement) return nbcc_usage_error("--placement goes with --nodes and --ppn, or --node-sizes");
        return 0;
    }
    if (o->p) return nbcc_usage_error("--p, or a topology (--nodes and --ppn, --node-sizes): not both");
    if (o->node_sizes && (o->nodes || o->ppn)) return nbcc_usage_error("--node-sizes, or --nodes and --ppn: not both");
    if (!o->node_sizes && (!o->nodes || !o->ppn)) return nbcc_usage_error("--nodes and --ppn go together");
    const char *pl = o->placement ? o->placement : "block";
    int block = !strcmp(pl, "block") || !strcmp(pl, "both"), cyclic = !strcmp(pl, "cyclic") || !strcmp(pl, "both");
    if (!block && !cyclic) return nbcc_usage_error("--placement is block, cyclic or both, not '%s'", pl);
    int64_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = 0;
    if (o->node_sizes) {
        if (expand_list("--node-sizes", o->node_sizes, 0, 0, &a, &na)) return 2;
        for (size_t j = 0; j < na && !rc; j++)
            if (a[j] < 1) rc = nbcc_usage_error("--node-sizes: a node has at least one rank, not %lld", (long long)a[j]);
        char label[64];
        int k = snprintf(label, sizeof label, "nodes ");
        for (size_t j = 0; j < na && k < (int)sizeof label; j++)
            k += snprintf(label + k, sizeof label - (size_t)k, "%s%lld", j ? "+" : "", (long long)a[j]);
        for (int c = 0; c < 2 && !rc; c++)
            if ((c ? cyclic : block) && add(out, n, a, (int64_t)na, c, label)) rc = -1;
    } else {
        if (expand_list("--nodes", o->nodes, 0, 0, &a, &na) || expand_list("--ppn", o->ppn, 0, 0, &b, &nb)) rc = 2;
        for (size_t i = 0; i < na && !rc; i++)
            for (size_t j = 0; j < nb && !rc; j++) {
                if (a[i] < 1 || b[j] < 1 || a[i] > 1 << 20 || b[j] > 1 << 20) {
                    rc = nbcc_usage_error("--nodes and --ppn are 1 or more (up to 2^20), not %lld and %lld", (long long)a[i],
                                          (long long)b[j]);
                    break;
                }
                int64_t *sizes = malloc((size_t)a[i] * sizeof *sizes);
                if (!sizes) rc = -1;
                for (int64_t k = 0; sizes && k < a[i]; k++) sizes[k] = b[j];
                char label[64];
                snprintf(label, sizeof label, "%lld nodes x %lld", (long long)a[i], (long long)b[j]);
                for (int c = 0; c < 2 && !rc; c++) /* one node, or one rank a node: placements agree */
                    if ((c ? cyclic && !(block && (a[i] == 1 || b[j] == 1)) : block) && add(out, n, sizes, a[i], c, label)) rc = -1;
                free(sizes);
            }
    }
    free(a);
    free(b);
    if (rc == -1) nbcc_error("out of memory");
    if (rc) {
        nbcc_topologies_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc == -1 ? 1 : rc;
    }
    return 0;
}

int nbcc_one_topology(const nbcc_opts *o, nbcc_topology **t, size_t *n)
{
    int rc = nbcc_topologies(o, t, n);
    if (rc || *n <= 1) return rc;
    nbcc_topologies_free(*t, *n);
    *t = NULL;
    *n = 0;
    return nbcc_usage_error("one topology: one --nodes, one --ppn, one --placement");
}

void nbcc_topology_args(compile_args *a, const nbcc_topology *t)
{
    a->p = t->p;
    a->node_of = t->node_of;
    a->shared_memory = nbcc_shared_memory; /* inside each node (the compiler refuses a flag or buffer across) */
}

void nbcc_topologies_free(nbcc_topology *t, size_t n)
{
    for (size_t i = 0; i < n; i++) free(t[i].node_of);
    free(t);
}
