#!/bin/bash
# Every example job passes `rl-driver --check` (known keys, ranges, the
# recipe's own checks, the input paths the driver reads) with its cluster
# file, and a bad value is refused with its location. It runs in an empty
# folder whose build/ is the checkout's (the examples name build/libero-data):
# a job whose input another example makes (the demonstrations of
# examples/libero_collect.yaml, the warm start's model) fails naming the key,
# the path and what makes it; the LIBERO scenes are there after `make
# libero-data`, and without them a job that reads them says so.
. "$(dirname "$0")/lib.bash"
root=$PWD
work=$(tmpdir)
trap 'rm -rf "$work"' EXIT
cd "$work" || fail "no temp dir"
# the jobs of your own model read files examples/hf_grpo.sh prepares: a row
# of the built-in task stands in for them
printf '%s\n' '{"prompt": "Q: 1+2=?\nA: ", "ground_truth": "3", "solution": "<think>1+2=3</think>\\boxed{3}"}' >hf.jsonl
ln -s "$root/build" build
n=0 waiting=0
for f in "$root"/examples/*.yaml; do
    grep -q '^ *recipe:' "$f" || continue
    name=$(basename "$f")
    more=()
    case $name in hf_*.yaml) more=(data.train_files=hf.jsonl data.val_files=hf.jsonl data.tokenizer=arith) ;; esac
    out=$("$root/$BIN/rl-driver" --check --config "$f" "${more[@]}" 2>&1)
    rc=$?
    n=$((n + 1))
    [ $rc = 0 ] && continue
    if grep -q 'data.fid_model: runs/fmnist_cnn/final: no such directory (train it with examples/fmnist_cnn.yaml)' <<<"$out"; then
        # the FID's network comes from examples/fmnist_cnn.yaml: the rest of the job still checked
        out=$("$root/$BIN/rl-driver" --check --config "$f" "${more[@]}" data.fid_model= 2>&1) && continue
    fi
    waiting=$((waiting + 1))
    if grep -q 'runs/libero_demos/demos.safetensors: .*collect them with examples/libero_collect.yaml' <<<"$out"; then
        continue # warmstart.demos, algorithm.demos: an example collects them
    fi
    if [ ! -d "$root/build/libero-data" ] &&
        grep -q 'env.data_dir: build/libero-data: no such directory (the LIBERO-Object scenes: make libero-data)' <<<"$out"; then
        continue
    fi
    fail "$name: $out"
done
[ "$n" -ge 20 ] || fail "only $n example jobs found"
[ "$waiting" -le 4 ] || fail "$waiting example jobs wait for another's output"
# with a cluster whose workers the driver spawns here, their paths too
out=$("$root/$BIN/rl-driver" --check --cluster "$root/examples/cluster-local.yaml" \
    --config "$root/examples/arith_grpo.yaml" 2>&1) && fail "cluster check: a missing warm start passed"
grep -q 'arith_grpo.yaml:12:14: model.init_from: runs/arith_sft/final: no such directory' <<<"$out" ||
    fail "cluster check: $out"
out=$("$root/$BIN/rl-driver" --check --cluster "$root/examples/cluster-local.yaml" \
    --config "$root/examples/arith_grpo.yaml" model.init_from= 2>&1) || fail "cluster check: $out"
out=$("$root/$BIN/rl-driver" --check --config "$root/examples/arith_grpo.yaml" actor.ppo_epochs=0 2>&1) &&
    fail "actor.ppo_epochs=0 accepted"
grep -q 'override actor.ppo_epochs=0: actor.ppo_epochs: must be in \[1, 10000\], got 0' <<<"$out" ||
    fail "unexpected message: $out"
echo "$n example jobs checked ($waiting wait for another example's output)"
exit 0
