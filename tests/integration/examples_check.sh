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
n=0
for f in "$root"/examples/*.yaml; do
    grep -q '^ *recipe:' "$f" || continue
    name=$(basename "$f")
    out=$("$root/$BIN/rl-driver" --check --config "$f" 2>&1)
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
