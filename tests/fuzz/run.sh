#!/bin/sh
# Runs each fuzzer of `make fuzz` for SECONDS from the seed corpus and prints "ok NAME" or
# "FAIL NAME: why". New inputs it finds are kept in FUZZDIR/corpus-*; a crash is saved in
# FUZZDIR/ and fails the check. Usage: run.sh FUZZDIR SECONDS
dir=$1
secs=${2:-20}
mkdir -p "$dir/corpus-schedule" "$dir/corpus-rules" "$dir/seed-rules"
cp runtime/default.rules docs/*.rules "$dir/seed-rules/"
status=0
run() { # NAME DICT CORPUS...: one fuzzer
    name=$1
    dict=$2
    shift 2
    "$dir/$name" -max_total_time="$secs" -dict="$dict" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$dir/$name-" "$@" > "$dir/$name.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$name.log")
    if [ "$rc" -eq 0 ]; then
        echo "ok $name: $runs runs in $secs s, corpus $(ls "$1" | wc -l) inputs"
    else
        echo "FAIL $name: exit $rc after $runs runs: $(grep -m 1 -E 'ERROR|runtime error|verifier rejects' "$dir/$name.log")"
        status=1
    fi
}
run fuzz_schedule tests/fuzz/schedule.dict "$dir/corpus-schedule" schedules tests/faults
run fuzz_rules tests/fuzz/rules.dict "$dir/corpus-rules" "$dir/seed-rules"
exit $status
