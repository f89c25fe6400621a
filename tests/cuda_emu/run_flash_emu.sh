#!/bin/bash
# tests/cuda_emu/run_flash_emu.sh — the fused flash attention kernels of
# common/nn/engine/cuda/ops_cuda.cu run on the host, without a GPU: the
# kernels' text (from `#define RL_FA_B` to the logprob kernels) is compiled
# as C++20 with each block's 256 threads as OS threads (__syncthreads a
# barrier, the xor shuffles through an array), and checked against the CPU
# attention (rl_attention_forward/backward of librlrt) on the shapes of
# test_nn_cuda's attention test. It checks the indexing, masking, the online
# softmax and the two backward kernels' arithmetic; not timing, bank
# conflicts or what only a GPU's scheduling shows (racecheck does that).
# About 30 s on 2 cores (tests/integration/flash_emu.sh runs it in the test
# suite). BUILD: a build folder with lib/librlrt.a (default build).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
lib=$root/$BUILD/lib/librlrt.a
[ -f "$lib" ] || { echo "flash_emu: $lib not built (make)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^#define RL_FA_B 64/{f=1} /^\/\/ One block per row of logits/{f=0} f' \
    "$root/common/nn/engine/cuda/ops_cuda.cu" |
    sed 's/extern __shared__ __align__(16) float fsh\[\];/float *fsh = g_smem;/' >"$tmp/fa_extract.inc"
[ -s "$tmp/fa_extract.inc" ] || { echo "flash_emu: the kernels' text was not found"; exit 1; }
! grep -q "extern __shared__" "$tmp/fa_extract.inc" ||
    { echo "flash_emu: a shared-memory declaration this script does not rewrite"; exit 1; }
# a sanitizer build's library (make SANITIZE=...) links only with its
# runtimes: the emulation is then built with the same sanitizers
san=
nm -A "$lib" 2>/dev/null | grep -q ' U __asan_init' && san=address
nm -A "$lib" 2>/dev/null | grep -q ' U __ubsan_handle' && san=${san:+$san,}undefined
${CXX:-g++} -std=c++20 -O2 ${san:+-fsanitize=$san -fno-omit-frame-pointer} -I"$root" -I"$root/include" \
    -I"$tmp" "$here/flash_emu.cpp" -o "$tmp/flash_emu" "$lib" -fopenmp -lopenblas -lm -pthread
"$tmp/flash_emu"
