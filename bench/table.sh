#!/bin/sh
# A markdown table from a bench CSV: sh bench/table.sh bench/results/bench-p2.csv [TUNED_CSV].
# Per size: nbc_auto, the fastest forced schedule and MPICH's two calls; with a second CSV (the
# run with the tuning file, bench-pP-tuned.csv) also its nbc_auto, ratios to its own run's MPICH.
# Times are medians in microseconds, ratios are nbc / MPICH (below 1: nbc is faster).
awk -F, -v tuned="${2:-}" '
    FNR == 1 { run++; next }
    run == 2 { if ($3 == "nbc_auto") tt[$2] = sprintf("%.2f (%.2f / %.2f)", $4, $11, $12); next }
    {
        b = $2; v = $3; t[b, v] = $4; ri[b, v] = $11; ra[b, v] = $12
        if (!(b in seen)) { seen[b] = 1; order[n++] = b }
        if (v ~ /^nbc_/ && v != "nbc_auto" && v !~ /^nbc_auto_spin/ && (!(b in best) || $4 < t[b, best[b]])) best[b] = v
    }
    function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
    function cell(b, v) { return (b, v) in t ? sprintf("%.2f (%.2f / %.2f)", t[b, v], ri[b, v], ra[b, v]) : "-" }
    END {
        printf "| size | nbc_auto |%s fastest forced schedule | MPI_Iallreduce | MPI_Allreduce |\n", tuned ? " nbc_auto, tuned |" : ""
        printf "|---:|---:|%s---|---:|---:|\n", tuned ? "---:|" : ""
        for (i = 0; i < n; i++) {
            b = order[i]
            bs = best[b]; sub(/^nbc_/, "", bs)
            printf "| %s | %s |%s %s %s | %.2f | %.2f |\n", size(b), cell(b, "nbc_auto"),
                tuned ? " " ((b in tt) ? tt[b] : "-") " |" : "", bs, cell(b, best[b]), t[b, "MPI_Iallreduce"], t[b, "MPI_Allreduce"]
        }
    }' "$1" ${2:+"$2"}
