#!/bin/sh
# Builds nbc._fast (python/nbc/_fast.c) into OUT/nbc/ for the python3 the Python package runs
# on: PYTHON, or the first python3 on PATH that has mpi4py and numpy (as tests/python/run.sh
# picks it). No MPI and no nbc are linked (the module gets nbc's functions from the libnbc.so
# the package loads), so one build serves both MPIs. Without that python3 or its headers (Debian: python3-dev) it says so and builds nothing:
# the package then runs on ctypes alone.
# Usage: sh python/build-fast.sh OUT "CFLAGS"   (CC: the C compiler, default cc)
out=$1
flags=$2
py=$(sh python/find-python.sh)
if [ -z "$py" ]; then
    echo "nbc._fast not built: no python3 with mpi4py and numpy (the Python package will use ctypes)"
    exit 0
fi
set -- $("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX"))')
inc=$1
suffix=$2
if [ ! -f "$inc/Python.h" ]; then
    echo "nbc._fast not built: no $inc/Python.h (install python3-dev; the Python package will use ctypes)"
    exit 0
fi
mkdir -p "$out/nbc"
set -x
${CC:-cc} -std=gnu11 $flags -fPIC -shared -I"$inc" python/nbc/_fast.c -o "$out/nbc/_fast$suffix"
