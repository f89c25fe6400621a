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
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/model_base.h"
#include "common/schema/image_models.h"
#include "common/schema/model.h"
#include "rlrt/error.h"

/* rows per internal chunk of rl_image_cnn_features / rl_image_model_probs */
#define S_CHUNK 256

typedef struct s_cnn {
    rl_model_base base; /* the manifest conv1, conv2, fc, out and its buffers */
    rl_image_size_config size;
    rl_image_classifier_model_config net;
    rl_image_cnn_model_config conv;
    int C, H, W, C1, C2, H2, W2, H4, W4, F, K;
    int64_t D, flat; /* C·H·W; C2·H4·W4 */
    int64_t c1_w, c1_b, c2_w, c2_b, fc_w, fc_b, out_w, out_b;
    /* activations of the last forward (n rows; floats one block from a1, s_reserve) */
    int64_t cap, n;
    float *a1, *h1, *p1, *a2, *h2, *p2, *a3, *f, *logits, *lse, *lp;
    float *g_big, *g_big2, *g_mid, *g_mid2, *g_small, *g_f, *g_f2, *g_logits; /* backward scratch */
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
    float **const arrays[19] = {&m->a1,    &m->h1,     &m->p1,    &m->a2,     &m->h2,      &m->p2,   &m->a3,
                                &m->f,     &m->logits, &m->lse,   &m->lp,     &m->g_big,   &m->g_big2,
                                &m->g_mid, &m->g_mid2, &m->g_small, &m->g_f,  &m->g_f2,    &m->g_logits};
    const size_t counts[19] = {big, big, p1, mid, mid, p2, nf, nf, nk, (size_t)n, (size_t)n,
                               big, big, mid, mid, p1 > p2 ? p1 : p2, nf, nf, nk};
    int rc = rl_model_floats(arrays, counts, 19, "image_cnn");
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

static int s_check_images(const s_cnn *m, const char *what, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n * m->D; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: image %lld holds %g at pixel %lld (not finite)", what,
                                (long long)(i / m->D), (double)x[i], (long long)(i % m->D));
    return RL_OK;
}

/* probs (n, K) or feats (n, F) of images, S_CHUNK rows at a time. */
static int s_infer(s_cnn *m, int64_t n, const float *images, float *probs, float *feats, const char *what)
{
    int rc = s_check_images(m, what, images, n);
    for (int64_t r0 = 0; !rc && r0 < n; r0 += S_CHUNK) {
        int64_t rows = n - r0 < S_CHUNK ? n - r0 : S_CHUNK;
        if ((rc = s_net_forward(m, rows, images + r0 * m->D)))
            break;
        if (probs)
            rl_softmax_forward(probs + r0 * m->K, m->logits, (int)rows, m->K);
        if (feats)
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
    return s_infer(m, n, images, NULL, feats, "image_cnn features");
}

int64_t rl_image_model_dim(const rl_model *m)
{
    return m && m->ops == &s_ops ? ((const s_cnn *)m)->D : rl_image_classifier_dim(m);
}

int rl_image_model_classes(const rl_model *m)
{
    return m && m->ops == &s_ops ? ((const s_cnn *)m)->K : rl_image_classifier_classes(m);
}

int rl_image_model_probs(rl_model *mm, int64_t n, const float *images, float *probs)
{
    s_cnn *m = s_of(mm);
    return m ? s_infer(m, n, images, probs, NULL, "image_cnn") : rl_image_classifier_probs(mm, n, images, probs);
}

/* The rows of a call: images (B, D) and labels (B), checked. */
typedef struct s_rows {
    int64_t B;
    const float *x;
    const int32_t *y;
} s_rows;

static int s_read(const s_cnn *m, const rl_dataproto *in, unsigned want, const char *what, s_rows *r)
{
    if (want != RL_Q_BIT(RL_Q_LOGP))
        return rl_error_set(RL_EUNSUPPORTED, "%s: an image_cnn computes logp only (mask 0x%x)", what, want);
    const int64_t d2[2] = {-1, m->D};
    const rl_tensor *ti = rl_model_input(in, what, RL_IC_IMAGES, RL_F32, 2, d2);
    if (!ti)
        return rl_error_code();
    r->B = ti->shape[0];
    r->x = rl_tensor_data((rl_tensor *)ti);
    int rc = rl_model_input_ids(in, what, RL_IC_LABELS, m->K,
                                RL_CFG_PATH(&rl_image_classifier_model_section, rl_image_classifier_model_config,
                                            num_classes),
                                &r->B, &r->y);
    return rc ? rc : s_check_images(m, what, r->x, r->B);
}

static int s_forward(rl_model *mm, const rl_dataproto *batch, unsigned want, const rl_model_pass *pass,
                     rl_dataproto **out)
{
    s_cnn *m = s_of(mm);
    s_rows r;
    int rc = s_read(m, batch, want, "image_cnn forward", &r);
    if (rc)
        return rc;
    rl_model_output spec = {rl_quantity_name(RL_Q_LOGP), RL_F32, 2, {r.B, 1}};
    rl_tensor *t;
    rl_dataproto *o = rl_model_outputs(&spec, 1, &t);
    if (!o)
        return rl_error_code();
    float *lp = rl_tensor_data(t);
    int64_t mb = rl_model_micro_rows(pass, r.B);
    for (int64_t r0 = 0; !rc && r0 < r.B; r0 += mb) {
        int64_t rows = r.B - r0 < mb ? r.B - r0 : mb;
        if (!(rc = s_net_forward(m, rows, r.x + r0 * m->D)))
            rl_logprob_forward(lp + r0, NULL, m->lse, m->logits, r.y + r0, 1.0f, (int)rows, m->K);
    }
    return rl_model_give(o, rc, out);
}

static int s_forward_backward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx, double *loss)
{
    s_cnn *m = s_of(mm);
    const char *what = "image_cnn forward_backward";
    s_rows r;
    int rc = s_read(m, batch, want, what, &r);
    if (rc || r.B == 0)
        return rc;
    int64_t mb = rl_model_micro_rows(pass, r.B);
    float *ones = malloc(sizeof(float) * (size_t)mb), *g = malloc(sizeof(float) * (size_t)mb);
    if (!ones || !g)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    for (int64_t i = 0; !rc && i < mb; i++)
        ones[i] = 1.0f;
    for (int64_t r0 = 0; !rc && r0 < r.B; r0 += mb) {
        int64_t rows = r.B - r0 < mb ? r.B - r0 : mb;
        if ((rc = s_net_forward(m, rows, r.x + r0 * m->D)))
            break;
        rl_logprob_forward(m->lp, NULL, m->lse, m->logits, r.y + r0, 1.0f, (int)rows, m->K);
        if ((rc = rl_model_loss_one(fn, ctx, RL_Q_LOGP, r0, rows, 1, m->lp, ones, g, loss)))
            break;
        rl_logprob_backward(m->g_logits, g, NULL, m->logits, m->lse, NULL, r.y + r0, 1.0f, (int)rows, m->K);
        rc = s_net_backward(m, m->g_logits);
    }
    free(ones);
    free(g);
    return rc;
}

static int s_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s, rl_dataproto **out)
{
    (void)m;
    (void)in;
    (void)s;
    (void)out;
    return rl_error_set(RL_EUNSUPPORTED, "an image_cnn does not sample");
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
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
};

const rl_model_kind rl_model_kind_image_cnn = {
    .name = "image_cnn",
    .sections = s_sections,
    .from_config = s_from_config,
};
