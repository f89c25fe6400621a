/* common/nn/models/image_net.h — what the image classifier kinds share
 * (image_classifier: an MLP; image_cnn: convolutions): they differ only in
 * their network, so the batch reading and checking, the log-prob forward,
 * the forward_backward through the loss, and the class probabilities are
 * written once here over an rl_image_net.
 *
 * Batch layout (both kinds): RL_IC_IMAGES (B, D) f32, finite;
 * RL_IC_LABELS (B) i32 in [0, K). RL_Q_LOGP only: logp[b, 0] = log
 * softmax(logits_b)[label_b].
 *
 * Ownership: the net's logits point into the model's own buffers until its
 * next forward; every other scratch here is allocated per call. */
#ifndef RLRT_NN_IMAGE_NET_H
#define RLRT_NN_IMAGE_NET_H

#include <stdint.h>

#include "common/nn/models/model_base.h"
#include "rlrt/dataproto.h"
#include "rlrt/nn/model.h"

typedef struct rl_image_net {
    int64_t D; /* floats per image */
    int K;     /* classes */
    /* logits (n, K) of images x (n, D) in *logits, keeping what backward needs */
    int (*forward)(rl_model *m, int64_t n, const float *x, const float **logits);
    /* accumulates the gradients of Σ dlogits·logits of the last forward */
    int (*backward)(rl_model *m, const float *dlogits);
    int64_t chunk; /* rows per forward of rl_image_model_probs (<= 0: all at once) */
} rl_image_net;

/* How a kind's struct starts (the same two members first), so its
 * rl_model_ops name rl_image_net_op_forward and _forward_backward
 * directly: build fills net. */
typedef struct rl_image_net_model {
    rl_model_base base;
    rl_image_net net;
} rl_image_net_model;

/* RL_ENUMERIC naming the image and pixel when one of x (n, D) is not finite. */
int rl_image_net_check(const char *what, const float *x, int64_t n, int64_t D);
/* The network of an image classifier of either kind (a model whose ops
 * hold RL_IMAGE_NET_OPS); NULL for any other model. */
const rl_image_net *rl_image_net_of(const rl_model *m);
/* An image classifier of either kind (image_classifier or image_cnn): input
 * floats per image and classes (0 for another kind), and probs (n, classes)
 * = the softmax of the logits of images (n, dim), net.chunk rows per
 * forward (RL_EINVAL for another kind, RL_ENUMERIC naming a pixel that is
 * not finite). */
int64_t rl_image_model_dim(const rl_model *m);
int rl_image_model_classes(const rl_model *m);
int rl_image_model_probs(rl_model *m, int64_t n, const float *images, float *probs);
/* The kinds' rl_model_ops.forward and .forward_backward over `net`. */
int rl_image_net_forward(rl_model *m, const rl_image_net *net, const rl_dataproto *batch,
                         unsigned want, const rl_model_pass *pass, rl_dataproto **out);
int rl_image_net_forward_backward(rl_model *m, const rl_image_net *net, const rl_dataproto *batch,
                                  unsigned want, const rl_model_pass *pass, rl_model_loss_fn fn,
                                  void *ctx, double *loss);
/* The same as rl_model_ops entries of a kind whose struct starts as
 * rl_image_net_model. */
int rl_image_net_op_forward(rl_model *m, const rl_dataproto *batch, unsigned want,
                            const rl_model_pass *pass, rl_dataproto **out);
int rl_image_net_op_forward_backward(rl_model *m, const rl_dataproto *batch, unsigned want,
                                     const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                                     double *loss);
/* rl_model_ops.sample of a kind that does not sample (RL_EUNSUPPORTED naming it). */
int rl_image_net_no_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s,
                           rl_dataproto **out);

/* The three entries of such a kind's rl_model_ops (beside
 * RL_MODEL_BASE_KIND_OPS). */
#define RL_IMAGE_NET_OPS                                                                            \
    .forward = rl_image_net_op_forward, .forward_backward = rl_image_net_op_forward_backward,       \
    .sample = rl_image_net_no_sample

#endif
