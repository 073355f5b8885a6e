/* Valid MPI programs that must not hang (or crash) through LD_PRELOAD=libnbcmpi.so: one case
 * per run, named on the command line, so that a hang (turned into a failure by the script's
 * timeout) spoils only its own case. Plain MPI, no nbc: the same cases must pass on MPICH alone.
 *
 * The blocked cases: rank 0 starts an allreduce, then sits in a blocking call X while the other
 * ranks wait for that allreduce before they call X; only if rank 0's collective moves while it
 * is inside X can the others get there. The reverse: rank 0 waits for a collective while its
 * own large send is what rank 1 sits in MPI_Recv for. Then a user op calling MPI_Test under
 * MPI_THREAD_MULTIPLE, and arguments MPI calls erroneous (errors, not crashes).
 *
 *     mpiexec -n 3 ./interpose_hang CASE        (./interpose_hang list: the cases) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 16, BIG = 1 << 20 }; /* N ints in the allreduce; BIG bytes: a rendezvous message */

static int rank, p, failed;
static const char *name;

static void fail(const char *why)
{
    printf("FAIL %s: %s (rank %d)\n", name, why, rank);
    failed = 1;
}

static int input(int r, int i) { return r * 1000 + i; }

static void start_sum(int *in, int *out, MPI_Request *req)
{
    for (int i = 0; i < N; i++) in[i] = input(rank, i), out[i] = -1;
    MPI_Iallreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, req);
}

static void check_sum(const int *out)
{
    for (int i = 0; i < N; i++)
        if (out[i] != 1000 * p * (p - 1) / 2 + p * i) {
            fail("wrong sum");
            return;
        }
}

/* ---- the blocking calls rank 0 sits in ---- */

static void blocked_in(const char *what)
{
    int x = rank + 1, y[64] = {0}, z[64] = {0};
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Group g;
    MPI_Win w;
    if (!strcmp(what, "barrier")) MPI_Barrier(MPI_COMM_WORLD);
    else if (!strcmp(what, "allreduce")) MPI_Allreduce(&x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "bcast")) MPI_Bcast(y, 1, MPI_INT, p - 1, MPI_COMM_WORLD);
    else if (!strcmp(what, "reduce")) MPI_Reduce(&x, y, 1, MPI_INT, MPI_SUM, p - 1, MPI_COMM_WORLD);
    else if (!strcmp(what, "allgather")) MPI_Allgather(&x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(what, "alltoall")) MPI_Alltoall(z, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(what, "gather")) MPI_Gather(&x, 1, MPI_INT, y, 1, MPI_INT, p - 1, MPI_COMM_WORLD);
    else if (!strcmp(what, "scan")) MPI_Scan(&x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "comm_dup")) MPI_Comm_dup(MPI_COMM_WORLD, &c);
    else if (!strcmp(what, "comm_split")) MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &c);
    else if (!strcmp(what, "comm_split_type"))
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
    else if (!strcmp(what, "comm_create")) {
        MPI_Comm_group(MPI_COMM_WORLD, &g);
        MPI_Comm_create(MPI_COMM_WORLD, g, &c);
        MPI_Group_free(&g);
    } else if (!strcmp(what, "win_create")) {
        MPI_Win_create(z, sizeof z, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);
        MPI_Win_free(&w);
    } else {
        fail("unknown blocking call");
    }
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

static const char *const blocking[] = {"barrier", "allreduce", "bcast", "reduce", "allgather", "alltoall", "gather",
                                       "scan", "comm_dup", "comm_split", "comm_split_type", "comm_create",
                                       "win_create"};

static void blocked_case(const char *what)
{
    int in[N], out[N];
    MPI_Request req;
    start_sum(in, out, &req);
    if (rank == 0) {
        blocked_in(what);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        blocked_in(what);
    }
    check_sum(out);
}

/* ---- point-to-point calls rank 0 sits in while rank 1 waits for the collective ---- */

static void p2p_case(const char *what)
{
    int in[N], out[N];
    char *buf = calloc(BIG, 1);
    MPI_Request req;
    if (!strcmp(what, "ibarrier_send")) { /* a rendezvous send while the barrier runs */
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        if (rank == 0) MPI_Send(buf, BIG, MPI_CHAR, 1, 7, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rank == 1) MPI_Recv(buf, BIG, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        free(buf);
        return;
    }
    start_sum(in, out, &req);
    int peer = rank == 0 ? 1 : 0, v = rank * 10;
    if (rank == 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rank <= 1) {
        if (!strcmp(what, "sendrecv_replace")) {
            MPI_Sendrecv_replace(&v, 1, MPI_INT, peer, 3, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (!strcmp(what, "mprobe")) {
            if (rank == 0) {
                MPI_Message m;
                MPI_Mprobe(1, 3, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
                MPI_Mrecv(&v, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
                v = 0;
            }
        } else {
            fail("unknown point-to-point call");
        }
        if (v != peer * 10) fail("wrong value exchanged");
    }
    if (rank != 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
    check_sum(out);
    free(buf);
}

/* Rank 0 waits for an allreduce that rank 1 joins only once its large message to rank 0 (or
 * from it) has gone through, which only rank 0's own MPI progress moves (a rendezvous: rank 0
 * must answer the sender, or send, from inside its wait). */
static void reverse_case(int rank0_receives)
{
    int in[N], out[N];
    char *buf = calloc(BIG, 1);
    MPI_Request req, mine = MPI_REQUEST_NULL;
    start_sum(in, out, &req); /* the first call on the communicator sets up shared memory with messages */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rank0_receives) {
        if (rank == 0) MPI_Irecv(buf, BIG, MPI_CHAR, 1, 5, MPI_COMM_WORLD, &mine);
        if (rank == 1) MPI_Send(buf, BIG, MPI_CHAR, 0, 5, MPI_COMM_WORLD);
    } else {
        if (rank == 0) MPI_Isend(buf, BIG, MPI_CHAR, 1, 5, MPI_COMM_WORLD, &mine);
        if (rank == 1) MPI_Recv(buf, BIG, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    start_sum(in, out, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Wait(&mine, MPI_STATUS_IGNORE);
    check_sum(out);
    free(buf);
}

/* Rank 0 finishes a broadcast it roots and finalizes before the others have started it. */
static void finalize_case(void)
{
    int v[N];
    MPI_Request req;
    for (int i = 0; i < N; i++) v[i] = rank == 0 ? input(7, i) : -1;
    if (rank != 0) usleep(200000);
    MPI_Ibcast(v, N, MPI_INT, 0, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; i++)
        if (v[i] != input(7, i)) {
            fail("wrong broadcast");
            break;
        }
}

/* ---- a user op that calls MPI_Test (MPI_THREAD_MULTIPLE) ---- */

static MPI_Request pending = MPI_REQUEST_NULL;

static void testing_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    int flag;
    MPI_Test(&pending, &flag, MPI_STATUS_IGNORE);
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void userop_case(void)
{
    int in[N], out[N], dummy;
    MPI_Op op;
    MPI_Op_create(testing_sum, 1, &op);
    /* a receive nobody matches, until rank 0 sends itself the message at the end */
    MPI_Irecv(&dummy, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &pending);
    for (int i = 0; i < N; i++) in[i] = input(rank, i);
    MPI_Request req;
    MPI_Iallreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    check_sum(out);
    MPI_Send(&rank, 1, MPI_INT, 0, 9, MPI_COMM_SELF);
    MPI_Wait(&pending, MPI_STATUS_IGNORE);
    MPI_Op_free(&op);
}

/* ---- erroneous arguments: the class MPICH returns, through the communicator's handler ---- */

static int handled, handled_class;

static void record(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handled++;
    MPI_Error_class(*code, &handled_class);
}

static void expect(const char *call, int rc, int want)
{
    int cls;
    MPI_Error_class(rc, &cls);
    char why[200];
    if (cls != want) {
        snprintf(why, sizeof why, "%s returned class %d, want %d", call, cls, want);
        fail(why);
    } else if (handled != 1 || handled_class != want) {
        snprintf(why, sizeof why, "%s: the error handler ran %d times (class %d), want once", call, handled,
                 handled_class);
        fail(why);
    }
    handled = 0;
}

static void errors_case(void)
{
    MPI_Errhandler eh;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_create_errhandler(record, &eh);
    MPI_Comm_set_errhandler(comm, eh);
    int a[N], b[N * 8];
    for (int i = 0; i < N; i++) a[i] = i;
    MPI_Request r;
    expect("MPI_Iallreduce(request NULL)", MPI_Iallreduce(a, b, N, MPI_INT, MPI_SUM, comm, NULL), MPI_ERR_ARG);
    expect("MPI_Ibarrier(request NULL)", MPI_Ibarrier(comm, NULL), MPI_ERR_ARG);
    expect("MPI_Ibcast(request NULL)", MPI_Ibcast(a, N, MPI_INT, 0, comm, NULL), MPI_ERR_ARG);
    expect("MPI_Ireduce(request NULL)", MPI_Ireduce(a, b, N, MPI_INT, MPI_SUM, 0, comm, NULL), MPI_ERR_ARG);
    expect("MPI_Iallgather(request NULL)", MPI_Iallgather(a, 1, MPI_INT, b, 1, MPI_INT, comm, NULL), MPI_ERR_ARG);
    expect("MPI_Ireduce_scatter_block(request NULL)",
           MPI_Ireduce_scatter_block(a, b, 1, MPI_INT, MPI_SUM, comm, NULL), MPI_ERR_ARG);
#if MPI_VERSION >= 4 /* (MPI-4: not in Open MPI 4.1) */
    expect("MPI_Allreduce_init(request NULL)",
           MPI_Allreduce_init(a, b, N, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, NULL), MPI_ERR_ARG);
#endif
    expect("MPI_Iallreduce(recvbuf MPI_IN_PLACE)",
           MPI_Iallreduce(a, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm, &r), MPI_ERR_BUFFER);
    expect("MPI_Iallreduce(both MPI_IN_PLACE)",
           MPI_Iallreduce(MPI_IN_PLACE, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm, &r), MPI_ERR_BUFFER);
    expect("MPI_Iallreduce(aliased buffers)", MPI_Iallreduce(a, a, N, MPI_INT, MPI_SUM, comm, &r), MPI_ERR_BUFFER);
    if (rank == 0)
        expect("MPI_Ireduce(recvbuf MPI_IN_PLACE at the root)",
               MPI_Ireduce(a, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, 0, comm, &r), MPI_ERR_BUFFER);
    expect("MPI_Iallgather(recvbuf MPI_IN_PLACE)",
           MPI_Iallgather(a, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm, &r), MPI_ERR_BUFFER);
    expect("MPI_Ireduce_scatter_block(recvbuf MPI_IN_PLACE)",
           MPI_Ireduce_scatter_block(a, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, comm, &r), MPI_ERR_BUFFER);
    expect("MPI_Allreduce(recvbuf MPI_IN_PLACE)", MPI_Allreduce(a, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm),
           MPI_ERR_BUFFER);
#if MPI_VERSION >= 4 /* (MPI-4: not in Open MPI 4.1) */
    expect("MPI_Allreduce_init(recvbuf MPI_IN_PLACE)",
           MPI_Allreduce_init(a, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &r), MPI_ERR_BUFFER);
#endif
    /* the communicator still works */
    MPI_Iallreduce(a, b, N, MPI_INT, MPI_SUM, comm, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; i++)
        if (b[i] != p * i) fail("wrong sum after the errors");
    MPI_Comm_free(&comm);
    MPI_Errhandler_free(&eh);
}

int main(int argc, char **argv)
{
    name = argc > 1 ? argv[1] : "list";
    int provided;
    if (!strcmp(name, "userop_test")) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int known = 1;
    if (!strcmp(name, "list")) {
        if (rank == 0) {
            for (size_t i = 0; i < sizeof blocking / sizeof *blocking; i++) printf("blocked_%s\n", blocking[i]);
            printf("ibarrier_send\nsendrecv_replace\nmprobe\nreverse_send\nreverse_recv\nfinalize_early\nuserop_test\n"
                   "errors\n");
        }
        MPI_Finalize();
        return 0;
    }
    if (!strncmp(name, "blocked_", 8)) blocked_case(name + 8);
    else if (!strcmp(name, "ibarrier_send") || !strcmp(name, "sendrecv_replace") || !strcmp(name, "mprobe"))
        p2p_case(name);
    else if (!strcmp(name, "reverse_send")) reverse_case(0);
    else if (!strcmp(name, "reverse_recv")) reverse_case(1);
    else if (!strcmp(name, "finalize_early")) finalize_case();
    else if (!strcmp(name, "userop_test")) userop_case();
    else if (!strcmp(name, "errors")) errors_case();
    else known = 0;
    if (!known) fail("unknown case");
    else if (!failed) printf("ok %s (rank %d)\n", name, rank);
    MPI_Finalize();
    return failed;
}
