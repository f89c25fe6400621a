#!/bin/bash
# Node relays (cluster.yaml `relay: true`, rlrt/runtime/relay.h):
#  1. the selftest recipe with two of three nodes behind relays: every
#     dispatch mode, collective, channel and failure check passes; the
#     driver starts one relay per relayed node and each worker there
#     connects to its relay; the relays held replies (they coalesced), and
#     stop after their workers, all exiting 0, nothing left running;
#  2. a peer that makes up a relay identity naming a node moves none of its
#     workers (only a HELLO with the slot's proof through a new relay does);
#  3. the same with security: the relays reach the driver over CurveZMQ,
#     their workers reach them over a Unix socket in a 0700 directory of the
#     job's user, removed when the relay stops;
#  4. rl-worker --relay usage errors exit 64 with the missing option named.
# (A relay killed mid-job: tests/integration/fault_recovery.py.)
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT

cat >"$d/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: 5555}
nodes:
  - {name: head, address: 127.0.0.1, launch: local}
  - {name: n1, address: 127.0.0.1, launch: local, relay: true}
  - {name: n2, address: 127.0.0.1, launch: local, relay: true, relay_hold_ms: 50}
roles:
  actor:
    count: 2
    placement: [{rank: 0, node: head}, {rank: 1, node: n1}]
  rollout: {count: 2, node: n1}
  reward: {count: 2, node: n2}
YAML
out=$("$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
      --bind 'tcp://127.0.0.1:*' selftest.payload_mb=4 2>&1)
rc=$?
echo "$out" | grep -v " INFO " | tail -30
[ $rc = 0 ] || { echo "$out" | tail -40; fail "rl-driver exited $rc"; }
echo "$out" | grep -Eq "selftest: [0-9]+ passed, 0 failed, 0 skipped" || fail "selftest summary missing"
for n in n1 n2; do
    echo "$out" | grep -q "started the relay of node $n (pid" || fail "no relay started for $n"
    echo "$out" | grep -Eq "relay for node $n: stopped \([0-9]+ down, [0-9]+ up in [0-9]+ sends, [1-9][0-9]* held, 0 dropped\)" ||
        fail "the relay of $n did not stop cleanly after holding replies"
done
echo "$out" | grep -q "started the relay of node head" && fail "a relay for a node without relay: true"
n=$(echo "$out" | grep -Ec "(actor|rollout|reward)/[0-9] \(pid [0-9]+\) exited with status 0")
[ "$n" = 6 ] || fail "expected 6 workers to exit 0, saw $n"
# the relayed workers were given the relay's endpoint, the others the driver's
echo "$out" | grep -q "relay for node n1: workers on ipc://@rlrt-" || fail "relay n1's endpoint"
pgrep -f -- "--relay --driver" >/dev/null && fail "a relay is left running"

# a peer that makes up a relay identity naming node n1 (a heartbeat and
# garbage "from" reward/0 behind it) moves nobody: only a worker's HELLO
# that proves its token through a new relay of its node says that relay
# was started again
"$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    --bind 'tcp://127.0.0.1:*' selftest.payload_mb=1 selftest.rounds=3 >"$d/fake.log" 2>&1 &
dpid=$!
ep=""
for _ in $(seq 200); do
    rp=$(pgrep -P $dpid -f -- "--relay --driver" | head -1)
    [ -n "$rp" ] && ep=$(tr '\0' ' ' </proc/$rp/cmdline | grep -Eo -- '--driver [^ ]+' | cut -d' ' -f2)
    [ -n "$ep" ] && grep -q "running selftest" "$d/fake.log" && break
    sleep 0.05
done
[ -n "$ep" ] || { cat "$d/fake.log"; fail "no relay of the driver found"; }
/usr/bin/python3 - "$ep" <<'PY' || fail "the made-up relay could not send"
import sys, time, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.ROUTING_ID, b"\x01relay:n1:4242.dead\x01")
s.setsockopt(zmq.LINGER, 1000)
s.connect(sys.argv[1])
heartbeat = bytes([0x08, 2, 0x82, 0x01, 0x00])  # protocol 2, an empty Heartbeat
for _ in range(5):
    s.send_multipart([b"reward/0#1.1", heartbeat])
    s.send_multipart([b"rollout/1#2.1", b"\xff\xff garbage"])
    time.sleep(0.05)
s.close()
ctx.term()
PY
wait $dpid
rc=$?
[ $rc = 0 ] || { tail -30 "$d/fake.log"; fail "the job with a made-up relay around exited $rc"; }
grep -q "its relay was started again\|reconnected" "$d/fake.log" &&
    { grep "started again\|reconnected" "$d/fake.log" | head; fail "a made-up relay identity moved workers"; }
grep -Eq "selftest: [0-9]+ passed, 0 failed, 0 skipped" "$d/fake.log" || fail "selftest with a made-up relay"

# with security: the relays reach the driver over CurveZMQ with the worker
# certificate, their workers reach them over a Unix socket in a 0700
# directory of the job's user (and keep CurveZMQ on their channels)
"$BIN/rl-driver" keygen "$d/keys" driver worker >/dev/null || fail "keygen"
mkdir -p "$d/keys/authorized" && cp "$d/keys/worker.cert" "$d/keys/authorized/"
{ echo "security: {driver_cert: keys/driver.cert_secret, worker_cert: $d/keys/worker.cert,"
  echo "           authorized_keys: keys/authorized}"; cat "$d/cluster.yaml"; } >"$d/secure.yaml"
"$BIN/rl-driver" --cluster "$d/secure.yaml" --config examples/selftest.yaml \
    --bind 'tcp://127.0.0.1:*' selftest.payload_mb=1 >"$d/secure.log" 2>&1 &
dpid=$!
perm=""
for _ in $(seq 200); do
    dir=$(grep -o "its workers connect to ipc:///tmp/rlrt-[0-9a-f]*-n1/relay" "$d/secure.log" |
          head -1 | sed 's|.*ipc://||; s|/relay$||')
    [ -n "$dir" ] && [ -d "$dir" ] && { perm=$(stat -c '%a %U' "$dir"); break; }
    sleep 0.05
done
wait $dpid
rc=$?
out=$(cat "$d/secure.log")
[ $rc = 0 ] || { echo "$out" | tail -40; fail "the secure job through relays exited $rc"; }
echo "$out" | grep -Eq "selftest: [0-9]+ passed, 0 failed, 0 skipped" || fail "secure selftest summary"
[ "$perm" = "700 $(id -un)" ] || fail "the relay's socket directory is '$perm', not 700 $(id -un)"
[ -e "$dir" ] && fail "the relay left $dir behind"
echo "$out" | grep -Eq "relay for node n2: stopped \([0-9]+ down, [0-9]+ up in [0-9]+ sends, [0-9]+ held, 0 dropped\)" ||
    fail "the secure relay of n2 did not stop cleanly"

# usage errors
"$BIN/rl-worker" --relay --driver tcp://127.0.0.1:1 --node n1 >"$d/u.txt" 2>&1
rc=$?
[ $rc = 64 ] || fail "rl-worker --relay without --bind exited $rc"
grep -q -- "--relay needs --driver, --bind and --node" "$d/u.txt" || fail "usage: $(cat "$d/u.txt")"
"$BIN/rl-worker" --relay --driver tcp://127.0.0.1:1 --bind ipc://@x --node 'a b' >"$d/u.txt" 2>&1
rc=$?
[ $rc = 64 ] || fail "rl-worker --relay with a bad node name exited $rc"
grep -q "node name 'a b'" "$d/u.txt" || fail "bad node name: $(cat "$d/u.txt")"
"$BIN/rl-worker" --role reward --driver tcp://127.0.0.1:1 --bind ipc://@x >"$d/u.txt" 2>&1
[ $? = 64 ] || fail "--bind without --relay accepted"
echo "ok: selftest through two relays, plain and with security; relays stop after their workers; usage errors"
