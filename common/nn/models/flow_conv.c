/* flow_conv.c — the convolutional velocity trunk of clip_flow (see
 * common/nn/models/flow_conv_internal.h): forward and backward from the
 * kernels of common/nn/engine/ops_conv.h and ops.h. */
#include "common/nn/models/flow_conv_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/ops.h"
#include "common/nn/engine/ops_conv.h"
#include "common/nn/models/flow_mlp_internal.h"
#include "rlrt/error.h"

#define S_L RL_FLOW_CONV_LAYERS

/* Layer k's input channels, output channels, input side (rows; columns
 * scale alike) divisor and stride: conv k reads an image of H/div rows. */
static void s_geom(const rl_flow_conv *t, int k, int *ic, int *oc, int *div, int *stride)
{
    const int C = t->C;
    static const int divs[S_L] = {1, 1, 2, 4, 2, 1, 1}, strides[S_L] = {1, 2, 2, 1, 1, 1, 1};
    const int ics[S_L] = {t->Cin, C, 2 * C, 2 * C, 2 * C, C, C};
    const int ocs[S_L] = {C, 2 * C, 2 * C, 2 * C, C, C, t->Cin};
    *ic = ics[k];
    *oc = ocs[k];
    *div = divs[k];
    *stride = strides[k];
}

static rl_conv2d_shape s_shape(const rl_flow_conv *t, int k, int n)
{
    int ic, oc, div, stride;
    s_geom(t, k, &ic, &oc, &div, &stride);
    return (rl_conv2d_shape){n, ic, t->H / div, t->W / div, oc, 3, 3, 1, stride};
}

int rl_flow_conv_init(rl_flow_conv *t, int Cin, int H, int W, int C, int Hd, int E, const char *who)
{
    memset(t, 0, sizeof *t);
    if (H % 4 || W % 4 || H < 4 || W < 4)
        return rl_error_set(RL_ECONFIG, "%s: the conv trunk needs an image side that is a multiple of 4, "
                                        "got %dx%d", who, H, W);
    t->Cin = Cin, t->H = H, t->W = W, t->C = C, t->Hd = Hd, t->E = E;
    const int64_t hw = (int64_t)H * W;
    t->S[0] = C * hw;
    t->S[1] = 2 * C * hw / 4;
    t->S[2] = 2 * C * hw / 16;
    t->S[3] = 2 * C * hw / 16;
    t->S[4] = C * hw / 4;
    t->S[5] = C * hw;
    return RL_OK;
}

static void s_free_acts(rl_flow_conv *t)
{
    for (int k = 0; k < S_L - 1; k++) {
        free(t->z[k]);
        free(t->h[k]);
        free(t->dh[k]);
        t->z[k] = t->h[k] = t->dh[k] = NULL;
    }
    free(t->temb);
    free(t->cond);
    free(t->in4);
    free(t->in5);
    free(t->dz);
    free(t->din);
    free(t->pc);
    free(t->dc);
    t->temb = t->cond = t->in4 = t->in5 = t->dz = t->din = t->pc = t->dc = NULL;
    t->cap = 0;
}

void rl_flow_conv_free(rl_flow_conv *t) { s_free_acts(t); }

int rl_flow_conv_add_head(rl_flow_conv *t, rl_model_base *b)
{
    int rc = rl_model_base_add(b, "time.weight", 2, t->Hd, t->E, &t->t_w);
    return rc ? rc : rl_model_base_add(b, "time.bias", 1, t->Hd, 0, &t->t_b);
}

int rl_flow_conv_add_tail(rl_flow_conv *t, rl_model_base *b)
{
    int rc = RL_OK;
    char name[64];
    for (int k = 0; !rc && k < S_L; k++) {
        int ic, oc, div, stride;
        s_geom(t, k, &ic, &oc, &div, &stride);
        snprintf(name, sizeof name, "conv.%d.weight", k);
        if ((rc = rl_model_base_add(b, name, 2, oc, (int64_t)ic * 9, &t->cw[k])))
            break;
        snprintf(name, sizeof name, "conv.%d.bias", k);
        if ((rc = rl_model_base_add(b, name, 1, oc, 0, &t->cb[k])) || k == S_L - 1)
            break;
        snprintf(name, sizeof name, "cond.%d.weight", k);
        if ((rc = rl_model_base_add(b, name, 2, oc, t->Hd, &t->pw[k])))
            break;
        snprintf(name, sizeof name, "cond.%d.bias", k);
        rc = rl_model_base_add(b, name, 1, oc, 0, &t->pb[k]);
    }
    return rc;
}

int rl_flow_conv_reserve(rl_flow_conv *t, int64_t n, const char *who)
{
    if (n <= t->cap)
        return RL_OK;
    s_free_acts(t);
    int ok = 1;
#define S_ALLOC(p, count) ok = ok && ((p) = malloc(sizeof(float) * (size_t)(n * (count)))) != NULL
    for (int k = 0; k < S_L - 1; k++) {
        S_ALLOC(t->z[k], t->S[k]);
        S_ALLOC(t->h[k], t->S[k]);
        S_ALLOC(t->dh[k], t->S[k]);
    }
    S_ALLOC(t->temb, t->E);
    S_ALLOC(t->cond, t->Hd);
    S_ALLOC(t->in4, t->S[1]);
    S_ALLOC(t->in5, t->S[0]);
    S_ALLOC(t->dz, t->S[0]);
    S_ALLOC(t->din, t->S[0]);
    S_ALLOC(t->pc, 2 * t->C);
    S_ALLOC(t->dc, t->Hd);
#undef S_ALLOC
    if (!ok) {
        s_free_acts(t);
        return rl_error_set(RL_ENOMEM, "%s: out of memory for %lld rows of activations", who, (long long)n);
    }
    t->cap = n;
    return RL_OK;
}

void rl_flow_conv_cond(rl_flow_conv *t, const float *P, int64_t n, const float *tt)
{
    t->n = n;
    rl_flow_time_cond(t->temb, t->cond, P, t->t_w, t->t_b, n, t->E, t->Hd, tt);
}

/* a (n, c, h, w) += nearest 2× upsampling of s (n, c, h/2, w/2) */
static void s_up_add(float *a, const float *s, int64_t nc, int h, int w)
{
    for (int64_t i = 0; i < nc; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                a[(i * h + y) * w + x] += s[(i * (h / 2) + y / 2) * (w / 2) + x / 2];
}

/* ds (n, c, h/2, w/2) += the 2×2 block sums of da (n, c, h, w): up's backward */
static void s_up_backward(float *ds, const float *da, int64_t nc, int h, int w)
{
    for (int64_t i = 0; i < nc; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                ds[(i * (h / 2) + y / 2) * (w / 2) + x / 2] += da[(i * h + y) * w + x];
}

/* h_k = silu(conv_k(inp) + cond_k(cond)) */
static int s_layer(rl_flow_conv *t, const float *P, int k, const float *inp)
{
    const int n = (int)t->n;
    rl_conv2d_shape s = s_shape(t, k, n);
    int rc = rl_conv2d_forward(t->z[k], inp, P + t->cw[k], P + t->cb[k], &s);
    if (rc)
        return rc;
    const int oc = s.OC;
    const int64_t hw = t->S[k] / oc;
    rl_linear_forward(t->pc, t->cond, P + t->pw[k], P + t->pb[k], n, t->Hd, oc);
    for (int64_t r = 0; r < n; r++)
        for (int c = 0; c < oc; c++) {
            float *z = t->z[k] + (r * oc + c) * hw, add = t->pc[r * oc + c];
            for (int64_t i = 0; i < hw; i++)
                z[i] += add;
        }
    rl_silu_forward(t->h[k], t->z[k], (int64_t)n * t->S[k]);
    return RL_OK;
}

int rl_flow_conv_trunk(rl_flow_conv *t, const float *P, const float *x, float *out)
{
    const int64_t n = t->n;
    const int C = t->C, H = t->H, W = t->W;
    t->x = x;
    int rc = s_layer(t, P, 0, x);
    for (int k = 1; !rc && k <= 3; k++)
        rc = s_layer(t, P, k, t->h[k - 1]);
    if (!rc) {
        memcpy(t->in4, t->h[1], sizeof(float) * (size_t)(n * t->S[1]));
        s_up_add(t->in4, t->h[3], n * 2 * C, H / 2, W / 2);
        rc = s_layer(t, P, 4, t->in4);
    }
    if (!rc) {
        memcpy(t->in5, t->h[0], sizeof(float) * (size_t)(n * t->S[0]));
        s_up_add(t->in5, t->h[4], n * C, H, W);
        rc = s_layer(t, P, 5, t->in5);
    }
    if (!rc) {
        rl_conv2d_shape s = s_shape(t, 6, (int)n);
        rc = rl_conv2d_forward(out, t->h[5], P + t->cw[6], P + t->cb[6], &s);
    }
    return rc;
}

/* Layer k's backward from the complete t->dh[k]: its conv and conditioning
 * gradients, dL/dcond into t->dc, and dL/d(its input) added into dinp
 * (NULL: not needed). */
static int s_layer_backward(rl_flow_conv *t, const float *P, float *G, int k, const float *inp, float *dinp)
{
    const int n = (int)t->n;
    rl_conv2d_shape s = s_shape(t, k, n);
    const int oc = s.OC;
    const int64_t hw = t->S[k] / oc, all = (int64_t)n * t->S[k];
    memset(t->dz, 0, sizeof(float) * (size_t)all);
    rl_silu_backward(t->dz, t->dh[k], t->z[k], all);
    for (int64_t r = 0; r < n; r++)
        for (int c = 0; c < oc; c++) {
            const float *dz = t->dz + (r * oc + c) * hw;
            double sum = 0;
            for (int64_t i = 0; i < hw; i++)
                sum += dz[i];
            t->pc[r * oc + c] = (float)sum;
        }
    rl_linear_backward(t->dc, G + t->pw[k], G + t->pb[k], t->pc, t->cond, P + t->pw[k], n, t->Hd, oc);
    return rl_conv2d_backward(dinp, G + t->cw[k], G + t->cb[k], t->dz, inp, P + t->cw[k], &s);
}

int rl_flow_conv_backward(rl_flow_conv *t, const float *P, float *G, const float *dout, float **dcond)
{
    const int64_t n = t->n;
    const int C = t->C, H = t->H, W = t->W;
    for (int k = 0; k < S_L - 1; k++)
        memset(t->dh[k], 0, sizeof(float) * (size_t)(n * t->S[k]));
    memset(t->dc, 0, sizeof(float) * (size_t)(n * t->Hd));
    rl_conv2d_shape s6 = s_shape(t, 6, (int)n);
    int rc = rl_conv2d_backward(t->dh[5], G + t->cw[6], G + t->cb[6], dout, t->h[5], P + t->cw[6], &s6);
    if (!rc) { /* in5 = up(h4) + h0 */
        memset(t->din, 0, sizeof(float) * (size_t)(n * t->S[0]));
        if (!(rc = s_layer_backward(t, P, G, 5, t->in5, t->din))) {
            rl_add_inplace(t->dh[0], t->din, n * t->S[0]);
            s_up_backward(t->dh[4], t->din, n * C, H, W);
        }
    }
    if (!rc) { /* in4 = up(h3) + h1 */
        memset(t->din, 0, sizeof(float) * (size_t)(n * t->S[1]));
        if (!(rc = s_layer_backward(t, P, G, 4, t->in4, t->din))) {
            rl_add_inplace(t->dh[1], t->din, n * t->S[1]);
            s_up_backward(t->dh[3], t->din, n * 2 * C, H / 2, W / 2);
        }
    }
    for (int k = 3; !rc && k >= 1; k--)
        rc = s_layer_backward(t, P, G, k, t->h[k - 1], t->dh[k - 1]);
    if (!rc)
        rc = s_layer_backward(t, P, G, 0, t->x, NULL);
    if (rc)
        return rc;
    rl_linear_backward(NULL, G + t->t_w, G + t->t_b, t->dc, t->temb, P + t->t_w, (int)n, t->E, t->Hd);
    *dcond = t->dc;
    return RL_OK;
}
