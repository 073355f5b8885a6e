/* The runtime's process state, all of it in one structure (state.c holds the one instance).
 * The process lock (threads.lock) guards every field below it: a public call takes it on
 * entry (api.c), so whatever runs inside a call may touch any of this. The one exception is
 * the error message, which is per thread (error.c) and needs no lock.
 *
 * Each part belongs to one file, which alone writes it; the others only read through that
 * file's functions (internal.h). */
#ifndef NBC_STATE_H
#define NBC_STATE_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#include "internal.h"
#include "selection.h"
#include "shm.h"

/* The environment, read once at nbc_init (settings.c, through env.c's strict parser). */
typedef struct {
    uint64_t cache_entries, cache_bytes; /* NBC_CACHE_ENTRIES, NBC_CACHE_BYTES */
    uint64_t max_insns;                  /* NBC_MAX_INSNS; 0: the compiler's default */
    uint64_t tag_ub;                     /* NBC_TAG_UB: no tag above it (a smaller MPI_TAG_UB, for
                                            tests); 0: MPI's */
    long spin_ns;                        /* NBC_SPIN_US, or what the launcher tells */
    long preempt_ns;                     /* NBC_PREEMPT_US */
    long stall_ns;                       /* NBC_STALL_WARNING; 0: never */
    long timeout_ns;                     /* NBC_TIMEOUT; 0: off */
    int check;                           /* NBC_CHECK */
    int trace;                           /* NBC_TRACE: 0, 1 or 2 */
    int progress_thread;                 /* NBC_PROGRESS_THREAD */
    const char *schedule_path, *tuning, *model_file, *select; /* NULL when unset */
    const char *forced[COLL_COUNT_];     /* NBC_ALLREDUCE and its siblings */
    long local_ranks;                    /* ranks on this node, as the launcher says; 0: unknown */
    uint64_t node_key;                   /* this process's node: a hash of its name (NBC_NODE_MAP,
                                            or the host's) */
} nbc_settings;

/* A forced schedule, with what its calls' cache keys need computed once, off the call path. */
typedef struct {
    sched_choice ch;
    uint64_t identity;  /* lib_identity of ch.s */
    int64_t param_hash; /* of the parameter values; 0 without any */
} forcing;

/* A stall query and its answers (stall_ask.c). */
typedef struct {
    uint64_t id;
    uint32_t active, pad;
    uint64_t starts;
} stall_msg;

typedef struct {
    struct { /* thread.c */
        pthread_mutex_t lock;
        pthread_cond_t work;         /* the progress thread waits here while nothing is active */
        int level;                   /* MPI's thread level; MULTIPLE until nbc_init asks MPI */
        int entered;                 /* below MULTIPLE: a call is inside (instead of the lock) */
        pthread_t owner;             /* the thread that initialized the library */
        pthread_t progress;
        int progress_running;        /* the thread exists (only changed by the caller's thread) */
        volatile int progress_stop;  /* asks it to end; read under the lock */
    } threads;
    struct { /* api.c */
        int initialized;
        int finalize_keyval;         /* on MPI_COMM_SELF: MPI_Finalize shuts us down */
    } life;
    nbc_settings env; /* settings.c */
    shm_process shm;  /* shm_heap.c: the segment outlives nbc_finalize (nbc_alloc_mem's blocks live in it) */
    struct { /* comm.c */
        int keyval;                  /* our state on the application's communicators */
        comm_state *all;
        MPI_Comm last_comm;          /* most calls use the communicator of the last one */
        comm_state *last_state;
        int duplicating;             /* communicators whose duplication is under way */
        int duplicating_app;         /* of them, duplications of an application's communicator */
        int learning;                /* communicators whose node map is being exchanged */
    } comms;
    struct { /* request.c */
        struct nbc_req *active, *active_tail; /* by priority */
        struct nbc_req *pool;        /* released requests, kept for reuse */
        struct nbc_req *live;        /* every request the application holds */
        int pooled, nactive;
        const nbc_program *last_ran; /* the program of the start that ended last (tests read its name) */
    } reqs;
    struct { /* programs.c */
        sched_lib *lib;
        cache *programs;
        forcing forced[COLL_COUNT_];
        uint64_t generation;         /* bumped whenever the library or the selection changes */
        uint64_t epoch;              /* programs_epoch(): bumped by those, forcing, and caching */
        uint64_t auto_key[COLL_COUNT_]; /* the cache key's schedule under automatic selection */
        uint64_t auto_generation;
        forcing shared, shared_small; /* allreduce_shm and allreduce_shm_small, for programs_for_shared */
        uint64_t shared_generation;  /* generation + 1 when `shared` was looked up */
        rule_table *rules;
        select_mode mode;
        sim_model model;
    } sel;
    struct { /* stall_ask.c: one report being gathered (at most one at a time: stalls are rare) */
        struct nbc_req *r;
        long asked_ns;
        int n;                       /* ranks asked: all but this one */
        stall_msg query, *answers;
        MPI_Request *reqs;           /* n sends of the query, then n receives of the answers */
        long last_poll_ns;           /* stall.c's */
    } stall;
} nbc_state;

extern nbc_state nbc_rt;

/* Reads the environment into nbc_rt.env: MPI_SUCCESS, or MPI_ERR_ARG naming the variable. */
int settings_read(void);

#endif
