#!/bin/bash
# Every example job passes `rl-driver --check` (known keys, ranges, the
# recipe's own checks) with its cluster file, and a bad value is refused
# with its location; the warm start, whose demonstrations another example
# collects, fails naming the command that makes them.
. "$(dirname "$0")/lib.bash"
root=$PWD
work=$(tmpdir)
trap 'rm -rf "$work"' EXIT
cd "$work" || fail "no temp dir"
# the jobs of your own model read files examples/hf_grpo.sh prepares: a row
# of the built-in task stands in for them
printf '%s\n' '{"prompt": "Q: 1+2=?\nA: ", "ground_truth": "3", "solution": "<think>1+2=3</think>\\boxed{3}"}' >hf.jsonl
n=0
for f in "$root"/examples/*.yaml; do
    grep -q '^ *recipe:' "$f" || continue
    name=$(basename "$f")
    more=()
    case $name in hf_*.yaml) more=(data.train_files=hf.jsonl data.val_files=hf.jsonl data.tokenizer=arith) ;; esac
    out=$("$root/$BIN/rl-driver" --check --config "$f" "${more[@]}" 2>&1)
    rc=$?
    case $name in
    libero_warmstart.yaml)
        [ $rc != 0 ] && grep -q 'collect them with examples/libero_collect.yaml' <<<"$out" ||
            fail "$name: expected the missing-demonstrations error, got ($rc): $out" ;;
    *) [ $rc = 0 ] || fail "$name: $out" ;;
    esac
    n=$((n + 1))
done
[ "$n" -ge 20 ] || fail "only $n example jobs found"
out=$("$root/$BIN/rl-driver" --check --cluster "$root/examples/cluster-local.yaml" \
    --config "$root/examples/arith_grpo.yaml" 2>&1) || fail "cluster check: $out"
out=$("$root/$BIN/rl-driver" --check --config "$root/examples/arith_grpo.yaml" actor.ppo_epochs=0 2>&1) &&
    fail "actor.ppo_epochs=0 accepted"
grep -q 'override actor.ppo_epochs=0: actor.ppo_epochs: must be in \[1, 10000\], got 0' <<<"$out" ||
    fail "unexpected message: $out"
echo "$n example jobs checked"
exit 0
