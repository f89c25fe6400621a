/* model.c — the model kind table and what every model shares: building from
 * a job, loading with a finiteness check, saving (see rlrt/nn/model.h). */
#include "rlrt/nn/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rlrt/error.h"
#include "rlrt/nn/clip_flow.h"
#include "rlrt/nn/flow_policy.h"
#include "rlrt/nn/image_classifier.h"
#include "rlrt/nn/lm_model.h"
#include "rlrt/nn/safetensors.h"

/* The kinds a job can name in model.type: a new model is one line here. */
static const rl_model_kind *const s_kinds[] = {
    &rl_model_kind_lm,
    &rl_model_kind_clip_flow,
    &rl_model_kind_flow_policy,
    &rl_model_kind_image_classifier,
};
#define S_NKINDS (sizeof s_kinds / sizeof s_kinds[0])

const char *rl_quantity_name(rl_quantity q)
{
    static const char *names[RL_Q_COUNT] = {"logp", "entropy", "value", "velocity"};
    return (unsigned)q < RL_Q_COUNT ? names[q] : "?";
}

const rl_model_kind *rl_model_kind_find(const char *type)
{
    for (size_t i = 0; i < S_NKINDS; i++)
        if (type && strcmp(s_kinds[i]->name, type) == 0)
            return s_kinds[i];
    char known[256] = "";
    for (size_t i = 0, n = 0; i < S_NKINDS && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", s_kinds[i]->name);
    rl_error_set(RL_ENOTFOUND, "unknown model type '%s' (known: %s)", type ? type : "(null)", known);
    return NULL;
}

/* The message of the last error, located at the job's `path` node. */
static int s_located(const rl_config *job, const char *path, int code)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    return rl_config_error_at(job, path, code, "%s", msg);
}

/* The kind named by the job's model.type, or NULL with a located error. */
static const rl_model_kind *s_job_kind(const rl_config *job)
{
    const char *type;
    if (rl_config_get_string(job, "model.type", &type))
        return NULL;
    const rl_model_kind *kind = rl_model_kind_find(type);
    if (!kind)
        s_located(job, "model.type", RL_ECONFIG);
    return kind;
}

int rl_model_check_config(const rl_config *job)
{
    const rl_model_kind *kind = s_job_kind(job);
    return kind ? kind->check_config(job) : rl_error_code();
}

rl_model *rl_model_build(const rl_config *job, uint64_t seed)
{
    const char *from;
    const rl_model_kind *kind = s_job_kind(job);
    if (!kind || rl_config_get_string(job, "model.init_from", &from))
        return NULL;
    rl_model *m = kind->from_config(job);
    if (!m)
        return NULL;
    int rc;
    if (from && *from) {
        if ((rc = rl_model_load(m, from)))
            s_located(job, "model.init_from", rc);
    } else {
        rc = rl_model_init_random(m, seed);
    }
    if (rc) {
        rl_model_free(m);
        return NULL;
    }
    return m;
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

rl_model *rl_model_load_dir(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir ? dir : "");
    rl_config *file = rl_config_parse_file(path), *job = NULL;
    if (!file)
        return NULL;
    /* the kind's defaults under the file, so a directory written before a
     * key existed loads with that key's default */
    const char *type0 = NULL;
    const rl_model_kind *k0 = rl_config_get_string(file, "model.type", &type0) ? NULL : rl_model_kind_find(type0);
    rl_config *defs = k0 ? rl_config_parse_string(k0->defaults_yaml, strlen(k0->defaults_yaml), k0->name) : NULL;
    job = defs ? rl_config_merge(defs, file) : NULL;
    rl_config_free(defs);
    rl_config_free(file);
    if (!job)
        return NULL;
    rl_model *m = NULL;
    if (!rl_config_set_yaml(job, "model.init_from", "''") &&
        rl_model_check_config(job) == RL_OK) {
        const rl_model_kind *k = NULL;
        const char *type;
        if (!rl_config_get_string(job, "model.type", &type))
            k = rl_model_kind_find(type);
        m = k ? k->from_config(job) : NULL;
        int rc = m ? rl_model_load(m, dir) : rl_error_code();
        if (m && rc) {
            rl_model_free(m);
            m = NULL;
        }
    }
    rl_config_free(job);
    return m;
}
