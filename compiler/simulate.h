/* The cost simulator: predicts when every rank of a schedule finishes, under an α-β-γ model
 * (a message of n bytes takes α + nβ, reducing n bytes takes nγ) or LogGP (L, o, g, G, plus γ
 * for reductions), by running the ranks' programs against a timed network.
 *
 * Rounds follow the round semantics: a round starts when the rank's previous round ended; its
 * COPY and REDUCE run at once, one after the other (copies are free), whether they name this
 * rank's buffers or a peer's; each SEND is posted after the local work before it in the round
 * and leaves through the rank's single outgoing port, one message after another; a RECV
 * completes when its message has arrived (the receiver has no port limit). A SIGNAL is a
 * message of no bytes (α, or L and the o's and g for LogGP, and no β), a WAIT its receive;
 * they are not MPI requests and are counted apart from the messages. The round ends when its local work, sends and receives have all completed.
 * So the time of a round is its slowest event, and the critical path is the chain of events
 * that decided each round's end: it is tracked as a sum of model terms (messages, bytes moved,
 * bytes reduced), so the prediction is explained by the formula it amounts to.
 *
 * Programs are compiled rank by rank when a rank is first needed, reduced to skeletons
 * (skeleton.h) and freed; a rank's state is its clocks and where it stands, and the network
 * holds only the messages in flight, with their arrival times. */
#ifndef NBC_SIMULATE_H
#define NBC_SIMULATE_H

#include <stdint.h>
#include <stdio.h>
#include "diag.h"
#include "compile.h"
#include "library.h"

typedef struct {
    int loggp;                 /* 0: α-β-γ; 1: LogGP */
    double alpha, beta, gamma; /* seconds, seconds per byte, seconds per byte reduced */
    int two_level;             /* the messages between ranks of one node (sim_args.node_of) */
    double alpha_node, beta_node; /* cost these instead of alpha and beta */
    double L, o, g, G;         /* LogGP: latency, overhead, gap per message, gap per byte */
    double min_round;          /* every round lasts at least this long (for drawings) */
    int any_port;              /* sends do not queue on the outgoing port (for drawings) */
} sim_model;

/* Parses "alpha=1e-6,beta=1e-10,gamma=1e-10[,alpha_node=..,beta_node=..]" or
 * "L=..,o=..,g=..,G=..[,gamma=..]" over the
 * defaults in *m. Returns 0, or -1 with a message in err. */
int sim_model_parse(const char *text, sim_model *m, char *err, size_t errsize);
void sim_model_default(sim_model *m);
void sim_model_print(const sim_model *m, FILE *out);

typedef struct {
    int64_t p, count, esize, root;
    int inplace, commutative;
    int shared_memory;         /* the ranks share a node (compile_args.shared_memory) */
    int record_hops;           /* remember each round's critical hop, to print the path */
    int64_t nbufs;             /* buffers of a multi-buffer call (0: one) */
    const int64_t *node_of;    /* the topology (compile_args.node_of): messages inside a node
                                  cost alpha_node and beta_node; NULL: none is known */
    int nparams;               /* values for the schedule's params */
    struct {
        const char *name;
        int64_t value;
    } params[COMPILE_MAX_PARAMS];
} sim_args;

/* The same call as compile arguments (rank 0), and back. */
compile_args sim_compile_args(const sim_args *a);
sim_args sim_args_of(const compile_args *c);

/* Called as the simulation goes (either may be NULL): a rank's round with its time span and
 * local work; a message from when it leaves to when its receive completes (which is later than
 * its arrival when the receiver posts the receive late). */
typedef struct {
    void *ctx;
    void (*round)(void *ctx, uint32_t rank, uint32_t round, double start, double end, uint64_t reduced,
                  uint64_t copied);
    void (*message)(void *ctx, uint32_t src, uint32_t src_round, double sent, uint32_t dst, uint32_t dst_round,
                    double received, uint64_t bytes);
    /* a SIGNAL, from when it is raised to when the WAIT that matched it is satisfied */
    void (*flag)(void *ctx, uint32_t src, uint32_t src_round, double raised, uint32_t dst, uint32_t dst_round, double seen);
} sim_hooks;

typedef struct {               /* a critical path, as the model terms it adds up */
    double t;
    uint32_t msgs, ovh, gaps;  /* α (or L) terms, o terms, g terms */
    int32_t hop_rank;          /* the last message on the path came from this rank's ... */
    uint32_t hop_round;        /* ... round (hop_rank -1: none) */
    uint64_t xfer, red;        /* bytes paying β (or G), bytes paying γ */
    uint32_t msgs_node;        /* of msgs and xfer, those inside a node (a topology's), paying */
    uint64_t xfer_node;        /* α_node and β_node */
} sim_path;

typedef struct {               /* one round index, over all ranks that have it */
    uint32_t ranks, messages;
    uint64_t bytes, max_rank_bytes, max_rank_reduced;
    double latest_end, longest;
} sim_round_stat;

typedef struct {
    uint32_t rank, round;
} sim_hop;

typedef struct {
    double time;               /* when the last rank finishes */
    uint32_t last_rank;
    sim_path path;             /* its critical path */
    sim_hop *hops;             /* when recorded: the path's ranks and rounds, last first */
    size_t nhops;
    sim_round_stat *rounds;
    uint32_t nrounds;
    uint64_t messages, bytes, max_live_messages;
    uint64_t flags;            /* SIGNALs (shared memory), not among the messages */
} sim_result;

enum { SIM_OK = 0, SIM_FAIL, SIM_SKIP };

/* SIM_SKIP when the schedule's preconditions fail; SIM_FAIL with reasons in d. */
int simulate_schedule(const sched_lib *lib, const sched_def *s, const sim_args *a, const sim_model *m,
                      const sim_hooks *hooks, sim_result *out, diag *d);
void sim_result_free(sim_result *r);
/* Prints the time, the critical path and the per-round table (at most max_rounds rows). */
void sim_report(const sim_result *r, const sim_model *m, uint32_t max_rounds, FILE *out);
/* "1.23 us" */
void sim_format_time(double t, char *out, size_t size);

#endif
