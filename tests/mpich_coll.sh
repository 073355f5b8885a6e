#!/bin/sh
# MPICH's own collective tests (test/mpi/coll of the MPICH release Debian ships, from its
# source package) on nbc, through the interposition library: each program as MPICH ships it,
# under LD_PRELOAD=libnbcmpi.so with NBC_MPI_BLOCKING=1, so that its blocking calls run on nbc
# too. A program passes when MPICH's test harness prints " No Errors" and the library's count
# (NBC_MPI_VERBOSE=1) shows no collective passed on to MPICH but those on intercommunicators.
# Prints one ok/FAIL line per program, or one "skip" line when the source package cannot be
# had (no network, no apt-get).
# Usage: sh tests/mpich_coll.sh BUILD [quick]   (BUILD: where the MPICH build of nbc is; quick:
# the programs of alltoall(v, w), gather(v), scatter(v), allgatherv, reduce_scatter, scan and
# exscan alone, each once)
build=${1:-build}
quick=${2:-0}
here=$(pwd)
lib=$here/$build/lib/libnbcmpi.so
dir=$here/$build/mpich-tests
if [ ! -f "$lib" ]; then
    echo "skip mpich_coll: $lib is not built"
    exit 0
fi
version=$(dpkg-query -W -f '${Version}' libmpich-dev 2>/dev/null)
upstream=${version%%-*}
src=$dir/mpich-$upstream/test/mpi

# the source package, fetched once with the machine's own Debian sources turned into source
# entries, in a private apt state (nothing of the machine's apt configuration changes)
if [ ! -f "$src/coll/testlist.in" ]; then
    if [ -z "$version" ] || ! command -v apt-get > /dev/null; then
        echo "skip mpich_coll: no Debian MPICH (libmpich-dev) or no apt-get to fetch its source"
        exit 0
    fi
    apt=$dir/apt
    mkdir -p "$apt/parts" "$apt/lists/partial" "$apt/cache/archives/partial"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" > "$apt/parts/$(basename "$f")"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] && sed -n 's/^deb /deb-src /p' "$f" > "$apt/parts/$(basename "$f")"
    done
    opts="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$apt/parts -o Dir::State::Lists=$apt/lists
          -o Dir::Cache=$apt/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
    # shellcheck disable=SC2086
    if ! timeout 300 apt-get -qq $opts update > "$apt/log" 2>&1 ||
        ! (cd "$apt" && timeout 600 apt-get -qq $opts source --download-only "mpich=$version") >> "$apt/log" 2>&1; then
        echo "skip mpich_coll: cannot fetch Debian's source package of MPICH $version: $(tail -n 1 "$apt/log")"
        exit 0
    fi
    tar -xJf "$apt"/mpich_"$upstream".orig.tar.xz -C "$dir" "mpich-$upstream/test/mpi/coll" \
        "mpich-$upstream/test/mpi/util" "mpich-$upstream/test/mpi/include" || exit 1
    rm -rf "$apt"
fi

# MPICH's configure writes this header; the tests need only these answers for this machine
cat > "$src/include/mpitestconf.h" << 'EOF'
#define HAVE_STDARG_H 1
#define HAVE_STRING_H 1
#define HAVE_STDINT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_UNISTD_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_LONG_INT 1
#define HAVE_MPI_INIT_THREAD 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE__BOOL 1
#define HAVE_FLOAT__COMPLEX 1
#define HAVE_DOUBLE__COMPLEX 1
#define HAVE_LONG_DOUBLE__COMPLEX 1
#define USE_LONG_DOUBLE_COMPLEX 1
#define MTEST_MPI_VERSION 4
#define MTEST_MPI_SUBVERSION 0
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
EOF
: > "$src/include/mtest_mpix.h"

# The programs: every one of test/mpi/coll's testlist but those on intercommunicators (which the
# library passes on to MPICH), the neighbourhood collectives (not nbc's) and those that need
# MPICH's datatype pool library (dtpools) or its large-memory runs; each at the process count
# the testlist gives, capped at 5 for the 2-core machine (quick: the programs of the
# collectives alltoall, gather, scatter, allgatherv, reduce_scatter, scan and exscan alone,
# each once)
list=$(grep -v '^#' "$src/coll/testlist.in" | grep -v '^@' | awk 'NF >= 2 { print $1 ":" $2 }' |
    grep -v -E '^(ic|nbic)|inter:|neighb|^(allred|allred2|bcast|op_coll|reduce):' | sort -u)
if [ "$quick" = 1 ]; then
    list=$(printf '%s\n' "$list" | grep -E '^(p_)?(alltoall|gather|scatter|allgatherv|redscat|scantst|exscan|nballtoall1|nbredscat)' |
        awk -F: '!seen[$1]++')
fi
cd "$src/coll" || exit 1
cc="mpicc.mpich -O1 -w -I../include"
$cc -c ../util/mtest.c -o mtest.o && $cc -c ../util/mtest_common.c -o mtest_common.o &&
    $cc -c ../util/dtypes.c -o dtypes.o && $cc -c ../util/mtest_single.c -o mtest_single.o || exit 1
pass=0 fail=0
for entry in $list; do
    prog=${entry%%:*} np=${entry#*:}
    [ "$np" -gt 5 ] && np=5
    # (nb*: the program of the same name without "nb", its collectives non-blocking)
    source=$prog.c flags=
    case $prog in nb*) [ -f "$source" ] || source=${prog#nb}.c flags=-DUSE_MTEST_NBC ;; esac
    if [ ! -x "$prog" ] && ! $cc $flags "$source" mtest.o mtest_common.o dtypes.o mtest_single.o -o "$prog" -lm 2> "$prog.build"; then
        echo "FAIL mpich $prog: does not build here ($(head -n 1 "$prog.build"))"
        fail=$((fail + 1))
        continue
    fi
    # (rank 0's count alone: where a call runs is decided alike on every rank)
    out=$(LD_PRELOAD=$lib NBC_MPI_BLOCKING=1 NBC_MPI_VERBOSE=1 timeout 180 mpiexec.mpich -n "$np" "./$prog" \
        2> "$prog.err" < /dev/null)
    rc=$?
    # a collective passed on to MPICH, for a reason other than an intercommunicator
    passed=$(grep '^nbcmpi: rank' "$prog.err" | grep -v 'persistent' | grep -v ' 0 passed to MPI' |
        grep -v '(intercommunicator: [0-9]*)$' | head -n 1)
    if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q ' No Errors' && [ -z "$passed" ]; then
        echo "ok mpich $prog (p=$np)"
        pass=$((pass + 1))
    else
        why=$( (printf '%s\n' "$out"; grep -v '^nbcmpi: rank' "$prog.err") | head -n 3 | tr '\n' ' ')
        [ -n "$passed" ] && why="passed on to MPICH: $passed"
        echo "FAIL mpich $prog (p=$np): status $rc: $why"
        fail=$((fail + 1))
    fi
done
echo "mpich_coll: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
