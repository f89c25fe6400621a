#!/bin/sh
# The default local job of `make run`: rlrt's first real training run.
#   1. supervised warm start on the built-in arithmetic task
#      (examples/arith_sft.yaml), only when runs/arith_sft/final is missing;
#   2. GRPO from it (examples/arith_grpo.yaml): the driver logs one line per
#      step and the validation accuracy every 10 steps (step 0 = warm start).
# Every role runs as an rl-worker daemon of examples/cluster-local.yaml.
# Metrics: runs/arith_grpo/metrics.jsonl and runs/arith_grpo/tensorboard/.
# `RL_RUN=selftest make run` runs the cluster selftest instead.
set -e
BUILD=${BUILD:-build}
D="$BUILD/bin/rl-driver --cluster examples/cluster-local.yaml"
if [ "${RL_RUN:-}" = selftest ]; then
    exec $D --config examples/selftest.yaml "$@"
fi
if [ ! -f runs/arith_sft/final/model.safetensors ]; then
    echo "== supervised warm start (runs/arith_sft/final is missing)"
    $D --config examples/arith_sft.yaml
fi
echo "== GRPO from the warm start"
$D --config examples/arith_grpo.yaml "$@"
grep -h '"val/accuracy"' runs/arith_grpo/metrics.jsonl | sed -n '1p;$p' | \
    sed 's/.*"step": \([0-9]*\).*"val\/accuracy": \([0-9.e-]*\).*/validation accuracy at step \1: \2/'
