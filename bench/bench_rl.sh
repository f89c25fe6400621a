#!/bin/bash
# bench_rl.sh — `make bench-rl`: trains the SFT warm start, runs every RL
# estimator from it (and GRPO with more seeds), then writes its section of the results
# page from those runs' metrics.jsonl with bench/bench_rl_report.py. Nothing
# on the page is typed by hand: every number comes from the runs made here.
# Not a test: the default takes 15-25 minutes on 2 cores.
#
# Knobs (environment):
#   RL_BENCH_STEPS (default 200)      RL steps per run
#   RL_BENCH_SFT_STEPS (default 300)  warm-start steps
#   RL_BENCH_ESTIMATORS               space-separated examples/arith_<name>.yaml
#                                     (default: grpo rloo reinforce_pp pro_max
#                                     pro_max_uniform aepo)
#   RL_BENCH_SEEDS (default "2 3")    extra trainer.seed values for GRPO (seed 1
#                                     is the estimator run); empty: none
#   RL_BENCH_DIR (default runs/bench) where the runs go (emptied first)
#   RL_BENCH_OUT (default docs/RESULTS.md) the page
#   RL_BENCH_EXTRA                    extra key=value overrides for the RL runs
#
# Short check of the whole pipeline (about 3 minutes):
#   RL_BENCH_STEPS=6 RL_BENCH_SFT_STEPS=30 RL_BENCH_DIR=/tmp/rlb \
#   RL_BENCH_OUT=/tmp/rlb/RESULTS.md make bench-rl
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${RL_BENCH_STEPS:-200}
SFT_STEPS=${RL_BENCH_SFT_STEPS:-300}
DIR=${RL_BENCH_DIR:-runs/bench}
OUT=${RL_BENCH_OUT:-docs/RESULTS.md}
EST=${RL_BENCH_ESTIMATORS-"grpo rloo reinforce_pp pro_max pro_max_uniform aepo"}
SEEDS=${RL_BENCH_SEEDS-"2 3"}
EXTRA=${RL_BENCH_EXTRA:-}
PY=${RL_BENCH_PYTHON:-/usr/bin/python3}
DRIVER="$BUILD/bin/rl-driver"
CLUSTER=examples/cluster-local.yaml

[ -x "$DRIVER" ] || { echo "bench-rl: $DRIVER not built (make)"; exit 2; }
[ -x "$PY" ] || { echo "bench-rl: $PY not found (the page generator needs it)"; exit 2; }
case "$DIR" in ""|/|.) echo "bench-rl: refusing RL_BENCH_DIR='$DIR'"; exit 2 ;; esac
rm -rf "$DIR"
mkdir -p "$DIR"
RUNS="$DIR/runs.tsv"
printf 'name\tkind\tseed\twall_s\trc\tcommand\n' >"$RUNS"
# Facts about this machine and tree for the page's header.
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -c .)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "steps=$STEPS"
    echo "sft_steps=$SFT_STEPS"
    echo "estimators=$EST"
    echo "seeds=$SEEDS"
    echo "extra=$EXTRA"
    echo "cluster=$CLUSTER"
} >"$DIR/env.txt"

now() { date +%s.%N; }

# run NAME KIND SEED ARGS... — one rl-driver run into $DIR/NAME, timed and
# recorded in runs.tsv; its console output goes to $DIR/NAME.log.
run() {
    local name=$1 kind=$2 seed=$3
    shift 3
    local cmd=("$DRIVER" --cluster "$CLUSTER" --log-level warn "$@")
    echo "bench-rl: $name: ${cmd[*]}"
    local t0 rc wall
    t0=$(now)
    "${cmd[@]}" >"$DIR/$name.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$seed" "$wall" "$rc" "${cmd[*]}" >>"$RUNS"
    if [ $rc != 0 ]; then
        echo "bench-rl: $name failed (exit $rc); last lines of $DIR/$name.log:"
        tail -5 "$DIR/$name.log"
    fi
    return $rc
}

t_all=$(now)
run sft sft 1 --config examples/arith_sft.yaml trainer.output_dir="$DIR/sft" \
    trainer.total_steps="$SFT_STEPS" || exit 1
# shellcheck disable=SC2086  # EXTRA is a list of overrides
for e in $EST; do
    run "$e" estimator 1 --config "examples/arith_$e.yaml" trainer.output_dir="$DIR/$e" \
        model.init_from="$DIR/sft/final" trainer.total_steps="$STEPS" trainer.save_every=0 \
        trainer.seed=1 $EXTRA
done
# shellcheck disable=SC2086
for s in $SEEDS; do
    run "grpo_seed$s" seed "$s" --config examples/arith_grpo.yaml \
        trainer.output_dir="$DIR/grpo_seed$s" model.init_from="$DIR/sft/final" \
        trainer.total_steps="$STEPS" trainer.save_every=0 trainer.seed="$s" $EXTRA
done
{
    echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bench_wall_s=$(awk -v a="$t_all" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}')"
} >>"$DIR/env.txt"

mkdir -p "$(dirname "$OUT")"
"$PY" bench/bench_rl_report.py --dir "$DIR" --out "$OUT" || exit 1
echo "bench: results = $OUT"
# A failed run is on the page as failed; the bench still reports failure.
! awk -F'\t' 'NR > 1 && $5 != 0 {bad = 1} END {exit !bad}' "$RUNS"
