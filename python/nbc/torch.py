"""nbc under PyTorch training: a DDP communication hook and the Total Reduce synchronizer.

DDP hook (DDP keeps its buckets and their fixed order; nbc reduces them, one persistent
request per bucket):

    state = nbc.torch.HookState()
    ddp_model.register_comm_hook(state, nbc.torch.allreduce_hook)

Total Reduce (no DDP, no agreed order: every gradient is reduced as soon as it is ready, by a
persistent any-order request, front layers first; the gradients live in nbc's memory):

    sync = nbc.torch.TotalReduce(model)
    loss.backward(); sync.synchronize(); optimizer.step()

Tensors in the memory the ranks of a node share (an allreduce on them runs through it):

    t = nbc.torch.empty((1024, 1024), dtype=torch.float32)
"""
import collections
import math
import threading
import time

import numpy as np
import torch
from mpi4py import MPI

from . import _core as nbc


def empty(shape, dtype=torch.float32):
    """A CPU tensor in nbc's shared memory (nbc.empty's, as bytes), uninitialized; the tensor
    keeps the memory alive, and it is freed with the last tensor on it. An allreduce on such
    tensors on every rank of a communicator on one node reduces out of the peers' memory."""
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
    count = math.prod(shape)
    if count == 0:  # (torch.frombuffer refuses an empty buffer; nothing to share anyway)
        return torch.empty(shape, dtype=dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = nbc.empty(count * itemsize, dtype=np.uint8)
    return torch.frombuffer(raw, dtype=dtype).view(shape)


def zeros(shape, dtype=torch.float32):
    """empty(), filled with zeros."""
    return empty(shape, dtype).zero_()


class HookState:
    """The state of allreduce_hook: one persistent allreduce per DDP bucket, made when the hook
    first sees the bucket's buffer and again only when DDP replaces it (it rebuilds its buckets
    once, after the first iteration), then started at every step. progress says who completes
    DDP's futures:
    'thread' (default): a Python thread tests the requests and completes each future when its
        bucket is reduced, so communication overlaps the rest of the backward pass;
    'wait': the hook waits for its own bucket (no overlap; the simplest, for comparison).
    progress_thread=True also starts nbc's progress thread (NBC_PROGRESS_THREAD does too).
    close() frees the requests."""

    def __init__(self, comm=MPI.COMM_WORLD, progress="thread", poll_seconds=50e-6, progress_thread=False):
        if progress not in ("thread", "wait"):
            raise ValueError("progress is 'thread' or 'wait'")
        self.comm = comm
        self.size = comm.Get_size()
        self.progress = progress
        self.poll_seconds = poll_seconds
        self._requests = {}  # bucket index -> ((address, elements, dtype) of its buffer, request)
        self._pending = collections.deque()
        self._cv = threading.Condition()
        self._thread = None
        if progress_thread:
            nbc.progress_thread(True)

    def _request(self, bucket, tensor):
        """The bucket's persistent request, made anew when its buffer is not the request's.
        DDP calls the hook in bucket order on every rank, so the inits (collective, ordered)
        come in one order everywhere."""
        index = bucket.index()
        key = (tensor.data_ptr(), tensor.numel(), tensor.dtype)
        old = self._requests.get(index)
        if old is None or old[0] != key:
            if old is not None:
                old[1].free()  # completed in its step (DDP waited for it); holds the old buffer
            req = nbc.allreduce_init(nbc.IN_PLACE, tensor, op=nbc.SUM, comm=self.comm, name="bucket%d" % index)
            self._requests[index] = (key, req)
        if bucket.is_last():  # buckets past the last are from before a rebuild: let their buffers go
            for i in [i for i in self._requests if i > index]:
                self._requests.pop(i)[1].free()
        return self._requests[index][1]

    def close(self):
        """Frees the requests (each completes first); the next hook makes them again."""
        for _, req in self._requests.values():
            req.free()
        self._requests = {}
        nbc._free_refused()

    def _submit(self, req, fut, tensor):
        with self._cv:
            self._pending.append((req, fut, tensor))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nbc-ddp-hook", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while not self._pending:
                    self._cv.wait()
                req, fut, tensor = self._pending[0]
            try:
                done = req.test()  # advances every request, not only this one
            except Exception as e:  # the future carries the error to DDP's wait
                with self._cv:
                    self._pending.popleft()
                fut.set_exception(e)
                continue
            if done:
                with self._cv:
                    self._pending.popleft()
                fut.set_result(tensor)
            else:
                time.sleep(self.poll_seconds)


def allreduce_hook(state, bucket):
    """DDP's default allreduce (the average over ranks), by the bucket's persistent allreduce
    on the bucket's own memory, in place; returns the torch.futures.Future DDP waits on."""
    tensor = bucket.buffer()
    tensor.div_(state.size)
    fut = torch.futures.Future()
    req = state._request(bucket, tensor)
    req.start()
    if state.progress == "wait":
        req.wait()
        fut.set_result(tensor)
    else:
        state._submit(req, fut, tensor)
    return fut


class _Poller:
    """A Python thread that calls nbc.progress() every poll_seconds while it is switched on,
    so requests move while the backward pass computes; asleep otherwise."""

    def __init__(self, poll_seconds):
        self.poll_seconds = poll_seconds
        self._on = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="nbc-total-reduce", daemon=True)
        self._thread.start()

    def switch(self, on):
        with self._cv:
            self._on = on
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while not self._on:
                    self._cv.wait()
            try:
                nbc.progress()
            except Exception:  # the failed request reports it to synchronize()
                pass
            time.sleep(self.poll_seconds)


class _Group:
    """Parameters reduced by one persistent request: their gradients are views of one buffer,
    followed by one flag per parameter (1 where this rank produced a gradient this step). The
    buffer is in nbc's memory (shared=True), so on one node the request reduces straight out of
    every rank's gradients, or in torch's own."""

    def __init__(self, params, index, shared):
        self.params = params
        self.index = index
        self.numel = sum(p.numel() for p in params)
        self.buf = (zeros if shared else torch.zeros)(self.numel + len(params), dtype=params[0].dtype)
        self.views = []
        off = 0
        for p in params:
            self.views.append(self.buf[off:off + p.numel()].view_as(p))
            off += p.numel()
        self.flags = self.buf[self.numel:]
        self.ready = 0
        self.started = False
        self.req = None


class TotalReduce:
    """Averages gradients over the ranks of comm like DDP, with no agreed order.

    Each parameter's gradient is a view of a persistent buffer; a hook on its gradient
    accumulator starts that buffer's any-order allreduce (nbc_start_order=any) as soon as the
    gradients of its group are ready, in whatever order this rank's backward pass produces them.
    priorities=True gives front layers (model.parameters() order, the order the next forward
    pass needs them in) the higher priority. fuse_bytes > 0 groups consecutive small parameters
    into one request of up to that many bytes. synchronize() starts what has not started, waits
    for everything, and must come before optimizer.step(). Progress: every hook calls
    nbc.progress(); progress="thread" adds a Python thread that calls it every poll_seconds
    from the first start of a step to synchronize(); progress_thread=True starts nbc's own.
    shared_memory=True (the default) puts the gradients in nbc's memory (nbc.torch.zeros), so
    the ranks of a node reduce out of each other's gradients where they are; False keeps them
    in torch's memory. close() frees the requests; the memory goes with the last .grad on it.

    A parameter for which this rank produced no gradient in a step contributes zeros; if no
    rank produced one, its .grad is set to None after synchronize() (the optimizer skips it),
    as DDP with find_unused_parameters=True leaves globally unused parameters alone.
    """

    def __init__(self, model, comm=MPI.COMM_WORLD, priorities=True, fuse_bytes=0, progress="hooks",
                 poll_seconds=50e-6, progress_thread=False, shared_memory=True):
        if progress not in ("hooks", "thread"):
            raise ValueError("progress is 'hooks' or 'thread'")
        self._poller = _Poller(poll_seconds) if progress == "thread" else None
        self._polling = False
        params = [p for p in (model.parameters() if hasattr(model, "parameters") else model) if p.requires_grad]
        self.comm = comm
        self.size = comm.Get_size()
        self.groups = []
        cur = []
        cur_bytes = 0
        for p in params:
            nbytes = p.numel() * p.element_size()
            if cur and (cur_bytes + nbytes > fuse_bytes or p.dtype != cur[0].dtype):
                self.groups.append(_Group(cur, len(self.groups), shared_memory))
                cur, cur_bytes = [], 0
            cur.append(p)
            cur_bytes += nbytes
        if cur:
            self.groups.append(_Group(cur, len(self.groups), shared_memory))
        n = len(self.groups)
        self._accumulators = []  # the hooks live as long as these do
        self._handles = []  # close() removes the hooks (they hold self, and so the groups)
        self._where = {}
        for g in self.groups:
            # init is collective: made in the same (model) order on every rank
            g.req = nbc.allreduce_init(nbc.IN_PLACE, g.buf, op=nbc.SUM, comm=comm, any_order=True,
                                       priority=(n - g.index) if priorities else 0,
                                       name="grad%d" % g.index)
            for i, p in enumerate(g.params):
                self._where[p] = (g, i)
                p.grad = g.views[i]
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._handles.append(acc.register_hook(self._hook(p)))
                self._accumulators.append(acc)
        self._ready = [False] * sum(len(g.params) for g in self.groups)
        self._marks = {}
        k = 0
        for g in self.groups:
            for p in g.params:
                self._marks[p] = k
                k += 1
        if progress_thread:
            nbc.progress_thread(True)

    def _adopt(self, g, i, p):
        """Makes p.grad the buffer's view again (after zero_grad(set_to_none=True), say)."""
        v = g.views[i]
        if p.grad is None:
            v.zero_()
        elif p.grad.data_ptr() != v.data_ptr():
            v.copy_(p.grad)
        p.grad = v

    def _hook(self, p):
        def hook(*_):
            g, i = self._where[p]
            k = self._marks[p]
            if self._ready[k] or g.started:  # a second use in one step: accumulated in place
                return
            self._ready[k] = True
            self._adopt(g, i, p)
            g.flags[i] = 1
            g.ready += 1
            if g.ready == len(g.params):
                self._start(g)
            nbc.progress()
        return hook

    def _start(self, g):
        g.buf[:g.numel].div_(self.size)
        g.started = True
        g.req.start()
        if self._poller and not self._polling:
            self._polling = True
            self._poller.switch(True)

    def synchronize(self):
        """Starts every group not yet started (their missing gradients as zeros), waits for all,
        and leaves the averaged gradients in .grad."""
        for g in self.groups:
            if g.started:
                continue
            for i, p in enumerate(g.params):
                k = self._marks[p]
                if not self._ready[k]:
                    g.views[i].zero_()
                    g.flags[i] = 0
                    p.grad = g.views[i]
            self._start(g)
        try:
            nbc.waitall([g.req for g in self.groups])
        finally:
            if self._poller:
                self._polling = False
                self._poller.switch(False)
        for g in self.groups:
            for i, p in enumerate(g.params):
                if g.flags[i] == 0:  # no rank produced a gradient
                    p.grad = None
            g.started = False
            g.ready = 0
        self._ready = [False] * len(self._ready)

    def close(self):
        """Frees the requests, then lets the buffers go: nbc refuses to free memory a request is
        bound to, so the requests must go first (the .grad views keep the memory until then)."""
        for g in self.groups:
            g.req.free()
        for h in self._handles:
            h.remove()
        self.groups, self._where, self._handles, self._accumulators = [], {}, [], []
        nbc._free_refused()
