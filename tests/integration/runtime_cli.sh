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
# OpenMP wait policy (common/nn/engine/ops.h): with none set, rl-worker re-executes
# itself with OMP_WAIT_POLICY=passive (same pid, same program and argv); a
# policy the user set is kept as it is.
settled_var() { # settled_var PID VAR: VAR's value in the environment of PID once its re-execs are done
    local got="" i
    for i in $(seq 100); do
        got=$(tr '\0' '\n' </proc/$1/environ 2>/dev/null | grep "^$2=")
        [ -n "$got" ] && break
        sleep 0.05
    done
    sleep 0.3 # after a re-exec, if one were still to come
    got=$(tr '\0' '\n' </proc/$1/environ 2>/dev/null | grep "^$2=")
    echo "${got#"$2"=}"
}
policy_of() { # policy_of [VAR=value]: OMP_WAIT_POLICY of a worker waiting for a driver
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$BIN/rl-worker" --role actor \
        --driver tcp://127.0.0.1:1 --give-up-s 30 --log-level error >/dev/null 2>&1 &
    local pid=$! got
    got=$(settled_var $pid OMP_WAIT_POLICY)
    local exe args
    exe=$(readlink /proc/$pid/exe)
    args=$(tr '\0' ' ' </proc/$pid/cmdline)
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ "$exe" = "$(readlink -f "$BIN/rl-worker")" ] || fail "worker pid $pid runs '$exe' after the re-exec"
    case "$args" in *"--role actor --driver tcp://127.0.0.1:1 --give-up-s 30"*) ;;
    *) fail "worker argv after the re-exec: '$args'" ;; esac
    echo "$got"
}
p=$(policy_of)
[ "$p" = passive ] || fail "rl-worker with no wait policy set runs with OMP_WAIT_POLICY='$p', expected passive"
p=$(policy_of OMP_WAIT_POLICY=active)
[ "$p" = active ] || fail "rl-worker with OMP_WAIT_POLICY=active runs with '$p'"
p=$(policy_of GOMP_SPINCOUNT=1000)
[ -z "$p" ] || fail "rl-worker with GOMP_SPINCOUNT set got OMP_WAIT_POLICY='$p' (the user's setting must be left alone)"
# --cpus (rlrt/runtime/cpus.h): a malformed list, or a core this process may
# not use, is a usage error naming it
expect "rl-worker: --cpus: cpus '1-0': range 1-0 runs backwards" \
    "$BIN/rl-worker" --role actor --driver tcp://127.0.0.1:1 --cpus 1-0
expect "rl-worker: --cpus: cpus '1023': this process may not run on cpu 1023 (it may use " \
    "$BIN/rl-worker" --role actor --driver tcp://127.0.0.1:1 --cpus 1023
# a bound worker runs on its cores, with OMP_NUM_THREADS = their number set
# by its re-exec (libgomp reads it when it loads) unless the user set it
worker_cores() { # worker_cores [VAR=value...] -- ARGS...: "<Cpus_allowed_list> <OMP_NUM_THREADS>"
    local envs=() # of a worker started with ARGS, waiting for a driver
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env -u OMP_NUM_THREADS "${envs[@]}" "$BIN/rl-worker" --role actor --driver tcp://127.0.0.1:1 \
        --give-up-s 30 --log-level error "$@" >/dev/null 2>&1 &
    local pid=$! nt cpus
    nt=$(settled_var $pid OMP_NUM_THREADS)
    cpus=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/$pid/status 2>/dev/null)
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    echo "$cpus $nt"
}
bound_of() { worker_cores "$@" -- --cpus 0; } # bound_of [VAR=value]: a worker with --cpus 0
b=$(bound_of)
[ "$b" = "0 1" ] || fail "rl-worker --cpus 0 runs on cpus/threads '$b', expected '0 1'"
b=$(bound_of OMP_WAIT_POLICY=passive) # no wait-policy re-exec: the thread count's own
[ "$b" = "0 1" ] || fail "rl-worker --cpus 0 with OMP_WAIT_POLICY set runs on '$b', expected '0 1'"
b=$(bound_of OMP_NUM_THREADS=3)
[ "$b" = "0 3" ] || fail "rl-worker --cpus 0 with OMP_NUM_THREADS=3 runs on '$b', expected '0 3'"
selftest_on() { # selftest_on CLUSTER: the selftest job's output on that cluster
    env -u OMP_NUM_THREADS "$BIN/rl-driver" --cluster "$1" --config $J \
        --bind 'tcp://127.0.0.1:*' selftest.payload_mb=1 selftest.weight_mb=1 2>&1
}
# a job whose cluster pins its roles: the driver passes --cpus (the slot
# token survives the worker's re-exec), every rank says where it runs
cat >"$d/pinned.yaml" <<'YAML'
driver: {bind: 127.0.0.1, port: 5555}
nodes: [{name: local, address: 127.0.0.1, launch: local}]
roles:
  rollout: {count: 1, node: local, cpus: "0"}
  actor:
    count: 2
    placement:
      - {rank: 0, node: local, cpus: "0"}
      - {rank: 1, node: local}
  reward: {count: 1, node: local, cpus: "0"}
YAML
out=$(selftest_on "$d/pinned.yaml") ||
    fail "the selftest on a pinned cluster failed: $(echo "$out" | tail -20)"
n=$(echo "$out" | grep -c "on cpus 0: 1 compute threads")
[ "$n" = 3 ] || fail "$n ranks said 'on cpus 0: 1 compute threads', expected 3 (rollout 0, actor 0, reward 0): $(echo "$out" | grep -i cpus)"
if echo "$out" | grep "actor/1" | grep -q "on cpus"; then
    fail "actor rank 1 (no cpus) says it was bound"
fi
# --share-cores K (the driver passes it to the K unpinned ranks of a role on
# one node): a pool of 1/K of the cores each, at least one thread, unless
# the user set OMP_NUM_THREADS
expect "rl-worker: --share-cores '0': expected an integer in [1, 1024]" \
    "$BIN/rl-worker" --role actor --driver tcp://127.0.0.1:1 --share-cores 0
expect "rl-worker: --share-cores (RL_SHARE_CORES) 'x': expected an integer in [1, 1024]" \
    env RL_SHARE_CORES=x "$BIN/rl-worker" --role actor --driver tcp://127.0.0.1:1
threads_of() { # threads_of K [VAR=value]: OMP_NUM_THREADS of a worker with --share-cores K
    local k=$1
    shift
    worker_cores "$@" -- --share-cores "$k" | cut -d' ' -f2
}
ncores=$(nproc)
want=$(( ncores / 2 > 0 ? ncores / 2 : 1 ))
t=$(threads_of 2)
[ "$t" = "$want" ] || fail "rl-worker --share-cores 2 on $ncores cores runs $t threads, expected $want"
t=$(threads_of 2 OMP_NUM_THREADS=3)
[ "$t" = 3 ] || fail "rl-worker --share-cores 2 with OMP_NUM_THREADS=3 runs '$t' threads, expected 3"
t=$(threads_of 1)
[ -z "$t" ] || fail "rl-worker --share-cores 1 set OMP_NUM_THREADS=$t (one rank: every core)"
# a job with two unpinned actor ranks on one node: the driver passes
# --share-cores 2 to each, not to the lone rollout and reward ranks
cat >"$d/shared.yaml" <<'YAML'
driver: {bind: 127.0.0.1, port: 5555}
nodes: [{name: local, address: 127.0.0.1, launch: local}]
roles:
  rollout: {count: 1, node: local}
  actor: {count: 2, node: local}
  reward: {count: 1, node: local}
YAML
out=$(selftest_on "$d/shared.yaml") ||
    fail "the selftest on a cluster with two unpinned actor ranks failed: $(echo "$out" | tail -20)"
n=$(echo "$out" | grep -c "$ncores cores shared by 2 ranks of its role: $want compute threads")
[ "$n" = 2 ] || fail "$n ranks said '$ncores cores shared by 2 ranks of its role: $want compute threads', expected 2 (actor 0, 1): $(echo "$out" | grep -i shared)"
if echo "$out" | grep -E "rollout/0|reward/0" | grep -q "shared by"; then
    fail "a lone rollout or reward rank says it shares its cores"
fi
echo "$out" | grep -q "actor .*- (1/2 of the cores)" ||
    fail "the placement table does not show the actor ranks' share: $(echo "$out" | grep -A6 "^role")"
