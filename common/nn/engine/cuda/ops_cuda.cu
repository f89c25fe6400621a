// ops_cuda.cu — CUDA twins of the CPU kernels (see cuda_ops.h, common/nn/engine/device.h).
//
// Kernels first, then launchers that check sizes, compute the grid, launch on
// the default stream and record the first error (returned by rl_cuda_sync).
// Row-major GEMMs go to cuBLAS (column-major) by computing C^T = op(B)^T op(A)^T.
#include "common/nn/engine/cuda/cuda_ops.h"

#include "rlrt/error.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

static int s_status = 0;  // first asynchronous error since the last sync
static char s_where[256];
static cublasHandle_t s_blas = nullptr;

#define CUDA_NOTE(call)                                                                   \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess && s_status == 0) {                                         \
            s_status = RL_EIO;                                                            \
            snprintf(s_where, sizeof s_where, "%s:%d: %s", __FILE__, __LINE__,            \
                     cudaGetErrorString(e_));                                             \
        }                                                                                 \
    } while (0)

#define CUBLAS_NOTE(call)                                                                 \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS && s_status == 0) {                               \
            s_status = RL_EIO;                                                            \
            snprintf(s_where, sizeof s_where, "%s:%d: cublas status %d", __FILE__,        \
                     __LINE__, (int)s_);                                                  \
        }                                                                                 \
    } while (0)

static cublasHandle_t s_handle(void)
{
    if (!s_blas)
        CUBLAS_NOTE(cublasCreate(&s_blas));
    return s_blas;
}

// ---- kernels ----------------------------------------------------------------

// One block per row; blockDim.x is a power of two <= 1024.
__global__ void k_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                                  float eps, int C)
{
    extern __shared__ float sh[];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        ss += x[c] * x[c];
    sh[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = rsqrtf(sh[0] / C + eps);
    if (threadIdx.x == 0 && rstd)
        rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = x[c] * r * w[c];
}

__global__ void k_softmax_forward(float *out, const float *inp, int C)
{
    extern __shared__ float sh[];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        m = fmaxf(m, x[c]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        sum += expf(x[c] - m);
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / sh[0];
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = expf(x[c] - m) * inv;
}

__global__ void k_swiglu_forward(float *out, const float *gate, const float *up, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void k_add(float *out, const float *a, const float *b, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] + b[i];
}

__global__ void k_bias_rows(float *out, const float *b, int N, int OC)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (int64_t)N * OC)
        out[i] = b[i % OC];
}

// ---- launchers --------------------------------------------------------------

static int s_row_threads(int C)
{
    int t = 32;
    while (t < C && t < 1024)
        t <<= 1;
    return t;
}

static unsigned s_blocks(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

extern "C" {

int rl_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

void *rl_cuda_alloc(size_t bytes)
{
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        rl_error_set(RL_ENOMEM, "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
        return nullptr;
    }
    return p;
}

void rl_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

int rl_cuda_copy(void *dst, const void *src, size_t bytes, int kind)
{
    static const cudaMemcpyKind kinds[4] = {cudaMemcpyHostToHost, cudaMemcpyHostToDevice,
                                            cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    cudaError_t e = cudaMemcpy(dst, src, bytes, kinds[kind & 3]);
    if (e != cudaSuccess)
        return rl_error_set(RL_EIO, "cudaMemcpy(%zu bytes, kind %d): %s", bytes, kind,
                            cudaGetErrorString(e));
    return 0;
}

int rl_cuda_sync(void)
{
    CUDA_NOTE(cudaDeviceSynchronize());
    CUDA_NOTE(cudaGetLastError());
    int st = s_status;
    s_status = 0;
    if (st)
        return rl_error_set(st, "cuda: %s", s_where);
    return 0;
}

void rl_cuda_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    // Row-major C (M,N) is column-major C^T (N,M) = op(B)^T · op(A)^T.
    CUBLAS_NOTE(cublasSgemm(s_handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                            transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A,
                            lda, &beta, C, ldc));
}

void rl_cuda_linear_forward(float *out, const float *inp, const float *w, const float *b,
                            int N, int C, int OC)
{
    if (b) {
        int64_t n = (int64_t)N * OC;
        k_bias_rows<<<s_blocks(n, 256), 256>>>(out, b, N, OC);
        CUDA_NOTE(cudaGetLastError());
    }
    rl_cuda_sgemm(0, 1, N, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

void rl_cuda_add_forward(float *out, const float *a, const float *b, int64_t n)
{
    if (n <= 0)
        return;
    k_add<<<s_blocks(n, 256), 256>>>(out, a, b, n);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_add_inplace(float *a, const float *b, int64_t n) { rl_cuda_add_forward(a, a, b, n); }

void rl_cuda_softmax_forward(float *out, const float *inp, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_softmax_forward<<<N, t, t * sizeof(float)>>>(out, inp, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             float eps, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_rmsnorm_forward<<<N, t, t * sizeof(float)>>>(out, rstd, inp, w, eps, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t n)
{
    if (n <= 0)
        return;
    k_swiglu_forward<<<s_blocks(n, 256), 256>>>(out, gate, up, n);
    CUDA_NOTE(cudaGetLastError());
}

}  // extern "C"
