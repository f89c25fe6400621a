#!/bin/bash
# bench_dapo.sh — `make bench-dapo`: the DAPO toolbox measured one knob at a
# time. GRPO's example job (dynamic sampling, clip-higher 0.28, token-mean
# loss: examples/arith_grpo.yaml) against the same job with one knob changed,
# from the same warm starts and seeds, written to its own section of the
# results page (<!-- bench-dapo -->) by bench/bench_rl.sh and
# bench/bench_rl_report.py.
#
#   grpo                                      the example job (all on)
#   algorithm.online_filtering=false          without dynamic sampling
#   actor.clip_ratio_high=0.2                 without clip-higher (0.2 / 0.2)
#   actor.loss_agg_mode=seq-mean-token-mean   sequence-level instead of token-level loss
#   algorithm.overlong_filter=true            with overlong filtering
#   algorithm.overlong_buffer.enable=true     with soft overlong punishment (the last
#                                             8 tokens of the 48, factor 1)
#
# Knobs: those of bench_rl.sh; here RL_BENCH_WARM defaults to "1",
# RL_BENCH_SEEDS to "1 2", RL_BENCH_EXTEND_STEPS to 0 (every variant 300
# steps, so they compare), RL_BENCH_DIR to runs/bench_dapo and
# RL_BENCH_VARIANTS (default: the six above) to the list of variants.
# RL_BENCH_SFT_FROM=runs/bench reuses the warm starts of a finished bench-rl.
set -u
cd "$(dirname "$0")/.."
V=${RL_BENCH_VARIANTS-"grpo grpo@algorithm.online_filtering=false grpo@actor.clip_ratio_high=0.2 grpo@actor.loss_agg_mode=seq-mean-token-mean grpo@algorithm.overlong_filter=true grpo@algorithm.overlong_buffer.enable=true@algorithm.overlong_buffer.len=8@algorithm.overlong_buffer.penalty_factor=1.0"}
export RL_BENCH_ESTIMATORS="$V"
export RL_BENCH_WARM=${RL_BENCH_WARM-1}
export RL_BENCH_SEEDS=${RL_BENCH_SEEDS-"1 2"}
export RL_BENCH_DIR=${RL_BENCH_DIR:-runs/bench_dapo}
export RL_BENCH_SECTION=bench-dapo
export RL_BENCH_EXTEND_STEPS=${RL_BENCH_EXTEND_STEPS-0} # every run the same length
exec bench/bench_rl.sh
