#!/bin/bash
# rl-driver / rl-worker command lines: --help, --version, and the exact
# messages for bad overrides, bad job keys and bad cluster files.
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
expect() { # expect "message" cmd...: cmd must fail and print message
    local want=$1; shift
    local got
    got=$("$@" 2>&1) && fail "'$*' succeeded"
    echo "$got" | grep -qF -- "$want" || fail "'$*' printed: $got -- expected: $want"
}
"$BIN/rl-driver" --help | grep -q "usage: rl-driver" || fail "driver --help"
"$BIN/rl-worker" --help | grep -q "usage: rl-worker" || fail "worker --help"
"$BIN/rl-driver" --version | grep -q "^rl-driver [0-9]" || fail "driver --version"
"$BIN/rl-worker" --version | grep -q "^rl-worker [0-9]" || fail "worker --version"
C=examples/cluster-local.yaml
J=examples/selftest.yaml
expect "override selftest.round=2: unknown key 'selftest.round'; did you mean 'selftest.rounds'?" \
    "$BIN/rl-driver" --cluster $C --config $J selftest.round=2
expect "override selftest.rounds=many: expected an integer, got 'many'" \
    "$BIN/rl-driver" --cluster $C --config $J selftest.rounds=many
expect "argument 'selftest.rounds' is not a key=value override" \
    "$BIN/rl-driver" --cluster $C --config $J selftest.rounds
printf 'trainer:\n  recipe: selftest\nselftest:\n  rowz: 3\n' >"$d/job.yaml"
expect "$d/job.yaml:4:3: unknown key 'selftest.rowz'; did you mean 'selftest.rows'?" \
    "$BIN/rl-driver" --cluster $C --config "$d/job.yaml"
printf 'trainer:\n  recipe: grpo_typo\n' >"$d/job2.yaml"
expect "trainer.recipe: unknown recipe 'grpo_typo'" "$BIN/rl-driver" --cluster $C --config "$d/job2.yaml"
sed 's/^  reward:/  Reward:/' $C >"$d/bad.yaml"
line=$(grep -n '^  Reward:' "$d/bad.yaml" | cut -d: -f1)
expect "$d/bad.yaml:$line:3: roles.Reward: invalid role name 'Reward' (expected [a-z][a-z0-9_]*" \
    "$BIN/rl-driver" --cluster "$d/bad.yaml" --config $J
expect "unknown role 'critic' (this rl-worker serves: rollout, actor, reward, env)" \
    "$BIN/rl-worker" --role critic --driver tcp://127.0.0.1:1
expect "--role and --driver are required" "$BIN/rl-worker" --role actor
expect "--rank 'x1': expected an integer >= 0" "$BIN/rl-worker" --role actor --rank x1 \
    --driver tcp://127.0.0.1:1
"$BIN/rl-worker" --help | grep -q "Serves the methods of ROLE (rollout, actor, reward, env)" ||
    fail "worker --help does not list the registered roles"
# usage errors exit 64 (EX_USAGE)
for args in "--role critic --driver tcp://127.0.0.1:1" "--role actor" "--bogus" \
    "--role actor --driver tcp://127.0.0.1:1 --heartbeat-ms 0"; do
    "$BIN/rl-worker" $args >/dev/null 2>&1
    rc=$?
    [ $rc = 64 ] || fail "rl-worker $args exited $rc, expected 64"
done
# a cluster role that rl-worker does not serve fails the start at once
sed 's/^  reward:/  critic:/' $C >"$d/critic.yaml"
expect "role critic cannot start: rl-worker exited with status 64 (usage error; see its message above)" \
    "$BIN/rl-driver" --cluster "$d/critic.yaml" --config $J --bind 'tcp://127.0.0.1:*'
expect "missing.yaml: cannot open: No such file or directory" "$BIN/rl-driver" --cluster "$d/missing.yaml" --config $J
# OpenMP wait policy (rlrt/nn/ops.h): with none set, rl-worker re-executes
# itself with OMP_WAIT_POLICY=passive (same pid, same program and argv); a
# policy the user set is kept as it is.
policy_of() { # policy_of [VAR=value]: OMP_WAIT_POLICY of a worker waiting for a driver
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$BIN/rl-worker" --role actor \
        --driver tcp://127.0.0.1:1 --give-up-s 30 --log-level error >/dev/null 2>&1 &
    local pid=$! got="" i
    for i in $(seq 100); do
        got=$(tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep '^OMP_WAIT_POLICY=')
        [ -n "$got" ] && break
        sleep 0.05
    done
    sleep 0.3 # after a re-exec, if one were still to come
    got=$(tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep '^OMP_WAIT_POLICY=')
    local exe args
    exe=$(readlink /proc/$pid/exe)
    args=$(tr '\0' ' ' </proc/$pid/cmdline)
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ "$exe" = "$(readlink -f "$BIN/rl-worker")" ] || fail "worker pid $pid runs '$exe' after the re-exec"
    case "$args" in *"--role actor --driver tcp://127.0.0.1:1 --give-up-s 30"*) ;;
    *) fail "worker argv after the re-exec: '$args'" ;; esac
    echo "${got#OMP_WAIT_POLICY=}"
}
p=$(policy_of)
[ "$p" = passive ] || fail "rl-worker with no wait policy set runs with OMP_WAIT_POLICY='$p', expected passive"
p=$(policy_of OMP_WAIT_POLICY=active)
[ "$p" = active ] || fail "rl-worker with OMP_WAIT_POLICY=active runs with '$p'"
p=$(policy_of GOMP_SPINCOUNT=1000)
[ -z "$p" ] || fail "rl-worker with GOMP_SPINCOUNT set got OMP_WAIT_POLICY='$p' (the user's setting must be left alone)"
