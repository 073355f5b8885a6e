#!/bin/sh
# make bench-torch: iteration time of examples/train_resnet.py (ResNet-18, synthetic data, the
# same model, batch and data in every run) at p = 2 for each way of averaging gradients, one
# mpiexec per run, the median of STEPS iterations; ratios to DDP with Gloo. Then nbc over TCP
# (Open MPI's shared memory off, as Gloo has none), and a model whose ranks produce gradients
# in different orders. Writes bench/results/torch-p2.csv and prints a table.
# Usage: sh bench/torch.sh [OUTDIR]   (STEPS, BATCH, IMAGE, PYTHON may be set)
out=${1:-bench/results}
mkdir -p "$out"
csv=$out/torch-p2.csv
: "${STEPS:=30}" "${BATCH:=4}" "${IMAGE:=32}"
py=""
for c in ${PYTHON:-} $(which -a python3 2>/dev/null); do
    if "$c" -c 'import numpy, mpi4py, torch, torchvision' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "bench-torch: no python3 with numpy, mpi4py, torch and torchvision"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
echo "label,model,transport,median_ms,min_ms,max_ms,ratio_to_gloo,ranks_agree" > "$csv"
gloo_ms=""
run() { # LABEL MODEL TRANSPORT ARGS...
    label=$1 model=$2 transport=$3
    shift 3
    btl=""
    [ "$transport" = tcp ] && btl=self,tcp
    line=$(env ${btl:+OMPI_MCA_btl=$btl} timeout 600 mpiexec.openmpi --oversubscribe -n 2 "$py" \
        examples/train_resnet.py --model "$model" --steps "$STEPS" --batch "$BATCH" --image "$IMAGE" \
        --label "$label" "$@" 2>&1 | grep "^$label: ")
    ms=$(printf '%s' "$line" | sed -n 's/.* median \([0-9.]*\) ms (min \([0-9.]*\), max \([0-9.]*\)).*/\1 \2 \3/p')
    agree=$(printf '%s' "$line" | sed -n 's/.*ranks agree: \(.*\)/\1/p')
    [ -n "$ms" ] || { echo "$label ($model, $transport): failed"; return; }
    set -- $ms
    case "$label" in gloo) gloo_ms=$1 ;; esac
    ratio=$(awk -v a="$1" -v b="$gloo_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "" }')
    echo "$label,$model,$transport,$1,$2,$3,$ratio,$agree" >> "$csv"
    printf '%-28s %-9s %-5s %9s ms  x%-5s (ranks agree: %s)\n' "$label" "$model" "$transport" "$1" "$ratio" "$agree"
}
echo "p = 2, batch $BATCH, ${IMAGE}x$IMAGE images, median of $STEPS iterations; ratio: to DDP with Gloo of the same model"
for model in resnet18 branches; do
    gloo_ms=""
    run gloo "$model" tcp --backend gloo   # first: the reference of the ratios (Gloo uses TCP)
    run none "$model" - --backend none
    run nbc-hook "$model" shm --backend nbc-hook
    [ "$model" = resnet18 ] && run nbc-hook-wait "$model" shm --backend nbc-hook --hook-progress wait
    run nbc-total "$model" shm --backend nbc-total
    run nbc-total-noprio "$model" shm --backend nbc-total-noprio
    [ "$model" = resnet18 ] && run nbc-total-progress-thread "$model" shm --backend nbc-total --progress-thread
    run nbc-hook "$model" tcp --backend nbc-hook
    run nbc-total "$model" tcp --backend nbc-total
    [ "$model" = resnet18 ] && run nbc-total-noprio "$model" tcp --backend nbc-total-noprio
done
echo "written: $csv"
