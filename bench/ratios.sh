#!/bin/sh
# The ratios docs/performance.md quotes ("The rounds"), repeated: N rounds, each running
# the three programs of `make bench` (bench on MPICH, bench on Open MPI, bench/gloo over TCP)
# at each size alone, so that a loaded machine shows as spread rather than as one lucky or
# unlucky figure. Prints, per size and ratio, the median over the rounds and [min – max].
#   sh bench/ratios.sh [BUILD] [P] [N] ["8 65536 1048576 16777216"]
# Writes bench/results/ratios-pP.csv (round,bytes,ratio,value). Needs make bench's programs.
: "${MPIEXEC:=mpiexec.mpich}"
BUILD=${1:-build}
P=${2:-2}
export BUILD # tests/tcp.sh builds its preload there
N=${3:-5}
sizes=${4:-8 65536 1048576 16777216}
ompi=${OMPI_BUILD:-build/openmpi}
out=bench/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,bytes,ratio,value" > "$out/ratios-p$P.csv"
i=1
while [ "$i" -le "$N" ]; do
    for b in $sizes; do
        # shellcheck disable=SC2086
        $MPIEXEC -n "$P" "$BUILD/bench/bench" --min "$b" --max "$b" --csv "$tmp/bench.csv" > /dev/null
        # shellcheck disable=SC2086
        TCP_TRIES=1 TCP_IDLE=300 sh tests/tcp.sh $MPIEXEC -n "$P" "$BUILD/bench/gloo" --min "$b" --max "$b" \
            --store "$tmp" --csv "$tmp/gloo.csv" > /dev/null
        rm -f "$tmp/openmpi.csv"
        [ -x "$ompi/bench/bench" ] && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            mpiexec.openmpi --oversubscribe -n "$P" "$ompi/bench/bench" --shm 0 --min "$b" --max "$b" \
            --csv "$tmp/openmpi.csv" > /dev/null
        # one line per ratio of this round and size: the tables' names, bench:VARIANT etc.
        # shellcheck disable=SC2046
        awk -F, -v i="$i" -v b="$b" '
            FNR == 1 { src = FILENAME; sub(/.*\//, "", src); sub(/\.csv$/, "", src); next }
            $NF == 1 { t[src ":" $3] = $4 }
            function r(name, k1, k2) { if ((k1 in t) && (k2 in t)) printf "%d,%d,%s,%.4f\n", i, b, name, t[k1] / t[k2] }
            END {
                r("nbc/MPICH Iallreduce", "bench:nbc_auto", "bench:MPI_Iallreduce")
                r("nbc/MPICH Allreduce", "bench:nbc_auto", "bench:MPI_Allreduce")
                r("nbc/Open MPI Iallreduce (on Open MPI)", "openmpi:nbc_auto", "openmpi:MPI_Iallreduce")
                r("nbc/Open MPI Allreduce (on Open MPI)", "openmpi:nbc_auto", "openmpi:MPI_Allreduce")
                r("nbc on MPICH/Open MPI Allreduce", "bench:nbc_auto", "openmpi:MPI_Allreduce")
                n = split("gloo_ring gloo_ring_chunked gloo_halving_doubling gloo_bcube gloo_allreduce", g, " ")
                for (k = 1; k <= n; k++) r("nbc TCP/" g[k], "gloo:nbc_auto@tcp", "gloo:" g[k])
                r("nbc TCP/TCP exchange", "gloo:nbc_auto@tcp", "gloo:tcp_exchange")
                for (k = 1; k <= n; k++) r(g[k] "/TCP exchange", "gloo:" g[k], "gloo:tcp_exchange")
                r("nbc/bound", "bench:nbc_auto", "bench:bound")
                r("shared nbc/bound", "bench:nbc_auto_shared", "bench:bound")
                r("shared any-order nbc/bound", "bench:nbc_anyorder_shared", "bench:bound")
                r("shared nbc/prototype", "bench:nbc_auto_shared", "bench:shm_prototype")
                r("shared nbc/MPICH Allreduce", "bench:nbc_auto_shared", "bench:MPI_Allreduce")
                r("shared nbc/Open MPI Allreduce (on Open MPI)", "openmpi:nbc_auto_shared", "openmpi:MPI_Allreduce")
                r("shared nbc/Open MPI Iallreduce (on Open MPI)", "openmpi:nbc_auto_shared", "openmpi:MPI_Iallreduce")
                r("prototype/bound", "bench:shm_prototype", "bench:bound")
                r("nbc/prototype", "bench:nbc_auto", "bench:shm_prototype")
            }' "$tmp/bench.csv" "$tmp/gloo.csv" $([ -f "$tmp/openmpi.csv" ] && echo "$tmp/openmpi.csv") >> "$out/ratios-p$P.csv"
    done
    echo "round $i of $N done, load average $(cut -d ' ' -f 1-3 /proc/loadavg)" >&2
    i=$((i + 1))
done

# median [min – max] of each (size, ratio) over the rounds
sort -t, -k2,2n -k3,3 -k4,4g "$out/ratios-p$P.csv" | awk -F, '
    $1 == "round" { next }
    { k = $2 "," $3; if (!(k in n)) order[m++] = k; v[k, ++n[k]] = $4 }
    function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
    function f(x) { return x < 0.1 ? sprintf("%.2g", x) : sprintf("%.2f", x) }
    END {
        print "| size | ratio | median | min – max | rounds |"
        print "|---:|---|---:|---|---:|"
        for (j = 0; j < m; j++) {
            k = order[j]; c = n[k]; split(k, kb, ",")
            med = c % 2 ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
            printf "| %s | %s | %s | %s – %s | %d |\n", size(kb[1]), kb[2], f(med), f(v[k, 1]), f(v[k, c]), c
        }
    }'
