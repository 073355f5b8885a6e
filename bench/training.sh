#!/bin/sh
# The training-step benchmark, as `make bench-training` runs it: sh bench/training.sh BUILD P
# Writes into bench/results/: training-machine-pP.txt (what ran where), training-pP.txt (the
# tables), training-pP.csv, training-pP.dat and training-pP.png (the plot). TRAINING_ARGS adds
# options to bench/training (see bench/training.c), e.g. TRAINING_ARGS="--iters 20 --thread".
: "${MPIEXEC:=mpiexec.mpich}"  # the MPI is named: plain mpiexec may be another one
set -e
BUILD=${1:-build}
P=${2:-2}
out=bench/results
mkdir -p "$out"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
    echo "memory: $(free -g | awk '/^Mem:/ { print $2 " GiB" }')"
    echo "mpi: MPICH $(mpichversion | sed -n 's/^MPICH Version:[[:space:]]*//p'), device $(mpichversion | sed -n 's/^MPICH Device:[[:space:]]*//p')"
    echo "processes: $P"
    echo "arguments: ${TRAINING_ARGS:-(defaults)}"
    echo "load average before: $(cut -d ' ' -f 1-3 /proc/loadavg)"
} > "$out/training-machine-p$P.txt"
[ "$P" -gt "$(nproc)" ] && echo "warning: $P processes on $(nproc) cores: oversubscribed, compute and MPI busy-polling share cores" \
    | tee -a "$out/training-machine-p$P.txt"

# shellcheck disable=SC2086
$MPIEXEC -n "$P" "$BUILD/bench/training" --csv "$out/training-p$P.csv" --dat "$out/training-p$P.dat" $TRAINING_ARGS \
    bench/training/resnet50.sizes bench/training/bert_base.sizes | tee "$out/training-p$P.txt"
echo "load average after: $(cut -d ' ' -f 1-3 /proc/loadavg)" >> "$out/training-machine-p$P.txt"

if command -v gnuplot > /dev/null; then
    gnuplot -e "dat='$out/training-p$P.dat'; png='$out/training-p$P.png'; p=$P" bench/training.gp
    echo "plot: $out/training-p$P.png"
else
    echo "gnuplot is missing: no plot"
fi
