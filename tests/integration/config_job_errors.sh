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
    got=$("$BIN/rl-driver" --cluster "${CL:-$C}" "${cfg[@]}" --bind 'tcp://127.0.0.1:*' "$@" 2>&1) &&
        fail "'$job $*' ran: $got"
    echo "$got" | grep -qF -- "$want" || fail "'$job $*' printed: $got -- expected: $want"
    if echo "$got" | grep -q "ready (pid\|all workers ready"; then
        fail "'$job $*': workers started before the error: $got"
    fi
    n=$((n + 1))
}
accept() { # accept job-file [overrides...]: rl-driver --check passes (CL: with that cluster)
    local job=$1 cl=()
    shift
    [ -n "$CL" ] && cl=(--cluster "$CL")
    got=$("$BIN/rl-driver" --check "${cl[@]}" --config "$job" "$@" 2>&1) || fail "'$job $*' refused: $got"
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

# 4. the paths a job names are there before any worker starts: those the
#    driver reads always, those the workers read when the driver spawns them
#    all on its own host (every node launch: local); the error names the
#    key, where it was set and the path
mkdir -p "$d/empty_dir" "$d/model"
: >"$d/model/model.safetensors"
: >"$d/a_file"
expect "override model.init_from=$d/nope: model.init_from: $d/nope: no such directory" $G model.init_from="$d/nope"
printf 'trainer:\n  recipe: rlvr\nmodel:\n  init_from: %s/nope\n' "$d" >"$d/init.yaml"
expect "$d/init.yaml:4:14: model.init_from: $d/nope: no such directory" "$d/init.yaml"
expect "model.init_from: $d/empty_dir: holds no model.safetensors nor model.safetensors.index.json (not a saved model)" $G model.init_from="$d/empty_dir"
expect "model.init_from: $d/a_file: is not a directory" $G model.init_from="$d/a_file"
CL=examples/cluster-local.yaml accept $G model.init_from="$d/model"
S=examples/dance_grpo_scorer.yaml
expect "override reward.scorer_path=$d/model,$d/gone: reward.scorer_path: $d/gone: no such directory" \
    $S model.init_from="$d/model" reward.scorer_path="$d/model,$d/gone"
expect "reward.judge_path: $d/gone: no such directory" $S model.init_from="$d/model" \
    reward.scorer_path="$d/model" reward.judge_path="$d/gone"
# a scorer the reward does not use is not read, so not checked
CL=examples/cluster-local.yaml accept examples/dance_grpo_jpeg.yaml model.init_from="$d/model" \
    reward.scorer_path="$d/gone" data.fid_model=
# the FID's network is read by the driver: checked with or without a cluster
expect "data.fid_model: $d/gone: no such directory (train it with examples/fmnist_cnn.yaml)" \
    examples/dance_grpo_jpeg.yaml model.init_from="$d/model" data.fid_model="$d/gone"
expect "override algorithm.demos=$d/nope.safetensors: algorithm.demos: $d/nope.safetensors: no such file" \
    examples/libero_object_flowsar.yaml model.init_from="$d/model" algorithm.demos="$d/nope.safetensors"
expect "algorithm.demos: $d/empty_dir: is a directory, not a file" \
    examples/libero_object_flowsar.yaml model.init_from="$d/model" algorithm.demos="$d/empty_dir"
expect "override data.dir=$d/nope: data.dir: $d/nope: no such directory" examples/fmnist_scorer.yaml \
    data.dir="$d/nope"
expect "override data.train_offset=60000: data.train_offset: must be in [0, 59999], got 60000" \
    examples/fmnist_cnn.yaml data.train_offset=60000
printf 'trainer:\n  recipe: scorer_train\nmodel:\n  type: image_cnn\ndata:\n  train_offset: -1\n' >"$d/offset.yaml"
expect "$d/offset.yaml:6:17: data.train_offset: must be in [0, 59999], got -1" "$d/offset.yaml"
printf 'trainer:\n  recipe: flow_pretrain\nmodel:\n  type: clip_flow\n  trunk: conv\n  height: 30\n' >"$d/conv.yaml"
expect "$d/conv.yaml:5:10: model.trunk: model.trunk conv halves the image twice: model.height 30 and model.width 28 must be multiples of 4" "$d/conv.yaml"
CL=examples/cluster-libero.yaml expect "override env.data_dir=$d/nope: env.data_dir: $d/nope: no such directory" \
    examples/libero_collect.yaml env.data_dir="$d/nope"
# the driver's own reads are checked without a cluster too; the workers' are
# left to them, and --check says so
out=$("$BIN/rl-driver" --check --config examples/libero_object_flowsar.yaml model.init_from="$d/nope" \
    algorithm.demos="$d/nope.safetensors" 2>&1) && fail "--check: missing demonstrations accepted"
echo "$out" | grep -qF "algorithm.demos: $d/nope.safetensors: no such file" || fail "--check printed: $out"
CL= accept $G model.init_from="$d/nope"
echo "$got" | grep -qF "(left to the workers, which read them on their nodes: model.init_from)" ||
    fail "--check without a cluster does not say it left model.init_from to the workers: $got"
# a cluster whose roles run on ssh and external nodes: their paths may be
# local to those nodes, so the driver leaves them to the workers
CL=examples/cluster-two-node.yaml accept $G model.init_from="$d/nope"
echo "$got" | grep -qF "left to the workers, which read them on their nodes: model.init_from" ||
    fail "an ssh cluster's worker path was not left to the workers: $got"

echo "$n bad jobs refused before any worker started"
