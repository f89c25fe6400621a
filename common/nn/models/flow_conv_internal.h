/* flow_conv_internal.h — the convolutional velocity trunk of the clip_flow
 * kind (model.trunk: conv; not installed): a small U-Net over the clip's
 * frames as channels, conditioned on time and prompt per channel.
 *
 * Given x (n, Cin, H, W) (Cin = frames·channels, H and W multiples of 4), a
 * time t (n) and the kind's conditioning, with C = model.conv_channels:
 *   temb (n, E) = [sin(1000t·f_i), cos(1000t·f_i)], f_i = 10000^(−i/(E/2))
 *   cond (n, Hd) = time(temb) + (the kind's prompt embedding)
 *   h0 = silu(conv0(x) + cond0(cond))          C  × H   × W
 *   h1 = silu(conv1(h0) + cond1(cond))         2C × H/2 × W/2  (stride 2)
 *   h2 = silu(conv2(h1) + cond2(cond))         2C × H/4 × W/4  (stride 2)
 *   h3 = silu(conv3(h2) + cond3(cond))         2C × H/4 × W/4
 *   h4 = silu(conv4(up(h3) + h1) + cond4(cond)) C × H/2 × W/2
 *   h5 = silu(conv5(up(h4) + h0) + cond5(cond)) C × H   × W
 *   out = conv6(h5)                            Cin × H × W
 * Every conv is 3×3 with zero padding 1; up is the nearest 2× upsampling;
 * condk (a linear Hd → channels) adds one value per channel. Views (names
 * fixed): time.weight/bias, conv.<k>.weight (OC, IC·9: PyTorch's (OC, IC, 3,
 * 3) flattened) and .bias, cond.<k>.weight (OC, Hd) and .bias.
 *
 * Device: as flow_mlp_internal.h's trunk, the kernels run through t->nn,
 * the table of t->dev (the CPU's after init; rl_flow_conv_on moves it with
 * its model), the activations live there and P, G, x, tt, out and dout are
 * pointers on that device; on the CPU the table's entries are the functions
 * this file called before, so the CPU path is bit-identical.
 *
 * Ownership: the struct owns its activation buffers (rl_flow_conv_free);
 * the x given to rl_flow_conv_trunk is borrowed until the next backward.
 * Rows are independent: micro-batching never changes a result. */
#ifndef RLRT_NN_FLOW_CONV_INTERNAL_H
#define RLRT_NN_FLOW_CONV_INTERNAL_H

#include <stdint.h>

#include "common/nn/engine/device.h"
#include "common/nn/models/model_base.h"

#define RL_FLOW_CONV_LAYERS 7 /* conv0 … conv6; cond0 … cond5 */

typedef struct rl_flow_conv {
    int Cin, H, W, C, Hd, E;
    int64_t t_w, t_b;                                      /* offsets of time.* */
    int64_t cw[RL_FLOW_CONV_LAYERS], cb[RL_FLOW_CONV_LAYERS]; /* conv.<k>.* */
    int64_t pw[RL_FLOW_CONV_LAYERS - 1], pb[RL_FLOW_CONV_LAYERS - 1]; /* cond.<k>.* */
    int64_t S[RL_FLOW_CONV_LAYERS - 1];                    /* floats per row of h_k */
    int64_t cap, n;                                        /* activations of the last forward */
    float *temb, *cond;                                    /* (n, E), (n, Hd) */
    float *z[RL_FLOW_CONV_LAYERS - 1], *h[RL_FLOW_CONV_LAYERS - 1]; /* (n, S_k) */
    float *dh[RL_FLOW_CONV_LAYERS - 1];                    /* backward: (n, S_k) */
    float *in4, *in5;                                      /* (n, S1), (n, S0): up(h3) + h1, up(h4) + h0 */
    float *dz, *din;                                       /* backward scratch: (n, S0) each */
    float *pc, *dc;                                        /* (n, 2C), (n, Hd) */
    const float *x;
    rl_device dev;       /* where the activations live */
    const rl_nn_ops *nn; /* its kernels */
} rl_flow_conv;

/* Sizes; RL_ECONFIG when H or W is not a multiple of 4 (naming `who`). */
int rl_flow_conv_init(rl_flow_conv *t, int Cin, int H, int W, int C, int Hd, int E, const char *who);
void rl_flow_conv_free(rl_flow_conv *t);
/* Drops the activations and runs from now on on dev with its table nn
 * (the model's buffers moved there: rl_model_base_move). */
void rl_flow_conv_on(rl_flow_conv *t, rl_device dev, const rl_nn_ops *nn);
/* Appends time.* to the kind's manifest (the kind adds its conditioning
 * views after it), then the rest with rl_flow_conv_add_tail. */
int rl_flow_conv_add_head(rl_flow_conv *t, rl_model_base *b);
int rl_flow_conv_add_tail(rl_flow_conv *t, rl_model_base *b);
/* Activation buffers for n rows. */
int rl_flow_conv_reserve(rl_flow_conv *t, int64_t n, const char *who);
/* t->cond (n, Hd) = time(temb(tt)); the caller then adds its conditioning
 * into t->cond. Needs rl_flow_conv_reserve(n). */
void rl_flow_conv_cond(rl_flow_conv *t, const float *P, int64_t n, const float *tt);
/* out (n, Cin·H·W) from x and t->cond; keeps the activations. RL_ENOMEM
 * when a convolution's scratch cannot be had. */
int rl_flow_conv_trunk(rl_flow_conv *t, const float *P, const float *x, float *out);
/* Accumulates into G the gradients of Σ dout·out of the last trunk through
 * the convolutions, the conditioning projections and time; *dcond is
 * dL/dcond (n, Hd) for the caller's conditioning (the struct's buffer,
 * valid until the next call). RL_ENOMEM as the trunk. */
int rl_flow_conv_backward(rl_flow_conv *t, const float *P, float *G, const float *dout, float **dcond);

#endif
