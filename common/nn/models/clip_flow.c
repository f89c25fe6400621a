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

#include "common/core/rng.h"
#include "common/nn/engine/ops.h"
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
    rl_flow_mlp t;       /* the trunk: views in, time, blocks, out; activations */
    int64_t emb;         /* offset of prompt.embedding */
    int64_t dcap;
    const int32_t *ids;  /* borrowed ids of the last forward */
    float *dout;         /* (n, D): dL/d(network output) with x0-prediction */
    const float *sig;    /* borrowed σ of the last forward */
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
    int rc = rl_flow_mlp_reserve(&m->t, n, "clip_flow");
    if (rc || n <= m->dcap)
        return rc;
    free(m->dout);
    m->dout = malloc(sizeof(float) * (size_t)(n * m->D));
    m->dcap = m->dout ? n : 0;
    return m->dout ? RL_OK
                   : rl_error_set(RL_ENOMEM, "clip_flow: out of memory for %lld rows of activations",
                                  (long long)n);
}

/* v (n, D) from x (n, D), sigma (n), ids (n); keeps the activations. */
static int s_net_forward(s_cf *m, int64_t n, const float *x, const float *sigma,
                         const int32_t *ids, float *v)
{
    int rc = s_reserve(m, n > 0 ? n : 1);
    if (rc)
        return rc;
    const int Hd = m->hidden, D = (int)m->D;
    const float *P = m->base.params;
    m->ids = ids;
    rl_flow_mlp_cond(&m->t, P, n, sigma);
    for (int64_t r = 0; r < n; r++) {
        const float *e = P + m->emb + (int64_t)ids[r] * Hd;
        float *c = m->t.cond + r * Hd;
        for (int j = 0; j < Hd; j++)
            c[j] += e[j];
    }
    rl_flow_mlp_trunk(&m->t, P, x, v);
    m->sig = sigma;
    if (m->x0_pred) /* the output is x̂0: v = (x − x̂0) / max(σ, σ_min) */
        for (int64_t r = 0; r < n; r++) {
            float inv = 1.0f / s_sig_floor(sigma[r]);
            for (int j = 0; j < D; j++)
                v[r * D + j] = (x[r * D + j] - v[r * D + j]) * inv;
        }
    return RL_OK;
}

/* Accumulates the parameter gradients of Σ dv·v for the last forward. */
static void s_net_backward(s_cf *m, const float *dv)
{
    const int D = (int)m->D;
    if (m->x0_pred) { /* v = (x − o) / max(σ, σ_min): do = −dv / max(σ, σ_min) */
        for (int64_t r = 0; r < m->t.n; r++) {
            float inv = -1.0f / s_sig_floor(m->sig[r]);
            for (int j = 0; j < D; j++)
                m->dout[r * D + j] = dv[r * D + j] * inv;
        }
        dv = m->dout;
    }
    float *dcond = rl_flow_mlp_backward(&m->t, m->base.params, m->base.grads, dv);
    /* cond = time(temb) + prompt.embedding[id] */
    rl_embedding_backward(m->base.grads + m->emb, dcond, m->ids, (int)m->t.n, m->hidden);
}

int rl_clip_flow_velocity(rl_model *m, int64_t n, const float *x, const float *sigma,
                          const int32_t *ids, float *v)
{
    s_cf *cf = m && m->ops == &s_ops ? s_of(m) : NULL;
    if (!cf)
        return rl_error_set(RL_EINVAL, "rl_clip_flow_velocity: not a clip_flow model");
    for (int64_t r = 0; r < n; r++)
        if (ids[r] < 0 || ids[r] >= cf->prompts)
            return rl_error_set(RL_ERANGE, "clip_flow: prompt id %d of row %lld outside [0, %d)",
                                ids[r], (long long)r, cf->prompts);
    return s_net_forward(cf, n, x, sigma, ids, v);
}

/* ---- batch checks ----------------------------------------------------------------------------- */

static int s_check_ids(const s_cf *m, const char *what, const int32_t *ids, int64_t B)
{
    for (int64_t b = 0; b < B; b++)
        if (ids[b] < 0 || ids[b] >= m->prompts)
            return rl_error_set(RL_ERANGE, "%s: %s[%lld] = %d outside [0, %d) (%s)", what, RL_CF_PROMPT_IDS,
                                (long long)b, ids[b], m->prompts,
                                RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, num_prompts));
    return RL_OK;
}

static int s_check_finite(const char *what, const char *name, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", what, name,
                                (long long)i, (double)x[i]);
    return RL_OK;
}

/* The inputs of RL_Q_LOGP: a recorded chain. */
typedef struct s_chain {
    int64_t B, N;
    const int32_t *ids;
    const float *lat, *sig, *noise, *mask; /* mask NULL = all steps */
} s_chain;

static int s_chain_read(const s_cf *m, const rl_dataproto *in, const char *what, s_chain *c)
{
    memset(c, 0, sizeof *c);
    const int64_t d1[1] = {-1};
    const rl_tensor *ti = rl_model_input(in, what, RL_CF_PROMPT_IDS, RL_I32, 1, d1);
    if (!ti)
        return rl_error_code();
    c->B = ti->shape[0];
    const int64_t dl[3] = {c->B, -1, m->D};
    const rl_tensor *tl = rl_model_input(in, what, RL_CF_LATENTS, RL_F32, 3, dl);
    if (!tl)
        return rl_error_code();
    c->N = tl->shape[1] - 1;
    if (c->N < 1)
        return rl_error_set(RL_ESHAPE, "%s: %s has %lld latents per row, need at least 2", what,
                            RL_CF_LATENTS, (long long)tl->shape[1]);
    const int64_t ds[2] = {c->B, c->N + 1}, dn[1] = {c->B}, dm[2] = {c->B, c->N};
    const rl_tensor *ts = rl_model_input(in, what, RL_CF_SIGMAS, RL_F32, 2, ds);
    const rl_tensor *tn = ts ? rl_model_input(in, what, RL_CF_NOISE_LEVEL, RL_F32, 1, dn) : NULL;
    if (!tn)
        return rl_error_code();
    const rl_tensor *tm = NULL;
    if (rl_dataproto_tensor(in, RL_CF_STEP_MASK) &&
        !(tm = rl_model_input(in, what, RL_CF_STEP_MASK, RL_F32, 2, dm)))
        return rl_error_code();
    c->ids = rl_tensor_data((rl_tensor *)ti);
    c->lat = rl_tensor_data((rl_tensor *)tl);
    c->sig = rl_tensor_data((rl_tensor *)ts);
    c->noise = rl_tensor_data((rl_tensor *)tn);
    c->mask = tm ? rl_tensor_data((rl_tensor *)tm) : NULL;
    int rc = s_check_ids(m, what, c->ids, c->B);
    if (!rc)
        rc = s_check_finite(what, RL_CF_LATENTS, c->lat, c->B * (c->N + 1) * m->D);
    for (int64_t b = 0; !rc && b < c->B; b++) {
        const float *s = c->sig + b * (c->N + 1);
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

/* The (b, k) pairs of rows [r0, r0 + rows) whose step is scored. */
static int64_t s_pairs(const s_chain *c, int64_t r0, int64_t rows, int64_t *pb, int64_t *pk)
{
    int64_t n = 0;
    for (int64_t b = r0; b < r0 + rows; b++)
        for (int64_t k = 0; k < c->N; k++)
            if (!c->mask || c->mask[b * c->N + k] != 0.0f) {
                pb[n] = b;
                pk[n] = k;
                n++;
            }
    return n;
}

/* Scratch for one micro-batch of pairs. */
typedef struct s_work {
    int64_t *pb, *pk;
    float *x, *sig, *v, *gv, *logp, *glogp;
    int32_t *ids;
    float *q, *gq, *qmask; /* (rows, K) for the loss callback */
} s_work;

static void s_work_free(s_work *w)
{
    free(w->pb);
    free(w->pk);
    free(w->x);
    free(w->sig);
    free(w->v);
    free(w->gv);
    free(w->logp);
    free(w->glogp);
    free(w->ids);
    free(w->q);
    free(w->gq);
    free(w->qmask);
    memset(w, 0, sizeof *w);
}

static int s_work_alloc(s_work *w, int64_t pairs, int64_t D, int64_t qn)
{
    memset(w, 0, sizeof *w);
    size_t p = (size_t)(pairs > 0 ? pairs : 1), q = (size_t)(qn > 0 ? qn : 1);
    w->pb = malloc(sizeof(int64_t) * p);
    w->pk = malloc(sizeof(int64_t) * p);
    w->x = malloc(sizeof(float) * p * (size_t)D);
    w->sig = malloc(sizeof(float) * p);
    w->v = malloc(sizeof(float) * p * (size_t)D);
    w->gv = malloc(sizeof(float) * p * (size_t)D);
    w->logp = malloc(sizeof(float) * p);
    w->glogp = malloc(sizeof(float) * p);
    w->ids = malloc(sizeof(int32_t) * p);
    w->q = malloc(sizeof(float) * q);
    w->gq = malloc(sizeof(float) * q);
    w->qmask = malloc(sizeof(float) * q);
    if (!w->pb || !w->pk || !w->x || !w->sig || !w->v || !w->gv || !w->logp || !w->glogp ||
        !w->ids || !w->q || !w->gq || !w->qmask) {
        s_work_free(w);
        return rl_error_set(RL_ENOMEM, "clip_flow: out of memory for %lld scored steps",
                            (long long)pairs);
    }
    return RL_OK;
}

/* Velocities and log-probs of the pairs of rows [r0, r0 + rows): w->v,
 * w->logp (n pairs). */
static int s_chain_forward(s_cf *m, const s_chain *c, int64_t r0, int64_t rows, s_work *w,
                           int64_t *npairs)
{
    int64_t n = s_pairs(c, r0, rows, w->pb, w->pk), D = m->D;
    *npairs = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = w->pb[i], k = w->pk[i];
        memcpy(w->x + i * D, c->lat + (b * (c->N + 1) + k) * D, sizeof(float) * (size_t)D);
        w->sig[i] = c->sig[b * (c->N + 1) + k];
        w->ids[i] = c->ids[b];
    }
    if (n == 0)
        return RL_OK;
    int rc = s_net_forward(m, n, w->x, w->sig, w->ids, w->v);
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t b = w->pb[i], k = w->pk[i];
        const float *xn = c->lat + (b * (c->N + 1) + k + 1) * D;
        const float *sn = c->sig + b * (c->N + 1) + k + 1;
        rc = rl_diffusion_sde_logprob(w->x + i * D, w->v + i * D, xn, &w->sig[i], sn,
                                      (double)c->noise[b], 1, D, &w->logp[i], NULL, NULL);
    }
    return rc;
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

/* The flow-matching inputs: ids, x_t (B, D), sigma (B). */
static int s_fm_read(const s_cf *m, const rl_dataproto *in, const char *what, int64_t *B,
                     const int32_t **ids, const float **x, const float **sig)
{
    const int64_t d1[1] = {-1};
    const rl_tensor *ti = rl_model_input(in, what, RL_CF_PROMPT_IDS, RL_I32, 1, d1);
    if (!ti)
        return rl_error_code();
    *B = ti->shape[0];
    const int64_t dx[2] = {*B, m->D}, ds[1] = {*B};
    const rl_tensor *tx = rl_model_input(in, what, RL_CF_X_T, RL_F32, 2, dx);
    const rl_tensor *ts = tx ? rl_model_input(in, what, RL_CF_SIGMA, RL_F32, 1, ds) : NULL;
    if (!ts)
        return rl_error_code();
    *ids = rl_tensor_data((rl_tensor *)ti);
    *x = rl_tensor_data((rl_tensor *)tx);
    *sig = rl_tensor_data((rl_tensor *)ts);
    int rc = s_check_ids(m, what, *ids, *B);
    if (!rc)
        rc = s_check_finite(what, RL_CF_X_T, *x, *B * m->D);
    for (int64_t b = 0; !rc && b < *B; b++)
        if (!((*sig)[b] >= 0.0f && (*sig)[b] <= 1.0f))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g outside [0, 1]", what, RL_CF_SIGMA,
                              (long long)b, (double)(*sig)[b]);
    return rc;
}

static int s_forward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    s_cf *m = s_of(mm);
    const char *what = "clip_flow forward";
    int rc = s_check_want(want, what);
    if (rc)
        return rc;
    rl_dataproto *o = rl_dataproto_new();
    if (!o)
        return rl_error_code();
    if (want & RL_Q_BIT(RL_Q_VELOCITY)) {
        int64_t B;
        const int32_t *ids;
        const float *x, *sig;
        rl_tensor *t = NULL;
        if (!(rc = s_fm_read(m, batch, what, &B, &ids, &x, &sig))) {
            int64_t shape[2] = {B, m->D};
            t = rl_dataproto_new_tensor(o, rl_quantity_name(RL_Q_VELOCITY), RL_F32, 2, shape);
            rc = t ? RL_OK : rl_error_code();
        }
        int64_t mb = rc ? 0 : rl_model_micro_rows(pass, B);
        for (int64_t r0 = 0; !rc && r0 < B; r0 += mb) {
            int64_t rows = B - r0 < mb ? B - r0 : mb;
            rc = s_net_forward(m, rows, x + r0 * m->D, sig + r0, ids + r0,
                               (float *)rl_tensor_data(t) + r0 * m->D);
        }
    } else {
        s_chain c;
        s_work w;
        memset(&w, 0, sizeof w);
        rl_tensor *t = NULL;
        if (!(rc = s_chain_read(m, batch, what, &c))) {
            int64_t shape[2] = {c.B, c.N};
            t = rl_dataproto_new_tensor(o, rl_quantity_name(RL_Q_LOGP), RL_F32, 2, shape);
            rc = t ? RL_OK : rl_error_code();
        }
        int64_t mb = rc ? 0 : rl_model_micro_rows(pass, c.B);
        if (!rc)
            rc = s_work_alloc(&w, mb * c.N, m->D, 0);
        float *lp = t ? rl_tensor_data(t) : NULL;
        if (lp)
            memset(lp, 0, sizeof(float) * (size_t)(c.B * c.N));
        for (int64_t r0 = 0; !rc && r0 < c.B; r0 += mb) {
            int64_t rows = c.B - r0 < mb ? c.B - r0 : mb, n = 0;
            rc = s_chain_forward(m, &c, r0, rows, &w, &n);
            for (int64_t i = 0; !rc && i < n; i++)
                lp[w.pb[i] * c.N + w.pk[i]] = w.logp[i];
        }
        s_work_free(&w);
    }
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    *out = o;
    return RL_OK;
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
        s_net_backward(m, gv);
    }
    free(v);
    free(gv);
    return rc;
}

static int s_fb_logp(s_cf *m, const rl_dataproto *batch, const rl_model_pass *pass,
                     rl_model_loss_fn fn, void *ctx, double *loss, const char *what)
{
    s_chain c;
    int rc = s_chain_read(m, batch, what, &c);
    if (rc || c.B == 0)
        return rc;
    int64_t mb = rl_model_micro_rows(pass, c.B), D = m->D, N = c.N;
    s_work w;
    if ((rc = s_work_alloc(&w, mb * N, D, mb * N)))
        return rc;
    for (int64_t r0 = 0; !rc && r0 < c.B; r0 += mb) {
        int64_t rows = c.B - r0 < mb ? c.B - r0 : mb, n = 0;
        if ((rc = s_chain_forward(m, &c, r0, rows, &w, &n)))
            break;
        memset(w.q, 0, sizeof(float) * (size_t)(rows * N));
        memset(w.qmask, 0, sizeof(float) * (size_t)(rows * N));
        for (int64_t i = 0; i < n; i++) {
            int64_t j = (w.pb[i] - r0) * N + w.pk[i];
            w.q[j] = w.logp[i];
            w.qmask[j] = 1.0f;
        }
        if ((rc = rl_model_loss_one(fn, ctx, RL_Q_LOGP, r0, rows, N, w.q, w.qmask, w.gq, loss)) || n == 0)
            continue;
        for (int64_t i = 0; !rc && i < n; i++) {
            int64_t b = w.pb[i], k = w.pk[i];
            float gl = w.gq[(b - r0) * N + k];
            const float *xn = c.lat + (b * (N + 1) + k + 1) * D;
            const float *sn = c.sig + b * (N + 1) + k + 1;
            float lp;
            rc = rl_diffusion_sde_logprob(w.x + i * D, w.v + i * D, xn, &w.sig[i], sn,
                                          (double)c.noise[b], 1, D, &lp, &gl, w.gv + i * D);
        }
        if (!rc)
            s_net_backward(m, w.gv);
    }
    s_work_free(&w);
    return rc;
}

static int s_forward_backward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    s_cf *m = s_of(mm);
    const char *what = "clip_flow forward_backward";
    int rc = s_check_want(want, what);
    if (rc)
        return rc;
    double dummy = 0;
    if (!loss)
        loss = &dummy;
    *loss = 0;
    return (want & RL_Q_BIT(RL_Q_VELOCITY)) ? s_fb_velocity(m, batch, pass, fn, ctx, loss, what)
                                            : s_fb_logp(m, batch, pass, fn, ctx, loss, what);
}

/* ---- sampling ------------------------------------------------------------------------------------ */

static int s_sample(rl_model *mm, const rl_dataproto *in, const rl_model_sampling *sp,
                    rl_dataproto **out)
{
    s_cf *m = s_of(mm);
    const char *what = "clip_flow sample";
    const int64_t d1[1] = {-1};
    const rl_tensor *ti = rl_model_input(in, what, RL_CF_PROMPT_IDS, RL_I32, 1, d1);
    if (!ti)
        return rl_error_code();
    const int64_t B = ti->shape[0], dn[1] = {B}, D = m->D, N = sp->num_steps;
    const rl_tensor *tn = rl_model_input(in, what, RL_CF_NOISE_SEEDS, RL_I64, 1, dn);
    const rl_tensor *tr = tn ? rl_model_input(in, what, RL_CF_ROW_SEEDS, RL_I64, 1, dn) : NULL;
    if (!tr)
        return rl_error_code();
    const int32_t *ids = rl_tensor_data((rl_tensor *)ti);
    int rc = s_check_ids(m, what, ids, B);
    if (rc)
        return rc;
    if (N < 1 || N > 10000)
        return rl_error_set(RL_EINVAL, "%s: num_steps %lld outside [1, 10000]", what, (long long)N);
    double noise = sp->greedy ? 0.0 : sp->noise_level;
    if (!sp->greedy && !(noise > 0.0 && isfinite(noise)))
        return rl_error_set(RL_EINVAL, "%s: SDE sampling needs noise_level > 0, got %g (greedy "
                                       "sampling is the ODE)", what, sp->noise_level);
    double shift = sp->shift > 0 ? sp->shift : 1.0;
    rl_dataproto *o = rl_dataproto_new();
    int64_t sl[3] = {B, N + 1, D}, ss[2] = {B, N + 1}, sq[2] = {B, N}, s1[1] = {B};
    rl_tensor *tl = o ? rl_dataproto_new_tensor(o, RL_CF_LATENTS, RL_F32, 3, sl) : NULL;
    rl_tensor *ts = tl ? rl_dataproto_new_tensor(o, RL_CF_SIGMAS, RL_F32, 2, ss) : NULL;
    rl_tensor *tq = ts ? rl_dataproto_new_tensor(o, RL_CF_SAMPLE_LOGP, RL_F32, 2, sq) : NULL;
    rl_tensor *tnl = tq ? rl_dataproto_new_tensor(o, RL_CF_NOISE_LEVEL, RL_F32, 1, s1) : NULL;
    float *grid = malloc(sizeof(float) * (size_t)(N + 1));
    size_t bd = (size_t)(B > 0 ? B : 1) * (size_t)D;
    float *x = malloc(sizeof(float) * bd), *v = malloc(sizeof(float) * bd);
    float *eps = malloc(sizeof(float) * bd), *sg = malloc(sizeof(float) * (size_t)(B + 1));
    float *sn = malloc(sizeof(float) * (size_t)(B + 1)), *lp = malloc(sizeof(float) * (size_t)(B + 1));
    if (!tnl || !grid || !x || !v || !eps || !sg || !sn || !lp) {
        rc = tnl ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
        goto done;
    }
    if ((rc = rl_diffusion_sigmas(N, shift, grid)))
        goto done;
    float *L = rl_tensor_data(tl), *S = rl_tensor_data(ts), *Q = rl_tensor_data(tq);
    float *NL = rl_tensor_data(tnl);
    const int64_t *nseed = rl_tensor_data((rl_tensor *)tn), *rseed = rl_tensor_data((rl_tensor *)tr);
    for (int64_t b = 0; b < B; b++) {
        rl_rng g;
        rl_rng_init(&g, (uint64_t)nseed[b], 0);
        for (int64_t j = 0; j < D; j++)
            x[b * D + j] = rl_rng_normal(&g);
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
        if ((rc = s_net_forward(m, B, x, sg, ids, v)))
            break;
        if (sp->greedy) {
            float dt = grid[k + 1] - grid[k];
            for (int64_t i = 0; i < B * D; i++)
                x[i] += dt * v[i];
            for (int64_t b = 0; b < B; b++)
                Q[b * N + k] = 0.0f;
            continue;
        }
        for (int64_t b = 0; b < B; b++) {
            rl_rng g;
            rl_rng_init(&g, (uint64_t)rseed[b], (uint64_t)k + 1);
            for (int64_t j = 0; j < D; j++)
                eps[b * D + j] = rl_rng_normal(&g);
        }
        /* x_next lands in v's buffer, then swaps in */
        rc = rl_diffusion_sde_step(x, v, sg, sn, noise, eps, B, D, v, lp);
        if (rc)
            break;
        float *t = x;
        x = v;
        v = t;
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
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    *out = o;
    return RL_OK;
}

/* ---- the rest of the interface ----------------------------------------------------------------------- */

static void s_free(rl_model *mm)
{
    s_cf *m = s_of(mm);
    rl_model_base_free(&m->base);
    rl_flow_mlp_free(&m->t);
    free(m->dout);
    free(m);
}

static int s_write_config(const rl_model *mm, const char *path)
{
    const rl_clip_flow_config *c = &((const s_cf *)mm)->c;
    const void *cfgs[2] = {&c->size, &c->net};
    return rl_model_write_sections(path, "clip_flow", s_sections + 1, cfgs, 2);
}

/* Linear weights N(0, 1/fan_in), biases 0, the prompt table N(0, 1): the
 * base's rule. */
static const rl_model_ops s_ops = {
    .kind = "clip_flow",
    .free = s_free,
    RL_MODEL_BASE_OPS,
    .init_random = rl_model_base_init_random,
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
    .write_config = s_write_config,
};

/* The job's image size and network (range-checked, located errors: the
 * sections' checks). */
static int s_read_config(const rl_config *job, rl_clip_flow_config *c)
{
    const rl_image_size_config *size = rl_config_section_get(job, &rl_image_size_section);
    const rl_clip_flow_model_config *net = size ? rl_config_section_get(job, &rl_clip_flow_model_section)
                                                : NULL;
    if (!net)
        return rl_error_code();
    c->size = *size;
    c->net = *net;
    return RL_OK;
}

static int s_check_config(const rl_config *job)
{
    rl_clip_flow_config c;
    return s_read_config(job, &c);
}

static rl_model *s_from_config(const rl_config *job)
{
    rl_clip_flow_config c;
    if (s_read_config(job, &c))
        return NULL;
    s_cf *m = calloc(1, sizeof *m);
    if (!m) {
        rl_error_set(RL_ENOMEM, "clip_flow: out of memory");
        return NULL;
    }
    m->c = c;
    m->D = rl_clip_flow_dim(&c);
    m->hidden = (int)c.net.hidden_size;
    m->prompts = (int)c.net.num_prompts;
    m->x0_pred = c.net.prediction == RL_CLIP_FLOW_PREDICT_X0;
    rl_model_base *b = &m->base;
    if (rl_model_base_open(b, &s_ops, "clip_flow") ||
        rl_flow_mlp_init(&m->t, (int)m->D, m->hidden, (int)c.net.num_layers, (int)c.net.time_embed_dim,
                         "clip_flow") ||
        rl_flow_mlp_add_head(&m->t, b->man) ||
        rl_model_base_add(b, "prompt.embedding", 2, m->prompts, m->hidden, &m->emb) ||
        rl_flow_mlp_add_tail(&m->t, b->man) || rl_model_base_alloc(b, "clip_flow")) {
        s_free(&b->model);
        return NULL;
    }
    return &b->model;
}

const rl_model_kind rl_model_kind_clip_flow = {
    .name = "clip_flow",
    .sections = s_sections,
    .from_config = s_from_config,
    .check_config = s_check_config,
};
