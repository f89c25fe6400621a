#!/bin/bash
# bench_scale.sh — `make bench-scale`: how each cost of the single controller
# grows with the number of workers (bench/bench_scale.c runs jobs of N =
# RL_BENCH_SCALE_NS rl-worker processes on this machine), then
# bench/bench_scale_report.py writes docs/RESULTS.md's section between
# <!-- bench-scale:begin --> and <!-- bench-scale:end --> and one PNG per
# cost against N (docs/scale_*.png; needs matplotlib in the first of
# /usr/bin/python3, build/venv-ref, build/venv-libero that has it).
#   bench: dispatch_p50_256_over_8      dp_compute p50 at the largest N over N = 8 (target <= 32)
#   bench: driver_rss_per_worker_kib    driver RSS growth per worker at the largest N (target <= 1024)
#   bench: fanout_256_over_1            chain broadcast to the largest N over to 1 receiver (target <= 2),
#                                       across network namespaces with rate-limited links
#                                       (bench/bench_scale_netns.sh; _loopback: all on this machine)
#   bench: driver_overhead_share_256    driver CPU per step of the real LM job over its step time,
#                                       at 257 workers (bench/bench_scale_lm.py); _relay: its
#                                       workers on nodes of 8 behind relays (relay: true)
#   bench: dispatch_p50_256_over_8_relay, driver_cpu_per_worker_relay_over_direct_256
#                                       the dispatch again with relays of RL_BENCH_SCALE_RELAY (8)
# Knobs: RL_BENCH_SCALE_NS (default "1 8 32 128 256"), RL_BENCH_SCALE_CALLS,
# RL_BENCH_SCALE_IDLE_S, RL_BENCH_SCALE_FANOUT_MIB (see bench_scale.c).
set -eu
BUILD=${BUILD:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlrt-bench-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "ulimit -n $(ulimit -n), ulimit -u $(ulimit -u), pid_max $(cat /proc/sys/kernel/pid_max)"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
rc=0
BUILD=$BUILD "$BUILD/bench/bench_scale" 2>"$tmp/err.txt" | tee "$tmp/scale.txt" || rc=$?
[ $rc = 0 ] || { tail -20 "$tmp/err.txt"; echo "bench_scale exited $rc"; }
# the same dispatch with the workers on nodes of 8, each behind a relay
# (cluster.yaml relay: true): its measures as relay_*
RL_BENCH_SCALE_ONLY_DISPATCH=1 RL_BENCH_SCALE_RELAY=${RL_BENCH_SCALE_RELAY:-8} BUILD=$BUILD \
    "$BUILD/bench/bench_scale" 2>"$tmp/relay_err.txt" | sed 's/^bench: /bench: relay_/' |
    tee -a "$tmp/scale.txt" || { tail -20 "$tmp/relay_err.txt"; rc=1; }
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# remote nodes: network namespaces with rate-limited links (root only; says why when skipped)
BUILD=$BUILD bench/bench_scale_netns.sh "$tmp/netns.txt" 2>"$tmp/netns_err.txt" || {
    tail -20 "$tmp/netns_err.txt"; rc=1; }
cat "$tmp/netns.txt" >>"$tmp/scale.txt"
# a driver restart with 256 external workers running
BUILD=$BUILD bench/bench_scale_restart.sh "$tmp/restart.txt" >"$tmp/restart_log.txt" 2>&1 || {
    tail -30 "$tmp/restart_log.txt"; rc=1; }
cat "$tmp/restart.txt" >>"$tmp/scale.txt" 2>/dev/null
# the driver's share of a step of the real LM job
/usr/bin/python3 bench/bench_scale_lm.py "$BUILD" "$tmp/lm.txt" || rc=1
cat "$tmp/lm.txt" >>"$tmp/scale.txt" 2>/dev/null
py=""
for p in /usr/bin/python3 "$BUILD/venv-ref/bin/python" "$BUILD/venv-libero/bin/python"; do
    if [ -x "$p" ] && "$p" -c "import matplotlib" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "no python with matplotlib: the plots are not written"; py=python3; }
"$py" bench/bench_scale_report.py "$tmp/scale.txt" "$load0" "$load1" "$(nproc)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
exit $rc
