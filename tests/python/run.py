"""Runs the Python tests under mpiexec with the standard unittest runner, on every rank, and
prints one line per test on rank 0 in the suite's form: "ok NAME (p=P)", or "FAIL NAME (p=P):
rank R: why"; "skip ..." when the modules or the library are missing.

Usage: mpiexec -n P python3 tests/python/run.py MODULE...   (test_bindings, test_torch)
"""
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)


def skip(why):
    print("skip python: %s" % why)
    sys.exit(0)


try:
    import numpy  # noqa: F401
    from mpi4py import MPI
except ImportError as e:
    skip("%s (install python3-numpy python3-mpi4py)" % e)
try:
    import nbc
except ImportError as e:  # nbc.LibraryError says what to build
    if MPI.COMM_WORLD.Get_rank() == 0:
        skip(str(e))
    sys.exit(0)


class Collect(unittest.TextTestResult):
    """Remembers each test's outcome by name."""

    def startTestRun(self):
        super().startTestRun()
        self.outcomes = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[test.id()] = None

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test.id()] = self._exc_info_to_string(err, test).strip().splitlines()[-1]

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test.id()] = self._exc_info_to_string(err, test).strip().splitlines()[-1]

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[test.id()] = "SKIP " + reason


def main():
    comm = MPI.COMM_WORLD
    names = sys.argv[1:] or ["test_bindings"]
    suite = unittest.TestSuite()
    for n in names:
        try:
            suite.addTests(unittest.defaultTestLoader.loadTestsFromName(n))
        except ImportError as e:
            if comm.Get_rank() == 0:
                print("skip %s: %s" % (n, e))
    log = io.StringIO()
    result = unittest.TextTestRunner(stream=log, verbosity=2, resultclass=Collect).run(suite)
    outcomes = comm.gather(result.outcomes, root=0)  # once, at the end
    if comm.Get_rank() != 0:
        return
    p = comm.Get_size()
    for name in sorted(outcomes[0]):
        short = name.split(".", 1)[1] if "." in name else name
        bad = [(r, o[name]) for r, o in enumerate(outcomes) if o.get(name)]
        if bad and all(why.startswith("SKIP ") for _, why in bad):
            print("skip %s (p=%d): %s" % (short, p, bad[0][1][5:]))
        elif bad:
            print("FAIL %s (p=%d): %s" % (short, p, "; ".join("rank %d: %s" % b for b in bad)))
        else:
            print("ok %s (p=%d)" % (short, p))
    sys.stdout.flush()
    if not result.wasSuccessful():
        sys.stderr.write(log.getvalue()[-4000:])


main()
