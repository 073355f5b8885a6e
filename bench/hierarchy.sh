#!/bin/sh
# Jobs that span nodes: the hierarchical allreduce against the flat schedules and MPICH across
# namespace hosts (tests/hosts.sh), each link limited to --rate (default 1gbit), 2 hosts of
# 2 ranks, with both placements: block (host by host: ranks 0, 1 on host 0, hydra's -ppn 2)
# and cyclic (round-robin: ranks 0, 2 on host 0, hydra's -ppn 1). `nbcc calibrate` with 2
# ranks a host gives the two-level model (alpha, beta between hosts; alpha_node, beta_node
# inside one), and `nbcc simulate --nodes 2 --ppn 2 --placement P` predicts every row with it.
#
#   sh bench/hierarchy.sh [--rate R] [--sizes "65536 1048576 16777216"]   (as root)
#   sh bench/hierarchy.sh --table                                          (tabulate only)
#
# Timed by bench (doubles, sum; medians and quartiles of batches, the slowest rank of each):
# allreduce_nodes (and allreduce_nodes_small where it serves the call), the flat ring,
# rabenseifner, recursive_doubling and segmented_ring (the best of them reported), MPICH's
# MPI_Allreduce. Writes into bench/results/hierarchy/: model.txt, hosts-PLACEMENT.txt (each
# rank's host, as launched), PLACEMENT-BYTES.csv (bench's rows), hierarchy.csv
# (placement,bytes,variant,predicted_us,measured_us,p25_us,p75_us,min_us,max_us,reps) and
# hierarchy.md (the table with the ratios). Needs `make all build/bench/bench` first.
BUILD=${BUILD:-build}
BINDIR=${BINDIR:-bin}
rate=1gbit
sizes="65536 1048576 16777216"
measure=
table=
while [ $# -gt 0 ]; do
    case $1 in
    --rate) rate=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --measure) measure=1; shift ;; # internal: run under tests/hosts.sh
    --table) table=1; shift ;;
    *) echo "usage: sh bench/hierarchy.sh [--rate R] [--sizes LIST] [--table]" >&2; exit 2 ;;
    esac
done
out=bench/results/hierarchy
mkdir -p "$out"
flat="ring rabenseifner recursive_doubling segmented_ring"

# The hierarchical schedules: built in once they are in schedules/, else from examples/.
known() { "$BINDIR/nbcc" list 2> /dev/null | awk -v n="$1" '$1 == n { f = 1 } END { exit !f }'; }
hier=
load=
for h in allreduce_nodes allreduce_nodes_small; do
    if known "$h"; then
        hier="$hier $h"
    elif [ -f "examples/$h.nbs" ]; then
        hier="$hier $h"
        load="$load${load:+ }examples/$h.nbs"
    else
        echo "hierarchy.sh: no schedule $h (neither built in nor examples/$h.nbs): its rows are left out" >&2
    fi
done
source_of() { # NAME: what nbcc simulate takes for it
    case " $load " in *" examples/$1.nbs "*) echo "examples/$1.nbs" ;; *) echo "$1" ;; esac
}

if [ -n "$measure" ]; then
    tcp() { # MPIEXEC-ARGS...: one attempt, never stopped for quiet output
        BUILD=$BUILD UCX_NET_DEVICES=nbc0 TCP_TRIES=1 TCP_IDLE=900 TCP_LIMIT=1800 sh tests/tcp.sh "$NBC_HOSTS_MPIEXEC" "$@"
    }
    # calibration with 2 ranks a host, so that it measures both levels
    tcp -n 4 -ppn 2 "$BINDIR/nbcc" calibrate > "$out/model.txt" 2> "$out/calibrate.log" < /dev/null
    grep -q '^alpha=.*alpha_node=' "$out/model.txt" || {
        echo "hierarchy.sh: calibration failed: $(cat "$out/model.txt" "$out/calibrate.log" | tail -n 5)" >&2
        exit 1
    }
    # shellcheck disable=SC2086
    schedules=$(echo $hier $flat | tr ' ' ',')
    for placement in block cyclic; do
        ppn=2
        [ "$placement" = cyclic ] && ppn=1 # hydra deals -ppn ranks to a host, then the next, round and round
        # shellcheck disable=SC2016
        tcp -n 4 -ppn $ppn sh -c 'echo "$PMI_RANK $(hostname)"' < /dev/null | sort -n > "$out/hosts-$placement.txt"
        for b in $sizes; do
            reps=9
            [ "$b" -ge 16777216 ] && reps=5
            tcp -n 4 -ppn $ppn "$BUILD/bench/bench" --min "$b" --max "$b" --reps $reps --batch 0.02 --shared 0 --shm 0 \
                ${load:+--load examples} --schedules "$schedules" \
                --csv "$out/$placement-$b.csv" > "$out/$placement-$b.txt" 2>&1 < /dev/null
            grep -q ",MPI_Allreduce," "$out/$placement-$b.csv" 2> /dev/null ||
                echo "hierarchy.sh: bench failed for $placement $b B (see $out/$placement-$b.txt)" >&2
        done
    done
    exit 0
fi

if [ -z "$table" ]; then
    echo "hierarchy: load average $(cut -d ' ' -f 1-3 /proc/loadavg) at $(date -u '+%Y-%m-%d %H:%M UTC') before, on $(nproc) cores" > "$out/load.txt"
    sh tests/hosts.sh --hosts 2 --rate "$rate" -- sh bench/hierarchy.sh --measure --sizes "$sizes" > "$out/hosts.log" 2>&1 || {
        echo "hierarchy.sh: the run failed: $(tail -n 5 "$out/hosts.log")" >&2
        exit 1
    }
    cat "$out/hosts.log" >&2
    echo "hierarchy: load average $(cut -d ' ' -f 1-3 /proc/loadavg) at $(date -u '+%Y-%m-%d %H:%M UTC') after" >> "$out/load.txt"
fi

model=$(grep '^alpha=' "$out/model.txt")
[ -n "$model" ] || { echo "hierarchy.sh: no model in $out/model.txt" >&2; exit 1; }
echo "placement,bytes,variant,predicted_us,measured_us,p25_us,p75_us,min_us,max_us,reps" > "$out/hierarchy.csv"
for placement in block cyclic; do
    for b in $sizes; do
        f=$out/$placement-$b.csv
        [ -f "$f" ] || continue
        for name in $hier $flat MPI_Allreduce; do
            v=MPI_Allreduce
            pred=
            if [ "$name" != MPI_Allreduce ]; then
                v=nbc_${name#allreduce_}
                sched=$(source_of "$name")
                case $name in allreduce_*) ;; *) sched=allreduce_$name ;; esac
                pred=$("$BINDIR/nbcc" simulate "$sched" --nodes 2 --ppn 2 --placement "$placement" --bytes "$b" --type double \
                    --model "$model" 2> /dev/null | awk '$1 == "time:" { printf "%.3f", $2 * 1e6 }')
            fi
            # bench: p,bytes,variant,median,p25,p75,min,max,reps,iters,..,correct (1; -1 refused)
            awk -F, -v v="$v" -v pl="$placement" -v pred="$pred" '$3 == v && $14 == 1 {
                printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", pl, $2, v, pred, $4, $5, $6, $7, $8, $9 }' "$f"
        done
    done
done >> "$out/hierarchy.csv"

# The table: one row per placement and size.
awk -F, -v flat="$flat" -v model="$model" '
    function fmt(us) { return us == "" ? "-" : us >= 10000 ? sprintf("%.0f ms", us / 1000) : us >= 1000 ? sprintf("%.1f ms", us / 1000) : sprintf("%.0f us", us) }
    function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB" }
    function cell(k, v) { return fmt(med[k, v]) " (" fmt(lo[k, v]) " - " fmt(hi[k, v]) ")" }
    function pm(k, v) { return pred[k, v] == "" ? "-" : sprintf("%s / %.2f", fmt(pred[k, v]), pred[k, v] / med[k, v]) }
    function ratio(a, b) { return a == "" || b == "" ? "-" : sprintf("%.2f", a / b) }
    BEGIN { nf = split(flat, fl, " ") }
    NR > 1 {
        k = $1 "," $2
        if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
        med[k, $3] = $5; lo[k, $3] = $6; hi[k, $3] = $7; pred[k, $3] = $4
    }
    END {
        print "model: " model
        print ""
        print "| placement | size | nodes | nodes_small | best flat | MPI_Allreduce | nodes / best flat | nodes / MPICH | predicted / measured: nodes, best flat |"
        print "|---|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nk; i++) {
            k = keys[i]
            split(k, kb, ",")
            best = ""
            for (j = 1; j <= nf; j++) {
                v = "nbc_" fl[j]
                if ((k, v) in med && (best == "" || med[k, v] < med[k, best])) best = v
            }
            h = "nbc_nodes"
            printf "| %s | %s | %s | %s | %s %s | %s | %s | %s | %s; %s |\n", kb[1] == "block" ? "host by host" : "round-robin", size(kb[2]),
                ((k, h) in med) ? cell(k, h) : "-", ((k, "nbc_nodes_small") in med) ? cell(k, "nbc_nodes_small") : "-",
                substr(best, 5), cell(k, best), cell(k, "MPI_Allreduce"),
                ratio(med[k, h], med[k, best]), ratio(med[k, h], med[k, "MPI_Allreduce"]), pm(k, h), pm(k, best)
        }
        print ""
        print "Each time: the median of the batches (the quartiles in brackets); predicted / measured: the two-level model'"'"'s time and its ratio to the median."
    }' "$out/hierarchy.csv" > "$out/hierarchy.md"
cat "$out/hierarchy.md"
