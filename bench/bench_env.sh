#!/bin/bash
# bench_env.sh — `make bench-env`: the LIBERO-Object env role, measured side
# by side in one run, written to docs/RESULTS.md between
# <!-- bench-env:begin --> and <!-- bench-env:end --> (only that section).
#   bench: env_steps_per_s_vs_libero_python   C env steps/s (1 core, state
#          mode, physics-only scene) over LIBERO's own Python env, same task,
#          initial state and actions (target >= 10)
#   bench: env_steps_per_s_over_physics_only  the C env's control steps per
#          CPU second over the same scene's physics alone: the controls the
#          env applied, replayed through 25 bare mj_step calls per control
#          step from the same initial state (the same trajectory, checked
#          bit for bit), the scene as LIBERO steps it (target >= 0.9)
#   bench: expert_success                     scripted expert, 10 x 50 initial
#          states, 240 steps (target >= 0.95), with a per-task table
#   bench: pipeline_overlap_gain              env + rollout throughput with
#          pipeline_stage_num 2 over 1, policy of fixed cost
#          (ENV_BENCH_POLICY_MS per call, default 100 ms: a batched π0-sized
#          inference), 16 envs, 10-action chunks, 240 steps
# Knobs: LIBERO_DATA, LIBERO_VENV, ENV_BENCH_POLICY_MS, ENV_BENCH_THREADS.
set -u
BUILD=${BUILD:-build}
DATA=${LIBERO_DATA:-build/libero-data}
VENV=${LIBERO_VENV:-build/venv-libero}
POLICY_MS=${ENV_BENCH_POLICY_MS:-100}
THREADS=${ENV_BENCH_THREADS:-2}
set -e
deploy/libero-data.sh "$DATA" "$VENV"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlrt-bench-env.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
kv() { grep "^$1 = " "$2" | head -1 | sed 's/.* = //'; }

echo "== C env (bench_env)"
"$BUILD/bench/bench_env" "$DATA" "$tmp/actions.f64" "$THREADS" | tee "$tmp/c.txt"
deb=""
if [ -f /usr/include/mujoco/mujoco.h ]; then
    echo "== C env on Debian's MuJoCo (make MUJOCO=debian)"
    make --no-print-directory MUJOCO=debian BUILD=build-mjdebian build-mjdebian/bench/bench_env >/dev/null
    build-mjdebian/bench/bench_env "$DATA" "$tmp/actions-deb.f64" 1 noexpert | tee "$tmp/deb.txt"
    deb=1
fi
echo "== LIBERO's Python env (same task, initial state and actions)"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MUJOCO_GL=disable \
    "$VENV/bin/python" bench/libero_python_speed.py "$tmp/actions.f64" 2>/dev/null |
    tee "$tmp/py.txt"

echo "== pipeline: env + rollout, pipeline_stage_num 1 vs 2 (policy ${POLICY_MS} ms per call)"
for s in 1 2; do
    "$BUILD/bin/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_collect.yaml \
        --bind 'tcp://127.0.0.1:*' --log-level warn env.data_dir="$DATA" env.total_num_envs=16 \
        env.num_action_chunks=10 env.pipeline_stage_num=$s env.terminate_on_success=false \
        env.policy_cost_ms="$POLICY_MS" collect.episodes=32 collect.output="$tmp/s$s" >"$tmp/s$s.log" 2>&1 ||
        { cat "$tmp/s$s.log"; exit 1; }
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('S=%s: %d env steps in %.2f s' % (sys.argv[2], d['steps'], d['wall_s']))" \
        "$tmp/s$s/dataset.json" $s | tee -a "$tmp/pipe.txt"
done
wall() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['wall_s'])" "$1"; }
steps() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$1"; }
w1=$(wall "$tmp/s1/dataset.json"); w2=$(wall "$tmp/s2/dataset.json")
n1=$(steps "$tmp/s1/dataset.json"); n2=$(steps "$tmp/s2/dataset.json")

c_sps=$(kv c_steps_per_s "$tmp/c.txt"); py_sps=$(kv py_steps_per_s "$tmp/py.txt")
ratio=$(python3 -c "print('%.1f' % ($c_sps / $py_sps))")
gain=$(python3 -c "print('%.2f' % (($n2 / $w2) / ($n1 / $w1)))")
succ=$(kv expert_success "$tmp/c.txt")
overp=$(kv env_over_physics_only "$tmp/c.txt")
[ "$(kv physics_only_same_trajectory "$tmp/c.txt")" = 1 ] ||
    { echo "bench_env: the bare physics replay left the env's trajectory"; exit 1; }
echo "bench: env_steps_per_s_vs_libero_python = $ratio"
echo "bench: env_steps_per_s_over_physics_only = $overp"
echo "bench: expert_success = $succ"
echo "bench: pipeline_overlap_gain = $gain"

# docs/RESULTS.md: rewrite only our section
section="$tmp/section.md"
{
    echo "<!-- bench-env:begin -->"
    echo "## LIBERO-Object env (\`make bench-env\`, bench/bench_env.sh)"
    echo
    echo "Produced by \`make bench-env\` on $(date -u +%Y-%m-%d), $(nproc) CPU cores (load average $(cut -d' ' -f1-3 /proc/loadavg) when it ended: other jobs shared the machine), MuJoCo $(python3 -c "import json;print(json.load(open('$DATA/manifest.json'))['mujoco_version'])") (the C env links the same wheel's library), the 10 LIBERO-Object tasks of \`make libero-data\`."
    echo
    echo "| measure | value |"
    echo "|---|---|"
    echo "| \`bench: env_steps_per_s_vs_libero_python\` | **$ratio** (target ≥ 10) |"
    echo "| \`bench: env_steps_per_s_over_physics_only\` | **$overp** (target ≥ 0.9) |"
    echo "| C env steps per CPU second (1 core, state, physics-only scene, task 0, 300 random actions); per wall second | $c_sps; $(kv c_steps_per_wall_s "$tmp/c.txt") |"
    echo "| physics alone, same trajectory (the env's controls replayed through bare \`mj_step\`s): physics steps per CPU second, as LIBERO's scene (sensors on) / as the env runs it (sensors off); env over the latter | $(kv physics_steps_per_s "$tmp/c.txt") / $(kv physics_steps_per_s_sensors_off "$tmp/c.txt"); $(kv env_over_physics_sensors_off "$tmp/c.txt") |"
    echo "| LIBERO Python env steps per CPU second (same task, state and actions, 1 thread); per wall second | $py_sps; $(kv py_steps_per_wall_s "$tmp/py.txt") |"
    echo "| \`bench: expert_success\` (10 × 50 initial states, 240 steps) | **$succ** (target ≥ 0.95) |"
    echo "| \`bench: pipeline_overlap_gain\` (S = 2 over S = 1, 16 envs, chunks of 10, policy ${POLICY_MS} ms/call) | **$gain** |"
    echo "| pipeline S = 1: env steps/s through env + rollout | $(python3 -c "print('%.0f' % ($n1 / $w1))") |"
    echo "| pipeline S = 2: env steps/s through env + rollout | $(python3 -c "print('%.0f' % ($n2 / $w2))") |"
    echo "| scene load, physics-only / full (task 0) | $(kv load_s_phys "$tmp/c.txt") s / $(kv load_s_full "$tmp/c.txt") s |"
    if [ -n "$deb" ]; then
        echo "| C env on Debian's libmujoco 2.2.2 (\`make MUJOCO=debian\`): steps per CPU second; load physics-only / full; resident per env | $(kv c_steps_per_s "$tmp/deb.txt"); $(kv load_s_phys "$tmp/deb.txt") s / $(kv load_s_full "$tmp/deb.txt") s; $(kv rss_mb_per_env "$tmp/deb.txt") MB |"
    else
        echo "| C env on Debian's libmujoco 2.2.2 | not measured: apt-get install libmujoco-dev |"
    fi
    echo "| LIBERO Python env load / reset + set_init_state | $(kv py_load_s "$tmp/py.txt") s / $(kv py_reset_s "$tmp/py.txt") s |"
    echo "| mjModel physics-only / full | $(kv model_mb_phys "$tmp/c.txt") MB / $(kv model_mb_full "$tmp/c.txt") MB (shared by the envs of a task) |"
    echo "| memory per env: resident (64 envs of one task); mjData reserved (virtual: robosuite's njmax/nconmax 5000) | $(kv rss_mb_per_env "$tmp/c.txt") MB; $(kv data_mb "$tmp/c.txt") MB |"
    echo
    echo "| task | expert successes / 50 |"
    echo "|---|---|"
    for k in 0 1 2 3 4 5 6 7 8 9; do
        echo "| $k $(python3 -c "import json;print(json.load(open('$DATA/manifest.json'))['tasks'][$k]['language'])") | $(kv expert_task_$k "$tmp/c.txt") |"
    done
    echo
    echo "The pipeline gain depends on the policy's cost against the env's: with S = 2 the env steps one"
    echo "half of its envs while the policy works on the other half, so the best case is 2 when the two"
    echo "costs are equal; the policy here is the scripted expert plus ${POLICY_MS} ms of busy time per call"
    echo "(the learned flow policy comes with the next issue). It needs two free cores: on a machine"
    echo "busy with other jobs the overlap has nowhere to run and the gain drops towards 1."
    echo "Steps/s are per CPU second of the stepping thread on both sides, so the ratio does not"
    echo "depend on what else runs. The C env runs at the speed of MuJoCo's physics alone"
    echo "(\`env_steps_per_s_over_physics_only\`; it can pass 1 because the env turns off the"
    echo "gripper force/torque sensors no observation reads), so the ratio over Python is bounded"
    echo "by the physics both sides share: raising it further means a faster MuJoCo step, which"
    echo "would change the trajectories."
    echo "<!-- bench-env:end -->"
} >"$section"
res=docs/RESULTS.md
if grep -q "<!-- bench-env:begin -->" "$res"; then
    python3 - "$res" "$section" <<'PY'
import sys
res, sec = sys.argv[1], open(sys.argv[2]).read()
text = open(res).read()
a = text.index("<!-- bench-env:begin -->")
b = text.index("<!-- bench-env:end -->") + len("<!-- bench-env:end -->")
open(res, "w").write(text[:a] + sec.rstrip("\n") + text[b:])
PY
else
    { echo; cat "$section"; } >>"$res"
fi
echo "wrote the bench-env section of $res"
