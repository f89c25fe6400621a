#!/bin/bash
# bench_rl_long.sh — `make bench-rl-long`: every estimator's example job from
# the warm start nearest the ceiling, for 400 steps instead of bench-rl's 300.
# Its warm starts are the plain 300-step SFT job (not bench-rl's, which stop
# at 0.6): from SFT seed 3 (0.745 on the validation set of the Intel machine
# of the page) +25 points means 0.995, i.e. at most one wrong answer in 200,
# which 200-step runs stopped short of. This bench asks whether the rest of
# the 10-minute budget gets there.
# Written to its own section of the results page (<!-- bench-rl-long -->)
# by bench/bench_rl.sh and bench/bench_rl_report.py.
#
# Knobs: those of bench_rl.sh; here RL_BENCH_WARM defaults to "3",
# RL_BENCH_SEEDS to "1 2 3" (18 runs, about 75 minutes here), RL_BENCH_STEPS to 400 and RL_BENCH_DIR to
# runs/bench_rl_long. RL_BENCH_SFT_FROM=DIR reuses the warm starts of a
# finished run of this bench in DIR (not bench-rl's: those stop at 0.6).
set -u
cd "$(dirname "$0")/.."
export RL_BENCH_WARM=${RL_BENCH_WARM-3}
export RL_BENCH_SEEDS=${RL_BENCH_SEEDS-"1 2 3"}
export RL_BENCH_STEPS=${RL_BENCH_STEPS:-400}
export RL_BENCH_SFT_STEPS=${RL_BENCH_SFT_STEPS:-300}
export RL_BENCH_SFT_STOP_AT=${RL_BENCH_SFT_STOP_AT:-0}
export RL_BENCH_DIR=${RL_BENCH_DIR:-runs/bench_rl_long}
export RL_BENCH_SECTION=bench-rl-long
exec bench/bench_rl.sh
