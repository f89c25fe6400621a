/* device.c — per-device kernel tables and raw memory (see common/nn/engine/device.h). */
#include "common/nn/engine/device.h"
#include "rlrt/error.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/optim.h"

#include <stdlib.h>
#include <string.h>

#ifdef RL_CUDA
#include "common/nn/engine/cuda/cuda_ops.h"
#endif

static const rl_nn_ops s_cpu_ops = {
    .device = RL_DEVICE_CPU,
    .name = "cpu",
    .sgemm = rl_sgemm,
    .linear_forward = rl_linear_forward,
    .linear_backward = rl_linear_backward,
    .add_forward = rl_add_forward,
    .add_inplace = rl_add_inplace,
    .softmax_forward = rl_softmax_forward,
    .softmax_backward = rl_softmax_backward,
    .rmsnorm_forward = rl_rmsnorm_forward,
    .rmsnorm_backward = rl_rmsnorm_backward,
    .swiglu_forward = rl_swiglu_forward,
    .swiglu_backward = rl_swiglu_backward,
    .rope_forward = rl_rope_forward,
    .rope_backward = rl_rope_backward,
    .embedding_forward = rl_embedding_forward,
    .embedding_backward = rl_embedding_backward,
    .attention_forward = rl_attention_forward,
    .attention_backward = rl_attention_backward,
    .logprob_forward = rl_logprob_forward,
    .logprob_backward = rl_logprob_backward,
    .adamw_update = rl_adamw_update,
    .grad_sumsq = rl_grad_sumsq,
    .scale_inplace = rl_scale_inplace,
    .ema_update = rl_ema_update,
};

#ifdef RL_CUDA
static const rl_nn_ops s_cuda_ops = {
    .device = RL_DEVICE_CUDA,
    .name = "cuda",
    .sgemm = rl_cuda_sgemm,
    .linear_forward = rl_cuda_linear_forward,
    .linear_backward = rl_cuda_linear_backward,
    .add_forward = rl_cuda_add_forward,
    .add_inplace = rl_cuda_add_inplace,
    .softmax_forward = rl_cuda_softmax_forward,
    .softmax_backward = rl_cuda_softmax_backward,
    .rmsnorm_forward = rl_cuda_rmsnorm_forward,
    .rmsnorm_backward = rl_cuda_rmsnorm_backward,
    .swiglu_forward = rl_cuda_swiglu_forward,
    .swiglu_backward = rl_cuda_swiglu_backward,
    .rope_forward = rl_cuda_rope_forward,
    .rope_backward = rl_cuda_rope_backward,
    .embedding_forward = rl_cuda_embedding_forward,
    .embedding_backward = rl_cuda_embedding_backward,
    .attention_forward = rl_cuda_attention_forward,
    .attention_backward = rl_cuda_attention_backward,
    .logprob_forward = rl_cuda_logprob_forward,
    .logprob_backward = rl_cuda_logprob_backward,
    .adamw_update = rl_cuda_adamw_update,
    .grad_sumsq = rl_cuda_grad_sumsq,
    .scale_inplace = rl_cuda_scale_inplace,
    .ema_update = rl_cuda_ema_update,
};
#endif

const rl_nn_ops *rl_nn_ops_get(rl_device dev)
{
    switch (dev) {
    case RL_DEVICE_CPU:
        return &s_cpu_ops;
    case RL_DEVICE_CUDA:
#ifdef RL_CUDA
        return &s_cuda_ops;
#else
        rl_error_set(RL_EUNSUPPORTED, "device cuda: this build has no CUDA (make CUDA=1)");
        return NULL;
#endif
    }
    rl_error_set(RL_EINVAL, "unknown device %d", (int)dev);
    return NULL;
}

const char *rl_nn_ops_missing(const rl_nn_ops *o)
{
#define CHECK(f)                                                                              \
    if (!o->f)                                                                                \
        return #f;
    CHECK(sgemm) CHECK(linear_forward) CHECK(linear_backward) CHECK(add_forward)
    CHECK(add_inplace) CHECK(softmax_forward) CHECK(softmax_backward) CHECK(rmsnorm_forward)
    CHECK(rmsnorm_backward) CHECK(swiglu_forward) CHECK(swiglu_backward) CHECK(rope_forward)
    CHECK(rope_backward) CHECK(embedding_forward) CHECK(embedding_backward)
    CHECK(attention_forward) CHECK(attention_backward) CHECK(logprob_forward)
    CHECK(logprob_backward) CHECK(adamw_update) CHECK(grad_sumsq) CHECK(scale_inplace)
    CHECK(ema_update)
#undef CHECK
    return NULL;
}

int rl_device_count(rl_device dev)
{
    if (dev == RL_DEVICE_CPU)
        return 1;
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_device_count();
#endif
    return 0;
}

const char *rl_device_name(rl_device dev)
{
    return dev == RL_DEVICE_CPU ? "cpu" : dev == RL_DEVICE_CUDA ? "cuda" : "unknown";
}

void *rl_device_alloc(rl_device dev, size_t bytes)
{
    if (dev == RL_DEVICE_CPU) {
        size_t n = (bytes + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, n ? n : 64);
        if (!p)
            rl_error_set(RL_ENOMEM, "cpu alloc of %zu bytes failed", bytes);
        return p;
    }
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_alloc(bytes);
#endif
    rl_error_set(RL_EUNSUPPORTED, "device %s: not available in this build", rl_device_name(dev));
    return NULL;
}

void rl_device_free(rl_device dev, void *p)
{
    if (!p)
        return;
    if (dev == RL_DEVICE_CPU) {
        free(p);
        return;
    }
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        rl_cuda_free(p);
#endif
}

int rl_device_copy(rl_device dst_dev, void *dst, rl_device src_dev, const void *src,
                   size_t bytes)
{
    if (dst_dev == RL_DEVICE_CPU && src_dev == RL_DEVICE_CPU) {
        memmove(dst, src, bytes);
        return RL_OK;
    }
#ifdef RL_CUDA
    int kind = (src_dev == RL_DEVICE_CUDA ? 2 : 0) | (dst_dev == RL_DEVICE_CUDA ? 1 : 0);
    return rl_cuda_copy(dst, src, bytes, kind);
#else
    return rl_error_set(RL_EUNSUPPORTED, "device copy %s -> %s: this build has no CUDA",
                        rl_device_name(src_dev), rl_device_name(dst_dev));
#endif
}

int rl_device_zero(rl_device dev, void *p, size_t bytes)
{
    if (dev == RL_DEVICE_CPU) {
        if (p && bytes)
            memset(p, 0, bytes);
        return RL_OK;
    }
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA) {
        rl_cuda_memset0(p, bytes);
        return RL_OK;
    }
#endif
    return rl_error_set(RL_EUNSUPPORTED, "device %s: not available in this build", rl_device_name(dev));
}

int rl_device_sync(rl_device dev)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_sync();
#endif
    return dev == RL_DEVICE_CPU ? RL_OK
                                : rl_error_set(RL_EUNSUPPORTED, "device %s: not available",
                                               rl_device_name(dev));
}
