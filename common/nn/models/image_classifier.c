/* image_classifier.c — the image classifier kind of rl_model (see
 * common/nn/models/image_classifier.h): an MLP over the first frame, log-probs of the
 * labels with their backward, and the model: section. */
#include "common/nn/models/image_classifier.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/ops.h"
#include "common/nn/models/image_net.h"
#include "common/nn/models/model_base.h"
#include "common/schema/image_models.h"
#include "common/schema/model.h"
#include "rlrt/error.h"

typedef struct s_ic {
    rl_model_base base; /* the manifest fc1, fc2, out and its buffers */
    rl_image_net head;  /* image_net.c's view of the network (rl_image_net_model: right after base) */
    rl_image_size_config size;
    rl_image_classifier_model_config net;
    int K, Hd;
    int64_t D;
    int64_t fc1_w, fc1_b, fc2_w, fc2_b, out_w, out_b;
    /* activations of the last forward (n rows; one block from a1 on the
     * model's device, s_reserve) */
    int64_t cap, n;
    float *a1, *h1, *a2, *h2, *logits, *scratch;
    float *dx, *dlog;    /* a device's copies of the images (n, D) and dlogits (n, K) */
    float *hlogits;      /* (n, K) the logits on the host (a device only) */
    const float *x;
} s_ic;

static const rl_model_ops s_ops;

/* its model.* sections (rl_model_kind.sections) */
static const rl_config_section *const s_sections[] = {
    &rl_model_base_section, &rl_image_size_section, &rl_image_classifier_model_section, NULL};

static void s_free_acts(s_ic *m)
{
    rl_model_floats_free(m->base.dev, m->a1);
    free(m->hlogits);
    m->a1 = m->hlogits = NULL;
    m->cap = 0;
}

/* The activations of n rows (one block from a1; on a device also the
 * copies of the images and dlogits, and the host's logits). */
static int s_reserve(s_ic *m, int64_t n)
{
    if (n <= m->cap)
        return RL_OK;
    s_free_acts(m);
    const int dev = m->base.dev != RL_DEVICE_CPU;
    size_t nh = (size_t)n * (size_t)m->Hd, nk = (size_t)n * (size_t)m->K;
    float **const arrays[8] = {&m->a1, &m->h1, &m->a2, &m->h2, &m->logits, &m->scratch, &m->dx, &m->dlog};
    const size_t counts[8] = {nh, nh, nh, nh, nk, 2 * nh, (size_t)n * (size_t)m->D, nk};
    int rc = rl_model_floats_on(m->base.dev, arrays, counts, dev ? 8 : 6, "image_classifier");
    if (!rc && dev && !(m->hlogits = malloc(sizeof(float) * nk)))
        rc = rl_error_set(RL_ENOMEM, "image_classifier: out of memory for %lld rows of logits", (long long)n);
    if (rc)
        s_free_acts(m);
    m->cap = rc ? 0 : n;
    return rc;
}

/* logits (n, K) of images x (n, D); keeps the activations. */
static int s_net_forward(s_ic *m, int64_t n, const float *x)
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
    int64_t nh = n * m->Hd;
    nn->linear_forward(m->a1, x, P + m->fc1_w, P + m->fc1_b, N, (int)m->D, m->Hd);
    nn->silu_forward(m->h1, m->a1, nh);
    nn->linear_forward(m->a2, m->h1, P + m->fc2_w, P + m->fc2_b, N, m->Hd, m->Hd);
    nn->silu_forward(m->h2, m->a2, nh);
    nn->linear_forward(m->logits, m->h2, P + m->out_w, P + m->out_b, N, m->Hd, m->K);
    if (m->base.dev != RL_DEVICE_CPU)
        return rl_model_copy_out(m->base.dev, m->hlogits, m->logits, sizeof(float) * (size_t)(n * m->K));
    return RL_OK;
}

/* Accumulates the gradients of Σ dlogits·logits (dlogits: a host array). */
static int s_net_backward(s_ic *m, const float *dlogits)
{
    const float *P = m->base.params;
    float *G = m->base.grads;
    const rl_nn_ops *nn = m->base.nn;
    const rl_device dev = m->base.dev;
    int N = (int)m->n;
    int64_t nh = m->n * m->Hd;
    float *t1 = m->scratch, *t2 = m->scratch + nh;
    if (dev != RL_DEVICE_CPU) {
        int rc = rl_model_copy_in(dev, m->dlog, dlogits, sizeof(float) * (size_t)(m->n * m->K));
        if (rc)
            return rc;
        dlogits = m->dlog;
    }
    rl_device_zero(dev, t1, sizeof(float) * (size_t)nh);
    nn->linear_backward(t1, G + m->out_w, G + m->out_b, dlogits, m->h2, P + m->out_w, N, m->Hd, m->K);
    rl_device_zero(dev, t2, sizeof(float) * (size_t)nh);
    nn->silu_backward(t2, t1, m->a2, nh);
    rl_device_zero(dev, t1, sizeof(float) * (size_t)nh);
    nn->linear_backward(t1, G + m->fc2_w, G + m->fc2_b, t2, m->h1, P + m->fc2_w, N, m->Hd, m->Hd);
    rl_device_zero(dev, t2, sizeof(float) * (size_t)nh);
    nn->silu_backward(t2, t1, m->a1, nh);
    nn->linear_backward(NULL, G + m->fc1_w, G + m->fc1_b, t2, m->x, P + m->fc1_w, N, (int)m->D, m->Hd);
    return RL_OK;
}

/* The network for image_net.c's shared calls: host images in, host
 * logits out (on a device through the explicit copies). */
static int s_fwd(rl_model *mm, int64_t n, const float *x, const float **logits)
{
    s_ic *m = (s_ic *)mm;
    int rc = s_net_forward(m, n, x);
    *logits = m->base.dev == RL_DEVICE_CPU ? m->logits : m->hlogits;
    return rc;
}

static int s_bwd(rl_model *mm, const float *dlogits) { return s_net_backward((s_ic *)mm, dlogits); }

static void s_free(rl_model *mm)
{
    s_ic *m = (s_ic *)mm;
    s_free_acts(m);
    rl_model_base_free(&m->base);
    free(m);
}

/* The buffers move (rl_model_base_move); the activations are re-made on
 * the new device by the next forward. */
static int s_to_device(rl_model *mm, int dev)
{
    s_ic *m = (s_ic *)mm;
    rl_device from = m->base.dev;
    if ((rl_device)dev == from)
        return RL_OK;
    int rc = rl_model_base_move(&m->base, (rl_device)dev);
    if (rc)
        return rc;
    rl_model_floats_free(from, m->a1);
    free(m->hlogits);
    m->a1 = m->hlogits = NULL;
    m->cap = 0;
    return RL_OK;
}

/* The sizes from the job's image size and network, then the views fc1,
 * fc2, out. */
static int s_build(rl_model_base *b)
{
    s_ic *m = (s_ic *)b;
    m->K = (int)m->net.num_classes;
    m->Hd = (int)m->net.hidden_size;
    m->D = m->size.channels * m->size.height * m->size.width;
    m->head = (rl_image_net){m->D, m->K, s_fwd, s_bwd, 0};
    int rc;
    if ((rc = rl_model_base_add(b, "fc1.weight", 2, m->Hd, m->D, &m->fc1_w)) ||
        (rc = rl_model_base_add(b, "fc1.bias", 1, m->Hd, 0, &m->fc1_b)) ||
        (rc = rl_model_base_add(b, "fc2.weight", 2, m->Hd, m->Hd, &m->fc2_w)) ||
        (rc = rl_model_base_add(b, "fc2.bias", 1, m->Hd, 0, &m->fc2_b)) ||
        (rc = rl_model_base_add(b, "out.weight", 2, m->K, m->Hd, &m->out_w)))
        return rc;
    return rl_model_base_add(b, "out.bias", 1, m->K, 0, &m->out_b);
}

static const rl_model_base_kind s_base = {sizeof(s_ic), &s_ops, s_sections,
                                          {offsetof(s_ic, size), offsetof(s_ic, net)}, s_build};

static rl_model *s_from_config(const rl_config *job) { return rl_model_base_build(job, &s_base); }

static const rl_model_ops s_ops = {
    .kind = "image_classifier",
    .free = s_free,
    RL_MODEL_BASE_KIND_OPS,
    RL_IMAGE_NET_OPS,
    .device = rl_model_base_device,
    .to_device = s_to_device,
};

const rl_model_kind rl_model_kind_image_classifier = {
    .name = "image_classifier",
    .sections = s_sections,
    .from_config = s_from_config,
};
