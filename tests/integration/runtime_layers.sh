#!/bin/bash
# The runtime's layering, checked on the sources: common/runtime and its
# headers include nothing of the nn layer, name no application role, and
# the test methods live in rl-worker, not in librlrt.
. "$(dirname "$0")/lib.bash"
hits=$(grep -rn 'rlrt/nn' common/runtime include/rlrt/runtime)
[ -z "$hits" ] || fail "the runtime includes the nn layer: $hits"
hits=$(grep -rnE '"(rollout|actor|reward|env)"|RL_ROLE_' common/runtime include/rlrt/runtime)
[ -z "$hits" ] || fail "the runtime names application roles: $hits"
lib="$BUILD/lib/librlrt.a"
[ -f "$lib" ] || fail "$lib not built"
for sym in rl_builtin_methods rl_test_methods rl_param_shard_range; do
    nm -g --defined-only "$lib" 2>/dev/null | grep -qw "$sym" && fail "librlrt defines $sym"
done
nm -g --defined-only "$lib" | grep -qw rl_shard_range || fail "librlrt lacks rl_shard_range"
exit 0
