/* cuda_bf16.h — the host emulation's bf16 type (`make CUDA=emu`): the bits
 * of a bfloat16 and nothing else. Kernels keep bf16 as uint16_t bits made by
 * rl_bf16_round (common/nn/engine/ops_elem.h) and hand WMMA pointers to them
 * as __nv_bfloat16 (tests/cuda_emu/include/mma.h); no arithmetic on the type
 * is emulated. */
#ifndef RL_CUDA_EMU_BF16_H
#define RL_CUDA_EMU_BF16_H

#include <stdint.h>

struct __nv_bfloat16 {
    uint16_t x;
};

#endif
