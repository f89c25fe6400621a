#!/bin/bash
# The libero_rl recipe end to end (real processes, MuJoCo, the flow_policy
# model) on a tiny setting (2 envs, 30 env steps, a random-initialised
# policy, so this checks the loop and its numbers, not learning; learning is
# `RL_RUN=libero make run` and `make bench-embodied`):
#  1. bad algorithm values are located errors (override / job file);
#  2. FlowSAR softplus_kl, mse_branch, label balance and the negative branch's
#     share (flow_sar_negative_coef): every seed metric present and
#     finite; loss = contrastive + kl_penalty (softplus_kl); weights of an
#     episode sum to 1, so the mean weight over rows is episodes / rows;
#  3. FlowIPO (SDE and ODE rollouts), flow-SDE GRPO and PPO: one step each
#     with their metrics (the first GRPO epoch re-scores the sampler's
#     chains: ratio ≈ 1; FlowIPO's first ODE actions are its reference's);
#  4. resume is exact: 2 steps + resume to 3 gives the metrics (the
#     cumulative rollout/env_steps_total included) and the weights (actor,
#     EMA reference and evaluation EMA) of 3 uninterrupted steps;
#  5. GRPO over env groups (env.group_size: the envs of a group share the
#     task and the initial state) with the demonstration anchor
#     (algorithm.demo_coef, on two expert demonstrations collected here);
#  6. evaluation with an EMA of the weights (eval.ema_decay);
#  7. the held-out split of initial states (env.heldout_init_states);
#  8. rollout/env_steps is the sum of the episodes' lengths: 30 control steps
#     for an episode that does not succeed, within its chunks' steps
#     otherwise; rollout/env_steps_total their running sum.
. "$(dirname "$0")/lib.bash"
DATA=${LIBERO_DATA:-build/libero-data}
[ -f "$DATA/manifest.json" ] || skip "no LIBERO-Object data in $DATA; run: make libero-data"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
run() { "$BIN/rl-driver" --cluster examples/cluster-libero-rl.yaml --config "$1" --bind 'tcp://127.0.0.1:*' \
        env.data_dir="$DATA" model.init_from= env.total_num_envs=2 env.group_size=1 env.task_ids=0-1 env.max_episode_steps=30 \
        algorithm.demo_coef=0 \
        model.hidden_size=32 model.num_layers=1 trainer.val_every=0 eval.episodes_per_task=1 \
        eval.gif_episodes_per_task=0 \
        actor.ppo_mini_batch_size=4 "${@:2}"; }

# 1. errors
out=$(run examples/libero_object_flowsar.yaml algorithm.loss_type=flow_nft 2>&1) && fail "a bad loss_type ran"
echo "$out" | grep -q "override algorithm.loss_type=flow_nft: algorithm.loss_type: expected flow_sar" ||
    { echo "$out" | tail -3; fail "the loss_type error is not located"; }
out=$(run examples/libero_object_flowsar.yaml actor.loss_agg_mode=seq-mean-token-mean 2>&1) &&
    fail "FlowSAR with seq-mean-token-mean ran"
echo "$out" | grep -q "actor.loss_agg_mode=seq-mean-token-mean: actor.loss_agg_mode: seq-mean-token-mean weights" ||
    { echo "$out" | tail -3; fail "the loss_agg_mode error is not located"; }
out=$(run examples/libero_object_grpo.yaml algorithm.adv_estimator=gae 2>&1) && fail "GRPO with gae ran"
echo "$out" | grep -q "algorithm.adv_estimator: loss_type actor has no value head" || fail "actor+gae not refused"
out=$(run examples/libero_object_grpo.yaml rollout.noise_level=0 2>&1) && fail "GRPO with noise level 0 ran"
echo "$out" | grep -q "override rollout.noise_level=0: rollout.noise_level: flow-SDE GRPO (algorithm.loss_type actor) scores the flow SDE's log-probs" ||
    { echo "$out" | tail -3; fail "noise_level 0 is not refused for GRPO before the run"; }
out=$(run examples/libero_object_flowsar.yaml env.auto_reset=true 2>&1) && fail "auto_reset ran"
echo "$out" | grep -q "env.auto_reset: libero_rl runs one episode per env" || fail "auto_reset not refused"
out=$(run examples/libero_object_flowsar.yaml algorithm.demo_coef=0.5 algorithm.demos= 2>&1) &&
    fail "demo_coef without demos ran"
echo "$out" | grep -q "algorithm.demos: algorithm.demo_coef is 0.5: name the demonstrations" ||
    { echo "$out" | tail -3; fail "demo_coef without demos not refused"; }
out=$(run examples/libero_object_grpo.yaml env.group_size=3 2>&1) && fail "a group_size not dividing the envs ran"
echo "$out" | grep -q "override env.group_size=3: env.group_size: must divide env.total_num_envs (2), got env.group_size 3" ||
    { echo "$out" | tail -3; fail "group_size not refused"; }
out=$(run examples/libero_object_grpo.yaml env.group_size=2 2>&1) && fail "groups not covering the tasks ran"
echo "$out" | grep -q "env.group_size: 2 envs (env.total_num_envs) in groups of 2 (env.group_size) make 1 groups: a multiple of the 2 tasks (env.task_ids) is needed" ||
    { echo "$out" | tail -3; fail "uneven groups not refused"; }

# 2.-3. one or two steps of every method
check() { # check DIR KEYS... : the last metrics line has every key, finite
    "$PYTHON" - "$@" <<'PY' || fail "metrics of $1"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
m = rows[-1]
for k in sys.argv[2:]:
    assert k in m and math.isfinite(m[k]), (k, m.get(k))
if "actor/flow_sar_contrastive" in m:
    s = m["actor/flow_sar_contrastive"] + m["actor/flow_sar_kl_penalty"]
    assert abs(m["actor/flow_sar_loss"] - s) <= 1e-6 * max(1, abs(s)), (m["actor/flow_sar_loss"], s)
if "actor/trained_rows" in m:  # flow_sar_credit success: w = 1 on the successes' rows only
    assert 0 <= m["actor/trained_rows"] <= m["rollout/rows"], m
    assert m["actor/trained_rows"] == 0 or (m["actor/flow_sar_weight_mean"] == 1
                                            and m["actor/flow_sar_success_ratio"] == 1), m
elif "actor/flow_sar_weight_mean" in m:
    want = m["env/episodes"] / m["rollout/rows"]  # every row is trained once per epoch
    assert abs(m["actor/flow_sar_weight_mean"] - want) < 1e-5, (m["actor/flow_sar_weight_mean"], want)
assert rows[0]["step"] == 0 and "eval/success_rate" in rows[0]
PY
}
SAR="actor/flow_sar_loss actor/flow_sar_E_pos actor/flow_sar_E_neg actor/flow_sar_weight_mean
     actor/flow_sar_energy_type actor/flow_sar_loss_variant actor/recon_error_mean actor/grad_norm"
run examples/libero_object_flowsar.yaml trainer.total_steps=2 trainer.output_dir="$d/sar" >"$d/sar.log" 2>&1 ||
    { tail -20 "$d/sar.log"; fail "FlowSAR failed"; }
check "$d/sar" $SAR actor/flow_sar_contrastive actor/flow_sar_kl_penalty
# 8. the env steps of the training rounds (2 envs, 30-step episodes, chunks of C actions)
C=$(sed -n 's/^ *num_action_chunks: *\([0-9]*\).*/\1/p' examples/libero_object_flowsar.yaml | head -1)
"$PYTHON" - "$d/sar" 30 "$C" <<'PY' || fail "rollout/env_steps is not the sum of the episodes' lengths"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
T, C = int(sys.argv[2]), int(sys.argv[3])
train = [r for r in rows if "env/episodes" in r]
assert [r["step"] for r in train] == [1, 2] and "rollout/env_steps" not in rows[0], rows
total = 0
for r in train:
    n, eps, s = r["rollout/env_steps"], r["env/episodes"], r["env/success_once"]
    chunks = r["env/episode_chunks"] * eps  # the policy calls taken: each ran 1..C control steps
    assert eps == 2 and chunks - eps < n / C <= chunks and n <= eps * T, (n, eps, chunks, C)
    if s == 0:  # no episode ended early: every one ran its 30 steps
        assert n == eps * T, (n, eps * T)
    total += n
    assert r["rollout/env_steps_total"] == total, (r["rollout/env_steps_total"], total)
PY
run examples/libero_object_flowsar.yaml trainer.total_steps=1 algorithm.flow_sar_loss_variant=mse_branch \
    algorithm.flow_sar_energy_type=sde trainer.output_dir="$d/sar_mse" >"$d/sm.log" 2>&1 ||
    { tail -20 "$d/sm.log"; fail "FlowSAR mse_branch failed"; }
check "$d/sar_mse" $SAR actor/flow_sar_success_ratio
# label balance (issue 43): the weights rescaled per label, their total (the episodes) kept
run examples/libero_object_flowsar.yaml trainer.total_steps=1 algorithm.flow_sar_label_balance=true \
    trainer.output_dir="$d/sar_bal" >"$d/sb.log" 2>&1 || { tail -20 "$d/sb.log"; fail "FlowSAR label balance failed"; }
check "$d/sar_bal" $SAR actor/flow_sar_contrastive
# the negative branch's share (issue 43): the failed episodes' weights x 0.5, the successes' kept
run examples/libero_object_flowsar.yaml trainer.total_steps=1 algorithm.flow_sar_negative_coef=0.5 \
    trainer.output_dir="$d/sar_neg" >"$d/sn.log" 2>&1 || { tail -20 "$d/sn.log"; fail "FlowSAR negative_coef failed"; }
"$PYTHON" - "$d/sar_neg" <<'PY' || fail "FlowSAR negative_coef: the failed episodes' weights are not halved"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][-1]
s = m["env/success_once"]  # every successful episode's weights sum to 1, every failed one's to 0.5
want = m["env/episodes"] * (s + 0.5 * (1 - s)) / m["rollout/rows"]
assert abs(m["actor/flow_sar_weight_mean"] - want) < 1e-5, (m["actor/flow_sar_weight_mean"], want)
PY
run examples/libero_object_sil.yaml trainer.total_steps=1 trainer.output_dir="$d/sil" \
    >"$d/sil.log" 2>&1 || { tail -20 "$d/sil.log"; fail "self-imitation (flow_sar_credit success) failed"; }
check "$d/sil" actor/trained_rows actor/recon_error_mean
run examples/libero_object_flowipo.yaml trainer.total_steps=1 trainer.output_dir="$d/ipo" >"$d/ipo.log" 2>&1 ||
    { tail -20 "$d/ipo.log"; fail "FlowIPO failed"; }
check "$d/ipo" actor/flow_ipo_loss actor/velocity_mse actor/mean_weight actor/delta_mean actor/flow_ipo_target_gap
# FlowIPO's ODE rollouts (seed 001; rollout.noise_level 0): at step 1 θ_ref is θ, so the
# reference actions from the same initial noise are the actions (δ ≈ 0), where the SDE's are not
run examples/libero_object_flowipo.yaml trainer.total_steps=1 rollout.noise_level=0 \
    trainer.output_dir="$d/ipo_ode" >"$d/ipo_ode.log" 2>&1 || { tail -20 "$d/ipo_ode.log"; fail "FlowIPO (ODE) failed"; }
check "$d/ipo_ode" actor/flow_ipo_loss actor/velocity_mse actor/mean_weight actor/delta_mean
"$PYTHON" -c "
import json; last=lambda p: [json.loads(l) for l in open(p + '/metrics.jsonl')][-1]
ode, sde = last('$d/ipo_ode')['actor/delta_mean'], last('$d/ipo')['actor/delta_mean']
assert ode < 1e-4 and sde > 1e-2, (ode, sde)" || fail "FlowIPO's ODE rollouts differ from the reference's"
run examples/libero_object_grpo.yaml trainer.total_steps=1 actor.ppo_epochs=1 trainer.output_dir="$d/grpo" \
    >"$d/grpo.log" 2>&1 || { tail -20 "$d/grpo.log"; fail "GRPO failed"; }
check "$d/grpo" actor/pg_loss actor/ppo_kl actor/ratio_mean actor/trained_steps critic/kept_groups
"$PYTHON" -c "
import json,sys; m=[json.loads(l) for l in open('$d/grpo/metrics.jsonl')][-1]
assert abs(m['actor/ratio_mean'] - 1) < 1e-3, m['actor/ratio_mean']" || fail "GRPO's first ratio is not 1"
run examples/libero_object_ppo.yaml trainer.total_steps=1 actor.ppo_epochs=1 trainer.output_dir="$d/ppo" \
    actor.loss_agg_mode=seq-mean-token-mean >"$d/ppo.log" 2>&1 || { tail -20 "$d/ppo.log"; fail "PPO failed"; }
check "$d/ppo" actor/pg_loss actor/ratio_mean critic/value_loss

# 4. resume
run examples/libero_object_flowsar.yaml trainer.total_steps=3 trainer.save_every=1 trainer.output_dir="$d/full" \
    eval.ema_decay=0.5 >"$d/full.log" 2>&1 || { tail -20 "$d/full.log"; fail "3 steps failed"; }
run examples/libero_object_flowsar.yaml trainer.total_steps=2 trainer.save_every=1 trainer.output_dir="$d/res" \
    eval.ema_decay=0.5 >"$d/r1.log" 2>&1 || { tail -20 "$d/r1.log"; fail "2 steps failed"; }
run examples/libero_object_flowsar.yaml trainer.total_steps=3 trainer.save_every=1 trainer.resume=true \
    eval.ema_decay=0.5 trainer.output_dir="$d/res" >"$d/r2.log" 2>&1 || { tail -20 "$d/r2.log"; fail "the resume failed"; }
for f in step_3/model.safetensors step_3.ema/model.safetensors step_3.ema/ema.json \
         step_3.eval_ema/model.safetensors step_3.eval_ema/ema.json; do
    cmp "$d/full/checkpoints/$f" "$d/res/checkpoints/$f" || fail "resume: $f differs"
done
"$PYTHON" - "$d/full" "$d/res" <<'PY' || fail "resumed metrics differ"
import json, sys
a, b = ([json.loads(l) for l in open(p + "/metrics.jsonl")] for p in sys.argv[1:])
assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2, 3], ([r["step"] for r in b])
# wall-clock measures: the step's phases, the CPU use, a weight sync's seconds and GB/s
strip = lambda r: {k: v for k, v in r.items()
                   if not k.startswith(("timing_s/", "perf/cpu_", "perf/weight_sync_s", "perf/weight_sync_gbps"))}
assert strip(a[-1]) == strip(b[-1]), (strip(a[-1]), strip(b[-1]))
# the checkpoint carried the run's env steps: the resumed step 3 counts steps 1 and 2 too
assert b[-1]["rollout/env_steps_total"] == sum(r["rollout/env_steps"] for r in b[1:]) > b[-1]["rollout/env_steps"], b
PY
# 6. evaluation with an EMA of the weights: θ_eval(2) = d·θ_eval(1) + (1 − d)·θ(2)
#    from the checkpoints, the evaluation says it used them, a bad decay is located
run examples/libero_object_flowsar.yaml trainer.total_steps=2 trainer.save_every=1 trainer.val_every=1 \
    eval.ema_decay=0.75 trainer.output_dir="$d/ema" >"$d/ema.log" 2>&1 || { tail -20 "$d/ema.log"; fail "eval EMA run failed"; }
grep -q "step 2 evaluation (EMA weights): success" "$d/ema.log" || { tail -5 "$d/ema.log"; fail "the evaluation did not use the EMA"; }
"$PYTHON" - "$d/ema/checkpoints" <<'PY' || fail "the evaluation EMA is not d·θ_eval + (1 − d)·θ"
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4),
                             b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}
c = sys.argv[1]
e1, e2, w2 = (load(c + p) for p in ("/step_1.eval_ema/model.safetensors", "/step_2.eval_ema/model.safetensors",
                                    "/step_2/model.safetensors"))
worst = moved = 0
for k in w2:
    for a, b, w in zip(e1[k], e2[k], w2[k]):
        worst = max(worst, abs(b - (0.75 * a + 0.25 * w)))
        moved = max(moved, abs(b - w))
assert worst < 1e-6 and moved > 1e-6, (worst, moved)
assert [json.load(open(c + "/step_%d.eval_ema/ema.json" % s))["count"] for s in (1, 2)] == [1, 2]
PY
out=$(run examples/libero_object_flowsar.yaml eval.ema_decay=1 2>&1) && fail "eval.ema_decay=1 ran"
echo "$out" | grep -q "override eval.ema_decay=1: eval.ema_decay" || { echo "$out" | tail -3; fail "ema_decay=1 not located"; }

# 5. groups and the demonstration anchor
"$BIN/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_collect.yaml \
    --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" env.total_num_envs=2 env.task_ids=0-1 collect.episodes=2 \
    collect.output="$d/demos" trainer.output_dir="$d/demos" >"$d/demos.log" 2>&1 ||
    { tail -20 "$d/demos.log"; fail "collecting two demonstrations failed"; }
run examples/libero_object_grpo.yaml trainer.total_steps=1 actor.ppo_epochs=1 env.total_num_envs=4 env.group_size=2 \
    algorithm.demo_coef=0.5 algorithm.demos="$d/demos/demos.safetensors" trainer.output_dir="$d/anchor" \
    >"$d/anchor.log" 2>&1 || { tail -20 "$d/anchor.log"; fail "GRPO with groups and the anchor failed"; }
check "$d/anchor" actor/pg_loss actor/demo_fm_loss critic/kept_groups
grep -q "demonstration anchor: 0.5 x flow matching on .* pairs of 2 demonstrations" "$d/anchor.log" ||
    fail "the anchor's demonstrations were not loaded"
"$PYTHON" -c "
import json; m=[json.loads(l) for l in open('$d/anchor/metrics.jsonl')][-1]
assert m['actor/demo_fm_loss'] > 0 and m['critic/kept_groups'] <= 2, m" || fail "anchor/group metrics"
# 7. held-out initial states (env.heldout_init_states H): training resets start from a task's
#    first 50 − H states, evaluation's from its last H (H = 48: training 0 and 1, evaluation
#    2, 3, …); H = 50 leaves none to train on
out=$(run examples/libero_object_flowsar.yaml env.heldout_init_states=50 2>&1) && fail "50 held-out states ran"
echo "$out" | grep -q "override env.heldout_init_states=50: env.heldout_init_states: must leave training states: task 0 has 50 initial states, 50 held out" ||
    { echo "$out" | tail -3; fail "heldout_init_states=50 not located"; }
"$BIN/rl-driver" --cluster examples/cluster-libero.yaml --config examples/libero_collect.yaml \
    --bind 'tcp://127.0.0.1:*' env.data_dir="$DATA" env.total_num_envs=2 env.task_ids=0-1 collect.episodes=6 \
    env.heldout_init_states=48 collect.output="$d/split" trainer.output_dir="$d/split" >"$d/split.log" 2>&1 ||
    { tail -20 "$d/split.log"; fail "collecting on the training split failed"; }
"$PYTHON" - "$d/split/demos.safetensors" <<'PY' || fail "a training reset started from a held-out state"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
b, e = h["episode/init_index"]["data_offsets"]
init = struct.unpack("<%dq" % ((e - b) // 8), raw[8 + n + b:8 + n + e])
assert len(init) == 6 and sorted(set(init)) == [0, 1], init  # 3 rounds cycle the 2 training states, 0 and 1
PY
case "$BUILD" in
*san*) echo "held-out evaluation GIFs: not checked in the sanitizer build (Mesa is not instrumented)" ;;
*)
    run examples/libero_object_flowsar.yaml trainer.total_steps=1 env.heldout_init_states=48 \
        eval.episodes_per_task=2 eval.gif_episodes_per_task=2 trainer.output_dir="$d/heldout" >"$d/heldout.log" 2>&1 ||
        { tail -20 "$d/heldout.log"; fail "the held-out evaluation failed"; }
    gifs=$(cd "$d/heldout/gifs/step_0" && ls | sed 's/_[a-z]*\.gif$//' | sort | tr '\n' ' ')
    [ "$gifs" = "task0_init2 task0_init3 task1_init2 task1_init3 " ] ||  # the first held-out ones
        fail "the held-out evaluation ran other initial states: $gifs" ;;
esac
echo "libero_rl: errors located, four methods ran with their metrics, env steps counted, resume exact, evaluation EMA, groups + anchor ran, held-out split"
