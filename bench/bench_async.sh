#!/bin/bash
# bench_async.sh — `make bench-async`: the same GRPO job run synchronously
# (trainer.staleness=0) and one step off (trainer.staleness=1 with TIS), from
# one SFT warm start, in one bench run, in the order sync, async, async, sync
# (each run twice, so a drift of the machine's speed over the bench weighs on
# both sides alike; the repeats also show whether each run is deterministic);
# prints
#   bench: async_step_time_ratio = X   (mean step time async / sync, both runs of each)
#   bench: async_val_acc_delta = X     (final val accuracy async − sync)
# and writes its section of docs/RESULTS.md (bench/bench_async_report.py).
#
# Knobs (environment):
#   RL_BENCH_ASYNC_STEPS (default 100)     RL steps per run
#   RL_BENCH_ASYNC_SFT_STEPS (default 300) warm-start steps
#   RL_BENCH_ASYNC_TIS (default 2.0)       algorithm.tis_imp_ratio_cap of the async run
#   RL_BENCH_ASYNC_DIR (default runs/bench_async)
#   RL_BENCH_ASYNC_OUT (default docs/RESULTS.md)
#   RL_BENCH_ASYNC_CLUSTER (default examples/cluster-local.yaml)
#   RL_BENCH_ASYNC_EXTRA                   extra overrides for both RL runs
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${RL_BENCH_ASYNC_STEPS:-100}
SFT_STEPS=${RL_BENCH_ASYNC_SFT_STEPS:-300}
TIS=${RL_BENCH_ASYNC_TIS:-2.0}
DIR=${RL_BENCH_ASYNC_DIR:-runs/bench_async}
OUT=${RL_BENCH_ASYNC_OUT:-docs/RESULTS.md}
CLUSTER=${RL_BENCH_ASYNC_CLUSTER:-examples/cluster-local.yaml}
EXTRA=${RL_BENCH_ASYNC_EXTRA:-}
PY=${RL_BENCH_PYTHON:-/usr/bin/python3}
DRIVER="$BUILD/bin/rl-driver"
[ -x "$DRIVER" ] || { echo "bench-async: $DRIVER not built (make)"; exit 2; }
[ -x "$PY" ] || { echo "bench-async: $PY not found (the page generator needs it)"; exit 2; }
case "$DIR" in ""|/|.) echo "bench-async: refusing RL_BENCH_ASYNC_DIR='$DIR'"; exit 2 ;; esac
rm -rf "$DIR"
mkdir -p "$DIR"
RUNS="$DIR/runs.tsv"
printf 'name\tkind\testimator\twarm\tseed\twall_s\trc\tcommand\n' >"$RUNS"
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -c .)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "steps=$STEPS"
    echo "sft_steps=$SFT_STEPS"
    echo "tis=$TIS"
    echo "extra=$EXTRA"
    echo "cluster=$CLUSTER"
} >"$DIR/env.txt"
now() { date +%s.%N; }
run() {
    local name=$1 kind=$2
    shift 2
    # a free port of its own, so the bench can run beside other jobs
    local cmd=("$DRIVER" --cluster "$CLUSTER" --bind 'tcp://127.0.0.1:*' --log-level warn "$@")
    echo "bench-async: $name: ${cmd[*]}"
    local t0 rc wall
    t0=$(now)
    "${cmd[@]}" >"$DIR/$name.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}')
    printf '%s\t%s\tgrpo\t1\t1\t%s\t%s\t%s\n' "$name" "$kind" "$wall" "$rc" "${cmd[*]}" >>"$RUNS"
    [ $rc = 0 ] || { echo "bench-async: $name failed (exit $rc)"; tail -5 "$DIR/$name.log"; }
    return $rc
}
t_all=$(now)
run sft sft --config examples/arith_sft.yaml trainer.output_dir="$DIR/sft" \
    trainer.total_steps="$SFT_STEPS" || exit 1
common=(--config examples/arith_grpo.yaml model.init_from="$DIR/sft/final"
        trainer.total_steps="$STEPS" trainer.save_every=0 trainer.seed=1)
# shellcheck disable=SC2086
run sync rl "${common[@]}" trainer.output_dir="$DIR/sync" trainer.staleness=0 $EXTRA
# shellcheck disable=SC2086
run async rl "${common[@]}" trainer.output_dir="$DIR/async" trainer.staleness=1 \
    algorithm.tis_imp_ratio_cap="$TIS" $EXTRA
# shellcheck disable=SC2086
run async_2 rl "${common[@]}" trainer.output_dir="$DIR/async_2" trainer.staleness=1 \
    algorithm.tis_imp_ratio_cap="$TIS" $EXTRA
# shellcheck disable=SC2086
run sync_2 rl "${common[@]}" trainer.output_dir="$DIR/sync_2" trainer.staleness=0 $EXTRA
{
    echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bench_wall_s=$(awk -v a="$t_all" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}')"
} >>"$DIR/env.txt"
mkdir -p "$(dirname "$OUT")"
"$PY" bench/bench_async_report.py --dir "$DIR" --out "$OUT" || exit 1
! awk -F'\t' 'NR > 1 && $7 != 0 {bad = 1} END {exit !bad}' "$RUNS"
