#!/bin/sh
# Instructions per 8-byte allreduce at p = 2 on a warm cache (bench/cgcall.c under callgrind),
# split into the library's own code (runtime/, interp/, compiler/, dsl/ and the xxHash it calls)
# and the MPI, UCX and libc code it calls; with `persistent`, of a persistent request's
# nbc_start + nbc_wait instead; with `mpi`, of the MPI library's own MPI_Allreduce.
# Usage: sh bench/callgrind.sh BUILD [CALLS] [persistent|shared|mpi]
# On Open MPI: MPIEXEC="mpiexec.openmpi --oversubscribe" sh bench/callgrind.sh build/openmpi
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
BUILD=${1:-build}
calls=${2:-1000}
mode=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$MPIEXEC -n 2 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" --collect-atstart=no \
    --toggle-collect=cg_start --toggle-collect=cg_finish "$BUILD/bench/cgcall" "$calls" $mode > "$tmp/log" 2>&1 \
    || { cat "$tmp/log"; exit 1; }
what="nbc_iallreduce + nbc_wait"
[ "$mode" = persistent ] && what="nbc_start + nbc_wait of a persistent request"
[ "$mode" = mpi ] && what="the MPI library's MPI_Allreduce"
echo "# callgrind: instructions per call of $what (one double, MPI_SUM, p = 2), mean of $calls"
r=0
for f in "$tmp"/cg.*; do
    callgrind_annotate --threshold=100 "$f" | awk -v calls="$calls" -v rank="$r" '
        function num(s) { gsub(",", "", s); return s + 0 }
        /PROGRAM TOTALS/ { total = num($1) }
        /^ *[0-9,]+ +\( *[0-9.]+%\) +[^ ]+ \[/ {
            n = num($1)
            where = $0
            sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", where)
            if (where ~ /^([^ ]*\/)?(runtime|interp|compiler|dsl)\/[^/ ]+:/ || where ~ /libxxhash/) {
                own += n
                sub(/ \[.*/, "", where)
                if (match(where, /(runtime|interp|compiler|dsl)\/[^\/ ]+:/)) where = substr(where, RSTART)
                fn[where] = n
            }
        }
        END {
            printf "process %d: %.0f in all, %.0f in the library itself, %.0f in MPI/UCX/libc\n",
                rank, total / calls, own / calls, (total - own) / calls
            if (rank == 0)
                for (f in fn) if (fn[f] / calls >= 5) printf "    %6.0f  %s\n", fn[f] / calls, f | "sort -rn"
        }'
    r=$((r + 1))
done
