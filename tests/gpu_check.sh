#!/bin/bash
# tests/gpu_check.sh — the checks that need an NVIDIA GPU (`make CUDA=1 test-gpu`).
#
# * test_nn_cuda: every CUDA kernel against its CPU twin, forward and
#   backward, on ragged shapes; test_nn_lm_cuda: the transformer on the GPU
#   against the CPU (outputs and every gradient); test_nn_flow_cuda: the
#   flow kinds (flow_policy, image_classifier, clip_flow's MLP trunk) on the
#   GPU against the CPU (quantities, gradients, AdamW steps, ODE/SDE
#   sampling) and their new kernels; test_nn_conv_cuda: the convolutional
#   kinds (image_cnn, clip_flow's conv trunk) likewise and their kernels
#   (convolution, max pooling, ReLU, the trunk's glue); test_nn_cuda_ipc: a
#   device block shared with a second process (CUDA IPC). GPU_TESTS names
#   them. test_channel_ipc: the weight channel over CUDA IPC between two
#   processes (each version equal to the sender's; a sender killed
#   mid-version leaves the previous one); test_collective_nccl: the NCCL
#   collectives (one rank; two ranks on the GPU where NCCL >= 2.30 allows
#   it, else a skip naming the version; dead and stuck peers). NCCL is
#   dlopen()ed: PyPI's nvidia-nccl-cu13 lib folder goes on LD_LIBRARY_PATH.
# * tests/integration/gpu_jobs.py: real jobs with actor.device=cuda and
#   rollout.device=cuda (SFT against the CPU actor step for step, GRPO, a
#   resume on the GPU, GPU generation against the CPU's, diffusion GRPO of
#   clip_flow with the MLP and the conv trunk against the CPU, job 9: libero_rl
#   PPO with the flow policy on the GPU and the envs on the CPU against the
#   CPU, on the LIBERO-Object tasks 0-1 the bundle carries in
#   BUILD/libero-data); needs bin/rl-driver and bin/rl-worker in BUILD.
#
# * With RL_GPU_BENCH=1, `bench/bench_gpu.sh` (make bench-gpu): the engine
#   against PyTorch on the same GPU, its RESULTS section written to
#   RL_BENCH_GPU_OUT (default docs/RESULTS.md); then the end-to-end GPU jobs
#   (bench/bench_gpu_e2e.py: arithmetic GRPO synchronous, one step off and
#   at staleness 2 with partial rollouts, its CPU twin, diffusion GRPO and
#   libero_rl PPO on the GPU and the CPU; RL_BENCH_GPU_E2E=0 leaves them
#   out), their own
#   section bench-gpu-e2e. Every part prints `gpu_check: time: PART: S s`:
#   trim with GPU_TESTS, RL_BENCH_GPU_RL=0, RL_BENCH_GPU_E2E_STEPS, ... when
#   the device time is short. RL_GPU_CHECK_BUDGET_S (default 480) bounds the
#   whole: after the tests and gpu_jobs.py, the bench starts only with 2
#   minutes left (its end-to-end jobs only with 6, unless RL_BENCH_GPU_E2E is
#   set) and each sanitizer run only with its timeout left; what the budget
#   left out is listed at the end (not a failure).
#
# * Attention has two CUDA paths (RL_CUDA_ATTENTION=flash, the fused kernels
#   and the default, or cublas; docs/decisions/cuda-device-table.md), and a
#   bf16 pair on tensor cores (test_cuda_attention_bf16 against the CPU's
#   reference of it; RL_CUDA_ATTENTION=flash32 keeps bf16 models on the
#   float32 fused kernels):
#   test_nn_cuda checks both against the CPU (T = 1, odd T, masked and empty
#   rows, GQA ratios 1, 2 and 7, hd 8 to 512) and the fused ones bit for bit
#   across two runs; test_nn_lm_cuda runs the whole transformer's parity on both
#   (test_lm_cuda_parity_cublas for the cuBLAS one); the bench times both
#   (rlrt_gpu_attention_* and rlrt_gpu_train_flash_vs_cublas_bf16). Every
#   test here except NCCL's also runs in `make test` on the host emulation
#   of CUDA (tests/cuda_emu/, `make CUDA=emu`), where they pass.
#
# * compute-sanitizer (last: the slowest): memcheck, racecheck, synccheck
#   and initcheck over test_nn_cuda, memcheck over test_nn_lm_cuda (each run
#   bounded by RL_SANITIZER_TIMEOUT, default 60 s; RL_SANITIZER_TOOLS
#   narrows test_nn_cuda's list): out-of-bounds or
#   uninitialised device memory, shared-memory races, barrier misuse.
#
# The device run (about 6 minutes on an H200 with the bench, 2026-11-28,
# before the weight-channel IPC, NCCL and FSDP checks: add about 2; the
# end-to-end jobs, gpu_jobs.py's job 6 and bench_gpu_e2e.py, are not
# measured yet: guessed 1-3 more, see the `gpu_check: time:` lines),
# prepared here with `make CUDA=1 gpu-bundle` (carry build-gpu):
#   cp docs/RESULTS.md $OUT/ && BUILD=build-gpu RL_GPU_BENCH=1 \
#     RL_BENCH_GPU_OUT=$OUT/RESULTS.md tests/gpu_check.sh 2>&1 | tee $OUT/gpu_check.log
#
# Dry run first, without a GPU: `make CUDA=emu gpu-dryrun` (tests/gpu_dryrun.sh)
# runs all of the above with RL_GPU_DRYRUN=1 on the host emulation with tiny
# sizes, its sections into a copy of RESULTS.md marked DRY RUN.
#
# BUILD names the build folder (a CUDA build: build-cuda, or the bundle
# build-gpu of `make CUDA=1 gpu-bundle` on a machine without Debian's
# packages). Exits 0 when all
# pass, 1 when any fails, 77 (skipped, with the reason) without a GPU or
# without compute-sanitizer.
set -u
BUILD=${BUILD:-build-cuda}
# a bundle made by `make CUDA=1 gpu-bundle` brings the libraries the GPU
# machine lacks (deploy/gpu-bundle.sh), packed in bundle.tar.gz
[ -f "$BUILD/bundle.tar.gz" ] && [ ! -d "$BUILD/lib" ] && tar -xzf "$BUILD/bundle.tar.gz" -C "$BUILD"
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$(cd "$BUILD/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NCCL is dlopen()ed (collective_nccl.h), never bundled: on the GPU machine it
# comes from PyTorch's PyPI wheel nvidia-nccl-cu13
nccl_dir=$(${PYTHON:-python3} -c 'import nvidia.nccl as m,os;print(os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0])' 2>/dev/null)
if [ -n "$nccl_dir" ] && [ -d "$nccl_dir/lib" ]; then
    export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "gpu_check: NCCL from $nccl_dir/lib ($(ls "$nccl_dir/lib" | tr '\n' ' '))"
else
    echo "gpu_check: no PyPI nvidia-nccl (python3 -c 'import nvidia.nccl' failed): NCCL from the loader's path, if any"
fi
tests=${GPU_TESTS:-test_nn_cuda test_nn_lm_cuda test_nn_flow_cuda test_nn_conv_cuda test_nn_cuda_ipc test_channel_ipc test_collective_nccl}
for t in $tests; do
    [ -x "$BUILD/tests/$t" ] || { echo "gpu_check: $BUILD/tests/$t not built (make CUDA=1 tests)"; exit 1; }
done
# RL_GPU_DRYRUN=1 (tests/gpu_dryrun.sh): the whole path on the host
# emulation of CUDA (a `make CUDA=emu` build) without a GPU, tiny sizes: no
# nvidia-smi needed, NCCL's skips and compute-sanitizer's absence tolerated
dry=${RL_GPU_DRYRUN:-0}
if [ "$dry" = 1 ]; then
    [ -f "$BUILD/CUDA_EMU" ] || echo "gpu_check: warning: RL_GPU_DRYRUN=1 with $BUILD, not a make CUDA=emu build"
    echo "gpu_check: DRY RUN (RL_GPU_DRYRUN=1): $BUILD on $(nvidia-smi -L >/dev/null 2>&1 && echo "the GPU below" || echo "the host emulation, no GPU")"
fi
if nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
elif [ "$dry" != 1 ]; then
    echo "gpu_check: skipped: no NVIDIA GPU (nvidia-smi -L failed)"; exit 77
fi
rc=0
# per-part wall times, so a later session can trim to the device time it has
t_start=$(date +%s)
t_part=$t_start
took() { local now; now=$(date +%s); echo "gpu_check: time: $1: $((now - t_part)) s (total $((now - t_start)) s)"; t_part=$now; }
# A wall-time budget (RL_GPU_CHECK_BUDGET_S, default 480 s: the device run's
# 8 minutes): the tests and gpu_jobs.py always run; the parts after them
# start only with time left for them, and each part left out is named at the
# end (not a failure: a later run with more time, or GPU_TESTS trimmed, runs it).
# RL_GPU_CHECK_BENCH_FIRST=1 runs the bench before gpu_jobs.py.
budget=${RL_GPU_CHECK_BUDGET_S:-480}
left() { echo $((budget - ($(date +%s) - t_start))); }
not_run=()
for t in $tests; do
    bin=$BUILD/tests/$t
    echo "== $bin"
    out=$("$bin" 2>&1); r=$?
    took "$t"
    echo "$out" | grep -E "OK|FAILED|SKIPPED|skip:|\[  ERROR|cuda|Error"
    # a skip is a failure here, except the tests of the machine without a GPU
    # (and NCCL's in a dry run: the emulated build has no NCCL)
    skips=$(echo "$out" | grep "^\[  SKIPPED \] test_" | grep -vE "_(without_gpu|where_allowed)$")
    [ "$dry" = 1 ] && [ "$t" = test_collective_nccl ] && [ -n "$skips" ] && {
        echo "gpu_check: dry run: $t's skips tolerated (no NCCL on the emulation)"; skips=; }
    if [ $r != 0 ] || [ -n "$skips" ]; then
        echo "$out" | sed 's/^/    | /'   # the whole output: the measured distances
        echo "gpu_check: $t failed or skipped (exit $r)"; rc=1
    fi
done
# the bench (RL_GPU_BENCH=1): after gpu_jobs.py, or before it with
# RL_GPU_CHECK_BENCH_FIRST=1 (a run whose point is a measurement: gpu_jobs.py
# then gets what the budget leaves, as it always runs)
run_bench() {
    if [ "${RL_GPU_BENCH:-0}" = 1 ] && [ "$(left)" -lt 120 ]; then
        echo "gpu_check: bench_gpu.sh: not run, $(left) s of the ${budget} s budget left"
        not_run+=("bench_gpu.sh")
    elif [ "${RL_GPU_BENCH:-0}" = 1 ]; then
        echo "== bench/bench_gpu.sh"
        # the end-to-end jobs (minutes) only with 6 minutes left, unless asked for
        e2e=${RL_BENCH_GPU_E2E:-}
        if [ -z "$e2e" ] && [ "$(left)" -lt 360 ]; then
            e2e=0
            echo "gpu_check: bench_gpu_e2e.py left out: $(left) s of the budget left (RL_BENCH_GPU_E2E=1 runs it)"
            not_run+=("bench_gpu_e2e.py")
        fi
        RL_BENCH_GPU_E2E=${e2e:-1} BUILD=$BUILD PYTHON=${PYTHON:-python3} "$(dirname "$0")/../bench/bench_gpu.sh" || { echo "gpu_check: bench_gpu failed"; rc=1; }
        took bench_gpu.sh
    fi
}
[ "${RL_GPU_CHECK_BENCH_FIRST:-0}" = 1 ] && run_bench
echo "== tests/integration/gpu_jobs.py"
BUILD=$BUILD ${PYTHON:-python3} "$(dirname "$0")/integration/gpu_jobs.py"; r=$?
took gpu_jobs.py
[ $r = 0 ] || { echo "gpu_check: gpu_jobs.py: exit $r"; rc=1; }
[ "${RL_GPU_CHECK_BENCH_FIRST:-0}" = 1 ] || run_bench
cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ ! -x "$cs" ]; then
    echo "gpu_check: compute-sanitizer: skipped (not found)"; rc_cs=77
else
    # every tool over the kernel tests; memcheck over the model tests too
    # (racecheck and initcheck over whole models take many minutes). Each
    # run is bounded: a timeout is a failure, named.
    for t in $tests; do
        # the weight channel's IPC and the NCCL tests launch no kernel of
        # ours (cudaMemcpy and NCCL's own), and NCCL under the sanitizer is
        # slow enough to eat the device run: not sanitized
        case $t in test_channel_ipc|test_collective_nccl) continue ;; esac
        tools=${RL_SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}
        [ "$t" = test_nn_cuda ] || tools=memcheck
        for tool in $tools; do
            if [ "$(left)" -lt $(( ${RL_SANITIZER_TIMEOUT:-60} + 5 )) ]; then
                echo "gpu_check: compute-sanitizer $tool $t: not run, $(left) s of the budget left"
                not_run+=("$tool $t")
                continue
            fi
            echo "== compute-sanitizer --tool $tool $t"
            # RL_CUDA_TEST_SHORT: test_nn_cuda leaves out its two longest attention shapes
            RL_CUDA_TEST_SHORT=1 timeout "${RL_SANITIZER_TIMEOUT:-60}" "$cs" --tool $tool --error-exitcode 9 "$BUILD/tests/$t" 2>&1 \
                | grep -E "SUMMARY|FAILED|Error"
            r=${PIPESTATUS[0]}
            [ $r = 124 ] && echo "gpu_check: $tool $t: timed out after ${RL_SANITIZER_TIMEOUT:-60} s"
            [ $r = 0 ] || { echo "gpu_check: $tool $t: exit $r"; rc=1; }
            took "$tool $t"
        done
    done
fi
[ ${#not_run[@]} = 0 ] || echo "gpu_check: not run for the ${budget} s budget (RL_GPU_CHECK_BUDGET_S): ${not_run[*]}"
echo "gpu_check: $([ $rc = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - t_start )) s"
[ $rc = 0 ] && [ "${rc_cs:-0}" = 77 ] && [ "$dry" != 1 ] && exit 77
exit $rc
