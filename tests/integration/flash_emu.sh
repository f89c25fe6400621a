#!/bin/bash
# The fused CUDA attention kernels' own text run on the host against the CPU
# attention (tests/cuda_emu/run_flash_emu.sh; about 30 s on 2 cores), so a
# machine without a GPU checks an edit of them. Skipped (77) when the C++
# compiler has no C++20 <barrier>.
cd "$(dirname "$0")/../.." || exit 1
printf '#include <barrier>\nint main(){std::barrier<> b(1);b.arrive_and_wait();}\n' |
    ${CXX:-g++} -std=c++20 -x c++ - -o /dev/null -pthread 2>/dev/null ||
    { echo "skip: ${CXX:-g++} has no C++20 <barrier>"; exit 77; }
exec tests/cuda_emu/run_flash_emu.sh
