/* test_nn_ops.c — CPU kernels: hand-derivable forward values and a central
 * finite-difference check of every backward.
 *
 * FD harness: for a random probe r, L(x) = Σ r ⊙ f(x) (in double); the
 * analytic gradient (backward with dout = r) must match (L(x+h) − L(x−h))/2h
 * at every input element with |num − ana| <= 2e-3 + 2e-2·|ana|, h = 1e-2
 * (float32 kernels; smooth ops, so the O(h²) error is far below that). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/device.h"

static rl_rng s_g;

static float *s_rand(int64_t n, float scale)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        p[i] = scale * rl_rng_normal(&s_g);
    return p;
}

static float *s_zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* Forward closure: recomputes the op's output into out from the current inputs. */
typedef void (*s_fwd)(void *ctx, float *out);

static double s_probe(s_fwd f, void *ctx, float *out, const float *r, int64_t nout)
{
    f(ctx, out);
    double L = 0;
    for (int64_t i = 0; i < nout; i++)
        L += (double)r[i] * out[i];
    return L;
}

static void s_fd(const char *what, s_fwd f, void *ctx, float *x, int64_t nx, const float *ana,
                 const float *r, int64_t nout)
{
    float *out = s_zeros(nout);
    const float h = 1e-2f;
    int bad = 0;
    double maxana = 0;
    for (int64_t i = 0; i < nx; i++) {
        float xi = x[i];
        x[i] = xi + h;
        double lp = s_probe(f, ctx, out, r, nout);
        x[i] = xi - h;
        double lm = s_probe(f, ctx, out, r, nout);
        x[i] = xi;
        double num = (lp - lm) / (2.0 * h);
        maxana = fabs(ana[i]) > maxana ? fabs(ana[i]) : maxana;
        if (fabs(num - ana[i]) > 2e-3 + 2e-2 * fabs(ana[i])) {
            if (bad++ < 3)
                print_error("%s: d/dx[%lld] numeric %.6g analytic %.6g\n", what, (long long)i,
                            num, (double)ana[i]);
        }
    }
    free(out);
    if (bad)
        fail_msg("%s: %d of %lld gradient entries wrong", what, bad, (long long)nx);
    assert_true(maxana > 0); /* the probe reached this input */
}

/* ---- linear --------------------------------------------------------------------- */

typedef struct { float *inp, *w, *b; int N, C, OC; } lin_ctx;
static void lin_f(void *c, float *out)
{
    lin_ctx *k = c;
    rl_linear_forward(out, k->inp, k->w, k->b, k->N, k->C, k->OC);
}

static void test_linear(void **state)
{
    (void)state;
    /* Hand value: [1 2] · [[1 0],[0 1],[1 1]]^T + [0 0 1] = [1 2 4]. */
    float x[2] = {1, 2}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {0, 0, 1}, y[3];
    rl_linear_forward(y, x, w, b, 1, 2, 3);
    assert_float_equal(y[0], 1, 0);
    assert_float_equal(y[1], 2, 0);
    assert_float_equal(y[2], 4, 0);

    lin_ctx k = {s_rand(5 * 7, 1), s_rand(4 * 7, 1), s_rand(4, 1), 5, 7, 4};
    float *r = s_rand(5 * 4, 1);
    float *di = s_zeros(35), *dw = s_zeros(28), *db = s_zeros(4);
    rl_linear_backward(di, dw, db, r, k.inp, k.w, 5, 7, 4);
    s_fd("linear dinp", lin_f, &k, k.inp, 35, di, r, 20);
    s_fd("linear dw", lin_f, &k, k.w, 28, dw, r, 20);
    s_fd("linear db", lin_f, &k, k.b, 4, db, r, 20);
    /* Backward accumulates. */
    rl_linear_backward(NULL, NULL, db, r, k.inp, k.w, 5, 7, 4);
    float want = 0;
    for (int n = 0; n < 5; n++)
        want += r[n * 4 + 1];
    assert_float_equal(db[1], 2 * want, 1e-5);
    free(k.inp); free(k.w); free(k.b); free(r); free(di); free(dw); free(db);
}

static void test_sgemm_transposes(void **state)
{
    (void)state;
    /* A (2,3), B (3,2): C = A·B by hand; then with both stored transposed. */
    float A[6] = {1, 2, 3, 4, 5, 6}, Bm[6] = {7, 8, 9, 10, 11, 12}, C[4];
    rl_sgemm(0, 0, 2, 2, 3, 1, A, 3, Bm, 2, 0, C, 2);
    float want[4] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++)
        assert_float_equal(C[i], want[i], 0);
    float At[6] = {1, 4, 2, 5, 3, 6}, Bt[6] = {7, 9, 11, 8, 10, 12};
    rl_sgemm(1, 1, 2, 2, 3, 0.5f, At, 2, Bt, 3, 1, C, 2);
    for (int i = 0; i < 4; i++)
        assert_float_equal(C[i], 1.5f * want[i], 0);
}

/* ---- elementwise ---------------------------------------------------------------- */

typedef struct { float *a, *b; int64_t n; int op; } ew_ctx;
static void ew_f(void *c, float *out)
{
    ew_ctx *k = c;
    switch (k->op) {
    case 0: rl_mul_forward(out, k->a, k->b, k->n); break;
    case 1: rl_silu_forward(out, k->a, k->n); break;
    case 2: rl_swiglu_forward(out, k->a, k->b, k->n); break;
    case 3: rl_add_forward(out, k->a, k->b, k->n); break;
    default: rl_scale_forward(out, k->a, 1.7f, k->n); break;
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    int64_t n = 40;
    ew_ctx k = {s_rand(n, 2), s_rand(n, 2), n, 0};
    float *r = s_rand(n, 1), *da = s_zeros(n), *db = s_zeros(n);
    rl_mul_backward(da, db, r, k.a, k.b, n);
    s_fd("mul da", ew_f, &k, k.a, n, da, r, n);
    s_fd("mul db", ew_f, &k, k.b, n, db, r, n);
    k.op = 1;
    memset(da, 0, sizeof(float) * n);
    rl_silu_backward(da, r, k.a, n);
    s_fd("silu", ew_f, &k, k.a, n, da, r, n);
    k.op = 2;
    memset(da, 0, sizeof(float) * n);
    memset(db, 0, sizeof(float) * n);
    rl_swiglu_backward(da, db, r, k.a, k.b, n);
    s_fd("swiglu dgate", ew_f, &k, k.a, n, da, r, n);
    s_fd("swiglu dup", ew_f, &k, k.b, n, db, r, n);
    k.op = 3;
    memset(da, 0, sizeof(float) * n);
    rl_add_inplace(da, r, n);
    s_fd("add", ew_f, &k, k.b, n, da, r, n);
    k.op = 4;
    memset(da, 0, sizeof(float) * n);
    rl_scale_backward(da, r, 1.7f, n);
    s_fd("scale", ew_f, &k, k.a, n, da, r, n);
    /* silu(0) = 0, silu(x) → x for large x; swiglu = silu(g)·u. */
    float x[2] = {0, 30}, y[2];
    rl_silu_forward(y, x, 2);
    assert_float_equal(y[0], 0, 0);
    assert_float_equal(y[1], 30, 1e-5);
    free(k.a); free(k.b); free(r); free(da); free(db);
}

static void test_reductions(void **state)
{
    (void)state;
    int64_t n = 10001;
    float *a = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)(i % 7) - 3.0f; /* Σ over full cycles is 0 */
    double want = 0;
    for (int64_t i = 0; i < n; i++)
        want += a[i];
    assert_true(rl_sum(a, n) == want);
    float m[6] = {1, 2, 3, 4, 5, 6}, cs[3] = {0, 0, 0}, dm[6] = {0};
    rl_rowsum_forward(cs, m, 2, 3);
    assert_float_equal(cs[0], 5, 0);
    assert_float_equal(cs[2], 9, 0);
    float g[3] = {1, 2, 3};
    rl_rowsum_backward(dm, g, 2, 3);
    assert_float_equal(dm[4], 2, 0);
    /* Same result on 1 and 2 threads. */
    int t = rl_nn_get_threads();
    rl_nn_set_threads(1);
    double s1 = rl_sum(a, n);
    rl_nn_set_threads(2);
    double s2 = rl_sum(a, n);
    rl_nn_set_threads(t);
    assert_true(s1 == s2);
    free(a);
}

/* ---- softmax / RMSNorm ---------------------------------------------------------- */

typedef struct { float *x, *w; int N, C; float eps; } row_ctx;
static void softmax_f(void *c, float *out)
{
    row_ctx *k = c;
    rl_softmax_forward(out, k->x, k->N, k->C);
}
static void rms_f(void *c, float *out)
{
    row_ctx *k = c;
    rl_rmsnorm_forward(out, NULL, k->x, k->w, k->eps, k->N, k->C);
}

static void test_softmax(void **state)
{
    (void)state;
    float x[2] = {0, logf(2.0f)}, y[2];
    rl_softmax_forward(y, x, 1, 2);
    assert_float_equal(y[0], 1.0f / 3, 1e-6);
    assert_float_equal(y[1], 2.0f / 3, 1e-6);
    row_ctx k = {s_rand(4 * 9, 2), NULL, 4, 9, 0};
    float *r = s_rand(36, 1), *out = s_zeros(36), *dx = s_zeros(36);
    rl_softmax_forward(out, k.x, 4, 9);
    rl_softmax_backward(dx, r, out, 4, 9);
    s_fd("softmax", softmax_f, &k, k.x, 36, dx, r, 36);
    free(k.x); free(r); free(out); free(dx);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    /* [3, 4]: mean square 12.5 → out = x / sqrt(12.5) · w. */
    float x[2] = {3, 4}, w[2] = {1, 2}, y[2], rs;
    rl_rmsnorm_forward(y, &rs, x, w, 0.0f, 1, 2);
    assert_float_equal(rs, 1.0 / sqrt(12.5), 1e-7);
    assert_float_equal(y[1], 8.0 / sqrt(12.5), 1e-6);
    row_ctx k = {s_rand(5 * 12, 1.5), s_rand(12, 1), 5, 12, 1e-5f};
    float *r = s_rand(60, 1), *out = s_zeros(60), *rstd = s_zeros(5);
    float *dx = s_zeros(60), *dw = s_zeros(12);
    rl_rmsnorm_forward(out, rstd, k.x, k.w, k.eps, 5, 12);
    rl_rmsnorm_backward(dx, dw, r, k.x, k.w, rstd, 5, 12);
    s_fd("rmsnorm dinp", rms_f, &k, k.x, 60, dx, r, 60);
    s_fd("rmsnorm dw", rms_f, &k, k.w, 12, dw, r, 60);
    /* dw does not depend on the thread count (rows summed in order). */
    int t = rl_nn_get_threads();
    float *dw1 = s_zeros(12), *dw2 = s_zeros(12);
    rl_nn_set_threads(1);
    rl_rmsnorm_backward(NULL, dw1, r, k.x, k.w, rstd, 5, 12);
    rl_nn_set_threads(2);
    rl_rmsnorm_backward(NULL, dw2, r, k.x, k.w, rstd, 5, 12);
    rl_nn_set_threads(t);
    assert_memory_equal(dw1, dw2, sizeof(float) * 12);
    free(k.x); free(k.w); free(r); free(out); free(rstd); free(dx); free(dw); free(dw1); free(dw2);
}

/* ---- RoPE ----------------------------------------------------------------------- */

typedef struct { float *x; int32_t *pos; int N, H, hd; float theta; } rope_ctx;
static void rope_f(void *c, float *out)
{
    rope_ctx *k = c;
    rl_rope_forward(out, k->x, k->pos, k->N, k->H, k->hd, k->theta);
}

static void test_rope(void **state)
{
    (void)state;
    /* hd = 2: a plain rotation by angle = pos; pos 0 is the identity. */
    float x[4] = {1, 0, 0.5f, 2}, y[4];
    int32_t pos[2] = {0, 3};
    rl_rope_forward(y, x, pos, 2, 1, 2, 10000.0f);
    assert_float_equal(y[0], 1, 0);
    assert_float_equal(y[1], 0, 0);
    assert_float_equal(y[2], 0.5f * cosf(3) - 2 * sinf(3), 1e-6);
    assert_float_equal(y[3], 2 * cosf(3) + 0.5f * sinf(3), 1e-6);
    /* hd = 4: the second pair (i = 1) turns at pos · theta^(-1/2). */
    float x4[4] = {0, 1, 0, 0}, y4[4];
    int32_t p1 = 2;
    rl_rope_forward(y4, x4, &p1, 1, 1, 4, 100.0f);
    assert_float_equal(y4[1], cosf(0.2f), 1e-6);
    assert_float_equal(y4[3], sinf(0.2f), 1e-6);

    int32_t ps[5] = {0, 1, 2, 7, 100};
    rope_ctx k = {s_rand(5 * 3 * 8, 1), ps, 5, 3, 8, 500.0f};
    float *r = s_rand(120, 1), *dx = s_zeros(120);
    rl_rope_backward(dx, r, ps, 5, 3, 8, 500.0f);
    s_fd("rope", rope_f, &k, k.x, 120, dx, r, 120);
    free(k.x); free(r); free(dx);
}

/* ---- embedding ------------------------------------------------------------------- */

typedef struct { float *table; int32_t *ids; int N, C; } emb_ctx;
static void emb_f(void *c, float *out)
{
    emb_ctx *k = c;
    rl_embedding_forward(out, k->ids, k->table, k->N, k->C);
}

static void test_embedding(void **state)
{
    (void)state;
    int32_t ids[6] = {3, 1, 3, 0, 4, 3};
    emb_ctx k = {s_rand(5 * 6, 1), ids, 6, 6};
    float *out = s_zeros(36);
    rl_embedding_forward(out, ids, k.table, 6, 6);
    assert_memory_equal(out + 6, k.table + 6, sizeof(float) * 6);
    float *r = s_rand(36, 1), *dt = s_zeros(30);
    rl_embedding_backward(dt, r, ids, 6, 6);
    /* Row 2 (never used) stays zero, row 3 sums three rows of r. */
    for (int c = 0; c < 6; c++) {
        assert_float_equal(dt[2 * 6 + c], 0, 0);
        assert_float_equal(dt[3 * 6 + c], r[c] + r[12 + c] + r[30 + c], 1e-6);
    }
    /* FD over rows 0-1 (row 2's gradient is exactly 0, checked above). */
    s_fd("embedding", emb_f, &k, k.table, 12, dt, r, 36);
    free(k.table); free(out); free(r); free(dt);
}

/* ---- attention ------------------------------------------------------------------- */

typedef struct { float *q, *k, *v, *lse; uint8_t *mask; int B, T, H, KH, hd; } att_ctx;
static void att_f(void *c, float *out)
{
    att_ctx *a = c;
    assert_int_equal(rl_attention_forward(out, a->lse, a->q, a->k, a->v, a->mask, a->B, a->T,
                                          a->H, a->KH, a->hd), 0);
}

static void test_attention_values(void **state)
{
    (void)state;
    /* T = 1: the only key is itself, output = v. Fully masked query → 0. */
    float q[4] = {1, 2, 3, 4}, k[4] = {4, 3, 2, 1}, v[4] = {5, 6, 7, 8}, out[4], lse[2];
    uint8_t m1 = 1, m0 = 0;
    assert_int_equal(rl_attention_forward(out, lse, q, k, v, &m1, 1, 1, 1, 1, 4), 0);
    for (int i = 0; i < 4; i++)
        assert_float_equal(out[i], v[i], 1e-6);
    assert_float_equal(lse[0], 10.0f, 1e-5); /* one key: lse = q·k / sqrt(4) */
    assert_int_equal(rl_attention_forward(out, lse, q, k, v, &m0, 1, 1, 1, 1, 4), 0);
    for (int i = 0; i < 4; i++)
        assert_float_equal(out[i], 0, 0);
    assert_true(isinf(lse[0]) && lse[0] > 0);
    /* T = 2, hd = 1, q·k equal for both keys → query 1 averages v0, v1;
     * query 0 sees only key 0 (causal). lse[1] = 2 + ln 2. */
    float q2[2] = {1, 1}, k2[2] = {2, 2}, v2[2] = {1, 3}, o2[2];
    assert_int_equal(rl_attention_forward(o2, lse, q2, k2, v2, NULL, 1, 2, 1, 1, 1), 0);
    assert_float_equal(o2[0], 1, 1e-6);
    assert_float_equal(o2[1], 2, 1e-6);
    assert_float_equal(lse[1], 2 + logf(2), 1e-6);
}

static void test_attention_backward(void **state)
{
    (void)state;
    int B = 2, T = 5, H = 4, KH = 2, hd = 6;
    int64_t nq = (int64_t)B * T * H * hd, nk = (int64_t)B * T * KH * hd;
    uint8_t mask[10] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    att_ctx a = {s_rand(nq, 1), s_rand(nk, 1), s_rand(nk, 1), s_zeros((int64_t)B * H * T),
                 mask, B, T, H, KH, hd};
    float *out = s_zeros(nq), *r = s_rand(nq, 1);
    float *dq = s_zeros(nq), *dk = s_zeros(nk), *dv = s_zeros(nk);
    assert_int_equal(rl_attention_forward(out, a.lse, a.q, a.k, a.v, mask, B, T, H, KH, hd), 0);
    assert_int_equal(rl_attention_backward(dq, dk, dv, r, NULL, a.lse, a.q, a.k, a.v, mask, B, T, H,
                                           KH, hd), 0);
    /* Padded keys of row 1 get no gradient (nothing attends to them). */
    for (int t = 3; t < 5; t++)
        for (int e = 0; e < KH * hd; e++) {
            assert_float_equal(dk[(1 * T + t) * KH * hd + e], 0, 0);
            assert_float_equal(dv[(1 * T + t) * KH * hd + e], 0, 0);
        }
    s_fd("attention dq", att_f, &a, a.q, nq, dq, r, nq);
    s_fd("attention dk", att_f, &a, a.k, nk, dk, r, nq);
    s_fd("attention dv", att_f, &a, a.v, nk, dv, r, nq);
    free(a.q); free(a.k); free(a.v); free(a.lse); free(out); free(r); free(dq); free(dk);
    free(dv);
}

/* T = 70 spans two causal row blocks: compare with a naive double-precision
 * attention, then finite differences on a subset of inputs. */
static void test_attention_blocks_naive(void **state)
{
    (void)state;
    int B = 2, T = 70, H = 2, KH = 1, hd = 4;
    int64_t nq = (int64_t)B * T * H * hd, nk = (int64_t)B * T * KH * hd;
    uint8_t *mask = calloc((size_t)B * T, 1);
    for (int t = 0; t < T; t++) {
        mask[t] = 1;
        mask[T + t] = t < 66;
    }
    att_ctx a = {s_rand(nq, 1), s_rand(nk, 1), s_rand(nk, 1), s_zeros((int64_t)B * H * T),
                 mask, B, T, H, KH, hd};
    float *out = s_zeros(nq);
    assert_int_equal(rl_attention_forward(out, a.lse, a.q, a.k, a.v, mask, B, T, H, KH, hd), 0);
    double sc[70];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qv = a.q + ((size_t)(b * T + t) * H + h) * hd;
                double mx = -INFINITY, sum = 0;
                for (int s2 = 0; s2 <= t; s2++) {
                    const float *kv = a.k + (size_t)(b * T + s2) * KH * hd;
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += (double)qv[e] * kv[e];
                    sc[s2] = mask[b * T + s2] ? d / 2.0 : -INFINITY; /* sqrt(hd) = 2 */
                    mx = sc[s2] > mx ? sc[s2] : mx;
                }
                for (int s2 = 0; s2 <= t; s2++)
                    sum += exp(sc[s2] - mx);
                for (int e = 0; e < hd; e++) {
                    double o = 0;
                    for (int s2 = 0; s2 <= t; s2++)
                        o += exp(sc[s2] - mx) / sum * a.v[(size_t)(b * T + s2) * KH * hd + e];
                    assert_float_equal(out[((size_t)(b * T + t) * H + h) * hd + e], o, 2e-5);
                }
            }
    float *r = s_rand(nq, 1), *dq = s_zeros(nq), *dk = s_zeros(nk), *dv = s_zeros(nk);
    assert_int_equal(rl_attention_backward(dq, dk, dv, r, NULL, a.lse, a.q, a.k, a.v, mask, B, T, H,
                                           KH, hd), 0);
    /* FD on batch row 0 (its inputs are the first half of each array). */
    s_fd("attention(T=70) dq", att_f, &a, a.q, nq / 2, dq, r, nq);
    s_fd("attention(T=70) dk", att_f, &a, a.k, nk / 2, dk, r, nq);
    s_fd("attention(T=70) dv", att_f, &a, a.v, nk / 2, dv, r, nq);
    free(a.q); free(a.k); free(a.v); free(a.lse); free(out); free(r); free(dq); free(dk);
    free(dv); free(mask);
}

/* ---- log-probs, entropy, cross-entropy -------------------------------------------- */

typedef struct { float *logits; int32_t *tgt; int N, V; float it; int which; } lp_ctx;
static void lp_f(void *c, float *out)
{
    lp_ctx *k = c;
    float lse[8];
    if (k->which == 0)
        rl_logprob_forward(out, NULL, lse, k->logits, k->tgt, k->it, k->N, k->V);
    else
        rl_logprob_forward(NULL, out, lse, k->logits, k->tgt, k->it, k->N, k->V);
}

static void test_logprob_entropy(void **state)
{
    (void)state;
    /* Uniform logits: logp = −log V, entropy = log V. */
    float z[5] = {2, 2, 2, 2, 2}, lp, ent, lse;
    int32_t y = 3, none = -1;
    rl_logprob_forward(&lp, &ent, &lse, z, &y, 0.5f, 1, 5);
    assert_float_equal(lp, -logf(5), 1e-6);
    assert_float_equal(ent, logf(5), 1e-6);
    rl_logprob_forward(&lp, NULL, &lse, z, &none, 1.0f, 1, 5);
    assert_float_equal(lp, 0, 0);
    /* Two logits {0, ln 3}: p = {1/4, 3/4}. */
    float z2[2] = {0, logf(3)};
    int32_t y0 = 0;
    rl_logprob_forward(&lp, &ent, &lse, z2, &y0, 1.0f, 1, 2);
    assert_float_equal(lp, logf(0.25f), 1e-6);
    assert_float_equal(ent, -(0.25 * log(0.25) + 0.75 * log(0.75)), 1e-6);

    int N = 4, V = 11;
    int32_t tgt[4] = {0, 10, 5, -1};
    lp_ctx k = {s_rand(N * V, 2), tgt, N, V, 1.0f / 0.7f, 0};
    float *r = s_rand(N, 1), *lps = s_zeros(N), *ents = s_zeros(N), *lses = s_zeros(N);
    float *dl = s_zeros(N * V);
    rl_logprob_forward(lps, ents, lses, k.logits, tgt, k.it, N, V);
    rl_logprob_backward(dl, r, NULL, k.logits, lses, ents, tgt, k.it, N, V);
    /* Row 3 has no target: its logits get no gradient from logp; FD on rows 0-2. */
    for (int j = 0; j < V; j++)
        assert_float_equal(dl[3 * V + j], 0, 0);
    s_fd("logprob", lp_f, &k, k.logits, 3 * V, dl, r, N);
    k.which = 1;
    rl_logprob_backward(dl, NULL, r, k.logits, lses, ents, tgt, k.it, N, V);
    s_fd("entropy", lp_f, &k, k.logits, N * V, dl, r, N);

    /* Cross-entropy = mean(−logp) over rows with a target. */
    float ce = rl_cross_entropy(dl, k.logits, tgt, N, V);
    rl_logprob_forward(lps, NULL, lses, k.logits, tgt, 1.0f, N, V);
    assert_float_equal(ce, -(lps[0] + lps[1] + lps[2]) / 3, 1e-5);
    float sum = 0;
    for (int j = 0; j < V; j++)
        sum += dl[j];
    assert_float_equal(sum, 0, 1e-6); /* softmax − onehot sums to 0 */
    free(k.logits); free(r); free(lps); free(ents); free(lses); free(dl);
}

/* Inputs big enough to take the OpenMP paths (thresholds in ops_internal.h)
 * give the same results on 2 threads as on 1: bitwise for row/element-wise
 * kernels and attention (each task is computed whole by one thread), to
 * rounding for the split GEMM. */
static void test_parallel_paths_match_serial(void **state)
{
    (void)state;
    int keep = rl_nn_get_threads();
    int N = 4096, C = 320, B = 2, T = 130, H = 8, KH = 2, hd = 64;
    int64_t n = (int64_t)N * C, nq = (int64_t)B * T * H * hd, nk = (int64_t)B * T * KH * hd;
    float *x = s_rand(n, 1), *w = s_rand(C, 1), *g = s_rand(n, 1);
    float *q = s_rand(nq, 1), *k = s_rand(nk, 1), *v = s_rand(nk, 1);
    int32_t *tgt = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++)
        tgt[i] = (i * 37) % C;
    float *out[2], *aux[2], *dx[2], *dw[2], *ao[2], *dq[2], *dk[2], *dv[2], *gm[2];
    for (int r = 0; r < 2; r++) {
        rl_nn_set_threads(r + 1);
        out[r] = s_zeros(n); aux[r] = s_zeros(3 * N); dx[r] = s_zeros(n); dw[r] = s_zeros(C);
        rl_rmsnorm_forward(out[r], aux[r], x, w, 1e-6f, N, C);
        rl_rmsnorm_backward(dx[r], dw[r], g, x, w, aux[r], N, C);
        rl_swiglu_backward(dx[r], out[r], g, x, g, n);
        rl_logprob_forward(aux[r] + N, aux[r] + 2 * N, aux[r], x, tgt, 0.9f, N, C);
        ao[r] = s_zeros(nq); dq[r] = s_zeros(nq); dk[r] = s_zeros(nk); dv[r] = s_zeros(nk);
        float *lse = s_zeros((int64_t)B * H * T);
        assert_int_equal(rl_attention_forward(ao[r], lse, q, k, v, NULL, B, T, H, KH, hd), 0);
        assert_int_equal(rl_attention_backward(dq[r], dk[r], dv[r], q, NULL, lse, q, k, v, NULL, B, T,
                                               H, KH, hd), 0);
        free(lse);
        gm[r] = s_zeros(512 * 640);
        rl_sgemm(0, 1, 512, 640, 64, 1.0f, x, 64, g, 64, 0.0f, gm[r], 640);
    }
    rl_nn_set_threads(keep);
    assert_memory_equal(out[0], out[1], sizeof(float) * (size_t)n);
    assert_memory_equal(dx[0], dx[1], sizeof(float) * (size_t)n);
    assert_memory_equal(dw[0], dw[1], sizeof(float) * (size_t)C);
    assert_memory_equal(aux[0], aux[1], sizeof(float) * (size_t)(3 * N));
    assert_memory_equal(ao[0], ao[1], sizeof(float) * (size_t)nq);
    assert_memory_equal(dq[0], dq[1], sizeof(float) * (size_t)nq);
    assert_memory_equal(dk[0], dk[1], sizeof(float) * (size_t)nk);
    assert_memory_equal(dv[0], dv[1], sizeof(float) * (size_t)nk);
    for (int i = 0; i < 512 * 640; i++)
        assert_float_equal(gm[0][i], gm[1][i], 1e-4 * (1 + fabsf(gm[0][i])));
    for (int r = 0; r < 2; r++) {
        free(out[r]); free(aux[r]); free(dx[r]); free(dw[r]); free(ao[r]); free(dq[r]);
        free(dk[r]); free(dv[r]); free(gm[r]);
    }
    free(x); free(w); free(g); free(q); free(k); free(v); free(tgt);
}

static void test_device_table(void **state)
{
    (void)state;
    const rl_nn_ops *cpu = rl_nn_ops_get(RL_DEVICE_CPU);
    assert_non_null(cpu);
    assert_null(rl_nn_ops_missing(cpu));
    assert_int_equal(rl_device_count(RL_DEVICE_CPU), 1);
    assert_ptr_equal(cpu->rmsnorm_forward, rl_rmsnorm_forward);
    float src[3] = {1, 2, 3}, *dst = rl_device_alloc(RL_DEVICE_CPU, sizeof src);
    assert_non_null(dst);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, dst, RL_DEVICE_CPU, src, sizeof src), 0);
    assert_memory_equal(dst, src, sizeof src);
    rl_device_free(RL_DEVICE_CPU, dst);
    /* accounting: blocks by purpose, the peak, frees in any order (through a
     * map that grows and reuses deleted slots) */
    rl_device_memory m0, m1;
    rl_device_memory_get(RL_DEVICE_CPU, &m0);
    void *blk[600];
    for (int i = 0; i < 600; i++) {
        blk[i] = rl_device_alloc_for(RL_DEVICE_CPU, 100 + (size_t)i, (rl_mem_purpose)(i % RL_MEM_COUNT));
        assert_non_null(blk[i]);
    }
    rl_device_memory_get(RL_DEVICE_CPU, &m1);
    size_t want = 0, per[RL_MEM_COUNT] = {0};
    for (int i = 0; i < 600; i++) {
        want += 100 + (size_t)i;
        per[i % RL_MEM_COUNT] += 100 + (size_t)i;
    }
    assert_int_equal(m1.total - m0.total, want);
    assert_int_equal(m1.blocks - m0.blocks, 600);
    for (int k = 0; k < RL_MEM_COUNT; k++)
        assert_int_equal(m1.bytes[k] - m0.bytes[k], per[k]);
    assert_true(m1.peak >= m0.total + want);
    for (int i = 599; i >= 0; i -= 2) /* every other block, from the end */
        rl_device_free(RL_DEVICE_CPU, blk[i]);
    for (int i = 0; i < 600; i += 2)
        rl_device_free(RL_DEVICE_CPU, blk[i]);
    rl_device_memory_get(RL_DEVICE_CPU, &m1);
    assert_int_equal(m1.total, m0.total);
    assert_int_equal(m1.blocks, m0.blocks);
    assert_true(m1.peak >= m0.total + want);
    assert_string_equal(rl_mem_purpose_name(RL_MEM_GRADS), "grads");
#ifndef RL_CUDA
    assert_null(rl_nn_ops_get(RL_DEVICE_CUDA));
    assert_int_equal(rl_error_code(), RL_EUNSUPPORTED);
    assert_int_equal(rl_device_count(RL_DEVICE_CUDA), 0);
#endif
}

int main(void)
{
    rl_rng_init(&s_g, 2024, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_sgemm_transposes),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_attention_values),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_attention_blocks_naive),
        cmocka_unit_test(test_logprob_entropy),
        cmocka_unit_test(test_parallel_paths_match_serial),
        cmocka_unit_test(test_device_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
