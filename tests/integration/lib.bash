# tests/integration/lib.sh — helpers for the integration scripts (sourced).
BUILD=${BUILD:-build}
BIN="$BUILD/bin"
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "$*"; exit 77; }
tmpdir() { mktemp -d "${TMPDIR:-/tmp}/rlrt-it.XXXXXX"; }
# no_workers_of ENDPOINT: fails if any rl-worker still talks to ENDPOINT
no_workers_of() {
    local left
    left=$(pgrep -f -- "--driver $1" || true)
    [ -z "$left" ] || { ps -o pid,args -p $left >&2; fail "workers left behind for $1"; }
}
