#!/bin/sh
# make bench-torch: iteration time of examples/train_resnet.py (ResNet-18, synthetic data, the
# same model, batch and data for every backend) at p = 2, each backend training its own copy of
# the model in turns within one mpiexec (so that a busy machine slows them alike), the median of
# STEPS iterations each; ratios to DDP with Gloo of the same run. Three runs: nbc on shared
# memory; nbc over TCP (Open MPI's shared memory off: Gloo's transport); a model whose ranks
# produce gradients in different orders. Writes bench/results/torch-p2.csv and prints a table.
# Usage: sh bench/torch.sh [OUTDIR]   (STEPS, ROUNDS, BATCH, IMAGE, PYTHON may be set)
out=${1:-bench/results}
mkdir -p "$out"
csv=$out/torch-p2.csv
: "${STEPS:=30}" "${ROUNDS:=5}" "${BATCH:=4}" "${IMAGE:=32}"
py=""
for c in ${PYTHON:-} $(which -a python3 2>/dev/null); do
    if "$c" -c 'import numpy, mpi4py, torch, torchvision' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "bench-torch: no python3 with numpy, mpi4py, torch and torchvision"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
echo "run,backend,model,nbc_transport,median_ms,min_ms,max_ms,ratio_to_gloo,ranks_agree" > "$csv"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run() { # NAME MODEL TRANSPORT BACKENDS
    btl=""
    [ "$3" = tcp ] && btl=self,tcp
    env ${btl:+OMPI_MCA_btl=$btl} timeout 1200 mpiexec.openmpi --oversubscribe -n 2 "$py" examples/train_resnet.py \
        --model "$2" --steps "$STEPS" --rounds "$ROUNDS" --batch "$BATCH" --image "$IMAGE" --backend "$4" > "$tmp" 2>&1
    gloo=$(sed -n 's/^gloo: .* median \([0-9.]*\) ms.*/\1/p' "$tmp")
    grep -q "^gloo: " "$tmp" || { echo "run $1 failed:"; tail -n 5 "$tmp"; return; }
    sed -n 's/^\([a-z-]*\): model=\([a-z0-9]*\) .* median \([0-9.]*\) ms (min \([0-9.]*\), max \([0-9.]*\)).*ranks agree: \(.*\)/\1 \2 \3 \4 \5 \6/p' "$tmp" |
        while read -r b m med lo hi agree; do
            ratio=$(awk -v a="$med" -v g="$gloo" 'BEGIN { printf "%.2f", a / g }')
            t=$3
            [ "$b" = gloo ] && t=-
            [ "$b" = none ] && t=-
            echo "$1,$b,$m,$t,$med,$lo,$hi,$ratio,$agree" >> "$csv"
            printf '%-10s %-17s %-9s %-4s %8s ms  x%-5s (min %s, max %s; ranks agree: %s)\n' "$1" "$b" "$m" "$t" "$med" "$ratio" "$lo" "$hi" "$agree"
        done
}
echo "p = 2, batch $BATCH, ${IMAGE}x$IMAGE images, median of $STEPS iterations per backend in $ROUNDS turns;"
echo "ratio: to DDP with Gloo in the same run (Gloo always uses TCP; the transport column is nbc's)"
run shm resnet18 shm none,gloo,nbc-hook,nbc-hook-wait,nbc-hook-pt,nbc-total,nbc-total-noprio,nbc-total-pt
run tcp resnet18 tcp none,gloo,nbc-hook,nbc-total,nbc-total-noprio
run orders branches shm none,gloo,nbc-hook,nbc-total,nbc-total-noprio
echo "written: $csv"
