#!/bin/bash
# GIFs of evaluation episodes, end to end (real processes, MuJoCo, EGL
# rendering on the driver; driver/recipes/embodied/libero_gif.h):
#  1. bad eval.gif_* values are located errors (job file line / override),
#     before any worker starts;
#  2. libero_rl (tiny: 2 tasks, 30 env steps, a random-initialised policy)
#     writes gifs/step_0 (before training) and gifs/step_1 (the last step),
#     one GIF per task named by its outcome, as many _success files as the
#     evaluation counted successes, each a GIF89a of the expected frames;
#  3. flow_warmstart writes gifs/warmstart the same way (two demonstrations
#     collected here, one training step).
# The GIFs are not drawn in a sanitizer build (Mesa is not instrumented):
# there only 1. runs.
. "$(dirname "$0")/lib.bash"
DATA=${LIBERO_DATA:-build/libero-data}
[ -f "$DATA/manifest.json" ] || skip "no LIBERO-Object data in $DATA; run: make libero-data"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
run() { "$BIN/rl-driver" --cluster examples/cluster-libero-rl.yaml --config examples/libero_object_flowsar.yaml \
        --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" model.init_from= env.total_num_envs=2 env.task_ids=0-1 \
        env.max_episode_steps=30 model.hidden_size=32 model.num_layers=1 eval.episodes_per_task=1 \
        actor.ppo_mini_batch_size=4 algorithm.demo_coef=0 eval.gif_every=8 eval.gif_size=64 "$@"; }

# 1. errors
out=$(run eval.gif_size=8 2>&1) && fail "eval.gif_size=8 ran"
echo "$out" | grep -q "override eval.gif_size=8: eval.gif_size: must be in \[16, 512\], got 8" ||
    { echo "$out" | tail -3; fail "the gif_size error is not located"; }
echo "$out" | grep -q "ready (pid" && fail "workers started before the config error"
sed 's/^eval:$/eval:\n  gif_episodes_per_task: 99/' examples/libero_object_flowsar.yaml >"$d/bad.yaml"
out=$("$BIN/rl-driver" --cluster examples/cluster-libero-rl.yaml --config "$d/bad.yaml" \
      --bind 'tcp://127.0.0.1:*' 2>&1) && fail "gif_episodes_per_task 99 ran"
line=$(grep -n "gif_episodes_per_task: 99" "$d/bad.yaml" | cut -d: -f1)
echo "$out" | grep -q "bad.yaml:$line:[0-9]*: eval.gif_episodes_per_task: must be in \[0, 50\], got 99" ||
    { echo "$out" | tail -3; fail "the gif_episodes_per_task error is not located at line $line"; }
case "$BUILD" in
*san*) echo "GIFs: not drawn in the sanitizer build (Mesa's renderer is not instrumented)"; exit 0 ;;
esac

# gifs DIR EPISODES...: DIR holds exactly one GIF per given "task init" pair,
# each a looping GIF89a whose frame count fits its episode, and the
# _success ones number $WANT_SUCCESS
gifs() {
    "$PYTHON" - "$@" <<'PY' || fail "GIFs in $1"
import os, re, sys
d, want_success, max_frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = sorted(os.listdir(d))
assert all(re.fullmatch(r"task\d+_init\d+_(success|fail)\.gif", n) for n in names), names
assert sorted(n.rsplit("_", 1)[0] for n in names) == sorted(sys.argv[4:]), (names, sys.argv[4:])
assert sum(n.endswith("_success.gif") for n in names) == want_success, (names, want_success)
for n in names:
    b = open(os.path.join(d, n), "rb").read()
    assert b[:6] == b"GIF89a" and b[-1:] == b"\x3b" and b"NETSCAPE2.0" in b, n
    assert int.from_bytes(b[6:8], "little") == 64 and int.from_bytes(b[8:10], "little") == 64, n
    # walk the blocks: count image descriptors
    i, frames = 13 + (3 << ((b[10] & 7) + 1) if b[10] & 0x80 else 0), 0
    while b[i] != 0x3B:
        if b[i] == 0x21:  # extension: label, sub-blocks
            i += 2
        else:  # image: descriptor, local colour table, LZW code size, sub-blocks
            assert b[i] == 0x2C, (n, i, b[i])
            frames += 1
            flags = b[i + 9]
            i += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0) + 1
        while b[i]:
            i += b[i] + 1
        i += 1
    assert 2 <= frames <= max_frames, (n, frames)
print(d, names)
PY
}
success() { # success METRICS STEP: successes counted by that step's evaluation (2 episodes)
    "$PYTHON" -c "
import json, sys
r = [json.loads(l) for l in open('$1') if json.loads(l)['step'] == $2 and '$3' in json.loads(l)][-1]
print(round(r['$3'] * 2))"
}

# 2. libero_rl: before (step 0) and after (the last step, 1)
run trainer.total_steps=1 trainer.val_every=1 trainer.output_dir="$d/rl" >"$d/rl.log" 2>&1 ||
    { tail -20 "$d/rl.log"; fail "libero_rl failed"; }
grep -q "eval GIFs: 2 episodes" "$d/rl.log" || { tail -20 "$d/rl.log"; fail "no GIFs logged"; }
for s in 0 1; do  # 30 steps at a frame every 8: 1 + 3 + 1 frames at most
    gifs "$d/rl/gifs/step_$s" "$(success "$d/rl/metrics.jsonl" $s eval/success_rate)" 5 task0_init0 task1_init0
done

# 3. flow_warmstart: gifs/warmstart
"$BIN/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_collect.yaml \
    --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" env.total_num_envs=2 env.task_ids=0-1 collect.episodes=2 \
    collect.output="$d/demos" trainer.output_dir="$d/demos" >"$d/demos.log" 2>&1 ||
    { tail -20 "$d/demos.log"; fail "collecting two demonstrations failed"; }
"$BIN/rl-driver" --cluster examples/cluster-libero-train.yaml --config examples/libero_warmstart.yaml \
    --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" env.total_num_envs=2 env.task_ids=0-1 env.max_episode_steps=30 \
    model.hidden_size=32 model.num_layers=1 warmstart.demos="$d/demos/demos.safetensors" warmstart.steps=1 \
    warmstart.batch_size=8 eval.episodes=2 eval.gif_every=8 eval.gif_size=64 trainer.output_dir="$d/ws" \
    >"$d/ws.log" 2>&1 || { tail -20 "$d/ws.log"; fail "flow_warmstart failed"; }
gifs "$d/ws/gifs/warmstart" "$(success "$d/ws/metrics.jsonl" 2 eval/success)" 5 task0_init0 task1_init0
out=$("$BIN/rl-driver" --cluster examples/cluster-libero-train.yaml --config examples/libero_warmstart.yaml \
    --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" env.auto_reset=true warmstart.demos="$d/demos/demos.safetensors" \
    trainer.output_dir="$d/ws2" 2>&1) && fail "a warm start with auto_reset ran"
echo "$out" | grep -q "override env.auto_reset=true: env.auto_reset: the warm start's evaluation runs one episode" ||
    { echo "$out" | tail -3; fail "the warm start's auto_reset not refused"; }
echo "eval GIFs: errors located; libero_rl before/after and flow_warmstart wrote one GIF per task"
