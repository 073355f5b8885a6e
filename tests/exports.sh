#!/bin/sh
# The libraries export what nbc.h declares and nothing else, and an application that defines
# functions with the library's inside names links and runs with either. Prints ok/FAIL lines.
# Usage: tests/exports.sh BUILD
: "${MPIEXEC:=mpiexec.mpich}" # the MPI is named, and MPICC with it (the Makefile sets both)
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh tools/exports.sh runtime/nbc.h > "$tmp/want"

report() { # NAME STATUS WHY
    if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "FAIL $1: $3"; fi
}

nm -D --defined-only "$build/lib/libnbc.so" | awk '{ print $3 }' | sort > "$tmp/so"
diff "$tmp/want" "$tmp/so" > "$tmp/diff"
report "libnbc.so exports exactly the functions of nbc.h ($(wc -l < "$tmp/want"))" $? "$(head -n 10 "$tmp/diff" | tr '\n' ' ')"
nm -g --defined-only "$build/lib/libnbc.a" | awk 'NF == 3 { print $3 }' | sort > "$tmp/a"
diff "$tmp/want" "$tmp/a" > "$tmp/diff"
report "libnbc.a defines no global symbol but the functions of nbc.h" $? "$(head -n 10 "$tmp/diff" | tr '\n' ' ')"

cc=${MPICC:-mpicc.mpich}
$cc -Iruntime tests/app_clash.c "$build/lib/libnbc.a" -lxxhash -lm -o "$tmp/static" > "$tmp/err" 2>&1 &&
    $MPIEXEC -n 2 "$tmp/static" > "$tmp/out" 2>> "$tmp/err" && grep -qx right "$tmp/out"
report "an application defining comm_init, cache_create, select_init, interp_step links with libnbc.a and runs" $? \
    "$(cat "$tmp/out" "$tmp/err" | head -n 5 | tr '\n' ' ')"
$cc -Iruntime tests/app_clash.c -L"$build/lib" -lnbc -Wl,-rpath,"$PWD/$build/lib" -o "$tmp/shared" > "$tmp/err" 2>&1 &&
    $MPIEXEC -n 2 "$tmp/shared" > "$tmp/out" 2>> "$tmp/err" && grep -qx right "$tmp/out"
report "the same application links with libnbc.so and runs" $? "$(cat "$tmp/out" "$tmp/err" | head -n 5 | tr '\n' ' ')"
