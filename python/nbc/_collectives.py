"""All-to-all, gather, scatter, their vector forms, the vector reduce-scatter and the scans:
each as a non-blocking call (i...), a blocking one and a persistent one (..._init), over the C
calls of the same names. Buffers are used in place, as in _core; counts and displacements are
in elements of the buffer's dtype (alltoallw: MPI datatypes per peer, displacements in bytes).
A vector form's displacements default to the blocks packed back to back.
"""
import ctypes

from mpi4py import MPI

from ._core import (IN_PLACE, SUM, Error, _H, _I, _P, _REQ, _buf, _h, _new, _op, _persistent, _same, _send,
                    _send_addr, _sig)

_V = ctypes.POINTER(_I)
_T = ctypes.POINTER(_H)


def _pair(name, *args):
    """The non-blocking call and its _init (same arguments, then MPI_Info)."""
    return (_sig("nbc_i" + name, *args, ctypes.POINTER(_REQ)),
            _sig("nbc_%s_init" % name, *args, _H, ctypes.POINTER(_REQ)))


_C = {
    "alltoall": _pair("alltoall", _P, _I, _H, _P, _I, _H, _H),
    "alltoallv": _pair("alltoallv", _P, _V, _V, _H, _P, _V, _V, _H, _H),
    "alltoallw": _pair("alltoallw", _P, _V, _V, _T, _P, _V, _V, _T, _H),
    "gather": _pair("gather", _P, _I, _H, _P, _I, _H, _I, _H),
    "gatherv": _pair("gatherv", _P, _I, _H, _P, _V, _V, _H, _I, _H),
    "scatter": _pair("scatter", _P, _I, _H, _P, _I, _H, _I, _H),
    "scatterv": _pair("scatterv", _P, _V, _V, _H, _P, _I, _H, _I, _H),
    "allgatherv": _pair("allgatherv", _P, _I, _H, _P, _V, _V, _H, _H),
    "reduce_scatter": _pair("reduce_scatter", _P, _P, _V, _H, _H, _H),
    "scan": _pair("scan", _P, _P, _I, _H, _H, _H),
    "exscan": _pair("exscan", _P, _P, _I, _H, _H, _H),
}


def _ints(values, p, what):
    """A C int array of p values (None stays None: an argument not significant here)."""
    if values is None:
        return None
    values = [int(v) for v in values]
    if len(values) != p:
        raise Error(MPI.ERR_ARG, "%s has %d values, not p = %d" % (what, len(values), p))
    return (_I * p)(*values)


def _displs(displs, counts, p, what):
    if displs is not None or counts is None:
        return _ints(displs, p, what)
    at, out = 0, []
    for c in counts:
        out.append(at)
        at += int(c)
    return (_I * p)(*out)


def _types(types, p, what):
    if len(types) != p:
        raise Error(MPI.ERR_ARG, "%s has %d datatypes, not p = %d" % (what, len(types), p))
    return (_H * p)(*[_h(t) for t in types])


def _opt(obj):
    """A buffer that may be None (not significant on this rank) or IN_PLACE."""
    return None if obj is None or obj is IN_PLACE else _buf(obj)


def _addr(b):
    return b.addr if b is not None else None


def _blocks(b, p, what):
    if b.count % p:
        raise Error(MPI.ERR_COUNT, "%s: %d elements are not p = %d blocks" % (what, b.count, p))
    return b.count // p


# Each collective's C arguments (but the request) from its Python ones, and what the request
# keeps alive.

def _alltoall(sendbuf, recvbuf, comm):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    n = _blocks(rb, p, "alltoall: recvbuf")
    if sb is not None:
        _same(sb, rb, "alltoall")
        if sb.count != rb.count:
            raise Error(MPI.ERR_COUNT, "alltoall: sendbuf has %d elements, recvbuf %d" % (sb.count, rb.count))
    return (_send_addr(sb), n, _h(rb.dtype), rb.addr, n, _h(rb.dtype), _h(comm)), (sendbuf, recvbuf)


def _alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, comm):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    rc, rd = _ints(recvcounts, p, "recvcounts"), _displs(rdispls, recvcounts, p, "rdispls")
    sc = sd = None
    if sb is not None:
        _same(sb, rb, "alltoallv")
        sc, sd = _ints(sendcounts, p, "sendcounts"), _displs(sdispls, sendcounts, p, "sdispls")
    dt = _h(rb.dtype)
    return (_send_addr(sb), sc, sd, dt, rb.addr, rc, rd, dt, _h(comm)), (sendbuf, recvbuf, sc, sd, rc, rd)


def _alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    rc, rd, rt = _ints(recvcounts, p, "recvcounts"), _ints(rdispls, p, "rdispls"), _types(recvtypes, p, "recvtypes")
    sc = sd = st = None
    if sb is not None:
        sc, sd, st = _ints(sendcounts, p, "sendcounts"), _ints(sdispls, p, "sdispls"), _types(sendtypes, p, "sendtypes")
    return ((_send_addr(sb), sc, sd, st, rb.addr, rc, rd, rt, _h(comm)),
            (sendbuf, recvbuf, sc, sd, st, rc, rd, rt, sendtypes, recvtypes))


def _gather(sendbuf, recvbuf, root, comm):
    sb, rb = _send(sendbuf), _opt(recvbuf)
    p, here = comm.Get_size(), comm.Get_rank() == root
    if here and rb is None:
        raise Error(MPI.ERR_BUFFER, "gather: the root needs recvbuf")
    ref = sb if sb is not None else rb
    if ref is None:
        raise Error(MPI.ERR_BUFFER, "gather: no buffer")
    n = _blocks(rb, p, "gather: recvbuf") if here else ref.count
    if sb is not None and here:
        _same(sb, rb, "gather")
        if sb.count != n:
            raise Error(MPI.ERR_COUNT, "gather: sendbuf has %d elements, recvbuf's blocks %d" % (sb.count, n))
    dt = _h(ref.dtype)
    return (_send_addr(sb), n, dt, _addr(rb), n, dt, int(root), _h(comm)), (sendbuf, recvbuf)


def _gatherv(sendbuf, recvbuf, recvcounts, displs, root, comm):
    sb, rb = _send(sendbuf), _opt(recvbuf)
    p, here = comm.Get_size(), comm.Get_rank() == root
    ref = sb if sb is not None else rb
    if ref is None or (here and rb is None):
        raise Error(MPI.ERR_BUFFER, "gatherv: the root needs recvbuf, every rank a sendbuf (or IN_PLACE at the root)")
    rc = _ints(recvcounts, p, "recvcounts") if here else None
    rd = _displs(displs, recvcounts, p, "displs") if here else None
    n = sb.count if sb is not None else 0
    dt = _h(ref.dtype)
    return (_send_addr(sb), n, dt, _addr(rb), rc, rd, dt, int(root), _h(comm)), (sendbuf, recvbuf, rc, rd)


def _scatter(sendbuf, recvbuf, root, comm):
    here = comm.Get_rank() == root
    sb = _buf(sendbuf, writable=False) if here else None
    rb = _opt(recvbuf)
    p = comm.Get_size()
    ref = rb if rb is not None else sb
    if ref is None or (not here and rb is None):
        raise Error(MPI.ERR_BUFFER, "scatter: the root needs sendbuf, every rank a recvbuf (or IN_PLACE at the root)")
    n = _blocks(sb, p, "scatter: sendbuf") if here else rb.count
    if here and rb is not None:
        _same(sb, rb, "scatter")
        if rb.count != n:
            raise Error(MPI.ERR_COUNT, "scatter: recvbuf has %d elements, sendbuf's blocks %d" % (rb.count, n))
    dt = _h(ref.dtype)
    raddr = _send_addr(None) if recvbuf is IN_PLACE else _addr(rb)
    return (_addr(sb), n, dt, raddr, n, dt, int(root), _h(comm)), (sendbuf, recvbuf)


def _scatterv(sendbuf, sendcounts, displs, recvbuf, root, comm):
    here = comm.Get_rank() == root
    sb = _buf(sendbuf, writable=False) if here else None
    rb = _opt(recvbuf)
    p = comm.Get_size()
    ref = rb if rb is not None else sb
    if ref is None or (not here and rb is None):
        raise Error(MPI.ERR_BUFFER, "scatterv: the root needs sendbuf, every rank a recvbuf (or IN_PLACE at the root)")
    sc = _ints(sendcounts, p, "sendcounts") if here else None
    sd = _displs(displs, sendcounts, p, "displs") if here else None
    dt = _h(ref.dtype)
    raddr = _send_addr(None) if recvbuf is IN_PLACE else _addr(rb)
    return (_addr(sb), sc, sd, dt, raddr, rb.count if rb is not None else 0, dt, int(root), _h(comm)), \
        (sendbuf, recvbuf, sc, sd)


def _allgatherv(sendbuf, recvbuf, recvcounts, displs, comm):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    rc, rd = _ints(recvcounts, p, "recvcounts"), _displs(displs, recvcounts, p, "displs")
    if sb is not None:
        _same(sb, rb, "allgatherv")
    dt = _h(rb.dtype)
    return (_send_addr(sb), sb.count if sb is not None else 0, dt, rb.addr, rc, rd, dt, _h(comm)), \
        (sendbuf, recvbuf, rc, rd)


def _reduce_scatter(sendbuf, recvbuf, recvcounts, op, comm):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    rc = _ints(recvcounts, comm.Get_size(), "recvcounts")
    if sb is not None:
        _same(sb, rb, "reduce_scatter")
        if sb.count != sum(rc):
            raise Error(MPI.ERR_COUNT, "reduce_scatter: sendbuf has %d elements, not sum(recvcounts) = %d"
                        % (sb.count, sum(rc)))
    return (_send_addr(sb), rb.addr, rc, _h(rb.dtype), _op(op), _h(comm)), (sendbuf, recvbuf, rc)


def _scan(sendbuf, recvbuf, op, comm, what="scan"):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    if sb is not None:
        _same(sb, rb, what)
        if sb.count != rb.count:
            raise Error(MPI.ERR_COUNT, "%s: sendbuf has %d elements, recvbuf %d" % (what, sb.count, rb.count))
    return (_send_addr(sb), rb.addr, rb.count, _h(rb.dtype), _op(op), _h(comm)), (sendbuf, recvbuf)


def _exscan(sendbuf, recvbuf, op, comm):
    return _scan(sendbuf, recvbuf, op, comm, "exscan")


def _start(name, built):
    args, keep = built
    h = _REQ()
    return _new(_C[name][0](*args, ctypes.byref(h)), h, keep)


def _init(name, built, info, priority, any_order, reqname):
    args, keep = built
    return _persistent(lambda i, h: _C[name][1](*args, i, h), keep, info, priority, any_order, reqname)


_WORLD = MPI.COMM_WORLD


def ialltoall(sendbuf, recvbuf, comm=_WORLD):
    """Like MPI_Ialltoall: sendbuf and recvbuf hold p equal blocks (sendbuf may be IN_PLACE)."""
    return _start("alltoall", _alltoall(sendbuf, recvbuf, comm))


def ialltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None, comm=_WORLD):
    """Like MPI_Ialltoallv (sendbuf may be IN_PLACE; then sendcounts and sdispls are ignored)."""
    return _start("alltoallv", _alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, comm))


def ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm=_WORLD):
    """Like MPI_Ialltoallw: a count, a byte displacement and an mpi4py datatype for each peer."""
    return _start("alltoallw", _alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                          recvtypes, comm))


def igather(sendbuf, recvbuf, root=0, comm=_WORLD):
    """Like MPI_Igather: the root's recvbuf holds p blocks of sendbuf's size (IN_PLACE: the root's
    block is already there); recvbuf may be None elsewhere."""
    return _start("gather", _gather(sendbuf, recvbuf, root, comm))


def igatherv(sendbuf, recvbuf, recvcounts=None, displs=None, root=0, comm=_WORLD):
    """Like MPI_Igatherv; recvbuf, recvcounts and displs count at the root only."""
    return _start("gatherv", _gatherv(sendbuf, recvbuf, recvcounts, displs, root, comm))


def iscatter(sendbuf, recvbuf, root=0, comm=_WORLD):
    """Like MPI_Iscatter: the root's sendbuf holds p blocks of recvbuf's size; the root's recvbuf
    may be IN_PLACE (its block stays in sendbuf); sendbuf may be None elsewhere."""
    return _start("scatter", _scatter(sendbuf, recvbuf, root, comm))


def iscatterv(sendbuf, sendcounts, recvbuf, displs=None, root=0, comm=_WORLD):
    """Like MPI_Iscatterv; sendbuf, sendcounts and displs count at the root only."""
    return _start("scatterv", _scatterv(sendbuf, sendcounts, displs, recvbuf, root, comm))


def iallgatherv(sendbuf, recvbuf, recvcounts, displs=None, comm=_WORLD):
    """Like MPI_Iallgatherv (sendbuf may be IN_PLACE: rank r's block of recvbuf is its input)."""
    return _start("allgatherv", _allgatherv(sendbuf, recvbuf, recvcounts, displs, comm))


def ireduce_scatter(sendbuf, recvbuf, recvcounts, op=SUM, comm=_WORLD):
    """Like MPI_Ireduce_scatter: rank r gets recvcounts[r] elements of the reduction."""
    return _start("reduce_scatter", _reduce_scatter(sendbuf, recvbuf, recvcounts, op, comm))


def iscan(sendbuf, recvbuf, op=SUM, comm=_WORLD):
    """Like MPI_Iscan: rank r gets the reduction of ranks 0..r, in rank order."""
    return _start("scan", _scan(sendbuf, recvbuf, op, comm))


def iexscan(sendbuf, recvbuf, op=SUM, comm=_WORLD):
    """Like MPI_Iexscan: rank r gets the reduction of ranks 0..r-1; rank 0's recvbuf is left as it is."""
    return _start("exscan", _exscan(sendbuf, recvbuf, op, comm))


def alltoall(sendbuf, recvbuf, comm=_WORLD):
    ialltoall(sendbuf, recvbuf, comm).wait()
    return recvbuf


def alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None, comm=_WORLD):
    ialltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, comm).wait()
    return recvbuf


def alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm=_WORLD):
    ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm).wait()
    return recvbuf


def gather(sendbuf, recvbuf, root=0, comm=_WORLD):
    igather(sendbuf, recvbuf, root, comm).wait()
    return recvbuf


def gatherv(sendbuf, recvbuf, recvcounts=None, displs=None, root=0, comm=_WORLD):
    igatherv(sendbuf, recvbuf, recvcounts, displs, root, comm).wait()
    return recvbuf


def scatter(sendbuf, recvbuf, root=0, comm=_WORLD):
    iscatter(sendbuf, recvbuf, root, comm).wait()
    return recvbuf


def scatterv(sendbuf, sendcounts, recvbuf, displs=None, root=0, comm=_WORLD):
    iscatterv(sendbuf, sendcounts, recvbuf, displs, root, comm).wait()
    return recvbuf


def allgatherv(sendbuf, recvbuf, recvcounts, displs=None, comm=_WORLD):
    iallgatherv(sendbuf, recvbuf, recvcounts, displs, comm).wait()
    return recvbuf


def reduce_scatter(sendbuf, recvbuf, recvcounts, op=SUM, comm=_WORLD):
    ireduce_scatter(sendbuf, recvbuf, recvcounts, op, comm).wait()
    return recvbuf


def scan(sendbuf, recvbuf, op=SUM, comm=_WORLD):
    iscan(sendbuf, recvbuf, op, comm).wait()
    return recvbuf


def exscan(sendbuf, recvbuf, op=SUM, comm=_WORLD):
    iexscan(sendbuf, recvbuf, op, comm).wait()
    return recvbuf


# The persistent forms take allreduce_init's options too: priority, any_order, name, info.

def alltoall_init(sendbuf, recvbuf, comm=_WORLD, priority=None, any_order=False, name=None, info=None):
    return _init("alltoall", _alltoall(sendbuf, recvbuf, comm), info, priority, any_order, name)


def alltoallv_init(sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None, comm=_WORLD, priority=None,
                   any_order=False, name=None, info=None):
    return _init("alltoallv", _alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, comm), info,
                 priority, any_order, name)


def alltoallw_init(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm=_WORLD,
                   priority=None, any_order=False, name=None, info=None):
    return _init("alltoallw", _alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                         recvtypes, comm), info, priority, any_order, name)


def gather_init(sendbuf, recvbuf, root=0, comm=_WORLD, priority=None, any_order=False, name=None, info=None):
    return _init("gather", _gather(sendbuf, recvbuf, root, comm), info, priority, any_order, name)


def gatherv_init(sendbuf, recvbuf, recvcounts=None, displs=None, root=0, comm=_WORLD, priority=None, any_order=False,
                 name=None, info=None):
    return _init("gatherv", _gatherv(sendbuf, recvbuf, recvcounts, displs, root, comm), info, priority, any_order,
                 name)


def scatter_init(sendbuf, recvbuf, root=0, comm=_WORLD, priority=None, any_order=False, name=None, info=None):
    return _init("scatter", _scatter(sendbuf, recvbuf, root, comm), info, priority, any_order, name)


def scatterv_init(sendbuf, sendcounts, recvbuf, displs=None, root=0, comm=_WORLD, priority=None, any_order=False,
                  name=None, info=None):
    return _init("scatterv", _scatterv(sendbuf, sendcounts, displs, recvbuf, root, comm), info, priority, any_order,
                 name)


def allgatherv_init(sendbuf, recvbuf, recvcounts, displs=None, comm=_WORLD, priority=None, any_order=False, name=None,
                    info=None):
    return _init("allgatherv", _allgatherv(sendbuf, recvbuf, recvcounts, displs, comm), info, priority, any_order,
                 name)


def reduce_scatter_init(sendbuf, recvbuf, recvcounts, op=SUM, comm=_WORLD, priority=None, any_order=False, name=None,
                        info=None):
    return _init("reduce_scatter", _reduce_scatter(sendbuf, recvbuf, recvcounts, op, comm), info, priority,
                 any_order, name)


def scan_init(sendbuf, recvbuf, op=SUM, comm=_WORLD, priority=None, any_order=False, name=None, info=None):
    return _init("scan", _scan(sendbuf, recvbuf, op, comm), info, priority, any_order, name)


def exscan_init(sendbuf, recvbuf, op=SUM, comm=_WORLD, priority=None, any_order=False, name=None, info=None):
    return _init("exscan", _exscan(sendbuf, recvbuf, op, comm), info, priority, any_order, name)
