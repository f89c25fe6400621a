#!/bin/sh
# The default local job of `make run`: rlrt's first real training run.
#   1. supervised warm start on the built-in arithmetic task
#      (examples/arith_sft.yaml), only when runs/arith_sft/final is missing;
#   2. GRPO from it (examples/arith_grpo.yaml): the driver logs one line per
#      step and the validation accuracy every 10 steps (step 0 = warm start).
# Every role runs as an rl-worker daemon of examples/cluster-local.yaml.
# Metrics: runs/arith_grpo/metrics.jsonl and runs/arith_grpo/tensorboard/.
# `RL_RUN=selftest make run` runs the cluster selftest instead.
# `RL_RUN=diffusion make run` runs the diffusion track (seed 004): the learned
# prompt-match scorer and the clip generator's flow-matching pretraining when
# runs/fmnist_scorer/final or runs/fmnist_flow/final is missing, then GRPO
# with the prompt-match reward (examples/dance_grpo_scorer.yaml); it prints
# the validation reward before and after and saves a before/after grid.
set -e
BUILD=${BUILD:-build}
D="$BUILD/bin/rl-driver --cluster examples/cluster-local.yaml"
if [ "${RL_RUN:-}" = selftest ]; then
    exec $D --config examples/selftest.yaml "$@"
fi
if [ "${RL_RUN:-}" = diffusion ]; then
    DD="$BUILD/bin/rl-driver --cluster examples/cluster-diffusion.yaml"
    if [ ! -f runs/fmnist_scorer/final/model.safetensors ]; then
        echo "== the learned prompt-match scorer (runs/fmnist_scorer/final is missing)"
        $DD --config examples/fmnist_scorer.yaml
    fi
    if [ ! -f runs/fmnist_flow/final/model.safetensors ]; then
        echo "== flow-matching pretraining of the clip generator (runs/fmnist_flow/final is missing)"
        $DD --config examples/fmnist_flow.yaml
    fi
    echo "== diffusion GRPO with the prompt-match reward"
    $DD --config examples/dance_grpo_scorer.yaml "$@"
    grep -h '"val/prompt_match"' runs/dance_grpo_scorer/metrics.jsonl | sed -n '1p;$p' | \
        sed 's/.*"step": \([0-9]*\).*"val\/prompt_match": \([0-9.e-]*\).*/validation prompt-match reward at step \1: \2/'
    echo "before (top) / after (bottom), one ODE sample per prompt: runs/dance_grpo_scorer/before_after.png"
    exit 0
fi
if [ ! -f runs/arith_sft/final/model.safetensors ]; then
    echo "== supervised warm start (runs/arith_sft/final is missing)"
    $D --config examples/arith_sft.yaml
fi
echo "== GRPO from the warm start"
$D --config examples/arith_grpo.yaml "$@"
grep -h '"val/accuracy"' runs/arith_grpo/metrics.jsonl | sed -n '1p;$p' | \
    sed 's/.*"step": \([0-9]*\).*"val\/accuracy": \([0-9.e-]*\).*/validation accuracy at step \1: \2/'
