#!/bin/sh
# Installs nbc under a temporary prefix, builds tests/install/app.c against it as a program
# outside the tree would (with pkg-config and plain cc, statically, and with CMake), runs each
# under mpiexec -n 2, then uninstalls. Prints "ok NAME" or "FAIL NAME: why" per check.
# Environment: BUILD and BINDIR (the build to install), MPI (mpich or openmpi).
: "${MPIEXEC:=mpiexec.mpich}" "${MPI:=mpich}" "${BUILD:=build}" "${BINDIR:=bin}" "${MAKE:=make}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
app=$(pwd)/tests/install
check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "FAIL $1${3:+: $3}"; fi
}
run() { # NAME PROGRAM: runs it on 2 ranks, wanting rank 0's "ok: nbc VERSION, sum 3"
    LD_LIBRARY_PATH=$prefix/lib timeout 120 $MPIEXEC -n 2 "$2" > "$tmp/out" 2>&1
    rc=$?
    grep -q "^ok: nbc $version, sum 3$" "$tmp/out"
    check "$1" $((rc != 0 || $? != 0)) "exit $rc: $(head -n 5 "$tmp/out")"
}
version=$(sed -n 's/^#define NBC_VERSION "\(.*\)"/\1/p' runtime/nbc.h)

$MAKE --no-print-directory install PREFIX="$prefix" NO_DEPS=1 MPI="$MPI" BUILD="$BUILD" BINDIR="$BINDIR" > "$tmp/log" 2>&1
check "make install PREFIX=..." $? "$(tail -n 5 "$tmp/log")"
[ "$("$prefix/bin/nbcc" --version)" = "nbcc $version" ]
check "the installed nbcc --version says $version" $?

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion nbc)" = "$version" ]
check "pkg-config --modversion nbc is $version" $?
# plain cc: nbc.pc requires the MPI it was built with, so mpi.h and -lmpi come with it
# shellcheck disable=SC2046
cc $(pkg-config --cflags nbc) "$app/app.c" $(pkg-config --libs nbc) -o "$tmp/app-pc" > "$tmp/log" 2>&1
check "cc \$(pkg-config --cflags nbc) app.c \$(pkg-config --libs nbc)" $? "$(head -n 5 "$tmp/log")"
run "the pkg-config build runs under mpiexec -n 2" "$tmp/app-pc"
# the static link line of docs/building.md: the archive, then what it needs
# shellcheck disable=SC2046
cc $(pkg-config --cflags nbc) "$app/app.c" "$(pkg-config --variable=libdir nbc)/libnbc.a" \
    $(pkg-config --libs --static nbc | sed 's/-lnbc//') -o "$tmp/app-static" > "$tmp/log" 2>&1
check "static link with libnbc.a, as docs/building.md says" $? "$(head -n 5 "$tmp/log")"
! ldd "$tmp/app-static" | grep -q libnbc
check "the static build does not load libnbc.so" $?
run "the static build runs under mpiexec -n 2" "$tmp/app-static"

cmake -S "$app" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/log" 2>&1 &&
    cmake --build "$tmp/cmake" > "$tmp/log" 2>&1
check "CMake: find_package(nbc 0.1) and nbc::nbc" $? "$(tail -n 8 "$tmp/log")"
run "the CMake build runs under mpiexec -n 2" "$tmp/cmake/app"
printf 'cmake_minimum_required(VERSION 3.13)\nproject(v C)\nfind_package(nbc 9.0 QUIET)\nif(nbc_FOUND)\n  message(FATAL_ERROR "9.0 accepted")\nendif()\n' \
    > "$tmp/CMakeLists.txt"
cmake -S "$tmp" -B "$tmp/cmake3" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/log" 2>&1
check "CMake: find_package(nbc 9.0) refuses this version" $? "$(tail -n 5 "$tmp/log")"

$MAKE --no-print-directory uninstall PREFIX="$prefix" NO_DEPS=1 BUILD="$BUILD" BINDIR="$BINDIR" > "$tmp/log" 2>&1
rc=$?
left=$(find "$prefix" -type f 2> /dev/null)
[ "$rc" -eq 0 ] && [ -z "$left" ]
check "make uninstall removes every installed file" $? "exit $rc, left: $left"
