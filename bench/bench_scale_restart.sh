#!/bin/bash
# bench_scale_restart.sh — a driver restart with N external workers running
# (part of `make bench-scale`). The real LM job (examples/arith_grpo.yaml
# from a random init, checkpoints every 2 steps) runs with its actor and
# rollout started by the driver and N reward ranks started here as external
# workers (`launch: external`, as systemd would). At step 4 the driver is
# killed with SIGKILL; a new `rl-driver --resume` starts at once. It prints
#   bench: restart_workers = N
#   bench: restart_alive = A           external workers alive when the new driver is ready
#   bench: restart_rejoin_s = S        new driver's start → all workers READY
#   bench: restart_first_step_s = S    new driver's start → its first step done
#   bench: restart_resumed_step = K    the step the new driver logged first
#   bench: restart_finished = 1        the resumed job ran to its last step
# usage: bench_scale_restart.sh OUT   (RL_BENCH_SCALE_RESTART_N, default 256)
# The new driver runs under the job id of the run it resumes (rl-driver
# writes it to OUTPUT_DIR/job_id), so the workers rejoin: they claim their
# free slots again.
set -u
BUILD=${BUILD:-build}
out=${1:?usage: bench_scale_restart.sh OUT}
n=${RL_BENCH_SCALE_RESTART_N:-256}
steps=8
port=5563
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlrt-bench-restart.XXXXXX")
pids=()
dpid=""
cleanup() {
    [ -n "$dpid" ] && kill -9 $dpid 2>/dev/null
    for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
cat >"$tmp/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: $port}
heartbeat: {interval_s: 1.0, liveness: 3}
restart: {max_restarts: 2, backoff_s: 1.0, backoff_max_s: 2.0}
external_wait_timeout_s: 120
nodes:
  - {name: local, address: 127.0.0.1, launch: local}
  - {name: ext, address: 127.0.0.1, launch: external}
roles:
  rollout: {count: 1, node: local}
  actor: {count: 2, node: local}
  reward: {count: $n, node: ext}
YAML
for r in $(seq 0 $((n - 1))); do
    "$BUILD/bin/rl-worker" --role reward --rank $r --node ext --driver tcp://127.0.0.1:$port \
        --give-up-s 120 --log-level error >>"$tmp/workers.log" 2>&1 &
    pids+=($!)
done
drv() { # log, extra args
    local log=$1
    shift
    "$BUILD/bin/rl-driver" --cluster "$tmp/cluster.yaml" --config examples/arith_grpo.yaml \
        model.init_from= trainer.total_steps=$steps trainer.val_every=0 trainer.save_every=2 \
        trainer.output_dir="$tmp/run" "$@" >"$log" 2>&1 &
    dpid=$!
}
# wait until the log has a line matching $2 (at most $3 s); 0 when it has
wait_for() {
    local t0=$SECONDS
    while ! grep -q "$2" "$1" 2>/dev/null; do
        [ $((SECONDS - t0)) -ge "$3" ] && return 1
        kill -0 $dpid 2>/dev/null || return 1
        sleep 0.05
    done
}
drv "$tmp/d1.log"
if ! wait_for "$tmp/d1.log" "driver INFO step 4 |" 300; then
    tail -20 "$tmp/d1.log"
    echo "bench_scale_restart: the first driver did not reach step 4"
    exit 1
fi
kill -9 $dpid
wait $dpid 2>/dev/null
# RL_BENCH_SCALE_RESTART_FORGET_ID=1: the new driver runs under a new job id
# (as before the id was kept): the workers are refused and exit
[ "${RL_BENCH_SCALE_RESTART_FORGET_ID:-0}" = 1 ] && rm -f "$tmp/run/job_id"
t0=$(now)
drv "$tmp/d2.log" --resume
ok=1
wait_for "$tmp/d2.log" "all workers ready" 300 || ok=0
t_ready=$(now)
alive=0
for p in "${pids[@]}"; do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done
wait_for "$tmp/d2.log" "driver INFO step [0-9]* |" 300 || ok=0
t_step=$(now)
wait $dpid
rc=$?
dpid=""
first=$(grep -o "driver INFO step [0-9]* |" "$tmp/d2.log" | head -1 | awk '{print $4}')
finished=0
[ $rc = 0 ] && grep -q "driver INFO step $steps |" "$tmp/d2.log" && finished=1
if [ $ok = 0 ] || [ $finished = 0 ]; then
    tail -25 "$tmp/d2.log"
    echo "bench_scale_restart: the resumed driver exited $rc"
fi
{
    echo "bench: restart_workers = $n"
    echo "bench: restart_alive = $alive"
    [ $ok = 1 ] && echo "bench: restart_rejoin_s = $(echo "$t_ready - $t0" | bc)"
    [ $ok = 1 ] && echo "bench: restart_first_step_s = $(echo "$t_step - $t0" | bc)"
    echo "bench: restart_resumed_step = ${first:-0}"
    echo "bench: restart_finished = $finished"
} | tee "$out"
# the workers leave on the job's SHUTDOWN; the trap kills any that did not
for i in $(seq 1 100); do
    left=0
    for p in "${pids[@]}"; do kill -0 $p 2>/dev/null && left=$((left + 1)); done
    [ $left = 0 ] && break
    sleep 0.1
done
[ $finished = 1 ]
