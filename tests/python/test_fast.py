"""nbc._fast, the compiled calls (python/nbc/_fast.c): that they are the ones used when the
module is built (run.sh sets NBC_EXPECT_FAST=1 then), that they hand nothing they can do to the
ctypes path, and that both paths give exact results: every dtype, counts 0, 1, odd and large
(past the size where the GIL is released), in place and not, blocking, non-blocking, polled,
persistent; CPU tensors. Under NBC_FAST=0 (run.sh's second pass) the same on ctypes alone."""
import os
import unittest

import numpy as np
from mpi4py import MPI

import nbc
from nbc import _core

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.bool_]
COUNTS = [0, 1, 7, 40001]


def data(rank, n, dtype):
    v = (np.arange(n, dtype=np.int64) * 5 + rank * 3) % 7
    return v.astype(dtype)


def total(n, dtype):
    if dtype is np.bool_:
        return np.logical_or.reduce([data(r, n, dtype) for r in range(P)]).astype(dtype) if n else np.zeros(0, dtype)
    return sum(data(r, n, np.int64) for r in range(P)).astype(dtype)


def paths():
    return [True, False] if _core._fast is not None else [False]


class Paths(unittest.TestCase):
    def tearDown(self):
        nbc.use_fast(True)

    def test_which_path(self):
        if os.environ.get("NBC_FAST") == "0":
            self.assertFalse(nbc.fast())
            self.assertIsNone(_core._fast)
            self.assertIs(nbc.allreduce, _core._CTYPES["allreduce"])
            return
        if os.environ.get("NBC_EXPECT_FAST") == "1":
            self.assertIsNotNone(_core._fast, "nbc._fast is built but was not loaded")
        if _core._fast is None:
            self.skipTest("nbc._fast not built")
        self.assertTrue(nbc.fast())
        for name in ("iallreduce", "allreduce", "ibcast", "bcast", "ibarrier", "barrier", "startall", "waitall"):
            self.assertIs(getattr(nbc, name), getattr(_core._fast, name))
        self.assertIs(nbc.Request, _core._fast.Request)
        x = np.ones(3)
        req = nbc.iallreduce(x, np.zeros(3))
        self.assertIs(type(req), _core._fast.Request)
        req.wait()
        req = nbc.allreduce_init(x, np.zeros(3))  # made by ctypes, a compiled request all the same
        self.assertIs(type(req), _core._fast.Request)
        req.free()
        self.assertFalse(nbc.use_fast(False))
        self.assertIs(nbc.allreduce, _core._CTYPES["allreduce"])
        req = nbc.iallreduce(x, np.zeros(3))
        self.assertIs(type(req), _core._CTYPES["Request"])
        req.wait()
        self.assertTrue(nbc.use_fast(True))

    def test_nothing_falls_back(self):
        """The compiled calls do arrays and tensors themselves; only what must be refused goes
        to the ctypes functions."""
        if os.environ.get("NBC_FAST") == "0":  # ctypes alone: every call is ctypes'
            self.assertIs(nbc.iallreduce, _core._CTYPES["iallreduce"])
            req = nbc.ibarrier()
            self.assertIs(type(req), _core._CTYPES["Request"])
            nbc.waitall([req])
            return
        if _core._fast is None:
            self.skipTest("nbc._fast not loaded")
        calls = []
        setup = dict(_core._FAST_SETUP)

        def counted(f):
            def g(*a, **k):
                calls.append(f.__name__)
                return f(*a, **k)
            return g
        setup["slow"] = tuple(counted(f) for f in setup["slow"])
        _core._fast.setup(setup)
        try:
            for dtype in DTYPES:
                x, y = data(RANK, 9, dtype), np.zeros(9, dtype)
                nbc.allreduce(x, y, op=nbc.LOR if dtype is np.bool_ else nbc.SUM)
                nbc.iallreduce(nbc.IN_PLACE, y, nbc.LOR if dtype is np.bool_ else nbc.MAX, COMM).wait()
                nbc.bcast(y, root=P - 1)
                nbc.ibcast(buf=y, comm=COMM).wait()
            nbc.barrier()
            nbc.ibarrier(COMM).wait()
            try:
                import torch
            except ImportError:
                torch = None
            if torch is not None:
                _core._torch_types()
                t = torch.ones(5)
                nbc.allreduce(nbc.IN_PLACE, t)
                nbc.iallreduce(t, torch.zeros(5)).wait()
            self.assertEqual(calls, [])
            with self.assertRaises(nbc.Error) as e:
                nbc.allreduce(np.zeros(4)[::2], np.zeros(2))
            self.assertEqual(e.exception.Get_error_class(), MPI.ERR_BUFFER)
            with self.assertRaises(nbc.Error) as e:
                nbc.allreduce(np.zeros(4, np.float16), np.zeros(4, np.float16))
            self.assertEqual(e.exception.Get_error_class(), MPI.ERR_TYPE)
            with self.assertRaises(TypeError):
                nbc.allreduce(np.zeros(1), np.zeros(1), nope=1)
            # each went to ctypes' allreduce (whose iallreduce goes to ctypes' too, but for the last)
            self.assertEqual(calls, ["allreduce", "iallreduce", "allreduce", "iallreduce", "allreduce"])
        finally:
            _core._fast.setup(_core._FAST_SETUP)

    def test_allreduce_exact(self):
        for fast in paths():
            nbc.use_fast(fast)
            for dtype in DTYPES:
                op = nbc.LOR if dtype is np.bool_ else nbc.SUM
                for n in COUNTS:
                    want = total(n, dtype)
                    y = np.zeros(n, dtype)
                    self.assertIs(nbc.allreduce(data(RANK, n, dtype), y, op), y)
                    np.testing.assert_array_equal(y, want, "fast=%s %s n=%d" % (fast, dtype, n))
                    y = data(RANK, n, dtype)
                    nbc.allreduce(nbc.IN_PLACE, y, op=op, comm=COMM)
                    np.testing.assert_array_equal(y, want)
                    y = np.zeros(n, dtype)
                    req = nbc.iallreduce(data(RANK, n, dtype), y, op)
                    while not req.test():
                        pass
                    self.assertFalse(req.active)
                    np.testing.assert_array_equal(y, want)
                    y = data(RANK, n, dtype)
                    nbc.iallreduce(nbc.IN_PLACE, y, op).wait()
                    np.testing.assert_array_equal(y, want)

    def test_bcast_barrier_persistent(self):
        for fast in paths():
            nbc.use_fast(fast)
            for n in COUNTS:
                b = data(RANK, n, np.int32)
                self.assertIs(nbc.bcast(b, root=P - 1), b)
                np.testing.assert_array_equal(b, data(P - 1, n, np.int32))
                b = data(RANK, n, np.float64)
                nbc.ibcast(b, 0).wait()
                np.testing.assert_array_equal(b, data(0, n, np.float64))
            nbc.barrier()
            nbc.ibarrier().wait()
            x, y, z = np.zeros(40001), np.zeros(40001), np.zeros(9)
            reqs = [nbc.allreduce_init(x, y), nbc.allreduce_init(nbc.IN_PLACE, z[:7])]
            for step in range(3):
                x[:] = data(RANK, 40001, np.float64) + step
                z[:] = data(RANK, 9, np.float64) + step
                nbc.startall(reqs)
                nbc.waitall(reqs)
                np.testing.assert_array_equal(y, total(40001, np.float64) + step * P)
                np.testing.assert_array_equal(z[:7], total(7, np.float64) + step * P)
                np.testing.assert_array_equal(z[7:], data(RANK, 9, np.float64)[7:] + step)
            with reqs[0] as r:
                r.start()
                r.wait()
            reqs[1].free()
            with self.assertRaises(nbc.Error) as e:
                nbc.iallreduce(x, y).start()
            self.assertEqual(e.exception.Get_error_class(), MPI.ERR_REQUEST)

    def test_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        for fast in paths():
            nbc.use_fast(fast)
            for dt, npdt in ((torch.float32, np.float32), (torch.int64, np.int64), (torch.uint8, np.uint8)):
                for n in (0, 1, 7, 40001):
                    t = torch.from_numpy(data(RANK, n, npdt)).to(dt)
                    nbc.allreduce(nbc.IN_PLACE, t)
                    np.testing.assert_array_equal(t.numpy(), total(n, npdt))
                    out = torch.zeros(n, dtype=dt)
                    nbc.iallreduce(torch.from_numpy(data(RANK, n, npdt)), out).wait()
                    np.testing.assert_array_equal(out.numpy(), total(n, npdt))
            with self.assertRaises(nbc.Error):
                nbc.allreduce(torch.zeros(4)[::2], torch.zeros(2))


if __name__ == "__main__":
    unittest.main()
