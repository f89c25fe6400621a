#!/bin/bash
# bench_guidance.sh — `make bench-guidance`: off-policy guidance
# (algorithm.guidance, driver/recipes/lm/rlvr_guidance.h) measured against the
# same job without it: GRPO's example job (examples/arith_grpo.yaml) from
# every warm start with every RL seed, once with guidance off and once on,
# written to its own section of the results page (<!-- bench-guidance -->)
# by bench/bench_rl.sh and bench/bench_rl_report.py.
#
# Knobs: those of bench_rl.sh; here RL_BENCH_DIR defaults to
# runs/bench_guidance, RL_BENCH_VARIANTS to the two arms and
# RL_BENCH_EXTEND_STEPS to 0 (every run 300 steps, so the arms compare). The warm starts
# and seeds are bench-rl's (3 x 3), so the arms cover the same 9 pairs;
# RL_BENCH_SFT_FROM=runs/bench reuses the warm starts of a finished bench-rl.
set -u
cd "$(dirname "$0")/.."
V=${RL_BENCH_VARIANTS-"grpo@algorithm.guidance.enable=false grpo@algorithm.guidance.enable=true"}
export RL_BENCH_ESTIMATORS="$V"
export RL_BENCH_DIR=${RL_BENCH_DIR:-runs/bench_guidance}
export RL_BENCH_SECTION=bench-guidance
export RL_BENCH_EXTEND_STEPS=${RL_BENCH_EXTEND_STEPS-0} # every run the same length
exec bench/bench_rl.sh
