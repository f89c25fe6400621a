/* image_net.c — the image classifier kinds' shared calls (see
 * common/nn/models/image_net.h). */
#include "common/nn/models/image_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/nn/engine/ops.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/model_base.h"
#include "common/schema/image_models.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

int rl_image_net_check(const char *what, const float *x, int64_t n, int64_t D)
{
    for (int64_t i = 0; i < n * D; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: image %lld holds %g at pixel %lld (not finite)", what,
                                (long long)(i / D), (double)x[i], (long long)(i % D));
    return RL_OK;
}

const rl_image_net *rl_image_net_of(const rl_model *m)
{
    return m && m->ops && m->ops->forward == rl_image_net_op_forward ? &((const rl_image_net_model *)m)->net
                                                                      : NULL;
}

int64_t rl_image_model_dim(const rl_model *m)
{
    const rl_image_net *net = rl_image_net_of(m);
    return net ? net->D : 0;
}

int rl_image_model_classes(const rl_model *m)
{
    const rl_image_net *net = rl_image_net_of(m);
    return net ? net->K : 0;
}

int rl_image_model_probs(rl_model *m, int64_t n, const float *images, float *probs)
{
    const rl_image_net *net = rl_image_net_of(m);
    if (!net)
        return rl_error_set(RL_EINVAL, "rl_image_model_probs: not an image classifier model (%s)",
                            m && m->ops ? m->ops->kind : "NULL");
    int rc = rl_image_net_check(m->ops->kind, images, n, net->D);
    int64_t chunk = net->chunk;
    if (chunk <= 0)
        chunk = n;
    for (int64_t r0 = 0; !rc && r0 < n; r0 += chunk) {
        int64_t rows = n - r0 < chunk ? n - r0 : chunk;
        const float *logits;
        if (!(rc = net->forward(m, rows, images + r0 * net->D, &logits)))
            rl_softmax_forward(probs + r0 * net->K, logits, (int)rows, net->K);
    }
    return rc;
}

/* The rows of a call: images (B, D) and labels (B), checked. */
typedef struct s_rows {
    int64_t B;
    const float *x;
    const int32_t *y;
} s_rows;

static int s_read(rl_model *m, const rl_image_net *net, const rl_dataproto *in, unsigned want,
                  const char *what, s_rows *r)
{
    if (want != RL_Q_BIT(RL_Q_LOGP))
        return rl_error_set(RL_EUNSUPPORTED, "%s: an %s computes logp only (mask 0x%x)", what,
                            m->ops->kind, want);
    const int64_t d2[2] = {-1, net->D};
    const rl_tensor *ti = rl_model_input(in, what, RL_IC_IMAGES, RL_F32, 2, d2);
    if (!ti)
        return rl_error_code();
    r->B = ti->shape[0];
    r->x = rl_tensor_data((rl_tensor *)ti);
    int rc = rl_model_input_ids(in, what, RL_IC_LABELS, net->K,
                                RL_CFG_PATH(&rl_image_classifier_model_section, rl_image_classifier_model_config,
                                            num_classes),
                                &r->B, &r->y);
    return rc ? rc : rl_image_net_check(what, r->x, r->B, net->D);
}

int rl_image_net_forward(rl_model *m, const rl_image_net *net, const rl_dataproto *batch,
                         unsigned want, const rl_model_pass *pass, rl_dataproto **out)
{
    char what[64];
    snprintf(what, sizeof what, "%s forward", m->ops->kind);
    s_rows r;
    int rc = s_read(m, net, batch, want, what, &r);
    if (rc)
        return rc;
    rl_model_output spec = {rl_quantity_name(RL_Q_LOGP), RL_F32, 2, {r.B, 1}};
    rl_tensor *t;
    rl_dataproto *o = rl_model_outputs(&spec, 1, &t);
    if (!o)
        return rl_error_code();
    float *lp = rl_tensor_data(t);
    int64_t mb = rl_model_micro_rows(pass, r.B);
    float *lse = malloc(sizeof(float) * (size_t)(mb > 0 ? mb : 1));
    if (!lse)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    for (int64_t r0 = 0; !rc && r0 < r.B; r0 += mb) {
        int64_t rows = r.B - r0 < mb ? r.B - r0 : mb;
        const float *logits;
        if (!(rc = net->forward(m, rows, r.x + r0 * net->D, &logits)))
            rl_logprob_forward(lp + r0, NULL, lse, logits, r.y + r0, 1.0f, (int)rows, net->K);
    }
    free(lse);
    return rl_model_give(o, rc, out);
}

int rl_image_net_forward_backward(rl_model *m, const rl_image_net *net, const rl_dataproto *batch,
                                  unsigned want, const rl_model_pass *pass, rl_model_loss_fn fn,
                                  void *ctx, double *loss)
{
    char what[64];
    snprintf(what, sizeof what, "%s forward_backward", m->ops->kind);
    s_rows r;
    int rc = s_read(m, net, batch, want, what, &r);
    if (rc || r.B == 0)
        return rc;
    int64_t mb = rl_model_micro_rows(pass, r.B);
    /* per micro-batch: ones (the mask), g, lp, lse (mb each), dlogits (mb, K) */
    float *buf = malloc(sizeof(float) * (size_t)mb * (size_t)(4 + net->K));
    if (!buf)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    float *ones = buf, *g = buf + mb, *lp = buf + 2 * mb, *lse = buf + 3 * mb, *dlogits = buf + 4 * mb;
    for (int64_t i = 0; i < mb; i++)
        ones[i] = 1.0f;
    for (int64_t r0 = 0; !rc && r0 < r.B; r0 += mb) {
        int64_t rows = r.B - r0 < mb ? r.B - r0 : mb;
        const float *logits;
        if ((rc = net->forward(m, rows, r.x + r0 * net->D, &logits)))
            break;
        rl_logprob_forward(lp, NULL, lse, logits, r.y + r0, 1.0f, (int)rows, net->K);
        if ((rc = rl_model_loss_one(fn, ctx, RL_Q_LOGP, r0, rows, 1, lp, ones, g, loss)))
            break;
        rl_logprob_backward(dlogits, g, NULL, logits, lse, NULL, r.y + r0, 1.0f, (int)rows, net->K);
        rc = net->backward(m, dlogits);
    }
    free(buf);
    return rc;
}

int rl_image_net_op_forward(rl_model *m, const rl_dataproto *batch, unsigned want,
                            const rl_model_pass *pass, rl_dataproto **out)
{
    return rl_image_net_forward(m, &((rl_image_net_model *)m)->net, batch, want, pass, out);
}

int rl_image_net_op_forward_backward(rl_model *m, const rl_dataproto *batch, unsigned want,
                                     const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                                     double *loss)
{
    return rl_image_net_forward_backward(m, &((rl_image_net_model *)m)->net, batch, want, pass, fn,
                                         ctx, loss);
}

int rl_image_net_no_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s,
                           rl_dataproto **out)
{
    (void)in;
    (void)s;
    (void)out;
    return rl_error_set(RL_EUNSUPPORTED, "an %s does not sample", m->ops->kind);
}
