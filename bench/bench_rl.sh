#!/bin/bash
# bench_rl.sh — `make bench-rl`: validation accuracy of the SFT warm start and
# after RL for each estimator, wall time per run, time per phase, written to
# docs/RESULTS.md (and printed as `bench:` lines). Not a test: it takes a
# while. Knobs (environment):
#   RL_BENCH_STEPS (default 60)       RL steps per estimator
#   RL_BENCH_SFT_STEPS (default 300)  warm-start steps (skipped if present)
#   RL_BENCH_ESTIMATORS               space-separated list of example names
#   RL_BENCH_DIR (default runs/bench) where runs go
#   RL_BENCH_EXTRA                    extra key=value overrides for the RL runs
set -u
BUILD=${BUILD:-build}
STEPS=${RL_BENCH_STEPS:-60}
SFT_STEPS=${RL_BENCH_SFT_STEPS:-300}
DIR=${RL_BENCH_DIR:-runs/bench}
EST=${RL_BENCH_ESTIMATORS:-"grpo rloo reinforce_pp pro_max pro_max_uniform aepo"}
EXTRA=${RL_BENCH_EXTRA:-}
D="$BUILD/bin/rl-driver --cluster examples/cluster-local.yaml --log-level warn"
mkdir -p "$DIR"
now() { date +%s.%N; }
val() { # val FILE STEP -> val/accuracy at that step (last if STEP = last)
    python3 - "$1" "$2" <<'PY' 2>/dev/null || grep -o '"val/accuracy": [0-9.e-]*' "$1" | tail -1 | cut -d' ' -f2
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"val/accuracy"' in l]
r = rows[-1] if sys.argv[2] == "last" else [x for x in rows if x["step"] == int(sys.argv[2])][0]
print(r["val/accuracy"])
PY
}
mean_key() { # mean of a key over all steps
    python3 - "$1" "$2" <<'PY'
import json, sys
v = [json.loads(l).get(sys.argv[2]) for l in open(sys.argv[1])]
v = [x for x in v if x is not None]
print("%.3f" % (sum(v) / len(v)) if v else "nan")
PY
}
if [ ! -f "$DIR/sft/final/model.safetensors" ]; then
    t0=$(now)
    $D --config examples/arith_sft.yaml trainer.output_dir="$DIR/sft" trainer.total_steps="$SFT_STEPS" || exit 1
    echo "bench: sft_wall_s = $(awk "BEGIN{printf \"%.0f\", $(now) - $t0}")"
fi
sft_acc=$(val "$DIR/sft/metrics.jsonl" last)
echo "bench: sft_val_accuracy = $sft_acc"
{
    echo "# Results"
    echo
    echo "Produced by \`make bench-rl\` (bench/bench_rl.sh) on $(date -u +%Y-%m-%d), $(nproc) CPU cores,"
    echo "\`examples/cluster-local.yaml\` (rollout ×1, actor ×2 FSDP, reward ×2), the built-in arithmetic"
    echo "task (levels 1–2), the default model of the LM recipes (2 layers, d=128, char tokenizer)."
    echo "Warm start: \`examples/arith_sft.yaml\`, $SFT_STEPS steps, validation accuracy **$sft_acc**."
    echo "RL: $STEPS steps per estimator from that warm start, one seed (trainer.seed=1); extra overrides: \`${EXTRA:-none}\`."
    echo
    echo "| estimator (example) | val acc before | val acc after | best | wall s | s/step gen | s/step update | s/step total |"
    echo "|---|---|---|---|---|---|---|---|"
} > "$DIR/RESULTS.part"
for e in $EST; do
    out="$DIR/$e"
    rm -rf "$out"
    t0=$(now)
    $D --config "examples/arith_$e.yaml" trainer.output_dir="$out" model.init_from="$DIR/sft/final" \
        trainer.total_steps="$STEPS" trainer.save_every=0 $EXTRA > "$out.log" 2>&1 || { echo "$e failed"; tail -5 "$out.log"; continue; }
    wall=$(awk "BEGIN{printf \"%.0f\", $(now) - $t0}")
    before=$(val "$out/metrics.jsonl" 0)
    after=$(val "$out/metrics.jsonl" last)
    best=$(python3 -c "
import json
print(max(json.loads(l)['val/accuracy'] for l in open('$out/metrics.jsonl') if '\"val/accuracy\"' in l))")
    g=$(mean_key "$out/metrics.jsonl" timing_s/gen)
    u=$(mean_key "$out/metrics.jsonl" timing_s/update_actor)
    s=$(mean_key "$out/metrics.jsonl" timing_s/step)
    echo "bench: ${e}_val_accuracy_before = $before"
    echo "bench: ${e}_val_accuracy_after = $after"
    echo "bench: ${e}_wall_s = $wall"
    echo "| $e | $before | $after | $best | $wall | $g | $u | $s |" >> "$DIR/RESULTS.part"
done
cp "$DIR/RESULTS.part" "$DIR/RESULTS.md"
echo "bench: results = $DIR/RESULTS.md"
