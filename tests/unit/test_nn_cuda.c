/* test_nn_cuda.c — every entry of the CUDA kernel table against its CPU twin
 * (common/nn/engine/ops.h), forward and backward, on ragged shapes: odd
 * sizes, one row, T = 1, heads sharing kv heads, masks with padding and with
 * a row that sees no key, targets outside the vocabulary's rows (-1),
 * gradients accumulated onto nonzero buffers (the backwards add), and the
 * log-prob backward writing over its own logits.
 *
 * Skips (with the reason) when the build has no CUDA (`make CUDA=1`) or no
 * GPU is visible. Tolerance: |cuda − cpu| <= atol + 1e-4·|cpu|, atol 1e-5
 * for elementwise ops and growing with a reduction's length where the two
 * devices sum in different orders (cuBLAS, block reductions, the online
 * softmax of attention); TF32 is never enabled (the handle's math mode is
 * read back). The bf16 entries (round_bf16, linear_*_bf16) against the CPU's
 * emulation: the rounding bit for bit, the products (exact on bf16 inputs)
 * to float32 summation order, and visibly apart from the float32 products.
 * Attention on both CUDA paths (RL_CUDA_ATTENTION=flash, the fused kernels
 * and the default, and cublas) on the same shapes and tolerances, the fused
 * kernels bit for bit equal across two runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/core/rng.h"
#include "rlrt/error.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/optim.h"
#ifdef RL_CUDA
#include "common/nn/engine/cuda/cuda_ops.h"
#endif

static int s_need_gpu(void)
{
#ifndef RL_CUDA
    print_message("skip: built without CUDA (rebuild with make CUDA=1)\n");
    return 0;
#else
    if (rl_device_count(RL_DEVICE_CUDA) <= 0) {
        print_message("skip: no CUDA GPU visible (cudaGetDeviceCount failed or returned 0)\n");
        return 0;
    }
    return 1;
#endif
}

#define S_NEED_GPU()          \
    do {                      \
        if (!s_need_gpu()) {  \
            skip();           \
            return;           \
        }                     \
    } while (0)

#ifdef RL_CUDA
/* Device copies of host arrays (freed by s_free_all). */
static void *s_dev[64];
static int s_ndev;

static void *s_up_bytes(const void *h, size_t bytes)
{
    void *d = rl_device_alloc(RL_DEVICE_CUDA, bytes ? bytes : 1);
    assert_non_null(d);
    if (bytes)
        assert_int_equal(rl_device_copy(RL_DEVICE_CUDA, d, RL_DEVICE_CPU, h, bytes), 0);
    assert_true(s_ndev < 64);
    s_dev[s_ndev++] = d;
    return d;
}

static float *s_up(const float *h, size_t n) { return s_up_bytes(h, n * sizeof(float)); }
/* n floats of device memory, uninitialised (an output). */
static float *s_alloc(size_t n)
{
    float *d = rl_device_alloc(RL_DEVICE_CUDA, (n ? n : 1) * sizeof(float));
    assert_non_null(d);
    assert_true(s_ndev < 64);
    s_dev[s_ndev++] = d;
    return d;
}
static int32_t *s_up_i32(const int32_t *h, size_t n) { return s_up_bytes(h, n * sizeof(int32_t)); }
static uint8_t *s_up_u8(const uint8_t *h, size_t n) { return s_up_bytes(h, n); }

static void s_free_all(void)
{
    for (int i = 0; i < s_ndev; i++)
        rl_device_free(RL_DEVICE_CUDA, s_dev[i]);
    s_ndev = 0;
}

/* |cuda − cpu| <= atol + 1e-4 |cpu|; two infinities of one sign are equal. */
static void s_check(const char *what, const float *dev, const float *want, size_t n, float atol)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, RL_DEVICE_CUDA, dev, n * sizeof(float)), 0);
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && h[i] == want[i])
            continue;
        if (!(fabsf(h[i] - want[i]) <= atol + 1e-4f * fabsf(want[i])))
            fail_msg("%s[%zu]: cuda %g vs cpu %g", what, i, h[i], want[i]);
    }
    free(h);
}

static float *s_rand(rl_rng *g, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = rl_rng_normal(g);
    return p;
}

static float *s_copy(const float *a, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    memcpy(p, a, n * sizeof(float));
    return p;
}

static const rl_nn_ops *s_cu(void)
{
    const rl_nn_ops *cu = rl_nn_ops_get(RL_DEVICE_CUDA);
    assert_non_null(cu);
    return cu;
}

/* ---- linear, add, softmax, rmsnorm, swiglu ---------------------------------------------- */

static void s_dense(int N, int C, int OC, uint64_t seed)
{
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 0);
    size_t nx = (size_t)N * C, ny = (size_t)N * OC;
    float *x = s_rand(&g, nx), *w = s_rand(&g, (size_t)OC * C), *b = s_rand(&g, OC);
    float *nw = s_rand(&g, C), *gy = s_rand(&g, ny), *gx = s_rand(&g, nx);
    float *acc_x = s_rand(&g, nx), *acc_w = s_rand(&g, (size_t)OC * C), *acc_b = s_rand(&g, OC);
    float *acc_nw = s_rand(&g, C);
    float *want = malloc(sizeof(float) * (nx > ny ? nx : ny)), *rstd = malloc(sizeof(float) * N);
    float *dx = s_up(x, nx), *dw = s_up(w, (size_t)OC * C), *db = s_up(b, OC);
    float *dnw = s_up(nw, C), *dgy = s_up(gy, ny), *dgx = s_up(gx, nx);
    float *dout = s_alloc(nx > ny ? nx : ny), *drstd = s_alloc(N);

    /* linear: C-long products of unit normals; the backward's are OC and N long */
    rl_linear_forward(want, x, w, b, N, C, OC);
    cu->linear_forward(dout, dx, dw, db, N, C, OC);
    s_check("linear", dout, want, ny, 1e-5f + 2e-7f * (float)C);
    float *ix = s_copy(acc_x, nx), *iw = s_copy(acc_w, (size_t)OC * C), *ib = s_copy(acc_b, OC);
    float *d_ix = s_up(ix, nx), *d_iw = s_up(iw, (size_t)OC * C), *d_ib = s_up(ib, OC);
    rl_linear_backward(ix, iw, ib, gy, x, w, N, C, OC);
    cu->linear_backward(d_ix, d_iw, d_ib, dgy, dx, dw, N, C, OC);
    s_check("linear dinp", d_ix, ix, nx, 1e-5f + 2e-7f * (float)OC);
    s_check("linear dw", d_iw, iw, (size_t)OC * C, 1e-5f + 2e-7f * (float)N);
    s_check("linear db", d_ib, ib, OC, 1e-5f + 2e-7f * (float)N);

    rl_add_forward(want, x, gx, (int64_t)nx);
    cu->add_forward(dout, dx, dgx, (int64_t)nx);
    s_check("add", dout, want, nx, 1e-6f);

    rl_rmsnorm_forward(want, rstd, x, nw, 1e-6f, N, C);
    cu->rmsnorm_forward(dout, drstd, dx, dnw, 1e-6f, N, C);
    s_check("rmsnorm", dout, want, nx, 1e-5f);
    s_check("rmsnorm rstd", drstd, rstd, N, 1e-5f);
    float *jx = s_copy(acc_x, nx), *jw = s_copy(acc_nw, C);
    float *d_jx = s_up(jx, nx), *d_jw = s_up(jw, C), *d_rstd = s_up(rstd, N);
    rl_rmsnorm_backward(jx, jw, gx, x, nw, rstd, N, C);
    cu->rmsnorm_backward(d_jx, d_jw, dgx, dx, dnw, d_rstd, N, C);
    s_check("rmsnorm dinp", d_jx, jx, nx, 1e-5f + 1e-7f * (float)C);
    s_check("rmsnorm dw", d_jw, jw, C, 1e-5f + 2e-7f * (float)N);

    rl_softmax_forward(want, x, N, C);
    cu->softmax_forward(dout, dx, N, C);
    s_check("softmax", dout, want, nx, 1e-6f);
    float *y = s_copy(want, nx), *kx = s_copy(acc_x, nx);
    float *d_y = s_up(y, nx), *d_kx = s_up(kx, nx);
    rl_softmax_backward(kx, gx, y, N, C);
    cu->softmax_backward(d_kx, dgx, d_y, N, C);
    s_check("softmax dinp", d_kx, kx, nx, 1e-5f);

    /* swiglu on the halves of x; the backward with both gradients, then dup alone */
    int64_t half = (int64_t)nx / 2;
    rl_swiglu_forward(want, x, x + half, half);
    cu->swiglu_forward(dout, dx, dx + half, half);
    s_check("swiglu", dout, want, (size_t)half, 1e-5f);
    float *sg = s_copy(acc_x, nx), *d_sg = s_up(sg, nx);
    rl_swiglu_backward(sg, sg + half, gx, x, x + half, half);
    cu->swiglu_backward(d_sg, d_sg + half, dgx, dx, dx + half, half);
    s_check("swiglu dgate, dup", d_sg, sg, (size_t)(2 * half), 1e-5f);
    rl_swiglu_backward(NULL, sg + half, gx, x, x + half, half);
    cu->swiglu_backward(NULL, d_sg + half, dgx, dx, dx + half, half);
    s_check("swiglu dup only", d_sg, sg, (size_t)(2 * half), 1e-5f);

    s_free_all();
    free(x); free(w); free(b); free(nw); free(gy); free(gx); free(acc_x); free(acc_w);
    free(acc_b); free(acc_nw); free(want); free(rstd); free(ix); free(iw); free(ib);
    free(jx); free(jw); free(y); free(kx); free(sg);
}

/* Small rows (one pass per thread), one row, and wide rows (C > 1024
 * threads: the strided loops and block reductions run more than once; OC
 * not a multiple of any tile size). */
static void test_cuda_dense(void **state)
{
    (void)state;
    S_NEED_GPU();
    s_dense(37, 300, 129, 5);
    s_dense(1, 7, 3, 7);
    /* RL_CUDA_TEST_SHORT (the sanitizers: compute-sanitizer, the emulation's
     * EMU_TSAN): a block count past one chunk of the column sums, not 1031 */
    if (getenv("RL_CUDA_TEST_SHORT"))
        s_dense(300, 130, 33, 6);
    else
        s_dense(1031, 2500, 771, 6);
}

/* ---- rope, embedding --------------------------------------------------------------------- */

static void s_rope_embed(int N, int H, int hd, int V, const int32_t *pos, uint64_t seed)
{
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 1);
    size_t n = (size_t)N * H * hd;
    float *x = s_rand(&g, n), *acc = s_rand(&g, n), *want = malloc(n * sizeof(float));
    float *dx = s_up(x, n), *dout = s_alloc(n);
    int32_t *dpos = pos ? s_up_i32(pos, N) : NULL;
    rl_rope_forward(want, x, pos, N, H, hd, 10000.0f);
    cu->rope_forward(dout, dx, dpos, N, H, hd, 10000.0f);
    s_check("rope", dout, want, n, 1e-5f);
    float *a = s_copy(acc, n), *da = s_up(a, n);
    rl_rope_backward(a, x, pos, N, H, hd, 10000.0f);
    cu->rope_backward(da, dx, dpos, N, H, hd, 10000.0f);
    s_check("rope backward", da, a, n, 1e-5f);

    /* embedding of N ids (repeats included) from a (V, C = H·hd) table */
    int C = H * hd;
    int32_t *ids = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)((i * 7 + 3) % V);
    float *tab = s_rand(&g, (size_t)V * C), *dtab0 = s_rand(&g, (size_t)V * C);
    float *emb = malloc(sizeof(float) * (size_t)N * C);
    int32_t *dids = s_up_i32(ids, N);
    float *d_tab = s_up(tab, (size_t)V * C), *d_emb = s_alloc((size_t)N * C);
    rl_embedding_forward(emb, ids, tab, N, C);
    cu->embedding_forward(d_emb, dids, d_tab, N, C);
    s_check("embedding", d_emb, emb, (size_t)N * C, 0.0f);
    float *d_dtab = s_up(dtab0, (size_t)V * C);
    rl_embedding_backward(dtab0, x, ids, N, C);
    cu->embedding_backward(d_dtab, dx, dids, N, C);
    s_check("embedding backward", d_dtab, dtab0, (size_t)V * C, 1e-5f);
    s_free_all();
    free(x); free(acc); free(want); free(a); free(ids); free(tab); free(dtab0); free(emb);
}

static void test_cuda_rope_embedding(void **state)
{
    (void)state;
    S_NEED_GPU();
    static const int32_t pos[9] = {0, 5, 1, 1, 4000, 2, 3, 7, 0}; /* ragged, repeated, large */
    s_rope_embed(9, 3, 6, 5, pos, 11);
    s_rope_embed(9, 3, 6, 5, NULL, 12);
    s_rope_embed(1, 1, 2, 1, NULL, 13);
    s_rope_embed(300, 4, 64, 50, NULL, 14);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* The largest |dev − want| over n (inf equal to inf counts 0). */
static double s_maxdiff(const float *dev, const float *want, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, RL_DEVICE_CUDA, dev, n * sizeof(float)), 0);
    double d = 0;
    for (size_t i = 0; i < n; i++)
        if (!(isinf(want[i]) && h[i] == want[i]))
            d = fmax(d, fabs((double)h[i] - want[i]));
    free(h);
    return d;
}

typedef int (*s_att_fwd)(float *, float *, const float *, const float *, const float *, const uint8_t *, int,
                         int, int, int, int);
typedef int (*s_att_bwd)(float *, float *, float *, const float *, const float *, const float *,
                         const float *, const float *, const float *, const uint8_t *, int, int, int, int,
                         int);

/* One shape of the attention pair against the CPU's: float32 (bf16 = 0), or
 * the bf16 pair (ops.h's "bf16 attention") against the CPU's reference of
 * it, where the tolerances also cover a P or dS rounded to the other bf16
 * neighbour (the two sum in different orders), and, where the tensor-core
 * kernels run (heads up to 128), the result visibly apart from float32's. */
static void s_attention_in(int B, int T, int H, int KH, int hd, int masked, uint64_t seed, int mode)
{
    /* mode 0: float32; 1: bf16; 2: the GPU's bf16 entries against the CPU's
     * float32 pair (RL_CUDA_ATTENTION=flash32 or cublas: they run it) */
    const rl_nn_ops *cu = s_cu();
    const int bf16 = mode == 1;
    s_att_fwd cf = bf16 ? rl_attention_forward_bf16 : rl_attention_forward;
    s_att_fwd gf = mode ? cu->attention_forward_bf16 : cu->attention_forward;
    s_att_bwd cb = bf16 ? rl_attention_backward_bf16 : rl_attention_backward;
    s_att_bwd gb = mode ? cu->attention_backward_bf16 : cu->attention_backward;
    const int tc = bf16 && hd <= RL_ATTENTION_BF16_MAX_HD; /* the tensor-core kernels run */
    rl_rng g;
    rl_rng_init(&g, seed, 2);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KH * hd, nl = (size_t)B * H * T;
    float *q = s_rand(&g, nq), *k = s_rand(&g, nk), *v = s_rand(&g, nk), *go = s_rand(&g, nq);
    float *out = malloc(nq * sizeof(float)), *lse = malloc(nl * sizeof(float));
    uint8_t *mask = malloc((size_t)B * T);
    /* batch 0: left padding; batch 1 (when B > 1): no key at all; others: holes */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            mask[(size_t)b * T + t] = b == 0 ? t >= T / 3 : b == 1 ? 0 : (t % 3) != 1;
    const uint8_t *m = masked ? mask : NULL;
    float *dq_ = s_up(q, nq), *dk_ = s_up(k, nk), *dv_ = s_up(v, nk), *dgo = s_up(go, nq);
    uint8_t *dm = masked ? s_up_u8(mask, (size_t)B * T) : NULL;
    float *dout = s_alloc(nq), *dlse = s_alloc(nl);
    assert_int_equal(cf(out, lse, q, k, v, m, B, T, H, KH, hd), 0);
    assert_int_equal(gf(dout, dlse, dq_, dk_, dv_, dm, B, T, H, KH, hd), 0);
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    if (bf16) {
        print_message("bf16 attention B=%d T=%d H=%d KH=%d hd=%d: out %.2e lse %.2e from the CPU's\n", B, T, H,
                      KH, hd, s_maxdiff(dout, out, nq), s_maxdiff(dlse, lse, nl));
        float *o32 = malloc(nq * sizeof(float)), *l32 = malloc(nl * sizeof(float));
        assert_int_equal(rl_attention_forward(o32, l32, q, k, v, m, B, T, H, KH, hd), 0);
        double apart = 0, far = 0;
        for (size_t i = 0; i < nq; i++) {
            apart = fmax(apart, fabs((double)o32[i] - out[i]));
            far = fmax(far, fabs((double)o32[i] - out[i]) / (1.0 + fabs(o32[i])));
        }
        free(o32);
        free(l32);
        if (tc && T > 1 && !(apart > 1e-4))
            fail_msg("bf16 attention: the output equals float32's to %g: nothing was rounded", apart);
        if (!(far < 0.05))
            fail_msg("bf16 attention: the output %g away from float32's (relative)", far);
    }
    s_check("attention out", dout, out, nq, bf16 ? 2e-3f : 1e-5f);
    s_check("attention lse", dlse, lse, nl, bf16 ? 1e-4f : 1e-5f);
    /* gradients onto nonzero buffers; the GPU backward gets the CPU's lse and
     * output, and runs once more without the output (the fused kernels then
     * sweep the keys for D) */
    float *gq = s_rand(&g, nq), *gk = s_rand(&g, nk), *gv = s_rand(&g, nk);
    float *d_gq = s_up(gq, nq), *d_gk = s_up(gk, nk), *d_gv = s_up(gv, nk), *d_l = s_up(lse, nl);
    float *n_gq = s_up(gq, nq), *n_gk = s_up(gk, nk), *n_gv = s_up(gv, nk), *d_o = s_up(out, nq);
    /* the CPU's without the output too: float32's ignores it, bf16's then
     * takes D from bf16(dO) · V̂ᵀ instead of dO · O (ops.h) */
    float *cq = s_copy(gq, nq), *ck = s_copy(gk, nk), *cv = s_copy(gv, nk);
    assert_int_equal(cb(cq, ck, cv, go, NULL, lse, q, k, v, m, B, T, H, KH, hd), 0);
    assert_int_equal(cb(gq, gk, gv, go, out, lse, q, k, v, m, B, T, H, KH, hd), 0);
    assert_int_equal(gb(d_gq, d_gk, d_gv, dgo, d_o, d_l, dq_, dk_, dv_, dm, B, T, H, KH, hd), 0);
    assert_int_equal(gb(n_gq, n_gk, n_gv, dgo, NULL, d_l, dq_, dk_, dv_, dm, B, T, H, KH, hd), 0);
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    if (bf16)
        print_message("bf16 attention backward: dq %.2e dk %.2e dv %.2e (no out: %.2e %.2e %.2e) from the CPU's\n",
                      s_maxdiff(d_gq, gq, nq), s_maxdiff(d_gk, gk, nk), s_maxdiff(d_gv, gv, nk),
                      s_maxdiff(n_gq, cq, nq), s_maxdiff(n_gk, ck, nk), s_maxdiff(n_gv, cv, nk));
    float atol = 1e-5f + 2e-6f * (float)T * (float)(H / KH);
    if (bf16) /* the sums' order, and a P or dS rounded the other way (2^-9 of it) */
        atol = 5e-3f + 5e-5f * (float)T * (float)(H / KH);
    s_check("attention dq", d_gq, gq, nq, atol);
    s_check("attention dk", d_gk, gk, nk, atol);
    s_check("attention dv", d_gv, gv, nk, atol);
    s_check("attention dq (no out)", n_gq, cq, nq, atol);
    s_check("attention dk (no out)", n_gk, ck, nk, atol);
    s_check("attention dv (no out)", n_gv, cv, nk, atol);
    free(cq); free(ck); free(cv);
    s_free_all();
    free(q); free(k); free(v); free(go); free(out); free(lse); free(mask);
    free(gq); free(gk); free(gv);
}

static void s_attention(int B, int T, int H, int KH, int hd, int masked, uint64_t seed)
{
    s_attention_in(B, T, H, KH, hd, masked, seed, 0);
}

/* The shapes, on the path RL_CUDA_ATTENTION names (cublas or flash). */
static void s_attention_shapes(void)
{
    s_attention(1, 1, 1, 1, 8, 0, 21);     /* T = 1 */
    s_attention(3, 5, 4, 2, 8, 1, 22);     /* GQA, padding, a batch with no key */
    s_attention(2, 37, 6, 6, 64, 1, 23);   /* MHA, odd T */
    s_attention(3, 70, 7, 1, 40, 1, 28);   /* 7 query heads per kv head, masked, hd padded */
    s_attention(3, 65, 4, 2, 128, 1, 29);  /* the widest head of the fused kernels */
    s_attention(1, 129, 2, 1, 32, 1, 30);  /* one row past two tiles */
    s_attention(1, 17, 2, 1, 200, 1, 25);  /* hd not a multiple of 32 (flash: the cuBLAS path) */
    s_attention(1, 9, 2, 2, 512, 1, 27);   /* a head wider than the old warp kernel took */
    /* the longest two, left out under compute-sanitizer (gpu_check.sh sets
     * RL_CUDA_TEST_SHORT): racecheck's shared-memory tracking of the fused
     * kernels is slow, and T = 70, 65 and 129 already cross tiles */
    if (getenv("RL_CUDA_TEST_SHORT"))
        return;
    s_attention(2, 130, 14, 2, 64, 0, 24); /* Qwen2's head grouping */
    s_attention(2, 300, 6, 2, 64, 1, 26);  /* longer rows than a block's threads */
}

/* The bf16 pair (tensor-core kernels) against the CPU's reference of it on
 * the same shapes; a head over 128 runs the float32 pair on both. */
static void s_attention_bf16_shapes(void)
{
    s_attention_in(1, 1, 1, 1, 8, 0, 21, 1);
    s_attention_in(3, 5, 4, 2, 8, 1, 22, 1);
    s_attention_in(2, 37, 6, 6, 64, 1, 23, 1);
    s_attention_in(3, 70, 7, 1, 40, 1, 28, 1);
    s_attention_in(3, 65, 4, 2, 128, 1, 29, 1);
    s_attention_in(1, 129, 2, 1, 32, 1, 30, 1);
    s_attention_in(1, 17, 2, 1, 200, 1, 25, 1);
    if (getenv("RL_CUDA_TEST_SHORT"))
        return;
    s_attention_in(2, 130, 14, 2, 64, 0, 24, 1);
}

/* The fused kernels twice on the same inputs: the same bits (no atomics);
 * the float32 pair, or the bf16 one. */
static void s_attention_repeat(int B, int T, int H, int KH, int hd, uint64_t seed, int bf16)
{
    const rl_nn_ops *cu = s_cu();
    s_att_fwd gf = bf16 ? cu->attention_forward_bf16 : cu->attention_forward;
    s_att_bwd gb = bf16 ? cu->attention_backward_bf16 : cu->attention_backward;
    rl_rng g;
    rl_rng_init(&g, seed, 2);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KH * hd, nl = (size_t)B * H * T;
    float *q = s_rand(&g, nq), *k = s_rand(&g, nk), *v = s_rand(&g, nk), *go = s_rand(&g, nq);
    float *dq_ = s_up(q, nq), *dk_ = s_up(k, nk), *dv_ = s_up(v, nk), *dgo = s_up(go, nq);
    float *h[2][5];
    for (int run = 0; run < 2; run++) {
        float *o = s_alloc(nq), *l = s_alloc(nl), *gq = s_alloc(nq), *gk = s_alloc(nk),
              *gv = s_alloc(nk);
        rl_device_zero(RL_DEVICE_CUDA, gq, nq * sizeof(float));
        rl_device_zero(RL_DEVICE_CUDA, gk, nk * sizeof(float));
        rl_device_zero(RL_DEVICE_CUDA, gv, nk * sizeof(float));
        assert_int_equal(gf(o, l, dq_, dk_, dv_, NULL, B, T, H, KH, hd), 0);
        assert_int_equal(gb(gq, gk, gv, dgo, o, l, dq_, dk_, dv_, NULL, B, T, H, KH, hd), 0);
        assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
        float *dev[5] = {o, l, gq, gk, gv};
        size_t n[5] = {nq, nl, nq, nk, nk};
        for (int i = 0; i < 5; i++) {
            h[run][i] = malloc(n[i] * sizeof(float));
            assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h[run][i], RL_DEVICE_CUDA, dev[i],
                                            n[i] * sizeof(float)),
                             0);
        }
    }
    size_t n[5] = {nq, nl, nq, nk, nk};
    for (int i = 0; i < 5; i++) {
        if (memcmp(h[0][i], h[1][i], n[i] * sizeof(float)) != 0)
            fail_msg("flash attention%s: output %d differs between two runs", bf16 ? " (bf16)" : "", i);
        free(h[0][i]);
        free(h[1][i]);
    }
    s_free_all();
    free(q); free(k); free(v); free(go);
}

/* Both paths against the CPU: the cuBLAS one (RL_CUDA_ATTENTION=cublas) and
 * the fused flash kernels (flash, the default); an unknown value is an error. */
static void test_cuda_attention(void **state)
{
    (void)state;
    S_NEED_GPU();
    const char *modes[2] = {"cublas", "flash"};
    for (int i = 0; i < 2; i++) {
        print_message("attention path: %s\n", modes[i]);
        setenv("RL_CUDA_ATTENTION", modes[i], 1);
        s_attention_shapes();
    }
    setenv("RL_CUDA_ATTENTION", "flash", 1);
    s_attention_repeat(2, getenv("RL_CUDA_TEST_SHORT") ? 70 : 200, 14, 2, 64, 31, 0);
    /* heads that do not group over the kv heads, or no head size: an error */
    const rl_nn_ops *cu = s_cu();
    float *d = rl_device_alloc(RL_DEVICE_CUDA, 4096);
    for (int i = 0; i < 2; i++) {
        setenv("RL_CUDA_ATTENTION", modes[i], 1);
        assert_int_equal(cu->attention_forward(d, d, d, d, d, NULL, 1, 1, 3, 2, 8), RL_EINVAL);
        assert_int_equal(cu->attention_backward(d, d, d, d, d, d, d, d, d, NULL, 1, 1, 2, 2, 0),
                         RL_EINVAL);
    }
    setenv("RL_CUDA_ATTENTION", "fast", 1);
    assert_int_equal(cu->attention_forward(d, d, d, d, d, NULL, 1, 1, 2, 2, 8), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "RL_CUDA_ATTENTION=fast"));
    unsetenv("RL_CUDA_ATTENTION");
    rl_device_free(RL_DEVICE_CUDA, d);
}

/* The bf16 pair: the tensor-core kernels against the CPU's reference on the
 * shapes, twice for equal bits; with RL_CUDA_ATTENTION=flash32 or cublas it
 * runs the float32 pair (the CPU's float32 results). */
static void test_cuda_attention_bf16(void **state)
{
    (void)state;
    S_NEED_GPU();
    unsetenv("RL_CUDA_ATTENTION");
    s_attention_bf16_shapes();
    s_attention_repeat(2, getenv("RL_CUDA_TEST_SHORT") ? 70 : 200, 14, 2, 64, 31, 1);
    const char *modes[2] = {"flash32", "cublas"};
    for (int i = 0; i < 2; i++) {
        setenv("RL_CUDA_ATTENTION", modes[i], 1);
        s_attention_in(3, 5, 4, 2, 8, 1, 22, 2);
        s_attention_in(3, 65, 4, 2, 128, 1, 29, 2);
    }
    unsetenv("RL_CUDA_ATTENTION");
}

/* ---- decoding over a KV cache ----------------------------------------------------------------- */

/* n rows write their key/value into slots of a (slots, maxT, kvd) cache at
 * their positions, then attend to their slot up to their position: the
 * CUDA pair against the CPU pair, on caches filled with noise first (only
 * positions <= pos may be read). */
static void s_decode(int n, int slots, int maxT, int H, int KH, int hd, uint64_t seed)
{
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 5);
    int kvd = KH * hd, qd = H * hd;
    size_t nc = (size_t)slots * maxT * kvd;
    float *kc = s_rand(&g, nc), *vc = s_rand(&g, nc);
    float *q = s_rand(&g, (size_t)n * qd), *k = s_rand(&g, (size_t)n * kvd), *v = s_rand(&g, (size_t)n * kvd);
    int32_t *slot = malloc(sizeof(int32_t) * n), *pos = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) { /* distinct slots in a shuffled order, ragged positions */
        slot[i] = (int32_t)((i * 7 + 3) % slots);
        pos[i] = (int32_t)((i * 13 + 5) % maxT);
    }
    float *d_kc = s_up(kc, nc), *d_vc = s_up(vc, nc), *d_q = s_up(q, (size_t)n * qd);
    float *d_k = s_up(k, (size_t)n * kvd), *d_v = s_up(v, (size_t)n * kvd);
    int32_t *d_slot = s_up_i32(slot, n), *d_pos = s_up_i32(pos, n);
    float *out = malloc(sizeof(float) * (size_t)n * qd), *sc = malloc(sizeof(float) * (size_t)n * H * maxT);
    float *d_out = s_alloc((size_t)n * qd), *d_sc = s_alloc((size_t)n * H * maxT);
    rl_kv_cache_write(kc, vc, k, v, slot, pos, n, kvd, maxT);
    cu->kv_cache_write(d_kc, d_vc, d_k, d_v, d_slot, d_pos, n, kvd, maxT);
    s_check("kv cache keys", d_kc, kc, nc, 0.0f);
    s_check("kv cache values", d_vc, vc, nc, 0.0f);
    rl_decode_attention(out, sc, q, kc, vc, slot, pos, n, H, KH, hd, maxT);
    cu->decode_attention(d_out, d_sc, d_q, d_kc, d_vc, d_slot, d_pos, n, H, KH, hd, maxT);
    s_check("decode attention", d_out, out, (size_t)n * qd, 1e-5f);
    s_free_all();
    free(kc); free(vc); free(q); free(k); free(v); free(slot); free(pos); free(out); free(sc);
}

static void test_cuda_decode(void **state)
{
    (void)state;
    S_NEED_GPU();
    s_decode(1, 1, 1, 1, 1, 8, 31);        /* one row at position 0 */
    s_decode(5, 8, 33, 4, 2, 16, 32);      /* GQA, ragged positions */
    s_decode(16, 16, 300, 14, 2, 64, 33);  /* Qwen2's grouping, more positions than threads */
    s_decode(3, 4, 9, 2, 1, 200, 34);      /* hd not a multiple of 32 */
}

/* ---- log-probs and entropy ------------------------------------------------------------------ */

static void s_logprob(int N, int V, float inv_temp, uint64_t seed)
{
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 3);
    size_t nz = (size_t)N * V;
    float *z = s_rand(&g, nz), *gl = s_rand(&g, N), *ge = s_rand(&g, N);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++)
        tg[i] = i % 4 == 3 ? -1 : (int32_t)((i * 131 + 7) % V);
    float *lp = malloc(sizeof(float) * N), *ent = malloc(sizeof(float) * N);
    float *lse = malloc(sizeof(float) * N), *dz = malloc(nz * sizeof(float));
    float *d_z = s_up(z, nz), *d_gl = s_up(gl, N), *d_ge = s_up(ge, N);
    int32_t *d_tg = s_up_i32(tg, N);
    float *d_lp = s_alloc(N), *d_ent = s_alloc(N), *d_lse = s_alloc(N), *d_dz = s_alloc(nz);
    rl_logprob_forward(lp, ent, lse, z, tg, inv_temp, N, V);
    cu->logprob_forward(d_lp, d_ent, d_lse, d_z, d_tg, inv_temp, N, V);
    s_check("logprob", d_lp, lp, N, 1e-5f);
    s_check("entropy", d_ent, ent, N, 1e-5f);
    s_check("lse", d_lse, lse, N, 1e-5f);
    rl_logprob_backward(dz, gl, ge, z, lse, ent, tg, inv_temp, N, V);
    cu->logprob_backward(d_dz, d_gl, d_ge, d_z, d_lse, d_ent, d_tg, inv_temp, N, V);
    s_check("logprob backward", d_dz, dz, nz, 1e-5f);
    /* log-probs only, and the gradient written over the logits themselves */
    rl_logprob_backward(z, gl, NULL, z, lse, NULL, tg, inv_temp, N, V);
    cu->logprob_backward(d_z, d_gl, NULL, d_z, d_lse, NULL, d_tg, inv_temp, N, V);
    s_check("logprob backward in place", d_z, z, nz, 1e-5f);
    s_free_all();
    free(z); free(gl); free(ge); free(tg); free(lp); free(ent); free(lse); free(dz);
}

static void test_cuda_logprob(void **state)
{
    (void)state;
    S_NEED_GPU();
    s_logprob(7, 300, 0.7f, 31);
    s_logprob(1, 1, 1.0f, 32);
    s_logprob(9, 5000, 1.0f, 33);
    if (!getenv("RL_CUDA_TEST_SHORT")) /* not under the sanitizers */
        s_logprob(3, 151936, 1.25f, 34); /* Qwen2's vocabulary */
}

/* ---- the device sampler ---------------------------------------------------------------------- */

/* n rows of V logits: argmax rows (u < 0, one of them all ties), inverse-CDF
 * rows at u = 0, 0.25, 0.5, 0.999999, and a row with a NaN (token -1). The
 * tokens equal the CPU's; log-probs and entropies within s_check's bounds. */
static void s_sample(int V, float inv_temp, uint64_t seed)
{
    enum { n = 7 };
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 5);
    float *z = s_rand(&g, (size_t)n * V);
    for (int64_t i = 0; i < (int64_t)n * V; i++)
        z[i] *= 3.0f;
    for (int j = 0; j < V; j++)
        z[(size_t)5 * V + j] = 0.5f; /* all ties: token 0 */
    z[(size_t)6 * V + V / 2] = NAN;
    double u[n] = {-1.0, 0.0, 0.25, 0.5, 0.999999, -1.0, 0.5};
    int32_t tok[n], dtok[n];
    float lp[n], ent[n];
    rl_sample_rows(tok, lp, ent, z, u, inv_temp, n, V);
    assert_int_equal(tok[5], 0);
    assert_int_equal(tok[6], -1);
    float *dz = s_up(z, (size_t)n * V), *dlp = s_alloc(n), *dent = s_alloc(n);
    double *du = s_up_bytes(u, sizeof u);
    int32_t *dt = s_up_bytes(tok, sizeof tok); /* overwritten */
    cu->sample_rows(dt, dlp, dent, dz, du, inv_temp, n, V);
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, dtok, RL_DEVICE_CUDA, dt, sizeof dtok), 0);
    for (int i = 0; i < n; i++)
        if (dtok[i] != tok[i])
            fail_msg("sample V=%d row %d (u %g): cuda token %d, cpu %d", V, i, u[i], dtok[i], tok[i]);
    s_check("sample logp", dlp, lp, 6, 1e-5f); /* row 6 has no distribution */
    s_check("sample entropy", dent, ent, 6, 1e-5f);
    s_free_all();
    free(z);
}

static void test_cuda_sample(void **state)
{
    (void)state;
    S_NEED_GPU();
    s_sample(3001, 1.0f, 51);
    s_sample(1, 0.7f, 52);
    s_sample(151936, 1.0f, 53); /* Qwen2's vocabulary */
}

/* ---- optimiser and weight copies ------------------------------------------------------------- */

/* Three AdamW steps (weight decay on, then off), the sum of squares over
 * more than one 64 Ki block, clipping's scale and the EMA. */
static void test_cuda_optim(void **state)
{
    (void)state;
    S_NEED_GPU();
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, 41, 4);
    int64_t n = 3 * 65536 + 17;
    float *p = s_rand(&g, n), *gr = s_rand(&g, n), *m = s_rand(&g, n), *v = s_rand(&g, n);
    for (int64_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]); /* exp_avg_sq >= 0 */
    float *dp = s_up(p, n), *dg = s_up(gr, n), *dm = s_up(m, n), *dv = s_up(v, n);
    rl_adamw_config cfg = rl_adamw_config_default();
    for (int t = 1; t <= 3; t++) {
        double wd = t < 3 ? 0.01 : 0.0;
        rl_adamw_update(&cfg, t, 1e-3, wd, p, gr, m, v, n);
        cu->adamw_update(&cfg, t, 1e-3, wd, dp, dg, dm, dv, n);
    }
    s_check("adamw params", dp, p, n, 1e-6f);
    s_check("adamw exp_avg", dm, m, n, 1e-6f);
    s_check("adamw exp_avg_sq", dv, v, n, 1e-6f);
    double want = rl_grad_sumsq(gr, n), got = cu->grad_sumsq(dg, n);
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    if (!(fabs(got - want) <= 1e-9 * want))
        fail_msg("grad_sumsq: cuda %.17g vs cpu %.17g", got, want);
    assert_true(cu->grad_sumsq(dg, 0) == 0.0);
    rl_scale_inplace(gr, 0.37f, n);
    cu->scale_inplace(dg, 0.37f, n);
    s_check("scale", dg, gr, n, 0.0f);
    rl_ema_update(p, gr, 0.99, n);
    cu->ema_update(dp, dg, 0.99, n);
    s_check("ema", dp, p, n, 1e-6f);
    s_free_all();
    free(p); free(gr); free(m); free(v);
}

/* The optimiser with its moments on the GPU (rl_adamw_new_on): four steps
 * over views with weight decay on and off and a view with its own lr, each
 * after a clip on the device, against the same optimiser on the CPU; the
 * moments read back through rl_adamw_moments_get and are counted as
 * "optim" memory on the device while they live. */
static void test_cuda_adamw_object(void **state)
{
    (void)state;
    S_NEED_GPU();
    rl_param_manifest *man = rl_param_manifest_new();
    int64_t big[2] = {300, 257}, small[1] = {300}, mid[2] = {64, 300};
    assert_true(rl_param_manifest_add(man, "w1", 2, big) >= 0);
    assert_true(rl_param_manifest_add(man, "b1", 1, small) >= 0);
    assert_true(rl_param_manifest_add(man, "head", 2, mid) >= 0);
    const int64_t n = man->total;
    rl_adamw_config cfg = rl_adamw_config_default();
    rl_adamw *c = rl_adamw_new(&cfg, man, 0, n);
    rl_device_memory before, during, after;
    rl_device_memory_get(RL_DEVICE_CUDA, &before);
    rl_adamw *d = rl_adamw_new_on(&cfg, man, 0, n, RL_DEVICE_CUDA);
    assert_non_null(c);
    assert_non_null(d);
    rl_device_memory_get(RL_DEVICE_CUDA, &during);
    assert_true(during.bytes[RL_MEM_OPTIM] >= before.bytes[RL_MEM_OPTIM] + 2 * sizeof(float) * (size_t)n);
    double scale[3] = {1.0, 1.0, 10.0};
    assert_int_equal(rl_adamw_set_no_decay(c, man, rl_param_pred_no_decay_1d, NULL), RL_OK);
    assert_int_equal(rl_adamw_set_no_decay(d, man, rl_param_pred_no_decay_1d, NULL), RL_OK);
    assert_int_equal(rl_adamw_set_lr_scale(c, man, scale), RL_OK);
    assert_int_equal(rl_adamw_set_lr_scale(d, man, scale), RL_OK);
    rl_rng g;
    rl_rng_init(&g, 43, 4);
    float *p = s_rand(&g, (size_t)n), *dp = s_up(p, (size_t)n);
    for (int step = 0; step < 4; step++) {
        float *gr = s_rand(&g, (size_t)n), *dg = s_up(gr, (size_t)n);
        float nc = 0, nd = 0;
        assert_int_equal(rl_grad_clip_norm(gr, n, 20.0f, &nc), RL_OK);
        assert_int_equal(rl_grad_clip_norm_on(RL_DEVICE_CUDA, dg, n, 20.0f, &nd), RL_OK);
        if (!(fabsf(nc - nd) <= 1e-5f * nc))
            fail_msg("step %d: clip norm cuda %g vs cpu %g", step, nd, nc);
        assert_int_equal(rl_adamw_step(c, 1e-3, p, gr), RL_OK);
        assert_int_equal(rl_adamw_step(d, 1e-3, dp, dg), RL_OK);
        free(gr);
    }
    s_check("adamw object params", dp, p, (size_t)n, 1e-6f);
    float *mh = malloc(sizeof(float) * (size_t)n), *vh = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(rl_adamw_moments_get(d, mh, vh), RL_OK);
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(mh[i] - c->m[i]) <= 1e-6f + 1e-4f * fabsf(c->m[i])) ||
            !(fabsf(vh[i] - c->v[i]) <= 1e-6f + 1e-4f * fabsf(c->v[i])))
            fail_msg("moment %lld: cuda (%g, %g) vs cpu (%g, %g)", (long long)i, mh[i], vh[i],
                     c->m[i], c->v[i]);
    rl_adamw_free(d);
    rl_device_memory_get(RL_DEVICE_CUDA, &after);
    assert_int_equal(after.bytes[RL_MEM_OPTIM], before.bytes[RL_MEM_OPTIM]);
    rl_adamw_free(c);
    rl_param_manifest_free(man);
    free(mh);
    free(vh);
    free(p);
    s_free_all();
}

/* ---- bf16 products (model.precision bf16) ------------------------------------------------ */

static void s_bf16(int N, int C, int OC, uint64_t seed)
{
    const rl_nn_ops *cu = s_cu();
    rl_rng g;
    rl_rng_init(&g, seed, 7);
    size_t nx = (size_t)N * C, ny = (size_t)N * OC, nw = (size_t)OC * C;
    float *x = s_rand(&g, nx), *w = s_rand(&g, nw), *b = s_rand(&g, OC), *gy = s_rand(&g, ny);
    float *acc_x = s_rand(&g, nx), *acc_w = s_rand(&g, nw), *acc_b = s_rand(&g, OC);
    /* special values at the front of x: the rounding's edge cases */
    static const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0x7F800001u, 0xFFC00001u,
                                       0x7F7FFFFFu, 0x00018000u, 0x007FFFFFu, 0x80000000u};
    size_t ns = sizeof special / sizeof special[0];
    float *xs = s_copy(x, nx);
    for (size_t i = 0; i < ns && i < nx; i++)
        memcpy(&xs[i], &special[i], sizeof(float));
    uint16_t *hw = malloc(sizeof(uint16_t) * nx), *hg = malloc(sizeof(uint16_t) * nx);
    float *dxs = s_up(xs, nx);
    uint16_t *dq = (uint16_t *)s_alloc(nx / 2 + 1); /* nx bf16 values */
    rl_round_bf16(hw, xs, (int64_t)nx);
    cu->round_bf16(dq, dxs, (int64_t)nx);
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, hg, RL_DEVICE_CUDA, dq, sizeof(uint16_t) * nx), 0);
    for (size_t i = 0; i < nx; i++)
        if (hg[i] != hw[i])
            fail_msg("round_bf16[%zu] of 0x%08X: cuda 0x%04X vs cpu 0x%04X", i,
                     (unsigned)rl_f32_bits(xs[i]), hg[i], hw[i]);

    /* the weights' bf16 copy, made on each device */
    uint16_t *w16 = malloc(sizeof(uint16_t) * nw);
    rl_round_bf16(w16, w, (int64_t)nw);
    float *dw = s_up(w, nw), *dx = s_up(x, nx), *db = s_up(b, OC), *dgy = s_up(gy, ny);
    uint16_t *dw16 = (uint16_t *)s_alloc(nw / 2 + 1);
    cu->round_bf16(dw16, dw, (int64_t)nw);
    float *want = malloc(sizeof(float) * ny), *f32 = malloc(sizeof(float) * ny);
    float *dout = s_alloc(ny);
    assert_int_equal(rl_linear_forward_bf16(want, x, w16, b, N, C, OC), 0);
    assert_int_equal(cu->linear_forward_bf16(dout, dx, dw16, db, N, C, OC), 0);
    s_check("linear bf16", dout, want, ny, 1e-5f + 4e-7f * (float)C);
    /* and not the float32 product: the largest gap to it is far past the tolerance */
    rl_linear_forward(f32, x, w, b, N, C, OC);
    float *h = malloc(sizeof(float) * ny), gap = 0.0f;
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, RL_DEVICE_CUDA, dout, sizeof(float) * ny), 0);
    for (size_t i = 0; i < ny; i++)
        gap = fabsf(h[i] - f32[i]) > gap ? fabsf(h[i] - f32[i]) : gap;
    if (C >= 16 && !(gap > 10.0f * (1e-5f + 4e-7f * (float)C)))
        fail_msg("linear bf16 is within %g of the float32 product: not bf16", gap);

    float *ix = s_copy(acc_x, nx), *iw = s_copy(acc_w, nw), *ib = s_copy(acc_b, OC);
    float *d_ix = s_up(ix, nx), *d_iw = s_up(iw, nw), *d_ib = s_up(ib, OC);
    assert_int_equal(rl_linear_backward_bf16(ix, iw, ib, gy, x, w16, N, C, OC), 0);
    assert_int_equal(cu->linear_backward_bf16(d_ix, d_iw, d_ib, dgy, dx, dw16, N, C, OC), 0);
    s_check("linear bf16 dinp", d_ix, ix, nx, 1e-5f + 4e-7f * (float)OC);
    s_check("linear bf16 dw", d_iw, iw, nw, 1e-5f + 4e-7f * (float)N);
    s_check("linear bf16 db", d_ib, ib, OC, 1e-5f + 2e-7f * (float)N);
    /* dw alone (the scratch holds only the rounded dout and inp) */
    assert_int_equal(rl_linear_backward_bf16(NULL, iw, NULL, gy, x, w16, N, C, OC), 0);
    assert_int_equal(cu->linear_backward_bf16(NULL, d_iw, NULL, dgy, dx, dw16, N, C, OC), 0);
    s_check("linear bf16 dw only", d_iw, iw, nw, 2e-5f + 8e-7f * (float)N);
    s_free_all();
    free(x); free(w); free(b); free(gy); free(acc_x); free(acc_w); free(acc_b); free(xs);
    free(hw); free(hg); free(w16); free(want); free(f32); free(h); free(ix); free(iw); free(ib);
}

/* fp32 products stay float32 (no TF32 in the handle's math mode); bf16
 * GEMMs on ragged shapes, one row, and large ones (the scratch grows). */
static void test_cuda_bf16(void **state)
{
    (void)state;
    S_NEED_GPU();
    assert_int_equal(rl_cuda_tf32_off(), 1);
    s_bf16(37, 300, 129, 5);
    s_bf16(1, 7, 3, 7);
    s_bf16(1031, 2500, 771, 6);
}

/* The CUDA table is complete: a model can ask for it. */
static void test_cuda_table_complete(void **state)
{
    (void)state;
    S_NEED_GPU();
    const char *miss = rl_nn_ops_missing(s_cu());
    if (miss)
        fail_msg("the CUDA table lacks %s", miss);
}
#else
static void test_cuda_dense(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_rope_embedding(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_attention(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_attention_bf16(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_logprob(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_sample(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_decode(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_table_complete(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_optim(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_adamw_object(void **state) { (void)state; S_NEED_GPU(); }
static void test_cuda_bf16(void **state) { (void)state; S_NEED_GPU(); }
#endif

/* The default attention path again after the attention test, failed or not. */
static int s_attention_default(void **state)
{
    (void)state;
    unsetenv("RL_CUDA_ATTENTION");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_dense),
        cmocka_unit_test(test_cuda_rope_embedding),
        cmocka_unit_test_teardown(test_cuda_attention, s_attention_default),
        cmocka_unit_test_teardown(test_cuda_attention_bf16, s_attention_default),
        cmocka_unit_test(test_cuda_logprob),
        cmocka_unit_test(test_cuda_sample),
        cmocka_unit_test(test_cuda_decode),
        cmocka_unit_test(test_cuda_optim),
        cmocka_unit_test(test_cuda_adamw_object),
        cmocka_unit_test(test_cuda_bf16),
        cmocka_unit_test(test_cuda_table_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
