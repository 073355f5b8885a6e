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
    X(COLL_EXSCAN, "exscan", 1, 0, LEN_COUNT, LEN_COUNT, LEN_COUNT, AT_START)

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
