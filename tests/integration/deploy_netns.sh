#!/bin/bash
# Two hosts in network namespaces (10.78.0.1 <-> 10.78.0.2): the driver in
# one with CurveZMQ and HTTP on; its `launch: external` workers in the other,
# each started by its own unit-like script (deploy/bare/rl-worker-unit with
# an environment file, as rl-worker@.service does). The selftest (dispatch,
# collectives, weight and data channels, all CURVE) passes across the hosts,
# the driver's /healthz answers from the workers' host, and a plaintext peer
# from that host is refused.
. "$(dirname "$0")/lib.bash"
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
command -v curl >/dev/null || skip "curl not installed"
a=rlrt-da-$$; b=rlrt-db-$$
ip netns add $a 2>/dev/null || skip "ip netns add not permitted here"
d=$(tmpdir)
units=""
cleanup() {
    for u in $units; do kill -TERM $u 2>/dev/null; done
    ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$d"
}
trap cleanup EXIT
ip netns add $b || skip "second namespace not permitted"
ip link add xa$$ type veth peer name xb$$ || skip "veth not permitted"
ip link set xa$$ netns $a && ip link set xb$$ netns $b || fail "move veth"
ip -n $a addr add 10.78.0.1/24 dev xa$$ && ip -n $a link set xa$$ up && ip -n $a link set lo up
ip -n $b addr add 10.78.0.2/24 dev xb$$ && ip -n $b link set xb$$ up && ip -n $b link set lo up
"$BIN/rl-driver" keygen "$d/keys" driver worker >/dev/null || fail "keygen"
mkdir -p "$d/keys/authorized" && cp "$d/keys/worker.cert" "$d/keys/authorized/"
cat >"$d/cluster.yaml" <<YAML
driver: {bind: 10.78.0.1, address: 10.78.0.1, port: 5598}
heartbeat: {interval_s: 0.5, liveness: 3}
external_wait_timeout_s: 30
http: {bind: 10.78.0.1, driver_port: 9198}
security: {driver_cert: keys/driver.cert_secret, authorized_keys: keys/authorized}
nodes:
  - {name: host-b, address: 10.78.0.2, launch: external}
roles:
  actor: {count: 2, node: host-b}
  rollout: {count: 1, node: host-b}
  reward: {count: 1, node: host-b}
YAML
cat >"$d/worker.env" <<ENV
RL_DRIVER=tcp://10.78.0.1:5598
RL_WORKER_CERT=$d/keys/worker.cert
RL_DRIVER_KEY=$d/keys/driver.cert
RL_WORKER_BIN=$(cd "$BIN" && pwd)/rl-worker
RL_UNIT_RESTARTS=0
ENV
ip netns exec $a "$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    selftest.payload_mb=2 selftest.sleep_ms=1500 >"$d/driver.log" 2>&1 &
dpid=$!
for w in actor-0 actor-1 rollout-0 reward-0; do
    ip netns exec $b deploy/bare/rl-worker-unit "$d/worker.env" $w --give-up-s 20 \
        >"$d/$w.log" 2>&1 &
    units="$units $!"
done
for _ in $(seq 150); do grep -q "running selftest" "$d/driver.log" && break; sleep 0.1; done
grep -q "running selftest" "$d/driver.log" || { cat "$d/driver.log"; fail "the job did not start"; }
ip netns exec $b curl -s --max-time 5 http://10.78.0.1:9198/healthz >"$d/health" ||
    fail "the driver's /healthz did not answer from the workers' host"
grep -q '"status": "ok"' "$d/health" || fail "/healthz: $(cat "$d/health")"
# a plaintext peer on the workers' host gets nothing, and is logged
ip netns exec $b "$BIN/rl-worker" --role reward --rank 0 --driver tcp://10.78.0.1:5598 \
    --give-up-s 1 >"$d/plain.log" 2>&1
[ $? = 2 ] || fail "a plaintext worker was not kept out (exit $?)"
wait $dpid
rc=$?
tail -8 "$d/driver.log"
[ $rc = 0 ] || fail "driver exited $rc"
grep -q "selftest: [0-9]* passed, 0 failed" "$d/driver.log" || fail "selftest failed"
grep -q "CurveZMQ" "$d/actor-0.log" || fail "the worker did not use CurveZMQ"
for u in $units; do wait $u || fail "a worker unit exited non-zero"; done
units=""
exit 0
