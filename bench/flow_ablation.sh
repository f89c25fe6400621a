#!/bin/bash
# flow_ablation.sh — short ablations of FlowSAR and FlowIPO against their
# own demonstration-only controls (the same job with algorithm.rl_coef 0) on
# LIBERO-Object, evaluated on held-out initial states (issue 43). Not a
# make target: a bounded, by-hand measurement whose table goes to
# docs/RESULTS.md ("FlowSAR and FlowIPO against their controls on held-out
# initial states").
#
# Every run: the variant's example job from the warm start ABL_WS, ABL_STEPS
# training steps (trainer.val_every = ABL_STEPS: greedy EMA evaluation at
# step 0 and at the end), env.heldout_init_states ABL_HELDOUT (training
# episodes start from a task's first 50 − H initial states, the evaluation
# from its last H only), eval.episodes_per_task ABL_PER, trainer.seed of
# ABL_SEEDS; each run is cut at ABL_TIMEOUT seconds (a cut run's row says
# so). Variants: ABL_VARIANTS, whitespace-separated
# `name=config[@key=value...]` (config: flowsar | flowipo, the example jobs
# examples/libero_object_<config>.yaml); a name ending in _ctl is a
# control, and every other variant's gain is read against the control of its
# config (<config>_ctl) on the same seed.
#
# Output: ABL_OUT/<name>-s<seed>/ (the runs), ABL_OUT/table.md (the table:
# the training split's rollout success over the last 10 steps (the
# selection criterion: env/success_once, SDE samples on the training
# states), success at step 0 and at the end on the held-out states (what is
# reported), gain over the control, and the means over the training steps
# of the diagnostics:
# actor/rl_grad_norm, actor/anchor_grad_norm, actor/rl_anchor_grad_cos,
# actor/credit_entropy, actor/flow_sar_E_pos / E_neg, actor/flow_sar_label_pos
# or actor/mean_weight) and the optimiser updates (actor/updates summed over
# the steps: also the anchor's mini-batches). ABL_KEEP=1 reuses finished runs (a .wall file).
set -eu
BUILD=${BUILD:-build}
STEPS=${ABL_STEPS:-30}
PER=${ABL_PER:-20}
H=${ABL_HELDOUT:-20}
SEEDS=${ABL_SEEDS:-1}
TIMEOUT=${ABL_TIMEOUT:-900}
KEEP=${ABL_KEEP:-0}
WS=${ABL_WS:-runs/libero_warmstart/final}
DATA=${LIBERO_DATA:-$BUILD/libero-data}
OUT=${ABL_OUT:-runs/flow_ablation}
VARIANTS=${ABL_VARIANTS:-"flowsar_ctl=flowsar@algorithm.rl_coef=0 flowsar=flowsar flowipo_ctl=flowipo@algorithm.rl_coef=0 flowipo=flowipo"}
[ -f "$DATA/manifest.json" ] || { echo "flow_ablation: no LIBERO-Object data in $DATA; run: make libero-data"; exit 2; }
[ -f "$WS/model.safetensors" ] || { echo "flow_ablation: no warm start in $WS"; exit 2; }
mkdir -p "$OUT"
for seed in $SEEDS; do
for v in $VARIANTS; do
    name=${v%%=*}; rest=${v#*=}
    IFS=@ read -r -a parts <<<"$rest"
    cfg=examples/libero_object_${parts[0]}.yaml
    [ -f "$cfg" ] || { echo "flow_ablation: no $cfg (variant $v)"; exit 2; }
    run=$OUT/$name-s$seed
    [ "$KEEP" = 1 ] && [ -f "$run.wall" ] && continue
    rm -rf "$run" "$run.wall"
    echo "== $name seed $seed: $cfg ${parts[*]:1}"
    t0=$(date +%s.%N)
    rc=0
    timeout "$TIMEOUT" "$BUILD/bin/rl-driver" --cluster examples/cluster-libero-rl.yaml --config "$cfg" \
        --bind 'tcp://127.0.0.1:*' --log-level warn env.data_dir="$DATA" model.init_from="$WS" \
        trainer.total_steps="$STEPS" trainer.val_every="$STEPS" trainer.save_every=0 trainer.seed="$seed" \
        eval.episodes_per_task="$PER" eval.gif_episodes_per_task=0 env.heldout_init_states="$H" \
        trainer.output_dir="$run" "${parts[@]:1}" >"$run.log" 2>&1 || rc=$?
    python3 -c "import sys; print('%.0f %s' % (float(sys.argv[1]) - float(sys.argv[2]), sys.argv[3]))" \
        "$(date +%s.%N)" "$t0" "$rc" >"$run.wall"
    [ "$rc" = 0 ] || echo "   $name seed $seed: exit $rc (124: cut at ${TIMEOUT} s)"
done
done
python3 - "$OUT" "$STEPS" "$PER" "$H" "$SEEDS" "$VARIANTS" <<'PY' | tee "$OUT/table.md"
import json, os, sys
out, steps, per, h, seeds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split(), sys.argv[6].split()
def load(name, seed):
    p = os.path.join(out, "%s-s%s" % (name, seed), "metrics.jsonl")
    rows = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    wall = open(os.path.join(out, "%s-s%s.wall" % (name, seed))).read().split()
    return rows, wall
def mean(rows, k):
    v = [r[k] for r in rows if k in r and r.get("step", 0) > 0]
    return sum(v) / len(v) if v else None
def f(x, fmt="%.2f"):
    return "–" if x is None else fmt % x
print("| variant | overrides | seed | training-split success, last 10 steps | held-out success step 0 | held-out success step %d | gain over control (points) | rl grad | anchor grad | cos | credit entropy | E⁺ / E⁻ | label pos / mean w | optimiser updates | wall s |" % steps)
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for seed in seeds:
    res = {}
    for v in variants:
        name, rest = v.split("=", 1)
        parts = rest.split("@")
        rows, wall = load(name, seed)
        ev = [r for r in rows if "eval/success_rate" in r]
        first = ev[0]["eval/success_rate"] if ev else None
        last = ev[-1]["eval/success_rate"] if len(ev) > 1 and ev[-1]["step"] == steps else None
        res[name] = (parts[0], last)
        ctl = res.get(parts[0] + "_ctl")
        gain = (last - ctl[1]) * 100 if (not name.endswith("_ctl") and ctl and ctl[1] is not None
                                         and last is not None) else None
        ep, en = mean(rows, "actor/flow_sar_E_pos"), mean(rows, "actor/flow_sar_E_neg")
        lab = mean(rows, "actor/flow_sar_label_pos")
        if lab is None:
            lab = mean(rows, "actor/mean_weight")
        cut = "" if wall[1] == "0" else " (exit %s)" % wall[1]
        tr = [r["env/success_once"] for r in rows if "env/success_once" in r][-10:]
        upd = sum(r["actor/updates"] for r in rows if "actor/updates" in r and r.get("step", 0) > 0)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s%s |" % (
            name, " ".join("`%s`" % p for p in parts[1:]) or "(example)", seed,
            f(sum(tr) / len(tr) if tr else None, "%.3f"), f(first, "%.3f"),
            f(last, "%.3f"), f(gain, "%+.1f"), f(mean(rows, "actor/rl_grad_norm")),
            f(mean(rows, "actor/anchor_grad_norm")), f(mean(rows, "actor/rl_anchor_grad_cos")),
            f(mean(rows, "actor/credit_entropy")),
            "–" if ep is None else "%.2f / %.2f" % (ep, en), f(lab), upd, wall[0], cut))
print()
print("%d steps, %s held-out initial states per task (env.heldout_init_states), %s greedy evaluation episodes per "
      "task on them; the training-split success is env/success_once of the training rollouts (SDE samples, 40 "
      "episodes a step on the other states), the selection criterion; diagnostics are means over the training "
      "steps; optimiser updates: the run's actor/updates summed over its steps (each also one mini-batch of "
      "demonstration pairs for the anchor)." % (steps, h, per))
PY
