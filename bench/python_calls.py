"""The cost of a call through the Python bindings: nbc.allreduce on one double against mpi4py's
Allreduce and against nbc's request alone, best of 5 rounds of N calls (p = 1 measures the
call, not the network). Usage: mpiexec.openmpi -n 1 python3 bench/python_calls.py [N]"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nbc  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
comm = MPI.COMM_WORLD
x, y = np.ones(1), np.zeros(1)
req = nbc.allreduce_init(x, y)


def best(fn):
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t.append((time.perf_counter() - t0) / n * 1e6)
    return min(t)


def persistent():
    req.start()
    req.wait()


rows = [("mpi4py comm.Allreduce", best(lambda: comm.Allreduce(x, y))),
        ("nbc.allreduce", best(lambda: nbc.allreduce(x, y))),
        ("persistent start() + wait()", best(persistent))]
if comm.Get_rank() == 0:
    for name, us in rows:
        print("%-30s %6.2f us per call (p = %d, one double)" % (name, us, comm.Get_size()))
req.free()
