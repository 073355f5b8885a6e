/* Requests: a pool of released requests keeps its scratch and MPI request arrays, so that in
 * steady state starting a collective allocates nothing. Started requests sit in the active
 * list until they complete; nbc_progress walks that list. */
#include <stdlib.h>

#include "internal.h"

#define POOL_MAX 64

static struct nbc_req *active, *pool;
static int pooled;

static void push(struct nbc_req **list, struct nbc_req *r)
{
    r->prev = NULL;
    r->next = *list;
    if (*list) (*list)->prev = r;
    *list = r;
}

static void unlink_from(struct nbc_req **list, struct nbc_req *r)
{
    if (r->prev) r->prev->next = r->next;
    else *list = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void destroy(struct nbc_req *r)
{
    free(r->scratch);
    free(r->reqs);
    free(r->statuses);
    free(r);
}

struct nbc_req *req_get(size_t scratch, int nreqs)
{
    struct nbc_req *r = pool;
    if (r) {
        unlink_from(&pool, r);
        pooled--;
    } else if (!(r = calloc(1, sizeof *r))) {
        return NULL;
    }
    if (scratch > r->scratch_cap) {
        char *s = realloc(r->scratch, scratch);
        if (!s) goto oom;
        r->scratch = s;
        r->scratch_cap = scratch;
    }
    if (nreqs > r->reqs_cap) {
        MPI_Request *q = realloc(r->reqs, (size_t)nreqs * sizeof *q);
        if (q) r->reqs = q;
        MPI_Status *s = q ? realloc(r->statuses, (size_t)nreqs * sizeof *s) : NULL;
        if (!s) goto oom;
        r->statuses = s;
        r->reqs_cap = nreqs;
    }
    r->done = 0;
    r->entry = NULL;
    return r;
oom:
    destroy(r);
    return NULL;
}

void req_release(struct nbc_req *r)
{
    if (!r->done) unlink_from(&active, r);
    if (r->entry) cache_release(select_cache(), r->entry);
    r->entry = NULL;
    if (pooled >= POOL_MAX) {
        destroy(r);
        return;
    }
    push(&pool, r);
    pooled++;
}

/* A request runs once its communicator's private duplicate exists. */
static int step(struct nbc_req *r)
{
    if (r->st.comm == MPI_COMM_NULL) {
        if (!comm_ready(r->cs)) return INTERP_WAITING;
        r->st.comm = r->cs->dup;
    }
    return interp_step(&r->st);
}

void req_start(struct nbc_req *r)
{
    if (step(r) == INTERP_DONE) {
        r->done = 1;
        return;
    }
    push(&active, r);
}

int req_progress_all(int *moved)
{
    int completed = 0;
    *moved = 0;
    for (struct nbc_req *r = active, *next; r; r = next) {
        next = r->next;
        int s = step(r);
        if (s != INTERP_WAITING) *moved = 1;
        if (s == INTERP_DONE) {
            unlink_from(&active, r);
            r->done = 1;
            completed++;
        }
    }
    return completed;
}

void req_finalize(void)
{
    while (pool) {
        struct nbc_req *r = pool;
        unlink_from(&pool, r);
        destroy(r);
    }
    pooled = 0;
    /* Requests still active belong to the application, which never completed them: their
     * programs go with the cache; the request objects stay valid but will not progress. */
    for (struct nbc_req *r = active; r; r = r->next) r->entry = NULL;
    active = NULL;
}
