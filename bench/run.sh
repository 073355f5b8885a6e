#!/bin/sh
# The whole benchmark, as `make bench` runs it: sh bench/run.sh BINDIR BUILD P
# Writes into bench/results/: machine-pP.txt (what ran where), bench-pP.txt (the table),
# bench-pP.csv, bench-pP.dat and bench-pP.png (the plot), overlap-pP.csv, kernels.txt and,
# when valgrind is there, callgrind.txt. BENCH_ARGS adds options to bench (see bench/bench.c).
set -e
BINDIR=${1:-bin}
BUILD=${2:-build}
P=${3:-2}
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
    echo "compiler: $(mpicc --version | head -n 1)"
    echo "processes: $P"
    echo "load average before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
} > "$out/machine-p$P.txt"
[ "$P" -gt "$(nproc)" ] && echo "warning: $P processes on $(nproc) cores: MPICH busy-polls, so these times are oversubscribed" \
    | tee -a "$out/machine-p$P.txt"

# shellcheck disable=SC2086
mpiexec -n "$P" "$BUILD/bench/bench" --schedules "$schedules" --csv "$out/bench-p$P.csv" \
    --dat "$out/bench-p$P.dat" --overlap "$out/overlap-p$P.csv" $BENCH_ARGS | tee "$out/bench-p$P.txt"
echo "load average after: $(cut -d ' ' -f 1-3 /proc/loadavg)" >> "$out/machine-p$P.txt"

if command -v gnuplot > /dev/null; then
    gnuplot -e "dat='$out/bench-p$P.dat'; png='$out/bench-p$P.png'; p=$P" bench/plot.gp
    echo "plot: $out/bench-p$P.png"
else
    echo "gnuplot is missing: no plot"
fi

"$BUILD/bench/kernels" | tee "$out/kernels.txt"

if command -v valgrind > /dev/null; then
    sh bench/callgrind.sh "$BUILD" | tee "$out/callgrind.txt"
else
    echo "valgrind is missing: no instruction count"
fi
