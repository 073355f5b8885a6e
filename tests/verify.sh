#!/bin/sh
# nbcc verify, simulate and draw. Every shipped schedule verifies; every seeded fault in
# tests/faults/ is caught, with its message, at its place; simulated times equal the closed
# forms of tests/verify/formulas.txt; drawings are well formed and docs/ holds them up to date;
# allreduce_shm verifies and the wrong shared-memory fixtures of tests/shm are caught.
# Run from the repository top: sh tests/verify.sh BINDIR [quick]. Prints "ok verify WHAT" or
# "FAIL verify WHAT: why" per check and exits 0 when all passed. The heavy scale checks are in
# tests/verify-scale.sh, which `make test` does not run. quick (the sanitizer pass): every
# schedule up to p = 12 instead of 33 (the vector ones 64).
bin=${1:-bin}
quick=${2:-}
nbcc=$bin/nbcc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

check() { # WHAT STATUS [WHY]
    if [ "$2" -eq 0 ]; then
        echo "ok verify $1"
    else
        failed=$((failed + 1))
        echo "FAIL verify $1${3:+: $3}"
    fi
}

for cmd in verify simulate draw; do
    "$nbcc" $cmd --help > "$tmp/out" 2>&1 && grep -q "usage: nbcc $cmd" "$tmp/out"
    check "nbcc $cmd --help" $?
done
"$nbcc" --help | grep -q "^  verify " && "$nbcc" --help | grep -q "^  simulate " && "$nbcc" --help | grep -q "^  draw "
check "nbcc --help lists verify, simulate and draw" $?

# ---- every shipped schedule verifies, in place and not ----
# the vector collectives' schedules at every p up to 64, each with the vector cases of
# docs/verify.md (zeros, one non-zero column, random counts packed, with gaps, reversed)
vector="implements \(alltoallv\|gatherv\|scatterv\|allgatherv\|reduce_scatterv\) "
for f in schedules/*.nbs examples/*.nbs; do
    ps=1..33
    if grep -q "$vector" "$f"; then ps=1..64; fi
    if [ -n "$quick" ]; then ps=1..12; fi
    for mode in "" --inplace; do
        "$nbcc" verify "$f" --p $ps --counts 1,p+1,1001 $mode > "$tmp/out" 2>&1
        check "$f verifies for p = $ps, counts 1, p+1, 1001${mode:+, $mode}" $? "$(head -n 20 "$tmp/out")"
    done
    if grep -q "implements \(reduce\|bcast\|gather\|scatter\|gatherv\|scatterv\)\( \|$\)" "$f"; then # rooted: a root other than 0 as well
        rp=4..17
        if grep -q "$vector" "$f"; then rp=4..64; fi
        if [ -n "$quick" ]; then rp=4..12; fi
        for mode in "" --inplace; do
            "$nbcc" verify "$f" --p $rp --counts 0,p+1,1001 --root 3 $mode > "$tmp/out" 2>&1
            check "$f verifies with root 3 for p = $rp${mode:+, $mode}" $? "$(head -n 20 "$tmp/out")"
        done
    fi
done
"$nbcc" verify schedules/allreduce_multi.nbs --p 1..9 --counts 0,p+1,101 --nbufs 1..4 > "$tmp/out" 2>&1
check "multi-buffer schedules verify with 1..4 buffers" $? "$(head -n 20 "$tmp/out")"
"$nbcc" verify allreduce_segmented_ring --p 2..9 --counts p,1001 --param segsize=8 > "$tmp/out" 2>&1
check "verify --param: the segmented ring with 8-byte segments" $? "$(head -n 20 "$tmp/out")"
for mode in "" --inplace; do
    "$nbcc" verify allreduce_rabenseifner --p 1..33 --counts p,p+1,1001 --param segsize=24 $mode > "$tmp/out" 2>&1
    check "Rabenseifner with halving steps in 24-byte segments verifies for p = 1..33${mode:+, $mode}" $? "$(head -n 20 "$tmp/out")"
done

# ---- topologies: every map of 1..4 nodes x 1..4 ranks, host by host and round-robin, and uneven nodes ----
"$nbcc" verify schedules/barrier_nodes.nbs --nodes 1..4 --ppn 1..4 --placement both > "$tmp/out" 2>&1 &&
    grep -q "ok, 25 runs (1..4 nodes x 1..4 ranks, block and cyclic placements" "$tmp/out" &&
    "$nbcc" verify schedules/barrier_nodes.nbs --node-sizes 3,2,1 --placement both > "$tmp/out" 2>&1 &&
    "$nbcc" verify schedules/barrier_nodes.nbs --node-sizes 5,1,3,2,7 --placement both > "$tmp/out" 2>&1
check "the node-aware barrier verifies on 1..4 nodes x 1..4 ranks, 3 + 2 + 1 and 5 + 1 + 3 + 2 + 7, both placements" $? "$(head -n 20 "$tmp/out")"
# the schedules with data: counts 0, 1, p-1, p+1 and 1001 on every topology, in place and not
for name in allreduce_nodes allreduce_nodes_small bcast_nodes reduce_nodes; do
    for mode in "" --inplace; do
        "$nbcc" verify schedules/$name.nbs --nodes 1..4 --ppn 1..4 --placement both --counts 0,1,p-1,p+1,1001 $mode \
            > "$tmp/out" 2>&1 &&
            "$nbcc" verify schedules/$name.nbs --node-sizes 3,2,1 --placement both --counts 0,1,5,7,1001 $mode > "$tmp/out" 2>&1 &&
            "$nbcc" verify schedules/$name.nbs --node-sizes 5,1,3,2,7 --placement both --counts 0,1,17,19,1001 $mode > "$tmp/out" 2>&1
        check "$name verifies on 1..4 nodes x 1..4 ranks, 3 + 2 + 1 and 5 + 1 + 3 + 2 + 7, both placements${mode:+, $mode}" \
            $? "$(head -n 20 "$tmp/out")"
    done
done
# the rooted ones with every root: of each topology of 1..4 nodes x 1..4 ranks, of 3 + 2 + 1
# and of 5 + 1 + 3 + 2 + 7
for name in bcast_nodes reduce_nodes; do
    for mode in "" --inplace; do
        fails=""
        topos='"--nodes 1 --ppn 1" "--nodes 1 --ppn 2" "--nodes 1 --ppn 3" "--nodes 1 --ppn 4"
            "--nodes 2 --ppn 1" "--nodes 2 --ppn 2" "--nodes 2 --ppn 3" "--nodes 2 --ppn 4"
            "--nodes 3 --ppn 1" "--nodes 3 --ppn 2" "--nodes 3 --ppn 3" "--nodes 3 --ppn 4"
            "--nodes 4 --ppn 1" "--nodes 4 --ppn 2" "--nodes 4 --ppn 3" "--nodes 4 --ppn 4"
            "--node-sizes 3,2,1" "--node-sizes 5,1,3,2,7"'
        # (the sanitizer pass: two topologies, the plain pass has them all)
        where="1..4 nodes x 1..4 ranks, 3 + 2 + 1 and 5 + 1 + 3 + 2 + 7"
        [ -n "$quick" ] && topos='"--nodes 2 --ppn 2" "--node-sizes 3,2,1"' && where="2 nodes x 2 ranks and 3 + 2 + 1"
        eval "set -- $topos"
        for topo in "$@"; do
            set -- $topo
            case $1 in --nodes) np=$(($2 * $4)) ;; *) np=$(($(echo "$2" | tr ',' '+'))) ;; esac
            r=0
            while [ $r -lt $np ]; do
                # shellcheck disable=SC2086
                "$nbcc" verify schedules/$name.nbs $topo --placement both --counts 0,1,p-1,p+1,1001 --root $r $mode \
                    > "$tmp/out" 2>&1 || fails="$fails [$topo root $r: $(head -n 3 "$tmp/out")]"
                r=$((r + 1))
            done
        done
        check "$name verifies with every root on $where, both placements${mode:+, $mode}" \
            $([ -z "$fails" ]; echo $?) "$fails"
    done
done
# two levels of cost: 2 x 2 ranks, 1 MiB, 2α_node + 2(N-1)α + 2(k-1)/L·nβ_node + 2(N-1)/N·n/L·β + 3/4·nγ
"$nbcc" simulate schedules/allreduce_nodes.nbs --nodes 2 --ppn 2 --placement cyclic --bytes 1m \
    --model alpha=20e-6,beta=8e-9,gamma=1e-10,alpha_node=1e-6,beta_node=2e-10 > "$tmp/out" 2>&1
grep -q "^time: 4.524662e-03 s" "$tmp/out" && grep -q "^  and inside a node: 2 messages (alpha_node)" "$tmp/out"
check "simulate on 2 nodes x 2 prices messages inside a node apart: the two-level allreduce's closed form" $? "$(head -n 5 "$tmp/out")"
# the other node-aware schedules on 4 nodes x 4 ranks, 1 MiB, against the closed forms of their
# headers (N = k = 4: two steps inside a node, two between nodes; the barrier's tokens are 4 bytes)
while read -r name want; do
    "$nbcc" simulate schedules/$name.nbs --nodes 4 --ppn 4 --bytes 1m \
        --model alpha=20e-6,beta=8e-9,gamma=1e-10,alpha_node=1e-6,beta_node=2e-10 > "$tmp/out" 2>&1
    grep -q "^time: $want s" "$tmp/out"
    check "simulate $name on 4 nodes x 4 equals its closed form ($want s)" $? "$(head -n 4 "$tmp/out")"
done << 'EOF'
allreduce_nodes_small 1.807951e-02
bcast_nodes 1.723865e-02
reduce_nodes 1.765808e-02
barrier_nodes 4.406720e-05
EOF
"$nbcc" verify ring --nodes 2 --ppn 2 --p 4 > "$tmp/out" 2>&1
rc=$?
grep -q "^nbcc verify: --p, or a topology" "$tmp/out"
check "verify: --p and a topology together is a usage error" $((rc != 2 || $? != 0)) "exit $rc: $(cat "$tmp/out")"

# ---- shared memory (docs/verify.md): allreduce_shm, and the fixtures of tests/shm ----
for mode in "" --inplace; do
    "$nbcc" verify allreduce_shm --p 1..9,12,16 --counts 0,1,p-1,p+1,1001 --param segsize=8 $mode > "$tmp/out" 2>&1
    check "allreduce_shm in 8-byte segments verifies for p = 1..9, 12, 16${mode:+, $mode}" $? "$(head -n 20 "$tmp/out")"
done
"$nbcc" verify tests/shm/good_two_rounds.nbs --p 1..9 --counts 1,p-1,p+1,101 > "$tmp/out" 2>&1
check "shm fixture good_two_rounds verifies" $? "$(head -n 20 "$tmp/out")"
# NAME KEY-PHRASE: each wrong fixture is rejected at an instruction of its file, saying why
while read -r name expect; do
    "$nbcc" verify "tests/shm/$name.nbs" --p 1..6 --counts 1,p+1,13 > "$tmp/out" 2>&1
    rc=$?
    grep -qE -- "^tests/shm/$name.nbs:[0-9]+:[0-9]+: error: rank [0-9]+, round [0-9]+, pc [0-9]+ .*$expect" "$tmp/out"
    check "shm fixture $name is rejected: $expect" $((rc != 1 || $? != 0)) "exit $rc: $(head -n 12 "$tmp/out")"
done << 'EOF'
missing_final_sync reads rank 1's sendbuf elements \[0, 1\) after rank 1 may have returned
race race: writes rank 1's recvbuf elements \[0, 1\), and rank 0 \(round 0, pc 1\) writes them; neither happens before the other
wait_unmatched unmatched wait: rank 1 finished without raising the matching signal
signal_unwaited signal never waited for: rank 1 finished without waiting for it
read_after_return reads rank 1's sendbuf elements \[0, 1\) after rank 1 may have returned
EOF
# shared memory inside each node of several: the stage's two-level allreduce, and a one-node
# schedule refused across nodes
for mode in "" --inplace; do
    "$nbcc" verify allreduce_nodes_stage --nodes 1..4 --ppn 1..4 --placement both --counts 0,1,p-1,p+1,1001 $mode > "$tmp/out" 2>&1 &&
        "$nbcc" verify allreduce_nodes_stage --node-sizes 3,2,1 --placement both --counts 0,1,5,1001 $mode > "$tmp/out" 2>&1 &&
        "$nbcc" verify allreduce_nodes_stage --node-sizes 5,1,3,2,7 --placement both --counts 0,13,1001 $mode > "$tmp/out" 2>&1
    check "allreduce_nodes_stage verifies on 1..4 nodes x 1..4 ranks, 3 + 2 + 1 and 5 + 1 + 3 + 2 + 7, both placements${mode:+, $mode}" \
        $? "$(head -n 20 "$tmp/out")"
done
"$nbcc" verify allreduce_shm_small --nodes 2 --ppn 2 --counts 1 > "$tmp/out" 2>&1
rc=$?
grep -q "error: rank 2 is on node 1 and rank 0 on node 0: memory is shared inside a node only" "$tmp/out"
check "a one-node shared schedule on 2 nodes is refused: memory is shared inside a node only" $((rc != 1 || $? != 0)) "exit $rc: $(head -n 5 "$tmp/out")"
for p in 2 5; do
    "$nbcc" simulate allreduce_shm --p $p --bytes 64k > "$tmp/out" 2>&1 && grep -q "^0 messages" "$tmp/out" &&
        grep -q "^$((p * (p - 1))) signals through shared memory" "$tmp/out" && grep -q "^critical path: $((p - 1)) messages" "$tmp/out"
    check "simulate allreduce_shm p = $p: no message, p(p-1) signals, p-1 of them on the path" $? "$(head -n 8 "$tmp/out")"
    "$nbcc" draw allreduce_shm --p $p --count 10 -o "$tmp/shm.svg" > "$tmp/out" 2>&1 &&
        [ "$(grep -c 'stroke-dasharray="5 3"' "$tmp/shm.svg")" -eq $((p * (p - 1))) ] &&
        { ! command -v xmllint > /dev/null || xmllint --noout "$tmp/shm.svg"; } &&
        [ "$("$nbcc" draw allreduce_shm --p $p --count 10 --format dot | grep -c 'label="signal"')" -eq $((p * (p - 1))) ]
    check "draw allreduce_shm p = $p: a dashed arrow per signal (SVG, dot)" $? "$(head -n 5 "$tmp/out")"
done

# ---- the seeded faults: each caught, with its message, at its line and column ----
for f in tests/faults/*.nbs; do
    args=$(sed -n 's/^# args: //p' "$f")
    expect=$(sed -n 's/^# expect: //p' "$f")
    at=$(sed -n 's/^# at: //p' "$f")
    # shellcheck disable=SC2086
    "$nbcc" verify "$f" $args > "$tmp/out" 2>&1
    rc=$?
    grep -qE -- "$expect" "$tmp/out" && grep -q "^$f:$at: error: " "$tmp/out"
    check "fault $(basename "$f" .nbs) is caught at $at" $((rc != 1 || $? != 0)) "exit $rc: $(head -n 12 "$tmp/out")"
done

# ---- the simulator against closed forms, at powers of two ----
grep -v '^#' tests/verify/formulas.txt | grep . > "$tmp/formulas"
"$nbcc" list > "$tmp/known"
while read -r name formula; do
    grep -q "^$name " "$tmp/known" || continue # waiting for its schedule
    model="alpha=1e-6,beta=1e-9,gamma=2e-10"
    case $formula in loggp*) formula=${formula#loggp }; model="L=1e-6,o=2e-7,g=3e-7,G=1e-9,gamma=2e-10" ;; esac
    worst=""
    for p in 2 4 8 16 64; do
        for n in 4096 1048576; do
            "$nbcc" simulate "$name" --p $p --bytes $n --model "$model" > "$tmp/sim" 2>&1
            t=$(sed -n 's/^time: \([^ ]*\) s.*/\1/p' "$tmp/sim")
            if [ -z "$t" ]; then
                worst="p=$p n=$n: no time in: $(head -n 3 "$tmp/sim")"
                continue
            fi
            bad=$(awk -v t="$t" -v p=$p -v n=$n -v m="$model" "
                function ceil(x) { return x == int(x) ? x : int(x) + 1 }
                BEGIN {
                    split(m, kv, \",\"); for (i in kv) { split(kv[i], x, \"=\"); v[x[1]] = x[2] }
                    alpha = v[\"alpha\"]; beta = v[\"beta\"]; gamma = v[\"gamma\"]
                    L = v[\"L\"]; o = v[\"o\"]; g = v[\"g\"]; G = v[\"G\"]; lg = log(p) / log(2)
                    f = $formula; d = (t - f) / f; if (d < 0) d = -d
                    if (d > 0.01) printf \"p=%d n=%d: simulated %.6e s, formula %.6e s\", p, n, t, f
                }")
            [ -n "$bad" ] && worst="$bad"
        done
    done
    check "simulate $name equals $formula within 1%" $([ -z "$worst" ]; echo $?) "$worst"
done < "$tmp/formulas"

# every schedule simulates to the end, whatever p
fails=""
for s in $(awk 'NR > 1 && $2 != "-" { print $1 }' "$tmp/known"); do
    for p in 1 2 3 5 8 13; do
        timeout 20 "$nbcc" simulate "$s" --p $p --count 1001 > "$tmp/out" 2>&1
        rc=$?
        [ $rc -eq 0 ] || grep -q "does not apply" "$tmp/out" || fails="$fails $s@p=$p(exit $rc)"
    done
done
check "every schedule simulates for p = 1, 2, 3, 5, 8, 13" $([ -z "$fails" ]; echo $?) "$fails"

"$nbcc" simulate allreduce_recursive_doubling --p 16384 --bytes 64k > "$tmp/out" 2>&1 &&
    grep -q "^critical path: 14 messages" "$tmp/out" && grep -q "^round " "$tmp/out"
check "simulate prints the time, the critical path and the rounds (p = 16384)" $? "$(head -n 5 "$tmp/out")"
"$nbcc" simulate allreduce_ring --p 6 --bytes 4800 > "$tmp/out" 2>&1 &&
    grep -q "from the end back: rank [0-9]* round 9 <- message from rank" "$tmp/out"
check "simulate shows the ranks and rounds of the critical path" $? "$(head -n 5 "$tmp/out")"
# (without a topology every rank is a node, and allreduce_nodes_small is recursive doubling:
# they tie, and the first in name order wins)
"$nbcc" simulate --compare --p 2,4,16 --bytes 8,1m > "$tmp/out" 2>&1 &&
    grep -q "^winner" "$tmp/out" && grep -qE "^ +16 \| +(recursive_doubling|nodes_small) " "$tmp/out"
check "simulate --compare names the winner of each cell" $? "$(head -n 10 "$tmp/out")"
"$nbcc" simulate allreduce_ring --p 4 --bytes 4096 --model alpha=1,L=1 > "$tmp/out" 2>&1
check "simulate rejects a model mixing alpha-beta and LogGP" $(($? != 2)) "$(cat "$tmp/out")"

# ---- drawings ----
for name in allreduce_ring allreduce_recursive_doubling allreduce_rabenseifner; do
    "$nbcc" draw $name --p 6 --count 12 -o "$tmp/$name.svg" > "$tmp/out" 2>&1
    check "draw $name writes an SVG" $? "$(cat "$tmp/out")"
    if command -v xmllint > /dev/null; then
        xmllint --noout "$tmp/$name.svg" > "$tmp/out" 2>&1
        check "draw $name: the SVG is well formed (xmllint)" $? "$(head -n 5 "$tmp/out")"
    else
        check "draw $name: the SVG is well formed (xmllint)" 1 "xmllint is missing (Debian package libxml2-utils)"
    fi
    cmp -s "$tmp/$name.svg" "docs/${name}_p6.svg"
    check "docs/${name}_p6.svg is up to date" $? "regenerate it: nbcc draw $name --p 6 --count 12 -o docs/${name}_p6.svg"
done
"$nbcc" draw allreduce_ring --p 4 --count 8 --format dot > "$tmp/out" 2>&1 && head -n 1 "$tmp/out" | grep -q "^digraph" &&
    [ "$(grep -c -- '-> r[0-9]*_[0-9]* \[label="8 B"' "$tmp/out")" -eq 24 ]
check "draw --format dot: one edge per message (24 for the ring at p = 4)" $? "$(head -n 5 "$tmp/out")"
"$nbcc" draw allreduce_recursive_doubling --p 4 --count 2 --format text > "$tmp/out" 2>&1 &&
    grep -q "^step 0: 4 messages, 32 bytes" "$tmp/out" && grep -qE "^ +0 +\. +8 +\. +\.$" "$tmp/out"
check "draw --format text: per step, the rank-by-rank matrix of bytes" $? "$(head -n 12 "$tmp/out")"
"$nbcc" draw tests/faults/deadlock.nbs --p 4 --count 8 -o "$tmp/dead.svg" > "$tmp/out" 2>&1
check "draw refuses a schedule that does not complete, and writes nothing" $(($? != 1 || $(ls "$tmp" | grep -c dead.svg) != 0)) "$(cat "$tmp/out")"

# ---- nbcc dump --root ----
"$nbcc" dump reduce_binomial --p 4 --rank 3 --count 2 --root 3 > "$tmp/r3" 2>&1 &&
    "$nbcc" dump reduce_binomial --p 4 --rank 3 --count 2 > "$tmp/r0" 2>&1 &&
    grep -q "^schedule reduce_binomial .* root=3$" "$tmp/r3" && ! cmp -s "$tmp/r0" "$tmp/r3"
check "nbcc dump --root compiles for that root" $? "$(head -n 5 "$tmp/r3")"

echo "verify: $failed failed"
[ "$failed" -eq 0 ]
