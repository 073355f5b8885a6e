#!/bin/sh
# The interposition library's column (docs/interpose.md): MPI_Iallreduce called through
# LD_PRELOAD=libnbcmpi.so, next to the direct nbc_iallreduce and MPICH's own MPI_Iallreduce,
# then the per-call cost of the interposition (wall clock and, with valgrind, instructions).
#     sh bench/interpose.sh BUILD P [MAX_BYTES]
# Needs $(BUILD)/bench/bench, $(BUILD)/bench/interpose_cost and $(BUILD)/lib/libnbcmpi.so
# (make bench-interpose builds them and runs this). Writes bench/results/interpose-pP.csv
# (bytes, then the median microseconds per call of each column) and interpose-pP.txt.
: "${MPIEXEC:=mpiexec.mpich}"
set -e
BUILD=${1:-build}
P=${2:-2}
MAX=${3:-1048576}
lib=$(cd "$BUILD/lib" && pwd)/libnbcmpi.so
out=bench/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one run of bench without the preload (MPICH's MPI_Iallreduce), one with it (the same call,
# now on nbc; bench's own nbc_iallreduce runs in that process too, the direct column)
$MPIEXEC -n "$P" "$BUILD/bench/bench" --max "$MAX" --csv "$tmp/plain.csv" > /dev/null
LD_PRELOAD="$lib" $MPIEXEC -n "$P" "$BUILD/bench/bench" --max "$MAX" --csv "$tmp/pre.csv" > /dev/null
{
    echo "bytes,nbc_iallreduce_us,MPI_Iallreduce_preload_us,MPI_Iallreduce_mpich_us"
    awk -F, 'FNR == 1 { file++; next }
        file == 1 && $3 == "MPI_Iallreduce" { mpich[$2] = $4 }
        file == 2 && $3 == "nbc_auto" { direct[$2] = $4; order[++n] = $2 }
        file == 2 && $3 == "MPI_Iallreduce" { pre[$2] = $4 }
        END { for (i = 1; i <= n; i++) { b = order[i]; printf "%s,%s,%s,%s\n", b, direct[b], pre[b], mpich[b] } }' \
        "$tmp/plain.csv" "$tmp/pre.csv"
} > "$out/interpose-p$P.csv"
{
    echo "# allreduce of doubles, MPI_SUM, p = $P: median microseconds per call"
    echo "# bytes    nbc_iallreduce   MPI_Iallreduce (preload)   MPI_Iallreduce (MPICH)"
    awk -F, 'NR > 1 { printf "%8s %16s %26s %24s\n", $1, $2, $3, $4 }' "$out/interpose-p$P.csv"
    echo
    echo "# the interposition's cost per call: an 8-byte allreduce at p = 1, where it is a local copy"
    LD_PRELOAD="$lib" $MPIEXEC -n 1 "$BUILD/bench/interpose_cost" 20000 21
    if command -v valgrind > /dev/null && command -v callgrind_annotate > /dev/null; then
        LD_PRELOAD="$lib" $MPIEXEC -n 1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --collect-atstart=no \
            --toggle-collect=cg_direct --toggle-collect=cg_mpi "$BUILD/bench/interpose_cost" 2000 1 callgrind \
            > "$tmp/cg.log" 2>&1
        callgrind_annotate --inclusive=yes "$tmp/cg" 2> /dev/null | awk '
            function num(s) { gsub(",", "", s); return s + 0 }
            /interpose_cost.c:cg_direct \[/ { d = num($1) }
            /interpose_cost.c:cg_mpi \[/ { m = num($1) }
            /collectives.c:MPI_Iallreduce \[/ { n = num($1) }
            END {
                # every marked call is counted, the 100 warm-up calls included (gcc folds the
                # identical functions the warm-up calls into the marked ones)
                calls = 2100
                printf "callgrind: nbc_iallreduce+nbc_wait %.0f instructions/call, MPI_Iallreduce+MPI_Wait %.0f, difference %.0f\n",
                    d / calls, m / calls, (m - d) / calls
            }'
    fi
} | tee "$out/interpose-p$P.txt"
