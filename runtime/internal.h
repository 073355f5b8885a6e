/* What the runtime's files share. */
#ifndef NBC_INTERNAL_H
#define NBC_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "../compiler/compile.h"
#include "../compiler/library.h"
#include "../dsl/collectives.h"
#include "../interp/interp.h"
#include "cache.h"

/* Records the message nbc_error_message returns; returns code, for `return fail(...)`. */
int nbc_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nbc_clear_error(void);

/* ---- communicators (comm.c) ---- */
typedef struct comm_state comm_state;
struct comm_state {
    MPI_Comm user, dup;   /* the application's communicator and our private duplicate */
    MPI_Request pending;  /* the duplication, until it completes; then MPI_REQUEST_NULL */
    int rank, size;
    uint64_t seq;         /* collectives started on it so far */
    uint64_t tag_space;   /* tags are seq modulo this */
    comm_state *prev, *next;
};
int comm_init(void);
void comm_finalize(void);
int comm_state_of(MPI_Comm comm, comm_state **out);  /* creates it on first use */
comm_state *comm_state_find(MPI_Comm comm);          /* NULL when there is none yet */
int comm_next_tag(comm_state *cs);
/* Whether the private duplicate can be used yet (it tests the pending duplication). */
int comm_ready(comm_state *cs);

/* ---- requests (request.c) ---- */
struct nbc_req {
    interp_state st;
    cache_entry *entry;     /* the program, held while the request lives */
    comm_state *cs;         /* st.comm is set from it once its duplicate is ready */
    char *scratch;
    size_t scratch_cap;
    MPI_Request *reqs;
    MPI_Status *statuses;
    int reqs_cap;
    int done;
    struct nbc_req *prev, *next; /* in the active list, or the free pool */
};
struct nbc_req *req_get(size_t scratch, int nreqs);
void req_release(struct nbc_req *r);   /* back to the pool, its program released */
void req_start(struct nbc_req *r);     /* first step, then into the active list */
int req_progress_all(int *moved);      /* completed count, or < 0 for an MPI error */
void req_finalize(void);

/* ---- schedules and programs (select.c) ---- */
int select_init(void);
void select_finalize(void);
sched_lib *select_library(void);
cache *select_cache(void);
int select_force(nbc_collective coll, const char *name);
/* The program for a call: from the cache, or chosen, compiled and cached. */
int select_program(nbc_collective coll, const compile_args *args, cache_entry **out);

#endif
