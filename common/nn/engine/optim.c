/* optim.c — AdamW, gradient clipping, LR schedules (see common/nn/engine/optim.h). */
#include "common/nn/engine/optim.h"
#include "rlrt/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


rl_adamw_config rl_adamw_config_default(void)
{
    rl_adamw_config c = {0.9, 0.999, 1e-8, 0.01};
    return c;
}

int rl_param_pred_no_decay_1d(const rl_param_view *v, void *ud)
{
    (void)ud;
    return v->ndim <= 1;
}

static int s_check_config(const rl_adamw_config *c)
{
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0))
        return rl_error_set(RL_EINVAL, "adamw: beta1 = %g not in [0, 1)", c->beta1);
    if (!(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return rl_error_set(RL_EINVAL, "adamw: beta2 = %g not in [0, 1)", c->beta2);
    if (!(c->eps > 0.0) || !isfinite(c->eps))
        return rl_error_set(RL_EINVAL, "adamw: eps = %g must be finite and > 0", c->eps);
    if (!(c->weight_decay >= 0.0) || !isfinite(c->weight_decay))
        return rl_error_set(RL_EINVAL, "adamw: weight_decay = %g must be finite and >= 0",
                            c->weight_decay);
    return RL_OK;
}

/* Rebuilds o->seg from the per-view decay flags and lr scales. Adjacent
 * views with the same flag and scale merge into one segment. */
static int s_build_segments(rl_adamw *o, const rl_param_manifest *m)
{
    if (m->total < o->end)
        return rl_error_set(RL_ESHAPE, "adamw: manifest has %lld elements, optimiser range "
                            "ends at %lld", (long long)m->total, (long long)o->end);
    if (m->count != o->nviews)
        return rl_error_set(RL_ESHAPE, "adamw: manifest has %d views, the optimiser was made for %d",
                            m->count, o->nviews);
    rl_adamw_segment *seg = malloc(sizeof *seg * (size_t)(m->count + 1));
    if (!seg)
        return rl_error_set(RL_ENOMEM, "adamw: out of memory");
    int n = 0;
    for (int i = 0; i < m->count; i++) {
        const rl_param_view *v = &m->views[i];
        int64_t b = v->offset > o->begin ? v->offset : o->begin;
        int64_t e = v->offset + v->numel < o->end ? v->offset + v->numel : o->end;
        if (b >= e)
            continue;
        int decay = !o->no_decay[i];
        double scale = o->lr_scale[i];
        b -= o->begin;
        e -= o->begin;
        if (n > 0 && seg[n - 1].decay == decay && seg[n - 1].lr_scale == scale && seg[n - 1].end == b) {
            seg[n - 1].end = e;
        } else {
            seg[n].begin = b;
            seg[n].end = e;
            seg[n].decay = decay;
            seg[n].lr_scale = scale;
            n++;
        }
    }
    free(o->seg);
    o->seg = seg;
    o->nseg = n;
    return RL_OK;
}

rl_adamw *rl_adamw_new(const rl_adamw_config *cfg, const rl_param_manifest *m, int64_t begin,
                       int64_t end)
{
    return rl_adamw_new_on(cfg, m, begin, end, RL_DEVICE_CPU);
}

rl_adamw *rl_adamw_new_on(const rl_adamw_config *cfg, const rl_param_manifest *m, int64_t begin,
                          int64_t end, rl_device dev)
{
    const rl_nn_ops *ops = rl_nn_ops_get(dev);
    if (!ops)
        return NULL;
    if (dev != RL_DEVICE_CPU && rl_device_count(dev) < 1) {
        rl_error_set(RL_EUNSUPPORTED, "adamw: no %s device visible", rl_device_name(dev));
        return NULL;
    }
    if (!cfg || !m) {
        rl_error_set(RL_EINVAL, "adamw: NULL config or manifest");
        return NULL;
    }
    if (s_check_config(cfg) < 0)
        return NULL;
    if (begin < 0 || end < begin || end > m->total) {
        rl_error_set(RL_ERANGE, "adamw: range [%lld, %lld) not within [0, %lld)",
                     (long long)begin, (long long)end, (long long)m->total);
        return NULL;
    }
    rl_adamw *o = calloc(1, sizeof *o);
    if (!o) {
        rl_error_set(RL_ENOMEM, "adamw: out of memory");
        return NULL;
    }
    o->cfg = *cfg;
    o->dev = dev;
    o->ops = ops;
    o->begin = begin;
    o->end = end;
    o->n = end - begin;
    o->m = rl_device_buffer_new(dev, o->n, RL_MEM_OPTIM);
    o->v = rl_device_buffer_new(dev, o->n, RL_MEM_OPTIM);
    o->nviews = m->count;
    o->no_decay = calloc((size_t)m->count + 1, 1);
    o->lr_scale = malloc(sizeof(double) * ((size_t)m->count + 1));
    for (int i = 0; o->lr_scale && i < m->count; i++)
        o->lr_scale[i] = 1.0;
    if (!o->no_decay || !o->lr_scale) {
        rl_error_set(RL_ENOMEM, "adamw: out of memory");
        rl_adamw_free(o);
        return NULL;
    }
    if (!o->m || !o->v || s_build_segments(o, m) < 0) {
        rl_adamw_free(o);
        return NULL;
    }
    return o;
}

void rl_adamw_free(rl_adamw *o)
{
    if (!o)
        return;
    rl_device_buffer_free(o->dev, o->m);
    rl_device_buffer_free(o->dev, o->v);
    free(o->seg);
    free(o->no_decay);
    free(o->lr_scale);
    free(o);
}

int rl_adamw_set_no_decay_mask(rl_adamw *o, const rl_param_manifest *m, const uint8_t *no_decay)
{
    if (m->count != o->nviews)
        return rl_error_set(RL_ESHAPE, "adamw: manifest has %d views, the optimiser was made for %d",
                            m->count, o->nviews);
    for (int i = 0; i < m->count; i++)
        o->no_decay[i] = no_decay && no_decay[i];
    return s_build_segments(o, m);
}

int rl_adamw_set_no_decay(rl_adamw *o, const rl_param_manifest *m, rl_param_pred pred, void *ud)
{
    if (m->count != o->nviews)
        return rl_error_set(RL_ESHAPE, "adamw: manifest has %d views, the optimiser was made for %d",
                            m->count, o->nviews);
    for (int i = 0; i < m->count; i++)
        o->no_decay[i] = pred && pred(&m->views[i], ud) != 0;
    return s_build_segments(o, m);
}

int rl_adamw_set_lr_scale(rl_adamw *o, const rl_param_manifest *m, const double *scale)
{
    if (m->count != o->nviews)
        return rl_error_set(RL_ESHAPE, "adamw: manifest has %d views, the optimiser was made for %d",
                            m->count, o->nviews);
    for (int i = 0; scale && i < m->count; i++)
        if (!(scale[i] >= 0.0) || !isfinite(scale[i]))
            return rl_error_set(RL_EINVAL, "adamw: lr scale of view %d ('%s') is %g, expected finite and >= 0",
                                i, m->views[i].name, scale[i]);
    for (int i = 0; i < m->count; i++)
        o->lr_scale[i] = scale ? scale[i] : 1.0;
    return s_build_segments(o, m);
}

int rl_adamw_step(rl_adamw *o, double lr, float *params, const float *grads)
{
    if (!(lr >= 0.0) || !isfinite(lr))
        return rl_error_set(RL_EINVAL, "adamw: lr = %g must be finite and >= 0", lr);
    int64_t t = ++o->step;
    for (int s = 0; s < o->nseg; s++) {
        const rl_adamw_segment *sg = &o->seg[s];
        o->ops->adamw_update(&o->cfg, t, lr * sg->lr_scale, sg->decay ? o->cfg.weight_decay : 0.0,
                             params + sg->begin, grads + sg->begin, o->m + sg->begin,
                             o->v + sg->begin, sg->end - sg->begin);
    }
    return RL_OK;
}

int rl_adamw_moments_get(const rl_adamw *o, float *m_host, float *v_host)
{
    size_t bytes = sizeof(float) * (size_t)o->n;
    int rc = RL_OK;
    if (m_host && bytes)
        rc = rl_device_copy(RL_DEVICE_CPU, m_host, o->dev, o->m, bytes);
    if (!rc && v_host && bytes)
        rc = rl_device_copy(RL_DEVICE_CPU, v_host, o->dev, o->v, bytes);
    return rc;
}

int rl_adamw_moments_set(rl_adamw *o, const float *m_host, const float *v_host)
{
    if (!m_host || !v_host)
        return rl_error_set(RL_EINVAL, "adamw: moments_set needs both exp_avg and exp_avg_sq");
    size_t bytes = sizeof(float) * (size_t)o->n;
    if (!bytes)
        return RL_OK;
    int rc = rl_device_copy(o->dev, o->m, RL_DEVICE_CPU, m_host, bytes);
    return rc ? rc : rl_device_copy(o->dev, o->v, RL_DEVICE_CPU, v_host, bytes);
}

int rl_grad_clip_apply_on(rl_device dev, float *g, int64_t n, double total_sumsq,
                          float max_norm, float *norm_out)
{
    double norm = sqrt(total_sumsq);
    if (norm_out)
        *norm_out = (float)norm;
    if (!isfinite(norm))
        return rl_error_set(RL_ENUMERIC, "grad clip: gradient norm is %g (non-finite); "
                            "gradients left unscaled", norm);
    if (!(max_norm > 0.0f))
        return RL_OK;
    float coef = max_norm / ((float)norm + 1e-6f);
    if (coef < 1.0f) {
        const rl_nn_ops *ops = rl_nn_ops_get(dev);
        if (!ops)
            return rl_error_code();
        ops->scale_inplace(g, coef, n);
    }
    return RL_OK;
}

int rl_grad_clip_apply(float *g, int64_t n, double total_sumsq, float max_norm, float *norm_out)
{
    return rl_grad_clip_apply_on(RL_DEVICE_CPU, g, n, total_sumsq, max_norm, norm_out);
}

int rl_grad_clip_norm_on(rl_device dev, float *g, int64_t n, float max_norm, float *norm_out)
{
    const rl_nn_ops *ops = rl_nn_ops_get(dev);
    if (!ops)
        return rl_error_code();
    return rl_grad_clip_apply_on(dev, g, n, ops->grad_sumsq(g, n), max_norm, norm_out);
}

int rl_grad_clip_norm(float *g, int64_t n, float max_norm, float *norm_out)
{
    return rl_grad_clip_norm_on(RL_DEVICE_CPU, g, n, max_norm, norm_out);
}

/* ---- LR schedules ---------------------------------------------------------- */

static const char *s_lr_names[] = {"constant", "cosine", "linear"};

const char *rl_lr_kind_name(rl_lr_kind k)
{
    return (k >= RL_LR_CONSTANT && k <= RL_LR_LINEAR) ? s_lr_names[k] : "?";
}

int rl_lr_kind_parse(const char *name, rl_lr_kind *out)
{
    for (int k = RL_LR_CONSTANT; k <= RL_LR_LINEAR; k++)
        if (name && strcmp(name, s_lr_names[k]) == 0) {
            *out = (rl_lr_kind)k;
            return RL_OK;
        }
    return rl_error_set(RL_EINVAL, "unknown lr schedule '%s' (expected constant, cosine or "
                        "linear)", name ? name : "(null)");
}

int rl_lr_schedule_check(const rl_lr_schedule *s)
{
    if (s->kind < RL_LR_CONSTANT || s->kind > RL_LR_LINEAR)
        return rl_error_set(RL_EINVAL, "lr schedule: unknown kind %d", (int)s->kind);
    if (!(s->base_lr >= 0.0) || !isfinite(s->base_lr))
        return rl_error_set(RL_EINVAL, "lr schedule: base_lr = %g must be finite and >= 0",
                            s->base_lr);
    if (s->warmup_steps < 0)
        return rl_error_set(RL_EINVAL, "lr schedule: warmup_steps = %lld < 0",
                            (long long)s->warmup_steps);
    if (s->kind != RL_LR_CONSTANT && s->total_steps < s->warmup_steps)
        return rl_error_set(RL_EINVAL, "lr schedule %s: total_steps = %lld < warmup_steps = %lld",
                            rl_lr_kind_name(s->kind), (long long)s->total_steps,
                            (long long)s->warmup_steps);
    if (!(s->min_ratio >= 0.0 && s->min_ratio <= 1.0))
        return rl_error_set(RL_EINVAL, "lr schedule: min_ratio = %g not in [0, 1]", s->min_ratio);
    return RL_OK;
}

double rl_lr_at(const rl_lr_schedule *s, int64_t step)
{
    if (step < 0)
        step = 0;
    if (step < s->warmup_steps)
        return s->base_lr * (double)step / (double)s->warmup_steps;
    if (s->kind == RL_LR_CONSTANT)
        return s->base_lr;
    int64_t span = s->total_steps - s->warmup_steps;
    double progress = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
    if (progress > 1.0)
        progress = 1.0;
    double f;
    if (s->kind == RL_LR_COSINE)
        f = 0.5 * (1.0 + cos(M_PI * progress));
    else
        f = 1.0 - progress;
    return s->base_lr * (s->min_ratio + (1.0 - s->min_ratio) * f);
}
