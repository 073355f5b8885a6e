#!/bin/sh
# The scale checks of nbcc verify and simulate, too heavy for `make test`: run by hand from the
# repository top, sh tests/verify-scale.sh [BINDIR]. Prints "ok"/"FAIL" lines with the time
# and peak memory of each run. Budgets: the ring at p = 1024 and 2^20 elements verifies in
# seconds; recursive doubling verifies at p = 65536; logarithmic-round schedules simulate at
# p = 2^20 in under a minute.
bin=${1:-bin}
nbcc=$bin/nbcc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

run() { # WHAT SECONDS COMMAND...: COMMAND must succeed within SECONDS
    what=$1
    limit=$2
    shift 2
    start=$(date +%s.%N)
    if command -v /usr/bin/time > /dev/null; then
        /usr/bin/time -f "%M" -o "$tmp/mem" "$@" > "$tmp/out" 2>&1
    else
        "$@" > "$tmp/out" 2>&1
    fi
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    mem=$( [ -s "$tmp/mem" ] && awk '{ printf ", %d MiB peak", $1 / 1024 }' "$tmp/mem")
    if [ $rc -eq 0 ] && awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s <= l) }'; then
        echo "ok verify-scale $what: ${secs} s$mem"
    else
        failed=$((failed + 1))
        echo "FAIL verify-scale $what: exit $rc after ${secs} s (budget $limit s)$mem: $(tail -n 5 "$tmp/out")"
    fi
}

run "verify allreduce_ring p=1024 count=2^20" 30 \
    "$nbcc" verify allreduce_ring --p 1024 --count 1048576
run "verify allreduce_recursive_doubling p=65536 count=1001 (both ops)" 120 \
    "$nbcc" verify allreduce_recursive_doubling --p 65536 --count 1001
run "verify allreduce_rabenseifner p=65536 count=65536" 120 \
    "$nbcc" verify allreduce_rabenseifner --p 65536 --count 65536
run "simulate allreduce_recursive_doubling p=2^20 8 KiB" 60 \
    "$nbcc" simulate allreduce_recursive_doubling --p 1048576 --bytes 8k
# Rabenseifner's program takes the compiler about 0.1 ms per rank (four times recursive
# doubling's), which is most of this run: hence the larger budget.
run "simulate allreduce_rabenseifner p=2^20 64 MiB" 150 \
    "$nbcc" simulate allreduce_rabenseifner --p 1048576 --bytes 64m

echo "verify-scale: $failed failed"
[ "$failed" -eq 0 ]
