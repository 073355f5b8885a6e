"""The bindings: nbc's C API through ctypes, on NumPy arrays and CPU torch tensors in place.

Buffers are passed by address: the array's own memory, never a copy. A request keeps a
reference to every buffer it uses until it completes (a persistent one, until it is freed),
so an array cannot be collected under a collective in flight.
"""
import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import threading

import numpy as np
from mpi4py import MPI

from . import _lib

lib, FLAVOR, LIBRARY_PATH = _lib.load()
_lib.check_launcher(FLAVOR)

# MPI handles are pointers in Open MPI and ints in MPICH; mpi4py gives their values.
_HANDLE = ctypes.c_void_p if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) else ctypes.c_int
_IN_PLACE_ADDR = {"openmpi": 1, "mpich": -1}[FLAVOR]  # MPI_IN_PLACE in each MPI's mpi.h
_REQ = ctypes.c_void_p
_P = ctypes.c_void_p
_I = ctypes.c_int
_H = _HANDLE


def _sig(name, *args):
    fn = getattr(lib, name)
    fn.argtypes = list(args)
    fn.restype = ctypes.c_int
    return fn


_iallreduce = _sig("nbc_iallreduce", _P, _P, _I, _H, _H, _H, ctypes.POINTER(_REQ))
_ireduce = _sig("nbc_ireduce", _P, _P, _I, _H, _H, _I, _H, ctypes.POINTER(_REQ))
_ibcast = _sig("nbc_ibcast", _P, _I, _H, _I, _H, ctypes.POINTER(_REQ))
_ibarrier = _sig("nbc_ibarrier", _H, ctypes.POINTER(_REQ))
_ireduce_scatter_block = _sig("nbc_ireduce_scatter_block", _P, _P, _I, _H, _H, _H, ctypes.POINTER(_REQ))
_iallgather = _sig("nbc_iallgather", _P, _I, _H, _P, _I, _H, _H, ctypes.POINTER(_REQ))
_iallreduce_multi = _sig("nbc_iallreduce_multi", ctypes.POINTER(_P), _I, _I, _H, _H, _H, ctypes.POINTER(_REQ))
_allreduce_init = _sig("nbc_allreduce_init", _P, _P, _I, _H, _H, _H, _H, ctypes.POINTER(_REQ))
_reduce_init = _sig("nbc_reduce_init", _P, _P, _I, _H, _H, _I, _H, _H, ctypes.POINTER(_REQ))
_bcast_init = _sig("nbc_bcast_init", _P, _I, _H, _I, _H, _H, ctypes.POINTER(_REQ))
_barrier_init = _sig("nbc_barrier_init", _H, _H, ctypes.POINTER(_REQ))
_reduce_scatter_block_init = _sig("nbc_reduce_scatter_block_init", _P, _P, _I, _H, _H, _H, _H,
                                  ctypes.POINTER(_REQ))
_allgather_init = _sig("nbc_allgather_init", _P, _I, _H, _P, _I, _H, _H, _H, ctypes.POINTER(_REQ))
_allreduce_multi_init = _sig("nbc_allreduce_multi_init", ctypes.POINTER(_P), _I, _I, _H, _H, _H, _H,
                             ctypes.POINTER(_REQ))
_start = _sig("nbc_start", ctypes.POINTER(_REQ))
_startall = _sig("nbc_startall", _I, ctypes.POINTER(_REQ))
_request_free = _sig("nbc_request_free", ctypes.POINTER(_REQ))
_set_priority = _sig("nbc_set_priority", _REQ, _I)
_test = _sig("nbc_test", ctypes.POINTER(_REQ), ctypes.POINTER(_I))
_wait = _sig("nbc_wait", ctypes.POINTER(_REQ))
_waitall = _sig("nbc_waitall", _I, ctypes.POINTER(_REQ))
_progress = _sig("nbc_progress")
_progress_thread = _sig("nbc_progress_thread", _I)
_init = _sig("nbc_init")
_finalize = _sig("nbc_finalize")
_alloc_mem = _sig("nbc_alloc_mem", ctypes.c_ssize_t, ctypes.POINTER(_P))  # MPI_Aint: a ptrdiff_t
_free_mem = _sig("nbc_free_mem", _P)
_load_schedules = _sig("nbc_load_schedules", ctypes.c_char_p)
_set_schedule = _sig("nbc_set_schedule", ctypes.c_char_p, ctypes.c_char_p)
_load_tuning = _sig("nbc_load_tuning", ctypes.c_char_p)
_set_selection = _sig("nbc_set_selection", ctypes.c_char_p)
lib.nbc_error_message.argtypes = []
lib.nbc_error_message.restype = ctypes.c_char_p
lib.nbc_version.argtypes = []
lib.nbc_version.restype = ctypes.c_char_p


class _CacheStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("hits", "misses", "evictions", "entries", "bytes", "max_entries", "max_bytes")]


_get_cache_stats = _sig("nbc_get_cache_stats", ctypes.POINTER(_CacheStats))

IN_PLACE = MPI.IN_PLACE
SUM, PROD, MAX, MIN = MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN
LAND, LOR, LXOR, BAND, BOR, BXOR = MPI.LAND, MPI.LOR, MPI.LXOR, MPI.BAND, MPI.BOR, MPI.BXOR


class Error(MPI.Exception):
    """A failed nbc call: an mpi4py MPI.Exception (Get_error_class(), Get_error_code()) that also
    carries nbc's own message (why, in nbc's words) in .message; .error_class is the MPI class,
    .error_code the code the call returned."""

    def __init__(self, code, message=""):
        super().__init__(code)  # gives .error_code and .error_class (mpi4py's properties)
        self.message = message

    def __str__(self):
        base = MPI.Exception.__str__(self)
        return "%s: %s" % (base, self.message) if self.message else base


def error_message():
    """Why this thread's last nbc call failed (empty when none)."""
    return (lib.nbc_error_message() or b"").decode(errors="replace")


def _check(rc):
    if rc != MPI.SUCCESS:
        raise Error(rc, error_message())
    return rc


# NumPy dtypes and the MPI types nbc reduces natively (interp/reduce.c).
_NP_TYPES = {
    np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE,
    np.dtype(np.int8): MPI.INT8_T, np.dtype(np.int16): MPI.INT16_T,
    np.dtype(np.int32): MPI.INT32_T, np.dtype(np.int64): MPI.INT64_T,
    np.dtype(np.uint8): MPI.UINT8_T, np.dtype(np.uint16): MPI.UINT16_T,
    np.dtype(np.uint32): MPI.UINT32_T, np.dtype(np.uint64): MPI.UINT64_T,
    np.dtype(np.bool_): MPI.C_BOOL,
}
_TORCH_TYPES = {}  # filled on first use: importing torch is slow and optional


def _torch_types():
    if not _TORCH_TYPES:
        import torch
        for tt, nt in ((torch.float32, np.float32), (torch.float64, np.float64), (torch.int8, np.int8),
                       (torch.int16, np.int16), (torch.int32, np.int32), (torch.int64, np.int64),
                       (torch.uint8, np.uint8), (torch.bool, np.bool_)):
            _TORCH_TYPES[tt] = _NP_TYPES[np.dtype(nt)]
        if _fast is not None:  # tensors take the compiled path from now on
            _fast.set_torch(torch.Tensor, {tt: _FAST_TYPES.index(mt) for tt, mt in _TORCH_TYPES.items()})
    return _TORCH_TYPES


class _Buf:
    """A buffer by address: (addr, count of elements, MPI datatype, the object kept alive)."""
    __slots__ = ("addr", "count", "dtype", "obj")

    def __init__(self, obj, writable):
        if isinstance(obj, np.ndarray):
            if not obj.flags.c_contiguous:
                raise Error(MPI.ERR_BUFFER, "the array is not contiguous (np.ascontiguousarray makes "
                                            "a copy, which nbc would not write back)")
            if writable and not obj.flags.writeable:
                raise Error(MPI.ERR_BUFFER, "the receive array is read-only")
            dtype = _NP_TYPES.get(obj.dtype)
            if dtype is None:
                raise Error(MPI.ERR_TYPE, "nbc has no MPI type for NumPy dtype %s" % obj.dtype)
            self.addr, self.count = obj.ctypes.data, obj.size
        elif type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr"):
            if obj.device.type != "cpu":
                raise Error(MPI.ERR_BUFFER, "the tensor is on %s: nbc reduces CPU memory" % obj.device)
            if not obj.is_contiguous():
                raise Error(MPI.ERR_BUFFER, "the tensor is not contiguous")
            dtype = _torch_types().get(obj.dtype)
            if dtype is None:
                raise Error(MPI.ERR_TYPE, "nbc has no MPI type for torch dtype %s" % obj.dtype)
            self.addr, self.count = obj.data_ptr(), obj.numel()
        else:
            raise Error(MPI.ERR_BUFFER, "a buffer must be a NumPy array or a CPU torch tensor, not %s"
                        % type(obj).__name__)
        if self.count > 2**31 - 1:
            raise Error(MPI.ERR_COUNT, "%d elements do not fit in a C int" % self.count)
        self.dtype, self.obj = dtype, obj


def _buf(obj, writable=True):
    return _Buf(obj, writable)


def _send(obj):
    """A send buffer, or None for MPI.IN_PLACE."""
    return None if obj is IN_PLACE or obj is None else _Buf(obj, writable=False)


def _send_addr(sb):
    return _IN_PLACE_ADDR if sb is None else sb.addr


def _same(a, b, what):
    if a.dtype != b.dtype:
        raise Error(MPI.ERR_TYPE, "%s: the buffers' element types differ" % what)


def _h(obj):
    return MPI._handleof(obj)


_OPS = (SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR)


def _op(op):
    if not isinstance(op, MPI.Op):
        raise Error(MPI.ERR_OP, "op must be an mpi4py MPI.Op such as nbc.SUM, not %r" % (op,))
    return _h(op)


_orphans = []  # requests dropped while active: kept (buffers and all) until they complete


_reaping = threading.Lock()  # one thread at a time: two testing one request would both free it


def _reap():
    if _orphans and _reaping.acquire(blocking=False):
        try:
            for r in list(_orphans):
                if r.test():
                    _orphans.remove(r)
                    r.free()
        finally:
            _reaping.release()
    _free_refused()


class Request:
    """One collective: test() / wait(); a persistent one also start(), set_priority(), free().
    It keeps its buffers alive while they may be in use."""

    def __init__(self, handle, keep, persistent=False, name=None):
        self._handle = handle
        self._keep = keep
        self.persistent = persistent
        self.name = name
        self._active = not persistent

    @property
    def active(self):
        """True between a start (or a non-blocking call) and the test/wait that completes it."""
        return self._active

    def _done(self):
        self._active = False
        if not self.persistent:
            self._keep = None

    def test(self):
        """Advances every active request; True when this one has completed (or is inactive)."""
        if self._handle.value is None or not self._active:
            return True
        flag = ctypes.c_int(0)
        rc = _test(ctypes.byref(self._handle), ctypes.byref(flag))
        if flag.value or rc != MPI.SUCCESS:
            self._done()
        _check(rc)
        return bool(flag.value)

    def wait(self):
        """Completes the request (the GIL is released while nbc waits)."""
        if self._handle.value is None or not self._active:
            return
        rc = _wait(ctypes.byref(self._handle))
        self._done()
        _check(rc)

    def start(self):
        """Starts a persistent request (inactive; its buffers must not move)."""
        if not self.persistent:
            raise Error(MPI.ERR_REQUEST, "start: not a persistent request")
        _check(_start(ctypes.byref(self._handle)))
        self._active = True

    def set_priority(self, priority):
        """Changes a persistent request's priority, from its next start on (higher runs first)."""
        _check(_set_priority(self._handle, int(priority)))

    def free(self):
        """Releases the request; an active one is waited for first."""
        if self._handle.value is None:
            return
        self.wait()
        if self.persistent:
            _check(_request_free(ctypes.byref(self._handle)))
        self._handle = ctypes.c_void_p(None)
        self._keep = None
        _free_refused()

    def __del__(self):
        # dropped while active: kept alive, buffers and all, until progress() sees it complete
        try:
            if self._handle.value is None or MPI.Is_finalized() or sys.is_finalizing():
                return
            if self._active:
                _orphans.append(Request(self._handle, self._keep, self.persistent, self.name))
                _orphans[-1]._active = True
                self._handle = ctypes.c_void_p(None)
            elif self.persistent:
                _request_free(ctypes.byref(self._handle))
                self._handle = ctypes.c_void_p(None)
                self._keep = None
                _free_refused()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


def _nbytes(keep):
    n = 0
    for o in keep:
        if isinstance(o, list):
            n += _nbytes(o)
        elif hasattr(o, "nbytes") and not isinstance(o, ctypes.Array):
            n += int(o.nbytes)
    return n


def _new(rc, handle, keep, persistent=False, name=None):
    _check(rc)
    if _wrap_fast:  # a request of the compiled path, whoever made it
        return _fast.wrap(handle.value or 0, keep, persistent, name, _nbytes(keep))
    return Request(handle, keep, persistent, name)


def _info(info, priority, any_order, name):
    """An MPI.Info with nbc's keys (the caller frees it), or MPI.INFO_NULL."""
    if priority is None and not any_order and name is None:
        return info if info is not None else MPI.INFO_NULL, False
    i = MPI.Info.Create() if info is None else info.Dup()
    if priority is not None:
        i.Set("nbc_priority", str(int(priority)))
    if any_order:
        i.Set("nbc_start_order", "any")
    if name is not None:
        i.Set("nbc_name", str(name))
    return i, True


# ---- memory the ranks of a node share (nbc_alloc_mem) ----

_blocks = {}  # the blocks allocated and not yet freed: address -> bytes (for from_alloc_mem)
_refused = []  # blocks whose free nbc refused (a request still bound to them): freed later
_freeing = threading.Lock()  # one thread at a time: two retrying one block would free it twice


def _free_refused():
    """Frees the blocks nbc refused to free while a request was bound to them; called after
    requests are freed (and by progress()), so a block the collector finalized before its
    request is freed once that request has gone."""
    if not _refused or not _freeing.acquire(blocking=False):
        return
    try:
        for addr in list(_refused):
            if _free_mem(addr) != MPI.ERR_BUFFER:
                _refused.remove(addr)
                _blocks.pop(addr, None)
    finally:
        _freeing.release()


class _Memory:
    """One block from nbc_alloc_mem, seen by NumPy through __array_interface__: an array made
    from it has it as its base, so the block is freed (nbc_free_mem) when the last array on it
    is collected."""

    def __init__(self, shape, dtype):
        self.addr = None
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise Error(MPI.ERR_ARG, "negative dimensions in shape %r" % (shape,))
        _free_refused()
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        p = _P()
        _check(_alloc_mem(nbytes, ctypes.byref(p)))
        self.addr = p.value
        _blocks[self.addr] = max(nbytes, 1)
        self.__array_interface__ = {"data": (self.addr, False), "shape": shape, "typestr": dtype.str,
                                    "descr": dtype.descr, "version": 3}

    def __del__(self):
        # After MPI_Finalize nbc cannot be called, and while the interpreter shuts down the
        # modules may be gone: the block is left to the process's end, which takes the
        # segment with it.
        try:
            if self.addr is None or sys.is_finalizing() or MPI.Is_finalized():
                return
            addr, self.addr = self.addr, None
            # A request holds its buffers, so it normally goes first; if the collector got here
            # before it (both garbage at once), nbc refuses while the request is bound to the
            # block, and the block stays until the request is freed.
            if _free_mem(addr) == MPI.ERR_BUFFER:
                _refused.append(addr)
            else:
                _blocks.pop(addr, None)
        except Exception:
            pass


def from_alloc_mem(buf):
    """True when buf (a NumPy array, a CPU tensor, or an address) lies in a block from
    nbc.empty, nbc.zeros or nbc.torch.empty/zeros (nbc_alloc_mem) that is still allocated."""
    if isinstance(buf, np.ndarray):
        lo, n = buf.ctypes.data, buf.nbytes
    elif hasattr(buf, "data_ptr"):
        lo, n = buf.data_ptr(), buf.numel() * buf.element_size()
    else:
        lo, n = int(buf), 1
    return any(base <= lo and lo + n <= base + size for base, size in list(_blocks.items()))


def empty(shape, dtype=np.float64):
    """A NumPy array in nbc's shared memory (nbc_alloc_mem), uninitialized. An allreduce whose
    buffers are such arrays on every rank of a communicator on one node reduces straight out
    of the peers' memory; the memory is freed with the last array on it."""
    return np.asarray(_Memory(shape, dtype))


def zeros(shape, dtype=np.float64):
    """empty(), filled with zeros."""
    a = empty(shape, dtype)
    a.fill(0)
    return a


# ---- the non-blocking collectives ----

def iallreduce(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD):
    """Like MPI_Iallreduce: sendbuf may be nbc.IN_PLACE (then recvbuf is the input)."""
    rb, sb = _buf(recvbuf), _send(sendbuf)
    if sb is not None:
        _same(sb, rb, "iallreduce")
        if sb.count != rb.count:
            raise Error(MPI.ERR_COUNT, "iallreduce: sendbuf has %d elements, recvbuf %d" % (sb.count, rb.count))
    h = _REQ()
    return _new(_iallreduce(_send_addr(sb), rb.addr, rb.count, _h(rb.dtype), _op(op), _h(comm), ctypes.byref(h)),
                h, (sendbuf, recvbuf))


def ireduce(sendbuf, recvbuf, op=SUM, root=0, comm=MPI.COMM_WORLD):
    """Like MPI_Ireduce; recvbuf may be None except at root; IN_PLACE at root only."""
    sb = _send(sendbuf)
    rb = _buf(recvbuf) if recvbuf is not None else None
    ref = sb if sb is not None else rb
    if ref is None:
        raise Error(MPI.ERR_BUFFER, "ireduce: no buffer")
    if sb is not None and rb is not None:
        _same(sb, rb, "ireduce")
    h = _REQ()
    return _new(_ireduce(_send_addr(sb), rb.addr if rb else None, ref.count, _h(ref.dtype), _op(op), int(root),
                         _h(comm), ctypes.byref(h)), h, (sendbuf, recvbuf))


def ibcast(buf, root=0, comm=MPI.COMM_WORLD):
    """Like MPI_Ibcast."""
    b = _buf(buf)
    h = _REQ()
    return _new(_ibcast(b.addr, b.count, _h(b.dtype), int(root), _h(comm), ctypes.byref(h)), h, (buf,))


def ibarrier(comm=MPI.COMM_WORLD):
    """Like MPI_Ibarrier."""
    h = _REQ()
    return _new(_ibarrier(_h(comm), ctypes.byref(h)), h, ())


def _scatter_count(sb, rb, p, what):
    if sb is None:  # in place: recvbuf holds p blocks
        if rb.count % p:
            raise Error(MPI.ERR_COUNT, "%s in place: recvbuf's %d elements are not p = %d blocks" % (what, rb.count, p))
        return rb.count // p
    return rb.count


def ireduce_scatter_block(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD):
    """Like MPI_Ireduce_scatter_block: recvbuf's size is the block; sendbuf holds p blocks.
    In place, recvbuf holds the p blocks and gets the result in its first block."""
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    n = _scatter_count(sb, rb, p, "ireduce_scatter_block")
    if sb is not None:
        _same(sb, rb, "ireduce_scatter_block")
        if sb.count != n * p:
            raise Error(MPI.ERR_COUNT, "ireduce_scatter_block: sendbuf has %d elements, not p * %d" % (sb.count, n))
    h = _REQ()
    return _new(_ireduce_scatter_block(_send_addr(sb), rb.addr, n, _h(rb.dtype), _op(op), _h(comm),
                                       ctypes.byref(h)), h, (sendbuf, recvbuf))


def iallgather(sendbuf, recvbuf, comm=MPI.COMM_WORLD):
    """Like MPI_Iallgather: recvbuf holds p blocks of sendbuf's size (in place: rank r's block of
    recvbuf is its input)."""
    rb, sb = _buf(recvbuf), _send(sendbuf)
    p = comm.Get_size()
    if rb.count % p:
        raise Error(MPI.ERR_COUNT, "iallgather: recvbuf's %d elements are not p = %d blocks" % (rb.count, p))
    n = rb.count // p
    if sb is not None:
        _same(sb, rb, "iallgather")
        if sb.count != n:
            raise Error(MPI.ERR_COUNT, "iallgather: sendbuf has %d elements, recvbuf's blocks %d" % (sb.count, n))
    h = _REQ()
    return _new(_iallgather(_send_addr(sb), n, _h(rb.dtype), rb.addr, n, _h(rb.dtype), _h(comm), ctypes.byref(h)),
                h, (sendbuf, recvbuf))


def _multi(bufs):
    bs = [_buf(b) for b in bufs]
    if not bs:
        raise Error(MPI.ERR_COUNT, "iallreduce_multi: no buffers")
    for b in bs[1:]:
        _same(bs[0], b, "iallreduce_multi")
        if b.count != bs[0].count:
            raise Error(MPI.ERR_COUNT, "iallreduce_multi: the buffers' sizes differ")
    return bs, (_P * len(bs))(*[b.addr for b in bs])


def iallreduce_multi(bufs, op=SUM, comm=MPI.COMM_WORLD):
    """Gloo's multi-buffer allreduce: reduces every process's buffers (same size and type) and
    leaves the result in all of them."""
    bs, arr = _multi(bufs)
    h = _REQ()
    return _new(_iallreduce_multi(arr, len(bs), bs[0].count, _h(bs[0].dtype), _op(op), _h(comm), ctypes.byref(h)),
                h, (list(bufs), arr))


# ---- the blocking forms: the non-blocking call, then wait ----

def allreduce(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD):
    iallreduce(sendbuf, recvbuf, op, comm).wait()
    return recvbuf


def reduce(sendbuf, recvbuf, op=SUM, root=0, comm=MPI.COMM_WORLD):
    ireduce(sendbuf, recvbuf, op, root, comm).wait()
    return recvbuf


def bcast(buf, root=0, comm=MPI.COMM_WORLD):
    ibcast(buf, root, comm).wait()
    return buf


def barrier(comm=MPI.COMM_WORLD):
    ibarrier(comm).wait()


def reduce_scatter_block(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD):
    ireduce_scatter_block(sendbuf, recvbuf, op, comm).wait()
    return recvbuf


def allgather(sendbuf, recvbuf, comm=MPI.COMM_WORLD):
    iallgather(sendbuf, recvbuf, comm).wait()
    return recvbuf


def allreduce_multi(bufs, op=SUM, comm=MPI.COMM_WORLD):
    iallreduce_multi(bufs, op, comm).wait()
    return bufs


# ---- persistent collectives: init once (same order on every rank), start many times ----

def _persistent(call, keep, info, priority, any_order, name):
    i, owned = _info(info, priority, any_order, name)
    h = _REQ()
    try:
        rc = call(_h(i), ctypes.byref(h))
    finally:
        if owned:
            i.Free()
    return _new(rc, h, keep, persistent=True, name=name)


def allreduce_init(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None,
                   info=None):
    """A persistent allreduce. any_order=True: it may be started in a different order on every
    rank (nbc_start_order=any); priority: higher runs first (nbc_priority); name: in stall reports."""
    rb, sb = _buf(recvbuf), _send(sendbuf)
    if sb is not None:
        _same(sb, rb, "allreduce_init")
        if sb.count != rb.count:
            raise Error(MPI.ERR_COUNT, "allreduce_init: sendbuf has %d elements, recvbuf %d" % (sb.count, rb.count))
    return _persistent(lambda i, h: _allreduce_init(_send_addr(sb), rb.addr, rb.count, _h(rb.dtype), _op(op),
                                                    _h(comm), i, h), (sendbuf, recvbuf), info, priority, any_order,
                       name)


def reduce_init(sendbuf, recvbuf, op=SUM, root=0, comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None,
                info=None):
    sb = _send(sendbuf)
    rb = _buf(recvbuf) if recvbuf is not None else None
    ref = sb if sb is not None else rb
    if ref is None:
        raise Error(MPI.ERR_BUFFER, "reduce_init: no buffer")
    return _persistent(lambda i, h: _reduce_init(_send_addr(sb), rb.addr if rb else None, ref.count, _h(ref.dtype),
                                                 _op(op), int(root), _h(comm), i, h), (sendbuf, recvbuf), info,
                       priority, any_order, name)


def bcast_init(buf, root=0, comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None, info=None):
    b = _buf(buf)
    return _persistent(lambda i, h: _bcast_init(b.addr, b.count, _h(b.dtype), int(root), _h(comm), i, h), (buf,),
                       info, priority, any_order, name)


def barrier_init(comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None, info=None):
    return _persistent(lambda i, h: _barrier_init(_h(comm), i, h), (), info, priority, any_order, name)


def reduce_scatter_block_init(sendbuf, recvbuf, op=SUM, comm=MPI.COMM_WORLD, priority=None, any_order=False,
                              name=None, info=None):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    n = _scatter_count(sb, rb, comm.Get_size(), "reduce_scatter_block_init")
    return _persistent(lambda i, h: _reduce_scatter_block_init(_send_addr(sb), rb.addr, n, _h(rb.dtype), _op(op),
                                                               _h(comm), i, h), (sendbuf, recvbuf), info, priority,
                       any_order, name)


def allgather_init(sendbuf, recvbuf, comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None, info=None):
    rb, sb = _buf(recvbuf), _send(sendbuf)
    n = rb.count // comm.Get_size()
    return _persistent(lambda i, h: _allgather_init(_send_addr(sb), n, _h(rb.dtype), rb.addr, n, _h(rb.dtype),
                                                    _h(comm), i, h), (sendbuf, recvbuf), info, priority, any_order,
                       name)


def allreduce_multi_init(bufs, op=SUM, comm=MPI.COMM_WORLD, priority=None, any_order=False, name=None, info=None):
    bs, arr = _multi(bufs)
    return _persistent(lambda i, h: _allreduce_multi_init(arr, len(bs), bs[0].count, _h(bs[0].dtype), _op(op),
                                                          _h(comm), i, h), (list(bufs), arr), info, priority,
                       any_order, name)


# ---- many requests, progress, the library ----

def _handles(reqs):
    return (_REQ * len(reqs))(*[r._handle.value for r in reqs])


def startall(reqs):
    """Starts persistent requests (nbc_startall)."""
    reqs = list(reqs)
    for r in reqs:
        if not r.persistent:
            raise Error(MPI.ERR_REQUEST, "startall: not a persistent request")
    arr = _handles(reqs)
    _check(_startall(len(reqs), arr))
    for r in reqs:
        r._active = True


def waitall(reqs):
    """Completes every request (nbc_waitall)."""
    reqs = [r for r in reqs if r._active and r._handle.value is not None]
    if not reqs:
        return
    arr = _handles(reqs)
    rc = _waitall(len(reqs), arr)
    for r, v in zip(reqs, arr):
        r._handle.value = v
        r._done()
    _check(rc)


def testall(reqs):
    """True when every request has completed (each is tested, which advances all)."""
    return all([r.test() for r in reqs])


def progress():
    """Advances every active request; returns how many completed in this call."""
    _reap()
    rc = _progress()
    if rc < 0:
        raise Error(-rc, error_message())
    return rc


def progress_thread(on=True):
    """Starts (or stops) nbc's progress thread, which drives every request (needs
    MPI_THREAD_MULTIPLE, mpi4py's default)."""
    _check(_progress_thread(1 if on else 0))


def init():
    _check(_init())


def finalize():
    """Frees the library (MPI.Finalize does it otherwise); fails while requests are active."""
    _reap()
    _check(_finalize())


def load_schedules(path):
    """Loads a schedule file, or every *.nbs of a directory."""
    _check(_load_schedules(str(path).encode()))


def set_schedule(collective, name=None):
    """Forces a schedule for a collective ('allreduce', ...); None restores automatic choice."""
    _check(_set_schedule(collective.encode(), name.encode() if name else None))


def load_tuning(path):
    _check(_load_tuning(str(path).encode()))


def set_selection(mode):
    """'rules' (the default) or 'model[:alpha=..,beta=..,gamma=..]'."""
    _check(_set_selection(mode.encode()))


def cache_stats():
    """The program cache's counters, as a dict."""
    s = _CacheStats()
    _check(_get_cache_stats(ctypes.byref(s)))
    return {n: getattr(s, n) for n, _ in _CacheStats._fields_}


def version():
    """The version of the libnbc.so loaded."""
    return lib.nbc_version().decode()


# ---- the compiled path: nbc._fast ----
#
# python/nbc/_fast.c, which `make` builds (docs/python.md), does the common calls (iallreduce,
# allreduce, ibcast, bcast, ibarrier, barrier on contiguous arrays and CPU tensors) and every
# request's test, wait, start and free with no Python in between; whatever it does not handle
# itself comes back to the functions above. It links neither nbc nor an MPI: it gets nbc's
# functions from the library loaded above. NBC_FAST=0 keeps to ctypes.

_CTYPES = {n: globals()[n] for n in ("iallreduce", "allreduce", "ibcast", "bcast", "ibarrier", "barrier",
                                     "startall", "waitall", "Request")}
_FAST_TYPES = [MPI.FLOAT, MPI.DOUBLE, MPI.INT8_T, MPI.INT16_T, MPI.INT32_T, MPI.INT64_T, MPI.UINT8_T,
               MPI.UINT16_T, MPI.UINT32_T, MPI.UINT64_T, MPI.C_BOOL]  # _fast.c's order
_wrap_fast = False


def _find_fast():
    """nbc._fast: next to this file (installed), else in the build tree of the checkout (the
    build for mpi4py's MPI first; the module itself is the same for both). None when absent,
    disabled (NBC_FAST=0) or not loadable by this Python."""
    if os.environ.get("NBC_FAST", "1") == "0":
        return None
    try:
        from . import _fast as mod
        return mod
    except ImportError:
        pass
    root = _lib._source_root()
    if root is None:
        return None
    for f in [FLAVOR] + [x for x in _lib.FLAVORS if x != FLAVOR]:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(root, _lib.FLAVORS[f]["build"], "python", "nbc", "_fast" + suffix)
            if not os.path.isfile(path):
                continue
            try:
                spec = importlib.util.spec_from_file_location(__package__ + "._fast", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            except ImportError:
                continue
            sys.modules[spec.name] = mod
            return mod
    return None


def _request_error(message):
    raise Error(MPI.ERR_REQUEST, message)


def _on_drop(handle, keep, persistent, active, name, nbytes):
    """A compiled request collected while active (kept until progress() sees it complete, as
    with ctypes), or persistent and never freed (freed)."""
    if MPI.Is_finalized() or sys.is_finalizing():
        return
    if active:
        _orphans.append(_fast.wrap(handle, keep, persistent, name, nbytes, True))
    elif persistent:
        _request_free(ctypes.byref(_REQ(handle)))
        _free_refused()


def _addr(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


_fast = _find_fast()
_FAST_SETUP = {}
if _fast is not None:
    _FAST_SETUP = {
        **{n: _addr(getattr(lib, n)) for n in ("nbc_iallreduce", "nbc_ibcast", "nbc_ibarrier", "nbc_wait",
                                               "nbc_start", "nbc_request_free", "nbc_test", "nbc_startall",
                                               "nbc_waitall", "nbc_set_priority")},
        "int_handles": _HANDLE is ctypes.c_int, "types": tuple(_h(t) for t in _FAST_TYPES),
        "in_place": _IN_PLACE_ADDR, "MPI": MPI, "ndarray": np.ndarray, "check": _check,
        "error": _request_error, "on_drop": _on_drop,
        "slow": tuple(_CTYPES[n] for n in ("iallreduce", "allreduce", "ibcast", "bcast", "ibarrier", "barrier")),
    }
    _fast.setup(_FAST_SETUP)
    if _TORCH_TYPES:
        _TORCH_TYPES.clear()
        _torch_types()


def fast():
    """True when calls go through the compiled module nbc._fast (see use_fast)."""
    return _wrap_fast


def use_fast(on=True):
    """Routes the calls through nbc._fast (on, the default when it was found) or through ctypes
    alone (off); returns whether the compiled path is in use. For tests and benchmarks: a request
    must be completed by the path that made it."""
    global _wrap_fast
    on = bool(on) and _fast is not None
    _wrap_fast = on
    names = {n: getattr(_fast, n) for n in _CTYPES} if on else dict(_CTYPES)
    globals().update(names)
    pkg = sys.modules.get(__package__)
    if pkg is not None:
        for n, v in names.items():
            if hasattr(pkg, n):
                setattr(pkg, n, v)
    return on


use_fast(True)
