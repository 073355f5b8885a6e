#!/bin/sh
# Prints the interpreter nbc's Python parts use: $PYTHON, else the first python3 on PATH that
# has numpy and mpi4py; nothing when there is none. Used by python/build-fast.sh and the tests.
for c in ${PYTHON:-} $(which -a python3 2>/dev/null); do
    if "$c" -c 'import numpy, mpi4py' 2>/dev/null; then
        echo "$c"
        exit 0
    fi
done
