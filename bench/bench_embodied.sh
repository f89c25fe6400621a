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
# BENCH_EMBODIED_EVAL_EVERY steps), where a step's time goes, and the
# sample efficiency (issue 43): docs/embodied_sample_efficiency.png, success
# against the training rollouts' env steps (rollout/env_steps_total) and
# against training seconds per method (needs matplotlib: the first of
# $PYTHON, build/venv-ref, build/venv-libero that has it), its points in
# docs/embodied_sample_efficiency.json.
# Methods: BENCH_EMBODIED_METHODS (default: anchor sil flowsar flowsar_mse
# flowipo grpo ppo), each `name`, `name:steps`, `name:steps:every` or
# `name:steps:every:seeds` (its own training steps, evaluation interval and
# comma-separated RL seeds; the defaults are BENCH_EMBODIED_STEPS,
# BENCH_EMBODIED_EVAL_EVERY and BENCH_EMBODIED_SEEDS), so a method that
# needs longer or more seeds gets them and the page says so. Each method runs its example
# job as it is (the anchor of algorithm.demo_coef where the example has
# one); `anchor` is the control: the updates of the demonstration anchor
# alone (the sil example with algorithm.rl_coef 0), so a method's gain over
# `anchor` is what the RL signal adds beyond imitating the demonstrations;
# `<method>_anchor` is that method's own control (its example with
# algorithm.rl_coef 0: the anchor with the method's epochs, learning rate and
# steps), which the page reads the method and its variants (flowsar_mse)
# against where it is listed. GIFs of the
# evaluations: BENCH_EMBODIED_GIFS episodes per task (default 0: they cost
# about a minute per evaluation). BENCH_EMBODIED_SEEDS (default 1) lists the
# RL seeds (trainer.seed) of every method without its own; a method with
# more than one gets mean ± std over them on the page and its target is read
# on every seed (bench lines add embodied_<method>_success_std and
# _gain_points_min). BENCH_EMBODIED_KEEP=1
# reuses the finished runs of the output directory (those with a .wall file).
# BENCH_EMBODIED_HELDOUT=H (default 0: off) holds out each task's last H
# initial states (env.heldout_init_states): training episodes start from the
# other 50 − H, every evaluation from these H only (issue 43: the numbers
# reported are not those tuned on); the page says so.
# The page is written by bench/bench_embodied_report.py.
# Needs the scenes (make libero-data) and the warm start
# (runs/libero_warmstart/final; RL_RUN=libero make run makes it).
set -eu
BUILD=${BUILD:-build}
STEPS=${BENCH_EMBODIED_STEPS:-20}
PER=${BENCH_EMBODIED_EPISODES_PER_TASK:-50}
EVERY=${BENCH_EMBODIED_EVAL_EVERY:-5}
METHODS=${BENCH_EMBODIED_METHODS:-anchor sil flowsar flowsar_mse flowipo grpo ppo}
SEEDS=${BENCH_EMBODIED_SEEDS:-1}   # trainer.seed of each run; every method runs every seed
GIFS=${BENCH_EMBODIED_GIFS:-0}
KEEP=${BENCH_EMBODIED_KEEP:-0}  # 1: reuse the finished runs (their .wall file exists)
HELDOUT=${BENCH_EMBODIED_HELDOUT:-0}  # env.heldout_init_states of every run
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
    echo "commit=$(git describe --always --dirty 2>/dev/null || echo unknown)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"
for spec in $METHODS; do
    IFS=: read -r m msteps mevery mseeds <<<"$spec"
    msteps=${msteps:-$STEPS}; mevery=${mevery:-$EVERY}; mseeds=${mseeds:-$SEEDS}
for seed in ${mseeds//,/ }; do
    base=$m; ctl=()   # a control: the base method's example with its own loss off
    case $m in
    anchor) base=sil; ctl=(algorithm.rl_coef=0) ;;
    ?*_anchor) base=${m%_anchor}; ctl=(algorithm.rl_coef=0) ;;
    esac
    case $base in
    sil) cfg=examples/libero_object_sil.yaml; extra=() ;;
    flowsar) cfg=examples/libero_object_flowsar.yaml; extra=() ;;
    flowsar_mse) cfg=examples/libero_object_flowsar.yaml; extra=(algorithm.flow_sar_loss_variant=mse_branch) ;;
    flowipo) cfg=examples/libero_object_flowipo.yaml; extra=() ;;
    grpo) cfg=examples/libero_object_grpo.yaml; extra=() ;;
    ppo) cfg=examples/libero_object_ppo.yaml; extra=() ;;
    *) echo "bench-embodied: unknown method '$m'"; exit 2 ;;
    esac
    extra+=("${ctl[@]}")
    run=$m; [ "$seed" = 1 ] || run=$m-s$seed   # bench_embodied_report.py's run_name
    [ "$KEEP" = 1 ] && [ -f "$out/$run.wall" ] && continue
    rm -rf "${out:?}/$run" "$out/$run.wall"
    git describe --always --dirty >"$out/$run.commit" 2>/dev/null || echo unknown >"$out/$run.commit"
    t0=$(date +%s.%N)
    "$BUILD/bin/rl-driver" --cluster examples/cluster-libero-rl.yaml --config "$cfg" --bind 'tcp://127.0.0.1:*' \
        env.data_dir="$DATA" model.init_from="$WS" trainer.total_steps="$msteps" trainer.val_every="$mevery" \
        trainer.save_every=0 trainer.seed="$seed" eval.episodes_per_task="$PER" eval.gif_episodes_per_task="$GIFS" \
        env.heldout_init_states="$HELDOUT" \
        trainer.output_dir="$out/$run" "${extra[@]}" \
        >"$out/$run.log" 2>&1 || { tail -20 "$out/$run.log"; echo "bench-embodied: $run failed"; exit 1; }
    python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$t0" >"$out/$run.wall"
done
done
sed -i '/^loadavg_end=/d' "$out/env.txt"
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"
# the report draws docs/embodied_sample_efficiency.png with matplotlib: the first python that has it
py=""
for p in "${PYTHON:-/usr/bin/python3}" build/venv-ref/bin/python "${LIBERO_VENV:-build/venv-libero}/bin/python"; do
    if [ -x "$p" ] && "$p" -c "import matplotlib" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "bench-embodied: no python with matplotlib: docs/embodied_sample_efficiency.png is not drawn"
                  py=${PYTHON:-/usr/bin/python3}; }
"$py" bench/bench_embodied_report.py --dir "$out" --manifest "$DATA/manifest.json" --methods "$METHODS" \
    --seeds "$SEEDS" --steps "$STEPS" --per "$PER" --every "$EVERY" --warmstart "$WS" --heldout "$HELDOUT"
