"""Data-parallel training of torchvision's ResNet-18 on synthetic data, with the gradients
averaged by the backend you pick:

    mpiexec.openmpi -n 2 python3 examples/train_resnet.py --backend nbc-total

  none              no communication (each rank trains alone: the floor)
  gloo              DistributedDataParallel with torch's Gloo backend
  nbc-hook          DDP, its buckets allreduced by nbc (nbc.torch.allreduce_hook): one
                    persistent request per bucket, started at every step
  nbc-total         nbc's Total Reduce synchronizer: any order, front layers first, the
                    gradients in nbc's memory (reduced through it between ranks of a node)
  nbc-total-private the same with the gradients in torch's memory (shared_memory=False)
  nbc-total-noprio  the same as nbc-total, every request at one priority
  nbc-hook-wait     the hook waits for its bucket (no Python thread)
  nbc-hook-pt, nbc-total-pt   with nbc's progress thread on
  nbc-total-thread  a Python thread calls nbc.progress() during the backward pass
  nbc-total-fused   parameters fused into requests of up to --fuse-bytes (default here 1 MiB)

Several backends, comma-separated, train one model copy each, taking turns in blocks of
iterations (--rounds), so that a busy machine slows them alike: what make bench-torch does.

--model branches swaps ResNet-18 for a stem and four parallel ResNet stages whose order each
rank runs (and so produces gradients in) differently at every step. Prints, on rank 0, the
median time of an iteration over --steps iterations after --warmup ones.
"""
import argparse
import os
import socket
import statistics
import sys
import time

try:
    import nbc
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import nbc
import nbc.torch as nbt
import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
from mpi4py import MPI

BACKENDS = ("none", "gloo", "nbc-hook", "nbc-hook-wait", "nbc-hook-pt", "nbc-total", "nbc-total-private",
            "nbc-total-noprio", "nbc-total-pt", "nbc-total-thread", "nbc-total-fused")


class Branches(nn.Module):
    """ResNet-18's stem and first two stages, then four copies of its third stage side by side,
    summed. order(step) says which branch runs first on this rank."""

    def __init__(self, num_classes=10, rank=0):
        super().__init__()
        r = torchvision.models.resnet18(num_classes=num_classes)
        self.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2)
        self.branches = nn.ModuleList([torchvision.models.resnet18().layer3 for _ in range(4)])
        self.head = nn.Linear(256, num_classes)
        self.rank = rank
        self.step = 0

    def forward(self, x):
        h = self.stem(x)
        k = (self.rank + self.step) % 4
        order = list(range(4))[k:] + list(range(4))[:k]
        if self.rank % 2:
            order.reverse()
        out = 0
        for i in order:
            out = out + self.branches[i](h).mean(dim=(2, 3))
        return self.head(out)


def init_gloo(comm):
    port = None
    if comm.Get_rank() == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(comm.bcast(port, root=0))
    dist.init_process_group("gloo", rank=comm.Get_rank(), world_size=comm.Get_size())


class Run:
    """One backend's model copy, optimizer and timings."""

    def __init__(self, backend, args, rank):
        torch.manual_seed(0)  # the same initial model everywhere, for every backend
        self.backend = backend
        self.model = (Branches(rank=rank) if args.model == "branches"
                      else torchvision.models.resnet18(num_classes=10))
        self.net, self.sync, self.state = self.model, None, None
        self.progress_thread = backend.endswith("-pt")
        if "hook" in backend or backend == "gloo":
            self.net = nn.parallel.DistributedDataParallel(self.model)
            if "hook" in backend:
                self.state = nbt.HookState(progress="wait" if backend == "nbc-hook-wait" else "thread")
                self.net.register_comm_hook(self.state, nbt.allreduce_hook)
        elif backend.startswith("nbc-total"):
            fuse = args.fuse_bytes or (1 << 20 if backend == "nbc-total-fused" else 0)
            self.sync = nbt.TotalReduce(self.model, priorities=backend != "nbc-total-noprio", fuse_bytes=fuse,
                                        progress="thread" if backend == "nbc-total-thread" else "hooks",
                                        shared_memory=backend != "nbc-total-private")
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.times = []
        self.rounds = []  # the timed iterations of each turn
        self.step = 0

    def iterate(self, x, y, timed):
        t0 = time.perf_counter()
        if isinstance(self.model, Branches):
            self.model.step = self.step
        self.opt.zero_grad()
        self.loss = nn.functional.cross_entropy(self.net(x), y)
        self.loss.backward()
        if self.sync:
            self.sync.synchronize()
        self.opt.step()
        self.step += 1
        if timed:
            self.times.append(time.perf_counter() - t0)
            self.rounds[-1].append(self.times[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nbc-total",
                    help="one of %s, or several comma-separated (nbc-total)" % ", ".join(BACKENDS))
    ap.add_argument("--model", choices=("resnet18", "branches"), default="resnet18")
    ap.add_argument("--batch", type=int, default=8, help="images per rank (8)")
    ap.add_argument("--image", type=int, default=64, help="image side in pixels (64)")
    ap.add_argument("--steps", type=int, default=20, help="timed iterations per backend (20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first iterations per backend (3)")
    ap.add_argument("--rounds", type=int, default=5, help="with several backends: turns each takes (5)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (1)")
    ap.add_argument("--fuse-bytes", type=int, default=0, help="nbc-total: fuse parameters up to this size")
    ap.add_argument("--label", default="", help="a prefix for the names printed")
    args = ap.parse_args()
    backends = args.backend.split(",")
    for b in backends:
        if b not in BACKENDS:
            ap.error("unknown backend %r (choose from %s)" % (b, ", ".join(BACKENDS)))

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(args.threads)
    if any("hook" in b or b == "gloo" for b in backends):
        init_gloo(comm)
    runs = [Run(b, args, rank) for b in backends]
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    rounds = max(1, min(args.rounds, args.steps)) if len(runs) > 1 else 1
    comm.Barrier()
    for run in runs:
        for _ in range(args.warmup):
            run.iterate(x, y, timed=False)
    for k in range(rounds):
        for run in runs:
            n = args.steps * (k + 1) // rounds - args.steps * k // rounds
            if run.progress_thread:
                nbc.progress_thread(True)
            run.rounds.append([])
            for _ in range(n):
                run.iterate(x, y, timed=True)
            if run.progress_thread:
                nbc.progress_thread(False)
    gloo = [r for r in runs if r.backend == "gloo"]
    for run in runs:
        if run.sync:
            run.sync.close()
        if run.state:
            run.state.close()
        # every rank's parameters must agree (except with no communication)
        digest = float(sum(p.detach().double().sum() for p in run.model.parameters()))
        digests = comm.gather(digest, root=0)
        if rank == 0:
            agree = "yes" if max(digests) - min(digests) <= 1e-9 * max(1.0, abs(digest)) else "no"
            t = run.times
            ratio = ""
            if gloo and rounds > 1:
                # each turn's median over Gloo's in the same round: what load disturbs least
                rs = sorted(statistics.median(a) / statistics.median(b) for a, b in zip(run.rounds, gloo[0].rounds))
                ratio = "; per-round ratio to gloo %.2f (quartiles %.2f, %.2f)" % (
                    statistics.median(rs), rs[len(rs) // 4], rs[(3 * len(rs)) // 4])
            print("%s%s: model=%s p=%d batch=%d image=%d median %.1f ms (min %.1f, max %.1f) over %d iterations; "
                  "loss %.4f; ranks agree: %s%s" % (args.label, run.backend, args.model, size, args.batch, args.image,
                                                    1e3 * statistics.median(t), 1e3 * min(t), 1e3 * max(t), len(t),
                                                    run.loss.item(), agree, ratio), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
