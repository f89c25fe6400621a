// ops_cuda.cu — CUDA twins of the CPU kernels (see cuda_ops.h, common/nn/engine/device.h).
//
// Kernels first, then launchers that check sizes, compute the grid, launch on
// the default stream and record the first error (returned by rl_cuda_sync).
// Row-major GEMMs go to cuBLAS (column-major) by computing C^T = op(B)^T op(A)^T.
#include "common/nn/engine/cuda/cuda_ops.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/ops_conv.h"
#include "common/nn/engine/optim.h"

#include "rlrt/error.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// The math mode is set, not left to the library's default: CUBLAS_DEFAULT_MATH
// never uses TF32 for float32 products (only CUBLAS_TF32_TENSOR_OP_MATH or a
// *_FAST_TF32 compute type would), so fp32 stays the parity mode; the bf16
// products ask for CUBLAS_COMPUTE_32F themselves (tensor cores, float32
// accumulation). rl_cuda_tf32_off() reads the mode back for the tests.
static cublasHandle_t s_handle(void)
{
    if (!s_blas) {
        CUBLAS_NOTE(cublasCreate(&s_blas));
        if (s_blas)
            CUBLAS_NOTE(cublasSetMathMode(s_blas, CUBLAS_DEFAULT_MATH));
    }
    return s_blas;
}

// ---- per-launcher time (RL_CUDA_PROFILE=1; rl_device_profile_take) -----------

// Events recorded around the outermost launcher on the default stream,
// resolved at the take. Off (the default), a launcher pays one branch.
struct s_prof_name {
    const char *name;
    long calls;
    double ms;
};
struct s_prof_mark {
    int name;
    cudaEvent_t a, b;
};
static int s_prof_on = -1, s_prof_depth = 0;
static s_prof_name s_prof_names[64];
static int s_prof_nnames = 0;
static s_prof_mark *s_prof_marks = nullptr;
static int s_prof_nmarks = 0, s_prof_cap = 0, s_prof_used = 0; // used: marks with events made

static int s_prof_begin(const char *name)
{
    if (s_prof_on < 0) {
        const char *e = getenv("RL_CUDA_PROFILE");
        s_prof_on = e && *e && strcmp(e, "0") != 0;
    }
    if (!s_prof_on || s_prof_depth++ > 0)
        return -1;
    int k = 0;
    while (k < s_prof_nnames && strcmp(s_prof_names[k].name, name) != 0)
        k++;
    if (k == s_prof_nnames) {
        if (k == 64)
            return -1;
        s_prof_names[s_prof_nnames++] = {name, 0, 0.0};
    }
    if (s_prof_nmarks == s_prof_cap) {
        int cap = s_prof_cap ? 2 * s_prof_cap : 1024;
        s_prof_mark *m = (s_prof_mark *)realloc(s_prof_marks, sizeof *m * (size_t)cap);
        if (!m)
            return -1;
        s_prof_marks = m;
        s_prof_cap = cap;
    }
    s_prof_mark *m = &s_prof_marks[s_prof_nmarks];
    if (s_prof_nmarks == s_prof_used) {
        if (cudaEventCreate(&m->a) != cudaSuccess || cudaEventCreate(&m->b) != cudaSuccess) {
            cudaGetLastError();
            return -1;
        }
        s_prof_used++;
    }
    m->name = k;
    cudaEventRecord(m->a, 0);
    return s_prof_nmarks++;
}

static void s_prof_end(int i)
{
    if (!s_prof_on)
        return;
    s_prof_depth--;
    if (i >= 0)
        cudaEventRecord(s_prof_marks[i].b, 0);
}

struct s_prof_scope {
    int i;
    explicit s_prof_scope(const char *name) : i(s_prof_begin(name)) {}
    ~s_prof_scope() { s_prof_end(i); }
};
#define RL_CUDA_PROF(name) s_prof_scope prof_scope_(name)
// The linear entries with this many outputs or more (an LM head over a
// vocabulary) are timed under their own name, *_vocab, apart from the layers'.
#define RL_PROF_VOCAB 32768

// ---- kernels ----------------------------------------------------------------

// Block-wide reduction of one value per thread by op (blockDim.x a power of
// two, pairs halving the block); every thread gets the result. sh holds
// blockDim.x values.
template <typename T, typename Op> __device__ T d_block_reduce(T v, T *sh, Op op)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    T t = sh[0];
    __syncthreads(); // sh is reused by the caller's next reduction
    return t;
}

struct d_plus {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct d_maxf {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T> __device__ T d_block_sum(T v, T *sh) { return d_block_reduce(v, sh, d_plus()); }
__device__ float d_block_max(float v, float *sh) { return d_block_reduce(v, sh, d_maxf()); }

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
    float r = rsqrtf(d_block_sum(ss, sh) / C + eps);
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
    m = d_block_max(m, sh);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        sum += expf(x[c] - m);
    float inv = 1.0f / d_block_sum(sum, sh);
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

__global__ void k_round_bf16(uint16_t *out, const float *in, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = rl_bf16_round(in[i]);
}

__global__ void k_bias_rows(float *out, const float *b, int N, int OC)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (int64_t)N * OC)
        out[i] = b[i % OC];
}

// ---- backward and the rest of the table ----------------------------------------

// Column sums over rows, out (C) += Σ_n f(n, c), in two passes with a fixed
// order (no atomics, the same result whatever the schedule): pass 1, blocks
// of RL_COL_TILE columns × RL_COL_ROWS threads down a chunk of RL_COL_CHUNK
// rows, thread y summing rows y, y + RL_COL_ROWS, ... in double, then the
// chunk's RL_COL_ROWS sums in y order into part[chunk, c]; pass 2 adds the
// chunks in order. (One thread per column over all N rows, as before, left
// all but a few SMs idle: 4–8 ms per call at N = 8192.)
#define RL_COL_TILE 32
#define RL_COL_ROWS 8
#define RL_COL_CHUNK 256

struct d_col_plain { // a (N, C)
    const float *a;
    int C;
    __device__ double operator()(int n, int c) const { return a[(size_t)n * C + c]; }
};
struct d_col_rmsnorm_dw { // dout · inp · rstd[n], the product in float as the CPU kernel
    const float *dout, *inp, *rstd;
    int C;
    __device__ double operator()(int n, int c) const
    {
        size_t i = (size_t)n * C + c;
        return dout[i] * inp[i] * rstd[n];
    }
};

template <typename F> __global__ void k_colsum_part(double *part, F f, int N, int C)
{
    __shared__ double sh[RL_COL_ROWS][RL_COL_TILE];
    int c = blockIdx.x * RL_COL_TILE + threadIdx.x, chunk = blockIdx.y;
    int lo = chunk * RL_COL_CHUNK, hi = lo + RL_COL_CHUNK < N ? lo + RL_COL_CHUNK : N;
    double acc = 0.0;
    if (c < C)
        for (int n = lo + threadIdx.y; n < hi; n += RL_COL_ROWS)
            acc += f(n, c);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        double t = 0.0;
        for (int y = 0; y < RL_COL_ROWS; y++)
            t += sh[y][threadIdx.x];
        part[(size_t)chunk * C + c] = t;
    }
}

__global__ void k_colsum_finish(float *out, const double *part, int chunks, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    double t = 0.0;
    for (int k = 0; k < chunks; k++)
        t += part[(size_t)k * C + c];
    out[c] += (float)t;
}

__global__ void k_softmax_backward(float *dinp, const float *dout, const float *out, int C)
{
    extern __shared__ double shd[];
    const float *g = dout + (size_t)blockIdx.x * C, *y = out + (size_t)blockIdx.x * C;
    float *d = dinp + (size_t)blockIdx.x * C;
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dot += (double)g[c] * y[c];
    float fd = (float)d_block_sum(dot, shd);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        d[c] += y[c] * (g[c] - fd);
}

__global__ void k_rmsnorm_backward_dinp(float *dinp, const float *dout, const float *inp,
                                        const float *w, const float *rstd, int C)
{
    extern __shared__ double shd[];
    size_t o = (size_t)blockIdx.x * C;
    const float *x = inp + o, *g = dout + o;
    float *d = dinp + o;
    float r = rstd[blockIdx.x];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        dot += (double)(g[c] * w[c]) * x[c];
    dot = d_block_sum(dot, shd);
    float k = (float)(dot * r * r * r / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        d[c] += g[c] * w[c] * r - k * x[c];
}

__global__ void k_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                  const float *up, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
    if (dgate)
        dgate[i] += dout[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
    if (dup)
        dup[i] += dout[i] * g * sg;
}

// One thread per (row, head, pair i < hd/2): the HF rotate_half rotation by
// pos·theta^(-2i/hd) (angles in double, as the CPU kernel), or its inverse
// accumulated (the backward).
__global__ void k_rope(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                       float theta, int inverse)
{
    int half = hd / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)N * H * half)
        return;
    int i = (int)(idx % half);
    int64_t nh = idx / half;
    int n = (int)(nh / H);
    double p = pos ? (double)pos[n] : (double)n;
    double a = p * pow((double)theta, -2.0 * i / hd);
    float cs = (float)cos(a), sn = (float)((inverse ? -1.0 : 1.0) * sin(a));
    size_t o = (size_t)nh * hd;
    float x1 = inp[o + i], x2 = inp[o + i + half];
    float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
    if (inverse) {
        out[o + i] += y1;
        out[o + i + half] += y2;
    } else {
        out[o + i] = y1;
        out[o + i + half] = y2;
    }
}

__global__ void k_embedding_forward(float *out, const int32_t *ids, const float *table, int N,
                                    int C)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (int64_t)N * C)
        out[i] = table[(size_t)ids[i / C] * C + i % C];
}

// The embedding's backward without atomics and in the CPU kernel's order:
// next[n] is the next row with row n's token (-1: none) and head[n] is 1
// when no earlier row has it; then one thread per (head row, channel)
// walks its token's rows in order. The chain costs O(N²) comparisons of
// ids (8192 rows: 67 M, well under a millisecond).
__global__ void k_embedding_chain(int32_t *next, uint8_t *head, const int32_t *ids, int N)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    int id = ids[n], nx = -1, h = 1;
    for (int m = n + 1; m < N; m++)
        if (ids[m] == id) {
            nx = m;
            break;
        }
    for (int m = 0; m < n; m++)
        if (ids[m] == id) {
            h = 0;
            break;
        }
    next[n] = nx;
    head[n] = (uint8_t)h;
}

__global__ void k_embedding_backward(float *dtable, const float *dout, const int32_t *ids,
                                     const int32_t *next, const uint8_t *head, int N, int C)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)N * C)
        return;
    int n = (int)(i / C), c = (int)(i % C);
    if (!head[n])
        return;
    float *dst = dtable + (size_t)ids[n] * C + c;
    float acc = *dst;
    for (int m = n; m >= 0; m = next[m])
        acc += dout[(size_t)m * C + c];
    *dst = acc;
}

// Attention through cuBLAS (one sequence b at a time, the H heads' T×T
// scores in a scratch): S_h = scale·Q_h K_khᵀ, then a row kernel turns S
// into the probabilities P over the visible keys s <= t with mask[b, s] != 0
// (lse = +inf and P = 0 for a row that sees no key, the CPU kernel's
// convention), then O_h = P_h V_kh. The backward recomputes S, forms
// dP = dO_h V_khᵀ, and a row kernel P, D_t = Σ_s P_ts dP_ts and
// dS = P ⊙ (dP − D); then dV_kh += P_hᵀ dO_h, dQ_h += scale·dS_h K_kh and
// dK_kh += scale·dS_hᵀ Q_h. Rows: r = h·T + t of the (H, T, T) scratch.
__global__ void k_att_softmax(float *S, float *lse, const uint8_t *mask, int T, int b, int H)
{
    extern __shared__ float sh[];
    int r = blockIdx.x, h = r / T, t = r % T;
    float *row = S + (size_t)r * T;
    const uint8_t *mk = mask ? mask + (size_t)b * T : nullptr;
    float m = -INFINITY;
    for (int s = threadIdx.x; s <= t; s += blockDim.x)
        if (!mk || mk[s])
            m = fmaxf(m, row[s]);
    m = d_block_max(m, sh);
    float l = 0.0f;
    for (int s = threadIdx.x; s <= t; s += blockDim.x)
        if (!mk || mk[s])
            l += expf(row[s] - m);
    l = d_block_sum(l, sh);
    float L = l > 0.0f ? m + logf(l) : INFINITY;
    for (int s = threadIdx.x; s < T; s += blockDim.x)
        row[s] = l > 0.0f && s <= t && (!mk || mk[s]) ? expf(row[s] - L) : 0.0f;
    if (threadIdx.x == 0)
        lse[((size_t)b * H + h) * T + t] = L;
}

// S (in: scores, out: P) and dP (in: dO·Vᵀ, out: dS) of one sequence b.
__global__ void k_att_grad_rows(float *S, float *dP, const float *lse, const uint8_t *mask, int T,
                                int b, int H)
{
    extern __shared__ double shd[];
    int r = blockIdx.x, h = r / T, t = r % T;
    float *srow = S + (size_t)r * T, *drow = dP + (size_t)r * T;
    const uint8_t *mk = mask ? mask + (size_t)b * T : nullptr;
    float L = lse[((size_t)b * H + h) * T + t];
    double D = 0.0;
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
        float p = !isinf(L) && s <= t && (!mk || mk[s]) ? expf(srow[s] - L) : 0.0f;
        srow[s] = p;
        D += (double)p * drow[s];
    }
    float Df = (float)d_block_sum(D, shd);
    for (int s = threadIdx.x; s < T; s += blockDim.x) // each s is this thread's own
        drow[s] = srow[s] * (drow[s] - Df);
}

// ---- fused (flash-style) causal GQA attention ------------------------------------
//
// The default of rl_cuda_attention_* (RL_CUDA_ATTENTION=cublas selects the
// cuBLAS path above instead; both measured on an H200, docs/RESULTS.md). float32 in and
// out on CUDA cores with float32 accumulation in both precisions (bf16 leaves
// attention in float32, bf16-precision.md); nothing of size T² is stored.
// Tiles of RL_FA_B = 64 query rows × 64 keys; a block has 256 threads, thread
// (ty, tx) = (tid / 16, tid % 16) holds the tile's rows ty·4 + i (i < 4) and
// its columns tx + 16·j, so a row's 16 threads are 16 consecutive lanes of one
// warp and its max and sums reduce by xor shuffles (every lane gets the same
// value: each step adds the same two operands). The head size is padded with
// zeros to D = 32, 64 or 128 (a template parameter); wider heads take the
// cuBLAS path. Shared tiles are row-major with stride D + 4 (≡ 4 mod 32
// banks): the dot products read float4s along the head (a quarter warp's
// eight float4s, rows tx·(D + 4), cover the 32 banks once), the products
// with P read one float per thread along a row (consecutive), and P/dS
// (stride 68) are read as float4s of four keys.
//
// Forward: one block per (query tile, head, sequence), the longest rows first;
// an online softmax over the key tiles 0..the diagonal (running max m, sum l,
// the output rescaled by e^(m_old − m_new)); lse = m + log l, +inf and out = 0
// for a row that sees no key (the CPU kernel's convention). Backward, no
// atomics: (1) per (query tile, head): D_t = dO_t · O_t from the forward's
// output (the entry's `out`; when NULL, Σ_s P_ts dP_ts in a first sweep over
// the key tiles), then dS = P ⊙ (dP − D) and dQ += scale·dS K over the key
// tiles; D is kept in a B·H·T scratch; (2) per (key
// tile, query head): for each query tile from the diagonal on, P and dS
// recomputed, dV += Pᵀ dO and dK += scale·dSᵀ Q, each head's share written
// to a 2·B·H·T·hd scratch and (3) summed over the group's heads in order into
// dK/dV (without grouping, (2) runs per kv head and adds directly). Every sum
// runs in a fixed order: a GPU run repeats bit for bit.
#define RL_FA_B 64
#define RL_FA_PS (RL_FA_B + 4) // the P/dS tiles' row stride (float4-aligned)
#define RL_FA_THREADS 256

__device__ __forceinline__ float d_row16_max(float v)
{
    for (int o = 8; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float d_row16_sum(float v)
{
    for (int o = 8; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Rows r0..r0+63 of a (T, ·) slice with row stride rs into sm (64, D + 4),
// zeros past T and past hd.
template <int D>
__device__ void d_fa_load(float *sm, const float *base, int r0, int T, int rs, int hd)
{
    for (int i = threadIdx.x; i < RL_FA_B * D; i += RL_FA_THREADS) {
        int r = i / D, e = i % D;
        float x = 0.0f;
        if (r0 + r < T && e < hd)
            x = base[(size_t)(r0 + r) * rs + e];
        sm[r * (D + 4) + e] = x;
    }
}

// Key c visible to query t (both < T checked by the caller where needed).
__device__ __forceinline__ bool d_fa_vis(int c, int t, int T, const uint8_t *mb)
{
    return c <= t && c < T && (!mb || mb[c]);
}

// s[i][j] = A_row(ty·4+i) · B_row(tx+16j) over D (A, B shared tiles, stride
// D + 4), four elements of the head per float4 load.
template <int D>
__device__ __forceinline__ void d_fa_dot(float s[4][4], const float *A, const float *Bt, int ty, int tx)
{
    constexpr int DS = D + 4;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            s[i][j] = 0.0f;
#pragma unroll 4
    for (int e = 0; e < D; e += 4) {
        float4 a[4], bb[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[i] = *(const float4 *)&A[(ty * 4 + i) * DS + e];
#pragma unroll
        for (int j = 0; j < 4; j++)
            bb[j] = *(const float4 *)&Bt[(tx + 16 * j) * DS + e];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = fmaf(a[i].x, bb[j].x, s[i][j]);
                s[i][j] = fmaf(a[i].y, bb[j].y, s[i][j]);
                s[i][j] = fmaf(a[i].z, bb[j].z, s[i][j]);
                s[i][j] = fmaf(a[i].w, bb[j].w, s[i][j]);
            }
    }
}

__device__ __forceinline__ float d_f4(const float4 &v, int k)
{
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// acc[i][jj] += Σ_c W[row ty·4+i][c] · X[c][tx + 16·jj] over c < n (n rounded
// up to 4: W's columns past the tile's keys are 0, X's rows past T are 0);
// W (64, RL_FA_PS) read as float4s, X a tile of stride D + 4.
template <int D>
__device__ __forceinline__ void d_fa_wx(float acc[4][D / 16], const float *W, const float *X, int n,
                                        int ty, int tx)
{
    constexpr int DS = D + 4, J = D / 16;
    n = (n + 3) & ~3;
    for (int c = 0; c < n; c += 4) {
        float4 w4[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            w4[i] = *(const float4 *)&W[(ty * 4 + i) * RL_FA_PS + c];
#pragma unroll
        for (int cc = 0; cc < 4; cc++) {
            float xv[J];
#pragma unroll
            for (int jj = 0; jj < J; jj++)
                xv[jj] = X[(c + cc) * DS + tx + 16 * jj];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float w = d_f4(w4[i], cc);
#pragma unroll
                for (int jj = 0; jj < J; jj++)
                    acc[i][jj] = fmaf(w, xv[jj], acc[i][jj]);
            }
        }
    }
}

template <int D>
__global__ void __launch_bounds__(RL_FA_THREADS)
    k_fa_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                 const uint8_t *mask, int T, int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(16) float fsh[]; // float4 reads
    constexpr int DP = D + 4, J = D / 16;
    float *Qs = fsh, *Ks = Qs + RL_FA_B * DP, *Vs = Ks + RL_FA_B * DP, *Ps = Vs + RL_FA_B * DP;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * RL_FA_B; // the longest rows first
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (H / KH);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int qs = H * hd, ks = KH * hd;
    const float *qb = q + (size_t)b * T * qs + (size_t)h * hd;
    const float *kb = k + (size_t)b * T * ks + (size_t)kh * hd;
    const float *vb = v + (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    d_fa_load<D>(Qs, qb, q0, T, qs, hd);
    float m[4], l[4], o[4][J];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int jj = 0; jj < J; jj++)
            o[i][jj] = 0.0f;
    }
    const int last = (q0 + RL_FA_B < T ? q0 + RL_FA_B : T) - 1; // the tile's last real row
    for (int k0 = 0; k0 <= last; k0 += RL_FA_B) {
        __syncthreads(); // the previous tile's reads of Ks, Vs, Ps are done
        d_fa_load<D>(Ks, kb, k0, T, ks, hd);
        d_fa_load<D>(Vs, vb, k0, T, ks, hd);
        __syncthreads();
        float s[4][4];
        d_fa_dot<D>(s, Qs, Ks, ty, tx);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int t = q0 + ty * 4 + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = d_fa_vis(k0 + tx + 16 * j, t, T, mb) ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            mx = d_row16_max(mx);
            float mn = fmaxf(m[i], mx);
            float alpha = mn == -INFINITY ? 1.0f : expf(m[i] - mn);
            float ps = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mn);
                Ps[(ty * 4 + i) * RL_FA_PS + tx + 16 * j] = p;
                ps += p;
            }
            l[i] = l[i] * alpha + d_row16_sum(ps);
            m[i] = mn;
#pragma unroll
            for (int jj = 0; jj < J; jj++)
                o[i][jj] *= alpha;
        }
        __syncthreads();
        d_fa_wx<D>(o, Ps, Vs, T - k0 < RL_FA_B ? T - k0 : RL_FA_B, ty, tx);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int t = q0 + ty * 4 + i;
        if (t >= T)
            continue;
        float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        float *ob = out + ((size_t)b * T + t) * qs + (size_t)h * hd;
#pragma unroll
        for (int jj = 0; jj < J; jj++) {
            int e = tx + 16 * jj;
            if (e < hd)
                ob[e] = o[i][jj] * inv;
        }
        if (tx == 0)
            lse[((size_t)b * H + h) * T + t] = l[i] > 0.0f ? m[i] + logf(l[i]) : INFINITY;
    }
}

// The dK/dV kernels' query tile q0: its rows' lse and D into shared memory
// (threads 0-63; +inf and 0 past T).
__device__ __forceinline__ void d_fa_tile_stats(float *Ls, float *Ds, const float *lb, const float *db, int q0,
                                                int T)
{
    if (threadIdx.x < RL_FA_B) {
        int t = q0 + threadIdx.x;
        Ls[threadIdx.x] = t < T ? lb[t] : INFINITY;
        Ds[threadIdx.x] = t < T ? db[t] : 0.0f;
    }
}

// P_ts from the forward's lse (0 where invisible or the row sees no key).
__device__ __forceinline__ float d_fa_prob(float s, float L, bool vis)
{
    return vis && !isinf(L) ? expf(s - L) : 0.0f;
}

// The dQ kernel's sweep over key tiles: load the tile k0 of K and V into
// shared memory, then s = Q Kᵀ and dp = dO Vᵀ for this thread's 4×4 cells.
template <int D>
__device__ __forceinline__ void d_fa_key_tile(float s[4][4], float dp[4][4], float *Ks, float *Vs,
                                              const float *Qs, const float *Os, const float *kb,
                                              const float *vb, int k0, int T, int ks, int hd,
                                              int ty, int tx)
{
    __syncthreads();
    d_fa_load<D>(Ks, kb, k0, T, ks, hd);
    d_fa_load<D>(Vs, vb, k0, T, ks, hd);
    __syncthreads();
    d_fa_dot<D>(s, Qs, Ks, ty, tx);
    d_fa_dot<D>(dp, Os, Vs, ty, tx);
}

template <int D>
__global__ void __launch_bounds__(RL_FA_THREADS)
    k_fa_backward_dq(float *dq, float *Dsum, const float *dout, const float *out, const float *lse,
                     const float *q, const float *k, const float *v, const uint8_t *mask, int T,
                     int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(16) float fsh[]; // float4 reads
    constexpr int DP = D + 4, J = D / 16;
    float *Qs = fsh, *Os = Qs + RL_FA_B * DP, *Ks = Os + RL_FA_B * DP, *Vs = Ks + RL_FA_B * DP;
    float *Ss = Vs + RL_FA_B * DP; // dS
    const int q0 = (gridDim.x - 1 - blockIdx.x) * RL_FA_B;
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (H / KH);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int qs = H * hd, ks = KH * hd;
    const size_t qo = (size_t)b * T * qs + (size_t)h * hd, ko = (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    const float *lb = lse + ((size_t)b * H + h) * T;
    d_fa_load<D>(Qs, q + qo, q0, T, qs, hd);
    d_fa_load<D>(Os, dout + qo, q0, T, qs, hd);
    float L[4], Dr[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int t = q0 + ty * 4 + i;
        L[i] = t < T ? lb[t] : INFINITY;
        Dr[i] = 0.0f;
    }
    const int last = (q0 + RL_FA_B < T ? q0 + RL_FA_B : T) - 1;
    if (out) { // D_t = dO_t · O_t (the row's 16 lanes over the head)
        __syncthreads(); // Os loaded
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int t = q0 + ty * 4 + i;
            const float *orow = out + qo + (size_t)t * qs;
#pragma unroll
            for (int jj = 0; jj < J; jj++) {
                int e = tx + 16 * jj;
                if (t < T && e < hd)
                    Dr[i] = fmaf(Os[(ty * 4 + i) * DP + e], orow[e], Dr[i]);
            }
        }
    }
    // else sweep 1: D_t = Σ_s P_ts dP_ts (this thread's columns, then the row's 16 lanes)
    for (int k0 = 0; !out && k0 <= last; k0 += RL_FA_B) {
        float s[4][4], dp[4][4];
        d_fa_key_tile<D>(s, dp, Ks, Vs, Qs, Os, k + ko, v + ko, k0, T, ks, hd, ty, tx);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int t = q0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++)
                Dr[i] += d_fa_prob(s[i][j] * scale, L[i], d_fa_vis(k0 + tx + 16 * j, t, T, mb)) *
                         dp[i][j];
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
        Dr[i] = d_row16_sum(Dr[i]);
    // sweep 2: dS = P ⊙ (dP − D), dQ += scale·dS K
    float acc[4][J];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int jj = 0; jj < J; jj++)
            acc[i][jj] = 0.0f;
    for (int k0 = 0; k0 <= last; k0 += RL_FA_B) {
        float s[4][4], dp[4][4];
        d_fa_key_tile<D>(s, dp, Ks, Vs, Qs, Os, k + ko, v + ko, k0, T, ks, hd, ty, tx);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int t = q0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float p = d_fa_prob(s[i][j] * scale, L[i], d_fa_vis(k0 + tx + 16 * j, t, T, mb));
                Ss[(ty * 4 + i) * RL_FA_PS + tx + 16 * j] = p * (dp[i][j] - Dr[i]);
            }
        }
        __syncthreads();
        d_fa_wx<D>(acc, Ss, Ks, T - k0 < RL_FA_B ? T - k0 : RL_FA_B, ty, tx);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int t = q0 + ty * 4 + i;
        if (t >= T)
            continue;
        if (dq) {
            float *g = dq + qo + (size_t)t * qs;
#pragma unroll
            for (int jj = 0; jj < J; jj++) {
                int e = tx + 16 * jj;
                if (e < hd)
                    g[e] += scale * acc[i][jj];
            }
        }
        if (tx == 0)
            Dsum[((size_t)b * H + h) * T + t] = Dr[i];
    }
}

template <int D>
__global__ void __launch_bounds__(RL_FA_THREADS)
    k_fa_backward_dkdv(float *dk, float *dv, float *part, const float *dout, const float *lse,
                       const float *Dsum, const float *q, const float *k, const float *v,
                       const uint8_t *mask, int T, int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(16) float fsh[]; // float4 reads
    constexpr int DP = D + 4, J = D / 16;
    float *Ks = fsh, *Vs = Ks + RL_FA_B * DP, *Qs = Vs + RL_FA_B * DP, *Os = Qs + RL_FA_B * DP;
    float *Ps = Os + RL_FA_B * DP, *Ss = Ps + RL_FA_B * RL_FA_PS;
    float *Ls = Ss + RL_FA_B * RL_FA_PS, *Ds = Ls + RL_FA_B;
    const int k0 = blockIdx.x * RL_FA_B; // key tile 0 has the most query tiles: first
    // part == NULL: blockIdx.y is a kv head, its query heads in order, added
    // into dk/dv; else blockIdx.y is one query head, its share written to part
    const int rep = H / KH, kh = part ? (int)blockIdx.y / rep : (int)blockIdx.y, b = blockIdx.z;
    const int h0 = part ? (int)blockIdx.y : kh * rep, h1 = part ? h0 + 1 : h0 + rep;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int qs = H * hd, ks = KH * hd;
    const size_t ko = (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    d_fa_load<D>(Ks, k + ko, k0, T, ks, hd);
    d_fa_load<D>(Vs, v + ko, k0, T, ks, hd);
    float dka[4][J], dva[4][J];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int jj = 0; jj < J; jj++)
            dka[i][jj] = dva[i][jj] = 0.0f;
    for (int h = h0; h < h1; h++) {
        const size_t qo = (size_t)b * T * qs + (size_t)h * hd;
        const float *lb = lse + ((size_t)b * H + h) * T, *db = Dsum + ((size_t)b * H + h) * T;
        for (int q0 = k0; q0 < T; q0 += RL_FA_B) { // the tiles at and below the diagonal
            __syncthreads();
            d_fa_load<D>(Qs, q + qo, q0, T, qs, hd);
            d_fa_load<D>(Os, dout + qo, q0, T, qs, hd);
            d_fa_tile_stats(Ls, Ds, lb, db, q0, T);
            __syncthreads();
            // rows: this block's keys ty·4 + i; columns: the query tile's rows tx + 16j
            float s[4][4], dp[4][4];
            d_fa_dot<D>(s, Ks, Qs, ty, tx);
            d_fa_dot<D>(dp, Vs, Os, ty, tx);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int c = k0 + ty * 4 + i;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int r = tx + 16 * j, t = q0 + r;
                    float p = d_fa_prob(s[i][j] * scale, Ls[r], t < T && d_fa_vis(c, t, T, mb));
                    Ps[(ty * 4 + i) * RL_FA_PS + r] = p;
                    Ss[(ty * 4 + i) * RL_FA_PS + r] = p * (dp[i][j] - Ds[r]);
                }
            }
            __syncthreads();
            int rn = T - q0 < RL_FA_B ? T - q0 : RL_FA_B;
            d_fa_wx<D>(dva, Ps, Os, rn, ty, tx);
            d_fa_wx<D>(dka, Ss, Qs, rn, ty, tx);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int c = k0 + ty * 4 + i;
        if (c >= T)
            continue;
#pragma unroll
        for (int jj = 0; jj < J; jj++) {
            int e = tx + 16 * jj;
            if (e >= hd)
                continue;
            if (part) { // (2, B, H, T, hd): the dK shares, then the dV shares
                size_t o = (((size_t)b * H + h0) * T + c) * hd + e;
                part[o] = scale * dka[i][jj];
                part[(size_t)gridDim.z * H * T * hd + o] = dva[i][jj];
            } else {
                if (dk)
                    dk[ko + (size_t)c * ks + e] += scale * dka[i][jj];
                if (dv)
                    dv[ko + (size_t)c * ks + e] += dva[i][jj];
            }
        }
    }
}

// dk/dv (B, T, KH, hd) += the query heads' shares of part, summed in head
// order: one thread per element (blocks of RL_FA_THREADS).
__global__ void k_fa_reduce_kv(float *dk, float *dv, const float *part, int B, int T, int H,
                               int KH, int hd)
{
    int64_t i = (int64_t)blockIdx.x * RL_FA_THREADS + threadIdx.x;
    if (i >= (int64_t)B * T * KH * hd)
        return;
    int e = (int)(i % hd);
    int64_t r = i / hd;
    int kh = (int)(r % KH);
    r /= KH;
    int c = (int)(r % T), b = (int)(r / T), rep = H / KH;
    size_t plane = (size_t)B * H * T * hd;
    float sk = 0.0f, sv = 0.0f;
    for (int j = 0; j < rep; j++) {
        size_t o = (((size_t)b * H + kh * rep + j) * T + c) * hd + e;
        sk += part[o];
        sv += part[plane + o];
    }
    if (dk)
        dk[i] += sk;
    if (dv)
        dv[i] += sv;
}

// ---- bf16 tensor-core flash attention (model.precision bf16) -----------------------
//
// The bf16 pair of ops.h ("bf16 attention"): the products on tensor cores with
// the warp matrix functions (nvcuda::wmma, 16×16×16 tiles of bf16 with float32
// accumulators; sm_80 on), everything else in float32. The fused kernels'
// structure above with a different division of the work: tiles of 64 query
// rows × 64 keys, a block of 4 warps, and each warp owns 16 rows of the tile
// (queries in the forward and the dQ kernel, keys in the dK/dV kernel), so that
// its scores, probabilities and accumulators are its own: the block only
// synchronises to load the tiles all warps read. Products go shared memory →
// fragments → shared memory (S, dP as float32 tiles of stride 68; P, dS as
// bf16 tiles of stride 72; the O, dQ, dK, dV accumulators as float32 tiles of
// stride D + 4, loaded into accumulator fragments and stored back around each
// product), so no fragment's lane layout is assumed; the softmax and the
// elementwise steps run two lanes per row, the even and the odd columns (a
// row's two lanes in neighbouring banks; rows r and r + 8 share banks). The
// inputs (Q, K, V, and dO in the backward) are rounded to bf16 once per call
// into a scratch (s_fb_inputs; rl_bf16_round, the CPU reference's rounding:
// ops_attn_bf16.c) and loaded 16 bytes at a time; bf16 tiles have stride
// D + 8, every tile a fragment touches starts 32-byte aligned. No atomics: dK/dV of grouped
// heads go through the same per-head shares and k_fa_reduce_kv as above.
#define RL_FB_B 64
#define RL_FB_THREADS 128
#define RL_FB_PS (RL_FB_B + 8) // the bf16 P/dS tiles' stride
#define RL_FB_SS (RL_FB_B + 4) // the float32 S/dP tiles' stride

namespace fbw = nvcuda::wmma;
typedef fbw::fragment<fbw::matrix_a, 16, 16, 16, __nv_bfloat16, fbw::row_major> fb_a_row;
typedef fbw::fragment<fbw::matrix_b, 16, 16, 16, __nv_bfloat16, fbw::row_major> fb_b_row;
typedef fbw::fragment<fbw::matrix_b, 16, 16, 16, __nv_bfloat16, fbw::col_major> fb_b_col;
typedef fbw::fragment<fbw::accumulator, 16, 16, 16, float> fb_acc;

__device__ __forceinline__ const __nv_bfloat16 *d_fb_p(const uint16_t *p)
{
    return reinterpret_cast<const __nv_bfloat16 *>(p);
}

// Rows r0..r0+63 of a (T, ·) bf16 slice with row stride rs (the inputs
// rounded once per call, s_fb_inputs) into the tile sm (64, D + 8); zeros
// past T and past hd. All the block's threads; 16 bytes a load where the
// rows are whole and aligned (hd = D, the usual head sizes 32, 64, 128).
template <int D>
__device__ void d_fb_load(uint16_t *sm, const uint16_t *base, int r0, int T, int rs, int hd)
{
    if (hd == D && rs % 8 == 0 && ((uintptr_t)base & 15) == 0) {
        for (int i = threadIdx.x; i < RL_FB_B * D / 8; i += RL_FB_THREADS) {
            int r = i / (D / 8), e = (i % (D / 8)) * 8;
            uint4 x = make_uint4(0, 0, 0, 0);
            if (r0 + r < T)
                x = *(const uint4 *)&base[(size_t)(r0 + r) * rs + e];
            *(uint4 *)&sm[r * (D + 8) + e] = x;
        }
        return;
    }
    for (int i = threadIdx.x; i < RL_FB_B * D; i += RL_FB_THREADS) {
        int r = i / D, e = i % D;
        uint16_t x = 0;
        if (r0 + r < T && e < hd)
            x = base[(size_t)(r0 + r) * rs + e];
        sm[r * (D + 8) + e] = x;
    }
}

// One warp: C (16, 64; stride RL_FB_SS) = A (16, D) · Bmᵀ, A and Bm (64, D)
// bf16 tiles of stride D + 8.
template <int D>
__device__ __forceinline__ void d_fb_abt(float *C, const uint16_t *A, const uint16_t *Bm)
{
    fb_acc c[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        fbw::fill_fragment(c[j], 0.0f);
#pragma unroll
    for (int kk = 0; kk < D; kk += 16) {
        fb_a_row a;
        fbw::load_matrix_sync(a, d_fb_p(A + kk), D + 8);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            fb_b_col b;
            fbw::load_matrix_sync(b, d_fb_p(Bm + j * 16 * (D + 8) + kk), D + 8);
            fbw::mma_sync(c[j], a, b, c[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
        fbw::store_matrix_sync(C + j * 16, c[j], RL_FB_SS, fbw::mem_row_major);
}

// One warp: C (16, D; float32, stride D + 4) += W (16, nk; bf16, stride
// RL_FB_PS) · X (nk, D; bf16, stride D + 8), nk a multiple of 16.
template <int D>
__device__ __forceinline__ void d_fb_wx(float *C, const uint16_t *W, const uint16_t *X, int nk)
{
    fb_a_row a[RL_FB_B / 16]; // W's fragments, loaded once for every column tile
    const int n = nk / 16;
#pragma unroll
    for (int i = 0; i < RL_FB_B / 16; i++)
        if (i < n)
            fbw::load_matrix_sync(a[i], d_fb_p(W + i * 16), RL_FB_PS);
#pragma unroll
    for (int j = 0; j < D / 16; j++) {
        fb_acc c;
        fbw::load_matrix_sync(c, C + j * 16, D + 4, fbw::mem_row_major);
#pragma unroll
        for (int i = 0; i < RL_FB_B / 16; i++)
            if (i < n) {
                fb_b_row b;
                fbw::load_matrix_sync(b, d_fb_p(X + i * 16 * (D + 8) + j * 16), D + 8);
                fbw::mma_sync(c, a[i], b, c);
            }
        fbw::store_matrix_sync(C + j * 16, c, D + 4, fbw::mem_row_major);
    }
}

// The keys (or queries) of a tile that a product must cover: those before T,
// rounded up to the tile's 16.
__device__ __forceinline__ int d_fb_span(int T, int x0)
{
    int n = T - x0 < RL_FB_B ? T - x0 : RL_FB_B;
    return (n + 15) & ~15;
}

// Shared memory of the bf16 kernels, in bytes (every part a multiple of 128).
static size_t s_fb_bytes(int D, int kernel) // 0 forward, 1 dq, 2 dk/dv
{
    return (kernel == 0 ? 3 : 4) * (size_t)RL_FB_B * (D + 8) * 2 +
           (kernel == 2 ? 2 : 1) * (size_t)RL_FB_B * RL_FB_PS * 2 +
           (kernel == 1 ? 2 : 1) * (size_t)RL_FB_B * RL_FB_SS * 4 +
           (kernel == 2 ? 2 : 1) * (size_t)RL_FB_B * (D + 4) * 4 + (kernel == 2 ? 2 * RL_FB_B * 4 : 0);
}

template <int D>
__global__ void __launch_bounds__(RL_FB_THREADS)
    k_fb_forward(float *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                 const uint8_t *mask, int T, int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(128) float fbsh[];
    constexpr int DB = D + 8, DF = D + 4;
    uint16_t *Qs = (uint16_t *)fbsh, *Ks = Qs + RL_FB_B * DB, *Vs = Ks + RL_FB_B * DB;
    uint16_t *Ps = Vs + RL_FB_B * DB;
    float *Ss = (float *)(Ps + RL_FB_B * RL_FB_PS), *Os = Ss + RL_FB_B * RL_FB_SS;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * RL_FB_B; // the longest rows first
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (H / KH);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, c0 = lane % 2;
    const int e0 = lane % 2, t = q0 + w * 16 + r;
    const int qs = H * hd, ks = KH * hd;
    const uint16_t *kb = k + (size_t)b * T * ks + (size_t)kh * hd;
    const uint16_t *vb = v + (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    uint16_t *Pw = Ps + w * 16 * RL_FB_PS;
    float *Sw = Ss + w * 16 * RL_FB_SS, *Ow = Os + w * 16 * DF;
    d_fb_load<D>(Qs, q + (size_t)b * T * qs + (size_t)h * hd, q0, T, qs, hd);
    for (int i = lane; i < 16 * D; i += 32)
        Ow[(i / D) * DF + i % D] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int last = (q0 + RL_FB_B < T ? q0 + RL_FB_B : T) - 1;
    for (int k0 = 0; k0 <= last; k0 += RL_FB_B) {
        __syncthreads(); // the previous tile's reads of Ks and Vs are done
        d_fb_load<D>(Ks, kb, k0, T, ks, hd);
        d_fb_load<D>(Vs, vb, k0, T, ks, hd);
        __syncthreads();
        d_fb_abt<D>(Sw, Qs + w * 16 * DB, Ks);
        __syncwarp();
        float mx = -INFINITY;
        for (int c = c0; c < RL_FB_B; c += 2) {
            float s = d_fa_vis(k0 + c, t, T, mb) ? Sw[r * RL_FB_SS + c] * scale : -INFINITY;
            Sw[r * RL_FB_SS + c] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx);
        float alpha = mn == -INFINITY ? 1.0f : expf(m - mn), ps = 0.0f;
        for (int c = c0; c < RL_FB_B; c += 2) {
            float s = Sw[r * RL_FB_SS + c];
            float p = s == -INFINITY ? 0.0f : expf(s - mn);
            ps += p;
            Pw[r * RL_FB_PS + c] = rl_bf16_round(p);
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l = l * alpha + ps;
        m = mn;
        for (int e = e0; e < D; e += 2)
            Ow[r * DF + e] *= alpha;
        __syncwarp();
        d_fb_wx<D>(Ow, Pw, Vs, d_fb_span(T, k0));
    }
    __syncwarp();
    if (t < T) {
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *ob = out + ((size_t)b * T + t) * qs + (size_t)h * hd;
        for (int e = e0; e < D; e += 2)
            if (e < hd)
                ob[e] = Ow[r * DF + e] * inv;
        if (lane % 2 == 0)
            lse[((size_t)b * H + h) * T + t] = l > 0.0f ? m + logf(l) : INFINITY;
    }
}

// The dQ kernel's products for key tile k0: K and V loaded (the block), then
// this warp's S = Q Kᵀ and dP = dO Vᵀ.
template <int D>
__device__ __forceinline__ void d_fb_key_tile(float *Sw, float *dPw, uint16_t *Ks, uint16_t *Vs,
                                              const uint16_t *Qw, const uint16_t *dOw, const uint16_t *kb,
                                              const uint16_t *vb, int k0, int T, int ks, int hd)
{
    __syncthreads();
    d_fb_load<D>(Ks, kb, k0, T, ks, hd);
    d_fb_load<D>(Vs, vb, k0, T, ks, hd);
    __syncthreads();
    d_fb_abt<D>(Sw, Qw, Ks);
    d_fb_abt<D>(dPw, dOw, Vs);
    __syncwarp();
}

template <int D>
__global__ void __launch_bounds__(RL_FB_THREADS)
    k_fb_backward_dq(float *dq, float *Dsum, const float *dout, const float *out, const float *lse,
                     const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout16,
                     const uint8_t *mask, int T, int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(128) float fbsh[];
    constexpr int DB = D + 8, DF = D + 4;
    uint16_t *Qs = (uint16_t *)fbsh, *dOs = Qs + RL_FB_B * DB, *Ks = dOs + RL_FB_B * DB;
    uint16_t *Vs = Ks + RL_FB_B * DB, *dSs = Vs + RL_FB_B * DB;
    float *Ss = (float *)(dSs + RL_FB_B * RL_FB_PS), *dPs = Ss + RL_FB_B * RL_FB_SS;
    float *dQs = dPs + RL_FB_B * RL_FB_SS;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * RL_FB_B;
    const int h = blockIdx.y, b = blockIdx.z, kh = h / (H / KH);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, c0 = lane % 2;
    const int e0 = lane % 2, t = q0 + w * 16 + r;
    const int qs = H * hd, ks = KH * hd;
    const size_t qo = (size_t)b * T * qs + (size_t)h * hd, ko = (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    uint16_t *Qw = Qs + w * 16 * DB, *dOw = dOs + w * 16 * DB, *dSw = dSs + w * 16 * RL_FB_PS;
    float *Sw = Ss + w * 16 * RL_FB_SS, *dPw = dPs + w * 16 * RL_FB_SS, *dQw = dQs + w * 16 * DF;
    d_fb_load<D>(Qs, q + qo, q0, T, qs, hd);
    d_fb_load<D>(dOs, dout16 + qo, q0, T, qs, hd);
    for (int i = lane; i < 16 * D; i += 32)
        dQw[(i / D) * DF + i % D] = 0.0f;
    const float L = t < T ? lse[((size_t)b * H + h) * T + t] : INFINITY;
    const int last = (q0 + RL_FB_B < T ? q0 + RL_FB_B : T) - 1;
    float Dr = 0.0f;
    if (out) { // D_t = dO_t · O_t in float32, the row's two lanes over the head
        if (t < T)
            for (int e = e0; e < hd; e += 2)
                Dr = fmaf(dout[qo + (size_t)t * qs + e], out[qo + (size_t)t * qs + e], Dr);
    }
    // else sweep 1: D_t = Σ_s P_ts dP_ts
    for (int k0 = 0; !out && k0 <= last; k0 += RL_FB_B) {
        d_fb_key_tile<D>(Sw, dPw, Ks, Vs, Qw, dOw, k + ko, v + ko, k0, T, ks, hd);
        for (int c = c0; c < RL_FB_B; c += 2)
            Dr += d_fa_prob(Sw[r * RL_FB_SS + c] * scale, L, d_fa_vis(k0 + c, t, T, mb)) *
                  dPw[r * RL_FB_SS + c];
    }
    Dr += __shfl_xor_sync(0xffffffffu, Dr, 1);
    // sweep 2: dS = P ⊙ (dP − D), dQ += dS K (scaled at the end)
    for (int k0 = 0; k0 <= last; k0 += RL_FB_B) {
        d_fb_key_tile<D>(Sw, dPw, Ks, Vs, Qw, dOw, k + ko, v + ko, k0, T, ks, hd);
        for (int c = c0; c < RL_FB_B; c += 2) {
            float p = d_fa_prob(Sw[r * RL_FB_SS + c] * scale, L, d_fa_vis(k0 + c, t, T, mb));
            dSw[r * RL_FB_PS + c] = rl_bf16_round(p * (dPw[r * RL_FB_SS + c] - Dr));
        }
        __syncwarp();
        d_fb_wx<D>(dQw, dSw, Ks, d_fb_span(T, k0));
    }
    __syncwarp();
    if (t < T) {
        if (dq)
            for (int e = e0; e < D; e += 2)
                if (e < hd)
                    dq[qo + (size_t)t * qs + e] += scale * dQw[r * DF + e];
        if (lane % 2 == 0)
            Dsum[((size_t)b * H + h) * T + t] = Dr;
    }
}

template <int D>
__global__ void __launch_bounds__(RL_FB_THREADS)
    k_fb_backward_dkdv(float *dk, float *dv, float *part, const uint16_t *dout, const float *lse,
                       const float *Dsum, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                       const uint8_t *mask, int T, int H, int KH, int hd, float scale)
{
    extern __shared__ __align__(128) float fbsh[];
    constexpr int DB = D + 8, DF = D + 4;
    uint16_t *Ks = (uint16_t *)fbsh, *Vs = Ks + RL_FB_B * DB, *Qs = Vs + RL_FB_B * DB;
    uint16_t *dOs = Qs + RL_FB_B * DB, *Pb = dOs + RL_FB_B * DB, *dSb = Pb + RL_FB_B * RL_FB_PS;
    float *St = (float *)(dSb + RL_FB_B * RL_FB_PS); // Sᵀ, then dPᵀ over it (P held in registers)
    float *dKs = St + RL_FB_B * RL_FB_SS, *dVs = dKs + RL_FB_B * DF;
    float *Ls = dVs + RL_FB_B * DF, *Ds = Ls + RL_FB_B;
    const int k0 = blockIdx.x * RL_FB_B; // key tile 0 has the most query tiles: first
    // part == NULL: blockIdx.y is a kv head, its query heads in order, added
    // into dk/dv; else blockIdx.y is one query head, its share written to part
    const int rep = H / KH, kh = part ? (int)blockIdx.y / rep : (int)blockIdx.y, b = blockIdx.z;
    const int h0 = part ? (int)blockIdx.y : kh * rep, h1 = part ? h0 + 1 : h0 + rep;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, c0 = lane % 2;
    const int e0 = lane % 2, c = k0 + w * 16 + r; // this lane's key
    const int qs = H * hd, ks = KH * hd;
    const size_t ko = (size_t)b * T * ks + (size_t)kh * hd;
    const uint8_t *mb = mask ? mask + (size_t)b * T : nullptr;
    uint16_t *Kw = Ks + w * 16 * DB, *Vw = Vs + w * 16 * DB;
    uint16_t *Pw = Pb + w * 16 * RL_FB_PS, *dSw = dSb + w * 16 * RL_FB_PS;
    float *Stw = St + w * 16 * RL_FB_SS;
    float *dKw = dKs + w * 16 * DF, *dVw = dVs + w * 16 * DF;
    d_fb_load<D>(Ks, k + ko, k0, T, ks, hd);
    d_fb_load<D>(Vs, v + ko, k0, T, ks, hd);
    for (int i = lane; i < 16 * D; i += 32)
        dKw[(i / D) * DF + i % D] = dVw[(i / D) * DF + i % D] = 0.0f;
    for (int h = h0; h < h1; h++) {
        const size_t qo = (size_t)b * T * qs + (size_t)h * hd;
        const float *lb = lse + ((size_t)b * H + h) * T, *db = Dsum + ((size_t)b * H + h) * T;
        for (int q0 = k0; q0 < T; q0 += RL_FB_B) { // the tiles at and below the diagonal
            __syncthreads();
            d_fb_load<D>(Qs, q + qo, q0, T, qs, hd);
            d_fb_load<D>(dOs, dout + qo, q0, T, qs, hd);
            d_fa_tile_stats(Ls, Ds, lb, db, q0, T);
            __syncthreads();
            // rows: this warp's keys; columns: the query tile's rows. Sᵀ,
            // this lane's P (registers, float32; bf16 into Pw), then dPᵀ in
            // the same float tile and dS from them: one float tile, not two
            // (the shared memory of two blocks an SM at hd 64)
            d_fb_abt<D>(Stw, Kw, Qs);
            __syncwarp();
            float p[RL_FB_B / 2];
#pragma unroll
            for (int jj = 0; jj < RL_FB_B / 2; jj++) {
                int j = c0 + 2 * jj, tq = q0 + j;
                p[jj] = d_fa_prob(Stw[r * RL_FB_SS + j] * scale, Ls[j], tq < T && d_fa_vis(c, tq, T, mb));
                Pw[r * RL_FB_PS + j] = rl_bf16_round(p[jj]);
            }
            __syncwarp(); // every lane has read its Sᵀ before dPᵀ overwrites it
            d_fb_abt<D>(Stw, Vw, dOs);
            __syncwarp();
#pragma unroll
            for (int jj = 0; jj < RL_FB_B / 2; jj++) {
                int j = c0 + 2 * jj;
                dSw[r * RL_FB_PS + j] = rl_bf16_round(p[jj] * (Stw[r * RL_FB_SS + j] - Ds[j]));
            }
            __syncwarp();
            int rn = d_fb_span(T, q0);
            d_fb_wx<D>(dVw, Pw, dOs, rn);
            d_fb_wx<D>(dKw, dSw, Qs, rn);
        }
    }
    __syncwarp();
    if (c < T)
        for (int e = e0; e < D; e += 2) {
            if (e >= hd)
                continue;
            if (part) { // (2, B, H, T, hd): the dK shares, then the dV shares
                size_t o = (((size_t)b * H + h0) * T + c) * hd + e;
                part[o] = scale * dKw[r * DF + e];
                part[(size_t)gridDim.z * H * T * hd + o] = dVw[r * DF + e];
            } else {
                if (dk)
                    dk[ko + (size_t)c * ks + e] += scale * dKw[r * DF + e];
                if (dv)
                    dv[ko + (size_t)c * ks + e] += dVw[r * DF + e];
            }
        }
}

// One block per row of logits (N, V): the CPU kernel's sums in double.
__global__ void k_logprob_forward(float *logp, float *entropy, float *lse, const float *logits,
                                  const int32_t *target, float inv_temp, int V)
{
    extern __shared__ double shd[];
    int n = blockIdx.x;
    const float *z = logits + (size_t)n * V;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        m = fmaxf(m, z[j]);
    m = d_block_max(m, (float *)shd) * inv_temp;
    double s = 0.0, sa = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float d = z[j] * inv_temp - m, e = expf(d);
        s += e;
        sa += (double)(e * d);
    }
    s = d_block_sum(s, shd);
    sa = d_block_sum(sa, shd);
    if (threadIdx.x == 0)
        rl_logprob_row_end(n, z, target ? target[n] : -1, inv_temp, m, s, sa, logp, entropy, lse);
}

__global__ void k_logprob_backward(float *dlogits, const float *dlogp, const float *dentropy,
                                   const float *logits, const float *lse, const float *entropy,
                                   const int32_t *target, float inv_temp, int V)
{
    int n = blockIdx.x;
    const float *z = logits + (size_t)n * V;
    float *d = dlogits + (size_t)n * V;
    float gl = dlogp ? dlogp[n] : 0.0f, ge = dentropy ? dentropy[n] : 0.0f;
    int y = target ? target[n] : -1;
    if (y < 0)
        gl = 0.0f;
    float l = lse[n], H = ge != 0.0f ? entropy[n] : 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float lp = z[j] * inv_temp - l, p = expf(lp);
        float g = rl_logprob_grad(gl, ge, lp, p, H);
        if (j == y)
            g += gl;
        d[j] = g * inv_temp; // d may alias z: each element is read, then written, by one thread
    }
}

// ---- optimiser and weight copies ----------------------------------------------------

// The next token of row blockIdx.x (rl_sample_rows): lse and entropy as
// k_logprob_forward; u < 0: the first argmax (ties to the lower index);
// else the inverse CDF in index order: each thread sums a contiguous chunk,
// thread 0 turns the chunk sums into prefixes in thread order, and the one
// thread whose chunk holds the target walks it. RL_SAMPLE_THREADS threads.
#define RL_SAMPLE_THREADS 512
__global__ void k_sample_rows(int32_t *tok, float *logp, float *entropy, const float *logits,
                              const double *u, float inv_temp, int V)
{
    __shared__ double shd[RL_SAMPLE_THREADS];
    __shared__ int si[RL_SAMPLE_THREADS];
    __shared__ double total_sh;
    __shared__ int pick;
    int i = blockIdx.x, tid = threadIdx.x;
    const float *z = logits + (size_t)i * V;
    float m = -INFINITY;
    for (int j = tid; j < V; j += blockDim.x)
        m = fmaxf(m, z[j]);
    m = d_block_max(m, (float *)shd) * inv_temp;
    double s = 0.0, sa = 0.0;
    for (int j = tid; j < V; j += blockDim.x) {
        float d = z[j] * inv_temp - m, e = expf(d);
        s += e;
        sa += (double)(e * d);
    }
    s = d_block_sum(s, shd);
    sa = d_block_sum(sa, shd);
    float lse;
    rl_logprob_row_end(0, z, -1, inv_temp, m, s, sa, nullptr, tid == 0 ? entropy + i : nullptr,
                       &lse); // every thread gets lse; thread 0 writes the entropy
    if (!isfinite(lse)) { // the same for every thread
        if (tid == 0) {
            tok[i] = -1;
            logp[i] = 0.0f;
        }
        return;
    }
    double ui = u[i];
    if (ui < 0.0) {
        float *sv = (float *)shd;
        float bv = -INFINITY;
        int bi = V;
        for (int j = tid; j < V; j += blockDim.x) // ascending: the thread's first maximum
            if (bi == V || z[j] > bv) {
                bv = z[j];
                bi = j;
            }
        sv[tid] = bv;
        si[tid] = bi;
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h >>= 1) {
            if (tid < h) {
                float ov = sv[tid + h];
                int oi = si[tid + h];
                if (oi < V && (si[tid] == V || ov > sv[tid] || (ov == sv[tid] && oi < si[tid]))) {
                    sv[tid] = ov;
                    si[tid] = oi;
                }
            }
            __syncthreads();
        }
        if (tid == 0)
            pick = si[0] < V ? si[0] : 0;
    } else {
        int per = (V + blockDim.x - 1) / blockDim.x, lo = tid * per;
        int hi = lo + per < V ? lo + per : V;
        double cs = 0.0;
        for (int j = lo; j < hi; j++)
            cs += exp((double)z[j] * inv_temp - lse);
        shd[tid] = cs;
        __syncthreads();
        if (tid == 0) {
            double run = 0.0;
            for (int t = 0; t < (int)blockDim.x; t++) {
                double v = shd[t];
                shd[t] = run;
                run += v;
            }
            total_sh = run;
            pick = V - 1;
        }
        __syncthreads();
        double target = ui * total_sh, cum = shd[tid];
        if (cum <= target && target < cum + cs)
            for (int j = lo; j < hi; j++) {
                cum += exp((double)z[j] * inv_temp - lse);
                if (cum > target) {
                    pick = j;
                    break;
                }
            }
    }
    __syncthreads();
    if (tid == 0) {
        tok[i] = pick;
        logp[i] = z[pick] * inv_temp - lse;
    }
}

// Row i's key/value into its cache slot: one thread per element of (n, kvd).
__global__ void k_kv_cache_write(float *kc, float *vc, const float *k, const float *v,
                                 const int32_t *slot, const int32_t *pos, int n, int kvd, int maxT)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (int64_t)n * kvd)
        return;
    int i = (int)(j / kvd), e = (int)(j % kvd);
    size_t at = ((size_t)slot[i] * maxT + pos[i]) * kvd + e;
    kc[at] = k[j];
    vc[at] = v[j];
}

// One block per (row, head): scores over the row's positions 0..pos[i] into
// the scratch, softmax by block reductions, then each thread one output
// element summed over the positions in order.
__global__ void k_decode_attention(float *out, float *scores, const float *q, const float *kc,
                                   const float *vc, const int32_t *slot, const int32_t *pos,
                                   int H, int KH, int hd, int maxT, float scale)
{
    __shared__ float sh[256];
    int ih = blockIdx.x, i = ih / H, h = ih % H, rep = H / KH, kvd = KH * hd;
    int len = pos[i] + 1;
    const float *qv = q + (size_t)i * H * hd + (size_t)h * hd;
    const float *kb = kc + (size_t)slot[i] * maxT * kvd + (size_t)(h / rep) * hd;
    const float *vb = vc + (size_t)slot[i] * maxT * kvd + (size_t)(h / rep) * hd;
    float *sc = scores + (size_t)ih * maxT;
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < len; t += blockDim.x) {
        const float *kr = kb + (size_t)t * kvd;
        float dot = 0.0f;
        for (int e = 0; e < hd; e++)
            dot += qv[e] * kr[e];
        sc[t] = dot * scale;
        mx = fmaxf(mx, sc[t]);
    }
    mx = d_block_max(mx, sh);
    float sum = 0.0f;
    for (int t = threadIdx.x; t < len; t += blockDim.x) {
        float p = expf(sc[t] - mx);
        sc[t] = p;
        sum += p;
    }
    sum = d_block_sum(sum, sh); // its barriers also order the scores' writes before the reads below
    float inv = 1.0f / sum;
    float *o = out + (size_t)i * H * hd + (size_t)h * hd;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t < len; t++)
            acc += sc[t] * inv * vb[(size_t)t * kvd + e];
        o[e] = acc;
    }
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, int64_t n, rl_adamw_scalars s)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        rl_adamw_elem(&s, &p[i], g[i], &m[i], &v[i]);
}

#define RL_SUMSQ_BLOCK ((int64_t)1 << 16)

// One block of threads per 64 Ki elements: its sum of squares in double.
__global__ void k_sumsq_blocks(double *part, const float *g, int64_t n)
{
    extern __shared__ double shd[];
    int64_t lo = (int64_t)blockIdx.x * RL_SUMSQ_BLOCK;
    int64_t hi = lo + RL_SUMSQ_BLOCK < n ? lo + RL_SUMSQ_BLOCK : n;
    double s = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        s += (double)g[i] * (double)g[i];
    s = d_block_sum(s, shd);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

__global__ void k_scale(float *a, float s, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] *= s;
}

__global__ void k_ema(float *ref, const float *cur, double keep, double take, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        ref[i] = (float)(keep * ref[i] + take * cur[i]);
}

// ---- the flow kinds' kernels (silu, the time embedding, standardisation) ----

__global__ void k_silu_forward(float *out, const float *inp, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        out[i] = x * (1.0f / (1.0f + expf(-x)));
    }
}

__global__ void k_silu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i], s = 1.0f / (1.0f + expf(-x));
        dinp[i] += dout[i] * s * (1.0f + x * (1.0f - s));
    }
}

// One thread per (row, pair i < E/2).
__global__ void k_time_embed(float *temb, const float *t, int64_t n, int E)
{
    int half = E / 2;
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n * half) {
        int64_t r = j / half;
        rl_time_embed_elem(temb + r * E, t[r], (int)(j % half), half);
    }
}

__global__ void k_standardize(float *out, const float *inp, const float *mean, const float *std,
                              float clip, int64_t n, int C)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int c = (int)(i % C);
        out[i] = rl_standardize_elem(inp[i], mean[c], std[c], clip);
    }
}

// ---- the convolutional kinds' kernels (ops_conv.h) ----------------------------

// The convolution as the CPU's im2col + GEMM, over a chunk of nc images at
// once: col (K, nc·P) holds row (c, i, j) (K = C·KH·KW) at column n·P + p
// (P = OH·OW), so one GEMM takes the whole chunk; the products come out
// (OC, nc·P) and a permute writes them as (nc, OC, P) with the bias. No
// atomics: col2im is one thread per input element summing its windows in
// the CPU's (i, j) order onto its old value.
struct d_conv {
    int C, H, W, KH, KW, pad, stride, OH, OW;
};

__global__ void k_im2col(float *col, const float *x, d_conv g, int nc)
{
    int64_t P = (int64_t)g.OH * g.OW, L = nc * P;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)g.C * g.KH * g.KW * L)
        return;
    int64_t k = i / L, q = i % L;
    int n = (int)(q / P), p = (int)(q % P), oy = p / g.OW, ox = p % g.OW;
    int kj = (int)(k % g.KW), ki = (int)((k / g.KW) % g.KH), c = (int)(k / ((int64_t)g.KW * g.KH));
    int y = oy * g.stride - g.pad + ki, xx = ox * g.stride - g.pad + kj;
    col[i] = y < 0 || y >= g.H || xx < 0 || xx >= g.W
                 ? 0.0f
                 : x[(((int64_t)n * g.C + c) * g.H + y) * g.W + xx];
}

__global__ void k_col2im(float *dx, const float *dcol, d_conv g, int nc)
{
    int64_t P = (int64_t)g.OH * g.OW, L = nc * P;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)nc * g.C * g.H * g.W)
        return;
    int xx = (int)(i % g.W);
    int64_t t = i / g.W;
    int y = (int)(t % g.H);
    t /= g.H;
    int c = (int)(t % g.C), n = (int)(t / g.C);
    float acc = dx[i];
    for (int ki = 0; ki < g.KH; ki++) {
        int yy = y + g.pad - ki; // = oy·stride
        if (yy < 0 || yy % g.stride || yy / g.stride >= g.OH)
            continue;
        int oy = yy / g.stride;
        for (int kj = 0; kj < g.KW; kj++) {
            int xs = xx + g.pad - kj;
            if (xs < 0 || xs % g.stride || xs / g.stride >= g.OW)
                continue;
            int ox = xs / g.stride;
            acc += dcol[((int64_t)(c * g.KH + ki) * g.KW + kj) * L + (int64_t)n * P + (int64_t)oy * g.OW + ox];
        }
    }
    dx[i] = acc;
}

// out (nc, OC, P) = prod (OC, nc·P) permuted, + b[oc] (the CPU's sum, then the bias)
__global__ void k_conv_out(float *out, const float *prod, const float *b, int OC, int64_t P, int nc)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)nc * OC * P)
        return;
    int64_t p = i % P, t = i / P;
    int oc = (int)(t % OC), n = (int)(t / OC);
    float v = prod[(int64_t)oc * nc * P + n * P + p];
    out[i] = b ? v + b[oc] : v;
}

// dt (OC, nc·P) = dout (nc, OC, P) permuted: the backward's GEMM operand
__global__ void k_conv_dout_t(float *dt, const float *dout, int OC, int64_t P, int nc)
{
    int64_t L = nc * P, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= OC * L)
        return;
    int64_t q = i % L;
    int oc = (int)(i / L);
    dt[i] = dout[((q / P) * OC + oc) * P + q % P];
}

struct d_col_conv_db { // dout (N, OC, P) as rows n·P + p, columns oc
    const float *dout;
    int OC;
    int64_t P;
    __device__ double operator()(int r, int c) const
    {
        return dout[((int64_t)(r / P) * OC + c) * P + r % P];
    }
};

// One thread per output: the first maximum of its k×k window (the CPU's scan).
__global__ void k_maxpool_forward(float *out, int32_t *arg, const float *inp, int64_t planes, int H,
                                  int W, int k)
{
    int OH = H / k, OW = W / k;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * OH * OW)
        return;
    int ox = (int)(i % OW);
    int64_t t = i / OW;
    int oy = (int)(t % OH);
    const float *x = inp + (t / OH) * H * W;
    int best = oy * k * W + ox * k;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) {
            int at = (oy * k + a) * W + ox * k + b;
            if (x[at] > x[best])
                best = at;
        }
    out[i] = x[best];
    arg[i] = best;
}

// One thread per input element: the one window that holds it (stride =
// window) adds its gradient when it chose this element; no atomics.
__global__ void k_maxpool_backward(float *dinp, const float *dout, const int32_t *arg, int64_t planes,
                                   int H, int W, int k)
{
    int OH = H / k, OW = W / k;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * H * W)
        return;
    int x = (int)(i % W);
    int64_t t = i / W;
    int y = (int)(t % H), oy = y / k, ox = x / k;
    if (oy >= OH || ox >= OW)
        return;
    int64_t o = ((t / H) * OH + oy) * OW + ox;
    if (arg[o] == y * W + x)
        dinp[i] += dout[o];
}

__global__ void k_relu_forward(float *out, const float *inp, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

__global__ void k_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && inp[i] > 0.0f)
        dinp[i] += dout[i];
}

__global__ void k_plane_add(float *x, const float *add, int64_t n, int64_t hw)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += add[i / hw];
}

// One block per plane: strided partials in double, then the block's tree.
__global__ void k_plane_sum(float *out, const float *x, int64_t hw)
{
    extern __shared__ double shd[];
    const float *z = x + (int64_t)blockIdx.x * hw;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x)
        s += z[i];
    s = d_block_sum(s, shd);
    if (threadIdx.x == 0)
        out[blockIdx.x] = (float)s;
}

__global__ void k_upsample2x_add(float *a, const float *s, int64_t n, int h, int w)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int x = (int)(i % w);
    int64_t t = i / w;
    int y = (int)(t % h);
    a[i] += s[((t / h) * (h / 2) + y / 2) * (w / 2) + x / 2];
}

// One thread per coarse element: its 2×2 block in the CPU's raster order.
__global__ void k_upsample2x_backward(float *ds, const float *da, int64_t n, int h, int w)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int w2 = w / 2, h2 = h / 2, x = (int)(i % w2);
    int64_t t = i / w2;
    int y = (int)(t % h2);
    const float *d = da + ((t / h2) * h + 2 * y) * w + 2 * x;
    float acc = ds[i];
    acc += d[0];
    acc += d[1];
    acc += d[w];
    acc += d[w + 1];
    ds[i] = acc;
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

// One thread per element of n (blocks of 256): nothing for n <= 0; the
// launch error is noted.
template <typename K, typename... A> static void s_each(K kernel, int64_t n, A... args)
{
    if (n <= 0)
        return;
    kernel<<<s_blocks(n, 256), 256>>>(args...);
    CUDA_NOTE(cudaGetLastError());
}

// A kernels' temporary that grows and is kept (counted as scratch): the
// bf16 inputs of a product, the column sums' partials, the attention's
// scores, the embedding's row chains. cudaFree waits for the kernels that
// still read the old buffer. NULL with the error noted (it surfaces from
// rl_cuda_sync) and set when it cannot grow.
struct s_scratch {
    void *p;
    size_t cap;
};
static s_scratch s_b16, s_part, s_att, s_chain;

static void *s_scratch_get(s_scratch *sc, size_t bytes, const char *what)
{
    if (bytes > sc->cap) {
        rl_device_free(RL_DEVICE_CUDA, sc->p);
        sc->cap = 0;
        sc->p = rl_device_alloc_for(RL_DEVICE_CUDA, bytes, RL_MEM_SCRATCH);
        if (!sc->p) {
            rl_error_wrap(RL_ENOMEM, "%s: %zu bytes of device scratch", what, bytes);
            if (s_status == 0) {
                s_status = RL_ENOMEM;
                snprintf(s_where, sizeof s_where, "%s: %zu bytes of device scratch", what, bytes);
            }
            return nullptr;
        }
        sc->cap = bytes;
    }
    return sc->p;
}

// out (C) += Σ_n f(n, c) for n < N (the kernels' comment above).
template <typename F> static void s_colsum(float *out, F f, int N, int C, const char *what)
{
    if (N <= 0 || C <= 0)
        return;
    int chunks = (N + RL_COL_CHUNK - 1) / RL_COL_CHUNK;
    double *part = (double *)s_scratch_get(&s_part, sizeof(double) * (size_t)chunks * C, what);
    if (!part)
        return;
    dim3 grid(s_blocks(C, RL_COL_TILE), (unsigned)chunks), block(RL_COL_TILE, RL_COL_ROWS);
    k_colsum_part<F><<<grid, block>>>(part, f, N, C);
    CUDA_NOTE(cudaGetLastError());
    k_colsum_finish<<<s_blocks(C, 128), 128>>>(out, part, chunks, C);
    CUDA_NOTE(cudaGetLastError());
}

// ---- the fused attention's launches (the kernels' comment above) ----------------

static s_scratch s_fa_D;    // the backward's D = Σ_s P dP, B·H·T floats
static s_scratch s_fa_part; // its per-query-head dK/dV shares, 2·B·H·T·hd floats

static size_t s_fa_smem(int D, int kernel) // 0 forward, 1 dq, 2 dk/dv
{
    size_t t = (size_t)RL_FA_B * (D + 4), p = (size_t)RL_FA_B * RL_FA_PS;
    size_t n = kernel == 0 ? 3 * t + p : kernel == 1 ? 4 * t + p : 4 * t + 2 * p + 2 * RL_FA_B;
    return n * sizeof(float);
}

// The padded head size of the fused kernels for hd, 0 when they do not take
// it: wider than 128, or more shared memory than the device gives a block
// (hd 128's dK/dV kernel needs 167 KiB: an H100's 227 KiB, not an A100's 163).
static int s_fa_dim(int hd)
{
    int D = hd <= 0 ? 0 : hd <= 32 ? 32 : hd <= 64 ? 64 : hd <= 128 ? 128 : 0;
    static int optin = -1; // the device's opt-in shared memory per block
    if (D && optin < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
                cudaSuccess) {
            cudaGetLastError();
            optin = 0;
        }
    }
    return D && s_fa_smem(D, 2) <= (size_t)optin ? D : 0;
}

// Dynamic shared memory over 48 KiB must be asked for per kernel (a cheap
// host call, made at each launch so no state is kept).
template <typename K> static void s_fa_smem_allow(K kernel, size_t bytes)
{
    CUDA_NOTE(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// ---- the bf16 tensor-core attention's launches (the kernels' comment above) ----------

// The padded head size of the bf16 kernels for hd, 0 when they do not take it:
// a head wider than 128, a device before sm_80 (no bf16 tensor cores), or
// more shared memory than it gives a block (hd 128's dK/dV kernel: 170 KiB).
static int s_fb_dim(int hd)
{
    int D = hd <= 0 ? 0 : hd <= 32 ? 32 : hd <= 64 ? 64 : hd <= 128 ? 128 : 0;
    static int optin = -1, major = 0;
    if (D && optin < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
            cudaGetLastError();
            optin = 0;
        }
    }
    return D && major >= 8 && s_fb_bytes(D, 2) <= (size_t)optin ? D : 0;
}

// The bf16 kernels' inputs rounded once per call (2 bytes a value): n[i]
// floats of src[i] each, one after another in a scratch; dst[i] where each
// starts (a multiple of 8 values from the scratch's start when every n[i] is,
// so the kernels' 16-byte loads stay aligned). NULL sources are skipped.
static s_scratch s_fb_in;
static int s_fb_inputs(const float *const *src, const int64_t *n, const uint16_t **dst, int count,
                       const char *what)
{
    int64_t total = 0;
    for (int i = 0; i < count; i++)
        total += src[i] ? (n[i] + 7) / 8 * 8 : 0;
    uint16_t *p = (uint16_t *)s_scratch_get(&s_fb_in, sizeof(uint16_t) * (size_t)(total ? total : 1), what);
    if (!p)
        return RL_ENOMEM;
    for (int i = 0; i < count; i++) {
        dst[i] = src[i] ? p : nullptr;
        if (src[i] && n[i] > 0)
            s_each(k_round_bf16, n[i], p, src[i], n[i]);
        p += src[i] ? (n[i] + 7) / 8 * 8 : 0;
    }
    return 0;
}

// The launches of either fused family: the float32 kernels (bf16 = 0) or the
// bf16 tensor-core ones (bf16 = 1, their inputs rounded first); the same grid
// of 64-row tiles, each family its own kernels, block size and shared memory.
template <int D>
static int s_fused_forward(int bf16, float *out, float *lse, const float *q, const float *k,
                           const float *v, const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    dim3 grid((unsigned)((T + RL_FA_B - 1) / RL_FA_B), (unsigned)H, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)hd);
    if (!bf16) {
        s_fa_smem_allow(k_fa_forward<D>, s_fa_smem(D, 0));
        k_fa_forward<D><<<grid, RL_FA_THREADS, s_fa_smem(D, 0)>>>(out, lse, q, k, v, mask, T, H, KH, hd,
                                                                  scale);
        CUDA_NOTE(cudaGetLastError());
        return 0;
    }
    const int64_t nq = (int64_t)B * T * H * hd, nk = (int64_t)B * T * KH * hd;
    const float *src[3] = {q, k, v};
    const int64_t n[3] = {nq, nk, nk};
    const uint16_t *in[3];
    char what[160];
    snprintf(what, sizeof what, "attention (bf16, B=%d T=%d H=%d): the bf16 inputs", B, T, H);
    if (s_fb_inputs(src, n, in, 3, what))
        return RL_ENOMEM;
    s_fa_smem_allow(k_fb_forward<D>, s_fb_bytes(D, 0));
    k_fb_forward<D><<<grid, RL_FB_THREADS, s_fb_bytes(D, 0)>>>(out, lse, in[0], in[1], in[2], mask, T, H, KH,
                                                               hd, scale);
    CUDA_NOTE(cudaGetLastError());
    return 0;
}

template <int D>
static int s_fused_backward(int bf16, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    const char *fam = bf16 ? "bf16" : "flash";
    char what[160];
    snprintf(what, sizeof what, "attention backward (%s, B=%d T=%d H=%d): D per row", fam, B, T, H);
    float *Dsum = (float *)s_scratch_get(&s_fa_D, sizeof(float) * (size_t)B * H * T, what);
    if (!Dsum)
        return RL_ENOMEM;
    const uint16_t *in[4] = {nullptr, nullptr, nullptr, nullptr}; /* q k v dout in bf16 */
    if (bf16) {
        const int64_t nq = (int64_t)B * T * H * hd, nk = (int64_t)B * T * KH * hd;
        const float *src[4] = {q, k, v, dout};
        const int64_t n[4] = {nq, nk, nk, nq};
        snprintf(what, sizeof what, "attention backward (bf16, B=%d T=%d H=%d): the bf16 inputs", B, T, H);
        if (s_fb_inputs(src, n, in, 4, what))
            return RL_ENOMEM;
    }
    float scale = 1.0f / sqrtf((float)hd);
    dim3 g1((unsigned)((T + RL_FA_B - 1) / RL_FA_B), (unsigned)H, (unsigned)B);
    size_t sm1 = bf16 ? s_fb_bytes(D, 1) : s_fa_smem(D, 1), sm2 = bf16 ? s_fb_bytes(D, 2) : s_fa_smem(D, 2);
    if (bf16) {
        s_fa_smem_allow(k_fb_backward_dq<D>, sm1);
        k_fb_backward_dq<D><<<g1, RL_FB_THREADS, sm1>>>(dq, Dsum, dout, out, lse, in[0], in[1], in[2], in[3],
                                                        mask, T, H, KH, hd, scale);
    } else {
        s_fa_smem_allow(k_fa_backward_dq<D>, sm1);
        k_fa_backward_dq<D><<<g1, RL_FA_THREADS, sm1>>>(dq, Dsum, dout, out, lse, q, k, v, mask, T, H, KH, hd,
                                                        scale);
    }
    CUDA_NOTE(cudaGetLastError());
    if (!dk && !dv)
        return 0;
    // Grouped heads: one block per query head and key tile, each head's
    // share into a (2, B, H, T, hd) scratch, then summed in head order (a
    // block per kv head walking its H/KH heads was the critical path: 7 × the
    // query tiles of key tile 0 for Qwen2's grouping). One head per kv head:
    // added directly.
    float *part = nullptr;
    if (KH < H) {
        snprintf(what, sizeof what, "attention backward (%s, B=%d T=%d H=%d): dK/dV per head", fam, B, T,
                 H);
        part = (float *)s_scratch_get(&s_fa_part, 2 * sizeof(float) * (size_t)B * H * T * hd, what);
        if (!part)
            return RL_ENOMEM;
    }
    dim3 g2(g1.x, (unsigned)(part ? H : KH), (unsigned)B);
    if (bf16) {
        s_fa_smem_allow(k_fb_backward_dkdv<D>, sm2);
        k_fb_backward_dkdv<D><<<g2, RL_FB_THREADS, sm2>>>(dk, dv, part, in[3], lse, Dsum, in[0], in[1], in[2],
                                                          mask, T, H, KH, hd, scale);
    } else {
        s_fa_smem_allow(k_fa_backward_dkdv<D>, sm2);
        k_fa_backward_dkdv<D><<<g2, RL_FA_THREADS, sm2>>>(dk, dv, part, dout, lse, Dsum, q, k, v, mask, T, H,
                                                          KH, hd, scale);
    }
    CUDA_NOTE(cudaGetLastError());
    if (part) {
        int64_t n = (int64_t)B * T * KH * hd;
        k_fa_reduce_kv<<<s_blocks(n, RL_FA_THREADS), RL_FA_THREADS>>>(dk, dv, part, B, T, H, KH, hd);
        CUDA_NOTE(cudaGetLastError());
    }
    return 0;
}

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
    RL_CUDA_PROF("copy");
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

static_assert(sizeof(cudaIpcMemHandle_t) == 64, "rl_device_ipc_handle holds 64 bytes");

int rl_cuda_ipc_export(void *p, unsigned char handle[64])
{
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return rl_error_set(RL_EINVAL, "cuda ipc export of %p: %s (the start of a cudaMalloc block?)",
                            p, cudaGetErrorString(e));
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}

void *rl_cuda_ipc_open(const unsigned char handle[64])
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        cudaGetLastError();
        rl_error_set(RL_EINVAL, "cuda ipc open: %s", cudaGetErrorString(e));
        return nullptr;
    }
    return p;
}

int rl_cuda_ipc_close(void *p)
{
    cudaError_t e = cudaIpcCloseMemHandle(p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return rl_error_set(RL_EINVAL, "cuda ipc close of %p: %s", p, cudaGetErrorString(e));
    }
    return 0;
}

int rl_cuda_profile_set(int on)
{
    if (s_prof_on < 0) {
        const char *e = getenv("RL_CUDA_PROFILE");
        s_prof_on = e && *e && strcmp(e, "0") != 0;
    }
    int was = s_prof_on;
    s_prof_on = on != 0;
    s_prof_depth = 0;
    return was;
}

int rl_cuda_profile_take(struct rl_device_prof *out, int max)
{
    if (s_prof_on <= 0)
        return 0;
    cudaDeviceSynchronize();
    for (int i = 0; i < s_prof_nmarks; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, s_prof_marks[i].a, s_prof_marks[i].b) == cudaSuccess) {
            s_prof_names[s_prof_marks[i].name].calls++;
            s_prof_names[s_prof_marks[i].name].ms += ms;
        }
    }
    cudaGetLastError();
    s_prof_nmarks = 0;
    int n = 0;
    for (int k = 0; k < s_prof_nnames; k++) { // insertion by time, the longest first
        if (!s_prof_names[k].calls)
            continue;
        int j = n < max ? n++ : max;
        while (j > 0 && out[j - 1].ms < s_prof_names[k].ms) {
            if (j < max)
                out[j] = out[j - 1];
            j--;
        }
        if (j < max)
            out[j] = {s_prof_names[k].name, s_prof_names[k].calls, s_prof_names[k].ms};
        s_prof_names[k].calls = 0;
        s_prof_names[k].ms = 0.0;
    }
    return n;
}

void rl_cuda_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    RL_CUDA_PROF("sgemm");
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
    RL_CUDA_PROF(OC >= RL_PROF_VOCAB ? "linear_forward_vocab" : "linear_forward");
    if (b)
        s_each(k_bias_rows, (int64_t)N * OC, out, b, N, OC);
    rl_cuda_sgemm(0, 1, N, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

void rl_cuda_add_forward(float *out, const float *a, const float *b, int64_t n)
{
    RL_CUDA_PROF("add_forward");
    s_each(k_add, n, out, a, b, n);
}

void rl_cuda_add_inplace(float *a, const float *b, int64_t n) { rl_cuda_add_forward(a, a, b, n); }

void rl_cuda_softmax_forward(float *out, const float *inp, int N, int C)
{
    RL_CUDA_PROF("softmax_forward");
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_softmax_forward<<<N, t, t * sizeof(float)>>>(out, inp, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             float eps, int N, int C)
{
    RL_CUDA_PROF("rmsnorm_forward");
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_rmsnorm_forward<<<N, t, t * sizeof(float)>>>(out, rstd, inp, w, eps, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t n)
{
    RL_CUDA_PROF("swiglu_forward");
    s_each(k_swiglu_forward, n, out, gate, up, n);
}

void rl_cuda_memset0(void *p, size_t bytes)
{
    RL_CUDA_PROF("memset0");
    if (p && bytes)
        CUDA_NOTE(cudaMemsetAsync(p, 0, bytes));
}

void rl_cuda_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, int N, int C, int OC)
{
    RL_CUDA_PROF(OC >= RL_PROF_VOCAB ? "linear_backward_vocab" : "linear_backward");
    if (N <= 0 || C <= 0 || OC <= 0)
        return;
    if (dinp)
        rl_cuda_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw)
        rl_cuda_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db)
        s_colsum(db, d_col_plain{dout, OC}, N, OC, "linear backward: bias");
}

// ---- bf16 products (model.precision bf16) ----------------------------------

int rl_cuda_tf32_off(void)
{
    cublasMath_t mode;
    cublasHandle_t h = s_handle();
    if (!h || cublasGetMathMode(h, &mode) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return (mode & CUBLAS_TF32_TENSOR_OP_MATH) == 0;
}

void rl_cuda_round_bf16(uint16_t *out, const float *in, int64_t n)
{
    RL_CUDA_PROF("round_bf16");
    s_each(k_round_bf16, n, out, in, n);
}

static uint16_t *s_bf16_scratch(int64_t n, const char *fn, int N, int C, int OC)
{
    char what[160];
    snprintf(what, sizeof what, "%s (N=%d C=%d OC=%d): bf16 inputs", fn, N, C, OC);
    return (uint16_t *)s_scratch_get(&s_b16, sizeof(uint16_t) * (size_t)n, what);
}

// Row-major C (M,N) = op(A) · op(B) + beta·C with A, B in bf16, C float32,
// float32 accumulation (column-major C^T = op(B)^T · op(A)^T, as rl_cuda_sgemm).
static void s_gemm_bf16(int transA, int transB, int M, int N, int K, const uint16_t *A, int lda,
                        const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    const float alpha = 1.0f;
    CUBLAS_NOTE(cublasGemmEx(s_handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                             transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16BF,
                             ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

int rl_cuda_linear_forward_bf16(float *out, const float *inp, const uint16_t *w16, const float *b,
                                int N, int C, int OC)
{
    RL_CUDA_PROF(OC >= RL_PROF_VOCAB ? "linear_forward_bf16_vocab" : "linear_forward_bf16");
    if (N <= 0 || OC <= 0 || C <= 0)
        return 0;
    int64_t ni = (int64_t)N * C;
    uint16_t *x = s_bf16_scratch(ni, "linear_forward_bf16", N, C, OC);
    if (!x)
        return RL_ENOMEM;
    rl_cuda_round_bf16(x, inp, ni);
    if (b)
        s_each(k_bias_rows, (int64_t)N * OC, out, b, N, OC);
    s_gemm_bf16(0, 1, N, OC, C, x, C, w16, C, b ? 1.0f : 0.0f, out, OC);
    return 0;
}

int rl_cuda_linear_backward_bf16(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const uint16_t *w16, int N, int C, int OC)
{
    RL_CUDA_PROF(OC >= RL_PROF_VOCAB ? "linear_backward_bf16_vocab" : "linear_backward_bf16");
    if (N <= 0 || C <= 0 || OC <= 0)
        return 0;
    if (dinp || dw) {
        int64_t ng = (int64_t)N * OC, ni = dw ? (int64_t)N * C : 0;
        uint16_t *g = s_bf16_scratch(ng + ni, "linear_backward_bf16", N, C, OC);
        if (!g)
            return RL_ENOMEM;
        uint16_t *x = g + ng;
        rl_cuda_round_bf16(g, dout, ng);
        if (dinp)
            s_gemm_bf16(0, 0, N, C, OC, g, OC, w16, C, 1.0f, dinp, C);
        if (dw) {
            rl_cuda_round_bf16(x, inp, ni);
            s_gemm_bf16(1, 0, OC, C, N, g, OC, x, C, 1.0f, dw, C);
        }
    }
    if (db)
        s_colsum(db, d_col_plain{dout, OC}, N, OC, "linear backward: bias");
    return 0;
}

void rl_cuda_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C)
{
    RL_CUDA_PROF("softmax_backward");
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_softmax_backward<<<N, t, t * sizeof(double)>>>(dinp, dout, out, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C)
{
    RL_CUDA_PROF("rmsnorm_backward");
    if (N <= 0 || C <= 0)
        return;
    if (dinp) {
        int t = s_row_threads(C);
        k_rmsnorm_backward_dinp<<<N, t, t * sizeof(double)>>>(dinp, dout, inp, w, rstd, C);
        CUDA_NOTE(cudaGetLastError());
    }
    if (dw)
        s_colsum(dw, d_col_rmsnorm_dw{dout, inp, rstd, C}, N, C, "rmsnorm backward: weight");
}

void rl_cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, int64_t n)
{
    RL_CUDA_PROF("swiglu_backward");
    if (dgate || dup)
        s_each(k_swiglu_backward, n, dgate, dup, dout, gate, up, n);
}

static void s_rope(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                   float theta, int inverse)
{
    int64_t n = (int64_t)N * H * (hd / 2);
    s_each(k_rope, n, out, inp, pos, N, H, hd, theta, inverse);
}

void rl_cuda_rope_forward(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                          float theta)
{
    RL_CUDA_PROF("rope_forward");
    s_rope(out, inp, pos, N, H, hd, theta, 0);
}

void rl_cuda_rope_backward(float *dinp, const float *dout, const int32_t *pos, int N, int H,
                           int hd, float theta)
{
    RL_CUDA_PROF("rope_backward");
    s_rope(dinp, dout, pos, N, H, hd, theta, 1);
}

void rl_cuda_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C)
{
    RL_CUDA_PROF("embedding_forward");
    int64_t n = (int64_t)N * C;
    s_each(k_embedding_forward, n, out, ids, table, N, C);
}

void rl_cuda_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N,
                                int C)
{
    RL_CUDA_PROF("embedding_backward");
    if (N <= 0 || C <= 0)
        return;
    int32_t *next = (int32_t *)s_scratch_get(&s_chain, (sizeof(int32_t) + 1) * (size_t)N,
                                             "embedding backward: row chains");
    if (!next)
        return;
    uint8_t *head = (uint8_t *)(next + N);
    k_embedding_chain<<<s_blocks(N, 128), 128>>>(next, head, ids, N);
    CUDA_NOTE(cudaGetLastError());
    k_embedding_backward<<<s_blocks((int64_t)N * C, 256), 256>>>(dtable, dout, ids, next, head, N,
                                                                 C);
    CUDA_NOTE(cudaGetLastError());
}

static int s_attention_shape(const char *fn, int H, int KH, int hd)
{
    if (hd <= 0)
        return rl_error_set(RL_EINVAL, "%s: head size %d", fn, hd);
    if (KH <= 0 || H % KH)
        return rl_error_set(RL_EINVAL, "%s: %d heads over %d kv heads", fn, H, KH);
    return 0;
}

// Row-major C_i (M,N) = alpha·op(A_i) op(B_i) + beta·C_i for i < count, X_i =
// X + i·sX (column-major as rl_cuda_sgemm).
static void s_sgemm_batched(int transA, int transB, int M, int N, int K, float alpha,
                            const float *A, int lda, long long sA, const float *B, int ldb,
                            long long sB, float beta, float *C, int ldc, long long sC, int count)
{
    CUBLAS_NOTE(cublasSgemmStridedBatched(s_handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                          ldb, sB, A, lda, sA, &beta, C, ldc, sC, count));
}

// One sequence's view: query head h = kh·rep + r reads kv head kh. The
// products run per r, batched over kh: Q_h starts at r·hd with stride rep·hd
// between kv groups, K_kh and V_kh at kh·hd, S_h at h·T·T.
struct s_att_seq {
    int T, H, KH, hd, rep;
    long long qrow, krow; // row strides: H·hd, KH·hd
};

// X_h = scale·A_h B_khᵀ into the (H, T, T) scratch, A a query-shaped tensor
// of the sequence (Q or dO), B a key-shaped one (K or V).
static void s_att_scores(const s_att_seq *a, float *X, const float *A, const float *B, float scale)
{
    long long TT = (long long)a->T * a->T;
    for (int r = 0; r < a->rep; r++)
        s_sgemm_batched(0, 1, a->T, a->T, a->hd, scale, A + (size_t)r * a->hd, (int)a->qrow,
                        (long long)a->rep * a->hd, B, (int)a->krow, a->hd, 0.0f,
                        X + (size_t)r * TT, a->T, a->rep * TT, a->KH);
}

static int s_att_threads(int T) { return s_row_threads(T) < 256 ? s_row_threads(T) : 256; }

// The shapes checked, the sequence's view, and `copies` × H·T² floats of
// scratch in *S (NULL when there is nothing to do). RL_OK, or the error.
static int s_att_open(const char *fn, int B, int T, int H, int KH, int hd, int copies,
                      s_att_seq *a, float **S)
{
    *S = nullptr;
    int rc = s_attention_shape(fn, H, KH, hd);
    if (rc || B <= 0 || T <= 0 || H <= 0)
        return rc;
    *a = {T, H, KH, hd, H / KH, (long long)H * hd, (long long)KH * hd};
    char what[160];
    snprintf(what, sizeof what, "%s (B=%d T=%d H=%d): the heads' T×T scores", fn, B, T, H);
    *S = (float *)s_scratch_get(&s_att, copies * sizeof(float) * (size_t)H * T * T, what);
    return *S ? RL_OK : RL_ENOMEM;
}

static int s_cublas_attention_forward(float *out, float *lse, const float *q, const float *k,
                                      const float *v, const uint8_t *mask, int B, int T, int H,
                                      int KH, int hd)
{
    RL_CUDA_PROF("attention_forward");
    s_att_seq a;
    float *S;
    int rc = s_att_open("attention", B, T, H, KH, hd, 1, &a, &S);
    if (rc || !S)
        return rc;
    long long TT = (long long)T * T;
    int th = s_att_threads(T);
    for (int b = 0; b < B; b++) {
        size_t qo = (size_t)b * T * a.qrow, ko = (size_t)b * T * a.krow;
        s_att_scores(&a, S, q + qo, k + ko, 1.0f / sqrtf((float)hd));
        k_att_softmax<<<(unsigned)(H * T), th, th * sizeof(float)>>>(S, lse, mask, T, b, H);
        CUDA_NOTE(cudaGetLastError());
        for (int r = 0; r < a.rep; r++) // O_h = P_h V_kh
            s_sgemm_batched(0, 0, T, hd, T, 1.0f, S + (size_t)r * TT, T, a.rep * TT, v + ko,
                            (int)a.krow, hd, 0.0f, out + qo + (size_t)r * hd, (int)a.qrow,
                            (long long)a.rep * hd, KH);
    }
    return 0;
}

static int s_cublas_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                       const float *lse, const float *q, const float *k,
                                       const float *v, const uint8_t *mask, int B, int T, int H,
                                       int KH, int hd)
{
    RL_CUDA_PROF("attention_backward");
    s_att_seq a;
    float *S;
    int rc = s_att_open("attention backward", B, T, H, KH, hd, 2, &a, &S);
    if (rc || !S)
        return rc;
    long long TT = (long long)T * T;
    float *dP = S + (size_t)H * TT, scale = 1.0f / sqrtf((float)hd);
    int th = s_att_threads(T);
    for (int b = 0; b < B; b++) {
        size_t qo = (size_t)b * T * a.qrow, ko = (size_t)b * T * a.krow;
        s_att_scores(&a, S, q + qo, k + ko, scale);
        s_att_scores(&a, dP, dout + qo, v + ko, 1.0f);
        k_att_grad_rows<<<(unsigned)(H * T), th, th * sizeof(double)>>>(S, dP, lse, mask, T, b, H);
        CUDA_NOTE(cudaGetLastError());
        for (int r = 0; r < a.rep; r++) {
            const float *P = S + (size_t)r * TT, *dS = dP + (size_t)r * TT;
            long long qs = (long long)a.rep * hd;
            size_t qh = qo + (size_t)r * hd;
            if (dv) // dV_kh += P_hᵀ dO_h
                s_sgemm_batched(1, 0, T, hd, T, 1.0f, P, T, a.rep * TT, dout + qh, (int)a.qrow, qs,
                                1.0f, dv + ko, (int)a.krow, hd, KH);
            if (dq) // dQ_h += scale·dS_h K_kh
                s_sgemm_batched(0, 0, T, hd, T, scale, dS, T, a.rep * TT, k + ko, (int)a.krow, hd,
                                1.0f, dq + qh, (int)a.qrow, qs, KH);
            if (dk) // dK_kh += scale·dS_hᵀ Q_h
                s_sgemm_batched(1, 0, T, hd, T, scale, dS, T, a.rep * TT, q + qh, (int)a.qrow, qs,
                                1.0f, dk + ko, (int)a.krow, hd, KH);
        }
    }
    return 0;
}

// RL_CUDA_ATTENTION: unset, empty or "flash" → 1 (the fused kernels where the
// head size is at most 128, else the cuBLAS path; the bf16 pair's tensor-core
// kernels in bf16), "flash32" → 2 (the float32 fused kernels in both
// precisions: the bf16 pair runs the float32 one), "cublas" → 0 (the cuBLAS
// path in both); anything else is an error naming the value. Read at each
// call, so a test or a bench can compare them in one process. Flash is the
// default since the H200 run of 2026-11-28: parity with the CPU on every test
// shape and the whole model, and the Qwen2.5-0.5B bf16 step 2.06x the cuBLAS
// path's speed.
static int s_att_flash(const char *fn)
{
    const char *e = getenv("RL_CUDA_ATTENTION");
    if (!e || !*e || strcmp(e, "flash") == 0)
        return 1;
    if (strcmp(e, "flash32") == 0)
        return 2;
    if (strcmp(e, "cublas") == 0)
        return 0;
    return rl_error_set(RL_EINVAL, "%s: RL_CUDA_ATTENTION=%s: expected flash, flash32 or cublas", fn, e);
}

// The attention entries: bf16 = 1 for the bf16 pair, which takes the
// tensor-core kernels where it can and else the float32 pair's path.
static int s_attention_fwd(int bf16, float *out, float *lse, const float *q, const float *k,
                           const float *v, const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    const char *name = bf16 ? "attention (bf16)" : "attention (flash)";
    int fl = s_att_flash(name);
    if (fl < 0)
        return fl;
    int D = !fl || (bf16 && fl != 1) ? 0 : bf16 ? s_fb_dim(hd) : s_fa_dim(hd);
    if (!D)
        return bf16 ? s_attention_fwd(0, out, lse, q, k, v, mask, B, T, H, KH, hd)
                    : s_cublas_attention_forward(out, lse, q, k, v, mask, B, T, H, KH, hd);
    RL_CUDA_PROF(bf16 ? "attention_forward_bf16" : "attention_forward_flash");
    int rc = s_attention_shape(name, H, KH, hd);
    if (rc || B <= 0 || T <= 0 || H <= 0)
        return rc;
    if (D == 32)
        return s_fused_forward<32>(bf16, out, lse, q, k, v, mask, B, T, H, KH, hd);
    if (D == 64)
        return s_fused_forward<64>(bf16, out, lse, q, k, v, mask, B, T, H, KH, hd);
    return s_fused_forward<128>(bf16, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

static int s_attention_bwd(int bf16, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const float *lse, const float *q, const float *k,
                           const float *v, const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    const char *name = bf16 ? "attention backward (bf16)" : "attention backward (flash)";
    int fl = s_att_flash(name);
    if (fl < 0)
        return fl;
    int D = !fl || (bf16 && fl != 1) ? 0 : bf16 ? s_fb_dim(hd) : s_fa_dim(hd);
    if (!D)
        return bf16 ? s_attention_bwd(0, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd)
                    : s_cublas_attention_backward(dq, dk, dv, dout, lse, q, k, v, mask, B, T, H, KH, hd);
    RL_CUDA_PROF(bf16 ? "attention_backward_bf16" : "attention_backward_flash");
    int rc = s_attention_shape(name, H, KH, hd);
    if (rc || B <= 0 || T <= 0 || H <= 0 || (!dq && !dk && !dv))
        return rc;
    if (D == 32)
        return s_fused_backward<32>(bf16, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
    if (D == 64)
        return s_fused_backward<64>(bf16, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
    return s_fused_backward<128>(bf16, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

int rl_cuda_attention_forward(float *out, float *lse, const float *q, const float *k,
                              const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                              int hd)
{
    return s_attention_fwd(0, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

int rl_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                               const float *out, const float *lse, const float *q, const float *k,
                               const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                               int hd)
{
    return s_attention_bwd(0, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

int rl_cuda_attention_forward_bf16(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const uint8_t *mask, int B, int T, int H,
                                   int KH, int hd)
{
    return s_attention_fwd(1, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

int rl_cuda_attention_backward_bf16(float *dq, float *dk, float *dv, const float *dout,
                                    const float *out, const float *lse, const float *q,
                                    const float *k, const float *v, const uint8_t *mask, int B,
                                    int T, int H, int KH, int hd)
{
    return s_attention_bwd(1, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
}

void rl_cuda_logprob_forward(float *logp, float *entropy, float *lse, const float *logits,
                             const int32_t *target, float inv_temp, int N, int V)
{
    RL_CUDA_PROF("logprob_forward");
    if (N <= 0 || V <= 0)
        return;
    int t = s_row_threads(V);
    k_logprob_forward<<<N, t, t * sizeof(double)>>>(logp, entropy, lse, logits, target, inv_temp,
                                                    V);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_logprob_backward(float *dlogits, const float *dlogp, const float *dentropy,
                              const float *logits, const float *lse, const float *entropy,
                              const int32_t *target, float inv_temp, int N, int V)
{
    RL_CUDA_PROF("logprob_backward");
    if (N <= 0 || V <= 0)
        return;
    k_logprob_backward<<<N, 256>>>(dlogits, dlogp, dentropy, logits, lse, entropy, target,
                                   inv_temp, V);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_sample_rows(int32_t *tok, float *logp, float *entropy, const float *logits,
                         const double *u, float inv_temp, int n, int V)
{
    RL_CUDA_PROF("sample_rows");
    if (n <= 0 || V <= 0)
        return;
    k_sample_rows<<<n, RL_SAMPLE_THREADS>>>(tok, logp, entropy, logits, u, inv_temp, V);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_kv_cache_write(float *kc, float *vc, const float *k, const float *v,
                            const int32_t *slot, const int32_t *pos, int n, int kvd, int maxT)
{
    RL_CUDA_PROF("kv_cache_write");
    int64_t total = (int64_t)n * kvd;
    if (total <= 0)
        return;
    k_kv_cache_write<<<s_blocks(total, 256), 256>>>(kc, vc, k, v, slot, pos, n, kvd, maxT);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_decode_attention(float *out, float *scores, const float *q, const float *kc,
                              const float *vc, const int32_t *slot, const int32_t *pos, int n,
                              int H, int KH, int hd, int maxT)
{
    RL_CUDA_PROF("decode_attention");
    if (n <= 0 || H <= 0)
        return;
    k_decode_attention<<<(unsigned)n * H, 256>>>(out, scores, q, kc, vc, slot, pos, H, KH, hd,
                                                  maxT, 1.0f / sqrtf((float)hd));
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_adamw_update(const struct rl_adamw_config *cfg, int64_t t, double lr, double wd,
                          float *p, const float *g, float *m, float *v, int64_t n)
{
    RL_CUDA_PROF("adamw_update");
    // the CPU's scalars and element update (ops_elem.h)
    s_each(k_adamw, n, p, g, m, v, n, rl_adamw_scalars_at(cfg, t, lr, wd));
}

double rl_cuda_grad_sumsq(const float *g, int64_t n)
{
    RL_CUDA_PROF("grad_sumsq");
    if (n <= 0)
        return 0.0;
    int64_t nb = (n + RL_SUMSQ_BLOCK - 1) / RL_SUMSQ_BLOCK;
    double *d = (double *)s_scratch_get(&s_part, sizeof(double) * (size_t)nb, "grad norm");
    double *h = (double *)malloc(sizeof(double) * (size_t)nb);
    if (!d || !h) {
        free(h);
        return NAN; // the error surfaces from rl_cuda_sync; NaN fails any clip check
    }
    k_sumsq_blocks<<<(unsigned)nb, 256, 256 * sizeof(double)>>>(d, g, n);
    CUDA_NOTE(cudaGetLastError());
    CUDA_NOTE(cudaMemcpy(h, d, sizeof(double) * (size_t)nb, cudaMemcpyDeviceToHost));
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++) // in block order, as the CPU adds its blocks
        total += h[b];
    free(h);
    return s_status ? NAN : total;
}

void rl_cuda_scale_inplace(float *a, float s, int64_t n)
{
    RL_CUDA_PROF("scale_inplace");
    s_each(k_scale, n, a, s, n);
}

void rl_cuda_ema_update(float *ref, const float *cur, double beta, int64_t n)
{
    RL_CUDA_PROF("ema_update");
    s_each(k_ema, n, ref, cur, beta, 1.0 - beta, n);
}

void rl_cuda_silu_forward(float *out, const float *inp, int64_t n)
{
    RL_CUDA_PROF("silu_forward");
    s_each(k_silu_forward, n, out, inp, n);
}

void rl_cuda_silu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RL_CUDA_PROF("silu_backward");
    s_each(k_silu_backward, n, dinp, dout, inp, n);
}

void rl_cuda_time_embed(float *temb, const float *t, int64_t n, int E)
{
    RL_CUDA_PROF("time_embed");
    if (E >= 2)
        s_each(k_time_embed, n * (E / 2), temb, t, n, E);
}

void rl_cuda_standardize(float *out, const float *inp, const float *mean, const float *std,
                         float clip, int N, int C)
{
    RL_CUDA_PROF("standardize");
    if (C > 0)
        s_each(k_standardize, (int64_t)N * C, out, inp, mean, std, clip, (int64_t)N * C, C);
}

// ---- the convolutional kinds (ops_conv.h; the kernels' comment above) ---------

// Images per chunk: the columns and the products of a chunk are at most
// RL_CONV_CHUNK_FLOATS floats each (at least one image), so the scratch
// stays bounded and every GEMM dimension fits an int. RL_CUDA_CONV_CHUNK
// (floats, read at each call) lowers it: the tests' way to many chunks.
#define RL_CONV_CHUNK_FLOATS ((int64_t)1 << 24)
static s_scratch s_conv_col, s_conv_prod;

static d_conv s_conv_geom(const rl_conv2d_shape *s, int OH, int OW)
{
    return d_conv{s->C, s->H, s->W, s->KH, s->KW, s->pad, s->stride, OH, OW};
}

// The chunk size and the two scratch buffers (nc·P·K and nc·P·OC floats);
// RL_ENOMEM (message set) when one image is too large or they cannot grow.
static int s_conv_open(const rl_conv2d_shape *s, const char *fn, int64_t P, int K, int *nc,
                       float **col, float **prod)
{
    int64_t per = P * (K > s->OC ? K : s->OC);
    if (per > INT32_MAX)
        return rl_error_set(RL_ENOMEM, "%s: one image's columns (%lld floats) exceed a GEMM's int "
                                       "dimensions", fn, (long long)per);
    int64_t cap = RL_CONV_CHUNK_FLOATS;
    const char *e = getenv("RL_CUDA_CONV_CHUNK");
    if (e && *e) {
        long long v = atoll(e);
        cap = v > 0 && v < cap ? v : cap;
    }
    int64_t c = cap / per;
    *nc = (int)(c < 1 ? 1 : c > s->N ? s->N : c);
    char what[160];
    snprintf(what, sizeof what, "%s (N=%d C=%d H=%d W=%d OC=%d): im2col columns", fn, s->N, s->C, s->H,
             s->W, s->OC);
    *col = (float *)s_scratch_get(&s_conv_col, sizeof(float) * (size_t)(*nc * P * K), what);
    if (!*col)
        return RL_ENOMEM;
    snprintf(what, sizeof what, "%s (N=%d C=%d H=%d W=%d OC=%d): products", fn, s->N, s->C, s->H, s->W,
             s->OC);
    *prod = (float *)s_scratch_get(&s_conv_prod, sizeof(float) * (size_t)(*nc * P * s->OC), what);
    return *prod ? 0 : RL_ENOMEM;
}

int rl_cuda_conv2d_forward(float *out, const float *inp, const float *w, const float *b,
                           const struct rl_conv2d_shape *s)
{
    RL_CUDA_PROF("conv2d_forward");
    const int OH = rl_conv2d_out_h(s), OW = rl_conv2d_out_w(s), K = s->C * s->KH * s->KW;
    if (s->N <= 0 || s->OC <= 0 || OH <= 0 || OW <= 0 || K <= 0)
        return 0;
    const int64_t P = (int64_t)OH * OW, in = (int64_t)s->C * s->H * s->W;
    int nc;
    float *col, *prod;
    int rc = s_conv_open(s, "conv2d_forward", P, K, &nc, &col, &prod);
    if (rc)
        return rc;
    const d_conv g = s_conv_geom(s, OH, OW);
    for (int n0 = 0; n0 < s->N; n0 += nc) {
        const int m = s->N - n0 < nc ? s->N - n0 : nc;
        const int64_t L = m * P;
        s_each(k_im2col, K * L, col, inp + n0 * in, g, m);
        rl_cuda_sgemm(0, 0, s->OC, (int)L, K, 1.0f, w, K, col, (int)L, 0.0f, prod, (int)L);
        s_each(k_conv_out, s->OC * L, out + n0 * s->OC * P, prod, b, s->OC, P, m);
    }
    return 0;
}

int rl_cuda_conv2d_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const struct rl_conv2d_shape *s)
{
    RL_CUDA_PROF("conv2d_backward");
    const int OH = rl_conv2d_out_h(s), OW = rl_conv2d_out_w(s), K = s->C * s->KH * s->KW;
    if (s->N <= 0 || s->OC <= 0 || OH <= 0 || OW <= 0 || K <= 0 || !(dinp || dw || db))
        return 0;
    const int64_t P = (int64_t)OH * OW, in = (int64_t)s->C * s->H * s->W;
    int nc;
    float *col, *dt;
    int rc = s_conv_open(s, "conv2d_backward", P, K, &nc, &col, &dt);
    if (rc)
        return rc;
    const d_conv g = s_conv_geom(s, OH, OW);
    // chunk by chunk in image order: dw and db accumulate (+=) each chunk's share
    for (int n0 = 0; n0 < s->N; n0 += nc) {
        const int m = s->N - n0 < nc ? s->N - n0 : nc;
        const int64_t L = m * P;
        const float *g_out = dout + n0 * s->OC * P;
        if (dw || dinp)
            s_each(k_conv_dout_t, s->OC * L, dt, g_out, s->OC, P, m);
        if (dw) { // dw (OC, K) += dt (OC, L) · colᵀ (L, K)
            s_each(k_im2col, K * L, col, inp + n0 * in, g, m);
            rl_cuda_sgemm(0, 1, s->OC, K, (int)L, 1.0f, dt, (int)L, col, (int)L, 1.0f, dw, K);
        }
        if (dinp) { // dcol (K, L) = wᵀ (K, OC) · dt (OC, L), into col; then col2im
            rl_cuda_sgemm(1, 0, K, (int)L, s->OC, 1.0f, w, K, dt, (int)L, 0.0f, col, (int)L);
            s_each(k_col2im, m * in, dinp + n0 * in, col, g, m);
        }
        if (db)
            s_colsum(db, d_col_conv_db{g_out, s->OC, P}, (int)L, s->OC, "conv2d backward: bias");
    }
    return 0;
}

void rl_cuda_maxpool2d_forward(float *out, int32_t *arg, const float *inp, int N, int C, int H, int W,
                               int k)
{
    RL_CUDA_PROF("maxpool2d_forward");
    if (N <= 0 || C <= 0 || k <= 0 || H / k <= 0 || W / k <= 0)
        return;
    const int64_t planes = (int64_t)N * C;
    s_each(k_maxpool_forward, planes * (H / k) * (W / k), out, arg, inp, planes, H, W, k);
}

void rl_cuda_maxpool2d_backward(float *dinp, const float *dout, const int32_t *arg, int N, int C, int H,
                                int W, int k)
{
    RL_CUDA_PROF("maxpool2d_backward");
    if (N <= 0 || C <= 0 || k <= 0 || H / k <= 0 || W / k <= 0)
        return;
    const int64_t planes = (int64_t)N * C;
    s_each(k_maxpool_backward, planes * H * W, dinp, dout, arg, planes, H, W, k);
}

void rl_cuda_relu_forward(float *out, const float *inp, int64_t n)
{
    RL_CUDA_PROF("relu_forward");
    s_each(k_relu_forward, n, out, inp, n);
}

void rl_cuda_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RL_CUDA_PROF("relu_backward");
    s_each(k_relu_backward, n, dinp, dout, inp, n);
}

void rl_cuda_plane_add(float *x, const float *add, int64_t planes, int64_t hw)
{
    RL_CUDA_PROF("plane_add");
    if (hw > 0)
        s_each(k_plane_add, planes * hw, x, add, planes * hw, hw);
}

void rl_cuda_plane_sum(float *out, const float *x, int64_t planes, int64_t hw)
{
    RL_CUDA_PROF("plane_sum");
    if (planes <= 0)
        return;
    if (hw <= 0) {
        rl_cuda_memset0(out, sizeof(float) * (size_t)planes);
        return;
    }
    if (planes > INT32_MAX) {
        CUDA_NOTE(cudaErrorInvalidValue);
        return;
    }
    int t = s_row_threads((int)(hw < 1024 ? hw : 1024));
    t = t < 256 ? t : 256;
    k_plane_sum<<<(unsigned)planes, t, t * sizeof(double)>>>(out, x, hw);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_upsample2x_add(float *a, const float *s, int64_t planes, int h, int w)
{
    RL_CUDA_PROF("upsample2x_add");
    if (h >= 2 && w >= 2)
        s_each(k_upsample2x_add, planes * h * w, a, s, planes * h * w, h, w);
}

void rl_cuda_upsample2x_backward(float *ds, const float *da, int64_t planes, int h, int w)
{
    RL_CUDA_PROF("upsample2x_backward");
    if (h >= 2 && w >= 2)
        s_each(k_upsample2x_backward, planes * (h / 2) * (w / 2), ds, da, planes * (h / 2) * (w / 2), h, w);
}

}  // extern "C"
