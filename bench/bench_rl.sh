#!/bin/bash
# bench_rl.sh — `make bench-rl`: trains one SFT warm start per warm-start
# seed, runs every RL estimator from every warm start with every RL seed,
# then writes its section of the results page from those runs'
# metrics.jsonl with bench/bench_rl_report.py. Nothing on the page is typed
# by hand: every number comes from the runs made here.
# Not a test: the default (3 warm starts x 3 seeds x 6 estimators = 54 RL
# runs) takes hours on 2 cores; the knobs make it smaller.
#
# Knobs (environment):
#   RL_BENCH_STEPS (default 300)      RL steps per run
#   RL_BENCH_EXTEND_STEPS (default 500) a run whose best gain by step
#                                     RL_BENCH_STEPS is below the +25 target,
#                                     with RL time left in the budget, goes on
#                                     to this step (resumed from its checkpoint
#                                     at RL_BENCH_STEPS: bit for bit the longer
#                                     run); 0 = never
#   RL_BENCH_SFT_STEPS (default 600)  warm-start steps at most
#   RL_BENCH_SFT_STOP_AT (default 0.6) the warm start is the SFT job stopped at
#                                     its first validation (every 10 steps) at
#                                     or above this accuracy; 0 = all the steps
#   RL_BENCH_WARM (default "1 2 3")   trainer.seed of each SFT warm start
#   RL_BENCH_SEEDS (default "1 2 3")  trainer.seed of each RL run
#   RL_BENCH_ESTIMATORS               space-separated examples/arith_<name>.yaml
#                                     (default: grpo rloo reinforce_pp pro_max
#                                     pro_max_uniform aepo); a variant is
#                                     name@key=value[@key=value...], the job
#                                     with those overrides (bench-dapo)
#   RL_BENCH_MINUTES (default 10)     the RL time budget the targets are read at
#   RL_BENCH_DIR (default runs/bench) where the runs go (emptied first)
#   RL_BENCH_OUT (default docs/RESULTS.md) the page
#   RL_BENCH_CLUSTER (default examples/cluster-local.yaml)
#   RL_BENCH_EXTRA                    extra key=value overrides for the RL runs
#   RL_BENCH_SFT_FROM                 a finished bench dir whose sft_w<w>/final
#                                     warm starts to use instead of training them
#   RL_BENCH_SECTION (default bench-rl) the page section (marker) to write
#
# Stopping it (Ctrl-C, SIGTERM) writes the page from the runs that finished.
#
# Short check of the whole pipeline (a few minutes):
#   RL_BENCH_STEPS=4 RL_BENCH_SFT_STEPS=20 RL_BENCH_WARM="1 2" RL_BENCH_SEEDS=1 \
#   RL_BENCH_ESTIMATORS="grpo rloo" RL_BENCH_DIR=/tmp/rlb \
#   RL_BENCH_OUT=/tmp/rlb/RESULTS.md make bench-rl
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${RL_BENCH_STEPS:-300}
EXTEND=${RL_BENCH_EXTEND_STEPS-500}
SFT_STEPS=${RL_BENCH_SFT_STEPS:-600}
SFT_STOP=${RL_BENCH_SFT_STOP_AT:-0.6}
WARM=${RL_BENCH_WARM-"1 2 3"}
SEEDS=${RL_BENCH_SEEDS-"1 2 3"}
EST=${RL_BENCH_ESTIMATORS-"grpo rloo reinforce_pp pro_max pro_max_uniform aepo"}
MINUTES=${RL_BENCH_MINUTES:-10}
DIR=${RL_BENCH_DIR:-runs/bench}
OUT=${RL_BENCH_OUT:-docs/RESULTS.md}
EXTRA=${RL_BENCH_EXTRA:-}
CLUSTER=${RL_BENCH_CLUSTER:-examples/cluster-local.yaml}
SFT_FROM=${RL_BENCH_SFT_FROM:-}
SECTION=${RL_BENCH_SECTION:-bench-rl}
PY=${RL_BENCH_PYTHON:-/usr/bin/python3}
DRIVER="$BUILD/bin/rl-driver"

[ -x "$DRIVER" ] || { echo "bench-rl: $DRIVER not built (make)"; exit 2; }
[ -x "$PY" ] || { echo "bench-rl: $PY not found (the page generator needs it)"; exit 2; }
[ -n "$WARM" ] && [ -n "$SEEDS" ] && [ -n "$EST" ] ||
    { echo "bench-rl: RL_BENCH_WARM, RL_BENCH_SEEDS and RL_BENCH_ESTIMATORS must not be empty"; exit 2; }
case "$EXTEND" in ''|*[!0-9]*) echo "bench-rl: RL_BENCH_EXTEND_STEPS='$EXTEND' is not a step count"; exit 2 ;; esac
[ "$EXTEND" = 0 ] || [ "$EXTEND" -gt "$STEPS" ] ||
    { echo "bench-rl: RL_BENCH_EXTEND_STEPS ($EXTEND) must be 0 or more than RL_BENCH_STEPS ($STEPS)"; exit 2; }
case "$DIR" in ""|/|.) echo "bench-rl: refusing RL_BENCH_DIR='$DIR'"; exit 2 ;; esac
for e in $EST; do
    [ -f "examples/arith_${e%%@*}.yaml" ] ||
        { echo "bench-rl: RL_BENCH_ESTIMATORS: no job examples/arith_${e%%@*}.yaml for '$e'"; exit 2; }
done
if [ -n "$SFT_FROM" ]; then
    [ "$(realpath -m "$SFT_FROM")" != "$(realpath -m "$DIR")" ] ||
        { echo "bench-rl: RL_BENCH_SFT_FROM must not be RL_BENCH_DIR (it is emptied first)"; exit 2; }
    for w in $WARM; do
        [ -f "$SFT_FROM/sft_w$w/final/config.json" ] ||
            { echo "bench-rl: RL_BENCH_SFT_FROM: no warm start $SFT_FROM/sft_w$w/final"; exit 2; }
    done
fi
rm -rf "$DIR"
mkdir -p "$DIR"
RUNS="$DIR/runs.tsv"
printf 'name\tkind\testimator\twarm\tseed\twall_s\trc\tcommand\n' >"$RUNS"
# Facts about this machine and tree for the page's header.
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -c .)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "steps=$STEPS"
    echo "extend_steps=$EXTEND"
    echo "sft_steps=$SFT_STEPS"
    echo "sft_stop_at=$SFT_STOP"
    echo "warm=$WARM"
    echo "seeds=$SEEDS"
    echo "estimators=$EST"
    echo "minutes=$MINUTES"
    echo "extra=$EXTRA"
    echo "cluster=$CLUSTER"
    echo "sft_from=$SFT_FROM"
    echo "section=$SECTION"
} >"$DIR/env.txt"

now() { date +%s.%N; }

# run NAME KIND ESTIMATOR WARM SEED ARGS... — one rl-driver run into
# $DIR/NAME, timed and recorded in runs.tsv; its console output goes to
# $DIR/NAME.log.
run() {
    local name=$1 kind=$2 est=$3 warm=$4 seed=$5
    shift 5
    local cmd=("$DRIVER" --cluster "$CLUSTER" --log-level warn "$@")
    echo "bench-rl: $name: ${cmd[*]}"
    local t0 rc wall
    t0=$(now)
    "${cmd[@]}" >"$DIR/$name.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$est" "$warm" "$seed" "$wall" "$rc" \
        "${cmd[*]}" >>"$RUNS"
    if [ $rc != 0 ]; then
        echo "bench-rl: $name failed (exit $rc); last lines of $DIR/$name.log:"
        tail -5 "$DIR/$name.log"
    fi
    return $rc
}

t_all=$(now)
# Ctrl-C / SIGTERM: stop the run in progress and write the page from the runs
# that finished (the page says the bench was stopped and what it lacks).
stopped() {
    trap - INT TERM
    echo "bench-rl: stopped; writing the page from the finished runs"
    mkdir -p "$(dirname "$OUT")"
    "$PY" bench/bench_rl_report.py --dir "$DIR" --out "$OUT" --section "$SECTION"
    exit 130
}
trap stopped INT TERM
for w in $WARM; do
    if [ -n "$SFT_FROM" ]; then # reuse: copy the warm start and its record
        mkdir -p "$DIR/sft_w$w" && cp -r "$SFT_FROM/sft_w$w/final" "$DIR/sft_w$w/" &&
            cp "$SFT_FROM/sft_w$w/metrics.jsonl" "$DIR/sft_w$w/" || exit 1
        awk -F'\t' -v n="sft_w$w" '$1 == n' "$SFT_FROM/runs.tsv" >>"$RUNS"
        continue
    fi
    run "sft_w$w" sft - "$w" "$w" --config examples/arith_sft.yaml \
        trainer.output_dir="$DIR/sft_w$w" trainer.total_steps="$SFT_STEPS" trainer.seed="$w" \
        trainer.val_every=10 trainer.stop_at_val_accuracy="$SFT_STOP" || exit 1
done
# shellcheck disable=SC2086  # EXTRA and the variant's overrides are lists of key=value
for e in $EST; do
    job=${e%%@*}                                       # grpo@a=1@b=2 -> grpo
    over=""
    [ "$job" = "$e" ] || over=$(printf '%s' "${e#*@}" | tr '@' ' ') # -> a=1 b=2
    tag=$(printf '%s' "$e" | tr -c 'A-Za-z0-9_\n' '_') # a directory name
    for w in $WARM; do
        for s in $SEEDS; do
            name="${tag}_w${w}_s${s}"
            args=(--config "examples/arith_$job.yaml" trainer.output_dir="$DIR/$name"
                model.init_from="$DIR/sft_w$w/final" trainer.seed="$s" $over $EXTRA)
            # With the extension on, the run keeps its checkpoint at STEPS to go on from.
            run "$name" rl "$e" "$w" "$s" "${args[@]}" trainer.total_steps="$STEPS" \
                trainer.save_every="$([ "$EXTEND" = 0 ] && echo 0 || echo "$STEPS")" || continue
            # Short of +25 by STEPS with budget left: the same run, on to EXTEND.
            [ "$EXTEND" != 0 ] && "$PY" bench/bench_rl_report.py --dir "$DIR" --short-of-target "$name" &&
                run "$name" extend "$e" "$w" "$s" "${args[@]}" trainer.total_steps="$EXTEND" \
                    trainer.save_every="$EXTEND" trainer.resume=true
        done
    done
done
{
    echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bench_wall_s=$(awk -v a="$t_all" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}')"
} >>"$DIR/env.txt"

mkdir -p "$(dirname "$OUT")"
"$PY" bench/bench_rl_report.py --dir "$DIR" --out "$OUT" --section "$SECTION" || exit 1
echo "bench: results = $OUT"
# A failed run is on the page as failed; the bench still reports failure.
! awk -F'\t' 'NR > 1 && $7 != 0 {bad = 1} END {exit !bad}' "$RUNS"
