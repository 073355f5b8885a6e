#!/bin/sh
# The cost model against a network: for each link setting, `nbcc calibrate` between two
# namespace hosts gives alpha, beta, gamma; then, with one rank a host (tests/hosts.sh), every
# allreduce schedule is timed by bench at p = 2, 4, 8 and a few sizes, and `nbcc simulate`
# predicts the same with the calibrated model.
#
#   sh bench/network.sh [--settings "none rate=1gbit"] [--ps "2 4 8"] [--sizes "8 65536 1048576"]
#   sh bench/network.sh --table [--settings ...] [--ps ...] [--sizes ...]   (tabulate only)
#
# --columns LIST: the schedules that get a column in the tables (all of them are in network.csv).
#
# A setting is "none" or comma-separated rate=R / delay=D (tests/hosts.sh's --rate, --delay).
# Writes into bench/results/network/: model-SETTING.txt (the calibration), SETTING-pP-BYTES.csv
# (bench's rows), network.csv (setting,p,bytes,schedule,predicted_us,measured_us,ratio,best_us:
# the median of the batches and the fastest batch), and
# prints a Markdown table per setting. Needs root (network namespaces), like tests/hosts.sh,
# and `make all build/bench/bench` first.
BUILD=${BUILD:-build}
BINDIR=${BINDIR:-bin}
settings="none rate=1gbit"
ps="2 4 8"
sizes="8 65536 1048576 16777216"
measure=
table=
columns="binomial recursive_doubling ring rabenseifner"
while [ $# -gt 0 ]; do
    case $1 in
    --settings) settings=$2; shift 2 ;;
    --ps) ps=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --measure) measure=$2; shift 2 ;; # internal: SETTING:P, run under tests/hosts.sh
    --table) table=1; shift ;;
    --columns) columns=$2; shift 2 ;;
    *) echo "usage: sh bench/network.sh [--settings LIST] [--ps LIST] [--sizes LIST]" >&2; exit 2 ;;
    esac
done
out=bench/results/network
mkdir -p "$out"
schedules=$("$BINDIR/nbcc" list | awk '$2 == "allreduce" { printf "%s%s", sep, $1; sep = "," }')

# One bench per size, so that each times only its own size (bench doubles from --min to
# --max), one rank a host. Few batches: 16 MiB at p = 8 on two cores takes long.
if [ -n "$measure" ]; then
    s=${measure%:*}
    p=${measure##*:}
    for b in $sizes; do
        reps=5
        [ "$b" -ge 1048576 ] && reps=3
        # one attempt, never stopped for quiet output (a size is printed when it is done)
        BUILD=$BUILD UCX_NET_DEVICES=nbc0 TCP_TRIES=1 TCP_IDLE=900 TCP_LIMIT=900 sh tests/tcp.sh "$NBC_HOSTS_MPIEXEC" \
            -n "$p" -ppn 1 "$BUILD/bench/bench" --min "$b" --max "$b" --reps "$reps" --batch 0.002 \
            --schedules "$schedules" --csv "$out/$s-p$p-$b.csv" > "$out/$s-p$p-$b.txt" 2>&1
        grep -q ",MPI_Allreduce," "$out/$s-p$p-$b.csv" 2> /dev/null ||
            echo "network.sh: bench failed for $s p=$p $b B (see $out/$s-p$p-$b.txt)" >&2
    done
    exit 0
fi

hosts_opts() { # SETTING: tests/hosts.sh's options for it
    [ "$1" = none ] && return
    echo "$1" | tr ',' '\n' | sed 's/^\([a-z]*\)=/--\1 /' | tr '\n' ' '
}

[ -z "$table" ] && for s in $settings; do
    # shellcheck disable=SC2046
    # shellcheck disable=SC2016
    sh tests/hosts.sh --hosts 2 $(hosts_opts "$s") -- sh -c 'BUILD=$1 UCX_NET_DEVICES=nbc0 TCP_TRIES=1 TCP_IDLE=15 \
        sh tests/tcp.sh "$NBC_HOSTS_MPIEXEC" -n 2 -ppn 1 "$0" calibrate' "$BINDIR/nbcc" "$BUILD" > "$out/model-$s.txt" 2> "$out/hosts.log"
    grep -q '^alpha=' "$out/model-$s.txt" || {
        echo "network.sh: calibration failed for $s: $(cat "$out/model-$s.txt") $(tail -n 3 "$out/hosts.log")" >&2
        exit 1
    }
    echo "$s: $(grep '^alpha=' "$out/model-$s.txt")" >&2
    # the machine's other work shows in every time: its load goes with the results
    echo "$s: load average $(cut -d ' ' -f 1-3 /proc/loadavg) at $(date -u '+%H:%M UTC') before, on $(nproc) cores" >> "$out/load.txt"
    for p in $ps; do
        # shellcheck disable=SC2046
        sh tests/hosts.sh --hosts "$p" $(hosts_opts "$s") -- sh bench/network.sh --measure "$s:$p" --sizes "$sizes" ||
            exit 1
    done
    echo "$s: load average $(cut -d ' ' -f 1-3 /proc/loadavg) at $(date -u '+%H:%M UTC') after" >> "$out/load.txt"
done

# Prediction next to measurement: bench names a forced schedule nbc_NAME, NAME without its
# "allreduce_"; the median of the batches is the measurement.
echo "setting,p,bytes,schedule,predicted_us,measured_us,ratio,best_us" > "$out/network.csv"
for s in $settings; do
    model=$(grep '^alpha=' "$out/model-$s.txt")
    for p in $ps; do
        for b in $sizes; do
            [ -f "$out/$s-p$p-$b.csv" ] || continue
            for name in $(echo "$schedules" | tr ',' ' '); do
                meas=$(awk -F, -v v="nbc_${name#allreduce_}" '$3 == v && $14 == 1 { print $4 }' "$out/$s-p$p-$b.csv")
                best=$(awk -F, -v v="nbc_${name#allreduce_}" '$3 == v && $14 == 1 { print $7 }' "$out/$s-p$p-$b.csv")
                pred=$("$BINDIR/nbcc" simulate "$name" --p "$p" --bytes "$b" --type double --model "$model" 2> /dev/null |
                    awk '$1 == "time:" { printf "%.3f", $2 * 1e6 }')
                [ -n "$meas" ] && [ -n "$pred" ] || continue
                echo "$s,$p,$b,$name,$pred,$meas,$(awk -v m="$meas" -v q="$pred" 'BEGIN { printf "%.2f", m / q }'),$best"
            done
        done
    done
done >> "$out/network.csv"

# One Markdown table per setting: a row per p and size; per schedule of --columns "predicted /
# measured median / fastest batch"; the model's pick among all schedules (and its measured
# median over the fastest median) and the fastest measured.
for s in $settings; do
    echo
    echo "$s ($(grep '^alpha=' "$out/model-$s.txt")):"
    echo
    awk -F, -v s="$s" -v columns="$columns" '
        BEGIN { nn = split(columns, names, " ") }
        NR > 1 && $1 == s {
            key = $2 "," $3
            if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
            name = $4; sub(/^allreduce_/, "", name)
            cell[key, name] = sprintf("%s / %s / %s", fmt($5), fmt($6), fmt($8)); meas[key, name] = $6
            if (!(key in bp) || $5 < bp[key]) { bp[key] = $5; bpn[key] = name }
            if (!(key in bm) || $6 < bm[key]) { bm[key] = $6; bmn[key] = name }
        }
        function fmt(us) { return us >= 10000 ? sprintf("%.0f ms", us / 1000) : us >= 1000 ? sprintf("%.1f ms", us / 1000) : sprintf("%.0f us", us) }
        function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
        END {
            printf "| p | size |"; for (i = 1; i <= nn; i++) printf " %s |", names[i]; print " model picks | fastest measured |"
            printf "|---|---|"; for (i = 1; i <= nn; i++) printf "---|"; print "---|---|"
            for (k = 1; k <= nk; k++) {
                split(keys[k], pb, ",")
                printf "| %d | %s |", pb[1], size(pb[2])
                for (i = 1; i <= nn; i++) printf " %s |", ((keys[k], names[i]) in cell) ? cell[keys[k], names[i]] : "-"
                printf " %s (%.2fx) | %s |\n", bpn[keys[k]], meas[keys[k], bpn[keys[k]]] / bm[keys[k]], bmn[keys[k]]
            }
        }' "$out/network.csv"
done
