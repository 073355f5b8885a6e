"""nbc from Python: non-blocking collectives whose algorithms are schedules.

    from mpi4py import MPI
    import nbc
    req = nbc.iallreduce(sendbuf, recvbuf, op=nbc.SUM, comm=MPI.COMM_WORLD)
    ...                 # compute
    req.wait()

Buffers are NumPy arrays or CPU torch tensors, used in place. The libnbc.so loaded is the one
built against the MPI mpi4py runs on (docs/python.md says how it is found). nbc.torch holds
the PyTorch parts: a DDP communication hook and the Total Reduce gradient synchronizer.
"""
from ._lib import LibraryError, mpi_flavor
from ._core import (  # noqa: F401
    FLAVOR, LIBRARY_PATH, IN_PLACE, SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR,
    Error, Request, error_message, empty, zeros, from_alloc_mem,
    iallreduce, ireduce, ibcast, ibarrier, ireduce_scatter_block, iallgather, iallreduce_multi,
    allreduce, reduce, bcast, barrier, reduce_scatter_block, allgather, allreduce_multi,
    allreduce_init, reduce_init, bcast_init, barrier_init, reduce_scatter_block_init,
    allgather_init, allreduce_multi_init,
    startall, waitall, testall, progress, progress_thread, init, finalize,
    load_schedules, set_schedule, load_tuning, set_selection, cache_stats, version, fast, use_fast,
)
from ._collectives import (  # noqa: F401
    ialltoall, ialltoallv, ialltoallw, igather, igatherv, iscatter, iscatterv, iallgatherv, ireduce_scatter,
    iscan, iexscan,
    alltoall, alltoallv, alltoallw, gather, gatherv, scatter, scatterv, allgatherv, reduce_scatter, scan, exscan,
    alltoall_init, alltoallv_init, alltoallw_init, gather_init, gatherv_init, scatter_init, scatterv_init,
    allgatherv_init, reduce_scatter_init, scan_init, exscan_init,
)

__all__ = [n for n in dir() if not n.startswith("_")]
