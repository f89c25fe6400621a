#!/bin/bash
# Bad job files and overrides that rl-driver refuses before any worker
# starts, each with a message naming the problem: a job file with no keys
# or no recipe, a quoted number or boolean (a string), a cross-key check that
# must name the key the user wrote, a path the job names that does not
# exist. Every case runs rl-driver with a cluster (not --check), so "no
# worker started" is checked too.
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
C=examples/cluster-local.yaml
n=0
expect() { # expect "message" job-file [overrides...]: refused before any worker starts
    local want=$1 job=$2 got
    shift 2
    local cfg=()
    [ -n "$job" ] && cfg=(--config "$job")
    got=$("$BIN/rl-driver" --cluster $C "${cfg[@]}" --bind 'tcp://127.0.0.1:*' "$@" 2>&1) &&
        fail "'$job $*' ran: $got"
    echo "$got" | grep -qF -- "$want" || fail "'$job $*' printed: $got -- expected: $want"
    if echo "$got" | grep -q "ready (pid\|all workers ready"; then
        fail "'$job $*': workers started before the error: $got"
    fi
    n=$((n + 1))
}
accept() { # accept job-file [overrides...]: rl-driver --check passes
    local job=$1 got
    shift
    got=$("$BIN/rl-driver" --check --config "$job" "$@" 2>&1) || fail "'$job $*' refused: $got"
}
recipes="recipes: selftest, sft, rlvr"

# 1. a job file without keys, or without its recipe
: >"$d/empty.yaml"
printf '# only a comment\n\n   # and another\n' >"$d/comments.yaml"
printf '{}\n' >"$d/braces.yaml"
printf -- '---\n' >"$d/dashes.yaml"
printf -- '--- ~\n' >"$d/null.yaml"
for f in empty comments braces dashes null; do
    expect "$d/$f.yaml: the job file has no keys; a job names at least its recipe (trainer.recipe: one of" \
        "$d/$f.yaml"
    # an override does not make an empty file a job
    expect "$d/$f.yaml: the job file has no keys" "$d/$f.yaml" trainer.recipe=selftest
done
printf 'selftest:\n  rows: 3\n' >"$d/norecipe.yaml"
expect "$d/norecipe.yaml: trainer.recipe missing: a job names its recipe ($recipes" "$d/norecipe.yaml"
accept "$d/norecipe.yaml" trainer.recipe=selftest
expect "no job: give --config job.yaml (naming trainer.recipe) or the override trainer.recipe=NAME ($recipes" ""
accept examples/selftest.yaml

# 2. a quoted scalar is a string: not a number or a boolean
printf 'trainer:\n  recipe: rlvr\n  total_steps: "30"\n' >"$d/q1.yaml"
expect "$d/q1.yaml:3:16: trainer.total_steps: expected an integer, got the string \"30\"" "$d/q1.yaml"
printf "trainer:\n  recipe: rlvr\nactor:\n  optim: {lr: '1e-4'}\n" >"$d/q2.yaml"
expect "$d/q2.yaml:4:15: actor.optim.lr: expected a number, got the string \"1e-4\"" "$d/q2.yaml"
printf 'trainer:\n  recipe: rlvr\nalgorithm:\n  guidance: {enable: "true"}\n' >"$d/q3.yaml"
expect "$d/q3.yaml:4:22: algorithm.guidance.enable: expected a boolean, got the string \"true\"" \
    "$d/q3.yaml"
# the command line is untyped text: a number there is a number
accept examples/arith_grpo.yaml trainer.total_steps=30 actor.optim.lr=1e-4 algorithm.guidance.enable=true

# 3. a check between keys names the key the user wrote (an override before
#    the job file, the job file before the defaults), never a default or a
#    value derived from the user's
G=examples/arith_grpo.yaml
expect "override rollout.n=1: rollout.n: algorithm.guidance.samples (1) must be below rollout.n (1), so a guided group keeps samples of the policy" \
    $G rollout.n=1
expect "override rollout.n=-4: rollout.n: must be in [1, 65536], got -4" $G rollout.n=-4
printf 'trainer:\n  recipe: rlvr\nrollout:\n  n: 1\nalgorithm:\n  guidance: {enable: true}\n' >"$d/n1.yaml"
expect "$d/n1.yaml:4:6: rollout.n: algorithm.guidance.samples (1) must be below rollout.n (1)" "$d/n1.yaml"
printf 'trainer:\n  recipe: rlvr\nrollout:\n  n: -4\nalgorithm:\n  guidance: {enable: true}\n' >"$d/n4.yaml"
expect "$d/n4.yaml:4:6: rollout.n: must be in [1, 65536], got -4" "$d/n4.yaml"
expect "override algorithm.guidance.samples=8: algorithm.guidance.samples: algorithm.guidance.samples (8) must be below rollout.n (8)" \
    $G algorithm.guidance.samples=8
expect "override algorithm.filter_high=0: algorithm.filter_high: algorithm.filter_low (0.01) must be below algorithm.filter_high (0)" \
    $G algorithm.filter_high=0
expect "override data.train_batch_size=12: data.train_batch_size: actor.ppo_mini_batch_size (8) must divide data.train_batch_size (12)" \
    $G data.train_batch_size=12
expect "override actor.optim.lr=0: actor.optim.lr: the value head's lr (actor.optim.value_lr 0.0001) follows the policy's lr schedule as a multiple of actor.optim.lr, which is 0" \
    examples/libero_object_ppo.yaml actor.optim.lr=0
expect "override algorithm.flow_sar_t_max=0.001: algorithm.flow_sar_t_max: algorithm.flow_sar_t_min (0.2) is above algorithm.flow_sar_t_max (0.001)" \
    examples/libero_object_flowsar.yaml algorithm.flow_sar_t_max=0.001
# a derived key (actor.optim.total_training_steps = the run's optimiser steps)
expect "override trainer.total_steps=1000000000: trainer.total_steps: actor.optim.total_training_steps = 10000000000000 (trainer.total_steps 1000000000 x 10000 optimiser updates a step) must be in [-1, 1000000000000]" \
    examples/dance_grpo_jpeg.yaml trainer.total_steps=1000000000 actor.ppo_epochs=10000

echo "$n bad jobs refused before any worker started"
