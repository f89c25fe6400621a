#!/bin/bash
# /healthz, /healthz/ready and Prometheus /metrics of the driver and of each
# worker, read with a real HTTP client (curl) during a running job; a worker
# killed with -9 shows up as a restart in the driver's metrics.
. "$(dirname "$0")/lib.bash"
command -v curl >/dev/null || skip "curl not installed (deploy/install-deps.sh installs it)"
d=$(tmpdir)
dpid=
trap 'kill -9 $dpid 2>/dev/null; rm -rf "$d"' EXIT
# fixed ports below the kernel's ephemeral range, where the wildcard binds of
# the job's own channels (and other programs' connections) never land
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
base=$((10000 + $$ % (lo > 12000 ? lo - 11000 : 1000)))
cat >"$d/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: $base}
heartbeat: {interval_s: 0.5, liveness: 3}
restart: {max_restarts: 3, backoff_s: 0.2}
http: {bind: 127.0.0.1, driver_port: $((base + 1)), worker_port: $((base + 10))}
nodes: [{name: local, address: 127.0.0.1, launch: local}]
roles:
  actor: {count: 2, node: local}
  rollout: {count: 1, node: local}
  reward: {count: 2, node: local}
YAML
"$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    selftest.rounds=100000 selftest.payload_mb=1 >"$d/log" 2>&1 &
dpid=$!
for _ in $(seq 100); do grep -q "running selftest" "$d/log" && break; sleep 0.1; done
grep -q "running selftest" "$d/log" || { cat "$d/log"; fail "driver did not start"; }
get() { curl -s -S --max-time 5 -o "$d/body" -w '%{http_code} %{content_type}' "$@"; }
D=http://127.0.0.1:$((base + 1))

out=$(get $D/healthz) || fail "driver /healthz: curl failed"
[ "${out%% *}" = 200 ] || { cat "$d/body"; fail "driver /healthz: $out"; }
case "$out" in *application/json*) ;; *) fail "driver /healthz is not JSON: $out" ;; esac
grep -q '"ready": true' "$d/body" || fail "driver /healthz: not ready: $(cat "$d/body")"
grep -q '"slot": "actor/1", "state": "ready"' "$d/body" || fail "no actor/1 in $(cat "$d/body")"
grep -q '"last_heartbeat_s": ' "$d/body" || fail "no last_heartbeat_s"
out=$(get $D/healthz/ready); [ "${out%% *}" = 200 ] || fail "driver /healthz/ready: $out"

sleep 1
out=$(get $D/metrics); [ "${out%% *}" = 200 ] || fail "driver /metrics: $out"
case "$out" in *text/plain*) ;; *) fail "driver /metrics content type: $out" ;; esac
for m in 'rlrt_calls_total{role="driver",rank="0"}' 'rlrt_received_bytes_total' \
         'rlrt_sent_bytes_total' 'rlrt_restarts_total' 'rlrt_queue_depth' \
         'rlrt_worker_ready{role="actor",rank="1"} 1' 'rlrt_worker_calls_total{role="reward",rank="0"}' \
         '# TYPE rlrt_calls_total counter' 'rlrt_weight_version' 'rlrt_step_seconds'; do
    grep -qF "$m" "$d/body" || { cat "$d/body"; fail "driver /metrics lacks $m"; }
done
calls=$(awk '/^rlrt_calls_total\{/ { print $2 }' "$d/body")
awk -v c="$calls" 'BEGIN { exit !(c > 0) }' || fail "driver rlrt_calls_total is $calls"

# each worker on worker_port + its slot index (cluster order: actor 0, 1, rollout, reward 0, 1)
for i in 0 1 2 3 4; do
    W=http://127.0.0.1:$((base + 10 + i))
    out=$(get $W/healthz) || fail "worker $i /healthz: curl failed"
    [ "${out%% *}" = 200 ] || { cat "$d/body"; fail "worker $i /healthz: $out"; }
    grep -q '"ready": true' "$d/body" || fail "worker $i not ready: $(cat "$d/body")"
    out=$(get $W/metrics); [ "${out%% *}" = 200 ] || fail "worker $i /metrics: $out"
    for m in rlrt_calls_total rlrt_call_errors_total rlrt_received_bytes_total rlrt_sent_bytes_total \
             rlrt_handler_seconds_total rlrt_queue_depth rlrt_weight_version rlrt_last_heartbeat_seconds \
             rlrt_aborts_total; do
        grep -q "^$m{role=" "$d/body" || { cat "$d/body"; fail "worker $i /metrics lacks $m"; }
    done
done
grep -q '^rlrt_calls_total{role="actor",rank="0"} [1-9]' <(curl -s $W/metrics --max-time 5; curl -s http://127.0.0.1:$((base + 10))/metrics --max-time 5) \
    || fail "actor/0 counted no calls"
# the weight channel's version shows on the actor (sender) once a round ran
curl -s --max-time 5 http://127.0.0.1:$((base + 10))/metrics | grep -q '^rlrt_weight_version{role="actor",rank="0"} [1-9]' \
    || fail "actor/0 reports no weight version"

# read-only: other methods and unknown paths
out=$(get -X POST $D/metrics); [ "${out%% *}" = 405 ] || fail "POST answered $out"
out=$(get $D/nope); [ "${out%% *}" = 404 ] || fail "unknown path answered $out"

# kill -9 a worker: the restart and the recovery show in the driver's
# metrics (the selftest reports no steps: its recovery ends when every
# worker is ready again) and /healthz
get $D/metrics >/dev/null
grep -q '^rlrt_recoveries_total{role="driver",rank="0"} 0' "$d/body" || fail "recoveries before a kill"
victim=$(pgrep -P $dpid -f -- '--role reward --rank 1')
[ -n "$victim" ] || fail "no reward/1 process"
kill -9 $victim
ok=0
for _ in $(seq 100); do
    get $D/metrics >/dev/null
    if grep -q '^rlrt_worker_restarts_total{role="reward",rank="1"} 1' "$d/body" &&
       grep -q '^rlrt_worker_ready{role="reward",rank="1"} 1' "$d/body" &&
       grep -q '^rlrt_recoveries_total{role="driver",rank="0"} 1' "$d/body"; then ok=1; break; fi
    sleep 0.1
done
[ $ok = 1 ] || { cat "$d/body"; fail "the restart of reward/1 does not show in /metrics"; }
for m in '# TYPE rlrt_recovery_seconds_total counter' '# TYPE rlrt_recovery_seconds gauge' \
         'rlrt_recovering{role="driver",rank="0"} 0'; do
    grep -qF "$m" "$d/body" || { cat "$d/body"; fail "driver /metrics lacks $m"; }
done
awk '/^rlrt_recovery_seconds\{/ { exit !($2 > 0 && $2 < 30) }' "$d/body" || fail "recovery seconds: $(grep ^rlrt_recovery_seconds "$d/body")"
get $D/healthz >/dev/null
grep -q '"status": "ok", .*"recovery": null, "recoveries": 1, "last_recovery_s": ' "$d/body" ||
    fail "driver /healthz after the recovery: $(cat "$d/body")"
kill -TERM $dpid
wait $dpid
rc=$?
dpid=
# the selftest was interrupted (SIGTERM): exit 0, or the failed call of the
# killed worker may have ended the run first
grep -q "interrupted: shutting down cleanly\|recipe selftest failed" "$d/log" || { tail -20 "$d/log"; fail "driver exit $rc"; }
exit 0
