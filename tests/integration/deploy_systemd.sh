#!/bin/bash
# deploy/systemd: `systemd-analyze verify` accepts both units (with the
# ExecStart paths pointed at this build) and an instance of the template,
# and prints nothing; a broken copy is caught, so this check can fail.
. "$(dirname "$0")/lib.bash"
command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed (Debian package systemd)"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
bin=$(cd "$BIN" && pwd)
for u in deploy/systemd/*.service; do
    sed "s|/usr/local/bin/|$bin/|g" "$u" >"$d/$(basename "$u")"
done
ln -s "rl-worker@.service" "$d/rl-worker@actor-1.service"
out=$(cd "$d" && systemd-analyze verify rl-driver.service rl-worker@.service rl-worker@actor-1.service 2>&1)
rc=$?
[ $rc = 0 ] && [ -z "$out" ] || fail "systemd-analyze verify (exit $rc): $out"
grep -q '^Type=notify' deploy/systemd/rl-driver.service || fail "rl-driver.service is not Type=notify"
grep -q '^WatchdogSec=' deploy/systemd/rl-worker@.service || fail "rl-worker@.service has no watchdog"
# the check can fail: a misspelt key and a missing binary are reported
sed 's/^Type=notify/Typ=notify/' "$d/rl-driver.service" >"$d/bad1.service"
sed "s|$bin/rl-driver|$bin/rl-nope|" "$d/rl-driver.service" >"$d/bad2.service"
for b in bad1 bad2; do
    out=$(cd "$d" && systemd-analyze verify $b.service 2>&1)
    [ -n "$out" ] || fail "systemd-analyze verify did not flag $b.service"
done
# --instance ROLE-RANK, as the template passes %i, is understood by rl-worker
"$BIN/rl-worker" --instance actor-x --driver tcp://127.0.0.1:1 2>"$d/err"
[ $? = 64 ] && grep -q "expected ROLE-RANK" "$d/err" || fail "a bad --instance is not a usage error"
exit 0
