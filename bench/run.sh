#!/bin/sh
# The whole benchmark, as `make bench` runs it: sh bench/run.sh BINDIR BUILD P
# Writes into bench/results/: machine-pP.txt (what ran where), bench-pP.txt (the table),
# bench-pP.csv, bench-pP.dat and bench-pP.png (the plot), overlap-pP.csv, tuning-pP.rules and
# bench-pP-tuned.{txt,csv} (nbc_auto with that tuning file), kernels.txt and, when valgrind is
# there, callgrind.txt. BENCH_ARGS adds options to bench (see bench/bench.c).
# Side by side (docs/performance.md): gloo-pP.{txt,csv} (bench/gloo.cc: Gloo's algorithms and
# nbc, both over TCP on the loopback), openmpi-pP.{txt,csv} (bench built against Open MPI, when
# OMPI_BUILD/bench/bench exists: its nbc_auto, MPI_Iallreduce, MPI_Allreduce), and the wide
# table and plot of all of them, wide-pP.{md,dat,png} (bench/wide.sh, bench/wide.gp). At p = 2
# the wide table and plot are also copied to docs/performance-p2.{md,png}, which
# docs/performance.md shows: commit them together with the run.
# GLOO_ARGS adds options to bench/gloo. Last, all-to-all, gather and scan (bench/collectives.sh:
# collectives-pP-{mpich,openmpi}.{txt,csv}; at p = 2 docs/performance-collectives-p2.md).
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
set -e
BINDIR=${1:-bin}
BUILD=${2:-build}
P=${3:-2}
export BUILD # tests/tcp.sh builds its preload there
out=bench/results
mkdir -p "$out"

# Every allreduce schedule the library has, and the segmented ring at other segment sizes.
schedules=$("$BINDIR/nbcc" list | awk '$2 == "allreduce" { printf "%s%s", sep, $1; sep = "," }')
schedules="$schedules,allreduce_segmented_ring:segsize=262144,allreduce_segmented_ring:segsize=1048576"

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
    echo "memory: $(free -g | awk '/^Mem:/ { print $2 " GiB" }')"
    echo "mpi: MPICH $(mpichversion | sed -n 's/^MPICH Version:[[:space:]]*//p'), device $(mpichversion | sed -n 's/^MPICH Device:[[:space:]]*//p')"
    echo "compiler: $(${MPICC:-mpicc.mpich} --version | head -n 1)"
    echo "processes: $P"
    echo "load average before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
} > "$out/machine-p$P.txt"
[ "$P" -gt "$(nproc)" ] && echo "warning: $P processes on $(nproc) cores: MPICH busy-polls, so these times are oversubscribed" \
    | tee -a "$out/machine-p$P.txt"

# shellcheck disable=SC2086
$MPIEXEC -n "$P" "$BUILD/bench/bench" --schedules "$schedules" --csv "$out/bench-p$P.csv" \
    --dat "$out/bench-p$P.dat" --overlap "$out/overlap-p$P.csv" $BENCH_ARGS | tee "$out/bench-p$P.txt"

# The same with a tuning file that `nbcc tune` measures here first, as a user would: nbc_auto
# then follows this machine's timings instead of Open MPI's decision tree. A run of its own, so
# its ratios are to MPICH's times of that run.
sizes=$(awk 'BEGIN { for (b = 8; b <= 67108864; b *= 2) printf "%s%d", (b > 8 ? "," : ""), b }')
$MPIEXEC -n "$P" "$BINDIR/nbcc" tune --sizes "$sizes" -o "$out/tuning-p$P.rules" 2> /dev/null
# shellcheck disable=SC2086
NBC_TUNING="$out/tuning-p$P.rules" $MPIEXEC -n "$P" "$BUILD/bench/bench" --shm 0 --csv "$out/bench-p$P-tuned.csv" $BENCH_ARGS \
    | tee "$out/bench-p$P-tuned.txt"

# Gloo and nbc over the same transport: tests/tcp.sh puts MPICH on TCP (MPIR_CVAR_NOLOCAL=1,
# UCX_TLS=tcp), Gloo's own device is TCP on the loopback. Quiet for minutes at the large sizes.
if [ -x "$BUILD/bench/gloo" ]; then
    store=$(mktemp -d)
    # shellcheck disable=SC2086
    TCP_TRIES=1 TCP_IDLE=300 TCP_LIMIT=1200 sh tests/tcp.sh $MPIEXEC -n "$P" "$BUILD/bench/gloo" \
        --csv "$out/gloo-p$P.csv" --store "$store" $GLOO_ARGS | tee "$out/gloo-p$P.txt"
    rm -rf "$store"
fi

# Open MPI's own allreduces and nbc built against it, on shared memory like the first run. Open
# MPI refuses root and more ranks than cores unless told; it yields when idle only when
# oversubscribed (MPICH never yields).
ompi=${OMPI_BUILD:-build/openmpi}
if [ "${MPI:-mpich}" = mpich ] && [ -x "$ompi/bench/bench" ]; then
    yield=0
    [ "$P" -gt "$(nproc)" ] && yield=1
    echo "openmpi: Open MPI $(mpirun.openmpi --version 2> /dev/null | sed -n '1s/.* //p')" >> "$out/machine-p$P.txt"
    # shellcheck disable=SC2086
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=$yield \
        mpiexec.openmpi --oversubscribe -n "$P" "$ompi/bench/bench" --shm 0 --csv "$out/openmpi-p$P.csv" $BENCH_ARGS \
        | tee "$out/openmpi-p$P.txt"
fi
echo "load average after: $(cut -d ' ' -f 1-3 /proc/loadavg)" >> "$out/machine-p$P.txt"

sh bench/wide.sh "$out" "$P" | tee "$out/wide-p$P.md"

# MPICH's MPI_Iallreduce through the interposition library, beside the direct nbc_iallreduce and
# MPICH's own, and what the interposition costs per call (docs/interpose.md).
if [ "${MPI:-mpich}" = mpich ] && [ -f "$BUILD/lib/libnbcmpi.so" ] && [ -x "$BUILD/bench/interpose_cost" ]; then
    sh bench/interpose.sh "$BUILD" "$P"
fi

if command -v gnuplot > /dev/null; then
    gnuplot -e "dat='$out/bench-p$P.dat'; png='$out/bench-p$P.png'; p=$P" bench/plot.gp
    echo "plot: $out/bench-p$P.png"
    gnuplot -e "dat='$out/wide-p$P.dat'; png='$out/wide-p$P.png'; p=$P" bench/wide.gp
    echo "plot: $out/wide-p$P.png"
else
    echo "gnuplot is missing: no plot"
fi

# The table and plot docs/performance.md shows, from this run.
if [ "$P" = 2 ]; then
    cp "$out/wide-p2.md" docs/performance-p2.md
    if [ -f "$out/wide-p2.png" ]; then
        cp "$out/wide-p2.png" docs/performance-p2.png
    else
        echo "no plot: docs/performance-p2.png is not from this run"
    fi
    echo "docs: docs/performance-p2.md and docs/performance-p2.png"
fi

"$BUILD/bench/kernels" | tee "$out/kernels.txt"

if command -v valgrind > /dev/null; then
    sh bench/callgrind.sh "$BUILD" | tee "$out/callgrind.txt"
else
    echo "valgrind is missing: no instruction count"
fi

# all-to-all, gather and scan beside the MPIs' calls (at p = 2: docs/performance-collectives-p2.md)
sh bench/collectives.sh "$BINDIR" "$BUILD" "$P"
