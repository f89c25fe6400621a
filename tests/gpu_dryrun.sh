#!/bin/bash
# tests/gpu_dryrun.sh — the device run (`RL_GPU_BENCH=1 tests/gpu_check.sh`)
# as a dry run on the host emulation of CUDA (`make CUDA=emu gpu-dryrun`;
# tests/cuda_emu/, docs/decisions/cuda-host-emulation.md), so that a GPU
# session's 15 minutes are not lost to a traceback, a wrong path or a
# section writer that breaks docs/RESULTS.md.
#
# It runs tests/gpu_check.sh whole with RL_GPU_DRYRUN=1 on BUILD (default
# build-cuda-emu): the GPU tests, tests/integration/gpu_jobs.py, then
# bench/bench_gpu.sh with tiny sizes (the RL_BENCH_GPU_* variables:
# bench_gpu_train, bench_gpu_torch.py with PyTorch on the CPU,
# bench_gpu_rl.py, bench_gpu_weight_sync, bench_gpu_e2e.py), then the
# compute-sanitizer loop (without compute-sanitizer, a stand-in that runs
# each program unchecked, memcheck's runs only). No nvidia-smi needed (a
# stand-in GPU name), NCCL's parts skip (the emulated build has no NCCL; the
# e2e bench's sync_bcast run fails, which that bench does not count).
#
# The sections go to a COPY of docs/RESULTS.md (OUT/RESULTS.md, OUT from
# RL_GPU_DRYRUN_OUT or a new folder under /tmp), marked DRY RUN; the
# tracked file is never written. Afterwards the copy is checked: both
# sections (bench-gpu, bench-gpu-e2e) there once, well formed and marked,
# every line outside them as in docs/RESULTS.md, and no Python traceback
# in the log (OUT/gpu_check.log). Then tests/gpu_dryrun_configs.py puts the
# jobs of bench_gpu_rl.py and bench_gpu_e2e.py at their device sizes through
# `rl-driver --check`. Any size variable set by the caller wins.
# Exits 0 when all of it passed, 1 otherwise. About 2 minutes on 2 cores (the build and the bundle aside).
set -u
cd "$(dirname "$0")/.." || exit 1
export BUILD=${BUILD:-build-cuda-emu}
[ -f "$BUILD/CUDA_EMU" ] || { echo "gpu_dryrun: $BUILD is not a make CUDA=emu build (make CUDA=emu BUILD=$BUILD all tests benches)"; exit 1; }
packed=
[ -f "$BUILD/bundle.tar.gz" ] && packed=$(tar -tzf "$BUILD/bundle.tar.gz")
for p in bench/bench_gpu_train bench/bench_gpu_weight_sync bin/rl-driver bin/rl-worker; do
    [ -x "$BUILD/$p" ] || grep -qx "$p" <<<"$packed" ||
        { echo "gpu_dryrun: $BUILD/$p not built (make CUDA=emu BUILD=$BUILD all tests benches)"; exit 1; }
done
out=${RL_GPU_DRYRUN_OUT:-$(mktemp -d /tmp/rlrt-gpu-dryrun-XXXXXX)}
mkdir -p "$out" "$out/tmp"
# the benches' work folders (mkdtemp; they keep them) under OUT, removed after a pass
export TMPDIR=$(cd "$out" && pwd)/tmp
cp docs/RESULTS.md "$out/RESULTS.md"
export PYTHON=${PYTHON:-/usr/bin/python3}
# PyTorch's side needs transformers: the reference venv has it (over
# Debian's torch, CPU only)
if [ -z "${RL_BENCH_GPU_TORCH_PYTHON:-}" ] && ! "$PYTHON" -c 'import transformers' 2>/dev/null &&
    [ -x build/venv-ref/bin/python3 ] && build/venv-ref/bin/python3 -c 'import transformers' 2>/dev/null; then
    export RL_BENCH_GPU_TORCH_PYTHON=build/venv-ref/bin/python3
fi
export RL_GPU_DRYRUN=1 RL_GPU_BENCH=1 RL_BENCH_GPU_OUT="$out/RESULTS.md"
export RL_GPU_CHECK_BUDGET_S=${RL_GPU_CHECK_BUDGET_S:-3600} RL_BENCH_GPU_E2E=${RL_BENCH_GPU_E2E:-1}
# bench_gpu_train and bench_gpu_torch.py: Qwen2.5-0.5B's layout shrunk
# (hidden 112: 14 heads of 8), one layer, one timed step
: "${RL_BENCH_GPU_B:=2}" "${RL_BENCH_GPU_T:=16}" "${RL_BENCH_GPU_LAYERS:=1}" "${RL_BENCH_GPU_STEPS:=1}"
: "${RL_BENCH_GPU_HIDDEN:=112}" "${RL_BENCH_GPU_INTERMEDIATE:=224}" "${RL_BENCH_GPU_VOCAB:=512}"
: "${RL_BENCH_GPU_GEN_PROMPTS:=2}" "${RL_BENCH_GPU_GEN_TOKENS:=10}" "${RL_BENCH_GPU_COMPILE:=0}"
# PyTorch on the CPU; eager attention: transformers' SDPA wants torch >= 2.1.1, Debian's is 1.13
: "${RL_BENCH_GPU_TORCH_DEVICE:=cpu}" "${RL_BENCH_GPU_ATTN:=eager}"
# bench_gpu_rl.py, bench_gpu_weight_sync
: "${RL_BENCH_GPU_RL_HIDDEN:=32}" "${RL_BENCH_GPU_RL_LAYERS:=1}" "${RL_BENCH_GPU_RL_STEPS:=2}"
: "${RL_BENCH_GPU_RL_PROMPTS:=4}" "${RL_BENCH_GPU_RL_SAMPLES:=4}"
: "${RL_BENCH_IPC_BYTES:=1048576}" "${RL_BENCH_IPC_VERSIONS:=3}"
# bench_gpu_e2e.py: three steps a run (the means start at step 3), tiny models
: "${RL_BENCH_GPU_E2E_STEPS:=3}" "${RL_BENCH_GPU_E2E_SFT_STEPS:=2}" "${RL_BENCH_GPU_E2E_DIF_STEPS:=3}"
: "${RL_BENCH_GPU_E2E_LIBERO_STEPS:=3}" "${RL_BENCH_GPU_E2E_VAL_SIZE:=8}" "${RL_BENCH_GPU_E2E_TIMEOUT:=300}"
: "${RL_BENCH_GPU_E2E_OVERRIDES:=model.hidden_size=32 model.intermediate_size=64 model.num_layers=1 model.num_heads=2 model.num_kv_heads=1 data.train_batch_size=4 rollout.n=4 actor.ppo_mini_batch_size=2}"
: "${RL_BENCH_GPU_E2E_DIF_OVERRIDES:=model.hidden_size=64 model.num_layers=1 data.train_batch_size=2 rollout.n=4 actor.ppo_mini_batch_size=2 rollout.num_steps=4}"
: "${RL_BENCH_GPU_E2E_LIBERO_OVERRIDES:=env.total_num_envs=4 env.max_episode_steps=20 actor.ppo_mini_batch_size=8}"
export "${!RL_BENCH_GPU_@}" "${!RL_BENCH_IPC_@}"
# A bundle (bundle.tar.gz: `make CUDA=emu gpu-dryrun` makes build-gpu-emu as
# gpu-bundle makes build-gpu) runs as the device gets it: in a copy of what the
# device tool carries, the tracked and untracked-but-not-ignored files and the
# bundle, so a file read from build/ or any other ignored path fails here too.
run_in=.
if [ -f "$BUILD/bundle.tar.gz" ] && [ "${RL_GPU_DRYRUN_STAGE:-1}" = 1 ]; then
    run_in=$out/tree
    rm -rf "$run_in" && mkdir -p "$run_in"
    git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$run_in" 2>/dev/null
    git ls-files -z -co --exclude-standard | (cd "$run_in" && xargs -0 ls -d >/dev/null) ||
        { echo "gpu_dryrun: copying the tree to $run_in failed"; exit 1; }
    mkdir -p "$run_in/$(dirname "$BUILD")" && cp -r "$BUILD" "$run_in/$BUILD" &&
        (cd "$run_in/$BUILD" && rm -rf lib bin tests bench) # as packed: bundle.tar.gz alone
    # the Pythons by absolute paths (a venv's python must keep its own path)
    abs() { case $1 in */*) echo "$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")" ;; *) echo "$1" ;; esac; }
    [ -n "${RL_BENCH_GPU_TORCH_PYTHON:-}" ] && RL_BENCH_GPU_TORCH_PYTHON=$(abs "$RL_BENCH_GPU_TORCH_PYTHON")
    PYTHON=$(abs "$PYTHON")
fi
# compute-sanitizer: without it, a stand-in that runs the program and checks
# nothing, so that gpu_check.sh's sanitizer loop runs too (memcheck alone
# unless RL_SANITIZER_TOOLS says; RL_GPU_DRYRUN_SANITIZER=0: the skip instead)
if [ "${RL_GPU_DRYRUN_SANITIZER:-1}" = 1 ] && ! command -v compute-sanitizer >/dev/null &&
    [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" ]; then
    mkdir -p "$out/bin"
    cat >"$out/bin/compute-sanitizer" <<'SH'
#!/bin/bash
# the dry run's stand-in (tests/gpu_dryrun.sh): runs the program, checks nothing
tool=memcheck
while [ $# -gt 0 ]; do
    case $1 in --tool) tool=$2; shift 2 ;; --error-exitcode) shift 2 ;; --*) shift ;; *) break ;; esac
done
echo "========= COMPUTE-SANITIZER stand-in (dry run): $tool not checked"
"$@"; r=$?
echo "========= ERROR SUMMARY: 0 errors (stand-in, nothing checked)"
exit $r
SH
    chmod +x "$out/bin/compute-sanitizer"
    export PATH="$out/bin:$PATH" RL_SANITIZER_TOOLS=${RL_SANITIZER_TOOLS:-memcheck}
fi
echo "gpu_dryrun: $BUILD in $run_in, $PYTHON (torch's side: ${RL_BENCH_GPU_TORCH_PYTHON:-$PYTHON}), sections to $out/RESULTS.md, log $out/gpu_check.log"
t0=$(date +%s)
(cd "$run_in" && tests/gpu_check.sh) 2>&1 | tee "$out/gpu_check.log"
rc=${PIPESTATUS[0]}
echo "gpu_dryrun: gpu_check.sh: exit $rc in $(( $(date +%s) - t0 )) s"
# the e2e and RL benches' jobs at the device's sizes (shrunk above): rl-driver --check
(cd "$run_in" && "$PYTHON" tests/gpu_dryrun_configs.py) 2>&1 | tee -a "$out/gpu_check.log"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
# the copy: the two sections once each, marked, and nothing else changed
"$PYTHON" - docs/RESULTS.md "$out/RESULTS.md" "$out/gpu_check.log" <<'PY' || rc=1
import sys
orig, new = open(sys.argv[1]).read(), open(sys.argv[2]).read()
log = open(sys.argv[3]).read()
bad = []
if "Traceback (most recent call last)" in log:
    bad.append("a Python traceback in the log")


def cut(text, name):
    """(text without the section, the section) of <!-- name:begin --> .. <!-- name:end -->."""
    b, e = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    if text.count(b) != 1 or text.count(e) != 1 or text.index(b) > text.index(e):
        bad.append("%s: %d begin and %d end markers" % (name, text.count(b), text.count(e)))
        return text, ""
    i, j = text.index(b), text.index(e) + len(e)
    return text[:i] + "@@" + name + "@@" + text[j:], text[i:j]


rest_o, rest_n = orig, new
for name in ("bench-gpu", "bench-gpu-e2e"):
    rest_o, _ = cut(rest_o, name)
    rest_n, sec = cut(rest_n, name)
    if not sec:
        continue
    lines = sec.splitlines()
    if len(lines) < 4 or not lines[1].startswith("## ") or "DRY RUN" not in lines[1]:
        bad.append("%s: no '## ... DRY RUN' heading under its begin marker" % name)
    if "**Dry run**" not in sec:
        bad.append("%s: no **Dry run** line" % name)
    rows = [ln for ln in lines if ln.startswith("|")]
    if not rows:
        bad.append("%s: no table" % name)
    for ln in rows:  # every row of a table as many cells as its header
        if not ln.endswith("|"):
            bad.append("%s: a row without its closing |: %s" % (name, ln[:80]))
    tables, cur = [], []
    for ln in lines + [""]:
        if ln.startswith("|"):
            cur.append(ln)
        elif cur:
            tables.append(cur)
            cur = []
    for t in tables:
        n = t[0].count("|")
        for ln in t[1:]:
            if ln.count("|") != n:
                bad.append("%s: %d cells against the header's %d: %s" % (name, ln.count("|") - 1, n - 1, ln[:100]))
if rest_o != rest_n:
    import difflib
    d = list(difflib.unified_diff(rest_o.splitlines(), rest_n.splitlines(), lineterm="", n=1))
    bad.append("lines outside the two sections changed:\n" + "\n".join(d[:40]))
for b in bad:
    print("gpu_dryrun: RESULTS.md copy: " + b)
print("gpu_dryrun: RESULTS.md copy: %s" % ("FAILED" if bad else
      "both sections there, marked DRY RUN, tables well formed, the rest as docs/RESULTS.md"))
sys.exit(1 if bad else 0)
PY
# kept after a failure (the jobs' folders, the staged tree); RL_GPU_DRYRUN_KEEP=1 keeps them always
[ $rc = 0 ] && [ "${RL_GPU_DRYRUN_KEEP:-0}" != 1 ] && rm -rf "$out/tmp" "$out/tree"
echo "gpu_dryrun: $([ $rc = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - t0 )) s (sections: $out/RESULTS.md, log: $out/gpu_check.log)"
exit $rc
