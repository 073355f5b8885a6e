/* NBC_CHECK=1: before each collective that must be started in the same order everywhere, and
 * before each start of an any-order request, the ranks agree that they are running the same
 * one. MPI calls a program whose ranks disagree
 * (one calls allreduce while another calls bcast, or they pass different counts) erroneous,
 * and without the check nbc, like MPI, may then hang, report truncation on one rank only, or
 * return garbage with success. With it, every rank fails the collective with a message that
 * names both sides and the fields that differ. An any-order request is checked at each of
 * its starts, on its own tag before its messages (a rank finishes a start before it begins the
 * next, so the agreement's messages never meet another start's); its mismatch fails with
 * MPI_ERR_ARG: the ranks made different requests at the same init.
 *
 * The agreement is a dissemination of the smallest and largest call signature: in round k a
 * rank sends what it knows to rank + 2^k and receives from rank - 2^k, so after ceil(log2 p)
 * rounds every rank knows both extremes and sees a mismatch if there is one. It uses the
 * collective's own tag, before any of its messages, and costs ceil(log2 p) rounds of one
 * 128-byte message per collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* What ranks must agree on, hashed for comparison and kept whole for the message. */
typedef struct {
    uint64_t hash;
    int32_t coll, root, op, rank;
    int64_t count, esize;
    char type[24];           /* a predefined datatype's name ("" for others: their size counts) */
} signature;

struct nbc_check {
    signature mine, extremes[2], incoming[2];
    int k, rounds, posted;
    uint64_t seq;            /* which collective of the communicator, counting from 0; any-order: which start */
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
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0, ni, na, nd, combiner = 0;
    if (MPI_Type_get_envelope(r->st.datatype, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED)
        MPI_Type_get_name(r->st.datatype, name, &len);
    size_t n = strnlen(name, sizeof c->mine.type - 1); /* cut, alike on every rank */
    memcpy(c->mine.type, name, n);
    uint64_t h = 1469598103934665603ull;
    for (const char *t = c->mine.type; *t; t++) h = mix(h, *t);
    h = mix(h, c->mine.coll);
    h = mix(h, c->mine.root);
    h = mix(h, c->mine.op);
    h = mix(h, c->mine.count);
    c->mine.hash = mix(h, c->mine.esize);
    c->extremes[0] = c->extremes[1] = c->mine;
    while ((1 << c->rounds) < r->cs->size) c->rounds++;
    c->reqs[0] = c->reqs[1] = MPI_REQUEST_NULL;
    c->seq = r->any_order ? r->starts + 1 : r->cs->seq - 1; /* the start about to be; the tag just taken */
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
    int n = snprintf(out, size, "%s of %lld elements of %lld bytes%s%s%s",
                     s->coll >= 0 && s->coll < COLL_COUNT_ ? collective_names[s->coll] : "?", (long long)s->count,
                     (long long)s->esize, s->type[0] ? " (" : "", s->type, s->type[0] ? ")" : "");
    if (rooted && n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, ", root %d", s->root);
}

/* "collective, count" */
static void differences(const signature *a, const signature *b, char *out, size_t size)
{
    const char *what[] = {"collective", "count", "datatype", "op", "root"};
    int differ[] = {a->coll != b->coll, a->count != b->count, a->esize != b->esize || strcmp(a->type, b->type),
                    a->op != b->op, a->root != b->root};
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < 5 && n < size; i++)
        if (differ[i]) n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", what[i]);
}

static void report(struct nbc_req *r)
{
    struct nbc_check *c = r->check;
    const signature *other = c->extremes[0].hash != c->mine.hash ? &c->extremes[0] : &c->extremes[1];
    char a[160], b[160], which[96], fields[64];
    describe(&c->mine, a, sizeof a);
    describe(other, b, sizeof b);
    differences(&c->mine, other, fields, sizeof fields);
    if (r->any_order)
        snprintf(which, sizeof which, "any-order request id %llu (start %llu)", (unsigned long long)r->id, (unsigned long long)c->seq);
    else
        snprintf(which, sizeof which, "collective #%llu", (unsigned long long)c->seq);
    req_fail(r, r->any_order ? MPI_ERR_ARG : MPI_ERR_OTHER,
             "NBC_CHECK: ranks disagree on %s of their communicator: rank %d calls %s; rank %d calls %s (they differ in %s)", which,
             c->mine.rank, a, other->rank, b, fields);
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
