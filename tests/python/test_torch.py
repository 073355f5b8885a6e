"""PyTorch on nbc (run at p = 2): CPU tensors in place, the DDP hook and the Total Reduce
synchronizer against DDP with Gloo (same seed, same data), parameters with no gradient on some
ranks, and gradients produced in different orders on different ranks."""
import os
import socket
import unittest

import numpy as np
from mpi4py import MPI

import nbc

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


def train(kind, orders=None, unused_on=None, hook_progress="thread", fuse=0, priorities=True, progress="hooks"):
    """STEPS steps of SGD with momentum; returns the flat parameters and the record of the
    order gradients were produced in on this rank."""
    torch.manual_seed(0)
    model = Towers()
    seen = []
    for i, t in enumerate(model.towers):
        t[0].weight.register_hook(lambda g, i=i: seen.append(i))
    sync = None
    net = model
    if kind in ("gloo", "hook"):
        net = DDP(model, find_unused_parameters=True)  # `never` is never used
        if kind == "hook":
            net.register_comm_hook(nbt.HookState(progress=hook_progress), nbt.allreduce_hook)
    elif kind == "total":
        sync = nbt.TotalReduce(model, priorities=priorities, fuse_bytes=fuse, progress=progress)
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

    def close_to(self, params, ref, what):
        np.testing.assert_allclose(params, ref, rtol=1e-5, atol=1e-6, err_msg=what)

    def test_hook_and_total_reduce_match_ddp_gloo(self):
        ref, _ = train("gloo")
        self.same_everywhere(ref, "DDP with Gloo")
        for what, kw in (("DDP + nbc hook (thread)", dict(kind="hook")),
                         ("DDP + nbc hook (wait)", dict(kind="hook", hook_progress="wait")),
                         ("Total Reduce", dict(kind="total")),
                         ("Total Reduce, a polling thread", dict(kind="total", progress="thread")),
                         ("Total Reduce, no priorities, fused", dict(kind="total", priorities=False, fuse=4096))):
            got, _ = train(**kw)
            self.same_everywhere(got, what)
            self.close_to(got, ref, what)
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
            self.close_to(got, ref, what)

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
        self.close_to(got, ref, "Total Reduce, different orders")


if __name__ == "__main__":
    unittest.main()
