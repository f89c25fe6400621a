/* flow_policy.c — the flow-matching action-chunk policy kind of rl_model
 * (see common/nn/models/flow_policy.h): the observation encoder, the shared velocity
 * trunk (flow_mlp_internal.h), the value head, the flow-matching / SDE-chain
 * / value quantities with their backward, ODE/SDE sampling and the model:
 * section. */
#include "common/nn/models/flow_policy.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/models/flow_mlp_internal.h"
#include "common/schema/flow_policy.h"
#include "common/schema/model.h"
#include "common/sde/flow_step.h"
#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/nn/engine/safetensors.h"
#include "common/nn/engine/ops.h"
#include "common/core/rng.h"

#define S_OBS (RL_FP_PROPRIO_DIM + RL_FP_OBJECT_DIM) /* 137 */

/* The observation encoder's activations over n items. */
typedef struct s_enc {
    int64_t cap, n;
    float *obs;      /* (n, 137) normalised */
    float *e1, *s1;  /* (n, H) obs_enc.0 output, silu of it */
    float *enc;      /* (n, H) obs_enc.1 output */
    float *senc;     /* (n, H) silu(enc) (value path) */
    float *d1, *d2;  /* (n, H) backward scratch */
    int32_t *task;   /* (n) */
} s_enc;

typedef struct s_fp {
    rl_model base;
    rl_flow_policy_config c;
    int64_t D;
    rl_param_manifest *man;
    float *params, *grads;
    rl_flow_mlp t;
    int64_t mean, std, e0w, e0b, e1w, e1b, emb, vw, vb; /* offsets */
    s_enc ev; /* the velocity path's encoder */
    s_enc vv; /* the value path's encoder */
} s_fp;

static const rl_model_ops s_ops;

static s_fp *s_of(rl_model *m) { return (s_fp *)m; }

const rl_flow_policy_config *rl_flow_policy_get_config(const rl_model *m)
{
    return m && m->ops == &s_ops ? &((const s_fp *)m)->c : NULL;
}

int64_t rl_flow_policy_dim(const rl_flow_policy_config *c)
{
    return (int64_t)c->chunks * RL_FP_ACTION_DIM;
}

int rl_flow_policy_set_obs_norm(rl_model *mm, const float *mean, const float *std)
{
    if (!mm || mm->ops != &s_ops)
        return rl_error_set(RL_EINVAL, "rl_flow_policy_set_obs_norm: not a flow_policy model");
    for (int i = 0; i < S_OBS; i++) {
        if (!isfinite(mean[i]))
            return rl_error_set(RL_ENUMERIC, "flow_policy obs_norm: mean[%d] is %g", i,
                                (double)mean[i]);
        if (!(std[i] > 0.0f) || !isfinite(std[i]))
            return rl_error_set(RL_ERANGE, "flow_policy obs_norm: std[%d] is %g, must be > 0", i,
                                (double)std[i]);
    }
    s_fp *m = s_of(mm);
    memcpy(m->params + m->mean, mean, sizeof(float) * S_OBS);
    memcpy(m->params + m->std, std, sizeof(float) * S_OBS);
    return RL_OK;
}

/* ---- the network ------------------------------------------------------------------------ */

static void s_enc_free(s_enc *e)
{
    free(e->obs);
    free(e->e1);
    free(e->s1);
    free(e->enc);
    free(e->senc);
    free(e->d1);
    free(e->d2);
    free(e->task);
    memset(e, 0, sizeof *e);
}

static int s_enc_reserve(s_enc *e, int64_t n, int64_t H)
{
    if (n < 1)
        n = 1;
    if (n <= e->cap)
        return RL_OK;
    s_enc_free(e);
    size_t nH = (size_t)n * (size_t)H;
    e->obs = malloc(sizeof(float) * (size_t)n * S_OBS);
    e->e1 = malloc(sizeof(float) * nH);
    e->s1 = malloc(sizeof(float) * nH);
    e->enc = malloc(sizeof(float) * nH);
    e->senc = malloc(sizeof(float) * nH);
    e->d1 = malloc(sizeof(float) * nH);
    e->d2 = malloc(sizeof(float) * nH);
    e->task = malloc(sizeof(int32_t) * (size_t)n);
    if (!e->obs || !e->e1 || !e->s1 || !e->enc || !e->senc || !e->d1 || !e->d2 || !e->task) {
        s_enc_free(e);
        return rl_error_set(RL_ENOMEM, "flow_policy: out of memory for %lld rows of activations",
                            (long long)n);
    }
    e->cap = n;
    return RL_OK;
}

/* The observations of a batch (checked by s_obs_read). */
typedef struct s_obs {
    int64_t B;
    const float *prop, *obj;
    const int64_t *task;
} s_obs;

/* enc (n, H) of the items whose batch rows are rows[i] (NULL: item i is row
 * r0 + i); keeps the activations in e. */
static int s_enc_forward(s_fp *m, s_enc *e, const s_obs *ob, int64_t n, int64_t r0,
                         const int64_t *rows)
{
    const int H = m->c.hidden;
    int rc = s_enc_reserve(e, n, H);
    if (rc)
        return rc;
    const float *P = m->params, *mu = P + m->mean, *sd = P + m->std;
    const float clip = (float)m->c.obs_clip;
    e->n = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = rows ? rows[i] : r0 + i;
        float *o = e->obs + i * S_OBS;
        const float *pp = ob->prop + b * RL_FP_PROPRIO_DIM, *po = ob->obj + b * RL_FP_OBJECT_DIM;
        for (int j = 0; j < RL_FP_PROPRIO_DIM; j++)
            o[j] = (pp[j] - mu[j]) / sd[j];
        for (int j = 0; j < RL_FP_OBJECT_DIM; j++)
            o[RL_FP_PROPRIO_DIM + j] = (po[j] - mu[RL_FP_PROPRIO_DIM + j]) / sd[RL_FP_PROPRIO_DIM + j];
        if (clip > 0) /* the inputs, not parameters: no gradient to route */
            for (int j = 0; j < S_OBS; j++)
                o[j] = o[j] > clip ? clip : o[j] < -clip ? -clip : o[j];
        e->task[i] = (int32_t)ob->task[b];
    }
    rl_linear_forward(e->e1, e->obs, P + m->e0w, P + m->e0b, (int)n, S_OBS, H);
    rl_silu_forward(e->s1, e->e1, n * H);
    rl_linear_forward(e->enc, e->s1, P + m->e1w, P + m->e1b, (int)n, H, H);
    return RL_OK;
}

/* Accumulates the encoder's gradients for denc (n, H) (obs_norm: none). */
static void s_enc_backward(s_fp *m, s_enc *e, const float *denc)
{
    const int H = m->c.hidden, N = (int)e->n;
    const int64_t nH = e->n * H;
    const float *P = m->params;
    float *G = m->grads;
    memset(e->d1, 0, sizeof(float) * (size_t)nH);
    rl_linear_backward(e->d1, G + m->e1w, G + m->e1b, denc, e->s1, P + m->e1w, N, H, H);
    memset(e->d2, 0, sizeof(float) * (size_t)nH);
    rl_silu_backward(e->d2, e->d1, e->e1, nH);
    rl_linear_backward(NULL, G + m->e0w, G + m->e0b, e->d2, e->obs, P + m->e0w, N, S_OBS, H);
}

/* v (n, D) for the items (batch row rows[i] or r0 + i, x (n, D), t (n));
 * keeps the activations (m->ev, m->t). */
static int s_vel_forward(s_fp *m, const s_obs *ob, int64_t n, int64_t r0, const int64_t *rows,
                         const float *x, const float *tt, float *v)
{
    const int H = m->c.hidden;
    int rc = s_enc_forward(m, &m->ev, ob, n, r0, rows);
    if (!rc)
        rc = rl_flow_mlp_reserve(&m->t, n, "flow_policy");
    if (rc)
        return rc;
    const float *P = m->params;
    rl_flow_mlp_cond(&m->t, P, n, tt);
    for (int64_t i = 0; i < n; i++) {
        const float *te = P + m->emb + (int64_t)m->ev.task[i] * H, *en = m->ev.enc + i * H;
        float *c = m->t.cond + i * H;
        for (int j = 0; j < H; j++)
            c[j] += en[j] + te[j];
    }
    rl_flow_mlp_trunk(&m->t, P, x, v);
    return RL_OK;
}

/* Accumulates the gradients of Σ dv·v for the last s_vel_forward. */
static void s_vel_backward(s_fp *m, const float *dv)
{
    float *dcond = rl_flow_mlp_backward(&m->t, m->params, m->grads, dv);
    rl_embedding_backward(m->grads + m->emb, dcond, m->ev.task, (int)m->t.n, m->c.hidden);
    s_enc_backward(m, &m->ev, dcond);
}

/* value (n) of rows [r0, r0 + n); keeps the activations (m->vv). */
static int s_value_forward(s_fp *m, const s_obs *ob, int64_t r0, int64_t n, float *value)
{
    const int H = m->c.hidden;
    int rc = s_enc_forward(m, &m->vv, ob, n, r0, NULL);
    if (rc)
        return rc;
    /* the critic knows its task: enc + task.embedding[task], in place (the
     * encoder's backward does not read enc) */
    for (int64_t i = 0; i < n; i++) {
        const float *te = m->params + m->emb + (int64_t)m->vv.task[i] * H;
        float *en = m->vv.enc + i * H;
        for (int j = 0; j < H; j++)
            en[j] += te[j];
    }
    rl_silu_forward(m->vv.senc, m->vv.enc, n * H);
    rl_linear_forward(value, m->vv.senc, m->params + m->vw, m->params + m->vb, (int)n, H, 1);
    return RL_OK;
}

static void s_value_backward(s_fp *m, const float *dvalue)
{
    const int H = m->c.hidden, N = (int)m->vv.n;
    const int64_t nH = m->vv.n * H;
    float *ds = m->vv.d1, *denc = m->vv.d2;
    if (m->c.detach_critic) { /* model.detach_critic_input: the head alone learns */
        rl_linear_backward(NULL, m->grads + m->vw, m->grads + m->vb, dvalue, m->vv.senc, m->params + m->vw, N,
                           H, 1);
        return;
    }
    memset(ds, 0, sizeof(float) * (size_t)nH);
    rl_linear_backward(ds, m->grads + m->vw, m->grads + m->vb, dvalue, m->vv.senc,
                       m->params + m->vw, N, H, 1);
    /* s_enc_backward reuses d1/d2: move denc into senc's buffer first */
    memset(denc, 0, sizeof(float) * (size_t)nH);
    rl_silu_backward(denc, ds, m->vv.enc, nH);
    memcpy(m->vv.senc, denc, sizeof(float) * (size_t)nH);
    rl_embedding_backward(m->grads + m->emb, m->vv.senc, m->vv.task, N, H);
    s_enc_backward(m, &m->vv, m->vv.senc);
}

/* ---- batch checks ----------------------------------------------------------------------------- */

static int s_check_finite(const char *what, const char *name, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", what, name,
                                (long long)i, (double)x[i]);
    return RL_OK;
}

static const rl_tensor *s_need(const rl_dataproto *dp, const char *what, const char *name,
                               rl_dtype dtype, int ndim, const int64_t *dims)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, dtype, ndim, dims);
    if (!t)
        rl_error_wrap(rl_error_code(), "%s", what);
    return t;
}

static int s_obs_read(const s_fp *m, const rl_dataproto *in, const char *what, s_obs *ob)
{
    const int64_t dp[2] = {-1, RL_FP_PROPRIO_DIM};
    const rl_tensor *tp = s_need(in, what, RL_FP_PROPRIO, RL_F32, 2, dp);
    if (!tp)
        return rl_error_code();
    ob->B = tp->shape[0];
    const int64_t dob[2] = {ob->B, RL_FP_OBJECT_DIM}, dt[1] = {ob->B};
    const rl_tensor *to = s_need(in, what, RL_FP_OBJECT, RL_F32, 2, dob);
    const rl_tensor *tt = to ? s_need(in, what, RL_FP_TASK, RL_I64, 1, dt) : NULL;
    if (!tt)
        return rl_error_code();
    ob->prop = rl_tensor_data((rl_tensor *)tp);
    ob->obj = rl_tensor_data((rl_tensor *)to);
    ob->task = rl_tensor_data((rl_tensor *)tt);
    int rc = s_check_finite(what, RL_FP_PROPRIO, ob->prop, ob->B * RL_FP_PROPRIO_DIM);
    if (!rc)
        rc = s_check_finite(what, RL_FP_OBJECT, ob->obj, ob->B * RL_FP_OBJECT_DIM);
    for (int64_t b = 0; !rc && b < ob->B; b++)
        if (ob->task[b] < 0 || ob->task[b] >= m->c.num_tasks)
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %lld outside [0, %d) (%s)",
                              what, RL_FP_TASK, (long long)b, (long long)ob->task[b],
                              m->c.num_tasks,
                              RL_CFG_PATH(&rl_model_flow_policy_section, rl_model_flow_policy_config,
                                          num_tasks));
    return rc;
}

/* The flow-matching inputs x_t (B, D), t (B). */
static int s_fm_read(const s_fp *m, const rl_dataproto *in, const char *what, int64_t B,
                     const float **x, const float **tt)
{
    const int64_t dx[2] = {B, m->D}, ds[1] = {B};
    const rl_tensor *tx = s_need(in, what, RL_FP_X_T, RL_F32, 2, dx);
    const rl_tensor *ts = tx ? s_need(in, what, RL_FP_T, RL_F32, 1, ds) : NULL;
    if (!ts)
        return rl_error_code();
    *x = rl_tensor_data((rl_tensor *)tx);
    *tt = rl_tensor_data((rl_tensor *)ts);
    int rc = s_check_finite(what, RL_FP_X_T, *x, B * m->D);
    for (int64_t b = 0; !rc && b < B; b++)
        if (!((*tt)[b] >= 0.0f && (*tt)[b] <= 1.0f))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g outside [0, 1]", what, RL_FP_T,
                              (long long)b, (double)(*tt)[b]);
    return rc;
}

/* The inputs of RL_Q_LOGP: a recorded chain. */
typedef struct s_chain {
    int64_t B, N;
    const float *chain, *times, *noise, *mask; /* mask NULL = all steps */
} s_chain;

static int s_chain_read(const s_fp *m, const rl_dataproto *in, const char *what, int64_t B,
                        s_chain *c)
{
    memset(c, 0, sizeof *c);
    c->B = B;
    const int64_t dtm[2] = {B, -1};
    const rl_tensor *tt = s_need(in, what, RL_FP_TIMES, RL_F32, 2, dtm);
    if (!tt)
        return rl_error_code();
    c->N = tt->shape[1] - 1;
    if (c->N < 1 || c->N > 10000)
        return rl_error_set(RL_ESHAPE, "%s: %s has %lld grid points, expected 2 to 10001", what,
                            RL_FP_TIMES, (long long)tt->shape[1]);
    const int64_t dc[3] = {B, c->N + 1, m->D}, dn[1] = {B}, dm[2] = {B, c->N};
    const rl_tensor *tc = s_need(in, what, RL_FP_CHAIN, RL_F32, 3, dc);
    const rl_tensor *tn = tc ? s_need(in, what, RL_FP_NOISE_LEVEL, RL_F32, 1, dn) : NULL;
    if (!tn)
        return rl_error_code();
    const rl_tensor *tm = NULL;
    if (rl_dataproto_tensor(in, RL_FP_STEP_MASK) &&
        !(tm = s_need(in, what, RL_FP_STEP_MASK, RL_F32, 2, dm)))
        return rl_error_code();
    c->chain = rl_tensor_data((rl_tensor *)tc);
    c->times = rl_tensor_data((rl_tensor *)tt);
    c->noise = rl_tensor_data((rl_tensor *)tn);
    c->mask = tm ? rl_tensor_data((rl_tensor *)tm) : NULL;
    int rc = s_check_finite(what, RL_FP_CHAIN, c->chain, B * (c->N + 1) * m->D);
    if (!rc && c->mask)
        rc = s_check_finite(what, RL_FP_STEP_MASK, c->mask, B * c->N);
    for (int64_t b = 0; !rc && b < B; b++) {
        if (!(c->noise[b] >= 0.0f && isfinite(c->noise[b])))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g, must be finite and >= 0", what,
                              RL_FP_NOISE_LEVEL, (long long)b, (double)c->noise[b]);
        const float *g = c->times + b * (c->N + 1);
        for (int64_t k = 0; !rc && k <= c->N; k++)
            if (!(g[k] >= 0.0f && g[k] <= 1.0f) || (k > 0 && !(g[k] < g[k - 1])))
                rc = rl_error_set(RL_ERANGE,
                                  "%s: %s[%lld, %lld] = %g: the grid must decrease strictly "
                                  "within [0, 1]",
                                  what, RL_FP_TIMES, (long long)b, (long long)k, (double)g[k]);
    }
    return rc;
}

/* ---- work buffers of the chain passes ----------------------------------------------------- */

typedef struct s_work {
    int64_t *pb, *pk;            /* (pairs) row and step of each scored step */
    float *x, *tt, *v, *gv, *lp; /* (pairs, D) / (pairs) */
    float *q, *gq, *qmask;       /* (rows, N) */
} s_work;

static void s_work_free(s_work *w)
{
    free(w->pb);
    free(w->pk);
    free(w->x);
    free(w->tt);
    free(w->v);
    free(w->gv);
    free(w->lp);
    free(w->q);
    free(w->gq);
    free(w->qmask);
    memset(w, 0, sizeof *w);
}

static int s_work_alloc(s_work *w, int64_t pairs, int64_t D)
{
    memset(w, 0, sizeof *w);
    size_t p = (size_t)(pairs > 0 ? pairs : 1);
    w->pb = malloc(sizeof(int64_t) * p);
    w->pk = malloc(sizeof(int64_t) * p);
    w->x = malloc(sizeof(float) * p * (size_t)D);
    w->tt = malloc(sizeof(float) * p);
    w->v = malloc(sizeof(float) * p * (size_t)D);
    w->gv = malloc(sizeof(float) * p * (size_t)D);
    w->lp = malloc(sizeof(float) * p);
    w->q = malloc(sizeof(float) * p);
    w->gq = malloc(sizeof(float) * p);
    w->qmask = malloc(sizeof(float) * p);
    if (!w->pb || !w->pk || !w->x || !w->tt || !w->v || !w->gv || !w->lp || !w->q || !w->gq ||
        !w->qmask) {
        s_work_free(w);
        return rl_error_set(RL_ENOMEM, "flow_policy: out of memory for %lld scored steps",
                            (long long)pairs);
    }
    return RL_OK;
}

/* The scored steps of rows [r0, r0 + rows): their velocities and log-probs
 * (w->v, w->lp), the (rows, N) log-probs and mask in w->q, w->qmask. */
static int s_chain_forward(s_fp *m, const s_obs *ob, const s_chain *c, int64_t r0, int64_t rows,
                           s_work *w, int64_t *npairs)
{
    const int64_t N = c->N, D = m->D;
    int64_t n = 0;
    memset(w->q, 0, sizeof(float) * (size_t)(rows * N));
    memset(w->qmask, 0, sizeof(float) * (size_t)(rows * N));
    for (int64_t b = r0; b < r0 + rows; b++)
        for (int64_t k = 0; k < N; k++)
            if (!c->mask || c->mask[b * N + k] != 0.0f) {
                w->pb[n] = b;
                w->pk[n] = k;
                memcpy(w->x + n * D, c->chain + (b * (N + 1) + k) * D, sizeof(float) * (size_t)D);
                w->tt[n] = c->times[b * (N + 1) + k];
                n++;
            }
    *npairs = n;
    if (n == 0)
        return RL_OK;
    int rc = s_vel_forward(m, ob, n, 0, w->pb, w->x, w->tt, w->v);
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t b = w->pb[i], k = w->pk[i];
        const float *xn = c->chain + (b * (N + 1) + k + 1) * D;
        const float *tn = c->times + b * (N + 1) + k + 1;
        rc = rl_flow_step_logprob(RL_FLOW_STEP_SDE, w->x + i * D, w->v + i * D, xn, &w->tt[i], tn,
                                  (double)c->noise[b], 1, D, &w->lp[i], NULL, NULL);
        w->q[(b - r0) * N + k] = w->lp[i];
        w->qmask[(b - r0) * N + k] = 1.0f;
    }
    return rc;
}

/* ---- forward / forward_backward ------------------------------------------------------------ */

static int64_t s_micro(const rl_model_pass *pass, int64_t B)
{
    return pass && pass->micro_batch > 0 && pass->micro_batch < B ? pass->micro_batch
                                                                   : (B ? B : 1);
}

static int s_check_want(unsigned want, const char *what)
{
    unsigned ok = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE);
    unsigned both = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY);
    if (!want || (want & ~ok) || (want & both) == both)
        return rl_error_set(RL_EUNSUPPORTED,
                            "%s: a flow_policy pass computes velocity (flow matching) or logp (an "
                            "SDE chain), optionally with value, got mask 0x%x",
                            what, want);
    return RL_OK;
}

/* What one pass reads and the buffers of one micro-batch. */
typedef struct s_pass {
    s_obs ob;
    const float *x, *tt; /* velocity */
    s_chain c;           /* logp */
    int64_t mb;
    float *v, *gv, *val, *gval; /* (mb, D), (mb, 1) */
    s_work w;
} s_pass;

static void s_pass_free(s_pass *p)
{
    free(p->v);
    free(p->gv);
    free(p->val);
    free(p->gval);
    s_work_free(&p->w);
}

static int s_pass_open(s_fp *m, const rl_dataproto *batch, unsigned want,
                       const rl_model_pass *pass, const char *what, s_pass *p)
{
    memset(p, 0, sizeof *p);
    int rc = s_check_want(want, what);
    if (!rc)
        rc = s_obs_read(m, batch, what, &p->ob);
    if (!rc && (want & RL_Q_BIT(RL_Q_VELOCITY)))
        rc = s_fm_read(m, batch, what, p->ob.B, &p->x, &p->tt);
    if (!rc && (want & RL_Q_BIT(RL_Q_LOGP)))
        rc = s_chain_read(m, batch, what, p->ob.B, &p->c);
    if (rc)
        return rc;
    int64_t mb = p->mb = s_micro(pass, p->ob.B), D = m->D;
    p->v = malloc(sizeof(float) * (size_t)(mb * D));
    p->gv = malloc(sizeof(float) * (size_t)(mb * D));
    p->val = malloc(sizeof(float) * (size_t)mb);
    p->gval = malloc(sizeof(float) * (size_t)mb);
    if (!p->v || !p->gv || !p->val || !p->gval)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    if (want & RL_Q_BIT(RL_Q_LOGP))
        return s_work_alloc(&p->w, mb * p->c.N, D);
    return RL_OK;
}

/* The quantities of rows [r0, r0 + rows) into o (and *npairs scored steps). */
static int s_pass_forward(s_fp *m, s_pass *p, unsigned want, int64_t r0, int64_t rows,
                          rl_model_io *o, int64_t *npairs)
{
    const int64_t D = m->D;
    int rc = RL_OK;
    memset(o, 0, sizeof *o);
    o->row0 = r0;
    o->rows = rows;
    *npairs = 0;
    if (want & RL_Q_BIT(RL_Q_VELOCITY)) {
        rc = s_vel_forward(m, &p->ob, rows, r0, NULL, p->x + r0 * D, p->tt + r0, p->v);
        o->width[RL_Q_VELOCITY] = D;
        o->q[RL_Q_VELOCITY] = p->v;
    }
    if (!rc && (want & RL_Q_BIT(RL_Q_LOGP))) {
        rc = s_chain_forward(m, &p->ob, &p->c, r0, rows, &p->w, npairs);
        o->width[RL_Q_LOGP] = p->c.N;
        o->q[RL_Q_LOGP] = p->w.q;
        o->mask[RL_Q_LOGP] = p->w.qmask;
    }
    /* the value last: its encoder activations are its own */
    if (!rc && (want & RL_Q_BIT(RL_Q_VALUE))) {
        rc = s_value_forward(m, &p->ob, r0, rows, p->val);
        o->width[RL_Q_VALUE] = 1;
        o->q[RL_Q_VALUE] = p->val;
    }
    return rc;
}

static int s_forward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    s_fp *m = s_of(mm);
    const char *what = "flow_policy forward";
    s_pass p;
    int rc = s_pass_open(m, batch, want, pass, what, &p);
    rl_dataproto *o = rc ? NULL : rl_dataproto_new();
    if (!rc && !o)
        rc = rl_error_code();
    const int64_t B = p.ob.B, D = m->D, N = p.c.N;
    float *V = NULL, *L = NULL, *LM = NULL, *VA = NULL;
    if (!rc && (want & RL_Q_BIT(RL_Q_VELOCITY))) {
        rl_tensor *t = rl_dataproto_new_tensor(o, rl_quantity_name(RL_Q_VELOCITY), RL_F32, 2,
                                               (int64_t[]){B, D});
        V = t ? rl_tensor_data(t) : NULL;
        rc = t ? RL_OK : rl_error_code();
    }
    if (!rc && (want & RL_Q_BIT(RL_Q_LOGP))) {
        rl_tensor *t = rl_dataproto_new_tensor(o, rl_quantity_name(RL_Q_LOGP), RL_F32, 2,
                                               (int64_t[]){B, N});
        rl_tensor *tm = t ? rl_dataproto_new_tensor(o, "logp_mask", RL_F32, 2, (int64_t[]){B, N})
                          : NULL;
        L = t ? rl_tensor_data(t) : NULL;
        LM = tm ? rl_tensor_data(tm) : NULL;
        rc = tm ? RL_OK : rl_error_code();
    }
    if (!rc && (want & RL_Q_BIT(RL_Q_VALUE))) {
        rl_tensor *t = rl_dataproto_new_tensor(o, rl_quantity_name(RL_Q_VALUE), RL_F32, 2,
                                               (int64_t[]){B, 1});
        VA = t ? rl_tensor_data(t) : NULL;
        rc = t ? RL_OK : rl_error_code();
    }
    for (int64_t r0 = 0; !rc && r0 < B; r0 += p.mb) {
        int64_t rows = B - r0 < p.mb ? B - r0 : p.mb, np;
        rl_model_io io;
        if ((rc = s_pass_forward(m, &p, want, r0, rows, &io, &np)))
            break;
        if (V)
            memcpy(V + r0 * D, p.v, sizeof(float) * (size_t)(rows * D));
        if (L) {
            memcpy(L + r0 * N, p.w.q, sizeof(float) * (size_t)(rows * N));
            memcpy(LM + r0 * N, p.w.qmask, sizeof(float) * (size_t)(rows * N));
        }
        if (VA)
            memcpy(VA + r0, p.val, sizeof(float) * (size_t)rows);
    }
    s_pass_free(&p);
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    *out = o;
    return RL_OK;
}

static int s_forward_backward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    s_fp *m = s_of(mm);
    const char *what = "flow_policy forward_backward";
    double dummy = 0;
    if (!loss)
        loss = &dummy;
    *loss = 0;
    s_pass p;
    int rc = s_pass_open(m, batch, want, pass, what, &p);
    const int64_t B = rc ? 0 : p.ob.B, D = m->D, N = p.c.N;
    for (int64_t r0 = 0; !rc && r0 < B; r0 += p.mb) {
        int64_t rows = B - r0 < p.mb ? B - r0 : p.mb, np;
        rl_model_io o, g;
        if ((rc = s_pass_forward(m, &p, want, r0, rows, &o, &np)))
            break;
        g = o;
        if (want & RL_Q_BIT(RL_Q_VELOCITY)) {
            memset(p.gv, 0, sizeof(float) * (size_t)(rows * D));
            g.q[RL_Q_VELOCITY] = p.gv;
        }
        if (want & RL_Q_BIT(RL_Q_LOGP)) {
            memset(p.w.gq, 0, sizeof(float) * (size_t)(rows * N));
            g.q[RL_Q_LOGP] = p.w.gq;
        }
        if (want & RL_Q_BIT(RL_Q_VALUE)) {
            memset(p.gval, 0, sizeof(float) * (size_t)rows);
            g.q[RL_Q_VALUE] = p.gval;
        }
        if ((rc = fn(ctx, &o, &g, loss)))
            break;
        if (want & RL_Q_BIT(RL_Q_VALUE))
            s_value_backward(m, p.gval);
        if (want & RL_Q_BIT(RL_Q_VELOCITY))
            s_vel_backward(m, p.gv);
        if ((want & RL_Q_BIT(RL_Q_LOGP)) && np > 0) {
            for (int64_t i = 0; !rc && i < np; i++) {
                int64_t b = p.w.pb[i], k = p.w.pk[i];
                float gl = p.w.gq[(b - r0) * N + k], lp;
                const float *xn = p.c.chain + (b * (N + 1) + k + 1) * D;
                const float *tn = p.c.times + b * (N + 1) + k + 1;
                rc = rl_flow_step_logprob(RL_FLOW_STEP_SDE, p.w.x + i * D, p.w.v + i * D, xn,
                                          &p.w.tt[i], tn, (double)p.c.noise[b], 1, D, &lp, &gl,
                                          p.w.gv + i * D);
            }
            if (!rc)
                s_vel_backward(m, p.w.gv);
        }
    }
    s_pass_free(&p);
    return rc;
}

/* ---- sampling ------------------------------------------------------------------------------------ */

static int s_sample(rl_model *mm, const rl_dataproto *in, const rl_model_sampling *sp,
                    rl_dataproto **out)
{
    s_fp *m = s_of(mm);
    const char *what = "flow_policy sample";
    s_obs ob;
    int rc = s_obs_read(m, in, what, &ob);
    if (rc)
        return rc;
    const int64_t B = ob.B, dn[1] = {B}, dx[2] = {B, m->D}, D = m->D, N = sp->num_steps;
    const rl_tensor *tin = NULL, *tns = NULL, *trs = NULL;
    if (rl_dataproto_tensor(in, RL_FP_INITIAL_NOISE)) {
        if (!(tin = s_need(in, what, RL_FP_INITIAL_NOISE, RL_F32, 2, dx)))
            return rl_error_code();
        if ((rc = s_check_finite(what, RL_FP_INITIAL_NOISE, rl_tensor_data((rl_tensor *)tin),
                                 B * D)))
            return rc;
    } else if (!(tns = s_need(in, what, RL_FP_NOISE_SEEDS, RL_I64, 1, dn))) {
        return rl_error_wrap(rl_error_code(), "(or %s (B, %lld) f32)", RL_FP_INITIAL_NOISE,
                             (long long)D);
    }
    if (!sp->greedy && !(trs = s_need(in, what, RL_FP_ROW_SEEDS, RL_I64, 1, dn)))
        return rl_error_code();
    if (N < 1 || N > 10000)
        return rl_error_set(RL_EINVAL, "%s: num_steps %lld outside [1, 10000]", what, (long long)N);
    double noise = sp->greedy ? 0.0 : sp->noise_level;
    if (!sp->greedy && !(noise > 0.0 && isfinite(noise)))
        return rl_error_set(RL_EINVAL, "%s: SDE sampling needs noise_level > 0, got %g (greedy "
                                       "sampling is the ODE)", what, sp->noise_level);
    rl_dataproto *o = rl_dataproto_new();
    int64_t sa[3] = {B, m->c.chunks, RL_FP_ACTION_DIM}, sc[3] = {B, N + 1, D}, st[2] = {B, N + 1};
    int64_t sq[2] = {B, N}, s1[1] = {B};
    rl_tensor *ta = o ? rl_dataproto_new_tensor(o, RL_FP_ACTION, RL_F32, 3, sa) : NULL;
    rl_tensor *ti = ta ? rl_dataproto_new_tensor(o, RL_FP_INITIAL_NOISE, RL_F32, 2, dx) : NULL;
    rl_tensor *tc = ti ? rl_dataproto_new_tensor(o, RL_FP_CHAIN, RL_F32, 3, sc) : NULL;
    rl_tensor *tt = tc ? rl_dataproto_new_tensor(o, RL_FP_TIMES, RL_F32, 2, st) : NULL;
    rl_tensor *tl = tt ? rl_dataproto_new_tensor(o, RL_FP_NOISE_LEVEL, RL_F32, 1, s1) : NULL;
    rl_tensor *tm = tl ? rl_dataproto_new_tensor(o, RL_FP_STEP_MASK, RL_F32, 2, sq) : NULL;
    rl_tensor *tq = tm ? rl_dataproto_new_tensor(o, RL_FP_SAMPLE_LOGP, RL_F32, 2, sq) : NULL;
    size_t bd = (size_t)(B > 0 ? B : 1) * (size_t)D, b1 = (size_t)(B > 0 ? B : 1);
    float *x = malloc(sizeof(float) * bd), *v = malloc(sizeof(float) * bd);
    float *xn = malloc(sizeof(float) * bd), *eps = malloc(sizeof(float) * (size_t)D);
    float *tg = malloc(sizeof(float) * b1);
    int64_t *pick = malloc(sizeof(int64_t) * b1);
    if (!tq || !x || !v || !xn || !eps || !tg || !pick) {
        rc = tq ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
        goto done;
    }
    float *A = rl_tensor_data(ta), *I = rl_tensor_data(ti), *CH = rl_tensor_data(tc);
    float *T = rl_tensor_data(tt), *NL = rl_tensor_data(tl), *SM = rl_tensor_data(tm);
    float *Q = rl_tensor_data(tq);
    const int64_t *rseed = trs ? rl_tensor_data((rl_tensor *)trs) : NULL;
    for (int64_t b = 0; b < B; b++) {
        if (tin) {
            memcpy(x + b * D, (const float *)rl_tensor_data((rl_tensor *)tin) + b * D,
                   sizeof(float) * (size_t)D);
        } else {
            rl_rng g;
            rl_rng_init(&g, (uint64_t)((const int64_t *)rl_tensor_data((rl_tensor *)tns))[b], 0);
            for (int64_t j = 0; j < D; j++)
                x[b * D + j] = rl_rng_normal(&g);
        }
        for (int64_t k = 0; k <= N; k++) /* the uniform grid t_k = 1 − k/N */
            T[b * (N + 1) + k] = k == N ? 0.0f : (float)(1.0 - (double)k / (double)N);
        NL[b] = (float)noise;
        pick[b] = -1;
        if (rseed && !m->c.sde_joint) { /* sde_mode one: the step from the row seed's stream 0 */
            rl_rng g;
            rl_rng_init(&g, (uint64_t)rseed[b], 0);
            pick[b] = (int64_t)rl_rng_below(&g, (uint64_t)N);
        }
    }
    if (B > 0)
        memcpy(I, x, sizeof(float) * (size_t)(B * D));
    for (int64_t k = 0; k < N && B > 0 && !rc; k++) {
        for (int64_t b = 0; b < B; b++) {
            memcpy(CH + (b * (N + 1) + k) * D, x + b * D, sizeof(float) * (size_t)D);
            tg[b] = T[b * (N + 1) + k];
        }
        if ((rc = s_vel_forward(m, &ob, B, 0, NULL, x, tg, v)))
            break;
        for (int64_t b = 0; b < B && !rc; b++) {
            const float *t0 = &T[b * (N + 1) + k], *t1 = t0 + 1;
            int sde = !sp->greedy && (m->c.sde_joint || pick[b] == k);
            float lp = 0.0f;
            if (sde) {
                rl_rng g;
                rl_rng_init(&g, (uint64_t)rseed[b], (uint64_t)k + 1);
                for (int64_t j = 0; j < D; j++)
                    eps[j] = rl_rng_normal(&g);
                rc = rl_flow_step_sample(RL_FLOW_STEP_SDE, x + b * D, v + b * D, t0, t1, noise,
                                         eps, 1, D, xn + b * D, &lp);
            } else {
                rc = rl_flow_step_sample(RL_FLOW_STEP_ODE, x + b * D, v + b * D, t0, t1, 0.0,
                                         NULL, 1, D, xn + b * D, NULL);
            }
            SM[b * N + k] = sde ? 1.0f : 0.0f;
            Q[b * N + k] = lp;
        }
        float *sw = x;
        x = xn;
        xn = sw;
    }
    for (int64_t b = 0; !rc && b < B; b++) {
        memcpy(CH + (b * (N + 1) + N) * D, x + b * D, sizeof(float) * (size_t)D);
        memcpy(A + b * D, x + b * D, sizeof(float) * (size_t)D);
    }
done:
    free(x);
    free(v);
    free(xn);
    free(eps);
    free(tg);
    free(pick);
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
    s_fp *m = s_of(mm);
    rl_param_manifest_free(m->man);
    rl_param_buffer_free(m->params);
    rl_param_buffer_free(m->grads);
    rl_flow_mlp_free(&m->t);
    s_enc_free(&m->ev);
    s_enc_free(&m->vv);
    free(m);
}

static const rl_param_manifest *s_manifest(const rl_model *m) { return ((const s_fp *)m)->man; }
static float *s_params(rl_model *m) { return s_of(m)->params; }
static float *s_grads(rl_model *m) { return s_of(m)->grads; }

/* Linear weights N(0, 1/fan_in), biases 0, the task table N(0, 1),
 * obs_norm the identity (mean 0, std 1). */
static int s_init_random(rl_model *mm, uint64_t seed)
{
    s_fp *m = s_of(mm);
    for (int i = 0; i < m->man->count; i++) {
        const rl_param_view *v = &m->man->views[i];
        float *p = m->params + v->offset;
        if (v->ndim == 1) {
            float fill = v->offset == m->std ? 1.0f : 0.0f;
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
    return RL_OK;
}

static int s_write_config(const rl_model *mm, const char *path)
{
    const rl_flow_policy_config *c = &((const s_fp *)mm)->c;
    char text[512];
    snprintf(text, sizeof text,
             "{\"model\": {\"type\": \"flow_policy\", \"num_action_chunks\": %d, "
             "\"num_tasks\": %d, \"hidden_size\": %d, \"num_layers\": %d, "
             "\"time_embed_dim\": %d, \"sde_mode\": \"%s\", \"obs_clip\": %.17g, "
             "\"detach_critic_input\": %s}}\n",
             c->chunks, c->num_tasks, c->hidden, c->layers, c->time_dim,
             c->sde_joint ? "joint" : "one", c->obs_clip, c->detach_critic ? "true" : "false");
    return rl_file_write_atomic(path, text, strlen(text));
}

static const rl_model_ops s_ops = {
    .kind = "flow_policy",
    .free = s_free,
    .manifest = s_manifest,
    .params = s_params,
    .grads = s_grads,
    .init_random = s_init_random,
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
    .write_config = s_write_config,
};

/* The architecture from the kind's section (common/schema/flow_policy.h). */
static int s_read_config(const rl_config *job, rl_flow_policy_config *c)
{
    const rl_model_flow_policy_config *v = rl_config_section_get(job, &rl_model_flow_policy_section);
    if (!v)
        return rl_error_code();
    *c = (rl_flow_policy_config){(int)v->num_action_chunks, (int)v->num_tasks, (int)v->hidden_size,
                                 (int)v->num_layers, (int)v->time_embed_dim, v->sde_mode, v->obs_clip,
                                 v->detach_critic_input};
    return RL_OK;
}

static int s_check_config(const rl_config *job)
{
    rl_flow_policy_config c;
    return s_read_config(job, &c);
}

static int s_add(rl_param_manifest *man, const char *name, int nd, int64_t d0, int64_t d1,
                 int64_t *off)
{
    int64_t shp[2] = {d0, d1};
    int ix = rl_param_manifest_add(man, name, nd, shp);
    if (ix < 0)
        return ix;
    *off = man->views[ix].offset;
    return RL_OK;
}

/* obs_norm.{mean,std}, obs_enc.{0,1}, task.embedding, the trunk (in, time,
 * blocks, out), value_head. */
static int s_build_manifest(s_fp *m)
{
    const rl_flow_policy_config *c = &m->c;
    const int64_t H = c->hidden;
    rl_param_manifest *man = m->man = rl_param_manifest_new();
    if (!man)
        return rl_error_set(RL_ENOMEM, "flow_policy: out of memory");
    int rc = rl_flow_mlp_init(&m->t, (int)m->D, c->hidden, c->layers, c->time_dim, "flow_policy");
    if (rc || (rc = s_add(man, "obs_norm.mean", 1, S_OBS, 0, &m->mean)) ||
        (rc = s_add(man, "obs_norm.std", 1, S_OBS, 0, &m->std)) ||
        (rc = s_add(man, "obs_enc.0.weight", 2, H, S_OBS, &m->e0w)) ||
        (rc = s_add(man, "obs_enc.0.bias", 1, H, 0, &m->e0b)) ||
        (rc = s_add(man, "obs_enc.1.weight", 2, H, H, &m->e1w)) ||
        (rc = s_add(man, "obs_enc.1.bias", 1, H, 0, &m->e1b)) ||
        (rc = s_add(man, "task.embedding", 2, c->num_tasks, H, &m->emb)) ||
        (rc = rl_flow_mlp_add_head(&m->t, man)) || (rc = rl_flow_mlp_add_tail(&m->t, man)) ||
        (rc = s_add(man, "value_head.weight", 2, 1, H, &m->vw)) ||
        (rc = s_add(man, "value_head.bias", 1, 1, 0, &m->vb)))
        return rc;
    m->params = rl_param_buffer_new(man->total);
    m->grads = rl_param_buffer_new(man->total);
    if (!m->params || !m->grads)
        return rl_error_set(RL_ENOMEM, "flow_policy: out of memory for %lld parameters",
                            (long long)man->total);
    for (int j = 0; j < S_OBS; j++) /* a usable model before init: identity normalisation */
        m->params[m->std + j] = 1.0f;
    return RL_OK;
}

static rl_model *s_from_config(const rl_config *job)
{
    rl_flow_policy_config c;
    if (s_read_config(job, &c))
        return NULL;
    s_fp *m = calloc(1, sizeof *m);
    if (!m) {
        rl_error_set(RL_ENOMEM, "flow_policy: out of memory");
        return NULL;
    }
    m->base.ops = &s_ops;
    m->c = c;
    m->D = rl_flow_policy_dim(&c);
    if (s_build_manifest(m)) {
        s_free(&m->base);
        return NULL;
    }
    return &m->base;
}

const rl_model_kind rl_model_kind_flow_policy = {
    .name = "flow_policy",
    .sections = (const rl_config_section *const[]){&rl_model_base_section, &rl_model_flow_policy_section,
                                                    NULL},
    .from_config = s_from_config,
    .check_config = s_check_config,
};
