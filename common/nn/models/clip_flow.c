/* clip_flow.c — the rectified-flow clip generator kind of rl_model (see
 * common/nn/models/clip_flow.h): the velocity network with its backward, the
 * flow-matching and SDE-chain quantities, ODE/SDE sampling and the model:
 * section. */
#include "common/nn/models/clip_flow.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/engine/ops.h"
#include "common/nn/models/model_device.h"
#include "common/nn/models/flow_chain_internal.h"
#include "common/nn/models/flow_conv_internal.h"
#include "common/nn/models/flow_mlp_internal.h"
#include "common/nn/models/model_base.h"
#include "common/schema/model.h"
#include "common/sde/diffusion_sde.h"
#include "rlrt/error.h"

typedef struct s_cf {
    rl_model_base base; /* the manifest: the trunk's head, prompt.embedding, its tail */
    rl_clip_flow_config c;
    int64_t D;
    int hidden, prompts, x0_pred; /* of c */
    int rows;            /* rows of prompt.embedding: prompts, + 1 with the null prompt */
    float guidance;      /* model.guidance w: 1 = one plain pass */
    int conv;            /* model.trunk conv: tc, not t */
    rl_flow_mlp t;       /* the trunk: views in, time, blocks, out; activations */
    rl_flow_conv tc;     /* the conv trunk: views time, conv.*, cond.*; activations */
    int64_t n;           /* rows of the last forward */
    int64_t emb;         /* offset of prompt.embedding */
    int64_t dcap;
    const int32_t *ids;  /* borrowed ids of the last forward */
    float *dout;         /* (n, D): dL/d(network output) with x0-prediction */
    const float *sig;    /* borrowed σ of the last forward */
    /* guidance (w != 1): the doubled batch of the last guided forward
     * [rows with their prompts; the same rows with the null prompt] */
    int guided;          /* the last forward was s_guided_forward's */
    int64_t gn, gcap;    /* its rows n (the pass has 2n); capacity in rows */
    float *gx, *gs, *gv; /* (2n, D), (2n), (2n, D): x, σ, the two velocities */
    float *gdv;          /* (2n, D): the two velocities' gradients */
    int32_t *gid;        /* (2n) */
    /* on a device: the copies of x, σ, v / dv (one block from io), the ids
     * and the gathered prompt rows (n, Hd) */
    int64_t iocap;
    float *io, *dsig, *dv, *demb;
    int32_t *dids;
} s_cf;

static const rl_model_ops s_ops;

static s_cf *s_of(rl_model *m) { return (s_cf *)m; }

/* its model.* sections (rl_model_kind.sections) */
static const rl_config_section *const s_sections[] = {
    &rl_model_base_section, &rl_image_size_section, &rl_clip_flow_model_section, NULL};

const rl_clip_flow_config *rl_clip_flow_get_config(const rl_model *m)
{
    return m && m->ops == &s_ops ? &((const s_cf *)m)->c : NULL;
}

int64_t rl_clip_flow_dim(const rl_clip_flow_config *c)
{
    return c->net.frames * c->size.channels * c->size.height * c->size.width;
}

/* ---- the network ------------------------------------------------------------------------ */

/* The σ of the x0-prediction's division (common/nn/models/clip_flow.h). */
static float s_sig_floor(float sigma)
{
    return sigma > RL_CLIP_FLOW_SIGMA_MIN ? sigma : RL_CLIP_FLOW_SIGMA_MIN;
}

static int s_reserve(s_cf *m, int64_t n)
{
    int rc = m->conv ? rl_flow_conv_reserve(&m->tc, n, "clip_flow") : rl_flow_mlp_reserve(&m->t, n, "clip_flow");
    if (rc || n <= m->dcap)
        return rc;
    free(m->dout);
    m->dout = malloc(sizeof(float) * (size_t)(n * m->D));
    m->dcap = m->dout ? n : 0;
    return m->dout ? RL_OK
                   : rl_error_set(RL_ENOMEM, "clip_flow: out of memory for %lld rows of activations",
                                  (long long)n);
}

static void s_io_free(s_cf *m, rl_device dev)
{
    if (dev != RL_DEVICE_CPU) {
        rl_model_floats_free(dev, m->io);
        rl_device_free(dev, m->dids);
    }
    m->io = m->dsig = m->dv = m->demb = NULL;
    m->dids = NULL;
    m->iocap = 0;
}

/* With x0-prediction the output is x̂0: v (n, D) = (x − x̂0) / max(σ, σ_min)
 * in place (host arrays). */
static void s_from_x0(const s_cf *m, int64_t n, const float *x, const float *sigma, float *v)
{
    const int64_t D = m->D;
    if (m->x0_pred)
        for (int64_t r = 0; r < n; r++) {
            float inv = 1.0f / s_sig_floor(sigma[r]);
            for (int64_t j = 0; j < D; j++)
                v[r * D + j] = (x[r * D + j] - v[r * D + j]) * inv;
        }
}

/* The trunk (either) on a device: v (n, D) on the host from the host's x,
 * σ and ids, copied in and out around the kernels (the x0-prediction's
 * elementwise step stays on the host). */
static int s_trunk_dev(s_cf *m, int64_t n, const float *x, const float *sigma, const int32_t *ids,
                       float *v)
{
    const rl_device dev = m->base.dev;
    const rl_nn_ops *nn = m->base.nn;
    const int64_t D = m->D, nH = n * m->hidden;
    int rc = RL_OK;
    if (n > m->iocap) {
        s_io_free(m, dev);
        float **const arrays[4] = {&m->io, &m->dsig, &m->dv, &m->demb};
        const size_t counts[4] = {(size_t)(n * D), (size_t)n, (size_t)(n * D), (size_t)nH};
        if (!(rc = rl_model_floats_on(dev, arrays, counts, 4, "clip_flow")) &&
            !(m->dids = rl_device_alloc_for(dev, sizeof(int32_t) * (size_t)n, RL_MEM_ACTIVATIONS)))
            rc = rl_error_set(RL_ENOMEM, "clip_flow: no room for %lld prompt ids on %s", (long long)n,
                              rl_device_name(dev));
        if (rc) {
            s_io_free(m, dev);
            return rc;
        }
        m->iocap = n;
    }
    if ((rc = rl_model_copy_in(dev, m->io, x, sizeof(float) * (size_t)(n * D))) ||
        (rc = rl_model_copy_in(dev, m->dsig, sigma, sizeof(float) * (size_t)n)) ||
        (rc = rl_model_copy_in(dev, m->dids, ids, sizeof(int32_t) * (size_t)n)))
        return rc;
    const float *P = m->base.params;
    float *cond;
    if (m->conv) {
        rl_flow_conv_cond(&m->tc, P, n, m->dsig);
        cond = m->tc.cond;
    } else {
        rl_flow_mlp_cond(&m->t, P, n, m->dsig);
        cond = m->t.cond;
    }
    nn->embedding_forward(m->demb, m->dids, P + m->emb, (int)n, m->hidden);
    nn->add_inplace(cond, m->demb, nH); /* cond += prompt.embedding[id] */
    if (m->conv)
        rc = rl_flow_conv_trunk(&m->tc, P, m->io, m->dv);
    else
        rl_flow_mlp_trunk(&m->t, P, m->io, m->dv);
    int oc = rl_model_copy_out(dev, v, m->dv, sizeof(float) * (size_t)(n * D));
    return rc ? rc : oc;
}

/* v (n, D) from x (n, D), sigma (n), ids (n); keeps the activations. */
static int s_net_forward(s_cf *m, int64_t n, const float *x, const float *sigma,
                         const int32_t *ids, float *v)
{
    int rc = s_reserve(m, n > 0 ? n : 1);
    if (rc)
        return rc;
    const int Hd = m->hidden;
    const float *P = m->base.params;
    m->ids = ids;
    m->n = n;
    if (m->base.dev != RL_DEVICE_CPU) {
        if ((rc = s_trunk_dev(m, n, x, sigma, ids, v)))
            return rc;
        m->sig = sigma;
        s_from_x0(m, n, x, sigma, v);
        return RL_OK;
    }
    float *cond;
    if (m->conv) {
        rl_flow_conv_cond(&m->tc, P, n, sigma);
        cond = m->tc.cond;
    } else {
        rl_flow_mlp_cond(&m->t, P, n, sigma);
        cond = m->t.cond;
    }
    for (int64_t r = 0; r < n; r++) {
        const float *e = P + m->emb + (int64_t)ids[r] * Hd;
        float *c = cond + r * Hd;
        for (int j = 0; j < Hd; j++)
            c[j] += e[j];
    }
    if (m->conv)
        rc = rl_flow_conv_trunk(&m->tc, P, x, v);
    else
        rl_flow_mlp_trunk(&m->t, P, x, v);
    if (rc)
        return rc;
    m->sig = sigma;
    s_from_x0(m, n, x, sigma, v);
    return RL_OK;
}

/* Accumulates the parameter gradients of Σ dv·v for the last forward
 * (RL_ENOMEM from the conv trunk's scratch). */
static int s_net_backward(s_cf *m, const float *dv)
{
    const int D = (int)m->D;
    if (m->x0_pred) { /* v = (x − o) / max(σ, σ_min): do = −dv / max(σ, σ_min) */
        for (int64_t r = 0; r < m->n; r++) {
            float inv = -1.0f / s_sig_floor(m->sig[r]);
            for (int j = 0; j < D; j++)
                m->dout[r * D + j] = dv[r * D + j] * inv;
        }
        dv = m->dout;
    }
    float *dcond;
    if (m->base.dev != RL_DEVICE_CPU) { /* dv to the device; the prompt rows' gradients there */
        int rc = rl_model_copy_in(m->base.dev, m->dv, dv, sizeof(float) * (size_t)(m->n * D));
        if (rc)
            return rc;
        if (m->conv) {
            if ((rc = rl_flow_conv_backward(&m->tc, m->base.params, m->base.grads, m->dv, &dcond)))
                return rc;
        } else {
            dcond = rl_flow_mlp_backward(&m->t, m->base.params, m->base.grads, m->dv);
        }
        m->base.nn->embedding_backward(m->base.grads + m->emb, dcond, m->dids, (int)m->n, m->hidden);
        return RL_OK;
    }
    if (m->conv) {
        int rc = rl_flow_conv_backward(&m->tc, m->base.params, m->base.grads, dv, &dcond);
        if (rc)
            return rc;
    } else {
        dcond = rl_flow_mlp_backward(&m->t, m->base.params, m->base.grads, dv);
    }
    /* cond = time(temb) + prompt.embedding[id] */
    rl_embedding_backward(m->base.grads + m->emb, dcond, m->ids, (int)m->n, m->hidden);
    return RL_OK;
}

/* The velocity of sampling and of the SDE chain: with guidance w != 1,
 * v = v_null + w·(v_prompt − v_null) from one pass over 2n rows (the rows,
 * then the same rows with the null prompt); else the plain pass. */
static int s_guided_forward(s_cf *m, int64_t n, const float *x, const float *sigma,
                            const int32_t *ids, float *v)
{
    m->guided = 0;
    if (m->guidance == 1.0f)
        return s_net_forward(m, n, x, sigma, ids, v);
    const int64_t D = m->D, n2 = 2 * (n > 0 ? n : 1);
    if (n2 > m->gcap) {
        free(m->gx), free(m->gs), free(m->gv), free(m->gdv), free(m->gid);
        m->gx = malloc(sizeof(float) * (size_t)(n2 * D));
        m->gv = malloc(sizeof(float) * (size_t)(n2 * D));
        m->gdv = malloc(sizeof(float) * (size_t)(n2 * D));
        m->gs = malloc(sizeof(float) * (size_t)n2);
        m->gid = malloc(sizeof(int32_t) * (size_t)n2);
        m->gcap = m->gx && m->gv && m->gdv && m->gs && m->gid ? n2 : 0;
        if (!m->gcap)
            return rl_error_set(RL_ENOMEM, "clip_flow: out of memory for %lld guided rows",
                                (long long)n2);
    }
    for (int64_t h = 0; h < 2; h++) {
        memcpy(m->gx + h * n * D, x, sizeof(float) * (size_t)(n * D));
        memcpy(m->gs + h * n, sigma, sizeof(float) * (size_t)n);
    }
    for (int64_t r = 0; r < n; r++) {
        m->gid[r] = ids[r];
        m->gid[n + r] = m->prompts; /* the null prompt */
    }
    int rc = s_net_forward(m, 2 * n, m->gx, m->gs, m->gid, m->gv);
    if (rc)
        return rc;
    const float w = m->guidance, *vc = m->gv, *vu = m->gv + n * D;
    for (int64_t i = 0; i < n * D; i++)
        v[i] = vu[i] + w * (vc[i] - vu[i]);
    m->guided = 1;
    m->gn = n;
    return RL_OK;
}

/* s_net_backward of the last s_guided_forward: dv_prompt = w·dv,
 * dv_null = (1 − w)·dv. */
static int s_guided_backward(s_cf *m, const float *dv)
{
    if (!m->guided)
        return s_net_backward(m, dv);
    const int64_t nd = m->gn * m->D;
    const float w = m->guidance;
    for (int64_t i = 0; i < nd; i++) {
        m->gdv[i] = w * dv[i];
        m->gdv[nd + i] = (1.0f - w) * dv[i];
    }
    return s_net_backward(m, m->gdv);
}

int rl_clip_flow_velocity(rl_model *m, int64_t n, const float *x, const float *sigma,
                          const int32_t *ids, float *v)
{
    s_cf *cf = m && m->ops == &s_ops ? s_of(m) : NULL;
    if (!cf)
        return rl_error_set(RL_EINVAL, "rl_clip_flow_velocity: not a clip_flow model");
    for (int64_t r = 0; r < n; r++)
        if (ids[r] < 0 || ids[r] >= cf->rows)
            return rl_error_set(RL_ERANGE, "clip_flow: prompt id %d of row %lld outside [0, %d)",
                                ids[r], (long long)r, cf->rows);
    return s_net_forward(cf, n, x, sigma, ids, v);
}

/* ---- batch checks ----------------------------------------------------------------------------- */

/* The prompt of each row: ids (B) i32 in [0, num_prompts). */
static int s_ids_read(const s_cf *m, const rl_dataproto *in, const char *what, int64_t *B,
                      const int32_t **ids)
{
    *B = -1;
    return rl_model_input_ids(in, what, RL_CF_PROMPT_IDS, m->rows,
                              RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, num_prompts),
                              B, ids);
}

/* The flow-matching inputs: ids, x_t (B, D), sigma (B). */
static int s_fm_read(const s_cf *m, const rl_dataproto *in, const char *what, int64_t *B,
                     const int32_t **ids, const float **x, const float **sig)
{
    int rc = s_ids_read(m, in, what, B, ids);
    return rc ? rc : rl_flow_fm_read(in, what, RL_CF_X_T, RL_CF_SIGMA, *B, m->D, x, sig);
}

/* A recorded chain: the latents on the σ grid, re-scored with Flow-GRPO's SDE. */
static const rl_flow_chain_kind s_chain_kind = {RL_CF_LATENTS, RL_CF_SIGMAS, RL_CF_NOISE_LEVEL,
                                                RL_CF_STEP_MASK, rl_diffusion_sde_logprob};

/* The σ grid of every row runs from <= 1 down to >= 0, strictly; the noise
 * levels are > 0; the mask is 0/1. */
static int s_chain_check(const rl_flow_chain *c, const char *what)
{
    int rc = RL_OK;
    for (int64_t b = 0; !rc && b < c->B; b++) {
        const float *s = c->t + b * (c->N + 1);
        if (!(s[0] <= 1.0f) || !(s[c->N] >= 0.0f))
            rc = rl_error_set(RL_ERANGE, "%s: %s row %lld must run from <= 1 down to >= 0, got "
                                         "%g .. %g", what, RL_CF_SIGMAS, (long long)b, (double)s[0],
                              (double)s[c->N]);
        for (int64_t k = 0; !rc && k < c->N; k++)
            if (!(s[k + 1] < s[k]))
                rc = rl_error_set(RL_ERANGE, "%s: %s row %lld is not strictly decreasing at step "
                                             "%lld (%g then %g)", what, RL_CF_SIGMAS, (long long)b,
                                  (long long)k, (double)s[k], (double)s[k + 1]);
        if (!rc && !(c->noise[b] > 0.0f && isfinite(c->noise[b])))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g: an SDE chain needs a finite noise "
                                         "level > 0 (an ODE sample has no log-prob)", what,
                              RL_CF_NOISE_LEVEL, (long long)b, (double)c->noise[b]);
        for (int64_t k = 0; !rc && c->mask && k < c->N; k++) {
            float v = c->mask[b * c->N + k];
            if (v != 0.0f && v != 1.0f)
                rc = rl_error_set(RL_ERANGE, "%s: %s[%lld, %lld] = %g is not 0 or 1", what,
                                  RL_CF_STEP_MASK, (long long)b, (long long)k, (double)v);
        }
    }
    return rc;
}

/* A pass over a recorded chain: its prompts, the chain and the buffers of
 * one micro-batch. */
typedef struct s_logp {
    s_cf *m;
    const int32_t *ids; /* (B) */
    rl_flow_chain c;
    int64_t mb;
    rl_flow_work w;
    int32_t *pids; /* (pairs) the prompt of each scored step */
} s_logp;

static void s_logp_free(s_logp *p)
{
    rl_flow_work_free(&p->w);
    free(p->pids);
}

static int s_logp_open(s_cf *m, const rl_dataproto *in, const rl_model_pass *pass, const char *what,
                       s_logp *p)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    int64_t B;
    int rc = s_ids_read(m, in, what, &B, &p->ids);
    if (!rc)
        rc = rl_flow_chain_read(in, what, &s_chain_kind, B, m->D, &p->c);
    if (!rc)
        rc = s_chain_check(&p->c, what);
    if (rc)
        return rc;
    p->mb = rl_model_micro_rows(pass, B);
    if ((rc = rl_flow_work_alloc(&p->w, p->mb, p->c.N, m->D, "clip_flow")))
        return rc;
    p->pids = malloc(sizeof(int32_t) * (size_t)(p->mb * p->c.N));
    return p->pids ? RL_OK : rl_error_set(RL_ENOMEM, "%s: out of memory", what);
}

/* The chain's velocities (rl_flow_chain_vel_fn): the network at the scored
 * steps with their rows' prompts. */
static int s_logp_vel(void *kind, int64_t n, const int64_t *rows, const float *x, const float *sig,
                      float *v)
{
    s_logp *p = kind;
    for (int64_t i = 0; i < n; i++)
        p->pids[i] = p->ids[rows[i]];
    return s_guided_forward(p->m, n, x, sig, p->pids, v);
}

/* ---- forward ------------------------------------------------------------------------------- */

static int s_check_want(unsigned want, const char *what)
{
    unsigned ok = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY);
    if (!want || (want & ~ok) || want == ok)
        return rl_error_set(RL_EUNSUPPORTED, "%s: a clip_flow pass computes either logp (an SDE "
                                             "chain) or velocity (flow matching), got mask 0x%x",
                            what, want);
    return RL_OK;
}

static int s_forward_velocity(s_cf *m, const rl_dataproto *batch, const rl_model_pass *pass,
                              const char *what, rl_dataproto **out)
{
    int64_t B;
    const int32_t *ids;
    const float *x, *sig;
    int rc = s_fm_read(m, batch, what, &B, &ids, &x, &sig);
    if (rc)
        return rc;
    rl_model_output spec = {rl_quantity_name(RL_Q_VELOCITY), RL_F32, 2, {B, m->D}};
    rl_tensor *t;
    rl_dataproto *o = rl_model_outputs(&spec, 1, &t);
    if (!o)
        return rl_error_code();
    int64_t mb = rl_model_micro_rows(pass, B);
    for (int64_t r0 = 0; !rc && r0 < B; r0 += mb) {
        int64_t rows = B - r0 < mb ? B - r0 : mb;
        rc = s_net_forward(m, rows, x + r0 * m->D, sig + r0, ids + r0,
                           (float *)rl_tensor_data(t) + r0 * m->D);
    }
    return rl_model_give(o, rc, out);
}

static int s_forward_logp(s_cf *m, const rl_dataproto *batch, const rl_model_pass *pass,
                          const char *what, rl_dataproto **out)
{
    s_logp p;
    int rc = s_logp_open(m, batch, pass, what, &p);
    rl_model_output spec = {rl_quantity_name(RL_Q_LOGP), RL_F32, 2, {p.c.B, p.c.N}};
    rl_tensor *t = NULL;
    rl_dataproto *o = rc ? NULL : rl_model_outputs(&spec, 1, &t);
    if (!rc && !o)
        rc = rl_error_code();
    for (int64_t r0 = 0; !rc && r0 < p.c.B; r0 += p.mb) {
        int64_t rows = p.c.B - r0 < p.mb ? p.c.B - r0 : p.mb, n;
        if (!(rc = rl_flow_chain_forward(&p.c, s_logp_vel, &p, r0, rows, &p.w, &n)))
            memcpy((float *)rl_tensor_data(t) + r0 * p.c.N, p.w.q, sizeof(float) * (size_t)(rows * p.c.N));
    }
    s_logp_free(&p);
    return rl_model_give(o, rc, out);
}

static int s_forward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    const char *what = "clip_flow forward";
    int rc = s_check_want(want, what);
    if (rc)
        return rc;
    return (want & RL_Q_BIT(RL_Q_VELOCITY)) ? s_forward_velocity(s_of(mm), batch, pass, what, out)
                                            : s_forward_logp(s_of(mm), batch, pass, what, out);
}

/* ---- forward + backward ------------------------------------------------------------------------- */

static int s_fb_velocity(s_cf *m, const rl_dataproto *batch, const rl_model_pass *pass,
                         rl_model_loss_fn fn, void *ctx, double *loss, const char *what)
{
    int64_t B;
    const int32_t *ids;
    const float *x, *sig;
    int rc = s_fm_read(m, batch, what, &B, &ids, &x, &sig);
    if (rc || B == 0)
        return rc;
    int64_t mb = rl_model_micro_rows(pass, B), D = m->D;
    float *v = malloc(sizeof(float) * (size_t)(mb * D)), *gv = malloc(sizeof(float) * (size_t)(mb * D));
    if (!v || !gv)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    for (int64_t r0 = 0; !rc && r0 < B; r0 += mb) {
        int64_t rows = B - r0 < mb ? B - r0 : mb;
        rc = s_net_forward(m, rows, x + r0 * D, sig + r0, ids + r0, v);
        if (rc)
            break;
        if ((rc = rl_model_loss_one(fn, ctx, RL_Q_VELOCITY, r0, rows, D, v, NULL, gv, loss)))
            break;
        rc = s_net_backward(m, gv);
    }
    free(v);
    free(gv);
    return rc;
}

static int s_fb_logp(s_cf *m, const rl_dataproto *batch, const rl_model_pass *pass,
                     rl_model_loss_fn fn, void *ctx, double *loss, const char *what)
{
    s_logp p;
    int rc = s_logp_open(m, batch, pass, what, &p);
    const int64_t N = p.c.N;
    for (int64_t r0 = 0; !rc && r0 < p.c.B; r0 += p.mb) {
        int64_t rows = p.c.B - r0 < p.mb ? p.c.B - r0 : p.mb, n = 0;
        if ((rc = rl_flow_chain_forward(&p.c, s_logp_vel, &p, r0, rows, &p.w, &n)))
            break;
        if ((rc = rl_model_loss_one(fn, ctx, RL_Q_LOGP, r0, rows, N, p.w.q, p.w.qmask, p.w.gq, loss)) ||
            n == 0)
            continue;
        if (!(rc = rl_flow_chain_backward(&p.c, r0, n, &p.w)))
            rc = s_guided_backward(m, p.w.gv);
    }
    s_logp_free(&p);
    return rc;
}

static int s_forward_backward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    const char *what = "clip_flow forward_backward";
    int rc = s_check_want(want, what);
    if (rc)
        return rc;
    return (want & RL_Q_BIT(RL_Q_VELOCITY)) ? s_fb_velocity(s_of(mm), batch, pass, fn, ctx, loss, what)
                                            : s_fb_logp(s_of(mm), batch, pass, fn, ctx, loss, what);
}

/* ---- sampling ------------------------------------------------------------------------------------ */

static int s_sample(rl_model *mm, const rl_dataproto *in, const rl_model_sampling *sp,
                    rl_dataproto **out)
{
    s_cf *m = s_of(mm);
    const char *what = "clip_flow sample";
    int64_t B;
    const int32_t *ids;
    int rc = s_ids_read(m, in, what, &B, &ids);
    if (rc)
        return rc;
    const int64_t dn[1] = {B}, D = m->D, N = sp->num_steps;
    const rl_tensor *tn = rl_model_input(in, what, RL_CF_NOISE_SEEDS, RL_I64, 1, dn);
    const rl_tensor *tr = tn ? rl_model_input(in, what, RL_CF_ROW_SEEDS, RL_I64, 1, dn) : NULL;
    if (!tr)
        return rl_error_code();
    double noise;
    if ((rc = rl_flow_sample_noise(sp, what, &noise)))
        return rc;
    double shift = sp->shift > 0 ? sp->shift : 1.0;
    const rl_model_output spec[5] = {{RL_CF_LATENTS, RL_F32, 3, {B, N + 1, D}},
                                     {RL_CF_SIGMAS, RL_F32, 2, {B, N + 1}},
                                     {RL_CF_SAMPLE_LOGP, RL_F32, 2, {B, N}},
                                     {RL_CF_NOISE_LEVEL, RL_F32, 1, {B}},
                                     {RL_CF_FINAL_MEAN, RL_F32, 2, {B, D}}};
    rl_tensor *t[5];
    rl_dataproto *o = rl_model_outputs(spec, 5, t);
    float *grid = malloc(sizeof(float) * (size_t)(N + 1));
    size_t bd = (size_t)(B > 0 ? B : 1) * (size_t)D;
    float *x = malloc(sizeof(float) * bd), *v = malloc(sizeof(float) * bd);
    float *eps = malloc(sizeof(float) * bd), *sg = malloc(sizeof(float) * (size_t)(B + 1));
    float *sn = malloc(sizeof(float) * (size_t)(B + 1)), *lp = malloc(sizeof(float) * (size_t)(B + 1));
    if (!o || !grid || !x || !v || !eps || !sg || !sn || !lp) {
        rc = o ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
        goto done;
    }
    if ((rc = rl_diffusion_sigmas(N, shift, grid)))
        goto done;
    float *L = rl_tensor_data(t[0]), *S = rl_tensor_data(t[1]), *Q = rl_tensor_data(t[2]);
    float *NL = rl_tensor_data(t[3]), *M = rl_tensor_data(t[4]);
    const int64_t *nseed = rl_tensor_data((rl_tensor *)tn), *rseed = rl_tensor_data((rl_tensor *)tr);
    for (int64_t b = 0; b < B; b++) {
        rl_flow_normal((uint64_t)nseed[b], 0, D, x + b * D);
        memcpy(S + b * (N + 1), grid, sizeof(float) * (size_t)(N + 1));
        NL[b] = (float)noise;
    }
    for (int64_t k = 0; k < N && !rc; k++) {
        for (int64_t b = 0; b < B; b++) {
            memcpy(L + (b * (N + 1) + k) * D, x + b * D, sizeof(float) * (size_t)D);
            sg[b] = grid[k];
            sn[b] = grid[k + 1];
        }
        if (B == 0)
            break;
        if ((rc = s_guided_forward(m, B, x, sg, ids, v)))
            break;
        if (k == N - 1) { /* the last step's ODE mean: its x0-prediction when σ_N = 0 */
            float dt = grid[k + 1] - grid[k];
            for (int64_t i = 0; i < B * D; i++)
                M[i] = x[i] + dt * v[i];
        }
        if (sp->greedy) {
            float dt = grid[k + 1] - grid[k];
            for (int64_t i = 0; i < B * D; i++)
                x[i] += dt * v[i];
            for (int64_t b = 0; b < B; b++)
                Q[b * N + k] = 0.0f;
            continue;
        }
        for (int64_t b = 0; b < B; b++)
            rl_flow_normal((uint64_t)rseed[b], (uint64_t)k + 1, D, eps + b * D);
        /* x_next lands in v's buffer, then swaps in */
        rc = rl_diffusion_sde_step(x, v, sg, sn, noise, eps, B, D, v, lp);
        if (rc)
            break;
        float *tmp = x;
        x = v;
        v = tmp;
        for (int64_t b = 0; b < B; b++)
            Q[b * N + k] = lp[b];
    }
    for (int64_t b = 0; !rc && b < B; b++)
        memcpy(L + (b * (N + 1) + N) * D, x + b * D, sizeof(float) * (size_t)D);
done:
    free(grid);
    free(x);
    free(v);
    free(eps);
    free(sg);
    free(sn);
    free(lp);
    return rl_model_give(o, rc, out);
}

/* ---- the rest of the interface ----------------------------------------------------------------------- */

static void s_free(rl_model *mm)
{
    s_cf *m = s_of(mm);
    rl_model_base_free(&m->base);
    s_io_free(m, m->base.dev);
    rl_flow_mlp_free(&m->t);
    rl_flow_conv_free(&m->tc);
    free(m->dout);
    free(m->gx), free(m->gs), free(m->gv), free(m->gdv), free(m->gid);
    free(m);
}

/* The buffers move (rl_model_base_move) and the trunk with them (either:
 * its activations are re-made on the new device by the next pass). */
static int s_to_device(rl_model *mm, int dev)
{
    s_cf *m = s_of(mm);
    rl_device from = m->base.dev;
    if ((rl_device)dev == from)
        return RL_OK;
    int rc = rl_model_base_move(&m->base, (rl_device)dev);
    if (rc)
        return rc;
    s_io_free(m, from);
    if (m->conv)
        rl_flow_conv_on(&m->tc, m->base.dev, m->base.nn);
    else
        rl_flow_mlp_on(&m->t, m->base.dev, m->base.nn);
    return RL_OK;
}

/* The sizes from the job's image size and network, then the views: the
 * trunk's head, prompt.embedding, its tail. */
static int s_build(rl_model_base *b)
{
    s_cf *m = (s_cf *)b;
    const rl_clip_flow_model_config *net = &m->c.net;
    m->D = rl_clip_flow_dim(&m->c);
    m->hidden = (int)net->hidden_size;
    m->prompts = (int)net->num_prompts;
    m->rows = m->prompts + (net->null_prompt ? 1 : 0);
    m->guidance = (float)net->guidance;
    m->x0_pred = net->prediction == RL_CLIP_FLOW_PREDICT_X0;
    m->conv = net->trunk == RL_CLIP_FLOW_TRUNK_CONV;
    if (m->conv) { /* the conv trunk's head (time), prompt.embedding, its tail */
        int rc = rl_flow_conv_init(&m->tc, (int)(net->frames * m->c.size.channels), (int)m->c.size.height,
                                   (int)m->c.size.width, (int)net->conv_channels, m->hidden,
                                   (int)net->time_embed_dim, "clip_flow");
        if (!rc && !(rc = rl_flow_conv_add_head(&m->tc, b)) &&
            !(rc = rl_model_base_add(b, "prompt.embedding", 2, m->rows, m->hidden, &m->emb)))
            rc = rl_flow_conv_add_tail(&m->tc, b);
        return rc;
    }
    int rc = rl_flow_mlp_init(&m->t, (int)m->D, m->hidden, (int)net->num_layers, (int)net->time_embed_dim,
                              "clip_flow");
    if (!rc && !(rc = rl_flow_mlp_add_head(&m->t, b)) &&
        !(rc = rl_model_base_add(b, "prompt.embedding", 2, m->rows, m->hidden, &m->emb)))
        rc = rl_flow_mlp_add_tail(&m->t, b);
    return rc;
}

static const rl_model_base_kind s_base = {sizeof(s_cf), &s_ops, s_sections,
                                          {offsetof(s_cf, c.size), offsetof(s_cf, c.net)}, s_build};

static rl_model *s_from_config(const rl_config *job) { return rl_model_base_build(job, &s_base); }

/* Linear weights N(0, 1/fan_in), biases 0, the prompt table N(0, 1): the
 * base's rule. */
static const rl_model_ops s_ops = {
    .kind = "clip_flow",
    .free = s_free,
    RL_MODEL_BASE_KIND_OPS,
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
    .device = rl_model_base_device,
    .to_device = s_to_device,
};

const rl_model_kind rl_model_kind_clip_flow = {
    .name = "clip_flow",
    .sections = s_sections,
    .from_config = s_from_config,
};
