/* cuda_ops.h — C-callable entry points of the CUDA kernels (private to
 * common/nn; compiled only with `make CUDA=1`). Pointers are device
 * pointers; launches go on the default stream and return immediately.
 * Each launcher checks its arguments' sizes, launches, and records the
 * first CUDA/cuBLAS error, which rl_cuda_sync() returns (0 or a negative
 * rl_status with the message set). */
#ifndef RLRT_NN_CUDA_OPS_H
#define RLRT_NN_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int rl_cuda_device_count(void);
void *rl_cuda_alloc(size_t bytes);
void rl_cuda_free(void *p);
/* kind: 0 host→host, 1 host→device, 2 device→host, 3 device→device. */
int rl_cuda_copy(void *dst, const void *src, size_t bytes, int kind);
int rl_cuda_sync(void);
/* rl_device_ipc_* (device.h): a 64-byte cudaIpcMemHandle_t. */
int rl_cuda_ipc_export(void *p, unsigned char handle[64]);
void *rl_cuda_ipc_open(const unsigned char handle[64]);
int rl_cuda_ipc_close(void *p);
/* rl_device_profile_take's CUDA side (device.h): RL_CUDA_PROFILE=1 times
 * each launcher below (outermost only) with a pair of events. */
struct rl_device_prof;
int rl_cuda_profile_take(struct rl_device_prof *out, int max);
int rl_cuda_profile_set(int on); /* rl_device_profile_set's CUDA side */

void rl_cuda_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);
void rl_cuda_linear_forward(float *out, const float *inp, const float *w, const float *b,
                            int N, int C, int OC);
/* The bf16 products (ops.h, "bf16 products"): the activations are rounded
 * into one growing device scratch buffer (counted as scratch), then
 * cublasGemmEx multiplies bf16 inputs into float32 outputs with
 * CUBLAS_COMPUTE_32F. RL_ENOMEM (message set) when the scratch cannot grow. */
void rl_cuda_round_bf16(uint16_t *out, const float *in, int64_t n);
int rl_cuda_linear_forward_bf16(float *out, const float *inp, const uint16_t *w16, const float *b,
                                int N, int C, int OC);
int rl_cuda_linear_backward_bf16(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const uint16_t *w16, int N, int C, int OC);
/* 1 when the cuBLAS handle's math mode has no TF32 (float32 products are
 * float32), 0 when it has, -1 when there is no handle. */
int rl_cuda_tf32_off(void);
void rl_cuda_add_forward(float *out, const float *a, const float *b, int64_t n);
void rl_cuda_add_inplace(float *a, const float *b, int64_t n);
void rl_cuda_softmax_forward(float *out, const float *inp, int N, int C);
void rl_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             float eps, int N, int C);
void rl_cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t n);
/* The rest of the device table: the same signatures and semantics as the
 * CPU kernels of common/nn/engine/ops.h (backwards accumulate; logprob's
 * backward overwrites), on device pointers. Reductions over rows run in a
 * fixed order (column sums in fixed chunks added in order, the embedding's
 * rows in order per token, one block per row), so the results do not depend
 * on scheduling; there are no atomics. The attention pair runs fused
 * flash-style kernels (no T² scratch; B·H·T floats for the backward) for heads
 * up to 128 wide that the device's shared memory takes. Wider heads, or
 * RL_CUDA_ATTENTION=cublas (read at each call), go through cuBLAS one
 * sequence at a time with a scratch of H·T² floats (forward) or 2·H·T²
 * (backward); RL_ENOMEM when it cannot grow. Any other value than flash or
 * cublas is RL_EINVAL. */
void rl_cuda_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, int N, int C, int OC);
void rl_cuda_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C);
void rl_cuda_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C);
void rl_cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, int64_t n);
void rl_cuda_rope_forward(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                          float theta);
void rl_cuda_rope_backward(float *dinp, const float *dout, const int32_t *pos, int N, int H,
                           int hd, float theta);
void rl_cuda_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C);
void rl_cuda_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N,
                                int C);
int rl_cuda_attention_forward(float *out, float *lse, const float *q, const float *k,
                              const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                              int hd);
int rl_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                               const float *out, const float *lse, const float *q, const float *k, const float *v,
                               const uint8_t *mask, int B, int T, int H, int KH, int hd);
/* The bf16 pair (ops.h's contract): tensor-core kernels (WMMA 16×16×16,
 * bf16 inputs, float32 accumulators; sm_80 and later) for heads up to 128
 * wide whose shared memory the device takes; elsewhere, or with
 * RL_CUDA_ATTENTION=cublas or flash32, the float32 pair above runs instead
 * (its semantics, not the bf16 ones: the CPU's reference then differs by
 * the bf16 roundings). */
int rl_cuda_attention_forward_bf16(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const uint8_t *mask, int B, int T, int H,
                                   int KH, int hd);
int rl_cuda_attention_backward_bf16(float *dq, float *dk, float *dv, const float *dout,
                                    const float *out, const float *lse, const float *q,
                                    const float *k, const float *v, const uint8_t *mask, int B,
                                    int T, int H, int KH, int hd);
void rl_cuda_logprob_forward(float *logp, float *entropy, float *lse, const float *logits,
                             const int32_t *target, float inv_temp, int N, int V);
void rl_cuda_logprob_backward(float *dlogits, const float *dlogp, const float *dentropy,
                              const float *logits, const float *lse, const float *entropy,
                              const int32_t *target, float inv_temp, int N, int V);
void rl_cuda_sample_rows(int32_t *tok, float *logp, float *entropy, const float *logits,
                         const double *u, float inv_temp, int n, int V);
/* Decoding over a KV cache (ops.h): the cache write is one thread per
 * element; the attention one block per (row, head), its scores in the
 * caller's scratch, the softmax's max and sum block reductions in a fixed
 * order. */
void rl_cuda_kv_cache_write(float *kc, float *vc, const float *k, const float *v,
                            const int32_t *slot, const int32_t *pos, int n, int kvd, int maxT);
void rl_cuda_decode_attention(float *out, float *scores, const float *q, const float *kc,
                              const float *vc, const int32_t *slot, const int32_t *pos, int n,
                              int H, int KH, int hd, int maxT);
/* The optimiser's and the weight copies': rl_adamw_update's float
 * arithmetic element for element (its scalars formed on the host in double,
 * as the CPU does), the sum of squares over the CPU's fixed 64 Ki blocks in
 * double (each block summed by one block of threads, the blocks added on the
 * host in order), a *= s, and ref = β·ref + (1 − β)·cur in double. */
void rl_cuda_adamw_update(const struct rl_adamw_config *cfg, int64_t t, double lr, double wd,
                          float *p, const float *g, float *m, float *v, int64_t n);
double rl_cuda_grad_sumsq(const float *g, int64_t n);
void rl_cuda_scale_inplace(float *a, float s, int64_t n);
void rl_cuda_ema_update(float *ref, const float *cur, double beta, int64_t n);
/* The flow kinds' (ops.h): silu and its backward with expf (the CPU's
 * rl_fast_expf differs by < 1e-7 relative), the time embedding and the
 * standardisation through ops_elem.h's formulas, one thread per element. */
void rl_cuda_silu_forward(float *out, const float *inp, int64_t n);
void rl_cuda_silu_backward(float *dinp, const float *dout, const float *inp, int64_t n);
void rl_cuda_time_embed(float *temb, const float *t, int64_t n, int E);
void rl_cuda_standardize(float *out, const float *inp, const float *mean, const float *std,
                         float clip, int N, int C);
/* The convolutional kinds' (common/nn/engine/ops_conv.h, the same
 * semantics on device pointers; the shape is a host struct): the
 * convolution as im2col + one cuBLAS GEMM per chunk of images (the columns
 * and products of a chunk at most 2^24 floats each, two growing scratch
 * buffers counted as scratch; RL_ENOMEM when they cannot grow), its input
 * gradient by a GEMM and col2im (one thread per input element summing its
 * windows in the CPU's order), the weight gradient by GEMMs accumulating
 * chunk after chunk, the bias's by the fixed-order column sums; max
 * pooling one thread per output (forward) and per input element (backward:
 * the one window holding it, stride = window); relu; the conv trunk's
 * glue, plane_sum one block per plane in double. No atomics. */
struct rl_conv2d_shape;
int rl_cuda_conv2d_forward(float *out, const float *inp, const float *w, const float *b,
                           const struct rl_conv2d_shape *s);
int rl_cuda_conv2d_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const struct rl_conv2d_shape *s);
void rl_cuda_maxpool2d_forward(float *out, int32_t *arg, const float *inp, int N, int C, int H, int W,
                               int k);
void rl_cuda_maxpool2d_backward(float *dinp, const float *dout, const int32_t *arg, int N, int C, int H,
                                int W, int k);
void rl_cuda_relu_forward(float *out, const float *inp, int64_t n);
void rl_cuda_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n);
void rl_cuda_plane_add(float *x, const float *add, int64_t planes, int64_t hw);
void rl_cuda_plane_sum(float *out, const float *x, int64_t planes, int64_t hw);
void rl_cuda_upsample2x_add(float *a, const float *s, int64_t planes, int h, int w);
void rl_cuda_upsample2x_backward(float *ds, const float *da, int64_t planes, int h, int w);
/* bytes of device memory set to 0 (asynchronous, default stream). */
void rl_cuda_memset0(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
