// ops_cuda.cu — CUDA twins of the CPU kernels (see cuda_ops.h, common/nn/engine/device.h).
//
// Kernels first, then launchers that check sizes, compute the grid, launch on
// the default stream and record the first error (returned by rl_cuda_sync).
// Row-major GEMMs go to cuBLAS (column-major) by computing C^T = op(B)^T op(A)^T.
#include "common/nn/engine/cuda/cuda_ops.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/optim.h"

#include "rlrt/error.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

// out (C) += Σ_rows a (N, C): one thread per column, rows in order, in double.
__global__ void k_colsum_acc(float *out, const float *a, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    double acc = 0.0;
    for (int n = 0; n < N; n++)
        acc += a[(size_t)n * C + c];
    out[c] += (float)acc;
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

// dw (C) += Σ_rows dout · inp · rstd: one thread per column, rows in order.
__global__ void k_rmsnorm_backward_dw(float *dw, const float *dout, const float *inp,
                                      const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    double acc = 0.0;
    for (int n = 0; n < N; n++)
        acc += dout[(size_t)n * C + c] * inp[(size_t)n * C + c] * rstd[n];
    dw[c] += (float)acc;
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

// One thread per channel, rows in order: a row's gradient lands in its
// token's row without atomics, in the same order whatever the schedule.
__global__ void k_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N,
                                     int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int n = 0; n < N; n++)
        dtable[(size_t)ids[n] * C + c] += dout[(size_t)n * C + c];
}

__device__ float d_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// hd <= 32·RL_ATT_PER_LANE: each lane holds hd/32 elements of a row.
#define RL_ATT_PER_LANE 8
#define RL_ATT_WARPS 4

// The attention kernels run one warp per row of B·heads·T rows (b, head h,
// position t; t fastest): the warp's row, its lane and, for a query row,
// the kv head kh its head reads.
struct d_att_pos {
    int64_t row;
    int lane, b, h, t, kh;
};

// The warp's row among B·heads·T; false past the end.
__device__ bool d_att_row(int B, int heads, int T, d_att_pos *r)
{
    r->lane = threadIdx.x & 31;
    r->row = (int64_t)blockIdx.x * RL_ATT_WARPS + (threadIdx.x >> 5);
    if (r->row >= (int64_t)B * heads * T)
        return false;
    r->t = (int)(r->row % T);
    r->h = (int)((r->row / T) % heads);
    r->b = (int)(r->row / ((int64_t)T * heads));
    return true;
}

// The warp's query row among B·H·T, H query heads sharing KH kv heads.
__device__ bool d_att_query(int B, int T, int H, int KH, d_att_pos *r)
{
    if (!d_att_row(B, H, T, r))
        return false;
    r->kh = r->h / (H / KH);
    return true;
}

// The offset of head h's vector of position t of row b, heads vectors of hd
// a position.
__device__ size_t d_att_off(int b, int T, int t, int heads, int h, int hd)
{
    return ((size_t)b * T + t) * heads * hd + (size_t)h * hd;
}

// x[j] = src[lane + 32j]: the lane's elements of a vector of hd (0 past it).
__device__ __forceinline__ void d_lane_load(float *x, const float *src, int lane, int hd)
{
    for (int j = 0; j < RL_ATT_PER_LANE; j++) {
        int d = lane + 32 * j;
        x[j] = d < hd ? src[d] : 0.0f;
    }
}

// Σ_d a_d·b_d over the warp: a in the lanes' registers, b a vector of hd.
__device__ __forceinline__ float d_lane_dot(const float *a, const float *b, int lane, int hd)
{
    float dot = 0.0f;
    for (int j = 0; j < RL_ATT_PER_LANE; j++) {
        int d = lane + 32 * j;
        if (d < hd)
            dot += a[j] * b[d];
    }
    return d_warp_sum(dot);
}

// acc += a·x for the lane's elements of a vector x of hd.
__device__ __forceinline__ void d_lane_axpy(float *acc, float a, const float *x, int lane, int hd)
{
    for (int j = 0; j < RL_ATT_PER_LANE; j++) {
        int d = lane + 32 * j;
        if (d < hd)
            acc[j] += a * x[d];
    }
}

// dst += a·x: the lane's elements x back into a vector of hd (dst NULL: none).
__device__ __forceinline__ void d_lane_add_to(float *dst, float a, const float *x, int lane, int hd)
{
    if (!dst)
        return;
    for (int j = 0; j < RL_ATT_PER_LANE; j++) {
        int d = lane + 32 * j;
        if (d < hd)
            dst[d] += a * x[j];
    }
}

// One warp per query row (b, h, t): an online softmax over the visible keys
// s <= t (mask[b, s] != 0), then out = Σ p·v; lse = +inf and out = 0 for a
// row that sees no key (the CPU kernel's convention).
__global__ void k_attention_forward(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const uint8_t *mask, int B, int T, int H,
                                    int KH, int hd, float scale)
{
    d_att_pos r;
    if (!d_att_query(B, T, H, KH, &r))
        return;
    float qv[RL_ATT_PER_LANE], acc[RL_ATT_PER_LANE] = {};
    d_lane_load(qv, q + d_att_off(r.b, T, r.t, H, r.h, hd), r.lane, hd);
    float m = -INFINITY, l = 0.0f;
    for (int s = 0; s <= r.t; s++) {
        if (mask && !mask[(size_t)r.b * T + s])
            continue;
        size_t ko = d_att_off(r.b, T, s, KH, r.kh, hd);
        float sc = d_lane_dot(qv, k + ko, r.lane, hd) * scale;
        float mn = fmaxf(m, sc), corr = expf(m - mn), e = expf(sc - mn);
        l = l * corr + e;
        for (int j = 0; j < RL_ATT_PER_LANE; j++) {
            int d = r.lane + 32 * j;
            acc[j] = acc[j] * corr + (d < hd ? e * v[ko + d] : 0.0f);
        }
        m = mn;
    }
    float *orow = out + d_att_off(r.b, T, r.t, H, r.h, hd);
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int j = 0; j < RL_ATT_PER_LANE; j++) {
        int d = r.lane + 32 * j;
        if (d < hd)
            orow[d] = acc[j] * inv;
    }
    if (r.lane == 0)
        lse[((size_t)r.b * H + r.h) * T + r.t] = l > 0.0f ? m + logf(l) : INFINITY;
}

// Backward, pass 1: one warp per query row. Recomputes p_ts from the lse,
// D_t = dout_t · Σ_s p_ts v_s (into Dbuf), then dq_t += scale Σ_s ds_ts k_s
// with ds_ts = p_ts (dout_t · v_s − D_t).
__global__ void k_attention_backward_q(float *dq, float *Dbuf, const float *dout,
                                       const float *lse, const float *q, const float *k,
                                       const float *v, const uint8_t *mask, int B, int T, int H,
                                       int KH, int hd, float scale)
{
    d_att_pos r;
    if (!d_att_query(B, T, H, KH, &r))
        return;
    int lane = r.lane;
    size_t qo = d_att_off(r.b, T, r.t, H, r.h, hd);
    float L = lse[((size_t)r.b * H + r.h) * T + r.t];
    float qv[RL_ATT_PER_LANE], go[RL_ATT_PER_LANE], o[RL_ATT_PER_LANE] = {}, g[RL_ATT_PER_LANE] = {};
    d_lane_load(qv, q + qo, lane, hd);
    d_lane_load(go, dout + qo, lane, hd);
    if (isinf(L)) { // no visible key: p = 0, nothing flows
        if (lane == 0)
            Dbuf[r.row] = 0.0f;
        return;
    }
    for (int s = 0; s <= r.t; s++) { // o = Σ_s p_ts v_s
        if (mask && !mask[(size_t)r.b * T + s])
            continue;
        size_t ko = d_att_off(r.b, T, s, KH, r.kh, hd);
        d_lane_axpy(o, expf(d_lane_dot(qv, k + ko, lane, hd) * scale - L), v + ko, lane, hd);
    }
    float Dp = 0.0f;
    for (int j = 0; j < RL_ATT_PER_LANE; j++)
        Dp += go[j] * o[j];
    float D = d_warp_sum(Dp);
    if (lane == 0)
        Dbuf[r.row] = D;
    for (int s = 0; s <= r.t; s++) { // g = Σ_s ds_ts k_s
        if (mask && !mask[(size_t)r.b * T + s])
            continue;
        size_t ko = d_att_off(r.b, T, s, KH, r.kh, hd);
        float p = expf(d_lane_dot(qv, k + ko, lane, hd) * scale - L);
        d_lane_axpy(g, p * (d_lane_dot(go, v + ko, lane, hd) - D), k + ko, lane, hd);
    }
    d_lane_add_to(dq ? dq + qo : NULL, scale, g, lane, hd);
}

// Backward, pass 2: one warp per key row (b, kv head, s): the query heads
// that share the kv head and the queries t >= s that see key s, in a fixed
// order: dv_s += Σ p_ts dout_t, dk_s += scale Σ ds_ts q_t.
__global__ void k_attention_backward_kv(float *dk, float *dv, const float *Dbuf,
                                        const float *dout, const float *lse, const float *q,
                                        const float *k, const float *v, const uint8_t *mask,
                                        int B, int T, int H, int KH, int hd, float scale)
{
    d_att_pos r; // the key row: r.h is its kv head, r.t its position s
    if (!d_att_row(B, KH, T, &r))
        return;
    int lane = r.lane, b = r.b, kh = r.h, s = r.t;
    if (mask && !mask[(size_t)b * T + s])
        return; // a masked key gets no gradient
    int rep = H / KH;
    size_t ko = d_att_off(b, T, s, KH, kh, hd);
    float kv[RL_ATT_PER_LANE], vv[RL_ATT_PER_LANE], gk[RL_ATT_PER_LANE] = {}, gv[RL_ATT_PER_LANE] = {};
    d_lane_load(kv, k + ko, lane, hd);
    d_lane_load(vv, v + ko, lane, hd);
    for (int h = kh * rep; h < (kh + 1) * rep; h++)
        for (int t = s; t < T; t++) {
            size_t li = ((size_t)b * H + h) * T + t;
            float L = lse[li];
            if (isinf(L))
                continue;
            size_t qo = d_att_off(b, T, t, H, h, hd);
            float p = expf(d_lane_dot(kv, q + qo, lane, hd) * scale - L);
            float ds = p * (d_lane_dot(vv, dout + qo, lane, hd) - Dbuf[li]);
            d_lane_axpy(gv, p, dout + qo, lane, hd);
            d_lane_axpy(gk, ds, q + qo, lane, hd);
        }
    d_lane_add_to(dv ? dv + ko : NULL, 1.0f, gv, lane, hd);
    d_lane_add_to(dk ? dk + ko : NULL, scale, gk, lane, hd);
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

void rl_cuda_memset0(void *p, size_t bytes)
{
    if (p && bytes)
        CUDA_NOTE(cudaMemsetAsync(p, 0, bytes));
}

void rl_cuda_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, int N, int C, int OC)
{
    if (N <= 0 || C <= 0 || OC <= 0)
        return;
    if (dinp)
        rl_cuda_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw)
        rl_cuda_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db) {
        k_colsum_acc<<<s_blocks(OC, 128), 128>>>(db, dout, N, OC);
        CUDA_NOTE(cudaGetLastError());
    }
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
    if (n <= 0)
        return;
    k_round_bf16<<<s_blocks(n, 256), 256>>>(out, in, n);
    CUDA_NOTE(cudaGetLastError());
}

// The activations rounded to bf16 for one product: one buffer that grows
// (cudaFree waits for the kernels that still read the old one).
static uint16_t *s_b16 = nullptr;
static int64_t s_b16_cap = 0;

static uint16_t *s_bf16_scratch(int64_t n, const char *fn, int N, int C, int OC)
{
    if (n > s_b16_cap) {
        rl_device_free(RL_DEVICE_CUDA, s_b16);
        s_b16_cap = 0;
        s_b16 = (uint16_t *)rl_device_alloc_for(RL_DEVICE_CUDA, sizeof(uint16_t) * (size_t)n,
                                                RL_MEM_SCRATCH);
        if (!s_b16) {
            rl_error_wrap(RL_ENOMEM, "%s (N=%d C=%d OC=%d): bf16 inputs", fn, N, C, OC);
            return nullptr;
        }
        s_b16_cap = n;
    }
    return s_b16;
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
    if (N <= 0 || OC <= 0 || C <= 0)
        return 0;
    int64_t ni = (int64_t)N * C;
    uint16_t *x = s_bf16_scratch(ni, "linear_forward_bf16", N, C, OC);
    if (!x)
        return RL_ENOMEM;
    rl_cuda_round_bf16(x, inp, ni);
    if (b) {
        int64_t n = (int64_t)N * OC;
        k_bias_rows<<<s_blocks(n, 256), 256>>>(out, b, N, OC);
        CUDA_NOTE(cudaGetLastError());
    }
    s_gemm_bf16(0, 1, N, OC, C, x, C, w16, C, b ? 1.0f : 0.0f, out, OC);
    return 0;
}

int rl_cuda_linear_backward_bf16(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const uint16_t *w16, int N, int C, int OC)
{
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
    if (db) {
        k_colsum_acc<<<s_blocks(OC, 128), 128>>>(db, dout, N, OC);
        CUDA_NOTE(cudaGetLastError());
    }
    return 0;
}

void rl_cuda_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    int t = s_row_threads(C);
    k_softmax_backward<<<N, t, t * sizeof(double)>>>(dinp, dout, out, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    if (dinp) {
        int t = s_row_threads(C);
        k_rmsnorm_backward_dinp<<<N, t, t * sizeof(double)>>>(dinp, dout, inp, w, rstd, C);
        CUDA_NOTE(cudaGetLastError());
    }
    if (dw) {
        k_rmsnorm_backward_dw<<<s_blocks(C, 128), 128>>>(dw, dout, inp, rstd, N, C);
        CUDA_NOTE(cudaGetLastError());
    }
}

void rl_cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, int64_t n)
{
    if (n <= 0 || (!dgate && !dup))
        return;
    k_swiglu_backward<<<s_blocks(n, 256), 256>>>(dgate, dup, dout, gate, up, n);
    CUDA_NOTE(cudaGetLastError());
}

static void s_rope(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                   float theta, int inverse)
{
    int64_t n = (int64_t)N * H * (hd / 2);
    if (n <= 0)
        return;
    k_rope<<<s_blocks(n, 256), 256>>>(out, inp, pos, N, H, hd, theta, inverse);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_rope_forward(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                          float theta)
{
    s_rope(out, inp, pos, N, H, hd, theta, 0);
}

void rl_cuda_rope_backward(float *dinp, const float *dout, const int32_t *pos, int N, int H,
                           int hd, float theta)
{
    s_rope(dinp, dout, pos, N, H, hd, theta, 1);
}

void rl_cuda_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C)
{
    int64_t n = (int64_t)N * C;
    if (n <= 0)
        return;
    k_embedding_forward<<<s_blocks(n, 256), 256>>>(out, ids, table, N, C);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N,
                                int C)
{
    if (N <= 0 || C <= 0)
        return;
    k_embedding_backward<<<s_blocks(C, 128), 128>>>(dtable, dout, ids, N, C);
    CUDA_NOTE(cudaGetLastError());
}

static int s_attention_shape(const char *fn, int H, int KH, int hd)
{
    if (hd <= 0 || hd > 32 * RL_ATT_PER_LANE)
        return rl_error_set(RL_EUNSUPPORTED, "%s: head size %d (the CUDA kernel takes 1..%d)", fn,
                            hd, 32 * RL_ATT_PER_LANE);
    if (KH <= 0 || H % KH)
        return rl_error_set(RL_EINVAL, "%s: %d heads over %d kv heads", fn, H, KH);
    return 0;
}

int rl_cuda_attention_forward(float *out, float *lse, const float *q, const float *k,
                              const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                              int hd)
{
    int rc = s_attention_shape("attention", H, KH, hd);
    int64_t rows = (int64_t)B * H * T;
    if (rc || rows <= 0)
        return rc;
    k_attention_forward<<<s_blocks(rows, RL_ATT_WARPS), 32 * RL_ATT_WARPS>>>(
        out, lse, q, k, v, mask, B, T, H, KH, hd, 1.0f / sqrtf((float)hd));
    CUDA_NOTE(cudaGetLastError());
    return 0;
}

int rl_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                               const float *lse, const float *q, const float *k, const float *v,
                               const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    int rc = s_attention_shape("attention backward", H, KH, hd);
    int64_t rows = (int64_t)B * H * T, krows = (int64_t)B * KH * T;
    if (rc || rows <= 0)
        return rc;
    float *D = (float *)rl_cuda_alloc(sizeof(float) * (size_t)rows);
    if (!D)
        return rl_error_code();
    float scale = 1.0f / sqrtf((float)hd);
    k_attention_backward_q<<<s_blocks(rows, RL_ATT_WARPS), 32 * RL_ATT_WARPS>>>(
        dq, D, dout, lse, q, k, v, mask, B, T, H, KH, hd, scale);
    CUDA_NOTE(cudaGetLastError());
    if (dk || dv) {
        k_attention_backward_kv<<<s_blocks(krows, RL_ATT_WARPS), 32 * RL_ATT_WARPS>>>(
            dk, dv, D, dout, lse, q, k, v, mask, B, T, H, KH, hd, scale);
        CUDA_NOTE(cudaGetLastError());
    }
    CUDA_NOTE(cudaFree(D)); // implicitly waits for the kernels that read it
    return 0;
}

void rl_cuda_logprob_forward(float *logp, float *entropy, float *lse, const float *logits,
                             const int32_t *target, float inv_temp, int N, int V)
{
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
    if (N <= 0 || V <= 0)
        return;
    k_logprob_backward<<<N, 256>>>(dlogits, dlogp, dentropy, logits, lse, entropy, target,
                                   inv_temp, V);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_kv_cache_write(float *kc, float *vc, const float *k, const float *v,
                            const int32_t *slot, const int32_t *pos, int n, int kvd, int maxT)
{
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
    if (n <= 0 || H <= 0)
        return;
    k_decode_attention<<<(unsigned)n * H, 256>>>(out, scores, q, kc, vc, slot, pos, H, KH, hd,
                                                  maxT, 1.0f / sqrtf((float)hd));
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_adamw_update(const struct rl_adamw_config *cfg, int64_t t, double lr, double wd,
                          float *p, const float *g, float *m, float *v, int64_t n)
{
    if (n <= 0)
        return;
    // the CPU's scalars and element update (ops_elem.h)
    k_adamw<<<s_blocks(n, 256), 256>>>(p, g, m, v, n, rl_adamw_scalars_at(cfg, t, lr, wd));
    CUDA_NOTE(cudaGetLastError());
}

double rl_cuda_grad_sumsq(const float *g, int64_t n)
{
    if (n <= 0)
        return 0.0;
    int64_t nb = (n + RL_SUMSQ_BLOCK - 1) / RL_SUMSQ_BLOCK;
    double *d = nullptr, *h = (double *)malloc(sizeof(double) * (size_t)nb);
    cudaError_t e = cudaMalloc(&d, sizeof(double) * (size_t)nb);
    if (e != cudaSuccess || !h) {
        CUDA_NOTE(e);
        free(h);
        return NAN; // the error surfaces from rl_cuda_sync; NaN fails any clip check
    }
    k_sumsq_blocks<<<(unsigned)nb, 256, 256 * sizeof(double)>>>(d, g, n);
    CUDA_NOTE(cudaGetLastError());
    CUDA_NOTE(cudaMemcpy(h, d, sizeof(double) * (size_t)nb, cudaMemcpyDeviceToHost));
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++) // in block order, as the CPU adds its blocks
        total += h[b];
    cudaFree(d);
    free(h);
    return s_status ? NAN : total;
}

void rl_cuda_scale_inplace(float *a, float s, int64_t n)
{
    if (n <= 0)
        return;
    k_scale<<<s_blocks(n, 256), 256>>>(a, s, n);
    CUDA_NOTE(cudaGetLastError());
}

void rl_cuda_ema_update(float *ref, const float *cur, double beta, int64_t n)
{
    if (n <= 0)
        return;
    k_ema<<<s_blocks(n, 256), 256>>>(ref, cur, beta, 1.0 - beta, n);
    CUDA_NOTE(cudaGetLastError());
}

}  // extern "C"
