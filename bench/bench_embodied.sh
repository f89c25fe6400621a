#!/bin/bash
# bench_embodied.sh — `make bench-embodied`: the embodied RL methods of the
# libero_rl recipe from one warm start on LIBERO-Object, each evaluated with
# the greedy ODE policy over BENCH_EMBODIED_EPISODES_PER_TASK x 10 tasks
# (RLinf's protocol: 50 x 10 = 500 episodes) before and after
# BENCH_EMBODIED_STEPS training steps; writes docs/RESULTS.md between
# <!-- bench-embodied:begin --> and <!-- bench-embodied:end --> (only that
# section):
#   bench: embodied_warmstart_success        the warm start's success
#   bench: embodied_<method>_success         after training
#   bench: embodied_<method>_gain_points     (after − before) × 100
#   bench: embodied_<method>_wall_s          training + evaluation wall time
# with per-task tables, the success curve over wall time (every
# BENCH_EMBODIED_EVAL_EVERY steps) and where a step's time goes.
# Methods: BENCH_EMBODIED_METHODS (default: anchor sil flowsar flowsar_mse
# flowipo grpo ppo). Every method carries the demonstration anchor of its
# example (algorithm.demo_coef); `anchor` is the control: the same updates
# with the method's own loss off (algorithm.rl_coef 0, the sil example), so
# a method's gain over `anchor` is what the RL signal adds. GIFs of the
# evaluations: BENCH_EMBODIED_GIFS episodes per task (default 0: they cost
# about a minute per evaluation). BENCH_EMBODIED_KEEP=1 reuses the finished
# runs of the output directory (those with a .wall file).
# Needs the scenes (make libero-data) and the warm start
# (runs/libero_warmstart/final; RL_RUN=libero make run makes it).
set -eu
BUILD=${BUILD:-build}
STEPS=${BENCH_EMBODIED_STEPS:-20}
PER=${BENCH_EMBODIED_EPISODES_PER_TASK:-50}
EVERY=${BENCH_EMBODIED_EVAL_EVERY:-5}
METHODS=${BENCH_EMBODIED_METHODS:-anchor sil flowsar flowsar_mse flowipo grpo ppo}
GIFS=${BENCH_EMBODIED_GIFS:-0}
KEEP=${BENCH_EMBODIED_KEEP:-0}  # 1: reuse the finished runs (their .wall file exists)
WS=${BENCH_EMBODIED_WARMSTART:-runs/libero_warmstart/final}
DATA=${LIBERO_DATA:-$BUILD/libero-data}
[ -f "$DATA/manifest.json" ] || { echo "bench-embodied: no LIBERO-Object data in $DATA; run: make libero-data"; exit 2; }
[ -f "$WS/model.safetensors" ] || { echo "bench-embodied: no warm start in $WS; run: RL_RUN=libero make run"; exit 2; }
out=${BENCH_EMBODIED_OUT:-runs/bench_embodied}
mkdir -p "$out"
# the machine and its load, for the page (a step's time depends on what else runs);
# BENCH_EMBODIED_KEEP=1 keeps the start of the run it continues
[ "$KEEP" = 1 ] && [ -f "$out/env.txt" ] || {
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"
for m in $METHODS; do
    case $m in
    anchor) cfg=examples/libero_object_sil.yaml; extra=(algorithm.rl_coef=0) ;;
    sil) cfg=examples/libero_object_sil.yaml; extra=() ;;
    flowsar) cfg=examples/libero_object_flowsar.yaml; extra=() ;;
    flowsar_mse) cfg=examples/libero_object_flowsar.yaml; extra=(algorithm.flow_sar_loss_variant=mse_branch) ;;
    flowipo) cfg=examples/libero_object_flowipo.yaml; extra=() ;;
    grpo) cfg=examples/libero_object_grpo.yaml; extra=() ;;
    ppo) cfg=examples/libero_object_ppo.yaml; extra=() ;;
    *) echo "bench-embodied: unknown method '$m'"; exit 2 ;;
    esac
    [ "$KEEP" = 1 ] && [ -f "$out/$m.wall" ] && continue
    rm -rf "$out/$m" "$out/$m.wall"
    t0=$(date +%s.%N)
    "$BUILD/bin/rl-driver" --cluster examples/cluster-libero-rl.yaml --config "$cfg" --bind 'tcp://127.0.0.1:*' \
        env.data_dir="$DATA" model.init_from="$WS" trainer.total_steps="$STEPS" trainer.val_every="$EVERY" \
        trainer.save_every=0 eval.episodes_per_task="$PER" eval.gif_episodes_per_task="$GIFS" \
        trainer.output_dir="$out/$m" "${extra[@]}" \
        >"$out/$m.log" 2>&1 || { tail -20 "$out/$m.log"; echo "bench-embodied: $m failed"; exit 1; }
    python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0" >"$out/$m.wall"
done
sed -i '/^loadavg_end=/d' "$out/env.txt"
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"
section=$(mktemp)
python3 - "$out" "$STEPS" "$PER" "$METHODS" "$DATA/manifest.json" >"$section" <<'PY'
import json, os, sys
out, steps, per, methods, manifest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5]
langs = [t["language"] for t in json.load(open(manifest))["tasks"]]
rows = {}
for m in methods:
    r = [json.loads(l) for l in open(os.path.join(out, m, "metrics.jsonl"))]
    rows[m] = r
before = rows[methods[0]][0]
print("<!-- bench-embodied:begin -->")
print("## Embodied RL on LIBERO-Object (`make bench-embodied`)")
print()
n = int(before["eval/episodes"])
env = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(out, "env.txt")) if "=" in l)
print("Produced by `BENCH_EMBODIED_STEPS=%d BENCH_EMBODIED_EPISODES_PER_TASK=%d BENCH_EMBODIED_EVAL_EVERY=%s "
      "BENCH_EMBODIED_METHODS=\"%s\" make bench-embodied` on %s at commit `%s`: each method from the same warm start (`%s`), "
      "%d training steps, greedy ODE evaluation over %d episodes (%d initial states per task) at step 0 and "
      "every few steps; %d CPU cores (%s), 1/5/15-minute load average %s at the start and %s at the end "
      "(step times depend on what else runs), seed 1 (one seed per method). The initial noise of an "
      "evaluation episode is drawn per env, so a method whose envs map to tasks differently (GRPO's "
      "env.group_size) starts from a slightly different step-0 number on the same initial states." %
      (steps, per, os.environ.get("BENCH_EMBODIED_EVAL_EVERY", "5"), " ".join(methods),
       env.get("date_utc", "?"), env.get("commit", "?"),
       os.environ.get("BENCH_EMBODIED_WARMSTART", "runs/libero_warmstart/final"),
       steps, n, per, os.cpu_count(), env.get("cpu", "?"), env.get("loadavg_start", "?"),
       env.get("loadavg_end", "?")))
# which weights acted in the evaluations: the driver's log line says so
ema = [m for m in methods if "evaluation (EMA weights)" in open(os.path.join(out, m + ".log")).read()]
print()
if ema == methods:
    print("Every evaluation acts with the EMA of the weights (`eval.ema_decay` of the example jobs, "
          "docs/ARCHITECTURE.md \"Evaluating an EMA of the weights\"), not the live weights.")
elif ema:
    print("Evaluations act with the EMA of the weights for %s, with the live weights for the others." %
          ", ".join(ema))
else:
    print("Every evaluation acts with the live weights (`eval.ema_decay` 0).")
print()
print("| method | success before | success after | gain (points) | best | gain over `anchor` (points) | wall s |")
print("|---|---|---|---|---|---|---|")
print("bench: embodied_warmstart_success = %.4f" % before["eval/success_rate"], file=sys.stderr)
ctrl = None
if "anchor" in rows:
    ctrl = [x for x in rows["anchor"] if "eval/success_rate" in x][-1]["eval/success_rate"]
gains, best_all = {}, 0.0
for m in methods:
    r = [x for x in rows[m] if "eval/success_rate" in x]
    b, a = r[0]["eval/success_rate"], r[-1]["eval/success_rate"]
    best = max(x["eval/success_rate"] for x in r)
    best_all = max(best_all, a)
    gains[m] = 100 * (a - b)
    wall = float(open(os.path.join(out, m + ".wall")).read())
    over = "%+.1f" % (100 * (a - ctrl)) if ctrl is not None and m != "anchor" else "-"
    print("| %s | %.3f | %.3f | %+.1f | %.3f | %s | %.0f |" % (m, b, a, 100 * (a - b), best, over, wall))
    print("bench: embodied_%s_success = %.4f" % (m, a), file=sys.stderr)
    print("bench: embodied_%s_gain_points = %.1f" % (m, 100 * (a - b)), file=sys.stderr)
    print("bench: embodied_%s_wall_s = %.0f" % (m, wall), file=sys.stderr)
print()
rl = [m for m in methods if m != "anchor"]
print("Targets (issue 12): every method at least +20 points over the warm start within 60 minutes: %s "
      "(%s); the best method at 95%% or more: %s (best final %.3f). `anchor` is the control: the same "
      "updates with the method's own loss off, so only the gain over it is the RL signal's. The evaluation "
      "of %d episodes has a standard error of about %.0f points." %
      ("met" if rl and all(gains[m] >= 20 for m in rl) else "**not met**",
       ", ".join("%s %+.1f" % (m, gains[m]) for m in rl), "met" if best_all >= 0.95 else "**not met**",
       best_all, n, 100 * (0.25 / max(n, 1)) ** 0.5))
print()
print("Success per task (before → after):")
print()
print("| task | " + " | ".join(methods) + " |")
print("|---|" + "---|" * len(methods))
for k, lang in enumerate(langs):
    key = "eval/success_task_%d" % k
    cells = []
    for m in methods:
        r = [x for x in rows[m] if key in x]
        cells.append("%.2f → %.2f" % (r[0][key], r[-1][key]) if r else "-")
    print("| %d %s | %s |" % (k, lang, " | ".join(cells)))
print()
print("Success over training (step: success, cumulative step seconds):")
print()
for m in methods:
    t, pts = 0.0, []
    for x in rows[m]:
        t += x.get("timing_s/step", 0.0) + x.get("timing_s/eval", 0.0)
        if "eval/success_rate" in x:
            pts.append("%d: %.3f (%.0f s)" % (x["step"], x["eval/success_rate"], t))
    print("- %s: %s" % (m, ", ".join(pts)))
print()
print("Where a training step's time goes (mean seconds per step):")
print()
phases = ["rollout", "annotate", "credit", "update_actor", "sync_weights", "step"]
print("| method | " + " | ".join(phases) + " |")
print("|---|" + "---|" * len(phases))
for m in methods:
    r = [x for x in rows[m] if x["step"] > 0]
    cells = ["%.2f" % (sum(x.get("timing_s/" + p, 0) for x in r) / max(len(r), 1)) for p in phases]
    print("| %s | %s |" % (m, " | ".join(cells)))
print("<!-- bench-embodied:end -->")
PY
res=docs/RESULTS.md
if grep -q "<!-- bench-embodied:begin -->" "$res"; then
    python3 - "$res" "$section" <<'PY'
import sys
res, sec = sys.argv[1], open(sys.argv[2]).read()
text = open(res).read()
a = text.index("<!-- bench-embodied:begin -->")
b = text.index("<!-- bench-embodied:end -->") + len("<!-- bench-embodied:end -->")
open(res, "w").write(text[:a] + sec.rstrip("\n") + text[b:])
PY
else
    { echo; cat "$section"; } >>"$res"
fi
rm -f "$section"
echo "wrote the bench-embodied section of $res"
