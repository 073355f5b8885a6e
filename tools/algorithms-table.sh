#!/bin/sh
# Writes docs/algorithms.md: for every allreduce schedule, the rounds and bytes sent per rank
# read from its compiled programs (the maximum over ranks) at p = 8 and p = 13 for 2^20
# doubles, beside what the reference formulas say. Usage: algorithms-table.sh NBCC > out.md
NBCC=${1:-bin/nbcc}
COUNT=1048576
N=$((COUNT * 8))

# name|reference rounds (awk, of p, lg = floor(log2 p), pw = 1 if p is a power of two, nseg)|reference bytes (of p, n, lg, pw)|source
SCHEDULES='allreduce_linear|2|(p-1)*n|Open MPI basic_linear: reduce to rank 0, then broadcast; the root sends (p-1)·n
allreduce_binomial|2*clg|clg*n|libNBC: binomial reduce + binomial broadcast; the root sends ⌈lg p⌉·n
allreduce_nonoverlapping|2*(clg+nseg-1)|clg*n|Open MPI nonoverlapping: both halves pipelined in 32 KiB segments
allreduce_recursive_doubling|lg+2*(1-pw)|(lg+(1-pw))*n|lg p exchanges of n (+ fold and unfold)
allreduce_ring|2*(p-1)|2*(p-1)/p*n|Open MPI ring: 2(p-1) steps of n/p
allreduce_segmented_ring|2*(p-1)*nseg|2*(p-1)/p*n|ring in 64 KiB segments
allreduce_rabenseifner|2*lg+3*(1-pw)|2*(P2-1)/P2*n+(1-pw)*3*n/2|2 lg p′ steps of 2(p′-1)/p′·n; a fold costs n/2 and an unfold n more
allreduce_binary_blocks|2*lg+2*(1-pw)|2*(P2-1)/P2*n+(1-pw)*n|Rabenseifner within each block; the block before the smallest hands it whole segments
allreduce_gloo_ring|p-1|(p-1)*n|Gloo allreduce_ring: P-1 steps, P·S bytes
allreduce_gloo_ring_chunked|4*(p-1)|2*(p-1)/p*n|Gloo allreduce_ring_chunked: 4P steps, 2·S bytes'

measure() { # schedule p: "max_rounds max_bytes"
    "$NBCC" dump "$1" --p "$2" --count "$COUNT" --type double | awk '
        /^schedule/ { if (seen) { if (b > mb) mb = b }; b = 0; seen = 1 }
        /^; / { if ($2 > mr) mr = $2 }
        $3 == "SEND" { b += $7 }
        END { if (b > mb) mb = b; print mr + 0, mb + 0 }'
}

cat <<'HEAD'
# Allreduce algorithms

Every allreduce schedule, compiled for 2^20 doubles (n = 8 MiB). "Rounds" and "sent" are read
from the compiled programs: the most rounds and the most bytes sent by any one rank. "Reference"
is what the formula in the schedule's header comment says for the same p (the formulas of
Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 2005, and Rabenseifner, ICCS 2004; Gloo's for its ring); lg = ⌊log2 p⌋, p′ = 2^lg. Regenerate with `make docs`.

| schedule | p | rounds | reference | sent per rank (MiB) | reference (MiB) | notes |
|---|---|---|---|---|---|---|
HEAD
echo "$SCHEDULES" | while IFS='|' read -r name rounds bytes note; do
    for p in 8 13; do
        set -- $(measure "$name" "$p")
        awk -v p="$p" -v n="$N" -v count="$COUNT" -v mr="$1" -v mb="$2" -v name="$name" -v note="$note" "BEGIN {
            lg = 0; while (2 ^ (lg + 1) <= p) lg++
            P2 = 2 ^ lg; pw = (P2 == p); clg = lg + (pw ? 0 : 1)
            nseg = (name ~ /nonoverlapping/) ? n / 32768 : (name ~ /segmented/) ? int((int((count + p - 1) / p) * 8 + 65535) / 65536) : 1
            printf \"| %s | %d | %d | %d | %.2f | %.2f | %s |\\n\", name, p, mr, $rounds, mb / 1048576, ($bytes) / 1048576, note
        }"
    done
done
cat <<'TAIL'

Where the measured rounds differ from the formula, the difference is the compiler's doing, not
the algorithm's: a round that only computes joins the next one (so the reduce of a binomial
tree's last level shares a round with the broadcast's first), while a local reduction at the
very end is a round of its own (recursive doubling and Gloo's ring end with one: 4 instead of 3
at p = 8, no message in it). Binary blocks at p = 13 (blocks of 8, 4 and 1) sends 22 MiB from
the rank of the 4-block that hands the lone rank its whole segment, the imbalance the cost notes
bound by the size ratio of consecutive blocks; Rabenseifner's fold makes its survivors send
26 MiB at p = 13 against 14 MiB at p = 8.
TAIL
