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
    /* activations of the last forward (n rows; floats one block from a1, s_reserve) */
    int64_t cap, n;
    float *a1, *h1, *p1, *a2, *h2, *p2, *a3, *f, *logits;
    float *g_big, *g_big2, *g_mid, *g_mid2, *g_small, *g_f, *g_f2; /* backward scratch */
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

/* The activations and the backward scratch of n rows. */
static int s_reserve(s_cnn *m, int64_t n)
{
    if (n <= m->cap)
        return RL_OK;
    free(m->a1);
    free(m->arg1);
    m->a1 = NULL;
    m->arg1 = NULL;
    m->cap = 0;
    size_t big = (size_t)n * (size_t)m->C1 * (size_t)m->H * (size_t)m->W,
           p1 = (size_t)n * (size_t)m->C1 * (size_t)m->H2 * (size_t)m->W2,
           mid = (size_t)n * (size_t)m->C2 * (size_t)m->H2 * (size_t)m->W2, p2 = (size_t)n * (size_t)m->flat,
           nf = (size_t)n * (size_t)m->F, nk = (size_t)n * (size_t)m->K;
    float **const arrays[16] = {&m->a1,    &m->h1,     &m->p1,      &m->a2,  &m->h2,   &m->p2,
                                &m->a3,    &m->f,      &m->logits,  &m->g_big, &m->g_big2,
                                &m->g_mid, &m->g_mid2, &m->g_small, &m->g_f, &m->g_f2};
    const size_t counts[16] = {big, big, p1, mid, mid, p2, nf, nf, nk,
                               big, big, mid, mid, p1 > p2 ? p1 : p2, nf, nf};
    int rc = rl_model_floats(arrays, counts, 16, "image_cnn");
    if (!rc && !(m->arg1 = malloc(sizeof(int32_t) * (p1 + p2)))) {
        free(m->a1);
        m->a1 = NULL;
        rc = rl_error_set(RL_ENOMEM, "image_cnn: out of memory for %lld rows", (long long)n);
    }
    m->arg2 = rc ? NULL : m->arg1 + p1;
    m->cap = rc ? 0 : n;
    return rc;
}

/* logits (n, K) and features of images x (n, D); keeps the activations. */
static int s_net_forward(s_cnn *m, int64_t n, const float *x)
{
    int rc = s_reserve(m, n > 0 ? n : 1);
    if (rc)
        return rc;
    const float *P = m->base.params;
    int N = (int)n;
    m->n = n;
    m->x = x;
    rl_conv2d_shape c1 = s_conv1(m, N), c2 = s_conv2(m, N);
    if ((rc = rl_conv2d_forward(m->a1, x, P + m->c1_w, P + m->c1_b, &c1)))
        return rc;
    rl_relu_forward(m->h1, m->a1, n * m->C1 * m->H * m->W);
    rl_maxpool2d_forward(m->p1, m->arg1, m->h1, N, m->C1, m->H, m->W, 2);
    if ((rc = rl_conv2d_forward(m->a2, m->p1, P + m->c2_w, P + m->c2_b, &c2)))
        return rc;
    rl_relu_forward(m->h2, m->a2, n * m->C2 * m->H2 * m->W2);
    rl_maxpool2d_forward(m->p2, m->arg2, m->h2, N, m->C2, m->H2, m->W2, 2);
    rl_linear_forward(m->a3, m->p2, P + m->fc_w, P + m->fc_b, N, (int)m->flat, m->F);
    rl_relu_forward(m->f, m->a3, n * m->F);
    rl_linear_forward(m->logits, m->f, P + m->out_w, P + m->out_b, N, m->F, m->K);
    return RL_OK;
}

static void s_zero(float *p, int64_t n) { memset(p, 0, sizeof(float) * (size_t)n); }

/* Accumulates the gradients of Σ dlogits·logits (the last forward's rows). */
static int s_net_backward(s_cnn *m, const float *dlogits)
{
    const float *P = m->base.params;
    float *G = m->base.grads;
    int N = (int)m->n;
    int64_t n = m->n, nf = n * m->F, np2 = n * m->flat, nmid = n * m->C2 * m->H2 * m->W2,
            np1 = n * m->C1 * m->H2 * m->W2, nbig = n * m->C1 * m->H * m->W;
    s_zero(m->g_f, nf);
    rl_linear_backward(m->g_f, G + m->out_w, G + m->out_b, dlogits, m->f, P + m->out_w, N, m->F, m->K);
    s_zero(m->g_f2, nf);
    rl_relu_backward(m->g_f2, m->g_f, m->a3, nf);
    s_zero(m->g_small, np2);
    rl_linear_backward(m->g_small, G + m->fc_w, G + m->fc_b, m->g_f2, m->p2, P + m->fc_w, N, (int)m->flat,
                       m->F);
    s_zero(m->g_mid, nmid);
    rl_maxpool2d_backward(m->g_mid, m->g_small, m->arg2, N, m->C2, m->H2, m->W2, 2);
    s_zero(m->g_mid2, nmid);
    rl_relu_backward(m->g_mid2, m->g_mid, m->a2, nmid);
    s_zero(m->g_small, np1);
    rl_conv2d_shape c1 = s_conv1(m, N), c2 = s_conv2(m, N);
    int rc = rl_conv2d_backward(m->g_small, G + m->c2_w, G + m->c2_b, m->g_mid2, m->p1, P + m->c2_w, &c2);
    if (rc)
        return rc;
    s_zero(m->g_big, nbig);
    rl_maxpool2d_backward(m->g_big, m->g_small, m->arg1, N, m->C1, m->H, m->W, 2);
    s_zero(m->g_big2, nbig);
    rl_relu_backward(m->g_big2, m->g_big, m->a1, nbig);
    return rl_conv2d_backward(NULL, G + m->c1_w, G + m->c1_b, m->g_big2, m->x, P + m->c1_w, &c1);
}

/* The network for image_net.c's shared calls. */
static int s_fwd(rl_model *mm, int64_t n, const float *x, const float **logits)
{
    s_cnn *m = (s_cnn *)mm;
    int rc = s_net_forward(m, n, x);
    *logits = m->logits;
    return rc;
}

static int s_bwd(rl_model *mm, const float *dlogits) { return s_net_backward((s_cnn *)mm, dlogits); }

/* feats (n, F) of images, S_CHUNK rows at a time. */
static int s_features(s_cnn *m, int64_t n, const float *images, float *feats, const char *what)
{
    int rc = rl_image_net_check(what, images, n, m->D);
    for (int64_t r0 = 0; !rc && r0 < n; r0 += S_CHUNK) {
        int64_t rows = n - r0 < S_CHUNK ? n - r0 : S_CHUNK;
        if (!(rc = s_net_forward(m, rows, images + r0 * m->D)))
            memcpy(feats + r0 * m->F, m->f, sizeof(float) * (size_t)(rows * m->F));
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
    rl_model_base_free(&m->base);
    free(m->a1);
    free(m->arg1);
    free(m);
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
};

const rl_model_kind rl_model_kind_image_cnn = {
    .name = "image_cnn",
    .sections = s_sections,
    .from_config = s_from_config,
};
