#!/bin/bash
# Two hosts: the driver in one network namespace, external workers in
# another, joined by a veth pair (10.77.0.1 <-> 10.77.0.2).
. "$(dirname "$0")/lib.bash"
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
a=rlrt-a-$$; b=rlrt-b-$$
ip netns add $a 2>/dev/null || skip "ip netns add not permitted here"
cleanup() { ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$d"; }
d=$(tmpdir)
trap cleanup EXIT
ip netns add $b || skip "second namespace not permitted"
ip link add va$$ type veth peer name vb$$ || skip "veth not permitted"
ip link set va$$ netns $a && ip link set vb$$ netns $b || fail "move veth"
ip -n $a addr add 10.77.0.1/24 dev va$$ && ip -n $a link set va$$ up && ip -n $a link set lo up
ip -n $b addr add 10.77.0.2/24 dev vb$$ && ip -n $b link set vb$$ up && ip -n $b link set lo up
cat >"$d/cluster.yaml" <<YAML
driver: {bind: 10.77.0.1, address: 10.77.0.1, port: 5599}
heartbeat: {interval_s: 0.5, liveness: 3}
external_wait_timeout_s: 20
nodes:
  - {name: host-b, address: 10.77.0.2, launch: external}
roles:
  actor: {count: 2, node: host-b}
  reward: {count: 1, node: host-b}
YAML
ip netns exec $a "$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    selftest.payload_mb=2 >"$d/driver.log" 2>&1 &
dpid=$!
pids=""
for w in "actor 0" "actor 1" "reward 0"; do
    set -- $w
    ip netns exec $b "$BIN/rl-worker" --role $1 --rank $2 --driver tcp://10.77.0.1:5599 \
        --node host-b >"$d/$1$2.log" 2>&1 &
    pids="$pids $!"
done
wait $dpid
rc=$?
tail -15 "$d/driver.log"
[ $rc = 0 ] || fail "driver exited $rc"
grep -q "selftest: [0-9]* passed, 0 failed" "$d/driver.log" || fail "selftest failed"
for p in $pids; do wait $p || fail "a worker exited non-zero"; done
