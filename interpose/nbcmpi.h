/* libnbcmpi: MPI's own collective calls run on nbc, for programs that are not rebuilt. The
 * library defines MPI_Iallreduce and siblings (the PMPI profiling interface), runs them on nbc
 * and hands back generalized requests, which every MPI completion call accepts: MPICH's with a
 * poll function, or standard ones completed from the intercepted completion calls (Open MPI). */
#ifndef NBCMPI_H
#define NBCMPI_H

#include <mpi.h>

/* NM_POLLED: MPICH's extended generalized requests (MPIX_Grequest_class_create), which MPICH
 * polls itself. Without it (Open MPI; or MPICH built with -DNM_STANDARD_GREQUESTS, which tests
 * the standard path there), standard ones that the completion calls complete (grequest.c). */
#if defined(MPICH_VERSION) && !defined(NM_STANDARD_GREQUESTS)
#define NM_POLLED 1
#endif

#include "nbc.h"

/* ---- what was run where (stats.c) ---- */
/* The collectives the library runs on nbc: X(kind, non-blocking call, blocking call). Each
 * gives a kind for its non-blocking call (K_I...) and one for its blocking call. */
#define NM_COLLECTIVES(X)                                                                          \
    X(ALLREDUCE, "MPI_Iallreduce", "MPI_Allreduce")                                                \
    X(REDUCE, "MPI_Ireduce", "MPI_Reduce")                                                         \
    X(BCAST, "MPI_Ibcast", "MPI_Bcast")                                                            \
    X(BARRIER, "MPI_Ibarrier", "MPI_Barrier")                                                      \
    X(REDUCE_SCATTER_BLOCK, "MPI_Ireduce_scatter_block", "MPI_Reduce_scatter_block")               \
    X(ALLGATHER, "MPI_Iallgather", "MPI_Allgather")                                                \
    X(ALLTOALL, "MPI_Ialltoall", "MPI_Alltoall")                                                   \
    X(ALLTOALLV, "MPI_Ialltoallv", "MPI_Alltoallv")                                                \
    X(ALLTOALLW, "MPI_Ialltoallw", "MPI_Alltoallw")                                                \
    X(GATHER, "MPI_Igather", "MPI_Gather")                                                         \
    X(GATHERV, "MPI_Igatherv", "MPI_Gatherv")                                                      \
    X(SCATTER, "MPI_Iscatter", "MPI_Scatter")                                                      \
    X(SCATTERV, "MPI_Iscatterv", "MPI_Scatterv")                                                   \
    X(ALLGATHERV, "MPI_Iallgatherv", "MPI_Allgatherv")                                             \
    X(REDUCE_SCATTER, "MPI_Ireduce_scatter", "MPI_Reduce_scatter")                                 \
    X(SCAN, "MPI_Iscan", "MPI_Scan")                                                               \
    X(EXSCAN, "MPI_Iexscan", "MPI_Exscan")
#define NM_NONBLOCKING_KIND(name, nonblocking, blocking) K_I##name,
#define NM_BLOCKING_KIND(name, nonblocking, blocking) K_##name,
enum nm_kind {
    NM_COLLECTIVES(NM_NONBLOCKING_KIND) NM_COLLECTIVES(NM_BLOCKING_KIND) K_PERSISTENT, K_ALLOC_MEM, NKINDS
};
enum nm_reason { R_INTERCOMM, R_COMM_NULL, R_TOO_LARGE, R_BLOCKING_OFF, R_ALLOC_MEM_OFF, R_NBC_REFUSED, NREASONS };
void nm_ran(enum nm_kind k);
void nm_passed(enum nm_kind k, enum nm_reason why);
void nm_count_as(int k); /* the next counts of this thread go to kind k (-1: their own) */

/* ---- one collective's MPI request (grequest.c) ---- */
typedef struct nm_req nm_req;
struct nm_req {
    nbc_request nbc;
    MPI_Request handle; /* the generalized request the application holds */
    int err;            /* the collective's error code, once done */
    int done, freed, claimed; /* claimed: one caller finishes it */
    MPI_Comm comm;
    /* what to unpack into the application's buffer once done (layout.c) */
    void *unpack_to;
    MPI_Datatype unpack_type;
    int unpack_count;
    void *scratch[2];
    struct { const void *from; int count; MPI_Datatype type; } packed[2]; /* what each scratch holds */
    /* a start of a persistent call: the layout made at its init, kept across starts
     * (persistent.c); free_prep: the application freed the call while this start ran */
    nm_req *prep;
    int free_prep;
    /* a reduction on a derived datatype: the stand-in type nbc sees, and the real pair */
    MPI_Datatype standin, real_type;
    MPI_Op real_op;
    int real_contiguous;
    /* a vector form's packed layout: the datatypes that describe the blocks (send side 1,
     * receive side 0) and the byte counts and displacements nbc takes (send, receive) */
    MPI_Datatype blocks[2];
    int *bytes[2];
    /* the application's derived datatypes this request still reads (packing again, unpacking,
     * reducing), duplicated: MPI lets the application free them before the call completes */
    MPI_Datatype held[6];
    int nheld;
    nm_req *prev, *next; /* on the list of collectives not yet done */
};

nm_req *nm_req_new(MPI_Comm comm);
void nm_req_discard(nm_req *r);                /* before nbc started it */
int nm_req_publish(nm_req *r, MPI_Request *request); /* after nbc started it */
int nm_is_running(MPI_Request h);              /* one of ours, not yet done (or hidden) */
int nm_active(void);                           /* collectives started and not yet done */
int nm_progress(void);                         /* drives them; >0 when any completed */
int nm_poll_all(void);                         /* finishes those done */
void nm_drain(void);                           /* finishes every one (at MPI_Finalize) */

/* ---- datatypes (layout.c) ---- */
/* Nonzero when count items of type occupy count * size dense bytes from the buffer's address
 * (2: and it is one of the common predefined types). */
int nm_dense(MPI_Datatype type, MPI_Aint *size);
int nm_predefined(MPI_Datatype type);
/* Packs count items into a new scratch buffer (r->scratch[slot]); *out points at it. */
int nm_pack(nm_req *r, int slot, const void *buf, int count, MPI_Datatype type, MPI_Aint bytes, void **out);
/* Makes the contiguous stand-in type and the wrapping op nbc reduces with. */
/* MPICH's verdict on a reduction's (datatype, op) pair (pairs.c): MPI_SUCCESS or its error
 * class; *direct says whether nbc reduces the pair itself (else: the stand-in). */
int nm_pair_check(MPI_Datatype type, MPI_Op op, int *direct);
int nm_standin(nm_req *r, MPI_Datatype type, MPI_Op op, MPI_Aint size, MPI_Datatype *standin, MPI_Op *wrapper);
void nm_layout_finish(nm_req *r); /* unpacks, frees scratch and stand-in */
/* type itself when predefined, else a duplicate r frees when done (nm_layout_finish) */
MPI_Datatype nm_hold(nm_req *r, MPI_Datatype type);
void nm_repack(nm_req *r);        /* packs the inputs again, from where they were packed first */

/* ---- one collective call, as the application made it and as nbc takes it (collectives.c) ---- */
typedef struct nm_call {
    enum nm_kind kind;    /* a non-blocking kind, K_IALLREDUCE .. K_IEXSCAN */
    const void *sendbuf;
    void *recvbuf;        /* (the buffer of a broadcast) */
    int count, recvcount, root; /* count: the send count of an allgather, the block of a reduce_scatter_block */
    MPI_Datatype type, recvtype;
    MPI_Op op;
    MPI_Comm comm;
    /* the vector forms' arrays, NULL where the call has none: the send side's counts and
     * displacements (alltoallv, alltoallw, scatterv) and the receive side's (alltoallv,
     * alltoallw, gatherv, allgatherv; reduce_scatter's recvcounts); alltoallw's types */
    const int *counts, *displs, *recvcounts, *rdispls;
    const MPI_Datatype *types, *recvtypes;
} nm_call;
/* Each non-blocking call's arguments as an nm_call (its _init and blocking forms take the same). */
#define NM_IALLREDUCE(s, r, n, t, o, cm) ((nm_call){.kind = K_IALLREDUCE, .sendbuf = s, .recvbuf = r, .count = n, .type = t, .op = o, .comm = cm})
#define NM_IREDUCE(s, r, n, t, o, rt, cm) ((nm_call){.kind = K_IREDUCE, .sendbuf = s, .recvbuf = r, .count = n, .type = t, .op = o, .root = rt, .comm = cm})
#define NM_IBCAST(b, n, t, rt, cm) ((nm_call){.kind = K_IBCAST, .recvbuf = b, .count = n, .type = t, .root = rt, .comm = cm})
#define NM_IBARRIER(cm) ((nm_call){.kind = K_IBARRIER, .comm = cm})
#define NM_IREDUCE_SCATTER_BLOCK(s, r, n, t, o, cm) ((nm_call){.kind = K_IREDUCE_SCATTER_BLOCK, .sendbuf = s, .recvbuf = r, .count = n, .type = t, .op = o, .comm = cm})
#define NM_IALLGATHER(s, sn, st, r, rn, rtp, cm) ((nm_call){.kind = K_IALLGATHER, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcount = rn, .recvtype = rtp, .comm = cm})
#define NM_IALLTOALL(s, sn, st, r, rn, rtp, cm) ((nm_call){.kind = K_IALLTOALL, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcount = rn, .recvtype = rtp, .comm = cm})
#define NM_IALLTOALLV(s, sn, sd, st, r, rn, rd, rtp, cm) ((nm_call){.kind = K_IALLTOALLV, .sendbuf = s, .counts = sn, .displs = sd, .type = st, .recvbuf = r, .recvcounts = rn, .rdispls = rd, .recvtype = rtp, .comm = cm})
#define NM_IALLTOALLW(s, sn, sd, st, r, rn, rd, rtp, cm) ((nm_call){.kind = K_IALLTOALLW, .sendbuf = s, .counts = sn, .displs = sd, .types = st, .recvbuf = r, .recvcounts = rn, .rdispls = rd, .recvtypes = rtp, .comm = cm})
#define NM_IGATHER(s, sn, st, r, rn, rtp, rt, cm) ((nm_call){.kind = K_IGATHER, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcount = rn, .recvtype = rtp, .root = rt, .comm = cm})
#define NM_IGATHERV(s, sn, st, r, rn, rd, rtp, rt, cm) ((nm_call){.kind = K_IGATHERV, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcounts = rn, .rdispls = rd, .recvtype = rtp, .root = rt, .comm = cm})
#define NM_ISCATTER(s, sn, st, r, rn, rtp, rt, cm) ((nm_call){.kind = K_ISCATTER, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcount = rn, .recvtype = rtp, .root = rt, .comm = cm})
#define NM_ISCATTERV(s, sn, sd, st, r, rn, rtp, rt, cm) ((nm_call){.kind = K_ISCATTERV, .sendbuf = s, .counts = sn, .displs = sd, .type = st, .recvbuf = r, .recvcount = rn, .recvtype = rtp, .root = rt, .comm = cm})
#define NM_IALLGATHERV(s, sn, st, r, rn, rd, rtp, cm) ((nm_call){.kind = K_IALLGATHERV, .sendbuf = s, .count = sn, .type = st, .recvbuf = r, .recvcounts = rn, .rdispls = rd, .recvtype = rtp, .comm = cm})
#define NM_IREDUCE_SCATTER(s, r, rn, t, o, cm) ((nm_call){.kind = K_IREDUCE_SCATTER, .sendbuf = s, .recvbuf = r, .recvcounts = rn, .type = t, .op = o, .comm = cm})
#define NM_ISCAN(s, r, n, t, o, cm) ((nm_call){.kind = K_ISCAN, .sendbuf = s, .recvbuf = r, .count = n, .type = t, .op = o, .comm = cm})
#define NM_IEXSCAN(s, r, n, t, o, cm) ((nm_call){.kind = K_IEXSCAN, .sendbuf = s, .recvbuf = r, .count = n, .type = t, .op = o, .comm = cm})

/* Every non-blocking call: to MPICH, refused, or checked, prepared and started on nbc. */
int nm_start(nm_call c, MPI_Request *request);
/* The MPI's own non-blocking call (PMPI_I...), for what nbc does not run. */
int nm_mpi_start(const nm_call *c, MPI_Request *request);
/* Why c goes to MPICH (a reason), or -1 when nbc runs it; decided only from what MPI makes
 * equal on every rank. */
int nm_route(const nm_call *c);
/* MPICH's own argument errors (nm_bad_args) for c, or MPI_SUCCESS. */
int nm_refused(const nm_call *c, const MPI_Request *request);
/* Rewrites c into what nbc takes (packed buffers, stand-in type), the layout kept in r. */
int nm_prepare(nm_req *r, nm_call *c);
int nm_nbc_start(const nm_call *c, nbc_request *q);                /* the non-blocking call */
int nm_nbc_init(const nm_call *c, MPI_Info info, nbc_request *q); /* the persistent one */

/* ---- progress in the application's own blocking calls (progress.c) ---- */
int nm_wait(MPI_Request *request, MPI_Status *status);
void nm_idle(void); /* one turn of a wait loop: drives nbc, yields when nothing moved */
/* the completion calls without persistent requests in them */
int nm_wait_any_kind(MPI_Request *request, MPI_Status *status);
int nm_test(MPI_Request *request, int *flag, MPI_Status *status);
int nm_get_status(MPI_Request request, int *flag, MPI_Status *status);
int nm_waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int nm_testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]);
int nm_waitany(int count, MPI_Request requests[], int *index, MPI_Status *status);
int nm_testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status);
int nm_waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]);
int nm_testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]);

/* ---- MPICH's blocking collectives while collectives run (blocked.c) ---- */
/* nbc's (runtime/comm.c): 1 while its duplication of the application's communicator is under
 * way (Open MPI's collectives on it then wait) */
int comm_dup_under_way(MPI_Comm comm);
/* Waits until nbc's duplication of comm is done (Open MPI; nothing on MPICH). */
void nm_settle(MPI_Comm comm);

/* ---- persistent collectives (persistent.c) ---- */
enum nm_array_call { NM_WAITALL, NM_TESTALL, NM_WAITANY, NM_TESTANY, NM_WAITSOME, NM_TESTSOME };
int nm_pers_active(void); /* persistent collectives started and not yet completed */
int nm_pers_wait(MPI_Request *request, MPI_Status *status);
int nm_pers_test(MPI_Request *request, int *flag, MPI_Status *status);
int nm_pers_get_status(MPI_Request request, int *flag, MPI_Status *status);
/* flag: Testall/Testany's; index: Waitany/Testany's index or the -some calls' outcount;
 * status: one status (the -any calls) or an array (the others) */
int nm_pers_array(enum nm_array_call call, int count, MPI_Request requests[], int *flag, int *index,
                  int indices[], MPI_Status *status);

/* MPI_ERR_ARG or MPI_ERR_BUFFER for what MPICH refuses before starting a collective (no
 * request pointer, MPI_IN_PLACE or sendbuf as the receive buffer), else MPI_SUCCESS. */
int nm_bad_args(const void *sendbuf, const void *recvbuf, int uses_recv, int count, const MPI_Request *request);
/* The communicator's error handler, then the code (what MPI says of a failed call). */
int nm_error(MPI_Comm comm, int rc);

#endif
