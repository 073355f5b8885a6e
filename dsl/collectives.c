/* The collectives, one table: each one's name (as schedules' `implements` and the rule files
 * spell it), whether it applies an operator and whether it has a root, and the shape of its
 * buffers. Adding a collective starts here and in the enum of
 * collectives.h (docs/architecture.md has the whole checklist). */
#include "collectives.h"

#include <string.h>

/* A buffer's length in elements, as a function of p, count and whether the rank is the root. */
enum {
    LEN_0,
    LEN_COUNT,
    LEN_P_COUNT,
    LEN_COUNT_AT_ROOT,   /* count at the root, 0 elsewhere */
    LEN_P_COUNT_AT_ROOT, /* p·count at the root, 0 elsewhere */
};
/* Where sendbuf lies inside recvbuf in place: at its start, or at the rank's own block. */
enum { AT_START, AT_OWN_BLOCK };

/* X(collective, name, reduces, rooted,
 *   sendbuf, recvbuf, recvbuf when in place, sendbuf's place in recvbuf when in place) */
#define COLLECTIVES(X)                                                                              \
    X(COLL_ALLREDUCE, "allreduce", 1, 0, LEN_COUNT, LEN_COUNT, LEN_COUNT, AT_START)                 \
    X(COLL_REDUCE, "reduce", 1, 1, LEN_COUNT, LEN_COUNT_AT_ROOT, LEN_COUNT_AT_ROOT, AT_START)       \
    X(COLL_BCAST, "bcast", 0, 1, LEN_0, LEN_COUNT, LEN_COUNT, AT_START)                             \
    X(COLL_BARRIER, "barrier", 0, 0, LEN_0, LEN_0, LEN_0, AT_START)                                 \
    X(COLL_REDUCE_SCATTER, "reduce_scatter", 1, 0, LEN_P_COUNT, LEN_COUNT, LEN_P_COUNT, AT_START)   \
    X(COLL_ALLGATHER, "allgather", 0, 0, LEN_COUNT, LEN_P_COUNT, LEN_P_COUNT, AT_OWN_BLOCK)         \
    X(COLL_ALLREDUCE_MULTI, "allreduce_multi", 1, 0, LEN_COUNT, LEN_COUNT, LEN_COUNT, AT_START)   \
    X(COLL_ALLTOALL, "alltoall", 0, 0, LEN_P_COUNT, LEN_P_COUNT, LEN_P_COUNT, AT_START)             \
    X(COLL_GATHER, "gather", 0, 1, LEN_COUNT, LEN_P_COUNT_AT_ROOT, LEN_P_COUNT_AT_ROOT, AT_OWN_BLOCK) \
    X(COLL_SCATTER, "scatter", 0, 1, LEN_P_COUNT_AT_ROOT, LEN_COUNT, LEN_P_COUNT_AT_ROOT, AT_START) \
    X(COLL_SCAN, "scan", 1, 0, LEN_COUNT, LEN_COUNT, LEN_COUNT, AT_START)                           \
    X(COLL_EXSCAN, "exscan", 1, 0, LEN_COUNT, LEN_COUNT, LEN_COUNT, AT_START)         \
    /* the vector collectives: their lengths come from the vectors (collective_shape_vec) */     \
    X(COLL_ALLTOALLV, "alltoallv", 0, 0, LEN_0, LEN_0, LEN_0, AT_START)                             \
    X(COLL_GATHERV, "gatherv", 0, 1, LEN_0, LEN_0, LEN_0, AT_START)                                 \
    X(COLL_SCATTERV, "scatterv", 0, 1, LEN_0, LEN_0, LEN_0, AT_START)                               \
    X(COLL_ALLGATHERV, "allgatherv", 0, 0, LEN_0, LEN_0, LEN_0, AT_START)                           \
    X(COLL_REDUCE_SCATTERV, "reduce_scatterv", 1, 0, LEN_0, LEN_0, LEN_0, AT_START)

#define NAME(c, name, reduces, rooted, send, recv, recv_inplace, at) [c] = name,
const char *const collective_names[COLL_COUNT_] = {COLLECTIVES(NAME)};

typedef struct {
    unsigned char reduces, rooted, send, recv, recv_inplace, at;
} coll_info;
#define INFO(c, name, reduces, rooted, send, recv, recv_inplace, at) [c] = {reduces, rooted, send, recv, recv_inplace, at},
static const coll_info infos[COLL_COUNT_] = {COLLECTIVES(INFO)};

int collective_reduces(int c) { return c >= 0 && c < COLL_COUNT_ && infos[c].reduces; }
int collective_rooted(int c) { return c >= 0 && c < COLL_COUNT_ && infos[c].rooted; }

int collective_inplace_at(int c, int64_t rank, int64_t root, int inplace)
{
    if (collective_has_vectors(c)) return inplace && (!collective_rooted(c) || rank == root);
    return inplace && (!collective_rooted(c) || infos[c].send == LEN_0 || rank == root);
}

int collective_from_name(const char *name)
{
    for (int i = 0; i < COLL_COUNT_; i++)
        if (strcmp(name, collective_names[i]) == 0) return i;
    return -1;
}

static int64_t length(int len, int64_t p, int64_t count, int at_root)
{
    switch (len) {
    case LEN_COUNT: return count;
    case LEN_P_COUNT: return p * count;
    case LEN_COUNT_AT_ROOT: return at_root ? count : 0;
    case LEN_P_COUNT_AT_ROOT: return at_root ? p * count : 0;
    default: return 0;
    }
}

coll_shape collective_shape(nbc_collective c, int64_t p, int64_t rank, int64_t root, int64_t count, int inplace)
{
    const coll_info *l = &infos[(unsigned)c < COLL_COUNT_ ? c : COLL_ALLREDUCE];
    return (coll_shape){length(l->send, p, count, rank == root),
                        length(inplace ? l->recv_inplace : l->recv, p, count, rank == root),
                        l->at == AT_OWN_BLOCK ? rank * count : 0};
}

/* The names schedules read the vectors by, [collective][VEC_...] */
static const char *const vector_names[][COLL_NVEC] = {
    [COLL_ALLTOALLV] = {"sendcounts", "sdispls", "recvcounts", "rdispls"},
    [COLL_GATHERV] = {NULL, NULL, "recvcounts", "displs"},
    [COLL_SCATTERV] = {"sendcounts", "displs", NULL, NULL},
    [COLL_ALLGATHERV] = {NULL, NULL, "recvcounts", "displs"},
    [COLL_REDUCE_SCATTERV] = {NULL, NULL, "recvcounts", "displs"},
};

/* a vector collective is one with a row in vector_names, wherever it sits in the enum */
int collective_has_vectors(int c)
{
    if (c < 0 || c >= (int)(sizeof vector_names / sizeof *vector_names)) return 0;
    for (int k = 0; k < COLL_NVEC; k++)
        if (vector_names[c][k]) return 1;
    return 0;
}

int collective_inplace_is_recv(int c) { return c == COLL_SCATTERV; }

const char *collective_vector_name(int c, int which)
{
    if (!collective_has_vectors(c) || which < 0 || which >= COLL_NVEC) return NULL;
    return vector_names[c][which];
}

/* The furthest end of the blocks counts[r] long at displs[r] (0 when every count is 0). */
static int64_t extent(int64_t p, const int64_t *counts, const int64_t *displs)
{
    int64_t end = 0;
    for (int64_t r = 0; counts && displs && r < p; r++)
        if (counts[r] > 0 && displs[r] + counts[r] > end) end = displs[r] + counts[r];
    return end;
}

static int64_t total(int64_t p, const int64_t *counts)
{
    int64_t n = 0;
    for (int64_t r = 0; counts && r < p; r++) n += counts[r];
    return n;
}

coll_shape collective_shape_vec(nbc_collective c, int64_t p, int64_t rank, int64_t root, int64_t count, int inplace,
                                const int64_t *const *vec)
{
    static const int64_t *const none[COLL_NVEC] = {NULL};
    if (!collective_has_vectors(c)) return collective_shape(c, p, rank, root, count, inplace);
    if (!vec) vec = none;
    const int64_t *sc = vec[VEC_SCOUNTS], *sd = vec[VEC_SDISPLS], *rc = vec[VEC_RCOUNTS], *rd = vec[VEC_RDISPLS];
    int64_t rlen = extent(p, rc, rd);
    switch (c) {
    case COLL_ALLTOALLV: /* in place, the data sent is recvbuf's, by recvcounts and rdispls */
        return (coll_shape){inplace ? rlen : extent(p, sc, sd), rlen, 0};
    case COLL_GATHERV:
        if (rank != root) return (coll_shape){count, 0, 0};
        return (coll_shape){count, rlen, inplace && rd ? rd[rank] : 0};
    case COLL_SCATTERV: /* in place, the root receives nothing: its block stays in sendbuf */
        return (coll_shape){rank == root ? extent(p, sc, sd) : 0, inplace && rank == root ? 0 : count, 0};
    case COLL_ALLGATHERV: return (coll_shape){count, rlen, inplace && rd ? rd[rank] : 0};
    case COLL_REDUCE_SCATTERV: { /* in place, recvbuf holds the whole input */
        int64_t all = total(p, rc);
        return (coll_shape){all, inplace ? all : count, 0};
    }
    default: return (coll_shape){0, 0, 0};
    }
}

void collective_uniform_vectors(int c, int64_t p, int64_t rank, int64_t root, int64_t count, int64_t *space,
                                const int64_t *vec[COLL_NVEC])
{
    for (int k = 0; k < COLL_NVEC; k++) vec[k] = NULL;
    if (!collective_has_vectors(c)) return;
    for (int64_t r = 0; r < p; r++) space[r] = count, space[p + r] = r * count;
    int here = c != COLL_GATHERV && c != COLL_SCATTERV ? 1 : rank == root;
    for (int k = 0; k < COLL_NVEC; k++)
        if (vector_names[c][k] && here && !(c == COLL_REDUCE_SCATTERV && k == VEC_RDISPLS))
            vec[k] = space + (k % 2 ? p : 0);
}
