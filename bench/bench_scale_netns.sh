#!/bin/bash
# bench_scale_netns.sh — the weight fan-out across emulated remote nodes
# (part of `make bench-scale`; never part of `make test`). Each node is a
# network namespace joined to a bridge by a veth pair whose both directions
# are limited by a token bucket (tc tbf) of RL_BENCH_SCALE_NETNS_MBIT Mbit/s
# (default 50): a NIC per node. The driver (bench/bench_scale.c) runs in a
# namespace of its own that holds the bridge (10.88.0.1); the actor is alone
# on node 0, so its link is the sender's NIC; receivers are 8 to a node
# (hops within a node go over the node's loopback, unlimited).
#   usage: bench_scale_netns.sh OUT   (bench_scale's output goes to OUT)
# Knobs: RL_BENCH_SCALE_NETNS_NS (default "1 32 256"), RL_BENCH_SCALE_NETNS_MBIT,
# RL_BENCH_SCALE_BUCKET_KIB (default 64 here), RL_BENCH_SCALE_FANOUT_MIB.
# Needs root and `ip netns`; without them it says so, writes
# "bench: netns_skipped = 1" to OUT and exits 0. Every namespace and
# process it made is removed on exit, failure or interruption.
set -u
BUILD=${BUILD:-build}
out=${1:?usage: bench_scale_netns.sh OUT}
skip() { echo "bench_scale_netns: skipped: $*"; echo "bench: netns_skipped = 1 ($*)" >"$out"; exit 0; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 (ip, tc) not installed"
ns_list=${RL_BENCH_SCALE_NETNS_NS:-"1 32 256"}
mbit=${RL_BENCH_SCALE_NETNS_MBIT:-50}
per=8
max=1
for n in $ns_list; do [ "$n" -gt "$max" ] && max=$n; done
nodes=$((2 + (max - 1) / per))
p=rls$$
made=()
cleanup() {
    for ns in "${made[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    for ns in "${made[@]}"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add $p-d 2>/dev/null || skip "ip netns add not permitted here"
made+=($p-d)
set -e
ip -n $p-d link set lo up
ip -n $p-d link add br0 type bridge
ip -n $p-d addr add 10.88.0.1/16 dev br0
ip -n $p-d link set br0 up
shape() { # namespace device
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate ${mbit}mbit burst 64kb latency 200ms
}
for k in $(seq 0 $((nodes - 1))); do
    ns=$p-$k
    ip netns add $ns
    made+=($ns)
    ip link add ${p}v$k type veth peer name ${p}h$k
    ip link set ${p}v$k netns $ns
    ip link set ${p}h$k netns $p-d
    ip -n $ns link set ${p}v$k name eth0
    ip -n $ns addr add 10.88.1.$((k + 1))/16 dev eth0
    ip -n $ns link set lo up
    ip -n $ns link set eth0 up
    ip -n $p-d link set ${p}h$k master br0
    ip -n $p-d link set ${p}h$k up
    shape $ns eth0         # the node's upload
    shape $p-d ${p}h$k     # its download
done
set +e
echo "bench_scale_netns: $nodes nodes (namespaces), links ${mbit} Mbit/s each way (tc tbf), $per receivers a node"
echo "bench: netns_link_mbit = $mbit" >"$out"
echo "bench: netns_nodes = $nodes" >>"$out"
# in the background, so that a signal to this script runs its trap at once
# (bash runs traps only between foreground commands)
ip netns exec $p-d env RL_BENCH_SCALE_NETNS=$p RL_BENCH_SCALE_PER_NODE=$per \
    RL_BENCH_SCALE_NS="$ns_list" RL_BENCH_SCALE_BUCKET_KIB=${RL_BENCH_SCALE_BUCKET_KIB:-64} \
    RL_BENCH_SCALE_IDLE_S=1 BUILD=$BUILD "$BUILD/bench/bench_scale" >"$out.raw" &
wait $!
rc=$?
sed 's/^bench: /bench: netns_/' "$out.raw" | tee -a "$out"
rm -f "$out.raw"
[ $rc = 0 ] || echo "bench_scale_netns: bench_scale exited $rc"
exit $rc
