/* transformer.c — Llama/Qwen2 decoder: parameters, training forward and
 * backward, per-token log-probs / entropy / values (see common/nn/models/lm/transformer.h). */
#include "common/nn/models/lm/transformer_internal.h"

#include "rlrt/error.h"
#include "common/nn/engine/ops.h"
#include "common/core/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- construction ------------------------------------------------------------ */

static int s_add(rl_lm *m, const char *name, int ndim, int64_t d0, int64_t d1, int64_t *off)
{
    int64_t shape[2] = {d0, d1};
    int i = rl_param_manifest_add(m->man, name, ndim, shape);
    if (i < 0)
        return i;
    *off = m->man->views[i].offset;
    return 0;
}

static int s_build_manifest(rl_lm *m)
{
    const rl_lm_config *c = &m->cfg;
    int64_t d = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t qd = m->qd, kvd = m->kvd;
    char name[RL_PARAM_NAME_MAX];
    int rc;
#define ADD(nd, a, b, field, ...)                                                             \
    do {                                                                                      \
        snprintf(name, sizeof name, __VA_ARGS__);                                             \
        if ((rc = s_add(m, name, nd, a, b, &(field))) < 0)                                    \
            return rc;                                                                        \
    } while (0)
    ADD(2, V, d, m->off_embed, "model.embed_tokens.weight");
    for (int l = 0; l < c->num_layers; l++) {
        rl_lm_layer_off *L = &m->layer[l];
        L->bq = L->bk = L->bv = -1;
        ADD(1, d, 0, L->ln1, "model.layers.%d.input_layernorm.weight", l);
        ADD(2, qd, d, L->wq, "model.layers.%d.self_attn.q_proj.weight", l);
        if (c->qkv_bias)
            ADD(1, qd, 0, L->bq, "model.layers.%d.self_attn.q_proj.bias", l);
        ADD(2, kvd, d, L->wk, "model.layers.%d.self_attn.k_proj.weight", l);
        if (c->qkv_bias)
            ADD(1, kvd, 0, L->bk, "model.layers.%d.self_attn.k_proj.bias", l);
        ADD(2, kvd, d, L->wv, "model.layers.%d.self_attn.v_proj.weight", l);
        if (c->qkv_bias)
            ADD(1, kvd, 0, L->bv, "model.layers.%d.self_attn.v_proj.bias", l);
        ADD(2, d, qd, L->wo, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(1, d, 0, L->ln2, "model.layers.%d.post_attention_layernorm.weight", l);
        ADD(2, I, d, L->wg, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(2, I, d, L->wu, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(2, d, I, L->wd, "model.layers.%d.mlp.down_proj.weight", l);
    }
    ADD(1, d, 0, m->off_normf, "model.norm.weight");
    m->off_lmhead = m->off_embed;
    if (!c->tie_word_embeddings)
        ADD(2, V, d, m->off_lmhead, "lm_head.weight");
    m->off_vw = m->off_vb = -1;
    if (c->value_head) {
        ADD(2, 1, d, m->off_vw, "value_head.weight");
        ADD(1, 1, 0, m->off_vb, "value_head.bias");
    }
#undef ADD
    return 0;
}

rl_lm *rl_lm_new(const rl_lm_config *cfg, rl_device dev)
{
    if (rl_lm_config_validate(cfg) < 0)
        return NULL;
    const rl_nn_ops *ops = rl_nn_ops_get(dev);
    if (!ops)
        return NULL;
    const char *miss = rl_nn_ops_missing(ops);
    if (miss) {
        rl_error_set(RL_EUNSUPPORTED, "lm on device %s: op '%s' has no kernel there yet",
                     ops->name, miss);
        return NULL;
    }
    if (dev != RL_DEVICE_CPU && rl_device_count(dev) <= 0) {
        rl_error_set(RL_EUNSUPPORTED, "lm on device %s: no such device is visible", ops->name);
        return NULL;
    }
    rl_lm *m = calloc(1, sizeof *m);
    if (!m) {
        rl_error_set(RL_ENOMEM, "lm: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    m->dev = dev;
    m->ops = ops;
    m->hd = cfg->hidden_size / cfg->num_heads;
    m->qd = cfg->num_heads * m->hd;
    m->kvd = cfg->num_kv_heads * m->hd;
    m->layer = calloc((size_t)cfg->num_layers, sizeof *m->layer);
    m->man = rl_param_manifest_new();
    if (!m->layer || !m->man) {
        rl_lm_free(m);
        rl_error_set(RL_ENOMEM, "lm: out of memory");
        return NULL;
    }
    if (s_build_manifest(m) < 0) {
        rl_error_wrap(rl_error_code(), "lm manifest");
        rl_lm_free(m);
        return NULL;
    }
    size_t bytes = sizeof(float) * (size_t)m->man->total;
    m->params = rl_device_buffer_new(dev, m->man->total, RL_MEM_PARAMS);
    m->grads = rl_device_buffer_new(dev, m->man->total, RL_MEM_GRADS);
    float *p = dev == RL_DEVICE_CPU ? m->params : calloc((size_t)m->man->total + 1, sizeof(float));
    if (!m->params || !m->grads || !p || rl_device_zero(dev, m->grads, bytes)) {
        if (p != m->params)
            free(p);
        rl_lm_free(m);
        return NULL;
    }
    /* Norm weights start at 1 so a fresh model is usable. */
    for (int i = 0; i < m->man->count; i++)
        if (strstr(m->man->views[i].name, "norm"))
            for (int64_t j = 0; j < m->man->views[i].numel; j++)
                p[m->man->views[i].offset + j] = 1.0f;
    if (p != m->params) {
        int rc = rl_device_copy(dev, m->params, RL_DEVICE_CPU, p, bytes);
        free(p);
        if (rc) {
            rl_lm_free(m);
            return NULL;
        }
    }
    return m;
}

static void s_w16_free(rl_lm *m)
{
    if (m->dev == RL_DEVICE_CPU)
        free(m->w16);
    else
        rl_device_free(m->dev, m->w16);
    m->w16 = NULL;
}

void rl_lm_free(rl_lm *m)
{
    if (!m)
        return;
    rl_device_buffer_free(m->dev, m->params);
    rl_device_buffer_free(m->dev, m->grads);
    s_w16_free(m);
    rl_param_manifest_free(m->man);
    free(m->layer);
    if (m->dev == RL_DEVICE_CPU)
        free(m->act);
    else
        rl_device_free(m->dev, m->act);
    free(m->ibuf);
    rl_device_free(m->dev, m->dibuf);
    free(m->h_out);
    if (m->gen_free)
        m->gen_free(m);
    free(m);
}

int rl_lm_to_device(rl_lm *m, rl_device dev)
{
    if (dev == m->dev)
        return RL_OK;
    const rl_nn_ops *ops = rl_nn_ops_get(dev);
    if (!ops)
        return rl_error_code();
    const char *miss = rl_nn_ops_missing(ops);
    if (miss)
        return rl_error_set(RL_EUNSUPPORTED, "lm on device %s: op '%s' has no kernel there yet",
                            ops->name, miss);
    if (dev != RL_DEVICE_CPU && rl_device_count(dev) <= 0)
        return rl_error_set(RL_EUNSUPPORTED, "lm on device %s: no such device is visible", ops->name);
    const int64_t n = m->man->total;
    const size_t bytes = sizeof(float) * (size_t)n;
    float *p = rl_device_buffer_new(dev, n, RL_MEM_PARAMS), *g = rl_device_buffer_new(dev, n, RL_MEM_GRADS);
    int rc = p && g ? RL_OK : rl_error_set(RL_ENOMEM, "lm: no room for %lld parameters on %s",
                                              (long long)n, ops->name);
    if (!rc && bytes)
        rc = rl_device_copy(dev, p, m->dev, m->params, bytes);
    if (!rc)
        rc = rl_device_zero(dev, g, bytes);
    if (!rc)
        rc = rl_device_sync(dev);
    if (rc) {
        if (p)
            rl_device_buffer_free(dev, p);
        if (g)
            rl_device_buffer_free(dev, g);
        return rc;
    }
    /* the old device's buffers go; activations and scratch are re-made on
     * the new one by the next rl_lm_reserve, the bf16 weights by the next
     * rl_lm_bf16_refresh */
    s_w16_free(m);
    rl_device_buffer_free(m->dev, m->params);
    rl_device_buffer_free(m->dev, m->grads);
    if (m->dev == RL_DEVICE_CPU)
        free(m->act);
    else
        rl_device_free(m->dev, m->act);
    rl_device_free(m->dev, m->dibuf);
    free(m->ibuf);
    free(m->h_out);
    if (m->gen_free)
        m->gen_free(m);
    m->gen = NULL;
    m->gen_free = NULL;
    m->act = NULL;
    m->dibuf = NULL;
    m->ibuf = NULL;
    m->h_out = NULL;
    m->act_cap = m->ibuf_cap = m->h_out_cap = 0;
    memset(&m->a, 0, sizeof m->a);
    m->h_target = NULL;
    m->have_fwd = 0;
    m->params = p;
    m->grads = g;
    m->dev = dev;
    m->ops = ops;
    return RL_OK;
}

int rl_lm_set_precision(rl_lm *m, rl_precision p)
{
    if (p != RL_PRECISION_FP32 && p != RL_PRECISION_BF16)
        return rl_error_set(RL_EINVAL, "lm precision: %d is neither fp32 (0) nor bf16 (1)", (int)p);
    if (p == RL_PRECISION_FP32)
        s_w16_free(m);
    m->prec = p;
    m->have_fwd = 0; /* a backward must use the products of its own forward */
    return RL_OK;
}

rl_precision rl_lm_precision(const rl_lm *m) { return m->prec; }

int rl_lm_bf16_refresh(rl_lm *m)
{
    if (m->prec != RL_PRECISION_BF16)
        return RL_OK;
    int64_t n = m->man->total;
    if (!m->w16) {
        size_t bytes = sizeof(uint16_t) * (size_t)(n + 1);
        m->w16 = m->dev == RL_DEVICE_CPU ? malloc(bytes) : rl_device_alloc_for(m->dev, bytes, RL_MEM_PARAMS);
        if (!m->w16)
            return rl_error_set(RL_ENOMEM, "lm bf16: no room for the %lld bf16 weights on %s",
                                (long long)n, rl_device_name(m->dev));
    }
    m->ops->round_bf16(m->w16, m->params, n);
    return RL_OK;
}

const rl_lm_config *rl_lm_get_config(const rl_lm *m) { return &m->cfg; }
const rl_param_manifest *rl_lm_manifest(const rl_lm *m) { return m->man; }
int64_t rl_lm_num_params(const rl_lm *m) { return m->man->total; }
float *rl_lm_params(rl_lm *m) { return m->params; }
float *rl_lm_grads(rl_lm *m) { return m->grads; }
void rl_lm_zero_grad(rl_lm *m) { rl_device_zero(m->dev, m->grads, sizeof(float) * (size_t)m->man->total); }
rl_device rl_lm_device(const rl_lm *m) { return m->dev; }
const float *rl_lm_logits(const rl_lm *m) { return m->have_fwd ? m->a.logits : NULL; }

float *rl_lm_param(rl_lm *m, const char *name)
{
    int i = rl_param_manifest_find(m->man, name);
    return i < 0 ? NULL : m->params + m->man->views[i].offset;
}

int rl_lm_init_random(rl_lm *m, uint64_t seed, float std)
{
    if (!(std >= 0.0f))
        return rl_error_set(RL_EINVAL, "lm init: std must be >= 0, got %g", (double)std);
    float *host = m->dev == RL_DEVICE_CPU ? m->params : malloc(sizeof(float) * (size_t)(m->man->total + 1));
    if (!host)
        return rl_error_set(RL_ENOMEM, "lm init: out of memory");
    for (int i = 0; i < m->man->count; i++) {
        const rl_param_view *v = &m->man->views[i];
        float *p = host + v->offset;
        if (strstr(v->name, "norm")) {
            for (int64_t j = 0; j < v->numel; j++)
                p[j] = 1.0f;
        } else if (v->ndim == 1) {
            memset(p, 0, sizeof(float) * (size_t)v->numel);
        } else {
            rl_rng g;
            rl_rng_init(&g, seed, (uint64_t)i);
            for (int64_t j = 0; j < v->numel; j++)
                p[j] = std * rl_rng_normal(&g);
        }
    }
    m->have_fwd = 0;
    if (host == m->params)
        return 0;
    int rc = rl_device_copy(m->dev, m->params, RL_DEVICE_CPU, host, sizeof(float) * (size_t)m->man->total);
    free(host);
    return rc;
}

/* ---- activation memory ----------------------------------------------------------- */

/* Carves the activation arena for a (B,T) batch; grows it when needed. */
int rl_lm_reserve(rl_lm *m, int B, int T)
{
    const rl_lm_config *c = &m->cfg;
    int64_t N = (int64_t)B * T, d = c->hidden_size, I = c->intermediate_size;
    int64_t V = c->vocab_size, L = c->num_layers, H = c->num_heads;
    int64_t qd = m->qd, kvd = m->kvd, TT = (int64_t)B * H * T; /* attention lse */
    int64_t per_layer = N * d /* ln1 */ + N /* rstd1 */ + N * qd + 2 * N * kvd + TT +
                        N * qd /* atty */ + N * d /* xmid */ + N * d /* ln2 */ + N +
                        3 * N * I;
    int64_t total = (L + 1) * N * d + L * per_layer + N * d + N /* lnf, rstdf */ +
                    N * V /* logits */ + 4 * N /* lse, ent, lp, val */ +
                    /* backward scratch (dlogits: the logits, overwritten) */
                    3 * N * d + N * qd * 2 + 2 * N * kvd + 3 * N * I + 3 * N /* dlp, dent, dval */;
    float *base = m->act;
    int cpu = m->dev == RL_DEVICE_CPU;
    if (total > m->act_cap) {
        if (cpu)
            free(m->act);
        else
            rl_device_free(m->dev, m->act);
        m->act = NULL;
        m->act_cap = 0;
        base = cpu ? malloc(sizeof(float) * (size_t)total)
                   : rl_device_alloc_for(m->dev, sizeof(float) * (size_t)total, RL_MEM_ACTIVATIONS);
        if (!base)
            return rl_error_set(RL_ENOMEM, "lm activations for B=%d T=%d (%lld floats) on %s", B, T,
                                (long long)total, rl_device_name(m->dev));
        m->act = base;
        m->act_cap = total;
    }
    int64_t ibytes = N * (int64_t)(2 * sizeof(int32_t) + sizeof(uint8_t) + sizeof(int32_t));
    if (ibytes > m->ibuf_cap) {
        free(m->ibuf);
        rl_device_free(m->dev, m->dibuf);
        m->dibuf = NULL;
        m->ibuf = malloc((size_t)ibytes);
        if (m->ibuf && !cpu)
            m->dibuf = rl_device_alloc_for(m->dev, (size_t)ibytes, RL_MEM_SCRATCH);
        m->ibuf_cap = m->ibuf && (cpu || m->dibuf) ? ibytes : 0;
        if (!m->ibuf_cap)
            return rl_error_set(RL_ENOMEM, "lm index buffers for B=%d T=%d", B, T);
    }
    if (!cpu && 4 * N > m->h_out_cap) {
        free(m->h_out);
        m->h_out = malloc(sizeof(float) * (size_t)(4 * N));
        m->h_out_cap = m->h_out ? 4 * N : 0;
        if (!m->h_out)
            return rl_error_set(RL_ENOMEM, "lm output staging for B=%d T=%d", B, T);
    }
    rl_lm_acts *a = &m->a;
    float *p = base;
#define TAKE(ptr, n)                                                                          \
    do {                                                                                      \
        (ptr) = p;                                                                            \
        p += (n);                                                                             \
    } while (0)
    a->x = p;
    p += (L + 1) * N * d;
    a->ln1 = p; p += L * N * d;
    a->rstd1 = p; p += L * N;
    a->q = p; p += L * N * qd;
    a->k = p; p += L * N * kvd;
    a->v = p; p += L * N * kvd;
    a->lse = p; p += L * TT;
    a->atty = p; p += L * N * qd;
    a->xmid = p; p += L * N * d;
    a->ln2 = p; p += L * N * d;
    a->rstd2 = p; p += L * N;
    a->gate = p; p += L * N * I;
    a->up = p; p += L * N * I;
    a->hmid = p; p += L * N * I;
    TAKE(a->lnf, N * d);
    TAKE(a->rstdf, N);
    TAKE(a->logits, N * V);
    TAKE(a->vlse, N);
    TAKE(a->ent, N);
    TAKE(a->lp, N);
    TAKE(a->val, N);
    TAKE(a->dx, N * d);
    TAKE(a->dxmid, N * d);
    TAKE(a->dln, N * d);
    TAKE(a->datty, N * qd);
    TAKE(a->dq, N * qd);
    TAKE(a->dk, N * kvd);
    TAKE(a->dv, N * kvd);
    TAKE(a->dgate, N * I);
    TAKE(a->dup, N * I);
    TAKE(a->dh, N * I);
    a->dlogits = a->logits; /* the log-prob backward overwrites the logits (N × V) in place */
    TAKE(a->dlp, N);
    TAKE(a->dent, N);
    TAKE(a->dval, N);
#undef TAKE
    /* the kernels' index arrays live on the device; prepare writes the host
     * copy (ibuf, same layout) and uploads it */
    a->tokens = (int32_t *)(cpu ? m->ibuf : m->dibuf);
    a->target = a->tokens + N;
    a->pos = a->target + N;
    a->mask = (uint8_t *)(a->pos + N);
    m->h_target = (int32_t *)m->ibuf + N;
    return 0;
}

/* ---- forward ------------------------------------------------------------------ */

#define PW(off) (m->params + (off))
#define GW(off) (m->grads + (off))
#define PB(off) ((off) >= 0 ? m->params + (off) : NULL)
#define GB(off) ((off) >= 0 ? m->grads + (off) : NULL)

/* A linear layer in the model's precision; returns from the caller on error. */
#define LINF(...)                                                                             \
    do {                                                                                      \
        if ((rc = rl_lm_lin_fwd(m, __VA_ARGS__)) < 0)                                         \
            return rc;                                                                        \
    } while (0)
#define LINB(...)                                                                             \
    do {                                                                                      \
        if ((rc = rl_lm_lin_bwd(m, __VA_ARGS__)) < 0)                                         \
            return rc;                                                                        \
    } while (0)

/* Layer l's slices of the saved activations of a forward over N = B·T
 * positions (rl_lm_acts). */
typedef struct s_layer {
    float *x, *xn;                     /* (N, d) its input, its output (the next one's input) */
    float *ln1, *rstd1, *q, *k, *v;    /* (N, d), (N), (N, qd), (N, kvd) x2 */
    float *lse, *atty, *xmid;          /* (B, H, T), (N, qd), (N, d) */
    float *ln2, *rstd2, *gate, *up, *hmid; /* (N, d), (N), (N, I) x3 */
} s_layer;

static s_layer s_layer_of(const rl_lm *m, int l, int B, int T)
{
    const rl_lm_config *c = &m->cfg;
    const rl_lm_acts *a = &m->a;
    int N = B * T, d = c->hidden_size, I = c->intermediate_size, qd = m->qd, kvd = m->kvd;
    int64_t TT = (int64_t)B * c->num_heads * T;
    size_t L = (size_t)l;
    return (s_layer){.x = a->x + L * N * d, .xn = a->x + (L + 1) * N * d,
                     .ln1 = a->ln1 + L * N * d, .rstd1 = a->rstd1 + L * N,
                     .q = a->q + L * N * qd, .k = a->k + L * N * kvd, .v = a->v + L * N * kvd,
                     .lse = a->lse + L * TT, .atty = a->atty + L * N * qd, .xmid = a->xmid + L * N * d,
                     .ln2 = a->ln2 + L * N * d, .rstd2 = a->rstd2 + L * N,
                     .gate = a->gate + L * N * I, .up = a->up + L * N * I, .hmid = a->hmid + L * N * I};
}

/* Runs the decoder over a->tokens (B,T) with a->mask and a->pos already set;
 * fills every saved activation and the raw logits. */
int rl_lm_forward_raw(rl_lm *m, int B, int T)
{
    const rl_lm_config *c = &m->cfg;
    const rl_nn_ops *o = m->ops;
    rl_lm_acts *a = &m->a;
    int N = B * T, d = c->hidden_size, I = c->intermediate_size, H = c->num_heads;
    int KH = c->num_kv_heads, hd = m->hd, qd = m->qd, kvd = m->kvd;
    int rc = 0;
    o->embedding_forward(a->x, a->tokens, PW(m->off_embed), N, d);
    for (int l = 0; l < c->num_layers; l++) {
        const rl_lm_layer_off *Lo = &m->layer[l];
        const s_layer y = s_layer_of(m, l, B, T);
        o->rmsnorm_forward(y.ln1, y.rstd1, y.x, PW(Lo->ln1), c->rms_norm_eps, N, d);
        LINF(y.q, y.ln1, Lo->wq, PB(Lo->bq), N, d, qd);
        LINF(y.k, y.ln1, Lo->wk, PB(Lo->bk), N, d, kvd);
        LINF(y.v, y.ln1, Lo->wv, PB(Lo->bv), N, d, kvd);
        o->rope_forward(y.q, y.q, a->pos, N, H, hd, c->rope_theta);
        o->rope_forward(y.k, y.k, a->pos, N, KH, hd, c->rope_theta);
        if ((rc = (m->prec == RL_PRECISION_BF16 ? o->attention_forward_bf16 : o->attention_forward)(
                 y.atty, y.lse, y.q, y.k, y.v, a->mask, B, T, H, KH, hd)) < 0)
            return rc;
        LINF(y.xmid, y.atty, Lo->wo, NULL, N, qd, d);
        o->add_inplace(y.xmid, y.x, (int64_t)N * d);
        o->rmsnorm_forward(y.ln2, y.rstd2, y.xmid, PW(Lo->ln2), c->rms_norm_eps, N, d);
        LINF(y.gate, y.ln2, Lo->wg, NULL, N, d, I);
        LINF(y.up, y.ln2, Lo->wu, NULL, N, d, I);
        o->swiglu_forward(y.hmid, y.gate, y.up, (int64_t)N * I);
        LINF(y.xn, y.hmid, Lo->wd, NULL, N, I, d);
        o->add_inplace(y.xn, y.xmid, (int64_t)N * d);
    }
    o->rmsnorm_forward(a->lnf, a->rstdf, a->x + (size_t)c->num_layers * N * d, PW(m->off_normf),
                       c->rms_norm_eps, N, d);
    LINF(a->logits, a->lnf, m->off_lmhead, NULL, N, d, c->vocab_size);
    if (c->value_head)
        LINF(a->val, a->lnf, m->off_vw, PB(m->off_vb), N, d, 1);
    return rc;
}

/* Copies tokens/mask in, checks them, sets positions and next-token targets. */
int rl_lm_prepare(rl_lm *m, int B, int T, const int32_t *tokens, const uint8_t *mask,
                  int tstride)
{
    int V = m->cfg.vocab_size;
    int64_t N = (int64_t)B * T;
    /* the host arrays, in the layout rl_lm_reserve gave the kernels' ones */
    struct {
        int32_t *tokens, *target, *pos;
        uint8_t *mask;
    } h = {(int32_t *)m->ibuf, (int32_t *)m->ibuf + N, (int32_t *)m->ibuf + 2 * N,
           (uint8_t *)((int32_t *)m->ibuf + 3 * N)},
      *a = &h;
    for (int b = 0; b < B; b++) {
        int state = 0, seen = 0; /* state: 0 before the real tokens, 1 in, 2 after */
        for (int t = 0; t < T; t++) {
            int64_t n = (int64_t)b * T + t;
            int32_t tok = tokens[(size_t)b * tstride + t];
            uint8_t mk = mask ? (mask[(size_t)b * tstride + t] != 0) : 1;
            if (mk && state == 2)
                return rl_error_set(RL_EINVAL,
                                    "lm: attn_mask row %d: real tokens are not contiguous (1 after 1..0 at t=%d)",
                                    b, t);
            state = mk ? 1 : (state == 1 ? 2 : state);
            if (mk && (tok < 0 || tok >= V))
                return rl_error_set(RL_ERANGE, "lm: token [%d,%d] = %d not in [0, %d)", b, t,
                                    (int)tok, V);
            a->tokens[n] = mk ? tok : 0;
            a->mask[n] = mk;
            a->pos[n] = seen; /* RoPE position = real tokens before t (HF cumsum − 1) */
            seen += mk;
        }
        for (int t = 0; t < T; t++) {
            int64_t n = (int64_t)b * T + t;
            a->target[n] = (t + 1 < T && a->mask[n] && a->mask[n + 1]) ? a->tokens[n + 1] : -1;
        }
    }
    if (m->dev != RL_DEVICE_CPU)
        return rl_device_copy(m->dev, m->dibuf, RL_DEVICE_CPU, m->ibuf,
                              (size_t)N * (3 * sizeof(int32_t) + sizeof(uint8_t)));
    return 0;
}

int rl_lm_forward(rl_lm *m, int B, int T, const int32_t *tokens, const uint8_t *attn_mask,
                  float temperature, float *logp, float *entropy, float *values)
{
    m->have_fwd = 0;
    if (B < 1 || T < 1 || T > m->cfg.max_seq_len)
        return rl_error_set(RL_ESHAPE, "lm forward: batch (%d, %d) must have B >= 1 and 1 <= T <= max_seq_len %d",
                            B, T, m->cfg.max_seq_len);
    if (values && !m->cfg.value_head)
        return rl_error_set(RL_EINVAL, "lm forward: values requested but cfg.value_head = 0");
    int rc = rl_lm_reserve(m, B, T);
    if (rc < 0)
        return rc;
    if ((rc = rl_lm_prepare(m, B, T, tokens, attn_mask, T)) < 0 || (rc = rl_lm_bf16_refresh(m)) < 0)
        return rc;
    rl_lm_acts *a = &m->a;
    int N = B * T;
    m->inv_temp = temperature > 0.0f ? 1.0f / temperature : 1.0f;
    if ((rc = rl_lm_forward_raw(m, B, T)) < 0)
        return rc;
    m->ops->logprob_forward(a->lp, a->ent, a->vlse, a->logits, a->target, m->inv_temp, N,
                            m->cfg.vocab_size);
    /* the per-row outputs on the host (lp, ent, val are consecutive in the arena) */
    const float *lp = a->lp, *ent = a->ent, *val = a->val;
    if (m->dev != RL_DEVICE_CPU) {
        if ((rc = rl_device_copy(RL_DEVICE_CPU, m->h_out, m->dev, a->vlse, sizeof(float) * (size_t)(4 * N))) ||
            (rc = rl_device_sync(m->dev)))
            return rc;
        ent = m->h_out + N;
        lp = m->h_out + 2 * N;
        val = m->h_out + 3 * N;
    }
    const int32_t *target = m->h_target;
    /* Shift from "row n predicts n+1" to "entry t is about token t". */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int64_t n = (int64_t)b * T + t;
            int ok = t > 0 && target[n - 1] >= 0;
            if (logp)
                logp[n] = ok ? lp[n - 1] : 0.0f;
            if (entropy)
                entropy[n] = ok ? ent[n - 1] : 0.0f;
            if (values)
                values[n] = ok ? val[n - 1] : 0.0f;
        }
    m->fB = B;
    m->fT = T;
    m->have_fwd = 1;
    return 0;
}

/* ---- backward ------------------------------------------------------------------ */

/* Zeroing and copying activation buffers on the model's device (asynchronous
 * on CUDA, in order with the kernels). */
#define S_ZERO(p, bytes) rl_device_zero(m->dev, p, bytes)
#define S_COPY(dst, src, bytes) rl_device_copy(m->dev, dst, m->dev, src, bytes)

int rl_lm_backward(rl_lm *m, const float *dlogp, const float *dentropy, const float *dvalues)
{
    if (!m->have_fwd)
        return rl_error_set(RL_ESTATE, "lm backward: no forward to differentiate");
    const rl_lm_config *c = &m->cfg;
    const rl_nn_ops *o = m->ops;
    rl_lm_acts *a = &m->a;
    int B = m->fB, T = m->fT, N = B * T, d = c->hidden_size, I = c->intermediate_size;
    int H = c->num_heads, KH = c->num_kv_heads, hd = m->hd, qd = m->qd, kvd = m->kvd;
    int V = c->vocab_size;
    int rc;

    /* Gradients w.r.t. the unshifted per-row outputs (dlp, dent, dval are
     * consecutive in the arena; on a device they are staged on the host). */
    int cpu = m->dev == RL_DEVICE_CPU;
    float *dlp = cpu ? a->dlp : m->h_out, *dent = dlp + N, *dval = dent + N;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int64_t n = (int64_t)b * T + t;
            int ok = t + 1 < T && m->h_target[n] >= 0;
            dlp[n] = ok && dlogp ? dlogp[n + 1] : 0.0f;
            dent[n] = ok && dentropy ? dentropy[n + 1] : 0.0f;
            dval[n] = ok && dvalues && c->value_head ? dvalues[n + 1] : 0.0f;
        }
    if (!cpu && (rc = rl_device_copy(m->dev, a->dlp, RL_DEVICE_CPU, dlp, sizeof(float) * (size_t)(3 * N))))
        return rc;
    o->logprob_backward(a->dlogits, a->dlp, dentropy ? a->dent : NULL, a->logits, a->vlse,
                        a->ent, a->target, m->inv_temp, N, V);
    m->have_fwd = 0; /* the logits are their gradient now: no second backward, no rl_lm_logits */
    S_ZERO(a->dln, sizeof(float) * (size_t)N * d);
    LINB(a->dln, GW(m->off_lmhead), NULL, a->dlogits, a->lnf, m->off_lmhead, N, d, V);
    if (c->value_head && dvalues)
        LINB(a->dln, GW(m->off_vw), GW(m->off_vb), a->dval, a->lnf, m->off_vw, N, d, 1);
    S_ZERO(a->dx, sizeof(float) * (size_t)N * d);
    o->rmsnorm_backward(a->dx, GW(m->off_normf), a->dln, a->x + (size_t)c->num_layers * N * d,
                        PW(m->off_normf), a->rstdf, N, d);

    for (int l = c->num_layers - 1; l >= 0; l--) {
        const rl_lm_layer_off *Lo = &m->layer[l];
        const s_layer y = s_layer_of(m, l, B, T);
        /* dx holds dL/dx_{l+1}; the residual passes it to xmid unchanged. */
        S_COPY(a->dxmid, a->dx, sizeof(float) * (size_t)N * d);
        S_ZERO(a->dh, sizeof(float) * (size_t)N * I);
        LINB(a->dh, GW(Lo->wd), NULL, a->dx, y.hmid, Lo->wd, N, I, d);
        S_ZERO(a->dgate, sizeof(float) * (size_t)N * I);
        S_ZERO(a->dup, sizeof(float) * (size_t)N * I);
        o->swiglu_backward(a->dgate, a->dup, a->dh, y.gate, y.up, (int64_t)N * I);
        S_ZERO(a->dln, sizeof(float) * (size_t)N * d);
        LINB(a->dln, GW(Lo->wg), NULL, a->dgate, y.ln2, Lo->wg, N, d, I);
        LINB(a->dln, GW(Lo->wu), NULL, a->dup, y.ln2, Lo->wu, N, d, I);
        o->rmsnorm_backward(a->dxmid, GW(Lo->ln2), a->dln, y.xmid, PW(Lo->ln2),
                            y.rstd2, N, d);
        /* attention block */
        S_COPY(a->dx, a->dxmid, sizeof(float) * (size_t)N * d);
        S_ZERO(a->datty, sizeof(float) * (size_t)N * qd);
        LINB(a->datty, GW(Lo->wo), NULL, a->dxmid, y.atty, Lo->wo, N, qd, d);
        S_ZERO(a->dq, sizeof(float) * (size_t)N * qd);
        S_ZERO(a->dk, sizeof(float) * (size_t)N * kvd);
        S_ZERO(a->dv, sizeof(float) * (size_t)N * kvd);
        if ((rc = (m->prec == RL_PRECISION_BF16 ? o->attention_backward_bf16 : o->attention_backward)(
                 a->dq, a->dk, a->dv, a->datty, y.atty, y.lse, y.q, y.k, y.v, a->mask, B, T, H, KH, hd)) < 0)
            return rc;
        /* RoPE backward in place: dq/dk w.r.t. the pre-rotation projections.
         * rope_backward accumulates, so rotate into the (now free) datty. */
        S_ZERO(a->datty, sizeof(float) * (size_t)N * qd);
        o->rope_backward(a->datty, a->dq, a->pos, N, H, hd, c->rope_theta);
        S_COPY(a->dq, a->datty, sizeof(float) * (size_t)N * qd);
        S_ZERO(a->datty, sizeof(float) * (size_t)N * kvd);
        o->rope_backward(a->datty, a->dk, a->pos, N, KH, hd, c->rope_theta);
        S_COPY(a->dk, a->datty, sizeof(float) * (size_t)N * kvd);
        S_ZERO(a->dln, sizeof(float) * (size_t)N * d);
        LINB(a->dln, GW(Lo->wq), GB(Lo->bq), a->dq, y.ln1, Lo->wq, N, d, qd);
        LINB(a->dln, GW(Lo->wk), GB(Lo->bk), a->dk, y.ln1, Lo->wk, N, d, kvd);
        LINB(a->dln, GW(Lo->wv), GB(Lo->bv), a->dv, y.ln1, Lo->wv, N, d, kvd);
        o->rmsnorm_backward(a->dx, GW(Lo->ln1), a->dln, y.x, PW(Lo->ln1),
                            y.rstd1, N, d);
    }
    o->embedding_backward(GW(m->off_embed), a->dx, a->tokens, N, d);
    return cpu ? 0 : rl_device_sync(m->dev);
}

/* ---- micro-batching ------------------------------------------------------------- */

int rl_lm_forward_backward(rl_lm *m, int B, int T, const int32_t *tokens,
                           const uint8_t *attn_mask, float temperature, int micro_batch,
                           rl_lm_loss_fn fn, void *ctx, double *loss)
{
    if (!fn)
        return rl_error_set(RL_EINVAL, "lm forward_backward: loss fn is NULL");
    if (B < 1 || T < 1)
        return rl_error_set(RL_ESHAPE, "lm forward_backward: bad batch (%d, %d)", B, T);
    int mb = micro_batch > 0 && micro_batch < B ? micro_batch : B;
    size_t full = (size_t)mb * T;
    /* Per micro-batch: trimmed tokens/mask (mb, Tm), full-width outputs and
     * gradients (mb, T) for the loss fn, trimmed gradients (mb, Tm). */
    int32_t *tok = malloc(sizeof(int32_t) * full);
    uint8_t *msk = malloc(full);
    float *buf = calloc(9 * full, sizeof(float));
    if (!tok || !msk || !buf) {
        free(tok);
        free(msk);
        free(buf);
        return rl_error_set(RL_ENOMEM, "lm forward_backward: out of memory");
    }
    float *lp = buf, *en = lp + full, *va = en + full;
    float *dlp = va + full, *den = dlp + full, *dva = den + full;
    float *tlp = dva + full, *ten = tlp + full, *tva = ten + full;
    int rc = 0;
    double total = 0.0;
    for (int r0 = 0; r0 < B && rc == 0; r0 += mb) {
        int nb = B - r0 < mb ? B - r0 : mb;
        int Tm = 1;
        for (int b = 0; b < nb; b++) {
            int len = T; /* one past the last real token */
            if (attn_mask)
                while (len > 0 && !attn_mask[(size_t)(r0 + b) * T + len - 1])
                    len--;
            Tm = len > Tm ? len : Tm;
        }
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < Tm; t++) {
                size_t s = (size_t)(r0 + b) * T + t;
                tok[(size_t)b * Tm + t] = tokens[s];
                msk[(size_t)b * Tm + t] = attn_mask ? attn_mask[s] != 0 : 1;
            }
        int vh = m->cfg.value_head;
        rc = rl_lm_forward(m, nb, Tm, tok, msk, temperature, tlp, ten, vh ? tva : NULL);
        if (rc < 0)
            break;
        memset(buf, 0, sizeof(float) * 6 * full);
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < Tm; t++) {
                lp[(size_t)b * T + t] = tlp[(size_t)b * Tm + t];
                en[(size_t)b * T + t] = ten[(size_t)b * Tm + t];
                va[(size_t)b * T + t] = vh ? tva[(size_t)b * Tm + t] : 0.0f;
            }
        rc = fn(ctx, r0, nb, T, lp, en, vh ? va : NULL, dlp, den, vh ? dva : NULL, &total);
        if (rc < 0)
            break;
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < Tm; t++) {
                tlp[(size_t)b * Tm + t] = dlp[(size_t)b * T + t];
                ten[(size_t)b * Tm + t] = den[(size_t)b * T + t];
                tva[(size_t)b * Tm + t] = dva[(size_t)b * T + t];
            }
        rc = rl_lm_backward(m, tlp, ten, vh ? tva : NULL);
    }
    free(tok);
    free(msk);
    free(buf);
    if (loss)
        *loss = total;
    return rc;
}

double rl_lm_masked_nll(const float *logp, const uint8_t *loss_mask, int64_t n, double denom,
                        float *dlogp)
{
    if (denom <= 0.0) {
        denom = 0.0;
        for (int64_t i = 0; i < n; i++)
            denom += loss_mask ? loss_mask[i] != 0 : 1;
        if (denom == 0.0)
            denom = 1.0;
    }
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int on = loss_mask ? loss_mask[i] != 0 : 1;
        if (on)
            s -= logp[i];
        if (dlogp)
            dlogp[i] = on ? (float)(-1.0 / denom) : 0.0f;
    }
    return s / denom;
}
