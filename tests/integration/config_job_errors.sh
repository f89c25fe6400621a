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

echo "$n bad jobs refused before any worker started"
