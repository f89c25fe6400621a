/* flow_mlp_internal.h — the conditioned residual-MLP velocity trunk shared by
 * the flow model kinds (clip_flow, flow_policy; not installed).
 *
 * Given x (n, D), a time t (n) and the kind's conditioning:
 *   temb (n, E) = [sin(1000t·f_i), cos(1000t·f_i)], f_i = 10000^(−i/(E/2))
 *   cond (n, Hd) = time(temb) + (whatever the kind adds: a prompt or task
 *                  embedding, an observation encoding)
 *   h_0          = in(x) + cond
 *   h_{l+1}      = h_l + fc2_l(silu(fc1_l(silu(h_l)) + cond))   l < L
 *   out (n, D)   = out(silu(h_L))
 * Views (names fixed, (out, in) linear weights): in.weight/bias,
 * time.weight/bias (rl_flow_mlp_add_head), blocks.<l>.fc1/fc2.weight/bias,
 * out.weight/bias (rl_flow_mlp_add_tail); a kind adds its own views between
 * or around the two calls. Offsets index the kind's flat buffer.
 *
 * Device: the trunk runs its kernels through t->nn, the table of t->dev
 * (the CPU's after init; rl_flow_mlp_on moves it with its model), and its
 * activations live there; P, G, x, tt, out and dout are pointers on that
 * device. On the CPU the table's entries are the functions this file
 * called before the table, so the CPU path is bit-identical.
 *
 * Ownership: the struct owns its activation buffers (rl_flow_mlp_free); the
 * x given to rl_flow_mlp_trunk is borrowed until the next backward. Rows are
 * independent: micro-batching never changes a result. */
#ifndef RLRT_NN_FLOW_MLP_INTERNAL_H
#define RLRT_NN_FLOW_MLP_INTERNAL_H

#include <stdint.h>

#include "common/nn/engine/device.h"
#include "common/nn/models/model_base.h"

typedef struct rl_flow_mlp {
    int D, Hd, L, E;
    int64_t in_w, in_b, t_w, t_b, out_w, out_b; /* offsets */
    int64_t *fc1_w, *fc1_b, *fc2_w, *fc2_b;     /* (L) offsets */
    int64_t cap, n;                             /* activations of the last forward */
    float *temb;                                /* (n, E) */
    float *cond;                                /* (n, Hd) */
    float *h, *sh;                              /* (L+1, n, Hd) residual stream, silu(h_l) */
    float *a, *g;                               /* (L, n, Hd) fc1 pre-activation, silu(a) */
    float *scratch;                             /* 4 · (n, Hd) */
    const float *x;
    rl_device dev;          /* where the activations live */
    const rl_nn_ops *nn;    /* its kernels */
} rl_flow_mlp;

/* Sizes and the offset arrays; RL_ENOMEM naming `who`. */
int rl_flow_mlp_init(rl_flow_mlp *t, int D, int Hd, int L, int E, const char *who);
void rl_flow_mlp_free(rl_flow_mlp *t);
/* Drops the activations and runs from now on on dev with its table nn
 * (the model's buffers moved there: rl_model_base_move). */
void rl_flow_mlp_on(rl_flow_mlp *t, rl_device dev, const rl_nn_ops *nn);
/* Appends in.*, time.* / blocks.*, out.* to the kind's manifest. */
int rl_flow_mlp_add_head(rl_flow_mlp *t, rl_model_base *b);
int rl_flow_mlp_add_tail(rl_flow_mlp *t, rl_model_base *b);
/* Activation buffers for n rows. */
int rl_flow_mlp_reserve(rl_flow_mlp *t, int64_t n, const char *who);
/* t->cond (n, Hd) = time(temb(tt)); the caller then adds its conditioning
 * into t->cond. Needs rl_flow_mlp_reserve(n). */
void rl_flow_mlp_cond(rl_flow_mlp *t, const float *P, int64_t n, const float *tt);
/* out (n, D) from x (n, D) and t->cond; keeps the activations. */
void rl_flow_mlp_trunk(rl_flow_mlp *t, const float *P, const float *x, float *out);
/* Accumulates into G the gradients of Σ dout·out of the last trunk through
 * in, blocks, out and time; returns dL/dcond (n, Hd) for the caller's
 * conditioning (the struct's scratch, valid until the next call). */
float *rl_flow_mlp_backward(rl_flow_mlp *t, const float *P, float *G, const float *dout);

#endif
