"""PyTorch on nbc (run at p = 2): CPU tensors in place, the DDP hook and the Total Reduce
synchronizer against DDP with Gloo (same seed, same data), parameters with no gradient on some
ranks, and gradients produced in different orders on different ranks; Total Reduce's buffers
in nbc's memory, and the hook's one persistent request per DDP bucket."""
import gc
import os
import socket
import unittest

import numpy as np
from mpi4py import MPI

import nbc
from nbc import _core
from test_memory import Frees  # (records nbc_free_mem's calls)

torch = None
try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import nbc.torch as nbt
except ImportError as e:  # unittest reports every test as skipped, with the reason
    MISSING = str(e)
else:
    MISSING = None

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
STEPS = 6


def setUpModule():
    if MISSING:
        raise unittest.SkipTest("torch: %s" % MISSING)
    torch.set_num_threads(1)
    if not dist.is_initialized():
        port = None
        if RANK == 0:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
        port = COMM.bcast(port, root=0)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=RANK, world_size=P)


class Towers(nn.Module if torch else object):
    """Independent towers summed: the order the forward pass runs them in (per rank, per step)
    decides the order the backward pass produces their gradients in. unused names towers that
    get no input on some ranks."""

    def __init__(self, n=4, width=24, unused=()):
        super().__init__()
        self.inp = nn.Linear(8, width)
        self.towers = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 4))
                                     for _ in range(n)])
        self.never = nn.Linear(3, 3)  # no rank ever uses it
        self.order = list(range(n))
        self.unused = unused

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        out = 0
        for i in self.order:
            if i in self.unused:
                continue
            out = out + self.towers[i](h)
        return out


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)


def train(kind, orders=None, unused_on=None, hook_progress="thread", fuse=0, priorities=True, progress="hooks",
          shared=True):
    """STEPS steps of SGD with momentum; returns the flat parameters and the record of the
    order gradients were produced in on this rank."""
    torch.manual_seed(0)
    model = Towers()
    seen = []
    for i, t in enumerate(model.towers):
        t[0].weight.register_hook(lambda g, i=i: seen.append(i))
    sync = state = None
    net = model
    if kind in ("gloo", "hook"):
        net = DDP(model, find_unused_parameters=True)  # `never` is never used
        if kind == "hook":
            state = nbt.HookState(progress=hook_progress)
            net.register_comm_hook(state, nbt.allreduce_hook)
    elif kind == "total":
        sync = nbt.TotalReduce(model, priorities=priorities, fuse_bytes=fuse, progress=progress, shared_memory=shared)
        if shared:
            assert all(nbc.from_alloc_mem(p.grad) for p in model.parameters()), "a gradient is not in nbc's memory"
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        model.order = orders(step) if orders else list(range(len(model.towers)))
        model.unused = unused_on(step) if unused_on else ()
        x, y = batch(step, RANK)
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        if sync:
            sync.synchronize()
            self_check_never(model)
        opt.step()
    if sync:
        sync.close()
    if state:
        state.close()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy(), seen


def self_check_never(model):
    assert model.never.weight.grad is None, "a parameter no rank used got a gradient"


@unittest.skipIf(MISSING, "torch: %s" % MISSING)
class Tensors(unittest.TestCase):
    def test_cpu_tensors_in_place(self):
        for dtype in (torch.float32, torch.float64, torch.int64, torch.int32):
            t = torch.arange(1001, dtype=dtype) + RANK
            ptr = t.data_ptr()
            nbc.allreduce(nbc.IN_PLACE, t)
            self.assertEqual(t.data_ptr(), ptr)
            want = sum(torch.arange(1001, dtype=dtype) + r for r in range(P))
            self.assertTrue(torch.equal(t, want))
        src = torch.ones(6, 5)[:, 1]  # not contiguous
        with self.assertRaises(nbc.Error) as cm:
            nbc.allreduce(src, torch.zeros(6))
        self.assertEqual(cm.exception.error_class, MPI.ERR_BUFFER)
        with self.assertRaises(nbc.Error) as cm:
            nbc.allreduce(torch.zeros(3, dtype=torch.float16), torch.zeros(3, dtype=torch.float16))
        self.assertEqual(cm.exception.error_class, MPI.ERR_TYPE)


@unittest.skipIf(MISSING, "torch: %s" % MISSING)
class Training(unittest.TestCase):
    def same_everywhere(self, params, what):
        everyone = COMM.allgather(params)  # once per test, after training
        for r, other in enumerate(everyone):
            np.testing.assert_array_equal(other, params, err_msg="%s: rank %d differs from rank %d" % (what, r, RANK))

    def same_as(self, params, ref, what):
        # (run at p = 2, where a sum of two is the same in any order: bit for bit what DDP computes)
        np.testing.assert_array_equal(params, ref, err_msg=what + " (bit for bit)")

    def test_hook_and_total_reduce_match_ddp_gloo(self):
        ref, _ = train("gloo")
        self.same_everywhere(ref, "DDP with Gloo")
        for what, kw in (("DDP + nbc hook (thread)", dict(kind="hook")),
                         ("DDP + nbc hook (wait)", dict(kind="hook", hook_progress="wait")),
                         ("Total Reduce", dict(kind="total")),
                         ("Total Reduce, a polling thread", dict(kind="total", progress="thread")),
                         ("Total Reduce, private memory", dict(kind="total", shared=False)),
                         ("Total Reduce, no priorities, fused", dict(kind="total", priorities=False, fuse=4096))):
            got, _ = train(**kw)
            self.same_everywhere(got, what)
            self.same_as(got, ref, what)
        none, _ = train("none")
        if P > 1:
            self.assertFalse(np.allclose(none, ref), "training without communication matched: the test sees nothing")

    def test_unused_parameters(self):
        """Tower 1 gets no gradient on rank 0 in even steps, tower 2 on every rank but the last
        one, and `never` on no rank: those contribute zeros where absent (DDP with
        find_unused_parameters=True does the same), and `never` keeps grad None."""
        def unused_on(step):
            u = set()
            if RANK == 0 and step % 2 == 0:
                u.add(1)
            if RANK != P - 1:
                u.add(2)
            return u
        ref, _ = train("gloo", unused_on=unused_on)
        for what, kw in (("Total Reduce", dict(kind="total")),
                         ("Total Reduce fused", dict(kind="total", fuse=1 << 20))):
            got, _ = train(unused_on=unused_on, **kw)
            self.same_everywhere(got, what)
            self.same_as(got, ref, what)

    def test_different_gradient_orders(self):
        """Each rank runs the towers in its own order, changing every step, so the backward
        passes produce gradients in different orders on different ranks."""
        def orders(step):
            o = [0, 1, 2, 3]
            k = (RANK + step) % 4
            o = o[k:] + o[:k]
            return o[::-1] if RANK % 2 else o
        ref, _ = train("gloo", orders=orders)
        got, seen = train("total", orders=orders, progress="thread")
        all_seen = COMM.allgather(seen)
        if P > 1:
            self.assertNotEqual(all_seen[0], all_seen[1], "the ranks produced gradients in the same order")
        self.same_everywhere(got, "Total Reduce, different orders")
        self.same_as(got, ref, "Total Reduce, different orders")


class Inits:
    """Counts nbc.allreduce_init's calls while in use."""

    def __enter__(self):
        self.count, self.real = 0, _core.allreduce_init

        def init(*args, **kw):
            self.count += 1
            return self.real(*args, **kw)
        _core.allreduce_init = init
        return self

    def __exit__(self, *exc):
        _core.allreduce_init = self.real


@unittest.skipIf(MISSING, "torch: %s" % MISSING)
class Memory(unittest.TestCase):
    def test_total_reduce_buffers(self):
        """shared_memory=True: every group's buffer (so every .grad) is a block of nbc's memory,
        freed once, without an error, after close() and the last .grad; False: torch's memory."""
        torch.manual_seed(0)
        model = Towers()
        gc.collect()  # earlier tests' garbage frees its own blocks
        with Frees() as f:
            sync = nbt.TotalReduce(model, fuse_bytes=4096)
            bufs = sorted(g.buf.data_ptr() for g in sync.groups)
            self.assertTrue(all(nbc.from_alloc_mem(g.buf) for g in sync.groups))
            x, y = batch(0, RANK)
            ((model(x) - y) ** 2).mean().backward()
            sync.synchronize()
            self.assertTrue(all(nbc.from_alloc_mem(p.grad) for p in model.parameters() if p.grad is not None))
            sync.close()
            self.assertEqual(f.calls, [])  # the .grad views still hold the memory
            del sync
            model.zero_grad(set_to_none=True)
            gc.collect()
            self.assertEqual(sorted(a for a, _ in f.calls), bufs)
            self.assertTrue(all(rc == MPI.SUCCESS for _, rc in f.calls), f.calls)
        private = nbt.TotalReduce(Towers(), shared_memory=False)
        self.assertFalse(any(nbc.from_alloc_mem(g.buf) for g in private.groups))
        private.close()

    def test_block_finalized_before_its_request(self):
        """The collector may finalize a block before the request bound to it: nbc refuses the
        free, and the block is freed once the request is."""
        a = nbc.zeros(1000)
        addr = a.ctypes.data
        req = nbc.allreduce_init(nbc.IN_PLACE, a)
        with Frees() as f:
            a.base.__del__()  # what the collector would do first
            self.assertEqual(f.calls, [(addr, MPI.ERR_BUFFER)])
            self.assertTrue(nbc.from_alloc_mem(addr))
            req.free()
            del a, req
            nbc.progress()
            self.assertEqual(f.calls, [(addr, MPI.ERR_BUFFER), (addr, MPI.SUCCESS)])
            self.assertFalse(nbc.from_alloc_mem(addr))


@unittest.skipIf(MISSING, "torch: %s" % MISSING)
class Hook(unittest.TestCase):
    def test_one_request_per_bucket(self):
        """Buckets of 0.3 MB over six layers of 263 KB: DDP rebuilds them after the first
        iteration; the hook makes a request per bucket in each of the first two steps and none
        after, keeps one per bucket, and trains as DDP with Gloo does."""
        def run(state):
            torch.manual_seed(0)
            model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(6)])
            net = DDP(model, bucket_cap_mb=0.3)
            buckets = set()
            if state:
                def hook(st, bucket):
                    buckets.add(bucket.index())
                    return nbt.allreduce_hook(st, bucket)
                net.register_comm_hook(state, hook)
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            inits = []
            for step in range(4):
                buckets.clear()
                g = torch.Generator().manual_seed(1000 * step + RANK)
                with Inits() as n:
                    opt.zero_grad()
                    net(torch.randn(4, 256, generator=g)).pow(2).mean().backward()
                opt.step()
                inits.append(n.count)
            return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy(), inits, buckets
        ref, _, _ = run(None)
        for progress in ("thread", "wait"):
            state = nbt.HookState(progress=progress)
            got, inits, buckets = run(state)
            self.assertGreater(len(buckets), 1, "one bucket: the test sees nothing")
            self.assertEqual(inits[2:], [0, 0], inits)
            self.assertGreater(inits[1], 0, "DDP did not rebuild its buckets: %s" % inits)
            self.assertEqual(sorted(state._requests), sorted(buckets))
            state.close()
            self.assertEqual(state._requests, {})
            everyone = COMM.allgather(got)
            for r, other in enumerate(everyone):
                np.testing.assert_array_equal(other, got, err_msg="hook (%s): rank %d differs" % (progress, r))
            np.testing.assert_array_equal(got, ref, err_msg="hook (%s): not bit for bit what DDP with Gloo computes" % progress)


if __name__ == "__main__":
    unittest.main()
