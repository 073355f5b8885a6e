#!/bin/sh
# Runs every test and ends with one line "N passed, N failed" (N counts single checks).
# Each test program prints "ok NAME" or "FAIL NAME: why" per check; this script adds its own
# checks of nbcc. What it prints is TAP (`prove` reads it): one line per suite with its count
# of checks and its time, failures spelled out below it as comments; every check's own line
# goes to the log (TEST_LOG, default build/test.log).
# The suite runs on the normal build, then, when SANITIZE_BUILD names a build made with
# AddressSanitizer and UBSan, again there (names tagged [asan], fewer process counts), and
# the thread tests on TSAN_BUILD.
# Environment: BUILD and BINDIR (where `make` put things), SANITIZE_BUILD, TSAN_BUILD,
# FUZZ_BUILD (where `make fuzz` put the fuzzers).
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
: "${TEST_LOG:=build/test.log}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$TEST_LOG")"
: > "$TEST_LOG"
passed=0
failed=0
skipped=0 # checks a script could not run here ("skip NAME: why"), e.g. no network namespaces
tap=0 # TAP test points printed so far

check() { # NAME STATUS [WHY]: record one check
    tap=$((tap + 1))
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1))
        echo "ok $tap - $TAG$1"
        echo "ok $TAG$1" >> "$TEST_LOG"
    else
        failed=$((failed + 1))
        echo "not ok $tap - $TAG$1"
        [ -n "${3:-}" ] && printf '%s\n' "$3" | head -n 20 | sed 's/^/#   /'
        echo "FAIL $TAG$1${3:+: $3}" >> "$TEST_LOG"
    fi
}

# NAME COMMAND...: run a program that prints ok/FAIL lines. Its variables are prefixed s_:
# sh has no locals, and callers loop over p.
suite() {
    s_name=$1
    shift
    s_t0=$(date +%s)
    timeout 900 "$@" > "$tmp/out" 2> "$tmp/err"
    s_rc=$?
    s_time=$(($(date +%s) - s_t0))
    sed "s/^\(ok\|FAIL\) /\1 $TAG/" "$tmp/out" | grep -E '^(ok|FAIL) ' >> "$TEST_LOG"
    s_ok=$(grep -c '^ok ' "$tmp/out")
    s_bad=$(grep -c '^FAIL ' "$tmp/out")
    s_skip=$(grep -c '^skip ' "$tmp/out")
    skipped=$((skipped + s_skip))
    passed=$((passed + s_ok))
    failed=$((failed + s_bad))
    tap=$((tap + 1))
    if [ "$s_skip" -gt 0 ] && [ "$s_ok" -eq 0 ] && [ "$s_bad" -eq 0 ] && [ "$s_rc" -eq 0 ]; then
        echo "ok $tap - $TAG$s_name # SKIP $(sed -n 's/^skip //p' "$tmp/out" | head -n 1)"
    elif [ "$s_bad" -eq 0 ] && { [ "$s_rc" -ne 0 ] || [ "$s_ok" -eq 0 ]; }; then
        failed=$((failed + 1))
        echo "not ok $tap - $TAG$s_name: exited with status $s_rc and no failed check ($s_time s)"
        tail -n 20 "$tmp/err" | sed 's/^/#   /'
        echo "FAIL $TAG$s_name: exited with status $s_rc" >> "$TEST_LOG"
    elif [ "$s_bad" -eq 0 ]; then
        echo "ok $tap - $TAG$s_name: $s_ok checks ($s_time s)"
    else
        echo "not ok $tap - $TAG$s_name: $s_bad of $((s_ok + s_bad)) checks failed ($s_time s)"
        grep '^FAIL ' "$tmp/out" | head -n 20 | sed 's/^/#   /'
        tail -n 3 "$tmp/err" | sed 's/^/#   stderr: /'
    fi
}

run_all() { # BUILD BINDIR TAG ALLREDUCE_PROCS COLLECTIVE_PROCS TOTAL_REDUCE_ARGS
BUILD=$1
BINDIR=$2
TAG=${3:+$3 }
# the quick pass (NBC_TEST_QUICK=1: .ci/run's second MPI) leaves out what does not touch the
# MPI (the compiler's unit tests, verify, hardening of nbcc, the fuzzers): the full pass runs them
mpi_free=1
[ "${NBC_TEST_QUICK:-0}" = 1 ] && mpi_free=0
[ "$mpi_free" = 1 ] && suite "unit_dsl" "$BUILD/tests/unit_dsl" tests/dsl/broken.txt
suite "unit_select" "$BUILD/tests/unit_select"
suite "unit_cache" "$BUILD/tests/unit_cache"
suite "unit_hardening" "$BUILD/tests/unit_hardening"
# the kernels are compared with MPI_Reduce_local; Open MPI 4.1's AVX reductions saturate
# 8- and 16-bit sums instead of wrapping, so its plain C ones are the reference there
OMPI_MCA_op=^avx ASAN_OPTIONS=detect_leaks=0 suite "unit_reduce" $MPIEXEC -n 1 "$BUILD/tests/unit_reduce"
ASAN_OPTIONS=detect_leaks=0 suite "unit_interp" $MPIEXEC -n 1 "$BUILD/tests/unit_interp"

if true; then
    # golden dumps: the compiled programs reviewed once, kept byte for byte
    for args in tests/golden/*.args; do
        want=${args%.args}.txt
        # shellcheck disable=SC2046
        "$BINDIR/nbcc" dump $(cat "$args") > "$tmp/dump" 2>&1
        diff -u "$want" "$tmp/dump" > "$tmp/diff"
        check "golden $(basename "${args%.args}")" $? "$(head -n 20 "$tmp/diff")"
    done
    "$BINDIR/nbcc" check schedules/*.nbs > "$tmp/out" 2>&1
    check "nbcc check passes every shipped schedule" $? "$(cat "$tmp/out")"
    printf 'schedule bad implements allreduce\n{\n    round { send recvbuf to rank + p; }\n}\n' > "$tmp/bad.nbs"
    "$BINDIR/nbcc" check "$tmp/bad.nbs" > "$tmp/out" 2>&1
    rc=$?
    grep -q "bad.nbs:3:34: error: peer .* is outside" "$tmp/out"
    check "nbcc check reports file:line:column and exits 1" $((rc != 1 || $? != 0)) "$(cat "$tmp/out")"
    "$BINDIR/nbcc" dump schedules/allreduce_ring.nbs --p 4 --rank 1 --count 8 > "$tmp/out" 2>&1
    check "nbcc dump of the ring shows 2(p-1) rounds" $((! $? == 0 || ! $(grep -c '^; 6 rounds' "$tmp/out") == 1)) "$(cat "$tmp/out")"
    "$BINDIR/nbcc" list > "$tmp/out" 2>&1
    grep -q "allreduce_ring .*allreduce .*commutative .*commutative, count >= p" "$tmp/out" &&
        grep -q "allreduce_linear .*allreduce .*ordered" "$tmp/out"
    check "nbcc list shows schedules with preconditions" $? "$(cat "$tmp/out")"
    sh tools/algorithms-table.sh "$BINDIR/nbcc" > "$tmp/alg.md" 2>&1
    diff -u docs/algorithms.md "$tmp/alg.md" > "$tmp/diff"
    check "docs/algorithms.md matches the compiled programs (make docs)" $? "$(head -n 20 "$tmp/diff")"
    if [ -z "$TAG" ]; then # tuning under mpiexec, then explain must follow the file (plain build only)
        $MPIEXEC -n 2 "$BINDIR/nbcc" tune --sizes 8,65536 --reps 3 -o "$tmp/tuned.rules" 2> /dev/null &&
            $MPIEXEC -n 4 "$BINDIR/nbcc" tune --sizes 8,65536 --reps 3 --append -o "$tmp/tuned.rules" 2> /dev/null
        check "nbcc tune writes a tuning file for p = 2 and 4" $? "$(cat "$tmp/tuned.rules" 2>&1)"
        for p in 2 4; do
            for bytes in 8 65536; do
                want=$(awk -v p="$p" -v b="$bytes" '$4 == p && $0 ~ (" at " b " B") { for (i = 1; i < NF; i++) if ($i == "->") print $(i + 1) }' "$tmp/tuned.rules")
                "$BINDIR/nbcc" explain --collective allreduce --p "$p" --count $((bytes / 8)) --tuning "$tmp/tuned.rules" \
                    --mode rules > "$tmp/out" 2>&1
                got=$(sed -n '/with /,$ s/^  chosen: //p' "$tmp/out")
                [ -n "$want" ] && [ "$want" = "$got" ]
                check "a tuned file changes the choice as it says (p=$p, $bytes B: $want)" $? "$(cat "$tmp/out")"
            done
        done
    fi
    # calibrate: one line of alpha, beta, gamma on one node; across nodes (NBC_NODE_MAP, 2 ranks
    # a node) alpha_node and beta_node too, and nbcc simulate reads both lines
    one=$($MPIEXEC -n 2 "$BINDIR/nbcc" calibrate 2>&1 | grep '^alpha=')
    two=$(NBC_NODE_MAP=a,a,b,b $MPIEXEC -n 4 "$BINDIR/nbcc" calibrate 2>&1 | grep '^alpha=')
    case $one in *alpha_node*) one= ;; esac
    case $two in *,alpha_node=*,beta_node=*) ;; *) two= ;; esac
    [ -n "$one" ] && [ -n "$two" ] && "$BINDIR/nbcc" simulate ring --p 4 --bytes 65536 --model "$one" > /dev/null &&
        "$BINDIR/nbcc" simulate ring --nodes 2 --ppn 2 --bytes 65536 --model "$two" > "$tmp/out" && grep -q "inside a node" "$tmp/out"
    check "nbcc calibrate: one level on one node, two across nodes, read by nbcc simulate" $? "one: $one; two: $two"
    for cmd in check dump list explain calibrate tune; do
        "$BINDIR/nbcc" $cmd --help > "$tmp/out" 2>&1 && grep -q "^usage: .*nbcc $cmd" "$tmp/out"
        check "nbcc $cmd --help" $?
    done
fi

# the benchmark runs and writes a well-formed CSV; the libraries export only nbc.h (plain build
# only: these link without sanitizers)
[ -z "$TAG" ] && suite "bench" sh tests/bench.sh "$BINDIR" "$BUILD"
# (MPICH's only: built on Open MPI 4.1.4 its MPI_Iallreduce variants crash inside Open MPI's
# progress engine, not yet understood; the benchmark measures MPICH)
[ -z "$TAG" ] && [ "${MPI:-mpich}" = mpich ] && suite "bench_training" sh tests/bench_training.sh "$BUILD"
[ -z "$TAG" ] && suite "exports" sh tests/exports.sh "$BUILD"

# nbcc verify/simulate/draw, and the seeded faults they must catch
[ "$mpi_free" = 1 ] && suite "verify" sh tests/verify.sh "$BINDIR" ${TAG:+quick}
[ -z "$TAG" ] && suite "failures" sh tests/failures.sh "$BINDIR" "$BUILD"
# hostile input: the 64-bit limits, endless files, rule numbers (nbcc, then the library)
[ "$mpi_free" = 1 ] && suite "hardening" sh tests/hardening.sh "$BINDIR"
for p in 1 3; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_hardening p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_hardening"
done
# every variable goes through one strict parser (runtime/env.c): a bad value fails nbc_init, naming it
for v in NBC_CACHE_BYTES=-1 NBC_CACHE_ENTRIES=abc NBC_MAX_INSNS=12x NBC_TUNING=/dev/zero NBC_CHECK=yes NBC_TIMEOUT=-1 \
    NBC_STALL_WARNING=1m NBC_TRACE=3 NBC_SPIN_US=2x NBC_PREEMPT_US=' 5' NBC_PROGRESS_THREAD=on NBC_NODE_MAP=a,b \
    NBC_NODE_MAP=a,,b; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_hardening $v" env "$v" $MPIEXEC -n 1 "$BUILD/tests/mpi_hardening" --init-error "${v%%=*}"
done
# NBC_TRACE=1: each program once, the first time a call runs it, as nbcc dump prints it
NBC_TRACE=1 ASAN_OPTIONS=detect_leaks=0 timeout 120 $MPIEXEC -n 2 "$BUILD/tests/mpi_hardening" --trace > "$tmp/out" 2> "$tmp/err"
ok=$(grep -c "^ok" "$tmp/out")
[ "$ok" -eq 1 ] && [ "$(grep -c '^nbc: trace: allreduce on rank .* of 2 runs this program for the first time:$' "$tmp/err")" -eq 4 ]
rc=$?
for r in 0 1; do
    for n in 8 16; do
        awk -v h="schedule allreduce_ring (schedules/allreduce_ring.nbs) p=2 rank=$r count=$n esize=4" \
            '$0 == h { on = 1; next } /^nbc: trace:/ { on = 0 } on' "$tmp/err" > "$tmp/traced"
        "$BINDIR/nbcc" dump ring --p 2 --rank "$r" --count "$n" | tail -n +2 > "$tmp/dumped"
        [ -s "$tmp/traced" ] && cmp -s "$tmp/traced" "$tmp/dumped" || rc=1
    done
done
check "NBC_TRACE=1 prints each program once, as nbcc dump does" $rc "$(head -n 12 "$tmp/err")"
# the fuzzers of `make fuzz`, 20 s each (plain build only)
[ -z "$TAG" ] && [ "$mpi_free" = 1 ] && [ -n "$FUZZ_BUILD" ] && suite "fuzz" sh tests/fuzz/run.sh "$FUZZ_BUILD" 20

ASAN_OPTIONS=detect_leaks=0 suite "mpi_badargs" $MPIEXEC -n 2 "$BUILD/tests/mpi_badargs"
for p in $4; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_allreduce p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_allreduce"
done
for p in 1 2 3 5; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_runtime p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_runtime"
done
# allreduce through shared memory (nbc_alloc_mem buffers), and its fallback to messages
for p in $4; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_shm p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_shm"
done
NBC_TIMEOUT=1 ASAN_OPTIONS=detect_leaks=0 suite "mpi_shm withheld" $MPIEXEC -n 2 "$BUILD/tests/mpi_shm" --withhold
# a freed communicator's block of the segment is reused: 60 of them in a segment of 8 MiB (room for 6)
for p in 2 3; do
    NBC_SHM_BYTES=8388608 ASAN_OPTIONS=detect_leaks=0 suite "mpi_shm 60 communicators p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_shm" --communicators 60
done
# a rank that leaves a shared call early (timeout, a call that cannot start): its peers learn it
# and never touch its buffers again
for p in 2 3; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_leave p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_leave"
done
for p in 2 3; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_leave --counts p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_leave" --counts
done
# what one rank decides alone (NBC_SHM, the launcher's word on who shares its node) is agreed
for v in NBC_SHM=0 MPI_LOCALNRANKS=1; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_leave --disagree $v p=3" $MPIEXEC -n 3 "$BUILD/tests/mpi_leave" --disagree "$v"
done
# private buffers above the stages' size go back to messages when the kernel may not copy them
NBC_SHM_KERNEL=0 ASAN_OPTIONS=detect_leaks=0 suite "mpi_shm, no copies through the kernel, p=3" $MPIEXEC -n 3 "$BUILD/tests/mpi_shm"
# a communicator remembers its last call's programs (runtime/calls.c): with a cache of one
# program, or none, every call evicts or frees what the one before used
for n in 0 1; do
    NBC_CACHE_ENTRIES=$n ASAN_OPTIONS=detect_leaks=0 suite "mpi_allreduce, a cache of $n programs, p=3" $MPIEXEC -n 3 "$BUILD/tests/mpi_allreduce"
    NBC_CACHE_ENTRIES=$n ASAN_OPTIONS=detect_leaks=0 suite "mpi_shm, a cache of $n programs, p=2" $MPIEXEC -n 2 "$BUILD/tests/mpi_shm"
done
for p in $5; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_collectives p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_collectives"
done
# the vector collectives (alltoallv/w, gatherv, scatterv, allgatherv, reduce_scatter): fewer
# process counts under the sanitizers and in the quick pass
for p in $([ -z "$TAG" ] && [ "${NBC_TEST_QUICK:-0}" != 1 ] && echo 1 2 3 4 5 7 8 9 || echo 1 2 3 5); do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_vectors p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_vectors"
done
# the node map (tests/mpi_topology.c): NBC_NODE_MAP gives every rank a node, in blocks, cyclic,
# uneven, one node (shared memory still), one rank a node; the hierarchical schedules forced,
# the rules' choice with the map, splits, persistent and any-order requests, first calls
# prepared before the map is known. One mpiexec a map: 9 maps for p = 1 .. 8 in the full pass,
# one (2 + 1) under the sanitizers, one in the quick pass.
if [ -n "$TAG" ]; then
    maps="a,a,b"
elif [ "${NBC_TEST_QUICK:-0}" = 1 ]; then
    maps="a,b,a,b"
else
    maps="a a,b a,a,b a,a,b,b a,b,a,b a,a,a,a a,b,c,d,e a,a,a,b,b,c a,b,c,a,b,c,a,b"
fi
for map in $maps; do
    p=$(echo "$map" | tr ',' '\n' | wc -l)
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_topology NBC_NODE_MAP=$map" \
        env NBC_NODE_MAP="$map" $MPIEXEC -n "$p" "$BUILD/tests/mpi_topology"
done
# Total Reduce: any-order persistent requests, priorities, the debug mode, the library's life,
# threads, and the suites again with the progress thread
for p in $4; do
    # (the full soak up to p = 5; oversubscribed, a shorter one); even counts on buffers from
    # nbc_alloc_mem (each start in its request's lane, which the test checks), odd ones on
    # private buffers (the stage, the kernel's copies)
    soak=$6
    [ -z "$soak" ] && [ "$p" -gt 5 ] && soak="--requests 300 --iterations 8"
    shared=""
    [ $((p % 2)) = 0 ] && shared=--shared
    # shellcheck disable=SC2086
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_total_reduce $shared p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_total_reduce" $soak $shared
done
for p in 2 3 5; do
    shared=""
    [ "$p" = 3 ] && shared=--shared
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_total_reduce sleeping $shared p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_total_reduce" \
        --sleep $6 --bulk-mib 0 $shared
    NBC_CHECK=1 ASAN_OPTIONS=detect_leaks=0 suite "mpi_total_reduce NBC_CHECK p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_total_reduce" --check
done
# the same mix on a communicator that spans two nodes (any-order requests on messages there)
NBC_NODE_MAP=a,a,b,b ASAN_OPTIONS=detect_leaks=0 suite "mpi_total_reduce --shared NBC_NODE_MAP=a,a,b,b p=4" $MPIEXEC -n 4 \
    "$BUILD/tests/mpi_total_reduce" --shared --requests 100 --iterations 2 --bulk-mib 0
# a rank that leaves a start in its request's lane (NBC_TIMEOUT): its peers fail naming it and
# never touch its buffers again
for p in 2 3; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_total_reduce --leave p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_total_reduce" --leave
done
NBC_STALL_WARNING=0.3 ASAN_OPTIONS=detect_leaks=0 timeout 120 $MPIEXEC -n 3 "$BUILD/tests/mpi_total_reduce" --withhold \
    > "$tmp/out" 2> "$tmp/err"
grep -q "^ok a withheld start completes" "$tmp/out" &&
    grep -q "stall: request 'withheld.tensor' (id 0, allreduce of 8 bytes) has waited .* on rank 0 at start 1: started by ranks 0,1; not started by rank 2 (at start 0)" "$tmp/err"
check "a withheld start: the other ranks report the stall, naming the request and the missing rank" $? "$(cat "$tmp/out" "$tmp/err" | head -n 5)"
# no silent hang: every call that stops moving reports where it waits (tests/mpi_stall.c), on
# messages and on shared memory (16 s a run: p = 2 only under the sanitizers and in the quick pass)
for p in $([ -z "$TAG" ] && [ "$mpi_free" = 1 ] && echo 2 3 || echo 2); do
    for shm in 1 0; do
        NBC_SHM=$shm NBC_STALL_WARNING=1 ASAN_OPTIONS=detect_leaks=0 suite "mpi_stall NBC_SHM=$shm p=$p" \
            $MPIEXEC -n "$p" "$BUILD/tests/mpi_stall"
    done
done
for p in 1 2 3 5; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_lifecycle p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_lifecycle"
done
# lifetimes and bounded resources: the segment's size, nbc_free_mem of a block in use, any-order
# identities (NBC_TAG_UB=15: an MPI with a tiny tag space)
for p in 1 2 3 4; do
    ASAN_OPTIONS=detect_leaks=0 suite "mpi_limits p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_limits"
    NBC_TAG_UB=15 ASAN_OPTIONS=detect_leaks=0 suite "mpi_limits NBC_TAG_UB=15 p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_limits"
done
# valgrind shadows every page of the segment under MPICH: the default size must let it run
if [ -z "$TAG" ] && command -v valgrind > /dev/null; then
    timeout 600 valgrind -q --error-exitcode=9 "$BUILD/tests/mpi_limits" --small > "$tmp/out" 2> "$tmp/err"
    rc=$?
    grep -q '^ok an allreduce on nbc_alloc_mem memory' "$tmp/out" && [ "$rc" -eq 0 ]
    check "valgrind runs an nbc program on nbc_alloc_mem memory with the default segment" $? \
        "status $rc: $(tail -n 5 "$tmp/err")"
fi
# unmodified MPI programs on nbc through LD_PRELOAD=libnbcmpi.so (interpose/), on either MPI
quick=0
if [ -n "$TAG" ] || [ "${NBC_TEST_QUICK:-0}" = 1 ]; then quick=1; fi
MPI=${MPI:-mpich} suite "interpose" sh tests/interpose.sh "$BUILD" "$quick"
# MPICH's own test/mpi/coll programs of the collectives beyond allreduce's family, from Debian's
# source package of the MPICH installed, through the preload (every call on nbc); plain MPICH
# build only. `sh tests/mpich_coll.sh build` runs the whole directory (docs/testing.md).
if [ -z "$TAG" ] && [ "${MPI:-mpich}" = mpich ]; then
    suite "mpich coll" sh tests/mpich_coll.sh "$BUILD" 1
fi
for p in 1 2 3; do
    for mode in "" --progress-thread; do
        ASAN_OPTIONS=detect_leaks=0 suite "mpi_threads $mode p=$p" $MPIEXEC -n "$p" "$BUILD/tests/mpi_threads" $mode
    done
done
if [ -z "$TAG" ]; then
    # the MPI suites again, every request driven by the progress thread too
    for p in 2 3; do
        for t in mpi_collectives mpi_allreduce mpi_total_reduce mpi_lifecycle mpi_shm mpi_limits; do
            NBC_PROGRESS_THREAD=1 suite "$t NBC_PROGRESS_THREAD=1 p=$p" $MPIEXEC -n "$p" "$BUILD/tests/$t"
        done
        NBC_PROGRESS_THREAD=1 suite "mpi_total_reduce --shared NBC_PROGRESS_THREAD=1 p=$p" $MPIEXEC -n "$p" \
            "$BUILD/tests/mpi_total_reduce" --shared --requests 150 --iterations 3 --bulk-mib 0
    done
    NBC_PROGRESS_THREAD=1 suite "mpi_badargs NBC_PROGRESS_THREAD=1" $MPIEXEC -n 2 "$BUILD/tests/mpi_badargs"
fi
if [ -z "$TAG" ] && [ "${MPI:-mpich}" = mpich ]; then
    # the network path: MPICH's shared memory off, UCX on TCP over loopback (tests/tcp.sh), then
    # across network namespaces (tests/hosts.sh); both drive MPICH's own launcher and settings
    tcp="sh tests/tcp.sh"
    for p in 2 4 5; do
        suite "mpi_allreduce tcp p=$p" $tcp $MPIEXEC -n "$p" "$BUILD/tests/mpi_allreduce"
        suite "mpi_total_reduce tcp p=$p" $tcp $MPIEXEC -n "$p" "$BUILD/tests/mpi_total_reduce" \
            --requests 200 --iterations 3 --bulk-mib 0
    done
    for p in 2 5; do
        suite "mpi_collectives tcp p=$p" $tcp $MPIEXEC -n "$p" "$BUILD/tests/mpi_collectives"
    done
    suite "hosts" sh tests/hosts.sh --hosts 4 --build "$BUILD" --bindir "$BINDIR"
fi
# Python (python/nbc, nbc.torch) under the launcher of the MPI mpi4py runs on, with nbc built
# against it (Open MPI here: `make test` builds build/openmpi's library for it); plain build only
# (it runs on that MPI whatever the pass: once, in the full pass)
if [ -z "$TAG" ] && [ "$mpi_free" = 1 ]; then
    for p in 1 2 3 4; do
        suite "python p=$p" sh tests/python/run.sh "$p"
    done
fi
# the README's tutorial, as written there
NBC_SCHEDULE_PATH=examples NBC_ALLREDUCE=star ASAN_OPTIONS=detect_leaks=0 timeout 300 \
    $MPIEXEC -n 4 "$BINDIR/overlap" > "$tmp/out" 2>&1
grep -q "^summary: 4 ranks.* all verified OK" "$tmp/out"
check "README tutorial: overlap with the star schedule from NBC_SCHEDULE_PATH" $? "$(tail -n 5 "$tmp/out")"
[ -z "$TAG" ] && [ "$mpi_free" = 1 ] && suite "readme" sh tests/readme.sh "$BINDIR"
[ -z "$TAG" ] && [ "$mpi_free" = 1 ] && suite "docs" sh tests/docs.sh
}

# NBC_TEST_QUICK=1 (what .ci/run uses for its second MPI) runs every suite on the process
# counts and soak sizes of the sanitizer pass
if [ "${NBC_TEST_QUICK:-0}" = 1 ]; then
    run_all "${BUILD:-build}" "${BINDIR:-bin}" "" "1 2 3 4 5 8 9" "1 2 3 5 8 13" "--requests 300 --iterations 5 --bulk-mib 64"
else
    run_all "${BUILD:-build}" "${BINDIR:-bin}" "" "1 2 3 4 5 6 7 8 9" "$(seq 1 17)" ""
fi
if [ -n "$TSAN_BUILD" ]; then
    TAG="[tsan] "
    for p in 1 2 3; do
        for mode in "" --progress-thread; do
            # (Open MPI's TCP transport trips ThreadSanitizer with its own lock order: these
            # ranks share a node, so its shared-memory one is all they need)
            OMPI_MCA_btl=self,vader TSAN_OPTIONS=halt_on_error=1 suite "mpi_threads $mode p=$p" $MPIEXEC -n "$p" "$TSAN_BUILD/tests/mpi_threads" $mode
        done
    done
    # shared memory's agreements and flags, every call driven by the progress thread too
    for p in 2 3; do
        NBC_PROGRESS_THREAD=1 OMPI_MCA_btl=self,vader TSAN_OPTIONS=halt_on_error=1 \
            suite "mpi_total_reduce --shared NBC_PROGRESS_THREAD=1 p=$p" $MPIEXEC -n "$p" "$TSAN_BUILD/tests/mpi_total_reduce" \
            --shared --requests 60 --iterations 2 --bulk-mib 0
        NBC_PROGRESS_THREAD=1 OMPI_MCA_btl=self,vader TSAN_OPTIONS=halt_on_error=1 \
            suite "mpi_shm NBC_PROGRESS_THREAD=1 p=$p" $MPIEXEC -n "$p" "$TSAN_BUILD/tests/mpi_shm"
        # stall reports from the progress thread, reading the peers' lines (not on Open MPI:
        # ThreadSanitizer reports a race inside its shared-memory transport's send there, from
        # the attachment's MPI_Isend; left out until it is understood)
        [ "${MPI:-mpich}" = openmpi ] ||
            NBC_PROGRESS_THREAD=1 NBC_STALL_WARNING=1 OMPI_MCA_btl=self,vader TSAN_OPTIONS=halt_on_error=1 \
                suite "mpi_stall NBC_PROGRESS_THREAD=1 p=$p" $MPIEXEC -n "$p" "$TSAN_BUILD/tests/mpi_stall"
    done
    # through the preload: a user op calling MPI_Test under MPI_THREAD_MULTIPLE (a deadlock on
    # nbc's own lock before); a hang fails at the timeout
    if [ "${MPI:-mpich}" = mpich ]; then
        for p in 2 3; do
            TSAN_OPTIONS=halt_on_error=1 suite "interpose_hang userop_test p=$p" timeout 60 $MPIEXEC -n "$p" \
                env LD_PRELOAD="$(cd "$TSAN_BUILD/lib" && pwd)/libnbcmpi.so" "$TSAN_BUILD/tests/interpose_hang" userop_test
        done
    fi
fi
if [ -n "$SANITIZE_BUILD" ]; then
    # MPICH's own allocations outlive MPI_Finalize: leak checks only where MPI is absent
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export ASAN_OPTIONS=detect_leaks=1
    run_all "$SANITIZE_BUILD" "$SANITIZE_BUILD/bin" "[asan]" "1 2 3 4 5" "1 2 3 5 8 13" \
        "--requests 300 --iterations 5 --bulk-mib 64"
fi

echo "1..$tap"
echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
[ "$failed" -eq 0 ]
