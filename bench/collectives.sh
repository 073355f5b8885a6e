#!/bin/sh
# All-to-all, gather and scan (bench/collectives.c): nbc beside the MPI's non-blocking and
# blocking calls, on MPICH and, when OMPI_BUILD/bench/collectives exists, on Open MPI, in one
# command: sh bench/collectives.sh BINDIR BUILD P. Writes bench/results/collectives-pP-mpich.{txt,csv}
# and collectives-pP-openmpi.{txt,csv}; at p = 2 also docs/performance-collectives-p2.md, the
# table docs/performance.md shows (commit it with the run). COLLECTIVES_ARGS adds options.
set -e
BINDIR=${1:-bin}
BUILD=${2:-build}
P=${3:-2}
out=bench/results
mkdir -p "$out"
# every schedule of the three collectives, forced in turn
schedules=$("$BINDIR/nbcc" list | awk '$2 == "alltoall" || $2 == "gather" || $2 == "scan" {
    printf "%s%s=%s", sep, $2, $1; sep = "," }')
# shellcheck disable=SC2086
mpiexec.mpich -n "$P" "$BUILD/bench/collectives" --schedules "$schedules" --csv "$out/collectives-p$P-mpich.csv" \
    $COLLECTIVES_ARGS | tee "$out/collectives-p$P-mpich.txt"
if [ -n "$OMPI_BUILD" ] && [ -x "$OMPI_BUILD/bench/collectives" ]; then
    # shellcheck disable=SC2086
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi --oversubscribe -n "$P" \
        "$OMPI_BUILD/bench/collectives" --schedules "$schedules" --csv "$out/collectives-p$P-openmpi.csv" \
        $COLLECTIVES_ARGS | tee "$out/collectives-p$P-openmpi.txt"
fi
[ "$P" = 2 ] || exit 0
# one table: each collective and size, nbc's automatic choice and its best schedule against the
# fastest of each MPI's two calls (the ratio: nbc_auto's median over that MPI's best median)
{
    echo "| collective | bytes | nbc_auto µs | best nbc schedule µs | MPICH best µs | nbc_auto / MPICH | Open MPI best µs | nbc_auto (Open MPI build) / Open MPI |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    awk -F, 'FNR == 1 { f++; next }
        { k = $1 "," $2 }
        f == 1 && !(k in order) { order[k] = ++n; keys[n] = k }
        f == 1 && $3 == "nbc_auto" { auto[k] = $4 }
        f == 1 && $3 ~ /^nbc / && (!(k in sched) || $4 < sched[k]) { sched[k] = $4 }
        f == 1 && $3 ~ /^MPI/ && (!(k in mpich) || $4 < mpich[k]) { mpich[k] = $4 }
        f == 2 && $3 == "nbc_auto" { oauto[k] = $4 }
        f == 2 && $3 ~ /^MPI/ && (!(k in ompi) || $4 < ompi[k]) { ompi[k] = $4 }
        END {
            for (i = 1; i <= n; i++) {
                k = keys[i]; split(k, c, ",")
                o = (k in ompi) ? sprintf("%.2f | %.2f", ompi[k], oauto[k] / ompi[k]) : "- | -"
                printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s |\n", c[1], c[2], auto[k], sched[k], mpich[k], auto[k] / mpich[k], o
            }
        }' "$out/collectives-p$P-mpich.csv" "$( [ -f "$out/collectives-p$P-openmpi.csv" ] && echo "$out/collectives-p$P-openmpi.csv" || echo /dev/null)"
} > docs/performance-collectives-p2.md
