"""Every binding against NumPy references computed locally: each rank knows every rank's input
(a function of the rank), so no MPI collective is needed to know the answer."""
import gc
import os
import unittest
import weakref

import numpy as np
from mpi4py import MPI

import nbc

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
ROOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]
COUNTS = [0, 1, 7, 1000, 40001]
_NP_OPS = [(nbc.SUM, np.add), (nbc.PROD, np.multiply), (nbc.MAX, np.maximum), (nbc.MIN, np.minimum),
           (nbc.BAND, np.bitwise_and), (nbc.BOR, np.bitwise_or), (nbc.BXOR, np.bitwise_xor),
           (nbc.LAND, np.logical_and), (nbc.LOR, np.logical_or), (nbc.LXOR, np.logical_xor)]


def np_op(op):
    """NumPy's function for an MPI op (mpi4py's ops compare but do not hash)."""
    return [f for o, f in _NP_OPS if o == op][0]


def data(rank, n, dtype, salt=0):
    """Rank rank's input: small values, so that sums and products are exact in floats."""
    v = (np.arange(n, dtype=np.int64) * 7 + rank * 13 + salt * 5) % 11 - 3
    if np.dtype(dtype).kind in "ub":
        v = np.abs(v)
    return v.astype(dtype)


def expect(op, n, dtype, ranks=None, salt=0):
    ranks = range(P) if ranks is None else ranks
    f = np_op(op)
    acc = None
    for r in ranks:
        x = data(r, n, dtype, salt)
        acc = x if acc is None else f(acc, x)
    if any(op == o for o in (nbc.LAND, nbc.LOR, nbc.LXOR)):
        acc = acc.astype(dtype)
    return acc.astype(dtype)


def ops_for(dtype):
    ops = [nbc.SUM, nbc.PROD, nbc.MAX, nbc.MIN]
    if np.dtype(dtype).kind in "iu":
        ops += [nbc.BAND, nbc.BOR, nbc.BXOR, nbc.LAND, nbc.LOR, nbc.LXOR]
    return ops


class Allreduce(unittest.TestCase):
    def test_dtypes_ops_counts(self):
        for dtype in FLOATS + INTS:
            for op in ops_for(dtype):
                for n in (COUNTS if op == nbc.SUM else [0, 1, 7, 1000]):
                    want = expect(op, n, dtype)
                    got = np.full(n, 99, dtype)
                    req = nbc.iallreduce(data(RANK, n, dtype), got, op=op, comm=COMM)
                    self.assertIsInstance(req, nbc.Request)
                    req.wait()
                    np.testing.assert_array_equal(got, want, err_msg="%s %s n=%d" % (np.dtype(dtype), op, n))

    def test_in_place(self):
        for dtype in (np.float64, np.int32, np.uint8):
            for n in COUNTS:
                buf = data(RANK, n, dtype)
                nbc.iallreduce(nbc.IN_PLACE, buf, op=nbc.SUM).wait()
                np.testing.assert_array_equal(buf, expect(nbc.SUM, n, dtype))

    def test_bool(self):
        for op in (nbc.LAND, nbc.LOR, nbc.LXOR):
            x = (np.arange(9) + RANK) % 3 == 0
            want = x.copy()
            want[:] = [(k + 0) % 3 == 0 for k in range(9)]
            for r in range(1, P):
                want = np_op(op)(want, (np.arange(9) + r) % 3 == 0)
            got = np.zeros(9, np.bool_)
            nbc.allreduce(x, got, op=op)
            np.testing.assert_array_equal(got, want)

    def test_test_polls_to_completion(self):
        n = 100000
        got = np.zeros(n, np.float64)
        req = nbc.iallreduce(data(RANK, n, np.float64), got)
        while not req.test():
            pass
        self.assertTrue(req.test())  # a completed request stays complete
        req.wait()
        np.testing.assert_array_equal(got, expect(nbc.SUM, n, np.float64))

    def test_many_in_flight(self):
        bufs = [data(RANK, n, np.float32, salt=n) for n in range(1, 30)]
        reqs = [nbc.iallreduce(nbc.IN_PLACE, b) for b in bufs]
        while nbc.progress() >= 0 and not nbc.testall(reqs):
            pass
        nbc.waitall(reqs)
        for n, b in zip(range(1, 30), bufs):
            np.testing.assert_array_equal(b, expect(nbc.SUM, n, np.float32, salt=n))

    def test_blocking_returns_recvbuf(self):
        got = np.zeros(5, np.int64)
        self.assertIs(nbc.allreduce(data(RANK, 5, np.int64), got, op=nbc.MAX), got)
        np.testing.assert_array_equal(got, expect(nbc.MAX, 5, np.int64))

    def test_subcommunicators(self):
        for comm in (COMM.Dup(), COMM.Split(RANK % 2, RANK)):
            ranks = [r for r in range(P) if comm.Get_size() == P or r % 2 == RANK % 2]
            got = np.zeros(33, np.float64)
            nbc.allreduce(data(RANK, 33, np.float64), got, comm=comm)
            np.testing.assert_array_equal(got, expect(nbc.SUM, 33, np.float64, ranks))
            comm.Free()

    def test_views_and_slices(self):
        big = np.zeros(20, np.float64)
        nbc.allreduce(data(RANK, 10, np.float64), big[5:15])  # a contiguous slice: its own memory
        np.testing.assert_array_equal(big[5:15], expect(nbc.SUM, 10, np.float64))
        self.assertTrue((big[:5] == 0).all() and (big[15:] == 0).all())
        m = data(RANK, 12, np.int32).reshape(3, 4)
        nbc.allreduce(nbc.IN_PLACE, m)
        np.testing.assert_array_equal(m.ravel(), expect(nbc.SUM, 12, np.int32))

    def test_request_keeps_buffers_alive(self):
        recv = np.zeros(1000, np.float64)
        send = data(RANK, 1000, np.float64)
        alive = weakref.ref(send)
        req = nbc.iallreduce(send, recv)
        del send
        gc.collect()
        self.assertIsNotNone(alive(), "the request dropped its send buffer while in flight")
        req.wait()
        gc.collect()
        self.assertIsNone(alive(), "the request kept its send buffer after completing")
        np.testing.assert_array_equal(recv, expect(nbc.SUM, 1000, np.float64))

    def test_dropped_request_completes(self):
        recv = np.zeros(64, np.float64)
        nbc.iallreduce(data(RANK, 64, np.float64), recv)  # dropped: kept until progress sees it done
        gc.collect()
        for _ in range(100000):
            nbc.progress()
            if (recv == expect(nbc.SUM, 64, np.float64)).all():
                break
        np.testing.assert_array_equal(recv, expect(nbc.SUM, 64, np.float64))


class Collectives(unittest.TestCase):
    def test_reduce(self):
        for root in range(P):
            for dtype in (np.float64, np.int16):
                for op in (nbc.SUM, nbc.MAX):
                    for n in (0, 1, 7, 3001):
                        got = np.zeros(n, dtype) if RANK == root else None
                        nbc.ireduce(data(RANK, n, dtype), got, op=op, root=root).wait()
                        if RANK == root:
                            np.testing.assert_array_equal(got, expect(op, n, dtype))
            buf = data(RANK, 9, np.float32)
            nbc.reduce(nbc.IN_PLACE if RANK == root else buf, buf if RANK == root else None, root=root)
            if RANK == root:
                np.testing.assert_array_equal(buf, expect(nbc.SUM, 9, np.float32))

    def test_bcast(self):
        for root in range(P):
            for dtype in (np.float64, np.uint8, np.int64):
                for n in (0, 1, 7, 70001):
                    buf = data(root, n, dtype) if RANK == root else np.zeros(n, dtype)
                    nbc.ibcast(buf, root=root).wait()
                    np.testing.assert_array_equal(buf, data(root, n, dtype))

    def test_barrier(self):
        for _ in range(3):
            nbc.ibarrier().wait()
            nbc.barrier()

    def test_reduce_scatter_block(self):
        for dtype in (np.float64, np.int32):
            for n in (0, 1, 3, 1001):
                full = expect(nbc.SUM, n * P, dtype)
                got = np.zeros(n, dtype)
                nbc.ireduce_scatter_block(data(RANK, n * P, dtype), got).wait()
                np.testing.assert_array_equal(got, full[RANK * n:(RANK + 1) * n])
                buf = data(RANK, n * P, dtype)
                nbc.reduce_scatter_block(nbc.IN_PLACE, buf)
                np.testing.assert_array_equal(buf[:n], full[RANK * n:(RANK + 1) * n])

    def test_allgather(self):
        for dtype in (np.float32, np.int64):
            for n in (0, 1, 5, 999):
                want = np.concatenate([data(r, n, dtype) for r in range(P)])
                got = np.zeros(n * P, dtype)
                nbc.iallgather(data(RANK, n, dtype), got).wait()
                np.testing.assert_array_equal(got, want)
                buf = np.zeros(n * P, dtype)
                buf[RANK * n:(RANK + 1) * n] = data(RANK, n, dtype)
                nbc.allgather(nbc.IN_PLACE, buf)
                np.testing.assert_array_equal(buf, want)

    def test_allreduce_multi(self):
        for nbufs in (1, 3):
            for n in (0, 1, 7, 5001):
                bufs = [data(RANK * 3 + k, n, np.float64) for k in range(nbufs)]
                want = sum(data(r * 3 + k, n, np.float64) for r in range(P) for k in range(nbufs))
                nbc.iallreduce_multi(bufs).wait()
                for b in bufs:
                    np.testing.assert_array_equal(b, want)


class Persistent(unittest.TestCase):
    def test_allreduce_init_any_order_priorities(self):
        sizes = [1, 7, 100, 5000, 0, 3]
        bufs = [np.zeros(n, np.float64) for n in sizes]
        reqs = [nbc.allreduce_init(nbc.IN_PLACE, b, any_order=True, priority=len(sizes) - i, name="t%d" % i)
                for i, b in enumerate(bufs)]
        for it in range(4):
            for i, b in enumerate(bufs):
                b[:] = data(RANK, sizes[i], np.float64, salt=it + i)
            order = list(range(len(sizes)))
            order = order[RANK % len(order):] + order[:RANK % len(order)]  # each rank its own order
            if (RANK + it) % 2:
                order.reverse()
            for i in order:
                reqs[i].start()
                self.assertTrue(reqs[i].active)
                nbc.progress()
            nbc.waitall(reqs)
            for i, b in enumerate(bufs):
                np.testing.assert_array_equal(b, expect(nbc.SUM, sizes[i], np.float64, salt=it + i))
            self.assertFalse(any(r.active for r in reqs))
        reqs[0].set_priority(-5)
        for r in reqs:
            r.free()

    def test_startall_and_not_in_place(self):
        send = np.zeros(11, np.int32)
        recv = np.zeros(11, np.int32)
        req = nbc.allreduce_init(send, recv, op=nbc.MAX)
        for it in range(3):
            send[:] = data(RANK, 11, np.int32, salt=it)
            nbc.startall([req])
            req.wait()
            np.testing.assert_array_equal(recv, expect(nbc.MAX, 11, np.int32, salt=it))
        req.free()

    def test_other_persistent(self):
        root = P - 1
        b = np.zeros(6, np.float64)
        bc = nbc.bcast_init(b, root=root)
        rs = np.zeros(4, np.float64)
        rsi = nbc.reduce_scatter_block_init(data(RANK, 4 * P, np.float64), rs)
        ag = np.zeros(3 * P, np.int32)
        agi = nbc.allgather_init(data(RANK, 3, np.int32), ag)
        red = np.zeros(5, np.float64)
        rdi = nbc.reduce_init(data(RANK, 5, np.float64), red if RANK == 0 else None, root=0)
        mb = [data(RANK, 8, np.float64), data(RANK + P, 8, np.float64)]
        mbi = nbc.allreduce_multi_init(mb)
        bar = nbc.barrier_init()
        for it in range(2):
            if RANK == root:
                b[:] = data(root, 6, np.float64, salt=it)
            mb[0][:], mb[1][:] = data(RANK, 8, np.float64), data(RANK + P, 8, np.float64)
            for r in (bc, rsi, agi, rdi, mbi, bar):
                r.start()
            nbc.waitall([bc, rsi, agi, rdi, mbi, bar])
            np.testing.assert_array_equal(b, data(root, 6, np.float64, salt=it))
            np.testing.assert_array_equal(rs, expect(nbc.SUM, 4 * P, np.float64)[RANK * 4:RANK * 4 + 4])
            np.testing.assert_array_equal(ag, np.concatenate([data(r, 3, np.int32) for r in range(P)]))
            if RANK == 0:
                np.testing.assert_array_equal(red, expect(nbc.SUM, 5, np.float64))
            want = sum(data(r, 8, np.float64) + data(r + P, 8, np.float64) for r in range(P))
            np.testing.assert_array_equal(mb[0], want)
            np.testing.assert_array_equal(mb[1], want)
        for r in (bc, rsi, agi, rdi, mbi, bar):
            r.free()


class Library(unittest.TestCase):
    def test_cache_stats(self):
        before = nbc.cache_stats()
        for key in ("hits", "misses", "evictions", "entries", "bytes", "max_entries", "max_bytes"):
            self.assertIn(key, before)
        for _ in range(3):
            nbc.allreduce(data(RANK, 17, np.float64), np.zeros(17, np.float64))
        after = nbc.cache_stats()
        if P > 1:
            self.assertGreaterEqual(after["hits"] - before["hits"], 2)

    def test_schedules_and_selection(self):
        nbc.load_schedules(os.path.join(ROOT_DIR, "examples", "allreduce_star.nbs"))
        nbc.set_schedule("allreduce", "star")
        try:
            got = np.zeros(10, np.float64)
            nbc.allreduce(data(RANK, 10, np.float64), got)
            np.testing.assert_array_equal(got, expect(nbc.SUM, 10, np.float64))
        finally:
            nbc.set_schedule("allreduce", None)
        nbc.set_selection("model")
        nbc.set_selection("rules")
        self.assertTrue(nbc.version())

    def test_progress_returns_a_count(self):
        self.assertGreaterEqual(nbc.progress(), 0)


class Errors(unittest.TestCase):
    def check(self, error_class, fn, *args, **kw):
        with self.assertRaises(nbc.Error) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertIsInstance(e, MPI.Exception)
        self.assertEqual(e.error_class, error_class, str(e))
        self.assertEqual(e.Get_error_class(), error_class)
        self.assertTrue(e.message, "no nbc message")
        return e

    def test_bad_arguments_raise_with_their_class(self):
        f = np.zeros(4, np.float64)
        self.check(MPI.ERR_OP, nbc.allreduce, f.copy(), f, op=nbc.BAND)
        self.check(MPI.ERR_TYPE, nbc.allreduce, np.zeros(4, np.float32), f)
        self.check(MPI.ERR_TYPE, nbc.allreduce, np.zeros(4, np.complex128), np.zeros(4, np.complex128))
        self.check(MPI.ERR_COUNT, nbc.allreduce, np.zeros(3), f)
        self.check(MPI.ERR_BUFFER, nbc.allreduce, np.zeros(8)[::2], f)
        self.check(MPI.ERR_BUFFER, nbc.allreduce, [1.0, 2.0], f)
        ro = np.zeros(4)
        ro.flags.writeable = False
        self.check(MPI.ERR_BUFFER, nbc.allreduce, f.copy(), ro)
        self.check(MPI.ERR_ROOT, nbc.ibcast, f, root=P)
        self.check(MPI.ERR_ROOT, nbc.ireduce, f.copy(), f, root=-1)
        self.check(MPI.ERR_OP, nbc.allreduce, f.copy(), f, op="sum")
        self.check(MPI.ERR_REQUEST, nbc.iallreduce(nbc.IN_PLACE, np.zeros(1)).start)

    def test_schedule_errors(self):
        e = self.check(MPI.ERR_ARG, nbc.set_schedule, "allreduce", "no_such_schedule")
        self.assertIn("no_such_schedule", e.message)
        self.assertIn("no_such_schedule", str(e))
        if P > 1:  # the ring needs count >= p: a forced schedule whose preconditions fail
            nbc.set_schedule("allreduce", "ring")
            try:
                e = self.check(MPI.ERR_ARG, nbc.allreduce, np.zeros(1), np.zeros(1))
                self.assertIn("count", e.message)
            finally:
                nbc.set_schedule("allreduce", None)
        with self.assertRaises(nbc.Error):
            nbc.load_schedules(os.path.join(ROOT_DIR, "no", "such", "file.nbs"))
        with self.assertRaises(nbc.Error):
            nbc.set_selection("no_such_mode")


if __name__ == "__main__":
    unittest.main()
