#!/bin/bash
# bench_async.sh — `make bench-async`: the same GRPO job run synchronously
# (trainer.staleness=0) and one step off (trainer.staleness=1 with TIS), from
# one SFT warm start, in one bench run. Four arms, each run twice in the
# order sync, pinned_sync, async, async_shared, async_shared_2, async_2,
# pinned_sync_2, sync_2 (so a drift of the machine's speed over the bench
# weighs on every arm alike; the repeats also show whether each run is
# deterministic):
#   sync          the synchronous loop on RL_BENCH_ASYNC_CLUSTER: every role
#                 may use every core, and each phase has them all in turn
#   pinned_sync   the synchronous loop on the pinned cluster (below)
#   async         one step off on the pinned cluster: the rollout on its own
#                 cores samples the next step while the actor trains
#   async_shared  one step off on RL_BENCH_ASYNC_CLUSTER: rollout and actor
#                 share every core
# The pinned cluster is written into the run folder once the first sync run
# is done: rollout on cores [0, r), the two actor ranks on the two halves of
# [r, n) (both on the one core left when only one is), reward unpinned
# (cluster.yaml `cpus:`, rlrt/runtime/cpus.h). r = RL_BENCH_ASYNC_ROLLOUT_CORES,
# by default the rollout's share of that sync run's step (n × gen / step,
# rounded, within 1 .. n−1): with work that scales with its cores, both sides
# of the overlapped step then take about as long. RL_BENCH_ASYNC_PIN=0 runs
# the async arm on RL_BENCH_ASYNC_CLUSTER and leaves out pinned_sync and
# async_shared.
# Prints
#   bench: async_step_time_ratio = X   (async / sync: mean step time, both runs of each)
#   bench: async_step_time_ratio_pinned_sync = X   (async / pinned_sync)
#   bench: async_shared_step_time_ratio = X        (async_shared / sync)
#   bench: async_val_acc_delta = X     (final val accuracy async − sync)
# and writes its section of docs/RESULTS.md (bench/bench_async_report.py).
#
# Knobs (environment):
#   RL_BENCH_ASYNC_STEPS (default 100)     RL steps per run
#   RL_BENCH_ASYNC_SFT_STEPS (default 300) warm-start steps
#   RL_BENCH_ASYNC_TIS (default 2.0)       algorithm.tis_imp_ratio_cap of the async run
#   RL_BENCH_ASYNC_DIR (default runs/bench_async)
#   RL_BENCH_ASYNC_OUT (default docs/RESULTS.md)
#   RL_BENCH_ASYNC_CLUSTER (default examples/cluster-local.yaml)
#   RL_BENCH_ASYNC_PIN (default 1)         0: no pinned cluster (see above)
#   RL_BENCH_ASYNC_ROLLOUT_CORES (default: from the sync run, above)  the rollout's
#                                          cores in the pinned cluster
#   RL_BENCH_ASYNC_ROLLOUT_RANKS (default 1)    rollout ranks sharing them; above 1 the
#                                          sync arm runs on a cluster with the same ranks
#   RL_BENCH_ASYNC_EXTRA                   extra overrides for every RL run
#   RL_BENCH_ASYNC_STALENESS (default 1)   trainer.staleness of the async arms
#   RL_BENCH_ASYNC_PARTIAL (default 0)     1: the async arms with rollout.partial_rollouts
#                                          (docs/decisions/partial-rollouts.md); with
#                                          either knob off its default the page section is
#                                          bench-async-partial-s<S>-<n>cores (or -s<S>-)
#                                          and the bench: names start with partial_s<S>_
#                                          (or s<S>_) instead of async_
#   RL_BENCH_COMMIT                        the commit to name when the tree has no .git
#                                          (a copy on another machine)
# The page's section is named for the core count (bench-async-<n>cores), so
# a page can hold the runs of machines of different sizes side by side.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${RL_BENCH_ASYNC_STEPS:-100}
SFT_STEPS=${RL_BENCH_ASYNC_SFT_STEPS:-300}
TIS=${RL_BENCH_ASYNC_TIS:-2.0}
DIR=${RL_BENCH_ASYNC_DIR:-runs/bench_async}
OUT=${RL_BENCH_ASYNC_OUT:-docs/RESULTS.md}
CLUSTER=${RL_BENCH_ASYNC_CLUSTER:-examples/cluster-local.yaml}
EXTRA=${RL_BENCH_ASYNC_EXTRA:-}
PIN=${RL_BENCH_ASYNC_PIN:-1}
STALENESS=${RL_BENCH_ASYNC_STALENESS:-1}
PARTIAL=${RL_BENCH_ASYNC_PARTIAL:-0}
ASYNC_KEYS="trainer.staleness=$STALENESS"
[ "$PARTIAL" = 1 ] && ASYNC_KEYS="$ASYNC_KEYS rollout.partial_rollouts=true"
SECTION=bench-async
if [ "$STALENESS" != 1 ] || [ "$PARTIAL" = 1 ]; then
    SECTION=bench-async-$([ "$PARTIAL" = 1 ] && echo partial-)s$STALENESS
fi
PY=${RL_BENCH_PYTHON:-/usr/bin/python3}
DRIVER="$BUILD/bin/rl-driver"
[ -x "$DRIVER" ] || { echo "bench-async: $DRIVER not built (make)"; exit 2; }
[ -x "$PY" ] || { echo "bench-async: $PY not found (the page generator needs it)"; exit 2; }
case "$DIR" in ""|/|.) echo "bench-async: refusing RL_BENCH_ASYNC_DIR='$DIR'"; exit 2 ;; esac
rm -rf "$DIR"
mkdir -p "$DIR"
RUNS="$DIR/runs.tsv"
printf 'name\tkind\testimator\twarm\tseed\twall_s\trc\tcommand\n' >"$RUNS"
{
    echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo "${RL_BENCH_COMMIT:-unknown}")"
    echo "dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -c .)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "steps=$STEPS"
    echo "sft_steps=$SFT_STEPS"
    echo "tis=$TIS"
    echo "extra=$EXTRA"
    echo "staleness=$STALENESS"
    echo "partial=$PARTIAL"
    echo "cluster=$CLUSTER"
    echo "pin=$PIN"
    echo "rollout_cores=${RL_BENCH_ASYNC_ROLLOUT_CORES:-}"
    echo "rollout_ranks=${RL_BENCH_ASYNC_ROLLOUT_RANKS:-1}"
} >"$DIR/env.txt"
# the pinned cluster: the driver's section and nodes of $CLUSTER are not
# needed (one machine, local launch); the roles get their own cores
NCPU=$(nproc)
span() { [ "$1" = "$2" ] && echo "$1" || echo "$1-$2"; } # span LO HI: a CPU list
# bench_cluster N R K PIN: K rollout ranks sharing cores [0, R) in equal
# parts, the two actor ranks on the halves of [R, N), two reward ranks
# anywhere; PIN 0 writes the same ranks without cpus
bench_cluster() {
    local n=$1 r=$2 k=$3 pin=$4 m a0 a1 i lo hi
    m=$(( r + (n - r + 1) / 2 ))
    if [ $((n - r)) -ge 2 ]; then
        a0=$(span "$r" $((m - 1))); a1=$(span "$m" $((n - 1)))
    else
        a0=$(span "$r" $((n - 1))); a1=$a0
    fi
    cpus() { [ "$pin" = 0 ] || printf ', cpus: "%s"' "$1"; }
    echo "# written by bench/bench_async.sh for $n cores$([ "$pin" = 0 ] || echo ": rollout and actor on cores of their own")"
    echo "driver: {bind: 127.0.0.1, port: 5555}"
    echo "nodes: [{name: local, address: 127.0.0.1, launch: local}]"
    echo "roles:"
    echo "  rollout:"
    echo "    count: $k"
    echo "    placement:"
    for ((i = 0; i < k; i++)); do
        lo=$(( i * r / k )); hi=$(( (i + 1) * r / k - 1 ))
        echo "      - {rank: $i, node: local$(cpus "$(span $lo $hi)")}"
    done
    echo "  actor:"
    echo "    count: 2"
    echo "    placement:"
    echo "      - {rank: 0, node: local$(cpus "$a0")}"
    echo "      - {rank: 1, node: local$(cpus "$a1")}"
    echo "  reward: {count: 2, node: local}"
}
ACLUSTER=$CLUSTER
RRANKS=${RL_BENCH_ASYNC_ROLLOUT_RANKS:-1}
if [ "$PIN" != 0 ] && [ "$NCPU" -lt 2 ]; then
    echo "bench-async: pinning needs 2 cores or more (RL_BENCH_ASYNC_PIN=0)"; exit 2
fi
if ! [ "$RRANKS" -ge 1 ] 2>/dev/null; then
    echo "bench-async: RL_BENCH_ASYNC_ROLLOUT_RANKS=$RRANKS: expected an integer >= 1"; exit 2
fi
if [ "$PIN" != 0 ] && [ "$RRANKS" != 1 ]; then # the sync arm: the same ranks, on every core
    CLUSTER="$DIR/cluster-shared.yaml"
    bench_cluster "$NCPU" "$RRANKS" "$RRANKS" 0 >"$CLUSTER"
fi
# pin_cluster R: checks R against the cores and the rollout ranks, writes
# the pinned cluster with the rollout on cores [0, R)
pin_cluster() {
    local RCORES=$1
    if ! [ "$RCORES" -ge 1 ] 2>/dev/null || [ "$RCORES" -ge "$NCPU" ]; then
        echo "bench-async: RL_BENCH_ASYNC_ROLLOUT_CORES=$RCORES: expected 1 .. $((NCPU - 1))"; return 2
    fi
    if [ "$RRANKS" -gt "$RCORES" ]; then
        echo "bench-async: RL_BENCH_ASYNC_ROLLOUT_RANKS=$RRANKS: expected 1 .. $RCORES (a core each at least)"; return 2
    fi
    ACLUSTER="$DIR/cluster-pinned.yaml"
    bench_cluster "$NCPU" "$RCORES" "$RRANKS" 1 >"$ACLUSTER"
    echo "pinned_cluster=$ACLUSTER" >>"$DIR/env.txt"
    echo "rollout_cores_used=$RCORES" >>"$DIR/env.txt"
}
now() { date +%s.%N; }
run() {
    local name=$1 kind=$2 cluster=$3
    shift 3
    # a free port of its own, so the bench can run beside other jobs
    local cmd=("$DRIVER" --cluster "$cluster" --bind 'tcp://127.0.0.1:*' --log-level warn "$@")
    echo "bench-async: $name: ${cmd[*]}"
    local t0 rc wall
    t0=$(now)
    "${cmd[@]}" >"$DIR/$name.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}')
    printf '%s\t%s\tgrpo\t1\t1\t%s\t%s\t%s\n' "$name" "$kind" "$wall" "$rc" "${cmd[*]}" >>"$RUNS"
    [ $rc = 0 ] || { echo "bench-async: $name failed (exit $rc)"; tail -5 "$DIR/$name.log"; }
    return $rc
}
t_all=$(now)
run sft sft "$CLUSTER" --config examples/arith_sft.yaml trainer.output_dir="$DIR/sft" \
    trainer.total_steps="$SFT_STEPS" || exit 1
common=(--config examples/arith_grpo.yaml model.init_from="$DIR/sft/final"
        trainer.total_steps="$STEPS" trainer.save_every=0 trainer.seed=1)
sync_run() { # sync_run NAME CLUSTER
    # shellcheck disable=SC2086
    run "$1" rl "$2" "${common[@]}" trainer.output_dir="$DIR/$1" trainer.staleness=0 $EXTRA
}
async_run() { # async_run NAME
    # shellcheck disable=SC2086
    run "$1" rl "$ACLUSTER" "${common[@]}" trainer.output_dir="$DIR/$1" $ASYNC_KEYS \
        algorithm.tis_imp_ratio_cap="$TIS" $EXTRA
}
async_shared_run() { # async_shared_run NAME: one step off on every core
    # shellcheck disable=SC2086
    run "$1" rl "$CLUSTER" "${common[@]}" trainer.output_dir="$DIR/$1" $ASYNC_KEYS \
        algorithm.tis_imp_ratio_cap="$TIS" $EXTRA
}
sync_run sync "$CLUSTER"
if [ "$PIN" != 0 ]; then
    split=${RL_BENCH_ASYNC_ROLLOUT_CORES:-$("$PY" bench/bench_async_report.py --dir "$DIR" --split-cores "$NCPU")}
    echo "bench-async: the rollout gets $split of $NCPU cores in the pinned cluster"
    pin_cluster "$split" || exit 2
    sync_run pinned_sync "$ACLUSTER"
fi
async_run async
if [ "$PIN" != 0 ]; then
    async_shared_run async_shared
    async_shared_run async_shared_2
fi
async_run async_2
[ "$PIN" = 0 ] || sync_run pinned_sync_2 "$ACLUSTER"
sync_run sync_2 "$CLUSTER"
{
    echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bench_wall_s=$(awk -v a="$t_all" -v b="$(now)" 'BEGIN{printf "%.0f", b - a}')"
} >>"$DIR/env.txt"
mkdir -p "$(dirname "$OUT")"
"$PY" bench/bench_async_report.py --dir "$DIR" --out "$OUT" --section "$SECTION-${NCPU}cores" ||
    exit 1
! awk -F'\t' 'NR > 1 && $7 != 0 {bad = 1} END {exit !bad}' "$RUNS"
