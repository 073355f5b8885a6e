#!/bin/sh
# The wide table: every allreduce of one `make bench` run side by side, from the CSVs in DIR.
#   sh bench/wide.sh bench/results 2     (prints Markdown; writes DIR/wide-p2.dat for bench/wide.gp)
# Columns come from three runs of that make bench, each its own program and MPI: bench-pP.csv
# (MPICH on shared memory: nbc_auto, nbc_auto_shared on nbc_alloc_mem buffers, MPICH's two
# calls, the shared-memory prototype and the bound), openmpi-pP.csv (the same bench built against Open MPI) and gloo-pP.csv (Gloo and nbc,
# both over TCP on the loopback). A ratio within one run compares like with like; the ones
# marked "across runs" compare two runs minutes apart. Missing runs leave "-".
dir=${1:-bench/results}
P=${2:-2}
files=$(for f in bench gloo openmpi; do [ -f "$dir/$f-p$P.csv" ] && echo "$dir/$f-p$P.csv"; done)
[ -n "$files" ] || { echo "wide.sh: no bench-p$P.csv, gloo-p$P.csv or openmpi-p$P.csv in $dir" >&2; exit 1; }
# shellcheck disable=SC2086
awk -F, -v dat="$dir/wide-p$P.dat" -v P="$P" '
    FNR == 1 { src = FILENAME; sub(/.*\//, "", src); sub(/-p[0-9]+\.csv$/, "", src); next }
    $NF != 1 { next }
    {
        key = src ":" $3; t[$2, key] = $4
        if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 }
    }
    function size(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
    function us(b, k) { return ((b, k) in t) ? sprintf("%.2f", t[b, k]) : "-" }
    function r(b, k1, k2) { return ((b, k1) in t) && ((b, k2) in t) ? ratio(t[b, k1] / t[b, k2]) : "-" }
    function ratio(x) { return x < 0.1 ? sprintf("%.2g", x) : sprintf("%.2f", x) }
    function num(b, k) { return ((b, k) in t) ? t[b, k] : "NaN" }
    END {
        # sizes in order (the runs may list them alike; sort numerically anyway)
        for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (order[j] + 0 < order[i] + 0) { x = order[i]; order[i] = order[j]; order[j] = x }
        split("gloo_ring gloo_ring_chunked gloo_halving_doubling gloo_bcube gloo_allreduce", g, " ")
        print "Medians in µs (p = " P "): nbc_auto (buffers from malloc; allreduce_shm_small up to 64 KiB, above it allreduce_shm with the kernel copying between the processes), nbc_auto on buffers from nbc_alloc_mem (\"shared\": allreduce_shm above 64 KiB) and both MPI calls on MPICH and on Open MPI; nbc_auto, in place and MPICH'"'"'s MPI_Allreduce over TCP (nbc'"'"'s and MPICH'"'"'s shared memory off); the fastest Gloo algorithm (TCP); the TCP exchange (the two ranks swapping their n bytes over a plain loopback socket: what TCP allows before any reduction); the bound and the shared-window prototype."
        print ""
        print "| size | nbc MPICH | nbc shared MPICH | MPICH Iallreduce | MPICH Allreduce | nbc Open MPI | nbc shared Open MPI | Open MPI Iallreduce | Open MPI Allreduce | nbc TCP | nbc TCP in place | MPICH Allreduce TCP | fastest Gloo | TCP exchange | bound | shm prototype |"
        print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
        for (i = 0; i < n; i++) {
            b = order[i]; best = ""
            for (k = 1; k <= 5; k++) if ((b, "gloo:" g[k]) in t && (best == "" || t[b, "gloo:" g[k]] < t[b, "gloo:" best])) best = g[k]
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", size(b),
                us(b, "bench:nbc_auto"), us(b, "bench:nbc_auto_shared"), us(b, "bench:MPI_Iallreduce"), us(b, "bench:MPI_Allreduce"),
                us(b, "openmpi:nbc_auto"), us(b, "openmpi:nbc_auto_shared"), us(b, "openmpi:MPI_Iallreduce"), us(b, "openmpi:MPI_Allreduce"),
                us(b, "gloo:nbc_auto@tcp"), us(b, "gloo:nbc_auto_inplace@tcp"), us(b, "gloo:MPI_Allreduce@tcp"),
                best == "" ? "-" : sub_gloo(best) " " us(b, "gloo:" best), us(b, "gloo:tcp_exchange"), us(b, "bench:bound"), us(b, "bench:shm_prototype")
        }
        print ""
        print "Ratios of medians (below 1: the first is faster). Same run: nbc / MPICH (Iallreduce, Allreduce), nbc on Open MPI / Open MPI (Iallreduce, Allreduce), nbc over TCP / each Gloo algorithm, nbc over TCP and the fastest Gloo / the TCP exchange, nbc / bound and prototype / bound. Across runs: nbc on MPICH / Open MPI'"'"'s Allreduce."
        print ""
        print "| size | nbc / MPICH | nbc shared / MPICH | nbc / Open MPI (same MPI) | nbc shared / Open MPI (same MPI) | nbc MPICH / Open MPI Allreduce (across runs) | nbc TCP / Gloo ring, ring_chunked, halving_doubling, bcube, allreduce | nbc TCP / TCP exchange | fastest Gloo / TCP exchange | nbc / bound | nbc shared / bound | prototype / bound |"
        print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for (i = 0; i < n; i++) {
            b = order[i]; gl = ""; best = ""
            for (k = 1; k <= 5; k++) gl = gl (k > 1 ? ", " : "") r(b, "gloo:nbc_auto@tcp", "gloo:" g[k])
            for (k = 1; k <= 5; k++) if ((b, "gloo:" g[k]) in t && (best == "" || t[b, "gloo:" g[k]] < t[b, "gloo:" best])) best = g[k]
            printf "| %s | %s / %s | %s / %s | %s / %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |\n", size(b),
                r(b, "bench:nbc_auto", "bench:MPI_Iallreduce"), r(b, "bench:nbc_auto", "bench:MPI_Allreduce"),
                r(b, "bench:nbc_auto_shared", "bench:MPI_Iallreduce"), r(b, "bench:nbc_auto_shared", "bench:MPI_Allreduce"),
                r(b, "openmpi:nbc_auto", "openmpi:MPI_Iallreduce"), r(b, "openmpi:nbc_auto", "openmpi:MPI_Allreduce"),
                r(b, "openmpi:nbc_auto_shared", "openmpi:MPI_Iallreduce"), r(b, "openmpi:nbc_auto_shared", "openmpi:MPI_Allreduce"),
                r(b, "bench:nbc_auto", "openmpi:MPI_Allreduce"), gl,
                r(b, "gloo:nbc_auto@tcp", "gloo:tcp_exchange"), best == "" ? "-" : r(b, "gloo:" best, "gloo:tcp_exchange"),
                r(b, "bench:nbc_auto", "bench:bound"), r(b, "bench:nbc_auto_shared", "bench:bound"), r(b, "bench:shm_prototype", "bench:bound")
        }
        split("bench:nbc_auto bench:nbc_auto_shared openmpi:nbc_auto_shared bench:MPI_Iallreduce bench:MPI_Allreduce openmpi:nbc_auto openmpi:MPI_Iallreduce openmpi:MPI_Allreduce gloo:nbc_auto@tcp gloo:gloo_ring gloo:gloo_ring_chunked gloo:gloo_halving_doubling gloo:gloo_bcube gloo:gloo_allreduce bench:bound bench:shm_prototype gloo:tcp_exchange", cols, " ")
        printf "bytes" > dat
        for (c = 1; c in cols; c++) { name = cols[c]; sub(/^bench:/, "mpich:", name); printf " %s", name > dat }
        printf "\n" > dat
        for (i = 0; i < n; i++) {
            printf "%s", order[i] > dat
            for (c = 1; c in cols; c++) printf " %s", num(order[i], cols[c]) > dat
            printf "\n" > dat
        }
    }
    function sub_gloo(s) { sub(/^gloo_/, "", s); return s }
' $files
