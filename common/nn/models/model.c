/* model.c — what every model kind shares: the calls through its ops, saving,
 * loading with a finiteness check (rlrt/nn/model.h). The kind table is
 * kinds.c. */
#include "rlrt/nn/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rlrt/error.h"
#include "common/nn/engine/safetensors.h"

const char *rl_quantity_name(rl_quantity q)
{
    static const char *names[RL_Q_COUNT] = {"logp", "entropy", "value", "velocity"};
    return (unsigned)q < RL_Q_COUNT ? names[q] : "?";
}

void rl_model_free(rl_model *m)
{
    if (m)
        m->ops->free(m);
}

const char *rl_model_kind_name(const rl_model *m) { return m->ops->kind; }
const rl_param_manifest *rl_model_manifest(const rl_model *m) { return m->ops->manifest(m); }
int64_t rl_model_num_params(const rl_model *m) { return rl_model_manifest(m)->total; }
float *rl_model_params(rl_model *m) { return m->ops->params(m); }
float *rl_model_grads(rl_model *m) { return m->ops->grads(m); }

void rl_model_zero_grad(rl_model *m)
{
    memset(rl_model_grads(m), 0, sizeof(float) * (size_t)rl_model_num_params(m));
}

int rl_model_init_random(rl_model *m, uint64_t seed) { return m->ops->init_random(m, seed); }

int rl_model_forward(rl_model *m, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    if (!batch || !pass || !out)
        return rl_error_set(RL_EINVAL, "%s forward: NULL argument", m->ops->kind);
    return m->ops->forward(m, batch, want, pass, out);
}

int rl_model_forward_backward(rl_model *m, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    if (!batch || !pass || !fn)
        return rl_error_set(RL_EINVAL, "%s forward_backward: NULL argument", m->ops->kind);
    return m->ops->forward_backward(m, batch, want, pass, fn, ctx, loss);
}

int rl_model_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s,
                    rl_dataproto **out)
{
    if (!in || !s || !out)
        return rl_error_set(RL_EINVAL, "%s sample: NULL argument", m->ops->kind);
    return m->ops->sample(m, in, s, out);
}

int rl_model_write_config(const rl_model *m, const char *path)
{
    return m->ops->write_config(m, path);
}

int rl_model_save(const rl_model *m, const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return rl_error_set(RL_EIO, "cannot create %s: %s", dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = rl_safetensors_write_params(path, rl_model_manifest(m),
                                         m->ops->params((rl_model *)m), RL_F32, NULL);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return rl_model_write_config(m, path);
}

int rl_model_check_finite(const rl_model *m, const float *buf, const char *what)
{
    const rl_param_manifest *man = rl_model_manifest(m);
    for (int v = 0; v < man->count; v++) {
        const rl_param_view *pv = &man->views[v];
        for (int64_t i = 0; i < pv->numel; i++) {
            float x = buf[pv->offset + i];
            if (isfinite(x))
                continue;
            char idx[160];
            int n = snprintf(idx, sizeof idx, "[");
            int64_t rest = i, stride = pv->numel;
            for (int d = 0; d < pv->ndim; d++) {
                stride /= pv->shape[d] ? pv->shape[d] : 1;
                n += snprintf(idx + n, sizeof idx - (size_t)n, "%s%lld", d ? ", " : "",
                              (long long)(stride ? rest / stride : 0));
                rest = stride ? rest % stride : 0;
            }
            snprintf(idx + n, sizeof idx - (size_t)n, "]");
            return rl_error_set(RL_ENUMERIC, "%s: tensor '%s' holds %s at %s", what, pv->name,
                                isnan(x) ? "nan" : "inf", idx);
        }
    }
    return RL_OK;
}

int rl_model_load(rl_model *m, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    float *p = rl_model_params(m);
    int rc = rl_safetensors_read_params(path, rl_model_manifest(m), p);
    if (rc)
        return rc;
    return rl_model_check_finite(m, p, path);
}

