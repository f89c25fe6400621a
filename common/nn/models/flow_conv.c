/* flow_conv.c — the convolutional velocity trunk of clip_flow (see
 * common/nn/models/flow_conv_internal.h): forward and backward from the
 * kernels of common/nn/engine/ops_conv.h and ops.h, through the device
 * table of the trunk's device. */
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
    t->dev = RL_DEVICE_CPU;
    t->nn = rl_nn_ops_get(RL_DEVICE_CPU);
    const int64_t hw = (int64_t)H * W;
    t->S[0] = C * hw;
    t->S[1] = 2 * C * hw / 4;
    t->S[2] = 2 * C * hw / 16;
    t->S[3] = 2 * C * hw / 16;
    t->S[4] = C * hw / 4;
    t->S[5] = C * hw;
    return RL_OK;
}

/* The activations: one block from z[0] on the trunk's device. */
static void s_free_acts(rl_flow_conv *t)
{
    rl_model_floats_free(t->dev, t->z[0]);
    for (int k = 0; k < S_L - 1; k++)
        t->z[k] = t->h[k] = t->dh[k] = NULL;
    t->temb = t->cond = t->in4 = t->in5 = t->dz = t->din = t->pc = t->dc = NULL;
    t->cap = 0;
}

void rl_flow_conv_free(rl_flow_conv *t) { s_free_acts(t); }

void rl_flow_conv_on(rl_flow_conv *t, rl_device dev, const rl_nn_ops *nn)
{
    s_free_acts(t);
    t->dev = dev;
    t->nn = nn;
}

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
    enum { S_N = 3 * (S_L - 1) + 8 };
    float **arrays[S_N];
    size_t counts[S_N];
    int a = 0;
#define S_ARR(p, count) (arrays[a] = &(p), counts[a++] = (size_t)n * (size_t)(count))
    for (int k = 0; k < S_L - 1; k++) {
        S_ARR(t->z[k], t->S[k]);
        S_ARR(t->h[k], t->S[k]);
        S_ARR(t->dh[k], t->S[k]);
    }
    S_ARR(t->temb, t->E);
    S_ARR(t->cond, t->Hd);
    S_ARR(t->in4, t->S[1]);
    S_ARR(t->in5, t->S[0]);
    S_ARR(t->dz, t->S[0]);
    S_ARR(t->din, t->S[0]);
    S_ARR(t->pc, 2 * t->C);
    S_ARR(t->dc, t->Hd);
#undef S_ARR
    int rc = rl_model_floats_on(t->dev, (float **const *)arrays, counts, a, who);
    if (rc) {
        s_free_acts(t);
        return rc;
    }
    t->cap = n;
    return RL_OK;
}

void rl_flow_conv_cond(rl_flow_conv *t, const float *P, int64_t n, const float *tt)
{
    t->n = n;
    t->nn->time_embed(t->temb, tt, n, t->E);
    t->nn->linear_forward(t->cond, t->temb, P + t->t_w, P + t->t_b, (int)n, t->E, t->Hd);
}

/* h_k = silu(conv_k(inp) + cond_k(cond)) */
static int s_layer(rl_flow_conv *t, const float *P, int k, const float *inp)
{
    const int n = (int)t->n;
    const rl_nn_ops *o = t->nn;
    rl_conv2d_shape s = s_shape(t, k, n);
    int rc = o->conv2d_forward(t->z[k], inp, P + t->cw[k], P + t->cb[k], &s);
    if (rc)
        return rc;
    const int oc = s.OC;
    const int64_t hw = t->S[k] / oc;
    o->linear_forward(t->pc, t->cond, P + t->pw[k], P + t->pb[k], n, t->Hd, oc);
    o->plane_add(t->z[k], t->pc, (int64_t)n * oc, hw);
    o->silu_forward(t->h[k], t->z[k], (int64_t)n * t->S[k]);
    return RL_OK;
}

int rl_flow_conv_trunk(rl_flow_conv *t, const float *P, const float *x, float *out)
{
    const int64_t n = t->n;
    const int C = t->C, H = t->H, W = t->W;
    const rl_nn_ops *o = t->nn;
    t->x = x;
    int rc = s_layer(t, P, 0, x);
    for (int k = 1; !rc && k <= 3; k++)
        rc = s_layer(t, P, k, t->h[k - 1]);
    if (!rc && !(rc = rl_device_copy(t->dev, t->in4, t->dev, t->h[1], sizeof(float) * (size_t)(n * t->S[1])))) {
        o->upsample2x_add(t->in4, t->h[3], n * 2 * C, H / 2, W / 2);
        rc = s_layer(t, P, 4, t->in4);
    }
    if (!rc && !(rc = rl_device_copy(t->dev, t->in5, t->dev, t->h[0], sizeof(float) * (size_t)(n * t->S[0])))) {
        o->upsample2x_add(t->in5, t->h[4], n * C, H, W);
        rc = s_layer(t, P, 5, t->in5);
    }
    if (!rc) {
        rl_conv2d_shape s = s_shape(t, 6, (int)n);
        rc = o->conv2d_forward(out, t->h[5], P + t->cw[6], P + t->cb[6], &s);
    }
    return rc;
}

/* Layer k's backward from the complete t->dh[k]: its conv and conditioning
 * gradients, dL/dcond into t->dc, and dL/d(its input) added into dinp
 * (NULL: not needed). */
static int s_layer_backward(rl_flow_conv *t, const float *P, float *G, int k, const float *inp, float *dinp)
{
    const int n = (int)t->n;
    const rl_nn_ops *o = t->nn;
    rl_conv2d_shape s = s_shape(t, k, n);
    const int oc = s.OC;
    const int64_t hw = t->S[k] / oc, all = (int64_t)n * t->S[k];
    rl_device_zero(t->dev, t->dz, sizeof(float) * (size_t)all);
    o->silu_backward(t->dz, t->dh[k], t->z[k], all);
    o->plane_sum(t->pc, t->dz, (int64_t)n * oc, hw);
    o->linear_backward(t->dc, G + t->pw[k], G + t->pb[k], t->pc, t->cond, P + t->pw[k], n, t->Hd, oc);
    return o->conv2d_backward(dinp, G + t->cw[k], G + t->cb[k], t->dz, inp, P + t->cw[k], &s);
}

int rl_flow_conv_backward(rl_flow_conv *t, const float *P, float *G, const float *dout, float **dcond)
{
    const int64_t n = t->n;
    const int C = t->C, H = t->H, W = t->W;
    const rl_nn_ops *o = t->nn;
    const rl_device dev = t->dev;
    for (int k = 0; k < S_L - 1; k++)
        rl_device_zero(dev, t->dh[k], sizeof(float) * (size_t)(n * t->S[k]));
    rl_device_zero(dev, t->dc, sizeof(float) * (size_t)(n * t->Hd));
    rl_conv2d_shape s6 = s_shape(t, 6, (int)n);
    int rc = o->conv2d_backward(t->dh[5], G + t->cw[6], G + t->cb[6], dout, t->h[5], P + t->cw[6], &s6);
    if (!rc) { /* in5 = up(h4) + h0 */
        rl_device_zero(dev, t->din, sizeof(float) * (size_t)(n * t->S[0]));
        if (!(rc = s_layer_backward(t, P, G, 5, t->in5, t->din))) {
            o->add_inplace(t->dh[0], t->din, n * t->S[0]);
            o->upsample2x_backward(t->dh[4], t->din, n * C, H, W);
        }
    }
    if (!rc) { /* in4 = up(h3) + h1 */
        rl_device_zero(dev, t->din, sizeof(float) * (size_t)(n * t->S[1]));
        if (!(rc = s_layer_backward(t, P, G, 4, t->in4, t->din))) {
            o->add_inplace(t->dh[1], t->din, n * t->S[1]);
            o->upsample2x_backward(t->dh[3], t->din, n * 2 * C, H / 2, W / 2);
        }
    }
    for (int k = 3; !rc && k >= 1; k--)
        rc = s_layer_backward(t, P, G, k, t->h[k - 1], t->dh[k - 1]);
    if (!rc)
        rc = s_layer_backward(t, P, G, 0, t->x, NULL);
    if (rc)
        return rc;
    o->linear_backward(NULL, G + t->t_w, G + t->t_b, t->dc, t->temb, P + t->t_w, (int)n, t->E, t->Hd);
    *dcond = t->dc;
    return RL_OK;
}
