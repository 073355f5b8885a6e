"""The cost of a call from Python, side by side in one run: an allreduce of one double (8 bytes)
through mpi4py's comm.Allreduce, through nbc's compiled calls (nbc._fast: the blocking
nbc.allreduce, nbc.iallreduce + wait(), a persistent request's start() + wait()) and through the
ctypes path (the same calls with nbc.use_fast(False)); with torch, nbc.allreduce on one-element
CPU tensors too.

The rows take turns: each round runs one batch of N calls of every row, in an order that rotates
from round to round, so that load from other work on the machine falls on all of them alike.
Printed per row: the median over the rounds of the batch's time per call, its quartiles, and the
median over the rounds of the ratio to mpi4py's batch in the same round.
Usage: mpiexec.openmpi --oversubscribe -n P python3 bench/python_calls.py [N [ROUNDS]]"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nbc  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 21
comm = MPI.COMM_WORLD
x, y = np.ones(1), np.zeros(1)
has_fast = nbc.use_fast(True)


def persistent_rows(fast):
    nbc.use_fast(fast)
    req = nbc.allreduce_init(x, y)

    def run():
        req.start()
        req.wait()
    return req, run


def path(fast, fn):
    """fn with nbc's calls routed through the compiled module (fast) or ctypes."""
    def run():
        nbc.use_fast(fast)
        fn()
    return run


rows = [("mpi4py comm.Allreduce", None, lambda: comm.Allreduce(x, y))]
keep = []
for fast in ([True] if has_fast else []) + [False]:
    tag = "nbc._fast" if fast else "nbc ctypes"
    req, run = persistent_rows(fast)
    keep.append(req)
    rows += [("%s allreduce" % tag, fast, lambda: nbc.allreduce(x, y)),
             ("%s iallreduce+wait" % tag, fast, lambda: nbc.iallreduce(x, y).wait()),
             ("%s start+wait" % tag, fast, run)]


try:  # the same on one-element CPU tensors, where torch is installed
    import torch
    tx, ty = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    for fast in ([True] if has_fast else []) + [False]:
        rows.append(("%s allreduce, tensor" % ("nbc._fast" if fast else "nbc ctypes"), fast,
                     lambda: nbc.allreduce(tx, ty)))
except ImportError:
    pass


def batch(fast, fn):
    if fast is not None:
        nbc.use_fast(fast)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


for fast, fn in [(r[1], r[2]) for r in rows]:  # warm up
    batch(fast, fn)
times = [[] for _ in rows]
for k in range(rounds):
    order = list(range(len(rows)))
    order = order[k % len(rows):] + order[:k % len(rows)]
    for i in order:
        times[i].append(batch(rows[i][1], rows[i][2]))
nbc.use_fast(True)
for req in keep:
    nbc.use_fast(type(req) is not nbc._core._CTYPES["Request"])
    req.free()
nbc.use_fast(True)

if comm.Get_rank() == 0:
    base = times[0]
    print("p = %d, one double, %d rounds of %d calls; load average %s; nbc._fast %s"
          % (comm.Get_size(), rounds, n, " ".join("%.1f" % v for v in os.getloadavg()),
             "found" if has_fast else "NOT found"))
    print("%-32s %9s %19s %10s" % ("call", "median us", "quartiles", "x mpi4py"))
    for (name, _, _), t in zip(rows, times):
        q1, med, q3 = np.percentile(t, [25, 50, 75])
        ratio = np.median(np.array(t) / np.array(base))
        print("%-32s %9.3f %8.3f..%-8.3f %10.2f" % (name, med, q1, q3, ratio))
