#!/bin/bash
# rl-driver runs the selftest recipe on examples/cluster-local.yaml: every
# dispatch mode on every role; all processes exit 0.
. "$(dirname "$0")/lib.bash"
out=$("$BIN/rl-driver" --cluster examples/cluster-local.yaml --config examples/selftest.yaml \
      --bind 'tcp://127.0.0.1:*' selftest.payload_mb=4 2>&1)
rc=$?
echo "$out" | tail -40
[ $rc = 0 ] || fail "rl-driver exited $rc"
echo "$out" | grep -q "selftest: 28 passed, 0 failed" || fail "selftest summary missing"
n=$(echo "$out" | grep -c "exited with status 0")
[ "$n" = 5 ] || fail "expected 5 workers to exit 0, saw $n"
