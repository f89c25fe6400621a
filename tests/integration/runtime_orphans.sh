#!/bin/bash
# kill -9 of the driver: its workers leave at once (a parent-death signal;
# the heartbeat liveness plus heartbeat.give_up_s is the bound for workers
# the driver did not spawn), and none of them takes a slot of a new driver
# started at once on the same ports (workers carry their job id in HELLO; the
# new driver refuses them and they exit 1). Each worker serves HTTP on its
# own port: the new driver's workers get those ports without spending a
# restart (the orphans close their listeners first, and a worker whose port
# is still held waits for it instead of exiting).
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'kill -9 $dpid $d2 2>/dev/null; rm -rf "$d"' EXIT
dpid=; d2=
# fixed ports below the kernel's ephemeral range (as runtime_http.sh)
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port=$((10000 + ($$ + 500) % (lo > 12000 ? lo - 11000 : 1000)))
cat >"$d/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: $port}
heartbeat: {interval_s: 0.5, liveness: 3, give_up_s: 1.5}
http: {bind: 127.0.0.1, driver_port: $((port + 1)), worker_port: $((port + 10))}
nodes: [{name: local, address: 127.0.0.1, launch: local}]
roles:
  actor: {count: 2, node: local}
  rollout: {count: 1, node: local}
  reward: {count: 2, node: local}
YAML
now() { awk '{ print $1 }' /proc/uptime; }
# start_job LOG: a long selftest; sets dpid and workers
start_job() {
    "$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
        selftest.rounds=100000 selftest.payload_mb=1 >"$1" 2>&1 &
    dpid=$!
    for _ in $(seq 100); do grep -q "running selftest" "$1" && break; sleep 0.1; done
    grep -q "running selftest" "$1" || { cat "$1"; fail "driver did not start"; }
    workers=$(pgrep -P $dpid | tr '\n' ' ')
    [ "$(echo $workers | wc -w)" = 5 ] || fail "expected 5 workers, got: $workers"
}
# wait_gone: seconds until every pid of $workers is gone (fails after 15 s)
wait_gone() {
    local t0 left
    t0=$(now)
    for _ in $(seq 300); do
        left=""
        for p in $workers; do
            kill -0 $p 2>/dev/null && [ "$(ps -o stat= -p $p | cut -c1)" != Z ] && left="$left $p"
        done
        [ -z "$left" ] && break
        sleep 0.05
    done
    [ -z "$left" ] || fail "orphaned workers still running 15 s after the driver died:$left"
    awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}

# 1. nobody takes over: the workers notice their driver died (the
#    parent-death signal) and leave; the bound is what the heartbeats alone
#    would take (0.5 s x 3 of silence, then give_up_s 1.5 s)
start_job "$d/log1"
kill -9 $dpid
gone=$(wait_gone)
echo "orphans: without a new driver the 5 workers left $gone s after kill -9 of theirs" \
     "(bound: liveness 1.5 s + give_up_s 1.5 s)"
awk -v g="$gone" 'BEGIN { exit !(g < 5.0) }' || fail "orphans took $gone s to leave (bound 5 s)"
grep -q "the driver (pid $dpid) is gone" "$d/log1" || fail "the workers did not say their driver died"

# 2. a new driver at once on the same port (an immediate --resume): the
#    orphans that reach it are refused for their job id and leave; every
#    slot of the new job goes to a fresh worker
start_job "$d/log2"
kill -9 $dpid
"$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    selftest.payload_mb=1 >"$d/log3" 2>&1 &
d2=$!
gone=$(wait_gone)
echo "orphans: with a new driver on the port the old workers left $gone s after kill -9"
wait $d2
rc=$?
tail -3 "$d/log3"
[ $rc = 0 ] || { tail -30 "$d/log3"; fail "the new driver exited $rc"; }
grep -q "selftest: [0-9]* passed, 0 failed" "$d/log3" || fail "the new driver's selftest failed"
grep "cannot serve HTTP" "$d/log3" && fail "a worker of the new driver could not serve HTTP"
grep -q "restarting" "$d/log3" && fail "the new driver restarted a worker (a slot or a port was taken)"
if grep -q "belongs to job" "$d/log3"; then
    grep -q "refused by the driver" "$d/log2" || fail "a refused orphan did not leave"
fi

# 3. an orphan the driver did not spawn (over ssh, or external) gets no
#    parent-death signal and holds its HTTP port until its heartbeats give
#    up: stand-in, a process that holds actor/0's port for 2 s. The new
#    worker waits for the port instead of exiting and spending a restart.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); print("held", flush=True); time.sleep(2)
' $((port + 10)) >"$d/hold" &
hold=$!
for _ in $(seq 50); do grep -q held "$d/hold" && break; sleep 0.1; done
grep -q held "$d/hold" || fail "could not hold port $((port + 10))"
start_job "$d/log4"
for _ in $(seq 200); do grep -q "is free now" "$d/log4" && break; sleep 0.1; done
wait $hold
kill -TERM $dpid
wait $dpid
grep "is free now" "$d/log4" || { tail -30 "$d/log4"; fail "actor/0 never served HTTP"; }
grep -q "waiting up to 30 s" "$d/log4" || fail "actor/0 did not wait for its held port"
grep -q "restarting" "$d/log4" && fail "a held port cost a restart"
exit 0
