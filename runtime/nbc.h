/* nbc: non-blocking collectives whose algorithms are schedules, compiled to bytecode.
 *
 * Every call is shaped like its MPI counterpart and returns an MPI error code (MPI_SUCCESS on
 * success). The library must be used between MPI_Init and MPI_Finalize; nbc_init is optional
 * (the first call initializes), and so is nbc_finalize (MPI_Finalize shuts the library down
 * otherwise). Under MPI_THREAD_MULTIPLE any thread may call at any time; under a lower thread
 * level a call from a second thread, or two at once, is refused with MPI_ERR_OTHER.
 */
#ifndef NBC_H
#define NBC_H

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version: the one place it is written (the Makefile and nbc.pc read it from here). */
#define NBC_VERSION_MAJOR 0
#define NBC_VERSION_MINOR 1
#define NBC_VERSION_PATCH 0
#define NBC_VERSION "0.1.0"

/* The version of the library linked in, which may differ from the header's NBC_VERSION. */
const char *nbc_version(void);

typedef struct nbc_req *nbc_request;
#define NBC_REQUEST_NULL ((nbc_request)0)

int nbc_init(void);
/* Frees everything. With requests still active it fails with MPI_ERR_PENDING and shuts
 * nothing down (complete them and call it again). Requests the application still holds then
 * (completed but not yet tested, or inactive persistent ones) can still be tested (a completed
 * one reports its result) and freed, never started. */
int nbc_finalize(void);

/* Like MPI_Iallreduce. sendbuf may be MPI_IN_PLACE. The buffers must stay valid and the
 * receive buffer untouched until the request completes. */
int nbc_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, nbc_request *request);

/* Like MPI_Ireduce: the result lands in recvbuf at root (recvbuf is ignored elsewhere);
 * MPI_IN_PLACE as sendbuf at the root only. */
int nbc_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, nbc_request *request);

/* Like MPI_Ibcast. */
int nbc_ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               nbc_request *request);

/* Like MPI_Ibarrier. */
int nbc_ibarrier(MPI_Comm comm, nbc_request *request);

/* Like MPI_Ireduce_scatter_block: rank r gets block r (recvcount elements) of the reduction
 * of every rank's sendbuf (p·recvcount elements). With MPI_IN_PLACE the input is recvbuf, which
 * must then hold p·recvcount elements; the result is its first block. */
int nbc_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              nbc_request *request);

/* Like MPI_Iallgather, with one restriction: sendcount and sendtype must equal recvcount and
 * recvtype (unless sendbuf is MPI_IN_PLACE, which takes rank r's block from recvbuf). */
int nbc_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request);

/* Like MPI_Ialltoall: block r of recvbuf (recvcount elements of recvtype) receives block
 * `rank` of rank r's sendbuf (sendcount elements of sendtype). Send and receive types may
 * differ as long as their sizes match (sendcount × size of sendtype == recvcount × size of
 * recvtype); both must be contiguous. With MPI_IN_PLACE as sendbuf, recvbuf is the input
 * (p·recvcount elements) and is replaced by the result. */
int nbc_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request);

/* Like MPI_Igather: at root, block r of recvbuf (recvcount elements of recvtype) receives
 * rank r's sendbuf (sendcount elements of sendtype, of the same size in bytes); recvbuf,
 * recvcount and recvtype are ignored elsewhere. MPI_IN_PLACE as sendbuf at the root only: its
 * block is already in place (sendcount and sendtype are then ignored). */
int nbc_igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request);

/* Like MPI_Iscatter: rank r's recvbuf (recvcount elements of recvtype) receives block r of
 * the root's sendbuf (p·sendcount elements of sendtype, blocks of the same size in bytes);
 * sendbuf, sendcount and sendtype are ignored elsewhere. MPI_IN_PLACE as recvbuf at the root
 * only: the root's block stays in sendbuf (recvcount and recvtype are then ignored). */
int nbc_iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request);

/* Like MPI_Iscan: rank r's recvbuf holds sendbuf_0 op sendbuf_1 op .. op sendbuf_r, always in
 * rank order (non-commutative ops work). sendbuf may be MPI_IN_PLACE (the input is recvbuf). */
int nbc_iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              nbc_request *request);

/* Like MPI_Iexscan: rank r > 0's recvbuf holds sendbuf_0 op .. op sendbuf_(r-1), in rank order;
 * rank 0's recvbuf is left untouched. sendbuf may be MPI_IN_PLACE (the input is recvbuf). */
int nbc_iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                nbc_request *request);
/* ---- vector collectives ----
 * Like MPI's, with MPI's argument order, in-place rules and significant arguments: counts and
 * displacements per rank, zero counts anywhere. Datatypes must be contiguous (lower bound 0,
 * extent equal to size; nbc_fail says otherwise with MPI_ERR_TYPE); the data-movement ones
 * run on bytes, so the send and receive types may differ where their sizes agree (a rank's
 * own block must be as many bytes on both sides, else MPI_ERR_TRUNCATE). Displacements must
 * be non-negative. The arrays are read during the call only (an _init form copies them). */

/* Like MPI_Ialltoallv: rank r's block for rank s, sendcounts[s] elements of sendtype at
 * sdispls[s], lands at rdispls[r] of rank s's recvbuf (recvcounts[r] elements of recvtype).
 * MPI_IN_PLACE as sendbuf: the data sent is recvbuf's, by recvcounts and rdispls. */
int nbc_ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                   MPI_Comm comm, nbc_request *request);

/* Like MPI_Ialltoallw: as nbc_ialltoallv with a datatype per rank (each contiguous) and the
 * displacements in bytes. It runs as alltoallv on bytes. */
int nbc_ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, nbc_request *request);

/* Like MPI_Igatherv: rank r's sendbuf (sendcount elements) lands at displs[r] of the root's
 * recvbuf (recvcounts[r] elements of recvtype); recvbuf, recvcounts, displs and recvtype
 * matter at the root only. MPI_IN_PLACE as sendbuf at the root: its block is in place. */
int nbc_igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request);

/* Like MPI_Iscatterv: the root's sendcounts[r] elements at displs[r] of sendbuf land in rank
 * r's recvbuf (recvcount elements); sendbuf, sendcounts, displs and sendtype matter at the
 * root only. MPI_IN_PLACE as recvbuf at the root: its block stays in sendbuf. */
int nbc_iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, nbc_request *request);

/* Like MPI_Iallgatherv: every rank's sendbuf (sendcount elements) lands at displs[r] of every
 * recvbuf (recvcounts[r] elements). MPI_IN_PLACE as sendbuf: each rank's block is in place. */
int nbc_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, nbc_request *request);

/* Like MPI_Ireduce_scatter: the reduction of every rank's sendbuf (the sum of recvcounts
 * elements) is cut into blocks of recvcounts[r] elements, and rank r gets block r. Any op,
 * commutative or not (non-commutative ops are reduced in rank order). MPI_IN_PLACE as
 * sendbuf: the input is recvbuf, the result its first recvcounts[rank] elements. */
int nbc_ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, nbc_request *request);

/* Gloo's multi-buffer allreduce: reduces the nbufs local buffers (1 .. 16, count elements
 * each) of every process and leaves the result in all of them. The local reduction and the
 * local broadcast are part of the schedule, pipelined with the communication where the
 * schedule allows (allreduce_multi_gloo_ring_chunked folds each chunk in just before it first
 * travels and copies it out as soon as it is final). */
int nbc_iallreduce_multi(void *bufs[], int nbufs, int count, MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm, nbc_request *request);

/* ---- persistent collectives (MPI-4's MPI_Allreduce_init .. MPI_Start shape) ----
 *
 * An _init call is collective and must be made in the same order on every rank, like MPI's; it
 * chooses and compiles the schedule once. The request starts inactive: nbc_start (or
 * nbc_startall) runs it, nbc_test / nbc_wait / nbc_waitall complete it and leave it inactive
 * (not NBC_REQUEST_NULL) for the next start; nbc_request_free releases it (an active request is
 * released once it completes). Testing or waiting on an inactive request completes at once.
 * Buffers must stay where they are for the request's whole life. A start allocates nothing.
 *
 * Info keys (info may be MPI_INFO_NULL):
 *   nbc_start_order = same | any   "any": the request may be started in a different order on
 *                    every rank, relative to other collectives on the communicator; each start
 *                    still reduces exactly the matching data. Default "same" (MPI's rule).
 *   nbc_priority    = integer      higher runs first; lower-priority requests stop issuing new
 *                    rounds while a higher-priority one is moving (default 0).
 *   nbc_name        = text         names the request in stall reports and traces. */
int nbc_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                   nbc_request *request);
int nbc_barrier_init(MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_allreduce_multi_init(void *bufs[], int nbufs, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                             MPI_Info info, nbc_request *request);
int nbc_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_scan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, nbc_request *request);
int nbc_exscan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, nbc_request *request);
/* The vector collectives' persistent forms copy the count, displacement and type arrays: the
 * caller may change or free its arrays once the _init call returns. */
int nbc_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                       void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_alltoallw_init(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                       void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                       MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                     const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     nbc_request *request);
int nbc_scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      nbc_request *request);
int nbc_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Info info, nbc_request *request);
int nbc_reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Info info, nbc_request *request);
int nbc_start(nbc_request *request);
int nbc_startall(int count, nbc_request requests[]);
int nbc_request_free(nbc_request *request);
/* Changes a persistent request's priority; it takes effect at its next start. */
int nbc_set_priority(nbc_request request, int priority);

/* Memory that the ranks of one node can share (like MPI_Alloc_mem; *(void **)baseptr receives
 * the address). An allreduce whose send and receive buffers come from here on every rank of
 * a communicator on one node reduces straight out of the peers' memory instead of sending
 * messages (docs/shared-memory.md); any other buffer works as before. When sharing is off
 * (NBC_SHM=0, ranks on several nodes) it is plain memory. Free it with nbc_free_mem. */
int nbc_alloc_mem(MPI_Aint size, void *baseptr);
int nbc_free_mem(void *base);

/* A thread that drives every request, so the application need not call nbc_test (on: 1, off:
 * 0). Needs MPI_THREAD_MULTIPLE. NBC_PROGRESS_THREAD=1 starts it at nbc_init. */
int nbc_progress_thread(int on);

/* Advance every active request as far as it can go without blocking. Returns the number of
 * requests that completed in this call (>= 0), or minus an MPI error code (< 0) when the call
 * is refused (a second thread without MPI_THREAD_MULTIPLE); a failed collective reports its
 * error when it is tested or waited for. */
int nbc_progress(void);

/* Like MPI_Test / MPI_Wait / MPI_Waitall: a completed request is released and set to
 * NBC_REQUEST_NULL; testing or waiting on NBC_REQUEST_NULL completes at once. The return
 * value is the request's own error code (a failed collective reports its MPI error here). */
int nbc_test(nbc_request *request, int *flag);
int nbc_wait(nbc_request *request);
int nbc_waitall(int count, nbc_request requests[]);

/* Schedules. Built-in schedules are compiled into the library; more can be loaded from files
 * (nbc_load_schedules) or from the directories in NBC_SCHEDULE_PATH (colon-separated), read at
 * nbc_init. A loaded schedule with the name of an existing one replaces it. */
int nbc_load_schedules(const char *path);

/* Force the schedule for a collective ("allreduce", "reduce", "bcast", "barrier",
 * "reduce_scatter", "allgather", "alltoall", "gather", "scatter", "scan", "exscan") by name,
 * optionally with parameters: "segmented_ring:segsize=65536". A name may leave out its
 * collective's prefix ("ring" for "allreduce_ring"). NULL or "" restores automatic selection.
 * The environment variables NBC_<COLLECTIVE> (NBC_ALLREDUCE, NBC_ALLTOALL, ..,
 * NBC_ALLREDUCE_MULTI) do the same at nbc_init. A forced schedule whose preconditions fail makes the collective return
 * MPI_ERR_ARG, with the failed condition in nbc_error_message. */
int nbc_set_schedule(const char *collective, const char *name);

/* Selection. By default a table of rules decides (Open MPI's decision tree for allreduce;
 * docs/selection.md). A tuning file in the same format, as `nbcc tune` writes it, extends the
 * table (its rules are tried first; a line "replace" makes it replace the built-in rules,
 * fallbacks excepted); NBC_TUNING names one to load at nbc_init. Errors leave the table as it
 * was and are reported as "file:line: message" by nbc_error_message. */
int nbc_load_tuning(const char *path);

/* "rules" (the default), or "model" to choose the schedule with the least predicted time under
 * an α-β-γ model: "model:alpha=2e-6,beta=1e-10,gamma=2e-10" (seconds, seconds per byte). Also
 * NBC_SELECT at nbc_init; NBC_MODEL_FILE names a file holding such a model (as `nbcc calibrate`
 * writes it). A forced schedule (nbc_set_schedule) overrides both. */
int nbc_set_selection(const char *mode);

/* The message of the last error the library reported to this thread (empty when none). */
const char *nbc_error_message(void);

/* Why this request's last run failed, in the same words nbc_error_message used when its
 * failure was reported (empty while it runs, and when it succeeded). With several requests
 * failing, each keeps its own message, which nbc_error_message cannot. The text stays valid
 * until the request is started again or released: a one-shot request is released when
 * nbc_test or nbc_wait reports its completion, so ask before (after nbc_progress); a
 * persistent one keeps it until its next start. */
const char *nbc_request_error(nbc_request request);

typedef struct {
    uint64_t hits, misses, evictions;
    uint64_t entries, bytes;         /* what the cache holds now */
    uint64_t max_entries, max_bytes; /* its bounds (NBC_CACHE_ENTRIES, NBC_CACHE_BYTES) */
} nbc_cache_stats;

int nbc_get_cache_stats(nbc_cache_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
