/* What the runtime's files share. */
#ifndef NBC_INTERNAL_H
#define NBC_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../compiler/compile.h"
#include "../compiler/library.h"
#include "../dsl/collectives.h"
#include "../interp/interp.h"
#include "cache.h"
#include "nbc.h"
#include "shm.h"

/* ---- errors (error.c) ---- */
#define NBC_ERROR_MAX 4096
/* Records the message nbc_error_message returns (this thread's); returns code, for
 * `return nbc_fail(...)`. */
int nbc_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nbc_clear_error(void);
const char *error_text(void); /* this thread's last message */

/* ---- communicators (comm.c) ---- */
/* What every rank must agree on for a collective (NBC_CHECK compares it across ranks). */
typedef struct {
    int coll, root;
    int64_t count, esize;
    MPI_Op op;
} call_signature;

/* A call's programs, by what runs: the messages' one (always there); the shared one, or NULL
 * when the call cannot use shared memory; and, when the shared one is the stage's
 * (allreduce_shm_small), the one that reads the peers' buffers where every rank's are shared
 * (allreduce_shm), or NULL. The ranks' agreement (shm.c) picks one. */
enum { RUN_MESSAGES, RUN_SHARED, RUN_DIRECT, RUN_CHOICES };

/* One of a communicator's private duplicates. They are made one at a time, in the order every
 * rank asks for them (comm.c): Open MPI 4.1 runs two duplications of one communicator that are
 * in flight together in whichever order its progress meets them, which can differ between
 * ranks, and their internal reductions then cross and hang. */
typedef struct duplicate {
    MPI_Comm comm;        /* MPI_COMM_NULL until its duplication starts (or if it failed) */
    MPI_Request pending;  /* until it completes */
    uint64_t turn;        /* its place in that order, from 1; 0: not asked for */
} duplicate;

typedef struct comm_state comm_state;
struct comm_state {
    MPI_Comm user;        /* the application's communicator; MPI_COMM_NULL once it freed it */
    duplicate dup;        /* ours for collectives started in the same order everywhere */
    duplicate any;        /* a second one for any-order requests (asked for at the first) */
    uint64_t turns_asked, turns_started; /* of its duplicates, in order */
    duplicate *in_flight; /* the one whose duplication is under way, or NULL */
    int rank, size;
    uint64_t seq;         /* collectives started on it so far */
    uint64_t tag_space;   /* tags are seq modulo this */
    uint64_t any_ids;     /* any-order requests made on it so far: the next one's identity */
    struct any_block *blocks; /* the duplicates of identities past the first block (comm.c) */
    int refs;             /* requests that use it: it outlives MPI_Comm_free until they end */
    int busy;             /* inside a test or wait of its duplication (comm.c's settle) */
    struct nbc_req *persistent; /* its any-order requests, for stall reports */
    struct shm_comm *shm; /* shared memory with its ranks (shm.c), from the first call that may use it */
    /* Its node map (comm.c): which ranks share a node, exchanged once on `dup` as soon as it is
     * made. Calls prepared before it is known here are chosen again when they start to run
     * (calls.c's call_reselect), so every rank runs what the map makes it choose. */
    int topo;             /* TOPO_* */
    MPI_Request topo_req; /* the exchange of node keys, while TOPO_ASKED */
    uint64_t node_key;    /* this rank's, sent from here */
    uint64_t *node_keys;  /* [size]: every rank's, until the map is made */
    int64_t *node_of;     /* [size]: compile_args.node_of; NULL unless the ranks span several
                             nodes and some node has several (then schedules may use it) */
    int nodes;            /* how many nodes its ranks are on, once TOPO_KNOWN */
    struct {              /* its last call's programs, taken again by a call like it (calls.c) */
        call_signature sig;
        int flags;        /* in place, commutative, nbufs */
        uint64_t epoch;   /* programs_epoch() when they were looked up */
        cache_entry *progs[RUN_CHOICES]; /* not held: valid while the epoch is */
        struct nbc_req *spare; /* a request that ran them, kept for the next call (request.c) */
    } last;
    comm_state *prev, *next;
};
enum { TOPO_UNKNOWN, TOPO_ASKED, TOPO_KNOWN };
int comm_init(void);
void comm_finalize(int keep); /* keep: nbc_finalize's (the peers' view stays) */
int comm_state_of(MPI_Comm comm, comm_state **out);  /* creates it on first use */
comm_state *comm_state_find(MPI_Comm comm);          /* NULL when there is none yet */
int comm_dup_under_way(MPI_Comm comm); /* its first duplication not yet complete (interpose/) */
int comm_next_tag(comm_state *cs);
/* Any-order identities come in blocks of tag_space - STALL_TAGS, one duplicate each: the first
 * block's is cs->any, each later one's is made when the block begins (comm.c). */
typedef struct any_block {
    uint64_t first;       /* the identity of its tag 0 */
    duplicate dup;
    int live;             /* its requests not yet freed */
    struct any_block *next;
} any_block;
int comm_take_identity(comm_state *cs, struct nbc_req *r); /* r->id and r->block, at init */
/* Whether r's duplicate (ordered or any-order) can be used yet; sets *comm to it when it can:
 * MPI_COMM_NULL if its duplication failed. */
int comm_request_ready(struct nbc_req *r, MPI_Comm *comm);
/* Advances every duplication under way (each pass of progress). */
void comm_advance_duplicates(void);
/* Advances cs's node map; 1 once it is known (wait: until it is). */
int comm_topology_settle(comm_state *cs, int wait);
/* Whether cs's any-order duplicate has been asked for and can be used yet. */
int comm_any_ready(comm_state *cs);
void comm_hold(comm_state *cs);
comm_state *comm_first(void);   /* every communicator's state, through ->next */
void comm_add_any(comm_state *cs, struct nbc_req *r);    /* lists an any-order request */
void comm_remove_any(comm_state *cs, struct nbc_req *r);
void comm_drop(comm_state *cs); /* frees it when the application freed its communicator */

/* ---- requests (request.c) ---- */
enum { REQ_INACTIVE, REQ_ACTIVE, REQ_DONE }; /* DONE: completed, not yet reported */

struct nbc_req {
    interp_state st;
    cache_entry *progs[RUN_CHOICES]; /* its programs (RUN_*), held while the request lives */
    comm_state *cs;         /* st.comm is set from it once its duplicate is ready */
    char *scratch;
    size_t scratch_cap;
    MPI_Request *reqs;
    MPI_Status *statuses;
    int reqs_cap;
    int state;              /* REQ_* */
    int persistent;         /* made by an _init call: survives completion */
    int any_order;          /* tagged by its identity on cs->any, not by a sequence number */
    int orphan;             /* held by the application across nbc_finalize: only reported or freed */
    int priority, next_priority;
    uint64_t id;            /* any-order: its identity (its tag is id % (tag_space - STALL_TAGS)) */
    struct any_block *block; /* any-order, past the first block: its identities' duplicate */
    uint64_t starts;        /* how often it was started */
    long last_moved_ns;     /* when it last got further (priorities), or was started */
    uint64_t stall_mark;    /* stall reports: its position when last seen, since when (0: not */
    long stall_since_ns;    /* seen since it started), and how often that stall was reported */
    int stall_reports;
    uint64_t timeout_mark;  /* NBC_TIMEOUT: its position when last seen, and since when */
    long timeout_since_ns;
    char name[48];          /* nbc_name, or "" */
    call_signature sig;
    struct nbc_check *check; /* NBC_CHECK: the agreement before the program, or NULL */
    /* shared memory (shm.c): a call with a shared program agrees with its ranks on which of its
     * programs to run */
    uint64_t seq;            /* ordered: its number among its communicator's calls (the same everywhere) */
    int shm_chan;            /* the channel it holds, or -1 */
    int shm_published, shm_chosen;
    int shm_in_call;         /* started with a shared program and not yet ended (shm_end) */
    int shm_culprit;         /* the rank whose leaving made this call fail, or -1 */
    struct shm_lane *lane;   /* any-order on shared memory: its lane (shm_lane.c), or NULL */
    int pieces;              /* cut into pieces for priorities: its shared program runs a piece a step */
    int timed_out;           /* NBC_TIMEOUT ended this start */
    int topo_stale;          /* prepared before its communicator's node map was known here (a
                                call whose choice the map can change: not chunked, no vectors) */
    int shape;               /* in place | commutative << 1 | nbufs << 2: calls.c's shape_of */
    char error[256];        /* why it failed, when it did (nbc_request_error) */
    struct nbc_req *prev, *next;       /* in the active list (by priority), or the pool */
    struct nbc_req *live_prev, *live_next; /* every request the application holds */
    struct nbc_req *cs_next;           /* in cs->persistent */
};
struct nbc_req *req_get(size_t scratch, int nreqs);
/* Grows r's scratch and MPI requests to fit a program that needs these (the interpreter's
 * state follows): MPI_SUCCESS or MPI_ERR_NO_MEM, r unchanged then. */
int req_fit(struct nbc_req *r, size_t scratch, int nreqs);
/* Back to the pool, its program released; or, one that ran its communicator's last programs,
 * kept there as the communicator's spare. */
void req_release(struct nbc_req *r);
struct nbc_req *req_unpark(comm_state *cs); /* takes its spare, back into the live list */
void req_drop_spare(comm_state *cs);   /* releases it (before the communicator goes) */
void req_start(struct nbc_req *r);     /* first step, then into the active list */
int req_progress_all(int *moved);      /* completed count, or < 0 for an MPI error */
int req_active_count(void);
struct nbc_req *req_using(const void *lo, size_t bytes); /* an active or persistent request with a buffer there */
/* "allreduce (request 'name', started on communicator call 3)": for messages about r */
void req_describe(const struct nbc_req *r, char *out, size_t size);
struct nbc_req *req_first_active(void); /* the active list, through ->next */
void req_finalize(void);               /* requests still held become orphans: see nbc.c */
const char *req_error(struct nbc_req *r); /* its failure in words, "" when none */
/* Fails the request (err, with a message of its own) without issuing more. */
void req_fail(struct nbc_req *r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- agreement of ranks on each collective (check.c, NBC_CHECK=1) ---- */
int check_enabled(void);
void check_begin(struct nbc_req *r); /* out of memory: the request fails */
/* Advances the agreement: 1 when it is over (r->st.err says whether it failed), else 0. */
int check_step(struct nbc_req *r);
void check_free(struct nbc_req *r);

/* ---- threads (thread.c) ---- */
void thread_init(void);            /* learns the thread level: call from nbc_init */
int thread_enter(void);            /* every public call: MPI_SUCCESS or a refusal */
void thread_leave(void);
/* For MPI's callbacks into the library (an attribute deleted by MPI_Comm_free): takes the lock
 * unless this thread already holds it; returns whether it did, for thread_leave_callback. */
int thread_enter_callback(void);
void thread_leave_callback(int took);
void thread_wake(void);            /* a request was started: the progress thread has work */
int thread_progress_start(void);
void thread_progress_stop(void);   /* joins it; call without holding the lock */
int thread_is_multiple(void);

/* ---- stall reports (stall.c, stall_ask.c) ---- */
void stall_poll(void);             /* from progress passes that moved nothing; cheap */
void stall_forget(struct nbc_req *r); /* r goes away */
/* any-order requests (stall_ask.c): ask the other ranks which have started r; answer their
 * queries; print a report once its answers are in */
void stall_ask(struct nbc_req *r, long now);
void stall_answer_all(void);
void stall_gather(long now);
int stall_query_tag(const comm_state *cs); /* the top two tags of cs->any are the reports' */
#define STALL_TAGS 2

/* ---- failures (failure.c, timeout.c) ---- */
void failure_describe(struct nbc_req *r); /* a failed MPI call in words: peer, round, schedule */
void timeout_poll(struct nbc_req *active); /* NBC_TIMEOUT: from passes that moved nothing */
/* "allreduce (schedule '...', request '...') on rank R, round K of N"; "RECV of B bytes from
 * rank P (pc N)". snprintf's return. */
int failure_where(const struct nbc_req *r, uint32_t round, char *out, size_t size);
int failure_insn(const nbc_program *p, int pc, char *out, size_t size);

/* ---- time ---- */
long now_ns(void);

/* ---- schedules and programs (programs.c) ---- */
int programs_init(void);      /* from nbc_rt.env */
void programs_finalize(void);
int programs_force(nbc_collective coll, const char *name);
/* The program for a call: from the cache, or chosen, compiled and cached. spec, when not NULL,
 * names the schedule to use ("name:param=value"), as a forced schedule would. */
int programs_for_call(nbc_collective coll, const compile_args *args, const char *spec, cache_entry **out);
/* The shared-memory programs of an allreduce (args->shared_memory set): allreduce_shm or
 * allreduce_shm_small, and (or NULL) allreduce_shm for when every rank's buffers are shared. */
int programs_for_shared(const compile_args *args, cache_entry **out, cache_entry **direct);
/* Changes whenever a program found before may no longer be the one to use, or may be gone
 * from the cache: a schedule forced, loaded or selected otherwise, a program cached. */
uint64_t programs_epoch(void);
/* The bodies of nbc_load_schedules, nbc_set_schedule, nbc_set_selection, nbc_load_tuning and
 * nbc_get_cache_stats. */
int programs_load_schedules(const char *path);
int programs_set_schedule(const char *collective, const char *name);
int programs_set_selection(const char *mode);
int programs_load_tuning(const char *path);
int programs_cache_stats(nbc_cache_stats *stats);

#endif
