"""All-to-all, gather, scatter, the vector forms, reduce_scatter and the scans from Python, each
against a NumPy reference computed locally (every rank's input is a function of its rank), in
its non-blocking, blocking and persistent forms, with zero and odd counts and IN_PLACE."""
import unittest

import numpy as np
from mpi4py import MPI

import nbc

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
DTYPES = [np.int32, np.float64]
COUNTS = [0, 1, 7, 1000]


def block(src, dst, n, dtype, salt=0):
    """What rank src sends rank dst: n values."""
    return ((np.arange(n) * 3 + src * 101 + dst * 7 + salt) % 1000).astype(dtype)


def vcount(src, dst, n):
    """A per-pair count with zeros: (src + 2·dst + n) mod 4, times n // 4 + 1, or 0."""
    return 0 if n == 0 else ((src + 2 * dst + n) % 4) * (n // 4 + 1)


class Alltoall(unittest.TestCase):
    def test_alltoall(self):
        for dtype in DTYPES:
            for n in COUNTS:
                send = np.concatenate([block(RANK, d, n, dtype) for d in range(P)])
                want = np.concatenate([block(s, RANK, n, dtype) for s in range(P)])
                recv = np.full(P * n, -1, dtype)
                nbc.ialltoall(send, recv).wait()
                np.testing.assert_array_equal(recv, want)
                inplace = send.copy()
                nbc.alltoall(nbc.IN_PLACE, inplace)
                np.testing.assert_array_equal(inplace, want)

    def test_alltoall_init(self):
        send = np.zeros(P * 5, np.int32)
        recv = np.zeros(P * 5, np.int32)
        req = nbc.alltoall_init(send, recv)
        for salt in range(3):
            send[:] = np.concatenate([block(RANK, d, 5, np.int32, salt) for d in range(P)])
            req.start()
            req.wait()
            np.testing.assert_array_equal(recv, np.concatenate([block(s, RANK, 5, np.int32, salt) for s in range(P)]))
        req.free()

    def test_alltoallv(self):
        for n in COUNTS:
            sc = [vcount(RANK, d, n) for d in range(P)]
            rc = [vcount(s, RANK, n) for s in range(P)]
            send = np.concatenate([block(RANK, d, sc[d], np.float64) for d in range(P)] + [np.zeros(0)])
            # receive blocks in reverse order, with a gap of 2 after each
            rd, at = [0] * P, 0
            for s in reversed(range(P)):
                rd[s] = at
                at += rc[s] + 2
            recv = np.full(at, -1.0)
            nbc.ialltoallv(send, sc, recv, rc, rdispls=rd).wait()
            for s in range(P):
                np.testing.assert_array_equal(recv[rd[s]:rd[s] + rc[s]], block(s, RANK, rc[s], np.float64))
                np.testing.assert_array_equal(recv[rd[s] + rc[s]:rd[s] + rc[s] + 2], [-1.0, -1.0])

    def test_alltoallw(self):
        # to each peer: peer + 1 ints, as MPI_INT; from each: rank + 1 ints, at byte displacements
        sc = [d + 1 for d in range(P)]
        rc = [RANK + 1] * P
        send = np.concatenate([block(RANK, d, sc[d], np.int32) for d in range(P)])
        sd = [4 * sum(sc[:d]) for d in range(P)]
        rd = [4 * (RANK + 1) * s for s in range(P)]
        recv = np.zeros(P * (RANK + 1), np.int32)
        ints = [MPI.INT] * P
        nbc.alltoallw(send, sc, sd, ints, recv, rc, rd, ints)
        want = np.concatenate([block(s, RANK, RANK + 1, np.int32) for s in range(P)])
        np.testing.assert_array_equal(recv, want)


class GatherScatter(unittest.TestCase):
    def test_gather_scatter(self):
        for root in sorted({0, P - 1, P // 2}):
            for n in COUNTS:
                send = block(RANK, root, n, np.int32)
                recv = np.full(P * n, -1, np.int32) if RANK == root else None
                nbc.igather(send, recv, root=root).wait()
                if RANK == root:
                    want = np.concatenate([block(s, root, n, np.int32) for s in range(P)])
                    np.testing.assert_array_equal(recv, want)
                    inplace = np.full(P * n, -1, np.int32)
                    inplace[RANK * n:(RANK + 1) * n] = send
                    nbc.gather(nbc.IN_PLACE, inplace, root=root)
                    np.testing.assert_array_equal(inplace, want)
                else:
                    nbc.gather(send, None, root=root)
                whole = np.concatenate([block(root, d, n, np.float64) for d in range(P)]) if RANK == root else None
                part = np.full(n, -1.0)
                nbc.scatter(whole, part, root=root)
                np.testing.assert_array_equal(part, block(root, RANK, n, np.float64))
                if RANK == root:  # the root's block stays where it is
                    nbc.iscatter(whole, nbc.IN_PLACE, root=root).wait()
                else:
                    nbc.iscatter(None, part, root=root).wait()
                    np.testing.assert_array_equal(part, block(root, RANK, n, np.float64))

    def test_gatherv_scatterv_allgatherv(self):
        root = P - 1
        for n in COUNTS:
            counts = [vcount(s, 0, n) for s in range(P)]
            displs = [sum(counts[:s]) + s for s in range(P)]  # a gap of one after each block
            size = displs[-1] + counts[-1] + 1
            send = block(RANK, 0, counts[RANK], np.float64)
            recv = np.full(size, -1.0) if RANK == root else None
            nbc.igatherv(send, recv, counts, displs, root=root).wait()
            if RANK == root:
                for s in range(P):
                    np.testing.assert_array_equal(recv[displs[s]:displs[s] + counts[s]], block(s, 0, counts[s], np.float64))
            whole = np.concatenate([block(root, d, counts[d], np.float64) for d in range(P)])
            part = np.full(counts[RANK], -1.0)
            nbc.scatterv(whole if RANK == root else None, counts, part, root=root)
            np.testing.assert_array_equal(part, block(root, RANK, counts[RANK], np.float64))
            every = np.full(size, -1.0)
            nbc.iallgatherv(send, every, counts, displs).wait()
            for s in range(P):
                np.testing.assert_array_equal(every[displs[s]:displs[s] + counts[s]], block(s, 0, counts[s], np.float64))
            req = nbc.allgatherv_init(send, every, counts, displs)
            every[:] = -1.0
            req.start()
            req.wait()
            req.free()
            for s in range(P):
                np.testing.assert_array_equal(every[displs[s]:displs[s] + counts[s]], block(s, 0, counts[s], np.float64))


class Reductions(unittest.TestCase):
    def test_scan_exscan(self):
        for dtype in DTYPES:
            for n in COUNTS:
                send = block(RANK, 0, n, dtype)
                want = sum(block(s, 0, n, dtype) for s in range(RANK + 1)).astype(dtype) if n else np.zeros(0, dtype)
                recv = np.full(n, -1, dtype)
                nbc.iscan(send, recv).wait()
                np.testing.assert_array_equal(recv, want)
                inplace = send.copy()
                nbc.scan(nbc.IN_PLACE, inplace)
                np.testing.assert_array_equal(inplace, want)
                ex = np.full(n, -7, dtype)
                nbc.iexscan(send, ex, op=nbc.MAX).wait()
                if RANK == 0:
                    np.testing.assert_array_equal(ex, np.full(n, -7, dtype))
                else:
                    np.testing.assert_array_equal(ex, np.maximum.reduce([block(s, 0, n, dtype) for s in range(RANK)]))

    def test_scan_init(self):
        send, recv = np.zeros(3, np.int64), np.zeros(3, np.int64)
        req = nbc.scan_init(send, recv, op=nbc.SUM)
        for k in range(3):
            send[:] = RANK + k
            req.start()
            req.wait()
            np.testing.assert_array_equal(recv, [sum(r + k for r in range(RANK + 1))] * 3)
        req.free()

    def test_reduce_scatter(self):
        for n in COUNTS:
            counts = [vcount(r, 1, n) for r in range(P)]
            total = sum(counts)
            send = block(RANK, 0, total, np.float64)
            want = sum(block(s, 0, total, np.float64) for s in range(P))
            lo = sum(counts[:RANK])
            recv = np.full(counts[RANK], -1.0)
            nbc.ireduce_scatter(send, recv, counts).wait()
            np.testing.assert_array_equal(recv, want[lo:lo + counts[RANK]])
            inplace = send.copy()
            nbc.reduce_scatter(nbc.IN_PLACE, inplace, counts)
            np.testing.assert_array_equal(inplace[:counts[RANK]], want[lo:lo + counts[RANK]])


class Errors(unittest.TestCase):
    def test_bad_counts(self):
        with self.assertRaises(nbc.Error) as e:
            nbc.ialltoallv(np.zeros(P), [1] * (P + 1), np.zeros(P), [1] * P)
        self.assertEqual(e.exception.Get_error_class(), MPI.ERR_ARG)
        with self.assertRaises(nbc.Error) as e:
            nbc.ialltoall(np.zeros(P + 1), np.zeros(P + 1)) if P > 1 else nbc.ialltoall(np.zeros(2), np.zeros(3))
        self.assertEqual(e.exception.Get_error_class(), MPI.ERR_COUNT)


if __name__ == "__main__":
    unittest.main()
