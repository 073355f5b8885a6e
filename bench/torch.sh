#!/bin/sh
# make bench-torch: iteration time of examples/train_resnet.py (ResNet-18, synthetic data, the
# same model, batch and data for every backend) at p = 2, each backend training its own copy of
# the model in turns within one mpiexec (so that a busy machine slows them alike): the median
# of STEPS iterations each, its ratio to DDP with Gloo's median, and the median over the turns
# of each turn's ratio to Gloo's turn in the same round (what load disturbs least). Three runs:
# nbc on shared memory (Total Reduce's gradients in nbc's memory, and in torch's for
# nbc-total-private); nbc over TCP (Open MPI's shared memory and nbc's own off: Gloo's
# transport); a model whose ranks produce gradients in different orders. Writes
# bench/results/torch-p2.csv.
# Usage: sh bench/torch.sh [OUTDIR]   (STEPS, ROUNDS, BATCH, IMAGE, PYTHON may be set)
out=${1:-bench/results}
mkdir -p "$out"
csv=$out/torch-p2.csv
: "${STEPS:=30}" "${ROUNDS:=10}" "${BATCH:=4}" "${IMAGE:=32}"
py=""
for c in ${PYTHON:-} $(which -a python3 2>/dev/null); do
    if "$c" -c 'import numpy, mpi4py, torch, torchvision' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "bench-torch: no python3 with numpy, mpi4py, torch and torchvision"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
echo "run,backend,model,nbc_transport,median_ms,min_ms,max_ms,ratio_of_medians,round_ratio,round_ratio_q1,round_ratio_q3,ranks_agree" > "$csv"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run() { # NAME MODEL TRANSPORT BACKENDS
    btl="" nbcshm=""
    [ "$3" = tcp ] && btl=self,tcp nbcshm=0  # nbc's shared memory would bypass TCP too
    env ${btl:+OMPI_MCA_btl=$btl} ${nbcshm:+NBC_SHM=$nbcshm} timeout 1200 mpiexec.openmpi --oversubscribe -n 2 "$py" examples/train_resnet.py \
        --model "$2" --steps "$STEPS" --rounds "$ROUNDS" --batch "$BATCH" --image "$IMAGE" --backend "$4" > "$tmp" 2>&1
    gloo=$(sed -n 's/^gloo: .* median \([0-9.]*\) ms.*/\1/p' "$tmp")
    [ -n "$gloo" ] || { echo "run $1 failed:"; tail -n 5 "$tmp"; return; }
    sed -n 's/^\([a-z-]*\): model=\([a-z0-9]*\) .* median \([0-9.]*\) ms (min \([0-9.]*\), max \([0-9.]*\)).*ranks agree: \([a-z]*\); per-round ratio to gloo \([0-9.]*\) (quartiles \([0-9.]*\), \([0-9.]*\)).*/\1 \2 \3 \4 \5 \6 \7 \8 \9/p' "$tmp" |
        while read -r b m med lo hi agree rr q1 q3; do
            ratio=$(awk -v a="$med" -v g="$gloo" 'BEGIN { printf "%.2f", a / g }')
            t=$3
            case "$b" in gloo | none) t=- ;; esac
            echo "$1,$b,$m,$t,$med,$lo,$hi,$ratio,$rr,$q1,$q3,$agree" >> "$csv"
            printf '%-7s %-17s %-9s %-4s %7s ms  x%-5s per round x%s (%s..%s)  ranks agree: %s\n' \
                "$1" "$b" "$m" "$t" "$med" "$ratio" "$rr" "$q1" "$q3" "$agree"
        done
}
echo "p = 2, batch $BATCH, ${IMAGE}x$IMAGE images, $STEPS iterations per backend in $ROUNDS turns; ratios to"
echo "DDP with Gloo in the same run (Gloo always uses TCP; the transport column is nbc's)"
run shm resnet18 shm none,gloo,nbc-hook,nbc-hook-wait,nbc-hook-pt,nbc-total,nbc-total-private,nbc-total-noprio,nbc-total-pt,nbc-total-thread,nbc-total-fused
run tcp resnet18 tcp none,gloo,nbc-hook,nbc-total,nbc-total-noprio,nbc-total-thread
run orders branches shm none,gloo,nbc-hook,nbc-total,nbc-total-noprio,nbc-total-thread
# the figure's data: a block per run (backend ratio q1 q3), then the figure when gnuplot is here
dat=${csv%.csv}.dat
awk -F, 'NR > 1 { if ($1 != last && NR > 2) printf "\n\n"; last = $1; print $2, $9, $10, $11 }' "$csv" > "$dat"
command -v gnuplot > /dev/null && gnuplot -e "dat='$dat'; png='${csv%.csv}.png'" bench/torch.gp
echo "written: $csv, $dat, ${csv%.csv}.png"
