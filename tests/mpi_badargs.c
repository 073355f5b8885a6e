/* Bad arguments to the nbc API give MPI error codes and leave the caller's buffers untouched;
 * null requests and empty reductions are fine.
 *
 *     mpiexec -n 2 ./mpi_badargs
 *
 * Every rank runs the same calls in the same order and records its own failures; at the end
 * they are sent once to rank 0, which prints "ok <case>" or "FAIL <case>: <why>" for every case
 * and exits 1 if any case failed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nbc.h"

static int P, me;

/* ---- cases: recorded locally, reported once at the end ---------------------------------- */

enum { MAXCASES = 128 };
typedef struct {
    char name[96];
    int failed;
    char why[256];
} test_case;
static test_case cases[MAXCASES];
static int ncases;

static int new_case(const char *name)
{
    if (ncases == MAXCASES) abort();
    snprintf(cases[ncases].name, sizeof cases[ncases].name, "badargs %s", name);
    return ncases++;
}

static void fail(int c, const char *fmt, ...)
{
    if (cases[c].failed) return; /* keep the first reason */
    cases[c].failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cases[c].why, sizeof cases[c].why, fmt, ap);
    va_end(ap);
}

/* Ranks > 0 send their failure flags and reasons to rank 0, which prints every case with the
 * reason from the lowest failing rank. Returns the exit status. */
static int report(void)
{
    enum { TAG = 4243 };
    if (me != 0) {
        MPI_Send(cases, (int)sizeof cases, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
        return 0;
    }
    static test_case theirs[MAXCASES];
    int first[MAXCASES], nfail[MAXCASES];
    for (int i = 0; i < ncases; i++) nfail[i] = cases[i].failed, first[i] = 0;
    for (int r = 1; r < P; r++) {
        MPI_Recv(theirs, (int)sizeof theirs, MPI_BYTE, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < ncases; i++) {
            if (!theirs[i].failed) continue;
            if (nfail[i]++ == 0) {
                first[i] = r;
                memcpy(cases[i].why, theirs[i].why, sizeof cases[i].why);
            }
        }
    }
    int status = 0;
    for (int i = 0; i < ncases; i++) {
        if (!nfail[i]) {
            printf("ok %s\n", cases[i].name);
            continue;
        }
        status = 1;
        printf("FAIL %s: rank %d: %s", cases[i].name, first[i], cases[i].why);
        if (nfail[i] > 1) printf(" (and %d more rank%s)", nfail[i] - 1, nfail[i] > 2 ? "s" : "");
        printf("\n");
    }
    fflush(stdout);
    return status;
}

/* MPI error class of rc, or rc itself when it is not an MPI error code. */
static int err_class(int rc)
{
    int cls = rc;
    if (rc > 0 && MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return cls;
}

static const char *err_name(int rc)
{
    static char buf[32];
    switch (err_class(rc)) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    default: snprintf(buf, sizeof buf, "error %d", rc); return buf;
    }
}

/* ---- bad nbc_iallreduce calls ------------------------------------------------------------ */

enum { N = 8, SEND_FILL = 0x5A, RECV_FILL = 0xA5 };
static int sendbuf[N], recvbuf[N];

static const struct bad_call {
    const char *name;
    int use_send, use_recv; /* 1: pass sendbuf / recvbuf, 0: pass NULL */
    int in_place;           /* 1: pass MPI_IN_PLACE as sendbuf */
    int count;
    int dtype, op, comm, null_request; /* 1: pass the null handle */
    int want;                          /* expected error class */
} bad_calls[] = {
    {"negative count -> MPI_ERR_COUNT", 1, 1, 0, -1, 0, 0, 0, 0, MPI_ERR_COUNT},
    {"negative count in place -> MPI_ERR_COUNT", 0, 1, 1, -3, 0, 0, 0, 0, MPI_ERR_COUNT},
    {"NULL sendbuf -> MPI_ERR_BUFFER", 0, 1, 0, N, 0, 0, 0, 0, MPI_ERR_BUFFER},
    {"NULL recvbuf -> MPI_ERR_BUFFER", 1, 0, 0, N, 0, 0, 0, 0, MPI_ERR_BUFFER},
    {"NULL recvbuf in place -> MPI_ERR_BUFFER", 0, 0, 1, N, 0, 0, 0, 0, MPI_ERR_BUFFER},
    {"MPI_DATATYPE_NULL -> MPI_ERR_TYPE", 1, 1, 0, N, 1, 0, 0, 0, MPI_ERR_TYPE},
    {"MPI_OP_NULL -> MPI_ERR_OP", 1, 1, 0, N, 0, 1, 0, 0, MPI_ERR_OP},
    {"MPI_COMM_NULL -> MPI_ERR_COMM", 1, 1, 0, N, 0, 0, 1, 0, MPI_ERR_COMM},
    {"NULL request -> MPI_ERR_ARG", 1, 1, 0, N, 0, 0, 0, 1, MPI_ERR_ARG},
};

static int untouched(const int *buf, int fill)
{
    const unsigned char *b = (const unsigned char *)buf;
    for (size_t i = 0; i < N * sizeof *buf; i++)
        if (b[i] != fill) return 0;
    return 1;
}

static void bad_call(const struct bad_call *t)
{
    int c = new_case(t->name);
    memset(sendbuf, SEND_FILL, sizeof sendbuf);
    memset(recvbuf, RECV_FILL, sizeof recvbuf);
    const void *s = t->in_place ? MPI_IN_PLACE : t->use_send ? sendbuf : NULL;
    nbc_request req = NBC_REQUEST_NULL;
    int rc = nbc_iallreduce(s, t->use_recv ? recvbuf : NULL, t->count,
                            t->dtype ? MPI_DATATYPE_NULL : MPI_INT,
                            t->op ? MPI_OP_NULL : MPI_SUM,
                            t->comm ? MPI_COMM_NULL : MPI_COMM_WORLD,
                            t->null_request ? NULL : &req);
    if (rc == MPI_SUCCESS && req != NBC_REQUEST_NULL) nbc_wait(&req); /* accepted: finish it */
    if (err_class(rc) != t->want)
        fail(c, "got %s (%s)", err_name(rc), nbc_error_message());
    else if (!untouched(sendbuf, SEND_FILL))
        fail(c, "send buffer modified");
    else if (!untouched(recvbuf, RECV_FILL))
        fail(c, "receive buffer modified");
}

/* ---- bad calls of the other collectives ------------------------------------------------- */

/* Each case makes one call with the buffers filled; it must fail with `want` and leave them. */
static void expect(const char *name, int want, int (*call)(nbc_request *))
{
    int c = new_case(name);
    memset(sendbuf, SEND_FILL, sizeof sendbuf);
    memset(recvbuf, RECV_FILL, sizeof recvbuf);
    nbc_request req = NBC_REQUEST_NULL;
    int rc = call(&req);
    if (rc == MPI_SUCCESS && req != NBC_REQUEST_NULL) nbc_wait(&req);
    if (err_class(rc) != want) fail(c, "got %s (%s)", err_name(rc), nbc_error_message());
    else if (!untouched(sendbuf, SEND_FILL)) fail(c, "send buffer modified");
    else if (!untouched(recvbuf, RECV_FILL)) fail(c, "receive buffer modified");
}

static int reduce_root_too_big(nbc_request *r) { return nbc_ireduce(sendbuf, recvbuf, N, MPI_INT, MPI_SUM, P, MPI_COMM_WORLD, r); }
static int reduce_root_negative(nbc_request *r) { return nbc_ireduce(sendbuf, recvbuf, N, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD, r); }
static int reduce_in_place_off_root(nbc_request *r)
{
    return nbc_ireduce(MPI_IN_PLACE, recvbuf, N, MPI_INT, MPI_SUM, me == 0 ? 1 % P : 0, MPI_COMM_WORLD, r);
}
static int bcast_root(nbc_request *r) { return nbc_ibcast(recvbuf, N, MPI_INT, P + 3, MPI_COMM_WORLD, r); }
static int bcast_null(nbc_request *r) { return nbc_ibcast(NULL, N, MPI_INT, 0, MPI_COMM_WORLD, r); }
static int barrier_comm(nbc_request *r) { return nbc_ibarrier(MPI_COMM_NULL, r); }
static int barrier_request(nbc_request *r) { (void)r; return nbc_ibarrier(MPI_COMM_WORLD, NULL); }
static int rs_count(nbc_request *r) { return nbc_ireduce_scatter_block(sendbuf, recvbuf, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int rs_op_on_double(nbc_request *r)
{
    return nbc_ireduce_scatter_block(sendbuf, recvbuf, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD, r);
}
static int ag_counts(nbc_request *r) { return nbc_iallgather(sendbuf, 1, MPI_INT, recvbuf, 2, MPI_INT, MPI_COMM_WORLD, r); }
static int ag_types(nbc_request *r) { return nbc_iallgather(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_FLOAT, MPI_COMM_WORLD, r); }
static int multi_nbufs(nbc_request *r)
{
    void *bufs[1] = {recvbuf};
    return nbc_iallreduce_multi(bufs, 0, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
static int multi_null_buffer(nbc_request *r)
{
    void *bufs[2] = {recvbuf, NULL};
    return nbc_iallreduce_multi(bufs, 2, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
/* sendbuf overlapping recvbuf without MPI_IN_PLACE: MPICH refuses an aliased one with
 * MPI_ERR_BUFFER; nbc refuses any overlap (its schedules would read overwritten inputs) */
static int alias_allreduce(nbc_request *r) { return nbc_iallreduce(recvbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int alias_allreduce_part(nbc_request *r)
{
    return nbc_iallreduce(recvbuf + 1, recvbuf, N - 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
static int big[40000]; /* 160 KiB: above the stage, where shared memory reads the inputs where they are */
static int alias_allreduce_big(nbc_request *r) { return nbc_iallreduce(big, big, 40000, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int alias_reduce_root(nbc_request *r) { return nbc_ireduce(recvbuf, recvbuf, N, MPI_INT, MPI_SUM, 0, MPI_COMM_SELF, r); }
static int alias_rs(nbc_request *r) { return nbc_ireduce_scatter_block(recvbuf, recvbuf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int alias_ag(nbc_request *r) { return nbc_iallgather(recvbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, MPI_COMM_WORLD, r); }
static int alias_init(nbc_request *r)
{
    return nbc_allreduce_init(recvbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}
static int alias_init_any(nbc_request *r)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nbc_start_order", "any");
    int rc = nbc_allreduce_init(big, big, 40000, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, r);
    MPI_Info_free(&info);
    return rc;
}
static int alias_multi(nbc_request *r)
{
    void *bufs[3] = {sendbuf, recvbuf, recvbuf + 2};
    return nbc_iallreduce_multi(bufs, 3, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
/* MPI_IN_PLACE as a receive buffer, and aliased buffers: MPICH's MPI_ERR_BUFFER, not a crash */
static int ar_recv_in_place(nbc_request *r) { return nbc_iallreduce(sendbuf, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int ar_both_in_place(nbc_request *r)
{
    return nbc_iallreduce(MPI_IN_PLACE, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
static int reduce_recv_in_place(nbc_request *r)
{
    return nbc_ireduce(sendbuf, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, me, MPI_COMM_WORLD, r); /* every rank its own root: refused before it starts */
}
static int rs_recv_in_place(nbc_request *r)
{
    return nbc_ireduce_scatter_block(sendbuf, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r);
}
static int ag_recv_in_place(nbc_request *r) { return nbc_iallgather(sendbuf, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, MPI_COMM_WORLD, r); }
static int bcast_in_place(nbc_request *r) { return nbc_ibcast(MPI_IN_PLACE, N, MPI_INT, 0, MPI_COMM_WORLD, r); }
static int force_bad_param(nbc_request *r) { (void)r; return nbc_set_schedule("allreduce", "segmented_ring:segsz=8"); }
static int force_bad_syntax(nbc_request *r) { (void)r; return nbc_set_schedule("allreduce", "segmented_ring:segsize"); }
static int force_wrong_collective(nbc_request *r) { (void)r; return nbc_set_schedule("bcast", "allreduce_ring"); }
static int force_unknown_collective(nbc_request *r) { (void)r; return nbc_set_schedule("neighbor_alltoall", "ring"); }

/* alltoall, gather, scatter (on bytes), scan, exscan; `other` is a rank other than this one
 * (this one at p = 1), so that a rooted call is refused alike everywhere */
#define OTHER (me == 0 ? 1 % P : 0)
static int a2a_count(nbc_request *r) { return nbc_ialltoall(sendbuf, -1, MPI_INT, recvbuf, 1, MPI_INT, MPI_COMM_WORLD, r); }
static int a2a_type(nbc_request *r) { return nbc_ialltoall(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_DATATYPE_NULL, MPI_COMM_WORLD, r); }
static int a2a_sizes(nbc_request *r) { return nbc_ialltoall(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_DOUBLE, MPI_COMM_WORLD, r); }
static int a2a_noncontiguous(nbc_request *r)
{
    MPI_Datatype v;
    MPI_Type_vector(2, 1, 2, MPI_INT, &v);
    MPI_Type_commit(&v);
    int rc = nbc_ialltoall(sendbuf, 1, v, recvbuf, 1, v, MPI_COMM_WORLD, r);
    MPI_Type_free(&v);
    return rc;
}
static int a2a_null_recv(nbc_request *r) { return nbc_ialltoall(sendbuf, 1, MPI_INT, NULL, 1, MPI_INT, MPI_COMM_WORLD, r); }
static int a2a_recv_in_place(nbc_request *r) { return nbc_ialltoall(sendbuf, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, MPI_COMM_WORLD, r); }
static int a2a_alias(nbc_request *r) { return nbc_ialltoall(recvbuf, 2, MPI_INT, recvbuf + 1, 2, MPI_INT, MPI_COMM_WORLD, r); }
static int a2a_comm(nbc_request *r) { return nbc_ialltoall(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, MPI_COMM_NULL, r); }
static int a2a_init_alias(nbc_request *r)
{
    return nbc_alltoall_init(recvbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}
static int gather_root(nbc_request *r) { return nbc_igather(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, P, MPI_COMM_WORLD, r); }
static int gather_root_negative(nbc_request *r) { return nbc_igather(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, -1, MPI_COMM_WORLD, r); }
static int gather_in_place_off_root(nbc_request *r)
{
    return nbc_igather(MPI_IN_PLACE, 1, MPI_INT, recvbuf, 1, MPI_INT, OTHER, MPI_COMM_WORLD, r);
}
static int gather_recvcount(nbc_request *r) { return nbc_igather(sendbuf, 1, MPI_INT, recvbuf, -1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int gather_recvtype(nbc_request *r) { return nbc_igather(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_DATATYPE_NULL, me, MPI_COMM_WORLD, r); }
static int gather_null_send(nbc_request *r) { return nbc_igather(NULL, 1, MPI_INT, recvbuf, 1, MPI_INT, OTHER, MPI_COMM_WORLD, r); }
static int gather_alias(nbc_request *r) { return nbc_igather(recvbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int gather_init_root(nbc_request *r)
{
    return nbc_gather_init(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, P + 2, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}
static int scatter_root(nbc_request *r) { return nbc_iscatter(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, P + 1, MPI_COMM_WORLD, r); }
static int scatter_recv_in_place_off_root(nbc_request *r)
{
    return nbc_iscatter(sendbuf, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, OTHER, MPI_COMM_WORLD, r);
}
static int scatter_send_in_place(nbc_request *r) { return nbc_iscatter(MPI_IN_PLACE, 1, MPI_INT, recvbuf, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int scatter_recvcount(nbc_request *r) { return nbc_iscatter(sendbuf, 1, MPI_INT, recvbuf, -4, MPI_INT, OTHER, MPI_COMM_WORLD, r); }
static int scatter_null_recv(nbc_request *r) { return nbc_iscatter(sendbuf, 1, MPI_INT, NULL, 1, MPI_INT, OTHER, MPI_COMM_WORLD, r); }
static int scatter_sizes(nbc_request *r) { return nbc_iscatter(sendbuf, 2, MPI_INT, recvbuf, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int scatter_alias(nbc_request *r) { return nbc_iscatter(recvbuf, 1, MPI_INT, recvbuf + P - 1, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int scan_op(nbc_request *r) { return nbc_iscan(sendbuf, recvbuf, N, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, r); }
static int scan_op_on_double(nbc_request *r) { return nbc_iscan(sendbuf, recvbuf, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD, r); }
static int scan_count(nbc_request *r) { return nbc_iscan(sendbuf, recvbuf, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int scan_alias(nbc_request *r) { return nbc_iscan(recvbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int scan_recv_in_place(nbc_request *r) { return nbc_iscan(sendbuf, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int exscan_type(nbc_request *r) { return nbc_iexscan(sendbuf, recvbuf, N, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, r); }
static int exscan_null_recv(nbc_request *r) { return nbc_iexscan(sendbuf, NULL, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int exscan_comm(nbc_request *r) { return nbc_iexscan(sendbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_NULL, r); }
static int exscan_init_alias(nbc_request *r)
{
    return nbc_exscan_init(recvbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}

static void fixed_count_collectives(void)
{
    expect("nbc_ialltoall negative sendcount -> MPI_ERR_COUNT", MPI_ERR_COUNT, a2a_count);
    expect("nbc_ialltoall MPI_DATATYPE_NULL recvtype -> MPI_ERR_TYPE", MPI_ERR_TYPE, a2a_type);
    expect("nbc_ialltoall send and receive sizes differ -> MPI_ERR_COUNT", MPI_ERR_COUNT, a2a_sizes);
    expect("nbc_ialltoall non-contiguous type -> MPI_ERR_TYPE", MPI_ERR_TYPE, a2a_noncontiguous);
    expect("nbc_ialltoall NULL recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2a_null_recv);
    expect("nbc_ialltoall recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2a_recv_in_place);
    expect("nbc_ialltoall sendbuf overlapping recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2a_alias);
    expect("nbc_ialltoall MPI_COMM_NULL -> MPI_ERR_COMM", MPI_ERR_COMM, a2a_comm);
    expect("nbc_alltoall_init sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2a_init_alias);
    expect("nbc_igather root p -> MPI_ERR_ROOT", MPI_ERR_ROOT, gather_root);
    expect("nbc_igather root -1 -> MPI_ERR_ROOT", MPI_ERR_ROOT, gather_root_negative);
    if (P > 1) expect("nbc_igather MPI_IN_PLACE off the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, gather_in_place_off_root);
    expect("nbc_igather negative recvcount at the root -> MPI_ERR_COUNT", MPI_ERR_COUNT, gather_recvcount);
    expect("nbc_igather MPI_DATATYPE_NULL recvtype at the root -> MPI_ERR_TYPE", MPI_ERR_TYPE, gather_recvtype);
    if (P > 1) expect("nbc_igather NULL sendbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, gather_null_send);
    expect("nbc_igather sendbuf == recvbuf at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, gather_alias);
    expect("nbc_gather_init root p+2 -> MPI_ERR_ROOT", MPI_ERR_ROOT, gather_init_root);
    expect("nbc_iscatter root p+1 -> MPI_ERR_ROOT", MPI_ERR_ROOT, scatter_root);
    if (P > 1) expect("nbc_iscatter recvbuf MPI_IN_PLACE off the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scatter_recv_in_place_off_root);
    expect("nbc_iscatter sendbuf MPI_IN_PLACE at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scatter_send_in_place);
    if (P > 1) expect("nbc_iscatter negative recvcount -> MPI_ERR_COUNT", MPI_ERR_COUNT, scatter_recvcount);
    if (P > 1) expect("nbc_iscatter NULL recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scatter_null_recv);
    expect("nbc_iscatter send and receive sizes differ at the root -> MPI_ERR_COUNT", MPI_ERR_COUNT, scatter_sizes);
    expect("nbc_iscatter recvbuf inside sendbuf at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scatter_alias);
    expect("nbc_iscan MPI_OP_NULL -> MPI_ERR_OP", MPI_ERR_OP, scan_op);
    expect("nbc_iscan MPI_BAND on doubles -> MPI_ERR_OP", MPI_ERR_OP, scan_op_on_double);
    expect("nbc_iscan negative count -> MPI_ERR_COUNT", MPI_ERR_COUNT, scan_count);
    expect("nbc_iscan sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scan_alias);
    expect("nbc_iscan recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, scan_recv_in_place);
    expect("nbc_iexscan MPI_DATATYPE_NULL -> MPI_ERR_TYPE", MPI_ERR_TYPE, exscan_type);
    expect("nbc_iexscan NULL recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, exscan_null_recv);
    expect("nbc_iexscan MPI_COMM_NULL -> MPI_ERR_COMM", MPI_ERR_COMM, exscan_comm);
    expect("nbc_exscan_init sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, exscan_init_alias);
}

/* The vector collectives: one int to and from each rank (P <= N). A root-only check is made
 * to fail everywhere by naming each rank its own root. */
static int ones[64], idx[64], negs[64], bad_displs[64];
static void vector_setup(void)
{
    for (int i = 0; i < 64; i++) ones[i] = 1, idx[i] = i, negs[i] = i == 0 ? -1 : 1, bad_displs[i] = i == 0 ? -4 : i;
}
static int a2av_null_counts(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, NULL, idx, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_negative(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, negs, idx, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_type(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, ones, idx, MPI_INT, recvbuf, ones, idx, MPI_DATATYPE_NULL, MPI_COMM_WORLD, r);
}
static int a2av_null_recvbuf(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, ones, idx, MPI_INT, NULL, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_alias(nbc_request *r)
{
    return nbc_ialltoallv(recvbuf, ones, idx, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_recv_in_place(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, ones, idx, MPI_INT, MPI_IN_PLACE, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_comm(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, ones, idx, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_NULL, r);
}
static int a2av_displ(nbc_request *r)
{
    return nbc_ialltoallv(sendbuf, ones, bad_displs, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r);
}
static int a2av_init_null_array(nbc_request *r)
{
    return nbc_alltoallv_init(sendbuf, ones, idx, MPI_INT, recvbuf, ones, NULL, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}
static int a2aw_null_types(nbc_request *r)
{
    return nbc_ialltoallw(sendbuf, ones, idx, NULL, recvbuf, ones, idx, NULL, MPI_COMM_WORLD, r);
}
static int a2aw_strided(nbc_request *r)
{
    MPI_Datatype one, strided, types[64];
    MPI_Type_vector(1, 1, 2, MPI_INT, &one);
    MPI_Type_create_resized(one, 0, 2 * sizeof(int), &strided); /* an int with a hole after it */
    MPI_Type_free(&one);
    MPI_Type_commit(&strided);
    int bytes[64];
    for (int i = 0; i < 64; i++) types[i] = strided, bytes[i] = (int)(i * 2 * sizeof(int));
    int rc = nbc_ialltoallw(sendbuf, ones, bytes, types, recvbuf, ones, bytes, types, MPI_COMM_WORLD, r);
    MPI_Type_free(&strided);
    return rc;
}
static int gv_root(nbc_request *r) { return nbc_igatherv(sendbuf, 1, MPI_INT, recvbuf, ones, idx, MPI_INT, P, MPI_COMM_WORLD, r); }
static int gv_null_counts(nbc_request *r) { return nbc_igatherv(sendbuf, 1, MPI_INT, recvbuf, NULL, idx, MPI_INT, me, MPI_COMM_WORLD, r); }
static int gv_negative(nbc_request *r) { return nbc_igatherv(sendbuf, -1, MPI_INT, recvbuf, ones, idx, MPI_INT, 0, MPI_COMM_WORLD, r); }
static int gv_in_place_off_root(nbc_request *r)
{
    return nbc_igatherv(MPI_IN_PLACE, 1, MPI_INT, recvbuf, ones, idx, MPI_INT, (me + 1) % P, MPI_COMM_WORLD, r);
}
static int gv_own_block(nbc_request *r) { return nbc_igatherv(sendbuf, 2, MPI_INT, recvbuf, ones, idx, MPI_INT, me, MPI_COMM_WORLD, r); }
static int sv_null_counts(nbc_request *r) { return nbc_iscatterv(sendbuf, NULL, idx, MPI_INT, recvbuf, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int sv_send_in_place(nbc_request *r) { return nbc_iscatterv(MPI_IN_PLACE, ones, idx, MPI_INT, recvbuf, 1, MPI_INT, me, MPI_COMM_WORLD, r); }
static int sv_in_place_off_root(nbc_request *r)
{
    return nbc_iscatterv(sendbuf, ones, idx, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, (me + 1) % P, MPI_COMM_WORLD, r);
}
static int sv_type(nbc_request *r) { return nbc_iscatterv(sendbuf, ones, idx, MPI_INT, recvbuf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, r); }
static int agv_null_displs(nbc_request *r) { return nbc_iallgatherv(sendbuf, 1, MPI_INT, recvbuf, ones, NULL, MPI_INT, MPI_COMM_WORLD, r); }
static int agv_counts(nbc_request *r) { return nbc_iallgatherv(sendbuf, 2, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r); }
static int agv_overlap(nbc_request *r)
{
    static const int at_zero[64]; /* every block at displacement 0 */
    return nbc_iallgatherv(sendbuf, 1, MPI_INT, recvbuf, ones, at_zero, MPI_INT, MPI_COMM_WORLD, r);
}
static int agv_alias(nbc_request *r) { return nbc_iallgatherv(recvbuf, 1, MPI_INT, recvbuf, ones, idx, MPI_INT, MPI_COMM_WORLD, r); }
static int rsv_null_counts(nbc_request *r) { return nbc_ireduce_scatter(sendbuf, recvbuf, NULL, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int rsv_negative(nbc_request *r) { return nbc_ireduce_scatter(sendbuf, recvbuf, negs, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int rsv_op(nbc_request *r) { return nbc_ireduce_scatter(sendbuf, recvbuf, ones, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, r); }
static int rsv_alias(nbc_request *r) { return nbc_ireduce_scatter(recvbuf, recvbuf, ones, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r); }
static int rsv_init_type(nbc_request *r)
{
    return nbc_reduce_scatter_init(sendbuf, recvbuf, ones, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, r);
}

static void vector_collectives(void)
{
    vector_setup();
    if (P > N) return; /* the buffers hold N ints */
    expect("nbc_ialltoallv NULL sendcounts -> MPI_ERR_ARG", MPI_ERR_ARG, a2av_null_counts);
    expect("nbc_ialltoallv negative count -> MPI_ERR_COUNT", MPI_ERR_COUNT, a2av_negative);
    expect("nbc_ialltoallv MPI_DATATYPE_NULL -> MPI_ERR_TYPE", MPI_ERR_TYPE, a2av_type);
    expect("nbc_ialltoallv NULL recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2av_null_recvbuf);
    expect("nbc_ialltoallv sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2av_alias);
    expect("nbc_ialltoallv recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, a2av_recv_in_place);
    expect("nbc_ialltoallv MPI_COMM_NULL -> MPI_ERR_COMM", MPI_ERR_COMM, a2av_comm);
    expect("nbc_ialltoallv negative displacement -> MPI_ERR_ARG", MPI_ERR_ARG, a2av_displ);
    expect("nbc_alltoallv_init NULL rdispls -> MPI_ERR_ARG", MPI_ERR_ARG, a2av_init_null_array);
    expect("nbc_ialltoallw NULL datatype arrays -> MPI_ERR_ARG", MPI_ERR_ARG, a2aw_null_types);
    expect("nbc_ialltoallw a non-contiguous type -> MPI_ERR_TYPE", MPI_ERR_TYPE, a2aw_strided);
    expect("nbc_igatherv root p -> MPI_ERR_ROOT", MPI_ERR_ROOT, gv_root);
    expect("nbc_igatherv NULL recvcounts at the root -> MPI_ERR_ARG", MPI_ERR_ARG, gv_null_counts);
    expect("nbc_igatherv negative sendcount -> MPI_ERR_COUNT", MPI_ERR_COUNT, gv_negative);
    if (P > 1) expect("nbc_igatherv MPI_IN_PLACE off the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, gv_in_place_off_root);
    expect("nbc_igatherv root's sendcount unlike its recvcount -> MPI_ERR_TRUNCATE", MPI_ERR_TRUNCATE, gv_own_block);
    expect("nbc_iscatterv NULL sendcounts at the root -> MPI_ERR_ARG", MPI_ERR_ARG, sv_null_counts);
    expect("nbc_iscatterv sendbuf MPI_IN_PLACE at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, sv_send_in_place);
    if (P > 1) expect("nbc_iscatterv MPI_IN_PLACE off the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, sv_in_place_off_root);
    expect("nbc_iscatterv MPI_DATATYPE_NULL -> MPI_ERR_TYPE", MPI_ERR_TYPE, sv_type);
    expect("nbc_iallgatherv NULL displs -> MPI_ERR_ARG", MPI_ERR_ARG, agv_null_displs);
    expect("nbc_iallgatherv sendcount unlike recvcounts[rank] -> MPI_ERR_TRUNCATE", MPI_ERR_TRUNCATE, agv_counts);
    expect("nbc_iallgatherv sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, agv_alias);
    if (P > 1) expect("nbc_iallgatherv receive blocks that overlap -> MPI_ERR_ARG", MPI_ERR_ARG, agv_overlap);
    expect("nbc_ireduce_scatter NULL recvcounts -> MPI_ERR_ARG", MPI_ERR_ARG, rsv_null_counts);
    expect("nbc_ireduce_scatter negative count -> MPI_ERR_COUNT", MPI_ERR_COUNT, rsv_negative);
    expect("nbc_ireduce_scatter MPI_OP_NULL -> MPI_ERR_OP", MPI_ERR_OP, rsv_op);
    expect("nbc_ireduce_scatter sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, rsv_alias);
    expect("nbc_reduce_scatter_init MPI_DATATYPE_NULL -> MPI_ERR_TYPE", MPI_ERR_TYPE, rsv_init_type);
}

static void other_collectives(void)
{
    expect("nbc_ireduce root p -> MPI_ERR_ROOT", MPI_ERR_ROOT, reduce_root_too_big);
    expect("nbc_ireduce root -1 -> MPI_ERR_ROOT", MPI_ERR_ROOT, reduce_root_negative);
    if (P > 1) expect("nbc_ireduce MPI_IN_PLACE off the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, reduce_in_place_off_root);
    expect("nbc_ibcast root p+3 -> MPI_ERR_ROOT", MPI_ERR_ROOT, bcast_root);
    expect("nbc_ibcast NULL buffer -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, bcast_null);
    expect("nbc_ibarrier MPI_COMM_NULL -> MPI_ERR_COMM", MPI_ERR_COMM, barrier_comm);
    expect("nbc_ibarrier NULL request -> MPI_ERR_ARG", MPI_ERR_ARG, barrier_request);
    expect("nbc_ireduce_scatter_block negative count -> MPI_ERR_COUNT", MPI_ERR_COUNT, rs_count);
    expect("nbc_ireduce_scatter_block MPI_BAND on doubles -> MPI_ERR_OP", MPI_ERR_OP, rs_op_on_double);
    expect("nbc_iallgather unequal counts -> MPI_ERR_COUNT", MPI_ERR_COUNT, ag_counts);
    expect("nbc_iallgather unequal types -> MPI_ERR_TYPE", MPI_ERR_TYPE, ag_types);
    expect("nbc_iallreduce_multi nbufs 0 -> MPI_ERR_ARG", MPI_ERR_ARG, multi_nbufs);
    expect("nbc_iallreduce_multi a NULL buffer -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, multi_null_buffer);
    expect("nbc_iallreduce sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_allreduce);
    expect("nbc_iallreduce sendbuf overlapping recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_allreduce_part);
    expect("nbc_iallreduce sendbuf == recvbuf of 160 KiB -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_allreduce_big);
    expect("nbc_ireduce sendbuf == recvbuf at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_reduce_root);
    expect("nbc_ireduce_scatter_block sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_rs);
    expect("nbc_iallgather sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_ag);
    expect("nbc_allreduce_init sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_init);
    expect("nbc_allreduce_init any-order sendbuf == recvbuf -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_init_any);
    expect("nbc_iallreduce_multi overlapping buffers -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, alias_multi);
    expect("nbc_iallreduce recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, ar_recv_in_place);
    expect("nbc_iallreduce both buffers MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, ar_both_in_place);
    expect("nbc_ireduce recvbuf MPI_IN_PLACE at the root -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, reduce_recv_in_place);
    expect("nbc_ireduce_scatter_block recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, rs_recv_in_place);
    expect("nbc_iallgather recvbuf MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, ag_recv_in_place);
    expect("nbc_ibcast buffer MPI_IN_PLACE -> MPI_ERR_BUFFER", MPI_ERR_BUFFER, bcast_in_place);
    expect("nbc_set_schedule with an unknown parameter -> MPI_ERR_ARG", MPI_ERR_ARG, force_bad_param);
    expect("nbc_set_schedule with a parameter lacking its value -> MPI_ERR_ARG", MPI_ERR_ARG, force_bad_syntax);
    expect("nbc_set_schedule of a schedule of another collective -> MPI_ERR_ARG", MPI_ERR_ARG, force_wrong_collective);
    expect("nbc_set_schedule of an unknown collective -> MPI_ERR_ARG", MPI_ERR_ARG, force_unknown_collective);
}

/* ---- the other cases -------------------------------------------------------------------- */

static void unknown_schedule(void)
{
    int c = new_case("unknown schedule name -> MPI_ERR_ARG with a message");
    int rc = nbc_set_schedule("allreduce", "allreduce_no_such_schedule");
    const char *msg = nbc_error_message();
    if (err_class(rc) != MPI_ERR_ARG)
        fail(c, "nbc_set_schedule returned %s", err_name(rc));
    else if (!msg || !*msg)
        fail(c, "nbc_error_message() is empty");
    nbc_set_schedule("allreduce", NULL);
}

static void null_requests(void)
{
    int c = new_case("nbc_test on NBC_REQUEST_NULL completes at once");
    nbc_request req = NBC_REQUEST_NULL;
    int flag = 0, rc = nbc_test(&req, &flag);
    if (rc != MPI_SUCCESS || !flag || req != NBC_REQUEST_NULL)
        fail(c, "returned %s, flag %d", err_name(rc), flag);

    c = new_case("nbc_wait on NBC_REQUEST_NULL completes at once");
    rc = nbc_wait(&req);
    if (rc != MPI_SUCCESS || req != NBC_REQUEST_NULL) fail(c, "returned %s", err_name(rc));

    c = new_case("nbc_waitall on NBC_REQUEST_NULLs and on none");
    nbc_request reqs[3] = {NBC_REQUEST_NULL, NBC_REQUEST_NULL, NBC_REQUEST_NULL};
    if ((rc = nbc_waitall(3, reqs)) != MPI_SUCCESS) fail(c, "3 nulls: returned %s", err_name(rc));
    if ((rc = nbc_waitall(0, reqs)) != MPI_SUCCESS) fail(c, "count 0: returned %s", err_name(rc));
}

/* count 0 with NULL buffers is a valid, empty reduction; then a normal call still works. */
static void valid_calls(void)
{
    static const struct { const char *name; int in_place; } zero[] = {
        {"count 0 with NULL buffers is fine", 0},
        {"count 0 in place with NULL recvbuf is fine", 1},
    };
    for (int k = 0; k < 2; k++) {
        int c = new_case(zero[k].name);
        nbc_request req = NBC_REQUEST_NULL;
        int rc = nbc_iallreduce(zero[k].in_place ? MPI_IN_PLACE : NULL, NULL, 0, MPI_INT, MPI_SUM,
                                MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) {
            fail(c, "nbc_iallreduce returned %s (%s)", err_name(rc), nbc_error_message());
            continue;
        }
        if ((rc = nbc_wait(&req)) != MPI_SUCCESS) fail(c, "nbc_wait returned %s", err_name(rc));
    }

    int c = new_case("a valid call after the errors works");
    for (int i = 0; i < N; i++) sendbuf[i] = me + i, recvbuf[i] = -1;
    nbc_request req = NBC_REQUEST_NULL;
    int rc = nbc_iallreduce(sendbuf, recvbuf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = nbc_wait(&req);
    if (rc != MPI_SUCCESS) {
        fail(c, "returned %s (%s)", err_name(rc), nbc_error_message());
        return;
    }
    for (int i = 0; i < N; i++) {
        int want = P * (P - 1) / 2 + P * i; /* sum over ranks r of (r + i) */
        if (recvbuf[i] != want) {
            fail(c, "element %d: got %d, expected %d", i, recvbuf[i], want);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    /* NBC_PROGRESS_THREAD=1 runs the suite with the progress thread, which needs this */
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("NBC_PROGRESS_THREAD") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);

    int c = new_case("nbc_init");
    int rc = nbc_init();
    if (rc != MPI_SUCCESS) fail(c, "returned %s", err_name(rc));
    for (size_t i = 0; i < sizeof bad_calls / sizeof *bad_calls; i++) bad_call(&bad_calls[i]);
    unknown_schedule();
    other_collectives();
    fixed_count_collectives();
    vector_collectives();
    null_requests();
    valid_calls();
    c = new_case("nbc_finalize");
    if ((rc = nbc_finalize()) != MPI_SUCCESS) fail(c, "returned %s", err_name(rc));

    int status = report();
    MPI_Finalize();
    return status;
}
