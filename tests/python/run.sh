#!/bin/sh
# The Python tests (python/nbc) on P processes, under the launcher of the MPI that mpi4py runs
# on, with the libnbc.so built against that MPI: the bindings at every P, torch at P = 2, at P = 1
# the error a mismatched library gives, and nbc.empty's shared memory (test_memory, under
# NBC_TRACE=2) at every P. Prints ok/FAIL lines, or one "skip" line when Python's modules, the
# matching build of nbc or its launcher are missing.
# Usage: sh tests/python/run.sh P   (PYTHON: the interpreter to use; default the first python3
# on PATH that has numpy and mpi4py)
p=$1
py=$(sh python/find-python.sh)
if [ -z "$py" ]; then
    echo "skip python: no python3 with numpy and mpi4py (install python3-numpy python3-mpi4py)"
    exit 0
fi
# which MPI mpi4py runs on, asked without initializing it
version=$("$py" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])')
case "$version" in
    "Open MPI"*) flavor=openmpi lib=build/openmpi/lib/libnbc.so other=build/lib/libnbc.so
        launcher="mpiexec.openmpi --oversubscribe" make="make MPI=openmpi"
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 ;;
    *MPICH*) flavor=mpich lib=build/lib/libnbc.so other=build/openmpi/lib/libnbc.so
        launcher=mpiexec.mpich make=make ;;
    *) echo "skip python: mpi4py runs on an MPI nbc does not build for ($version)"; exit 0 ;;
esac
if [ ! -f "$lib" ]; then
    echo "skip python: mpi4py runs on $version and no nbc is built for it ($make builds $lib)"
    exit 0
fi
if ! command -v "${launcher%% *}" > /dev/null; then
    echo "skip python: no ${launcher%% *} to run mpi4py's MPI"
    exit 0
fi
mods="test_bindings test_fast test_collectives"
[ "$p" = 2 ] && mods="test_bindings test_fast test_collectives test_torch"
unset NBC_LIBRARY NBC_FAST NBC_EXPECT_FAST
# nbc._fast, when make built it for this python3, must be the path the calls take
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
for b in build/openmpi build; do
    [ -f "$b/python/nbc/_fast$suffix" ] && export NBC_EXPECT_FAST=1
done
timeout 600 $launcher -n "$p" "$py" tests/python/run.py $mods
rc=$?
# and the ctypes path alone, as where nothing is compiled (its lines end in "(p=P)" too)
out=$(timeout 300 $launcher -n "$p" env NBC_FAST=0 "$py" tests/python/run.py test_fast)
rc3=$?
printf '%s\n' "$out" | sed 's/^\(ok\|FAIL\) \([^ ]*\)/\1 \2[NBC_FAST=0]/'
[ "$rc" -eq 0 ] && rc=$rc3
# nbc.empty's arrays: NBC_TRACE=2 makes each allreduce say which path it took (on stderr, with
# every program traced: kept out of the output unless the run fails)
err=$(mktemp)
timeout 300 $launcher -n "$p" env NBC_TRACE=2 "$py" tests/python/run.py test_memory 2> "$err"
rc2=$?
[ "$rc2" -ne 0 ] && grep -v "^nbc: trace\|^schedule \|^; \|^round \|^ *[0-9]" "$err" | tail -n 20 >&2
rm -f "$err"
[ "$rc" -eq 0 ] && rc=$rc2
if [ "$p" = 1 ] && [ -f "$other" ]; then
    # the other MPI's build, named on purpose: import must refuse it and say what to build
    out=$(NBC_LIBRARY=$other timeout 60 "$py" -c 'import sys; sys.path.insert(0, "python"); import nbc' 2>&1)
    if [ $? -ne 0 ] && printf '%s' "$out" | grep -q "LibraryError: nbc: mpi4py runs on .*built against" &&
        printf '%s' "$out" | grep -qF "$make"; then
        echo "ok a libnbc.so built against the other MPI is refused at import, saying what to build ($flavor)"
    else
        echo "FAIL a libnbc.so built against the other MPI is refused at import: $(printf '%s' "$out" | tail -n 1)"
    fi
fi
exit $rc
