#!/bin/sh
# Writes docs/algorithms.md: for every allreduce schedule, the rounds and bytes sent per rank
# read from its compiled programs (the maximum over ranks) at p = 8 and p = 13 for 2^20
# doubles, beside what the reference formulas say; then the shared-memory schedules, their
# rounds, flags and shared scratch read the same way for 2048 doubles (16 KiB); then every
# other schedule with the preconditions, rounds, bytes and cost its header gives.
# Usage: algorithms-table.sh NBCC > out.md
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
# Algorithms

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

# schedule p: "max_rounds max_signals max_peer_operations max_shared_bytes agreement" for 2048 doubles
measure_shm() {
    "$NBCC" dump "$1" --p "$2" --count 2048 --type double | awk '
        function done() { if (r > mr) mr = r; if (f > mf) mf = f; if (o > mo) mo = o; if (sb > msb) msb = sb }
        /^schedule/ { done(); r = f = o = sb = 0 }
        /^; / { r = $2; if (match($0, /shared scratch [0-9]+/)) sb = substr($0, RSTART + 15, RLENGTH - 15); if (/agreement/) ag = 1 }
        $3 == "SIGNAL" { f++ }
        ($3 == "COPY" || $3 == "REDUCE" || $3 == "COMBINE") && $4 != "-" { o++ }
        END { done(); print mr + 0, mf + 0, mo + 0, msb + 0, ag ? "yes" : "no" }'
}

cat <<'SHM'

## Shared memory

Two schedules need ranks that share memory (`requires shared_memory`: every rank can map the
others', one node) and send no message. Compiled for 2048 doubles (16 KiB), the most rounds,
signals, operations on another rank's memory and bytes of shared scratch of any one rank;
"agreement" says whether the program names another rank's send or receive buffer
(`PROG_AGREE`: the runtime starts it only after every rank has entered the call and published
them).

| schedule | p | rounds | signals per rank | operations on peers' memory | shared scratch (bytes) | agreement |
|---|---|---|---|---|---|---|
SHM
for name in allreduce_shm allreduce_shm_small; do
    for p in 2 8; do
        set -- $(measure_shm "$name" "$p")
        echo "| $name | $p | $1 | $2 | $3 | $4 | $5 |"
    done
done
cat <<'SHM'

### allreduce_shm

`allreduce_shm` runs after the runtime's agreement (`PROG_AGREE`), so its one round reads
every rank's sendbuf at once: each rank computes its block, `block(count, p, rank)`, of the
result in segments of `segsize` bytes (default 32 KiB) straight out of the p send buffers, in
rank order (`copy sendbuf@(p - 1)[s] to recvbuf[s]`, then `reduce recvbuf[s] =+ sendbuf@r[s]`
for r = p-2 down to 0: s0 ⊕ (s1 ⊕ (... ⊕ sp-1))), and copies each finished segment into every
other rank's recvbuf (`copy recvbuf[s] to recvbuf@r[s]`) while it is in cache. The round ends
with a `signal` to and a `wait` for every other rank, so no rank returns while another still
uses its buffers. One rank computes each block and all get its copy: the result is
bit-identical everywhere and non-commutative ops work (`ordered`). Per rank: n elements read,
(p-1)/p·n written into the others' buffers, (p-1)/p·nγ of reduction, p-1 signals and p-1
waits; at p = 2 the first copy and reduction fuse into one COMBINE that names the other rank.
In place, a rank's input is its own recvbuf: it adds the lower ranks on its left and the
higher ones on its right.

### allreduce_shm_small

`allreduce_shm_small` (`param maxbytes = 65536`, `requires count * esize <= maxbytes`) is for
vectors so small that the synchronization, not the arithmetic, is the cost. It names no other
rank's send or receive buffer, only their shared scratch (`shared stage[count]`, named
`stage@r`), so it needs no agreement and starts at once. Round 0 copies sendbuf into the
rank's own `stage`, then signals every other rank and waits for every other rank's signal;
round 1 computes recvbuf := stage@0 ⊕ (stage@1 ⊕ (... ⊕ stage@(p-1))) (`copy stage@(p - 1) to
recvbuf`, then `reduce recvbuf =+ stage@r` for r = p-2 down to 0). One exchange of flags is
enough because the runtime does not reuse a call's shared scratch before every rank has ended
that call: a rank may return while the others still read its stage. Every rank does the same
operations in the same order, so the result is bit-identical everywhere and non-commutative
ops work. Per rank: n elements written into its stage, p·n read, (p-1)·nγ of reduction (every
rank reduces the whole vector, which is why it stops at `maxbytes`), p-1 signals and p-1
waits. In place works unchanged, since round 0 has copied the input away; p = 1 is one copy,
and count 0 emits nothing, not even a flag.
SHM

# schedule nodes ppn: "max_rounds max_bytes_between_nodes max_bytes_inside" for 2^20 doubles,
# ranks placed block by block (node of rank r: r / ppn)
measure_nodes() {
    "$NBCC" dump "$1" --nodes "$2" --ppn "$3" --count "$COUNT" --type double | awk -v k="$3" '
        function done() { if (r > mr) mr = r; if (x > mx) mx = x; if (i > mi) mi = i }
        /^schedule/ { done(); r = x = i = 0; match($0, /rank=[0-9]+/); me = substr($0, RSTART + 5, RLENGTH - 5) }
        /^; / { r = $2 }
        $3 == "SEND" { if (int($4 / k) == int(me / k)) i += $7; else x += $7 }
        END { done(); print mr + 0, mx + 0, mi + 0 }'
}
# schedule nodes ppn bytes: the simulated time in the two-level model below
simulate_nodes() {
    "$NBCC" simulate "$1" --nodes "$2" --ppn "$3" --bytes "$4" \
        --model alpha=20e-6,beta=8e-9,gamma=1e-10,alpha_node=1e-6,beta_node=2e-10 |
        sed -n 's/^time: [^ ]* s (\(.*\)).*/\1/p'
}

cat <<'NODES'

## Node-aware schedules

These schedules read the topology (`nodes`, `node(r)`, `node_rank(j, i)`, docs/language.md) and
keep most messages inside a node: each node has a leader (its first rank, or the root in the
root's node), and only leaders, or a few ranks a node, cross the network. Without a topology
every rank is its own node, and they become flat algorithms (a ring, a dissemination
allreduce, binomial trees). Compiled for 2^20 doubles (n = 8 MiB) on N nodes of k ranks placed
node by node: the most rounds, and the most bytes any one rank sends to other nodes and inside
its node; the time is `nbcc simulate`'s for 8 B and 8 MiB with 1 Gbit/s links between nodes
(α = 20 µs, β = 8 ns/B, γ = 0.1 ns/B) and shared memory inside them (α_node = 1 µs,
β_node = 0.2 ns/B).

| schedule | N × k | rounds | sent between nodes (MiB) | sent inside a node (MiB) | time, 8 B | time, 8 MiB |
|---|---|---|---|---|---|---|
NODES
for name in allreduce_nodes allreduce_nodes_small bcast_nodes reduce_nodes; do
    for t in "4 4" "16 8"; do
        set -- $t
        n=$1 k=$2
        set -- $(measure_nodes "$name" "$n" "$k")
        awk -v name="$name" -v n="$n" -v k="$k" -v r="$1" -v x="$2" -v i="$3" -v t8="$(simulate_nodes "$name" "$n" "$k" 8)" \
            -v tn="$(simulate_nodes "$name" "$n" "$k" $N)" \
            'BEGIN { printf "| %s | %d × %d | %d | %.2f | %.2f | %s | %s |\n", name, n, k, r, x / 1048576, i / 1048576, t8, tn }'
    done
done
cat <<'NODES'

`allreduce_nodes` (commutative ops) is for large vectors. It cuts the vector into L slices, L
the smallest node's size; member i < L of each node gathers slice i from the others of its
node and reduces it, the owners of slice i on all nodes run a ring allreduce on it (so every
rank of a node uses the network at once), and each owner sends its finished slice to the others
of its node. Between nodes a rank sends 2(N-1)/N·n/L, in 2(N-1) messages.

`allreduce_nodes_small` (commutative ops) is for small vectors. Each node reduces to its leader
along a binomial tree, the leaders run a dissemination allreduce, which takes ceil(log2 N)
steps for any N (when N is not a power of two a leader also keeps the sum of its last few
nodes, which goes along with its message in some steps), and each leader broadcasts the result
along a binomial tree. Only one rank a node sends between nodes, n bytes a step (2n in a few
steps when N is not a power of two).

`bcast_nodes` sends the root's data along a binomial tree of the leaders rooted at the root,
then along a binomial tree inside each node. `reduce_nodes` (commutative ops) reduces along a
binomial tree inside each node to its leader, then along a binomial tree of the leaders to the
root. Both cross the network ceil(log2 N) times along their deepest path, once a node.

`barrier_nodes` (a dissemination barrier among the leaders), and the header lines of
`bcast_nodes` and `reduce_nodes`, are in the table below.

`allreduce_nodes_stage` (commutative ops, up to 64 KiB) is the runtime's shared program on
ranks of several nodes ([hierarchical.md](hierarchical.md)): inside each node the ranks hand
their vectors to the leader through their shared stages and take the result back from the
leader's, with a flag each way and no message; the leaders run a recursive doubling allreduce.
NODES

cat <<'OTHER'

## The other collectives

Every other schedule's header comment says where its algorithm comes from, then its
preconditions, rounds, bytes sent per rank and α-β-γ cost (n and count as that header defines
them: a block, or the whole vector); `nbcc dump` shows what it compiles to. Those lines, as the
headers give them:

| collective | schedule | order | requires, rounds, bytes sent, cost |
|---|---|---|---|
OTHER
"$NBCC" list | awk 'NR > 1 && $2 != "allreduce" && $2 != "allreduce_multi" && $2 != "(block)" { print $1, $2, $3 }' |
    while read -r name coll order; do
        file=$(grep -l "^schedule $name " schedules/*.nbs | head -n 1)
        # the header block just above the schedule, from "Requires:" (else "Rounds:") on
        text=$(awk -v s="$name" '
            /^#/ { sub(/^# ?/, ""); block = block " " $0; next }
            $1 == "schedule" && $2 == s { print block; exit }
            { block = "" }' "$file" |
            awk '{ i = index($0, "Requires:"); if (!i) i = index($0, "Rounds:"); print substr($0, i) }' |
            sed 's/|/\\|/g')
        echo "| $coll | \`$name\` | $order | $text |"
    done
