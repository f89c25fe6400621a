#!/bin/bash
# docs/CONFIG.md is what `rl-driver config-doc` prints from the schemas
# (common/schema/): regenerate it with `make config-doc` after changing a key.
. "$(dirname "$0")/lib.bash"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
"$BIN/rl-driver" config-doc >"$out/CONFIG.md" || fail "rl-driver config-doc failed"
diff -u docs/CONFIG.md "$out/CONFIG.md" >"$out/diff" ||
    { head -40 "$out/diff"; fail "docs/CONFIG.md is stale: run make config-doc"; }
exit 0
