#!/bin/sh
# Runs one MPI command with MPICH off shared memory and UCX on TCP only, as on a cluster:
#
#   sh tests/tcp.sh mpiexec.mpich -n 4 build/tests/mpi_allreduce
#
# MPIR_CVAR_NOLOCAL=1 turns off MPICH's shared memory between ranks of one host, NBC_SHM=0 nbc's
# (docs/shared-memory.md), UCX_TLS=tcp leaves UCX only its TCP transport, UCX_NET_DEVICES
# (default lo: loopback only) its interface.
#
# MPICH 4.0.2 with UCX 1.13 over TCP often hangs in MPI_Finalize after the program has done
# and printed everything (tests/tcp_finalize.c says why): the ranks get tests/tcp_finalize.c
# preloaded, built here once into $BUILD/tests (COMMAND's first word must be an mpiexec: it gets
# -genv LD_PRELOAD). Should a run still stop making output for TCP_IDLE seconds (default 10)
# after it printed something, or exceed TCP_LIMIT seconds (default 600), it is stopped and run
# again, up to TCP_TRIES times (default 3), each noted on stderr. The output of the last attempt
# is what this prints, and its exit status is returned (124 when it was stopped).
export MPIR_CVAR_NOLOCAL=1 NBC_SHM=0 UCX_TLS=tcp
: "${UCX_NET_DEVICES:=lo}" "${TCP_IDLE:=10}" "${TCP_LIMIT:=600}" "${TCP_TRIES:=3}"
export UCX_NET_DEVICES
so=${BUILD:-build}/tests/tcp_finalize.so
src=$(dirname "$0")/tcp_finalize.c
if [ "$so" -nt "$src" ] || { mkdir -p "$(dirname "$so")" &&
    ${MPICC:-mpicc.mpich} -std=gnu11 -Wall -Wextra -Werror -O2 -shared -fPIC "$src" -lucp -o "$so"; }; then
    mpiexec=$1
    shift
    set -- "$mpiexec" -genv LD_PRELOAD "$(cd "$(dirname "$so")" && pwd)/$(basename "$so")" "$@"
else
    echo "tcp.sh: could not build $so: MPI_Finalize may hang" >&2
fi
out=$(mktemp)
err=$(mktemp)
pid=
trap 'rm -f "$out" "$err"' EXIT
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; exit 130' INT
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; exit 143' TERM

attempt=1
while :; do
    "$@" > "$out" 2> "$err" &
    pid=$!
    t=0
    idle=0
    last=0
    hung=
    while kill -0 "$pid" 2> /dev/null; do
        sleep 1
        t=$((t + 1))
        size=$(wc -c < "$out")
        if [ "$size" -gt 0 ] && [ "$size" -eq "$last" ]; then idle=$((idle + 1)); else idle=0; fi
        last=$size
        if [ "$idle" -ge "$TCP_IDLE" ] || [ "$t" -ge "$TCP_LIMIT" ]; then
            hung=1
            kill "$pid" 2> /dev/null
            sleep 2
            kill -9 "$pid" 2> /dev/null
            break
        fi
    done
    wait "$pid"
    rc=$?
    pid=
    [ -z "$hung" ] && break
    echo "tcp.sh: attempt $attempt stopped after ${t} s, its output idle for ${idle} s (MPI_Finalize over TCP?): $*" >&2
    [ "$attempt" -ge "$TCP_TRIES" ] && { rc=124; break; }
    attempt=$((attempt + 1))
done
cat "$out"
cat "$err" >&2
exit "$rc"
