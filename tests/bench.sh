#!/bin/sh
# The benchmark runs and writes well-formed files: a tiny run (8 B .. 64 KiB, 3 batches, p = 2).
# Speed is not checked here, only shape. Prints "ok bench ..." / "FAIL bench ...: why" lines;
# exits 0 when all passed. Usage, from the repository's top: sh tests/bench.sh BINDIR BUILD
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
BINDIR=${1:-bin}
BUILD=${2:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then
        echo "ok bench $1"
    else
        failed=1
        echo "FAIL bench $1${3:+: $3}"
    fi
}

if [ ! -x "$BUILD/bench/bench" ]; then
    make --no-print-directory BUILD="$BUILD" BINDIR="$BINDIR" "$BUILD/bench/bench" > "$tmp/make" 2>&1
    check "builds" $? "$(tail -n 5 "$tmp/make")"
fi

timeout 60 $MPIEXEC -n 2 "$BUILD/bench/bench" --min 8 --max 64K --reps 3 --batch 0.0002 \
    --schedules recursive_doubling,ring,segmented_ring:segsize=4096 --csv "$tmp/b.csv" --dat "$tmp/b.dat" \
    --overlap "$tmp/o.csv" --overlap-sizes 8,65536 > "$tmp/out" 2>&1
check "runs ($MPIEXEC -n 2, 8 B .. 64 KiB)" $? "$(tail -n 5 "$tmp/out")"

header="p,bytes,variant,median_us,p25_us,p75_us,min_us,max_us,reps,iters,ratio_iallreduce,ratio_allreduce,MBps,correct"
[ "$(head -n 1 "$tmp/b.csv" 2> /dev/null)" = "$header" ]
check "CSV header" $? "$(head -n 1 "$tmp/b.csv" 2> /dev/null)"

# Every row: 14 fields, positive times and ratios (MB/s may round to 0 on a loaded machine), quartiles in order, a correct result, MPICH's own
# ratios 1; every size from 8 B to 64 KiB present for nbc_auto and both MPICH calls.
why=$(awk -F, '
    function bad(msg) { if (!err) err = "line " NR ": " msg }
    NR == 1 { next }
    {
        if (NF != 14) bad(NF " fields")
        if ($1 != 2) bad("p is " $1)
        for (i = 4; i <= 13; i++) if ($i !~ /^[0-9]+(\.[0-9]+)?$/ || (i < 13 && $i + 0 <= 0)) bad("field " i " is " $i)
        if (!($7 <= $5 && $5 <= $4 && $4 <= $6 && $6 <= $8)) bad("min <= p25 <= median <= p75 <= max fails")
        if ($14 != 1) bad($3 " gave a wrong result")
        if ($3 == "MPI_Iallreduce" && $11 != 1) bad("MPI_Iallreduce ratio " $11)
        if ($3 == "MPI_Allreduce" && $12 != 1) bad("MPI_Allreduce ratio " $12)
        seen[$2 " " $3] = 1
        rows++
    }
    END {
        for (b = 8; b <= 65536; b *= 2) {
            split("nbc_auto MPI_Iallreduce MPI_Allreduce", v, " ")
            for (i = 1; i <= 3; i++) if (!((b " " v[i]) in seen)) bad("no row for " v[i] " at " b " B")
        }
        if (!rows) bad("no rows")
        print err
    }' "$tmp/b.csv" 2> /dev/null)
[ -f "$tmp/b.csv" ] && [ -z "$why" ]
check "CSV rows well-formed, every size, results correct" $? "$why"

# The plot's data: a header, then one line per size with as many columns.
why=$(awk 'NR == 1 { n = NF; next } NF != n || $1 !~ /^[0-9]+$/ { print "line " NR; exit } END { if (NR != 15) print NR " lines, want 15" }' "$tmp/b.dat" 2> /dev/null)
[ -f "$tmp/b.dat" ] && [ -z "$why" ]
check ".dat for gnuplot well-formed" $? "$why"

why=$(awk -F, 'NR == 1 { if ($0 != "p,bytes,variant,pure_us,compute_us,overall_us,overlap_pct,tests,chunk_us") print "header: " $0; next }
    NF != 9 || $7 < 0 || $7 > 100 || $4 <= 0 || $5 <= 0 || $6 <= 0 { print "line " NR ": " $0; exit }
    { rows++ } END { if (rows != 4) print rows " rows, want 4" }' "$tmp/o.csv" 2> /dev/null)
[ -f "$tmp/o.csv" ] && [ -z "$why" ]
check "overlap CSV well-formed" $? "$why"

exit $failed
