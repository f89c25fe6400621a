#!/bin/bash
# bench_words.sh — `make bench-words`: the harder built-in task (word
# problems, levels 8-9 of common/data/data.h) with and without the calculator:
# an SFT warm start and a GRPO run each (examples/arith_words_*.yaml and
# examples/arith_tools_*.yaml), then its section of docs/RESULTS.md from the
# runs' metrics.jsonl (bench/bench_words_report.py). Not a test: about half
# an hour on 2 cores.
#
# Knobs (environment):
#   RL_WORDS_SFT_STEPS (default 400)   warm-start steps
#   RL_WORDS_STEPS (default 30)        GRPO steps
#   RL_WORDS_PAIRS (default "words tools")  which pairs to run
#   RL_WORDS_SKIP_SFT=1                reuse $DIR/<pair>_sft/final (made
#                                      earlier by this script or by the
#                                      example job with the same steps)
#   RL_WORDS_DIR (default runs/bench_words), RL_WORDS_OUT (docs/RESULTS.md),
#   RL_WORDS_CLUSTER (default examples/cluster-local.yaml)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SFT_STEPS=${RL_WORDS_SFT_STEPS:-400}
STEPS=${RL_WORDS_STEPS:-30}
PAIRS=${RL_WORDS_PAIRS-"words tools"}
DIR=${RL_WORDS_DIR:-runs/bench_words}
OUT=${RL_WORDS_OUT:-docs/RESULTS.md}
CLUSTER=${RL_WORDS_CLUSTER:-examples/cluster-local.yaml}
SKIP_SFT=${RL_WORDS_SKIP_SFT:-0}
PY=${RL_BENCH_PYTHON:-/usr/bin/python3}
DRIVER="$BUILD/bin/rl-driver"
[ -x "$DRIVER" ] || { echo "bench-words: $DRIVER not built (make)"; exit 2; }
case "$DIR" in ""|/|.) echo "bench-words: refusing RL_WORDS_DIR='$DIR'"; exit 2 ;; esac
mkdir -p "$DIR"
RUNS="$DIR/runs.tsv"
[ "$SKIP_SFT" = 1 ] && [ -f "$RUNS" ] || printf 'name\twall_s\trc\tcommand\n' >"$RUNS"
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "sft_steps=$SFT_STEPS"
    echo "steps=$STEPS"
    echo "skip_sft=$SKIP_SFT"
} >"$DIR/env.txt"

run() {
    local name=$1
    shift
    local cmd=("$DRIVER" --cluster "$CLUSTER" --log-level warn "$@")
    echo "bench-words: $name: ${cmd[*]}"
    local t0 rc
    t0=$(date +%s.%N)
    "${cmd[@]}" >"$DIR/$name.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')" "$rc" "${cmd[*]}" >>"$RUNS"
    [ $rc = 0 ] || { echo "bench-words: $name failed (exit $rc)"; tail -5 "$DIR/$name.log"; }
    return $rc
}

for p in $PAIRS; do
    if [ "$SKIP_SFT" != 1 ]; then
        rm -rf "$DIR/${p}_sft"
        run "${p}_sft" --config "examples/arith_${p}_sft.yaml" trainer.output_dir="$DIR/${p}_sft" \
            trainer.total_steps="$SFT_STEPS" || exit 1
    fi
    [ -d "$DIR/${p}_sft/final" ] || { echo "bench-words: no warm start $DIR/${p}_sft/final"; exit 1; }
    rm -rf "$DIR/${p}_grpo"
    run "${p}_grpo" --config "examples/arith_${p}_grpo.yaml" trainer.output_dir="$DIR/${p}_grpo" \
        model.init_from="$DIR/${p}_sft/final" trainer.total_steps="$STEPS" trainer.save_every=0 \
        trainer.val_every=10 || exit 1
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$DIR/env.txt"
"$PY" bench/bench_words_report.py --dir "$DIR" --out "$OUT" || exit 1
echo "bench: results = $OUT"
