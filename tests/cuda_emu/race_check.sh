#!/bin/bash
# tests/cuda_emu/race_check.sh — `make test-gpu-race`: the GPU kernel tests on
# the host emulation built with EMU_TSAN=1 (BUILD, default
# build-cuda-emu-tsan): each GPU thread a ThreadSanitizer fiber, synchronised
# only by barriers, shuffles and block boundaries, so TSan reports what
# compute-sanitizer's racecheck would (docs/decisions/cuda-host-emulation.md).
# The CPU references run on one thread (OMP_NUM_THREADS=1: libgomp and
# OpenBLAS are not TSan-aware) and the tests take their short shapes
# (RL_CUDA_TEST_SHORT=1, as under compute-sanitizer). ~4 minutes on 2 cores.
# Ends with "N passed, N failed".
set -u
BUILD=${BUILD:-${1:-build-cuda-emu-tsan}}
[ -f "$BUILD/CUDA_EMU" ] || { echo "race_check: $BUILD is not a make CUDA=emu EMU_TSAN=1 tree"; exit 1; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 RL_CUDA_TEST_SHORT=1
passed=0 failed=0
for t in emu_selftest test_nn_cuda test_nn_lm_cuda test_nn_flow_cuda test_nn_conv_cuda test_nn_cuda_ipc; do
    log=$(mktemp)
    start=$(date +%s)
    timeout 900 "$BUILD/tests/$t" >"$log" 2>&1
    rc=$?
    races=$(grep -c "WARNING: ThreadSanitizer" "$log")
    if [ $rc = 0 ] && [ "$races" = 0 ]; then
        passed=$((passed + 1)); echo "ok: $t ($(( $(date +%s) - start )) s, no race)"
    else
        failed=$((failed + 1)); echo "FAILED: $t (exit $rc, $races race reports)"
        grep -A12 -E "WARNING: ThreadSanitizer|FAILED|ERROR" "$log" | head -60 | sed 's/^/    | /'
    fi
    rm -f "$log"
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
