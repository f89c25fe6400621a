#!/bin/bash
# The env role end to end (real processes, sockets and MuJoCo): rl-driver runs
# examples/libero_collect.yaml on examples/cluster-libero.yaml —
#  1. a missing data dir and a bad env key are clear errors (file, make
#     libero-data; job.yaml:line / override);
#  2. 20 expert episodes with pipeline_stage_num 2 and 1 give byte-identical
#     datasets (same seeds, same trajectories), in the documented format;
#  3. the eval job (chunks of 10) writes agent-view PNG strips;
#  4. the env worker killed mid-round is restarted by the driver, the round
#     is re-run and the dataset equals the undisturbed one.
. "$(dirname "$0")/lib.bash"
DATA=${LIBERO_DATA:-build/libero-data}
[ -f "$DATA/manifest.json" ] || skip "no LIBERO-Object data in $DATA; run: make libero-data"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
run() { "$BIN/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_collect.yaml \
        --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" "$@"; }

# 1. errors
out=$(run env.data_dir=/nonexistent/libero 2>&1); rc=$?
[ $rc != 0 ] || fail "a missing data dir did not fail the job"
echo "$out" | grep -q "override env.data_dir=/nonexistent/libero: env.data_dir: /nonexistent/libero: no such directory (the LIBERO-Object scenes: make libero-data)" ||
    { echo "$out" | tail -5; fail "the missing data dir is not named before the workers start"; }
echo "$out" | grep -q "ready (pid" && fail "workers started before the missing data dir was named"
# a directory that is there but holds no scenes: the env rank names the file
mkdir -p "$d/no_scenes"
out=$(run env.data_dir="$d/no_scenes" 2>&1); rc=$?
[ $rc != 0 ] || fail "a data dir without scenes did not fail the job"
echo "$out" | grep -q "$d/no_scenes/manifest.json.*make libero-data" ||
    { echo "$out" | tail -5; fail "the missing data error does not name the file and make libero-data"; }
out=$(run env.task_ids=abc 2>&1); rc=$?
[ $rc != 0 ] || fail "a bad env.task_ids did not fail"
echo "$out" | grep -q "override env.task_ids=abc: env.task_ids: expected task numbers" ||
    { echo "$out" | tail -3; fail "the env.task_ids error is not located"; }
out=$(run env.pipeline_stage_num=0 2>&1)
echo "$out" | grep -q "env.pipeline_stage_num: must be" || fail "env.pipeline_stage_num=0 not range-checked"

# 2. S = 2 and S = 1: identical datasets
for s in 2 1; do
    out=$(run collect.episodes=20 collect.output="$d/s$s" env.pipeline_stage_num=$s 2>&1) ||
        { echo "$out" | tail -20; fail "collect with pipeline_stage_num=$s failed"; }
done
echo "$out" | grep "round 1:"
cmp "$d/s1/demos.safetensors" "$d/s2/demos.safetensors" ||
    fail "pipeline_stage_num 1 and 2 gave different datasets"
"$PYTHON" - "$d/s2" <<'PY' || fail "the dataset is not in the documented format"
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/demos.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__")
assert meta["format"] == "rlrt-libero-demos-1", meta
E = h["episode/length"]["shape"][0]
S = h["actions"]["shape"][0]
assert E == 20, E
assert h["obs/proprio"]["shape"] == [S, 39] and h["obs/object"]["shape"] == [S, 98]
assert h["actions"]["shape"] == [S, 7] and h["episode/final_object"]["shape"] == [E, 98]
off = 8 + n
def arr(name, fmt, size):
    b, e = h[name]["data_offsets"]
    return struct.unpack("<%d%s" % ((e - b) // size, fmt), raw[off + b:off + e])
length, start, task = arr("episode/length", "q", 8), arr("episode/start", "q", 8), arr("episode/task_id", "q", 8)
succ = arr("episode/success", "B", 1)
assert sum(length) == S and start[0] == 0 and all(start[i + 1] == start[i] + length[i] for i in range(E - 1))
assert sorted(set(task)) == list(range(10)), task
assert len(json.loads(meta["languages"])) == 10
summary = json.load(open(d + "/dataset.json"))
assert summary["episodes"] == 20 and sum(succ) >= 19, (summary, succ)
print("dataset: %d episodes, %d steps, %d successes" % (E, S, sum(succ)))
PY

# agent-view frames for people (examples/libero_eval.yaml's settings); Mesa
# is not instrumented, so not in a sanitizer build
case "$BUILD" in
*san*) echo "frames: not checked in the sanitizer build (Mesa's renderer is not instrumented)" ;;
*)
    out=$("$BIN/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_eval.yaml \
          --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" collect.episodes=10 collect.output="$d/eval" \
          env.render_every=40 env.render_size=64 2>&1) || { echo "$out" | tail -20; fail "the eval job failed"; }
    png="$d/eval/frames/round_0000_envrank_0.png"
    [ -s "$png" ] || fail "the eval job wrote no frames"
    [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png is not a PNG"
    echo "eval with chunks of 10: $(echo "$out" | grep -o 'success [0-9.]*' | tail -1); frames: $png" ;;
esac

# 3. the env worker dies mid-round: restarted, the round re-run, same data
log="$d/kill.log"
run collect.episodes=40 collect.output="$d/kill" env.channel_timeout_s=5 >"$log" 2>&1 &
drv=$!
for _ in $(seq 1 200); do grep -q "round 1:" "$log" && break; sleep 0.1; done
grep -q "round 1:" "$log" || { kill $drv; cat "$log"; fail "the job did not get to round 2"; }
pid=$(grep -o "env/0 ready (pid [0-9]*" "$log" | head -1 | grep -o "[0-9]*$")
[ -n "$pid" ] || { kill $drv; fail "no env pid in the log"; }
sleep 0.3
kill -9 "$pid" || fail "cannot kill env/0 (pid $pid)"
wait $drv; rc=$?
tail -12 "$log"
[ $rc = 0 ] || fail "the job did not survive the env worker's death (exit $rc)"
grep -q "re-running the round" "$log" || fail "the round was not re-run"
run collect.episodes=40 collect.output="$d/clean" >/dev/null 2>&1 || fail "the clean run failed"
cmp "$d/kill/demos.safetensors" "$d/clean/demos.safetensors" ||
    fail "the re-run round gave different episodes than an undisturbed run"
echo "env worker killed in round 2: restarted, round re-run, dataset identical"
