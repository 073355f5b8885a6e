#!/bin/sh
# Hostile input through nbcc: schedules at the 64-bit limits (check and dump must refuse them,
# and dump must never print a wrapped offset), endless and oversized files as schedules and
# tuning files, extreme rule numbers, deep nesting and a runaway program. Prints ok/FAIL lines.
# Usage: hardening.sh BINDIR (run from the repository's top directory).
bin=${1:-bin}
nbcc="$bin/nbcc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then
        echo "ok $1"
    else
        echo "FAIL $1${3:+: $3}"
        failed=1
    fi
}

# expect_error NAME WANT COMMAND...: the command exits 1 within 60 s, saying WANT
expect_error() {
    name=$1
    want=$2
    shift 2
    timeout 60 "$@" > "$tmp/out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q -- "$want" "$tmp/out"
    check "$name" $? "exit $rc: $(head -c 300 "$tmp/out")"
}

schedule() { # FILE BODY: an allreduce schedule with that body
    printf 'schedule hostile implements allreduce\nrequires count >= 1\n{\n%s\n}\n' "$2" > "$1"
}

# ---- the 64-bit limits ----
big=9223372036854775807
schedule "$tmp/index.nbs" "    round { recv recvbuf[$big] from rank; send sendbuf[0] to rank; }"
schedule "$tmp/len.nbs" "    let n = len(range(-$big - 1, $big));"
schedule "$tmp/chunk.nbs" "    let c = chunk(range(-$big - 1, 0), 4, 1);"
schedule "$tmp/scratch.nbs" "    scratch t[count];
    round { recv t[$big] from rank; send sendbuf[0] to rank; }"
schedule "$tmp/slice.nbs" "    round { recv recvbuf[$big - 1 : $big] from rank; send sendbuf[0] to rank; }"
for case in index:"is outside 'recvbuf'" len:"integer overflow" chunk:"integer overflow" scratch:"is outside 't'" \
    slice:"is outside 'recvbuf'"; do
    f=${case%%:*}
    expect_error "nbcc check refuses $f at INT64_MAX" "${case#*:}" "$nbcc" check "$tmp/$f.nbs"
    timeout 60 "$nbcc" dump "$tmp/$f.nbs" --p 2 --count 4 > "$tmp/out" 2>&1
    rc=$?
    ! grep -q "18446744" "$tmp/out" && [ "$rc" -eq 1 ]
    check "nbcc dump refuses $f at INT64_MAX, printing no wrapped offset" $? "exit $rc: $(head -c 300 "$tmp/out")"
done
# % by the most negative value is defined: (-5) % INT64_MIN is INT64_MAX - 4
schedule "$tmp/mod.nbs" "    let m = -$big - 1;
    if (-5) % m != $((big - 4)) { round { send recvbuf[count] to rank; } }"
"$nbcc" check "$tmp/mod.nbs" > "$tmp/out" 2>&1
check "nbcc check: (-5) % INT64_MIN is INT64_MAX - 4" $? "$(head -c 300 "$tmp/out")"
# a program the compiler lets pass but the verifier does not: a race within a round
schedule "$tmp/race.nbs" "    round { send recvbuf[0] to rank; recv recvbuf[0] from rank; }"
expect_error "nbcc check runs the verifier (a race within a round)" "fails verification .*race" "$nbcc" check "$tmp/race.nbs"
expect_error "nbcc dump runs the verifier (a race within a round)" "fails verification .*race" \
    "$nbcc" dump "$tmp/race.nbs" --p 2 --count 4

# ---- files without limits ----
truncate -s 3G "$tmp/big.nbs"
truncate -s 3G "$tmp/big.rules"
for f in /dev/zero /dev/urandom "$tmp/big.nbs"; do
    expect_error "nbcc check $(basename "$f") stops at the 16 MiB limit" "larger than the 16 MiB" "$nbcc" check "$f"
done
for f in /dev/zero "$tmp/big.rules"; do
    expect_error "nbcc explain --tuning $(basename "$f") stops at the 16 MiB limit" "larger than the 16 MiB" \
        "$nbcc" explain --collective allreduce --p 4 --count 8 --tuning "$f"
done
# a pipe holds a schedule as well as a file does
printf 'schedule piped implements allreduce\n{\n}\n' > "$tmp/piped.txt"
mkfifo "$tmp/fifo"
cat "$tmp/piped.txt" > "$tmp/fifo" &
timeout 60 "$nbcc" check "$tmp/fifo" > "$tmp/out" 2>&1
check "nbcc check reads a schedule from a pipe" $? "$(head -c 300 "$tmp/out")"

# ---- rule numbers ----
for cond in "p <= $big" "bytes > $big" "p < -1" "bytes >= 99999999999999999999" "p == 2147483648"; do
    printf 'allreduce %s -> ring\n' "$cond" > "$tmp/x.rules"
    expect_error "a rule with '$cond' is a file:line error" "x.rules:1: error: .* is outside 0 \.\." \
        "$nbcc" explain --collective allreduce --p 4 --count 8 --tuning "$tmp/x.rules" --mode rules
done
printf 'allreduce p <= 2147483647 bytes <= 2305843009213693951 -> ring\n' > "$tmp/x.rules"
"$nbcc" explain --collective allreduce --p 4 --count 8 --tuning "$tmp/x.rules" --mode rules > "$tmp/out" 2>&1 &&
    grep -q "chosen: allreduce_ring" "$tmp/out"
check "rules at the largest numbers allowed match" $? "$(head -c 300 "$tmp/out")"

# ---- nesting and size ----
{
    printf 'schedule deep implements allreduce { let a = '
    head -c 1000000 /dev/zero | tr '\0' '('
    printf 1
    head -c 1000000 /dev/zero | tr '\0' ')'
    printf '; }\n'
} > "$tmp/deep.nbs"
timeout 60 "$nbcc" check "$tmp/deep.nbs" > "$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "nesting too deep" "$tmp/out" && ! grep -q "out of memory" "$tmp/out"
check "a million nested parentheses: nesting too deep, not out of memory" $? "exit $rc: $(head -c 300 "$tmp/out")"
schedule "$tmp/huge.nbs" "    for i in 0 .. 20000000 { round { send recvbuf[0] to rank; } }"
expect_error "a program past 16M instructions fails, naming the limit" "more than 16777216 instructions" \
    "$nbcc" dump "$tmp/huge.nbs" --p 1 --count 1
expect_error "NBC_MAX_INSNS lowers the bound for nbcc too" "more than 10 instructions" \
    env NBC_MAX_INSNS=10 "$nbcc" dump allreduce_ring --p 4 --rank 0
exit $failed
