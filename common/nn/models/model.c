/* model.c — what every model kind shares: the calls through its ops, saving,
 * loading with a finiteness check (rlrt/nn/model.h), and the base of the
 * kinds over one flat buffer (common/nn/models/model_base.h). The kind
 * table is kinds.c. */
#include "rlrt/nn/model.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/core/rng.h"
#include "common/core/util.h"
#include "common/nn/engine/safetensors.h"
#include "common/nn/models/model_base.h"
#include "common/nn/models/model_device.h"
#include "rlrt/error.h"

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
    rl_device_zero(rl_model_device(m), rl_model_grads(m), sizeof(float) * (size_t)rl_model_num_params(m));
}

rl_device rl_model_device(const rl_model *m)
{
    return m->ops->device ? (rl_device)m->ops->device(m) : RL_DEVICE_CPU;
}

int rl_model_to_device(rl_model *m, rl_device dev)
{
    if (dev == rl_model_device(m))
        return RL_OK;
    if (!m->ops->to_device)
        return rl_error_set(RL_EUNSUPPORTED, "model kind '%s' runs on the CPU only (no %s path yet)",
                            m->ops->kind, rl_device_name(dev));
    return m->ops->to_device(m, (int)dev);
}

static int s_params_copy(rl_model *m, float *host, const float *from_host)
{
    size_t bytes = sizeof(float) * (size_t)rl_model_num_params(m);
    if (!bytes)
        return RL_OK;
    rl_device dev = rl_model_device(m);
    int rc = from_host ? rl_device_copy(dev, rl_model_params(m), RL_DEVICE_CPU, from_host, bytes)
                       : rl_device_copy(RL_DEVICE_CPU, host, dev, rl_model_params(m), bytes);
    return rc ? rc : rl_device_sync(dev);
}

int rl_model_params_get(rl_model *m, float *host) { return s_params_copy(m, host, NULL); }
int rl_model_params_set(rl_model *m, const float *host) { return s_params_copy(m, NULL, host); }

/* The parameters as a host array: the model's own buffer on the CPU, else a
 * copy the caller frees with s_host_params_free. */
static float *s_host_params(rl_model *m, int fill)
{
    if (rl_model_device(m) == RL_DEVICE_CPU)
        return rl_model_params(m);
    float *h = malloc(sizeof(float) * (size_t)(rl_model_num_params(m) + 1));
    if (!h) {
        rl_error_set(RL_ENOMEM, "%s: out of memory for a host copy of the parameters", m->ops->kind);
        return NULL;
    }
    if (fill && rl_model_params_get(m, h)) {
        free(h);
        return NULL;
    }
    return h;
}

static void s_host_params_free(rl_model *m, float *h)
{
    if (h != rl_model_params(m))
        free(h);
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
    double ignored;
    if (!loss)
        loss = &ignored;
    *loss = 0;
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

/* config.json's "torch_dtype" (when it has one) set to the weights' dtype. */
static int s_config_dtype(const char *path, rl_dtype dtype)
{
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return rl_error_set(RL_EIO, "%s:%d: %s", path, je.line, je.text);
    int rc = RL_OK;
    if (json_is_object(j) && json_object_get(j, "torch_dtype")) {
        const char *name = dtype == RL_BF16 ? "bfloat16" : dtype == RL_F16 ? "float16" : "float32";
        char *text = json_object_set_new(j, "torch_dtype", json_string(name)) ? NULL
                     : json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        rc = text ? rl_file_write_atomic(path, text, strlen(text))
                  : rl_error_set(RL_ENOMEM, "%s: out of memory", path);
        free(text);
    }
    json_decref(j);
    return rc;
}

int rl_model_save_as(const rl_model *m, const char *dir, rl_dtype dtype)
{
    if (dtype != RL_F32 && dtype != RL_BF16 && dtype != RL_F16)
        return rl_error_set(RL_EDTYPE, "%s: weights are saved as F32, BF16 or F16, not %s", dir,
                            rl_dtype_name(dtype));
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return rl_error_set(RL_EIO, "cannot create %s: %s", dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    float *host = s_host_params((rl_model *)m, 1);
    if (!host)
        return rl_error_code();
    /* "format": "pt" is what transformers' from_pretrained asks of the file */
    json_t *meta = json_pack("{s:s}", "format", "pt");
    int rc = meta ? rl_safetensors_write_params(path, rl_model_manifest(m), host, dtype, meta)
                  : rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    json_decref(meta);
    s_host_params_free((rl_model *)m, host);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    rc = rl_model_write_config(m, path);
    return rc || dtype == RL_F32 ? rc : s_config_dtype(path, dtype);
}

int rl_model_save(const rl_model *m, const char *dir) { return rl_model_save_as(m, dir, RL_F32); }

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
    float *p = s_host_params(m, 0);
    if (!p)
        return rl_error_code();
    int rc = rl_safetensors_dir_read_params(dir, rl_model_manifest(m), p);
    char what[4200];
    snprintf(what, sizeof what, "%s/%s", dir, RL_ST_SINGLE_FILE);
    if (access(what, F_OK) != 0) /* the shards: name their index */
        snprintf(what, sizeof what, "%s/%s", dir, RL_ST_INDEX_FILE);
    if (!rc)
        rc = rl_model_check_finite(m, p, what);
    if (!rc && p != rl_model_params(m))
        rc = rl_model_params_set(m, p);
    s_host_params_free(m, p);
    return rc;
}


/* ---- the base of the kinds ------------------------------------------------------------------ */

void *rl_model_base_new(size_t size, const rl_model_ops *ops)
{
    rl_model_base *b = calloc(1, size);
    if (!b) {
        rl_error_set(RL_ENOMEM, "%s: out of memory", ops->kind);
        return NULL;
    }
    b->model.ops = ops;
    return b;
}

rl_model *rl_model_base_done(rl_model_base *b, int rc)
{
    if (!rc)
        return &b->model;
    b->model.ops->free(&b->model);
    return NULL;
}

/* Each section after model.* read, its struct copied to cfgs[i] (NULL:
 * checked only). */
static int s_sections_read(const rl_config *job, const rl_config_section *const *sections,
                           void *const *cfgs)
{
    for (int i = 1; sections[i]; i++) {
        const void *v = rl_config_section_get(job, sections[i]);
        if (!v)
            return rl_error_code();
        if (cfgs)
            memcpy(cfgs[i - 1], v, sections[i]->size);
    }
    return RL_OK;
}

int rl_model_sections_check(const rl_config *job, const rl_config_section *const *sections)
{
    return s_sections_read(job, sections, NULL);
}

int rl_model_base_add(rl_model_base *b, const char *name, int ndim, int64_t d0, int64_t d1,
                      int64_t *offset)
{
    int64_t shape[2] = {d0, d1};
    int ix = rl_param_manifest_add(b->own, name, ndim, shape);
    if (ix < 0)
        return ix;
    *offset = b->own->views[ix].offset;
    return RL_OK;
}

/* A 1-D view that starts at 1: a fixed normalisation's scale. */
static int s_scale_view(const rl_param_view *v)
{
    size_t n = strlen(v->name);
    return v->ndim == 1 && n >= 4 && strcmp(v->name + n - 4, ".std") == 0;
}

/* The zeroed buffers of the manifest's views, scales at 1. */
static int s_alloc(rl_model_base *b)
{
    b->params = rl_param_buffer_new(b->own->total);
    b->grads = rl_param_buffer_new(b->own->total);
    if (!b->params || !b->grads)
        return rl_error_set(RL_ENOMEM, "%s: out of memory for %lld parameters", b->model.ops->kind,
                            (long long)b->own->total);
    for (int i = 0; i < b->own->count; i++) {
        const rl_param_view *v = &b->own->views[i];
        if (s_scale_view(v))
            for (int64_t j = 0; j < v->numel; j++)
                b->params[v->offset + j] = 1.0f;
    }
    return RL_OK;
}

rl_model *rl_model_base_build(const rl_config *job, const rl_model_base_kind *k)
{
    rl_model_base *b = rl_model_base_new(k->size, k->ops);
    if (!b)
        return NULL;
    b->sections = k->sections;
    for (int i = 0; i < RL_MODEL_BASE_SECTIONS; i++)
        b->cfgs[i] = (char *)b + k->cfg_offset[i];
    int rc = s_sections_read(job, k->sections, b->cfgs);
    if (!rc && !(b->man = b->own = rl_param_manifest_new()))
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", k->ops->kind);
    if (!rc && !(rc = k->build(b)))
        rc = s_alloc(b);
    b->dev = RL_DEVICE_CPU;
    b->nn = rl_nn_ops_get(RL_DEVICE_CPU);
    return rl_model_base_done(b, rc);
}

void rl_model_base_borrow(rl_model_base *b, const rl_param_manifest *man, float *params, float *grads)
{
    b->man = man;
    b->params = params;
    b->grads = grads;
}

void rl_model_base_free(rl_model_base *b)
{
    if (b->own) {
        rl_param_manifest_free(b->own);
        rl_device_buffer_free(b->dev, b->params);
        rl_device_buffer_free(b->dev, b->grads);
    }
    b->man = b->own = NULL;
    b->params = b->grads = NULL;
}

const rl_param_manifest *rl_model_base_manifest(const rl_model *m)
{
    return ((const rl_model_base *)m)->man;
}
float *rl_model_base_params(rl_model *m) { return ((rl_model_base *)m)->params; }
float *rl_model_base_grads(rl_model *m) { return ((rl_model_base *)m)->grads; }

int rl_model_base_move(rl_model_base *b, rl_device dev)
{
    const char *kind = b->model.ops->kind;
    if (dev == b->dev)
        return RL_OK;
    if (!b->own)
        return rl_error_set(RL_EINVAL, "%s: its buffers are lent, the network moves them", kind);
    const rl_nn_ops *ops = rl_nn_ops_get(dev);
    if (!ops)
        return rl_error_wrap(rl_error_code(), "%s", kind);
    const char *miss = rl_nn_ops_missing(ops);
    if (miss)
        return rl_error_set(RL_EUNSUPPORTED, "%s on device %s: op '%s' has no kernel there yet", kind,
                            ops->name, miss);
    if (dev != RL_DEVICE_CPU && rl_device_count(dev) <= 0)
        return rl_error_set(RL_EUNSUPPORTED, "%s on device %s: no such device is visible", kind, ops->name);
    const int64_t n = b->own->total;
    const size_t bytes = sizeof(float) * (size_t)n;
    float *p = rl_device_buffer_new(dev, n, RL_MEM_PARAMS), *g = rl_device_buffer_new(dev, n, RL_MEM_GRADS);
    int rc = p && g ? RL_OK
                    : rl_error_set(RL_ENOMEM, "%s: no room for %lld parameters on %s", kind, (long long)n,
                                   ops->name);
    if (!rc && bytes)
        rc = rl_device_copy(dev, p, b->dev, b->params, bytes);
    if (!rc)
        rc = rl_device_zero(dev, g, bytes);
    if (!rc)
        rc = rl_device_sync(dev);
    if (rc) {
        rl_device_buffer_free(dev, p);
        rl_device_buffer_free(dev, g);
        return rc;
    }
    rl_device_buffer_free(b->dev, b->params);
    rl_device_buffer_free(b->dev, b->grads);
    b->params = p;
    b->grads = g;
    b->dev = dev;
    b->nn = ops;
    return RL_OK;
}

int rl_model_base_device(const rl_model *m) { return (int)((const rl_model_base *)m)->dev; }

int rl_model_floats_on(rl_device dev, float **const *arrays, const size_t *counts, int n, const char *who)
{
    if (dev == RL_DEVICE_CPU)
        return rl_model_floats(arrays, counts, n, who);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    float *p = rl_device_alloc_for(dev, sizeof(float) * (total ? total : 1), RL_MEM_ACTIVATIONS);
    for (int i = 0; i < n; i++) {
        *arrays[i] = p;
        p = p ? p + counts[i] : NULL;
    }
    return *arrays[0] ? RL_OK
                      : rl_error_set(RL_ENOMEM, "%s: no room for %zu floats of activations on %s", who, total,
                                     rl_device_name(dev));
}

void rl_model_floats_free(rl_device dev, float *first)
{
    if (dev == RL_DEVICE_CPU)
        free(first);
    else
        rl_device_free(dev, first);
}

int rl_model_copy_in(rl_device dev, void *dst, const void *host, size_t bytes)
{
    return bytes ? rl_device_copy(dev, dst, RL_DEVICE_CPU, host, bytes) : RL_OK;
}

int rl_model_copy_out(rl_device dev, void *host, const void *src, size_t bytes)
{
    int rc = bytes ? rl_device_copy(RL_DEVICE_CPU, host, dev, src, bytes) : RL_OK;
    int sc = rl_device_sync(dev);
    return rc ? rc : sc;
}

int rl_model_base_init_random(rl_model *m, uint64_t seed)
{
    rl_model_base *b = (rl_model_base *)m;
    float *host = b->params;
    if (b->dev != RL_DEVICE_CPU && !(host = malloc(sizeof(float) * (size_t)(b->man->total + 1))))
        return rl_error_set(RL_ENOMEM, "%s init: out of memory", b->model.ops->kind);
    for (int i = 0; i < b->man->count; i++) {
        const rl_param_view *v = &b->man->views[i];
        float *p = host + v->offset;
        if (v->ndim == 1) {
            float fill = s_scale_view(v) ? 1.0f : 0.0f;
            for (int64_t j = 0; j < v->numel; j++)
                p[j] = fill;
            continue;
        }
        float std = strstr(v->name, "embedding") ? 1.0f : 1.0f / sqrtf((float)v->shape[1]);
        rl_rng g;
        rl_rng_init(&g, seed, (uint64_t)i);
        for (int64_t j = 0; j < v->numel; j++)
            p[j] = std * rl_rng_normal(&g);
    }
    if (host == b->params)
        return RL_OK;
    int rc = rl_model_params_set(m, host);
    free(host);
    return rc;
}

int64_t rl_model_micro_rows(const rl_model_pass *pass, int64_t B)
{
    return pass->micro_batch > 0 && pass->micro_batch < B ? pass->micro_batch : (B ? B : 1);
}

const rl_tensor *rl_model_input(const rl_dataproto *dp, const char *what, const char *name, rl_dtype dtype,
                                int ndim, const int64_t *dims)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, dtype, ndim, dims);
    if (!t)
        rl_error_wrap(rl_error_code(), "%s", what);
    return t;
}

int rl_model_input_ids(const rl_dataproto *dp, const char *what, const char *name, int K, const char *key,
                       int64_t *B, const int32_t **ids)
{
    const int64_t d1[1] = {*B};
    const rl_tensor *t = rl_model_input(dp, what, name, RL_I32, 1, d1);
    if (!t)
        return rl_error_code();
    *B = t->shape[0];
    *ids = rl_tensor_data((rl_tensor *)t);
    for (int64_t b = 0; b < *B; b++)
        if ((*ids)[b] < 0 || (*ids)[b] >= K)
            return rl_error_set(RL_ERANGE, "%s: %s[%lld] = %d outside [0, %d)%s%s%s", what, name, (long long)b,
                                (*ids)[b], K, key ? " (" : "", key ? key : "", key ? ")" : "");
    return RL_OK;
}

int rl_model_input_finite(const char *what, const char *name, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", what, name,
                                (long long)i, (double)x[i]);
    return RL_OK;
}

int rl_model_floats(float **const *arrays, const size_t *counts, int n, const char *who)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    float *p = malloc(sizeof(float) * (total ? total : 1));
    for (int i = 0; i < n; i++) {
        *arrays[i] = p;
        p = p ? p + counts[i] : NULL;
    }
    return *arrays[0] ? RL_OK
                      : rl_error_set(RL_ENOMEM, "%s: out of memory for %zu floats of activations", who, total);
}

rl_dataproto *rl_model_outputs(const rl_model_output *spec, int n, rl_tensor **t)
{
    rl_dataproto *o = rl_dataproto_new();
    for (int i = 0; o && i < n; i++)
        if (!(t[i] = rl_dataproto_new_tensor(o, spec[i].name, spec[i].dtype, spec[i].ndim, spec[i].shape))) {
            rl_dataproto_free(o);
            o = NULL;
        }
    return o;
}

int rl_model_give(rl_dataproto *o, int rc, rl_dataproto **out)
{
    if (rc)
        rl_dataproto_free(o);
    else
        *out = o;
    return rc;
}

int rl_model_loss_one(rl_model_loss_fn fn, void *ctx, rl_quantity q, int64_t row0, int64_t rows,
                      int64_t width, float *val, const float *mask, float *grad, double *loss)
{
    rl_model_io o, g;
    memset(&o, 0, sizeof o);
    memset(grad, 0, sizeof(float) * (size_t)(rows * width));
    o.row0 = row0;
    o.rows = rows;
    o.width[q] = width;
    o.q[q] = val;
    o.mask[q] = mask;
    g = o;
    g.q[q] = grad;
    return fn(ctx, &o, &g, loss);
}

/* Appends to buf[*len .. cap) (a too-long text is RL_ERANGE at the end). */
static void s_put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = *len < cap ? vsnprintf(buf + *len, cap - *len, fmt, ap) : 0;
    va_end(ap);
    *len += k > 0 ? (size_t)k : 0;
}

/* The JSON text of one key's value in the struct `cfg`. */
static void s_put_value(char *buf, size_t cap, size_t *len, const rl_config_key *k, const void *cfg)
{
    const char *f = (const char *)cfg + k->offset;
    switch (k->type) {
    case RL_CFG_INT:
        s_put(buf, cap, len, "%lld", (long long)*(const int64_t *)f);
        return;
    case RL_CFG_NUM:
        s_put(buf, cap, len, "%.17g", *(const double *)f);
        return;
    case RL_CFG_BOOL:
        s_put(buf, cap, len, "%s", *(const int *)f ? "true" : "false");
        return;
    case RL_CFG_ENUM: { /* the choice's text */
        const char *c = k->choices;
        for (int i = *(const int *)f; i > 0 && c; i--)
            c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL;
        s_put(buf, cap, len, "\"%.*s\"", c ? (int)strcspn(c, "|") : 0, c ? c : "");
        return;
    }
    case RL_CFG_STR: {
        const char *v = *(const char *const *)f;
        s_put(buf, cap, len, "\"");
        for (; v && *v; v++) {
            int ch = (unsigned char)*v;
            if (ch < 0x20)
                s_put(buf, cap, len, "\\u%04x", ch);
            else
                s_put(buf, cap, len, ch == '"' || ch == '\\' ? "\\%c" : "%c", ch);
        }
        s_put(buf, cap, len, "\"");
        return;
    }
    default:
        s_put(buf, cap, len, "null");
    }
}

int rl_model_base_write_config(const rl_model *m, const char *path)
{
    const rl_model_base *b = (const rl_model_base *)m;
    const char *kind = m->ops->kind;
    char buf[4096];
    size_t len = 0;
    s_put(buf, sizeof buf, &len, "{\"model\": {\"type\": \"%s\"", kind);
    for (int i = 1; b->sections[i]; i++)
        for (size_t j = 0; j < b->sections[i]->n_keys; j++) {
            const rl_config_key *k = &b->sections[i]->keys[j];
            const char *name = strchr(k->path, '.');
            if (!name || strchr(name + 1, '.'))
                return rl_error_set(RL_EINVAL, "%s config.json: key %s is not directly under model",
                                    kind, k->path);
            s_put(buf, sizeof buf, &len, ", \"%s\": ", name + 1);
            s_put_value(buf, sizeof buf, &len, k, b->cfgs[i - 1]);
        }
    s_put(buf, sizeof buf, &len, "}}\n");
    if (len >= sizeof buf)
        return rl_error_set(RL_ERANGE, "%s config.json: more than %zu bytes", kind, sizeof buf);
    return rl_file_write_atomic(path, buf, len);
}
