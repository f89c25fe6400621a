/* ops_conv.c — CPU kernels of convolutional networks: convolution by im2col
 * and rl_sgemm, max pooling, ReLU (see common/nn/engine/ops_conv.h). */
#include "common/nn/engine/ops_conv.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/ops.h"
#include "rlrt/error.h"

int rl_conv2d_out_h(const rl_conv2d_shape *s) { return (s->H + 2 * s->pad - s->KH) / s->stride + 1; }

int rl_conv2d_out_w(const rl_conv2d_shape *s) { return (s->W + 2 * s->pad - s->KW) / s->stride + 1; }

/* col (C·KH·KW, OH·OW) of one image x (C, H, W): row (c, i, j) holds the
 * input under kernel tap (i, j) of channel c at every output position, 0 in
 * the padding. */
static void s_im2col(float *col, const float *x, const rl_conv2d_shape *s, int OH, int OW)
{
    int64_t P = (int64_t)OH * OW;
    for (int c = 0; c < s->C; c++)
        for (int i = 0; i < s->KH; i++)
            for (int j = 0; j < s->KW; j++) {
                float *row = col + ((int64_t)(c * s->KH + i) * s->KW + j) * P;
                const float *xc = x + (int64_t)c * s->H * s->W;
                for (int oy = 0; oy < OH; oy++) {
                    int y = oy * s->stride - s->pad + i;
                    float *r = row + (int64_t)oy * OW;
                    if (y < 0 || y >= s->H) {
                        memset(r, 0, sizeof(float) * (size_t)OW);
                        continue;
                    }
                    for (int ox = 0; ox < OW; ox++) {
                        int xx = ox * s->stride - s->pad + j;
                        r[ox] = xx < 0 || xx >= s->W ? 0.0f : xc[(int64_t)y * s->W + xx];
                    }
                }
            }
}

/* dx (C, H, W) += col2im(dcol (C·KH·KW, OH·OW)): the adjoint of s_im2col. */
static void s_col2im(float *dx, const float *dcol, const rl_conv2d_shape *s, int OH, int OW)
{
    int64_t P = (int64_t)OH * OW;
    for (int c = 0; c < s->C; c++)
        for (int i = 0; i < s->KH; i++)
            for (int j = 0; j < s->KW; j++) {
                const float *row = dcol + ((int64_t)(c * s->KH + i) * s->KW + j) * P;
                float *xc = dx + (int64_t)c * s->H * s->W;
                for (int oy = 0; oy < OH; oy++) {
                    int y = oy * s->stride - s->pad + i;
                    if (y < 0 || y >= s->H)
                        continue;
                    for (int ox = 0; ox < OW; ox++) {
                        int xx = ox * s->stride - s->pad + j;
                        if (xx >= 0 && xx < s->W)
                            xc[(int64_t)y * s->W + xx] += row[(int64_t)oy * OW + ox];
                    }
                }
            }
}

int rl_conv2d_forward(float *out, const float *inp, const float *w, const float *b,
                      const rl_conv2d_shape *s)
{
    int OH = rl_conv2d_out_h(s), OW = rl_conv2d_out_w(s), K = s->C * s->KH * s->KW;
    int64_t P = (int64_t)OH * OW, colsz = (int64_t)K * P;
    int nt = rl_nn_get_threads();
    if (nt > s->N)
        nt = s->N > 0 ? s->N : 1;
    float *col = malloc(sizeof(float) * (size_t)(colsz * nt));
    if (!col)
        return rl_error_set(RL_ENOMEM, "conv2d: out of memory for the im2col scratch (%lld floats)",
                            (long long)(colsz * nt));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int n = 0; n < s->N; n++) {
        float *c = col + colsz * omp_get_thread_num();
        float *o = out + (int64_t)n * s->OC * P;
        s_im2col(c, inp + (int64_t)n * s->C * s->H * s->W, s, OH, OW);
        rl_sgemm(0, 0, s->OC, (int)P, K, 1.0f, w, K, c, (int)P, 0.0f, o, (int)P);
        if (b)
            for (int oc = 0; oc < s->OC; oc++)
                for (int64_t p = 0; p < P; p++)
                    o[oc * P + p] += b[oc];
    }
    free(col);
    return RL_OK;
}

int rl_conv2d_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, const rl_conv2d_shape *s)
{
    int OH = rl_conv2d_out_h(s), OW = rl_conv2d_out_w(s), K = s->C * s->KH * s->KW;
    int64_t P = (int64_t)OH * OW, colsz = (int64_t)K * P;
    int nt = rl_nn_get_threads();
    if (nt > s->N)
        nt = s->N > 0 ? s->N : 1;
    /* the columns of every image (for dw), then a per-thread dcol */
    int64_t ncol = dw ? (int64_t)s->N : 0, ndcol = dinp ? nt : 0;
    float *col = ncol + ndcol ? malloc(sizeof(float) * (size_t)(colsz * (ncol + ndcol))) : NULL;
    if (ncol + ndcol && !col)
        return rl_error_set(RL_ENOMEM, "conv2d backward: out of memory for the im2col scratch (%lld floats)",
                            (long long)(colsz * (ncol + ndcol)));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int n = 0; n < s->N; n++) {
        const float *g = dout + (int64_t)n * s->OC * P;
        if (dw)
            s_im2col(col + colsz * n, inp + (int64_t)n * s->C * s->H * s->W, s, OH, OW);
        if (dinp) {
            float *dc = col + colsz * (ncol + omp_get_thread_num());
            /* dcol (K, P) = wᵀ (K, OC) · dout_n (OC, P) */
            rl_sgemm(1, 0, K, (int)P, s->OC, 1.0f, w, K, g, (int)P, 0.0f, dc, (int)P);
            s_col2im(dinp + (int64_t)n * s->C * s->H * s->W, dc, s, OH, OW);
        }
    }
    /* dw (OC, K) += Σ_n dout_n (OC, P) · col_nᵀ (P, K), in image order */
    for (int n = 0; dw && n < s->N; n++)
        rl_sgemm(0, 1, s->OC, K, (int)P, 1.0f, dout + (int64_t)n * s->OC * P, (int)P, col + colsz * n,
                 (int)P, 1.0f, dw, K);
    if (db)
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int oc = 0; oc < s->OC; oc++) {
            double acc = 0;
            for (int n = 0; n < s->N; n++) {
                const float *g = dout + ((int64_t)n * s->OC + oc) * P;
                for (int64_t p = 0; p < P; p++)
                    acc += g[p];
            }
            db[oc] += (float)acc;
        }
    free(col);
    return RL_OK;
}

void rl_maxpool2d_forward(float *out, int32_t *arg, const float *inp, int N, int C, int H, int W,
                          int k)
{
    int OH = H / k, OW = W / k;
    int64_t planes = (int64_t)N * C;
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = inp + pl * H * W;
        float *o = out + pl * OH * OW;
        int32_t *a = arg + pl * OH * OW;
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                int best = oy * k * W + ox * k;
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        int at = (oy * k + i) * W + ox * k + j;
                        if (x[at] > x[best])
                            best = at;
                    }
                o[oy * OW + ox] = x[best];
                a[oy * OW + ox] = best;
            }
    }
}

void rl_maxpool2d_backward(float *dinp, const float *dout, const int32_t *arg, int N, int C, int H,
                           int W, int k)
{
    int64_t planes = (int64_t)N * C, per = (int64_t)(H / k) * (W / k);
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t i = 0; i < per; i++)
            dinp[pl * H * W + arg[pl * per + i]] += dout[pl * per + i];
}

void rl_relu_forward(float *out, const float *inp, int64_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void rl_relu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        if (inp[i] > 0.0f)
            dinp[i] += dout[i];
}

void rl_plane_add(float *x, const float *add, int64_t planes, int64_t hw)
{
    for (int64_t r = 0; r < planes; r++) {
        float *z = x + r * hw, a = add[r];
        for (int64_t i = 0; i < hw; i++)
            z[i] += a;
    }
}

void rl_plane_sum(float *out, const float *x, int64_t planes, int64_t hw)
{
    for (int64_t r = 0; r < planes; r++) {
        const float *z = x + r * hw;
        double sum = 0;
        for (int64_t i = 0; i < hw; i++)
            sum += z[i];
        out[r] = (float)sum;
    }
}

void rl_upsample2x_add(float *a, const float *s, int64_t planes, int h, int w)
{
    for (int64_t i = 0; i < planes; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                a[(i * h + y) * w + x] += s[(i * (h / 2) + y / 2) * (w / 2) + x / 2];
}

void rl_upsample2x_backward(float *ds, const float *da, int64_t planes, int h, int w)
{
    for (int64_t i = 0; i < planes; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                ds[(i * (h / 2) + y / 2) * (w / 2) + x / 2] += da[(i * h + y) * w + x];
}
