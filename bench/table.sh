#!/bin/sh
# A markdown table from a bench CSV (sh bench/table.sh bench/results/bench-p2.csv): per size,
# nbc_auto, the fastest forced schedule, and MPICH's two calls;
# times are medians in microseconds, ratios are nbc / MPICH (below 1: nbc is faster).
awk -F, '
    NR == 1 { next }
    {
        b = $2; v = $3; t[b, v] = $4; ri[b, v] = $11; ra[b, v] = $12
        if (!(b in seen)) { seen[b] = 1; order[n++] = b }
        if (v ~ /^nbc_/ && v != "nbc_auto" && v !~ /^nbc_auto_spin/ && (!(b in best) || $4 < t[b, best[b]])) best[b] = v
    }
    function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
    function cell(b, v) { return (b, v) in t ? sprintf("%.2f (%.2f / %.2f)", t[b, v], ri[b, v], ra[b, v]) : "-" }
    END {
        print "| size | nbc_auto | fastest forced schedule | MPI_Iallreduce | MPI_Allreduce |"
        print "|---:|---:|---|---:|---:|"
        for (i = 0; i < n; i++) {
            b = order[i]
            bs = best[b]; sub(/^nbc_/, "", bs)
            printf "| %s | %s | %s %s | %.2f | %.2f |\n", size(b), cell(b, "nbc_auto"), bs, cell(b, best[b]),
                t[b, "MPI_Iallreduce"], t[b, "MPI_Allreduce"]
        }
    }' "$1"
