#include "origin.h"

#define MAX_SCHEDULES 64 /* distinct schedules searched: calls nest at most 32 deep */

typedef struct {
    const sched_lib *lib;
    loc at;
    const sched_def *seen[MAX_SCHEDULES];
    int nseen;
    const source *found;
} search;

static void walk_schedule(search *q, const sched_def *s);

/* Searches every schedule called from a list of statements. */
static void walk_calls(search *q, const node *n)
{
    for (; n && !q->found; n = n->next) {
        if (n->kind == N_CALL) {
            const sched_def *callee = lib_find(q->lib, n->name);
            if (callee) walk_schedule(q, callee);
        } else if (n->kind >= N_LET && n->kind != N_ARG) { /* a statement: look inside its blocks */
            walk_calls(q, n->a);
            walk_calls(q, n->b);
            walk_calls(q, n->c);
            walk_calls(q, n->d);
        }
    }
}

/* Whether a list of statements holds an instruction at q->at, not looking into calls. */
static int holds(const search *q, const node *n)
{
    for (; n; n = n->next) {
        if ((n->kind == N_SEND || n->kind == N_RECV || n->kind == N_COPY || n->kind == N_REDUCE || n->kind == N_SIGNAL ||
             n->kind == N_WAIT) &&
            n->at.line == q->at.line && n->at.col == q->at.col)
            return 1;
        if (n->kind >= N_LET && n->kind != N_CALL && (holds(q, n->a) || holds(q, n->b) || holds(q, n->c) || holds(q, n->d)))
            return 1;
    }
    return 0;
}

static void walk_schedule(search *q, const sched_def *s)
{
    for (int i = 0; i < q->nseen; i++)
        if (q->seen[i] == s) return;
    if (q->nseen == MAX_SCHEDULES) return;
    q->seen[q->nseen++] = s;
    if (holds(q, s->body)) {
        q->found = s->src;
        return;
    }
    walk_calls(q, s->body);
}

const source *origin_of(const sched_lib *lib, const sched_def *s, loc at)
{
    search q = {.lib = lib, .at = at};
    if (holds(&q, s->body)) return s->src; /* the schedule's own file first */
    walk_schedule(&q, s);
    return q.found ? q.found : s->src;
}
