/* Stall reports of any-order requests, like Horovod's stall inspector: when one has stalled
 * (stall.c), this rank asks the others, on the request's own communicator, how often each has
 * started it, and prints which ranks have started it and which have not:
 *
 *   nbc: stall: request 'layer3.weight' (id 5, allreduce of 4194304 bytes) has waited 60.0 s on
 *   rank 0 at start 12: started by ranks 0,1,3; not started by rank 2 (at start 11)
 *
 * Queries are answered from progress passes that moved nothing (so a rank busy outside the
 * library, with no progress thread, answers late: the report then names it as not answering).
 * One report is gathered at a time: stalls are rare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

#define ANSWER_WAIT_NS 2000000000L /* how long a report waits for answers */


int stall_query_tag(const comm_state *cs) { return (int)(cs->tag_space - 1); }
static int answer_tag(const comm_state *cs) { return (int)(cs->tag_space - STALL_TAGS); }

static struct nbc_req *find(comm_state *cs, uint64_t id)
{
    for (struct nbc_req *r = cs->persistent; r; r = r->cs_next)
        if (r->id == id) return r;
    return NULL;
}

/* Answers every query waiting on cs's any-order communicator. */
static void answer(comm_state *cs)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, stall_query_tag(cs), cs->any.comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        stall_msg q, a = {0};
        MPI_Recv(&q, (int)sizeof q, MPI_BYTE, st.MPI_SOURCE, stall_query_tag(cs), cs->any.comm, MPI_STATUS_IGNORE);
        struct nbc_req *r = find(cs, q.id);
        a.id = q.id;
        a.starts = r ? r->starts : 0;
        a.active = r && r->state == REQ_ACTIVE;
        /* small and answered at most once per query: a blocking send would only wait for MPI's
         * eager buffer, which such a message always fits */
        MPI_Send(&a, (int)sizeof a, MPI_BYTE, st.MPI_SOURCE, answer_tag(cs), cs->any.comm);
    }
}

void stall_ask(struct nbc_req *r, long now)
{
    if (nbc_rt.stall.r) return; /* one at a time */
    comm_state *cs = r->cs;
    int n = cs->size - 1;
    nbc_rt.stall.answers = calloc((size_t)n + 1, sizeof *nbc_rt.stall.answers);
    nbc_rt.stall.reqs = calloc(2 * (size_t)n + 1, sizeof *nbc_rt.stall.reqs);
    if (!nbc_rt.stall.answers || !nbc_rt.stall.reqs) {
        free(nbc_rt.stall.answers), free(nbc_rt.stall.reqs);
        nbc_rt.stall.answers = NULL, nbc_rt.stall.reqs = NULL;
        return;
    }
    nbc_rt.stall.r = r;
    nbc_rt.stall.n = n;
    nbc_rt.stall.asked_ns = now;
    nbc_rt.stall.query = (stall_msg){.id = r->id, .active = 1, .starts = r->starts};
    for (int k = 0, j = 0; j < cs->size; j++) {
        if (j == cs->rank) continue;
        MPI_Isend(&nbc_rt.stall.query, (int)sizeof nbc_rt.stall.query, MPI_BYTE, j, stall_query_tag(cs), cs->any.comm, &nbc_rt.stall.reqs[k]);
        MPI_Irecv(&nbc_rt.stall.answers[k], (int)sizeof *nbc_rt.stall.answers, MPI_BYTE, j, answer_tag(cs), cs->any.comm,
                  &nbc_rt.stall.reqs[n + k]);
        k++;
    }
}

static void append_rank(char *s, size_t size, int rank, int *first)
{
    size_t l = strlen(s);
    if (l + 16 < size) snprintf(s + l, size - l, "%s%d", *first ? "" : ",", rank);
    *first = 0;
}

static void print_report(long now)
{
    struct nbc_req *r = nbc_rt.stall.r;
    comm_state *cs = r->cs;
    char started[512] = "", missing[1024] = "", silent[512] = "";
    int fs = 1, fm = 1, fq = 1;
    for (int k = 0, j = 0; j < cs->size; j++) {
        if (j == cs->rank) {
            append_rank(started, sizeof started, j, &fs);
            continue;
        }
        int done = 0;
        MPI_Test(&nbc_rt.stall.reqs[nbc_rt.stall.n + k], &done, MPI_STATUS_IGNORE);
        const stall_msg *a = &nbc_rt.stall.answers[k++];
        if (!done) {
            append_rank(silent, sizeof silent, j, &fq);
        } else if (a->starts >= r->starts) {
            append_rank(started, sizeof started, j, &fs);
        } else {
            size_t l = strlen(missing);
            if (l + 40 < sizeof missing)
                snprintf(missing + l, sizeof missing - l, "%s%d (at start %llu)", fm ? "" : ", ", j,
                         (unsigned long long)a->starts);
            fm = 0;
        }
    }
    fprintf(stderr,
            "nbc: stall: request '%s' (id %llu, %s of %llu bytes) has waited %.1f s on rank %d at start %llu: started by "
            "rank%s %s%s%s%s%s\n",
            r->name[0] ? r->name : "(unnamed)", (unsigned long long)r->id, collective_names[r->sig.coll],
            (unsigned long long)(r->sig.count * r->sig.esize), (double)(now - r->stall_since_ns) * 1e-9, cs->rank,
            (unsigned long long)r->starts, strchr(started, ',') ? "s" : "", started, fm ? "" : "; not started by rank ", missing,
            fq ? "" : "; no answer (busy outside nbc) from ", silent);
}

static void finish_report(void)
{
    for (int i = 0; i < 2 * nbc_rt.stall.n; i++) {
        if (nbc_rt.stall.reqs[i] == MPI_REQUEST_NULL) continue;
        if (i >= nbc_rt.stall.n) MPI_Cancel(&nbc_rt.stall.reqs[i]); /* an answer that never came */
        MPI_Request_free(&nbc_rt.stall.reqs[i]);
    }
    free(nbc_rt.stall.answers);
    free(nbc_rt.stall.reqs);
    nbc_rt.stall.r = NULL, nbc_rt.stall.answers = NULL, nbc_rt.stall.reqs = NULL;
    nbc_rt.stall.n = 0, nbc_rt.stall.asked_ns = 0;
}

void stall_forget(struct nbc_req *r)
{
    if (nbc_rt.stall.r == r) finish_report();
}

/* The report being gathered: printed once every rank answered, after ANSWER_WAIT_NS, or when
 * its request is no longer active. */
void stall_gather(long now)
{
    if (!nbc_rt.stall.r) return;
    int done = 1;
    for (int i = 0; i < nbc_rt.stall.n; i++) {
        int flag = 0;
        MPI_Test(&nbc_rt.stall.reqs[nbc_rt.stall.n + i], &flag, MPI_STATUS_IGNORE);
        done &= flag;
    }
    if (done || now - nbc_rt.stall.asked_ns > ANSWER_WAIT_NS || nbc_rt.stall.r->state != REQ_ACTIVE) {
        print_report(now);
        finish_report();
    }
}

void stall_answer_all(void)
{
    for (comm_state *cs = comm_first(); cs; cs = cs->next)
        if (comm_any_ready(cs)) answer(cs);
}
