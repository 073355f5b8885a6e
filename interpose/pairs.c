/* Which (datatype, op) pairs a reduction takes, as MPICH answers it. The preload promises that
 * nothing changes but the speed, so a pair means here what it means in MPICH: MPICH accepts
 * more than the standard's C types (MPI_CHAR with MPI_SUM, as the OSU benchmarks use it; the
 * Fortran and C++ types; MPI_MINLOC on the pair types), and refuses what the standard refuses
 * (MPI_SUM on MPI_DOUBLE_INT). A pair MPICH refuses fails with its error class; a pair it
 * accepts but nbc has no kernel for runs on the stand-in type (layout.c), whose op hands each
 * piece to MPI_Reduce_local with the real pair: MPICH's own arithmetic. */
#include <pthread.h>

#include "nbcmpi.h"
#include "reduce.h"

static int predefined_op(MPI_Op op)
{
    static const MPI_Op ops[] = {MPI_SUM,  MPI_PROD, MPI_MIN,  MPI_MAX,    MPI_LAND,    MPI_LOR,     MPI_LXOR,
                                 MPI_BAND, MPI_BOR,  MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (op == ops[i]) return 1;
    return 0;
}

/* MPICH checks a predefined op against the datatype before it looks at the count, and reports
 * MPI_Reduce_local's errors on MPI_COMM_WORLD (MPI-4 says MPI_COMM_SELF: both are set to
 * return for the question, and given back their handlers after it). */
static int ask_mpich(MPI_Datatype type, MPI_Op op)
{
    MPI_Errhandler world, self;
    PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
    PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    char in[1], inout[1];
    int rc = PMPI_Reduce_local(in, inout, 0, type, op);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
    PMPI_Errhandler_free(&world);
    PMPI_Errhandler_free(&self);
    int cls = MPI_ERR_OP;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : cls;
}

/* MPICH's answers for predefined types, which are never freed (a user's type handle can be
 * freed and given again to another type: its pairs are asked each time). */
enum { KNOWN = 128 };
static struct {
    MPI_Datatype type;
    MPI_Op op;
    int verdict;
} known[KNOWN];
static int nknown;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

int nm_pair_check(MPI_Datatype type, MPI_Op op, int *direct)
{
    *direct = 1;
    if (!predefined_op(op)) return MPI_SUCCESS; /* a user's op: any datatype */
    if (reduce_kernel(type, op) || reduce_defined_without_kernel(type, op)) return MPI_SUCCESS;
    /* nbc hands the ops without kernels (MPI_MINLOC, MPI_MAXLOC, ...) to MPI_Reduce_local
     * itself; MPI_SUM and the other arithmetic ops it refuses on types it has no kernel for */
    *direct = op == MPI_MINLOC || op == MPI_MAXLOC || op == MPI_REPLACE || op == MPI_NO_OP;
    if (!nm_predefined(type)) return ask_mpich(type, op);
    pthread_mutex_lock(&known_lock);
    for (int i = 0; i < nknown; i++)
        if (known[i].type == type && known[i].op == op) {
            int v = known[i].verdict;
            pthread_mutex_unlock(&known_lock);
            return v;
        }
    int v = ask_mpich(type, op);
    if (nknown < KNOWN) known[nknown].type = type, known[nknown].op = op, known[nknown].verdict = v, nknown++;
    pthread_mutex_unlock(&known_lock);
    return v;
}
