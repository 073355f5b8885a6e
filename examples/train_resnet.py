"""Data-parallel training of torchvision's ResNet-18 on synthetic data, with the gradients
averaged by the backend you pick:

    mpiexec.openmpi -n 2 python3 examples/train_resnet.py --backend nbc-total

  none              no communication (each rank trains alone: the floor)
  gloo              DistributedDataParallel with torch's Gloo backend
  nbc-hook          DDP, its buckets allreduced by nbc (nbc.torch.allreduce_hook)
  nbc-total         nbc's Total Reduce synchronizer: any order, front layers first
  nbc-total-noprio  the same, every request at one priority

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

BACKENDS = ("none", "gloo", "nbc-hook", "nbc-total", "nbc-total-noprio")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=BACKENDS, default="nbc-total")
    ap.add_argument("--model", choices=("resnet18", "branches"), default="resnet18")
    ap.add_argument("--batch", type=int, default=8, help="images per rank (8)")
    ap.add_argument("--image", type=int, default=64, help="image side in pixels (64)")
    ap.add_argument("--steps", type=int, default=20, help="timed iterations (20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first iterations (3)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (1)")
    ap.add_argument("--fuse-bytes", type=int, default=0, help="nbc-total: fuse parameters up to this size")
    ap.add_argument("--hook-progress", choices=("thread", "wait"), default="thread",
                    help="nbc-hook: a Python thread completes DDP's futures, or the hook waits")
    ap.add_argument("--progress-thread", action="store_true", help="start nbc's progress thread")
    ap.add_argument("--label", default=None, help="the name printed for this run")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)  # the same initial model everywhere
    model = (Branches(rank=rank) if args.model == "branches"
             else torchvision.models.resnet18(num_classes=10))
    net, sync = model, None
    if args.backend in ("gloo", "nbc-hook"):
        init_gloo(comm)
        net = nn.parallel.DistributedDataParallel(model)
        if args.backend == "nbc-hook":
            net.register_comm_hook(nbt.HookState(progress=args.hook_progress,
                                                 progress_thread=args.progress_thread), nbt.allreduce_hook)
    elif args.backend.startswith("nbc-total"):
        sync = nbt.TotalReduce(model, priorities=args.backend == "nbc-total", fuse_bytes=args.fuse_bytes,
                               progress_thread=args.progress_thread)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    times = []
    comm.Barrier()
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        if args.model == "branches":
            model.step = step
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        if sync:
            sync.synchronize()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if sync:
        sync.close()
    # every rank's parameters must agree (except with no communication)
    digest = float(sum(p.detach().double().sum() for p in model.parameters()))
    digests = comm.gather(digest, root=0)
    if rank == 0:
        agree = "yes" if max(digests) - min(digests) <= 1e-9 * max(1.0, abs(digest)) else "no"
        label = args.label or args.backend
        print("%s: model=%s p=%d batch=%d image=%d median %.1f ms (min %.1f, max %.1f) over %d iterations; "
              "loss %.4f; ranks agree: %s" % (label, args.model, size, args.batch, args.image,
                                              1e3 * statistics.median(times), 1e3 * min(times), 1e3 * max(times),
                                              len(times), loss.item(), agree), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
