/* NBC_CHECK=1: before each collective that must be started in the same order everywhere, the
 * ranks agree that they are running the same one. MPI calls a program whose ranks disagree
 * (one calls allreduce while another calls bcast, or they pass different counts) erroneous,
 * and without the check nbc, like MPI, may then hang, report truncation on one rank only, or
 * return garbage with success. With it, every rank fails the collective with a message that
 * names both sides.
 *
 * The agreement is a dissemination of the smallest and largest call signature: in round k a
 * rank sends what it knows to rank + 2^k and receives from rank - 2^k, so after ceil(log2 p)
 * rounds every rank knows both extremes and sees a mismatch if there is one. It uses the
 * collective's own tag, before any of its messages, and costs ceil(log2 p) rounds of one
 * 96-byte message per collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* What ranks must agree on, hashed for comparison and kept whole for the message. */
typedef struct {
    uint64_t hash;
    int32_t coll, root, op, rank;
    int64_t count, esize;
} signature;

struct nbc_check {
    signature mine, extremes[2], incoming[2];
    int k, rounds, posted;
    uint64_t seq;            /* which collective of the communicator, counting from 0 */
    MPI_Request reqs[2];
};

int check_enabled(void) { return nbc_rt.env.check; }

/* Predefined ops by position: their handles need not be equal across processes. */
static int op_index(MPI_Op op)
{
    static const MPI_Op ops[] = {MPI_OP_NULL, MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR,
                                 MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE};
    for (int i = 0; i < (int)(sizeof ops / sizeof *ops); i++)
        if (op == ops[i]) return i;
    return -1; /* a user's op: equal wherever it is used, as far as we can tell */
}

static uint64_t mix(uint64_t h, int64_t v)
{
    h ^= (uint64_t)v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

void check_begin(struct nbc_req *r)
{
    struct nbc_check *c = calloc(1, sizeof *c);
    if (!c) {
        req_fail(r, MPI_ERR_NO_MEM, "NBC_CHECK: out of memory");
        return;
    }
    const call_signature *s = &r->sig;
    int rooted = collective_rooted(s->coll);
    c->mine = (signature){.coll = s->coll, .root = rooted ? s->root : 0, .op = op_index(s->op), .rank = r->cs->rank,
                          .count = s->count, .esize = s->esize};
    uint64_t h = 1469598103934665603ull;
    h = mix(h, c->mine.coll);
    h = mix(h, c->mine.root);
    h = mix(h, c->mine.op);
    h = mix(h, c->mine.count);
    c->mine.hash = mix(h, c->mine.esize);
    c->extremes[0] = c->extremes[1] = c->mine;
    while ((1 << c->rounds) < r->cs->size) c->rounds++;
    c->reqs[0] = c->reqs[1] = MPI_REQUEST_NULL;
    c->seq = r->cs->seq - 1; /* the tag was just taken */
    r->check = c;
}

void check_free(struct nbc_req *r)
{
    if (!r->check) return;
    for (int i = 0; i < 2; i++)
        if (r->check->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&r->check->reqs[i]);
            MPI_Request_free(&r->check->reqs[i]);
        }
    free(r->check);
    r->check = NULL;
}

static void describe(const signature *s, char *out, size_t size)
{
    int rooted = collective_rooted(s->coll);
    int n = snprintf(out, size, "%s of %lld elements of %lld bytes",
                     s->coll >= 0 && s->coll < COLL_COUNT_ ? collective_names[s->coll] : "?", (long long)s->count,
                     (long long)s->esize);
    if (rooted && n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, ", root %d", s->root);
}

static void report(struct nbc_req *r)
{
    struct nbc_check *c = r->check;
    const signature *other = c->extremes[0].hash != c->mine.hash ? &c->extremes[0] : &c->extremes[1];
    char a[160], b[160];
    describe(&c->mine, a, sizeof a);
    describe(other, b, sizeof b);
    req_fail(r, MPI_ERR_OTHER,
             "NBC_CHECK: ranks disagree on collective #%llu of their communicator: rank %d calls %s; rank %d calls %s",
             (unsigned long long)c->seq, c->mine.rank, a, other->rank, b);
}

int check_step(struct nbc_req *r)
{
    struct nbc_check *c = r->check;
    if (r->st.err != MPI_SUCCESS) return 1;
    int p = r->cs->size, rank = r->cs->rank;
    while (c->k < c->rounds) {
        int d = 1 << c->k;
        if (!c->posted) {
            int rc = MPI_Irecv(c->incoming, (int)sizeof c->incoming, MPI_BYTE, (rank - d % p + p) % p, r->st.tag,
                               r->st.comm, &c->reqs[0]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(c->extremes, (int)sizeof c->extremes, MPI_BYTE, (rank + d) % p, r->st.tag, r->st.comm,
                               &c->reqs[1]);
            if (rc != MPI_SUCCESS) {
                req_fail(r, rc, "NBC_CHECK: an MPI call failed");
                return 1;
            }
            c->posted = 1;
        }
        int done = 0;
        MPI_Status statuses[2];
        if (MPI_Testall(2, c->reqs, &done, statuses) != MPI_SUCCESS) {
            req_fail(r, MPI_ERR_OTHER, "NBC_CHECK: a message of the agreement failed");
            return 1;
        }
        if (!done) return 0;
        if (c->incoming[0].hash < c->extremes[0].hash) c->extremes[0] = c->incoming[0];
        if (c->incoming[1].hash > c->extremes[1].hash) c->extremes[1] = c->incoming[1];
        c->posted = 0;
        c->k++;
    }
    if (c->extremes[0].hash != c->extremes[1].hash) report(r);
    return 1;
}
