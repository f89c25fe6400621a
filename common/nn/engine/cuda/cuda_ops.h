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

void rl_cuda_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);
void rl_cuda_linear_forward(float *out, const float *inp, const float *w, const float *b,
                            int N, int C, int OC);
void rl_cuda_add_forward(float *out, const float *a, const float *b, int64_t n);
void rl_cuda_add_inplace(float *a, const float *b, int64_t n);
void rl_cuda_softmax_forward(float *out, const float *inp, int N, int C);
void rl_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             float eps, int N, int C);
void rl_cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
