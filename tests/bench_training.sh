#!/bin/sh
# The training-step benchmark runs, every variant gets the right sums and the files are well
# formed: one iteration of a made-up model of 40 small tensors at p = 2. Speed is not checked.
# Prints "ok bench_training ..." / "FAIL bench_training ...: why" lines; exits 0 when all passed.
# Usage, from the repository's top: sh tests/bench_training.sh BUILD
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
BUILD=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then
        echo "ok bench_training $1"
    else
        failed=1
        echo "FAIL bench_training $1${3:+: $3}"
    fi
}

if [ ! -x "$BUILD/bench/training" ]; then
    make --no-print-directory BUILD="$BUILD" "$BUILD/bench/training" > "$tmp/make" 2>&1
    check "builds" $? "$(tail -n 5 "$tmp/make")"
fi

# 40 tensors of 1 .. 300,000 elements, with 100 KiB buckets and fusion so that both group
awk 'BEGIN { print "# made-up"; for (i = 0; i < 40; i++) print (i % 5 == 0 ? 300000 : 1 + i * 997) }' > "$tmp/tiny.sizes"
timeout 120 $MPIEXEC -n 2 "$BUILD/bench/training" --iters 1 --warmup 0 --scale 0.5 --bucket-mib 0.1 \
    --first-bucket-mib 0.01 --fusion-mib 0.5 --csv "$tmp/t.csv" --dat "$tmp/t.dat" "$tmp/tiny.sizes" > "$tmp/out" 2>&1
check "runs ($MPIEXEC -n 2, 40 tensors, 1 iteration)" $? "$(tail -n 5 "$tmp/out")"

header="p,model,variant,iter_ms,iter_p25,iter_p75,iter_min,iter_max,exposed_ms,exposed_p25,exposed_p75,ratio,ratio_p25,ratio_p75,iters,correct"
[ "$(head -n 1 "$tmp/t.csv" 2> /dev/null)" = "$header" ]
check "CSV header" $? "$(head -n 1 "$tmp/t.csv" 2> /dev/null)"

why=$(awk -F, '
    function bad(msg) { if (!err) err = "line " NR ": " msg }
    NR == 1 { next }
    {
        if (NF != 16) bad(NF " fields")
        if ($1 != 2 || $2 != "tiny") bad("p or model: " $1 " " $2)
        if ($4 + 0 <= 0 || $9 + 0 < 0 || $9 + 0 > $4 + 0) bad("times " $4 " " $9)
        if ($16 != 1) bad($3 " gave a wrong result")
        seen[$3] = 1
    }
    END {
        n = split("nbc_prio nbc_prio_shm nbc_equal nbc_equal_shm mpi_tensor ddp_buckets horovod allreduce compute_only", v, " ")
        for (i = 1; i <= n; i++) if (!(v[i] in seen)) bad("no row for " v[i])
        print err
    }' "$tmp/t.csv" 2> /dev/null)
[ -f "$tmp/t.csv" ] && [ -z "$why" ]
check "every variant reduced every gradient exactly" $? "$why"

why=$(awk '/^#/ || NF == 0 { next } NF != 6 { print "line " NR; exit } { rows++ } END { if (rows != 9) print rows " rows, want 9" }' "$tmp/t.dat" 2> /dev/null)
[ -f "$tmp/t.dat" ] && [ -z "$why" ]
check ".dat for gnuplot well-formed" $? "$why"

exit $failed
