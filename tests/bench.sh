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

# The rows of the shared-memory prototype and of the bound (two ranks on one node): a correct
# result, and a bound below the median of every call through MPI at its size (not the
# prototype's, nor nbc's on nbc_alloc_mem buffers, the rows ending in _shared: from 1 KiB they
# run allreduce_shm, which does what the bound counts, and may come within noise of it).
why=$(awk -F, 'NR > 1 { t[$2, $3] = $4; sizes[$2] = 1; if ($3 == "bound") b[$2] = $4 }
    END {
        for (s in sizes) {
            if (!((s, "shm_prototype") in t)) { print "no shm_prototype row at " s " B"; exit }
            if (!(s in b)) { print "no bound row at " s " B"; exit }
        }
        for (k in t) { split(k, kv, SUBSEP); if (kv[2] != "shm_prototype" && kv[2] !~ /_shared$/ && t[k] < b[kv[1]]) { print kv[2] " at " kv[1] " B is below the bound"; exit } }
    }' "$tmp/b.csv" 2> /dev/null)
[ -f "$tmp/b.csv" ] && [ -z "$why" ]
check "shm_prototype and bound rows" $? "$why"

# bench/loop: small calls back to back, their sums checked (it aborts on a wrong one); one
# line per size, three times each.
if [ ! -x "$BUILD/bench/loop" ]; then
    make --no-print-directory BUILD="$BUILD" BINDIR="$BINDIR" "$BUILD/bench/loop" > "$tmp/make" 2>&1
    check "loop builds" $? "$(tail -n 5 "$tmp/make")"
fi
# shellcheck disable=SC2086
timeout 60 $MPIEXEC -n 2 "$BUILD/bench/loop" 8 64 > "$tmp/loop" 2>&1 &&
    [ "$(grep -c '^ *[0-9]* B:\( [0-9.]*\)\{3\} µs$' "$tmp/loop")" -eq 2 ]
check "loop runs ($MPIEXEC -n 2, 8 and 64 B), sums right, a line per size" $? "$(tail -n 5 "$tmp/loop")"
# shellcheck disable=SC2086
timeout 60 $MPIEXEC -n 2 "$BUILD/bench/loop" --mpi 8 > "$tmp/loop" 2>&1 &&
    [ "$(grep -c '^ *[0-9]* B:\( [0-9.]*\)\{3\} µs$' "$tmp/loop")" -eq 1 ]
check "loop --mpi runs the MPI's own MPI_Allreduce (8 B), sum right" $? "$(tail -n 5 "$tmp/loop")"
# shellcheck disable=SC2086
timeout 60 $MPIEXEC -n 2 "$BUILD/bench/loop" --shared --rewrite 2048 65536 > "$tmp/loop" 2>&1 &&
    [ "$(grep -c '^ *[0-9]* B:\( [0-9.]*\)\{3\} µs$' "$tmp/loop")" -eq 2 ]
check "loop --shared --rewrite runs on nbc_alloc_mem buffers written before each call (2 and 64 KiB), sums right" $? "$(tail -n 5 "$tmp/loop")"

# Gloo side by side (bench/gloo.cc), when Gloo is installed: Gloo's five allreduces, nbc (two
# ways), MPI's allreduce and the TCP exchange, each result checked. The smoke test does not force TCP on MPI (bench/run.sh does).
gloo_header="p,bytes,variant,median_us,p25_us,p75_us,min_us,max_us,reps,iters,nbc_over_this,MBps,correct"
if dpkg-query -W -f='${Status}' libgloo-dev 2> /dev/null | grep -q "install ok installed"; then
    if [ ! -x "$BUILD/bench/gloo" ]; then
        make --no-print-directory NO_DEPS=1 BUILD="$BUILD" BINDIR="$BINDIR" "$BUILD/bench/gloo" > "$tmp/make" 2>&1
        check "gloo builds" $? "$(tail -n 5 "$tmp/make")"
    fi
    # shellcheck disable=SC2086
    [ -x "$BUILD/bench/gloo" ] && timeout 60 $MPIEXEC -n 2 "$BUILD/bench/gloo" --min 8 --max 1K --reps 2 --batch 0.0002 --store "$tmp" \
        --csv "$tmp/g.csv" > "$tmp/gout" 2>&1
    check "gloo runs ($MPIEXEC -n 2, 8 B .. 1 KiB)" $? "$(tail -n 5 "$tmp/gout")"
    why=$(awk -F, -v h="$gloo_header" 'NR == 1 { if ($0 != h) print "header: " $0; next }
        NF != 13 || $4 <= 0 || $13 != 1 { print "line " NR ": " $0; exit }
        { rows++; v[$3] = 1 }
        END { if (rows != 8 * 9) print rows " rows, want 72"
              split("gloo_ring gloo_ring_chunked gloo_halving_doubling gloo_bcube gloo_allreduce nbc_auto@tcp tcp_exchange", w, " ")
              for (i = 1; i <= 7; i++) if (!(w[i] in v)) print "no " w[i] }' "$tmp/g.csv" 2> /dev/null)
    [ -f "$tmp/g.csv" ] && [ -z "$why" ]
    check "gloo CSV well-formed, results correct" $? "$why"
    # shellcheck disable=SC2086
    timeout 60 $MPIEXEC -n 2 "$BUILD/bench/gloo" --min 8 --max 64 --reps 2 --batch 0.0002 --store "$tmp" --gloo-sync \
        --csv "$tmp/gs.csv" > "$tmp/gsout" 2>&1 && [ "$(grep -c '_sync,.*,1$' "$tmp/gs.csv")" -eq 16 ]
    check "gloo --gloo-sync runs, results correct" $? "$(tail -n 3 "$tmp/gsout")"
    left=$(find "$tmp" -maxdepth 1 -name 'nbc-gloo-*')
    [ -z "$left" ]
    check "gloo removes its rendezvous directory" $? "left in the store"
else
    echo "ok bench gloo # skip: libgloo-dev is not installed (make bench installs it)"
fi

# Open MPI's columns, when its build exists (make MPI=openmpi, or make bench).
ompi=build/openmpi
if [ "${MPI:-mpich}" = mpich ] && [ -x "$ompi/bench/bench" ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 timeout 60 \
        mpiexec.openmpi --oversubscribe -n 2 "$ompi/bench/bench" --shm 0 --min 8 --max 1K --reps 2 --batch 0.0002 \
        --csv "$tmp/openmpi-p2.csv" > "$tmp/oout" 2>&1
    check "Open MPI's bench runs (mpiexec.openmpi -n 2, 8 B .. 1 KiB)" $? "$(tail -n 5 "$tmp/oout")"
    why=$(awk -F, 'NR > 1 && ($14 != 1 || NF != 14) { print "line " NR ": " $0; exit }' "$tmp/openmpi-p2.csv" 2> /dev/null)
    [ -f "$tmp/openmpi-p2.csv" ] && [ -z "$why" ]
    check "Open MPI's CSV well-formed, results correct" $? "$why"
fi

# The wide table and its .dat from whichever of those ran (the first run's CSV as bench-p2.csv).
cp "$tmp/b.csv" "$tmp/bench-p2.csv" 2> /dev/null
[ -f "$tmp/g.csv" ] && cp "$tmp/g.csv" "$tmp/gloo-p2.csv"
sh bench/wide.sh "$tmp" 2 > "$tmp/wide.md" 2> "$tmp/wide.err"
why=$(awk -F'|' '/^\| [0-9]+ (B|KiB) \|/ { rows++ } END { if (rows < 2 * 8) print rows " size rows, want at least 16" }' "$tmp/wide.md")
[ -z "$why" ] && awk 'NR == 1 { n = NF; next } NF != n { exit 1 }' "$tmp/wide-p2.dat" 2> /dev/null
check "wide table and .dat" $? "$why $(cat "$tmp/wide.err")"

exit $failed
