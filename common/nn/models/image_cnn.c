/* image_cnn.c — the convolutional image classifier kind of rl_model (see
 * common/nn/models/image_cnn.h): two conv/ReLU/max-pool stages, a hidden
 * layer whose activations are the features, log-probs of the labels with
 * their backward. */
#include "common/nn/models/image_cnn.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/ops.h"
#include "common/nn/engine/ops_conv.h"
#include "common/nn/models/image_net.h"
#include "common/nn/models/model_base.h"
#include "common/schema/image_models.h"
#include "common/schema/model.h"
#include "rlrt/error.h"

/* rows per internal chunk of rl_image_cnn_features / rl_image_model_probs */
#define S_CHUNK 256

typedef struct s_cnn {
    rl_model_base base; /* the manifest conv1, conv2, fc, out and its buffers */
    rl_image_net head;  /* image_net.c's view of the network (rl_image_net_model: right after base) */
    rl_image_size_config size;
    rl_image_classifier_model_config net;
    rl_image_cnn_model_config conv;
    int C, H, W, C1, C2, H2, W2, H4, W4, F, K;
    int64_t D, flat; /* C·H·W; C2·H4·W4 */
    int64_t c1_w, c1_b, c2_w, c2_b, fc_w, fc_b, out_w, out_b;
    /* activations of the last forward (n rows; floats one block from a1 on
     * the model's device, s_reserve) */
    int64_t cap, n;
    float *a1, *h1, *p1, *a2, *h2, *p2, *a3, *f, *logits;
    float *g_big, *g_big2, *g_mid, *g_mid2, *g_small, *g_f, *g_f2; /* backward scratch */
    float *dx, *dlog;  /* a device's copies of the images (n, D) and dlogits (n, K) */
    float *hlogits;    /* (n, K) the logits on the host (a device only) */
    int32_t *arg1, *arg2;
    const float *x;
} s_cnn;

static const rl_model_ops s_ops;

static s_cnn *s_of(rl_model *m) { return m && m->ops == &s_ops ? (s_cnn *)m : NULL; }

static const rl_config_section *const s_sections[] = {&rl_model_base_section, &rl_image_size_section,
                                                      &rl_image_classifier_model_section,
                                                      &rl_image_cnn_model_section, NULL};

int rl_image_cnn_feature_dim(const rl_model *m) { return m && m->ops == &s_ops ? ((const s_cnn *)m)->F : 0; }

static rl_conv2d_shape s_conv1(const s_cnn *m, int n)
{
    return (rl_conv2d_shape){n, m->C, m->H, m->W, m->C1, 3, 3, 1, 1};
}

static rl_conv2d_shape s_conv2(const s_cnn *m, int n)
{
    return (rl_conv2d_shape){n, m->C1, m->H2, m->W2, m->C2, 3, 3, 1, 1};
}

static void s_free_acts(s_cnn *m)
{
    rl_model_floats_free(m->base.dev, m->a1);
    if (m->base.dev == RL_DEVICE_CPU)
        free(m->arg1);
    else
        rl_device_free(m->base.dev, m->arg1);
    free(m->hlogits);
    m->a1 = m->hlogits = NULL;
    m->arg1 = m->arg2 = NULL;
    m->cap = 0;
}

/* The activations and the backward scratch of n rows (one block from a1
 * and the pooling's argmax on the model's device; on a device also the
 * copies of the images and dlogits, and the host's logits). */
static int s_reserve(s_cnn *m, int64_t n)
{
    if (n <= m->cap)
        return RL_OK;
    s_free_acts(m);
    const rl_device dv = m->base.dev;
    const int dev = dv != RL_DEVICE_CPU;
    size_t big = (size_t)n * (size_t)m->C1 * (size_t)m->H * (size_t)m->W,
           p1 = (size_t)n * (size_t)m->C1 * (size_t)m->H2 * (size_t)m->W2,
           mid = (size_t)n * (size_t)m->C2 * (size_t)m->H2 * (size_t)m->W2, p2 = (size_t)n * (size_t)m->flat,
           nf = (size_t)n * (size_t)m->F, nk = (size_t)n * (size_t)m->K;
    float **const arrays[18] = {&m->a1,    &m->h1,     &m->p1,      &m->a2,  &m->h2,   &m->p2,
                                &m->a3,    &m->f,      &m->logits,  &m->g_big, &m->g_big2,
                                &m->g_mid, &m->g_mid2, &m->g_small, &m->g_f, &m->g_f2, &m->dx, &m->dlog};
    const size_t counts[18] = {big, big, p1, mid, mid, p2, nf, nf, nk,
                               big, big, mid, mid, p1 > p2 ? p1 : p2, nf, nf, (size_t)n * (size_t)m->D, nk};
    int rc = rl_model_floats_on(dv, arrays, counts, dev ? 18 : 16, "image_cnn");
    if (!rc) {
        size_t bytes = sizeof(int32_t) * (p1 + p2);
        m->arg1 = dev ? rl_device_alloc_for(dv, bytes, RL_MEM_ACTIVATIONS) : malloc(bytes);
        if (!m->arg1)
            rc = rl_error_set(RL_ENOMEM, "image_cnn: out of memory for %lld rows of pooling indices on %s",
                              (long long)n, rl_device_name(dv));
    }
    if (!rc && dev && !(m->hlogits = malloc(sizeof(float) * nk)))
        rc = rl_error_set(RL_ENOMEM, "image_cnn: out of memory for %lld rows of logits", (long long)n);
    if (rc) {
        s_free_acts(m);
        return rc;
    }
    m->arg2 = m->arg1 + p1;
    m->cap = n;
    return RL_OK;
}

/* logits (n, K) and features of images x (n, D, on the host); keeps the
 * activations (on the model's device; the logits also on the host there). */
static int s_net_forward(s_cnn *m, int64_t n, const float *x)
{
    int rc = s_reserve(m, n > 0 ? n : 1);
    if (rc)
        return rc;
    const float *P = m->base.params;
    const rl_nn_ops *nn = m->base.nn;
    int N = (int)n;
    m->n = n;
    if (m->base.dev != RL_DEVICE_CPU) {
        if ((rc = rl_model_copy_in(m->base.dev, m->dx, x, sizeof(float) * (size_t)(n * m->D))))
            return rc;
        x = m->dx;
    }
    m->x = x;
    rl_conv2d_shape c1 = s_conv1(m, N), c2 = s_conv2(m, N);
    if ((rc = nn->conv2d_forward(m->a1, x, P + m->c1_w, P + m->c1_b, &c1)))
        return rc;
    nn->relu_forward(m->h1, m->a1, n * m->C1 * m->H * m->W);
    nn->maxpool2d_forward(m->p1, m->arg1, m->h1, N, m->C1, m->H, m->W, 2);
    if ((rc = nn->conv2d_forward(m->a2, m->p1, P + m->c2_w, P + m->c2_b, &c2)))
        return rc;
    nn->relu_forward(m->h2, m->a2, n * m->C2 * m->H2 * m->W2);
    nn->maxpool2d_forward(m->p2, m->arg2, m->h2, N, m->C2, m->H2, m->W2, 2);
    nn->linear_forward(m->a3, m->p2, P + m->fc_w, P + m->fc_b, N, (int)m->flat, m->F);
    nn->relu_forward(m->f, m->a3, n * m->F);
    nn->linear_forward(m->logits, m->f, P + m->out_w, P + m->out_b, N, m->F, m->K);
    if (m->base.dev != RL_DEVICE_CPU)
        return rl_model_copy_out(m->base.dev, m->hlogits, m->logits, sizeof(float) * (size_t)(n * m->K));
    return RL_OK;
}

static void s_zero(const s_cnn *m, float *p, int64_t n) { rl_device_zero(m->base.dev, p, sizeof(float) * (size_t)n); }

/* Accumulates the gradients of Σ dlogits·logits (the last forward's rows;
 * dlogits: a host array). */
static int s_net_backward(s_cnn *m, const float *dlogits)
{
    const float *P = m->base.params;
    float *G = m->base.grads;
    const rl_nn_ops *nn = m->base.nn;
    int N = (int)m->n;
    int64_t n = m->n, nf = n * m->F, np2 = n * m->flat, nmid = n * m->C2 * m->H2 * m->W2,
            np1 = n * m->C1 * m->H2 * m->W2, nbig = n * m->C1 * m->H * m->W;
    if (m->base.dev != RL_DEVICE_CPU) {
        int rc = rl_model_copy_in(m->base.dev, m->dlog, dlogits, sizeof(float) * (size_t)(n * m->K));
        if (rc)
            return rc;
        dlogits = m->dlog;
    }
    s_zero(m, m->g_f, nf);
    nn->linear_backward(m->g_f, G + m->out_w, G + m->out_b, dlogits, m->f, P + m->out_w, N, m->F, m->K);
    s_zero(m, m->g_f2, nf);
    nn->relu_backward(m->g_f2, m->g_f, m->a3, nf);
    s_zero(m, m->g_small, np2);
    nn->linear_backward(m->g_small, G + m->fc_w, G + m->fc_b, m->g_f2, m->p2, P + m->fc_w, N, (int)m->flat,
                        m->F);
    s_zero(m, m->g_mid, nmid);
    nn->maxpool2d_backward(m->g_mid, m->g_small, m->arg2, N, m->C2, m->H2, m->W2, 2);
    s_zero(m, m->g_mid2, nmid);
    nn->relu_backward(m->g_mid2, m->g_mid, m->a2, nmid);
    s_zero(m, m->g_small, np1);
    rl_conv2d_shape c1 = s_conv1(m, N), c2 = s_conv2(m, N);
    int rc = nn->conv2d_backward(m->g_small, G + m->c2_w, G + m->c2_b, m->g_mid2, m->p1, P + m->c2_w, &c2);
    if (rc)
        return rc;
    s_zero(m, m->g_big, nbig);
    nn->maxpool2d_backward(m->g_big, m->g_small, m->arg1, N, m->C1, m->H, m->W, 2);
    s_zero(m, m->g_big2, nbig);
    nn->relu_backward(m->g_big2, m->g_big, m->a1, nbig);
    return nn->conv2d_backward(NULL, G + m->c1_w, G + m->c1_b, m->g_big2, m->x, P + m->c1_w, &c1);
}

/* The network for image_net.c's shared calls. */
static int s_fwd(rl_model *mm, int64_t n, const float *x, const float **logits)
{
    s_cnn *m = (s_cnn *)mm;
    int rc = s_net_forward(m, n, x);
    *logits = m->base.dev == RL_DEVICE_CPU ? m->logits : m->hlogits;
    return rc;
}

static int s_bwd(rl_model *mm, const float *dlogits) { return s_net_backward((s_cnn *)mm, dlogits); }

/* feats (n, F) of images, S_CHUNK rows at a time. */
static int s_features(s_cnn *m, int64_t n, const float *images, float *feats, const char *what)
{
    int rc = rl_image_net_check(what, images, n, m->D);
    for (int64_t r0 = 0; !rc && r0 < n; r0 += S_CHUNK) {
        int64_t rows = n - r0 < S_CHUNK ? n - r0 : S_CHUNK;
        if (!(rc = s_net_forward(m, rows, images + r0 * m->D))) {
            size_t bytes = sizeof(float) * (size_t)(rows * m->F);
            if (m->base.dev == RL_DEVICE_CPU)
                memcpy(feats + r0 * m->F, m->f, bytes);
            else
                rc = rl_model_copy_out(m->base.dev, feats + r0 * m->F, m->f, bytes);
        }
    }
    return rc;
}

int rl_image_cnn_features(rl_model *mm, int64_t n, const float *images, float *feats)
{
    s_cnn *m = s_of(mm);
    if (!m)
        return rl_error_set(RL_EINVAL, "rl_image_cnn_features: not an image_cnn model (%s)",
                            mm && mm->ops ? mm->ops->kind : "NULL");
    return s_features(m, n, images, feats, "image_cnn features");
}

static void s_free(rl_model *mm)
{
    s_cnn *m = (s_cnn *)mm;
    s_free_acts(m);
    rl_model_base_free(&m->base);
    free(m);
}

/* The buffers move (rl_model_base_move); the activations are re-made on
 * the new device by the next forward. */
static int s_to_device(rl_model *mm, int dev)
{
    s_cnn *m = (s_cnn *)mm;
    if ((rl_device)dev == m->base.dev)
        return RL_OK;
    s_free_acts(m); /* on the old device, before the move (nothing else changes if it fails) */
    return rl_model_base_move(&m->base, (rl_device)dev);
}

static int s_build(rl_model_base *b)
{
    s_cnn *m = (s_cnn *)b;
    m->C = (int)m->size.channels;
    m->H = (int)m->size.height;
    m->W = (int)m->size.width;
    m->C1 = (int)m->conv.conv1_channels;
    m->C2 = (int)m->conv.conv2_channels;
    m->H2 = m->H / 2;
    m->W2 = m->W / 2;
    m->H4 = m->H2 / 2;
    m->W4 = m->W2 / 2;
    m->F = (int)m->net.hidden_size;
    m->K = (int)m->net.num_classes;
    m->D = (int64_t)m->C * m->H * m->W;
    m->flat = (int64_t)m->C2 * m->H4 * m->W4;
    m->head = (rl_image_net){m->D, m->K, s_fwd, s_bwd, S_CHUNK};
    int rc;
    if ((rc = rl_model_base_add(b, "conv1.weight", 2, m->C1, (int64_t)m->C * 9, &m->c1_w)) ||
        (rc = rl_model_base_add(b, "conv1.bias", 1, m->C1, 0, &m->c1_b)) ||
        (rc = rl_model_base_add(b, "conv2.weight", 2, m->C2, (int64_t)m->C1 * 9, &m->c2_w)) ||
        (rc = rl_model_base_add(b, "conv2.bias", 1, m->C2, 0, &m->c2_b)) ||
        (rc = rl_model_base_add(b, "fc.weight", 2, m->F, m->flat, &m->fc_w)) ||
        (rc = rl_model_base_add(b, "fc.bias", 1, m->F, 0, &m->fc_b)) ||
        (rc = rl_model_base_add(b, "out.weight", 2, m->K, m->F, &m->out_w)))
        return rc;
    return rl_model_base_add(b, "out.bias", 1, m->K, 0, &m->out_b);
}

static const rl_model_base_kind s_base = {
    sizeof(s_cnn), &s_ops, s_sections, {offsetof(s_cnn, size), offsetof(s_cnn, net), offsetof(s_cnn, conv)},
    s_build};

static rl_model *s_from_config(const rl_config *job) { return rl_model_base_build(job, &s_base); }

static const rl_model_ops s_ops = {
    .kind = "image_cnn",
    .free = s_free,
    RL_MODEL_BASE_KIND_OPS,
    RL_IMAGE_NET_OPS,
    .device = rl_model_base_device,
    .to_device = s_to_device,
};

const rl_model_kind rl_model_kind_image_cnn = {
    .name = "image_cnn",
    .sections = s_sections,
    .from_config = s_from_config,
};
