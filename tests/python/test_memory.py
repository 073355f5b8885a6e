"""nbc.empty and nbc.zeros (and nbc.torch's): arrays in nbc's shared memory. Allreduces on them
give the right results, and under NBC_TRACE=2 (tests/python/run.sh sets it) each one says it ran
through shared memory at p >= 2, where arrays of NumPy's own memory run with messages; the
memory is freed (nbc_free_mem, without an error) when the last array on it is collected."""
import gc
import os
import sys
import tempfile
import unittest

import numpy as np
from mpi4py import MPI

import nbc
from nbc import _core

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
TRACED = os.environ.get("NBC_TRACE") == "2"

# left alive to the end: freeing it must not fail once MPI is finalized (run.sh checks the exit)
_LEFT_AT_EXIT = nbc.zeros(1000)


def data(rank, n, dtype):
    return ((np.arange(n, dtype=np.int64) * 7 + rank * 13) % 11 - 3).astype(dtype)


def stderr_of(fn):
    """What nbc (C) writes on file descriptor 2 while fn runs, and fn's result."""
    with tempfile.TemporaryFile() as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return f.read().decode(errors="replace"), result


class Frees:
    """Records nbc_free_mem's calls (address, return code) while in use."""

    def __enter__(self):
        self.calls, self.real = [], _core._free_mem

        def free(addr):
            rc = self.real(addr)
            self.calls.append((addr, rc))
            return rc
        _core._free_mem = free
        return self

    def __exit__(self, *exc):
        _core._free_mem = self.real


class Memory(unittest.TestCase):
    def test_empty_and_zeros(self):
        a = nbc.empty((3, 5), dtype=np.int32)
        self.assertEqual((a.shape, a.dtype), ((3, 5), np.dtype(np.int32)))
        self.assertTrue(a.flags.c_contiguous and a.flags.writeable)
        self.assertIsInstance(a.base, _core._Memory)
        z = nbc.zeros(1000, np.float32)
        self.assertEqual(z.shape, (1000,))
        self.assertTrue((z == 0).all())
        self.assertEqual(nbc.empty(0).size, 0)
        self.assertEqual(nbc.empty((2, 0, 3)).shape, (2, 0, 3))
        self.assertEqual(nbc.empty(()).shape, ())
        with self.assertRaises(nbc.Error) as e:
            nbc.empty((2, -1))
        self.assertEqual(e.exception.error_class, MPI.ERR_ARG)

    def test_allreduce_through_shared_memory(self):
        calls = 0
        log = ""
        for dtype in (np.float64, np.int32, np.uint8):
            for n in (1, 7, 40001):
                s, r = nbc.empty(n, dtype), nbc.empty(n, dtype)
                s[:] = data(RANK, n, dtype)
                want = sum(data(q, n, dtype) for q in range(P)).astype(dtype)
                out, _ = stderr_of(lambda: nbc.allreduce(s, r))
                np.testing.assert_array_equal(r, want)
                r[:] = data(RANK, n, dtype)
                out2, _ = stderr_of(lambda: nbc.allreduce(nbc.IN_PLACE, r))
                np.testing.assert_array_equal(r, want)
                calls += 2
                log += out + out2
        if TRACED and P >= 2:
            self.assertEqual(log.count("runs through shared memory"), calls, log[-500:])
            self.assertNotIn("runs with messages", log)
            # the control: NumPy's own memory on one side (above 64 KiB: below,
            # allreduce_shm_small stages any buffers) is copied through the kernel, or sends
            # messages under NBC_SHM_KERNEL=0
            out, _ = stderr_of(lambda: nbc.allreduce(nbc.zeros(1 << 14), np.zeros(1 << 14)))
            if os.environ.get("NBC_SHM_KERNEL") == "0":
                self.assertIn("runs with messages: this rank's buffers are not from nbc_alloc_mem", out)
            else:
                self.assertIn("runs through shared memory, the private buffers through the kernel", out)

    def test_freed_with_the_last_array(self):
        with Frees() as f:
            a = nbc.empty((100, 100))
            addr = a.ctypes.data
            view = a[10:20]
            del a
            gc.collect()
            self.assertEqual(f.calls, [])  # the view holds it
            view[:] = 1
            del view
            gc.collect()
            self.assertEqual(f.calls, [(addr, MPI.SUCCESS)])
            for _ in range(200):  # freed blocks are reused: this stays within the segment
                b = nbc.zeros(1 << 17)
                nbc.allreduce(nbc.IN_PLACE, b)
            del b
            gc.collect()
            self.assertEqual(len(f.calls), 201)
            self.assertTrue(all(rc == MPI.SUCCESS for _, rc in f.calls))

    def test_torch_empty(self):
        try:
            import torch
            import nbc.torch as nbt
        except ImportError as e:
            self.skipTest("torch: %s" % e)
        with Frees() as f:
            t = nbt.empty((4, 250), torch.float32)
            self.assertEqual((t.shape, t.dtype, t.is_contiguous()), ((4, 250), torch.float32, True))
            t.fill_(RANK + 1)
            z = nbt.zeros(1000, torch.float32)
            self.assertEqual(float(z.abs().sum()), 0.0)
            out = stderr_of(lambda: nbc.allreduce(t, z.view(4, 250)))[0]  # (not the view it returns)
            self.assertTrue(bool((z == P * (P + 1) / 2).all()))
            if TRACED and P >= 2:
                self.assertIn("runs through shared memory", out)
            self.assertEqual(tuple(nbt.empty((0, 3)).shape), (0, 3))
            addr = t.data_ptr()
            gc.collect()
            self.assertNotIn(addr, [a for a, _ in f.calls])  # the tensor keeps its memory
            del t, z
            gc.collect()
            self.assertIn((addr, MPI.SUCCESS), f.calls)
            self.assertEqual(len(f.calls), 2)


class Shutdown(unittest.TestCase):
    """After Memory (unittest runs the classes in name order): nbc_free_mem after nbc_finalize
    starts nbc again, and a shared allreduce after such a restart crashes in the runtime (seen
    with nbc_finalize then nbc_iallreduce in C too), so nothing shared runs after this."""

    def test_free_after_nbc_finalize(self):
        a = nbc.zeros(10)
        nbc.finalize()
        with Frees() as f:
            del a
            gc.collect()
        self.assertEqual(f.calls[0][1], MPI.SUCCESS)
        nbc.barrier()  # nbc starts again at its next call
