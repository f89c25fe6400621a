#!/bin/bash
# rl-driver runs the selftest recipe:
#  1. on examples/cluster-local.yaml: every dispatch mode on every role, all
#     checks pass and every worker exits 0;
#  2. on a cluster whose roles have different rank counts (reward x2,
#     rollout x1) and no actor: the data channel pairs reward/0 with
#     rollout/0 (reward/1 idles) and passes; the weight channel, which needs
#     the absent actor role, is reported as SKIP with the reason and counted
#     as skipped, never as passed;
#  3. bad selftest.* values are located config errors before any worker
#     starts.
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT

out=$("$BIN/rl-driver" --cluster examples/cluster-local.yaml --config examples/selftest.yaml \
      --bind 'tcp://127.0.0.1:*' selftest.payload_mb=4 2>&1)
rc=$?
echo "$out" | tail -40
[ $rc = 0 ] || fail "rl-driver exited $rc"
echo "$out" | grep -q "selftest: 29 passed, 0 failed, 0 skipped" || fail "selftest summary missing"
n=$(echo "$out" | grep -c "exited with status 0")
[ "$n" = 5 ] || fail "expected 5 workers to exit 0, saw $n"

cat >"$d/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: 5555}
nodes: [{name: local, address: 127.0.0.1, launch: local}]
roles:
  reward: {count: 2, node: local}
  rollout: {count: 1, node: local}
YAML
out=$("$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
      --bind 'tcp://127.0.0.1:*' selftest.payload_mb=1 'selftest.channel_roles=[reward, rollout]' 2>&1)
rc=$?
echo "$out" | grep -v " INFO " | tail -30
[ $rc = 0 ] || fail "rl-driver exited $rc on roles with different counts"
echo "$out" | grep -Eq "data channel 50x +reward<>rollout +1  pass" ||
    fail "the data channel did not pair reward/0 with rollout/0"
echo "$out" | grep -Eq "weight channel 16 MiB v1 +actor>rollout +0  SKIP .*role actor is not in $d/cluster.yaml" ||
    fail "the weight channel without an actor role is not reported as SKIP with its reason"
echo "$out" | grep -q "selftest: 19 passed, 0 failed, 1 skipped" ||
    fail "the skipped check is not counted as skipped"
echo "$out" | grep -q "(skipped" && fail "a skipped check is reported as a pass"

# bad values: located config errors, no worker started
expect_config_error() { # expect_config_error "message" override...
    local want=$1; shift
    local got
    got=$("$BIN/rl-driver" --cluster examples/cluster-local.yaml --config examples/selftest.yaml \
          --bind 'tcp://127.0.0.1:*' "$@" 2>&1) && fail "'$*' succeeded"
    echo "$got" | grep -qF -- "$want" || fail "'$*' printed: $got -- expected: $want"
    echo "$got" | grep -q "started " && fail "'$*' started workers before failing"
    return 0
}
expect_config_error "override selftest.rows=-3: selftest.rows: must be in [1, 1048576], got -3" \
    selftest.rows=-3
expect_config_error "override selftest.rounds=-5: selftest.rounds: must be in [1, 1000000000], got -5" \
    selftest.rounds=-5
expect_config_error "override selftest.payload_mb=100000000: selftest.payload_mb: must be in [1, 1024], got 100000000" \
    selftest.payload_mb=100000000
expect_config_error "override selftest.payload_mb=1e8: expected an integer, got '1e8'" \
    selftest.payload_mb=1e8
expect_config_error "selftest.channel_roles: expected two role names, got 1" \
    'selftest.channel_roles=[rollout]'
printf 'trainer:\n  recipe: selftest\nselftest:\n  weight_mb: 0\n' >"$d/job.yaml"
expect_config_error "$d/job.yaml:4:14: selftest.weight_mb: must be in [1, 1024], got 0" \
    --config "$d/job.yaml"
