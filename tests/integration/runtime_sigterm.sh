#!/bin/bash
# SIGTERM to the driver in the middle of a long selftest: SHUTDOWN reaches
# every worker, every process exits 0 and none is left behind.
. "$(dirname "$0")/lib.bash"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
"$BIN/rl-driver" --cluster examples/cluster-local.yaml --config examples/selftest.yaml \
    --bind 'tcp://127.0.0.1:*' selftest.rounds=100000 selftest.payload_mb=1 >"$d/log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "running selftest" "$d/log" && break; sleep 0.1; done
grep -q "running selftest" "$d/log" || { cat "$d/log"; fail "driver did not start"; }
sleep 0.5
[ -n "$(pgrep -P $pid)" ] || fail "no worker found"
endpoint=$(tr '\0' ' ' </proc/$(pgrep -P $pid | head -1)/cmdline | grep -Eo '(tcp|ipc)://[^ ]*')
kill -TERM $pid
wait $pid
rc=$?
tail -20 "$d/log"
[ $rc = 0 ] || fail "driver exited $rc after SIGTERM"
n=$(grep -c "exited with status 0" "$d/log")
[ "$n" = 5 ] || fail "expected 5 workers to exit 0, saw $n"
grep -q "interrupted: shutting down cleanly" "$d/log" || fail "no clean-shutdown message"
sleep 0.2
no_workers_of "$endpoint"
