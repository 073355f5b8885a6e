#!/bin/sh
# Several hosts on one machine: N network namespaces, each with its own address 10.77.0.(i+1)
# on a veth to a bridge in a "switch" namespace of its own (the root namespace is left alone),
# and an mpiexec whose ranks live in different namespaces and talk over TCP (UCX_TLS=tcp).
#
#   sh tests/hosts.sh [--hosts N] [--rate R] [--delay D] [--build DIR] [--bindir DIR] [-- COMMAND...]
#
# Without COMMAND it runs the checks (ok/FAIL lines): the ranks really are on separate hosts and
# use TCP, mpi_allreduce at p = 2, 4, 8 (8: two ranks a host on 4), mpi_topology with several
# ranks a host (2 + 2 host by host and round-robin, 3 + 2 + 1), mpi_total_reduce and the demo.
# With COMMAND it runs that in the root namespace with NBC_HOSTS_MPIEXEC naming an mpiexec for
# these hosts (a script: "$NBC_HOSTS_MPIEXEC" -n 4 -ppn 1 prog) and NBC_HOSTS the host list;
# NBC_HOSTS_SLOTS=3,2,1 in the script's environment gives the first hosts that many ranks each.
# --rate R (tc tbf, e.g. 1gbit) and --delay D (tc netem, e.g. 100us) limit each host's link,
# in each direction for the rate, on the way out for the delay (so one message sees D once).
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): without it, it prints "skip ..." and exits 0.
# Everything it created is removed on exit, also when interrupted. The only addresses any of
# it sends to are the 10.77.0.x it gave its own namespaces.
: "${MPIEXEC:=mpiexec.mpich}" # the MPI is named: plain mpiexec may be another one
hosts=4
rate=
delay=
BUILD=${BUILD:-build}
BINDIR=${BINDIR:-bin}
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --bindir) BINDIR=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: sh tests/hosts.sh [--hosts N] [--rate R] [--delay D] [--build DIR] [--bindir DIR] [-- COMMAND...]" >&2
       exit 2 ;;
    esac
done
case $hosts in '' | *[!0-9]*) echo "hosts.sh: --hosts wants a number" >&2; exit 2 ;; esac
if [ "$hosts" -lt 1 ] || [ "$hosts" -gt 200 ]; then echo "hosts.sh: --hosts must be 1..200" >&2; exit 2; fi

# Names unique to this run, so that runs side by side never meet (each has its own switch).
pre=nbc$$-
sw=${pre}sw
tmp=$(mktemp -d)
made= # namespaces created so far, for the cleanup

cleanup() {
    trap - EXIT INT TERM
    for ns in $made; do # stray ranks first: a namespace with processes in it lingers
        pids=$(ip netns pids "$ns" 2> /dev/null)
        [ -n "$pids" ] && kill -9 $pids 2> /dev/null
    done
    for ns in $made; do ip netns delete "$ns" 2> /dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skip() { # WHY: this machine cannot do it; not a failure of nbc
    echo "skip hosts: $1"
    exit 0
}

command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
command -v unshare > /dev/null || skip "no 'unshare' command (util-linux)"
ip netns add "$sw" 2> "$tmp/err" || skip "cannot create network namespaces (needs root, or CAP_SYS_ADMIN and CAP_NET_ADMIN): $(cat "$tmp/err")"
made=$sw
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up && ip -n "$sw" link set lo up ||
    skip "cannot create a bridge in a namespace"

# LINK: the limits on one side of a host's veth (the host's end carries the delay too).
limit() { # NS DEV WITH_DELAY
    parent=root
    if [ -n "$rate" ]; then # a bucket of 128 KiB holds a 64 KiB GSO packet with room to spare
        tc -n "$1" qdisc add dev "$2" root handle 1: tbf rate "$rate" burst 128kb latency 100ms || return 1
        parent="parent 1:1"
    fi
    if [ -n "$delay" ] && [ "$3" = 1 ]; then
        # shellcheck disable=SC2086
        tc -n "$1" qdisc add dev "$2" $parent handle 10: netem delay "$delay" limit 100000 || return 1
    fi
    return 0
}

list=
i=0
while [ "$i" -lt "$hosts" ]; do
    ns=$pre$i
    addr=10.77.0.$((i + 1))
    ip netns add "$ns" || skip "cannot create network namespace $ns"
    made="$made $ns"
    # the veth's host end is nbc0 in every host, so one UCX_NET_DEVICES fits them all
    ip -n "$sw" link add "h$i" type veth peer name nbc0 netns "$ns" &&
        ip -n "$sw" link set "h$i" master br0 && ip -n "$sw" link set "h$i" up &&
        ip -n "$ns" addr add "$addr/24" dev nbc0 && ip -n "$ns" link set nbc0 up && ip -n "$ns" link set lo up ||
        skip "cannot wire namespace $ns to the bridge"
    if ! limit "$ns" nbc0 1 2> "$tmp/err" || ! limit "$sw" "h$i" 0 2>> "$tmp/err"; then
        # the limits were asked for: without them the run would measure something else
        skip "cannot set --rate/--delay with tc (the kernel may lack sch_tbf or sch_netem): $(head -n 1 "$tmp/err")"
    fi
    list=${list:+$list,}$addr
    i=$((i + 1))
done

# The launcher hydra calls instead of ssh, as "launch -x HOST COMMAND": it enters the host's
# namespace and a UTS namespace of its own, so each host also has its own hostname.
cat > "$tmp/launch" << EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
n=\${host##*.}
exec ip netns exec "$pre\$((n - 1))" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "nbchost\$((n - 1))" "\$*"
EOF
# An mpiexec for these hosts. It runs in host 0, so that its control port is on the bridge too
# (-iface nbc0); AUTOFORK=0 launches host 0's ranks through the wrapper as well. MPICH's own
# shared memory is off (NOLOCAL) and UCX may use only TCP on nbc0, so that every message,
# even between two ranks of one host, goes through the network stack.
# NBC_HOSTS_SLOTS=3,2,1 (in its environment) gives the first hosts that many ranks each and
# leaves out the others: hydra's -hosts 10.77.0.1:3,10.77.0.2:2,10.77.0.3:1, which fills
# each host's slots in turn (and wraps round when -n is larger); -ppn overrides the counts.
cat > "$tmp/mpiexec" << EOF
#!/bin/sh
hosts=$list
if [ -n "\$NBC_HOSTS_SLOTS" ]; then
    hosts=\$(echo "\$NBC_HOSTS_SLOTS" | tr ',' '\\n' | awk '{ printf "%s10.77.0.%d:%s", (NR > 1 ? "," : ""), NR, \$1 }')
fi
exec ip netns exec "${pre}0" env HYDRA_LAUNCHER_AUTOFORK=0 MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp UCX_NET_DEVICES=nbc0 \\
    $MPIEXEC -launcher ssh -launcher-exec "$tmp/launch" -iface nbc0 -hosts "\$hosts" "\$@"
EOF
chmod +x "$tmp/launch" "$tmp/mpiexec"
NBC_HOSTS_MPIEXEC=$tmp/mpiexec
NBC_HOSTS=$list
export NBC_HOSTS_MPIEXEC NBC_HOSTS

# Commands run in the background and are waited for: a signal then interrupts the wait at once
# and the cleanup runs, instead of waiting for the command to end first.
if [ $# -gt 0 ]; then
    "$@" &
    wait $!
    exit $?
fi

tag="hosts=$hosts${rate:+ rate=$rate}${delay:+ delay=$delay}"
ok() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "FAIL $1${3:+: $3}"; fi
}
# through tests/tcp.sh: MPICH 4.0.2's MPI_Finalize may hang over TCP without its workaround
mpx() {
    BUILD=$BUILD UCX_NET_DEVICES=nbc0 sh "$(dirname "$0")/tcp.sh" "$NBC_HOSTS_MPIEXEC" "$@" &
    wait $!
}

# The ranks are where they should be: one a host, each with its host's address and name.
mpx -n "$hosts" -ppn 1 sh -c 'echo "$(hostname) $(ip -o -4 addr show nbc0 | awk "{ print \$4 }")"' > "$tmp/where" 2>&1
want=$(i=0; while [ "$i" -lt "$hosts" ]; do echo "nbchost$i 10.77.0.$((i + 1))/24"; i=$((i + 1)); done)
[ "$(sort "$tmp/where")" = "$(echo "$want" | sort)" ]
ok "$tag: one rank a host, each in its namespace with its own address and hostname" $? "$(head -c 300 "$tmp/where")"

# UCX reports the transports of each endpoint at UCX_LOG_LEVEL=info: only tcp on nbc0.
UCX_LOG_LEVEL=info mpx -n 2 -ppn 1 "$BUILD/tests/mpi_allreduce" > "$tmp/out" 2>&1
grep -q 'ep_cfg.*tag(tcp/nbc0)' "$tmp/out" && ! grep 'ep_cfg' "$tmp/out" | grep -v 'tcp/nbc0' | grep -q .
ok "$tag: UCX uses TCP on the hosts' link (ep_cfg tag(tcp/nbc0) only)" $? "$(grep ep_cfg "$tmp/out" | head -n 3)"

for p in 2 4 8; do
    ppn=$(((p + hosts - 1) / hosts))
    mpx -n "$p" -ppn "$ppn" "$BUILD/tests/mpi_allreduce" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    sed -n "s/^\(ok\|FAIL\) /\1 $tag p=$p: /p" "$tmp/out"
    grep -q '^ok ' "$tmp/out" && [ "$rc" -eq 0 ]
    ok "$tag p=$p: mpi_allreduce exits 0" $? "status $rc; $(tail -n 3 "$tmp/err")"
done

# Several ranks a host, placed host by host (-ppn 2), round-robin (-ppn 1, 4 ranks on 2 hosts)
# and unevenly (3 + 2 + 1): hydra puts each rank where it should be (its PMI_RANK and hostname),
# and mpi_topology, without NBC_NODE_MAP, learns that map from the hosts' names (exact results,
# the hierarchical schedules, shared memory inside each host; tests/mpi_topology.c).
placed() { # SLOTS PPN HOSTS: NBC_HOSTS_SLOTS=SLOTS, -ppn PPN (or none), rank r on host HOSTS[r]
    nh=$(echo "$1" | tr ',' '\n' | wc -l)
    [ "$nh" -le "$hosts" ] || return 0
    n=$(echo "$3" | wc -w)
    name="$tag: $n ranks on $nh hosts (slots $1${2:+, -ppn $2})"
    NBC_HOSTS_SLOTS=$1 mpx -n "$n" ${2:+-ppn "$2"} sh -c 'echo "$PMI_RANK $(hostname)"' > "$tmp/where" 2>&1
    want=$(r=0; for h in $3; do echo "$r nbchost$h"; r=$((r + 1)); done)
    [ "$(sort -n "$tmp/where")" = "$want" ]
    ok "$name: each rank on its host ($(echo "$3" | tr ' ' ','))" $? "$(sort -n "$tmp/where" | tr '\n' ' ' | head -c 300)"
    # shellcheck disable=SC2086
    NBC_HOSTS_SLOTS=$1 mpx -n "$n" ${2:+-ppn "$2"} "$BUILD/tests/mpi_topology" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    sed -n "s/^\(ok\|FAIL\) /\1 $name: /p" "$tmp/out"
    grep -q '^ok world: the node map is the environment' "$tmp/out" && [ "$rc" -eq 0 ]
    ok "$name: mpi_topology learns the hosts' map and exits 0" $? "status $rc; $(tail -n 3 "$tmp/err")"
}
placed 2,2 2 "0 0 1 1"
placed 1,1 1 "0 1 0 1"
placed 3,2,1 "" "0 0 0 1 1 2"

p=$((hosts < 4 ? hosts : 4))
mpx -n "$p" -ppn 1 "$BUILD/tests/mpi_total_reduce" --requests 200 --iterations 3 --bulk-mib 0 > "$tmp/out" 2> "$tmp/err"
rc=$?
sed -n "s/^\(ok\|FAIL\) /\1 $tag p=$p: mpi_total_reduce: /p" "$tmp/out"
grep -q '^ok ' "$tmp/out" && [ "$rc" -eq 0 ]
ok "$tag p=$p: mpi_total_reduce exits 0" $? "status $rc; $(tail -n 3 "$tmp/err")"

# the demo, one rank a host
mpx -n "$p" -ppn 1 "$BINDIR/overlap" > "$tmp/out" 2>&1
grep -q "^summary: $p ranks.* all verified OK" "$tmp/out"
ok "$tag p=$p: the demo (overlap) verifies its results" $? "$(tail -n 3 "$tmp/out")"
