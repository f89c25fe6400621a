#!/bin/bash
# launch: ssh — the driver runs `ssh HOST rl-worker ...`. A fake ssh on PATH
# (drops options and the host, runs the command locally) stands in for sshd.
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
cat >"$d/ssh" <<'SH'
#!/bin/sh
# fake ssh: ssh [-o opt]... host command
while [ $# -gt 1 ]; do case "$1" in -o) shift 2 ;; -*) shift ;; *) break ;; esac; done
echo "$1" >>"$(dirname "$0")/hosts"
shift
exec sh -c "$*"
SH
chmod +x "$d/ssh"
worker=$(cd "$BIN" && pwd)/rl-worker
cat >"$d/cluster.yaml" <<YAML
driver: {bind: 127.0.0.1, port: 5555}
heartbeat: {interval_s: 0.5, liveness: 3}
nodes:
  - {name: here, address: 127.0.0.1, launch: local}
  - name: remote
    address: 127.0.0.1
    launch: ssh
    ssh: {user: rl, command: "ssh -o BatchMode=yes"}
roles:
  actor: {count: 1, node: here}
  reward: {count: 2, node: remote}
YAML
PATH="$d:$PATH" "$BIN/rl-driver" --cluster "$d/cluster.yaml" --config examples/selftest.yaml \
    --worker "$worker" --bind 'tcp://127.0.0.1:*' selftest.payload_mb=1 >"$d/log" 2>&1
rc=$?
tail -20 "$d/log"
[ $rc = 0 ] || fail "driver exited $rc"
grep -q "started reward/1 (pid [0-9]*, ssh on remote)" "$d/log" || fail "reward not started over ssh"
[ "$(grep -c 'rl@127.0.0.1' "$d/hosts")" = 2 ] || fail "ssh was not called with rl@127.0.0.1 twice"
grep -q "selftest: [0-9]* passed, 0 failed" "$d/log" || fail "selftest failed"
