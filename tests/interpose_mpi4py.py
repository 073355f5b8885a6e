"""An unmodified mpi4py program: comm.Iallreduce and comm.Allreduce on NumPy arrays of several
dtypes, ops and counts, in place and not, each result checked exactly against a fold computed
locally from every rank's input. It knows nothing of nbc: tests/interpose.sh runs it through
LD_PRELOAD=libnbcmpi.so (with NBC_MPI_BLOCKING=1 NBC_MPI_VERBOSE=1) and compares the counts it
prints with the library's.

    mpiexec -n 2 python3 tests/interpose_mpi4py.py

Prints ok/FAIL lines, and (rank 0) "calls: MPI_Iallreduce N MPI_Allreduce M", its calls of
each (every rank makes the same); exits with status 1 on any failure."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
calls = {"MPI_Iallreduce": 0, "MPI_Allreduce": 0}
failures = 0

# values whose sums and products are exact in every dtype below, at any size the suite runs
DTYPES = [np.int32, np.int64, np.uint8, np.float32, np.float64, np.complex128]
OPS = [("SUM", MPI.SUM, np.add), ("MAX", MPI.MAX, np.maximum), ("MIN", MPI.MIN, np.minimum),
       ("PROD", MPI.PROD, np.multiply)]
COUNTS = [1, 7, 1000, 100000]


def data(r, n, dtype, opname):
    """rank r's input: small integers (1 or 2 for a product: a power of two, exact)"""
    i = np.arange(n)
    v = (i % 2 + 1) if opname == "PROD" else (i * 7 + r * 3) % 11
    if np.dtype(dtype).kind == "c":
        return (v + 1j * (v % 3)).astype(dtype)
    return v.astype(dtype)


def expected(n, dtype, opname, fold):
    want = data(0, n, dtype, opname)
    for r in range(1, size):
        want = fold(want, data(r, n, dtype, opname)).astype(dtype)
    return want


def check(what, got, want):
    global failures
    if got.dtype != want.dtype or not np.array_equal(got, want):
        failures += 1
        bad = np.nonzero(got != want)[0]
        print("FAIL %s (rank %d): %d elements differ, first at %s" % (what, rank, len(bad), bad[:1]), flush=True)


for dtype in DTYPES:
    for opname, op, fold in OPS:
        if np.dtype(dtype).kind == "c" and opname in ("MAX", "MIN"):
            continue  # (MPI defines no order on complex numbers)
        for n in COUNTS:
            what = "%s %s count %d" % (np.dtype(dtype).name, opname, n)
            want = expected(n, dtype, opname, fold)
            mine = data(rank, n, dtype, opname)

            out = np.zeros(n, dtype)  # blocking, separate buffers
            comm.Allreduce(mine, out, op=op)
            calls["MPI_Allreduce"] += 1
            check("Allreduce " + what, out, want)

            buf = mine.copy()  # blocking, in place
            comm.Allreduce(MPI.IN_PLACE, buf, op=op)
            calls["MPI_Allreduce"] += 1
            check("Allreduce in place " + what, buf, want)

            out = np.zeros(n, dtype)  # non-blocking, waited for
            req = comm.Iallreduce(mine, out, op=op)
            calls["MPI_Iallreduce"] += 1
            req.Wait()
            check("Iallreduce " + what, out, want)

            buf = mine.copy()  # non-blocking in place, tested until done
            req = comm.Iallreduce(MPI.IN_PLACE, buf, op=op)
            calls["MPI_Iallreduce"] += 1
            while not req.Test():
                pass
            check("Iallreduce in place " + what, buf, want)

# several at once, completed together (MPI_Waitall) and in any order (MPI_Waitany)
for how in ("Waitall", "Waitany"):
    ins, outs, reqs = [], [], []
    for k, dtype in enumerate(DTYPES):
        mine = data(rank, 1000 + k, dtype, "SUM")
        ins.append(mine)  # (alive until the wait: the send buffer)
        outs.append((np.zeros(1000 + k, dtype), expected(1000 + k, dtype, "SUM", np.add)))
        reqs.append(comm.Iallreduce(mine, outs[-1][0], op=MPI.SUM))
        calls["MPI_Iallreduce"] += 1
    if how == "Waitall":
        MPI.Request.Waitall(reqs)
    else:
        for _ in reqs:
            MPI.Request.Waitany(reqs)
    for k, (got, want) in enumerate(outs):
        check("Iallreduce x%d through %s, %s" % (len(DTYPES), how, np.dtype(DTYPES[k]).name), got, want)

total = np.zeros(1, np.int64)
comm.Allreduce(np.array([failures], np.int64), total, op=MPI.SUM)
calls["MPI_Allreduce"] += 1
failures = int(total[0])
if rank == 0:
    print("%s comm.Allreduce and comm.Iallreduce, in place and not, %d dtypes, 4 ops, counts %s (p=%d)"
          % ("ok" if failures == 0 else "FAIL", len(DTYPES), COUNTS, size), flush=True)
    print("calls: MPI_Iallreduce %d MPI_Allreduce %d" % (calls["MPI_Iallreduce"], calls["MPI_Allreduce"]), flush=True)
sys.exit(1 if failures else 0)
