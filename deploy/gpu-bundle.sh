#!/bin/sh
# gpu-bundle.sh — what the GPU machine needs to run rlrt's GPU checks
# (`make CUDA=1 gpu-bundle`; the device tool carries the folder along).
#
#   deploy/gpu-bundle.sh BUILD OUT PROGRAM...
#
# The GPU machine has CUDA, but none of Debian's packages rlrt links
# (OpenBLAS, jansson, cmocka, ...): this copies the CUDA build's programs
# (paths under BUILD: tests/test_nn_cuda, bench/bench_gpu_train) to the same
# paths under OUT and every shared library they load that is
# neither the C runtime nor CUDA's own (both are there) into OUT/lib, which
# tests/gpu_check.sh puts on LD_LIBRARY_PATH. OpenBLAS alone is 35 MiB and
# each program carries librlrt and the kernels (~2 MiB), so OUT/lib and the
# programs travel packed as OUT/bundle.tar.gz (8 MiB of programs instead of
# 24), which gpu_check.sh, bench_gpu.sh and run-default.sh unpack in place.
# Programs travel without their debug sections (symbols kept). Fails when
# OUT passes 60 MiB (the device tool carries 64 MiB at most, the tracked
# files included: the Makefile checks the sum).
set -eu
build=${1:?usage: gpu-bundle.sh BUILD OUT PROGRAM...}
out=${2:?usage: gpu-bundle.sh BUILD OUT PROGRAM...}
shift 2
rm -rf "$out"
mkdir -p "$out/lib"
for t in "$@"; do
    [ -x "$build/$t" ] || { echo "gpu-bundle: $build/$t not built (make CUDA=1 tests benches)" >&2; exit 1; }
    mkdir -p "$out/$(dirname "$t")"
    cp "$build/$t" "$out/$t"
    # debug sections halve a program; its symbols stay (backtraces,
    # compute-sanitizer's reports name the functions)
    strip --strip-debug "$out/$t" 2>/dev/null || true
    ldd "$build/$t" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
        case $name in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) continue ;;
        libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvrtc*|libnvJitLink*) continue ;;
        esac
        [ -f "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
    done
done
nlib=$(ls "$out/lib" | wc -l)
dirs=$(cd "$out" && ls -d */ | tr -d /)
tar -czf "$out/bundle.tar.gz" -C "$out" $dirs
(cd "$out" && rm -rf $dirs)
kb=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out: $# programs, $nlib libraries (packed in bundle.tar.gz), $((kb / 1024)) MiB"
[ "$kb" -le $((60 * 1024)) ] || { echo "gpu-bundle: $out is over 60 MiB" >&2; exit 1; }
